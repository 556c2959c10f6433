"""The oracle of quantized codes: Q(f(x)) for the exact f(x), decided from the reference's fast
value where its error bound cannot move f(x) across a rounding boundary of Q, else by mpmath
at increasing precision (definitions: :mod:`audit.measure.quant`)."""

from __future__ import annotations

import math
from typing import cast

import numpy as np

from audit.numbers.formats import Format
from audit.numbers.quant import QuantFormat
from audit.oracle import oracle


class _CodeRounding:
    """What oracle.exact_point needs of a format, with Q as the rounding: mpmath's
    precision doubles until Q(f(x) - d) = Q(f(x) + d)."""

    def __init__(self, q: QuantFormat):
        self.q, self.p, self.smallest_normal = q, 24, math.inf

    def round_mpf(self, v) -> float:
        return self.q.quantize_mpf(v)


def _rounding(q: QuantFormat) -> Format:
    """Q as the rounding of exact_points, which reads only p, smallest_normal and round_mpf of
    its format argument."""
    return cast(Format, _CodeRounding(q))


def exact_codes(ref, x: np.ndarray, q: QuantFormat, params: dict):
    """(oracle codes Q(f(x)), f(x) as float64, inputs decided by mpmath)."""
    params = ref.with_defaults(params)
    x = np.asarray(x, dtype=np.float64)
    if ref.fast is None or ref.arity != 1:
        ov = oracle.exact_points(ref, x, _rounding(q), params)
        return ov.rounded, ov.hi + ov.lo, len(x)
    with np.errstate(all="ignore"):
        v = np.asarray(ref.fast(x, **params), dtype=np.float64)
        codes = q.quantize(v)
        if ref.exact:
            amb = ~np.isfinite(v)
        else:
            slack = oracle.fast_slack(ref, x, v, params)
            # one step outward after rounding: v - slack can round onto a boundary (k + 1/2) s
            # that the real v - slack lies below, and Q would send it up (a tie); the stepped
            # bounds lie beyond the real ends, and Q is monotone: Q(lo) = Q(hi) proves Q(f)
            lo, hi = np.nextafter(v - slack, -np.inf), np.nextafter(v + slack, np.inf)
            amb = (q.quantize(lo) != q.quantize(hi)) | ~np.isfinite(v)
    idx = np.flatnonzero(amb)
    exact = v.copy()
    if len(idx):
        ov = oracle.exact_points(ref, x[idx], _rounding(q), params)
        codes[idx] = ov.rounded
        exact[idx] = ov.hi + ov.lo
    return codes, exact, len(idx)
