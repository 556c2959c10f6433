"""The HTML/PNG report: structure, embedded images, no external resources, escaping."""

import base64
import io
import json
import re

import numpy as np
import pytest
from PIL import Image

import audit
from audit.testing import callable_candidate
from reports import html as html_report

PNG_SIG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("rep")
    res = audit.sweep(
        ["gelu.tanh", "gelu.erfc", "swiglu.silu_mul"], dtype="fp8_e4m3,fp16", keep_points=True, grid=32
    )
    path = html_report.build(res, out, "actaudit report test")
    return out, path.read_text(encoding="utf-8"), res


def test_sections_present(report):
    out, page, res = report
    for h in ("id='summary'", "id='families'", "id='formats'", "id='candidates'"):
        assert h in page
    for r in res:
        assert f">{r.candidate}<" in page
    assert page.count("<table class='sortable'>") == 1
    assert "Per-binade errors" in page and "Clip recommendation" in page and "Findings" in page
    assert "exhaustive" in page and "sampled" in page  # fp16 pairs are a sampled grid
    assert (out / "run.json").exists() and json.loads((out / "run.json").read_text())["results"]


def test_every_embedded_image_is_a_png_and_written_to_disk(report):
    out, page, _ = report
    blobs = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    files = sorted(out.glob("*.png"))
    assert len(blobs) == len(files) >= 8
    for b, f in zip(blobs, files):
        data = base64.b64decode(b)
        assert data.startswith(PNG_SIG) and data == f.read_bytes()
        img = Image.open(io.BytesIO(data))
        img.verify()


def test_no_external_resources(report):
    _, page, _ = report
    assert not re.search(r"""(src|href)\s*=\s*["'](?!data:|#)""", page)
    assert "http://" not in page and "https://" not in page
    assert "<link" not in page and "@import" not in page


def test_user_supplied_names_are_escaped(tmp_path):
    def f(x):
        return x

    f.__qualname__ = "<script>alert(1)</script>"
    cand = callable_candidate(f, "relu", "fp8_e4m3")
    fmt = audit.get_format("fp8_e4m3")
    r = audit.sweep_module.run_candidate(cand, fmt, fmt, audit.inputs.domain(fmt), keep_points=True)
    page = html_report.build([r], tmp_path, "actaudit <b>x</b>").read_text()
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "actaudit &lt;b&gt;x&lt;/b&gt;" in page
    assert page.count("<script>") == 1  # only the report's own sorting script


def test_binade_table_numbers(report):
    _, _, res = report
    r = [x for x in res if x.candidate == "gelu.erfc" and x.dtype == "fp8_e4m3"][0]
    rows = html_report.binade_table(r)
    p = r.points
    ok = (p.cls == 0) & (p.x > 0) & (p.x >= 1) & (p.x < 2)
    (row,) = [row for row in rows if row[0] == 0]
    assert row[4] == pytest.approx(float(p.ulp_err[ok].max()))
    assert row[5] == pytest.approx(float(p.ulp_err[ok].mean()))


def test_report_cli(tmp_path):
    from audit.cli import main

    assert main(["report", "sigmoid.exp", "--dtype", "fp8_e4m3", "--out", str(tmp_path / "r")]) == 0
    assert (tmp_path / "r" / "index.html").exists()
    assert main(["sweep", "relu.max", "--dtype", "fp8_e4m3", "--report", str(tmp_path / "s"), "-q"]) == 0
    assert (tmp_path / "s" / "index.html").exists()
    assert np.all([f.stat().st_size > 1000 for f in (tmp_path / "r").glob("*.png")])


def test_y_axis_bounds_hand_worked():
    """The y axis ends at the decade above the largest error, at most figures.CAP; the floor
    is below every point."""
    import matplotlib.pyplot as plt
    import numpy as np

    from reports import figures

    for u_max, top in ((2043.0, 1e4), (1000.0, 1e3), (0.4, 1.0), (6.38e37, figures.CAP), (1e6, 1e6)):
        fig, ax = plt.subplots()
        ax.set_yscale("log")
        assert figures._bound_y(ax, np.array([0.1, u_max])) == top
        lo, hi = ax.get_ylim()
        assert lo < figures.FLOOR and top <= hi < 2 * top
        plt.close(fig)


def test_binade_figures_against_mpmath():
    """The per-binade table of gelu.erf in fp16 (every input) recomputed with mpmath: for each
    binade b of |x| (a sample of them, among them every one in [2^6, 2^16) where x < 0 and
    gelu(x) underflows far below float64's range), the max and mean of |got - f(x)| / ulp(f(x))
    from the exact value.  A zero result of such an f has error 0 in float64, never the
    oracle's 5e-324 stand-in divided by an ulp (issue 35, item 11: 8.29e-317)."""
    import mpmath as mp

    r = audit.sweep("gelu.erf", dtype="fp16", keep_points=True)[0]
    rows = {row[0]: row for row in html_report.binade_table(r)}
    p = r.points
    mp.mp.prec = 80

    def ulp16(v):
        a = abs(v)
        if a < mp.mpf(2) ** -14:
            return mp.mpf(2) ** -24
        return mp.mpf(2) ** (int(mp.floor(mp.log(a, 2))) - 10)

    for b, neg in [(b, True) for b in range(6, 16)] + [(-3, True), (0, False), (2, True), (4, False)]:
        x = p.x
        sel = (
            (p.cls == 0)
            & (np.abs(x) >= 2.0**b)
            & (np.abs(x) < 2.0 ** (b + 1))
            & ((x < 0) if neg else (x > 0))
        )
        errs = []
        for xi, gi in zip(x[sel], p.got[sel]):
            xm = mp.mpf(float(xi))
            f = xm / 2 * mp.erfc(-xm / mp.sqrt(2))
            errs.append(abs(mp.mpf(float(gi)) - f) / ulp16(f))
        want_max, want_mean = float(max(errs)), float(mp.fsum(errs) / len(errs))
        got_max, got_mean = rows[b][2:4] if neg else rows[b][4:6]
        assert got_max == pytest.approx(want_max, rel=1e-9, abs=0), (b, neg)
        assert got_mean == pytest.approx(want_mean, rel=1e-9, abs=0), (b, neg)


def _region_needed(r, ulp=100.0):
    """The inputs where the candidate is off by at least ``ulp`` ULP (where GELU fails in fp16)."""
    p = r.points
    bad = (p.cls == 0) & (p.ulp_err >= ulp)
    return float(p.x[bad].min()), float(p.x[bad].max())


def test_error_map_opens_on_the_active_region_then_the_whole_format():
    """Issue 35, item 10: the first panel of a candidate's error map is the active region on a
    linear axis (holding every input off by >= 100 ULP and both saturation thresholds, a few
    units wide, not +-65504), the second the whole format on a symmetric-log axis; no floor
    label inside the axes (the floor's tick says '<0.001' instead)."""
    import matplotlib.pyplot as plt

    from reports import figures

    (r,) = audit.sweep("gelu.tanh", dtype="fp16", keep_points=True)
    fig = figures.error_map_figure(r)
    lin, full = fig.axes[0], fig.axes[1]
    lo, hi = lin.get_xlim()
    a, b = _region_needed(r)
    assert lin.get_xscale() == "linear" and lo <= a and b <= hi and hi - lo < 20
    for s in r.saturation.values():
        assert lo <= s["x"] <= hi
    assert full.get_xscale() == "symlog" and full.get_xlim()[0] <= -65504 and full.get_xlim()[1] >= 65504
    fig.canvas.draw()
    for ax in (lin, full):
        assert not [t for t in ax.texts if "floor" in t.get_text()]
        assert "<0.001" in [t.get_text() for t in ax.get_yticklabels()]
    plt.close(fig)
    # the families' small multiples: linear over the family's active region first, full second
    res = audit.sweep(["gelu.tanh", "gelu.erf"], dtype="fp16", keep_points=True)
    colors = figures.color_of([x.candidate for x in res])
    f1 = figures.family_figure(res, colors)
    f2 = figures.family_figure(res, colors, full=True)
    for ax, x in zip(f1.axes, res):
        lo, hi = ax.get_xlim()
        a, b = _region_needed(x)
        assert ax.get_xscale() == "linear" and lo <= a and b <= hi and hi - lo < 20
    assert all(ax.get_xscale() == "symlog" for ax in f2.axes if ax.get_visible())
    plt.close(f1)
    plt.close(f2)


def test_a_nan_region_widens_the_active_region_only_to_where_it_begins():
    """sigmoid.naive gives NaN from x = 11.09 on (exp overflows): the region holds that start,
    not the format's max."""
    from reports import weighted

    (r,) = audit.sweep("sigmoid.naive", dtype="fp16", keep_points=True)
    p = r.points
    first_nan = float(p.x[p.cls == 2].min())
    lo, hi = weighted.active_region(r)
    assert first_nan < hi < 2 * first_nan and lo < -17


def test_a_finding_far_beyond_the_saturation_thresholds_is_left_to_the_full_picture():
    """gelu.erf_rational overflows to inf from x = 64192 on (its rational function's x^k),
    far beyond GELU's fp16 saturation thresholds (-5.73 and 3.45): the linear region stays
    where the function changes (so do its family's small multiples, the union of the
    regions), and the overflow is in the full-range picture."""
    from reports import figures, weighted

    (r,) = audit.sweep("gelu.erf_rational", dtype="fp16", keep_points=True)
    far = [a for f in r.findings for a, b in f.intervals if f.kind == "overflow"]
    assert far and min(far) > weighted.FAR * 6  # (the finding the rule is about exists)
    lo, hi = weighted.active_region(r)
    sat = [s["x"] for s in r.saturation.values()]
    assert lo <= min(sat) and max(sat) <= hi and hi - lo < 12
    (t,) = audit.sweep("gelu.tanh", dtype="fp16", keep_points=True)
    a, b = figures.region_of([r, t])
    assert b - a < 12


def test_report_images_are_palette_pngs_and_the_explorer_opens_linear(tmp_path):
    """Issue 35, item 9: every image is an 8-bit palette PNG (a third of the bytes of RGBA),
    index.html stays within 160 KB per result, the explorer's data opens on the active region
    (linear) and its packed arrays decode to the result's own values."""
    import base64
    import json as json_mod

    res = audit.sweep(["gelu.tanh", "gelu.erf"], dtype="fp16", keep_points=True)
    page = html_report.build(res, tmp_path, "t").read_text(encoding="utf-8")
    pngs = sorted(tmp_path.glob("*.png"))
    assert pngs and all(Image.open(p).mode == "P" for p in pngs)
    assert (tmp_path / "index.html").stat().st_size < 160_000 * len(res)
    m = re.search(r"<script type='application/json' id='pts0'>(.*?)</script>", page)
    d = json_mod.loads(m.group(1))
    x = np.frombuffer(base64.b64decode(d["x"]), "<f4").astype(np.float64)
    got = np.frombuffer(base64.b64decode(d["got"]), "<f4").astype(np.float64)
    r = res[0]
    idx = np.searchsorted(r.points.x, x)
    assert np.array_equal(r.points.x[idx], x) and np.array_equal(r.points.got[idx], got)
    a, b = _region_needed(r)
    assert d["region"][0] <= a and b <= d["region"][1] and d["region"][1] - d["region"][0] < 20
    assert "class='mode'" in page
