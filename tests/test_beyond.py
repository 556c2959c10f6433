"""Exact values beyond float64's range, overflow misses, and NaN/inf in every reduction.

Every expected figure is computed here with mpmath from the definitions in the README:
ULP error |r - f| / ulp_F(f), ulp_F(f) = 2**(max(e, emin) - p + 1), e = floor(log2 |f|)
(unbounded above: f beyond F's range still has an ulp), relative error |r - f| / |f|.
"""

import math
import re

import mpmath as mp
import numpy as np
import pytest

import audit
from audit.cli import main
from audit.measure.metrics import FINITE, OVERFLOW_MISS, PointErrors, Summary, point_errors
from audit.measure.sweep import run_candidate
from audit.numbers.formats import get_format
from audit.numbers.inputs import domain
from audit.oracle import oracle
from audit.oracle.oracle import OracleValues
from audit.oracle.references import REFERENCES
from audit.targets.engines import wrap_callable


def mp_ulp_error(r: float, f, fmt) -> float:
    with mp.workprec(300):
        e = int(mp.floor(mp.log(abs(f), 2)))
        return float(abs(mp.mpf(r) - f) / mp.mpf(2) ** (max(e, fmt.emin) - fmt.p + 1))


def test_exp_cephes_bf16_beyond_float64():
    """exp.cephes clamps to 2**127 (2.1267647932558654e38) in bf16; exp(712) = 1.07e309
    exceeds float64, yet its ULP error is finite: 146.92 at 712, at most 250.67 (716)."""
    f = get_format("bf16")
    (r,) = audit.sweep("exp.cephes", dtype="bf16", range=(700, 720), keep_points=True)
    e = r.points
    with mp.workprec(300):
        want = [mp_ulp_error(g, mp.exp(mp.mpf(x)), f) for x, g in zip(e.x.tolist(), e.got.tolist())]
        rel = [
            float(abs(mp.mpf(g) - mp.exp(mp.mpf(x))) / mp.exp(mp.mpf(x)))
            for x, g in zip(e.x.tolist(), e.got.tolist())
        ]
    assert e.ulp_err.tolist() == pytest.approx(want, rel=1e-12)
    i712 = e.x.tolist().index(712.0)
    assert round(want[i712], 2) == 146.92 and round(max(want), 2) == 250.67
    assert r.max_ulp == pytest.approx(max(want), rel=1e-12) and r.worst["x"] == 716.0
    assert r.max_rel == max(rel) == 1.0  # 1 - 2.1e38 / 1e304 rounds to 1
    assert np.isfinite([r.mean_ulp, r.p99_ulp, r.max_ulp]).all()
    assert r.mean_ulp == pytest.approx(sum(want) / len(want), rel=1e-12)
    # every result is finite where exp overflows bf16: overflow misses, counted and found
    assert (e.cls == OVERFLOW_MISS).all() and r.overflow_miss_count == len(e.x) == r.summary.finite
    ovf = [x for x in r.findings if x.kind == "overflow"]
    assert ovf and ovf[0].count == len(e.x) and ovf[0].intervals[0] == [700.0, 720.0]


def test_overflow_miss_is_classed_counted_and_shown(capsys):
    """min(exp(x), 448) in fp8_e4m3: 448 against e^192 is 15.97 ULP of e^192, but e^192
    overflows E4M3 (RN is NaN): an overflow miss, a finding, a column in the table."""
    f = get_format("fp8_e4m3")
    c = wrap_callable(
        lambda x: np.minimum(np.exp(x.astype(np.float64)), 448.0).astype(x.dtype), "exp", "fp8_e4m3"
    )
    r = run_candidate(c, f, f, domain(f, None), {}, keep_points=True)
    e = r.points
    # the inputs whose exp overflows E4M3: e^x >= 464 (448 + half its ulp of 32)
    over = e.x >= math.log(464)
    assert np.array_equal(e.cls == OVERFLOW_MISS, over)
    assert r.overflow_miss_count == int(over.sum()) == 50
    i = e.x.tolist().index(192.0)
    with mp.workprec(300):
        assert e.ulp_err[i] == pytest.approx(mp_ulp_error(448.0, mp.exp(192), f), rel=1e-12)
    assert round(float(e.ulp_err[i]), 2) == 15.97
    ovf = [x for x in r.findings if x.kind == "overflow"][0]
    assert ovf.count == 50 and ovf.intervals == [[6.5, 448.0]]
    d = r.to_dict()
    assert d["overflow_miss_count"] == 50
    code = main(
        ["sweep", "exp.cephes", "--dtype", "bf16", "--compute", "bf16", "--range", "700:720", "--wide"]
    )
    out = capsys.readouterr().out
    assert code == 0
    head = [ln for ln in out.splitlines() if ln.startswith("candidate")][0]
    cols = re.split(r"\s{2,}", head.strip())
    row = re.split(r"\s{2,}", [ln for ln in out.splitlines() if ln.startswith("exp.cephes")][0].strip())
    assert row[cols.index("miss")] == "6" and row[cols.index("inf")] == "0"
    code = main(["sweep", "exp.cephes", "--dtype", "bf16", "--compute", "bf16", "--range", "700:720"])
    out = capsys.readouterr().out  # the compact table too: an ovf column where there are misses
    head = [ln for ln in out.splitlines() if ln.startswith("candidate")][0].split()
    row = [ln for ln in out.splitlines() if ln.startswith("exp.cephes")][0].split()
    assert head[-1] == "miss" and row[-1] == "6"


def test_beyond_errors_fp64_against_mpmath():
    """fp64: exp(710) = 2.2e308 > DBL_MAX; the result DBL_MAX is 1.21e-2 of f below it."""
    f = get_format("fp64")
    got = np.array([np.finfo(np.float64).max, 1.0, -1.0])
    x = np.array([710.0, 710.0, 800.0])
    u, a, rel = oracle.beyond_errors(REFERENCES["exp"], f, x, got, {})
    with mp.workprec(400):
        for k in range(3):
            fx = mp.exp(mp.mpf(x[k]))
            assert u[k] == pytest.approx(mp_ulp_error(got[k], fx, f), rel=1e-14)
            assert rel[k] == float(abs(mp.mpf(got[k]) - fx) / fx)
    assert a[0] == pytest.approx(float(mp.exp(710) - mp.mpf(got[0])), rel=1e-14)
    assert math.isinf(a[2])  # e^800 - (-1) exceeds float64: the float64 of it is inf


def test_no_beyond_callback_gives_bounds_not_nan():
    """Without the exact value: ULP error inf (unknown), relative error 1 in formats whose
    values are far below float64's range (1 - r/f, |r/f| < 2**-896, rounds to 1)."""
    f = get_format("bf16")
    got = np.array([2.0**127])
    ov = OracleValues(np.array([np.inf]), np.array([np.inf]), np.zeros(1), 0)
    e = point_errors(np.array([712.0]), got, ov, f)
    assert e.cls[0] == OVERFLOW_MISS and math.isinf(e.ulp_err[0]) and e.rel_err[0] == 1.0


def _points(u, a=None, r=None, cls=None):
    u = np.asarray(u, dtype=float)
    n = len(u)
    z = np.zeros(n)
    return PointErrors(
        np.arange(n, dtype=float),
        z,
        z,
        z,
        z,
        u,
        np.zeros(n, np.int64),
        u.copy() if a is None else np.asarray(a, float),
        u.copy() if r is None else np.asarray(r, float),
        np.full(n, FINITE, np.int8) if cls is None else np.asarray(cls, np.int8),
        np.zeros(n, bool),
    )


@pytest.mark.parametrize("exact_p99", [True, False])
@pytest.mark.parametrize("order", ["nan_first", "nan_last"])
def test_nan_and_inf_never_vanish_from_a_reduction(exact_p99, order):
    """A NaN in any per-input error, fed to add() and merge() in either order and in both
    p99 modes, shows as NaN in the maximum (never erased by max(0.0, nan) = 0.0); inf
    is a maximum like any other."""
    H = get_format("fp16")
    clean = _points([0.25, 3.0, 1.0])
    poisoned = _points([0.5, np.nan, 2.0], a=[np.nan, 1.0, 1.0], r=[1.0, 1.0, np.nan])
    parts = [poisoned, clean] if order == "nan_first" else [clean, poisoned]
    total = Summary(exact_p99=exact_p99)
    for p in parts:
        s = Summary(exact_p99=exact_p99)
        s.add(p, H)
        assert math.isnan(s.max_ulp) == (p is poisoned)
        total.merge(s)
    assert math.isnan(total.max_ulp) and total.worst["x"] == 1.0
    assert math.isnan(total.max_abs) and math.isnan(total.max_rel)
    assert math.isnan(total.mean_ulp)
    # a single summary fed both chunks directly
    one = Summary(exact_p99=exact_p99)
    for p in parts:
        one.add(p, H)
    assert math.isnan(one.max_ulp) and math.isnan(one.max_abs) and math.isnan(one.max_rel)
    # inf: the maximum is inf; the p99 of a sample whose top 1% is inf is inf, not NaN
    inf = _points([1.0] * 98 + [np.inf, np.inf])
    s = Summary(exact_p99=exact_p99)
    s.add(inf, H)
    s.merge(Summary(exact_p99=exact_p99))
    assert s.max_ulp == math.inf and s.max_abs == math.inf and s.mean_ulp == math.inf
    assert s.p99_ulp == math.inf


def test_p99_with_nan_is_nan_not_a_number():
    H = get_format("fp16")
    for exact_p99 in (True, False):
        s = Summary(exact_p99=exact_p99)
        s.add(_points([1.0] * 50 + [np.nan] * 50), H)
        assert math.isnan(s.p99_ulp)


def test_selftest_checks_values_beyond_float64(monkeypatch):
    from audit.measure import selftest

    checks = selftest.run(["exp"], ("fp16", "bf16"))
    beyond = [c for c in checks if "beyond" in c.fmt]
    assert [c.fmt for c in beyond] == ["fp16 beyond float64", "bf16 beyond float64"]
    assert all(c.points > 0 and c.disagreements == 0 for c in checks)
    # metrics that give up beyond float64 (the old inf) fail it
    monkeypatch.setattr(
        oracle, "beyond_errors", lambda ref, fmt, x, g, params, x2=None: (np.full(len(x), np.inf),) * 3
    )
    checks = selftest.run(["exp"], ("bf16",))
    assert [c.fmt for c in checks if c.disagreements] == ["bf16 beyond float64"]


def test_round_mpf_of_minus_infinity():
    """mpmath's -inf is (1, 0, -789, -3), not the sign-flipped +inf (0, 0, -456, -2): it
    rounded to NaN before (log(0) = -inf in fp64 came out NaN)."""
    for name, want in (
        ("fp16", -math.inf),
        ("bf16", -math.inf),
        ("fp32", -math.inf),
        ("fp64", -math.inf),
        ("fp8_e5m2", -math.inf),
    ):
        assert get_format(name).round_mpf(mp.ninf) == want
        assert get_format(name).round_mpf(mp.inf) == math.inf
    assert math.isnan(get_format("fp8_e4m3").round_mpf(mp.ninf))  # E4M3FN: no infinities


@pytest.mark.parametrize("name", ["exp", "expm1", "exp2"])
def test_beyond_float64_without_mpmath_matches_mpmath(name):
    """The vectorized figures beyond float64 (from frac(log2 |f|): x log2 e with log2 e in
    26-bit pieces, each product exact) against mpmath at every bf16 input beyond float64 and
    at fp32 inputs up to the largest."""
    ref = REFERENCES[name]
    for fmt_name in ("bf16", "fp32"):
        fmt = get_format(fmt_name)
        if fmt.enumerable:
            x = fmt.finite_values()
        else:
            x = np.unique(
                np.concatenate([np.geomspace(710, 3.4e38, 300), [np.float32(3.4028234663852886e38)]])
            )
            x = fmt.round(x)
        x = x[x >= (710 if name != "exp2" else 1024)]
        got = np.full(len(x), fmt.max_finite)
        no_mp = __import__("dataclasses").replace(ref, mp=None)  # mpmath must not be needed
        fast = oracle.beyond_errors(no_mp, fmt, x, got, {})
        for i in np.linspace(0, len(x) - 1, 60).astype(int).tolist():
            xi = float(x[i])
            with mp.workprec(200 + 2 * math.frexp(xi)[1]):
                f = mp.exp(mp.mpf(xi)) if name != "exp2" else mp.power(2, mp.mpf(xi))
                if name == "expm1":
                    f -= 1
                e = mp.floor(mp.log(f, 2))
                u = float((f - fmt.max_finite) / mp.mpf(2) ** (e - fmt.p + 1))
            assert fast[0][i] == pytest.approx(u, rel=2.0**-40), (name, fmt_name, xi)
            assert fast[2][i] == 1.0 and fast[1][i] == math.inf


def test_assert_accuracy_fails_on_overflow_misses():
    """exp.cephes in bf16 clamps at 2^127 where e^x overflows bf16 (x >= 88.72...): small
    ULP errors, but every such input is an overflow miss."""
    from audit.testing import assert_accuracy

    with pytest.raises(AssertionError, match="finite results where the exact value overflows bf16"):
        assert_accuracy("exp.cephes", dtype="bf16", range=(80, 100), max_ulp=1e9, specials=True)
    r = assert_accuracy(
        "exp.cephes", dtype="bf16", range=(80, 100), max_ulp=1e9, overflow=True, specials=True
    )
    # e^x rounds past bf16's largest value (2^128 (1 - 2^-9) is the rounding edge) from
    # x = 88.7228... on: count the bf16 inputs in [88.75, 100] independently
    xs = get_format("bf16").finite_values()
    with mp.workprec(100):
        edge = mp.log(mp.mpf(2) ** 128 * (1 - mp.mpf(2) ** -9))
    assert r.overflow_miss_count == int(((xs >= float(edge)) & (xs <= 100)).sum())
