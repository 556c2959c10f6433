"""The catalog of candidate implementations, one module per family (or group).

Importing this package registers every candidate with :mod:`audit.targets.candidates`.
Each candidate states its formula and the public source it was written from;
formulas and constants are taken from the cited papers and documentation.
"""

from . import (  # noqa: F401
    backward,
    elu,
    exp,
    fused,
    gated,
    gelu,
    grads,
    logexp,
    lut,
    misc,
    mish,
    mlas,
    onednn,
    piecewise,
    rsqrt,
    sigmoid,
    silu,
    softplus,
    tanh,
    xla,
)
