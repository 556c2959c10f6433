"""Piecewise-linear activations: relu family, hardtanh, hardsigmoid, hardswish.

Exact in real arithmetic; what differs is rounding: dividing by 6 against
multiplying by a rounded 1/6, or a leaky slope rounded to the format (0.01 is
0.009765625 in fp8_e4m3).
"""

from audit.targets.candidates import candidate

MOBILENET = "Howard et al. 2019 (MobileNetV3), arXiv:1905.02244"


@candidate("relu.max", reference="relu", formula="max(x, 0)", source="Nair & Hinton 2010")
def relu_max(x, m):
    return m.maximum(x, 0.0)


@candidate(
    "leaky_relu.mul",
    reference="leaky_relu",
    formula="x >= 0 ? x : alpha x",
    source="Maas et al. 2013; torch.nn.functional.leaky_relu (alpha rounded to the compute format)",
    alpha=0.01,
)
def leaky_relu_mul(x, m, alpha):
    return m.where(x >= 0, x, alpha * x)


@candidate(
    "relu6.clamp",
    reference="relu6",
    formula="min(max(x, 0), 6)",
    source="Krizhevsky 2010; torch.nn.functional.relu6",
)
def relu6_clamp(x, m):
    return m.clip(x, 0.0, 6.0)


@candidate(
    "hardtanh.clamp",
    reference="hardtanh",
    formula="min(max(x, -1), 1)",
    source="torch.nn.functional.hardtanh",
)
def hardtanh_clamp(x, m):
    return m.clip(x, -1.0, 1.0)


@candidate(
    "hardsigmoid.div6",
    reference="hardsigmoid",
    formula="relu6(x + 3) / 6",
    source=f"{MOBILENET}; torch.nn.functional.hardsigmoid",
)
def hardsigmoid_div6(x, m):
    return m.clip(x + 3.0, 0.0, 6.0) / 6.0


@candidate(
    "hardsigmoid.mul_inv6",
    reference="hardsigmoid",
    formula="relu6(x + 3) * (1/6)",
    source=f"{MOBILENET}; multiply by a rounded 1/6 instead of dividing",
)
def hardsigmoid_mul_inv6(x, m):
    return m.clip(x + 3.0, 0.0, 6.0) * (1.0 / 6.0)


@candidate(
    "hardswish.div6",
    reference="hardswish",
    formula="x relu6(x + 3) / 6",
    source=f"{MOBILENET}; torch.nn.functional.hardswish",
)
def hardswish_div6(x, m):
    return x * m.clip(x + 3.0, 0.0, 6.0) / 6.0


@candidate(
    "hardswish.mul_inv6",
    reference="hardswish",
    formula="x relu6(x + 3) * (1/6)",
    source=f"{MOBILENET}; multiply by a rounded 1/6 instead of dividing",
)
def hardswish_mul_inv6(x, m):
    return x * m.clip(x + 3.0, 0.0, 6.0) * (1.0 / 6.0)
