"""Interpolated lookup tables: N + 1 breakpoints, linear interpolation between them.

The scheme of TFLite's int16 activations (tensorflow/lite/kernels/internal/common.h,
``gen_lut``: 513 values of f at evenly spaced breakpoints over [min, max], interpolated
linearly) and of the piecewise-linear units of NPUs, here in a stated float arithmetic:
the breakpoint values f(lo + i h), h = (hi - lo) / N, are computed in float64 and stored
rounded to the compute format; the input is clamped to [lo, hi]; then, every operation
rounded to the compute format,

    u = (x - lo) * (1/h),  i = min(floor(u), N - 1),  t = u - i,
    y = v[i] + t (v[i+1] - v[i]).

Parameters: n (segments N), lo, hi.  Family ``lut`` (not gated by the project's own
baseline); the reference says which function each table holds.  Fixed-point variants (the
exact TFLite int16 arithmetic) are not modelled here.
"""

import numpy as np

from audit.numbers.special import sc
from audit.targets.candidates import candidate
from audit.targets.compute import Val

TFLITE = (
    "TFLite int16 LUT activations: tensorflow/lite/kernels/internal/common.h gen_lut "
    "(N = 512 segments) and reference_ops LUTLookup"
)
FORMULA = "v[i] + t (v[i+1] - v[i]), v = f at N+1 breakpoints over [lo, hi], x clamped"


def _interp(x, m, f64, n, lo, hi):
    n = int(n)
    if n < 1 or not hi > lo:
        raise ValueError("interpolated tables need n >= 1 and hi > lo")
    h = (hi - lo) / n
    bp = lo + h * np.arange(n + 1)
    vals = m.fmt.round(f64(bp))  # the table, stored in the compute format
    if m.native is not None:
        vals = vals.astype(m.native)
    xc = m.clip(x, lo, hi)
    u = (xc - lo) * (1.0 / h)
    ua = np.asarray(u.a, dtype=np.float64)
    nan = np.isnan(ua)  # a NaN input stays NaN
    i = np.clip(np.floor(np.where(nan, 0.0, ua)), 0, n - 1).astype(np.int64)
    t = u - Val(i.astype(vals.dtype), m)
    vi, vj = Val(vals[i], m), Val(vals[i + 1], m)
    y = vi + t * (vj - vi)
    return m.where(nan, x, y) if nan.any() else y


@candidate("lut.sigmoid_interp", reference="sigmoid", formula=FORMULA, source=TFLITE, n=256, lo=-8.0, hi=8.0)
def sigmoid_interp(x, m, n, lo, hi):
    return _interp(x, m, lambda t: sc.expit(t), n, lo, hi)


@candidate("lut.tanh_interp", reference="tanh", formula=FORMULA, source=TFLITE, n=256, lo=-4.0, hi=4.0)
def tanh_interp(x, m, n, lo, hi):
    return _interp(x, m, np.tanh, n, lo, hi)


@candidate(
    "lut.gelu_interp",
    reference="gelu",
    formula=FORMULA + "; identity-free: clamped ends",
    source="NPU piecewise-linear activation units (a table per function); " + TFLITE,
    n=64,
    lo=-4.0,
    hi=4.0,
)
def gelu_interp(x, m, n, lo, hi):
    return _interp(x, m, lambda t: t * 0.5 * sc.erfc(-t / np.sqrt(2.0)), n, lo, hi)
