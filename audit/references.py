"""Reference functions: each defined once, exactly, in mpmath.

A :class:`Reference` is the mathematical function a candidate approximates.
``mp`` evaluates it at the current mpmath precision and must be accurate to a
few ulps of that precision everywhere (no cancellation: GELU's negative tail
uses erfc, not 1 + erf).  ``fast`` is an optional float64 fast path whose
relative error is at most ``rel_err`` wherever its value is at least 2**-1000
in magnitude; the oracle trusts it only away from rounding boundaries, and the
test suite checks the bound against mpmath over every value of the 16-bit
formats and at adversarial points.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field
from typing import Callable

import mpmath as mp
import numpy as np
import scipy.special as sc

from .errors import UnknownNameError


@dataclass(frozen=True)
class Reference:
    name: str
    formula: str
    mp: Callable  # (x: mpf, **params) -> mpf
    fast: Callable | None  # (x: float64 ndarray, **params) -> float64 ndarray
    rel_err: float  # bound on the fast path's relative error
    at_neg_inf: Callable  # params -> float (limit at -inf)
    at_pos_inf: Callable  # params -> float (limit at +inf)
    params: dict = field(default_factory=dict)
    arity: int = 1

    def special(self, x: float, params: dict) -> float:
        """The value at a non-finite input: the limit at +-inf, NaN at NaN."""
        if math.isnan(x):
            return math.nan
        return self.at_pos_inf(**params) if x > 0 else self.at_neg_inf(**params)

    def with_defaults(self, params: dict | None) -> dict:
        out = dict(self.params)
        out.update(params or {})
        return out


REFERENCES: dict[str, Reference] = {}


def reference(name, formula, *, fast=None, rel_err=0.0, neg_inf, pos_inf, params=None, arity=1):
    """Decorator registering an mpmath function as a reference."""

    def wrap(fn):
        as_fn = lambda v: v if callable(v) else (lambda **_: v)  # noqa: E731
        REFERENCES[name] = Reference(name, formula, fn, fast, rel_err, as_fn(neg_inf),
                                     as_fn(pos_inf), dict(params or {}), arity)
        return fn

    return wrap


def get_reference(name: str) -> Reference:
    if name in REFERENCES:
        return REFERENCES[name]
    close = difflib.get_close_matches(name, list(REFERENCES), n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise UnknownNameError(f"unknown reference '{name}'{hint}")


def _np(fn):
    """Run a float64 fast path with floating-point warnings silenced."""

    def run(x, **params):
        with np.errstate(all="ignore"):
            return fn(np.asarray(x, dtype=np.float64), **params)

    return run


_SQRT_HALF = math.sqrt(0.5)

# --------------------------------------------------------------------- GELU
# gelu(x) = x Phi(x) = (x/2) erfc(-x/sqrt 2).  The erfc form has no
# cancellation in the negative tail, where 1 + erf(x/sqrt 2) loses everything.
# Fast path error: x*sqrt(1/2) carries 2 roundings; erfc's condition number
# is 2t^2 <= 2*27^2 where the result is above 2**-1000, so <= ~1e-12 in all.


@reference("gelu", "x * Phi(x) = x/2 * erfc(-x/sqrt(2))",
           fast=_np(lambda x: 0.5 * x * sc.erfc(-x * _SQRT_HALF)), rel_err=2.0**-36,
           neg_inf=-0.0, pos_inf=math.inf)
def _gelu(x):
    return x / 2 * mp.erfc(-x / mp.sqrt(2))
