"""GELU and the approximations kernels ship.

GELU(x) = x Phi(x) (Hendrycks & Gimpel, "Gaussian Error Linear Units", 2016,
arXiv:1606.08415), Phi the standard normal CDF.
"""

from audit.targets.candidates import candidate

from .primitives import SQRT_2_OVER_PI, SQRT_HALF, erf_as, erf_rational, sigmoid

HENDRYCKS = "Hendrycks & Gimpel 2016, arXiv:1606.08415"
TANH_FORM = "0.5 x (1 + tanh(RN(sqrt(2/pi)) (x + 0.044715 x^3)))"


def tanh_inner(x):
    return SQRT_2_OVER_PI * (x + 0.044715 * (x * x * x))


@candidate(
    "gelu.erf",
    reference="gelu",
    formula="0.5 x (1 + erf(x * RN(1/sqrt(2))))",
    source=f"{HENDRYCKS}; torch.nn.functional.gelu(approximate='none')",
    notes="1 + erf cancels in the negative tail",
)
def gelu_erf(x, m):
    return 0.5 * x * (1 + m.erf(x * SQRT_HALF))


@candidate(
    "gelu.erfc",
    reference="gelu",
    formula="0.5 x erfc(-x * RN(1/sqrt(2)))",
    source=f"{HENDRYCKS}; erfc form without cancellation",
)
def gelu_erfc(x, m):
    return 0.5 * x * m.erfc(-x * SQRT_HALF)


@candidate(
    "gelu.tanh",
    reference="gelu",
    formula=TANH_FORM,
    source=f"{HENDRYCKS} (tanh approximation); BERT modeling.py gelu; "
    "torch.nn.functional.gelu(approximate='tanh')",
)
def gelu_tanh(x, m):
    return 0.5 * x * (1 + m.tanh(tanh_inner(x)))


@candidate(
    "gelu.tanh_sigmoid",
    reference="gelu",
    formula="x / (1 + exp(-2 (RN(sqrt(2/pi)) (x + 0.044715 x^3))))",
    source="the tanh approximation as x sigmoid(2u), since 0.5(1 + tanh u) = sigmoid(2u); "
    "the form of Huawei CANN's Gelu kernel",
)
def gelu_tanh_sigmoid(x, m):
    return x / (1 + m.exp(-2.0 * tanh_inner(x)))


@candidate(
    "gelu.sigmoid",
    reference="gelu",
    formula="x (1 / (1 + exp(-(1.702 x))))",
    source=f"{HENDRYCKS} section 2 (x sigma(1.702 x))",
)
def gelu_sigmoid(x, m):
    return x * sigmoid(1.702 * x, m)


@candidate(
    "gelu.fastgelu",
    reference="gelu",
    formula="x / (1 + exp(-1.702 |x|)) * exp(0.851 (x - |x|))",
    source="Huawei CANN / MindSpore FastGelu (mindspore.nn.FastGelu documentation)",
)
def gelu_fastgelu(x, m):
    ax = m.abs(x)
    return x / (1 + m.exp(-1.702 * ax)) * m.exp(0.851 * (x - ax))


@candidate(
    "gelu.tanh_exp",
    reference="gelu",
    formula="0.5 x (1 + (e - 1) / (e + 1)), e = exp(2 (RN(sqrt(2/pi)) (x + 0.044715 x^3)))",
    source="tanh-GELU with tanh written through exp, as in hand-written kernels; "
    "e^{2u} overflows to inf and inf/inf = NaN for large x",
)
def gelu_tanh_exp(x, m):
    e = m.exp(2.0 * tanh_inner(x))
    return 0.5 * x * (1 + (e - 1) / (e + 1))


@candidate(
    "gelu.erf_as",
    reference="gelu",
    formula="0.5 x (1 + erf_AS(x / sqrt(2))), erf by Abramowitz-Stegun 7.1.26",
    source="Abramowitz & Stegun 7.1.26; PyTorch ATen Vectorized<float>::erf (CPU GELU)",
)
def gelu_erf_as(x, m):
    return 0.5 * x * (1 + erf_as(x * SQRT_HALF, m))


@candidate(
    "gelu.erf_rational",
    reference="gelu",
    formula="0.5 x (1 + erf_R(x / sqrt(2))), erf_R = Eigen/XLA f32 rational, clamp [-4, 4]",
    source="Eigen generic_fast_erf_float; XLA f32 erf (same coefficients)",
)
def gelu_erf_rational(x, m):
    return 0.5 * x * (1 + erf_rational(x * SQRT_HALF, m))


@candidate(
    "gelu.fastgelu_v2",
    reference="gelu",
    formula="x (sgn (-0.1444 c^2 + 0.5) + 0.5), c = min(|0.7071 x|, 1.769) - 1.769, "
    "sgn = xs / |xs|, xs = x + 1e-12",
    source="Huawei CANN FasterGeluV2 / FastGeluV2 (Ascend C API documentation)",
    notes="1e-12 underflows to 0 in fp16, making sgn(0) = 0/0",
)
def gelu_fastgelu_v2(x, m):
    xs = x + 1e-12
    sgn = xs / m.abs(xs)
    c = m.minimum(m.abs(0.7071 * x), 1.769) - 1.769
    return x * (sgn * (-0.1444 * (c * c) + 0.5) + 0.5)


@candidate(
    "gelu.safe_clip",
    reference="gelu",
    formula="0.5 xc (1 + tanh(RN(sqrt(2/pi)) (xc + 0.044715 xc^3))), xc = clip(x, -threshold, threshold)",
    source="'safe_gelu' recipe of the blog post 深度学习激活函数优化与CANN算子库实践 "
    "('Activation function optimization and the CANN operator library in practice', "
    "拓冰建站): np.clip(x, -3, 3) before tanh-GELU",
    threshold=3.0,
)
def gelu_safe_clip(x, m, threshold):
    xc = m.clip(x, -threshold, threshold)
    return 0.5 * xc * (1 + m.tanh(tanh_inner(xc)))
