"""Gated linear units (Shazeer 2020, 'GLU Variants Improve Transformer', arXiv:2002.05202).

Bivariate: f(a, b) with a the gate input and b the up projection.
"""

from audit.targets.candidates import candidate

from .gelu import tanh_inner
from .primitives import SQRT_HALF

SHAZEER = "Shazeer 2020, arXiv:2002.05202"


@candidate(
    "swiglu.silu_mul",
    reference="swiglu",
    formula="a / (1 + exp(-a)) * b",
    source=f"{SHAZEER}; LLaMA FFN: silu(W1 x) * (W3 x)",
)
def swiglu_silu_mul(a, b, m):
    return a / (1.0 + m.exp(-a)) * b


@candidate(
    "swiglu.clamped",
    reference="swiglu",
    formula="ac / (1 + exp(-ac)) clip(b, -limit, limit), ac = min(a, limit)",
    source="clamped SwiGLU of some MoE models (e.g. gpt-oss, swiglu_limit = 7)",
    limit=7.0,
)
def swiglu_clamped(a, b, m, limit):
    ac = m.minimum(a, limit)
    bc = m.clip(b, -limit, limit)
    return ac / (1.0 + m.exp(-ac)) * bc


@candidate(
    "geglu.gelu_mul",
    reference="geglu",
    formula="0.5 a erfc(-a * RN(1/sqrt(2))) b",
    source=f"{SHAZEER}; T5 v1.1 GeGLU with exact GELU",
)
def geglu_gelu_mul(a, b, m):
    return 0.5 * a * m.erfc(-a * SQRT_HALF) * b


@candidate(
    "geglu.tanh_mul",
    reference="geglu",
    formula="0.5 a (1 + tanh(RN(sqrt(2/pi)) (a + 0.044715 a^3))) b",
    source=f"{SHAZEER}; GeGLU with the tanh approximation (gelu_new)",
)
def geglu_tanh_mul(a, b, m):
    return 0.5 * a * (1.0 + m.tanh(tanh_inner(a))) * b


@candidate("reglu.relu_mul", reference="reglu", formula="max(a, 0) * b", source=SHAZEER)
def reglu_relu_mul(a, b, m):
    return m.maximum(a, 0.0) * b
