"""Plain-text listings for people, at the terminal's width: ``actaudit list``, ``actaudit
formats`` and ``actaudit clip``.  Records rather than wide tables, so that nothing a user
types (a candidate id, a format name) is ever cut or broken, at 80 columns and up."""

from __future__ import annotations

import unicodedata

from audit.io import format_number


def columns(text: str) -> int:
    """The columns a terminal gives the text: wide (CJK) characters take two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _wrap(text: str, width: int, indent: str) -> list[str]:
    """Words filled to ``width`` terminal columns (wide characters count twice), never broken."""
    width = max(30, width)
    lines: list[str] = []
    line = ""
    for word in text.split():
        cand = f"{line} {word}" if line else indent + word
        if line and columns(cand) > width:
            lines.append(line)
            cand = indent + word
        line = cand
    if line:
        lines.append(line)
    return lines or [indent.rstrip()]


def candidates_text(cands, width: int = 80) -> str:
    """One record per candidate: id, reference and parameters; its formula; its source."""
    out = [f"{len(cands)} candidates (family.variant; --json for tools)", ""]
    for c in cands:
        ps = ", ".join(f"{k}={format_number(v, 6)}" for k, v in c.params.items())
        out.append(f"{c.id}  [{c.reference}]" + (f"  {ps}" if ps else ""))
        out += _wrap(c.formula, width, "    ")
        out += _wrap(f"source: {c.source}", width, "    ")
    return "\n".join(out) + "\n"


FORMAT_COLS = [
    ("name", "<"),
    ("bits", ">"),
    ("p", ">"),
    ("emin", ">"),
    ("emax", ">"),
    ("max finite", ">"),
    ("min subnormal", ">"),
    ("beyond max", "<"),
]


def formats_text(formats, width: int = 80) -> str:
    """A table of the formats' parameters (10 columns wide at most 80), aliases below."""
    rows = []
    for f in formats:
        d = f.to_dict()
        rows.append(
            [
                f.name,
                str(f.bits),
                str(f.p),
                str(f.emin),
                str(f.emax),
                format_number(f.max_finite, 6),
                format_number(f.smallest_subnormal, 4) if f.p > 1 else "-",
                {"inf": "inf", "NaN": "NaN"}.get(d["overflow"], "max (sat.)"),
            ]
        )
    heads = [h for h, _ in FORMAT_COLS]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(heads)]

    def line(cells):
        return "  ".join(
            c.ljust(w) if a == "<" else c.rjust(w) for c, w, (_, a) in zip(cells, widths, FORMAT_COLS)
        ).rstrip()

    out = [line(heads)] + [line(r) for r in rows] + [""]
    for f in formats:
        out += _wrap(f"{f.name}: also {', '.join(f.aliases)}", width, "")
    return "\n".join(out) + "\n"


def clip_text(results, width: int = 80, label=lambda r: "") -> str:
    """One record per result: the recommended clip range, what happens beyond each side,
    the tolerance and the error left inside, the saturation thresholds, the note."""
    out = []
    for r in results:
        c, s = r.clip, r.saturation
        tol = c["tolerance"]
        tol_s = " or ".join(
            x
            for x in (
                (f"{format_number(tol['max_ulp'])} ULP" if tol["max_ulp"] is not None else ""),
                (f"{format_number(tol['atol'])} absolute" if tol["atol"] is not None else ""),
            )
            if x
        )
        if out:
            out.append("")
        out.append(f"{r.candidate}{label(r)}: {r.dtype} storage, {r.compute} compute")
        for side, word in (("lo", "low side"), ("hi", "high side")):
            b, act = c[side], c[side + "_action"]
            at = "" if b is None else format_number(b, 6)
            cmp_ = ">=" if side == "lo" else "<="
            past = "below" if side == "lo" else "above"
            text = {
                "clamp": f"clamp x to {cmp_} {at}",
                "identity": f"return x {past} {at} (f(x) = x there)",
                "constant": f"return f's limit {past} {at}",
            }.get(act, "no clip")
            out += _wrap(f"{word}: {text}", width, "  ")
        out += _wrap(
            f"tolerance {tol_s}; max ULP inside the range {format_number(c['max_ulp_inside'])}", width, "  "
        )
        sat = "; ".join(
            f"{k} "
            + (
                "none"
                if v is None
                else f"from x = {format_number(v['x'], 6)} f = "
                f"{v['value'] if isinstance(v['value'], str) else format_number(v['value'])}"
            )
            for k, v in (("low", s["low"]), ("high", s["high"]))
        )
        out += _wrap(f"saturation: {sat}", width, "  ")
        if c["note"]:
            out += _wrap(f"note: {c['note']}", width, "  ")
    return "\n".join(out) + ("\n" if out else "")
