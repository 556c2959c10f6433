"""Exact references of fused forms: bias + activation, activation then scale.

* ``gelu_bias(x, b) = gelu(x + b)``: the bias added exactly (the real sum of two stored
  values), the activation of that; a fused bias-GELU kernel approximates it.
* ``gelu_scale(x; scale) = scale * gelu(x)``: an epilogue that scales the activation
  before the cast to the output format (an FP8 output scale, a residual scale).

Fast paths: gelu(x + b) from the float64 sum, with GELU's bound widened by the sum's
rounding times GELU's condition number; scale * gelu(x) with GELU's bound plus one
rounding.  Ties at odd subnormal arguments (GELU(t) = t/2 + ...) go
through GELU's double-double value, of the exact sum or scaled.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np

from audit.oracle.references import REFERENCES, Reference, _np, mpp

_GELU = REFERENCES["gelu"]


def _exact_sum(x, b):
    """(x + b in float64, whether that sum is exact)."""
    s = x + b
    bb = s - x
    err = (x - (s - bb)) + (b - bb)
    return s, (err == 0) & np.isfinite(s)


# The float64 sum x + b is exact or within 2**-53 relative; GELU's condition number
# |t gelu'(t) / gelu(t)| is below 1 + t^2 + 1 <= 2**11 wherever gelu(t) >= 2**-1000
# (t > -38.5), so the argument's rounding adds at most 2**-42 to GELU's 2**-36.
BIAS_REL_ERR = 2.0**-36 + 2.0**-42


def _bias_fast(x, b):
    return _GELU.fast(x + b)


def _bias_dd(x, b):
    s, ok = _exact_sum(x, b)
    hi, lo, err = _GELU.fast_dd(np.where(ok, s, 0.0))
    return np.where(ok, hi, np.nan), lo, err


def _bias_mp(x, b):
    return _GELU.mp(mp.fadd(x, b, exact=True))


def _bias_near(x, b):
    return _GELU.near(mp.fadd(x, b, exact=True))


def _scale_fast(x, scale):
    return scale * _GELU.fast(x)


def _scale_dd(x, scale):
    """scale * (hi + lo): exact products where scale is a power of two (the FP8 scales);
    otherwise the rounding of scale * hi, and of the decimal scale to float64, in err."""
    hi, lo, err = _GELU.fast_dd(x)
    pow2 = scale != 0 and np.frexp(scale)[0] in (0.5, -0.5)
    extra = 0.0 if pow2 else 2.0**-51
    return (
        scale * hi,
        scale * lo,
        abs(scale) * err + np.abs(scale * lo) * 2.0**-52 + np.abs(scale * hi) * extra,
    )


def _scale_near(x, scale):
    pg = _GELU.near(x)
    if pg is None:
        return None
    s = mpp(scale)
    return s * pg[0], s * pg[1]


def _register() -> None:
    if "gelu_bias" in REFERENCES:
        return
    REFERENCES["gelu_bias"] = Reference(
        "gelu_bias",
        "gelu(x + b), the sum exact",
        lambda x, b: _bias_mp(x, b),
        _np(_bias_fast),
        BIAS_REL_ERR,
        lambda **_: np.nan,
        lambda **_: np.nan,
        {},
        2,
        False,
        lambda x, b: _bias_near(x, b),
        None,
        None,
        _np(_bias_dd),
        # the sign of gelu(x + b) is that of x + b (float64 keeps the sign of the sum, and
        # of an exact zero as IEEE does: x + -x = +0, -0 + -0 = -0)
        sign=_np(lambda x, b: np.copysign(1.0, x + b)),
        # exactly 0 where x + b is (gelu(t) = 0 only at t = 0; a float sum is 0 only at x = -b)
        zero_at=lambda x, b: (np.asarray(x, dtype=np.float64) + np.asarray(b, dtype=np.float64)) == 0,
    )
    REFERENCES["gelu_scale"] = Reference(
        "gelu_scale",
        "scale * gelu(x)",
        lambda x, scale: mpp(scale) * _GELU.mp(x),
        _np(_scale_fast),
        _GELU.rel_err + 2.0**-52,
        lambda scale: -0.0 if scale > 0 else (0.0 if scale < 0 else np.nan),
        lambda scale: np.inf * np.sign(scale) if scale != 0 else np.nan,
        {"scale": 1.0},
        1,
        False,
        _scale_near,
        None,
        None,
        _np(_scale_dd),
        sign=_np(lambda x, scale: np.copysign(1.0, x) * math.copysign(1.0, scale)),
        zero_at=lambda x, scale: (np.asarray(x, dtype=np.float64) == 0) | (scale == 0),
    )


_register()
