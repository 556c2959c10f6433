"""The figure of ``actaudit model --effect --report``: the effect ranking (matplotlib, SVG).

One horizontal bar per site, in rank order from the top (rank 1 first), and one for all
sites replaced at once below a dashed line.  A bar's length is the site's largest change
of a graph output relative to that output's largest magnitude, on a log axis of whole
decades from the decade below the smallest nonzero value to the decade above the largest.
A dark diamond on each bar marks the mean change relative to the same magnitude (the
ranking's last key: a low-precision output often moves by one unit in its last place at
every site).  Red: a top-1 answer changes (argmax) or an output becomes non-finite (drawn
to the right edge); grey: all sites at once; a site that changes nothing has no bar ("no
change").

The SVG keeps its text as text (``svg.fonttype`` none) and names each bar's group
``effect-bar-SITE`` (``effect-bar-joint`` for all at once), so that the picture can be read
back: tests/test_model_report.py checks its order and lengths.
"""

from __future__ import annotations

import io
import math

from reports.cells import num

WIDTH_IN = 7.6  # inches at 100 dpi: 760 px, the width of the page's other figures
ROW_IN = 0.3
MARGIN_IN = 1.1


def relative_effect(outputs: dict, key: str = "max_abs") -> tuple[float, float]:
    """(largest ``key`` (max_abs or mean_abs) / scale over the outputs, largest argmax
    change): inf where an output changes to or from a non-finite value (or changes and has
    no finite scale)."""
    r, arg = 0.0, 0.0
    for o in outputs.values():
        ma = _f(o.get(key)) or 0.0
        s = _f(o.get("scale")) or 0.0
        v = ma / s if s > 0 else (math.inf if ma > 0 else 0.0)
        if _f(o.get("nonfinite_changed")):
            v = math.inf
        r = max(r, v)
        arg = max(arg, _f(o.get("argmax_changed")) or 0.0)
    return r, arg


def _f(v):
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return None
    if isinstance(v, bool):
        return float(v)
    return float(v) if isinstance(v, (int, float)) else None


def effect_ranking_svg(rows: list[tuple[str, str, dict]]) -> bytes:
    """The picture of ``rows``: (key, label, outputs) in rank order, the joint effect last
    with key 'joint'.  SVG bytes (deterministic: no date, fixed ids)."""
    # first: the Agg backend, plain text (no mathtext, no TeX)
    from reports.figures import PLAIN, FixedLocator, NullLocator, matplotlib, plt

    vals = [relative_effect(o) for _, _, o in rows]
    means = [relative_effect(o, "mean_abs")[0] for _, _, o in rows]
    fin = [v for v, _ in vals if 0 < v < math.inf] + [v for v in means if 0 < v < math.inf]
    lo = math.floor(math.log10(min(fin))) - 1 if fin else -8
    hi = math.ceil(math.log10(max(fin))) if fin else 0
    hi = max(hi, lo + 2)
    left, right = 10.0**lo, 10.0**hi
    n = len(rows)
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "actaudit", "font.size": 9}):
        fig, ax = plt.subplots(figsize=(WIDTH_IN, MARGIN_IN + ROW_IN * max(n, 1)), dpi=100)
        ax.set_xscale("log")
        ax.set_xlim(left, right)
        ax.set_ylim(n - 0.5, -0.5)  # rank 1 at the top
        ax.xaxis.set_major_locator(FixedLocator([10.0**k for k in range(lo, hi + 1)]))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(PLAIN)
        ax.set_yticks(range(n))
        ax.set_yticklabels([label for _, label, _ in rows])
        ax.tick_params(axis="y", length=0)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        ax.grid(axis="x", color="#dddddd", linewidth=0.6)
        ax.set_axisbelow(True)
        for k, ((key, _, _), (v, arg)) in enumerate(zip(rows, vals)):
            joint = key == "joint"
            if joint and k:
                ax.axhline(k - 0.5, color="#888888", linestyle="--", linewidth=0.8)
            if v > 0:
                red = arg > 0 or math.isinf(v)
                color = "#c0392b" if red else ("#7f8c8d" if joint else "#4a7bd0")
                end = right if math.isinf(v) else v
                bar = ax.barh(k, end - left, left=left, height=0.62, color=color)
                bar.patches[0].set_gid(f"effect-bar-{key}")
                text = "non-finite output" if math.isinf(v) else num(v)
                mean = means[k]
                if 0 < mean < math.inf:  # the mean change: the ranking's last key
                    (mk,) = ax.plot(
                        [mean], [k], marker="D", markersize=4.5, color="#1b2631", linestyle="none"
                    )
                    mk.set_gid(f"effect-mean-{key}")
            else:
                text = "no change"
            if arg > 0:
                text += f", argmax {num(100 * arg, 2)}%"
            x = right if math.isinf(v) else max(v, left)
            inside = math.isinf(v) or math.log10(x) > hi - 0.25 * (hi - lo)
            ax.text(
                x / 1.15 if inside else x * 1.15,
                k,
                text,
                va="center",
                ha="right" if inside else "left",
                color="white" if inside and v > 0 else "#222222",
                fontsize=8,
            )
        ax.set_xlabel(
            "largest |output change| (bar) and mean |output change| (\u25c6) / largest |output| (log scale)"
        )
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
        plt.close(fig)
    return buf.getvalue()
