"""Backward passes: dx = dy * f'(x), a bivariate function of the two stored tensors.

A backward kernel reads x (or the saved output y = f(x)) and the incoming gradient dy,
both in the storage format, and writes dx.  Its error depends on both inputs, so the
backward of f is audited as a bivariate reference ``NAME_bwd`` (from the derivative
reference ``NAME_grad``):

    NAME_bwd(x, dy) = dy * f'(x)      (exact real product, rounded once into F)

and swept over pairs (x, dy) with the pair machinery of the gated units (a seeded grid,
every pair of an 8-bit format, every pair of a 16-bit format with ``exhaustive``).

The oracle needs nothing new: each backward reference carries an mpmath function (dy
times the derivative's mpmath function), a float64 fast path (dy times the derivative's
fast path, with the derivative's bound plus one rounding), the derivative's ``near``
split scaled by dy (f' saturating onto 1), and where f'(0) is a power of two (GELU,
SiLU, sigmoid, softplus) a double-double Taylor value at tiny x that decides the exact
ties dy * f'(0) at odd subnormal dy without mpmath.  The derivative fast paths decline
(NaN) near their roots; there the derivative is evaluated once per distinct x in mpmath
(a handful per chunk) instead of once per pair.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass

import mpmath as mp
import numpy as np

from audit.oracle.references import REFERENCES, Reference, _np

BWD_SUFFIX = "_bwd"
TAYLOR_TINY = 2.0**-30  # |scale x| below which the Taylor double-double applies
# bound on the fast value's extra error: the float64 product dy * g (2**-53) and, where g
# came from mpmath near a root, its rounding to float64 (2**-53)
PRODUCT_REL = 2.0**-52
G_CACHE = 4096  # derivative values kept by each backward reference's mpmath function


@dataclass(frozen=True)
class BackwardReference(Reference):
    """dy * f'(x) over pairs (x, dy); ``grad`` names the derivative reference."""

    grad: str = ""
    x_intervals: bool = True  # findings as intervals of x (the x at which some dy fails)
    axis_names: tuple = ("x", "dy")


def _g_fast(g: Reference):
    """The derivative's fast path, with the inputs it declines (NaN: near a root, where it
    cancels) evaluated in mpmath once per distinct x (rounded to float64: 2**-53)."""

    def fast(x, **p):
        x = np.asarray(x, dtype=np.float64)
        if len(x) > 64:  # runs of equal x (the slow axis of a pair chunk): f' once per run
            new = np.empty(len(x), bool)
            new[0] = True
            np.not_equal(x[1:], x[:-1], out=new[1:])  # (-0 and +0: one run, f'(-0) = f'(+0))
            starts = np.flatnonzero(new)
            if len(starts) * 8 < len(x):
                return np.repeat(fast(x[starts], **p), np.diff(np.append(starts, len(x))))
        v = g.fast(x, **p)
        bad = np.isnan(v) & np.isfinite(x)
        if bad.any():
            from audit.oracle.oracle import _MPMATH  # (mpmath's precision is global: one thread at a time)

            ux, inv = np.unique(x[bad], return_inverse=True)
            with _MPMATH, mp.workprec(256):
                vals = np.array([float(g.mp(mp.mpf(float(t)), **p)) for t in ux])
            v = v.copy()
            v[bad] = vals[inv]
        return v

    return fast


def _taylor_dd(g0: float, g1, g2, c3):
    """fast_dd of dy * g(x) at |scale x| <= TAYLOR_TINY where g(x) = g0 + g1 x + g2 x^2 +
    O(c3 |x|^3) and g0 is a power of two: hi = dy g0 (exact), lo = dy (g1 x + g2 x^2)
    (a few roundings: relative 2**-50), err covers both and the truncated term.
    g1, g2, c3: functions of the parameters (beta) -> float."""

    def dd(x, dy, **p):
        a, b, c = g1(**p), g2(**p), c3(**p)
        scale = max(abs(a), abs(b), 1.0)
        ok = np.abs(x) * scale <= TAYLOR_TINY
        hi = np.where(ok, dy * g0, np.nan)
        lo = dy * (a * x + b * (x * x))
        err = np.abs(lo) * 2.0**-48 + np.abs(dy) * c * np.abs(x) ** 3 * 2
        return hi, lo, err

    return _np(dd)


# Taylor coefficients at 0 of the derivatives whose value there is a power of two
# (checked against mpmath in the tests):
#   gelu'(x)     = 1/2 + sqrt(2/pi) x - (2/3) phi(0) x^3 + ...
#   silu'(x)     = 1/2 + (beta/2) x - (beta^3/12) x^3 + ...        (beta x small)
#   sigmoid'(x)  = 1/4 - x^2/16 + x^4/96 + ...
#   softplus'(x) = sigmoid(beta x) = 1/2 + (beta/4) x - (beta^3/48) x^3 + ...
_TAYLOR = {
    "gelu_grad": (0.5, lambda: math.sqrt(2 / math.pi), lambda: 0.0, lambda: 0.3),
    "silu_grad": (0.5, lambda beta: beta / 2, lambda beta: 0.0, lambda beta: abs(beta) ** 3 / 12 + 1),
    "sigmoid_grad": (0.25, lambda: 0.0, lambda: -1 / 16, lambda: 0.1),
    "softplus_grad": (0.5, lambda beta: beta / 4, lambda beta: 0.0, lambda beta: abs(beta) ** 3 / 48 + 1),
}


def backward_reference(grad_name: str) -> BackwardReference:
    """The backward reference NAME_bwd built from derivative reference NAME_grad
    (registered in REFERENCES on first use)."""
    g = REFERENCES[grad_name]
    name = grad_name.removesuffix("_grad") + BWD_SUFFIX
    if name in REFERENCES:
        return REFERENCES[name]
    gf = _g_fast(g)
    cache: OrderedDict = OrderedDict()

    def mpf(x, dy, **p):
        """dy * f'(x) at the working precision; f'(x) is remembered per (x, precision,
        parameters): a chunk of pairs holds few distinct x (the slow axis), and the pairs
        mpmath decides share them (the same value as recomputing: mpmath is deterministic)."""
        key = (x._mpf_, mp.mp.prec, tuple(sorted(p.items())))
        v = cache.get(key)
        if v is None:
            v = cache[key] = g.mp(x, **p)
            if len(cache) > G_CACHE:
                cache.popitem(last=False)
        return dy * v

    def near(x, dy, **p):
        pg = g.near(x, **p) if g.near is not None else None
        if pg is None or dy == 0:
            return None
        return dy * pg[0], dy * pg[1]

    dd = None
    if grad_name in _TAYLOR:
        dd = _taylor_dd(*_TAYLOR[grad_name])
    ref = BackwardReference(
        name,
        f"dy * {g.formula}",
        mpf,
        _np(lambda x, dy, **p: dy * gf(x, **p)),
        max(g.rel_err, 2.0**-50) + PRODUCT_REL,
        lambda **_: math.nan,
        lambda **_: math.nan,
        dict(g.params),
        2,
        False,
        near,
        None,
        None,
        dd,
        None,
        (),
        grad=grad_name,
        # sign(dy f'(x)) = sign(dy) sign(f'(x)), also where the product underflows float64
        # (without it, every such pair would go to mpmath to learn the sign of its zero)
        sign=None if g.sign is None else _np(lambda x, dy, **p: np.copysign(1.0, dy) * g.sign(x, **p)),
        # exactly 0 only where dy is (f' has no zero at a finite float: its roots are irrational)
        zero_at=lambda x, dy, **p: np.asarray(dy) == 0,
    )
    REFERENCES[name] = ref
    return ref


def register_all() -> list[str]:
    """A backward reference for every derivative reference (NAME_grad -> NAME_bwd)."""
    return [backward_reference(n).name for n in sorted(REFERENCES) if n.endswith("_grad")]


def is_backward(ref: Reference) -> bool:
    return isinstance(ref, BackwardReference)


register_all()
