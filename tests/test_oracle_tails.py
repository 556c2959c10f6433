"""The GELU fast value's tails (audit/oracle/references.py, GELU_ONE and GELU_ZERO): where it
skips erfc, its value is the float64 rounding of the exact GELU, checked here in mpmath."""

import math

import mpmath as mp
import numpy as np

from audit.oracle.references import GELU_ONE, GELU_ZERO, REFERENCES

FAST = REFERENCES["gelu"].fast


def _exact(x: float) -> mp.mpf:
    with mp.workprec(2000):  # (the lower tail is near 1e-350: far beyond float64)
        return mp.mpf(x) / 2 * mp.erfc(-mp.mpf(x) / mp.sqrt(2))


def test_upper_tail_is_x_itself():
    # x - gelu(x) = x Q(x) with Q(x) = erfc(x/sqrt(2))/2: below a quarter of float64's ulp of x
    # from x = 9 on (Q decreases), so the exact value rounds to x
    with mp.workprec(200):
        q = mp.erfc(mp.mpf(GELU_ONE) / mp.sqrt(2)) / 2
    assert q < mp.mpf(2) ** -62
    xs = np.array([GELU_ONE, np.nextafter(GELU_ONE, np.inf), 9.5, 12.0, 38.6, 1e5, 3.4e38, 1e300])
    got = FAST(xs)
    for x, g in zip(xs.tolist(), got.tolist()):
        e = _exact(x)
        assert g == x and abs(e - x) < mp.mpf(x) * mp.mpf(2) ** -60, x  # (so fl64(e) = x)


def test_lower_tail_is_minus_zero():
    # |gelu(x)| = |x| Q(|x|) below 2**-1075 from x = -40 on: it rounds to -0 in float64
    xs = np.array([GELU_ZERO, np.nextafter(GELU_ZERO, -np.inf), -41.0, -1e3, -3.4e38, -1e300])
    got = FAST(xs)
    for x, g in zip(xs.tolist(), got.tolist()):
        e = _exact(x)
        assert e < 0 and abs(e) < mp.mpf(2) ** -1075, x
        assert g == 0.0 and math.copysign(1.0, g) == -1.0, x


def test_between_the_tails_erfc_decides_within_the_stated_error():
    # just inside the upper tail, down to where the values leave float64's normal range
    # (below, they underflow in erfc as in the formula: the oracle's zero rule decides),
    # and a mixed chunk: the computed values keep the reference's bound
    xs = np.array([np.nextafter(GELU_ONE, 0.0), 8.0, 1.5, 0.25, -3.0, -20.0, -30.0])
    mixed = np.concatenate([xs, [GELU_ONE, 20.0, GELU_ZERO, -50.0]])
    got = FAST(mixed)[: len(xs)]
    assert np.array_equal(got, FAST(xs))  # the same values alone or beside tail inputs
    bound = REFERENCES["gelu"].rel_err_at(xs)
    for x, g, b in zip(xs.tolist(), got.tolist(), bound.tolist()):
        e = _exact(x)
        assert g != 0 and abs((mp.mpf(g) - e) / e) <= b, x


def test_specials_keep_the_formula_answers():
    # +inf is x itself; NaN and -inf are the formula's NaN (the fast path declining)
    got = FAST(np.array([np.inf, -np.inf, np.nan]))
    assert got[0] == np.inf and np.isnan(got[1]) and np.isnan(got[2])


def test_one_value_gives_the_formula_scalar():
    # a 0-d input (one value) takes the formula: a scalar, as the fast path gave before
    rel = REFERENCES["gelu"].rel_err_at
    for x in (9.5, -50.0, 1.25):
        v, r = FAST(x), rel(x)
        assert np.ndim(v) == 0 and np.ndim(r) == 0
        assert float(v) == float(FAST(np.array([x]))[0]) and float(r) == float(rel(np.array([x]))[0])
