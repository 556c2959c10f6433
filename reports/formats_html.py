"""The HTML report of quantized (int8/uint8/int16) and block-scaled (MX, NVFP4) outputs:
``actaudit report --out-dtype uint8:... | mxfp8_e4m3 | nvfp4``.

One self-contained page in the style of reports/html.py (its CSS, escaping, sortable
tables): a summary per kind of output, then per candidate its worst input or block, its
findings and (quantized outputs) a figure of the output codes and the code error over
every input code.  Written with DIR/run.json atomically, as reports/html.py does.
"""

from __future__ import annotations

import base64
import datetime
import platform
from pathlib import Path

import numpy as np

from audit._version import __version__
from audit.io import dumps, format_number, write_files
from audit.measure import blocks as blocks_mod
from audit.measure import quant as quant_mod
from audit.targets.candidates import catalog

from .cells import percent
from .html import CSS, EXPLORER_JS, JS, e, slug

# tiers of the code error (quantized) and element ULP error (block-scaled): the classes of
# reports/html.py's TIERS
CODE_TIERS = [
    (0.5, "t0", "correct code (<= 1/2)"),
    (1, "t1", "<= 1 code"),
    (4, "t2", "<= 4 codes"),
    (16, "t3", "<= 16 codes"),
    (float("inf"), "t4", "> 16 codes or NaN"),
]
ULP_TIERS = [
    (0.5, "t0", "correctly rounded element"),
    (1, "t1", "<= 1 element ULP"),
    (4, "t2", "<= 4"),
    (64, "t3", "<= 64"),
    (float("inf"), "t4", "> 64 or NaN"),
]


def _pct(frac: float) -> str:
    """Percent truncated to 2 decimals, as the tables: 100.00 only when every code is correct."""
    return percent(frac)


def num(v, digits: int = 5) -> str:
    return "-" if v is None else format_number(float(v), digits)


def _tier(v, tiers) -> str:
    if v is None or not np.isfinite(v):
        return "t4"
    return next(c for lim, c, _ in tiers if v <= lim)


def _legend(tiers) -> str:
    return (
        "<div class='legend'>" + "".join(f"<span class='{c}'>{e(t)}</span>" for _, c, t in tiers) + "</div>"
    )


def _anchor(r) -> str:
    return slug(f"{r.candidate}-{r.dtype}-{r.out_dtype}-{r.compute}")


# ------------------------------------------------------------------ quantized outputs
def _table(rs, cols, tiers) -> str:
    """A sortable table; columns whose cell is the same in every row (formats, rule, inputs)
    are said once above it instead, so that the table fits the page."""
    common, shown = [], []
    for head, cell, left, *_ in cols:
        vals = {cell(r) for r in rs}
        if left and head != "candidate" and len(vals) == 1:
            common.append(f"{head} <code>{e(vals.pop())}</code>")
        else:
            shown.append((head, cell, left, *_))
    ths = "".join(f"<th class='l'>{h}</th>" if left else f"<th>{h}</th>" for h, _, left, *_ in shown)
    rows = []
    for r in rs:
        tds = []
        for head, cell, left, *extra in shown:
            if head == "candidate":
                tds.append(f"<td class='l'><a href='#{_anchor(r)}'>{e(cell(r))}</a></td>")
            elif left:
                tds.append(f"<td class='l'>{e(cell(r))}</td>")
            else:
                cls = f" class='{_tier(extra[0](r), tiers)}'" if extra else ""
                tds.append(f"<td{cls}>{e(cell(r))}</td>")
        rows.append("<tr>" + "".join(tds) + "</tr>")
    lead = f"<p>Every row: {'; '.join(common)}.</p>" if common else ""
    return (
        f"{lead}{_legend(tiers)}<table class='sortable'><thead><tr>{ths}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


QUANT_COLS = [
    ("candidate", lambda r: r.candidate, True),
    ("in", lambda r: r.dtype, True),
    ("out", lambda r: r.out_dtype, True),
    ("compute", lambda r: r.compute, True),
    ("inputs", lambda r: str(r.count), False),
    (
        "max code err",
        lambda r: num(r.max_code_err),
        False,
        lambda r: r.max_code_err if not r.nan_count else float("inf"),
    ),
    ("mean code err", lambda r: num(r.mean_code_err), False),
    ("max real err", lambda r: num(r.max_real_err), False),
    ("correct codes %", lambda r: _pct(r.correct_fraction), False),
    ("NaN", lambda r: str(r.nan_count), False),
    ("findings", lambda r: ", ".join(f"{f['kind']} {f['count']}" for f in r.findings) or "-", True),
]


def _quant_summary(rs) -> str:
    return (
        "<h2 id='quant'>Quantized outputs</h2><p class='note'>Every input code is swept: the "
        "figures are exact maxima. Code error |q - clamp(f(x)/s + z)| in output codes (a "
        "correct code has code error at most 1/2); real error = code error x s. Click a "
        f"column to sort.</p>{_table(rs, QUANT_COLS, CODE_TIERS)}"
    )


def quant_figure(r) -> bytes:
    """Two panels over every input: the output code (candidate dots, correct code line) and
    the code error (the correct-code limit 1/2 dashed)."""
    from . import figures

    plt = figures.plt
    fig, (a, b) = plt.subplots(2, 1, figsize=(9, 5), sharex=True)
    a.plot(r.x, r.want, "-", color="#888", lw=1, label="correct code Q(f(x))")
    a.plot(r.x, r.got, ".", ms=3, color="#1f77b4", label=f"{r.candidate}")
    a.set_ylabel(f"output code\n({r.out_dtype.split(':')[0]})")
    a.legend(fontsize=8, loc="best")
    a.set_title(f"{r.candidate}: {r.dtype} -> {r.out_dtype}", fontsize=9)
    err = np.where(np.isnan(r.got), np.nan, r.code_err)
    b.plot(r.x, err, ".", ms=3, color="#d62728")
    b.axhline(0.5, ls="--", color="#555", lw=0.8)
    b.set_ylabel("code error")
    b.set_xlabel("input x (dequantized)")
    return figures._png(fig)


def _quant_candidate(r, img: str) -> str:
    cand = catalog().get(r.candidate)
    out = [
        f"<details class='cand' id='{_anchor(r)}' open><summary>{e(r.candidate)}: "
        f"{e(r.dtype)} -> {e(r.out_dtype)}, {e(r.compute)} &middot; max {e(num(r.max_code_err))} "
        f"codes &middot; {_pct(r.correct_fraction)}% correct codes</summary>"
    ]
    if cand is not None:
        out.append(
            f"<p class='note'>reference <code>{e(cand.reference)}</code>; formula "
            f"<code>{e(cand.formula)}</code><br>source: {e(cand.source)}</p>"
        )
    w = r.worst
    if w:
        out.append(
            f"<p>max code error {e(num(r.max_code_err))} at x = {e(repr(w['x']))} (input code "
            f"{e(w['x_code'])}): code {w['got']}, correct code {w['want']}, f(x) = "
            f"{e(repr(w['exact']))}. Exhaustive: this is the true maximum.</p>"
        )
    out.append(img)
    if r.findings:
        out.append("<div><b>Findings</b>")
        for f in r.findings:
            iv = ", ".join(f"[{num(a, 6)}, {num(b, 6)}]" for a, b in f["intervals"][:6])
            more = f" (+{f['intervals_total'] - 6} more)" if f["intervals_total"] > 6 else ""
            out.append(
                f"<div class='finding'><b>{e(f['kind'])}</b>: {f['count']} inputs in "
                f"{e(iv)}{e(more)} &mdash; {e(f['note'])}</div>"
            )
        out.append("</div>")
    return "\n".join(out + ["</details>"])


# ------------------------------------------------------------------ block-scaled outputs
def _worst_block(w) -> str:
    if not w:
        return "-"
    return (
        f"block {w['index']}" if "index" in w else f"x = {num(w['x'], 6)} with m = {num(w['pair_input'], 6)}"
    )


BLOCK_COLS = [
    ("candidate", lambda r: r.candidate, True),
    ("in", lambda r: r.dtype, True),
    ("out", lambda r: r.out_dtype, True),
    ("scale rule", lambda r: r.rule, True),
    ("compute", lambda r: r.compute, True),
    ("inputs", lambda r: r.inputs, True),
    ("elements", lambda r: str(r.elements), False),
    (
        "max elem ULP",
        lambda r: num(r.max_elem_ulp),
        False,
        lambda r: r.max_elem_ulp if not r.nan_elements else float("inf"),
    ),
    ("mean", lambda r: num(r.mean_elem_ulp), False),
    ("quant. cost", lambda r: num(r.ref_max_elem_ulp), False),
    ("added ULP", lambda r: num(r.max_added_ulp), False),
    ("elems differing", lambda r: str(r.mismatches), False),
    ("blocks scale differs", lambda r: f"{r.scale_diff_blocks} of {r.blocks}", False),
    ("NaN", lambda r: str(r.nan_elements), False),
    ("worst block", lambda r: _worst_block(r.worst_block), True),
]


def _block_summary(rs) -> str:
    return (
        "<h2 id='blocks'>Block-scaled outputs</h2><p class='note'>Element errors in element ULP "
        "at the reference's scale. <i>quant. cost</i>: the largest error of the exact function "
        "quantized by the same rule (what the format costs); <i>added ULP</i>: how far the "
        "candidate's elements are from those (what the approximation adds); <i>blocks scale "
        "differs</i>: blocks whose shared scale (NVFP4: or tensor scale) differs from the "
        "reference's. Seeded inputs give lower bounds; exhaustive pairs give bounds over every "
        f"(element input, block max) pair.</p>{_table(rs, BLOCK_COLS, ULP_TIERS)}"
    )


def _block_candidate(r) -> str:
    cand = catalog().get(r.candidate)
    out = [
        f"<details class='cand' id='{_anchor(r)}' open><summary>{e(r.candidate)}: "
        f"{e(r.dtype)} -> {e(r.out_dtype)} ({e(r.rule)} rule), {e(r.compute)} &middot; max "
        f"{e(num(r.max_elem_ulp))} element ULP &middot; {r.scale_diff_blocks} of {r.blocks} "
        "blocks with another scale</summary>"
    ]
    if cand is not None:
        out.append(
            f"<p class='note'>reference <code>{e(cand.reference)}</code>; formula "
            f"<code>{e(cand.formula)}</code><br>source: {e(cand.source)}</p>"
        )
    out.append(
        f"<p class='note'>inputs: {e(r.inputs)}; {r.elements} elements in {r.blocks} "
        f"{'pairs' if r.inputs.startswith('exhaustive') else 'blocks'}; "
        f"{r.n_mpmath} reference values decided by mpmath.</p>"
    )
    w = r.worst_block
    if w:
        rows = "".join(
            f"<tr><th class='l'>{e(k)}</th><td>{e(v if isinstance(v, str) else num(v, 8))}</td></tr>"
            for k, v in w.items()
        )
        out.append(f"<b>Worst block</b><table class='meta'>{rows}</table>")
    if r.scale_diff_first:
        out.append(f"<p>first blocks whose scale differs: {e(', '.join(map(str, r.scale_diff_first)))}</p>")
    if r.tensor_scale:
        out.append(
            f"<p>NVFP4 tensor scale: reference {e(num(r.tensor_scale['reference'], 9))}, "
            f"candidate {e(num(r.tensor_scale['candidate'], 9))}</p>"
        )
    return "\n".join(out + ["</details>"])


# ------------------------------------------------------------------ the page
def _meta(command: str) -> str:
    import matplotlib
    import mpmath

    rows = [
        ("command", command or "(Python API)"),
        ("date", datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")),
        (
            "versions",
            f"actaudit {__version__}, numpy {np.__version__}, mpmath {mpmath.__version__}, "
            f"matplotlib {matplotlib.__version__}, Python {platform.python_version()}",
        ),
        (
            "oracle",
            "the exact f(x) quantized by the output format's own rule, decided by mpmath "
            "wherever the reference's float64 value could be on either side of a boundary",
        ),
    ]
    body = "".join(f"<tr><th class='l'>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in rows)
    return f"<h2 id='run'>How the run was made</h2><table class='meta'>{body}</table>"


def build(results, out_dir, command: str = "") -> Path:
    """Write DIR/index.html (figures embedded), one PNG per figure and DIR/run.json."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    qs = [r for r in results if isinstance(r, quant_mod.QuantResult)]
    bs = [r for r in results if isinstance(r, blocks_mod.BlockResult)]
    images: list[tuple[str, bytes]] = []
    nav = ["<a href='#summary'>Summary</a>", "<a href='#run'>How the run was made</a>"]
    nav += [
        f"<a class='sub' href='#{_anchor(r)}'>{e(r.candidate)} ({e(r.out_dtype.split(':')[0])})</a>"
        for r in qs + bs
    ]
    parts = [
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>actaudit report"
        f"</title><style>{CSS}</style></head><body><nav>{''.join(nav)}</nav><main>",
        "<h1>actaudit report</h1><div id='summary'></div>",
    ]
    if qs:
        parts.append(_quant_summary(qs))
    if bs:
        parts.append(_block_summary(bs))
    parts.append(_meta(command))
    parts.append("<h2 id='candidates'>Candidates</h2>")
    for i, r in enumerate(qs):
        fname = f"{i:03d}-{slug('codes-' + r.candidate + '-' + r.out_dtype.split(':')[0])}.png"
        png = quant_figure(r)
        images.append((fname, png))
        parts.append(
            _quant_candidate(
                r,
                f"<img alt='{e(r.candidate)} output codes' title='{e(fname)}' "
                f"src='data:image/png;base64,{base64.b64encode(png).decode('ascii')}'>",
            )
        )
    for r in bs:
        parts.append(_block_candidate(r))
    parts.append(f"</main><script>{JS}{EXPLORER_JS}</script></body></html>")
    page = "\n".join(parts)
    doc = {
        "schema": "actaudit.formats-report/1",
        "actaudit": __version__,
        "command": command,
        "quant": quant_mod.document(qs)["results"],
        "blocks": blocks_mod.document(bs)["results"],
    }
    write_files(out, [*images, ("run.json", dumps(doc)), ("index.html", page)])
    return out / "index.html"
