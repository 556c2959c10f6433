"""audit/measure/clip.py: the safe clip range, its tolerance, saturation values and the clipped candidate.

They kill mutants that mutmut found surviving the rest of the suite, each with an expectation
worked in the test (docs/design/mutation-testing.md).

Most cases are in fp4_e2m1, whose 16 values are few enough to work every rounding by hand:
-6 -4 -3 -2 -1.5 -1 -0.5 -0 +0 0.5 1 1.5 2 3 4 6, ulp 0.5 below 2, 1 in [2, 4), 2 in [4, 6];
it saturates (|f| > 7 rounds to +-6).  The saturation thresholds and clip recommendations
are the definitions of docs/concepts/findings.md, applied here by hand; the exact values
come from ``math``."""

import math

import numpy as np
import pytest

from audit.measure import clip as clip_mod
from audit.measure.metrics import point_errors
from audit.numbers.formats import FORMATS
from audit.oracle import oracle
from audit.oracle.references import REFERENCES

FP4 = FORMATS["fp4_e2m1"]
X4 = [-6.0, -4.0, -3.0, -2.0, -1.5, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
NAN = math.nan
_APPROX = type(pytest.approx(1.0))


def _same(got, want, where="result"):
    """got == want, recursively, with the sign of zero and NaN compared too."""
    if isinstance(want, dict):
        assert isinstance(got, dict), f"{where}: {got!r} is not a dict"
        assert sorted(got) == sorted(want), f"{where}: keys {sorted(got)} != {sorted(want)}"
        for k in want:
            _same(got[k], want[k], f"{where}[{k!r}]")
    elif isinstance(want, _APPROX):
        assert got == want, f"{where}: {got!r} != {want!r}"
    elif isinstance(want, float):
        assert isinstance(got, float), f"{where}: {got!r} is not a float"
        if math.isnan(want):
            assert math.isnan(got), f"{where}: {got!r} != nan"
        else:
            assert got == want and math.copysign(1, got) == math.copysign(1, want), (
                f"{where}: {got!r} != {want!r}"
            )
    else:
        assert type(got) is type(want) and got == want, f"{where}: {got!r} != {want!r}"


def test_fp4_values_are_the_ones_worked_here():
    assert FP4.finite_values().tolist() == X4
    assert [math.copysign(1, v) for v in FP4.finite_values()[7:9]] == [-1, 1]


# ------------------------------------------------------------------ _run_from_end, _high, _low
@pytest.mark.parametrize(
    "mask,start",
    [
        ([], 0),
        ([True, True, True], 0),  # all True: the run is the whole mask
        ([False, False], 2),  # ends False: len(mask)
        ([True, False, True, True], 2),
        ([False, True, False], 3),
        ([False, False, True, False, True], 4),
        ([True, False, False, True], 3),
    ],
)
def test_run_from_end(mask, start):
    assert clip_mod._run_from_end(np.array(mask, dtype=bool)) == start


V5 = [-2.0, -1.0, 0.0, 1.0, 2.0]


@pytest.mark.parametrize(
    "vals,rn,high,low",
    [
        # hardtanh: constant 1 from x = 1 on, constant -1 up to x = -1
        (V5, [-1.0, -1.0, 0.0, 1.0, 1.0], {"x": 1.0, "value": 1.0}, {"x": -1.0, "value": -1.0}),
        # relu: RN(f(x)) = x from 0 on (the last value 2 alone is no constant run); 0 up to 0
        (V5, [0.0, 0.0, 0.0, 1.0, 2.0], {"x": 0.0, "value": "identity"}, {"x": 0.0, "value": 0.0}),
        # runs of one value at either end are no saturation; of two values are
        ([0.0, 1.0, 2.0], [0.5, 0.7, 2.0], None, None),
        ([0.0, 1.0, 2.0], [0.5, 0.7, 0.9], None, None),
        ([0.0, 1.0, 2.0], [0.3, 5.0, 5.0], {"x": 1.0, "value": 5.0}, None),
        ([0.0, 1.0, 2.0], [7.0, 7.0, 1.0], None, {"x": 1.0, "value": 7.0}),
        ([0.0, 1.0, 2.0], [1.0, 2.0, 3.0], None, None),
        # the saturation value is the one at the end: its zero keeps its sign
        ([0.0, 1.0, 2.0], [3.0, -0.0, 0.0], {"x": 1.0, "value": 0.0}, None),
        ([0.0, 1.0, 2.0], [0.0, -0.0, 3.0], None, {"x": 1.0, "value": 0.0}),
        ([0.0, 1.0, 2.0], [-0.0, 0.0, 3.0], None, {"x": 1.0, "value": -0.0}),
        # a final run that is both constant and RN(f(x)) = x (a repeated sample): constant
        ([-1.0, 5.0, 5.0], [0.0, 5.0, 5.0], {"x": 5.0, "value": 5.0}, None),
        # a NaN run at either end is no constant (NaN != NaN), nor RN(f(x)) = x
        ([0.0, 1.0, 2.0], [NAN, NAN, 3.0], None, None),
        ([0.0, 1.0, 2.0], [1.0, NAN, NAN], None, None),
        ([0.0, 1.0, 2.0], [NAN, 1.0, 2.0], {"x": 1.0, "value": "identity"}, None),
        # one value: nothing saturates
        ([1.0], [2.0], None, None),
        ([1.0], [1.0], None, None),
    ],
)
def test_high_and_low_thresholds_by_hand(vals, rn, high, low):
    v, r = np.array(vals), np.array(rn)
    _same(clip_mod._high(v, r), high, "high")
    _same(clip_mod._low(v, r), low, "low")


# ------------------------------------------------------------------ saturation
@pytest.mark.parametrize(
    "name,params,high,low",
    [
        # clip(x, -1, 1): exact in fp4
        ("hardtanh", {}, {"x": 1.0, "value": 1.0}, {"x": -1.0, "value": -1.0}),
        # softplus(1) = 1.3133 rounds to 1.5, softplus(1.5) = 1.7014 to 1.5, softplus(2) = 2.127 to 2,
        # softplus(3) = 3.049, (4) = 4.018, (6) = 6.0025: RN = x from 1.5 on;
        # softplus(-1.5) = 0.2014 < 0.25 rounds to 0, softplus(-1) = 0.3133 to 0.5
        ("softplus", {}, {"x": 1.5, "value": "identity"}, {"x": -1.5, "value": 0.0}),
        # exp(2) = 7.389 > 7 saturates to 6, exp(1.5) = 4.48 rounds to 4; exp(-1.5) = 0.223 -> 0,
        # exp(-1) = 0.368 -> 0.5
        ("exp", {}, {"x": 2.0, "value": 6.0}, {"x": -1.5, "value": 0.0}),
        # elu, alpha 1: e^-1.5 - 1 = -0.777 -> -1, e^-1 - 1 = -0.632 -> -0.5; RN(f(-0.5)) = RN(-0.393)
        # = -0.5 = x, RN(f(-1)) = -0.5 != -1
        ("elu", {}, {"x": -0.5, "value": "identity"}, {"x": -1.5, "value": -1.0}),
        # elu, alpha 2: 2 (e^-3 - 1) = -1.900 -> -2, 2 (e^-2 - 1) = -1.729 -> -1.5;
        # 2 (e^-0.5 - 1) = -0.787 -> -1 != -0.5, so RN(f(x)) = x from -0 on
        ("elu", {"alpha": 2.0}, {"x": -0.0, "value": "identity"}, {"x": -3.0, "value": -2.0}),
        # silu(x) = x sigmoid(x): -6..-2 give |f| <= 0.2384 < 0.25, -> -0; silu(-1.5) = -0.274 -> -0.5;
        # silu(1.5) = 1.226 -> 1, silu(2) = 1.762 -> 2, silu(3) = 2.858 -> 3, 3.928 -> 4, 5.985 -> 6
        ("silu", {}, {"x": 2.0, "value": "identity"}, {"x": -2.0, "value": -0.0}),
        # leaky_relu, slope 1/2: -3, -2, -1.5, ... never constant at the low end
        ("leaky_relu", {"alpha": 0.5}, {"x": -0.0, "value": "identity"}, None),
        # a function of two arguments has no saturation thresholds
        ("geglu", {}, None, None),
    ],
)
def test_saturation_in_fp4_by_hand(name, params, high, low):
    _same(clip_mod.saturation(REFERENCES[name], FP4, params), {"high": high, "low": low})


E4M3 = FORMATS["fp8_e4m3"]


def _e4m3_grid(lo, hi, step):
    """The fp8_e4m3 values lo, lo + step, ..., hi (one binade: 3 fraction bits, 8 steps)."""
    return [lo + k * step for k in range(round((hi - lo) / step) + 1)]


def test_saturation_in_fp8_e4m3_by_hand():
    # fp8_e4m3 (OCP E4M3FN): 254 finite values up to +-448, spacing 1/16 in [0.5, 1), 1/4 in
    # [2, 4), 1/2 in [4, 8), 32 in [256, 512); the smallest subnormal is 2^-9; no infinity: a
    # value beyond 464 (448 + half its spacing) rounds to NaN.
    v = E4M3.finite_values()
    assert len(v) == 254 and v[0] == -448 and v[-1] == 448
    for lo, hi, step in ((0.5, 0.9375, 1 / 16), (2.0, 3.75, 0.25), (4.0, 7.5, 0.5), (256.0, 448.0, 32.0)):
        assert set(_e4m3_grid(lo, hi, step)) <= set(v.tolist())
    assert 2.0**-9 in v and 2.0**-10 not in v
    # RN(y) = 1 for y >= 1 - 1/32 (the midpoint 0.96875 ties to 1.0, whose last bit is even),
    # RN(y) = 0 for 0 <= y <= 2^-10 (half the smallest subnormal, ties to the even 0).
    # sigmoid >= 0.96875 from x = ln 31 = 3.434 on: the first value is 3.5;
    # sigmoid <= 2^-10 up to x = -ln 1023 = -6.931: the last value is -7.
    assert 3.25 < math.log(31) < 3.5 and -7 < -math.log(1023) < -6.5
    # tanh >= 0.96875 from atanh(0.96875) = ln(63) / 2 = 2.072 on: 2.25 (and odd: -2.25 below)
    assert 2.0 < math.log(63) / 2 < 2.25
    # exp: <= 2^-10 up to -10 ln 2 = -6.931: -7; but exp(6.5) = 665 > 464 rounds to NaN (and
    # so does every larger input): a NaN run at the top is no saturation
    assert math.exp(6.5) > 464 and math.exp(6.0) < 464 and -7 < -10 * math.log(2) < -6.5
    # log: NaN below zero (no saturation at the bottom); RN(y) = 6 for 5.75 <= y <= 6.25 (the
    # midpoints to 5.5 and 6.5 tie to 6, even), from x = e^5.75 = 314.2 on: 320; log(448) = 6.105
    assert 288 < math.exp(5.75) < 320 and math.log(448) < 6.25
    cases = {
        "sigmoid": ({"x": 3.5, "value": 1.0}, {"x": -7.0, "value": 0.0}),
        "tanh": ({"x": 2.25, "value": 1.0}, {"x": -2.25, "value": -1.0}),
        "exp": (None, {"x": -7.0, "value": 0.0}),
        "log": ({"x": 320.0, "value": 6.0}, None),
    }
    for name, (high, low) in cases.items():
        _same(clip_mod.saturation(REFERENCES[name], E4M3, {}), {"high": high, "low": low}, name)


def test_saturation_over_sampled_inputs_sorts_them():
    fp32 = FORMATS["fp32"]
    hardtanh = REFERENCES["hardtanh"]
    # sorted: -2 -1 0.5 1 2 3, hardtanh: -1 -1 0.5 1 1 1
    got = clip_mod.saturation(hardtanh, fp32, {}, np.array([3.0, -2.0, 0.5, -1.0, 1.0, 2.0]))
    _same(got, {"high": {"x": 1.0, "value": 1.0}, "low": {"x": -1.0, "value": -1.0}})
    # numbers given as text are numbers: sorted -2, 3, 10 (not as the strings "-2" < "10" < "3")
    got = clip_mod.saturation(hardtanh, fp32, {}, ["3", "-2", "10"])
    _same(got, {"high": {"x": 3.0, "value": 1.0}, "low": None})
    # one sample: no run of two values anywhere
    _same(clip_mod.saturation(hardtanh, fp32, {}, [0.5]), {"high": None, "low": None})
    # a repeated top sample of relu: constant and identity at once; constant is reported
    got = clip_mod.saturation(REFERENCES["relu"], fp32, {}, [5.0, -1.0, 5.0])
    _same(got, {"high": {"x": 5.0, "value": 5.0}, "low": None})


# ------------------------------------------------------------------ recommend
def _recommend(name, got, params=None, failing=None, **tol):
    ref = REFERENCES[name]
    x = FP4.finite_values()
    ov = oracle.evaluate(ref, FP4, x, params or {})
    e = point_errors(x, np.array(got, dtype=np.float64), ov, FP4)
    fail = None if failing is None else np.isin(x, failing)
    return clip_mod.recommend(e, FP4, clip_mod.saturation(ref, FP4, params or {}), failing=fail, **tol)


def _rec(lo, hi, lo_action, hi_action, lo_safe, hi_safe, inside, max_ulp, atol, note=""):
    return {
        "lo": lo,
        "hi": hi,
        "lo_action": lo_action,
        "hi_action": hi_action,
        "lo_safe": lo_safe,
        "hi_safe": hi_safe,
        "max_ulp_inside": inside,
        "tolerance": {"max_ulp": max_ulp, "atol": atol},
        "note": note,
    }


def test_hardtanh_clamped_below_and_set_to_the_constant_above():
    # x:     -6   -4   -3  -2  -1.5 -1  -0.5  -0    0   0.5  1  1.5  2  3  4  6
    # f:     -1   -1   -1  -1  -1   -1  -0.5  -0    0   0.5  1  1    1  1  1  1
    got = [NAN, NAN, -1, -1, -1, -1, -0.5, -0.0, 0.0, 0.5, 1, 1.5, 2, 3, 4, 6]
    # above 0 the candidate is x itself: 1 ULP off at 1.5 ((1.5 - 1) / 0.5), 2 at 2, 4 at 3: within
    # 2 ULP up to 2; the constant 1 is within 2 ULP everywhere above 0 (1 ULP at 0.5), so the
    # largest bound is 2, and the candidate there (2) is not the constant: "constant".
    # Below 0 it is right but NaN from -4 on: within up to -3, where it already gives -1: "clamp".
    # Inside, the worst is the 2 ULP at x = 2.
    r = _recommend("hardtanh", got, max_ulp=2.0)
    _same(r, _rec(-3.0, 2.0, "clamp", "constant", -3.0, 2.0, 2.0, 2.0, None))


def test_no_clip_helps_when_the_candidate_leaves_the_tolerance_first():
    # hardtanh with a 0.75 ULP tolerance: the constant +-1 is 1 ULP off at +-0.5, so a clip must
    # keep the candidate at +-0.5; but it is 2 ULP off there (and at 1, and at +0, a point of
    # neither side).  Nothing is replaced: the worst is 2 ULP.
    got = [-1, -1, -1, -1, -1, -1, -1.5, -0.0, 1.0, 1.5, 2.0, 1, 1, 1, 1, 1]
    r = _recommend("hardtanh", got, max_ulp=0.75)
    note = (
        "hi side: off by more than the tolerance from x = 0.5 on, before f saturates (x = 1): no clip helps; "
        "lo side: off by more than the tolerance from x = -0.5 on, before f saturates (x = -1): no clip helps"
    )
    _same(r, _rec(None, None, "none", "none", 0.0, 0.0, 2.0, 0.75, None, note))


def test_silu_identity_above_and_clamp_below_with_errors_that_come_and_go():
    # silu in fp4, RN(f(x)): -0 -0 -0 -0 -0.5 -0.5 -0 -0 0 0.5 0.5 1 2 3 4 6 (see saturation above)
    got = [-1, -1, -1, -0.0, -0.5, -0.5, -0.0, -0.0, 0.0, 0.5, 0.5, 1.0, 2.0, NAN, NAN, NAN]
    s = [1 / (1 + math.exp(-v)) for v in (0.5, 1.0, 1.5, 2.0)]  # sigmoid(x); sigmoid(-x) = 1 - it
    # Tolerance 0.5 ULP.  Above 0: correctly rounded up to 2, NaN from 3 on.  Returning x costs
    # |x - silu(x)| / 0.5 = 2 x sigmoid(-x): 0.38 at 0.5, 0.54 at 1, 0.55 at 1.5 (out), 0.48 at 2,
    # then (3 - 2.858) / 1 = 0.14, 0.07, 0.007: the largest bound is 2, identity beyond.
    for v, sv, inside in zip((0.5, 1.0, 1.5, 2.0), s, (True, False, False, True)):
        assert (2 * v * (1 - sv) <= 0.5) == inside
    # Below 0: right down to -2, -1 from -3 on (|-1 + 0.142| / 0.5 = 1.7 ULP); the constant -0
    # costs |silu(x)| / 0.5: 0.38 at -0.5, 0.54 at -1, 0.55 at -1.5 (out), 0.48 at -2, 0.28 at -3,
    # ...: the largest bound is -2, where the candidate already gives -0: clamp.
    # The worst error left is |silu(+-2) -+ 2| / 0.5 = 4 sigmoid(-2), at x = 2 and -2.
    r = _recommend("silu", got, max_ulp=0.5)
    worst = pytest.approx(4 / (1 + math.exp(2)), rel=1e-9)
    _same(r, _rec(-2.0, 2.0, "clamp", "identity", -2.0, 2.0, worst, 0.5, None))


def test_silu_flushed_before_it_saturates():
    # as above, but NaN from 1.5 on: a bound at 1 would leave x = 1.5 to the identity, 0.55 ULP
    # off; at 0.5, x = 1 (0.54); at 1.5 and beyond the candidate itself is out: no clip helps
    got = [-1, -1, -1, -0.0, -0.5, -0.5, -0.0, -0.0, 0.0, 0.5, 0.5, NAN, 2.0, NAN, NAN, NAN]
    r = _recommend("silu", got, max_ulp=0.5)
    note = (
        "hi side: off by more than the tolerance from x = 1.5 on, before f saturates (x = 2): no clip helps"
    )
    _same(r, _rec(-2.0, None, "clamp", "none", -2.0, 1.0, math.inf, 0.5, None, note))


def test_an_absolute_tolerance_alone():
    # hardtanh, x itself above 0: |x - 1| = 0.5 at 1.5 is within atol 0.5, 1 at 2 is not; the
    # constant 1 is 0.5 off at 0.5: within.  Below 0 correctly rounded.  The worst ULP error
    # inside: (1.5 - 1) / 0.5 = 1 at 1.5.  No ULP tolerance is made up.
    got = [-1, -1, -1, -1, -1, -1, -0.5, -0.0, 0.0, 0.5, 1, 1.5, 2, 3, 4, 6]
    r = _recommend("hardtanh", got, atol=0.5)
    _same(r, _rec(None, 1.5, "none", "constant", None, 1.5, 1.0, None, 0.5))


def test_no_clip_helps_where_f_does_not_saturate():
    # leaky_relu with slope 1/2: RN(f(x)) = -3 -2 -1.5 -1 -1 -0.5 -0 -0 0 0.5 1 ... 6; off by
    # |-4 + 2| / 1 = 2 ULP at -4 and NaN at -6 (its worst: inf); within 1 ULP up to -3
    got = [NAN, -4.0, -1.5, -1, -1, -0.5, -0.0, -0.0, 0.0, 0.5, 1, 1.5, 2, 3, 4, 6]
    r = _recommend("leaky_relu", got, {"alpha": 0.5}, max_ulp=1.0)
    note = "lo side: f does not saturate in fp4_e2m1: no clip helps"
    _same(r, _rec(None, None, "none", "none", -3.0, None, math.inf, 1.0, None, note))


def test_default_tolerance_twice_the_worst_core_error_of_well_behaved_inputs():
    # silu, correctly rounded but: 0 at x = 1 (|0 - silu(1)| / 0.5 = 2 sigmoid(1) = 1.46 ULP), NaN
    # at 0.5 (not a finite result: out of the core), 3 at 1.5 (3.5 ULP, but a failing input: out),
    # 6 at 3 (3.1 ULP, |x| > 2: out).  Default: 2 * 1.46 = 4 sigmoid(1), more than the 2 ULP floor.
    got = [-0.0, -0.0, -0.0, -0.0, -0.5, -0.5, -0.0, -0.0, 0.0, NAN, 0.0, 3.0, 2.0, 6.0, 4.0, 6.0]
    r = _recommend("silu", got, failing=[1.5])
    assert r["tolerance"] == {"max_ulp": pytest.approx(4 / (1 + math.exp(-1)), rel=1e-9), "atol": None}


def test_default_tolerance_core_reaches_two():
    # hardtanh, correctly rounded but 3 at x = 2, the edge of the core |x| <= 2: (3 - 1) / 0.5 =
    # 4 ULP, so the default tolerance is 8
    got = [-1, -1, -1, -1, -1, -1, -0.5, -0.0, 0.0, 0.5, 1, 1, 3, 1, 1, 1]
    assert _recommend("hardtanh", got)["tolerance"] == {"max_ulp": 8.0, "atol": None}


def test_default_tolerance_without_a_core_is_two_ulp():
    # hardtanh, correctly rounded everywhere (every error 0), but every |x| <= 2 failing
    exact = [-1, -1, -1, -1, -1, -1, -0.5, -0.0, 0.0, 0.5, 1, 1, 1, 1, 1, 1]
    r = _recommend("hardtanh", exact, failing=[v for v in X4 if abs(v) <= 2])
    _same(r, _rec(None, None, "none", "none", None, None, 0.0, 2.0, None))


def test_recommend_over_no_input():
    ref = REFERENCES["hardtanh"]
    x = np.zeros(0)
    ov = oracle.OracleValues(x, x, x, 0)
    e = point_errors(x, x, ov, FP4)
    r = clip_mod.recommend(e, FP4, clip_mod.saturation(ref, FP4, {}))
    _same(r, _rec(None, None, "none", "none", None, None, NAN, 2.0, None))
