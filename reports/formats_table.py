"""The sweep summary of quantized (int8/uint8/int16) and block-scaled (MX, NVFP4) outputs,
in the shapes of reports/table.py: ``compact`` (the default, fits the terminal from 80
columns up without cutting a cell), ``wide`` (every column), ``markdown``, ``csv``.

Plain text, no rich.  Numbers in compact tables have 3 significant digits (table.num);
wide, Markdown and CSV give more (CSV: repr, round-trip exact).
"""

from __future__ import annotations

import csv
import io

from audit.io import format_number
from audit.measure import blocks as blocks_mod
from audit.measure import quant as quant_mod

from .cells import md_text, num, percent
from .table import GAP, _line, _wrap


def _pct(frac: float) -> str:
    """Truncated, as every table's percent: 100.00 only when every code is correct."""
    return percent(frac)


def _fit(heads, aligns, rows, extras, width) -> list[str]:
    """Lines of a table that fits ``width``: where it does not, the candidate's name (column
    0) goes on its own line above its row; ``extras`` (per row, may be empty) are wrapped on
    an indented line below it."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(heads)]
    alone = sum(widths) + len(GAP) * (len(widths) - 1) > width
    names = [r[0] for r in rows]
    if alone:
        rest = sum(widths[1:]) + len(GAP) * len(widths[1:])
        widths[0] = len(heads[0]) if rest + len(heads[0]) <= width else 0
        rows = [[""] + r[1:] for r in rows]
    out = [_line(heads if widths[0] else [""] + heads[1:], widths, aligns)]
    for name, row, extra in zip(names, rows, extras):
        if alone:
            out.append(name)
        out.append(_line(row, widths, aligns))
        if extra:
            out += _wrap(extra, width, "    ")
    return out


# ------------------------------------------------------------------ quantized
Q_COMPACT = [
    ("candidate", "<"),
    ("max code", ">"),
    ("mean", ">"),
    ("max real", ">"),
    ("correct %", ">"),
    ("NaN", ">"),
]
Q_LEGEND = (
    "code: error in output codes, |q - clamp(f(x)/s + z)| (a correct code has at most "
    "1/2); real: code error x s; correct %: codes equal to the correctly quantized code "
    "(every input code swept: exact figures; --findings: where, why)"
)


def _q_findings(r) -> str:
    return ", ".join(f"{f['kind']} {f['count']}" for f in r.findings)


def _q_where(r) -> str:
    w = r.worst
    return (
        "-" if not w else f"{format_number(w['x'], 6)} (code {w['x_code']}: got {w['got']}, want {w['want']})"
    )


def _groups(results, key):
    groups: dict = {}
    for r in results:
        groups.setdefault(key(r), []).append(r)
    return groups


def quant_compact(results, width: int = 80) -> str:
    out: list[str] = []
    for (dt, odt, cp, n), rs in _groups(
        results, lambda r: (r.dtype, r.out_dtype, r.compute, r.count)
    ).items():
        if out:
            out.append("")
        what = "input codes" if rs[0].in_hex is None else "finite inputs (one zero)"
        out += _wrap(f"{dt} -> {odt}, {cp} compute; all {n:,} {what}", width, "")
        rows = [
            [
                r.candidate,
                num(r.max_code_err),
                num(r.mean_code_err),
                num(r.max_real_err),
                _pct(r.correct_fraction),
                str(r.nan_count),
            ]
            for r in rs
        ]
        extras = ["; ".join(p for p in (f"worst at x = {_q_where(r)}", _q_findings(r)) if p) for r in rs]
        out += _fit([h for h, _ in Q_COMPACT], [a for _, a in Q_COMPACT], rows, extras, width)
    out.append("")
    out += _wrap(Q_LEGEND, width, "")
    return "\n".join(out) + "\n"


def quant_findings(results, width: int = 80) -> str:
    """``--findings``: per result, each finding (kind, count, first intervals, what it means)."""
    out: list[str] = []
    for r in results:
        for f in r.findings:
            iv = ", ".join(f"[{format_number(a, 6)}, {format_number(b, 6)}]" for a, b in f["intervals"][:4])
            more = f" (+{f['intervals_total'] - 4} more)" if f["intervals_total"] > 4 else ""
            out += _wrap(
                f"{r.candidate} {r.out_dtype}: {f['kind']} {f['count']} inputs {iv}{more}; {f['note']}",
                width,
                "",
            )
    return "\n".join(out) + ("\n" if out else "")


Q_WIDE = [
    ("candidate", "<"),
    ("in", "<"),
    ("out", "<"),
    ("compute", "<"),
    ("inputs", ">"),
    ("max code err", ">"),
    ("at x (code)", "<"),
    ("mean", ">"),
    ("max real err", ">"),
    ("max code dist", ">"),
    ("correct %", ">"),
    ("NaN", ">"),
    ("findings", "<"),
]


def _q_wide_row(r) -> list[str]:
    w = r.worst or {}
    return [
        r.candidate,
        r.dtype,
        r.out_dtype,
        r.compute,
        str(r.count),
        format_number(r.max_code_err),
        f"{format_number(w['x'], 6)} ({w['x_code']})" if w else "-",
        format_number(r.mean_code_err),
        format_number(r.max_real_err),
        str(r.max_code_distance),
        _pct(r.correct_fraction),
        str(r.nan_count),
        _q_findings(r) or "-",
    ]


# ------------------------------------------------------------------ block-scaled
B_COMPACT = [
    ("candidate", "<"),
    ("max ULP", ">"),
    ("mean", ">"),
    ("cost", ">"),
    ("added", ">"),
    ("elem diff", ">"),
    ("scale diff", ">"),
    ("NaN", ">"),
]
B_LEGEND = (
    "ULP: element error in element ULP at the reference's scale; cost: the same of the "
    "exact function quantized by the same rule (the format's cost); added: candidate "
    "elements' distance from those; elem diff: elements differing; scale diff: blocks "
    "whose scale (NVFP4: or tensor scale) differs from the reference's"
)


def _b_worst(r) -> str:
    w = r.worst_block
    if not w:
        return "-"
    where = (
        f"block {w['index']}"
        if "index" in w
        else f"x = {format_number(w['x'], 6)} ({w['x_hex']}) with m = {format_number(w['pair_input'], 6)}"
    )
    return (
        f"{where}: {format_number(w['max_elem_ulp'], 4)} ULP, scale "
        f"{format_number(w['scale_candidate'], 6)} (reference {format_number(w['scale_ref'], 6)})"
    )


def block_compact(results, width: int = 80) -> str:
    out: list[str] = []

    def key(r):
        return (r.dtype, r.out_dtype, r.rule, r.compute, r.inputs, r.elements, r.blocks)

    for (dt, odt, rule, cp, inp, n, nb), rs in _groups(results, key).items():
        if out:
            out.append("")
        exh = inp.startswith("exhaustive")
        what = (
            f"{inp} (bounds)"
            if exh
            else f"{n:,} elements in {nb:,} blocks from {inp} (sampled: lower bounds)"
        )
        out += _wrap(f"{dt} -> {odt} ({rule} scale rule), {cp} compute; {what}", width, "")
        rows = [
            [
                r.candidate,
                num(r.max_elem_ulp),
                num(r.mean_elem_ulp),
                num(r.ref_max_elem_ulp),
                num(r.max_added_ulp),
                str(r.mismatches),
                f"{r.scale_diff_blocks}/{r.blocks}",
                str(r.nan_elements),
            ]
            for r in rs
        ]
        extras = [f"worst {_b_worst(r)}" for r in rs]
        out += _fit([h for h, _ in B_COMPACT], [a for _, a in B_COMPACT], rows, extras, width)
    out.append("")
    out += _wrap(B_LEGEND, width, "")
    return "\n".join(out) + "\n"


B_WIDE = [
    ("candidate", "<"),
    ("in", "<"),
    ("out", "<"),
    ("rule", "<"),
    ("compute", "<"),
    ("inputs", "<"),
    ("elements", ">"),
    ("max elem ULP", ">"),
    ("mean", ">"),
    ("quant. cost", ">"),
    ("added ULP", ">"),
    ("max rel", ">"),
    ("elems differing", ">"),
    ("blocks scale differs", ">"),
    ("NaN", ">"),
    ("worst block", "<"),
]


def _b_wide_row(r) -> list[str]:
    return [
        r.candidate,
        r.dtype,
        r.out_dtype,
        r.rule,
        r.compute,
        r.inputs,
        str(r.elements),
        format_number(r.max_elem_ulp),
        format_number(r.mean_elem_ulp),
        format_number(r.ref_max_elem_ulp),
        format_number(r.max_added_ulp),
        format_number(r.max_rel),
        str(r.mismatches),
        f"{r.scale_diff_blocks} of {r.blocks}",
        str(r.nan_elements),
        _b_worst(r),
    ]


# ------------------------------------------------------------------ dispatch
def _kind(results):
    if all(isinstance(r, quant_mod.QuantResult) for r in results):
        return Q_WIDE, _q_wide_row, Q_LEGEND, "actaudit sweep (quantized)"
    if all(isinstance(r, blocks_mod.BlockResult) for r in results):
        return B_WIDE, _b_wide_row, B_LEGEND, "actaudit sweep (block-scaled)"
    raise TypeError("results of one kind: all quantized or all block-scaled")


def compact(results, width: int = 80) -> str:
    if all(isinstance(r, quant_mod.QuantResult) for r in results):
        return quant_compact(results, width)
    return block_compact(results, width)


def wide(results) -> str:
    cols, row, leg, title = _kind(results)
    rows = [row(r) for r in results]
    heads, aligns = [h for h, _ in cols], [a for _, a in cols]
    widths = [max(len(h), *(len(x[i]) for x in rows)) for i, h in enumerate(heads)]
    return (
        "\n".join(
            [title, _line(heads, widths, aligns)] + [_line(x, widths, aligns) for x in rows] + ["", leg]
        )
        + "\n"
    )


def markdown(results) -> str:
    cols, row, leg, title = _kind(results)
    align = {"<": ":---", ">": "---:"}
    lines = [
        f"**{title}**",
        "",
        "| " + " | ".join(h for h, _ in cols) + " |",
        "|" + "|".join(align[a] for _, a in cols) + "|",
    ]
    lines += ["| " + " | ".join(md_text(c) for c in row(r)) + " |" for r in results]
    return "\n".join(lines) + "\n\n" + leg + "\n"


def csv_text(results) -> str:
    """One row per result: every figure of the JSON document that is a scalar, repr numbers."""
    _kind(results)
    docs = [r.to_dict() for r in results]
    fields = [
        k
        for k, v in docs[0].items()  # not the timing: the same command, the same bytes
        if (not isinstance(v, (dict, list)) or k == "params") and k != "seconds"
    ]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(fields)
    for d in docs:
        w.writerow(
            [
                ";".join(f"{k}={v!r}" for k, v in d[f].items())
                if f == "params"
                else (repr(d[f]) if isinstance(d[f], float) else d[f])
                for f in fields
            ]
        )
    return buf.getvalue()


def summary(results, format_: str = "table", wide_: bool = False, width: int = 80) -> str:
    if not results:
        return ""
    if format_ == "markdown":
        return markdown(results)
    if format_ == "csv":
        return csv_text(results)
    return wide(results) if wide_ else compact(results, width)
