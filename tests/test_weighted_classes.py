"""The weighted section in every result class (issue 40, item 2), worked out here.

Candidates whose results are NaN (gelu.tanh_exp, exp.schraudolph in E4M3), spurious
infinities (exp.cephes in E5M2), flushed zeros (gelu.tanh_exp in 8-bit compute),
correct overflows (exp.* and log.libm at 0), overflow misses with an infinite error
(log.fastlog at 0) and undefined inputs (log.* below 0) are swept under ``normal``,
``uniform``, ``laplace`` and ``npy:`` distributions, and EVERY key of their ``weighted``
section is compared with a computation made here, independent of the tool:

* the format's values and their rounding intervals from the definitions (p, emin, largest
  value of tests/helpers.py; midpoints of neighbours, +-0 split at 0, the overflow threshold
  max + ulp(max)/2 at both ends);
* each interval's mass in mpmath (the normal CDF ``mpmath.ncdf``, the laplace CDF, exact
  rationals for the uniform) and, for ``npy:``, the empirical frequency of the samples
  rounded to the format by ``helpers.round_exact`` (exact rationals, ties to even);
* each input's exact value f(x) in mpmath at 200 bits, RN_F(f(x)) by ``round_exact``, the
  result class, the ULP, absolute and relative errors from docs/concepts/definitions.md and
  audit/measure/metrics.py's text (not its code);
* each probability, each mean and weighted quantile over finite results only, and the mass
  outside the swept inputs from docs/concepts/weighted.md.

The results themselves (``got``) are the candidates' outputs: what is audited, not a figure
of the tool.  Each format is small (E4M3, E5M2: 254 and 248 finite inputs; fp16 over the
range [3.5, 4.5]: 385), so each case takes about half a second.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest

from audit.measure.sweep import sweep
from tests.helpers import PARAMS, round_exact, to_fraction

MP_PREC = 200


# --------------------------------------------------------------- the format, made here
@functools.cache
def values(name: str) -> tuple[float, ...]:
    """Every finite value of the format, ascending, -0.0 before +0.0 (floats: exact for
    these formats, k * 2^q with k < 2^p)."""
    p, emin, top = PARAMS[name]
    pos = [math.ldexp(k, emin - p + 1) for k in range(1, 2 ** (p - 1))]  # subnormals
    e = emin
    while not pos or pos[-1] < top:
        pos += [v for v in (math.ldexp(k, e - p + 1) for k in range(2 ** (p - 1), 2**p)) if v <= top]
        e += 1
    assert pos[-1] == top
    return (*(-v for v in reversed(pos)), -0.0, 0.0, *pos)


def ulp(name: str, v) -> Fraction:
    """ulp_F(v) = 2^(max(e, emin) - p + 1), e = floor(log2 |v|); ulp_F(0) = 2^(emin - p + 1)."""
    p, emin, _ = PARAMS[name]
    if v == 0:
        return Fraction(2) ** (emin - p + 1)
    a = abs(Fraction(v))
    e = a.numerator.bit_length() - a.denominator.bit_length()  # floor(log2 a) or one more
    if Fraction(2) ** e > a:
        e -= 1
    return Fraction(2) ** (max(e, emin) - p + 1)


@functools.cache
def intervals(name: str) -> tuple[tuple[float, float], ...]:
    """(lo, hi) of every value: midpoints with its neighbours (exact in float64 for formats
    of at most 16 bits), so (-s/2, 0) for -0 and (0, s/2) for +0, and the overflow
    threshold max + ulp(max)/2 beyond +-max."""
    vals = values(name)
    top = PARAMS[name][2]
    thr = float(top + ulp(name, top) / 2)
    mids = [(a + b) / 2 for a, b in zip(vals, vals[1:])]
    return tuple(zip([-thr, *mids], [*mids, thr]))


# ---------------------------------------------------------------- the distributions
class Normal:
    def __init__(self, mean, std):
        self.m, self.s = mp.mpf(mean), mp.mpf(std)

    def sf(self, x):  # P(X > x), precise in the upper tail
        return mp.ncdf(-(mp.mpf(x) - self.m) / self.s)

    def cdf(self, x):
        return mp.ncdf((mp.mpf(x) - self.m) / self.s)


class Laplace:
    def __init__(self, mean, scale):
        self.m, self.s = mp.mpf(mean), mp.mpf(scale)

    def sf(self, x):
        z = (mp.mpf(x) - self.m) / self.s
        return mp.exp(-z) / 2 if z >= 0 else 1 - mp.exp(z) / 2

    def cdf(self, x):
        z = (mp.mpf(x) - self.m) / self.s
        return mp.exp(z) / 2 if z < 0 else 1 - mp.exp(-z) / 2


class Uniform:
    def __init__(self, lo, hi):
        self.a, self.b = Fraction(lo), Fraction(hi)

    def mass(self, lo, hi):
        a = self.a if lo is None else max(Fraction(lo), self.a)
        b = self.b if hi is None else min(Fraction(hi), self.b)
        return max(b - a, Fraction(0)) / (self.b - self.a)


def continuous_mass(d, lo, hi):
    """P(lo < X < hi), lo = None for -inf, hi = None for +inf: exact rationals (uniform) or
    mpmath at 60 digits, from the side of the mean where no cancellation occurs."""
    if isinstance(d, Uniform):
        return d.mass(lo, hi)
    with mp.workdps(60):
        lo, hi = (None if v is None else mp.mpf(v) for v in (lo, hi))
        if lo is None:
            return d.cdf(hi)
        if hi is None:
            return d.sf(lo)
        if lo >= d.m:
            return d.sf(lo) - d.sf(hi)
        return d.cdf(hi) - d.cdf(lo)


class Empirical:
    """The samples of an npy: file rounded to the format here (round_exact: ties to even,
    a zero keeping the sample's sign), counted per value."""

    def __init__(self, name, samples):
        self.total = len(samples)
        self.counts: dict = {}  # (value, sign bit) -> count: -0 and +0 apart
        self.nonfinite = {"nan": 0, "inf": 0, "-inf": 0}
        self.over_neg = self.over_pos = 0
        for s in samples.tolist():
            if math.isnan(s):
                self.nonfinite["nan"] += 1
                continue
            if math.isinf(s):
                self.nonfinite["inf" if s > 0 else "-inf"] += 1
                continue
            r = round_exact(name, Fraction(s))
            if r is None:  # beyond the overflow threshold
                if s < 0:
                    self.over_neg += 1
                else:
                    self.over_pos += 1
                continue
            key = (float(r), r < 0 or (r == 0 and math.copysign(1, s) < 0))
            self.counts[key] = self.counts.get(key, 0) + 1


# ------------------------------------------------------------------ exact results
def exact(ref: str, x: Fraction):
    """f(x) in mpmath at 200 bits: an mpf, +-inf, or None where f is not real."""
    with mp.workprec(MP_PREC):
        v = mp.mpf(x.numerator) / x.denominator
        if ref == "exp":
            return mp.exp(v)
        if ref == "log":
            if v < 0:
                return None  # log of a negative number: undefined
            return mp.mpf("-inf") if v == 0 else mp.log(v)
        if ref == "gelu":
            return v / 2 * mp.erfc(-v / mp.sqrt(2))  # (1 + erf cancels for x < 0)
    raise AssertionError(ref)


def to_fraction_mp(q: Fraction):
    return mp.mpf(q.numerator) / q.denominator


FINITE, OVERFLOW_OK, NAN, INF, OVERFLOW_MISS, UNDEFINED = range(6)
NAN_OVERFLOW = {"fp8_e4m3"}  # E4M3FN: no infinities, overflow goes to NaN


def classify(name: str, f, got: float):
    """(class, correct, flushed, ulp, abs, rel errors) of result ``got`` for exact f, from
    the definitions (docs/concepts/definitions.md, metrics.py's module text)."""
    if f is None:  # undefined: RN_F(f) is NaN; correct only where the result is NaN
        return UNDEFINED, math.isnan(got), False, None
    if mp.isinf(f):
        rn = math.nan if name in NAN_OVERFLOW else float(f)
    else:
        r = round_exact(name, to_fraction(f))
        rn = (math.nan if name in NAN_OVERFLOW else math.copysign(math.inf, f)) if r is None else float(r)
    correct = got == rn or (math.isnan(got) and math.isnan(rn))
    flushed = got == 0 and rn != 0 and not math.isnan(rn)
    if not math.isfinite(got):
        cls = OVERFLOW_OK if correct else (NAN if math.isnan(got) else INF)
        return cls, correct, flushed, None
    cls = FINITE if math.isfinite(rn) else OVERFLOW_MISS
    with mp.workprec(MP_PREC):
        if mp.isinf(f):  # a finite result of an infinite exact value (log at 0)
            return cls, correct, flushed, (math.inf, math.inf, 1.0)
        err = abs(mp.mpf(got) - f)
        u = err / mp.mpf(to_fraction_mp(ulp(name, to_fraction(f))))
        ulp_err = min(float(u), 0.5) if correct else float(u)
        if f == 0:
            rel = 0.0 if got == 0 else math.inf
        else:
            rel = float(err / abs(f))
        return cls, correct, flushed, (ulp_err, float(err), rel)


# ------------------------------------------------------------- the expected section
def mfloat(v) -> float:
    return float(v) if isinstance(v, Fraction) else float(mp.mpf(v))


def weighted_quantile(pairs, num, den):
    """Smallest e with (mass of errors <= e) >= num/den * (mass of all), over (mass, e)."""
    pairs = sorted((e, m) for m, e in pairs if m > 0)
    if not pairs:
        return math.nan
    with mp.workdps(60):
        total = sum(m for _, m in pairs)
        cum = 0
        for i, (e, m) in enumerate(pairs):
            cum += m
            if (i + 1 == len(pairs) or pairs[i + 1][0] != e) and cum * den >= total * num:
                return e
    raise AssertionError("unreachable: the whole mass reaches every q <= 1")


def expected(name: str, ref: str, xs: np.ndarray, got: np.ndarray, dist, label: str) -> dict:
    """The weighted section of a result over the swept inputs xs (ascending, -0 before +0)
    with results got, computed from the definitions alone."""
    vals = values(name)
    edges = intervals(name)
    index = {(v, math.copysign(1, v) < 0): i for i, v in enumerate(vals)}
    sel = [index[(x, math.copysign(1, x) < 0)] for x in xs.tolist()]
    assert sel == list(range(sel[0], sel[0] + len(sel))), "the swept inputs are contiguous"
    if isinstance(dist, Empirical):
        mass = [
            Fraction(dist.counts.get((vals[i], math.copysign(1, vals[i]) < 0), 0), dist.total) for i in sel
        ]
    else:
        # masses below float64's range are 0 (docs/concepts/weighted.md): they do not enter
        mass = [m if mfloat(m) != 0 else 0 for m in (continuous_mass(dist, *edges[i]) for i in sel)]
    with mp.workdps(60):
        swept = sum(mass)
    per = {c: 0 for c in range(6)}
    correct = flushed = 0
    sums = [0, 0, 0]  # of mass * error: exact rationals, or mpf at 60 digits for mpf masses
    infinite = [False, False, False]  # an infinite error of a finite result of mass > 0
    fin = []
    for m, x, g in zip(mass, xs.tolist(), got.tolist()):
        cls, ok, fl, errs = classify(name, exact(ref, Fraction(x)), g)
        per[cls] += m
        correct += m if ok else 0
        flushed += m if fl else 0
        if cls in (FINITE, OVERFLOW_MISS) and m > 0:  # inputs of mass 0 do not enter
            fin.append((m, errs[0]))
            for k in range(3):
                if math.isinf(errs[k]):
                    infinite[k] = True
                elif isinstance(m, Fraction):
                    sums[k] += m * Fraction(errs[k])
                else:
                    with mp.workdps(60):
                        sums[k] += m * mp.mpf(errs[k])
    fin_mass = per[FINITE] + per[OVERFLOW_MISS]
    first, last = sel[0], sel[-1]
    top = PARAMS[name][2]
    thr = float(top + ulp(name, top) / 2)
    if isinstance(dist, Empirical):
        t = dist.total
        below = sum(c for (v, s), c in dist.counts.items() if index[(v, s)] < first) + dist.over_neg
        above = sum(c for (v, s), c in dist.counts.items() if index[(v, s)] > last) + dist.over_pos
        nf = sum(dist.nonfinite.values())
        out = {
            "below": Fraction(below, t),
            "above": Fraction(above, t),
            "overflow": Fraction(dist.over_neg + dist.over_pos, t),
            "nonfinite": Fraction(nf, t),
            "outside": Fraction(below + above + nf, t),
        }
    else:
        below = continuous_mass(dist, None, edges[first][0])
        above = continuous_mass(dist, edges[last][1], None)
        over = continuous_mass(dist, None, -thr) + continuous_mass(dist, thr, None)
        out = {"below": below, "above": above, "overflow": over, "outside": below + above}

    def mean(k):  # over finite results; an infinite error makes it inf
        if not fin_mass:
            return math.nan
        if infinite[k]:
            return math.inf
        with mp.workdps(60):
            return mfloat(sums[k] / fin_mass)

    doc = {
        "distribution": label,
        "mass": {"swept": mfloat(swept), **{k: mfloat(v) for k, v in out.items()}},
        "finite": mfloat(fin_mass / swept),
        "mean_ulp": mean(0),
        "p99_ulp": weighted_quantile(fin, 99, 100),
        "p999_ulp": weighted_quantile(fin, 999, 1000),
        "correctly_rounded": mfloat(correct / swept),
        "nan": mfloat(per[NAN] / swept),
        "inf": mfloat(per[INF] / swept),
        "underflow": mfloat(flushed / swept),
        "overflow_ok": mfloat(per[OVERFLOW_OK] / swept),
        "undefined": mfloat(per[UNDEFINED] / swept),
        "mean_abs": mean(1),
        "mean_rel": mean(2),
    }
    doc["_classes"] = {c for c in range(6) if per[c]} | ({"flush"} if flushed else set())
    doc["mass"]["overflow_to"] = "nan" if name in NAN_OVERFLOW else "inf"
    if isinstance(dist, Empirical):
        doc["mass"]["samples"] = dist.total
        doc["mass"]["nonfinite_samples"] = dict(dist.nonfinite)
    return doc


def close(got, want, path):
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), (path, sorted(got), sorted(want))
        for k in want:
            close(got[k], want[k], f"{path}.{k}")
        return
    if isinstance(want, str) or isinstance(want, int) and not isinstance(want, bool):
        assert got == want, (path, got, want)
        return
    got = float(got)  # (the JSON's 'nan' and 'inf')
    if math.isnan(want):
        assert math.isnan(got), (path, got)
    elif want == 0:
        assert got == 0, (path, got)
    else:
        assert got == pytest.approx(want, rel=1e-10), (path, got, want)


# ------------------------------------------------------------------------ the cases
# (candidate, reference, dtype, compute, range): what each puts mass on, seen in its counts
CASES = {
    "fp8_e4m3": [
        ("gelu.tanh_exp", "gelu", "fp8_e4m3", None),  # NaN (inf/inf in E4M3: NaN), flushed zeros
        ("exp.schraudolph", "exp", "fp32", None),  # NaN, overflow_ok, overflow_miss
        ("log.libm", "log", "fp8_e4m3", None),  # undefined (x < 0), overflow_ok (NaN at +-0)
    ],
    "fp8_e5m2": [
        ("exp.cephes", "exp", "fp8_e5m2", None),  # spurious inf, overflow_ok
        ("exp.schraudolph", "exp", "fp32", None),  # inf, overflow_ok, overflow_miss, flush
        ("log.fastlog", "log", "fp32", None),  # undefined, a finite result at 0: inf error
        ("gelu.tanh_exp", "gelu", "fp8_e5m2", None),  # NaN, flushed zeros
    ],
    "fp16": [
        ("gelu.tanh_exp", "gelu", "fp16", (3.5, 4.5)),  # NaN from x = 4.03125; mass below and above
    ],
}
DISTRIBUTIONS = {
    "normal": ("normal:std=4,mean=0.5", "normal:std=4.0,mean=0.5", lambda: Normal(0.5, 4)),
    "uniform": ("uniform:lo=-3,hi=24", "uniform:lo=-3.0,hi=24.0", lambda: Uniform(-3, 24)),
    "laplace": ("laplace:scale=2,mean=-0.25", "laplace:scale=2.0,mean=-0.25", lambda: Laplace(-0.25, 2)),
}


def npy_samples():
    """Draws of N(0.5, 3^2) and Laplace(4, 1.5) with every kind a file may hold besides: NaN, +-inf, values
    beyond the format's range on both sides (overflow), a tiny negative that rounds to -0, exactly 0,
    800 (exp(800) is beyond float64: an infinite absolute error enters mean_abs in E5M2), 20 and 100
    (exp.cephes' spurious inf in E5M2, exp.schraudolph's finite results of overflowing values)."""
    g = np.random.default_rng(40)
    extra = [math.nan, math.nan, math.inf, -math.inf, 1e6, -2e6, -3e6, -1e-12, 0.0, 800.0, 12.0, 20.0, 100.0]
    return np.concatenate([g.normal(0.5, 3, 1500), g.laplace(4, 1.5, 500), extra])


def run_case(dtype, dist_key, tmp_path):
    import hashlib

    out = []
    if dist_key == "npy":
        s = npy_samples()
        np.save(tmp_path / "acts.npy", s)
        spec = label = f"npy:{tmp_path / 'acts.npy'}"
        d = Empirical(dtype, s)
        # bound to the sample (dtype, shape, bytes as saved), never to its path
        ident = "npy:sha256:" + hashlib.sha256(f"{s.dtype.str}{s.shape}".encode() + s.tobytes()).hexdigest()
    else:
        spec, label, make = DISTRIBUTIONS[dist_key]
        d = make()
        ident = label
    for cand, ref, compute, rng in CASES[dtype]:
        (r,) = sweep(cand, dtype, compute, range=rng, distribution=spec, keep_points=True, analyze=False)
        pts = r.points
        with mp.workdps(60):
            want = expected(dtype, ref, pts.x, pts.got, d, label)
        got = r.to_dict()["weighted"]
        classes = want.pop("_classes")
        want["distribution_id"] = ident
        close(got, want, f"{cand}/{dtype}/{compute}/{dist_key}")
        out.append((cand, want, classes))
    return out


# the classes each format's cases put mass on, under every distribution (E4M3FN has no
# infinities: no spurious inf there; uniform on [-3, 24] reaches no overflow miss in E4M3)
COVERED = {
    "fp8_e4m3": {FINITE, OVERFLOW_OK, NAN, UNDEFINED, "flush"},
    "fp8_e5m2": {FINITE, OVERFLOW_OK, NAN, INF, OVERFLOW_MISS, UNDEFINED, "flush"},
    "fp16": {FINITE, NAN},
}


@pytest.mark.parametrize("dist_key", ["normal", "uniform", "laplace", "npy"])
@pytest.mark.parametrize("dtype", ["fp8_e4m3", "fp8_e5m2", "fp16"])
def test_every_key_of_the_weighted_section_in_every_class(dtype, dist_key, tmp_path):
    seen = run_case(dtype, dist_key, tmp_path)
    # the cases put mass where they are meant to (else the comparison proves less)
    covered = set().union(*(c for _, _, c in seen))
    assert covered >= COVERED[dtype] | (
        {OVERFLOW_MISS} if dtype == "fp8_e4m3" and dist_key != "uniform" else set()
    )
    w = {c: doc for c, doc, _ in seen}
    if dtype == "fp8_e5m2":
        assert w["log.fastlog"]["mean_ulp"] == math.inf  # the finite result at 0, exact -inf
    if dtype == "fp16":  # the range [3.5, 4.5]: mass below and above it
        assert w["gelu.tanh_exp"]["mass"]["below"] > 0 and w["gelu.tanh_exp"]["mass"]["above"] > 0
    if dist_key == "npy":  # overflow on both sides: in below and above, and in overflow
        m = w[CASES[dtype][0][0]]["mass"]
        assert m["overflow"] > 0 and m["nonfinite"] > 0
        assert m["outside"] == pytest.approx(m["below"] + m["above"] + m["nonfinite"], rel=1e-15)
