"""How the report's figures are rendered (issue 35, item 9: the report's time): the envelope
of each curve, the per-binade table and a figure's pixels are what the slower ways they
replace gave, exactly."""

import io

import numpy as np
import pytest
from PIL import Image

import audit
from reports import figures
from reports import html as html_report


def _worst_by_loop(u, runs):
    """The definition, one run at a time: the first position of each run's largest value
    (the runs' edges as the report has always cut them: linspace, truncated)."""
    n = len(u)
    if n <= runs:
        return list(range(n))
    edges = np.linspace(0, n, runs + 1).astype(int).tolist()
    return [a + max(range(b - a), key=lambda k: (u[a + k], -k)) for a, b in zip(edges[:-1], edges[1:])]


def test_worst_of_runs_hand_worked():
    u = np.array([1.0, 3.0, 3.0, 2.0, 5.0, 0.0])
    # runs [0, 2), [2, 4), [4, 6): the 3 at 1 (not the one at 2, in the next run), 3 at 2, 5 at 4
    assert figures.worst_of_runs(u, 3).tolist() == [1, 2, 4]
    # a tie inside one run: its first position
    assert figures.worst_of_runs(np.array([7.0, 7.0, 1.0, 1.0]), 2).tolist() == [0, 2]
    assert figures.worst_of_runs(u, 6).tolist() == list(range(6))
    assert figures.worst_of_runs(u, 10).tolist() == list(range(6))
    assert figures.worst_of_runs(np.empty(0), 4).tolist() == []


@pytest.mark.parametrize("n, runs", [(10_007, 2500), (65_280, 2500), (5_001, 900), (2501, 2500)])
def test_worst_of_runs_is_the_loop_with_ties(n, runs):
    rng = np.random.default_rng(n)
    u = rng.integers(0, 4, n).astype(np.float64)  # many ties in every run
    assert figures.worst_of_runs(u, runs).tolist() == _worst_by_loop(u.tolist(), runs)
    u = rng.standard_exponential(n)
    assert figures.worst_of_runs(u, runs).tolist() == _worst_by_loop(u.tolist(), runs)


def test_worst_of_runs_with_a_nan_takes_it_as_its_runs_worst():
    u = np.array([1.0, np.nan, 2.0, 4.0, 3.0, 0.5])
    assert figures.worst_of_runs(u, 2).tolist() == [1, 3]  # np.argmax: the first NaN wins


def _binade_by_masks(r):
    """The per-binade table, one mask per binade and sign (the definition)."""
    p = r.points
    ok = (p.cls == 0) & (p.x != 0)
    x, u = p.x[ok], p.ulp_err[ok]
    ex = np.frexp(np.abs(x))[1] - 1
    rows = []
    for b in sorted(set(ex.tolist())):
        cells = []
        for sel in (x < 0, x > 0):
            m = sel & (ex == b)
            cells += [float(u[m].max()), float(u[m].mean())] if m.any() else [None, None]
        rows.append((int(b), int((ex == b).sum()), *cells))
    return rows


def test_binade_table_is_the_masked_one_bit_for_bit():
    for r in audit.sweep(["gelu.tanh", "gelu.erf"], dtype="fp16,bf16", compute="fp32", keep_points=True):
        got, want = html_report.binade_table(r), _binade_by_masks(r)
        assert [tuple(map(repr, row)) for row in got] == [tuple(map(repr, row)) for row in want]
        assert sum(row[1] for row in got) == int(((r.points.cls == 0) & (r.points.x != 0)).sum())


def _figure():
    """A figure with a legend outside its axes, whose tight box is not the figure."""
    fig, ax = figures.plt.subplots(figsize=(5.13, 2.71))
    x = np.linspace(-6.3, 6.3, 500)
    ax.plot(x, np.abs(np.sin(x)) + 1e-3, ".", ms=2, label="a candidate with a long name")
    ax.axvspan(-3, -2, color="#ff7f0e", alpha=0.25, label="overflow (12)")
    ax.set_yscale("log")
    ax.set_title("title")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, fontsize=7)
    return fig


def test_a_figure_is_drawn_as_savefig_tight_draws_it():
    """figures._png draws once with the tight box it measured: the same pixels as
    savefig(bbox_inches='tight') with its dry run, then the same palette."""
    fig = _figure()
    fig.set_dpi(figures.DPI)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=figures.DPI, bbox_inches="tight")
    figures.plt.close(fig)
    want = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
    want = want.quantize(
        colors=figures.COLORS, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE
    ).convert("RGB")
    got = Image.open(io.BytesIO(figures._png(_figure())))
    assert got.mode == "P" and got.size == want.size
    assert want.size != (513, 271)  # cropped to the tight box, not the figure's size
    assert np.array_equal(np.asarray(got.convert("RGB")), np.asarray(want))


def test_pool_renders_the_same_images_forked_or_spawned(tmp_path, monkeypatch):
    """The forked workers get each job by index, the spawned ones (a process with an
    engine's threads) the job itself: the same PNGs either way, and as rendered here."""
    res = audit.sweep(["gelu.tanh", "gelu.erf"], dtype="fp8_e4m3", keep_points=True)
    rep = html_report.Report(tmp_path)
    colors = figures.color_of([r.candidate for r in res])
    for i, r in enumerate(res * 4):
        rep.img(f"h{i}", (figures.histogram, r, colors[r.candidate]), "h")
    monkeypatch.setattr(html_report.os, "cpu_count", lambda: 2)
    forked = rep.render()
    from audit.measure import executors

    monkeypatch.setattr(executors, "engine_threads", lambda: True)
    spawned = rep.render()
    here = [(j[0], html_report._render(j)) for j in rep.jobs]
    assert forked == spawned == here and len(here) == 8
