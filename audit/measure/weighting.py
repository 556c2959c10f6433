"""Figures weighted by an input distribution: the errors a model sees.

``--distribution normal:std=S[,mean=M] | uniform:lo=A,hi=B | laplace:scale=S[,mean=M] | npy:PATH``
gives each swept input x its *mass*: the probability that a draw X of the distribution,
rounded to the input format F (round to nearest, ties to even), gives x.

* Rounding interval of x: the reals that RN_F sends to x.  Its edges are the midpoints
  between x and its neighbours on F's number line (exact in float64 for every format of
  at most 32 bits); which side a midpoint belongs to (the neighbour with the even
  significand) has probability zero under a continuous distribution, and for ``npy:``
  samples RN_F itself decides.  +0 and -0 are counted once: a draw in (-s/2, 0) rounds to
  -0 and one in [0, s/2] to +0 (s the smallest subnormal); in formats without -0 (fnuz)
  +0 takes the whole [-s/2, s/2].
* Beyond the largest finite value: the interval of +max ends at the overflow threshold
  max + ulp(max)/2; the mass beyond goes where F rounds it: +-inf (IEEE formats), NaN
  (E4M3FN, fnuz), or +-max in saturating formats (OCP MX FP6/FP4), whose outermost
  intervals then extend to infinity.  Infinite and NaN inputs are not swept inputs: that
  mass is reported (``mass.overflow``), outside the sweep.
* Exact masses for normal, uniform and laplace in float64: the normal one from scipy's
  ``log_ndtr`` on the tail side of each interval, ``mass = S(a) * -expm1(log S(b) - log S(a))``
  (S the survival function of the side away from the mean), and ``erf`` differences near the
  mean, so that narrow intervals far in the tails keep their relative precision (a
  subtraction of two nearby CDF values would lose it); laplace alike with ``expm1``.
  Masses below float64's range (beyond ~38 standard deviations) are 0.
* ``npy:PATH``: the empirical frequency: (number of the file's samples whose rounding to F
  is x) / (number of samples).  The file is read through the bounded reader
  (audit/io.py: size, header, dtype checked before anything is allocated); non-finite
  samples are counted (``mass.nonfinite``) and are part of the mass outside the sweep.

Weighted figures are probabilities *given that the draw rounds to a swept input*
(divided by ``mass.swept``); the mass outside (below the first swept input, above the
last, overflow, non-finite samples) is reported beside them.  Result classes follow
audit/measure/metrics.py: ``nan``, ``inf``, ``overflow_ok``, ``undefined`` are the probabilities
of those classes, ``finite`` the probability of a finite result (``finite`` and
``overflow_miss``), ``underflow`` that of a zero result where RN_F(f(x)) is nonzero (a
flush).  ``mean_ulp``, ``mean_abs``, ``mean_rel`` are means over finite results
(sum m*e / sum m over them): NaN and inf results never enter them (their probabilities
say how much mass they hold), and a NaN error of a finite result (a defect upstream) makes
them NaN, never dropped.  Inputs of mass 0 do not enter.

Weighted quantile ``p99_ulp`` (``p999_ulp``): the smallest e such that the mass of
finite-result inputs with ULP error <= e is at least 99/100 (999/1000) of the mass of
finite-result inputs; decided exactly: from float sums where their rounding error bound
decides the comparison with q, else from exact integer sums of the masses (each a multiple
of a power of two) compared with q in integer arithmetic.

Narrow rounding intervals (subnormals near a mean that is not 0, the fine binades of a
wide format) integrate the normal density by its Taylor series around the interval's
centre, so that no CDF difference loses their relative precision.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from audit.errors import BadFileError, BadOptionError
from audit.measure.metrics import FINITE, INF, NAN, OVERFLOW_MISS, OVERFLOW_OK, UNDEFINED, PointErrors
from audit.numbers.formats import Format

NPY_LIMIT = 1 << 28  # bytes of data of an npy: sample (32 Mi float64 values)
QUANTILES = (("p99_ulp", 99, 100), ("p999_ulp", 999, 1000))
FIGURES = (  # the weighted figures a gate or a ranking may name (JSON keys of the section)
    "mean_ulp",
    "p99_ulp",
    "p999_ulp",
    "correctly_rounded",
    "nan",
    "inf",
    "underflow",
    "mean_abs",
    "mean_rel",
)


@dataclass(frozen=True)
class Distribution:
    """A parsed --distribution.  ``label`` is its canonical spelling (every parameter
    written, in a fixed order, floats in their shortest repr): what JSON, baselines and
    reports name it by."""

    kind: str  # normal, uniform, laplace, npy
    a: float = 0.0  # normal/laplace: mean; uniform: lo
    b: float = 1.0  # normal: std; laplace: scale; uniform: hi
    path: str = ""
    label: str = ""
    # npy: the samples rounded to the input format, as sorted unique bit patterns and counts
    fmt_name: str = ""
    bits: np.ndarray | None = field(default=None, repr=False, compare=False)
    counts: np.ndarray | None = field(default=None, repr=False, compare=False)
    total: int = 0  # samples in the file
    nonfinite: dict = field(default_factory=dict, compare=False)  # nan / inf / -inf -> count
    overflow_count: int = 0  # finite samples that round beyond the format (to inf/NaN)
    overflow_below: int = 0  # of those, the negative ones (beyond -max)
    digest: str = ""  # npy: SHA-256 of the sample as read (dtype, shape, bytes), set by bind

    @property
    def identity(self) -> str:
        """What results weighted by it are bound to: its spelling, and for npy: the sample's
        digest, never its path (the same file read from another directory is the same)."""
        return f"npy:sha256:{self.digest}" if self.kind == "npy" and self.digest else self.label


def _kv(spec: str, rest: str) -> dict:
    kv: dict[str, float] = {}
    for part in rest.split(","):
        if not part.strip():
            continue
        k, eq, v = part.partition("=")
        k = k.strip().lower()
        try:
            val = float(v)
        except ValueError:
            val = math.nan
        if not eq or not math.isfinite(val) or abs(val) > 1e300 or k in kv:
            raise BadOptionError(f"--distribution '{spec}': '{part}' is not NAME=NUMBER (finite, given once)")
        kv[k] = val
    return kv


def parse(spec: str) -> Distribution:
    """A Distribution from its spelling; npy: files are read by :func:`bind`."""
    if not isinstance(spec, str) or not spec.strip() or len(spec) > 4096:
        raise BadOptionError(f"--distribution must be a non-empty string, got {spec!r}")
    kind, _, rest = spec.strip().partition(":")
    kind = kind.strip().lower()
    usage = "normal:std=S[,mean=M], uniform:lo=A,hi=B, laplace:scale=S[,mean=M] or npy:PATH"
    if kind == "npy":
        if not rest.strip():
            raise BadOptionError("--distribution npy: needs a file, npy:PATH")
        return Distribution("npy", path=rest.strip(), label=f"npy:{rest.strip()}")
    if kind not in ("normal", "uniform", "laplace"):
        raise BadOptionError(f"--distribution: unknown distribution '{kind}' ({usage})")
    kv = _kv(spec, rest)
    if kind == "uniform":
        if set(kv) != {"lo", "hi"} or not kv["lo"] < kv["hi"]:
            raise BadOptionError(
                f"--distribution '{spec}': uniform takes lo < hi: uniform:lo=A,hi=B (e.g. uniform:lo=-4,hi=4)"
            )
        return Distribution("uniform", kv["lo"], kv["hi"], label=f"uniform:lo={kv['lo']!r},hi={kv['hi']!r}")
    width = "std" if kind == "normal" else "scale"
    if set(kv) - {width, "mean"} or not kv.get(width, 1.0) > 0:
        raise BadOptionError(
            f"--distribution '{spec}': {kind} takes {width} > 0 (1 when left out) and optionally "
            f"mean: {kind}:{width}=S[,mean=M] (e.g. {kind}:{width}=2,mean=0.5)"
        )
    m, s = kv.get("mean", 0.0) + 0.0, kv.get(width, 1.0)  # the --blocks default: normal:std=1
    return Distribution(kind, m, s, label=f"{kind}:{width}={s!r}" + (f",mean={m!r}" if m else ""))


def bind(d: Distribution, fmt: Format) -> Distribution:
    """The distribution ready for inputs of ``fmt``: an npy: sample read (bounded reader,
    numbers only), rounded to fmt and counted."""
    if d.kind != "npy" or d.fmt_name == fmt.name:
        return d
    from audit.io import load_npy

    a = load_npy(d.path, NPY_LIMIT, "distribution sample")
    if a.dtype.kind not in "iuf":
        raise BadFileError(f"{d.path}: dtype {a.dtype}: a distribution sample holds real numbers")
    import hashlib

    h = hashlib.sha256(f"{a.dtype.str}{a.shape}".encode())
    h.update(np.ascontiguousarray(a).tobytes())
    a = np.asarray(a, dtype=np.float64).ravel()
    if a.size == 0:
        raise BadFileError(f"{d.path}: no samples (zero inputs prove nothing)")
    isfin = np.isfinite(a)
    nonfinite = {"nan": 0, "inf": 0, "-inf": 0}
    fin = a
    if not isfin.all():
        nonfinite = {
            "nan": int(np.count_nonzero(np.isnan(a))),
            "inf": int(np.count_nonzero(a == math.inf)),
            "-inf": int(np.count_nonzero(a == -math.inf)),
        }
        fin = a[isfin]
    if fin.size == 0:
        raise BadFileError(f"{d.path}: no finite samples ({a.size} non-finite)")
    with np.errstate(all="ignore"):
        r = fmt.round(fin)
    ok = np.isfinite(r)
    rb = fmt.to_bits(r if ok.all() else r[ok])
    if fmt.enumerable:  # counts per bit pattern: no sort of the sample
        counts = np.bincount(rb.astype(np.intp), minlength=1 << fmt.bits)
        bits = np.flatnonzero(counts).astype(np.uint64)
        counts = counts[bits.astype(np.intp)]
    else:
        bits, counts = np.unique(rb.astype(np.uint64), return_counts=True)
    return Distribution(
        "npy",
        path=d.path,
        label=d.label,
        fmt_name=fmt.name,
        bits=bits,
        counts=counts.astype(np.int64),
        total=int(a.size),
        nonfinite=nonfinite,
        overflow_count=int(np.count_nonzero(~ok)),
        digest=h.hexdigest(),
        overflow_below=int(np.count_nonzero(~ok & (fin < 0))),
    )


# ------------------------------------------------------------------ masses
def edges(fmt: Format, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) edges of the rounding intervals of the finite values x of fmt (see the
    module's text: +-0 split at 0, the outermost ones at the overflow threshold or, in a
    saturating format, at infinity)."""
    x = np.asarray(x, dtype=np.float64)
    o = fmt.ordinal(x)
    with np.errstate(all="ignore"):
        below = fmt.from_ordinal(o - 1)
        above = fmt.from_ordinal(o + 1)
        lo = (x + below) * 0.5
        hi = (x + above) * 0.5
    top = fmt.max_ordinal
    far = math.inf if fmt.saturate else fmt.overflow_threshold
    hi = np.where(o >= top, far, hi)
    lo = np.where(o <= -top, -far, lo)
    zero = x == 0
    if zero.any():
        s2 = fmt.smallest_subnormal * 0.5
        neg = np.signbit(x) & fmt.neg_zero
        lo = np.where(zero, np.where(neg, -s2, 0.0 if fmt.neg_zero else -s2), lo)
        hi = np.where(zero, np.where(neg, 0.0, s2), hi)
    return lo, hi


def _normal_tail(z: np.ndarray) -> np.ndarray:
    """log P(Z > z) for a standard normal Z."""
    from scipy.special import log_ndtr

    return log_ndtr(-z)


def interval_mass(d: Distribution, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """P(lo < X < hi) for a continuous distribution, elementwise (lo <= hi, infinities
    allowed), with the relative precision of float64 in the tails."""
    lo = np.asarray(lo, dtype=np.float64)
    hi = np.asarray(hi, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return np.where(hi > lo, _interval_mass(d, lo, hi), 0.0)  # (-inf, -inf): empty, not NaN


def _interval_mass(d: Distribution, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    out = np.zeros(np.broadcast(lo, hi).shape)
    with np.errstate(all="ignore"):
        if d.kind == "uniform":
            a, b = np.maximum(lo, d.a), np.minimum(hi, d.b)
            w = d.b * 0.5 - d.a * 0.5  # (halves: no overflow for wide supports)
            return np.where(b > a, (b * 0.5 - a * 0.5) / w, 0.0)
        za, zb = (lo - d.a) / d.b, (hi - d.a) / d.b
        right = za >= 0  # both edges on the upper side: tail P(X > z)
        left = zb <= 0  # both on the lower side: mirror
        mid = ~right & ~left
        if d.kind == "normal":
            from scipy.special import erf

            # tails: S(a) - S(b) = S(a) * (1 - S(b)/S(a)) in log space; near the mean the
            # erf difference is as precise (erf is precise near 0) and cheaper
            near = (np.maximum(np.abs(za), np.abs(zb)) <= 1.0) | mid
            r2 = math.sqrt(0.5)
            out = np.where(near, 0.5 * (erf(zb * r2) - erf(za * r2)), out)
            for side, u, v in ((right & ~near, za, zb), (left & ~near, -zb, -za)):
                if side.any():
                    la, lb = _normal_tail(u[side]), _normal_tail(v[side])
                    out[side] = np.exp(la) * -np.expm1(lb - la)
            # narrow intervals (subnormals near a mean that is not 0, every fine binade):
            # the integral of the density over [c - h, c + h] as its Taylor series,
            # 2 h phi(c) (1 + phi''/phi h^2/3! + phi''''/phi h^4/5! + phi^(6)/phi h^6/7!), whose
            # next term is below 1e-21 where h * max(1, |c|) <= 1e-2; no CDF differences
            h = 0.5 * ((hi - lo) / d.b)
            c = ((lo * 0.5 + hi * 0.5) - d.a) / d.b
            narrow = np.isfinite(h) & (h * np.maximum(1.0, np.abs(c)) <= 1e-2)
            if narrow.any():
                hn, cn = h[narrow], c[narrow]
                c2, h2 = cn * cn, hn * hn
                series = 1 + h2 * (
                    (c2 - 1) / 6
                    + h2 * ((c2 * c2 - 6 * c2 + 3) / 120 + h2 * (((c2 - 15) * c2 + 45) * c2 - 15) / 5040)
                )
                out[narrow] = 2 * hn * np.exp(-0.5 * c2) / math.sqrt(2 * math.pi) * series
            return np.maximum(out, 0.0)
        # laplace: P(X > z) = exp(-z)/2 for z >= 0
        dz = (hi - lo) / d.b  # the width, computed before the offsets (no cancellation)
        t = np.where(right, 0.5 * np.exp(-za) * -np.expm1(-dz), 0.0)
        t = np.where(left, 0.5 * np.exp(zb) * -np.expm1(-dz), t)
        t = np.where(mid, -0.5 * np.expm1(za) - 0.5 * np.expm1(-zb), t)
        return np.where(np.isnan(t), 0.0, np.maximum(t, 0.0))


@functools.lru_cache(maxsize=8)
def _table(d: Distribution, fmt: Format) -> np.ndarray:
    """Masses of every bit pattern of an enumerable format under a continuous
    distribution (0 for the non-finite ones): computed once per process."""
    with np.errstate(all="ignore"):
        v = fmt.from_bits(np.arange(1 << fmt.bits, dtype=np.int64).astype(fmt.uint))
    t = np.zeros(len(v))
    fin = np.isfinite(v)
    t[fin] = interval_mass(d, *edges(fmt, v[fin]))
    t.flags.writeable = False
    return t


def masses(d: Distribution, fmt: Format, x: np.ndarray) -> np.ndarray:
    """Mass of each finite input x of fmt (d bound to fmt for npy:)."""
    x = np.asarray(x, dtype=np.float64)
    if d.kind != "npy" and fmt.enumerable:
        return _table(d, fmt)[fmt.to_bits(x).astype(np.intp)]
    if d.kind == "npy":
        if d.fmt_name != fmt.name:
            raise ValueError("npy: distribution not bound to the format (weighting.bind)")
        assert d.bits is not None and d.counts is not None  # npy: set by bind
        b = fmt.to_bits(x).astype(np.uint64)
        i = np.minimum(np.searchsorted(d.bits, b), max(len(d.bits) - 1, 0))
        if not len(d.bits):  # every sample beyond the format (or not finite): no input has mass
            return np.zeros(len(b))
        return np.where(d.bits[i] == b, d.counts[i], 0) / float(d.total)
    lo, hi = edges(fmt, x)
    return interval_mass(d, lo, hi)


def _order_key(fmt: Format, v: np.ndarray) -> np.ndarray:
    """A key ascending along fmt's number line with -0 just before +0."""
    v = np.asarray(v, dtype=np.float64)
    return 2 * fmt.ordinal(v) + 1 - ((v == 0) & np.signbit(v))


def outside(d: Distribution, fmt: Format, first: float, last: float) -> dict:
    """See :func:`_outside` (cached for continuous distributions)."""
    if d.kind == "npy":
        return _outside(d, fmt, first, last)
    return dict(_outside_cached(d, fmt, first, last))


@functools.lru_cache(maxsize=32)
def _outside_cached(d: Distribution, fmt: Format, first: float, last: float):
    return tuple(_outside(d, fmt, first, last).items())


def _outside(d: Distribution, fmt: Format, first: float, last: float) -> dict:
    """The mass a draw puts outside the swept inputs [first, last] (contiguous on fmt's
    number line, -0 before +0): ``below`` the first, ``above`` the last (draws beyond
    fmt's range on that side included), ``overflow`` (beyond fmt's range, whatever was
    swept: a part of ``below`` and ``above``) and, for npy:, ``nonfinite`` samples;
    ``outside`` = below + above (+ nonfinite)."""
    far = math.inf if fmt.saturate else fmt.overflow_threshold
    if d.kind == "npy":
        assert d.bits is not None and d.counts is not None  # npy: set by bind
        vals = fmt.from_bits(d.bits.astype(fmt.uint))
        key = _order_key(fmt, vals)
        k0, k1 = _order_key(fmt, np.array([first, last]))
        nf = sum(d.nonfinite.values())
        n_below = int(d.counts[key < k0].sum()) + d.overflow_below
        n_above = int(d.counts[key > k1].sum()) + d.overflow_count - d.overflow_below
        res = {
            "below": n_below / d.total,
            "above": n_above / d.total,
            "overflow": d.overflow_count / d.total,
            "nonfinite": nf / d.total,
        }
        return {"outside": (n_below + n_above + nf) / d.total, **res}
    lo, _ = edges(fmt, np.array([first]))
    _, hi = edges(fmt, np.array([last]))
    below = float(interval_mass(d, np.array([-math.inf]), lo)[0])
    above = float(interval_mass(d, hi, np.array([math.inf]))[0])
    over = 0.0
    if math.isfinite(far):
        over = float(interval_mass(d, np.array([-math.inf]), np.array([-far]))[0]) + float(
            interval_mass(d, np.array([far]), np.array([math.inf]))[0]
        )
    return {"outside": below + above, "below": below, "above": above, "overflow": over}


def overflow_to(fmt: Format) -> str:
    """Where F rounds what lies beyond its largest finite value."""
    if fmt.saturate:
        return "max (saturates: in the outermost inputs' mass)"
    return "inf" if fmt.has_inf else "nan"


# -------------------------------------------------------- accumulation
@dataclass
class Part:
    """The weighted data of one chunk: its first and last input; sums over its inputs
    (in input order: the chunk grid is fixed, so the merged sums are the same bits in
    serial, parallel and distributed runs); and for the quantiles the masses of its
    finite results (0 elsewhere) with their ULP errors."""

    first: float
    last: float
    per_class: np.ndarray  # mass per result class (audit/measure/metrics.py)
    correct: float
    flushed: float
    sums: np.ndarray  # per (ulp, abs, rel): sum of m * error over finite results
    m: np.ndarray  # masses of finite results, 0 for other results
    u: np.ndarray


_FINITE_LUT = np.zeros(6)
_FINITE_LUT[[FINITE, OVERFLOW_MISS]] = 1.0


def chunk(d: Distribution, fmt: Format, e: PointErrors) -> Part:
    """The weighted part of one chunk's per-input errors (inputs in fmt, ascending).
    Written for speed (few passes over the chunk, no copies of its errors): sums with
    numpy's reductions restricted (``where=``) to the finite results of positive mass, the
    other classes counted on their (usually few) inputs."""
    m = masses(d, fmt, e.x)
    cls = e.cls.astype(np.intp)
    finite = _FINITE_LUT[cls]
    mq = m * finite  # masses of finite results, 0 elsewhere
    fin = mq > 0
    per_class = np.zeros(6)
    other = np.flatnonzero(finite == 0)
    if len(other):
        per_class += _sums(m[other], cls[other], 6)
    per_class[FINITE] = _sum(mq)
    with np.errstate(under="ignore", invalid="ignore"):
        sums = np.array([float(np.sum(m * v, where=fin)) for v in (e.ulp_err, e.abs_err, e.rel_err)])
    zero = np.flatnonzero(e.got == 0)
    with np.errstate(invalid="ignore"):
        fl = zero[(e.rounded[zero] != 0) & ~np.isnan(e.rounded[zero])]
    return Part(
        float(e.x[0]) if len(e.x) else math.nan,
        float(e.x[-1]) if len(e.x) else math.nan,
        per_class,
        float(np.sum(m, where=e.correct)),
        _sum(m[fl]),
        sums,
        mq,
        e.ulp_err,
    )


def _sums(m: np.ndarray, groups: np.ndarray, n: int) -> np.ndarray:
    """Sums of m per group, added in input order (np.bincount's sequential loop)."""
    return np.bincount(groups, weights=m, minlength=n)[:n] if len(m) else np.zeros(n)


def _sum(m: np.ndarray) -> float:
    """sum(m) (numpy's reduction: a fixed order of additions, as metrics.py's sums)."""
    return float(np.sum(m))


def _exact(m: np.ndarray, base: int | None = None) -> tuple[int, int]:
    """(N, base) with sum(m) = N * 2**base exactly, for finite m >= 0: significands cut
    into 18-bit limbs, added per exponent (float64 sums of 18-bit integers are exact
    below 2**35 terms), the per-exponent sums shifted together in Python integers."""
    m = np.asarray(m, dtype=np.float64)
    m = m[m > 0]
    if not len(m):
        return 0, 0 if base is None else base
    f, e = np.frexp(m)
    mant = np.ldexp(f, 53).astype(np.int64)
    ex = e.astype(np.int64) - 53
    b = int(ex.min()) if base is None else base
    bins = ex - b
    limbs = [
        np.bincount(bins, weights=((mant >> s) & 0x3FFFF).astype(np.float64)).astype(np.int64).tolist()
        for s in (36, 18, 0)
    ]
    n = 0
    for k, (h, mid, lo) in enumerate(zip(*limbs)):
        if h or mid or lo:
            n += ((h << 36) + (mid << 18) + lo) << k
    return n, b


def exact_sum(m: np.ndarray) -> float:
    """sum(m) correctly rounded to float64 (m >= 0 finite)."""
    from fractions import Fraction

    n, b = _exact(m)
    return float(Fraction(n) * Fraction(2) ** b) if n else 0.0


_EPS = 2.0**-53


def _decide(c: float, t: float, num: int, den: int, g: float) -> bool | None:
    """Whether den * C >= num * T for the exact sums C, T of positive terms whose float
    values c, t are within a relative g of them; None where the bound cannot tell."""
    lhs, rhs = den * c, num * t
    if lhs * (1 - g) > rhs * (1 + g) * (1 + 4 * _EPS):
        return True
    if lhs * (1 + g) * (1 + 4 * _EPS) < rhs * (1 - g):
        return False
    return None


_BIN_SHIFT = 48  # bins of the fast path: 4 significand bits of the error (16 per binade)
_NAN_BIN = (0x7FF0000000000000 >> _BIN_SHIFT) + 1  # NaN errors: past inf, as in a sort


def _quantiles_binned(m: np.ndarray, u: np.ndarray, qs) -> list[float | None]:
    """The weighted quantiles without sorting every error: masses summed per bin of the
    error's float64 pattern (errors >= 0: ordered as their values), the bin where the
    cumulative mass crosses q found, its few errors sorted.  None where the float sums'
    error bound leaves a comparison undecided (the caller then decides exactly)."""
    n = len(m)
    # errors are >= 0 (+0, never -0): the bit patterns ascend with the values; NaN (of
    # either sign) go to one bin past inf's
    key = np.minimum(u.view(np.uint64) >> np.uint64(_BIN_SHIFT), np.uint64(_NAN_BIN)).view(np.int64)
    bm = np.bincount(key, weights=m, minlength=_NAN_BIN + 1)
    cb = np.cumsum(bm)
    t = float(cb[-1])
    g = 2 * (n + len(bm) + 4) * _EPS  # every float partial sum below: at most that many additions
    out: list[float | None] = []
    for num, den in qs:
        b = int(min(np.searchsorted(cb, t * (num / den)), len(cb) - 1))
        below = float(cb[b - 1]) if b else 0.0
        sel = np.flatnonzero(key == b)
        if not len(sel):
            out.append(None)
            continue
        o = np.argsort(u[sel])
        us = u[sel][o]
        cum = np.cumsum(np.concatenate(([below], m[sel][o])))  # cum[j]: below + the first j
        j = int(min(np.searchsorted(cum[1:], t * (num / den)), len(us) - 1))
        prev = False if (j == 0 and b == 0) else _decide(float(cum[j]), t, num, den, g)
        ok = _decide(float(cum[j + 1]), t, num, den, g) is True and prev is False
        out.append(float(us[j]) if ok else None)
    return out


def _quantiles(m: np.ndarray, u: np.ndarray, qs) -> list[float]:
    """For each (num, den) of qs: the smallest e with sum(m[u <= e]) >= num/den * sum(m)
    (m >= 0; inputs of mass 0 never decide), decided exactly: by float sums where their
    rounding error bound decides (:func:`_quantiles_binned`), else by exact integer sums
    over the sorted errors (a binary search on them)."""
    if not (m > 0).any():
        return [math.nan for _ in qs]
    fast = _quantiles_binned(m, u, qs)
    if all(v is not None for v in fast):
        return fast  # type: ignore[return-value]
    return _quantiles_sorted(m, u, qs)


def _quantiles_sorted(m: np.ndarray, u: np.ndarray, qs) -> list[float]:
    """:func:`_quantiles` over every error sorted; float cumulative sums where their
    error bound decides, exact integer sums where it does not."""
    order = np.argsort(u)  # NaN last (ties: any order gives the same e)
    ms, us = m[order], u[order]
    cum = np.cumsum(ms)  # sequential
    n = len(ms)
    out = []
    exact: dict = {}

    def reaches(k: int, num: int, den: int) -> bool:  # masses of the k + 1 smallest >= q * total
        g_k, g_n = 2 * (k + 2) * _EPS, 2 * (n + 1) * _EPS
        lhs, rhs = den * cum[k], num * cum[-1]
        if lhs * (1 - g_k) > rhs * (1 + g_n) * (1 + 4 * _EPS):
            return True
        if lhs * (1 + g_k) * (1 + 4 * _EPS) < rhs * (1 - g_n):
            return False
        if "total" not in exact:
            exact["total"], exact["base"] = _exact(ms)
        return den * _exact(ms[: k + 1], exact["base"])[0] >= num * exact["total"]

    for num, den in qs:
        k = int(min(np.searchsorted(cum, cum[-1] * (num / den)), n - 1))
        if not (reaches(k, num, den) and (k == 0 or not reaches(k - 1, num, den))):
            lo, hi = 0, n - 1  # reaches(n - 1): the whole mass
            while lo < hi:
                mid = (lo + hi) // 2
                if reaches(mid, num, den):
                    hi = mid
                else:
                    lo = mid + 1
            k = lo
        out.append(float(us[k]))
    return out


def weighted_quantile(m: np.ndarray, u: np.ndarray, num: int, den: int) -> float:
    """Smallest e with sum(m[u <= e]) >= num/den * sum(m), exactly (m > 0)."""
    return _quantiles(np.asarray(m, dtype=np.float64), np.asarray(u, dtype=np.float64), [(num, den)])[0]


def finish(d: Distribution, fmt: Format, parts: list[Part]) -> dict:
    """The ``weighted`` section of a result from its chunks' parts (in input order)."""
    if not parts:
        raise BadOptionError("--distribution: no swept inputs")
    out = outside(d, fmt, parts[0].first, parts[-1].last)

    def total(k):  # chunk sums added in chunk order
        v = getattr(parts[0], k)
        for p in parts[1:]:
            v = v + getattr(p, k)
        return v

    per_class = total("per_class").copy()
    swept = float(per_class.sum())  # (the classes in a fixed order)
    if swept == 0:
        raise BadOptionError(
            f"--distribution {d.label}: no mass on the swept {fmt.name} inputs (zero inputs prove nothing)"
        )
    fin_mass = float(per_class[FINITE])
    sums = total("sums")

    def mean(i):  # over finite results: NaN where an error is NaN (a defect upstream, shown)
        return float(sums[i]) / fin_mass if fin_mass else math.nan

    one = len(parts) == 1
    mf = parts[0].m if one else np.concatenate([p.m for p in parts])
    u = parts[0].u if one else np.concatenate([p.u for p in parts])
    qs = _quantiles(mf, u, [(num, den) for _, num, den in QUANTILES])
    doc = {
        "distribution": d.label,
        "distribution_id": d.identity,  # (npy: the sample's digest, not its path)
        "mass": {"swept": swept, **out, "overflow_to": overflow_to(fmt)},
        "finite": fin_mass / swept,
        "mean_ulp": mean(0),
        **{k: q for (k, _, _), q in zip(QUANTILES, qs)},
        "correctly_rounded": float(total("correct")) / swept,
        "nan": float(per_class[NAN]) / swept,
        "inf": float(per_class[INF]) / swept,
        "underflow": float(total("flushed")) / swept,
        "overflow_ok": float(per_class[OVERFLOW_OK]) / swept,
        "undefined": float(per_class[UNDEFINED]) / swept,
        "mean_abs": mean(1),
        "mean_rel": mean(2),
    }
    if d.kind == "npy":
        doc["mass"]["samples"] = d.total
        doc["mass"]["nonfinite_samples"] = dict(d.nonfinite)
    return doc


def to_json(doc: dict | None) -> dict | None:
    """The section with NaN/inf as the strings JSON carries."""
    if doc is None:
        return None
    from audit.io import json_number

    def conv(v):
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        if isinstance(v, float):
            return json_number(v)
        return v

    return conv(doc)


def active_region(d: Distribution | None, fmt: Format, lo_sat: float | None, hi_sat: float | None):
    """(lo, hi) of the linear panel of an error map: where the distribution puts 99.9% of
    its mass (central interval), else between the function's saturation thresholds."""
    if d is not None and d.kind == "normal":
        from scipy.special import ndtri

        t = -float(ndtri(0.0005))
        return d.a - t * d.b, d.a + t * d.b
    if d is not None and d.kind == "laplace":
        t = -math.log(2 * 0.0005)  # P(X > mean + t * scale) = exp(-t) / 2
        return d.a - t * d.b, d.a + t * d.b
    if d is not None and d.kind == "uniform":
        pad = 0.05 * (d.b - d.a)
        return d.a - pad, d.b + pad
    if d is not None and d.kind == "npy" and d.bits is not None and len(d.bits):
        assert d.counts is not None  # set by bind with the bits
        vals = fmt.from_bits(d.bits.astype(fmt.uint))
        order = np.argsort(vals)
        cum = np.cumsum(d.counts[order]) / d.counts.sum()
        v = vals[order]
        j = min(int(np.searchsorted(cum, 0.9995)), len(v) - 1)
        return float(v[np.searchsorted(cum, 0.0005)]), float(v[j])
    lo = -8.0 if lo_sat is None else lo_sat
    hi = 8.0 if hi_sat is None else hi_sat
    return (lo, hi) if lo < hi else (-8.0, 8.0)


def density(d: Distribution, fmt: Format, xs: np.ndarray) -> np.ndarray:
    """The density of d at xs (ascending, evenly spaced), for the overlay of the report's
    linear panel; for npy: a histogram of the sample (its values rounded to fmt) over 160
    bins spanning xs (a frequency per format value would spike where the format's values
    crowd, near 0)."""
    xs = np.asarray(xs, dtype=np.float64)
    if d.kind == "normal":
        return np.exp(-0.5 * ((xs - d.a) / d.b) ** 2) / (d.b * math.sqrt(2 * math.pi))
    if d.kind == "laplace":
        return np.exp(-np.abs(xs - d.a) / d.b) / (2 * d.b)
    if d.kind == "uniform":
        return np.where((xs >= d.a) & (xs <= d.b), 1.0 / (d.b - d.a), 0.0)
    assert d.bits is not None and d.counts is not None  # npy: set by bind
    vals = fmt.from_bits(d.bits.astype(fmt.uint))
    h, be = np.histogram(vals, bins=160, range=(float(xs[0]), float(xs[-1])), weights=d.counts)
    dens = h / (d.total * (be[1] - be[0]))
    return dens[np.clip(np.searchsorted(be, xs, side="right") - 1, 0, len(dens) - 1)]


# ------------------------------------------------------------ sweep hooks
def check_sweep(storages, exhaustive: bool, checkpoint, dump, grid) -> None:
    """What --distribution applies to: every input of a range (enumerable formats, fp32
    --exhaustive), sweeps held in memory or chunked without a checkpoint, no dumps."""
    for st in storages:
        if not st.enumerable and not exhaustive:
            raise BadOptionError(
                f"--distribution weights every input of a range: {st.name} needs --exhaustive "
                "(and a --range to keep it short)"
            )
    if checkpoint is not None:
        raise BadOptionError(
            "--distribution and --checkpoint exclude each other (weighted data is not saved)"
        )
    if dump is not None:
        raise BadOptionError("--distribution applies to swept candidates, not to a --dump")
    if grid is not None:
        raise BadOptionError("--distribution applies to functions of one input (no --grid)")


MAX_INPUTS = 1 << 24  # inputs of one weighted sweep (16 bytes each kept for the quantiles)


def for_candidate(d: Distribution | None, cand, count: int = 0) -> Distribution | None:
    """d for a candidate of one input over ``count`` inputs; a gated unit (two inputs), or
    more than MAX_INPUTS inputs, is refused."""
    if d is not None and getattr(cand, "arity", 1) != 1:
        raise BadOptionError(f"--distribution applies to functions of one input; {cand.id} takes two")
    if d is not None and count > MAX_INPUTS:
        raise BadOptionError(
            f"--distribution over {count} inputs: at most {MAX_INPUTS} are weighted (narrow --range)"
        )
    return d


# ------------------------------------------------------------- gate hooks
# tolerance key -> (figure of the weighted section, kind of bound)
GATE_TOLERANCES = {
    "weighted_mean_ulp": "mean_ulp",
    "weighted_p99_ulp": "p99_ulp",
    "weighted_nan": "nan",
    "weighted_underflow": "underflow",
}
# figures a baseline entry records and compares (worse when they rise; correctly_rounded
# worse when it falls)
BASELINE_FIGURES = ("mean_ulp", "p99_ulp", "p999_ulp", "nan", "inf", "underflow", "correctly_rounded")


def check_tolerance(k: str, v) -> str | None:
    """What is wrong with a weighted tolerance value (None: nothing)."""
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
    if k in ("weighted_nan", "weighted_underflow"):
        return None if ok and v <= 1 else "must be a probability in [0, 1]"
    return None if ok else "must be a finite number >= 0"


def spec_distribution(spec_dir, v) -> str:
    """The audit's ``distribution`` key, validated (npy: paths relative to the spec)."""
    d = parse(v)
    if d.kind == "npy":
        from pathlib import Path

        p = Path(d.path)
        return f"npy:{p if p.is_absolute() else Path(spec_dir) / p}"
    return d.label


def tolerance_failures(tol: dict, weighted: dict | None, show) -> list[str]:
    """The weighted tolerances the result breaks; one that cannot be computed (no
    distribution, or a NaN figure: no finite result) fails."""
    fails = []
    for k, fig in GATE_TOLERANCES.items():
        if k not in tol:
            continue
        if weighted is None:
            fails.append(f"tolerance '{k}' cannot be computed: the audit has no 'distribution'")
            continue
        v = float(weighted[fig])
        if math.isnan(v):
            fails.append(f"tolerance '{k}' cannot be computed: weighted {fig} is NaN (no finite result)")
        elif not v <= tol[k]:
            fails.append(f"weighted {fig} = {show(v)} exceeds the tolerance {show(tol[k])}")
    return fails


def baseline_entry(weighted: dict | None) -> dict:
    """What a baseline entry records of the weighted section ({} without one)."""
    if weighted is None:
        return {}
    from audit.io import json_number

    return {
        "weighted": {  # bound to the sample's digest for npy:, not to where it was read
            "distribution": weighted.get("distribution_id", weighted["distribution"]),
            **{k: json_number(weighted[k]) for k in BASELINE_FIGURES},
        }
    }


def check_entry(w, bad) -> None:
    """Validate a baseline entry's ``weighted`` object (unknown keys refused)."""
    if not isinstance(w, dict):
        bad("weighted", "must be an object")
    keys = {"distribution", *BASELINE_FIGURES}
    if set(w) != keys:
        extra = sorted(set(w) - keys) or sorted(keys - set(w))
        bad(f"weighted.{extra[0]}", f"is unknown or missing (keys: {', '.join(sorted(keys))})")
    if not isinstance(w["distribution"], str) or not w["distribution"]:
        bad("weighted.distribution", "must be a non-empty string")
    for k in BASELINE_FIGURES:
        v = w[k]
        if isinstance(v, str):
            ok = v in ("nan", "inf") and k not in ("nan", "inf", "underflow", "correctly_rounded")
        else:
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
            ok = ok and (v <= 1 or k not in ("nan", "inf", "underflow", "correctly_rounded"))
        if not ok and not (isinstance(v, str) and v == "nan"):
            bad(f"weighted.{k}", "must be a number >= 0 (a probability in [0, 1]), 'inf' or 'nan'")


def against_baseline(slack: float, now: dict | None, base: dict | None, show) -> tuple[list[str], list[str]]:
    """(failures, improvements) of the weighted figures against the baseline entry's."""
    if now is None and base is None:
        return [], []
    if now is None or base is None:
        return [
            "the baseline entry was recorded "
            + ("without" if base is None else f"under distribution {base['distribution']}")
            + " and this result "
            + ("has none" if now is None else f"under {now['distribution']}")
            + "; record the baseline again"
        ], []
    if now["distribution"] != base["distribution"]:
        return [
            f"distribution changed: {base['distribution']} -> {now['distribution']}; record the baseline again"
        ], []
    fails, better = [], []
    for k in BASELINE_FIGURES:
        b, n = float(base[k]), float(now[k])
        if math.isnan(b) and math.isnan(n):
            continue
        if k == "correctly_rounded":  # worse when it falls
            b, n = -b, -n
        if math.isnan(b) or math.isnan(n):
            fails.append(f"weighted {k}: {show(abs(b), abs(n))} (NaN: cannot be compared)")
        elif n > b + abs(b) * slack + 1e-300:
            fails.append(f"weighted {k} got worse: {show(abs(b), abs(n))}")
        elif n < b - abs(b) * slack:
            better.append(f"weighted {k} improved: {show(abs(b), abs(n))}")
    return fails, better


# ------------------------------------------------------------- suggest hooks
RANKS = {"max_ulp": (), "weighted_p99": ("p99_ulp", "mean_ulp"), "weighted_mean": ("mean_ulp", "p99_ulp")}


def for_ranking(distribution: str | None, rank: str) -> Distribution | None:
    """The distribution of a ranking, checked against the rank asked for."""
    if rank not in RANKS:
        raise BadOptionError(f"--rank must be one of {', '.join(RANKS)}, got '{rank}'")
    if RANKS[rank] and distribution is None:
        raise BadOptionError(f"--rank {rank} needs --distribution (the inputs it weights by)")
    return None if distribution is None else parse(distribution)


def rank_key(weighted: dict | None, rank: str) -> tuple:
    """The weighted figures of a ranking key (NaN ranks last)."""
    if not RANKS[rank]:
        return ()
    assert weighted is not None  # a weighted rank implies a distribution (for_ranking)
    vals = (float(weighted[k]) for k in RANKS[rank])
    return tuple(math.inf if math.isnan(v) else v for v in vals)
