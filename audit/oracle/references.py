"""Reference functions: each defined once, exactly, in mpmath.

A :class:`Reference` is the mathematical function a candidate approximates.
``mp`` evaluates it at the current mpmath precision and must be accurate to a
few ulps of that precision everywhere (no cancellation: GELU's negative tail
uses erfc, not 1 + erf).  ``fast`` is an optional float64 fast path whose
relative error is at most ``rel_err`` wherever its value is at least 2**-1000
in magnitude (and which is +-inf only where f exceeds float64's range); the oracle trusts it only away from rounding boundaries, and the
test suite checks the bound against mpmath over every value of the 16-bit
formats and at adversarial points.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import mpmath as mp
import numpy as np

from audit.errors import UnknownNameError
from audit.numbers.special import sc


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
    exact: bool = False  # the fast path is exact for inputs of formats up to fp32
    # near(x, **params) -> (P, g) with f(x) = P - g and g computed without cancellation,
    # where f saturates onto P (a constant or x itself); None where it does not apply.
    # It settles which side of a power of two f lies on when f is 1 - 1e-4000.
    near: Callable | None = None
    # fast_near(x, **params) -> (P, g) float64 arrays, the same split vectorized (P NaN
    # where it does not apply); g must be relatively accurate, or 0 only where f == P.
    fast_near: Callable | None = None
    # rel_err_at(x, **params) -> array: a tighter, input-dependent bound (<= rel_err) on the
    # fast path's relative error, where its error grows with a condition number
    rel_err_at: Callable | None = None
    # fast_dd(x[, b], **params) -> (hi, lo, err) float64 arrays: f = hi + lo + e, |e| <= err,
    # a double-double value where it applies (hi NaN elsewhere); lo = +-5e-324 with err = 0
    # stands for a nonzero term of that sign below float64's range.  It decides inputs
    # whose fast value sits on a rounding boundary: x/2 at odd subnormals, where
    # f(x) = x/2 + c x^2; a*b for gated units at large a, where f = a b (1 - tiny).
    fast_dd: Callable | None = None
    # bounds(x) -> (lo, hi) arrays: the function's known range at x (range findings)
    bounds: Callable | None = None
    # monotone pieces: ((a, b, +1 or -1), ...): increasing (+1) or decreasing on [a, b]; at
    # the default parameters (``monotone_at`` gives them for others: see pieces())
    monotone: tuple = ()
    # sign(x[, b], **params) -> float64 array whose sign bit is that of f(x): the sign of the
    # exact value wherever it is nonzero (also where it underflows float64, which the fast
    # value cannot tell: 0 + -0 = +0), and at an exact zero the sign that the formula gives
    # in IEEE arithmetic (tanh(-0) = -0; hardswish(-4) = -4 * 0 = -0; relu(-1) = +0).
    # None: the fast path's own sign is exact (``exact`` references); elsewhere the oracle
    # then sends every input whose fast value is within its error of zero to mpmath.
    sign: Callable | None = None
    # undefined(x, **params) -> bool array: where f is not a real number (log of a negative
    # number): the exact value is NaN there, decided without mpmath
    undefined: Callable | None = None
    # log2_frac(x, **params) -> array: the fractional part of log2|f(x)| (absolute error
    # below 2**-45) where |f(x)| exceeds float64's range, for inputs of at most 24 bits:
    # the significand of f that the ULP error of a result needs there (exp(1e38)), without
    # mpmath; None: mpmath decides those inputs
    log2_frac: Callable | None = None
    # monotone_at(**params) -> the monotone pieces where they move with the parameters
    # (swish's turning point is SILU_GRAD_ROOT / beta)
    monotone_at: Callable | None = None
    # zero_at(x[, b], **params) -> bool array: where f is exactly 0.  With it, a fast value
    # that underflows float64 to 0 elsewhere keeps a +-5e-324 stand-in (f is nonzero there),
    # as mpmath's values do; without it, such a value is taken as 0
    zero_at: Callable | None = None

    def pieces(self, params: dict | None = None) -> tuple:
        """The monotone pieces of f at these parameters."""
        if self.monotone_at is None:
            return self.monotone
        p = {k: v for k, v in self.with_defaults(params).items() if k in self.params}
        return tuple(self.monotone_at(**p))

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


def reference(
    name,
    formula,
    *,
    fast=None,
    rel_err=0.0,
    neg_inf,
    pos_inf,
    params=None,
    arity=1,
    exact=False,
    near=None,
    fast_near=None,
    rel_err_at=None,
    fast_dd=None,
    bounds=None,
    monotone=(),
    sign=None,
    undefined=None,
    log2_frac=None,
    monotone_at=None,
    zero_at=None,
):
    """Decorator registering an mpmath function as a reference.

    exact=True declares that the fast path computes the exact real value for every
    input of a format of at most 24 bits of precision (max, min, a product of two
    such numbers): the oracle then needs no ambiguity check, ties included.
    """

    def wrap(fn):
        as_fn = lambda v: v if callable(v) else (lambda **_: v)  # noqa: E731
        REFERENCES[name] = Reference(
            name,
            formula,
            fn,
            fast,
            rel_err,
            as_fn(neg_inf),
            as_fn(pos_inf),
            dict(params or {}),
            arity,
            exact,
            near,
            fast_near,
            rel_err_at,
            fast_dd,
            bounds,
            tuple(monotone),
            None if sign is None else _np(sign),
            None if undefined is None else _np(undefined),
            None if log2_frac is None else _np(log2_frac),
            monotone_at,
            zero_at,
        )
        return fn

    return wrap


def get_reference(name: str) -> Reference:
    if name in REFERENCES:
        return REFERENCES[name]
    close = difflib.get_close_matches(name, list(REFERENCES), n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise UnknownNameError(f"unknown reference '{name}'{hint}")


def mpp(v) -> mp.mpf:
    """A parameter as the decimal number the user wrote (0.01 is 1/100, not its double)."""
    return mp.mpf(repr(float(v)))


def _np(fn):
    """Run a float64 fast path with floating-point warnings silenced."""

    def run(*xs, **params):
        with np.errstate(all="ignore"):
            return fn(*(np.asarray(x, dtype=np.float64) for x in xs), **params)

    return run


_SQRT_HALF = math.sqrt(0.5)
_INV_SQRT_2PI = 1 / math.sqrt(2 * math.pi)  # phi(0)
DD_TINY = 2.0**-30  # |x| below which the second-order expansions of fast_dd apply


def _never_zero(x, **_):
    """zero_at of a function with no exact zero at a float (its roots are irrational)."""
    return np.zeros(np.shape(x), bool)


def _swish_pieces(beta: float) -> tuple:
    """x sigmoid(beta x) = silu(beta x) / beta: decreasing then increasing around
    SILU_GRAD_ROOT / beta for beta > 0, the other way round for beta < 0; x / 2 at 0."""
    if beta == 0:
        return ((-math.inf, math.inf, 1),)
    r = SILU_GRAD_ROOT / beta
    d = 1 if beta > 0 else -1
    return ((-math.inf, r, -d), (r, math.inf, d))


def _sign_x(x, **_):
    """sign of f = sign of x (odd-like functions with f(0) = 0, f(-0) = -0)"""
    return np.copysign(1.0, x)


def _positive(x, **_):
    return np.ones_like(x)


def _negative(x, **_):
    return -np.ones_like(x)


def _below_root(root):
    """sign of a derivative with one root: negative below it, positive above."""
    return lambda x, **_: np.where(x < root, -1.0, 1.0)


def _chunks(v, n: int = 8, bits: int = 26) -> tuple:
    """v (an mpmath value) as a sum of n float64 numbers of ``bits`` significant bits each:
    x * chunk is exact in float64 for x of at most 24 bits."""
    out = []
    with mp.workprec(400):
        r = mp.mpf(v)
        for _ in range(n):
            if r == 0:
                break
            e = int(mp.floor(mp.log(abs(r), 2)))
            c = mp.ldexp(mp.floor(mp.ldexp(r, bits - 1 - e)), e - bits + 1)
            out.append(float(c))
            r -= c
    return tuple(out)


with mp.workprec(400):
    LOG2E_CHUNKS = _chunks(1 / mp.log(2))  # log2(e) to about 208 bits


def _exp_log2_frac(x, **_):
    """frac(x log2 e) for x of at most 24 bits up to 2**128: each x * chunk is exact, and
    its fractional part (np.modf) too; the sum of 8 such parts is off by < 2**-48."""
    s = np.zeros_like(x)
    for c in LOG2E_CHUNKS:
        s += np.modf(x * c)[0]
    return np.mod(s, 1.0)


def _half_x_plus(c):
    """fast_dd of an f with f(x) = x/2 + c(params) x^2 + O(x^4) near 0 (GELU, SiLU,
    hardswish): hi = x/2 (exact), lo = c x^2 (x*x exact for inputs of <= 24 bits, two more
    roundings: relative error < 2**-51), the truncation below 2**-58 of lo where
    |x| (times beta) <= 2**-30.  err = |lo| 2**-48 covers both with room."""

    def dd(x, **params):
        k, scale = c(**params)
        ok = np.abs(x * scale) <= DD_TINY
        hi = np.where(ok, 0.5 * x, np.nan)
        lo = (x * x) * k
        return hi, lo, np.abs(lo) * 2.0**-48

    return _np(dd)


MISH_GRAD_ROOT = -1.1919805025210233
SILU_GRAD_ROOT = -1.2784645427610738  # silu'(x) = 0 for beta = 1
GELU_GRAD_ROOT = -0.7517916243684  # gelu'(x) = 0 (minimum of GELU)

# --------------------------------------------------------------------- GELU
# gelu(x) = x Phi(x) = (x/2) erfc(-x/sqrt 2).  The erfc form has no
# cancellation in the negative tail, where 1 + erf(x/sqrt 2) loses everything.
# Fast path error: x*sqrt(1/2) carries 2 roundings; erfc's condition number
# is about 2t^2 <= 2*27^2 where the result is above 2**-1000, so <= ~1e-12 in all;
# as a function of x, 2**-45 (1 + x^2/2) (measured: 2**-50.5 (1 + x^2/2) at worst
# over every fp16 value, a third of bf16 and 20,000 fp32 values in [-40, 40]).


# GELU's tails, where the float64 fast value is a constant of erfc: for x >= 9,
# erfc(x/sqrt(2)) < 2**-61 (mpmath: 2.26e-19 at 9), so erfc(-x/sqrt(2)) = 2 - that rounds
# to 2.0 and 0.5*x*2.0 = x; for x <= -40, erfc(40/sqrt(2)) < 1e-349 is below float64's
# smallest subnormal, so erfc rounds to 0.0 and the value is 0.5*x*0.0 = -0.0.  Both are
# also the float64 roundings of the exact GELU there (x - x*Q(x) with Q = erfc/2 < 2**-62;
# |x*Q(|x|)| < 2**-1075).  tests/test_oracle_tails.py checks both in mpmath.  An exhaustive
# fp32 sweep spends most of its oracle time in erfc (30 ns a value), and most fp32 values
# lie in these tails.
GELU_ONE, GELU_ZERO = 9.0, -40.0


def _gelu_formula(x):
    return 0.5 * x * sc.erfc(-x * _SQRT_HALF)


def _gelu_fast(x):
    """0.5 * x * erfc(-x/sqrt(2)), erfc evaluated only between the tails."""
    if x.ndim == 0:  # (one value: the formula, a scalar as before)
        return _gelu_formula(x)
    one = x >= GELU_ONE  # (+inf too: the formula gives inf there)
    mid = ~(one | ((x <= GELU_ZERO) & (x != -np.inf)))  # (NaN and -inf: the formula's NaN)
    if mid.all():
        return _gelu_formula(x)
    v = np.where(one, x, -0.0)
    if mid.any():
        v[mid] = _gelu_formula(x[mid])
    return v


def _gelu_rel_err(x):
    """min(2**-45 (1 + x^2/2), 2**-36), in place: the operations of that expression in its
    order, on one buffer."""
    t = 0.5 * x
    t *= x
    t += 1
    t *= 2.0**-45
    return np.minimum(t, 2.0**-36, out=t) if isinstance(t, np.ndarray) else np.minimum(t, 2.0**-36)


@reference(
    "gelu",
    "x * Phi(x) = x/2 * erfc(-x/sqrt(2))",
    sign=_sign_x,
    fast=_np(_gelu_fast),
    rel_err=2.0**-36,
    rel_err_at=_np(_gelu_rel_err),
    neg_inf=-0.0,
    pos_inf=math.inf,
    near=lambda x: (x, x / 2 * mp.erfc(x / mp.sqrt(2))) if x > 0 else None,
    fast_dd=_half_x_plus(lambda: (_INV_SQRT_2PI, 1.0)),
    bounds=lambda x: (np.minimum(x, 0), np.maximum(x, 0)),
    monotone=((-math.inf, GELU_GRAD_ROOT, -1), (GELU_GRAD_ROOT, math.inf, 1)),
)
def _gelu(x):
    return x / 2 * mp.erfc(-x / mp.sqrt(2))


def _const_bounds(lo, hi):
    return lambda x, **_: (np.full_like(x, lo), np.full_like(x, hi))


def _pos(g):
    """A deficit known to be positive: keep it positive where float64 underflows."""
    return np.where(g > 0, g, 5e-324)


def _sigmoid_near(t):
    """sigmoid(t) = 1/2 + tanh(t/2)/2 near 0, and 1 - sigmoid(-t) for large t."""
    small = np.abs(t) < 1
    P = np.where(small, 0.5, np.where(t > 0, 1.0, np.nan))
    g = np.where(small, -0.5 * np.tanh(0.5 * t), _pos(sc.expit(-t)))
    return P, g


def _near_odd_one(deficit):
    """near() of an odd function saturating to +-1: f(x) = sign(x) (1 - deficit(|x|))."""

    def near(x):
        if x == 0:
            return None
        one = mp.mpf(1) if x > 0 else mp.mpf(-1)
        return one, one * deficit(abs(x))

    return near


def _near_silu_grad(x, beta):
    if x <= 0 or beta <= 0:
        return None
    b = mpp(beta)
    q = 1 / (1 + mp.exp(b * x))  # 1 - s
    return mp.mpf(1), q * (1 - b * x + b * x * q)


def _near_mish_grad(x):
    if x <= 0:
        return None
    sp = mp.log1p(mp.exp(x))
    t2 = 2 / (1 + mp.exp(2 * sp))  # 1 - tanh(sp)
    return mp.mpf(1), t2 * (1 - x * (2 - t2) / (1 + mp.exp(-x)))


# ------------------------------------------------------------ the catalog's
# Fast-path bounds: a few float64 roundings on a well-conditioned formula give
# 2**-48; where the argument is a product (beta*x) whose rounding is amplified
# by the condition number (|t| <= 745 before exp underflows), 2**-40.  Fast
# paths return NaN where they cannot vouch for a value (near a root of a
# derivative, where the float64 formula cancels): the oracle sends those to
# mpmath.  Every bound is checked by tests against mpmath on all 16-bit values.


@reference(
    "sigmoid",
    "1 / (1 + exp(-x))",
    sign=_positive,
    fast=_np(lambda x: sc.expit(x)),
    rel_err=2.0**-44,
    neg_inf=0.0,
    pos_inf=1.0,
    near=lambda x: (mp.mpf(1), 1 / (1 + mp.exp(x))) if x > 0 else None,
    fast_near=_np(lambda x: _sigmoid_near(x)),
    bounds=_const_bounds(0.0, 1.0),
    monotone=((-math.inf, math.inf, 1),),
)
def _sigmoid(x):
    return 1 / (1 + mp.exp(-x))


@reference(
    "tanh",
    "tanh(x)",
    sign=_sign_x,
    fast=_np(np.tanh),
    rel_err=2.0**-48,
    neg_inf=-1.0,
    pos_inf=1.0,
    near=_near_odd_one(lambda t: 2 / (1 + mp.exp(2 * t))),
    fast_near=_np(
        lambda x: (np.where(x != 0, np.sign(x), np.nan), np.sign(x) * _pos(2 * sc.expit(-2 * np.abs(x))))
    ),
    bounds=_const_bounds(-1.0, 1.0),
    monotone=((-math.inf, math.inf, 1),),
)
def _tanh(x):
    return mp.tanh(x)


@reference(
    "silu",
    "x * sigmoid(beta x)  (swish; silu is beta = 1)",
    sign=_sign_x,
    fast=_np(lambda x, beta: x * sc.expit(beta * x)),
    rel_err=2.0**-40,
    neg_inf=lambda beta: -0.0 if beta > 0 else -math.inf,
    pos_inf=lambda beta: math.inf if beta > 0 else 0.0,
    params={"beta": 1.0},
    near=lambda x, beta: (x, x / (1 + mp.exp(mpp(beta) * x))) if x > 0 and beta > 0 else None,
    fast_dd=_half_x_plus(lambda beta: (0.25 * beta, max(abs(beta), 1.0))),
    bounds=lambda x, beta: (np.minimum(x, 0), np.maximum(x, 0)),
    monotone=((-math.inf, SILU_GRAD_ROOT, -1), (SILU_GRAD_ROOT, math.inf, 1)),
    monotone_at=lambda beta: _swish_pieces(beta),
)
def _silu(x, beta):
    return x / (1 + mp.exp(-mpp(beta) * x))


@reference(
    "softplus",
    "log(1 + exp(beta x)) / beta",
    sign=lambda x, beta: np.full_like(x, math.copysign(1.0, beta)),
    fast=_np(lambda x, beta: np.logaddexp(0.0, beta * x) / beta),
    rel_err=2.0**-40,
    neg_inf=0.0,
    pos_inf=math.inf,
    params={"beta": 1.0},
    near=lambda x, beta: (x, -mp.log1p(mp.exp(-mpp(beta) * x)) / mpp(beta)) if x > 0 else None,
    bounds=lambda x, beta: (np.maximum(x, 0), np.full_like(x, np.inf)),
    monotone=((-math.inf, math.inf, 1),),
)
def _softplus(x, beta):
    b = mpp(beta)
    return mp.log1p(mp.exp(b * x)) / b


@reference(
    "mish",
    "x * tanh(softplus(x))",
    sign=_sign_x,
    fast=_np(lambda x: x * np.tanh(np.logaddexp(0.0, x))),
    rel_err=2.0**-44,
    neg_inf=-0.0,
    pos_inf=math.inf,
    near=lambda x: (x, 2 * x / (1 + (1 + mp.exp(x)) ** 2)) if x > 0 else None,
    bounds=lambda x: (np.minimum(x, 0), np.maximum(x, 0)),
    monotone=((-math.inf, MISH_GRAD_ROOT, -1), (MISH_GRAD_ROOT, math.inf, 1)),
)
def _mish(x):
    return x * mp.tanh(mp.log1p(mp.exp(x)))


@reference(
    "elu",
    "x if x > 0 else alpha (exp(x) - 1)",
    sign=lambda x, alpha: np.where(x > 0, 1.0, np.copysign(1.0, x) * math.copysign(1.0, alpha)),
    fast=_np(lambda x, alpha: np.where(x > 0, x, alpha * np.expm1(x))),
    rel_err=2.0**-48,
    neg_inf=lambda alpha: -alpha,
    pos_inf=math.inf,
    params={"alpha": 1.0},
    near=lambda x, alpha: (-mpp(alpha), -mpp(alpha) * mp.exp(x)) if x < 0 else (x, mp.mpf(0)),
    monotone=((-math.inf, math.inf, 1),),
)
def _elu(x, alpha):
    return x if x > 0 else mpp(alpha) * mp.expm1(x)


SELU_ALPHA = "1.6732632423543772848170429916717"  # Klambauer et al. 2017, arXiv:1706.02515
SELU_SCALE = "1.0507009873554804934193349852946"


@reference(
    "selu",
    "scale * (x if x > 0 else alpha (exp(x) - 1))",
    sign=_sign_x,
    fast=_np(lambda x: float(SELU_SCALE) * np.where(x > 0, x, float(SELU_ALPHA) * np.expm1(x))),
    rel_err=2.0**-48,
    neg_inf=-float(SELU_SCALE) * float(SELU_ALPHA),
    pos_inf=math.inf,
    near=lambda x: (
        (-mp.mpf(SELU_SCALE) * mp.mpf(SELU_ALPHA), -mp.mpf(SELU_SCALE) * mp.mpf(SELU_ALPHA) * mp.exp(x))
        if x < 0
        else (mp.mpf(SELU_SCALE) * x, mp.mpf(0))
    ),
    monotone=((-math.inf, math.inf, 1),),
)
def _selu(x):
    return mp.mpf(SELU_SCALE) * (x if x > 0 else mp.mpf(SELU_ALPHA) * mp.expm1(x))


@reference(
    "celu",
    "max(0, x) + min(0, alpha (exp(x / alpha) - 1))",
    sign=_sign_x,
    fast=_np(lambda x, alpha: np.where(x > 0, x, alpha * np.expm1(x / alpha))),
    rel_err=2.0**-46,
    neg_inf=lambda alpha: -alpha,
    pos_inf=math.inf,
    params={"alpha": 1.0},
    near=lambda x, alpha: (-mpp(alpha), -mpp(alpha) * mp.exp(x / mpp(alpha))) if x < 0 else (x, mp.mpf(0)),
    monotone=((-math.inf, math.inf, 1),),
)
def _celu(x, alpha):
    a = mpp(alpha)
    return x if x > 0 else a * mp.expm1(x / a)


@reference(
    "relu",
    "max(0, x)",
    fast=_np(lambda x: np.where(x > 0, x, 0.0)),
    rel_err=0.0,
    neg_inf=0.0,
    pos_inf=math.inf,
    exact=True,
    monotone=((-math.inf, math.inf, 1),),
)
def _relu(x):
    return x if x > 0 else mp.mpf(0)


@reference(
    "leaky_relu",
    "x if x >= 0 else alpha x",
    sign=lambda x, alpha: np.where(x >= 0, np.copysign(1.0, x), -math.copysign(1.0, alpha)),
    fast=_np(lambda x, alpha: np.where(x >= 0, x, alpha * x)),
    rel_err=2.0**-50,
    neg_inf=lambda alpha: -math.inf if alpha > 0 else 0.0,
    pos_inf=math.inf,
    params={"alpha": 0.01},
    near=lambda x, alpha: (x, mp.mpf(0)) if x >= 0 else None,
    monotone=((-math.inf, math.inf, 1),),
)
def _leaky_relu(x, alpha):
    return x if x >= 0 else mpp(alpha) * x


@reference(
    "relu6",
    "min(max(0, x), 6)",
    fast=_np(lambda x: np.where(x > 0, np.minimum(x, 6.0), 0.0)),
    rel_err=0.0,
    neg_inf=0.0,
    pos_inf=6.0,
    exact=True,
    bounds=_const_bounds(0.0, 6.0),
    monotone=((-math.inf, math.inf, 1),),
)
def _relu6(x):
    return min(max(x, mp.mpf(0)), mp.mpf(6))


@reference(
    "hardtanh",
    "min(max(x, -1), 1)",
    fast=_np(lambda x: np.clip(x, -1.0, 1.0)),
    rel_err=0.0,
    neg_inf=-1.0,
    pos_inf=1.0,
    exact=True,
    bounds=_const_bounds(-1.0, 1.0),
    monotone=((-math.inf, math.inf, 1),),
)
def _hardtanh(x):
    return min(max(x, mp.mpf(-1)), mp.mpf(1))


@reference(
    "hardsigmoid",
    "relu6(x + 3) / 6",
    sign=_positive,
    fast=_np(lambda x: np.clip((x + 3.0) / 6.0, 0.0, 1.0)),
    rel_err=2.0**-50,
    neg_inf=0.0,
    pos_inf=1.0,
    near=lambda x: (mp.mpf(1), mp.mpf(0)) if x >= 3 else None,
    bounds=_const_bounds(0.0, 1.0),
    monotone=((-math.inf, math.inf, 1),),
)
def _hardsigmoid(x):
    return min(max(x + 3, mp.mpf(0)), mp.mpf(6)) / 6


@reference(
    "hardswish",
    "x relu6(x + 3) / 6",
    sign=_sign_x,
    fast=_np(lambda x: x * np.clip(x + 3.0, 0.0, 6.0) / 6.0),
    rel_err=2.0**-50,
    neg_inf=0.0,
    pos_inf=math.inf,
    near=lambda x: (x, mp.mpf(0)) if x >= 3 else None,
    fast_dd=_half_x_plus(lambda: (1 / 6, 1.0)),
)
def _hardswish(x):
    return x * min(max(x + 3, mp.mpf(0)), mp.mpf(6)) / 6


@reference(
    "logsigmoid",
    "-softplus(-x) = -log(1 + exp(-x))",
    sign=_negative,
    fast=_np(lambda x: -np.logaddexp(0.0, -x)),
    rel_err=2.0**-46,
    neg_inf=-math.inf,
    pos_inf=-0.0,
    bounds=_const_bounds(-math.inf, 0.0),
    monotone=((-math.inf, math.inf, 1),),
)
def _logsigmoid(x):
    return -mp.log1p(mp.exp(-x))


@reference(
    "softsign",
    "x / (1 + |x|)",
    sign=_sign_x,
    fast=_np(lambda x: x / (1.0 + np.abs(x))),
    rel_err=2.0**-50,
    neg_inf=-1.0,
    pos_inf=1.0,
    near=_near_odd_one(lambda t: 1 / (1 + t)),
    fast_near=_np(lambda x: (np.where(x != 0, np.sign(x), np.nan), np.sign(x) / (1.0 + np.abs(x)))),
    bounds=_const_bounds(-1.0, 1.0),
    monotone=((-math.inf, math.inf, 1),),
)
def _softsign(x):
    return x / (1 + abs(x))


@reference(
    "exp",
    "exp(x)",
    sign=_positive,
    log2_frac=_exp_log2_frac,
    fast=_np(np.exp),
    rel_err=2.0**-50,
    neg_inf=0.0,
    pos_inf=math.inf,
    fast_near=_np(lambda x: (np.where(np.abs(x) < 1, 1.0, np.nan), -np.expm1(x))),
    bounds=_const_bounds(0.0, math.inf),
    monotone=((-math.inf, math.inf, 1),),
)
def _exp(x):
    return mp.exp(x)


@reference(
    "erf",
    "erf(x)",
    sign=_sign_x,
    fast=_np(lambda x: sc.erf(x)),
    rel_err=2.0**-48,
    neg_inf=-1.0,
    pos_inf=1.0,
    near=_near_odd_one(mp.erfc),
    fast_near=_np(lambda x: (np.where(x != 0, np.sign(x), np.nan), np.sign(x) * _pos(sc.erfc(np.abs(x))))),
    bounds=_const_bounds(-1.0, 1.0),
    monotone=((-math.inf, math.inf, 1),),
)
def _erf(x):
    return mp.erf(x)


# ------------------------------------------------------------- gated units
def _gated_dd(deficit, a_min):
    """fast_dd of g(a) b where g(a) = a (1 - deficit(a)) saturates onto a for large a:
    hi = a b (exact: a product of two values of <= 24 bits), lo = -a b deficit(a); a
    deficit below float64's range keeps its sign as lo = -+5e-324 (err 0).
    deficit(a) -> (value, relative error bound)."""

    def dd(a, b):
        ok = a >= a_min
        hi = np.where(ok, a * b, np.nan)
        d, rel = deficit(np.where(ok, a, a_min))
        lo = -hi * d
        err = np.abs(lo) * rel
        tiny = (lo == 0) & (hi != 0)
        lo = np.where(tiny, -np.sign(hi) * 5e-324, lo)
        return hi, lo, np.where(tiny, 0.0, err)

    return _np(dd)


@reference(
    "swiglu",
    "silu(a) * b",
    sign=lambda a, b: np.copysign(1.0, a) * np.copysign(1.0, b),
    arity=2,
    fast=_np(lambda a, b: a * sc.expit(a) * b),
    rel_err=2.0**-40,
    neg_inf=math.nan,
    pos_inf=math.nan,
    near=lambda a, b: (a * b, a * b / (1 + mp.exp(a))) if a > 0 else None,
    # a >= 16: deficit expit(-a) <= 2**-23 of a b, accurate to a few float64 ulps
    fast_dd=_gated_dd(lambda a: (sc.expit(-a), 2.0**-48), 16.0),
)
def _swiglu(a, b):
    return a / (1 + mp.exp(-a)) * b


@reference(
    "geglu",
    "gelu(a) * b",
    sign=lambda a, b: np.copysign(1.0, a) * np.copysign(1.0, b),
    arity=2,
    fast=_np(lambda a, b: 0.5 * a * sc.erfc(-a * _SQRT_HALF) * b),
    rel_err=2.0**-36,
    neg_inf=math.nan,
    pos_inf=math.nan,
    near=lambda a, b: (a * b, a * b / 2 * mp.erfc(a / mp.sqrt(2))) if a > 0 else None,
    # a >= 6: deficit Q(a) = erfc(a/sqrt 2)/2 <= 2**-29, with GELU's x-dependent bound
    fast_dd=_gated_dd(
        lambda a: (0.5 * sc.erfc(a * _SQRT_HALF), np.minimum(2.0**-45 * (1 + 0.5 * a * a), 2.0**-30)), 6.0
    ),
)
def _geglu(a, b):
    return a / 2 * mp.erfc(-a / mp.sqrt(2)) * b


@reference(
    "reglu",
    "relu(a) * b",
    arity=2,
    fast=_np(lambda a, b: np.where(a > 0, a, 0.0) * b),
    rel_err=2.0**-50,
    neg_inf=math.nan,
    pos_inf=math.nan,
    exact=True,
)
def _reglu(a, b):
    return (a if a > 0 else mp.mpf(0)) * b


# -------------------------------------------------------------- derivatives


def _unsure_near(root, width):
    """Wrap a fast path: NaN (decide by mpmath) within width of a root, where it cancels."""

    def wrap(fn):
        def run(x, **p):
            v = fn(x, **p)
            r = root(**p) if callable(root) else root
            return np.where(np.abs(x - r) < width, np.nan, v)

        return run

    return wrap


def _gelu_grad_np(x):
    return 0.5 * sc.erfc(-x * _SQRT_HALF) + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def _gelu_grad_near(x):
    """gelu_grad(x) = 1 - g for x >= 2, where g = Phi(-x) - x phi(x) < 0: f lies above 1
    (Phi(-x) < phi(x)/x, the Mills ratio's bound, and phi(x)/x <= x phi(x)/4 there, so no
    cancellation either); -g kept positive where float64 underflows (x > 38.6)."""
    over = x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi) - 0.5 * sc.erfc(x * _SQRT_HALF)
    return np.where(x >= 2, 1.0, np.nan), -_pos(over)


@reference(
    "gelu_grad",
    "d/dx gelu = Phi(x) + x phi(x)",
    sign=_below_root(GELU_GRAD_ROOT),
    zero_at=_never_zero,
    fast=_np(_unsure_near(GELU_GRAD_ROOT, 0.05)(_gelu_grad_np)),
    rel_err=2.0**-40,
    neg_inf=-0.0,
    pos_inf=1.0,
    near=lambda x: (
        (mp.mpf(1), mp.erfc(x / mp.sqrt(2)) / 2 - x * mp.exp(-x * x / 2) / mp.sqrt(2 * mp.pi))
        if x > 0
        else None
    ),
    fast_near=_np(_gelu_grad_near),
)
def _gelu_grad(x):
    with mp.extraprec(80):  # cancels near its root at -0.75
        return mp.erfc(-x / mp.sqrt(2)) / 2 + x * mp.exp(-x * x / 2) / mp.sqrt(2 * mp.pi)


@reference(
    "sigmoid_grad",
    "d/dx sigmoid = s (1 - s) = e^-|x| / (1 + e^-|x|)^2",
    sign=_positive,
    fast=_np(lambda x: np.exp(-np.abs(x)) / (1.0 + np.exp(-np.abs(x))) ** 2),
    rel_err=2.0**-46,
    neg_inf=0.0,
    pos_inf=0.0,
    bounds=_const_bounds(0.0, 0.25),
)
def _sigmoid_grad(x):
    e = mp.exp(-abs(x))
    return e / (1 + e) ** 2


@reference(
    "tanh_grad",
    "d/dx tanh = 1 - tanh^2 = sech^2",
    sign=_positive,
    fast=_np(lambda x: 1.0 / np.cosh(x) ** 2),
    rel_err=2.0**-46,
    neg_inf=0.0,
    pos_inf=0.0,
    bounds=_const_bounds(0.0, 1.0),
)
def _tanh_grad(x):
    return mp.sech(x) ** 2


def _silu_grad_np(x, beta):
    s = sc.expit(beta * x)
    return s * (1.0 + beta * x * (1.0 - s))


@reference(
    "silu_grad",
    "d/dx x sigmoid(beta x) = s (1 + beta x (1 - s)), s = sigmoid(beta x)",
    sign=lambda x, beta: np.where(beta * x < SILU_GRAD_ROOT, -1.0, 1.0),
    fast=_np(_unsure_near(lambda beta: SILU_GRAD_ROOT / beta, 0.05)(_silu_grad_np)),
    rel_err=2.0**-38,
    neg_inf=-0.0,
    pos_inf=1.0,
    params={"beta": 1.0},
    near=_near_silu_grad,
)
def _silu_grad(x, beta):
    with mp.extraprec(80):
        b = mpp(beta)
        s = 1 / (1 + mp.exp(-b * x))
        return s * (1 + b * x * (1 - s))


@reference(
    "softplus_grad",
    "d/dx softplus = sigmoid(beta x)",
    sign=_positive,
    fast=_np(lambda x, beta: sc.expit(beta * x)),
    rel_err=2.0**-40,
    neg_inf=0.0,
    pos_inf=1.0,
    params={"beta": 1.0},
    near=lambda x, beta: (mp.mpf(1), 1 / (1 + mp.exp(mpp(beta) * x))) if x > 0 else None,
    fast_near=_np(lambda x, beta: _sigmoid_near(beta * x)),
)
def _softplus_grad(x, beta):
    return 1 / (1 + mp.exp(-mpp(beta) * x))


def _mish_grad_np(x):
    sp = np.logaddexp(0.0, x)
    t = np.tanh(sp)
    return t + x * (1.0 - t * t) * sc.expit(x)


@reference(
    "mish_grad",
    "d/dx mish = tanh(sp) + x sech^2(sp) sigmoid(x), sp = softplus(x)",
    sign=_below_root(MISH_GRAD_ROOT),
    zero_at=_never_zero,
    fast=_np(_unsure_near(MISH_GRAD_ROOT, 0.05)(_mish_grad_np)),
    rel_err=2.0**-38,
    neg_inf=-0.0,
    pos_inf=1.0,
    near=_near_mish_grad,
)
def _mish_grad(x):
    with mp.extraprec(80):
        sp = mp.log1p(mp.exp(x))
        return mp.tanh(sp) + x * mp.sech(sp) ** 2 / (1 + mp.exp(-x))


@reference(
    "elu_grad",
    "d/dx elu = 1 if x > 0 else alpha exp(x)",
    sign=lambda x, alpha: np.where(x > 0, 1.0, math.copysign(1.0, alpha)),
    fast=_np(lambda x, alpha: np.where(x > 0, 1.0, alpha * np.exp(x))),
    rel_err=2.0**-48,
    neg_inf=0.0,
    pos_inf=1.0,
    params={"alpha": 1.0},
    near=lambda x, alpha: (mp.mpf(1), mp.mpf(0)) if x > 0 else None,
    fast_near=_np(
        lambda x, alpha: (
            np.where(x > 0, 1.0, np.where(x > -1, alpha, np.nan)),
            np.where(x > 0, 0.0, -alpha * np.expm1(x)),
        )
    ),
)
def _elu_grad(x, alpha):
    return mp.mpf(1) if x > 0 else mpp(alpha) * mp.exp(x)


# ------------------------------------------------------- kernel primitives
# The building blocks of activation kernels, audited in their own right (fast exp2,
# log and reciprocal square root are bit tricks in many kernels).  Each is defined on
# its natural domain; outside it (log of a negative number) f is NaN.  At a zero input
# an infinite value takes the sign IEEE 754 gives it (1/-0 = -inf, rsqrt(-0) = -inf,
# log(+-0) = -inf), which ``sign`` states and the oracle applies to mpmath's unsigned
# infinities.


@reference(
    "expm1",
    "exp(x) - 1",
    sign=_sign_x,
    log2_frac=_exp_log2_frac,
    fast=_np(np.expm1),
    rel_err=2.0**-48,
    neg_inf=-1.0,
    pos_inf=math.inf,
    near=lambda x: (mp.mpf(-1), -mp.exp(x)) if x < 0 else None,
    fast_near=_np(lambda x: (np.where(x < -1, -1.0, np.nan), -_pos(np.exp(x)))),
    bounds=lambda x: (np.full_like(x, -1.0), np.full_like(x, np.inf)),
    monotone=((-math.inf, math.inf, 1),),
)
def _expm1(x):
    return mp.expm1(x)


@reference(
    "exp2",
    "2^x",
    sign=_positive,
    log2_frac=lambda x: np.mod(x, 1.0),
    fast=_np(np.exp2),
    rel_err=2.0**-48,
    neg_inf=0.0,
    pos_inf=math.inf,
    fast_near=_np(lambda x: (np.where(np.abs(x) < 1, 1.0, np.nan), -np.expm1(x * math.log(2)))),
    bounds=_const_bounds(0.0, math.inf),
    monotone=((-math.inf, math.inf, 1),),
)
def _exp2(x):
    return mp.ldexp(mp.exp((x - mp.floor(x)) * mp.ln2), int(mp.floor(x)))


@reference(
    "log",
    "log(x) (natural; NaN for x < 0, -inf at 0)",
    sign=lambda x: np.where(x < 1, -1.0, 1.0),
    fast=_np(lambda x: np.log(np.where(x < 0, np.nan, x))),
    rel_err=2.0**-48,
    neg_inf=math.nan,
    pos_inf=math.inf,
    undefined=lambda x: x < 0,
    monotone=((1e-300, math.inf, 1),),
)
def _log(x):
    if x < 0:
        return mp.nan
    return mp.ninf if x == 0 else mp.log(x)


@reference(
    "log1p",
    "log(1 + x) (NaN for x < -1, -inf at -1)",
    sign=_sign_x,
    fast=_np(lambda x: np.log1p(np.where(x < -1, np.nan, x))),
    rel_err=2.0**-48,
    neg_inf=math.nan,
    pos_inf=math.inf,
    undefined=lambda x: x < -1,
    monotone=((-1.0, math.inf, 1),),
)
def _log1p(x):
    if x < -1:
        return mp.nan
    return mp.ninf if x == -1 else mp.log1p(x)


@reference(
    "rsqrt",
    "1 / sqrt(x) (NaN for x < 0, +-inf at +-0)",
    sign=_sign_x,
    fast=_np(lambda x: 1.0 / np.sqrt(np.where(x < 0, np.nan, x))),
    rel_err=2.0**-50,
    neg_inf=math.nan,
    pos_inf=0.0,
    undefined=lambda x: x < 0,
    bounds=lambda x: (np.zeros_like(x), np.full_like(x, np.inf)),
    monotone=((1e-300, math.inf, -1),),
)
def _rsqrt(x):
    if x < 0:
        return mp.nan
    return mp.inf if x == 0 else 1 / mp.sqrt(x)


@reference(
    "reciprocal",
    "1 / x (+-inf at +-0)",
    sign=_sign_x,
    fast=_np(lambda x: 1.0 / x),
    rel_err=2.0**-51,
    neg_inf=-0.0,
    pos_inf=0.0,
    monotone=((-math.inf, -1e-300, -1), (1e-300, math.inf, -1)),
)
def _reciprocal(x):
    return mp.inf if x == 0 else 1 / x


# ------------------------------------------------------------------ exact zero sets
# Where each reference is exactly 0 at a finite input (x, or the pair (a, b)).  Everywhere
# else f is a nonzero real, also where it lies below float64's range (gelu(-40) = -1.5e-348,
# exp(-800)): a fast value that underflows there keeps a +-5e-324 stand-in in the oracle, so
# that a zero result has relative error exactly 1 (docs/concepts/exact-decisions.md).  A
# function whose only roots are irrational (sigmoid's derivative has none, silu's is
# -1.2784...) is never exactly 0 at a float.  Every reference must declare its set
# (test_exact_zero_sets).
def _at_zero(x, **_):
    return np.asarray(x) == 0


def _zero_unless_alpha(x, alpha=1.0, **_):
    """x == 0, and all of x <= 0 when alpha is 0 (alpha (e^x - 1), alpha x)."""
    x = np.asarray(x)
    return (x == 0) | ((x < 0) & (alpha == 0))


_ZERO_SETS: dict[str, Callable] = {
    "gelu": _at_zero,  # x Phi(x): Phi > 0
    "sigmoid": _never_zero,
    "tanh": _at_zero,
    "silu": _at_zero,  # x sigmoid(beta x)
    "softplus": _never_zero,  # log1p(e^(beta x)) / beta > 0
    "mish": _at_zero,  # x tanh(softplus(x)), softplus > 0
    "elu": _zero_unless_alpha,
    "selu": _at_zero,
    "celu": _zero_unless_alpha,
    "relu": lambda x, **_: np.asarray(x) <= 0,
    "leaky_relu": _zero_unless_alpha,
    "relu6": lambda x, **_: np.asarray(x) <= 0,
    "hardtanh": _at_zero,
    "hardsigmoid": lambda x, **_: np.asarray(x) <= -3,
    "hardswish": lambda x, **_: (np.asarray(x) <= -3) | (np.asarray(x) == 0),
    "logsigmoid": _never_zero,  # log sigmoid(x) < 0
    "softsign": _at_zero,
    "exp": _never_zero,
    "erf": _at_zero,
    "swiglu": lambda a, b, **_: (np.asarray(a) == 0) | (np.asarray(b) == 0),
    "geglu": lambda a, b, **_: (np.asarray(a) == 0) | (np.asarray(b) == 0),
    "reglu": lambda a, b, **_: (np.asarray(a) <= 0) | (np.asarray(b) == 0),
    "sigmoid_grad": _never_zero,
    "tanh_grad": _never_zero,  # 1 - tanh^2 > 0
    "silu_grad": _never_zero,  # roots irrational
    "softplus_grad": _never_zero,  # sigmoid(beta x) > 0
    "elu_grad": lambda x, alpha=1.0, **_: (np.asarray(x) <= 0) & (alpha == 0),  # 1 or alpha e^x
    "expm1": _at_zero,
    "exp2": _never_zero,
    "log": lambda x, **_: np.asarray(x) == 1,
    "log1p": _at_zero,
    "rsqrt": _never_zero,
    "reciprocal": _never_zero,
}
for _name, _z in _ZERO_SETS.items():
    if REFERENCES[_name].zero_at is None:
        REFERENCES[_name] = dataclasses.replace(REFERENCES[_name], zero_at=_z)
