"""The report of ``actaudit diff --report DIR``: one self-contained HTML page (figures
embedded) with the summary of each comparison, its disagreement intervals and a map of
where the two implementations part (ULP distance over the input, coloured by which one is
closer to the exact value), plus one PNG per figure and the run's JSON.  Every text that
can come from a user is escaped."""

from __future__ import annotations

import base64
import datetime
from pathlib import Path

import numpy as np

from audit.compare.diff import document
from audit.io import dumps, format_number, write_files

from . import figures
from .cells import percent
from .html import CSS, e

COLORS = {1: ("#1b9e77", "A closer"), 2: ("#d95f02", "B closer"), 3: ("#7570b3", "equally far")}


def distance_map(r) -> bytes:
    """ULP distance between A and B over x (for pairs: the largest over each x's pairs),
    coloured by which is closer to the exact value; NaN in one only drawn at the top."""
    import matplotlib.pyplot as plt

    import reports.figures  # noqa: F401  (the Agg backend, and plain text: no mathtext)

    p = r.points
    x, d, c = p["x"], p["distance"].astype(np.float64), p["closer"]
    diff = c != 0
    if p["x2"] is not None and diff.any():  # per distinct x: the largest distance, majority colour
        ux, inv = np.unique(x[diff], return_inverse=True)
        dm = np.full(len(ux), -np.inf)
        np.maximum.at(dm, inv, np.where(d[diff] < 0, np.inf, d[diff]))
        votes = np.zeros((len(ux), 4), int)
        np.add.at(votes, (inv, c[diff]), 1)
        x, d, c = ux, dm, votes.argmax(1)
        diff = np.ones(len(ux), bool)
    fig, ax = plt.subplots(figsize=(9, 3.8))
    top = max(1.0, float(np.max(d[diff & np.isfinite(d) & (d >= 0)], initial=1.0))) * 2
    for code, (col, label) in COLORS.items():
        m = diff & (c == code)
        if m.any():
            y = np.where((d[m] < 0) | ~np.isfinite(d[m]), top, np.maximum(d[m], 0.5))
            ax.plot(x[m], y, ".", ms=2.5, color=col, label=f"{label} ({int(m.sum())})", rasterized=True)
    ax.set_yscale("log")
    figures._xaxis(ax, r.dtype)
    ax.set_ylabel("ULP distance A-B (top: NaN in one)")
    ax.set_title(f"{r.a} vs {r.b} ({r.dtype}/{r.compute}): {r.verdict}", fontsize=10)
    if diff.any():
        ax.legend(fontsize=8, loc="upper left")
    ax.grid(True, alpha=0.3)
    return figures._png(fig)


def _section(r, img: str | None) -> str:
    n = format_number
    rows = "".join(
        f"<tr><td>{n(iv['lo'], 6)}</td><td>{n(iv['hi'], 6)}</td><td>{iv['count']}</td>"
        f"<td>{iv['a_closer']}</td><td>{iv['b_closer']}</td><td>{iv['max_distance']}</td></tr>"
        for iv in r.intervals
    )
    more = (
        f"<p class='note'>{r.intervals_total - len(r.intervals)} more intervals not listed.</p>"
        if r.intervals_total > len(r.intervals)
        else ""
    )
    spec = "".join(
        f"<div class='finding'>special x = {e(s['x'])}: A {e(s['a'])}, B {e(s['b'])}, "
        f"exact {e(s['expected'])}</div>"
        for s in r.specials
        if not s["same"]
    )
    return (
        f"<h2>{e(r.a)} vs {e(r.b)}: {e(r.dtype)} storage, {e(r.compute)} compute</h2>"
        f"<p><b>{e(r.verdict)}</b>: {r.same} of {r.count} inputs identical "
        f"({percent(r.identical_fraction)}%{'' if r.exhaustive else ', sampled'}); max distance "
        f"{r.max_distance} ULP; NaN in one only at {r.nan_mismatch}; A closer at {r.a_closer}, "
        f"B closer at {r.b_closer}, ties {r.ties}; max error A {n(r.a_max_ulp)} ULP, "
        f"B {n(r.b_max_ulp)} ULP.</p>"
        + (img or "")
        + spec
        + "<table><tr><th>from x</th><th>to x</th><th>differ</th><th>A closer</th><th>B closer</th>"
        f"<th>max distance</th></tr>{rows}</table>{more}"
    )


def build(results, out_dir, command: str = "") -> Path:
    """Write DIR/index.html, one PNG per comparison and DIR/run.json; return the HTML path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    pngs, parts = [], []
    for i, r in enumerate(results):
        img = None
        if r.points is not None and r.differing:
            name = f"{i:03d}-diff.png"
            png = distance_map(r)
            pngs.append((name, png))
            img = (
                f"<img alt='distance map' title='{name}' src='data:image/png;base64,"
                f"{base64.b64encode(png).decode('ascii')}'>"
            )
        parts.append(_section(r, img))
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    page = (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>actaudit diff"
        f"</title><style>{CSS}</style></head><body><h1>actaudit diff</h1>"
        f"<p class='note'>{e(command or '(Python API)')}; {e(when)}</p>" + "".join(parts) + "</body></html>"
    )
    write_files(out, [*pngs, ("run.json", dumps(document(results, command=command))), ("index.html", page)])
    return out / "index.html"


def text(r, width: int = 80) -> str:
    """``actaudit diff`` for people: the two, the path, the verdict and its evidence, then the
    disagreement intervals and specials; wrapped at ``width``."""
    import textwrap

    from audit.io import format_number as num

    def wrap(t, ind="  "):
        return textwrap.wrap(
            t,
            width=max(40, width),
            initial_indent=ind,
            subsequent_indent=ind + "  ",
            break_on_hyphens=False,
            break_long_words=False,
        )

    n = "" if r.exhaustive else " (sampled)"
    nan = f"; NaN in one only at {r.nan_mismatch}" if r.nan_mismatch else ""
    out = wrap(f"{r.a} vs {r.b}: {r.dtype} storage, {r.compute} compute; {r.count} inputs{n}", "")
    out += wrap(
        f"identical at {r.same} ({percent(r.identical_fraction)}%); max distance {r.max_distance} ULP{nan}"
    )
    out += wrap(
        f"closer to the exact value: A at {r.a_closer}, B at {r.b_closer}, ties {r.ties}; "
        f"max error A {num(r.a_max_ulp)} ULP, B {num(r.b_max_ulp)} ULP"
    )
    out += wrap(f"verdict: {r.verdict}")
    for iv in r.intervals[:8]:
        out += wrap(
            f"[{num(iv['lo'], 6)}, {num(iv['hi'], 6)}]: {iv['count']} differ, A closer "
            f"{iv['a_closer']}, B closer {iv['b_closer']}, max distance {iv['max_distance']}"
        )
    if r.intervals_total > 8:
        out += wrap(f"(+{r.intervals_total - 8} more intervals)")
    for sp in r.specials:
        if not sp["same"]:
            out += wrap(f"special x = {sp['x']}: A {sp['a']}, B {sp['b']}, exact {sp['expected']}")
    return "\n".join(out) + "\n"
