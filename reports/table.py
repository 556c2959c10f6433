"""The sweep summary for people and tools: a compact table, a wide table, Markdown, CSV.

* ``compact`` (the default of ``actaudit sweep``): one block per evaluation path, whose
  title says the path in words ("fp16 storage, every operation rounded to fp16"); per
  candidate one line of well-chosen columns (max ULP, where, p99, mean, CR %, NaN, inf)
  and its findings on their own indented line; a legend of the abbreviations used.  It
  fits the terminal's width (80 columns and up) without cutting any cell: narrower
  terminals move the worst input, then the candidate's name, onto their own lines.
* ``wide`` (``--wide``): every column in one table, as wide as it needs.
* ``markdown``: every column, a GitHub table (pull-request comments, CI summaries).
* ``csv``: one row per result, full-precision numbers (not per input: that is ``--csv``).

Plain text (no rich) so that it is fast to import and identical on every terminal.
"""

from __future__ import annotations

import csv
import io
import textwrap

import numpy as np

from .cells import md_text, num, percent  # noqa: F401  (every table's cells, here too)

SHORT = {
    "nan": "nan",
    "overflow": "ovf",
    "underflow": "unf",
    "sign": "sign",
    "range": "range",
    "monotonicity": "mono",
    "special": "spec",
}

# legend entries, in the order they are listed; each shown only when its abbreviation appears
LEGEND = [
    ("~", "sampled (a lower bound)"),
    ("CR %", "correctly rounded"),
    ("nan", "NaN"),
    ("ovf", "overflow"),
    ("miss", "finite where the exact value overflows"),
    ("unf", "flushed to 0"),
    ("sign", "wrong sign"),
    ("range", "out of range"),
    ("mono", "monotonicity breaks"),
    ("spec", "wrong at +-inf/NaN"),
    ("hidden", "intermediate overflow"),
]


GAP = "  "


def findings_summary(r) -> str:
    parts = [f"{SHORT.get(f.kind, f.kind)} {f.count}" for f in r.findings]
    if r.hidden:
        parts.append(f"hidden {len(r.hidden)}")
    if not any(f.kind == "special" for f in r.findings) and r.special_failures:
        parts.append(f"spec {r.special_failures}")
    return ", ".join(parts)


def sem_label(r) -> str:
    """The machine semantics of a result ('' for ieee), e.g. ' [ftz,daz]'."""
    if getattr(r, "semantics", None) is None:
        return ""
    from audit.targets import semantics as semantics_mod

    return f" [{semantics_mod.label(r.semantics, r.stochastic)}]"


def path_title(dtype: str, compute: str, sem: str = "") -> str:
    """The evaluation path in words (``sem``: the machine semantics, when not ieee)."""
    if sem:
        return path_title(dtype, compute) + f"; semantics{sem}"
    if "->" in dtype:  # --out-dtype: inputs in one format, results in another
        src, dst = dtype.split("->", 1)
        if compute == "native":
            return f"{src} inputs, {dst} outputs, native compute"
        return (
            f"{src} inputs, {dst} outputs, {compute} compute (operations in {compute}, the result "
            f"rounded to {dst})"
        )
    if compute == "native":
        return f"{dtype} storage, native compute (the function's own arithmetic)"
    if compute == dtype:
        return f"{dtype} storage, every operation rounded to {dtype}"
    return f"{dtype} storage, {compute} compute (operations in {compute}, the result rounded to {dtype})"


def name(r) -> str:
    from audit.targets.candidates import catalog

    defaults = catalog()[r.candidate].params if r.candidate in catalog() else {}
    return r.candidate + "".join(f" {k}={num(v, 6)}" for k, v in r.params.items() if v != defaults.get(k))


def where(r, digits: int = 6, bits: bool = True) -> str:
    w = r.worst
    if not w:
        return "-"
    if "b" in w:
        return f"a={num(w['x'])}, b={num(w['b'])}"
    from audit.io import format_number

    x = format_number(w["x"], digits)
    return f"{x} ({w['x_hex']})" if bits else x


def inputs(r) -> str:
    d = r.domain
    return f"{d.count}" + ("" if d.exhaustive else "~")


# --------------------------------------------------------------------------- compact

COMPACT = [
    ("candidate", "<"),
    ("max ULP", ">"),
    ("at x", ">"),
    ("p99", ">"),
    ("mean", ">"),
    ("CR %", ">"),
    ("NaN", ">"),
    ("inf", ">"),
]
OVF = ("miss", ">")  # a column only where some result has overflow misses


def _compact_row(r, ovf: bool = False) -> list[str]:
    return [
        name(r),
        num(r.max_ulp),
        where(r, 6, bits=False),
        num(r.p99_ulp),
        num(r.mean_ulp),
        percent(r.correctly_rounded_fraction),
        str(r.nan_count),
        str(r.inf_count),
    ] + ([str(r.overflow_miss_count)] if ovf else [])


def extent(r) -> str:
    """' in [a, b]' where a univariate domain is narrower than its format (--range); ''."""
    d = r.domain
    if d.values2 is not None or d.axis is not None or not d.count:
        return ""
    if d.values is not None:
        v = d.values[np.isfinite(d.values)]
        if not len(v):
            return ""
        a, b = float(v.min()), float(v.max())
    else:
        a, b = (float(x) for x in d.fmt.from_ordinal(np.array([d.lo_ord, d.hi_ord])))
    m = d.fmt.max_finite
    if a <= -m and b >= m:
        return ""
    from audit.io import format_number

    return f" in [{format_number(a, 6)},{format_number(b, 6)}]"  # one word: never wrapped


def _groups(results):
    groups: dict = {}
    for r in results:
        key = (
            getattr(r, "formats_label", r.dtype),
            r.compute,
            r.domain.count,
            r.domain.exhaustive,
            sem_label(r),
            extent(r),
        )
        groups.setdefault(key, []).append(r)
    return groups


def _line(cells, widths, aligns) -> str:
    parts = [c.ljust(w) if a == "<" else c.rjust(w) for c, w, a in zip(cells, widths, aligns)]
    return GAP.join(parts).rstrip()


def _wrap(text: str, width: int, indent: str) -> list[str]:
    return textwrap.wrap(
        text,
        width=max(20, width),
        initial_indent=indent,
        subsequent_indent=indent + "  ",
        break_on_hyphens=False,
        break_long_words=False,
    ) or [indent.rstrip()]


def compact(results, width: int = 80) -> str:
    """The default table: fits ``width`` columns, no cell cut."""
    from . import weighted

    out: list[str] = []
    used: set[str] = {"CR %"}
    for (dtype, compute, count, exhaustive, sem, ext), rs in _groups(results).items():
        n = (f"all {count:,} finite inputs" if exhaustive else f"{count:,} sampled inputs (~)") + ext
        if not exhaustive:
            used.add("~")
        if out:
            out.append("")
        out += _wrap(f"{path_title(dtype, compute, sem)}; {n}", width, "")
        ovf = any(r.overflow_miss_count for r in rs)
        if ovf:
            used.add("miss")
        cols = COMPACT + ([OVF] if ovf else [])
        heads = [h for h, _ in cols]
        aligns = [a for _, a in cols]
        rows = [_compact_row(r, ovf) for r in rs]
        widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(heads)]
        # what does not fit moves onto its own line: first the worst input, then the name
        drop_x = sum(widths) + len(GAP) * (len(widths) - 1) > width
        if drop_x:
            heads, aligns = heads[:2] + heads[3:], aligns[:2] + aligns[3:]
            xs = [row[2] for row in rows]
            rows = [row[:2] + row[3:] for row in rows]
            widths = widths[:2] + widths[3:]
        name_alone = sum(widths) + len(GAP) * (len(widths) - 1) > width
        if name_alone:
            names = [row[0] for row in rows]
            widths[0] = (
                len(heads[0]) if sum(widths[1:]) + len(GAP) * len(widths[1:]) + len(heads[0]) <= width else 0
            )
            rows = [[""] + row[1:] for row in rows]
        out.append(_line(heads, widths, aligns))
        for i, (r, row) in enumerate(zip(rs, rows)):
            if name_alone:
                out.append(names[i])
            out.append(_line(row, widths, aligns))
            extra = []
            if drop_x:
                extra.append(f"worst at x = {xs[i]}")
            f = findings_summary(r)
            if f:
                extra.append(f)
                used.update(p.split(" ")[0] for p in f.split(", "))
            if extra:
                out += _wrap("; ".join(extra), width, "    ")
            if weighted.line(r):  # figures weighted by --distribution (reports/weighted.py)
                out += _wrap(weighted.line(r), width, "    ")
    out.append("")
    out += _wrap(legend(used), width, "")
    for note in _sem_notes(results):
        out += _wrap(note, width, "")
    for note in engine_notes(results):
        out += _wrap(note, width, "  ")
    return "\n".join(out) + "\n"


def engine_notes(results) -> list[str]:
    """One line per external result: what it is bound to (an engine's name, version,
    precision and dispatch; a C kernel's compiler, flags and source digest).  Results are
    told apart by their whole identity, never by their name alone."""
    import json

    seen, out = set(), []
    for r in results:
        ident = getattr(r, "identity", None)
        if not ident:
            continue
        k = (r.candidate, json.dumps(ident, sort_keys=True, default=repr))
        if k in seen:
            continue
        seen.add(k)
        if "kernel_digest" in ident:  # a C kernel (audit/targets/ckernels.py)
            flags = " ".join(ident.get("cflags") or []) or "no flags"
            out.append(
                f"{r.candidate}: C kernel compiled by {ident.get('compiler')} with {flags}, "
                f"source and headers sha256:{str(ident.get('kernel_digest'))[:16]}"
            )
        elif "engine" in ident:
            out.append(
                f"{r.candidate}: {ident.get('engine')} {ident.get('version')}, {ident.get('dtype')} "
                f"as {ident.get('precision')}, dispatch {ident.get('dispatch')}"
            )
    return out


def _sem_notes(results) -> list[str]:
    """What a semantics run adds to read the table: envelopes, changes against ieee."""
    if not any(getattr(r, "semantics", None) is not None for r in results):
        return []
    from audit.targets import semantics as semantics_mod

    return semantics_mod.table_notes(results)


def legend(used: set[str]) -> str:
    """The abbreviations that appear, explained; then where to read more."""
    items = [f"{k} {v}" for k, v in LEGEND if k in used]
    return ", ".join(items) + " (--findings: where, why)"


# --------------------------------------------------------------------------- wide, markdown, csv

WIDE = [
    ("candidate", "<"),
    ("dtype", "<"),
    ("compute", "<"),
    ("inputs", ">"),
    ("max ULP", ">"),
    ("at x (bits)", "<"),
    ("mean", ">"),
    ("p99", ">"),
    ("max abs", ">"),
    ("max rel", ">"),
    ("ULP dist", ">"),
    ("CR %", ">"),
    ("NaN", ">"),
    ("inf", ">"),
    ("miss", ">"),
    ("findings", "<"),
]


def _wide_row(r) -> list[str]:
    return [
        name(r) + sem_label(r),
        getattr(r, "formats_label", r.dtype),
        r.compute,
        inputs(r),
        num(r.max_ulp),
        where(r),
        num(r.mean_ulp),
        num(r.p99_ulp),
        num(r.max_abs),
        num(r.max_rel),
        str(r.max_ulp_distance),
        percent(r.correctly_rounded_fraction),
        str(r.nan_count),
        str(r.inf_count),
        str(r.overflow_miss_count),
        findings_summary(r) or "-",
    ]


def wide(results, title: str = "actaudit sweep") -> str:
    from . import weighted

    cols = WIDE + (weighted.WIDE if weighted.any_weighted(results) else [])
    heads = [h for h, _ in cols]
    aligns = [a for _, a in cols]
    rows = [_wide_row(r) for r in results]
    if weighted.any_weighted(results):  # (findings stay the last cell)
        rows = [row[:-1] + weighted.wide_cells(r) + row[-1:] for r, row in zip(results, rows)]
        heads = heads[: len(WIDE) - 1] + heads[len(WIDE) :] + heads[len(WIDE) - 1 : len(WIDE)]
        aligns = aligns[: len(WIDE) - 1] + aligns[len(WIDE) :] + aligns[len(WIDE) - 1 : len(WIDE)]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(heads)]
    used = {"CR %"} | {p.split(" ")[0] for row in rows for p in row[-1].split(", ")}
    if any(not r.domain.exhaustive for r in results):
        used.add("~")
    lines = [f"{title} (compute: every operation rounded to that format; native: the function's own)"]
    lines += [_line(heads, widths, aligns)]
    lines += [_line(row, widths, aligns) for row in rows]
    lines += ["", legend(used)] + _sem_notes(results)
    if weighted.any_weighted(results):
        lines.append("w: weighted by the input distribution " + results[0].weighted["distribution"])
    return "\n".join(lines) + "\n"


def markdown(results, title: str = "actaudit sweep") -> str:
    heads = [h for h, _ in WIDE]
    align = {"<": ":---", ">": "---:"}
    lines = [
        f"**{title}** (compute: every operation rounded to that format; native: the "
        "function's own arithmetic)",
        "",
        "| " + " | ".join(heads) + " |",
        "|" + "|".join(align[a] for _, a in WIDE) + "|",
    ]
    for r in results:
        lines.append("| " + " | ".join(md_text(c) for c in _wide_row(r)) + " |")
    used = {"CR %"} | {p.split(" ")[0] for r in results for p in findings_summary(r).split(", ") if p}
    return "\n".join(lines) + "\n\n" + legend(used) + "\n"


CSV_FIELDS = [
    "candidate",
    "reference",
    "dtype",
    "compute",
    "semantics",
    "params",
    "inputs",
    "exhaustive",
    "max_ulp",
    "worst_x",
    "worst_x_hex",
    "mean_ulp",
    "p99_ulp",
    "max_abs",
    "max_rel",
    "max_ulp_distance",
    "correctly_rounded_fraction",
    "nan_count",
    "inf_count",
    "overflow_miss_count",
    "special_failures",
    "findings",
]


def csv_text(results) -> str:
    """One row per result; numbers as repr (round-trip exact), NaN and inf as nan, inf."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    for r in results:
        wst = r.worst or {}
        params = ";".join(f"{k}={v!r}" for k, v in r.params.items())
        w.writerow(
            [
                r.candidate,
                r.reference,
                r.dtype,
                r.compute,
                sem_label(r).strip(" []") or "ieee",
                params,
                r.domain.count,
                r.domain.exhaustive,
                repr(float(r.max_ulp)),
                repr(wst.get("x")) if wst else "",
                wst.get("x_hex", ""),
                repr(float(r.mean_ulp)),
                repr(float(r.p99_ulp)),
                repr(float(r.max_abs)),
                repr(float(r.max_rel)),
                r.max_ulp_distance,
                repr(float(r.correctly_rounded_fraction)),
                r.nan_count,
                r.inf_count,
                r.overflow_miss_count,
                r.special_failures,
                findings_summary(r),
            ]
        )
    return buf.getvalue()


FORMATS = ("table", "markdown", "csv", "json")


# --------------------------------------------------------------------------- findings


def findings_text(results, width: int = 80) -> str:
    """``--findings``: per result, each finding (kind, count, first intervals) and its cause,
    then hidden overflows and lossy constants; wrapped at ``width``."""
    from audit.io import format_number

    out: list[str] = []
    for r in results:
        if not (r.findings or r.hidden):
            continue
        out += _wrap(
            f"{name(r)}: {path_title(getattr(r, 'formats_label', r.dtype), r.compute, sem_label(r))}",
            width,
            "",
        )
        for f in r.findings:
            iv = ", ".join(f"[{format_number(a, 6)}, {format_number(b, 6)}]" for a, b in f.intervals[:4])
            more = f" (+{f.intervals_total - 4} more)" if f.intervals_total > 4 else ""
            out += _wrap(
                f"{f.kind} {f.count} input{'' if f.count == 1 else 's'}: {iv or f.note}{more}", width, "  "
            )
            if f.cause:
                out += _wrap(f"cause: {f.cause['text']}", width, "      ")
        for h in r.hidden:
            out += _wrap(f"{h['kind']}: {h['text']}", width, "  ")
    return "\n".join(out) + ("\n" if out else "")
