"""ONNX Runtime MLAS float kernels, transcribed operation by operation (``FAMILY.mlas``).

Each candidate computes in fp32 what ONNX Runtime's CPU provider computes on an x86-64 CPU
with AVX2 and FMA3 (MLAS's ``*KernelFma3`` routines, which MLAS also keeps on AVX-512
machines for these functions): the constants are MLAS's float constants (the C source's
decimal literals rounded to float32, here by :func:`f32` from the exact decimal), the
operations are the kernels' instructions in their order, every ``vfmadd`` one rounding
(``m.fma``), every ``vmulps``/``vaddps``/``vdivps`` its own rounding, ``vminps``/``vmaxps``
with their NaN rule (the second source operand is returned when either is NaN).

Sources (MIT-licensed; constants and operation order are facts of the kernels, no code is
copied): onnxruntime/core/mlas/lib/tanh.cpp (``MlasTanhConstants``: the 13/6 rational,
clamp +-9), amd64/TanhKernelFma3.asm and x86_64/TanhKernelFma3.S (the FMA3 kernel of that
rational); logistic.cpp (``MlasLogisticConstants``) and x86_64/LogisticKernelFma3.S;
erf.cpp (``MlasErfConstants``) and x86_64/ErfKernelFma3.S; core/providers/cpu/tensor/gelu.cc
(Gelu, approximate none/tanh: the scalar loops around MlasComputeErf/MlasComputeTanh).
Newer MLAS sources (2025) replace tanh by a 5/4 rational with a bound of 5; the installed
onnxruntime 1.32 still computes the 13/6 one (the fidelity tests prove which).

The dispatch modelled is MLAS's AVX2/FMA3 path (``ort.dispatch()`` 'avx2-fma' or
'avx512f'); on SSE2-only CPUs MLAS runs the C kernels without FMA, which these do not model.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from audit.targets.candidates import candidate


def f32(text: str) -> float:
    """The float32 nearest the decimal ``text`` (ties to even), decided exactly: what a C
    compiler stores for the literal ``textf`` (float(text) then float32 could round twice)."""
    exact = Fraction(text)
    near = np.float32(float(text))
    best: tuple[Fraction, float] | None = None
    for c in (np.nextafter(near, np.float32(-np.inf)), near, np.nextafter(near, np.float32(np.inf))):
        d = abs(Fraction(float(c)) - exact)
        if best is None or d < best[0] or (d == best[0] and int(np.float32(c).view(np.uint32)) % 2 == 0):
            best = (d, float(c))
    assert best is not None  # three candidates tried
    return best[1]


# MlasTanhConstants (tanh.cpp): clamp, alpha_13..alpha_1, beta_6..beta_0
TANH_RANGE = 9.0
TANH_ALPHA = tuple(
    f32(s)
    for s in (
        "-2.76076847742355e-16",
        "2.00018790482477e-13",
        "-8.60467152213735e-11",
        "5.12229709037114e-08",
        "1.48572235717979e-05",
        "6.37261928875436e-04",
        "4.89352455891786e-03",
    )
)
TANH_BETA = tuple(
    f32(s)
    for s in ("1.19825839466702e-06", "1.18534705686654e-04", "2.26843463243900e-03", "4.89352518554385e-03")
)

# MlasLogisticConstants (logistic.cpp): clamp, alpha_9..alpha_1, beta_10..beta_0
LOGISTIC_RANGE = 18.0
LOGISTIC_ALPHA = tuple(
    f32(s)
    for s in (
        "4.37031012579801e-11",
        "1.15627324459942e-07",
        "6.08574864600143e-05",
        "8.51377133304701e-03",
        "2.48287947061529e-01",
    )
)
LOGISTIC_BETA = tuple(
    f32(s)
    for s in (
        "6.10247389755681e-13",
        "5.76102136993427e-09",
        "6.29106785017040e-06",
        "1.70198817374094e-03",
        "1.16817656904453e-01",
        "9.93151921023180e-01",
    )
)

# MlasErfConstants (erf.cpp)
ERF_UPPER = f32("3.925")
ERF_SPLIT = f32("0.921875")
ERF_SMALL = tuple(
    f32(s)
    for s in (
        "-5.99104969e-4",
        "4.99339588e-3",
        "-2.67667342e-2",
        "1.12818025e-1",
        "-3.76124859e-1",
        "1.28379151e-1",
    )
)
ERF_BIG = tuple(
    f32(s)
    for s in (
        "1.72948930e-5",
        "-3.83208680e-4",
        "3.88393435e-3",
        "-2.42545605e-2",
        "1.06777847e-1",
        "6.34846687e-1",
        "1.28717512e-1",
    )
)
EXP_LOWER = f32("-88.3762626647949")
EXP_LOG2R = f32("1.44269504088896341")
EXP_LOG2_HI = f32("-6.93145752e-1")
EXP_LOG2_LO = f32("-1.42860677e-6")
EXP_P = tuple(
    f32(s)
    for s in (
        "1.38319808e-3",
        "8.37550033e-3",
        "4.16689515e-2",
        "1.66664466e-1",
        "4.99999851e-1",
        "1.0",
        "1.0",
    )
)
EXP_C = f32("1.25829120e+7")  # 1.5 * 2^23: adding and subtracting it rounds to an integer

# gelu.cc: B = sqrt(2/pi), C = 0.044715 sqrt(2/pi), as float literals; M_SQRT1_2 as a float
GELU_B = f32("0.7978845608028654")
GELU_C = f32("0.035677408136300125")
SQRT1_2 = float(np.float32(math.sqrt(0.5)))  # static_cast<float>(M_SQRT1_2): one rounding of a double


def _poly_fma(x2, coeffs, m):
    """c0 x2 + c1 by one FMA, then p = x2 p + c_k by FMAs (vfmadd231ps / vfmadd213ps)."""
    p = m.fma(x2, coeffs[0], coeffs[1])
    for c in coeffs[2:]:
        p = m.fma(x2, p, c)
    return p


def _vmax(m, lo, x):
    """vmaxps(lo, x): x where x is NaN (the second operand), else the larger."""
    return m.where(x.a != x.a, x, m.maximum(x, lo))


def _vmin(m, hi, x):
    return m.where(x.a != x.a, x, m.minimum(x, hi))


def tanh_mlas_fma3(x, m):
    xc = _vmin(m, TANH_RANGE, _vmax(m, -TANH_RANGE, x))
    x2 = xc * xc
    p = _poly_fma(x2, TANH_ALPHA, m)
    q = _poly_fma(x2, TANH_BETA, m)
    return (xc * p) / q


def sigmoid_mlas_fma3(x, m):
    xc = _vmin(m, LOGISTIC_RANGE, _vmax(m, -LOGISTIC_RANGE, x))
    x2 = xc * xc
    p = _poly_fma(x2, LOGISTIC_ALPHA, m)
    q = _poly_fma(x2, LOGISTIC_BETA, m)
    r = (xc * p) / q + 0.5
    return _vmax(m, 0.0, r)  # the FMA3 kernel clamps below only: results may exceed 1


def erf_mlas_fma3(x, m):
    neg = np.signbit(x.a)
    ax = m.abs(x)
    a = _vmin(m, ERF_UPPER, ax)  # NaN stays NaN (and takes the small branch)
    s = a * a
    r = m.const(ERF_SMALL[0])
    for c in ERF_SMALL[1:]:
        r = m.fma(s, r, c)
    small = m.fma(a, r, a)
    big_mask = a.a >= ERF_SPLIT  # vcmpleps(split, a)
    ab = m.where(big_mask, a, 0.0)
    r = m.const(ERF_BIG[0])
    for c in ERF_BIG[1:]:
        r = m.fma(ab, r, c)
    r = -m.fma(ab, r, ab)
    r = m.where(r.a != r.a, EXP_LOWER, m.maximum(r, EXP_LOWER))  # vmaxps(r, lower)
    t = m.fma(r, EXP_LOG2R, EXP_C) - EXP_C  # round(r / ln 2)
    f = m.fma(t, EXP_LOG2_HI, r)
    f = m.fma(t, EXP_LOG2_LO, f)
    y = m.const(EXP_P[0])
    for c in EXP_P[1:]:
        y = m.fma(f, y, c)
    y = 1.0 - m.ldexp(y, t)
    out = m.where(big_mask, y, small)
    return m.where(neg, -out, out)  # OR of the sign bit


@candidate(
    "tanh.mlas",
    reference="tanh",
    formula="x P(x^2) / Q(x^2), x clamped to +-9, degree 13/6, P and Q by FMA Horner steps",
    source="ONNX Runtime MLAS MlasTanhConstants (tanh.cpp) in its AVX2/FMA3 kernel "
    "(TanhKernelFma3): bit-identical to onnxruntime 1.32 Tanh on x86-64 AVX2+FMA / AVX-512",
    compute="fp32",
)
def tanh_mlas(x, m):
    return tanh_mlas_fma3(x, m)


@candidate(
    "sigmoid.mlas",
    reference="sigmoid",
    formula="max(0, x P(x^2) / Q(x^2) + 1/2), x clamped to +-18, degree 9/10 by FMA Horner steps "
    "(no upper clamp: up to 1 + 2^-23)",
    source="ONNX Runtime MLAS MlasLogisticConstants (logistic.cpp) in its AVX2/FMA3 kernel "
    "(LogisticKernelFma3): bit-identical to onnxruntime 1.32 Sigmoid on x86-64 AVX2+FMA / AVX-512",
    compute="fp32",
)
def sigmoid_mlas(x, m):
    return sigmoid_mlas_fma3(x, m)


@candidate(
    "erf.mlas",
    reference="erf",
    formula="|x| < 0.921875: |x| + |x| S(x^2); else 1 - exp(-(|x| + |x| B(|x|))) with exp by "
    "range reduction and a degree-6 polynomial; |x| clamped to 3.925; sign copied",
    source="ONNX Runtime MLAS MlasErfConstants (erf.cpp, after njuffa's faithfully rounded "
    "erff) in its AVX2/FMA3 kernel (ErfKernelFma3): bit-identical to onnxruntime 1.32 Erf "
    "on x86-64 AVX2+FMA / AVX-512 (the 3.925 clamp of onnxruntime >= 1.17; older "
    "releases clamp at 3.725)",
    compute="fp32",
)
def erf_mlas(x, m):
    return erf_mlas_fma3(x, m)


@candidate(
    "gelu.mlas_tanh",
    reference="gelu",
    formula="(0.5 x) (t + 1), t = tanh_MLAS(x ((C x) x + B)), B = sqrt(2/pi), C = 0.044715 B",
    source="ONNX Runtime Gelu(approximate='tanh') (core/providers/cpu/tensor/gelu.cc: "
    "scalar loops without contraction around MlasComputeTanh's FMA3 kernel); "
    "com.microsoft FastGelu runs the same kernel",
    compute="fp32",
)
def gelu_mlas_tanh(x, m):
    u = x * ((GELU_C * x) * x + GELU_B)
    t = tanh_mlas_fma3(u, m)
    return (0.5 * x) * (t + 1.0)


@candidate(
    "gelu.mlas_erf",
    reference="gelu",
    formula="(0.5 x) (erf_MLAS(x float(1/sqrt 2)) + 1)",
    source="ONNX Runtime Gelu(approximate='none') and com.microsoft Gelu "
    "(core/providers/cpu/tensor/gelu.cc around MlasComputeErf's FMA3 kernel)",
    compute="fp32",
)
def gelu_mlas_erf(x, m):
    e = erf_mlas_fma3(x * SQRT1_2, m)
    return (0.5 * x) * (e + 1.0)
