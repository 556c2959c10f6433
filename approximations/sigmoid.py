"""Sigmoid (logistic) and its kernel forms."""

from audit.targets.candidates import candidate

from .primitives import horner, schraudolph_exp

TEXT = "standard identities of the logistic function"


@candidate(
    "sigmoid.exp",
    reference="sigmoid",
    formula="1 / (1 + exp(-x))",
    source=f"{TEXT}; the textbook kernel (CUDA, CANN vec_sigmoid decomposition)",
)
def sigmoid_exp(x, m):
    return 1.0 / (1.0 + m.exp(-x))


@candidate(
    "sigmoid.naive",
    reference="sigmoid",
    formula="exp(x) / (1 + exp(x))",
    source=f"{TEXT}; exp overflows to inf and inf/inf = NaN from x = 11.09375 in fp16",
)
def sigmoid_naive(x, m):
    e = m.exp(x)
    return e / (1.0 + e)


@candidate(
    "sigmoid.tanh",
    reference="sigmoid",
    formula="0.5 + 0.5 tanh(x / 2)",
    source=f"{TEXT}; used where a tanh unit is cheaper than exp and divide",
)
def sigmoid_tanh(x, m):
    return 0.5 + 0.5 * m.tanh(0.5 * x)


@candidate(
    "sigmoid.stable",
    reference="sigmoid",
    formula="x >= 0 ? 1 / (1 + e) : e / (1 + e), e = exp(-|x|)",
    source=f"{TEXT}; the overflow-free branch form (e.g. scipy.special.expit)",
)
def sigmoid_stable(x, m):
    e = m.exp(-m.abs(x))
    return m.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


@candidate(
    "sigmoid.clamped",
    reference="sigmoid",
    formula="1 / (1 + exp(-clip(x, -limit, limit)))",
    source="input limits recommended for sigmoid kernels (seed article on CANN ops-nn); "
    "a limit too small saturates early",
    limit=8.0,
)
def sigmoid_clamped(x, m, limit):
    xc = m.clip(x, -limit, limit)
    return 1.0 / (1.0 + m.exp(-xc))


@candidate(
    "sigmoid.hard",
    reference="sigmoid",
    formula="relu6(x + 3) / 6",
    source="hard sigmoid of MobileNetV3 (Howard et al. 2019, arXiv:1905.02244)",
)
def sigmoid_hard(x, m):
    return m.clip(x + 3.0, 0.0, 6.0) / 6.0


@candidate(
    "sigmoid.fast_exp",
    reference="sigmoid",
    formula="1 / (1 + exp_S(-x)), exp_S = Schraudolph's float32 bit trick",
    source="Schraudolph 1999, Neural Computation 11(4); fast-exp sigmoids of blog posts",
    compute="fp32",
)
def sigmoid_fast_exp(x, m):
    return 1.0 / (1.0 + schraudolph_exp(-x, m))


# ONNX Runtime MLAS logistic (MlasLogisticConstants, after Eigen): x clamped to
# [-18, 18], odd 9/10 rational p(x)/q(x), plus 1/2.
LOGISTIC_ALPHA = (
    4.37031012579801e-11,
    1.15627324459942e-07,
    6.08574864600143e-05,
    8.51377133304701e-03,
    2.48287947061529e-01,
)
LOGISTIC_BETA = (
    6.10247389755681e-13,
    5.76102136993427e-09,
    6.29106785017040e-06,
    1.70198817374094e-03,
    1.16817656904453e-01,
    9.93151921023180e-01,
)


@candidate(
    "sigmoid.rational",
    reference="sigmoid",
    formula="0.5 + x P(x^2) / Q(x^2), x clamped to [-18, 18] (degree 9/10)",
    source="the constants of ONNX Runtime MLAS logistic.cpp (MlasLogisticConstants, after Eigen's "
    "float logistic) in the portable C kernel's form (no FMA, clamped to [0, 1]); ONNX Runtime's "
    "x86-64 kernel is sigmoid.mlas (FMA3, no upper clamp)",
)
def sigmoid_rational(x, m):
    xc = m.clip(x, -18.0, 18.0)
    x2 = xc * xc
    return m.clip(xc * horner(x2, LOGISTIC_ALPHA, m) / horner(x2, LOGISTIC_BETA, m) + 0.5, 0.0, 1.0)
