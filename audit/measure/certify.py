"""Certified oracle tables: every correctly rounded value proven with ball arithmetic.

The oracle (audit/oracle/oracle.py) decides RN_F(f(x)) with mpmath, trusting a guard-bit
heuristic.  This module proves each entry of a cached table (every finite input of a
float format of 16 bits or fewer, one univariate reference at its default parameters)
independently of that code:

* **Arb enclosures.**  Each reference is written again here as an expression in
  python-flint's ``arb`` (ball arithmetic, Arb/FLINT): the result is a ball [m +- r] that
  contains f(x) for certain.  The expressions share nothing with the mpmath definitions.
* **Rounding intervals.**  The table's value r of F owns the interval of reals that round
  to it (to nearest, ties to even): from the midpoint with the value below to the midpoint
  with the value above, the neighbours taken from the format's enumerated values, each end
  included where r's significand is even (ties go there).  Overflow (+-inf, NaN in formats
  without infinities) owns the reals beyond max_finite's upper midpoint, saturating
  formats' +-max_finite everything beyond its lower one.  The entry is certified when the
  ball lies inside r's interval.  The precision starts low (PRECISIONS[0] bits) and is raised
  until it does, up to MAX_PREC bits; beyond that the entry is *uncertified*.
* **Exact cases.**  Where f(x) is a rational number known in closed form (relu and its
  relatives, hardsigmoid, hardswish, softsign, 1/x, f(0), 2^k, log(1)), no ball is used:
  the exact value (a Fraction) is compared with the interval's ends exactly.  A value on
  a rounding boundary (hardsigmoid(-1.5) = 1/4 in fp4) can only be proven this way.
  Domain errors (log of a negative number: NaN) and poles (1/+-0, log 0) are declared too.
* **Signed zeros.**  A zero entry must carry the sign of f: the side of zero the ball lies
  on where f is nonzero (the ball must exclude 0), the declared IEEE sign where f is
  exactly 0 (tanh(-0) = -0, relu(-1) = +0, hardswish(-4) = -0); +0 always in the fnuz
  formats, which have no -0.

Not certified: the double-double exact values (hi, lo) the tables also hold, tables of
non-default parameters, bivariate references (not tabulated), infinite and NaN inputs
(limits, not table entries), and quantized integer codes (int8/uint8/int16: a code
depends on a scale and a zero point chosen per audit, so there is no table per format to
certify; their rounding is decided per run by the same exact_point machinery).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
from flint import arb, ctx

from audit.numbers.formats import FORMATS, Format
from audit.oracle import oracle
from audit.oracle.references import REFERENCES, Reference

CERTIFY_VERSION = 1
PRECISIONS = (64, 256, 1024, 4096)  # bits tried in turn; the last is the cap
MAX_PREC = PRECISIONS[-1]
MAX_LISTED = 20  # uncertified entries listed per table


def certified_formats() -> list[str]:
    """Every element format of 16 bits or fewer (E8M0 is a block-scale format: no table)."""
    return [n for n, f in FORMATS.items() if f.bits <= 16 and f.kind == "float"]


def certified_references() -> list[str]:
    from audit.oracle import fused  # noqa: F401  (their univariate references too)

    return [n for n in sorted(REFERENCES) if REFERENCES[n].arity == 1]


# ------------------------------------------------------------- exact cases
# An exact case: ("num", Fraction), ("zero", negative?), ("inf", negative?), ("nan",).
ZERO_POS, ZERO_NEG = ("zero", False), ("zero", True)
INF_POS, INF_NEG, NAN = ("inf", False), ("inf", True), ("nan",)


def _zero_of(x: float) -> tuple:
    """An exact zero with the sign of x (IEEE: tanh(-0) = -0, x/2 at -0)."""
    return ZERO_NEG if math.copysign(1.0, x) < 0 else ZERO_POS


def _num(q: Fraction, x: float, zero_neg: bool | None = None) -> tuple:
    """An exact rational value; at 0, the sign given (or x's)."""
    if q == 0:
        return ("zero", (math.copysign(1.0, x) < 0) if zero_neg is None else zero_neg)
    return ("num", q)


def _dec(v: float) -> Fraction:
    """A parameter as the decimal the user wrote (0.01 is 1/100), as the references take it."""
    return Fraction(repr(float(v)))


def _at_zero(value):
    """Exact only at x = +-0: ``value`` is a Fraction (f(0)) or None (f(0) = 0 with x's sign)."""

    def rule(x, **_):
        if x != 0:
            return None
        return _zero_of(x) if value is None else ("num", value)

    return rule


def _rule_relu(x, **_):
    return ("num", Fraction(x)) if x > 0 else ZERO_POS


def _rule_relu6(x, **_):
    return ("num", min(Fraction(x), Fraction(6))) if x > 0 else ZERO_POS


def _rule_hardtanh(x, **_):
    if x == 0:
        return _zero_of(x)  # clamp keeps -0
    return ("num", max(Fraction(-1), min(Fraction(x), Fraction(1))))


def _rule_leaky(x, alpha, **_):
    if x >= 0:  # x itself (-0 stays -0)
        return _num(Fraction(x), x)
    return ("num", _dec(alpha) * Fraction(x)) if alpha != 0 else ZERO_POS


def _rule_hardsigmoid(x, **_):
    v = max(Fraction(0), min(Fraction(x) + 3, Fraction(6))) / 6
    return _num(v, x, zero_neg=False)


def _rule_hardswish(x, **_):
    v = Fraction(x) * max(Fraction(0), min(Fraction(x) + 3, Fraction(6))) / 6
    return _num(v, x)  # x * 0 / 6: the sign of x


def _rule_softsign(x, **_):
    q = Fraction(x)
    return _num(q / (1 + abs(q)), x)


def _rule_reciprocal(x, **_):
    if x == 0:
        return INF_NEG if math.copysign(1.0, x) < 0 else INF_POS
    return ("num", 1 / Fraction(x))


def _rule_identity_above(at0=None):
    """f(x) = x for x > 0 (elu, celu); f(0) = 0 with x's sign, or ``at0``."""

    def rule(x, **_):
        if x > 0:
            return ("num", Fraction(x))
        if x == 0:
            return _zero_of(x) if at0 is None else ("num", at0)
        return None

    return rule


def _rule_elu_grad(x, alpha, **_):
    if x > 0:
        return ("num", Fraction(1))
    if x == 0:
        return _num(_dec(alpha), x, zero_neg=False)
    return None


def _rule_exp2(x, **_):
    if x == int(x) and abs(x) <= 1100:
        return ("num", Fraction(2) ** int(x))
    return None


def _rule_log(x, **_):
    if x < 0:
        return NAN
    if x == 0:
        return INF_NEG
    if x == 1:
        return ZERO_POS
    return None


def _rule_log1p(x, **_):
    if x < -1:
        return NAN
    if x == -1:
        return INF_NEG
    if x == 0:
        return _zero_of(x)
    return None


def _rule_rsqrt(x, **_):
    if x < 0:
        return NAN
    if x == 0:
        return INF_NEG if math.copysign(1.0, x) < 0 else INF_POS
    q = Fraction(x)  # x = 4^k: 2^-k
    n, d = q.numerator, q.denominator
    rn, rd = math.isqrt(n), math.isqrt(d)
    if rn * rn == n and rd * rd == d:
        return ("num", Fraction(rd, rn))
    return None


def _rule_gelu_scale(x, scale, **_):
    if x != 0:
        return None
    return ("zero", (math.copysign(1.0, x) < 0) != (math.copysign(1.0, scale) < 0))


# ------------------------------------------------------------ Arb formulas
_CONST: dict = {}


def _k(name: str) -> arb:
    """A constant at the current precision, cached per precision."""
    key = (name, ctx.prec)
    c = _CONST.get(key)
    if c is None:
        if name == "sqrt_half":
            c = arb(2).rsqrt()
        elif name == "inv_sqrt_2pi":
            c = (2 * arb.pi()).rsqrt()
        elif name == "sqrt_pi":
            c = arb.pi().sqrt()
        elif name == "log2":
            c = arb.const_log2()
        elif name == "selu_scale":
            c = arb("1.0507009873554804934193349852946")
        elif name == "selu_alpha":
            c = arb("1.6732632423543772848170429916717")
        else:
            raise KeyError(name)
        _CONST[key] = c
    return c


def _p(v: float) -> arb:
    """A parameter as the decimal written (the ball around 1/100 for 0.01)."""
    return arb(repr(float(v)))


def _sigmoid(t: arb) -> arb:
    return 1 / (1 + (-t).exp())


def _erfc(t: arb) -> arb:
    """erfc(t).  Arb's erfc gives only a magnitude bound (a ball around 0) for huge t
    (erfc(2.4e38) = 10^(-2.5e76)); there the classical bounds (Abramowitz & Stegun 7.1.13)
    2 e^(-t^2) / (sqrt(pi) (t + sqrt(t^2 + 2))) < erfc(t) <= 2 e^(-t^2) / (sqrt(pi) (t + sqrt(t^2 + 4/pi)))
    enclose it, for t > 0, with a relative width below 1/t^2."""
    b = t.erfc()
    if b > 0 or not t > 1:
        return b
    e = 2 * (-(t * t)).exp() / _k("sqrt_pi")
    lower = e / (t + (t * t + 2).sqrt())
    upper = e / (t + (t * t + 4 / arb.pi()).sqrt())
    return lower.union(upper)


def _gelu(x: arb) -> arb:
    return x / 2 * _erfc(-x * _k("sqrt_half"))


def _f_silu(x, beta):
    return x * _sigmoid(_p(beta) * x)


def _f_softplus(x, beta):
    b = _p(beta)
    return (b * x).exp().log1p() / b


def _f_mish(x):
    return x * x.exp().log1p().tanh()


def _f_elu(x, alpha):
    return _p(alpha) * x.expm1()  # (x > 0: exact case)


def _f_selu(x):
    if x > 0:
        return _k("selu_scale") * x
    return _k("selu_scale") * _k("selu_alpha") * x.expm1()


def _f_celu(x, alpha):
    a = _p(alpha)
    return a * (x / a).expm1()


def _f_leaky(x, alpha):
    return _p(alpha) * x


def _f_gelu_grad(x):
    return _erfc(-x * _k("sqrt_half")) / 2 + x * (-(x * x) / 2).exp() * _k("inv_sqrt_2pi")


def _f_sigmoid_grad(x):
    e = (-abs(x)).exp()
    return e / (1 + e) ** 2


def _f_silu_grad(x, beta):
    t = _p(beta) * x
    s = 1 / (1 + (-t).exp())
    q = 1 / (1 + t.exp())  # 1 - s, without cancellation
    return s * (1 + t * q)


def _f_mish_grad(x):
    sp = x.exp().log1p()
    return sp.tanh() + x * sp.sech() ** 2 * _sigmoid(x)


def _f_exp2(x):
    return (x * _k("log2")).exp()


@dataclass(frozen=True)
class Formula:
    arb: Callable[..., Any] | None  # (x: arb, **params) -> arb, or None where the exact rule covers every x
    exact: Callable[..., Any] | None = None  # (x: float, **params) -> exact case or None
    text: str = ""


FORMULAS: dict[str, Formula] = {
    "gelu": Formula(lambda x: _gelu(x), _at_zero(None), "x/2 erfc(-x/sqrt 2)"),
    "sigmoid": Formula(_sigmoid, _at_zero(Fraction(1, 2)), "1 / (1 + exp(-x))"),
    "tanh": Formula(lambda x: x.tanh(), _at_zero(None), "tanh x"),
    "silu": Formula(_f_silu, _at_zero(None), "x / (1 + exp(-beta x))"),
    "softplus": Formula(_f_softplus, None, "log1p(exp(beta x)) / beta"),
    "mish": Formula(_f_mish, _at_zero(None), "x tanh(log1p(exp x))"),
    "elu": Formula(_f_elu, _rule_identity_above(), "alpha expm1(x) (x <= 0)"),
    "selu": Formula(_f_selu, _at_zero(None), "scale (x or alpha expm1 x)"),
    "celu": Formula(_f_celu, _rule_identity_above(), "alpha expm1(x / alpha) (x <= 0)"),
    "relu": Formula(None, _rule_relu, "max(0, x), exact"),
    "leaky_relu": Formula(_f_leaky, _rule_leaky, "x or alpha x"),
    "relu6": Formula(None, _rule_relu6, "min(max(0, x), 6), exact"),
    "hardtanh": Formula(None, _rule_hardtanh, "clamp(x, -1, 1), exact"),
    "hardsigmoid": Formula(None, _rule_hardsigmoid, "clamp((x + 3) / 6, 0, 1), exact"),
    "hardswish": Formula(None, _rule_hardswish, "x clamp(x + 3, 0, 6) / 6, exact"),
    "logsigmoid": Formula(lambda x: -(-x).exp().log1p(), None, "-log1p(exp(-x))"),
    "softsign": Formula(None, _rule_softsign, "x / (1 + |x|), exact"),
    "exp": Formula(lambda x: x.exp(), _at_zero(Fraction(1)), "exp x"),
    "erf": Formula(lambda x: x.erf(), _at_zero(None), "erf x"),
    "gelu_grad": Formula(
        _f_gelu_grad, _at_zero(Fraction(1, 2)), "erfc(-x/sqrt 2)/2 + x exp(-x^2/2)/sqrt(2 pi)"
    ),
    "sigmoid_grad": Formula(_f_sigmoid_grad, _at_zero(Fraction(1, 4)), "e / (1 + e)^2, e = exp(-|x|)"),
    "tanh_grad": Formula(lambda x: x.sech() ** 2, _at_zero(Fraction(1)), "sech^2 x"),
    "silu_grad": Formula(_f_silu_grad, _at_zero(Fraction(1, 2)), "s (1 + t (1 - s)), t = beta x"),
    "softplus_grad": Formula(
        lambda x, beta: _sigmoid(_p(beta) * x), _at_zero(Fraction(1, 2)), "sigmoid(beta x)"
    ),
    "mish_grad": Formula(_f_mish_grad, None, "tanh(sp) + x sech^2(sp) sigmoid(x)"),
    "elu_grad": Formula(lambda x, alpha: _p(alpha) * x.exp(), _rule_elu_grad, "alpha exp x (x <= 0)"),
    "expm1": Formula(lambda x: x.expm1(), _at_zero(None), "expm1 x"),
    "exp2": Formula(_f_exp2, _rule_exp2, "exp(x log 2); 2^k exact"),
    "log": Formula(lambda x: x.log(), _rule_log, "log x"),
    "log1p": Formula(lambda x: x.log1p(), _rule_log1p, "log1p x"),
    "rsqrt": Formula(lambda x: x.rsqrt(), _rule_rsqrt, "1 / sqrt x"),
    "reciprocal": Formula(None, _rule_reciprocal, "1 / x, exact"),
    "gelu_scale": Formula(lambda x, scale: _p(scale) * _gelu(x), _rule_gelu_scale, "scale gelu(x)"),
}


# ------------------------------------------------------- rounding intervals
@dataclass
class Intervals:
    """Per table entry: what r demands of f.  kind 0: lo <= f <= hi (ends included where
    lo_in / hi_in); 1: a zero, f in [lo, hi] and on the side of zero (or exactly 0 with the
    sign) of ``neg``; 2: overflow to +-inf (neg: -inf): |f| beyond hi, f of that sign;
    3: NaN by overflow or outside the domain: |f| beyond hi, or f undefined."""

    kind: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    lo_in: np.ndarray
    hi_in: np.ndarray
    neg: np.ndarray
    bad: np.ndarray  # entries that are no value of F at all (e.g. -0 in fnuz)


def _even(fmt: Format, v: np.ndarray) -> np.ndarray:
    """Whether the integral significand of each finite v (0 included) is even."""
    a = np.abs(v)
    _, k = np.frexp(a)
    q = np.maximum(k - 1, fmt.emin) - (fmt.p - 1)
    m = np.ldexp(a, -q)
    return np.where(a == 0, True, np.mod(m, 2) == 0)


def intervals(fmt: Format, r: np.ndarray) -> Intervals:
    vals = np.unique(fmt.finite_values() + 0.0)  # ascending, -0 merged into +0
    top = vals[-1]
    n = len(r)
    kind = np.zeros(n, np.int8)
    lo, hi = np.full(n, -np.inf), np.full(n, np.inf)
    lo_in, hi_in = np.zeros(n, bool), np.zeros(n, bool)
    neg = np.signbit(r)
    bad = np.zeros(n, bool)
    # beyond max_finite: the midpoint with the next value of an unbounded exponent range
    # (max_finite + one ulp); the tie belongs to max_finite where its significand is even
    ulp_top = math.ldexp(1.0, max(math.frexp(top)[1] - 1, fmt.emin) - fmt.p + 1)
    over = top + ulp_top / 2
    top_even = bool(_even(fmt, np.array([top]))[0])
    fin = np.isfinite(r)
    i = np.searchsorted(vals, np.where(fin, r, 0.0))
    known = fin & (vals[np.clip(i, 0, len(vals) - 1)] == np.where(fin, r, 0.0))
    bad |= fin & ~known
    ev = _even(fmt, np.where(fin, r, 0.0))
    below = vals[np.clip(i - 1, 0, len(vals) - 1)]
    above = vals[np.clip(i + 1, 0, len(vals) - 1)]
    lo = np.where(fin & (i > 0), (np.where(fin, r, 0.0) + below) / 2, lo)
    hi = np.where(fin & (i < len(vals) - 1), (np.where(fin, r, 0.0) + above) / 2, hi)
    at_top, at_bottom = fin & (i == len(vals) - 1), fin & (i == 0)
    if not fmt.saturate:  # +-max_finite end where overflow begins
        hi = np.where(at_top, over, hi)
        lo = np.where(at_bottom, -over, lo)
    lo_in = np.where(fin, ev, False)
    hi_in = np.where(fin, ev, False)
    kind[fin & (r == 0)] = 1
    if not fmt.neg_zero:
        bad |= (r == 0) & neg  # fnuz: no -0
    inf = np.isinf(r)
    if inf.any():
        if not fmt.has_inf or fmt.saturate:
            bad |= inf
        kind[inf] = 2
        hi[inf] = over
        hi_in[inf] = not top_even  # the tie overflows where max_finite is odd
    nan = np.isnan(r)
    kind[nan] = 3
    hi[nan] = over
    hi_in[nan] = not top_even
    if fmt.has_inf or fmt.saturate:
        hi[nan] = np.inf  # NaN only where f is undefined
    return Intervals(kind, lo, hi, lo_in, hi_in, neg, bad)


# --------------------------------------------------------------- the proof
def _exact_ok(fmt: Format, e: tuple, kind, lo, hi, lo_in, hi_in, neg) -> bool:
    """An exact case against its entry's interval, in rationals."""
    if e[0] == "nan":
        return kind == 3
    if e[0] == "inf":  # a pole: rounds as overflow does in F
        if fmt.saturate:
            return kind == 0 and neg == e[1] and (lo == -math.inf if e[1] else hi == math.inf)
        if fmt.has_inf:
            return kind == 2 and neg == e[1]
        return kind == 3
    if e[0] == "zero":
        return kind == 1 and neg == (e[1] and fmt.neg_zero)
    q = e[1]
    if kind in (2, 3):
        if hi == math.inf:
            return False
        t = Fraction(hi)
        beyond = abs(q) > t or (hi_in and abs(q) == t)
        return beyond and (kind == 3 or (q < 0) == neg)
    ok_lo = lo == -math.inf or q > Fraction(lo) or (lo_in and q == Fraction(lo))
    ok_hi = hi == math.inf or q < Fraction(hi) or (hi_in and q == Fraction(hi))
    if kind == 1:  # a nonzero value that rounds to zero: the zero takes its sign
        return ok_lo and ok_hi and neg == (q < 0 and fmt.neg_zero)
    return ok_lo and ok_hi


def _ball_ok(fmt: Format, b: arb, kind, lo, hi, lo_in, hi_in, neg) -> bool:
    """A ball against its entry's interval: True where certain."""
    if not b.is_finite():
        return False
    if kind in (2, 3):
        if hi == math.inf:  # NaN in a format with inf (or saturating): only by a domain rule
            return False
        t = arb(hi)
        up = b >= t if hi_in else b > t
        down = b <= -t if hi_in else b < -t
        if kind == 3:
            return bool(up or down)
        return bool(down if neg else up)
    if lo != -math.inf:
        lb = arb(lo)
        if not (b >= lb if lo_in else b > lb):
            return False
    if hi != math.inf:
        hb = arb(hi)
        if not (b <= hb if hi_in else b < hb):
            return False
    if kind == 1:  # a zero: f's side of zero must be certain (its sign, in F with -0)
        if neg:
            return bool(b < 0) and fmt.neg_zero
        return bool(b > 0) or (not fmt.neg_zero and bool(b < 0))
    return True


@dataclass
class TableResult:
    reference: str
    format: str
    certified: int
    total: int
    exact: int = 0  # of the certified: proven by an exact case
    raised: int = 0  # of the certified: needed more than PRECISIONS[0] bits
    uncertified: list = field(default_factory=list)  # [(x, table value), ...] (first MAX_LISTED)
    n_uncertified: int = 0
    digest: str = ""


def certify_values(
    ref: Reference,
    fmt: Format,
    params: dict,
    x: np.ndarray,
    rounded: np.ndarray,
    precisions: tuple = PRECISIONS,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(certified, exact case, precision raised) per entry: the proof of each rounded[i]
    = RN_F(f(x[i])), trying the ``precisions`` (bits) in turn."""
    form = FORMULAS.get(ref.name)
    n = len(x)
    ok = np.zeros(n, bool)
    exact = np.zeros(n, bool)
    raised = np.zeros(n, bool)
    if form is None:
        return ok, exact, raised
    iv = intervals(fmt, np.asarray(rounded, dtype=np.float64))
    p = {k: v for k, v in params.items() if k in ref.params}
    kind, lo, hi = iv.kind.tolist(), iv.lo.tolist(), iv.hi.tolist()
    lo_in, hi_in, neg, bad = iv.lo_in.tolist(), iv.hi_in.tolist(), iv.neg.tolist(), iv.bad.tolist()
    xs = np.asarray(x, dtype=np.float64).tolist()
    old = ctx.prec
    try:
        for i, xv in enumerate(xs):
            if bad[i]:
                continue
            a = (kind[i], lo[i], hi[i], lo_in[i], hi_in[i], neg[i])
            e = form.exact(xv, **p) if form.exact is not None else None
            if e is not None:
                ok[i] = exact[i] = _exact_ok(fmt, e, *a)
                continue
            if form.arb is None:
                continue
            for j, prec in enumerate(precisions):
                ctx.prec = prec
                b = form.arb(arb(xv), **p)
                if _ball_ok(fmt, b, *a):
                    ok[i] = True
                    raised[i] = j > 0
                    break
                if b.is_finite() and b.rad() == 0:
                    break  # an exact ball: more bits change nothing
    finally:
        ctx.prec = old
    return ok, exact, raised


def certify_table(
    ref: Reference, fmt: Format, params: dict | None = None, workers: int = 1, progress=None
) -> TableResult:
    """Prove every entry of the oracle's table of ``ref`` in ``fmt`` (built or loaded from
    the cache); on success, record the certificate in the cache."""
    params = ref.with_defaults(params)
    table = oracle.table(ref, fmt, params)
    x = fmt.finite_values()
    if progress is not None and hasattr(progress, "start"):
        progress.start(f"certify {ref.name} {fmt.name}", len(x))
    ok, exact, raised = _run(ref, fmt, params, x, table.rounded, workers, progress)
    idx = np.flatnonzero(~ok)
    res = TableResult(
        ref.name,
        fmt.name,
        int(ok.sum()),
        len(x),
        int(exact.sum()),
        int(raised.sum()),
        [(float(x[i]), float(table.rounded[i])) for i in idx[:MAX_LISTED]],
        len(idx),
    )
    if not len(idx):
        res.digest = oracle.record_certificate(
            ref, fmt, params, table, {"certifier": CERTIFY_VERSION, "values": len(x), "max_prec": MAX_PREC}
        )
    return res


def _chunk(job, r):
    ref, fmt, params, x, rounded = job
    return certify_values(ref, fmt, params, x[r[0] : r[1]], rounded[r[0] : r[1]])


CHUNK = 4096


def _run(ref, fmt, params, x, rounded, workers, progress=None):
    from audit.measure.executors import run_chunks

    n = len(x)
    ranges = [(s, min(s + CHUNK, n)) for s in range(0, n, CHUNK)]
    parts = []
    for r, part in zip(ranges, run_chunks(_chunk, (ref, fmt, params, x, rounded), ranges, workers=workers)):
        parts.append(part)
        if progress is not None:
            progress(r[1] - r[0])
    if not parts:
        z = np.zeros(0, bool)
        return z, z, z
    return tuple(np.concatenate([p[k] for p in parts]) for k in range(3))


def default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, 2))


def run(references=None, formats=None, workers: int = 1, progress=None) -> list[TableResult]:
    """Certify every (reference, format) table asked for (default: all univariate
    references, every float format of 16 bits or fewer)."""
    from audit.errors import UnknownNameError

    refs = references or certified_references()
    fmts = formats or certified_formats()
    for name in refs:
        if name not in REFERENCES or REFERENCES[name].arity != 1:
            raise UnknownNameError(f"'{name}' is not a univariate reference")
        if name not in FORMULAS:
            raise UnknownNameError(f"no Arb formula for '{name}'")
    for f in fmts:
        if f not in certified_formats():
            raise UnknownNameError(f"'{f}' is not a float format of 16 bits or fewer")
    out = []
    for name in refs:
        for f in fmts:
            out.append(certify_table(REFERENCES[name], FORMATS[f], None, workers, progress))
    return out


def is_certified(ref: Reference, fmt: Format, params: dict | None = None) -> bool:
    """Whether the oracle's table (as loaded or built in this process) carries a
    certificate of this certifier, bound to its digest (checked when it was loaded)."""
    c = oracle.table(ref, fmt, params).certificate
    return c is not None and c["certifier"] == CERTIFY_VERSION and c["values"] == len(fmt.finite_values())


def uncertified_used_tables() -> list[tuple[str, str]]:
    """(key, message) for every oracle table this process used that is not certified (the
    gate's ``require_certified``); one entry if the cache is disabled (no table at all)."""
    if not oracle._cache_enabled():
        return [("oracle-tables", "the oracle cache is disabled (ACTAUDIT_NO_CACHE): nothing is certified")]
    out = []
    for ref, fmt, params in oracle.used_tables():
        if not is_certified(ref, fmt, params):
            p = "" if params == ref.with_defaults({}) else f" with parameters {params}"
            out.append(
                (
                    f"oracle-table {ref.name} {fmt.name}",
                    f"not certified{p} (run 'actaudit selftest --certify')",
                )
            )
    return out


def to_json(results: list[TableResult]) -> dict:
    return {
        "certified": [
            {"reference": r.reference, "format": r.format, "certified": r.certified, "total": r.total}
            for r in results
        ],
        "uncertified": [
            {"reference": r.reference, "format": r.format, "x": x, "table": repr(v)}
            for r in results
            for x, v in r.uncertified
        ],
    }


__all__ = ["run", "certify_table", "certify_values", "intervals", "FORMULAS", "TableResult", "to_json"]
