"""The weighted figures (audit/measure/weighting.py) in the sweep's tables: one indented line per
result in the compact table, four columns in the wide one (only where some result has
them, so that tables without --distribution are unchanged)."""

from __future__ import annotations

import math

from .cells import num, percent

WIDE = [("w mean", ">"), ("w p99", ">"), ("w CR %", ">"), ("w NaN %", ">"), ("w unf %", ">")]


def pct(p) -> str:
    """A probability in percent, 3 significant digits ('-' for NaN)."""
    p = float(p)
    return "-" if math.isnan(p) else num(100.0 * p)


def line(r) -> str:
    """'weighted by normal:std=1.0: mean 1.06, p99 8.45, p99.9 146 ULP; CR 59.1 %, ...'
    ('' without a weighted section)."""
    w = getattr(r, "weighted", None)
    if not w:
        return ""
    s = (
        f"weighted by {w['distribution']}: mean {num(w['mean_ulp'])}, p99 {num(w['p99_ulp'])}, "
        f"p99.9 {num(w['p999_ulp'])} ULP; CR {percent(w['correctly_rounded'])} %"
    )
    for k, label in (("nan", "NaN"), ("inf", "inf"), ("underflow", "unf")):
        if w[k]:
            s += f", {label} {pct(w[k])} %"
    out = w["mass"]["outside"]
    if out:
        s += f"; {pct(out)} % of the mass outside the sweep"
    return s


def wide_cells(r) -> list[str]:
    w = getattr(r, "weighted", None)
    if not w:
        return ["-"] * len(WIDE)
    return [
        num(w["mean_ulp"]),
        num(w["p99_ulp"]),
        percent(w["correctly_rounded"]),
        pct(w["nan"]),
        pct(w["underflow"]),
    ]


def any_weighted(results) -> bool:
    return any(getattr(r, "weighted", None) for r in results)


# ------------------------------------------------------------------- report
FAR = 8.0


def active_region(r) -> tuple[float, float]:
    """The x range of the linear panel: where the distribution puts 99.9% of its mass
    (central interval) when the result is weighted, else where the exact function neither
    saturates nor flushes (between its saturation thresholds in the format) and where its
    findings begin (each finding interval's end nearest 0: a NaN from x = 11.1 on widens it
    to 11.1, not to the format's max), padded 5%.  A finding that begins more than FAR times
    as far from 0 as the saturation thresholds (an overflow near 65504 in fp16) is left to the
    full-range picture: it would squash the region where the function changes to a few
    pixels, in the candidate's panel and in its family's small multiples."""
    from audit.measure import weighting
    from audit.numbers.formats import get_format

    fmt = get_format(r.dtype)
    w = getattr(r, "weighted", None)
    d = None
    if w:
        d = weighting.parse(w["distribution"])
        if d.kind == "npy":
            d = weighting.bind(d, fmt)
    sat = r.saturation or {}
    lo_s = sat.get("low", {}) or {}
    hi_s = sat.get("high", {}) or {}
    lo, hi = weighting.active_region(d, fmt, lo_s.get("x"), hi_s.get("x"))
    if d is None:
        reach = FAR * max(abs(lo), abs(hi))
        starts = []
        for f in r.findings:
            if f.kind == "special":
                continue
            for a, b in f.intervals[:200]:
                start = a if abs(a) <= abs(b) else b  # (the end nearest 0)
                if math.isfinite(a) and math.isfinite(b) and abs(start) <= reach:
                    starts.append(start)
        lo, hi = min([lo, *starts]), max([hi, *starts])
    pad = 0.05 * (hi - lo)
    return lo - pad, hi + pad


def linear_panel(ax, r, color, floor: float) -> None:
    """The error map's second panel: ULP error over the active region on a linear x axis,
    every input drawn, flushes and NaNs marked, the weighted and unweighted p99 as lines
    and the distribution's density overlaid (right axis) when the result is weighted."""
    import numpy as np

    from audit.measure import weighting
    from audit.numbers.formats import get_format

    e = r.points
    lo, hi = active_region(r)
    sel = (e.x >= lo) & (e.x <= hi)
    ok = sel & ((e.cls == 0) | (e.cls == 4))
    u = np.maximum(e.ulp_err[ok], floor)
    ax.set_yscale("log")
    ax.plot(e.x[ok], u, ".", ms=2.5, color=color, rasterized=True, label="ULP error (every input)")
    fl = sel & (e.got == 0) & (e.rounded != 0) & ~np.isnan(e.rounded)
    if fl.any():
        ax.plot(e.x[fl], np.maximum(e.ulp_err[fl], floor), "x", ms=4, color="#1f77b4", label="flushed to 0")
    nan = sel & (e.cls == 2)
    if nan.any():
        for x in e.x[nan][:500]:
            ax.axvline(x, color="#d62728", alpha=0.3, lw=0.8)
    ax.axhline(max(r.p99_ulp, floor), color="#555", ls=":", lw=1, label=f"p99 all inputs: {num(r.p99_ulp)}")
    w = getattr(r, "weighted", None)
    if w:
        ax.axhline(
            max(float(w["p99_ulp"]), floor),
            color="#9467bd",
            ls="--",
            lw=1.2,
            label=f"p99 weighted: {num(w['p99_ulp'])}",
        )
    for s in (r.saturation or {}).values():
        if s and lo <= s["x"] <= hi:
            ax.axvline(s["x"], color="black", ls=":", lw=1)
    ax.set_xlim(lo, hi)
    top = float(np.max(u)) if len(u) else 1.0
    ax.set_ylim(floor / 2, 10.0 ** np.ceil(np.log10(max(top, 1.0)) + 1e-9) * 1.5)
    ax.set_xlabel(f"input x ({r.dtype}, linear: the active region [{lo:.3g}, {hi:.3g}])")
    ax.set_ylabel("ULP error")
    ax.grid(True, alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    if w:
        fmt = get_format(r.dtype)
        d = weighting.parse(w["distribution"])
        if d.kind == "npy":
            d = weighting.bind(d, fmt)
        xs = np.linspace(lo, hi, 801)
        dens = weighting.density(d, fmt, xs)
        tw = ax.twinx()
        tw.fill_between(xs, dens, color="#9467bd", alpha=0.15, step="mid" if d.kind == "npy" else None)
        tw.plot(xs, dens, color="#9467bd", lw=1, label=f"density of {w['distribution']}")
        tw.set_ylim(0, float(np.max(dens)) * 1.15 if np.max(dens) > 0 else 1)
        tw.set_ylabel("input density", color="#9467bd")
        h2, l2 = tw.get_legend_handles_labels()
        handles, labels = handles + h2, labels + l2
    ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.08, 1.0), borderaxespad=0, fontsize=7)
    ax.set_title("active region, linear x" + (f" (weighted by {w['distribution']})" if w else ""))


def html_table(r, esc) -> str:
    """The weighted figures beside the unweighted ones ('' without a weighted section)."""
    w = getattr(r, "weighted", None)
    if not w:
        return ""
    rows = [
        ("mean ULP", num(r.mean_ulp), num(w["mean_ulp"])),
        ("p99 ULP", num(r.p99_ulp), num(w["p99_ulp"])),
        ("p99.9 ULP", "-", num(w["p999_ulp"])),
        ("max ULP", num(r.max_ulp), "(the worst case is not weighted)"),
        ("correctly rounded %", percent(r.correctly_rounded_fraction), percent(w["correctly_rounded"])),
        ("NaN", str(r.nan_count), pct(w["nan"]) + " %"),
        ("inf", str(r.inf_count), pct(w["inf"]) + " %"),
        ("flushed to 0", "-", pct(w["underflow"]) + " %"),
    ]
    m = w["mass"]
    body = "".join(f"<tr><td>{a}</td><td>{b}</td><td>{esc(c)}</td></tr>" for a, b, c in rows)
    return (
        f"<table class='weighted'><tr><th>figure</th><th>all inputs alike</th>"
        f"<th>weighted by {esc(w['distribution'])}</th></tr>{body}</table>"
        f"<p class='note'>mass on the swept inputs {esc(num(m['swept']))}; outside "
        f"{esc(num(m['outside']))} (beyond the format's range: {esc(num(m['overflow']))}, "
        f"which rounds to {esc(m['overflow_to'])})</p>"
    )
