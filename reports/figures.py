"""The report's figures (matplotlib, Agg backend): error maps, histograms, family views,
formats side by side, and 2D heatmaps of gated units.  Each returns PNG bytes."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
# every string drawn is plain text: names of users' files and targets ('d$\\foo{$.npz') are
# never parsed as mathtext, nor sent to TeX
matplotlib.rcParams.update({"text.usetex": False, "text.parse_math": False})
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator  # noqa: E402

from audit.numbers.formats import get_format  # noqa: E402

FLOOR = 1e-3  # ULP errors below this are drawn at this level on the log axis
SHADES = {
    "nan": ("#d62728", "NaN"),
    "overflow": ("#ff7f0e", "overflow"),
    "underflow": ("#1f77b4", "flush to zero"),
}
DPI = 100


def color_of(names: list[str]) -> dict[str, str]:
    """One consistent color per candidate across every figure of a report."""
    cmap = plt.get_cmap("tab10" if len(names) <= 10 else "tab20")
    return {n: cmap(i % cmap.N) for i, n in enumerate(sorted(set(names)))}


COLORS = 32  # palette entries of a written PNG: a plot has a few colors and their antialiasing


def _png(fig) -> bytes:
    """The figure as a palette PNG at the resolution it is shown (DPI): a few hundred colors
    at most in a plot, so 8 bits a pixel lose nothing visible and a third of the bytes.

    The pixels are those of ``savefig(bbox_inches="tight")`` (legends placed outside the
    axes stay in the picture), drawn once: the tight box is measured without the dry-run
    draw savefig makes for it, and the RGBA pixels go to the palette without an
    intermediate PNG encoded and decoded (together a fifth of a figure's time)."""
    from PIL import Image

    fig.set_dpi(DPI)  # the layout measured at the resolution it is drawn at
    fig.tight_layout()
    # tight_layout leaves a placeholder layout engine that does nothing but makes savefig
    # draw the whole figure once more before it draws it: none at all
    with plt.rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
        fig.set_layout_engine(None)
    box = fig.get_tightbbox(fig.canvas.get_renderer()).padded(plt.rcParams["savefig.pad_inches"])
    buf = io.BytesIO()
    fig.savefig(buf, format="rgba", dpi=DPI, bbox_inches=box)
    raw = buf.getvalue()
    # the canvas savefig drew: the box in pixels, truncated (matplotlib 3.11 first adds 1e-8)
    wh = [(int(box.width * DPI + d), int(box.height * DPI + d)) for d in (1e-8, 0.0)]
    size = next((s for s in wh if 4 * s[0] * s[1] == len(raw)), None)
    if size is None:  # another matplotlib's sizing: let a PNG say what it drew
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=DPI, bbox_inches=box, pil_kwargs={"compress_level": 1})
        img = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
    else:
        img = Image.frombuffer("RGBA", size, raw, "raw", "RGBA", 0, 1).convert("RGB")
    plt.close(fig)
    pal = img.quantize(colors=COLORS, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    out = io.BytesIO()
    pal.save(out, format="PNG", optimize=True)
    return out.getvalue()


def _xaxis(ax, fmt_name: str, small: bool = False):
    """Symmetric-log x axis over the format's range, with a few decade ticks (matplotlib's
    default symlog locators are slow over 80 decades); ``small`` panels get only
    -max, -1, 0, 1, max, so that no labels collide."""
    fmt = get_format(fmt_name)
    lin = max(fmt.smallest_normal, 1e-30)
    ax.set_xscale("symlog", linthresh=lin, linscale=0.3)
    top = int(np.floor(np.log10(fmt.max_finite)))
    bottom = int(np.ceil(np.log10(lin))) + 1
    if small:
        dec = [10.0**top, 1.0]
    else:
        step = max(1, int(np.ceil((top - bottom) / 4)))
        dec = [10.0**k for k in range(top, bottom - 1, -step)]
    ax.xaxis.set_major_locator(FixedLocator([-d for d in dec] + [0.0] + dec[::-1]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(PLAIN)
    ax.set_xlabel(
        "x (symlog)" if small else f"input x ({fmt_name}, symmetric-log scale)", fontsize=8 if small else None
    )
    if small:
        ax.tick_params(labelsize=7)


# plain tick labels: matplotlib's default log labels go through mathtext, slow to lay out
PLAIN = FuncFormatter(
    lambda v, _: (
        "0"
        if v == 0
        else f"{v:.0e}".replace("e+0", "e").replace("e-0", "e-").replace("e+", "e")
        if abs(v) >= 1e4 or abs(v) < 1e-3
        else f"{v:g}"
    )
)


def _logy(ax):
    ax.set_yscale("log")
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FLOORED)


def floor_ticks(ax, top: float) -> None:
    """Decade ticks of a log y axis from the floor to ``top``, at most 6, the floor's always
    among them (its label: '<0.001')."""
    lo, hi = int(round(np.log10(FLOOR))), int(np.ceil(np.log10(max(top, 1.0)) - 1e-9))
    step = max(1, int(np.ceil((hi - lo) / 5)))
    ax.yaxis.set_major_locator(FixedLocator([10.0**k for k in range(lo, hi + 1, step)]))


# the floor's tick says what the floor holds (a label inside the axes would be crossed by the
# points drawn on the floor)
# (np.isclose's test with its default tolerances, on one float: np.isclose itself takes 60 us
# a tick label, 4% of a report's figures)
FLOORED = FuncFormatter(lambda v, p: f"<{FLOOR:g}" if abs(v - FLOOR) <= 1e-8 + 1e-5 * FLOOR else PLAIN(v, p))


CAP = 1e6  # the y axis of error maps stops here: larger errors are drawn on the top edge


def _bound_y(ax, u, label_floor: bool = True):
    """y from the floor to the largest error (at most CAP), whole decades; the floor is
    labelled as what it is (its tick: errors below FLOOR, correctly rounded or nearly exact
    results)."""
    top = float(np.max(u)) if len(u) else 1.0
    top = 10.0 ** np.ceil(np.log10(max(min(top, CAP), 1.0)) - 1e-9)
    ax.set_ylim(FLOOR / 2, top * 1.5)
    floor_ticks(ax, top)
    if label_floor:  # the line; its tick reads "<0.001" (FLOORED), outside the data
        ax.axhline(FLOOR, color="#888", lw=0.8, ls="-")
    return top


def _plot_capped(ax, x, u, top, color, ms, label=None):
    """Points, those above the axis drawn as triangles on its top edge."""
    hi = u > top
    ax.plot(x[~hi], u[~hi], ".", ms=ms, color=color, rasterized=True, label=label)
    if hi.any():
        ax.plot(
            x[hi],
            np.full(hi.sum(), top),
            "^",
            ms=ms + 2,
            color=color,
            rasterized=True,
            label=f"above {top:.0e} ULP (drawn at the edge)" if label else None,
        )


ENVELOPE = 2500  # points drawn per curve: the worst input of each run of consecutive inputs


def worst_of_runs(u: np.ndarray, runs: int) -> np.ndarray:
    """Positions in ``u`` of the largest value of each of ``runs`` runs of consecutive values
    (the first one where a run's largest value repeats, as np.argmax), in order; every
    position when there are no more values than runs.  Vectorized: the runs' maxima by one
    reduceat, then the first position in each run that holds its maximum."""
    n = len(u)
    if n <= runs:
        return np.arange(n)
    starts = np.linspace(0, n, runs + 1).astype(int)[:-1]  # n > runs: no run is empty
    if np.isnan(u).any():  # (a NaN is its run's argmax: the loop says so exactly)
        ends = np.append(starts[1:], n)
        return np.array([a + int(np.argmax(u[a:b])) for a, b in zip(starts, ends)])
    top = np.maximum.reduceat(u, starts)
    run = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, n)))
    at = np.flatnonzero(u == top[run])
    first = np.ones(len(at), dtype=bool)
    first[1:] = run[at[1:]] != run[at[:-1]]
    return at[first]


def _errors(r, envelope: bool = True, region=None):
    """(x, ULP error) of finite results (``region``: those with x in [lo, hi]); with
    envelope, the worst of each of ENVELOPE runs of consecutive inputs (the maximum is what
    the eye needs; every run is represented)."""
    e = r.points
    ok = e.cls == 0
    if region is not None:
        ok &= (e.x >= region[0]) & (e.x <= region[1])
    x, u = e.x[ok], np.maximum(e.ulp_err[ok], FLOOR)
    if not envelope or len(x) <= ENVELOPE:
        return x, u
    idx = worst_of_runs(u, ENVELOPE)
    return x[idx], u[idx]


def _top(r) -> float:
    """The largest ULP error a figure draws of a result (floored): its envelope's largest,
    which is the largest of all its finite results (every run is represented)."""
    return float(np.max(_errors(r, envelope=False)[1]))


def error_map(r, color="#1f77b4") -> bytes:
    """The candidate's error map (:func:`error_map_figure`) as PNG bytes."""
    return _png(error_map_figure(r, color))


def error_map_figure(r, color="#1f77b4"):
    """Two panels: first the active region on a linear x axis (where the findings begin and
    the function saturates: reports/weighted.py active_region), every input drawn, with the
    input density when the result is weighted; then the ULP error over the whole format
    (symmetric-log x), failure regions shaded, saturation thresholds and clip range marked."""
    from . import weighted

    fig, (lin, ax) = plt.subplots(2, 1, figsize=(8.4, 7.2))
    weighted.linear_panel(lin, r, color, FLOOR)
    lin.yaxis.set_minor_locator(NullLocator())
    lin.yaxis.set_major_formatter(FLOORED)
    floor_ticks(lin, lin.get_ylim()[1] / 1.5)
    x, u = _errors(r)
    _logy(ax)
    top = _bound_y(ax, u)
    _plot_capped(ax, x, u, top, color, 2, f"{r.candidate} (worst of each run of inputs)")
    for f in r.findings:
        if f.kind in SHADES:
            c, label = SHADES[f.kind]
            for i, (a, b) in enumerate(f.intervals[:200]):
                if np.isfinite(a) and np.isfinite(b):
                    ax.axvspan(
                        a,
                        b if b > a else a * 1.0001 + 1e-30,
                        color=c,
                        alpha=0.25,
                        label=f"{label} ({f.count})" if i == 0 else None,
                    )
    sat = r.saturation or {}
    for side, style in (("low", ":"), ("high", ":")):
        s = sat.get(side)
        if s:
            ax.axvline(s["x"], color="black", ls=style, lw=1, label=f"saturation {side}: x = {s['x']:g}")
    c = r.clip or {}
    for k in ("lo", "hi"):
        if c.get(k) is not None:
            ax.axvline(
                c[k], color="#2ca02c", ls="--", lw=1.2, label=f"clip {k} = {c[k]:g} ({c[k + '_action']})"
            )
    ax.set_ylabel("ULP error")
    _xaxis(ax, r.dtype)
    kind = "exhaustive" if r.domain.exhaustive else "sampled"
    lin.set_title(
        f"{r.candidate}: {r.formats_label} storage, {r.compute} compute ({kind}, {r.domain.count} inputs)"
        f"\n{lin.get_title()}",
        fontsize=10,
    )
    ax.set_title("the whole format, symmetric-log x", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, fontsize=7)
    return fig


def histogram(r, color="#1f77b4") -> bytes:
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    _, u = _errors(r, envelope=False)
    bins = np.logspace(np.log10(FLOOR), np.log10(max(u.max(), 1.0)) + 0.01, 40)
    ax.hist(u, bins=bins, color=color)
    ax.set_xscale("log")
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FLOORED)  # the first bar: errors below the floor, '<0.001'
    ax.xaxis.set_major_locator(FixedLocator([10.0**k for k in range(-3, int(np.log10(bins[-1])) + 1)]))
    _logy(ax)
    ax.set_xlabel("ULP error")
    ax.set_ylabel("inputs")
    ax.set_title(f"{r.candidate} ({r.formats_label}/{r.compute}): ULP errors")
    return _png(fig)


def family_map(results, colors, full: bool = False) -> bytes:
    """The family's small multiples (:func:`family_figure`) as PNG bytes."""
    return _png(family_figure(results, colors, full))


def region_of(results) -> tuple[float, float]:
    """The active region of several results: the union of theirs (reports/weighted.py)."""
    from . import weighted

    spans = [weighted.active_region(r) for r in results]
    return min(a for a, _ in spans), max(b for _, b in spans)


def family_figure(results, colors, full: bool = False):
    """Small multiples: one panel per candidate of a family in one path, the same axes in
    every panel: x over the family's active region, linear (``full``: over the whole format,
    symmetric-log), y from the floor to the family's largest error."""
    n = len(results)
    cols = min(4, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(
        rows, cols, figsize=(3.1 * cols, 2.3 * rows), squeeze=False, sharex=True, sharey=True
    )
    lo, hi = region_of(results)
    top = max(_top(r) if r.points is not None and (r.points.cls == 0).any() else 1.0 for r in results)
    for i, ax in enumerate(axes.flat):
        if i >= n:
            ax.set_visible(False)
            continue
        r = results[i]
        x, u = _errors(r, region=None if full else (lo, hi))
        _logy(ax)
        t = _bound_y(ax, np.array([top]))
        _plot_capped(ax, x, u, t, colors[r.candidate], 1.5)
        if full:
            _xaxis(ax, r.dtype, small=True)
        else:
            ax.set_xlim(lo, hi)
            ax.tick_params(labelsize=7)
            ax.set_xlabel("x (linear)", fontsize=8)
        bad = f", {r.nan_count} NaN" if r.nan_count else ""
        ax.set_title(f"{r.candidate}: max {r.max_ulp:.3g}{bad}", fontsize=8)
        ax.grid(True, alpha=0.3)
        if i % cols == 0:
            ax.set_ylabel("ULP error", fontsize=8)
    r0 = results[0]
    where = "the whole format, symmetric-log x" if full else f"active region [{lo:.3g}, {hi:.3g}], linear x"
    fig.suptitle(
        f"family {r0.candidate.split('.')[0]}: {r0.formats_label} storage, {r0.compute} compute ({where})",
        fontsize=10,
    )
    return fig


def formats_side_by_side(results, color) -> bytes:
    """One candidate in several paths, side by side (:func:`formats_figure`), as PNG bytes."""
    return _png(formats_figure(results, color))


def formats_figure(results, color):
    """One candidate in several paths, side by side, over the paths' active region (linear
    x; each path's own error map also shows the whole format)."""
    n = len(results)
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 3.4), squeeze=False, sharey=True)
    lo, hi = region_of(results)
    top = max(_top(q) for q in results)
    for ax, r in zip(axes[0], results):
        x, u = _errors(r, region=(lo, hi))
        _logy(ax)
        t = _bound_y(ax, np.array([top]))
        _plot_capped(ax, x, u, t, color, 1.5)
        ax.set_xlim(lo, hi)
        ax.set_xlabel("x (linear)", fontsize=8)
        ax.set_title(f"{r.formats_label} / {r.compute}: max {r.max_ulp:.3g} ULP", fontsize=9)
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("ULP error")
    fig.suptitle(f"{results[0].candidate} across formats (active region [{lo:.3g}, {hi:.3g}], linear x)")
    return fig


def heatmap(r) -> bytes:
    """log10 ULP error over the (a, b) grid of a gated unit."""
    e = r.points
    ax_vals = np.unique(e.x)
    n = len(ax_vals)
    grid = np.full((n, n), np.nan)
    ia = np.searchsorted(ax_vals, e.x)
    ib = np.searchsorted(ax_vals, e.x2)
    val = np.where(e.cls == 0, np.log10(np.maximum(e.ulp_err, FLOOR)), np.nan)
    grid[ib, ia] = val
    fig, ax = plt.subplots(figsize=(6, 5))
    im = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis", interpolation="nearest")
    ticks = np.linspace(0, n - 1, 7).astype(int)
    ax.set_xticks(ticks, [f"{ax_vals[t]:.2g}" for t in ticks], rotation=45, fontsize=7)
    ax.set_yticks(ticks, [f"{ax_vals[t]:.2g}" for t in ticks], fontsize=7)
    from audit.oracle.references import get_reference

    names = getattr(get_reference(r.reference), "axis_names", None)  # backward: (x, dy)
    ax.set_xlabel(
        f"{names[0]} (grid index; value labels)" if names else "gate input a (grid index; value labels)"
    )
    ax.set_ylabel(names[1] if names else "up input b")
    fig.colorbar(im, ax=ax, label="log10 ULP error (white: NaN/inf)")
    ax.set_title(f"{r.candidate} ({r.formats_label}/{r.compute}) over ({', '.join(names or ('a', 'b'))})")
    return _png(fig)
