"""The HTML report: one self-contained file (images embedded, styles and script inline,
no network access) plus one PNG per figure and the run's JSON.

Every text that can come from a user (candidate names, formulas, parameters, causes) is
escaped with html.escape.
"""

from __future__ import annotations

import base64
import datetime
import html
import os
import platform
import re
import shutil
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np

from audit import __version__, oracle
from audit.candidates import catalog
from audit.io import dumps, format_number
from audit.sweep import document

from . import figures

TIERS = [(0.5, "t0", "correctly rounded"), (4, "t1", "<= 4 ULP"), (64, "t2", "<= 64 ULP"),
         (1024, "t3", "<= 1024 ULP"), (float("inf"), "t4", "> 1024 ULP or NaN/inf")]

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px}h2{font-size:18px;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:32px}
h3{font-size:15px;margin-bottom:4px}table{border-collapse:collapse;font-size:12px;margin:8px 0}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:right}th{background:#f3f3f3;cursor:pointer}
td.l,th.l{text-align:left}code{background:#f6f6f6;padding:1px 3px}
.t0{background:#c7e9c0}.t1{background:#e5f5e0}.t2{background:#fff7bc}.t3{background:#fdd49e}.t4{background:#fcae91}
img{max-width:100%;border:1px solid #eee;margin:4px 0}.meta td{text-align:left}
.finding{margin:2px 0 2px 12px;font-size:13px}.note{color:#555;font-size:13px}
.legend span{padding:2px 8px;margin-right:4px;font-size:12px}
"""

JS = """
document.querySelectorAll('table.sortable th').forEach(function(th, i){
  th.addEventListener('click', function(){
    var tb = th.closest('table').tBodies[0], rows = Array.from(tb.rows);
    var asc = th.dataset.asc !== '1'; th.dataset.asc = asc ? '1' : '0';
    rows.sort(function(a, b){
      var x = a.cells[i].dataset.v || a.cells[i].textContent, y = b.cells[i].dataset.v || b.cells[i].textContent;
      var nx = parseFloat(x), ny = parseFloat(y);
      var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
      return asc ? c : -c;
    });
    rows.forEach(function(r){ tb.appendChild(r); });
  });
});
"""


def e(s) -> str:
    return html.escape(str(s), quote=True)


def tier(v: float) -> str:
    if v is None or not np.isfinite(v):
        return "t4"
    for lim, cls, _ in TIERS:
        if v <= lim:
            return cls
    return "t4"


num = format_number


def slug(s: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", s.lower()).strip("-")[:80]


def binade_table(r) -> list[tuple]:
    """(e, count, max and mean ULP for x < 0, max and mean ULP for x > 0) per binade of |x|."""
    p = r.points
    ok = (p.cls == 0) & (p.x != 0)
    x, u = p.x[ok], p.ulp_err[ok]
    ex = np.frexp(np.abs(x))[1] - 1
    rows = []
    for b in np.unique(ex):
        cells = []
        for sel in (x < 0, x > 0):
            m = sel & (ex == b)
            cells += [float(u[m].max()), float(u[m].mean())] if m.any() else [None, None]
        rows.append((int(b), int((ex == b).sum()), *cells))
    return rows


class Report:
    """Collects figure jobs while the page is laid out; renders them (on every core when
    there are many) and puts the PNGs in place of their tokens."""

    def __init__(self, out: Path):
        self.out = out
        self.jobs: list[tuple[str, str, tuple]] = []  # (file name, figure function, args)

    def img(self, name: str, job: tuple, alt: str) -> str:
        fname = f"{len(self.jobs):03d}-{slug(name)}.png"
        self.jobs.append((fname, job[0].__name__, job[1:]))
        return f'<img alt="{e(alt)}" title="{e(fname)}" src="@@{fname}@@">'

    def render(self) -> list[tuple[str, bytes]]:
        if len(self.jobs) < 8 or (os.cpu_count() or 1) < 2:
            pngs = [_render(j) for j in self.jobs]
        else:
            import multiprocessing as mproc
            from concurrent.futures import ProcessPoolExecutor

            ctx = mproc.get_context("fork") if "fork" in mproc.get_all_start_methods() else None
            with ProcessPoolExecutor(max_workers=os.cpu_count(), mp_context=ctx) as ex:
                pngs = list(ex.map(_render, self.jobs, chunksize=2))
        return [(j[0], p) for j, p in zip(self.jobs, pngs)]


def _render(job) -> bytes:
    _, fn, args = job
    return getattr(figures, fn)(*args)


def build(results, out_dir, command: str = "") -> Path:
    """Write DIR/index.html, one PNG per figure and DIR/run.json; return the HTML path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rep = Report(out)
    colors = figures.color_of([r.candidate for r in results])
    uni = [r for r in results if r.points is not None and r.points.x2 is None]
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
             f"<title>actaudit report</title><style>{CSS}</style></head><body>",
             "<h1>actaudit report</h1>", _meta(results, command), _summary(results)]

    # family views: all candidates of a family on one map, per path
    groups = defaultdict(list)
    for r in uni:
        groups[(r.candidate.split(".")[0], r.dtype, r.compute)].append(r)
    fam = [g for g in groups.values() if len(g) > 1]
    if fam:
        parts.append("<h2 id='families'>Families</h2>")
        for g in fam:
            parts.append(rep.img(f"family-{g[0].candidate.split('.')[0]}-{g[0].dtype}-{g[0].compute}",
                                 (figures.family_map, g, colors), "family error map"))
    # the same candidate across formats
    by_cand = defaultdict(list)
    for r in uni:
        by_cand[r.candidate].append(r)
    multi = {k: v for k, v in by_cand.items() if len(v) > 1}
    if multi:
        parts.append("<h2 id='formats'>Across formats</h2>")
        for k, v in multi.items():
            parts.append(rep.img(f"formats-{k}", (figures.formats_side_by_side, v, colors[k]),
                                 f"{k} across formats"))
    parts.append("<h2 id='candidates'>Candidates</h2>")
    for r in results:
        parts.append(_candidate(rep, r, colors[r.candidate]))
    parts.append(f"<script>{JS}</script></body></html>")
    page = "\n".join(parts)
    images = rep.render()
    for fname, png in images:
        page = page.replace(f"@@{fname}@@", "data:image/png;base64," + base64.b64encode(png).decode("ascii"))

    # every file is written in a temporary directory beside DIR, then moved in: an
    # interrupted report leaves nothing half-written (index.html is moved last)
    tmpdir = Path(tempfile.mkdtemp(prefix=".actaudit-report-", dir=out))
    try:
        names = []
        for fname, png in images:
            (tmpdir / fname).write_bytes(png)
            names.append(fname)
        (tmpdir / "run.json").write_text(dumps(document(results, command=command)), encoding="utf-8")
        (tmpdir / "index.html").write_text(page, encoding="utf-8")
        for fname in names + ["run.json", "index.html"]:
            os.replace(tmpdir / fname, out / fname)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    return out / "index.html"


def _meta(results, command) -> str:
    import matplotlib
    import ml_dtypes
    import mpmath

    rows = [("command", command or "(Python API)"),
            ("date", datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")),
            ("versions", f"actaudit {__version__}, numpy {np.__version__}, mpmath {mpmath.__version__}, "
                         f"ml_dtypes {ml_dtypes.__version__}, matplotlib {matplotlib.__version__}, "
                         f"Python {platform.python_version()}"),
            ("oracle", f"version {oracle.ORACLE_VERSION}: exact values from mpmath, correctly rounded "
                       f"(precision p + 40 bits, doubled up to {oracle.MAX_PREC} until the rounding and "
                       "the binade are certain); float64 fast paths only where proven and unambiguous"),
            ("inputs", "; ".join(sorted({f"{r.dtype}: {'exhaustive (every finite value; maxima are bounds)' if r.domain.exhaustive else 'sampled (maxima are lower bounds)'}" for r in results})))]
    body = "".join(f"<tr><th class='l'>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in rows)
    legend = "".join(f"<span class='{c}'>{e(t)}</span>" for _, c, t in TIERS)
    return f"<table class='meta'>{body}</table><div class='legend'>{legend}</div>"


def _findings_text(r) -> str:
    parts = [f"{f.kind} {f.count}" for f in r.findings]
    if r.hidden:
        parts.append(f"hidden {len(r.hidden)}")
    return ", ".join(parts) or "-"


def _summary(results) -> str:
    head = ("<tr><th class='l'>candidate</th><th class='l'>storage</th><th class='l'>compute</th>"
            "<th>inputs</th><th class='l'>kind</th><th>max ULP</th><th>p99 ULP</th><th>mean ULP</th>"
            "<th>max abs</th><th>NaN</th><th>inf</th><th class='l'>findings</th></tr>")
    rows = []
    for r in results:
        mx = r.max_ulp if not (r.nan_count or r.inf_count) else float("inf")
        anchor = slug(f"{r.candidate}-{r.dtype}-{r.compute}-{_ptext(r)}")
        rows.append(
            f"<tr><td class='l'><a href='#{anchor}'>{e(r.candidate)}</a>{e(_ptext(r, ' '))}</td>"
            f"<td class='l'>{e(r.formats_label)}</td><td class='l'>{e(r.compute)}</td><td>{r.domain.count}</td>"
            f"<td class='l'>{'exhaustive' if r.domain.exhaustive else 'sampled'}</td>"
            f"<td class='{tier(mx)}' data-v='{r.max_ulp}'>{num(r.max_ulp)}</td>"
            f"<td class='{tier(r.p99_ulp)}' data-v='{r.p99_ulp}'>{num(r.p99_ulp)}</td>"
            f"<td data-v='{r.mean_ulp}'>{num(r.mean_ulp)}</td><td data-v='{r.max_abs}'>{num(r.max_abs)}</td>"
            f"<td>{r.nan_count}</td><td>{r.inf_count}</td><td class='l'>{e(_findings_text(r))}</td></tr>")
    return (f"<h2 id='summary'>Summary</h2><p class='note'>Click a column to sort. Colors: tier of "
            f"the error (NaN or inf results count as the worst tier).</p>"
            f"<table class='sortable'><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>")


def _ptext(r, lead="") -> str:
    p = ", ".join(f"{k}={v:g}" for k, v in r.params.items())
    return f"{lead}({p})" if p else ""


def _candidate(rep: Report, r, color) -> str:
    cand = catalog().get(r.candidate)
    anchor = slug(f"{r.candidate}-{r.dtype}-{r.compute}-{_ptext(r)}")
    out = [f"<h3 id='{anchor}'>{e(r.candidate)}{e(_ptext(r, ' '))}: {e(r.formats_label)} storage, "
           f"{e(r.compute)} compute</h3>"]
    if cand is not None:
        out.append(f"<p class='note'>reference <code>{e(cand.reference)}</code>; formula "
                   f"<code>{e(cand.formula)}</code><br>source: {e(cand.source)}</p>")
    w = r.worst
    if w:
        out.append(f"<p>max {num(r.max_ulp)} ULP at x = {e(repr(w['x']))} ({e(w['x_hex'])}): got "
                   f"{e(repr(w['got']))}, exact {e(repr(w['exact']))}. "
                   f"{'Exhaustive: this is the true maximum.' if r.domain.exhaustive else 'Sampled: a lower bound.'}</p>")
    if r.points is None:
        return "\n".join(out)
    if r.points.x2 is not None:
        out.append(rep.img(f"heatmap-{r.candidate}-{r.dtype}-{r.compute}", (figures.heatmap, r),
                           f"{r.candidate} heatmap"))
    else:
        out.append(rep.img(f"errmap-{r.candidate}-{r.dtype}-{r.compute}{_ptext(r)}",
                           (figures.error_map, r, color), f"{r.candidate} error map"))
        out.append(rep.img(f"hist-{r.candidate}-{r.dtype}-{r.compute}{_ptext(r)}",
                           (figures.histogram, r, color), f"{r.candidate} histogram"))
        rows = "".join(
            f"<tr><td>[2^{b}, 2^{b + 1})</td><td>{n}</td><td>{num(a)}</td><td>{num(m)}</td>"
            f"<td>{num(c)}</td><td>{num(d)}</td></tr>" for b, n, a, m, c, d in binade_table(r))
        out.append("<details><summary>Per-binade errors</summary><table><tr><th>|x| in</th>"
                   "<th>inputs</th><th>max ULP x&lt;0</th><th>mean ULP x&lt;0</th><th>max ULP x&gt;0</th>"
                   f"<th>mean ULP x&gt;0</th></tr>{rows}</table></details>")
    if r.findings or r.hidden:
        out.append("<div><b>Findings</b>")
        for f in r.findings:
            iv = ", ".join(f"[{num(a, 6)}, {num(b, 6)}]" for a, b in f.intervals[:6])
            more = f" (+{f.intervals_total - 6} more)" if f.intervals_total > 6 else ""
            cause = f" &mdash; {e(f.cause['text'])}" if f.cause else ""
            out.append(f"<div class='finding'><b>{e(f.kind)}</b>: {f.count} inputs in {e(iv)}{e(more)}{cause}</div>")
        for h in r.hidden:
            out.append(f"<div class='finding'><b>{e(h['kind'])}</b>: {e(h['text'])}</div>")
        out.append("</div>")
    if r.clip:
        c = r.clip
        tol = c["tolerance"]
        out.append(f"<p><b>Clip recommendation</b> (tolerance {num(tol['max_ulp'])} ULP"
                   f"{'' if tol['atol'] is None else ' or ' + num(tol['atol']) + ' abs'}): "
                   f"below {num(c['lo'], 6)}: {e(c['lo_action'])}; above {num(c['hi'], 6)}: "
                   f"{e(c['hi_action'])}; max {num(c['max_ulp_inside'])} ULP after. {e(c['note'])}</p>")
    if r.saturation:
        s = r.saturation
        txt = "; ".join(f"{k}: x = {num(v['x'], 6)} -> {v['value'] if isinstance(v['value'], str) else num(v['value'])}"
                        for k, v in s.items() if v)
        out.append(f"<p class='note'>saturation of the exact function in {e(r.dtype)}: {e(txt or 'none')}</p>")
    return "\n".join(out)
