"""The oracle against mpmath: fast-path bounds, correct rounding, ties, the cache."""

import dataclasses
import math

import mpmath as mp
import numpy as np
import pytest
from helpers import is_nearest_even

from audit.numbers.formats import FORMATS, get_format
from audit.oracle import oracle
from audit.oracle.references import REFERENCES, Reference, get_reference

SMALL = ["fp8_e4m3", "fp8_e5m2", "bf16", "fp16"]


def gelu_independent(x, prec=120):
    """GELU through the normal CDF (mp.ncdf), not the erfc formula the tool uses."""
    with mp.workprec(prec):
        return mp.mpf(x) * mp.ncdf(mp.mpf(x))


@pytest.mark.parametrize("name", SMALL)
def test_gelu_fast_path_bound_holds_on_every_value(name):
    f = get_format(name)
    ref = get_reference("gelu")
    x = f.finite_values()
    v = ref.fast(x)
    at = ref.rel_err_at(x)
    worst = 0.0
    for xi, vi, bound in zip(x.tolist(), v.tolist(), at.tolist()):
        e = gelu_independent(xi)
        if abs(e) < mp.mpf(2) ** -1000:
            assert abs(vi) <= 2.0**-1000 * 2
            continue
        rel = float(abs((mp.mpf(vi) - e) / e))
        assert rel <= bound, xi
        worst = max(worst, rel)
    assert worst <= ref.rel_err, worst


def test_gelu_fast_path_bound_on_fp32_sample():
    ref = get_reference("gelu")
    rng = np.random.default_rng(5)
    x = (
        np.concatenate([rng.uniform(-40, 10, 3000), -np.logspace(-40, 1.6, 500), np.logspace(-40, 38, 500)])
        .astype(np.float32)
        .astype(np.float64)
    )
    v = ref.fast(x)
    for xi, vi, bound in zip(x.tolist(), v.tolist(), ref.rel_err_at(x).tolist()):
        e = gelu_independent(xi)
        if abs(e) >= mp.mpf(2) ** -1000:
            assert float(abs((mp.mpf(vi) - e) / e)) <= bound <= ref.rel_err, xi


def adversarial_gelu_inputs(f):
    vals = f.finite_values() if f.enumerable else None
    if vals is not None:
        sub = vals[(np.abs(vals) < f.smallest_normal * 4)]  # gelu(x) ~ x/2: near-ties
        tails = vals[(vals < -3) & (vals > -40)]
        sat = vals[(vals > 2) & (vals < 12)]
        rng = np.random.default_rng(3)
        pick = rng.choice(vals, size=min(1500, len(vals)), replace=False)
        return np.unique(np.concatenate([sub[:400], sub[-400:], tails[:400], sat[:300], pick]))
    rng = np.random.default_rng(4)
    return np.unique(
        np.concatenate(
            [
                rng.uniform(-15, 15, 1500),
                np.ldexp(rng.uniform(1, 2, 300), rng.integers(-149, -120, 300)),
                -np.ldexp(rng.uniform(1, 2, 300), rng.integers(-149, -120, 300)),
            ]
        )
        .astype(np.float32)
        .astype(float)
    )


@pytest.mark.parametrize("name", SMALL + ["fp32"])
def test_oracle_rounds_correctly_at_adversarial_points(name, fresh_cache):
    f = get_format(name)
    ref = get_reference("gelu")
    x = adversarial_gelu_inputs(f)
    ov = oracle.evaluate(ref, f, x)
    for xi, ri, hi, lo in zip(x.tolist(), ov.rounded.tolist(), ov.hi.tolist(), ov.lo.tolist()):
        e = gelu_independent(xi, 300)
        if math.isfinite(ri):
            assert is_nearest_even(f, e, ri), (name, xi, ri)
        # the exact value is carried to (much) better than float64 relative accuracy
        if abs(e) > 1e-300:
            assert abs((mp.mpf(hi) + mp.mpf(lo) - e) / e) < 2.0**-35


def test_oracle_mpmath_only_for_fp64():
    f = get_format("fp64")
    ref = get_reference("gelu")
    x = np.array([-30.0, -1.5, 1e-300, 0.7, 3.0, 1e10])
    ov = oracle.evaluate(ref, f, x)
    assert ov.n_mpmath == len(x)
    for xi, ri in zip(x.tolist(), ov.rounded.tolist()):
        assert is_nearest_even(f, gelu_independent(xi, 300), ri)


def test_exact_ties_go_to_even():
    """f(x) = x/2 puts odd subnormals exactly on a midpoint: only ties-to-even is right."""
    ref = Reference(
        "half_test", "x/2", lambda x: x / 2, lambda x: x / 2, 0.0, lambda: -math.inf, lambda: math.inf
    )
    f = get_format("fp16")
    x = f.finite_values()
    x = x[(np.abs(x) < 2.0**-18)]
    ov = oracle._compute(ref, f, x, {})
    for xi, ri in zip(x.tolist(), ov.rounded.tolist()):
        assert is_nearest_even(f, mp.mpf(xi) / 2, ri)
    assert ov.n_mpmath > 0  # the ties were decided by mpmath


def test_ambiguous_points_are_decided_by_mpmath():
    """A fast path declared hopelessly inaccurate sends every point to mpmath: same answer."""
    g = get_reference("gelu")
    vague = Reference("gelu", g.formula, g.mp, g.fast, 0.5, g.at_neg_inf, g.at_pos_inf)
    f = get_format("fp8_e5m2")
    x = f.finite_values()
    a = oracle._compute(g, f, x, {})
    b = oracle._compute(vague, f, x, {})
    assert b.n_mpmath > len(x) // 2
    assert np.array_equal(a.rounded, b.rounded, equal_nan=True)


def test_cache_roundtrip_and_corruption(fresh_cache):
    f = get_format("fp16")
    ref = get_reference("gelu")
    x = f.finite_values()
    first = oracle.evaluate(ref, f, x)
    files = list(fresh_cache.glob("*.npz"))
    assert len(files) == 1
    oracle._MEMO.clear()
    again = oracle.evaluate(ref, f, x)  # from disk
    assert np.array_equal(first.rounded, again.rounded) and np.array_equal(first.hi, again.hi)
    # corrupt: flip bytes in the middle of the file
    data = bytearray(files[0].read_bytes())
    for i in range(len(data) // 2, len(data) // 2 + 64):
        data[i] ^= 0xFF
    files[0].write_bytes(bytes(data))
    oracle._MEMO.clear()
    rebuilt = oracle.evaluate(ref, f, x)
    assert np.array_equal(first.rounded, rebuilt.rounded)
    assert oracle._load(files[0], x) is not None  # rewritten, valid again
    # garbage file
    files[0].write_bytes(b"not an npz")
    oracle._MEMO.clear()
    assert np.array_equal(first.rounded, oracle.evaluate(ref, f, x).rounded)


def test_cache_subset_matches_direct_computation(fresh_cache):
    f = get_format("bf16")
    ref = get_reference("gelu")
    x = f.finite_values()[1000:1500]
    assert np.array_equal(oracle.evaluate(ref, f, x).rounded, oracle._compute(ref, f, x, {}).rounded)


def test_every_value_in_order_gives_copies_of_the_table_and_signed_zeros_are_told_apart(fresh_cache):
    """The whole format in its own order takes the table without a lookup: the values are
    those of mpmath at every input (checked at a stride here), the arrays are copies, and an
    input list equal in value but not in bits (+0 and -0 swapped) is looked up."""
    f = get_format("fp16")
    ref = get_reference("gelu")
    x = f.finite_values()
    whole = oracle.evaluate(ref, f, x)
    for i in range(0, len(x), 997):
        with mp.workprec(80):
            exact = f.round_mpf(0.5 * mp.mpf(x[i]) * mp.erfc(-mp.mpf(x[i]) / mp.sqrt(2)))
        assert whole.rounded[i] == exact
    whole.rounded[:] = -1.5  # a caller's change stays in its copy (gelu >= -0.17 everywhere)
    whole.hi[:] = -1.5
    again = oracle.evaluate(ref, f, x)
    assert not np.any(again.rounded == -1.5) and not np.any(again.hi == -1.5)
    zeros = np.flatnonzero(x == 0)
    assert len(zeros) == 2 and np.signbit(x[zeros[0]]) and not np.signbit(x[zeros[1]])
    swapped = x.copy()
    swapped[zeros] = swapped[zeros[::-1]]
    got = oracle.evaluate(ref, f, swapped)
    # gelu(-0) = -0 and gelu(+0) = +0: the signs follow the inputs
    assert np.signbit(got.rounded[zeros]).tolist() == [False, True]
    assert np.array_equal(got.rounded[: zeros[0]], again.rounded[: zeros[0]])


UNIVARIATE = sorted(n for n, r in __import__("audit").REFERENCES.items() if r.arity == 1)


@pytest.mark.parametrize(
    "stride",
    [pytest.param(1, marks=pytest.mark.slow, id="every"), pytest.param(29, id="stride29")],
)
@pytest.mark.parametrize("name", UNIVARIATE)
def test_every_fast_path_meets_its_bound(name, stride):
    """Each reference's float64 fast path against its mpmath definition at 160 bits, over
    every fp16 value and a stride of bf16 values (tails and subnormals included): the whole
    set in the slow stage (.ci/run; 3 to 10 s per reference), every 29th of them in the default
    run (a prime stride: each binade and both signs reached)."""
    ref = get_reference(name)
    params = ref.with_defaults({})
    x = np.concatenate([get_format("fp16").finite_values(), get_format("bf16").finite_values()[::7]])[
        ::stride
    ]
    v = ref.fast(x, **params)
    bound = np.full(len(x), max(ref.rel_err, oracle.MIN_REL_ERR))
    if ref.rel_err_at is not None:
        at = ref.rel_err_at(x, **params)
        assert np.all(at <= ref.rel_err)
        bound = np.maximum(at, oracle.MIN_REL_ERR)
    with mp.workprec(160):
        for xi, vi, bnd in zip(x.tolist(), v.tolist(), bound.tolist()):
            if math.isnan(vi):  # the fast path declines: mpmath decides
                continue
            e = ref.mp(mp.mpf(xi), **params)
            if math.isinf(vi) and abs(e) > mp.mpf(np.finfo(np.float64).max):
                continue  # beyond float64: inf rounds as the exact value does in F <= fp32
            assert abs(mp.mpf(vi) - e) <= abs(e) * bnd + mp.mpf(2) ** -1000, (name, xi, vi)


@pytest.mark.parametrize("name", UNIVARIATE)
@pytest.mark.parametrize("fmt_name", ["fp16", "bf16"])
def test_fast_oracle_agrees_with_mpmath_only_oracle(name, fmt_name):
    """The fast path with its ambiguity and near-power-of-two handling gives the rounding,
    and the side of a power of two, that mpmath alone gives."""
    ref = get_reference(name)
    f = get_format(fmt_name)
    params = ref.with_defaults({})
    x = f.finite_values()
    fast = oracle._compute(ref, f, x, params)
    sub = np.arange(0, len(x), 89)
    exact = oracle.exact_points(ref, x[sub], f, params)
    assert np.array_equal(fast.rounded[sub], exact.rounded, equal_nan=True)
    p2 = (np.frexp(np.abs(exact.hi))[0] == 0.5) & (np.abs(exact.hi) > f.smallest_normal)
    known = ~fast.unsure[sub]
    assert np.array_equal(np.sign(fast.lo[sub])[p2 & known], np.sign(exact.lo)[p2 & known])


def _dd_inputs(f):
    """Odd-ordinal subnormals and the smallest normals (x/2 is a tie there) and tiny normals."""
    o = np.concatenate([np.arange(1, 1 << (f.p - 1), 2), (1 << (f.p - 1)) + np.arange(0, 1 << (f.p - 1), 3)])
    if f.name == "fp32":
        o = np.random.default_rng(1).choice(o, 3000, replace=False)
    x = f.from_ordinal(o)
    return np.concatenate([x, -x, f.from_ordinal([f.ordinal([2.0**-31])[0] + k for k in range(-3, 4)])])


@pytest.mark.parametrize(
    "name,params",
    [("gelu", {}), ("silu", {}), ("silu", {"beta": 1.702}), ("silu", {"beta": -0.5}), ("hardswish", {})],
)
@pytest.mark.parametrize("fmt_name", ["fp32", "bf16", "fp16"])
def test_ties_at_half_x_are_decided_without_mpmath(name, params, fmt_name):
    """f(x) = x/2 + c x^2: at odd subnormals x/2 is a rounding boundary that the fast value
    sits on.  The double-double value decides them as mpmath does, and without mpmath."""
    ref = get_reference(name)
    f = get_format(fmt_name)
    p = ref.with_defaults(params)
    x = _dd_inputs(f)
    fast = oracle._compute(ref, f, x, p)
    assert fast.n_mpmath == 0
    sub = np.arange(0, len(x), max(1, len(x) // 400))
    exact = oracle.exact_points(ref, x[sub], f, p)
    assert np.array_equal(fast.rounded[sub], exact.rounded)
    # the ties (odd subnormals) got a double-double value, the exact value to 2**-60
    ties = np.flatnonzero((np.abs(x) < min(f.smallest_normal, 2.0**-60)) & (x != 0))  # fl(f) == x/2 there
    assert np.all(fast.lo[ties] != 0) or params.get("beta") == 0
    with mp.workprec(200):
        for j in ties[:: max(1, len(ties) // 50)].tolist():
            e = ref.mp(mp.mpf(float(x[j])), **p)
            assert abs(mp.mpf(fast.hi[j]) + mp.mpf(fast.lo[j]) - e) <= abs(e) * mp.mpf(2) ** -60


def test_infinite_fast_values_overflow_without_mpmath():
    """exp's fast value is inf beyond float64's range: the exact value overflows fp32 too."""
    ref = get_reference("exp")
    f = get_format("fp32")
    x = np.array([710.0, 1e4, 3.0e38, 88.0, 89.0])
    fast = oracle._compute(ref, f, x, {})
    assert fast.n_mpmath == 0
    exact = oracle.exact_points(ref, x, f, {})
    assert np.array_equal(fast.rounded, exact.rounded)
    assert list(np.isinf(fast.rounded)) == [True, True, True, False, True]


@pytest.mark.parametrize("name,a_min", [("swiglu", 16.0), ("geglu", 6.0)])
@pytest.mark.parametrize("fmt_name", ["fp16", "bf16"])
def test_gated_ties_at_large_a_are_decided_without_mpmath(name, a_min, fmt_name):
    """g(a) b = a b (1 - tiny) for large a: where a b is a midpoint of F the fast value sits
    on the boundary.  The double-double value decides it, toward zero, as mpmath does."""
    ref = get_reference(name)
    f = get_format(fmt_name)
    vals = f.finite_values()
    rng = np.random.default_rng(11)
    a = rng.choice(vals[(vals >= a_min) & (vals < 1e4)], 400000)
    a = np.concatenate([a, vals[vals >= a_min][-50:]])  # the deficit underflows float64 there
    b = rng.choice(vals[(np.abs(vals) < 1) & (np.abs(vals) > 2.0**-8)], len(a))  # a b in range
    ab = a * b
    tie = f.round(np.nextafter(ab, -np.inf)) != f.round(np.nextafter(ab, np.inf))
    a, b = a[tie], b[tie]
    assert len(a) > 100
    fast = oracle._compute(ref, f, a, {}, b)
    assert fast.n_mpmath == 0
    sub = np.arange(0, len(a), max(1, len(a) // 150))
    sub = np.union1d(sub, np.arange(len(a) - 20, len(a)))
    exact = oracle.exact_points(ref, a[sub], f, {}, b[sub])
    assert np.array_equal(fast.rounded[sub], exact.rounded)
    assert np.all(np.abs(fast.rounded) <= np.abs(a * b))  # |f| < |a b|: toward zero


def test_points_settled_by_mpmath_are_computed_once_per_process(monkeypatch):
    # the results of one sweep share their oracle: the inputs one result settles by mpmath
    # are not computed again for the next (oracle._POINTS), and the numbers are the same
    from audit.measure.sweep import sweep

    monkeypatch.setattr(oracle, "_POINTS", {})
    monkeypatch.setattr(oracle, "_MEMO", {})  # (the table loaded again: its spot check too)
    calls = []
    real = oracle.exact_point
    monkeypatch.setattr(oracle, "exact_point", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    first = sweep("gelu", "fp16", "auto")
    n_first = len(calls)
    again = sweep("gelu", "fp16", "auto")
    assert n_first > 0 and len(calls) == n_first
    assert [(r.max_ulp, r.mean_ulp) for r in first] == [(r.max_ulp, r.mean_ulp) for r in again]
    # a reference replaced under the same name is not answered from the memo
    ref = REFERENCES["gelu"]
    monkeypatch.setitem(REFERENCES, "gelu", dataclasses.replace(ref, mp=lambda x: ref.mp(x)))
    oracle.exact_points(REFERENCES["gelu"], np.array(calls[:1]), FORMATS["fp16"], {})
    assert len(calls) == n_first + 1


def test_gelu_grad_above_one_is_settled_without_mpmath(monkeypatch):
    """gelu_grad(x) = 1 + d, d = x phi(x) - Phi(-x) > 0, for x >= 2: where d is below the
    fast value's error its side of 1 (its binade) was unsure, and every fp32 input from
    about 7.5 up went to mpmath when a sweep needed it, exp(-x^2 / 2) taking 1 ms at 1e38
    (12 s for the 14,000 inputs below fp32's max).  The reference's float64 split settles
    it: the rounding, hi = 1 and the side that mpmath gives (checked here by a direct
    mpmath formula), d to 2**-40 where float64 holds it, its 2**-1074 stand-in beyond."""
    ref = get_reference("gelu_grad")
    f = get_format("fp32")
    o = np.linspace(f.ordinal([2.0])[0], f.ordinal([np.finfo(np.float32).max])[0], 240).astype(np.int64)
    x = np.concatenate([f.from_ordinal(o), [8.0, 37.5, 38.5, 38.6, 38.7, 39.0, 1e30]]).astype(np.float64)
    fast = oracle._compute(ref, f, x, {})
    assert fast.n_mpmath == 0 and not fast.unsure.any()
    tail = x >= 8  # (below, d is above the fast value's error: hi is the value itself)
    assert np.all(fast.rounded[tail] == 1.0) and np.all(fast.hi[tail] == 1.0) and np.all(fast.lo[tail] > 0)
    for xi, lo in zip(x[tail].tolist(), fast.lo[tail].tolist()):
        with mp.workprec(300 + 2 * math.frexp(xi)[1]):
            t = mp.mpf(xi)
            d = t * mp.exp(-t * t / 2) / mp.sqrt(2 * mp.pi) - mp.erfc(t / mp.sqrt(2)) / 2
        assert d > 0
        if float(d) >= np.finfo(np.float64).tiny:
            assert abs(mp.mpf(lo) - d) <= d * mp.mpf(2) ** -40, xi
        elif float(d) > 0:  # subnormal: to a few dozen of float64's smallest steps
            assert abs(mp.mpf(lo) - d) <= d * mp.mpf(2) ** -40 + 64 * mp.mpf(2) ** -1074, xi
        else:  # below float64: the stand-in
            assert lo == 5e-324, xi
    # a sweep of the 13,235 inputs in [1e30, 1.001e30] asks mpmath for none of them
    calls = []
    real = oracle.exact_point
    monkeypatch.setattr(oracle, "exact_point", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setenv("ACTAUDIT_NO_CACHE", "1")
    import audit

    [r] = audit.sweep("gelu_grad.erf", "fp32", exhaustive=True, range=(1e30, 1.001e30), analyze=False)
    assert calls == [] and r.correctly_rounded_fraction == 1.0
