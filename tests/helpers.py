"""Independent checks used by the tests (mpmath, exact rationals), not the tool's code."""

from fractions import Fraction

import mpmath as mp

from audit.numbers.formats import Format


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


# (p, emin, largest finite value) of each format, from the README's table (not from the tool)
PARAMS = {
    "fp16": (11, -14, Fraction(65504)),
    "bf16": (8, -126, Fraction(2**8 - 1, 2**7) * 2**127),
    "fp8_e4m3": (4, -6, Fraction(448)),
    "fp8_e5m2": (3, -14, Fraction(57344)),
    "fp32": (24, -126, Fraction(2**24 - 1, 2**23) * 2**127),
    "fp64": (53, -1022, Fraction(2**53 - 1, 2**52) * 2**1023),
}


def round_exact(name: str, f: Fraction):
    """RN_F(f), ties to even, as an exact Fraction; None where it overflows (beyond the
    largest finite value plus half an ulp, or the tie there resolved to the odd side's
    successor).  Written from the definitions alone: q = max(e, emin) - p + 1."""
    p, emin, top = PARAMS[name]
    if f == 0:
        return Fraction(0)
    a = abs(f)
    e = a.numerator.bit_length() - a.denominator.bit_length()  # floor(log2 a) or one more
    if Fraction(2) ** e > a:
        e -= 1
    q = max(e, emin) - p + 1
    n = a / Fraction(2) ** q
    k = n.numerator // n.denominator
    rem = n - k
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and k % 2 == 1):
        k += 1
    v = k * Fraction(2) ** q
    if v > top:
        return None
    return v if f > 0 else -v


def is_nearest_even(fmt: Format, exact, r: float) -> bool:
    """True when finite r is a value of fmt and the nearest one to the exact value, ties to
    even (an implementation independent of the tool's rounding and ordinals)."""
    if r != r or r in (float("inf"), float("-inf")):
        return False
    fr = Fraction(r)
    if round_exact(fmt.name, fr) != fr:
        return False  # r is not a value of the format (or beyond its range)
    want = round_exact(fmt.name, to_fraction(exact))
    return want is not None and want == fr


# Optional dependencies that the README's test command (pip install -e ".[test]" torch==...)
# installs: in CI (CI=true) their absence is a failure, never a silent skip.  jax is not in
# that command (extra actaudit[jax]), so its tests skip, saying so.
README_INSTALLS = {"torch", "distributed", "dask"}


def required(module: str):
    """``module``, which the README's test command installs (the engines are part of the
    test install): a test that needs it fails where it is missing, it never skips."""
    import importlib

    import pytest

    try:
        return importlib.import_module(module)
    except ImportError as e:
        pytest.fail(f"{module} is required by the tests (pip install -e '.[test]'): {e}")


def optional(module: str):
    import importlib
    import os

    import pytest

    try:
        return importlib.import_module(module)
    except ImportError as e:
        in_ci = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
        if in_ci and module in README_INSTALLS:
            pytest.fail(f"{module} is missing in CI, where the README's test command installs it ({e})")
        why = "" if module in README_INSTALLS else " (not installed by the README's test command)"
        pytest.skip(f"{module} is not installed{why}: {e}")
