"""audit/measure/metrics.py: ULP and relative errors, their reductions and summaries.

They kill mutants that mutmut found surviving the rest of the suite, each with an expectation
worked in the test (docs/design/mutation-testing.md)."""

import json
import math
import struct
import warnings
from fractions import Fraction

import numpy as np
import pytest

from audit.measure import metrics as M
from audit.measure.metrics import (
    FINITE,
    INF,
    NAN,
    OVERFLOW_MISS,
    OVERFLOW_OK,
    UNDEFINED,
    PointErrors,
    Summary,
    _ordinals,
    exact_ulp,
    point_errors,
    relative_error,
    saturated,
    zero_relative_error,
)
from audit.numbers.formats import get_format
from audit.oracle.oracle import OracleValues

H = get_format("fp16")
F4 = get_format("fp4_e2m1")  # OCP MX FP4: max 6 (1.1b x 2^2, odd significand), ulp(6) = 2, saturating
nan, inf = math.nan, math.inf
LD = np.longdouble  # wider than float64 on x86-64 (80-bit) and aarch64 Linux (128-bit)


def h16(v: float) -> str:
    """fp16 bit pattern of v, as the tool's x_hex."""
    return "0x" + struct.pack(">e", v).hex()


def key(v: float) -> int:
    """The p99 histogram bin of error v: the top 20 bits of its float64 pattern."""
    return struct.unpack(">q", struct.pack(">d", v))[0] >> 44


@pytest.fixture(autouse=True)
def _no_fp_warnings():
    # no FP warning may escape the metrics (they run under np.errstate(all="ignore"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def chunk(ulp, cls, *, correct=None, x=None, x2=None, abs_=None, rel=None, dist=None):
    """A PointErrors built by hand: the figures given, the other arrays told apart by index
    (x = 0.5, 1.5, 2.5, ...; got = x + 1/4, exact = x + 1/8, exact_lo = -2^-60 k, rounded = x)."""
    n = len(ulp)
    x = np.arange(n) + 0.5 if x is None else np.asarray(x, float)
    return PointErrors(
        x,
        x + 0.25,
        x + 0.125,
        -(2.0**-60) * np.arange(n),
        x.copy(),
        np.array(ulp, float),
        np.zeros(n, np.int64) if dist is None else np.array(dist, np.int64),
        np.array(ulp, float) * 2 if abs_ is None else np.array(abs_, float),
        np.array(ulp, float) / 4 if rel is None else np.array(rel, float),
        np.array(cls, np.int8),
        np.zeros(n, bool) if correct is None else np.array(correct, bool),
        None if x2 is None else np.asarray(x2, float),
    )


def state_hist(s: Summary):
    return s.state()[0]["hist"]


# ------------------------------------------------------------------ relative errors
def test_relative_error_follows_the_definition_and_the_zero_rule():
    got = [1.0, 3.0, 5.0, -8.0, inf, -inf, 0.0, 0.0, -0.0, 2.0**-1074, nan, 1.0]
    f = [4.0, 2.0, -3.0, -8.0, inf, -inf, 0.0, 0.0, 0.0, 0.0, 2.0, nan]
    nz = [False, False, False, False, False, False, True, False, True, False, False, False]
    # |r - f| / |f| in exact rationals where f is a nonzero finite; the zero rule where f = 0
    want = [
        float(abs(Fraction(r) - Fraction(e)) / abs(Fraction(e)))
        if math.isfinite(e) and e and math.isfinite(r)
        else None
        for r, e in zip(got, f)
    ]
    want[3] = 0.0  # r = f
    want[4] = want[5] = 0.0  # r = f at the infinities: 0, not inf - inf = NaN
    want[6], want[7], want[8], want[9] = 1.0, 0.0, 1.0, inf  # f = 0: 1 (f nonzero below float64), 0, 1, inf
    want[10] = want[11] = nan
    assert want[:3] == [0.75, 0.5, 8 / 3]
    rel = relative_error(np.array(got), np.array(f), np.array(nz))
    assert rel.dtype == np.float64
    np.testing.assert_array_equal(rel, want)
    # one `nonzero` flag for every input (broadcast)
    np.testing.assert_array_equal(relative_error([0.0, 1.0], [0.0, 0.0], True), [1.0, inf])


def test_relative_error_of_wider_inputs_is_that_of_their_float64_roundings():
    # results and exact values are float64: a wider value is rounded to float64 first, and
    # the figure is a float64 (each error is rounded once to float64)
    one_up = LD(1) + LD(2) ** -60  # rounds to 1.0 in float64
    for got, f in (([one_up], [1.0]), ([1.0], [one_up]), ([one_up, LD(3)], [one_up, LD(2)])):
        rel = relative_error(np.array(got, dtype=LD), np.array(f, dtype=LD), False)
        assert rel.dtype == np.float64
        np.testing.assert_array_equal(rel, [0.0, 0.5][: len(got)])


def test_zero_relative_error_table():
    got = np.array([0.0, -0.0, 0.0, 2.0**-1074, -1.0, inf, -inf])
    nonzero = np.array([True, True, False, True, False, True, False])
    out = zero_relative_error(got, nonzero)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, [1.0, 1.0, 0.0, inf, inf, inf, inf])
    # a result below float64's range given wider is the zero it rounds to: |0 - f| / |f| = 1
    tiny = np.array([LD(2) ** -1100, -(LD(2) ** -1100)], dtype=LD)  # 0 in float64
    np.testing.assert_array_equal(zero_relative_error(tiny, [True, False]), [1.0, 0.0])


# ------------------------------------------------------------------ ulp of the exact value
def test_exact_ulp_takes_the_binade_of_hi_plus_lo():
    # fp16 (p = 11): ulp = 2^(e - 10); an exact value just below a power of two 2^e (hi rounded
    # up onto it, lo of the other sign) is in the binade below
    hi = np.array([1.0, 1.0, 2.0, 1.5, -1.0, -1.0, 0.0, 2.0**-20])
    lo = np.array([2.0**-60, -(2.0**-60), 0.0, -(2.0**-60), 2.0**-60, -(2.0**-60), 5e-324, 2.0**-80])
    want = [2.0**-10, 2.0**-11, 2.0**-9, 2.0**-10, 2.0**-11, 2.0**-10, 2.0**-24, 2.0**-24]
    np.testing.assert_array_equal(exact_ulp(H, hi, lo), want)


# ------------------------------------------------------------------ point errors
def test_point_errors_rounds_wider_results_to_float64_and_warns_of_nothing():
    # result 1 + 2^-60 (longdouble) is the float64 1.0 = RN(1): correctly rounded, error 0
    got = np.array([LD(1) + LD(2) ** -60, 0.0, inf, nan], dtype=LD)
    hi = np.array([1.0, 0.0, 1.0, 0.0])
    e = point_errors(np.zeros(4), got, OracleValues(H.round(hi), hi, np.zeros(4), 0), H)
    assert e.got.dtype == np.float64
    np.testing.assert_array_equal(e.got, [1.0, 0.0, inf, nan])
    np.testing.assert_array_equal(e.correct, [True, True, False, False])
    np.testing.assert_array_equal(e.cls, [FINITE, FINITE, INF, NAN])
    np.testing.assert_array_equal(e.ulp_err, [0.0, 0.0, nan, nan])
    np.testing.assert_array_equal(e.rel_err, [0.0, 0.0, nan, nan])


def test_point_errors_settles_the_unsure_inputs_that_are_not_correctly_rounded():
    # fp16: exact value 1 - 2^-60 carried unsure as hi = 1, lo = 0 (rounding certain: 1.0).
    # input 0: result 1.0, correct (not settled); input 1: result 1 - 2^-11, wrong (settled:
    # exact 1 - 2^-60, binade [1/2, 1), ulp 2^-11, error (2^-11 - 2^-60) / 2^-11 = 1 - 2^-49);
    # input 2: the same, but sure (not settled: error 2^-11 / ulp(1) = 2^-11 / 2^-10 = 1/2)
    got = np.array([1.0, 1 - 2.0**-11, 1 - 2.0**-11])
    ones = np.ones(3)
    unsure = np.array([True, True, False])
    calls = []

    def settle(idx):
        calls.append(idx.tolist())
        lo = np.zeros(3)
        lo[idx] = -(2.0**-60)
        return OracleValues(ones.copy(), ones.copy(), lo, len(idx))

    want = float((Fraction(2**-11) - Fraction(2) ** -60) / Fraction(2**-11))
    assert want == 1 - 2.0**-49
    e = point_errors(np.zeros(3), got, OracleValues(ones, ones, np.zeros(3), 0, unsure), H, settle=settle)
    assert calls == [[1]]
    np.testing.assert_array_equal(e.ulp_err, [0.0, want, 0.5])
    np.testing.assert_array_equal(e.exact_lo, [0.0, -(2.0**-60), 0.0])
    # no settle given, or nothing unsure: the oracle's values as they are
    e = point_errors(np.zeros(3), got, OracleValues(ones, ones, np.zeros(3), 0, unsure), H)
    np.testing.assert_array_equal(e.ulp_err, [0.0, 0.5, 0.5])
    e = point_errors(np.zeros(3), got, OracleValues(ones, ones, np.zeros(3), 0), H, settle=settle)
    np.testing.assert_array_equal(e.ulp_err, [0.0, 0.5, 0.5])
    assert calls == [[1]]


def test_saturating_format_overflow_is_counted_apart():
    # FP4 E2M1: max 6, overflow threshold 6 + ulp(6)/2 = 7; at 7 itself the tie rounds away
    # from 6's odd significand (beyond max): the exact value overflows, RN saturates to 6
    assert (F4.max_finite, F4.overflow_threshold) == (6.0, 7.0)
    t = 2.0**-60
    cases = [  # (result, hi, lo, RN_F(hi + lo), class, ULP error)
        (6.0, 7.0, 0.0, 6.0, OVERFLOW_OK, nan),  # the tie: overflows
        (6.0, 7.0, t, 6.0, OVERFLOW_OK, nan),
        (6.0, 7.0, -t, 6.0, FINITE, 0.5),  # just below the threshold: 6 is an ordinary rounding
        (6.0, 6.5, 0.0, 6.0, FINITE, 0.25),  # |6 - 6.5| / ulp(6.5) = 0.5 / 2
        (6.0, 100.0, 0.0, 6.0, OVERFLOW_OK, nan),
        (-6.0, -7.0, 0.0, -6.0, OVERFLOW_OK, nan),
        (-6.0, -7.0, -t, -6.0, OVERFLOW_OK, nan),  # |f| = 7 + 2^-60
        (-6.0, -7.0, t, -6.0, FINITE, 0.5),  # |f| = 7 - 2^-60
        # ulp_F has no upper exponent bound: ulp(100) = 2^(6 - 1) = 32
        (-6.0, 100.0, 0.0, 6.0, FINITE, 3.3125),  # max of the wrong sign: (100 + 6) / 32
        (4.0, 100.0, 0.0, 6.0, FINITE, 3.0),  # a finite miss of the saturation: 96 / 32
        (1.0, 1.0, 0.0, 1.0, FINITE, 0.0),
    ]
    got, hi, lo, rn, cls, ulp = (np.array(c) for c in zip(*cases))
    assert F4.round(hi[lo == 0]).tolist() == rn[lo == 0].tolist()
    e = point_errors(np.zeros(len(got)), got, OracleValues(rn, hi, lo, 0), F4)
    np.testing.assert_array_equal(e.cls, cls)
    np.testing.assert_array_equal(e.ulp_err, ulp)
    np.testing.assert_array_equal(e.ulp_dist[cls == OVERFLOW_OK], 0)
    s = Summary()
    s.add(e, F4)
    assert (s.overflow_ok, s.finite, s.max_ulp, s.worst["got"]) == (5, 6, 3.3125, -6.0)


def test_saturated_on_its_own():
    got = np.array([6.0, 6.0, -6.0, 6.0, 0.0])
    hi = np.array([8.0, 0.0, -7.0, nan, 0.0])  # an exact 0 (or NaN) under a max is never saturated
    lo = np.array([0.0, 1e-300, 0.0, 0.0, 0.0])
    correct = np.array([True, True, True, True, True])
    assert saturated(F4, got, hi, lo, correct).tolist() == [0, 2]
    assert saturated(F4, got, hi, lo, ~correct).tolist() == []
    assert saturated(F4, got[4:], hi[4:], lo[4:], correct[4:]).tolist() == []


def test_ordinals_of_values_beyond_the_format_are_inf_s_without_a_warning():
    f32 = get_format("fp32")
    # fp32's inf is 0x7f800000, one step past its largest finite value 0x7f7fffff; NaN counts as +inf
    o = _ordinals(f32, np.array([1e300, -1e300, nan, inf, 2.0**-149]))
    assert o.tolist() == [0x7F800000, -0x7F800000, 0x7F800000, 0x7F800000, 1]


# ------------------------------------------------------------------ Summary
A = dict(  # finite ulps 0.25, 3 (finite) and 0.5 (overflow_miss)
    ulp=[0.25, 3.0, nan, nan, nan, 0.5, nan],
    cls=[FINITE, FINITE, OVERFLOW_OK, NAN, INF, OVERFLOW_MISS, UNDEFINED],
    correct=[1, 0, 1, 0, 0, 0, 1],
    dist=[0, 7, 0, -1, -1, 2, -1],
)
B_CLS = [NAN] * 5 + [FINITE] * 3 + [OVERFLOW_OK] * 4 + [INF] * 6 + [OVERFLOW_MISS] * 2 + [UNDEFINED] * 8
B = dict(  # finite ulps 0.5, 6, 2 (finite), 1, 0.125 (overflow_miss): the worst, 6, at index 6
    ulp=[nan] * 5 + [0.5, 6.0, 2.0] + [nan] * 10 + [1.0, 0.125] + [nan] * 8,
    cls=B_CLS,
    correct=[1] * 9 + [0] * 19,
    dist=[-1] * 5 + [1, 12, 4] + [0] * 4 + [-1] * 6 + [3, 1] + [-1] * 8,
)
TOTALS = dict(
    count=35, finite=8, correct=12, nan_count=6, inf_count=7, overflow_ok=5, overflow_miss=3, undefined=9
)


def counts(s):
    return {k: getattr(s, k) for k in TOTALS}


def summary(*chunks, exact=True):
    s = Summary(exact_p99=exact)
    for c in chunks:
        s.add(c, H)
    return s


def test_counts_add_up_over_chunks_in_either_order():
    a, b = chunk(**A), chunk(**B)
    assert counts(summary(a)) == dict(
        count=7, finite=3, correct=3, nan_count=1, inf_count=1, overflow_ok=1, overflow_miss=1, undefined=1
    )
    worst_b = {
        "x": 6.5,
        "x_hex": h16(6.5),
        "got": 6.75,
        "exact": 6.625,
        "exact_lo": -6 * 2.0**-60,
        "rounded": 6.5,
    }
    for s in (summary(a, b), summary(b, a)):
        assert counts(s) == TOTALS
    for first, second in ((a, b), (b, a)):
        s = summary(first)
        s.merge(summary(second))
        assert counts(s) == TOTALS
        assert (s.max_ulp, s.worst) == (6.0, worst_b)
        assert (s.max_abs, s.max_rel, s.max_ulp_distance) == (12.0, 1.5, 12)
        assert s.mean_ulp == (0.25 + 3 + 0.5 + 0.5 + 6 + 2 + 1 + 0.125) / 8
        assert s.p99_ulp == 6.0  # the ceil(0.99 * 8) = 8th smallest of 8
        assert s.correctly_rounded_fraction == 12 / 35


def test_worst_names_the_input_and_its_second_argument():
    # the worst finite-result input is index 3 of the chunk (2nd of the finite ones): ulp 9
    c = chunk(
        [nan, 1.0, nan, 9.0, 2.0],
        [NAN, FINITE, INF, OVERFLOW_MISS, FINITE],
        x=[0.5, 1.5, -2.0, -0.0, 65504.0],
        x2=[3.0, -0.25, 1.0, 65504.0, -(2.0**-24)],
    )
    s = summary(c)
    assert s.worst == {
        "x": -0.0,
        "x_hex": "0x8000",
        "got": 0.25,
        "exact": 0.125,
        "exact_lo": -3 * 2.0**-60,
        "rounded": -0.0,
        "b": 65504.0,
        "b_hex": "0x7bff",
    }
    assert math.copysign(1, s.worst["x"]) == -1 and h16(65504.0) == "0x7bff"


def test_a_nan_error_poisons_every_maximum_in_either_order():
    good = chunk([0.5, 2.0], [FINITE, FINITE])
    bad = chunk([1.0, nan, 4.0], [FINITE, FINITE, FINITE], abs_=[1.0, nan, 2.0], rel=[nan, 0.0, 0.0])
    for order in ((good, bad), (bad, good)):
        s = summary(*order)
        assert math.isnan(s.max_ulp) and math.isnan(s.max_abs) and math.isnan(s.max_rel)
        assert s.worst["x"] == 1.5  # the NaN's input
        s = summary(order[0])
        s.merge(summary(order[1]))
        assert math.isnan(s.max_ulp) and math.isnan(s.max_abs) and math.isnan(s.max_rel)
        assert s.worst["x"] == 1.5 and math.isnan(s.mean_ulp)


def test_zero_maxima_are_plus_zero():
    # errors are magnitudes: a chunk whose (hand-built) zero errors carry a minus sign leaves
    # the maxima +0, in add and in merge
    c = chunk([0.0, 0.0], [FINITE, FINITE], abs_=[-0.0, -0.0], rel=[-0.0, -0.0])
    for s in (summary(c), summary(c, c)):
        assert (math.copysign(1, s.max_abs), math.copysign(1, s.max_rel)) == (1, 1)
    s = Summary()
    s.merge(summary(c))
    assert (math.copysign(1, s.max_abs), math.copysign(1, s.max_rel)) == (1, 1)


def test_kept_errors_are_a_copy():
    # a chunk's arrays may be reused by the caller after add: the summary keeps its own copy
    c = chunk([0.25, 3.0, 0.5], [FINITE] * 3)
    s = summary(c)
    c.ulp_err[:] = 100.0
    assert s.p99_ulp == 3.0 and s.max_ulp == 3.0
    assert s.state()[1][0].tolist() == [0.25, 3.0, 0.5]


def test_histogram_bins_are_the_top_20_bits():
    # hand-worked keys: 1.0 = 0x3ff0_0000_0000_0000 -> 0x3ff00; 1 + 2^-9 is below the 8 kept
    # significand bits (same bin), 1 + 2^-8 the next bin; 3.0 = 0x4008... -> 0x40080;
    # 2^-1030 = subnormal bit 44 -> 1; inf -> 0x7ff00; NaN 0x7ff8... -> 0x7ff80
    vals = [0.0, 1.0, 2.0**-1030, 0.0, 1 + 2.0**-9, 3.0, 1 + 2.0**-8, inf, nan]
    assert [key(v) for v in vals] == [0, 0x3FF00, 1, 0, 0x3FF00, 0x40080, 0x3FF01, 0x7FF00, 0x7FF80]
    s = summary(chunk(vals, [FINITE] * 9), exact=False)
    assert not s.p99_exact
    assert state_hist(s) == [
        [0, 2],
        [1, 1],
        [0x3FF00, 2],
        [0x3FF01, 1],
        [0x40080, 1],
        [0x7FF00, 1],
        [0x7FF80, 1],
    ]
    # no zero error: no bin 0 at all; only zeros: bin 0 alone; a key-1 error without zeros
    s = summary(chunk([3.0, 2.0**-1030], [FINITE] * 2), exact=False)
    assert state_hist(s) == [[1, 1], [0x40080, 1]]
    s = summary(chunk([0.0, 0.0, 0.0], [FINITE] * 3), exact=False)
    assert state_hist(s) == [[0, 3]]
    assert s.p99_ulp == struct.unpack(">d", struct.pack(">q", 1 << 44))[0]  # bin 0's upper edge


def test_state_round_trip_rebuilds_the_summary_exactly(monkeypatch):
    monkeypatch.setattr(M, "EXACT_P99_LIMIT", 4)
    c = chunk([0.5, 1.0, 3.0], [FINITE] * 3)
    s = summary(c)  # exact: the same state
    d, errs = s.state()
    back = Summary.from_state(json.loads(json.dumps(d)), [a.tolist() for a in errs])
    assert back.state()[0] == d and [a.tolist() for a in back.state()[1]] == [[0.5, 1.0, 3.0]]
    assert (back.p99_ulp, back.mean_ulp, back._kept) == (3.0, 1.5, 3)
    s = summary(c, c)  # switched to a histogram (6 > 4): no error array left, every field equal
    assert not s.p99_exact and state_hist(s) == [[0x3FE00, 2], [0x3FF00, 2], [0x40080, 2]]
    d, errs = s.state()
    assert errs == []
    assert Summary.from_state(json.loads(json.dumps(d)), errs) == s


def test_from_state_takes_narrower_error_arrays_as_float64(monkeypatch):
    s = summary(chunk([0.5, 1.0, 3.0], [FINITE] * 3))
    d, errs = s.state()
    back = Summary.from_state(json.loads(json.dumps(d)), [a.astype(np.float32) for a in errs])
    back.merge(Summary(exact_p99=False))  # into a histogram: bins of the float64 patterns
    assert state_hist(back) == [[0x3FE00, 1], [0x3FF00, 1], [0x40080, 1]]


def test_exact_p99_limit_in_merge(monkeypatch):
    monkeypatch.setattr(M, "EXACT_P99_LIMIT", 4)

    def s(*ulps, exact=True):
        return summary(chunk(list(ulps), [FINITE] * len(ulps)), exact=exact)

    # 2 + 2 errors fit the limit of 4 exactly: kept
    a = s(0.5, 1.0)
    a.merge(s(3.0, 0.25))
    assert a.p99_exact and sorted(np.concatenate(a.state()[1]).tolist()) == [0.25, 0.5, 1.0, 3.0]
    a.merge(s(2.0))  # 5 > 4: a histogram of all five from here on
    assert not a.p99_exact and a.state()[1] == []
    assert state_hist(a) == [[0x3FD00, 1], [0x3FE00, 1], [0x3FF00, 1], [0x40000, 1], [0x40080, 1]]
    assert a.p99_ulp == 3.0 + 2.0**-7  # upper edge of 3's bin (relative width 2^-8 of 2)
    # 3 + 2 > 4 in one merge
    a = s(0.5, 1.0, 2.0)
    a.merge(s(3.0, 0.25))
    assert not a.p99_exact
    assert state_hist(a) == [[0x3FD00, 1], [0x3FE00, 1], [0x3FF00, 1], [0x40000, 1], [0x40080, 1]]
    # a histogram merging an exact summary, and an exact one merging a histogram
    for first, second in ((s(0.5, exact=False), s(3.0)), (s(0.5), s(3.0, exact=False))):
        first.merge(second)
        assert not first.p99_exact and first.state()[1] == []
        assert state_hist(first) == [[0x3FE00, 1], [0x40080, 1]]
    # add at the limit: 4 kept, the 5th switches
    a = s(0.5, 1.0)
    a.add(chunk([3.0, 0.25], [FINITE] * 2), H)
    assert a.p99_exact
    a.add(chunk([2.0], [FINITE]), H)
    assert not a.p99_exact and len(state_hist(a)) == 5


def test_point_errors_on_a_table_of_every_class():
    # fp16 (p = 11, max 65504, ulp(1) = 2^-10); rows: result, hi, lo, RN_F(hi + lo), then the
    # class, ULP error, ULP distance, absolute and relative error worked by hand
    t = 2.0**-40
    rows = [
        (1 + 2.0**-9, 1.0, 0.0, 1.0, FINITE, 2.0, 2, 2.0**-9, 2.0**-9),
        # the fast value 2^-40 past the midpoint 1 + 2^-11, RN decided 1: capped at 0.5
        (1.0, 1 + 2.0**-11 + t, 0.0, 1.0, FINITE, 0.5, 0, 2.0**-11 + t, None),
        (inf, 70000.0, 0.0, inf, OVERFLOW_OK, nan, 0, nan, nan),
        (65504.0, 70000.0, 0.0, inf, OVERFLOW_MISS, 4496 / 64, 1, 4496.0, float(Fraction(4496, 70000))),
        (nan, 1.0, 0.0, 1.0, NAN, nan, -1, nan, nan),
        (-inf, 2.0, 0.0, 2.0, INF, nan, -1, nan, nan),
        (nan, nan, 0.0, nan, UNDEFINED, nan, -1, nan, nan),
        (0.5, nan, 0.0, nan, UNDEFINED, nan, -1, nan, nan),
        (-0.0, 0.0, 0.0, 0.0, FINITE, 0.0, 0, 0.0, 0.0),
        (2.0**-24, 0.0, 0.0, 0.0, FINITE, 1.0, 1, 2.0**-24, inf),  # ulp(0) = 2^-24
        # nonzero below float64's range (the 2^-1074 stand-in) against a zero result: rel 1;
        # |0 - f| < 2^-1074 and its ULP error round to 0 in float64 (not the stand-in's)
        (0.0, 0.0, 5e-324, 0.0, FINITE, 0.0, 0, 0.0, 1.0),
        (inf, inf, 0.0, inf, OVERFLOW_OK, nan, 0, nan, nan),  # a pole, correctly infinite
        # beyond float64 (e^712): unknown without mpmath: ULP and abs inf, rel 1 (|r| <= 2^960)
        (65504.0, inf, 0.0, inf, OVERFLOW_MISS, inf, 1, inf, 1.0),
    ]
    got, hi, lo, rn, cls, ulp, dist, ab, rel = (list(c) for c in zip(*rows))
    rel[1] = float(Fraction(2**-11 + t) / Fraction(1 + 2**-11 + t))
    n = len(rows)
    x = list(range(n))  # ints: the inputs are float64 all the same
    e = point_errors(x, got, OracleValues(np.array(rn), np.array(hi), np.array(lo), 0), H, x2=x)
    np.testing.assert_array_equal(e.cls, cls)
    np.testing.assert_array_equal(e.ulp_err, ulp)
    np.testing.assert_array_equal(e.abs_err, ab)
    np.testing.assert_array_equal(e.rel_err, rel)
    np.testing.assert_array_equal(e.ulp_dist, dist)
    assert e.ulp_dist.dtype == np.int64 and e.x.dtype == np.float64 and e.x2.dtype == np.float64
    assert e.x.tolist() == e.x2.tolist() == [float(v) for v in x]
    assert e.correct.tolist() == [
        False,
        True,
        True,
        False,
        False,
        False,
        True,
        False,
        True,
        False,
        True,
        True,
        False,
    ]
    assert point_errors(x, got, OracleValues(np.array(rn), np.array(hi), np.array(lo), 0), H).x2 is None
    # the same with mpmath's figures for the inputs beyond float64: asked for exactly those
    calls = []

    def beyond(idx, g):
        calls.append((idx.tolist(), g.tolist()))
        return 146.92, 5e307, 1.0  # any figures: they are placed as given

    e = point_errors(x, got, OracleValues(np.array(rn), np.array(hi), np.array(lo), 0), H, beyond=beyond)
    assert calls == [([12], [65504.0])]
    assert (e.ulp_err[12], e.abs_err[12], e.rel_err[12], e.cls[12]) == (146.92, 5e307, 1.0, OVERFLOW_MISS)
    np.testing.assert_array_equal(e.ulp_err[:12], ulp[:12])


def test_beyond_float64_in_fp64_has_relative_error_inf():
    # fp64's results reach 2^1024: 1 - r/f need not round to 1, so unknown: inf
    f64 = get_format("fp64")
    e = point_errors([0.0], [1e308], OracleValues(np.array([inf]), np.array([inf]), np.zeros(1), 0), f64)
    assert (e.cls[0], e.ulp_err[0], e.abs_err[0], e.rel_err[0]) == (OVERFLOW_MISS, inf, inf, inf)
