"""Error metrics: per-input errors and their summary.

Definitions (the README states the same; this code follows them):

* ulp_F(y) = 2**(max(e, emin) - p + 1), e = floor(log2 |y|); ulp_F(0) is the
  smallest subnormal of F.
* ULP error of result r at input x: |r - f(x)| / ulp_F(f(x)), f(x) the exact
  value (not its rounding).  A correctly rounded result has ULP error <= 0.5
  (where r = RN_F(f(x)) the computed value is capped at 0.5, so that float64
  arithmetic on a value within 2**-53 of a midpoint cannot report 0.5000001).
* ULP distance: |ord(r) - ord(RN_F(f(x)))|, the number of steps between r and
  the correctly rounded result on the format's number line (+0 and -0 are one
  point; +-inf, or NaN in formats without infinities, is one step past the
  largest finite value).
* absolute error |r - f(x)|; relative error |r - f(x)| / |f(x)|.

Each input falls into one class:

* ``finite``: r is finite; all four metrics are computed.
* ``overflow_ok``: r is infinite (or NaN in E4M3FN) and equals RN_F(f(x)): the
  exact value overflows the format and r is its correct rounding.  In a saturating
  format (OCP MX FP6/FP4) overflow means |f(x)| >= max + ulp(max)/2, RN_F(f(x)) = +-max,
  and r = +-max is then ``overflow_ok`` ("saturated correctly").
* ``nan``: r is NaN although RN_F(f(x)) is a number.
* ``inf``: r is infinite although RN_F(f(x)) is finite, or has the other sign.
* ``overflow_miss``: r is finite although the exact value overflows the format
  (RN_F(f(x)) is +-inf, or NaN in E4M3FN): a finite result, counted apart
  (``overflow_miss``) and entering the averages and maxima with its ULP error,
  which is measured against the exact value even beyond float64's range.
* ``undefined``: f(x) is not a real number (log of a negative number): no error is
  measured; counted (``undefined``), and correctly rounded only where r is NaN.

NaN and inf results are counted, never folded into averages or maxima.  A zero
result for a nonzero exact value that the format can hold is a finite result
with a large ULP error, not a match.  No NaN is silently dropped by a reduction:
a NaN among finite-result errors (a defect upstream) makes the maximum NaN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from audit.numbers import native
from audit.numbers.formats import Format
from audit.oracle.oracle import OracleValues

FINITE, OVERFLOW_OK, NAN, INF, OVERFLOW_MISS, UNDEFINED = 0, 1, 2, 3, 4, 5
CLASS_NAMES = ("finite", "overflow_ok", "nan", "inf", "overflow_miss", "undefined")


def finite_result(cls: np.ndarray) -> np.ndarray:
    """Inputs whose result is finite: ``finite`` and ``overflow_miss``."""
    return (cls == FINITE) | (cls == OVERFLOW_MISS)


def _max(a: float, b: float) -> float:
    """max that propagates NaN whatever the order (Python's max(0.0, nan) is 0.0)."""
    return a if (a != a or a > b) else b


def _worse(a: float, b: float) -> bool:
    """a replaces the maximum b: a > b, or a NaN where b is not."""
    return a > b or (a != a and b == b)


EXACT_P99_LIMIT = 1 << 24  # errors kept in memory (128 MiB) for an exact p99 up to this count


@dataclass
class PointErrors:
    x: np.ndarray
    got: np.ndarray
    exact: np.ndarray  # hi of the exact value (hi + lo)
    exact_lo: np.ndarray
    rounded: np.ndarray  # RN_F(f(x))
    ulp_err: np.ndarray
    ulp_dist: np.ndarray
    abs_err: np.ndarray
    rel_err: np.ndarray
    cls: np.ndarray
    correct: np.ndarray
    x2: np.ndarray | None = None  # second argument of a gated unit
    failing: np.ndarray | None = None  # inputs with a failure finding, where the sweep found them

    def __len__(self):
        return len(self.x)


def _union(n: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The sorted union of two index arrays into range(n), as np.union1d gives it, by a mask
    (np.unique imports numpy.ma: 0.01 s of the first command)."""
    m = np.zeros(n, bool)
    m[a] = True
    m[b] = True
    return np.flatnonzero(m)


def zero_relative_error(got: np.ndarray, nonzero: np.ndarray) -> np.ndarray:
    """The relative error of results ``got`` where the exact value's float64 rounding is 0
    (the one rule every path applies, docs/concepts/exact-decisions.md): 0 for a zero result
    of an exact zero; exactly 1 for a zero result of a nonzero exact value below float64's
    range (|0 - f| / |f|); inf for a nonzero result (|r| / |f| > 2^1074 |r|: beyond
    float64, or undefined at an exact zero).  ``nonzero``: the exact value is not 0 (the
    reference's zero set, or the oracle's +-5e-324 stand-in)."""
    got = np.asarray(got, dtype=np.float64)
    return np.where(got == 0, np.where(nonzero, 1.0, 0.0), np.inf)


def relative_error(got: np.ndarray, f: np.ndarray, nonzero: np.ndarray) -> np.ndarray:
    """|r - f| / |f| for results r and the exact values' float64 roundings f, with the rule
    of zero_relative_error where f is 0 (r = f counts 0 elsewhere, also at infinities)."""
    got, f = np.asarray(got, dtype=np.float64), np.asarray(f, dtype=np.float64)
    with np.errstate(all="ignore"):
        rel = np.abs(got - f) / np.abs(f)
        rel = np.where(got == f, 0.0, rel)
        z = f == 0
        if z.any():
            rel = np.where(z, zero_relative_error(got, np.broadcast_to(nonzero, f.shape)), rel)
    return rel


def exact_ulp(fmt: Format, hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """ulp_F of the exact value hi + lo (hi may have rounded up onto a power of two)."""
    out = fmt.ulp(hi)
    if not lo.any():  # (a reduction: flatnonzero's scan costs 3 ns an input, most chunks have none)
        return out
    idx = np.flatnonzero(lo)  # lo is nonzero only where mpmath or a double-double decided
    if len(idx):
        h, lw = hi[idx], lo[idx]
        below = (np.sign(lw) != np.sign(h)) & (np.frexp(h)[0] == np.copysign(0.5, h))
        sel = idx[below]
        out[sel] = fmt.ulp(np.nextafter(hi[sel], 0))
    return out


def point_errors(x, got, oracle: OracleValues, fmt: Format, x2=None, settle=None, beyond=None) -> PointErrors:
    """Per-input errors.  ``settle(idx)`` returns oracle values with inputs idx decided
    exactly; it is called for the inputs whose exact value sits on an unknown side of a
    power of two (OracleValues.unsure) and whose result is not correctly rounded.
    ``beyond(idx, got)`` returns (ulp, abs, rel) errors computed from the exact value in
    mpmath (oracle.beyond_errors); it is called for finite results whose exact value or
    error exceeds float64's range (exp(712) = 1.07e309).  Without it those inputs get
    ULP error inf (unknown) and relative error 1 (|r| <= 2**960 against |f| >= 2**1024:
    1 - r/f rounds to 1), inf for fp64.

    Written for speed (it runs on every input of an exhaustive fp32 sweep): in-place
    operations, and the rare cases (non-finite results or exact values, zero exact
    values, results that are not correctly rounded) handled on their inputs only."""
    got = np.asarray(got, dtype=np.float64)
    rounded = oracle.rounded
    n = len(got)
    with np.errstate(all="ignore"):
        pw = _pointwise_native(fmt, got, oracle, settle)
        if pw is None:
            correct = correct_results(got, rounded)
            if oracle.unsure is not None and settle is not None:
                idx = np.flatnonzero(oracle.unsure & ~correct)
                if len(idx):
                    oracle = settle(idx)
            pw = pointwise(fmt, got, rounded, oracle.hi, oracle.lo, correct)
        else:
            correct = pw.correct
            if pw.n_settle:
                oracle = settle(np.flatnonzero(oracle.unsure & ~correct))
                pw = _pointwise_native(fmt, got, oracle, None)
                if pw is None:
                    pw = pointwise(fmt, got, rounded, oracle.hi, oracle.lo, correct)
        hi, lo = oracle.hi, oracle.lo
        abs_err, ulp_err, rel_err = pw.abs_err, pw.ulp_err, pw.rel_err
        cls = np.zeros(n, dtype=np.int8)
        # |got - hi - lo| finite everywhere: got and hi are (the common case, one check for
        # the two scans below); else the inputs where either is not
        all_finite = pw.n_nonfinite == 0
        notfin = _NONE if all_finite else np.flatnonzero(~np.isfinite(got))
        if len(notfin):
            g, c = got[notfin], correct[notfin]
            cls[notfin] = np.where(c, OVERFLOW_OK, np.where(np.isnan(g), NAN, INF))
        zero = np.flatnonzero(hi == 0) if pw.n_zero else _NONE
        if len(zero):
            # f = 0 exactly: 0 or inf; f nonzero below float64's range (hi = 0 and lo the
            # +-5e-324 stand-in) against a zero result: |0 - f| / |f| = 1
            rel_err[zero] = zero_relative_error(got[zero], lo[zero] != 0)
            # a zero result of such an f: |0 - f| and |0 - f| / ulp are below float64's
            # smallest subnormal, so their float64 roundings are 0 -- not the stand-in's
            # 5e-324 (nor 5e-324 / ulp, a denormal that no input has as its error)
            tiny = zero[got[zero] == 0]
            abs_err[tiny] = 0.0
            ulp_err[tiny] = 0.0
        # an exact value (or an error) beyond float64's range is still a finite real: its
        # figures come from mpmath, never inf/inf = NaN
        big = notfin if all_finite else np.flatnonzero(~np.isfinite(abs_err))
        if len(big):
            big = big[np.isfinite(got[big]) & ~np.isnan(hi[big])]
        if len(big):
            if beyond is not None:
                ulp_err[big], abs_err[big], rel_err[big] = beyond(big, got[big])
            else:  # unknown without the exact value: an upper bound, never NaN
                ulp_err[big] = abs_err[big] = np.inf
                rel_err[big] = 1.0 if fmt.max_finite < 2.0**960 else np.inf
        # RN_F(f) overflows (or f is NaN)
        over = np.flatnonzero(~np.isfinite(rounded)) if pw.n_over else _NONE
        und = over[:0]
        if len(over):
            undef = np.isnan(hi[over])
            und = over[undef]
            cls[und] = UNDEFINED
            over = over[~undef]
            cls[over[np.isfinite(got[over])]] = OVERFLOW_MISS
        dist = pw.dist if pw.dist is not None else ulp_distance(fmt, got, rounded, correct)
        if fmt.saturate:  # overflow in a saturating format: +-max where the exact value is beyond
            notfin = _union(n, notfin, saturated(fmt, got, hi, lo, correct))
            cls[notfin] = np.maximum(cls[notfin], OVERFLOW_OK)
        if len(notfin) or len(und):
            bad = _union(n, notfin[~finite_result(cls[notfin])], und)
            for a in (ulp_err, abs_err, rel_err):
                a[bad] = np.nan
            dist[bad] = np.where(cls[bad] == OVERFLOW_OK, 0, -1)
    return PointErrors(
        np.asarray(x, dtype=np.float64),
        got,
        hi,
        lo,
        rounded,
        ulp_err,
        dist,
        abs_err,
        rel_err,
        cls,
        correct,
        None if x2 is None else np.asarray(x2, dtype=np.float64),
    )


_NONE = np.zeros(0, np.int64)


def correct_results(got: np.ndarray, rounded: np.ndarray) -> np.ndarray:
    """r = RN_F(f(x)), NaN counting equal to NaN (where f is undefined)."""
    correct = got == rounded
    nan_got = np.isnan(got)
    if nan_got.any():
        correct |= nan_got & np.isnan(rounded)
    return correct


def pointwise(fmt: Format, got, rounded, hi, lo, correct) -> native.ErrorsFP32:
    """point_errors' errors at every input, in numpy, before its rare cases: |(r - hi) - lo|,
    its ULP error against ulp_F(hi + lo) (at most 0.5 where correct), its relative error
    against |hi|.  The counts that the rare cases test: non-finite absolute errors, and 1
    for hi == 0 and for a non-finite rounded (not counted: those scans are theirs); the
    distance is left to ulp_distance (None)."""
    abs_err = got - hi
    abs_err -= lo
    np.abs(abs_err, out=abs_err)
    n_nonfinite = 0 if bool(np.isfinite(abs_err).all()) else 1
    ulp_err = abs_err / exact_ulp(fmt, hi, lo)
    np.minimum(ulp_err, 0.5, out=ulp_err, where=correct)
    rel_err = abs_err / np.abs(hi)
    return native.ErrorsFP32(correct, abs_err, ulp_err, rel_err, None, -1, 0, n_nonfinite, 1, 1)  # type: ignore[arg-type]


def ulp_distance(fmt: Format, got, rounded, correct) -> np.ndarray:
    """|ord(r) - ord(RN_F(f))| at every input (0 where correct: equal ordinals, +-0 one point)."""
    n = len(got)
    n_wrong = n - int(np.count_nonzero(correct))
    if n_wrong > n // 8:  # many: over every input
        dist = _ordinals(fmt, got)
        dist -= _ordinals(fmt, rounded)
        np.abs(dist, out=dist)
    else:
        dist = np.zeros(n, dtype=np.int64)
        if n_wrong:
            wrong = np.flatnonzero(~correct)
            dist[wrong] = np.abs(_ordinals(fmt, got[wrong]) - _ordinals(fmt, rounded[wrong]))
    return dist


def _pointwise_native(fmt: Format, got, oracle: OracleValues, settle) -> native.ErrorsFP32 | None:
    """correct_results, pointwise and ulp_distance in one pass of the compiled helper
    (audit/numbers/native.py), the same arrays bit for bit, where it is loaded and applies
    (fp32, a chunk of CHUNK_MIN inputs or more); n_settle counts the unsure inputs that are
    not correctly rounded (where settle is given)."""
    loaded = native.for_fp32(fmt.name, got)
    if loaded is None:
        return None
    unsure = oracle.unsure if settle is not None else None
    return native.errors_fp32(
        loaded,
        got,
        oracle.rounded,
        oracle.hi,
        oracle.lo,
        unsure,
        fmt.smallest_normal,
        math.ldexp(1.0, 1 - fmt.p),
    )


def saturated(fmt: Format, got, hi, lo, correct) -> np.ndarray:
    """Indices of correctly saturated results in a saturating format (OCP MX FP6/FP4):
    r = +-max_finite = RN_F(f(x)) where |f(x)| >= the overflow threshold (max + half an
    ulp of max; at the threshold itself the tie rounds away from max's odd significand),
    i.e. where a format with a wider exponent range would round beyond max.  These are the
    format's ``overflow_ok`` results: counted, kept out of averages and maxima."""
    m, thr = fmt.max_finite, fmt.overflow_threshold
    cand = np.flatnonzero(correct & (np.abs(got) == m))
    if not len(cand):
        return cand
    h, lw = np.abs(hi[cand]), lo[cand] * np.sign(hi[cand])
    return cand[(h > thr) | ((h == thr) & (lw >= 0))]


def _ordinals(fmt: Format, v: np.ndarray) -> np.ndarray:
    """Ordinals with +-inf, and NaN (E4M3FN's overflow value), one step past the largest
    finite value: in every format here the bits of inf (or of E4M3FN's NaN) are those of
    the largest finite value plus one."""
    nan = np.isnan(v)
    if nan.any():
        v = np.where(nan, np.inf, v)
    with np.errstate(all="ignore"):
        return fmt.ordinal(v)


HIST_SHIFT = 44  # p99 histogram bins: the top 20 bits of an error's float64 pattern (errors
# are >= 0: sign bit 0): exponent and 8 significand bits, bins of 2**-8 relative width
INF_KEY = 0x7FF0000000000000 >> HIST_SHIFT  # the bin of inf; NaN bins lie above it


def key_histogram(u: np.ndarray) -> list[tuple[int, int]]:
    """(key, count) of the p99 histogram's keys of errors u (their float64 bits >> HIST_SHIFT;
    u >= 0: the sign bit is clear), ascending, the zero key first and only if any."""
    keys = u.view(np.int64) >> HIST_SHIFT
    zero = keys == 0
    nzero = int(np.count_nonzero(zero))
    if nzero == len(u):
        return [(0, nzero)]
    # a chunk's nonzero errors span few binades: count them in a short array from their
    # smallest key (zeros, common where results are exact, are counted apart)
    k0 = int(keys.min(where=~zero, initial=np.iinfo(np.int64).max))
    keys[zero] = k0
    keys -= k0
    counts = np.bincount(keys)
    counts[0] -= nzero
    nz = np.flatnonzero(counts)
    return ([(0, nzero)] if nzero else []) + list(zip((nz + k0).tolist(), counts[nz].tolist()))


# the fields of a Summary's state (Summary.state, Summary.from_state): its public fields, in order
STATE_FIELDS = (
    "count",
    "finite",
    "correct",
    "nan_count",
    "inf_count",
    "overflow_ok",
    "overflow_miss",
    "undefined",
    "max_ulp",
    "worst",
    "max_abs",
    "max_rel",
    "max_ulp_distance",
    "exact_p99",
)


@dataclass
class Summary:
    """Statistics over inputs, mergeable chunk by chunk (merged in input order).

    exact_p99: keep every error for an exact p99 (sweeps of at most EXACT_P99_LIMIT
    inputs), else count them in a histogram.  The mode is fixed per sweep, so serial,
    parallel and resumed runs merge the same per-chunk data into the same numbers.
    """

    count: int = 0
    finite: int = 0
    correct: int = 0
    nan_count: int = 0
    inf_count: int = 0
    overflow_ok: int = 0
    overflow_miss: int = 0
    undefined: int = 0
    max_ulp: float = 0.0
    worst: dict | None = None
    max_abs: float = 0.0
    max_rel: float = 0.0
    max_ulp_distance: int = 0
    exact_p99: bool = True
    _sums: list = field(default_factory=list, repr=False)
    _errs: list = field(default_factory=list, repr=False)
    _hist: dict = field(default_factory=dict, repr=False)
    _kept: int = 0

    def add(self, e: PointErrors, fmt: Format) -> None:
        n = len(e)
        self.count += n
        # (every result finite, class 0: the common case, without bincount's int8 -> intp copy)
        per_class = np.bincount(e.cls, minlength=6) if e.cls.any() else np.array([n, 0, 0, 0, 0, 0])
        nf = int(per_class[FINITE] + per_class[OVERFLOW_MISS])
        self.finite += nf
        self.correct += int(np.count_nonzero(e.correct))
        self.nan_count += int(per_class[NAN])
        self.inf_count += int(per_class[INF])
        self.overflow_ok += int(per_class[OVERFLOW_OK])
        self.overflow_miss += int(per_class[OVERFLOW_MISS])
        self.undefined += int(per_class[UNDEFINED])
        if nf == 0:
            return
        if nf == n:  # the common case: no masking copies
            u, a, r, d = e.ulp_err, e.abs_err, e.rel_err, e.ulp_dist
            pos = None
        else:
            pos = np.flatnonzero(finite_result(e.cls))
            u, a, r, d = e.ulp_err[pos], e.abs_err[pos], e.rel_err[pos], e.ulp_dist[pos]
        i = int(np.argmax(u))  # the first NaN, if any (argmax propagates NaN)
        if self.worst is None or _worse(float(u[i]), self.max_ulp):
            j = i if pos is None else int(pos[i])
            self.max_ulp = float(u[i])
            self.worst = {
                "x": float(e.x[j]),
                "x_hex": fmt.hex(float(e.x[j])),
                "got": float(e.got[j]),
                "exact": float(e.exact[j]),
                "exact_lo": float(e.exact_lo[j]),
                "rounded": float(e.rounded[j]),
            }
            if e.x2 is not None:
                self.worst["b"] = float(e.x2[j])
                self.worst["b_hex"] = fmt.hex(float(e.x2[j]))
        self.max_abs = _max(float(a.max()), self.max_abs)  # numpy's max propagates NaN
        self.max_rel = _max(float(r.max()), self.max_rel)
        self.max_ulp_distance = max(self.max_ulp_distance, int(d.max()))
        self._sums.append(float(np.sum(u)))
        if self.exact_p99 and self._kept + len(u) <= EXACT_P99_LIMIT:
            self._errs.append(u.copy() if pos is None else u)
            self._kept += len(u)
        else:
            self._to_hist()
            self._bin(u)

    def _to_hist(self) -> None:
        if self.exact_p99:  # more errors than memory allows: a histogram from here on
            for a in self._errs:
                self._bin(a)
            self._errs, self._kept, self.exact_p99 = [], 0, False

    def _bin(self, u: np.ndarray) -> None:
        if not len(u):
            return
        loaded = native.lib()
        if loaded is not None and len(u) >= native.CHUNK_MIN:  # (the compiled helper: two passes)
            items = native.key_histogram(loaded, u, HIST_SHIFT)
            if items is not None:
                self._add_hist(items)
                return
        self._add_hist(key_histogram(u))

    def _add_hist(self, items) -> None:
        h = self._hist
        for k, c in items:
            h[k] = h.get(k, 0) + c

    def merge(self, o: Summary) -> None:
        """Fold in the summary of the next chunk (chunks merged in input order)."""
        self.count += o.count
        self.finite += o.finite
        self.correct += o.correct
        self.nan_count += o.nan_count
        self.inf_count += o.inf_count
        self.overflow_ok += o.overflow_ok
        self.overflow_miss += o.overflow_miss
        self.undefined += o.undefined
        if o.worst is not None and (self.worst is None or _worse(o.max_ulp, self.max_ulp)):
            self.max_ulp, self.worst = o.max_ulp, o.worst
        self.max_abs = _max(o.max_abs, self.max_abs)
        self.max_rel = _max(o.max_rel, self.max_rel)
        self.max_ulp_distance = max(self.max_ulp_distance, o.max_ulp_distance)
        self._sums.extend(o._sums)
        if o.exact_p99 and self.exact_p99 and self._kept + o._kept <= EXACT_P99_LIMIT:
            self._errs.extend(o._errs)
            self._kept += o._kept
            return
        self._to_hist()
        for a in o._errs:
            self._bin(a)
        self._add_hist(o._hist.items())

    # ------------------------------------------------------------ state
    def state(self) -> tuple[dict, list[np.ndarray]]:
        """(JSON-able fields, error arrays) from which ``from_state`` rebuilds this summary
        exactly (floats round-trip through JSON's shortest repr)."""
        d = {k: getattr(self, k) for k in STATE_FIELDS}
        d["sums"] = list(self._sums)
        d["hist"] = [[k, c] for k, c in sorted(self._hist.items())]
        return d, list(self._errs)

    @classmethod
    def from_state(cls, d: dict, errs: list[np.ndarray]) -> Summary:
        s = cls(**{k: d[k] for k in STATE_FIELDS})
        s._sums = [float(v) for v in d["sums"]]
        s._hist = {int(k): int(c) for k, c in d["hist"]}
        s._errs = [np.asarray(a, dtype=np.float64) for a in errs]
        s._kept = sum(len(a) for a in s._errs)
        return s

    @property
    def mean_ulp(self) -> float:
        if not self.finite:
            return math.nan
        try:
            return math.fsum(self._sums) / self.finite
        except OverflowError:  # a sum beyond float64 of finite terms: scaled by 2^-600 (exact but
            # for terms below 2^-474, far under the sum's last bit), the mean itself in range
            return math.fsum(v * 2.0**-600 for v in self._sums) / self.finite * 2.0**600

    @property
    def p99_exact(self) -> bool:
        return self.exact_p99

    @property
    def p99_ulp(self) -> float:
        """Smallest e with at least 99% of finite-result inputs at ULP error <= e.

        Exact while all errors fit in memory; beyond, the upper edge of a bin of
        relative width 2**-8 (an upper bound; ``p99_exact`` tells which).
        """
        if not self.finite:
            return math.nan
        k = math.ceil(0.99 * self.finite) - 1
        if self.exact_p99:
            key = (self.finite, len(self._errs))
            if getattr(self, "_p99", (None,))[0] != key:  # computed once per state
                allu = np.concatenate(self._errs)
                allu.partition(k)  # in place: no second copy of up to EXACT_P99_LIMIT errors
                self._p99 = (key, float(allu[k]))
            return self._p99[1]
        seen = 0
        for key in sorted(self._hist):
            seen += self._hist[key]
            if seen > k:
                if key >= INF_KEY:  # inf (or NaN: sorted last) is its own bin, no upper edge
                    return float(np.array([key << HIST_SHIFT], dtype=np.uint64).view(np.float64)[0])
                return float(np.array([(key + 1) << HIST_SHIFT], dtype=np.uint64).view(np.float64)[0])
        return self.max_ulp

    @property
    def correctly_rounded_fraction(self) -> float:
        return self.correct / self.count if self.count else math.nan
