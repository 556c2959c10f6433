"""expm1, log1p, log and exp2: the exponential and logarithm primitives of kernels.

The naive forms lose everything to cancellation near 0 (exp(x) - 1, log(1 + x)); the
classic repairs divide the error out (Kahan's and Goldberg's tricks); the bit tricks of
Paul Mineiro's fastapprox read log2 off the float32 exponent field and build 2^x in it.
"""

import math

import numpy as np

from audit.targets.candidates import candidate

LN2 = math.log(2)


def float32_bits_as_value(x, m):
    """The float32 bit pattern of x read as an unsigned integer, as a float32 value (the
    int -> float conversion that fastapprox's ``float y = vx.i`` performs, rounded to
    nearest): compute format fp32 only."""
    a = np.asarray(x.a, dtype=np.float32).view(np.uint32).astype(np.float64)
    return m.op("bitcast", a, (x.a,))


def float32_with_bits(bits, m):
    """The float32 whose bit pattern is ``bits`` (exact integers as float64 values)."""
    b = np.asarray(bits, dtype=np.float64).astype(np.int64) & 0xFFFFFFFF
    return m.op("bitcast", b.astype(np.uint32).view(np.float32).astype(np.float64), (bits,))


def uint32_bits_as_float32(t, m):
    """C's float -> uint32_t conversion of t (truncation), its bits read as a float32:
    fastapprox's ``static_cast<uint32_t>``.  Out of [0, 2**32) C leaves it undefined;
    x86-64 compilers convert through a 64-bit integer, giving trunc(t) mod 2**32 (that is
    modelled here, for |t| < 2**63; 0 beyond)."""
    a = np.asarray(t.a, dtype=np.float64)
    ok = np.isfinite(a) & (np.abs(a) < 2.0**63)
    i = np.trunc(np.where(ok, a, 0.0)).astype(np.int64) & 0xFFFFFFFF
    return m.op("bitcast", i.astype(np.uint32).view(np.float32).astype(np.float64), (a,))


# ------------------------------------------------------------------ expm1
@candidate(
    "expm1.libm",
    reference="expm1",
    formula="expm1(x) (a correctly rounded expm1 in the compute format)",
    source="C99 expm1f / CUDA expm1f",
)
def expm1_libm(x, m):
    return m.expm1(x)


@candidate(
    "expm1.naive",
    reference="expm1",
    formula="exp(x) - 1",
    source="the textbook form; Higham, Accuracy and Stability of Numerical Algorithms "
    "(2nd ed., 2002), 1.14.1: its cancellation near 0",
)
def expm1_naive(x, m):
    return m.exp(x) - 1.0


@candidate(
    "expm1.kahan",
    reference="expm1",
    formula="u = exp(x); x if u == 1; -1 if u - 1 == -1; else (u - 1) x / log(u)",
    source="W. Kahan's expm1 trick, Higham, Accuracy and Stability of Numerical "
    "Algorithms (2nd ed., 2002), 1.14.1",
)
def expm1_kahan(x, m):
    u = m.exp(x)
    um1 = u - 1.0
    y = um1 * x / m.log(u)
    return m.where(u.a == 1, x, m.where(um1.a == -1, -1.0, y))


# ------------------------------------------------------------------ log1p
@candidate(
    "log1p.libm",
    reference="log1p",
    formula="log1p(x) (a correctly rounded log1p in the compute format)",
    source="C99 log1pf / CUDA log1pf",
)
def log1p_libm(x, m):
    return m.log1p(x)


@candidate(
    "log1p.naive",
    reference="log1p",
    formula="log(1 + x)",
    source="the textbook form; Goldberg, 'What Every Computer Scientist Should Know "
    "About Floating-Point Arithmetic', ACM Computing Surveys 23(1), 1991, Thm. 4",
)
def log1p_naive(x, m):
    return m.log(1.0 + x)


@candidate(
    "log1p.goldberg",
    reference="log1p",
    formula="u = 1 + x; x if u == 1 else log(u) x / (u - 1)",
    source="Goldberg, 'What Every Computer Scientist Should Know About Floating-Point "
    "Arithmetic', ACM Computing Surveys 23(1), 1991, Theorem 4",
)
def log1p_goldberg(x, m):
    u = 1.0 + x
    y = m.log(u) * x / (u - 1.0)
    return m.where(u.a == 1, x, y)


# -------------------------------------------------------------------- log
@candidate(
    "log.libm",
    reference="log",
    formula="log(x) (a correctly rounded log in the compute format)",
    source="C99 logf / CUDA logf",
)
def log_libm(x, m):
    return m.log(x)


MINEIRO_LOG = (1.1920928955078125e-7, 124.22551499, 1.498030302, 1.72587999, 0.3520887068, 0.69314718)


@candidate(
    "log.fastlog",
    reference="log",
    formula="0.69314718 (bits(x) 2^-23 - 124.22551499 - 1.498030302 mx - 1.72587999 / "
    "(0.3520887068 + mx)), mx = float with bits (bits(x) & 0x7FFFFF) | 0x3F000000",
    source="Paul Mineiro, fastapprox (fastlog.h: fastlog2, fastlog), 2012",
    compute="fp32",
)
def log_fastlog(x, m):
    scale, c0, c1, c2, c3, ln2 = MINEIRO_LOG
    bits = np.asarray(x.a, dtype=np.float32).view(np.uint32).astype(np.int64)
    mx = float32_with_bits((bits & 0x007FFFFF) | 0x3F000000, m)
    y = float32_bits_as_value(x, m) * scale
    return ln2 * (y - c0 - c1 * mx - c2 / (c3 + mx))


@candidate(
    "log.fasterlog",
    reference="log",
    formula="bits(x) 8.2629582881927490e-8 - 87.989971088",
    source="Paul Mineiro, fastapprox (fastlog.h: fasterlog), 2012",
    compute="fp32",
)
def log_fasterlog(x, m):
    return float32_bits_as_value(x, m) * 8.2629582881927490e-8 - 87.989971088


# ------------------------------------------------------------------- exp2
@candidate(
    "exp2.exp",
    reference="exp2",
    formula="exp(x * RN(log(2)))",
    source="the common exp2f fallback through expf (e.g. kernels without exp2)",
)
def exp2_exp(x, m):
    return m.exp(x * LN2)


@candidate(
    "exp2.fastpow2",
    reference="exp2",
    formula="c = max(x, -126); z = c - int(c) + (x < 0); float with bits "
    "uint32(2^23 (c + 121.2740575 + 27.7280233 / (4.84252568 - z) - 1.49012907 z))",
    source="Paul Mineiro, fastapprox (fastexp.h: fastpow2), 2012",
    compute="fp32",
)
def exp2_fastpow2(x, m):
    offset = m.where(x.a < 0, 1.0, 0.0)
    c = m.maximum(x, -126.0)
    w = m.where(c.a < 0, -m.floor(-c), m.floor(c))  # C's (int) truncation, exact
    z = c - w + offset
    t = (c + 121.2740575 + 27.7280233 / (4.84252568 - z) - 1.49012907 * z) * float(1 << 23)
    return uint32_bits_as_float32(t, m)


@candidate(
    "exp2.fasterpow2",
    reference="exp2",
    formula="float with bits uint32(2^23 (max(x, -126) + 126.94269504))",
    source="Paul Mineiro, fastapprox (fastexp.h: fasterpow2), 2012",
    compute="fp32",
)
def exp2_fasterpow2(x, m):
    return uint32_bits_as_float32((m.maximum(x, -126.0) + 126.94269504) * float(1 << 23), m)
