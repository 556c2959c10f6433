"""XLA's CPU float32 kernels (what ``jax.numpy.tanh`` and ``jax.scipy.special.erf`` compile to
on CPU), transcribed operation by operation (``FAMILY.xla``).

Sources (Apache-2.0; constants and operation order are facts of the emitted code, no code is
copied): openxla/xla ``xla/codegen/intrinsic/tanh.cc`` and ``erf.cc`` (2025), the LLVM IR
XLA emits for its element-wise tanh and erf on f32:

* tanh: ``|x| < 0.0004`` returns x itself (a select: the bits of x, subnormals too); else x is
  clamped to +-7.99881172180175781 (where the rational reaches 1) and
  ``x P(x^2) / Q(x^2)`` is evaluated with the 13/6 coefficients that Eigen and MLAS also use,
  every Horner step one ``llvm.fma`` (exactly one rounding on any CPU: LLVM lowers it to
  ``vfmadd`` or to libm's correctly rounded ``fmaf``).
* erf: ``|x| >= 3.832506856900711`` gives copysign(1, x); else ``x P(x^2) / Q(x^2)`` with
  Eigen's newer 9/12 rational (alpha_1 = 1.128379143519084), Horner by ``llvm.fma``.

XLA's CPU runtime executes with denormals flushed (FTZ and DAZ set in MXCSR around every
computation): erf of a subnormal input is +-0 there (the subnormal is read as zero), which
``erf.xla`` says explicitly by reading such inputs as signed zeros.  tanh's small-x branch
is a select, so a subnormal x comes out unchanged.  Proven bit-identical to jax 0.10.2 /
jaxlib's XLA on this machine at every bf16 and fp16 input (as float32) and on float32
ranges through the clamps, tiny inputs and tails: tests/test_catalog_xla.py.
"""

from __future__ import annotations

import numpy as np

from audit.targets.candidates import candidate

from .mlas import TANH_ALPHA as MLAS_TANH_ALPHA
from .mlas import TANH_BETA as MLAS_TANH_BETA
from .mlas import f32

TANH_SMALL = f32("0.0004")
TANH_CLAMP = f32("7.99881172180175781")
# the 13/6 coefficients of Eigen's generic_fast_tanh_float, which MLAS uses too (float32)
TANH_ALPHA, TANH_BETA = MLAS_TANH_ALPHA, MLAS_TANH_BETA

ERF_CLAMP = f32("3.832506856900711")
ERF_ALPHA = tuple(
    f32(s)
    for s in (
        "0.00022905065861350646",
        "0.0034082910107109506",
        "0.050955695062380861",
        "0.18520832239976145",
        "1.128379143519084",
    )
)
ERF_BETA = tuple(
    f32(s)
    for s in (
        "-1.1791602954361697e-7",
        "0.000023547966471313185",
        "0.0010179625278914885",
        "0.014070470171167667",
        "0.11098505178285362",
        "0.49746925110067538",
        "1.0",
    )
)
F32_TINY = 2.0**-126  # the smallest normal float32


def _horner_fma(x2, coeffs, m):
    p = m.fma(x2, coeffs[0], coeffs[1])
    for c in coeffs[2:]:
        p = m.fma(x2, p, c)
    return p


@candidate(
    "tanh.xla",
    reference="tanh",
    formula="x if |x| < RN(0.0004) else xc P(xc^2) / Q(xc^2), xc = clamp(x, +-RN(7.99881172180175781)), "
    "Horner by FMA, 13/6 coefficients",
    source="XLA CPU (jax.numpy.tanh, f32): xla/codegen/intrinsic/tanh.cc, bit-identical to jaxlib 0.10.2 "
    "here (tests/test_catalog_xla.py)",
    compute="fp32",
)
def tanh_xla(x, m):
    xc = m.minimum(m.maximum(x, -TANH_CLAMP), TANH_CLAMP)  # NaN propagates, as XLA's min/max
    x2 = xc * xc
    p = _horner_fma(x2, TANH_ALPHA, m)
    q = _horner_fma(x2, TANH_BETA, m)
    r = (xc * p) / q
    return m.where(np.abs(x.a) < TANH_SMALL, x, r)


@candidate(
    "erf.xla",
    reference="erf",
    formula="copysign(1, x) if |x| >= RN(3.832506856900711) else x P(x^2) / Q(x^2), Horner by FMA, "
    "9/12 coefficients; subnormal x read as +-0 (DAZ)",
    source="XLA CPU (jax.scipy.special.erf, f32): xla/codegen/intrinsic/erf.cc (Eigen's rational), "
    "run with FTZ/DAZ; bit-identical to jaxlib 0.10.2 here (tests/test_catalog_xla.py)",
    compute="fp32",
)
def erf_xla(x, m):
    xd = m.where(np.abs(x.a) < F32_TINY, np.copysign(0.0, x.a), x)  # DAZ: subnormals read as 0
    x2 = xd * xd
    p = xd * _horner_fma(x2, ERF_ALPHA, m)
    q = _horner_fma(x2, ERF_BETA, m)
    r = p / q
    return m.where(np.abs(x.a) >= ERF_CLAMP, np.copysign(1.0, x.a), r)
