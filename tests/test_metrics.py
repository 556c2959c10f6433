"""The ULP machinery on hand-worked cases."""

import math

import numpy as np
import pytest

from audit.measure.metrics import FINITE, INF, NAN, OVERFLOW_MISS, OVERFLOW_OK, Summary, point_errors
from audit.numbers.formats import get_format
from audit.oracle.oracle import OracleValues

H = get_format("fp16")


def errs(fmt, got, exact, lo=0.0):
    got = np.array([got], dtype=float)
    hi = np.array([exact], dtype=float)
    lo = np.array([lo], dtype=float)
    rounded = (
        fmt.round(hi + lo)
        if lo[0] == 0
        else np.array([fmt.round_mpf(__import__("mpmath").mpf(exact) + lo[0])])
    )
    return point_errors(np.zeros(1), got, OracleValues(rounded, hi, lo, 0), fmt)


def one(fmt, got, exact, lo=0.0):
    e = errs(fmt, got, exact, lo)
    return e.ulp_err[0], int(e.ulp_dist[0]), e.cls[0], bool(e.correct[0])


def test_normal_binade():
    # exact 1 + 2^-12 (ulp 2^-10), result 1: a quarter ulp, correctly rounded
    u, d, c, ok = one(H, 1.0, 1 + 2**-12)
    assert u == 0.25 and d == 0 and c == FINITE and ok
    # result two ulps above
    u, d, c, ok = one(H, 1 + 2 * 2**-10, 1.0)
    assert u == 2.0 and d == 2 and not ok


def test_subnormals_and_zero():
    s = 2.0**-24
    u, d, _, ok = one(H, s, 1.5 * s)  # a tie: result 1 ulp is odd, correct is 2 ulps
    assert u == 0.5 and d == 1 and not ok
    u, *_ = one(H, 2 * s, 1.5 * s)
    assert u == 0.5
    u, d, _, ok = one(H, s, 0.0)  # ulp(0) = smallest subnormal
    assert u == 1.0 and d == 1 and not ok
    # a zero result for an exact value the format can hold is an error, not a match
    u, d, _, ok = one(H, 0.0, 2.0**-14)
    assert u == 2.0**10 and d == 2**10 and not ok
    # -0 and +0 are the same point
    u, d, _, ok = one(H, -0.0, 0.0)
    assert u == 0 and d == 0 and ok


def test_ulp_of_exact_value_below_a_power_of_two():
    # exact = 1 - 2^-60 (hi rounds up to 1.0, lo = -2^-60): its binade is [1/2, 1), ulp 2^-11
    u, d, _, ok = one(H, 1.0 - 2**-11, 1.0, lo=-(2.0**-60))
    assert u == pytest.approx(1.0 - 2.0**-49, rel=1e-12)
    assert d == 1 and not ok
    u, d, _, ok = one(H, 1.0, 1.0, lo=-(2.0**-60))
    assert u <= 0.5 and ok


def test_binade_edges():
    # result 2 for exact just below 2: error measured in the ulp of the lower binade
    u, *_ = one(H, 2.0, 2 - 2**-10)
    assert u == 1.0
    u, *_ = one(H, 2 - 2**-10, 2.0)
    assert u == 0.5  # half an ulp of 2 (2^-9)


def test_infinities_and_nan():
    u, d, c, ok = one(H, math.inf, 70000.0)  # exact overflows: inf is the correct rounding
    assert c == OVERFLOW_OK and ok and d == 0 and math.isnan(u)
    u, d, c, ok = one(H, math.inf, 1000.0)  # spurious overflow
    assert c == INF and not ok and math.isnan(u)
    _, _, c, _ = one(H, math.nan, 1.0)
    assert c == NAN
    u, d, c, ok = one(H, 65504.0, 70000.0)  # finite where the correct result is inf
    assert c == OVERFLOW_MISS and d == 1 and u == (70000 - 65504) / 64  # ulp(70000) = 2^(16-10)
    e4 = get_format("e4m3")
    _, _, c, ok = one(e4, math.nan, 500.0)  # E4M3FN overflows to NaN: correct
    assert c == OVERFLOW_OK and ok
    _, d, c, _ = one(e4, 448.0, 500.0)
    assert c == OVERFLOW_MISS and d == 1


def test_relative_and_absolute():
    e = errs(H, 1.0, 1.0 + 2**-11 + 2**-13)
    assert e.abs_err[0] == 2**-11 + 2**-13
    assert e.rel_err[0] == pytest.approx((2**-11 + 2**-13) / (1 + 2**-11 + 2**-13))


def test_summary_excludes_nonfinite_and_p99_definition():
    n = 200
    got = np.arange(n, dtype=float) * 2**-10 + 1.0  # result k ulps above exact 1.0
    got[5] = math.nan
    got[6] = math.inf
    hi = np.ones(n)
    e = point_errors(np.zeros(n), got, OracleValues(H.round(hi), hi, np.zeros(n), 0), H)
    s = Summary()
    s.add(e, H)
    assert s.nan_count == 1 and s.inf_count == 1 and s.finite == n - 2
    ks = [k for k in range(n) if k not in (5, 6)]
    assert s.max_ulp == n - 1
    assert s.mean_ulp == pytest.approx(sum(ks) / len(ks))
    # p99: the smallest e with at least 99% of the 198 finite errors <= e: the 197th smallest
    assert s.p99_ulp == sorted(ks)[math.ceil(0.99 * 198) - 1]
    assert s.worst["x_hex"] == "0x0000"
    assert s.correct == 1


def test_ordinals_put_inf_and_nan_one_step_past_the_largest_finite():
    import math

    from audit.measure.metrics import _ordinals
    from audit.numbers.formats import FORMATS

    for f in FORMATS.values():
        past = int(f.ordinal([f.max_finite])[0]) + 1
        v = np.array(
            [
                math.inf,
                -math.inf,
                math.nan,
                f.max_finite,
                -f.max_finite,
                0.0,
                -0.0,
                f.smallest_subnormal,
                -f.smallest_subnormal,
                1.0,
            ]
        )
        o = _ordinals(f, v).tolist()
        # 1.0: its biased exponent (the bias is 1 - emin) times the 2**(p-1) values per binade
        assert o == [past, -past, past, past - 1, -(past - 1), 0, 0, 1, -1, (1 - f.emin) * 2 ** (f.p - 1)], (
            f.name
        )


def _errors_summary(errs, exact_p99, chunks=1):
    n = len(errs)
    hi = np.ones(n)
    got = 1.0 + errs * 2**-10  # fp16: k ulps above exact 1.0 for errs = k
    e = point_errors(np.zeros(n), got, OracleValues(H.round(hi), hi, np.zeros(n), 0), H)
    total = Summary(exact_p99=exact_p99)
    for part in np.array_split(np.arange(n), chunks):
        s = Summary(exact_p99=exact_p99)
        sub = type(e)(**{k: (None if v is None else v[part]) for k, v in vars(e).items()})
        s.add(sub, H)
        total.merge(s)
    return total


def test_histogram_p99_is_an_upper_bound_within_one_bin():
    errs = np.random.default_rng(3).integers(0, 1000, 5000).astype(float)
    exact = sorted(errs)[math.ceil(0.99 * 5000) - 1]
    s = _errors_summary(errs, exact_p99=False, chunks=7)
    assert not s.p99_exact
    assert exact <= s.p99_ulp <= exact * (1 + 2**-8)
    t = _errors_summary(errs, exact_p99=True, chunks=7)
    assert t.p99_exact and t.p99_ulp == exact
    assert s.mean_ulp == t.mean_ulp == pytest.approx(errs.mean())


def test_summary_state_round_trips_through_json():
    import json

    errs = np.random.default_rng(4).integers(0, 300, 999).astype(float)
    for exact_p99 in (True, False):
        s = _errors_summary(errs, exact_p99, chunks=3)
        d, arrays = s.state()
        r = Summary.from_state(json.loads(json.dumps(d)), [a.copy() for a in arrays])
        assert r.state()[0] == d
        assert (r.p99_ulp, r.mean_ulp, r.max_ulp, r.worst) == (s.p99_ulp, s.mean_ulp, s.max_ulp, s.worst)


def test_summary_state_holds_every_public_field_in_order():
    """STATE_FIELDS (what state and from_state carry) are the Summary's public fields."""
    import dataclasses

    from audit.measure.metrics import STATE_FIELDS

    assert STATE_FIELDS == tuple(f.name for f in dataclasses.fields(Summary) if not f.name.startswith("_"))
    assert list(Summary(count=3).state()[0]) == [*STATE_FIELDS, "sums", "hist"]


def test_histogram_counts_every_error_in_its_bin():
    """The binning (zeros apart, short count arrays) against a plain count of the bins."""
    from collections import Counter

    rng = np.random.default_rng(7)
    errs = np.concatenate(
        [
            np.zeros(50),
            rng.integers(1, 5000, 900).astype(float),
            np.full(3, 2.0**-20),
            rng.uniform(0, 0.5, 47),
        ]
    )
    s = _errors_summary(errs, exact_p99=False, chunks=4)
    e = point_errors(
        np.zeros(len(errs)),
        1.0 + errs * 2**-10,
        OracleValues(H.round(np.ones(len(errs))), np.ones(len(errs)), np.zeros(len(errs)), 0),
        H,
    )
    want = Counter((e.ulp_err.view(np.uint64) >> np.uint64(44)).tolist())
    assert s._hist == dict(want) and sum(s._hist.values()) == len(errs)


def test_union_of_index_arrays_is_sorted_and_without_repeats():
    from audit.measure.metrics import _union

    a, b = np.array([4, 1], dtype=np.int64), np.array([1, 5, 0], dtype=np.int64)
    assert _union(6, a, b).tolist() == [0, 1, 4, 5]
    none = np.array([], dtype=np.int64)
    assert _union(6, none, none).tolist() == [] and _union(6, none, b).tolist() == [0, 1, 5]
