"""Independent checks used by the tests (mpmath, exact rationals), not the tool's code."""

from fractions import Fraction

import mpmath as mp

from audit.formats import Format


def to_fraction(v) -> Fraction:
    """The exact rational value of an mpf or a float."""
    if isinstance(v, mp.mpf):
        sign, man, exp, bc = v._mpf_
        if man and exp + bc < -3000:  # far below every format's subnormals: keep it small
            man, exp = 1, -3000
        q = Fraction(int(man)) * (Fraction(2) ** exp)
        return -q if sign else q
    return Fraction(v)


def neighbours(fmt: Format, r: float) -> tuple[float, float]:
    """The format values just below and above r (by bit patterns, via ml_dtypes)."""
    o = int(fmt.ordinal([r])[0])
    below = float(fmt.from_ordinal([o - 1])[0]) if o > -fmt.max_ordinal else float("-inf")
    above = float(fmt.from_ordinal([o + 1])[0]) if o < fmt.max_ordinal else float("inf")
    return below, above


def is_nearest_even(fmt: Format, exact, r: float) -> bool:
    """True when finite r is a nearest value of fmt to the exact value, ties to even."""
    f = to_fraction(exact)
    b, a = neighbours(fmt, r)
    d = abs(f - Fraction(r))
    for n in (b, a):
        if n in (float("inf"), float("-inf")):
            continue
        dn = abs(f - Fraction(n))
        if dn < d:
            return False
        if dn == d and int(fmt.to_bits([r])[0]) & 1:
            return False  # tie resolved to an odd significand
    return True
