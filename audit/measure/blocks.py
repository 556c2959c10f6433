"""Block-scaled outputs: OCP MX (MXFP8/MXFP6/MXFP4) and NVFP4.

An activation's outputs are quantized per block of B consecutive elements: one shared scale
per block and one element format value per element.

* MX (OCP Microscaling Formats v1.0, sections 5 and 6.3): B = 32, an E8M0 scale X = 2^k per
  block.  ``ocp`` rule (section 6.3): k = floor(log2(amax)) - emax_elem, amax the largest
  |value| of the block, emax_elem the exponent of the element format's largest normal
  (8 for E4M3, 15 for E5M2, 4 for E3M2, 2 for E2M3 and E2M1); an element can then exceed
  the element maximum and saturates.  ``ceil`` rule (the round-up variant): the smallest
  k with amax / 2^k <= the element maximum, so no element saturates (torchao's
  ``ScaleCalculationMode.RCEIL``, NVIDIA's MXFP8 recipe).  k is clamped to E8M0's range
  [-127, 127]; amax = 0 gives k = -127; a NaN or infinite amax gives a NaN scale and a
  block of NaN.
* NVFP4 (NVIDIA Blackwell): B = 16, E2M1 elements, an unsigned E4M3 scale per block and an
  fp32 tensor scale T = fp32(amax_tensor / (448 * 6)) (1 when amax_tensor is 0; kept within
  fp32's positive finite range [2^-149, fp32 max], never 0 nor infinite).  The
  block scale is S = RN_E4M3(amax / (6 T)) (``ocp`` rule here: round to nearest) or
  rounded up to the next E4M3 value (``ceil``), saturating at 448; elements are
  RN_E2M1(y / (S T)), saturating (S = 0: a block of zeros).

Elements are rounded to nearest, ties to even, and saturate at the element maximum (the
spec's conversion clamps).  The audit separates what the approximation adds from what the
quantization costs: the reference is the exact activation f(x) quantized by the same rule,
its scales computed from the exact values (decided by mpmath wherever the reference's
fast value cannot decide a scale or an element); the candidate computes in its compute
format (default fp32) and quantizes its own outputs, scales from its own values, as a fused
kernel does.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import mpmath as mp
import numpy as np
from mpmath.libmp import mpf_div, round_ceiling, round_floor

from audit.errors import BadFileError, BadOptionError
from audit.io import json_number
from audit.measure.metrics import relative_error
from audit.numbers.formats import FORMATS, Format, element_format
from audit.oracle import oracle

SCHEMA = "actaudit.blocks/1"
MX = {
    "mxfp8_e4m3": "fp8_e4m3",
    "mxfp8_e5m2": "fp8_e5m2",
    "mxfp6_e3m2": "fp6_e3m2",
    "mxfp6_e2m3": "fp6_e2m3",
    "mxfp4_e2m1": "fp4_e2m1",
}
RULES = {
    "ocp": "OCP MX v1.0 section 6.3: k = floor(log2 amax) - emax_elem (NVFP4: S = RN_E4M3)",
    "ceil": "round-up: the smallest scale with amax / scale <= the element maximum "
    "(torchao ScaleCalculationMode.RCEIL; NVIDIA's MXFP8 recipe)",
}
MAX_ELEMENTS = 1 << 24
DEFAULT_ELEMENTS = 1 << 16  # seeded input elements of a sampled --blocks audit
EXHAUSTIVE_ROWS = 2048  # rows of x per chunk of the exhaustive pair mode (memory bound)
NV_DEN = 448.0 * 6.0
T_MIN, T_MAX = 2.0**-149, float(np.finfo(np.float32).max)  # NVFP4's tensor scale: fp32, > 0, finite


@dataclass(frozen=True)
class BlockFormat:
    name: str
    elem: Format
    block: int
    rule: str = "ocp"

    @property
    def nv(self) -> bool:
        return self.name == "nvfp4"


def is_block(name) -> bool:
    return name is not None and str(name).strip().lower() in (*MX, "nvfp4")


def get_block_format(name: str, rule: str = "ocp") -> BlockFormat:
    key = str(name).strip().lower()
    if rule not in RULES:
        raise BadOptionError(f"unknown scale rule '{rule}' (known: {', '.join(RULES)})")
    if key == "nvfp4":
        return BlockFormat("nvfp4", FORMATS["fp4_e2m1"], 16, rule)
    if key not in MX:
        raise BadOptionError(f"unknown block format '{name}' (known: {', '.join(MX)}, nvfp4)")
    return BlockFormat(key, FORMATS[MX[key]], 32, rule)


# --------------------------------------------------------------- element rounding
def elem_round(E: Format, q: np.ndarray) -> np.ndarray:
    """RN_E(q), saturating at +-max (NaN stays NaN)."""
    with np.errstate(all="ignore"):
        r = E.round(q)
        over = np.abs(q) > E.max_finite
        if over.any():
            r = np.where(over, np.copysign(E.max_finite, q), r)
    return r


def div_round(E: Format, y: np.ndarray, d) -> np.ndarray:
    """RN_E(y / d) exactly for float64 y and positive d with a short significand (a power of
    two, or an E4M3 value times an fp32): where the float64 quotient sits on a boundary
    between two E values, y is compared with boundary * d, an exact product."""
    shape = np.shape(y)
    y = np.asarray(y, dtype=np.float64).ravel()
    d = np.broadcast_to(np.asarray(d, dtype=np.float64), shape).ravel()
    with np.errstate(all="ignore"):
        q = y / d
        r = elem_round(E, q)
        a, b = elem_round(E, np.nextafter(q, -np.inf)), elem_round(E, np.nextafter(q, np.inf))
        edge = np.flatnonzero((a != b) & np.isfinite(q))
        if len(edge):
            m = (a[edge] + b[edge]) / 2
            yy = y[edge]
            md = m * d[edge]
            r[edge] = np.where(yy > md, b[edge], np.where(yy < md, a[edge], r[edge]))
    return r.reshape(shape)


def _elem_round_mpf(E: Format, v) -> float:
    r = E.round_mpf(v)
    if math.isnan(r) or math.isinf(r):
        return math.copysign(E.max_finite, float(v))
    return r


# ------------------------------------------------------------------- scale rules
def mx_exponent(bf: BlockFormat, amax: np.ndarray) -> np.ndarray:
    """The E8M0 exponent k per block (float64; NaN for a NaN or infinite amax)."""
    E = bf.elem
    with np.errstate(all="ignore"):
        _, e = np.frexp(amax)
        if bf.rule == "ocp":
            k = (e - 1 - E.emax).astype(np.float64)
        else:  # smallest k with amax <= max * 2^k
            k = (e - 1 - E.emax).astype(np.float64)
            # (amax / 2^k and max both lie in [2^emax, 2^(emax+1)): the answer is k or k + 1)
            k = np.where(amax > np.ldexp(E.max_finite, k.astype(np.int64)), k + 1, k)
        k = np.clip(k, -127, 127)
        k = np.where(amax == 0, -127.0, k)
        return np.where(np.isfinite(amax), k, np.nan)


def mx_exponent_mpf(bf: BlockFormat, amax) -> float:
    E = bf.elem
    if amax == 0:
        return -127.0
    e = int(mp.frexp(amax)[1]) - 1  # floor(log2 amax), exact
    k = e - E.emax
    if bf.rule == "ceil":
        if amax > mp.ldexp(mp.mpf(E.max_finite), k):  # (k or k + 1, as in mx_exponent)
            k += 1
    return float(min(max(k, -127), 127))


def nv_scale(bf: BlockFormat, amax: np.ndarray, t: float) -> np.ndarray:
    """The E4M3 block scale S = RN (or round-up) of amax / (6 T), saturating at 448."""
    e4 = FORMATS["fp8_e4m3"]
    den = 6.0 * t  # exact: 3 bits times an fp32
    with np.errstate(all="ignore"):
        if bf.rule == "ocp":
            s = div_round(e4, amax, np.full(len(amax), den))
        else:
            q = amax / den
            s = elem_round(e4, q)
            low = s * den < amax  # rounded down: the next E4M3 value up
            if low.any():
                o = e4.ordinal(np.where(low, s, 0.0))
                up = e4.from_ordinal(np.minimum(o + 1, e4.max_ordinal))  # saturating at 448
                s = np.where(low, up, s)
        return np.where(np.isfinite(amax), s, np.nan)


def nv_scale_q(bf: BlockFormat, q) -> float:
    """The E4M3 block scale from the exact quotient q = amax / (6 T) >= 0 (an mpmath number):
    RN_E4M3(q) (``ocp``) or the smallest E4M3 value >= q (``ceil``), saturating at 448.
    Monotone in q."""
    e4 = FORMATS["fp8_e4m3"]
    s = _elem_round_mpf(e4, q)
    if bf.rule == "ceil" and s < q and s < e4.max_finite:
        o = int(e4.ordinal([s])[0])
        s = min(float(e4.from_ordinal([o + 1])[0]), e4.max_finite)
    return s


def _t_range(t: float) -> float:
    """T kept in fp32's positive finite range: a quotient that rounds to 0 (amax below
    2688 * 2^-150) would make every decode scale S T zero, and one that overflows (amax
    beyond 2688 times fp32's largest) infinite: either turns the tensor's elements to NaN."""
    return min(max(t, T_MIN), T_MAX)


def tensor_scale(amax: float) -> float:
    """T = RN_fp32(amax / 2688) for a float64 amax, correctly rounded (one rounding of the
    exact quotient: float(np.float32(amax / 2688)) rounds twice, which is innocuous for an
    fp32 amax, 53 >= 2 * 24 + 2, but not for a float64 one), within [2^-149, fp32 max]."""
    if not amax > 0:
        return 1.0
    return _t_range(float(div_round(FORMATS["fp32"], np.array([amax]), NV_DEN)[0]))


def tensor_scale_q(q) -> float:
    """T from the exact quotient q = amax / 2688 (an mpmath number): RN_fp32(q), 1 at 0,
    within [2^-149, fp32 max]."""
    if q == 0:
        return 1.0
    return _t_range(FORMATS["fp32"].round_mpf(q))


# --------------------------------------------------------- quantizing float values
@dataclass
class Quantized:
    scale: np.ndarray  # per block: 2^k (MX) or S (NVFP4); NaN for a NaN block
    elems: np.ndarray  # (blocks, B) element values
    values: np.ndarray  # dequantized: elems * scale (* T)
    tensor_scale: float = 1.0
    # (the reference only) elements whose exact |f| / d lies just below the power of two that
    # its float64 rounding shows: their element ulp is that of the binade below
    below: np.ndarray | None = None


def quantize(bf: BlockFormat, y: np.ndarray) -> Quantized:
    """Block-quantize float64 values y (blocks, B) as a kernel does, from y itself."""
    E = bf.elem
    with np.errstate(all="ignore"):
        amax = np.max(np.abs(y), axis=1)
        if not bf.nv:
            k = mx_exponent(bf, amax)
            X = np.ldexp(1.0, np.nan_to_num(k).astype(np.int64))
            X = np.where(np.isnan(k), np.nan, X)
            el = elem_round(E, y / X[:, None])  # exact: X a power of two
            return Quantized(X, el, el * X[:, None])
        fin = np.isfinite(amax)
        t = tensor_scale(float(amax[fin].max()) if fin.any() else 0.0)
        s = nv_scale(bf, amax, t)
        d = s * t
        el = div_round(E, y, np.broadcast_to(d[:, None], y.shape))
        el = np.where((s == 0)[:, None], 0.0, el)
        el = np.where(np.isnan(s)[:, None], np.nan, el)
        return Quantized(s, el, el * d[:, None], t)


# ------------------------------------------------------------------------ inputs
def parse_dist(spec: str):
    """'normal:std=S[,mean=M]', 'uniform:lo=A,hi=B' or 'npy:PATH'."""
    kind, _, rest = str(spec).partition(":")
    kind = kind.strip().lower()
    if kind == "npy":
        if not rest:
            raise BadOptionError("npy: needs a file, npy:PATH")
        return ("npy", rest)
    kv = {}
    for part in rest.split(","):
        if part.strip():
            k, eq, v = part.partition("=")
            try:
                kv[k.strip().lower()] = float(v)
            except ValueError:
                raise BadOptionError(f"distribution '{spec}': '{part}' is not NAME=NUMBER") from None
            if not eq or not math.isfinite(kv[k.strip().lower()]):
                raise BadOptionError(f"distribution '{spec}': '{part}' is not NAME=NUMBER")
    if kind == "normal":
        extra = set(kv) - {"std", "mean"}
        if extra or kv.get("std", 1.0) <= 0:
            raise BadOptionError(
                f"distribution '{spec}': normal takes std > 0 (1 when left out) and optionally "
                "mean: normal:std=S[,mean=M] (e.g. normal:std=2,mean=0.5)"
            )
        return ("normal", kv.get("mean", 0.0), kv.get("std", 1.0))
    if kind == "uniform":
        if set(kv) != {"lo", "hi"} or not kv["lo"] < kv["hi"]:
            raise BadOptionError(
                f"distribution '{spec}': uniform takes lo < hi: uniform:lo=A,hi=B (e.g. uniform:lo=-4,hi=4)"
            )
        return ("uniform", kv["lo"], kv["hi"])
    raise BadOptionError(f"unknown distribution '{kind}' (normal:std=S, uniform:lo=A,hi=B, npy:PATH)")


def inputs(dist: str, n: int, seed: int, fmt: Format, block: int) -> np.ndarray:
    """n input values (a whole number of blocks) of format fmt: a seeded sample of the
    distribution rounded to fmt, or the values of a .npy file (rounded to fmt)."""
    d = parse_dist(dist)
    if d[0] == "npy":
        from audit.io import load_npy

        p = Path(d[1])
        a = load_npy(p, MAX_ELEMENTS * 8, "file of inputs", regular=True)  # bounded, header first
        if a.dtype.kind not in "iuf":
            raise BadFileError(f"{p}: dtype {a.dtype}: expected numbers")
        if a.size > MAX_ELEMENTS:  # (the byte bound lets 2^27 one-byte values through)
            raise BadFileError(f"{p}: {a.size} values, more than {MAX_ELEMENTS}")
        a = a.astype(np.float64).ravel()
        if not np.isfinite(a).all():
            raise BadFileError(f"{p}: has non-finite values")
        if len(a) == 0 or len(a) % block:
            raise BadFileError(f"{p}: {len(a)} values is not a whole number of blocks of {block}")
        x = fmt.round(a)
    else:
        if not 1 <= n <= MAX_ELEMENTS or n % block:
            raise BadOptionError(f"--elements must be a positive multiple of {block}, at most {MAX_ELEMENTS}")
        if seed < 0:
            raise BadOptionError(f"seed must be at least 0, got {seed}")
        g = np.random.default_rng(seed)
        raw = g.normal(d[1], d[2], n) if d[0] == "normal" else g.uniform(d[1], d[2], n)
        x = fmt.round(raw)
    if not np.isfinite(x).all():
        raise BadOptionError(f"inputs overflow {fmt.name}")
    return x


# ---------------------------------------------------------------- the reference
def _fast(ref, x, params):
    """(f(x) approximation, error bound) per element; bound inf where mpmath must decide."""
    if ref.fast is None:
        return np.full(len(x), np.nan), np.full(len(x), np.inf)
    with np.errstate(all="ignore"):
        v = np.asarray(ref.fast(x, **params), dtype=np.float64)
        if ref.exact:
            slack = np.zeros(len(x))
        else:
            slack = oracle.fast_slack(ref, x, v, params)
        slack = np.where(np.isfinite(v), slack, np.inf)
    return v, slack


def _enclose(v: np.ndarray, slack: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Float64 bounds lo <= f <= hi of f in [v - slack, v + slack].

    Why a decision from them is exact: v - slack rounded to nearest can land on a
    boundary b (a power of two, a midpoint times a scale: float64 numbers) that the real
    v - slack lies just below, and a rule that sends b up would then decide b's side
    wrongly.  One step outward (nextafter) after the rounding gives a float64 number on
    the far side of the real end (RN moves by at most half an ulp, the step by at least
    that, also at a power of two, where the step below is the smaller ulp).  Every rule
    applied to these bounds (the scale codes, RN_E(y / d) by div_round, which is exact
    for float64 y) is monotone, so rule(lo) == rule(hi) proves rule(f) equal to both:
    only inputs whose interval contains a boundary go to mpmath."""
    with np.errstate(all="ignore"):
        return np.nextafter(v - slack, -np.inf), np.nextafter(v + slack, np.inf)


def _magnitudes(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of |f| from bounds lo <= f <= hi (0 below where the interval holds 0)."""
    with np.errstate(all="ignore"):
        m_lo = np.where(lo > 0, lo, np.where(hi < 0, -hi, 0.0))
        m_hi = np.maximum(np.abs(lo), np.abs(hi))
    return m_lo, m_hi


# the side of a boundary of a value f = P - g that saturates onto P (erf(100) = 1 - 1e-4346)
# needs no precision: every boundary here (a power of two, max * 2^k, an E4M3 or fp32
# midpoint times a scale of at most 29 bits) and P (an input, or a constant of a few bits)
# have at most 64 significant bits, so two of them that differ, differ by more than
# |P| 2^-130; with |g| <= |P| 2^-NEAR_BITS no boundary other than P itself lies between f
# and P, and f sits on the same side of all of them as P - sign(g) |P| 2^-(NEAR_BITS - 10)
NEAR_BITS = 200


class _Exact:
    """mpmath values of f, computed once per element on demand, and decisions of monotone
    rules of f (scale codes, element roundings) that are exact: the precision is raised until
    the rule gives one answer over the whole error ball of the mpmath value."""

    def __init__(self, ref, x, params):
        self.ref, self.x, self.params, self.cache = ref, x, params, {}
        self.decided: set[int] = set()
        self._values: dict = {}  # by input value: blocks repeat inputs
        self._memo: dict = {}

    def __call__(self, i: int):
        if i not in self.cache:
            xi = float(self.x[i])
            if xi not in self._values:
                with mp.workprec(300):
                    self._values[xi] = self.ref.mp(mp.mpf(xi), **self.params)
            self.cache[i] = self._values[xi]
        return self.cache[i]

    @property
    def n(self) -> int:
        """Elements that mpmath evaluated or decided (whatever the order of the requests)."""
        return len(self.decided.union(self.cache))

    def decide(self, i: int, rule, *, absolute: bool = False, div: float | None = None, tag=None):
        """(memoized by input value when ``tag`` names the rule)"""
        if tag is None:
            return self._decide(i, rule, absolute, div)
        key = (float(self.x[i]), tag, absolute, div)
        if key not in self._memo:
            self._memo[key] = self._decide(i, rule, absolute, div)
        self.decided.add(i)
        return self._memo[key]

    def _decide(self, i: int, rule, absolute: bool, div: float | None):
        """rule(f) for f = f(x_i) (|f| if ``absolute``; f / div for a positive float ``div``),
        decided exactly; ``rule`` maps an mpmath number to a float and is monotone
        non-decreasing.  The ball v +- d of an evaluation at precision prec (the oracle's
        guard bits trusted) is mapped through the division rounded outward (floor at its
        lower end, ceiling at its upper one); when rule() agrees at both ends it is rule(f).  Where it
        never does (f on a boundary up to 2^-4096: an exact value like relu(16) = 16, or a
        saturating f = P - g), the reference's ``near`` split decides the side (NEAR_BITS),
        else the value is taken as exact, as oracle.exact_point does."""
        xi = float(self.x[i])
        xm = mp.mpf(xi)
        extra = 2 * max(0, math.frexp(xi)[1]) if math.isfinite(xi) else 0
        prec = 120 + extra
        self.decided.add(i)

        def ends(a, b, wp):
            if absolute:
                a, b = (a, b) if a >= 0 else ((-b, -a) if b <= 0 else (mp.zero, max(-a, b)))
            if div is not None:  # rounded outward: an exact quotient (a tie) stays exact
                dv = mp.mpf(div)._mpf_
                a = mp.mpf(mpf_div(a._mpf_, dv, wp, round_floor))
                b = mp.mpf(mpf_div(b._mpf_, dv, wp, round_ceiling))
            return a, b

        while True:
            with mp.workprec(prec):
                v = self.ref.mp(xm, **self.params)
            wp = prec + 64
            with mp.workprec(wp):  # (v finite: callers settle the non-finite first)
                d = abs(v) * mp.ldexp(1, oracle.GUARD_BITS - (prec - extra))
                a, b = ends(v - d, v + d, wp)
                ra, rb = rule(a), rule(b)
                if ra == rb or (math.isnan(ra) and math.isnan(rb)):
                    return ra
            if self.ref.near is not None and prec - extra >= NEAR_BITS + 60:
                with mp.workprec(prec):
                    pg = self.ref.near(xm, **self.params)
                if pg is not None and pg[0] != 0 and abs(pg[1]) <= abs(pg[0]) * mp.ldexp(1, -NEAR_BITS):
                    P, g = pg
                    with mp.workprec(wp):
                        w = P - mp.sign(g) * abs(P) * mp.ldexp(1, 10 - NEAR_BITS)
                        return rule(ends(w, w, wp)[0])
            if prec >= oracle.MAX_PREC:
                with mp.workprec(wp):
                    return rule(ends(v, v, wp)[0])
            prec *= 2


def _own_code(bf: BlockFormat, t: float):
    """(rule, div) of one element's own scale code from |f|: the E8M0 exponent k (MX) or
    the E4M3 block scale S at tensor scale t (NVFP4).  A block's code is the largest of its
    elements' own codes (the rules are monotone in amax)."""
    if bf.nv:
        return (lambda q: nv_scale_q(bf, q)), 6.0 * t
    return (lambda a: mx_exponent_mpf(bf, a)), None


def reference(bf: BlockFormat, ref, x: np.ndarray, params: dict) -> tuple[Quantized, np.ndarray, int]:
    """The exact f(x) quantized by bf's rule, scales from the exact values: (quantized,
    f(x) as float64, elements decided by mpmath)."""
    B = bf.block
    E = bf.elem
    v, slack = _fast(ref, x, params)
    ex = _Exact(ref, x, params)
    nb = len(x) // B
    special = _settle_unbounded(ex, v, slack)
    nan_block = special.reshape(nb, B).any(axis=1)  # a NaN scale and a NaN block
    lo, hi = _enclose(v, slack)
    m_lo, m_hi = _magnitudes(lo, hi)
    # a NaN block takes no part in any maximum (the tensor's: as quantize() leaves it out)
    m_lo[np.repeat(nan_block, B)] = m_hi[np.repeat(nan_block, B)] = 0.0
    lo_mag, hi_mag = m_lo.reshape(nb, B), m_hi.reshape(nb, B)
    with np.errstate(all="ignore"):
        amax_lo, amax_hi = np.max(lo_mag, axis=1), np.max(hi_mag, axis=1)

    def contenders(rows, floor):
        """Elements of the given blocks that can hold their block's maximum (an unbounded
        one, beyond float64, too)."""
        return [np.flatnonzero(~(hi_mag[r] < floor[r])) + r * B for r in rows]

    t = 1.0
    if bf.nv:
        tl, th = float(amax_lo.max()), float(amax_hi.max())
        if tensor_scale(tl) == tensor_scale(th) and math.isfinite(th):
            t = tensor_scale(th)
        else:  # the tensor maximum's T, decided exactly (T is monotone in amax)
            top = np.flatnonzero(~(m_hi < tl) & ~special)
            t = max(ex.decide(int(i), tensor_scale_q, absolute=True, div=NV_DEN) for i in top)
        s_lo, s_hi = nv_scale(bf, amax_lo, t), nv_scale(bf, amax_hi, t)
    else:
        s_lo, s_hi = mx_exponent(bf, amax_lo), mx_exponent(bf, amax_hi)
    scale = s_lo.copy()
    amb = np.flatnonzero(~(s_lo == s_hi) & ~nan_block)
    if len(amb):
        rule, div = _own_code(bf, t)
        for r, cand in zip(amb.tolist(), contenders(amb.tolist(), amax_lo)):
            scale[r] = max(ex.decide(int(i), rule, absolute=True, div=div, tag="own") for i in cand)
    scale[nan_block] = np.nan
    if bf.nv:
        d = scale * t
    else:
        d = np.where(nan_block, np.nan, np.ldexp(1.0, np.nan_to_num(scale).astype(np.int64)))
    dfull = np.repeat(d, B)
    with np.errstate(all="ignore"):
        e_lo = div_round(E, lo, dfull)
        e_hi = div_round(E, hi, dfull)
    el = e_lo.copy()
    # (NVFP4 S = 0: zeros, below; a NaN block: NaN)
    for i in np.flatnonzero(~(e_lo == e_hi) & (dfull != 0) & np.isfinite(dfull)).tolist():
        el[i] = ex.decide(i, lambda q: _elem_round_mpf(E, q), div=float(dfull[i]), tag="elem")
    if bf.nv:
        el = np.where(np.repeat(scale == 0, B), 0.0, el)
    exact = v.copy()
    err = slack.copy()
    for i in list(ex.decided):
        ex(i)
    for i, val in ex.cache.items():
        exact[i] = float(val)
        err[i] = abs(exact[i]) * 2.0**-52 + 2.0**-1074
    dd = np.where(dfull == 0, math.ldexp(t, -9), dfull) if bf.nv else dfull  # (a NaN block: NaN)
    below = _below(bf, ex, exact, err, dd).reshape(nb, B)
    el = el.reshape(nb, B)
    q = Quantized(scale if bf.nv else d, el, el * d[:, None], t, below)
    return q, exact, ex.n


def _settle_unbounded(ex: _Exact, v: np.ndarray, slack: np.ndarray) -> np.ndarray:
    """Elements the fast path leaves unbounded (no fast path, or a non-finite fast value, as
    exp overflowing or log(0)): their exact value from mpmath (300 bits) replaces v, within
    one float64 rounding (v and slack are updated in place; a finite value beyond float64
    stays unbounded, for mpmath to decide).  Returns where the exact value is itself not
    finite (+-inf, NaN): a block holding one has no finite maximum, so a NaN scale and a NaN
    block (block-scaled.md), as a kernel's own quantization of it gives."""
    special = np.zeros(len(v), bool)
    for i in np.flatnonzero(~np.isfinite(v) | ~np.isfinite(slack)).tolist():
        val = ex(i)
        if not mp.isfinite(val):
            special[i] = True
            v[i], slack[i] = float(val), np.inf
            continue
        f = float(val)
        if math.isfinite(f):
            v[i], slack[i] = f, abs(f) * 2.0**-52 + 2.0**-1074
    return special


# -------------------------------------------------------------------- the audit
def _nonzero(ref, x: np.ndarray, params: dict) -> np.ndarray:
    """Where the exact f(x) is not 0 (its float64 rounding may be: gelu(-40) = -1.5e-348),
    from the reference's exact zero set."""
    if ref.zero_at is None:  # (every catalog reference declares one: test_exact_zero_sets)
        return np.ones(len(x), bool)
    return ~np.broadcast_to(np.asarray(ref.zero_at(x, **params), dtype=bool), np.shape(x))


def _unit(bf: BlockFormat, d: np.ndarray, f: np.ndarray, t: float, below=None) -> np.ndarray:
    """The element ULP at the reference's decode scale d, d ulp_E(f / d); where d is 0 (an
    NVFP4 block scale S = 0) at the smallest nonzero decode scale, 2^-9 T (E4M3's least
    positive value times the tensor scale).  ``below``: elements whose exact f / d lies
    below the power of two that the float64 f / d is, so in the binade below."""
    with np.errstate(all="ignore"):
        d = np.where(d == 0, math.ldexp(t, -9), d) if bf.nv else d  # (a NaN block: NaN)
        q = f / d
        if below is not None and below.any():
            q = np.where(below, np.nextafter(q, 0), q)
        return d * bf.elem.ulp(q)


def _binade_exp(emin: int):
    """rule: the exponent of ulp_E at an mpmath |q|: max(floor(log2 |q|), emin)."""
    return lambda q: float(max(int(mp.frexp(q)[1]) - 1, emin)) if q != 0 else float(emin)


def _below(
    bf: BlockFormat,
    ex: _Exact,
    f: np.ndarray,
    err: np.ndarray,
    d: np.ndarray,
    emin: int | None = None,
    offset: int = 0,
) -> np.ndarray:
    """Elements whose exact |f| / d is in a lower E binade than float64 |f / d| (f the float64
    value of the exact one, within err of it; d > 0 exact decode scales): decided exactly
    where the enclosure of f / d holds a binade boundary (monotone rule, as _enclose).
    emin: the lowest binade told apart (default E's; below it the ulp is constant).  f, err
    and d are of the inputs offset, offset + 1, ... of ``ex``."""
    emin = bf.elem.emin if emin is None else emin
    out = np.zeros(np.shape(f), bool)
    with np.errstate(all="ignore"):
        lo, hi = _magnitudes(*_enclose(f, err))
        dd = np.broadcast_to(d, np.shape(f))
        ql, qh = np.nextafter(lo / dd, 0), np.nextafter(hi / dd, np.inf)
        k_lo, k_hi = np.frexp(ql)[1], np.frexp(qh)[1]
        q = np.abs(f) / dd
        cand = np.flatnonzero(
            (np.maximum(k_lo, emin + 1) != np.maximum(k_hi, emin + 1)) & np.isfinite(q) & (dd > 0) & (q > 0)
        )
    rule = _binade_exp(emin)
    for i in cand.tolist():
        e = ex.decide(offset + i, rule, absolute=True, div=float(dd.flat[i]), tag=("binade", emin))
        out.flat[i] = e < max(int(np.frexp(q.flat[i])[1]) - 1, emin)
    return out


@dataclass
class BlockResult:
    candidate: str
    reference: str
    dtype: str
    out_dtype: str
    rule: str
    compute: str
    inputs: str
    elements: int
    blocks: int
    max_elem_ulp: float
    mean_elem_ulp: float
    max_rel: float
    ref_max_elem_ulp: float
    mismatches: int
    max_added_ulp: float
    scale_diff_blocks: int
    scale_diff_first: list
    worst_block: dict | None
    nan_elements: int
    tensor_scale: dict | None
    n_mpmath: int
    seconds: float = 0.0
    params: dict = field(default_factory=dict)
    identity: dict = field(default_factory=dict)  # the candidate's (audit/gate/identity.py)

    def to_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "identity"}  # (not in its JSON)
        for k in ("max_elem_ulp", "mean_elem_ulp", "max_rel", "ref_max_elem_ulp", "max_added_ulp"):
            d[k] = json_number(d[k])
        return d


def audit(
    cand,
    bf: BlockFormat,
    x: np.ndarray,
    in_fmt: Format,
    compute: Format,
    params: dict | None = None,
    dist: str = "",
) -> BlockResult:
    """One candidate's block-quantized outputs against the exactly quantized reference."""
    t0 = time.perf_counter()
    p = cand.resolve_params(params)
    ref = cand.ref
    rp = ref.with_defaults(cand.reference_params(p))
    cf = cand.compute_format(compute)
    B, nb = bf.block, len(x) // bf.block
    y = cand.evaluate(x, cf, cf, p).reshape(nb, B)
    cq = quantize(bf, y)
    rq, exact, n_mp = reference(bf, ref, x, rp)
    f = exact.reshape(nb, B)
    dref = (rq.scale * rq.tensor_scale) if bf.nv else rq.scale
    with np.errstate(all="ignore"):
        u = _unit(bf, dref[:, None], f, rq.tensor_scale, rq.below)  # the element ulp at the reference's scale
        err = np.abs(cq.values - f) / u
        ref_err = np.abs(rq.values - f) / u
        added = np.abs(cq.values - rq.values) / u
        rel = relative_error(cq.values, f, _nonzero(ref, x, rp).reshape(nb, B))
    ok = np.isfinite(cq.values)
    nan_el = int(np.count_nonzero(~ok & np.isfinite(rq.values)))  # (where the reference is finite)
    fin = ok & np.isfinite(err)
    errs = np.where(fin, err, -1.0)
    same_scale = (cq.scale == rq.scale) | (np.isnan(cq.scale) & np.isnan(rq.scale))  # (NaN blocks alike)
    diff = np.flatnonzero(~(same_scale & (cq.tensor_scale == rq.tensor_scale)))
    mism = int(np.count_nonzero(~((cq.elems == rq.elems) | (np.isnan(cq.elems) & np.isnan(rq.elems)))))
    worst = None
    if fin.any():
        bmax = errs.max(axis=1)
        w = int(np.argmax(bmax))
        worst = {
            "index": w,
            "first_element": w * B,
            "max_elem_ulp": json_number(float(bmax[w])),
            "scale_ref": json_number(float(rq.scale[w])),
            "scale_candidate": json_number(float(cq.scale[w])),
            "mismatches": int(np.count_nonzero(cq.elems[w] != rq.elems[w])),
        }
    res = BlockResult(
        cand.id,
        ref.name,
        in_fmt.name,
        bf.name,
        bf.rule,
        cf.name,
        dist,
        len(x),
        nb,
        float(err[fin].max()) if fin.any() else math.nan,
        math.fsum(err[fin].tolist()) / int(fin.sum()) if fin.any() else math.nan,
        float(np.nanmax(np.where(fin, rel, np.nan))) if fin.any() else math.nan,
        float(np.nanmax(ref_err)) if np.isfinite(ref_err).any() else math.nan,
        mism,
        float(np.nanmax(np.where(fin, added, np.nan))) if fin.any() else math.nan,
        len(diff),
        diff[:8].tolist(),
        worst,
        nan_el,
        {"reference": rq.tensor_scale, "candidate": cq.tensor_scale} if bf.nv else None,
        n_mp,
        params=p,
    )
    res.identity = dict(getattr(cand, "identity", None) or {})  # (audit/gate/identity.py)
    res.seconds = time.perf_counter() - t0
    return res


def exhaustive(
    cand, bf: BlockFormat, in_fmt: Format, compute: Format, params: dict | None = None
) -> BlockResult:
    """Every pair (element input x, block-max input m) of a 16-bit (or smaller) input format:
    the block {x, m} (other elements smaller) has the scale of max(|f(x)|, |f(m)|) for the
    reference and of max(|y(x)|, |y(m)|) for the candidate; since the scale rule is monotone,
    that is the larger of the two elements' own scale codes (MX: exponent k; NVFP4: E4M3 S),
    so the N^2 pairs reduce to N inputs times the distinct (reference, candidate) scale
    classes of m, each counted with its multiplicity.  NVFP4: the tensor is every pair block
    together, so its tensor scale T is that of the largest |f| over all inputs (the
    candidate's: of its largest |y|).  Figures are over pairs (x's element error in each pair)."""
    t0 = time.perf_counter()
    if not in_fmt.enumerable:
        raise BadOptionError(
            f"the exhaustive block mode is for inputs of 16 bits or fewer, not {in_fmt.name}"
        )
    p = cand.resolve_params(params)
    ref = cand.ref
    rp = ref.with_defaults(cand.reference_params(p))
    cf = cand.compute_format(compute)
    E = bf.elem
    x = in_fmt.finite_values()
    x = x[~((x == 0) & np.signbit(x))]  # one zero
    n = len(x)
    y = cand.evaluate(x, cf, cf, p)
    v, slack = _fast(ref, x, rp)
    ex = _Exact(ref, x, rp)
    special = _settle_unbounded(ex, v, slack)  # f(x) +-inf or NaN: every pair with x is a NaN block
    v_lo, v_hi = _enclose(v, slack)  # f in [v_lo, v_hi]: decisions from them are exact
    lo, hi = _magnitudes(v_lo, v_hi)
    lo[special] = hi[special] = 0.0
    # per input: its own scale code (MX: the E8M0 exponent k; NVFP4: the E4M3 block scale S,
    # at the tensor scale of the whole tensor, every pair block)
    t = tc = 1.0
    if bf.nv:
        ay = np.abs(y)
        fin = np.isfinite(ay)
        tc = tensor_scale(float(ay[fin].max()) if fin.any() else 0.0)
        tl, th = float(lo.max()), float(hi.max())
        if tensor_scale(tl) == tensor_scale(th) and math.isfinite(th):
            t = tensor_scale(th)
        else:
            top = np.flatnonzero(~(hi < tl) & ~special)
            t = max(ex.decide(int(i), tensor_scale_q, absolute=True, div=NV_DEN) for i in top)
        own = lambda a, tt: nv_scale(bf, a, tt)  # noqa: E731
    else:
        own = lambda a, _tt: mx_exponent(bf, a)  # noqa: E731
    rule, div = _own_code(bf, t)
    with np.errstate(all="ignore"):
        kc = own(np.abs(y), tc)
        k_lo, k_hi = own(lo, t), own(hi, t)
    kr = k_lo.copy()
    for i in np.flatnonzero(~(k_lo == k_hi) & ~special).tolist():
        kr[i] = ex.decide(i, rule, absolute=True, div=div, tag="own")
    kr[special] = np.nan

    def decode(K, tt):
        """The decode scale of scale codes K: 2^K (MX) or K T (NVFP4; exact, 4 bits x 24)."""
        return K * tt if bf.nv else np.ldexp(1.0, np.nan_to_num(K, nan=0).astype(np.int64))

    # classes of the block-max input m: (reference exponent, candidate exponent), with counts
    kc_key = np.where(np.isnan(kc), 1000.0, kc)
    kr_key = np.where(np.isnan(kr), 1000.0, kr)
    classes, counts = np.unique(np.stack([kr_key, kc_key], axis=1), axis=0, return_counts=True)
    w = counts.astype(np.float64)[None, :]
    nan_class = classes[None, :, 1] == 1000
    nan_rclass = classes[None, :, 0] == 1000
    acc = {
        "max": -1.0,
        "sum": 0.0,
        "wsum": 0.0,
        "rel": 0.0,
        "ref": 0.0,
        "mism": 0.0,
        "added": 0.0,
        "sdiff": 0.0,
        "nan": 0.0,
        "worst": None,
    }
    f = v.copy()
    ferr = slack.copy()  # |f - float64 f| bound per input
    nz = _nonzero(ref, x, rp)
    for a in range(0, n, EXHAUSTIVE_ROWS):  # rows of x, all classes of m: memory bounded
        sl = slice(a, min(a + EXHAUSTIVE_ROWS, n))
        Kr = np.maximum(kr[sl, None], np.where(nan_rclass, np.nan, classes[None, :, 0]))  # (NaN: a NaN block)
        Kc = np.where(
            nan_class | np.isnan(kc[sl, None]),
            np.nan,
            np.maximum(np.nan_to_num(kc[sl], nan=-1e9)[:, None], classes[None, :, 1]),
        )
        Xr = np.where(np.isnan(Kr), np.nan, decode(Kr, t))
        with np.errstate(all="ignore"):
            vl, vh = v_lo[sl, None], v_hi[sl, None]
            Xd = np.where(Xr > 0, Xr, 1.0)  # NVFP4 S = 0: a block of zeros
            e_lo, e_hi = div_round(E, vl + 0 * Xr, Xd), div_round(E, vh + 0 * Xr, Xd)
            e_lo, e_hi = np.where(Xr > 0, e_lo, 0.0), np.where(Xr > 0, e_hi, 0.0)
            el = e_lo.copy()
            for i, j in zip(*np.nonzero(~(e_lo == e_hi) & np.isfinite(Xr))):
                el[i, j] = ex.decide(
                    int(i) + a, lambda q: _elem_round_mpf(E, q), div=float(Xr[i, j]), tag="elem"
                )
            el = np.where(np.isnan(Xr), np.nan, el)  # a NaN block
            for i in range(sl.start, sl.stop):
                if i in ex.decided:
                    ex(i)
                if i in ex.cache:
                    f[i] = float(ex.cache[i])
                    ferr[i] = abs(f[i]) * 2.0**-52 + 2.0**-1074
            fr = f[sl, None]
            # MX: d a power of two, so f / d is one exactly where f is: the side of f
            # decides the binade for every class (below E's emin the ulp is constant)
            bl = (
                None
                if bf.nv
                else _below(bf, ex, f[sl], ferr[sl], np.ones(sl.stop - sl.start), -(10**6), sl.start)
            )
            rv = el * Xr
            Xc = np.where(np.isnan(Kc), np.nan, decode(Kc, tc))
            Xcd = np.where(Xc > 0, Xc, 1.0)
            if bf.nv:
                cel = div_round(E, np.broadcast_to(y[sl, None], Xc.shape), Xcd)
                cel = np.where(Xc > 0, cel, np.where(Xc == 0, 0.0, np.nan))
            else:
                cel = np.where(np.isnan(Kc), np.nan, elem_round(E, y[sl, None] / Xcd))
            cv = cel * Xc
            u = _unit(bf, Xr, fr, t, None if bl is None else np.broadcast_to(bl[:, None], Xr.shape))
            err = np.abs(cv - fr) / u
            ref_err = np.abs(rv - fr) / u
            added = np.abs(cv - rv) / u
            rel = relative_error(cv, fr, nz[sl, None])
        ok = np.isfinite(cv) & np.isfinite(err)
        ww = np.broadcast_to(w, ok.shape)
        acc["sum"] += float(np.sum(np.where(ok, err * ww, 0.0)))
        acc["wsum"] += float(np.sum(np.where(ok, ww, 0.0)))
        # as audit(): elements differing (NaN alike), scales differing (NaN blocks alike),
        # non-finite candidate elements where the reference is finite
        acc["mism"] += float(np.sum(np.where(~((cel == el) | (np.isnan(cel) & np.isnan(el))), ww, 0.0)))
        # the scale codes (MX: k; NVFP4: S, and every pair where the tensor scales differ)
        same = ((Kr == Kc) | (np.isnan(Kr) & np.isnan(Kc))) & (t == tc)
        acc["sdiff"] += float(np.sum(np.where(~same, ww, 0.0)))
        acc["nan"] += float(np.sum(np.where(~np.isfinite(cv) & np.isfinite(rv), ww, 0.0)))
        if np.isfinite(ref_err).any():
            acc["ref"] = max(acc["ref"], float(np.nanmax(np.where(np.isfinite(ref_err), ref_err, np.nan))))
        if ok.any():
            acc["rel"] = max(acc["rel"], float(rel[ok].max()))
            acc["added"] = max(acc["added"], float(added[ok].max()))
            em = np.where(ok, err, -1.0)
            i, j = np.unravel_index(int(np.argmax(em)), em.shape)
            if em[i, j] > acc["max"]:
                acc["max"] = float(em[i, j])
                m_idx = int(np.flatnonzero((kr_key == classes[j, 0]) & (kc_key == classes[j, 1]))[0])
                acc["worst"] = {
                    "x": json_number(float(x[a + i])),
                    "x_hex": in_fmt.hex(float(x[a + i])),
                    "pair_input": json_number(float(x[m_idx])),
                    "max_elem_ulp": json_number(float(err[i, j])),
                    # the block scales: 2^k (MX), S (NVFP4, as audit() reports)
                    "scale_ref": json_number(float(Kr[i, j] if bf.nv else Xr[i, j])),
                    "scale_candidate": json_number(float(Kc[i, j] if bf.nv else Xc[i, j])),
                    "got": json_number(float(cv[i, j])),
                    "reference": json_number(float(rv[i, j])),
                    "exact": json_number(float(f[a + i])),
                }
    total = n * n
    have = acc["wsum"] > 0
    res = BlockResult(
        cand.id,
        ref.name,
        in_fmt.name,
        bf.name,
        bf.rule,
        cf.name,
        f"exhaustive: every pair (x, m) of {in_fmt.name} inputs ({n} x {n})",
        total,
        total,
        acc["max"] if have else math.nan,
        acc["sum"] / acc["wsum"] if have else math.nan,
        acc["rel"] if have else math.nan,
        acc["ref"],
        int(acc["mism"]),
        acc["added"] if have else math.nan,
        int(acc["sdiff"]),
        [],
        acc["worst"],
        int(acc["nan"]),
        {"reference": t, "candidate": tc} if bf.nv else None,
        ex.n,
        params=p,
    )
    res.identity = dict(getattr(cand, "identity", None) or {})  # (audit/gate/identity.py)
    res.seconds = time.perf_counter() - t0
    return res


def sweep(
    targets,
    dtype="bf16",
    out_dtype="mxfp8_e4m3",
    compute="fp32",
    *,
    rule: str = "ocp",
    dist: str = "normal:std=1",
    elements: int = DEFAULT_ELEMENTS,
    seed: int = 0,
    params: dict | None = None,
) -> list[BlockResult]:
    from audit.targets.candidates import resolve

    bf = get_block_format(out_dtype, rule)
    in_fmt = element_format(dtype)
    cf = element_format(compute or "fp32")
    exh = str(dist).strip().lower() == "exhaustive"
    if exh and elements != DEFAULT_ELEMENTS:
        raise BadOptionError("--elements applies to sampled --blocks; --blocks exhaustive takes every input")
    x = None if exh else inputs(dist, elements, seed, in_fmt, bf.block)
    names = [targets] if isinstance(targets, str) else list(targets or [])
    names = [n.strip() for t in names for n in t.split(",") if n.strip()]
    out = []
    for c in resolve(names):
        if c.arity != 1:
            raise BadOptionError(f"{c.id}: block audits are for functions of one input")
        out.append(
            exhaustive(c, bf, in_fmt, cf, params) if exh else audit(c, bf, x, in_fmt, cf, params, dist)
        )
    return out


def document(results: list[BlockResult], **meta) -> dict:
    from audit._version import __version__

    return {"schema": SCHEMA, "actaudit": __version__, **meta, "results": [r.to_dict() for r in results]}
