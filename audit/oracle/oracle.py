"""The oracle: correctly rounded reference values, decided exactly.

For each input x the oracle gives RN_F(f(x)) (the reference rounded to nearest,
ties to even, in format F) and f(x) itself as a double-double ``hi + lo``.

Where the reference has a float64 fast path and F has at most 24 bits of
precision, the fast value v is used unless the interval v(1 +- rel_err) +-
2**-1000 straddles a rounding boundary of F; those ambiguous inputs, and every
input of wider formats, are evaluated in mpmath with the precision raised until
the rounding is unambiguous.  Tables for every value of a format of 16 bits or
fewer are cached on disk, keyed by reference, parameters, format and
ORACLE_VERSION; a cache file that fails its checksum is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import mpmath as mp
import numpy as np

from audit.numbers import native
from audit.numbers.formats import FORMATS, Format
from audit.oracle.references import Reference

log = logging.getLogger(__name__)

ORACLE_VERSION = 11  # 6: signed zeros from the reference's sign; 7: fused references' signs;
#   8: no -0 in fnuz tables; 9: underflowed nonzero values keep a stand-in (zero_at);
#   10: every reference declares its exact zero set; 11: gelu_grad's side of 1 for x >= 2 from
#   its float64 split (fast_near), its deficit's stand-in where float64 underflows
FAST_ABS_TOL = 2.0**-1000
MIN_REL_ERR = 2.0**-50
GUARD_BITS = 12  # precision margin trusted of an mpmath evaluation
MAX_PREC = 4096  # beyond this an ambiguity is taken as an exact tie


@dataclass
class OracleValues:
    rounded: np.ndarray  # RN_F(f(x)) as float64
    hi: np.ndarray  # f(x) = hi + lo
    lo: np.ndarray
    n_mpmath: int  # inputs decided by mpmath
    # inputs whose rounding is certain but whose exact value lies within the fast path's
    # error of a power of two, on an unknown side: ulp_F(f) is then known only up to a
    # factor 2, which matters only where a result differs from RN_F(f); metrics settles
    # those few inputs with mpmath (see settle()).
    unsure: np.ndarray | None = None
    # a cached table's certificate (audit/measure/certify.py), bound to its digest; None if none
    certificate: dict | None = None

    def take(self, idx) -> OracleValues:
        return OracleValues(
            self.rounded[idx],
            self.hi[idx],
            self.lo[idx],
            self.n_mpmath,
            None if self.unsure is None else self.unsure[idx],
        )

    def copy(self) -> OracleValues:
        """take() at every input: copies of the arrays (no certificate, as take gives)."""
        return OracleValues(
            self.rounded.copy(),
            self.hi.copy(),
            self.lo.copy(),
            self.n_mpmath,
            None if self.unsure is None else self.unsure.copy(),
        )


# -------------------------------------------------------------------- mpmath
def exact_point(ref: Reference, x, fmt: Format, params: dict) -> tuple[float, float, float]:
    """(RN_F(f(x)), hi, lo) for one finite input (a float, or a tuple for a bivariate
    reference), by mpmath alone.

    The precision is doubled until both the rounding and the binade of f (which
    decides ulp_F(f)) are certain.  Where f lies within 2**-(p+120) of a power of two
    that it saturates onto (erf(100) = 1 - 1e-4346), the reference's ``near`` form
    f = P - g settles the side without that many bits.
    """
    args = x if isinstance(x, tuple) else (x,)
    margs = tuple(mp.mpf(a) for a in args)
    # a reference rounds its intermediates at the working precision: exp(-x^2 / 2) at
    # x = 1e38 loses 2 log2|x| bits of its argument's absolute accuracy (the exponent of
    # a result like 1e-(10^76)), so huge arguments get 2 log2|x| more bits, untrusted
    extra = 2 * max([0] + [math.frexp(float(a))[1] for a in args if math.isfinite(float(a))])
    prec = fmt.p + 40 + extra
    while True:
        with mp.workprec(prec):
            try:
                v = ref.mp(*margs, **params)
            except ZeroDivisionError:
                from audit.errors import BadParameterError

                raise BadParameterError(
                    f"{ref.name} is undefined at x = {args[0]!r} with "
                    f"parameters {params} (a division by zero)"
                ) from None
        if not mp.isfinite(v):  # NaN outside the domain, +-inf at a pole (1/0): exact
            return fmt.round_mpf(v), float(v), 0.0
        with mp.workprec(prec + 64):
            d = abs(v) * mp.ldexp(1, GUARD_BITS - (prec - extra))
            a, b = fmt.round_mpf(v - d), fmt.round_mpf(v + d)
            rounding_ok = a == b or (math.isnan(a) and math.isnan(b))
            binade_ok = d == 0 or abs(v) + d < fmt.smallest_normal or mp.frexp(v - d)[1] == mp.frexp(v + d)[1]
        if rounding_ok and binade_ok:
            break
        if ref.near is not None and prec - extra >= fmt.p + 160:
            with mp.workprec(prec):
                pg = ref.near(*margs, **params)
            if pg is not None and abs(pg[1]) <= abs(pg[0]) * mp.ldexp(1, -(fmt.p + 100)):
                # f = P - g with g far below every rounding and binade boundary of F except,
                # possibly, P itself: f rounds as P nudged towards -g
                P, g = pg
                with mp.workprec(prec + 64):
                    r = fmt.round_mpf(P - mp.sign(g) * abs(P) * mp.ldexp(1, -(fmt.p + 100)))
                return r, float(P), _residual(-g, 0.0, prec)
        if prec >= MAX_PREC:
            break
        prec *= 2
    r = a if rounding_ok else fmt.round_mpf(v)
    hi = float(v)
    return r, hi, _residual(v, hi, prec) if math.isfinite(hi) else 0.0


def _residual(v, hi: float, prec: int) -> float:
    """float(v - hi), keeping its sign even when it underflows float64 (it decides
    on which side of a power of two hi the exact value lies)."""
    with mp.workprec(prec + 64):
        diff = v - hi
    lo = float(diff)
    if lo == 0 and diff != 0:
        lo = math.copysign(5e-324, float(mp.sign(diff)))
    return lo


_MPMATH = threading.Lock()  # mpmath's working precision is global: one thread at a time

EXACT_DIGITS = 17  # significant digits of an exact value written as a decimal string


def exact_text(ref: Reference, x: float, params: dict, x2: float | None = None) -> str:
    """f(x) as a decimal string of EXACT_DIGITS significant digits (mpmath's nstr), for an
    exact value that float64 cannot hold (|f| below 2^-1075: gelu(-40) = -1.0097e-349;
    or a nonzero value that the fast path lost to underflow): the CSV's ``exact`` column
    writes it instead of a signed zero.  The precision is doubled until two evaluations
    agree to every written digit."""
    args = (x,) if x2 is None else (x, x2)
    extra = 2 * max([0] + [math.frexp(a)[1] for a in args if math.isfinite(a)])
    prec, last = 96 + extra, None
    with _MPMATH:
        while True:
            with mp.workprec(prec):
                v = ref.mp(*(mp.mpf(a) for a in args), **params)
                txt = mp.nstr(v, EXACT_DIGITS, min_fixed=1, max_fixed=0) if v != 0 else "0"
            if txt == last or prec >= MAX_PREC:
                return txt
            last, prec = txt, prec * 2


# the exact points this process has computed, per reference, format and parameters: the
# results of one sweep share their oracle, and so the few inputs each settles by mpmath (the
# first command's 26 results settled the same fp16 inputs 26 times); mpmath has no signed
# zero, so -0.0 and +0.0 are one point here too (exact_points gives zeros their sign after)
_POINTS: dict[tuple, dict] = {}
POINTS_KEPT = 1 << 16  # points kept per key (bounded: exhaustive fp32 sweeps)
POINT_KEYS_KEPT = 256  # keys (reference, format, parameters) kept: a long-lived process is bounded too


def _memo(ref: Reference, fmt, params: dict) -> dict | None:
    """The exact points kept for (ref, fmt, params): keyed by the table key and the mpmath
    function (a reference replaced under the same name misses); only for the registered
    element formats themselves (not a quantized code's rounding, nor another object of a
    registered name)."""
    if FORMATS.get(getattr(fmt, "name", None)) is not fmt:
        return None
    try:  # the parameters written out whole (no hash that two parameter sets could share)
        key = (ref.name, fmt.name, json.dumps(params, sort_keys=True), ORACLE_VERSION, ref.mp)
        if key not in _POINTS and len(_POINTS) >= POINT_KEYS_KEPT:
            return None
        return _POINTS.setdefault(key, {})
    except (TypeError, ValueError):  # (parameters JSON cannot write, an unhashable function)
        return None


def exact_points(
    ref: Reference, x: np.ndarray, fmt: Format, params: dict, x2: np.ndarray | None = None
) -> OracleValues:
    pts = np.asarray(x, dtype=np.float64).tolist()
    if x2 is not None:
        pts = list(zip(pts, np.asarray(x2, dtype=np.float64).tolist()))
    out = np.empty((3, len(pts)))
    memo = _memo(ref, fmt, params) if x2 is None else None
    with _MPMATH:  # (threaded Dask workers)
        for i, p in enumerate(pts):
            got = None if memo is None else memo.get(p)
            if got is None:
                got = exact_point(ref, p, fmt, params)
                if memo is not None and len(memo) < POINTS_KEPT:
                    memo[p] = got
            out[:, i] = got
    # mpmath has no signed zero: an exact zero (hi = lo = 0; a value below float64's range
    # keeps its sign in hi and lo), and an infinity at a zero input (1/-0 = -inf), take the
    # reference's sign, as every fast path does
    with np.errstate(invalid="ignore"):
        fix = np.flatnonzero(((out[1] == 0) & (out[2] == 0)) | np.isinf(out[1]))
    if len(fix):
        neg = zero_signbit(
            ref,
            np.asarray(x, dtype=np.float64)[fix],
            params,
            None if x2 is None else np.asarray(x2, dtype=np.float64)[fix],
        )
        sgn = np.where(neg, -1.0, 1.0)
        out[0, fix] = np.copysign(out[0, fix], sgn)
        out[1, fix] = np.copysign(out[1, fix], sgn)
        if not getattr(fmt, "neg_zero", True):  # (fnuz: no -0 in the format; the zero is +0)
            out[0, fix] += 0.0
    return OracleValues(out[0], out[1], out[2], len(pts))


def zero_signbit(ref: Reference, x: np.ndarray, params: dict, x2: np.ndarray | None = None) -> np.ndarray:
    """The sign bit of f(x) by the reference's ``sign`` (for ``exact`` references, the
    fast path's own IEEE sign): where f underflows float64, and at exact zeros."""
    fn = ref.sign if ref.sign is not None else ref.fast
    if fn is None:
        return np.zeros(len(x), bool)
    s = fn(x, **params) if x2 is None else fn(x, x2, **params)
    return np.signbit(np.broadcast_to(s, np.shape(x)))


def beyond_errors(
    ref: Reference, fmt: Format, x: np.ndarray, got: np.ndarray, params: dict, x2: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ULP error, absolute error, relative error) of finite results ``got`` whose exact
    value f (or error) exceeds float64's range, from f in mpmath: |r - f| / ulp_F(f),
    |r - f| (inf where it exceeds float64) and |r - f| / |f|, each rounded once to float64.
    ulp_F(f) = 2**(max(e, emin) - p + 1) with e = floor(log2 |f|), unbounded above.
    Where the reference gives the fractional part of log2|f| (exp), formats of at most 24
    bits need no mpmath: the figures follow from it alone (exhaustive fp32 sweeps of exp
    meet 2**30 such inputs)."""
    n = len(x)
    if ref.log2_frac is not None and x2 is None and fmt.max_finite < 2.0**960 and fmt.p <= 24:
        # |f| = 2**(e + frac) >= 2**1024 against |r| <= 2**128: |r - f| / ulp_F(f) =
        # 2**frac 2**(p-1) (1 -+ r/f), r/f below 2**-890: one float64 rounding; likewise
        # |r - f| / |f| rounds to 1 and |r - f| overflows float64
        frac = ref.log2_frac(np.asarray(x, dtype=np.float64), **params)
        return np.exp2(frac) * 2.0 ** (fmt.p - 1), np.full(n, np.inf), np.ones(n)
    out = np.empty((3, n))
    with _MPMATH:
        for i in range(n):
            args = (float(x[i]),) if x2 is None else (float(x[i]), float(x2[i]))
            extra = 2 * max([0] + [math.frexp(a)[1] for a in args])
            with mp.workprec(fmt.p + 80 + extra):
                f = ref.mp(*(mp.mpf(a) for a in args), **params)
                if not mp.isfinite(f):  # a pole (1/0): infinitely many ulps, relative error 1
                    out[:, i] = (math.inf, math.inf, 1.0)
                    continue
                d = abs(mp.mpf(float(got[i])) - f)
                e = mp.frexp(f)[1] - 1 if f != 0 else fmt.emin
                ulp = mp.ldexp(1, max(e, fmt.emin) - fmt.p + 1)
                out[0, i] = float(d / ulp)
                out[1, i] = float(d)
                out[2, i] = float(d / abs(f)) if f != 0 else (0.0 if d == 0 else math.inf)
    return out[0], out[1], out[2]


# ------------------------------------------------------------------ fast path
def fast_path_applies(ref: Reference, fmt: Format) -> bool:
    return ref.fast is not None and fmt.p <= 24 and fmt.emin >= -126


def fast_slack(ref: Reference, x: np.ndarray, v: np.ndarray, params: dict) -> np.ndarray:
    """The error bound of a fast value v = ref.fast(x) for a one-input reference, as the code
    and block audits take it: |v| times the reference's relative error (at least MIN_REL_ERR)
    plus FAST_ABS_TOL, widened by 2^-20 for the rounding of the bound's own operations (inf
    or NaN where v is; call it under np.errstate)."""
    rel = (
        max(ref.rel_err, MIN_REL_ERR)
        if ref.rel_err_at is None
        else np.maximum(ref.rel_err_at(x, **params), MIN_REL_ERR)
    )
    return (np.abs(v) * rel + FAST_ABS_TOL) * (1 + 2.0**-20)


def evaluate(
    ref: Reference, fmt: Format, x: np.ndarray, params: dict | None = None, x2: np.ndarray | None = None
) -> OracleValues:
    """Oracle values at finite inputs x (float64 array of values of ``fmt``); for a
    bivariate reference, at the pairs (x, x2)."""
    params = ref.with_defaults(params)
    x = np.asarray(x, dtype=np.float64)
    if x2 is None and fmt.enumerable and _cache_enabled():
        tbl = _table(ref, fmt, params)
        if _every_value(fmt, x):  # the table's own order (a whole-format sweep): copies, no lookup
            return tbl.copy()
        return tbl.take(_positions(fmt, x))
    return _compute(ref, fmt, x, params, x2)


def _every_value(fmt: Format, x: np.ndarray) -> bool:
    """x is fmt.finite_values() bit for bit (-0 and +0 told apart), in its order."""
    vals = fmt.finite_values_shared()
    return x.shape == vals.shape and np.array_equal(x.view(np.uint64), vals.view(np.uint64))


def _compute(
    ref: Reference, fmt: Format, x: np.ndarray, params: dict, x2: np.ndarray | None = None
) -> OracleValues:
    if not fast_path_applies(ref, fmt):
        return exact_points(ref, x, fmt, params, x2)
    v = ref.fast(x, **params) if x2 is None else ref.fast(x, x2, **params)
    undefined = None
    if ref.undefined is not None and x2 is None:
        undefined = np.flatnonzero(ref.undefined(x, **params))
        if len(undefined):  # f is not a real number there: NaN, exactly (no mpmath)
            v = v.copy()
            v[undefined] = 0.0
    if ref.exact:
        return OracleValues(fmt.round(v), v, np.zeros_like(v), 0, np.zeros(len(v), bool))
    with np.errstate(all="ignore"):
        # never trust a fast value to better than a few float64 ulps, so that a
        # value exactly on a rounding boundary (a tie) always goes to mpmath
        rel = (
            max(ref.rel_err, MIN_REL_ERR)
            if ref.rel_err_at is None or x2 is not None
            else np.maximum(ref.rel_err_at(x, **params), MIN_REL_ERR)
        )
        b = _fast_bounds_native(fmt, v, rel)
        if b is None:
            b = fast_bounds(fmt, v, rel)
        rounded, slack, amb, unsure, tiny = b.rounded, b.slack, b.amb, b.unsure, b.tiny
        # a NaN fast value is the fast path declining to vouch for that input; an infinite
        # one says that f exceeds float64's range, so overflows F (the fast-path contract)
        odd = np.flatnonzero(amb | ~np.isfinite(v)) if b.n_odd else _NONE
        if len(odd):
            vo = v[odd]
            lo_o, hi_o = fmt.round(vo - slack[odd]), fmt.round(vo + slack[odd])
            amb[odd] = (~((lo_o == hi_o) | (np.isnan(lo_o) & np.isnan(hi_o))) | np.isnan(vo)) & ~np.isinf(vo)
            unsure[odd[np.isinf(vo)]] = False
        # v within its error of zero (f underflows float64, or is 0): its sign is not
        # trusted (0 + -0 = +0); the reference's sign decides, else mpmath
        any_tiny = b.n_tiny > 0
        if any_tiny and ref.sign is None:
            amb |= tiny
            any_tiny = False
        unsure &= ~amb
    hi = v if not np.shares_memory(v, x) else v.copy()  # f(x) = hi + lo
    lo = np.zeros_like(v)
    if any_tiny:
        sgn = np.where(zero_signbit(ref, x, params, x2), -1.0, 1.0)
        np.copysign(rounded, sgn, out=rounded, where=tiny)
        np.copysign(hi, sgn, out=hi, where=tiny)
        if ref.zero_at is not None:  # nonzero values that underflowed: the stand-in
            gone = np.flatnonzero(tiny & (hi == 0))
            if len(gone):
                z = np.asarray(
                    ref.zero_at(x[gone], **params)
                    if x2 is None
                    else ref.zero_at(x[gone], np.asarray(x2)[gone], **params),
                    dtype=bool,
                )
                lo[gone[~z]] = sgn[gone[~z]] * 5e-324
        if not getattr(fmt, "neg_zero", True):  # (fnuz: no -0 in the format; the zero is +0)
            np.add(rounded, 0.0, out=rounded, where=tiny)
    if ref.fast_near is not None and x2 is None:
        _settle_near(ref, fmt, x, params, v, slack, unsure, hi, lo, rounded)
    if ref.fast_dd is not None and amb.any():
        _settle_dd(ref, fmt, x, params, amb, unsure, hi, lo, rounded, x2)
    if undefined is not None and len(undefined):
        amb[undefined] = unsure[undefined] = False
        rounded[undefined] = hi[undefined] = np.nan
        lo[undefined] = 0.0
    idx = np.flatnonzero(amb)
    if len(idx):
        ex = exact_points(ref, x[idx], fmt, params, None if x2 is None else x2[idx])
        rounded[idx], hi[idx], lo[idx] = ex.rounded, ex.hi, ex.lo
    return OracleValues(rounded, hi, lo, len(idx), unsure)


_NONE = np.zeros(0, np.int64)


def fast_bounds(fmt: Format, v: np.ndarray, rel) -> native.OracleFP32:
    """The rounding decision on fast values v with relative error rel (an array like v, or
    one number), in numpy: slack = |v| rel + 2**-1000; amb: the two ends of v +- slack round
    apart in F; rounded = RN_F(v); unsure: the binade of |v| +- slack is not certain; tiny:
    |v| <= slack (v finite).  n_odd is -1 (not counted) and n_tiny 1 or 0 (any)."""
    mag = np.abs(v)
    slack = mag * rel
    slack += FAST_ABS_TOL
    # the two ends of v +- slack round alike (compared as keys: float32 for fp32); one
    # float64 buffer holds each end in turn (v - slack, v + slack, mag - slack, mag + slack)
    end = np.subtract(v, slack)
    key = fmt.round_key(end)
    amb = key != fmt.round_key(np.add(v, slack, out=end))
    rounded = fmt.round(v)
    # near a power of two the binade of f (hence ulp_F(f)) is also uncertain
    key = _binade_key(fmt, np.subtract(mag, slack, out=end))
    unsure = key != _binade_key(fmt, np.add(mag, slack, out=end))
    del end, key
    tiny = mag <= slack  # (as masks: whole chunks of a function's tail can be tiny)
    tiny &= mag < np.inf
    return native.OracleFP32(rounded, slack, amb, unsure, tiny, -1, int(tiny.any()))


def _fast_bounds_native(fmt: Format, v: np.ndarray, rel) -> native.OracleFP32 | None:
    """fast_bounds by the compiled helper (audit/numbers/native.py), the same arrays bit for
    bit, where it is loaded and applies (fp32, a chunk of CHUNK_MIN inputs or more)."""
    loaded = native.for_fp32(fmt.name, v)
    return None if loaded is None else native.oracle_fp32(loaded, v, rel, FAST_ABS_TOL, fmt.emin)


def settle(
    ref: Reference,
    fmt: Format,
    ov: OracleValues,
    idx: np.ndarray,
    x: np.ndarray,
    params: dict,
    x2: np.ndarray | None = None,
) -> OracleValues:
    """A copy of ``ov`` whose inputs ``idx`` are decided by mpmath (hi, lo exact)."""
    ex = exact_points(ref, x[idx], fmt, params, None if x2 is None else x2[idx])
    hi, lo = ov.hi.copy(), ov.lo.copy()
    hi[idx], lo[idx] = ex.hi, ex.lo
    unsure = ov.unsure.copy()
    unsure[idx] = False
    return OracleValues(ov.rounded, hi, lo, ov.n_mpmath + len(idx), unsure)


def _settle_dd(ref, fmt, x, params, amb, unsure, hi, lo, rounded, x2=None):
    """Decide ambiguous inputs with the reference's double-double value T = h + l (+-err),
    where it applies; clears them in ``amb``.

    T is compared with the two rounding boundaries around r = RN_F(fl(h + l)) (the
    midpoints between r and its neighbours in F, float64 numbers): on which side of each
    T lies is the sign of (h - m) + l, certain when that exceeds err and its own
    rounding error.  An input whose T is within that margin of a boundary (a true tie)
    stays with mpmath."""
    idx = np.flatnonzero(amb)
    h, lw, err = ref.fast_dd(x[idx], **params) if x2 is None else ref.fast_dd(x[idx], x2[idx], **params)
    with np.errstate(all="ignore"):
        ok = np.isfinite(h) & np.isfinite(lw) & np.isfinite(err) & (np.abs(lw) <= np.abs(h) * 2.0**-20)
        idx, h, lw, err = idx[ok], h[ok], lw[ok], err[ok]
        s = h + lw
        r = fmt.round(s)
        o = fmt.ordinal(np.where(np.isfinite(r), r, 0.0))
        fin = np.isfinite(r) & (o > -fmt.max_ordinal) & (o < fmt.max_ordinal)
        below = fmt.from_ordinal(o - 1)
        above = fmt.from_ordinal(o + 1)
        decided = np.full(len(idx), True)
        out = r.copy()
        for m, step in (((r + below) / 2, below), ((r + above) / 2, above)):
            d = (h - m) + lw  # h - m: Sterbenz-exact, or tiny multiples of F's ulp
            margin = err + (np.abs(h - m) + np.abs(lw)) * 2.0**-50
            sure = np.abs(d) > margin
            decided &= sure
            cross = sure & ((d > 0) == (m > r))  # T beyond this boundary, away from r
            out = np.where(cross, step, out)
        decided &= fin
        sel = idx[decided]
        s, l2 = s[decided], (h - s + lw)[decided]  # fl(h + l) plus its remainder (|h| >> |l|)
        rounded[sel] = out[decided]
        hi[sel] = s
        lo[sel] = l2
        amb[sel] = False
        # s a power of two with T on an unknown side of it: ulp_F(T) unsure (rare)
        unsure[sel] = (np.frexp(s)[0] == np.copysign(0.5, s)) & (np.abs(l2) <= err[decided] * 2)


def _binade_key(fmt: Format, m: np.ndarray) -> np.ndarray:
    """A key equal for two magnitudes m exactly when max(floor(log2 m), emin) is (m <= 0
    counting as below emin): the biased float64 exponent field, clamped at emin's; the
    arithmetic shift makes negative m (sign bit set) negative, below the clamp."""
    k = np.right_shift(m.view(np.int64), 52)
    return np.maximum(k, fmt.emin + 1023, out=k)


def _settle_near(ref, fmt, x, params, v, slack, unsure, hi, lo, rounded):
    """Settle the side of a power of two P that f saturates onto (f = P - g, with g
    from the reference's fast_near) for inputs in ``unsure``; clears them there."""
    idx = np.flatnonzero(unsure)
    if not len(idx):
        return
    P, g = ref.fast_near(x[idx], **params)
    with np.errstate(all="ignore"):
        ok = (
            np.isfinite(P)
            & (np.frexp(P)[0] == np.copysign(0.5, P))  # P a power of two
            & (np.abs(g) <= slack[idx])
            & (np.abs(v[idx] - P) <= slack[idx])
        )
    sel = idx[ok]
    hi[sel] = P[ok]
    lo[sel] = -g[ok]
    rounded[sel] = fmt.round(P[ok])
    unsure[sel] = False


# --------------------------------------------------------------------- cache
_MEMO: dict[str, OracleValues] = {}


def _cache_enabled() -> bool:
    return os.environ.get("ACTAUDIT_NO_CACHE", "") in ("", "0")


def cache_dir() -> Path:
    env = os.environ.get("ACTAUDIT_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "actaudit"


def cache_key(ref: Reference, fmt: Format, params: dict) -> str:
    p = json.dumps(params, sort_keys=True)
    h = hashlib.sha256(p.encode()).hexdigest()[:12]
    return f"{ref.name}-{fmt.name}-{h}-o{ORACLE_VERSION}"


CACHE_SCHEMA = "actaudit.oracle-table/2"
SPOT_CHECKS = 24  # seeded entries of every loaded table re-derived by mpmath


def cache_descriptor(ref: Reference, fmt: Format, params: dict) -> str:
    """What a table claims to be, bound into its digest: a file copied from another
    reference, parameter set, format or oracle version does not verify."""
    return json.dumps(
        {
            "schema": CACHE_SCHEMA,
            "reference": ref.name,
            "params": params,
            "format": fmt.name,
            "oracle": ORACLE_VERSION,
        },
        sort_keys=True,
    )


_FIELDS = ("x", "rounded", "hi", "lo", "unsure", "n_mpmath")


def _digest(descriptor: str, arrs: dict) -> str:
    """SHA-256 of the descriptor and of every stored field (name, dtype, shape, bytes)."""
    h = hashlib.sha256(descriptor.encode())
    for k in _FIELDS:
        a = np.ascontiguousarray(arrs[k])
        h.update(f"|{k}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _spot_check(
    ref: Reference, fmt: Format, params: dict, x: np.ndarray, v: OracleValues, key: str
) -> str | None:
    """Re-derive a few seeded entries by mpmath alone; the first disagreement, or None.

    A digest proves only that a file was not damaged, not that its numbers are right:
    anyone who can write the cache can recompute it.  These entries (the same for a
    given key, chosen by SHA-256 words of it, plus both ends and the zeros) catch a
    table computed for another function or filled with a candidate's outputs."""
    n = len(x)
    # the seeded positions: 8-byte words of SHA-256(key, i) modulo n (neither numpy.random
    # nor np.unique: their imports cost the first command 0.05 s, numpy.ma with np.unique)
    words = (
        int.from_bytes(hashlib.sha256(f"{key}|{i}".encode()).digest()[:8], "little")
        for i in range(SPOT_CHECKS)
    )
    chosen = {0, n - 1, n // 2 - 1, n // 2, *(w % n for w in words)}
    idx = np.array(sorted(min(max(i, 0), n - 1) for i in chosen), dtype=np.int64)
    ex = exact_points(ref, x[idx], fmt, params)
    for j, i in enumerate(idx):
        a, b = float(v.rounded[i]), float(ex.rounded[j])
        same = a == b or (math.isnan(a) and math.isnan(b))  # (mpmath has no -0: zeros are one point)
        h, hm = float(v.hi[i]) + float(v.lo[i]), float(ex.hi[j]) + float(ex.lo[j])
        near = h == hm or (math.isnan(h) and math.isnan(hm)) or abs(h - hm) <= abs(hm) * 2.0**-30 + 2.0**-1000
        if not (same and near):
            return f"x = {float(x[i])!r}: table says {a!r} (exact {h!r}), mpmath {b!r} (exact {hm!r})"
    return None


def _positions(fmt: Format, x: np.ndarray) -> np.ndarray:
    """Index of each value of x in fmt.finite_values()."""
    table = _position_table(fmt.name)
    return table[fmt.to_bits(x).astype(np.int64)]


_POS: dict[str, np.ndarray] = {}


def _position_table(name: str) -> np.ndarray:
    if name not in _POS:
        fmt = FORMATS[name]
        vals = fmt.finite_values()
        t = np.full(1 << fmt.bits, -1, dtype=np.int64)
        t[fmt.to_bits(vals).astype(np.int64)] = np.arange(len(vals))
        _POS[name] = t
    return _POS[name]


def table(ref: Reference, fmt: Format, params: dict | None = None) -> OracleValues:
    """The whole table of ``ref`` over every finite value of ``fmt`` (16 bits or fewer), in
    the order of fmt.finite_values(): loaded from the cache, else computed and stored."""
    return _table(ref, fmt, ref.with_defaults(params))


_USED: dict[str, tuple] = {}  # key -> (reference, format, params) of every table used here


def used_tables() -> list[tuple]:
    """(reference, format, params) of every cached table this process has used."""
    return list(_USED.values())


def _table(ref: Reference, fmt: Format, params: dict) -> OracleValues:
    key = cache_key(ref, fmt, params)
    _USED.setdefault(key, (ref, fmt, dict(params)))
    if key in _MEMO:
        return _MEMO[key]
    x = fmt.finite_values()
    path = cache_dir() / f"{key}.npz"
    desc = cache_descriptor(ref, fmt, params)
    got = _load(path, x, desc)
    if got is not None:
        bad = _spot_check(ref, fmt, params, x, got, key)
        if bad is not None:
            log.warning("oracle cache %s disagrees with mpmath (%s); rebuilding", path, bad)
            got = None
    if got is None:
        got = _compute(ref, fmt, x, params)
        bad = _spot_check(ref, fmt, params, x, got, key)
        if bad is not None:  # the oracle itself disagrees with mpmath: decide nothing
            from audit.errors import ActauditError

            raise ActauditError(
                f"oracle self-check failed for {ref.name} in {fmt.name} with "
                f"parameters {params}: {bad} (please report this)"
            )
        _store(path, x, got, desc)
    _MEMO[key] = got
    return got


def _load(path: Path, x: np.ndarray, descriptor: str | None = None) -> OracleValues | None:
    """The table in ``path`` if it is whole and is the table it must be (``descriptor``
    and every field under its digest, shapes and dtypes right, x the format's values),
    else None.  Reads are bounded by the size a genuine table has.  (descriptor None:
    whatever the file claims to be, for inspection only.)"""
    from audit.errors import BadFileError
    from audit.io import load_npz

    if path.is_symlink():
        raise BadFileError(
            f"{path}: a symbolic link in the oracle cache (refused: cache files are actaudit's own; remove it)"
        )
    if not path.exists():
        return None
    limit = 40 * len(x) + (1 << 16)
    try:
        arrs = load_npz(
            path,
            limit,
            "oracle table",
            keys=set(_FIELDS) | {"digest", "descriptor", "certificate"},
            nofollow=True,
        )
        missing = (set(_FIELDS) | {"digest", "descriptor"}) - set(arrs)
        if "descriptor" in missing:  # a table of an older version: rebuilt without a word
            log.info("oracle cache %s has an older format; rebuilding", path)
            return None
        if missing:
            raise BadFileError(f"missing {sorted(missing)}")
        if descriptor is None:
            descriptor = str(arrs["descriptor"])
        ok = (
            arrs["descriptor"].shape == ()
            and arrs["descriptor"].dtype.kind == "U"
            and str(arrs["descriptor"]) == descriptor
            and arrs["digest"].shape == ()
            and arrs["digest"].dtype.kind == "U"
            and arrs["x"].shape == x.shape
            and arrs["x"].dtype == np.float64
            and np.array_equal(arrs["x"].view(np.uint64), x.view(np.uint64))
            and all(arrs[k].shape == x.shape and arrs[k].dtype == np.float64 for k in ("rounded", "hi", "lo"))
            and arrs["unsure"].shape == x.shape
            and arrs["unsure"].dtype == np.bool_
            and arrs["n_mpmath"].shape == ()
            and arrs["n_mpmath"].dtype == np.int64
            and 0 <= int(arrs["n_mpmath"]) <= len(x)
            and str(arrs["digest"]) == _digest(descriptor, arrs)
        )
    except Exception as exc:  # any unreadable file is a cache miss
        log.warning("oracle cache %s unreadable (%s); rebuilding", path, exc)
        return None
    if not ok:
        log.warning("oracle cache %s is corrupted or belongs to another table; rebuilding", path)
        return None
    cert = _certificate(arrs.get("certificate"), str(arrs["digest"]), path)
    return OracleValues(
        arrs["rounded"], arrs["hi"], arrs["lo"], int(arrs["n_mpmath"]), arrs["unsure"], certificate=cert
    )


CERTIFICATE_SCHEMA = "actaudit.certificate/1"
_CERT_KEYS = {"schema": str, "digest": str, "certifier": int, "values": int, "max_prec": int}


def _certificate(raw, digest: str, path: Path) -> dict | None:
    """A stored certificate if it is well formed and bound to this table's digest (a
    certificate of another table, or of this table before a change, is ignored)."""
    if raw is None:
        return None
    try:
        if raw.shape != () or raw.dtype.kind != "U" or len(str(raw)) > 4096:
            raise ValueError("not a short string")
        c = json.loads(str(raw))
        if not isinstance(c, dict) or set(c) != set(_CERT_KEYS):
            raise ValueError("unknown or missing keys")
        for k, t in _CERT_KEYS.items():
            if type(c[k]) is not t:
                raise ValueError(f"{k} is not {t.__name__}")
        if c["schema"] != CERTIFICATE_SCHEMA or c["digest"] != digest:
            raise ValueError("bound to another table")
    except (ValueError, TypeError) as exc:
        log.warning("oracle cache %s: certificate ignored (%s)", path, exc)
        return None
    return c


def record_certificate(ref: Reference, fmt: Format, params: dict, values: OracleValues, info: dict) -> str:
    """Store ``values`` (the table just certified) with a certificate bound to its digest;
    the digest.  In memory as well, where the cache cannot be written."""
    params = ref.with_defaults(params)
    key = cache_key(ref, fmt, params)
    desc = cache_descriptor(ref, fmt, params)
    x = fmt.finite_values()
    arrs = _arrays(x, values)
    digest = _digest(desc, arrs)
    cert = {"schema": CERTIFICATE_SCHEMA, "digest": digest, **info}
    stored = OracleValues(values.rounded, values.hi, values.lo, values.n_mpmath, values.unsure, cert)
    _store(cache_dir() / f"{key}.npz", x, stored, desc)
    _MEMO[key] = stored
    return digest


def _arrays(x: np.ndarray, v: OracleValues) -> dict:
    unsure = np.zeros(len(x), bool) if v.unsure is None else v.unsure
    return dict(x=x, rounded=v.rounded, hi=v.hi, lo=v.lo, unsure=unsure, n_mpmath=np.int64(v.n_mpmath))


def _store(path: Path, x: np.ndarray, v: OracleValues, descriptor: str) -> None:
    from audit.io import cache_file

    try:
        arrs = _arrays(x, v)
        extra = {} if v.certificate is None else {"certificate": np.str_(json.dumps(v.certificate))}
        with cache_file(path) as fh:  # (made whole, then renamed onto path; links refused)
            np.savez(
                fh,
                **arrs,
                **extra,
                descriptor=np.str_(descriptor),
                digest=np.str_(_digest(descriptor, arrs)),
            )
    except OSError as exc:  # a read-only cache directory must not stop a sweep
        log.warning("cannot write oracle cache %s (%s)", path, exc)
