"""ELU, SELU and CELU: exp(x) - 1 against expm1(x)."""

from audit.oracle.references import SELU_ALPHA, SELU_SCALE
from audit.targets.candidates import candidate

ELU = "Clevert et al. 2015, arXiv:1511.07289"
SELU = "Klambauer et al. 2017, arXiv:1706.02515"
CELU = "Barron 2017, arXiv:1704.07483"


@candidate(
    "elu.expm1",
    reference="elu",
    formula="x > 0 ? x : alpha expm1(x)",
    source=f"{ELU}; torch.nn.functional.elu",
    alpha=1.0,
)
def elu_expm1(x, m, alpha):
    return m.where(x > 0, x, alpha * m.expm1(x))


@candidate(
    "elu.exp_minus_1",
    reference="elu",
    formula="x > 0 ? x : alpha (exp(x) - 1)",
    source=f"{ELU} (definition as written); cancels for small |x|",
    alpha=1.0,
)
def elu_exp_minus_1(x, m, alpha):
    return m.where(x > 0, x, alpha * (m.exp(x) - 1.0))


@candidate(
    "selu.expm1",
    reference="selu",
    formula="scale (x > 0 ? x : alpha expm1(x)), scale = RN(1.0507009873554805), alpha = RN(1.6732632423543772)",
    source=f"{SELU}; torch.nn.functional.selu",
)
def selu_expm1(x, m):
    return float(SELU_SCALE) * m.where(x > 0, x, float(SELU_ALPHA) * m.expm1(x))


@candidate(
    "selu.exp_minus_1",
    reference="selu",
    formula="scale (x > 0 ? x : alpha (exp(x) - 1)), scale = RN(1.0507009873554805), alpha = RN(1.6732632423543772)",
    source=f"{SELU} (definition as written)",
)
def selu_exp_minus_1(x, m):
    return float(SELU_SCALE) * m.where(x > 0, x, float(SELU_ALPHA) * (m.exp(x) - 1.0))


@candidate(
    "celu.expm1",
    reference="celu",
    formula="max(x, 0) + min(alpha expm1(x / alpha), 0)",
    source=f"{CELU}; torch.nn.functional.celu",
    alpha=1.0,
)
def celu_expm1(x, m, alpha):
    return m.maximum(x, 0.0) + m.minimum(alpha * m.expm1(x / alpha), 0.0)


@candidate(
    "celu.exp_minus_1",
    reference="celu",
    formula="max(x, 0) + min(alpha (exp(x / alpha) - 1), 0)",
    source=f"{CELU} (definition as written)",
    alpha=1.0,
)
def celu_exp_minus_1(x, m, alpha):
    return m.maximum(x, 0.0) + m.minimum(alpha * (m.exp(x / alpha) - 1.0), 0.0)
