"""Fused forms: where a kernel rounds (or does not) between the steps of an activation.

Fusing changes the numbers silently, because it moves the roundings:

* **bias + activation** (``gelu_bias``, over pairs (x, b)): an unfused graph adds the
  bias in one kernel, which writes x + b in the storage format, and applies GELU in the
  next (``.storage``); a fused kernel keeps x + b in the compute format (``.compute``);
  Megatron-LM's fused bias-GELU also quietly uses the tanh approximation
  (``.megatron_tanh``).
* **activation, scale, cast** (``gelu_scale``, parameter ``scale``): an epilogue that
  multiplies the activation by a scale in the compute format before the single cast to the
  output format (``.fused``, as FP8 output kernels do), against an activation written
  out in the storage format and scaled by a second kernel (``.unfused``).
* **activation times gate**: ``swiglu.silu_mul`` multiplies silu(a) by b in the compute
  format; ``swiglu_cast.silu_mul`` and ``geglu_cast.gelu_mul`` (same references) round
  the activation to the storage format first, as an unfused graph (and kernels that cast
  the activation back to the tensor type before the product) do.

``m.store(v)`` is the round trip through the storage format (:mod:`audit.targets.compute`).
"""

import audit.oracle.fused  # noqa: F401  (registers gelu_bias and gelu_scale)
from audit.targets.candidates import candidate

from .primitives import SQRT_HALF

MEGATRON = (
    "Megatron-LM megatron/model/fused_bias_gelu.py bias_gelu (torch.jit.script): "
    "x = bias + y; x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))"
)


def _gelu_erf(t, m):
    return 0.5 * t * m.erfc(-t * SQRT_HALF)


@candidate(
    "gelu_bias.storage",
    reference="gelu_bias",
    formula="0.5 t erfc(-t * RN(1/sqrt(2))), t = store(x + b)",
    notes="the sum written out in the storage format, then exact-form GELU",
    source="unfused graph: torch.add then torch.nn.functional.gelu (two kernels, the sum "
    "stored in the tensor's dtype)",
)
def gelu_bias_storage(x, b, m):
    return _gelu_erf(m.store(x + b), m)


@candidate(
    "gelu_bias.compute",
    reference="gelu_bias",
    formula="0.5 t erfc(-t * RN(1/sqrt(2))), t = x + b",
    notes="exact-form GELU of x + b kept in the compute format",
    source="fused bias + GELU epilogues (e.g. cuBLASLt CUBLASLT_EPILOGUE_GELU_BIAS, "
    "CUTLASS LinearCombinationGELU): the sum never leaves registers",
)
def gelu_bias_compute(x, b, m):
    return _gelu_erf(x + b, m)


@candidate(
    "gelu_bias.megatron_tanh",
    reference="gelu_bias",
    formula="t * 0.5 * (1 + tanh(0.79788456 * t * (1 + 0.044715 * t * t))), t = b + x",
    source=MEGATRON + " (the tanh approximation where the model was trained with erf GELU)",
)
def gelu_bias_megatron_tanh(x, b, m):
    t = b + x
    return t * 0.5 * (1.0 + m.tanh(0.79788456 * t * (1.0 + 0.044715 * t * t)))


@candidate(
    "gelu_scale.fused",
    reference="gelu_scale",
    formula="0.5 x erfc(-x * RN(1/sqrt(2))) scale",
    notes="exact-form GELU times the scale, both in the compute format, then one rounding to storage",
    source="epilogue scaling before the cast to the output type (e.g. NVIDIA "
    "TransformerEngine's FP8 activation kernels: activation, times the output "
    "scale, then the cast)",
    scale=1.0,
)
def gelu_scale_fused(x, m, scale):
    return _gelu_erf(x, m) * scale


@candidate(
    "gelu_scale.unfused",
    reference="gelu_scale",
    formula="store(0.5 x erfc(-x * RN(1/sqrt(2)))) scale",
    notes="the activation written out in the storage format first, then scaled",
    source="unfused graph: torch.nn.functional.gelu, then a separate multiply by the "
    "scale (two kernels, two roundings to the tensor's dtype)",
    scale=1.0,
)
def gelu_scale_unfused(x, m, scale):
    return m.store(_gelu_erf(x, m)) * scale


@candidate(
    "swiglu_cast.silu_mul",
    reference="swiglu",
    formula="store(a / (1 + exp(-a))) b",
    notes="the activation cast to the storage format first",
    source="HF transformers LlamaMLP act_fn(gate_proj(x)) * up_proj(x) (two tensors "
    "of the model dtype); vLLM csrc/activation_kernels.cu silu_kernel returns "
    "(T) of the float result before act_and_mul multiplies it by y",
)
def swiglu_cast_gate(a, b, m):
    return m.store(a / (1.0 + m.exp(-a))) * b


@candidate(
    "geglu_cast.gelu_mul",
    reference="geglu",
    formula="store(0.5 a erfc(-a * RN(1/sqrt(2)))) b",
    notes="the activation cast to the storage format first",
    source="unfused GeGLU: torch.nn.functional.gelu(gate) * up, two tensors of the model dtype",
)
def geglu_cast_gate(a, b, m):
    return m.store(_gelu_erf(a, m)) * b
