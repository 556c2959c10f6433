"""Input domains: which values of a format a sweep evaluates.

* Formats of 16 bits or fewer: every finite value (both zeros), ascending.
  The result is exhaustive: its maximum error is the true maximum (a bound).
* fp32 and fp64: a seeded sample stratified by binade: every binade in the
  range (and the subnormal range) gets points, both signs, plus its two edge
  values.  A sampled maximum is a lower bound on the true maximum.
* fp32 with ``exhaustive=True``: every value, produced in chunks.
* Pairs (a, b) of gated units: a seeded grid, every pair for 8-bit formats, and with
  ``exhaustive=True`` every pair of a 16-bit format (63,488^2 in fp16), in chunks.

A range [lo, hi] keeps the values lo <= x <= hi.  Non-finite inputs (+-inf,
NaN) are not part of the domain; they are checked separately as specials.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from audit.errors import BadOptionError, BadRangeError
from audit.numbers.formats import Format

DEFAULT_SAMPLES = {"fp32": 1 << 16, "fp64": 1 << 12}
MAX_SAMPLES = {"fp32": 1 << 24, "fp64": 1 << 20}  # in memory; fp64 points each cost mpmath
CHUNK = 1 << 18  # inputs per chunk: the grid of parallel, resumed and distributed runs


def parse_range(text: str | None) -> tuple[float, float] | None:
    """'LO:HI' (either side may be empty for the format's limit) -> (lo, hi)."""
    if text is None or text == "":
        return None
    if text.count(":") != 1:
        raise BadRangeError(f"range '{text}' is not LO:HI")
    parts = text.split(":")
    try:
        lo = float(parts[0]) if parts[0].strip() else -math.inf
        hi = float(parts[1]) if parts[1].strip() else math.inf
    except ValueError:
        raise BadRangeError(f"range '{text}': bounds must be numbers") from None
    return check_range((lo, hi))


def check_range(r) -> tuple[float, float] | None:
    if r is None:
        return None
    lo, hi = float(r[0]), float(r[1])
    if math.isnan(lo) or math.isnan(hi):
        raise BadRangeError(f"range [{lo}, {hi}] has a NaN bound")
    if lo > hi:
        raise BadRangeError(f"range [{lo}, {hi}] is reversed (LO > HI)")
    return lo, hi


@dataclass
class Domain:
    """The finite inputs of one sweep in one format (pairs (a, b) for gated units)."""

    fmt: Format
    exhaustive: bool
    count: int
    lo_ord: int = 0
    hi_ord: int = 0
    include_neg_zero: bool = False
    values: np.ndarray | None = field(default=None, repr=False)  # when held in memory
    values2: np.ndarray | None = field(default=None, repr=False)  # second argument (b)
    axis: np.ndarray | None = field(default=None, repr=False)  # every pair of these, chunked

    def chunks(self, size: int | None = None) -> Iterator:
        """The inputs, ascending, in chunks of at most ``size`` (tuples (a, b) for pairs)."""
        size = size or CHUNK
        if self.values2 is not None:
            for i in range(0, len(self.values), size):
                yield self.values[i : i + size], self.values2[i : i + size]
            return
        if self.values is not None:
            for i in range(0, max(len(self.values), 1), size):
                yield self.values[i : i + size]
            return
        for r in self.chunk_ranges(size):
            yield self.chunk_values(r)

    def chunk_ranges(self, size: int | None = None) -> list[tuple[int, int, bool]]:
        """(first ordinal, stop ordinal, whether -0 is in it) of each chunk of an ordinal
        domain (for pairs: first and stop pair index): the fixed grid that serial,
        parallel, resumed and distributed runs all share."""
        size = size or CHUNK
        if self.axis is not None:
            return [(a, min(a + size, self.count), False) for a in range(0, self.count, size)]
        out = []
        start = self.lo_ord
        while start <= self.hi_ord:
            stop = min(start + size, self.hi_ord + 1)
            out.append((start, stop, self.include_neg_zero and start <= 0 < stop))
            start = stop
        return out

    def chunk_counts(self, ranges) -> list[int]:
        """The number of inputs of each chunk range (-0 counted where it is in)."""
        return [stop - start + (1 if neg_zero else 0) for start, stop, neg_zero in ranges]

    def chunk_values(self, r: tuple[int, int, bool]):
        """The inputs of one chunk: values, or for pairs the tuple (a, b) with pair index
        i = ia * n + ib in row-major order over the axis (a the slow axis)."""
        start, stop, neg_zero = r
        if self.axis is not None:
            ia, ib = np.divmod(np.arange(start, stop, dtype=np.int64), len(self.axis))
            return self.axis[ia], self.axis[ib]
        vals = self.fmt.from_ordinal(np.arange(start, stop, dtype=np.int64))
        if neg_zero:
            vals = np.insert(vals, int(np.searchsorted(vals, 0.0)), -0.0)
        return vals

    def all(self) -> np.ndarray:
        if self.values is not None:
            return self.values
        return np.concatenate(list(self.chunks()))


def _ordinal_bounds(fmt: Format, rng) -> tuple[int, int]:
    """Ordinals of the smallest and largest finite values in rng."""
    m = fmt.max_finite
    lo, hi = (-m, m) if rng is None else (max(rng[0], -m), min(rng[1], m))
    if lo > hi:
        return 1, 0
    # the first format value >= lo, the last <= hi
    lo_v = float(fmt.round([lo])[0])
    if lo_v < lo:
        lo_v = float(fmt.from_ordinal([fmt.ordinal([lo_v])[0] + 1])[0])
    hi_v = float(fmt.round([hi])[0])
    if hi_v > hi:
        hi_v = float(fmt.from_ordinal([fmt.ordinal([hi_v])[0] - 1])[0])
    return int(fmt.ordinal([lo_v])[0]), int(fmt.ordinal([hi_v])[0])


def domain(
    fmt: Format, rng=None, *, samples: int | None = None, seed: int = 0, exhaustive: bool | None = None
) -> Domain:
    rng = check_range(rng)
    if fmt.enumerable:
        if samples is not None:
            raise BadOptionError(f"{fmt.name} is swept exhaustively; --samples applies to fp32 and fp64")
        vals = fmt.finite_values()
        if rng is not None:
            vals = vals[(vals >= rng[0]) & (vals <= rng[1])]
        _nonempty(fmt, rng, len(vals))
        return Domain(fmt, True, len(vals), values=vals)
    lo_o, hi_o = _ordinal_bounds(fmt, rng)
    _nonempty(fmt, rng, hi_o - lo_o + 1)
    if exhaustive:
        if fmt.bits > 32:
            raise BadOptionError("--exhaustive is available for formats of at most 32 bits")
        if samples is not None:
            raise BadOptionError("--exhaustive and --samples exclude each other")
        neg_zero = lo_o <= 0 <= hi_o
        return Domain(fmt, True, hi_o - lo_o + 1 + int(neg_zero), lo_o, hi_o, neg_zero)
    n = DEFAULT_SAMPLES.get(fmt.name, 1 << 16) if samples is None else int(samples)
    if n < 1:
        raise BadOptionError(f"--samples must be positive, got {n}")
    limit = MAX_SAMPLES.get(fmt.name, 1 << 24)
    if n > limit:
        raise BadOptionError(
            f"--samples {n} is more than {limit} for {fmt.name}"
            + (": use --exhaustive for a chunked sweep of every value" if fmt.bits <= 32 else "")
        )
    vals = stratified_sample(fmt, lo_o, hi_o, n, seed)
    exh = len(vals) == hi_o - lo_o + 1  # a range small enough to be covered entirely
    return Domain(fmt, exh, len(vals), lo_o, hi_o, values=vals)


def _nonempty(fmt, rng, n):
    if n <= 0:
        raise BadRangeError(f"range [{rng[0]}, {rng[1]}] holds no finite {fmt.name} value")


def stratified_sample(fmt: Format, lo_o: int, hi_o: int, n: int, seed: int) -> np.ndarray:
    """A seeded sample of the ordinals lo_o..hi_o, stratified by binade.

    The strata are the binades (runs of one exponent field), each sign, and the
    subnormals of each sign; each stratum meeting the range gets its two edge
    values and an equal share of uniform random points.
    """
    total = hi_o - lo_o + 1
    if total <= n:
        return fmt.from_ordinal(np.arange(lo_o, hi_o + 1, dtype=np.int64))
    step = 1 << fmt.mantissa_bits  # ordinals per binade
    max_o = fmt.max_ordinal
    # stratum boundaries on the ordinal line: [-max..0), [0..max], cut at multiples of step
    edges = [e for e in range(-(max_o // step) * step, max_o + 1, step)]
    bounds = sorted(set([lo_o, hi_o + 1] + [e for e in edges if lo_o < e <= hi_o]))
    strata = list(zip(bounds[:-1], [b - 1 for b in bounds[1:]]))
    per = max(1, n // len(strata))
    gen = np.random.default_rng(seed)
    parts = []
    for a, b in strata:
        parts.append(np.array([a, b], dtype=np.int64))
        if b - a > 1:
            parts.append(gen.integers(a + 1, b, size=min(per, b - a - 1), endpoint=False))
    parts.append(np.array([o for o in (-1, 1) if lo_o <= o <= hi_o], dtype=np.int64))  # +-min subnormal
    ords = np.unique(np.concatenate(parts))
    return fmt.from_ordinal(ords)


def axis_values(fmt: Format, rng, side: int, seed: int) -> tuple[np.ndarray, bool]:
    """Values of one axis of a 2D grid: every value of an 8-bit format, else ``side``
    values spread evenly over the ordinal line (log-symmetric: dense near zero, down to
    the subnormals), seeded jitter, plus the edges (+-max, +-min subnormal, +-1, +-0)."""
    if fmt.bits <= 8:
        d = domain(fmt, rng)
        return d.values, True
    lo_o, hi_o = _ordinal_bounds(fmt, rng)
    _nonempty(fmt, rng, hi_o - lo_o + 1)
    if hi_o - lo_o + 1 <= side:
        return fmt.from_ordinal(np.arange(lo_o, hi_o + 1, dtype=np.int64)), True
    gen = np.random.default_rng(seed)
    base = np.linspace(lo_o, hi_o, side)
    step = (hi_o - lo_o) / max(side - 1, 1)
    r = np.round(base + gen.uniform(-step / 3, step / 3, side))
    # clipped in integers: float64 cannot hold fp64's largest ordinals (0x7fefffffffffffff
    # rounds up to 2^63 - 2^52 + ..., the ordinal of +inf), so a float clip let +inf in
    top, bot = r >= float(hi_o), r <= float(lo_o)
    ords = np.where(top | bot, 0.0, r).astype(np.int64)
    ords[top], ords[bot] = hi_o, lo_o
    edge_vals = [0.0, 1.0, -1.0, fmt.smallest_subnormal, -fmt.smallest_subnormal]
    edges = [lo_o, hi_o] + [int(fmt.ordinal([v])[0]) for v in edge_vals]
    ords = np.unique(np.concatenate([ords, [e for e in edges if lo_o <= e <= hi_o]]))
    return fmt.from_ordinal(ords), False


def pair_domain(
    fmt: Format, rng=None, *, side: int | None = None, seed: int = 0, exhaustive: bool = False
) -> Domain:
    """All pairs (a, b) of an axis grid: exhaustive for 8-bit formats (254^2 pairs in
    E4M3), a seeded 1024 x 1024 log-symmetric grid with edges for wider formats; with
    ``exhaustive``, every pair of values of a 16-bit format, produced in chunks."""
    rng = check_range(rng)
    if exhaustive and fmt.bits > 8:
        if not fmt.enumerable:
            raise BadOptionError(
                f"every pair of {fmt.name} values is too many: --exhaustive pairs "
                "are for formats of at most 16 bits"
            )
        if side is not None:
            raise BadOptionError("--exhaustive and --grid exclude each other")
        ax = domain(fmt, rng).values
        return Domain(fmt, True, len(ax) * len(ax), axis=ax)
    side = 1024 if side is None else int(side)
    if side < 2 or side > 1 << 14:
        raise BadOptionError(f"grid side must be in [2, 16384], got {side}")
    ax, exh = axis_values(fmt, rng, side, seed)
    a, b = np.meshgrid(ax, ax, indexing="ij")
    return Domain(fmt, exh, a.size, values=a.ravel(), values2=b.ravel())


SPECIALS = (-math.inf, math.inf, math.nan)


def special_inputs(fmt: Format) -> list[float]:
    """Non-finite inputs of the format: +-inf where it has them, and NaN where it has one
    (the OCP MX FP6/FP4 types have neither)."""
    return [v for v in SPECIALS if (fmt.has_nan if math.isnan(v) else fmt.has_inf)]
