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
audit/metrics.py: ``nan``, ``inf``, ``overflow_ok``, ``undefined`` are the probabilities
of those classes, ``finite`` the probability of a finite result (``finite`` and
``overflow_miss``), ``underflow`` that of a zero result where RN_F(f(x)) is nonzero (a
flush).  ``mean_ulp``, ``mean_abs``, ``mean_rel`` are means over finite results
(sum m*e / sum m over them): NaN and inf results never enter them (their probabilities
say how much mass they hold), and a NaN error of a finite result (a defect upstream) makes
them NaN, never dropped.  Inputs of mass 0 do not enter.

Weighted quantile ``p99_ulp`` (``p999_ulp``): the smallest e such that the mass of
finite-result inputs with ULP error <= e is at least 99/100 (999/1000) of the mass of
finite-result inputs; computed exactly: the masses are summed as integers (multiples of
their smallest power of two) and compared with q in rational arithmetic.
"""

from __future__ import annotations

import bisect
import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from .errors import BadFileError, BadOptionError
from .formats import Format
from .metrics import FINITE, INF, NAN, OVERFLOW_MISS, OVERFLOW_OK, UNDEFINED, PointErrors

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
            raise BadOptionError(f"--distribution '{spec}': uniform takes lo < hi")
        return Distribution("uniform", kv["lo"], kv["hi"], label=f"uniform:lo={kv['lo']!r},hi={kv['hi']!r}")
    width = "std" if kind == "normal" else "scale"
    if set(kv) - {width, "mean"} or width not in kv or not kv[width] > 0:
        raise BadOptionError(f"--distribution '{spec}': {kind} takes {width} > 0 and optionally mean")
    m, s = kv.get("mean", 0.0) + 0.0, kv[width]
    return Distribution(kind, m, s, label=f"{kind}:{width}={s!r}" + (f",mean={m!r}" if m else ""))


def bind(d: Distribution, fmt: Format) -> Distribution:
    """The distribution ready for inputs of ``fmt``: an npy: sample read (bounded reader,
    numbers only), rounded to fmt and counted."""
    if d.kind != "npy" or d.fmt_name == fmt.name:
        return d
    from .io import load_npy

    a = load_npy(d.path, NPY_LIMIT, "distribution sample")
    if a.dtype.kind not in "iuf":
        raise BadFileError(f"{d.path}: dtype {a.dtype}: a distribution sample holds real numbers")
    a = np.asarray(a, dtype=np.float64).ravel()
    if a.size == 0:
        raise BadFileError(f"{d.path}: no samples (zero inputs prove nothing)")
    nonfinite = {
        "nan": int(np.count_nonzero(np.isnan(a))),
        "inf": int(np.count_nonzero(a == math.inf)),
        "-inf": int(np.count_nonzero(a == -math.inf)),
    }
    fin = a[np.isfinite(a)]
    if fin.size == 0:
        raise BadFileError(f"{d.path}: no finite samples ({a.size} non-finite)")
    with np.errstate(all="ignore"):
        r = fmt.round(fin)
    ok = np.isfinite(r)
    bits, counts = np.unique(fmt.to_bits(r[ok]).astype(np.uint64), return_counts=True)
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


def masses(d: Distribution, fmt: Format, x: np.ndarray) -> np.ndarray:
    """Mass of each finite input x of fmt (d bound to fmt for npy:)."""
    x = np.asarray(x, dtype=np.float64)
    if d.kind == "npy":
        if d.fmt_name != fmt.name:
            raise ValueError("npy: distribution not bound to the format (weighting.bind)")
        b = fmt.to_bits(x).astype(np.uint64)
        i = np.minimum(np.searchsorted(d.bits, b), max(len(d.bits) - 1, 0))
        hit = (d.bits[i] == b) if len(d.bits) else np.zeros(len(b), bool)
        return np.where(hit, d.counts[i], 0) / float(d.total)
    lo, hi = edges(fmt, x)
    return interval_mass(d, lo, hi)


def _order_key(fmt: Format, v: np.ndarray) -> np.ndarray:
    """A key ascending along fmt's number line with -0 just before +0."""
    v = np.asarray(v, dtype=np.float64)
    return 2 * fmt.ordinal(v) + 1 - ((v == 0) & np.signbit(v))


def outside(d: Distribution, fmt: Format, first: float, last: float) -> dict:
    """The mass a draw puts outside the swept inputs [first, last] (contiguous on fmt's
    number line, -0 before +0): ``below`` the first, ``above`` the last (draws beyond
    fmt's range included), ``overflow`` (beyond fmt's range, whatever was swept) and, for
    npy:, ``nonfinite`` samples; ``outside`` their total."""
    far = math.inf if fmt.saturate else fmt.overflow_threshold
    if d.kind == "npy":
        vals = fmt.from_bits(d.bits.astype(fmt.uint))
        key = _order_key(fmt, vals)
        k0, k1 = _order_key(fmt, np.array([first, last]))
        nf = sum(d.nonfinite.values())
        res = {
            "below": int(d.counts[key < k0].sum()) / d.total,
            "above": int(d.counts[key > k1].sum()) / d.total,
            "overflow": d.overflow_count / d.total,
            "nonfinite": nf / d.total,
        }
        n_out = int(d.counts[(key < k0) | (key > k1)].sum()) + d.overflow_count + nf
        return {"outside": n_out / d.total, **res}
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
    """The weighted data of one chunk: for inputs of positive mass, their class sums and,
    for finite results, (mass, ulp, abs, rel)."""

    first: float
    last: float
    swept: np.ndarray | None = None  # masses, summed exactly at the end
    cls_mass: dict = field(default_factory=dict)  # class name -> [masses]
    m: np.ndarray | None = None  # finite results of positive mass
    u: np.ndarray | None = None
    a: np.ndarray | None = None
    r: np.ndarray | None = None


_CLASSES = {"nan": NAN, "inf": INF, "overflow_ok": OVERFLOW_OK, "undefined": UNDEFINED}


def chunk(d: Distribution, fmt: Format, e: PointErrors) -> Part:
    """The weighted part of one chunk's per-input errors (inputs in fmt, ascending)."""
    m = masses(d, fmt, e.x)
    p = Part(float(e.x[0]) if len(e.x) else math.nan, float(e.x[-1]) if len(e.x) else math.nan)
    pos = m > 0
    p.swept = m[pos]
    cls = e.cls
    for name, c in _CLASSES.items():
        p.cls_mass[name] = m[pos & (cls == c)]
    fin = pos & ((cls == FINITE) | (cls == OVERFLOW_MISS))
    p.cls_mass["finite"] = m[fin]
    p.cls_mass["correctly_rounded"] = m[pos & e.correct]
    with np.errstate(invalid="ignore"):
        flushed = (e.got == 0) & (e.rounded != 0) & ~np.isnan(e.rounded)
    p.cls_mass["underflow"] = m[pos & flushed]
    p.m, p.u, p.a, p.r = m[fin], e.ulp_err[fin], e.abs_err[fin], e.rel_err[fin]
    return p


def _fsum(arrays) -> float:
    return math.fsum(itertools.chain.from_iterable(a.tolist() for a in arrays))


def _mean(m: np.ndarray, v: np.ndarray, total: float) -> float:
    if not len(m) or total == 0:
        return math.nan
    if np.isnan(v).any():
        return math.nan  # a NaN error of a finite result: a defect upstream, shown
    if np.isinf(v).any():
        return math.inf
    return math.fsum((m * v).tolist()) / total


def _exact_ints(m: np.ndarray) -> list[int]:
    """Positive float64 masses as exact integers, multiples of the smallest power of two
    among their last significand bits."""
    f, e = np.frexp(m)
    mant = np.ldexp(f, 53).astype(np.int64)
    ex = e.astype(np.int64) - 53
    base = int(ex.min())
    return [a << b for a, b in zip(mant.tolist(), (ex - base).tolist())]


def weighted_quantile(m: np.ndarray, u: np.ndarray, num: int, den: int) -> float:
    """Smallest e with sum(m[u <= e]) >= num/den * sum(m), exactly (m > 0)."""
    if not len(m):
        return math.nan
    order = np.argsort(u, kind="stable")  # NaN last
    cum = list(itertools.accumulate(_exact_ints(m[order])))
    target = -((-num * cum[-1]) // den)  # ceil(num * total / den): the sums are integers
    k = bisect.bisect_left(cum, target)
    return float(u[order][k])


def finish(d: Distribution, fmt: Format, parts: list[Part]) -> dict:
    """The ``weighted`` section of a result from its chunks' parts (in input order)."""
    if not parts:
        raise BadOptionError("--distribution: no swept inputs")
    swept = _fsum(p.swept for p in parts)
    out = outside(d, fmt, parts[0].first, parts[-1].last)
    if swept == 0:
        raise BadOptionError(
            f"--distribution {d.label}: no mass on the swept {fmt.name} inputs (zero inputs prove nothing)"
        )
    m = np.concatenate([p.m for p in parts])
    u, a, r = (np.concatenate([getattr(p, k) for p in parts]) for k in "uar")

    def prob(name):
        return _fsum(p.cls_mass[name] for p in parts) / swept

    fin = math.fsum(m.tolist())
    doc = {
        "distribution": d.label,
        "mass": {
            "swept": swept,
            **out,
            "overflow_to": overflow_to(fmt),
        },
        "finite": prob("finite"),
        "mean_ulp": _mean(m, u, fin),
        **{k: weighted_quantile(m, u, num, den) for k, num, den in QUANTILES},
        "correctly_rounded": prob("correctly_rounded"),
        "nan": prob("nan"),
        "inf": prob("inf"),
        "underflow": prob("underflow"),
        "overflow_ok": prob("overflow_ok"),
        "undefined": prob("undefined"),
        "mean_abs": _mean(m, a, fin),
        "mean_rel": _mean(m, r, fin),
    }
    if d.kind == "npy":
        doc["mass"]["samples"] = d.total
        doc["mass"]["nonfinite_samples"] = dict(d.nonfinite)
    return doc


def to_json(doc: dict | None) -> dict | None:
    """The section with NaN/inf as the strings JSON carries."""
    if doc is None:
        return None
    from .io import json_number

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
        vals = fmt.from_bits(d.bits.astype(fmt.uint))
        order = np.argsort(vals)
        cum = np.cumsum(d.counts[order]) / d.counts.sum()
        v = vals[order]
        return float(v[np.searchsorted(cum, 0.0005)]), float(v[min(np.searchsorted(cum, 0.9995), len(v) - 1)])
    lo = -8.0 if lo_sat is None else lo_sat
    hi = 8.0 if hi_sat is None else hi_sat
    return (lo, hi) if lo < hi else (-8.0, 8.0)


def density(d: Distribution, fmt: Format, xs: np.ndarray) -> np.ndarray:
    """The density of d at xs (for npy: the mass of each format value over its interval
    width), for the overlay of the report's linear panel."""
    xs = np.asarray(xs, dtype=np.float64)
    if d.kind == "normal":
        return np.exp(-0.5 * ((xs - d.a) / d.b) ** 2) / (d.b * math.sqrt(2 * math.pi))
    if d.kind == "laplace":
        return np.exp(-np.abs(xs - d.a) / d.b) / (2 * d.b)
    if d.kind == "uniform":
        return np.where((xs >= d.a) & (xs <= d.b), 1.0 / (d.b - d.a), 0.0)
    v = fmt.round(xs)
    lo, hi = edges(fmt, v)
    with np.errstate(all="ignore"):
        return np.where(hi > lo, masses(d, fmt, v) / (hi - lo), 0.0)


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


def for_candidate(d: Distribution | None, cand) -> Distribution | None:
    """d for a candidate of one input; a gated unit (two inputs) is refused."""
    if d is not None and getattr(cand, "arity", 1) != 1:
        raise BadOptionError(f"--distribution applies to functions of one input; {cand.id} takes two")
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
    from .io import json_number

    return {
        "weighted": {
            "distribution": weighted["distribution"],
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
    vals = (float(weighted[k]) for k in RANKS[rank])
    return tuple(math.inf if math.isnan(v) else v for v in vals)
