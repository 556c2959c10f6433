"""Weighted figures (--distribution, audit/measure/weighting.py): masses, weighted figures checked
against computations made here from the per-input CSV, the gate's weighted tolerances,
the report's linear panel, refusals."""

import json
import math

import ml_dtypes
import mpmath
import numpy as np
import pandas as pd
import pytest
from scipy.special import ndtr

from audit.cli import main
from audit.measure import weighting
from audit.measure.sweep import sweep
from audit.numbers.formats import get_format

BF16 = ml_dtypes.bfloat16


def run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def csv_sweep(tmp_path, capsys, dist):
    code, _, err = run(
        capsys,
        "sweep",
        "gelu.tanh",
        "--dtype",
        "bf16",
        "--compute",
        "bf16",
        "--distribution",
        dist,
        "--csv",
        tmp_path / "p.csv",
        "--json",
        tmp_path / "r.json",
        "-q",
    )
    assert code == 0, err
    rows = pd.read_csv(tmp_path / "p.csv")
    return rows, json.loads((tmp_path / "r.json").read_text())["results"][0]["weighted"]


def bf16_intervals(x: np.ndarray):
    """Rounding intervals of every finite bf16 value (x ascending, -0 before +0), made
    here: midpoints of neighbours, the overflow threshold max + ulp(max)/2 at both ends,
    (-s/2, 0) for -0 and (0, s/2) for +0."""
    fi = ml_dtypes.finfo(BF16)
    top = float(fi.max)
    thr = top + 2.0 ** (127 - 7) / 2
    assert x[0] == -top and x[-1] == top
    lo, hi = np.empty_like(x), np.empty_like(x)
    mid = (x[1:] + x[:-1]) / 2
    lo[1:], hi[:-1] = mid, mid
    lo[0], hi[-1] = -thr, thr
    (z,) = np.nonzero(x == 0)
    assert len(z) == 2 and np.signbit(x[z[0]]) and not np.signbit(x[z[1]])
    s2 = float(fi.smallest_subnormal) / 2
    lo[z[0]], hi[z[0]], lo[z[1]], hi[z[1]] = -s2, 0.0, 0.0, s2
    return lo, hi


def figures_from_csv(rows, m):
    """Weighted mean ULP over finite results and correctly rounded probability, from the
    per-input rows and masses m."""
    fin = rows["class"].isin(["finite", "overflow_miss"]).to_numpy()
    u = rows["ulp_error"].to_numpy()
    got, cr = rows["got"].to_numpy(), rows["correctly_rounded"].to_numpy()
    ok = (got == cr) | (np.isnan(got) & np.isnan(cr))
    mean = math.fsum((m[fin] * u[fin]).tolist()) / math.fsum(m[fin].tolist())
    return mean, math.fsum(m[ok].tolist()) / math.fsum(m.tolist()), u, fin


def test_normal_mean_and_correctly_rounded_equal_the_csv(tmp_path, capsys):
    rows, w = csv_sweep(tmp_path, capsys, "normal:std=1")
    x = rows["x"].to_numpy()
    lo, hi = bf16_intervals(x)
    # P(lo < X < hi) with ndtr, on the side of each interval away from the mean
    m = np.where(
        hi <= 0, ndtr(hi) - ndtr(lo), np.where(lo >= 0, ndtr(-lo) - ndtr(-hi), 1 - ndtr(lo) - ndtr(-hi))
    )
    mean, cr, u, fin = figures_from_csv(rows, m)
    assert w["distribution"] == "normal:std=1.0"
    assert w["mean_ulp"] == pytest.approx(mean, rel=1e-9)
    assert w["correctly_rounded"] == pytest.approx(cr, rel=1e-9)
    assert w["mass"]["swept"] == pytest.approx(1.0, rel=1e-12) and w["mass"]["outside"] == 0.0
    # the weighted p99, from exact sums of the same masses (integers: multiples of 2^-1100)
    mf = m[fin]
    order = np.argsort(u[fin], kind="stable")
    ints = [n << (1100 - d.bit_length() + 1) for n, d in (v.as_integer_ratio() for v in mf[order].tolist())]
    cum = np.cumsum(np.array(ints, dtype=object))
    i = order[int(np.argmax(100 * cum >= 99 * cum[-1]))]
    assert w["p99_ulp"] == pytest.approx(float(u[fin][i]), rel=1e-12)
    # what the issue asks to see: under N(0, 1) the p99 is worse than over all values
    unweighted = np.sort(u[fin])[math.ceil(0.99 * fin.sum()) - 1]
    assert w["p99_ulp"] > 4 * unweighted


def test_npy_sample_frequencies_equal_the_csv(tmp_path, capsys):
    g = np.random.default_rng(7)
    s = np.concatenate(
        [g.normal(0, 2, 20000), [np.nan, np.inf, -np.inf, 1e39, -5e-42, 0.0], g.laplace(0, 1, 999)]
    ).astype(np.float64)
    np.save(tmp_path / "acts.npy", s)
    rows, w = csv_sweep(tmp_path, capsys, f"npy:{tmp_path / 'acts.npy'}")
    # empirical counts of the samples rounded to bf16 (ml_dtypes' cast: nearest even), by bit
    # pattern (-5e-42 rounds to -0, which is its own input)
    fin = s[np.isfinite(s)]
    with np.errstate(over="ignore"):
        r = fin.astype(BF16)
    keys, counts = np.unique(r[np.isfinite(r.astype(np.float64))].view(np.uint16), return_counts=True)
    freq = dict(zip(keys.tolist(), counts.tolist()))
    bits = rows["x"].to_numpy().astype(BF16).view(np.uint16)
    m = np.array([freq.get(b, 0) for b in bits.tolist()], dtype=np.float64) / len(s)
    mean, cr, _, _ = figures_from_csv(rows, m)
    assert w["mean_ulp"] == pytest.approx(mean, rel=1e-9)
    assert w["correctly_rounded"] == pytest.approx(cr, rel=1e-9)
    n = len(s)
    assert w["mass"]["samples"] == n
    assert w["mass"]["nonfinite_samples"] == {"nan": 1, "inf": 1, "-inf": 1}
    assert w["mass"]["overflow"] == pytest.approx(1 / n) and w["mass"]["nonfinite"] == pytest.approx(3 / n)
    assert w["mass"]["swept"] == pytest.approx((n - 4) / n, rel=1e-12)
    assert w["mass"]["outside"] == pytest.approx(4 / n, rel=1e-12)
    assert freq[0x8000] >= 1 and m[bits == 0x8000][0] > 0  # -0 has its own mass


def _mp_mass(cdf, a, b):
    with mpmath.workdps(400):
        return float(cdf(mpmath.mpf(b)) - cdf(mpmath.mpf(a)))


@pytest.mark.parametrize(
    "spec,cdf",
    [
        ("normal:std=1", lambda v: mpmath.ncdf(v)),
        ("normal:std=0.5,mean=0.25", lambda v: mpmath.ncdf(v, 0.25, 0.5)),
        (
            "laplace:scale=2",
            lambda v: (
                mpmath.mpf(0.5) * mpmath.exp(v / 2) if v < 0 else 1 - mpmath.mpf(0.5) * mpmath.exp(-v / 2)
            ),
        ),
    ],
)
def test_masses_keep_their_relative_precision_in_the_tails(spec, cdf):
    d = weighting.parse(spec)
    fmt = get_format("fp16")
    x = np.array([-0.0, 0.0, 6e-8, 1.0, 3.5, 8.0, 17.0, 30.0, -25.0, 1000.0, 65504.0, -65504.0])
    x = fmt.round(x)
    m = weighting.masses(d, fmt, x)
    lo, hi = weighting.edges(fmt, x)
    for xi, mi, a, b in zip(x, m, lo, hi):
        # edges made here: midpoints with the neighbours; the overflow threshold at +-max
        ulp = 2.0 ** (max(math.frexp(abs(xi))[1] - 1, -14) - 10)
        if xi == 0:
            ea, eb = (-(2.0**-25), 0.0) if math.copysign(1, xi) < 0 else (0.0, 2.0**-25)
        elif abs(xi) == 65504.0:
            ea, eb = (65504.0 - 16.0, 65520.0) if xi > 0 else (-65520.0, -65504.0 + 16.0)
        else:
            down = ulp / 2 if abs(xi) == 2.0 ** (math.frexp(abs(xi))[1] - 1) and abs(xi) > 2**-14 else ulp
            ea, eb = (xi - down / 2, xi + ulp / 2) if xi > 0 else (xi - ulp / 2, xi + down / 2)
        assert (a, b) == (ea, eb), xi
        exact = _mp_mass(cdf, a, b)
        assert mi == pytest.approx(exact, rel=1e-11, abs=0 if exact > 1e-300 else 1e-300), (spec, xi)


def test_masses_add_up_with_overflow_and_zero_counted_once():
    fmt = get_format("fp16")
    x = fmt.finite_values()
    for spec in ("normal:std=3000", "uniform:lo=-70000,hi=1.5", "laplace:scale=0.001"):
        d = weighting.parse(spec)
        m = weighting.masses(d, fmt, x)
        out = weighting.outside(d, fmt, float(x[0]), float(x[-1]))
        assert out["outside"] == out["below"] + out["above"]
        assert math.fsum(m.tolist()) + out["outside"] == pytest.approx(1.0, rel=1e-12)
        if spec.startswith("normal"):  # P(|X| >= 65520) for std 3000: no double count at 0
            assert out["overflow"] == pytest.approx(2 * float(ndtr(-65520 / 3000)), rel=1e-12)
    fp4 = get_format("fp4_e2m1")  # saturating: +-6 take everything beyond, nothing overflows
    d = weighting.parse("normal:std=4")
    m = weighting.masses(d, fp4, fp4.finite_values())
    assert math.fsum(m.tolist()) == pytest.approx(1.0, rel=1e-14)
    assert m[-1] == pytest.approx(float(ndtr(-5 / 4)), rel=1e-12)  # [5, inf): 6 and beyond
    whole = weighting.outside(d, fp4, -6.0, 6.0)
    assert whole == {"outside": 0.0, "below": 0.0, "above": 0.0, "overflow": 0.0}
    part = weighting.outside(d, fp4, -2.0, 2.0)  # inputs in [-2, 2]: draws beyond +-2.5 outside
    assert part["below"] == part["above"] == pytest.approx(float(ndtr(-2.5 / 4)), rel=1e-12)
    fnuz = get_format("fp8_e4m3fnuz")  # no -0: +0 takes the whole interval around 0
    (lo,), (hi,) = weighting.edges(fnuz, np.array([0.0]))
    assert lo == -hi == -fnuz.smallest_subnormal / 2
    u = weighting.parse("uniform:lo=-1,hi=1")
    assert weighting.masses(u, fnuz, np.array([0.0]))[0] == pytest.approx(fnuz.smallest_subnormal / 2)


def test_weighted_quantile_is_exact():
    m = np.full(100, 0.1)
    u = np.arange(100.0)[::-1].copy()
    # exactly: 99 of 100 equal masses reach 99/100 of the total, so p99 is the 99th smallest
    assert weighting.weighted_quantile(m, u, 99, 100) == 98.0
    assert weighting.weighted_quantile(np.array([0.25, 0.25, 0.5]), np.array([3.0, 1.0, 2.0]), 1, 2) == 2.0
    assert weighting.weighted_quantile(np.array([0.5, 0.5]), np.array([1.0, 2.0]), 1, 2) == 1.0
    tiny = np.array([1e-300, 1.0, 5e-324])
    assert weighting.weighted_quantile(tiny, np.array([7.0, 1.0, 9.0]), 999, 1000) == 1.0
    assert weighting.weighted_quantile(tiny, np.array([7.0, 1.0, 9.0]), 1, 1) == 9.0


def test_nan_and_flushed_results_have_their_probability():
    f = lambda x: np.where(x > 1, np.nan, np.where(x < -3, 0.0, 1 / (1 + np.exp(-x))))  # noqa: E731
    (r,) = sweep(f, "fp16", reference="sigmoid", distribution="normal:std=1")
    w = r.weighted
    # fp16 inputs above 1 start at 1 + 2^-10: the draws above the midpoint 1 + 2^-11;
    # those below -3 start at -3 - 2^-9 (ulp 2^-9 in [2, 4)): the draws below -3 - 2^-10
    assert w["nan"] == pytest.approx(float(ndtr(-(1 + 2**-11))), rel=1e-12)
    assert w["underflow"] == pytest.approx(float(ndtr(-3 - 2**-10)), rel=1e-12)
    assert w["finite"] == pytest.approx(1 - w["nan"], rel=1e-12)
    assert math.isfinite(w["mean_ulp"])  # NaN results do not poison the mean: they are counted
    assert r.to_dict()["weighted"]["nan"] == w["nan"]


SPEC = """
baseline = "base.json"

[[audit]]
name = "w"
targets = ["gelu.tanh"]
dtype = "bf16"
compute = "bf16"
distribution = "normal:std=1"
tolerance = {{ {tol} }}

[[audit]]
name = "plain"
targets = ["gelu.tanh"]
dtype = "fp8_e4m3"
tolerance = {{ {plain} }}
"""


def test_gate_weighted_tolerances(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "actaudit.toml").write_text(SPEC.format(tol="weighted_p99_ulp = 20", plain=""))
    code, _, err = run(capsys, "baseline")
    assert code == 0, err
    base = json.loads((tmp_path / "base.json").read_text())
    ent = next(e for k, e in base["entries"].items() if k.startswith("w/"))
    assert ent["weighted"]["distribution"] == "normal:std=1.0"
    assert 1 < ent["weighted"]["p99_ulp"] < 20
    code, out, err = run(capsys, "check")
    assert code == 0, out + err
    # a tolerance the candidate breaks (its weighted p99 is ~8.4 ULP), and one that cannot
    # be computed (no distribution on that audit)
    (tmp_path / "actaudit.toml").write_text(
        SPEC.format(tol="weighted_p99_ulp = 2, weighted_underflow = 0.5", plain="weighted_mean_ulp = 100")
    )
    code, out, err = run(capsys, "check")
    assert code == 1
    assert "weighted p99_ulp" in out and "exceeds the tolerance" in out
    assert "weighted_mean_ulp' cannot be computed" in out
    assert "weighted underflow" not in out  # within its tolerance
    # the baseline's distribution is part of what it compares
    (tmp_path / "actaudit.toml").write_text(
        SPEC.format(tol="weighted_p99_ulp = 20", plain="").replace("std=1", "std=2")
    )
    code, out, _ = run(capsys, "check")
    # (the identity of the run names the distribution: a changed one is never compared)
    assert code == 1 and "distribution" in out and "re-record with actaudit baseline" in out
    # hostile baselines and specs: one line, exit 2
    ent["weighted"]["extra"] = 1
    (tmp_path / "base.json").write_text(json.dumps(base))
    code, _, err = run(capsys, "check")
    assert code == 2 and "weighted.extra" in err and "Traceback" not in err
    (tmp_path / "actaudit.toml").write_text(SPEC.format(tol="weighted_nan = 2", plain=""))
    code, _, err = run(capsys, "check")
    assert code == 2 and "weighted_nan" in err and "probability" in err
    (tmp_path / "actaudit.toml").write_text(SPEC.format(tol="", plain="").replace("std=1", "std=-1"))
    code, _, err = run(capsys, "check")
    assert code == 2 and "distribution" in err


def test_worse_weighted_figure_fails_against_the_baseline():
    from audit.gate.check import _show

    now = {"distribution": "normal:std=1.0", **{k: 0.5 for k in weighting.BASELINE_FIGURES}}
    base = dict(now, p99_ulp=0.25, correctly_rounded=0.75)
    fails, better = weighting.against_baseline(1e-9, now, base, _show)
    assert any("p99_ulp got worse" in f for f in fails)
    assert any("correctly_rounded got worse" in f for f in fails)
    fails, better = weighting.against_baseline(1e-9, base, now, _show)
    assert not fails and len(better) == 2
    assert weighting.against_baseline(1e-9, None, base, _show)[0]


def test_refusals_are_one_line(tmp_path, capsys):
    np.save(tmp_path / "c.npy", np.array([1 + 2j]))
    np.save(tmp_path / "nan.npy", np.array([np.nan, np.inf]))
    np.save(tmp_path / "obj.npy", np.array([1, "a"], dtype=object), allow_pickle=True)
    (tmp_path / "trunc.npy").write_bytes((tmp_path / "c.npy").read_bytes()[:-4])
    for args, msg in [
        (("--dtype", "fp32"), "--exhaustive"),
        (("--distribution", "cauchy:scale=1"), "unknown distribution"),
        (("--distribution", "normal:std=1,std=2"), "given once"),
        (("--distribution", "uniform:lo=1,hi=1"), "lo < hi"),
        (("--distribution", f"npy:{tmp_path / 'c.npy'}"), "real numbers"),
        (("--distribution", f"npy:{tmp_path / 'nan.npy'}"), "no finite samples"),
        (("--distribution", f"npy:{tmp_path / 'obj.npy'}"), "object"),
        (("--distribution", f"npy:{tmp_path / 'trunc.npy'}"), "truncated"),
        (("--distribution", f"npy:{tmp_path / 'none.npy'}"), "not found"),
        (("--distribution", "normal:std=1", "--range", "2e4:3e4", "--dtype", "fp16"), "no mass"),
    ]:
        a = ["sweep", "gelu.tanh", "--compute", "bf16", *args]
        if "--distribution" not in args:
            a += ["--distribution", "normal:std=1"]
        if "--dtype" not in args:
            a += ["--dtype", "bf16"]
        code, _, err = run(capsys, *a)
        assert code == 2 and msg in err and len(err.strip().splitlines()) == 1, (args, err)
    code, _, err = run(capsys, "sweep", "swiglu", "--dtype", "fp8_e4m3", "--distribution", "normal:std=1")
    assert code == 2 and "one input" in err


def test_table_suggest_and_report(tmp_path, capsys):
    code, out, err = run(
        capsys, "sweep", "gelu.tanh", "--dtype", "fp8_e4m3", "--distribution", "normal:std=1"
    )
    assert code == 0, err
    assert "weighted by normal:std=1.0: mean" in out
    code, out, _ = run(
        capsys, "sweep", "gelu.tanh", "--dtype", "fp8_e4m3", "--distribution", "laplace:scale=1", "-w"
    )
    assert "w p99" in out.splitlines()[1]
    code, _, err = run(capsys, "suggest", "gelu", "--dtype", "fp8_e4m3", "--rank", "weighted_p99")
    assert code == 2 and "needs --distribution" in err
    code, out, err = run(
        capsys,
        "suggest",
        "silu",
        "--dtype",
        "fp8_e4m3",
        "--distribution",
        "normal:std=1",
        "--rank",
        "weighted_p99",
        "--brief",
        "--json",
        "-",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["rank"] == "weighted_p99"
    # correctness first (as without weights), then the weighted p99 within each group
    groups = {}
    for e in doc["ranking"]:
        key = (e["nan_count"] + e["inf_count"] > 0, e["special_failures"] > 0)
        groups.setdefault(key, []).append(float(e["weighted"]["p99_ulp"]))
    assert max(len(g) for g in groups.values()) >= 2
    assert all(g == sorted(g) for g in groups.values())
    assert list(groups) == sorted(groups)
    # the report's error map: the overview above, the linear active region with the
    # density below (the whole page was looked at in Chromium); the weighted figures
    # beside the unweighted ones
    import io

    from matplotlib.image import imread

    from reports import figures, html
    from reports import weighted as wrep

    (r,) = sweep("gelu.tanh", "fp8_e4m3", "fp8_e4m3", distribution="normal:std=1", keep_points=True)
    png = imread(io.BytesIO(figures.error_map(r)))
    assert png.shape[0] > 1.5 * 3.8 / 9 * png.shape[1]  # two panels of 9 x 3.8 inches, stacked
    part = wrep.html_table(r, html.e)
    assert "weighted by normal:std=1.0" in part and "(the worst case is not weighted)" in part
    lo, hi = wrep.active_region(r)
    from scipy.stats import norm

    assert (lo, hi) == pytest.approx((norm.ppf(0.0005) * 1.1 - 0.0, norm.ppf(0.9995) * 1.1), rel=1e-9)
