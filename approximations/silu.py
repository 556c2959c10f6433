"""SiLU / Swish: x sigmoid(beta x) (Ramachandran et al. 2017, arXiv:1710.05941;
Elfwing et al. 2017, arXiv:1702.03118)."""

from audit.targets.candidates import candidate

from .primitives import schraudolph_exp

SRC = "Ramachandran et al. 2017, arXiv:1710.05941"


@candidate(
    "silu.exp",
    reference="silu",
    formula="x / (1 + exp(-x))",
    source=f"{SRC}; torch.nn.functional.silu; CANN SiLU formula",
)
def silu_exp(x, m):
    return x / (1.0 + m.exp(-x))


@candidate(
    "silu.sigmoid",
    reference="silu",
    formula="x * (1 / (1 + exp(-x)))",
    source=f"{SRC}; sigmoid then multiply (two kernels, e.g. vec_sigmoid + vec_mul)",
)
def silu_sigmoid(x, m):
    return x * (1.0 / (1.0 + m.exp(-x)))


@candidate(
    "silu.fast_exp",
    reference="silu",
    formula="x / (1 + exp_S(-x)), exp_S = Schraudolph's float32 bit trick",
    source="fast-exp Swish of blog posts (seed article: 'exp_approx' in swish_opt)",
    compute="fp32",
)
def silu_fast_exp(x, m):
    return x / (1.0 + schraudolph_exp(-x, m))


@candidate(
    "silu.one_minus",
    reference="silu",
    formula="x (1 - 1 / (1 + exp(x)))",
    source=f"{SRC}; identity sigmoid(x) = 1 - sigmoid(-x), which cancels for x < 0",
)
def silu_one_minus(x, m):
    return x * (1.0 - 1.0 / (1.0 + m.exp(x)))


@candidate(
    "silu.hard",
    reference="silu",
    formula="x relu6(x + 3) / 6",
    source="Howard et al. 2019 (MobileNetV3), arXiv:1905.02244: hardswish as SiLU's piecewise approximation",
)
def silu_hard(x, m):
    return x * m.clip(x + 3.0, 0.0, 6.0) / 6.0


@candidate(
    "swish.beta",
    reference="silu",
    formula="x / (1 + exp(-beta x))",
    source=f"{SRC} (Swish with parameter beta)",
    beta=1.0,
)
def swish_beta(x, m, beta):
    return x / (1.0 + m.exp(-(beta * x)))
