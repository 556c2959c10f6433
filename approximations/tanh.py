"""tanh and the forms vector units use."""

from audit.targets.candidates import candidate

from .primitives import TANH_CLAMP, tanh_rational


@candidate(
    "tanh.exp",
    reference="tanh",
    formula="(e - 1) / (e + 1), e = exp(2 x)",
    source="definition through exp; e^{2x} = inf gives inf/inf = NaN for large x",
)
def tanh_exp(x, m):
    e = m.exp(2.0 * x)
    return (e - 1.0) / (e + 1.0)


@candidate(
    "tanh.sigmoid",
    reference="tanh",
    formula="2 / (1 + exp(-2 x)) - 1",
    source="identity tanh(x) = 2 sigmoid(2x) - 1; cancels near 0",
)
def tanh_sigmoid(x, m):
    return 2.0 / (1.0 + m.exp(-2.0 * x)) - 1.0


@candidate(
    "tanh.rational",
    reference="tanh",
    formula="x P(x^2) / Q(x^2), degree 13/6, x clamped to +-7.90531",
    source="the coefficients of Eigen generic_fast_tanh_float (also MLAS's MlasTanhConstants) "
    "with Eigen's clamp at +-7.90531, every operation rounded (no FMA): it reproduces neither "
    "ONNX Runtime (tanh.mlas: clamp +-9, FMA3 Horner steps) nor XLA's EmitFastTanh (which "
    "returns x for tiny |x|)",
)
def tanh_rational_(x, m):
    return tanh_rational(x, m)


@candidate(
    "tanh.rational_half",
    reference="tanh",
    formula="the 13/6 rational evaluated entirely in fp16 (fp32 coefficients rounded "
    "to fp16: alpha_7..alpha_13 underflow)",
    source="Eigen's float rational ported to half without new coefficients",
    compute="fp16",
)
def tanh_rational_half(x, m):
    return tanh_rational(x, m, TANH_CLAMP)


@candidate(
    "tanh.pade",
    reference="tanh",
    formula="clip(x (135135 + x2 (17325 + x2 (378 + x2))) / (135135 + x2 (62370 + x2 (3150 + 28 x2))), "
    "-1, 1), x2 = x^2",
    source="Lambert's continued fraction for tanh truncated to a [7/6] Pade approximant "
    "(common in audio DSP kernels)",
)
def tanh_pade(x, m):
    x2 = x * x
    num = x * (135135.0 + x2 * (17325.0 + x2 * (378.0 + x2)))
    den = 135135.0 + x2 * (62370.0 + x2 * (3150.0 + 28.0 * x2))
    return m.clip(num / den, -1.0, 1.0)
