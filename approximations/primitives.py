"""Approximate primitives that several candidates share (fast exp, sigmoid, erf).

Each is written from its public source; constants are those the source states.
"""

import math

import numpy as np


def f32_bits(bits: int) -> float:
    """The float32 with the given bit pattern, as a Python float."""
    return float(np.array([bits], dtype=np.uint32).view(np.float32)[0])


LOG2E = 1.4426950408889634

# Schraudolph 1999, "A Fast, Compact Approximation of the Exponential Function",
# Neural Computation 11(4): float32 form bits = int(12102203 x + 1064866805),
# i.e. 2^23/ln 2 and 127 * 2^23 - 486411 (the shift minimizing RMS error).
SCHRAUDOLPH_A = 12102203.0
SCHRAUDOLPH_B = 1064866805.0


def schraudolph_exp(t, m):
    return m.int32_bits_as_float32(SCHRAUDOLPH_A * t + SCHRAUDOLPH_B)


# Cephes expf (S. Moshier) polynomial, with the clamp of sse_mathfun.h (J. Pommier):
# x clamped to +-88.3762626647949, n = floor(x log2 e + 1/2), r = x - n C1 - n C2,
# exp(x) = 2^n (1 + r + r^2 P(r)).
CEPHES_CLAMP = 88.3762626647949
CEPHES_C1, CEPHES_C2 = 0.693359375, -2.12194440e-4
CEPHES_P = (
    1.9875691500e-4,
    1.3981999507e-3,
    8.3334519073e-3,
    4.1665795894e-2,
    1.6666665459e-1,
    5.0000001201e-1,
)


def cephes_exp(t, m):
    x = m.clip(t, -CEPHES_CLAMP, CEPHES_CLAMP)
    n = m.floor(x * LOG2E + 0.5)
    r = x - n * CEPHES_C1
    r = r - n * CEPHES_C2
    p = m.const(CEPHES_P[0])
    for c in CEPHES_P[1:]:
        p = p * r + c
    y = p * (r * r) + r + 1.0
    return m.ldexp(y, n)


# PyTorch ATen Vectorized<float>::exp_u20 (ported from oneDNN): range [ln FLT_MIN,
# ln FLT_MAX], n = floor(x log2 e + 1/2), r = x - n ln2 (fused), degree-5 polynomial
# with near-Taylor coefficients by fused multiply-adds, scaled by 2^(n-1) * 2.
U20_LN_MIN = f32_bits(0xC2AEAC50)  # ln FLT_MIN, -87.3365...
U20_LN_MAX = f32_bits(0x42B17218)  # ln FLT_MAX, 88.7228...
U20_LN2 = f32_bits(0x3F317218)
U20_LOG2E = f32_bits(0x3FB8AA3B)
U20_C = (0.00828929059, 0.0418978221, 0.166676521, 0.499991506, 0.999999701, 1.0)


def exp_u20(t, m):
    too_small = t < U20_LN_MIN
    x = m.clip(t, U20_LN_MIN, U20_LN_MAX)
    n = m.floor(m.fma(x, U20_LOG2E, 0.5))
    r = m.fma(-n, U20_LN2, x)
    p = m.const(U20_C[0])
    for c in U20_C[1:]:
        p = m.fma(r, p, c)
    y = m.ldexp(p, n - 1.0) * 2.0
    return m.where(too_small, 0.0, y)


def sigmoid(t, m):
    """1 / (1 + exp(-t)) with the compute format's exp."""
    return 1.0 / (1.0 + m.exp(-t))


# Abramowitz & Stegun 7.1.26 (max abs error 1.5e-7): for z >= 0,
# erf(z) = 1 - (a1 t + ... + a5 t^5) e^{-z^2}, t = 1/(1 + p z); odd extension.
AS_P = 0.3275911
AS_A = (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)


def erf_as(z, m):
    az = m.abs(z)
    t = 1.0 / (1.0 + AS_P * az)
    poly = m.const(AS_A[0])
    for c in AS_A[1:]:
        poly = poly * t + c
    y = 1.0 - poly * t * m.exp(-(az * az))
    return m.where(z < 0, -y, y)


# Eigen generic_fast_erf_float (also XLA's f32 erf): x clamped to [-4, 4],
# erf = x P(x^2) / Q(x^2), P of degree 6 and Q of degree 4 in x^2.
ERF_ALPHA = (
    -2.72614225801306e-10,
    2.77068142495902e-08,
    -2.10102402082508e-06,
    -5.69250639462346e-05,
    -7.34990630326855e-04,
    -2.95459980854025e-03,
    -1.60960333262415e-02,
)
ERF_BETA = (
    -1.45660718464996e-05,
    -2.13374055278905e-04,
    -1.68282697438203e-03,
    -7.37332916720468e-03,
    -1.42647390514189e-02,
)


def horner(x2, coeffs, m):
    p = m.const(coeffs[0])
    for c in coeffs[1:]:
        p = x2 * p + c
    return p


def erf_rational(z, m):
    x = m.clip(z, -4.0, 4.0)
    x2 = x * x
    return x * horner(x2, ERF_ALPHA, m) / horner(x2, ERF_BETA, m)


# Eigen's float tanh coefficients (also MLAS's MlasTanhConstants): odd 13/6 rational,
# Eigen clamps at +-7.90531110763549805, where it reaches 1 (MLAS at +-9, with FMA:
# approximations/mlas.py).
TANH_ALPHA = (
    -2.76076847742355e-16,
    2.00018790482477e-13,
    -8.60467152213735e-11,
    5.12229709037114e-08,
    1.48572235717979e-05,
    6.37261928875436e-04,
    4.89352455891786e-03,
)
TANH_BETA = (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03)
TANH_CLAMP = 7.90531110763549805


def tanh_rational(z, m, clamp=TANH_CLAMP):
    x = m.clip(z, -clamp, clamp)
    x2 = x * x
    return x * horner(x2, TANH_ALPHA, m) / horner(x2, TANH_BETA, m)


SQRT_HALF = math.sqrt(0.5)
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
