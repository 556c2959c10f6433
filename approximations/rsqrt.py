"""Reciprocal square root and reciprocal: the divide-free forms of normalization kernels.

The magic-constant seeds read an approximation of log2 x off the float32 bits, halve and
negate it with one integer subtraction, then refine it with a Newton step.
"""

import numpy as np

from audit.targets.candidates import candidate


def magic_seed(magic: int, x, m, shift: int):
    """The float32 with bits magic - (bits(x) >> shift) (integer arithmetic, exact)."""
    bits = np.asarray(x.a, dtype=np.float32).view(np.uint32).astype(np.int64)
    b = (magic - (bits >> shift)) & 0xFFFFFFFF
    return m.op("bitcast", b.astype(np.uint32).view(np.float32).astype(np.float64), (x.a,))


# ------------------------------------------------------------------ rsqrt
@candidate(
    "rsqrt.div_sqrt",
    reference="rsqrt",
    formula="1 / sqrt(x)",
    source="the portable form (e.g. 1.0f / sqrtf(x) in RMSNorm reference kernels)",
)
def rsqrt_div_sqrt(x, m):
    return 1.0 / m.sqrt(x)


@candidate(
    "rsqrt.quake",
    reference="rsqrt",
    formula="y = float with bits 0x5F3759DF - (bits(x) >> 1); y (1.5 - (x/2) y^2)",
    source="Quake III Arena q_math.c Q_rsqrt (id Software, GPL 2005 release)",
    compute="fp32",
)
def rsqrt_quake(x, m):
    y = magic_seed(0x5F3759DF, x, m, 1)
    x2 = x * 0.5
    return y * (1.5 - (x2 * y * y))


@candidate(
    "rsqrt.lomont",
    reference="rsqrt",
    formula="y = float with bits 0x5F375A86 - (bits(x) >> 1); y (1.5 - (x/2) y^2)",
    source="C. Lomont, 'Fast Inverse Square Root', Purdue tech. report, 2003 "
    "(the constant optimized for one Newton step)",
    compute="fp32",
)
def rsqrt_lomont(x, m):
    y = magic_seed(0x5F375A86, x, m, 1)
    x2 = x * 0.5
    return y * (1.5 - (x2 * y * y))


# ------------------------------------------------------------- reciprocal
@candidate(
    "reciprocal.div",
    reference="reciprocal",
    formula="1 / x",
    source="IEEE 754 division, the baseline",
)
def reciprocal_div(x, m):
    return 1.0 / x


@candidate(
    "reciprocal.magic",
    reference="reciprocal",
    formula="y = float with bits 0x7EF311C7 - bits(x); y (2 - x y)",
    source="qLibs qFFMath_Recip (J. Camilo Gomez, github.com/kmilo17pet/qlibs): "
    "the bit-trick seed with one Newton step",
    compute="fp32",
)
def reciprocal_magic(x, m):
    y = magic_seed(0x7EF311C7, x, m, 0)
    return y * (2.0 - x * y)
