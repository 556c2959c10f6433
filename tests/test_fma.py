"""Ops.fma is one rounding of the exact a*b + c in every compute format (issue 13, item 3).

The expected values are computed here, independently of audit/numbers/formats.py: the exact value
a*b + c by mpmath (fmul/fadd with exact=True), rounded to nearest-even into the format by
integer arithmetic on its significand (subnormals and overflow included).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from audit.numbers.formats import FORMATS, get_format
from audit.targets.compute import Ops, Val, fused_multiply_add

# name: (p, emin, emax, max_finite, overflow value)
SPEC = {
    "fp8_e4m3": (4, -6, 8, 448.0, math.nan),
    "fp8_e5m2": (3, -14, 15, 57344.0, math.inf),
    "fp16": (11, -14, 15, 65504.0, math.inf),
    "bf16": (8, -126, 127, None, math.inf),
    "fp32": (24, -126, 127, None, math.inf),
    "fp64": (53, -1022, 1023, None, math.inf),
}


def rn(x: mpmath.mpf, name: str) -> float:
    """x (an exact mpmath value) rounded to nearest, ties to even, into the format."""
    p, emin, emax, mx, ovf = SPEC[name]
    if mx is None:
        mx = (2 - 2.0 ** (1 - p)) * 2.0**emax
    sign, man, exp, bc = x._mpf_
    if not man:
        return 0.0  # an exact zero sum of nonzero terms; zero operands are checked separately
    e = exp + bc - 1
    q = max(e, emin) - p + 1  # quantum of the result's binade (or of the subnormals)
    num, den = (int(man) << max(exp - q, 0)), 1 << max(q - exp, 0)
    n, rem = divmod(num, den)
    if 2 * rem > den or (2 * rem == den and n % 2):
        n += 1
    if n and q + n.bit_length() - 1 > emax:  # 2^(emax+1) or more
        v = ovf
    else:
        v = math.ldexp(n, q)
    if v > mx:
        v = ovf
    return -v if sign else v


def exact_fma(a: float, b: float, c: float) -> mpmath.mpf:
    return mpmath.fadd(mpmath.fmul(a, b, exact=True), c, exact=True)


def values(name, rng, n):
    """Adversarial operands: small significands (products land on ties), binade edges,
    subnormals, the largest values, and random bit patterns."""
    f = get_format(name)
    p, emin, emax = f.p, f.emin, f.emax
    out = []
    for _ in range(n):
        kind = rng.integers(5)
        if kind == 0:  # few significand bits: exact products, midpoints
            m = int(rng.integers(1, 1 << min(p, 6)))
            v = math.ldexp(m, int(rng.integers(emin - p + 1, emax - 6)))
        elif kind == 1:  # 1 + small: products 1 + 2u + u^2 that sit next to a midpoint
            v = 1.0 + math.ldexp(int(rng.integers(1, 8)), -int(rng.integers(p // 2, p)))
        elif kind == 2:  # subnormals
            v = math.ldexp(int(rng.integers(1, 1 << (p - 1))), emin - p + 1)
        elif kind == 3:  # near the largest value
            v = f.max_finite * float(rng.choice([1.0, 0.5, 0.75, 2.0 ** -((p + 1) // 2)]))
        else:  # random bits
            if f.bits <= 32:
                bits = int(rng.integers(0, 1 << f.bits))
                v = float(f.from_bits(np.array([bits], dtype=f.uint))[0])
            else:
                v = math.ldexp(float(rng.random()) + 0.5, int(rng.integers(-1070, 1020)))
            if not math.isfinite(v):
                v = 1.5
        out.append(-v if rng.random() < 0.5 else v)
    return np.array([float(f.round(np.array([x]))[0]) for x in out])


@pytest.mark.parametrize("name", list(SPEC))
def test_fma_is_one_rounding_of_the_exact_value(name):
    f = FORMATS[name]
    rng = np.random.default_rng(17)
    n = 300 if name == "fp64" else 1500
    a, b = values(name, rng, n), values(name, rng, n)
    # c: random, or one that cancels the product (-RN(a b), and one ulp either side of it),
    # or a tiny one that decides a tie of the product
    c = values(name, rng, n)
    with np.errstate(all="ignore"):
        prod = f.round(a * b) if name != "fp64" else a * b
    pick = rng.integers(4, size=n)
    ulp = np.nan_to_num(f.ulp(prod))
    c = np.where(pick == 1, -prod, c)
    c = np.where(pick == 2, -prod + ulp, c)
    c = np.where(pick == 3, np.copysign(f.smallest_subnormal, c), c)
    c = f.round(np.where(np.isfinite(c), c, 1.0))
    got = np.asarray(fused_multiply_add(f, a, b, c), dtype=np.float64)
    for i in range(n):
        want = rn(exact_fma(a[i], b[i], c[i]), name)
        ok = (math.isnan(want) and math.isnan(got[i])) or got[i] == want
        assert ok, (name, a[i].hex(), b[i].hex(), c[i].hex(), got[i], want)


def test_the_issue_example_fp32():
    # fp32 fma(0x3f800b50, 0x337fe962, 1.0): the exact value is 1 + 2^-24 + 3.97e-18, just above
    # the midpoint 1 + 2^-24 between 1 and 1 + 2^-23: one rounding gives 1 + 2^-23; rounding the
    # float32 product first lands on the tie and gives 1.0.
    a, b = (np.array([v], dtype=np.uint32).view(np.float32) for v in (0x3F800B50, 0x337FE962))
    exact = exact_fma(float(a[0]), float(b[0]), 1.0)
    assert exact > 1 + mpmath.mpf(2) ** -24
    got = fused_multiply_add(FORMATS["fp32"], a, b, np.float32(1.0))
    assert float(got[0]) == 1.0000001192092896 == 1 + 2.0**-23
    ops = Ops(FORMATS["fp32"])
    assert float(ops.fma(Val(a, ops), Val(b, ops), 1.0).a[0]) == 1 + 2.0**-23


@pytest.mark.parametrize("name", ["fp16", "bf16", "fp32", "fp64", "fp8_e4m3"])
def test_fma_ties_signed_zeros_and_specials(name):
    f = FORMATS[name]
    p = f.p
    u = 2.0 ** (1 - p)
    # (1 + 2^-h)^2 = 1 + 2^(1-h) + 2^-2h: with 2h = p exactly a midpoint of [1, 2): a tie,
    # to even (down); plus the smallest subnormal it rounds up; minus it, down
    h = p // 2 if p % 2 == 0 else None
    cases = []
    if h:
        x = 1 + 2.0**-h
        cases += [
            (x, x, 0.0, 1 + 2.0 ** (1 - h)),
            (x, x, f.smallest_subnormal, 1 + 2.0 ** (1 - h) + u),
            (x, x, -f.smallest_subnormal, 1 + 2.0 ** (1 - h)),
        ]
    big = f.max_finite
    cases += [
        (-0.0, 1.0, -0.0, -0.0),
        (0.0, -1.0, 0.0, 0.0),
        (1.0, 1.0, -1.0, 0.0),
        (big, 2.0, -big, big),  # exact value big: the product alone would overflow
        (big, 1.0, big, f.overflow_value),
        (math.inf, 0.0, 1.0, math.nan),
        (math.inf, 1.0, -math.inf, math.nan),
        (math.inf, 1.0, 1.0, math.inf),
    ]
    if not f.has_inf:
        cases = [cs for cs in cases if all(math.isfinite(v) for v in cs[:3])]
    a, b, c, want = (np.array(col, dtype=np.float64) for col in zip(*cases))
    got = np.asarray(fused_multiply_add(f, a, b, c), dtype=np.float64)
    for g, w, cs in zip(got, want, cases):
        if math.isnan(w):
            assert math.isnan(g), cs
        else:
            assert g == w and math.copysign(1, g) == math.copysign(1, w), (cs, g)
