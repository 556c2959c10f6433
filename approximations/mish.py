"""Mish: x tanh(softplus(x)) (Misra 2019, arXiv:1908.08681)."""

from audit.targets.candidates import candidate

SRC = "Misra 2019, arXiv:1908.08681"


@candidate(
    "mish.naive",
    reference="mish",
    formula="x tanh(log(1 + exp(x)))",
    source=f"{SRC} (definition); CANN aclnnMish formula",
)
def mish_naive(x, m):
    return x * m.tanh(m.log(1.0 + m.exp(x)))


@candidate(
    "mish.torch",
    reference="mish",
    formula="x tanh(log1p(exp(x)))",
    source="PyTorch ATen mish kernel: x * tanh(log1p(exp(x)))",
)
def mish_torch(x, m):
    return x * m.tanh(m.log1p(m.exp(x)))


@candidate(
    "mish.rational",
    reference="mish",
    formula="x (n^2 - 1) / (n^2 + 1), n = 1 + exp(x)",
    source="identity tanh(log(1 + e^x)) = ((1+e^x)^2 - 1)/((1+e^x)^2 + 1): the rational-in-e^x "
    "form of vector kernels without a tanh unit; (1+e^x)^2 overflows early",
)
def mish_rational(x, m):
    n = 1.0 + m.exp(x)
    n2 = n * n
    return x * (n2 - 1.0) / (n2 + 1.0)
