"""audit/measure/blocks.py: MX and NVFP4 block audits, block scales and element codes.

They kill mutants that mutmut found surviving the rest of the suite, each with an expectation
worked in the test (docs/design/mutation-testing.md)."""

# ---- formats, rounding, scales (first half of blocks.py)
from __future__ import annotations  # noqa: E402  (after the docstring only)

import math  # noqa: E402
import os  # noqa: E402
import warnings  # noqa: E402
from fractions import Fraction  # noqa: E402
from fractions import Fraction as Q  # noqa: E402

import mpmath as mp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from audit.errors import BadFileError, BadOptionError  # noqa: E402
from audit.measure import blocks  # noqa: E402
from audit.numbers.formats import FORMATS  # noqa: E402

# The element formats from their definitions (OCP MX v1.0 table 1 and the OCP FP8 spec):
# (exponent bits, mantissa bits, bias, largest finite value, emax of the largest normal).
SPEC = {
    "fp8_e4m3": (4, 3, 7, 448.0, 8),
    "fp8_e5m2": (5, 2, 15, 57344.0, 15),
    "fp6_e3m2": (3, 2, 3, 28.0, 4),
    "fp6_e2m3": (2, 3, 1, 7.5, 2),
    "fp4_e2m1": (2, 1, 1, 6.0, 2),
}
MX_ELEM = {
    "mxfp8_e4m3": "fp8_e4m3",
    "mxfp8_e5m2": "fp8_e5m2",
    "mxfp6_e3m2": "fp6_e3m2",
    "mxfp6_e2m3": "fp6_e2m3",
    "mxfp4_e2m1": "fp4_e2m1",
}


def grid(name: str) -> list[Fraction]:
    """Every value >= 0 of the element format, ascending, built from its bit fields (the
    list index is the encoding's ordinal, so an even index is an even mantissa)."""
    eb, mb, bias, vmax, _ = SPEC[name]
    out = [Fraction(m, 2**mb) * Fraction(2) ** (1 - bias) for m in range(2**mb)]
    for e in range(1, 2**eb):
        out += [Fraction(2**mb + m, 2**mb) * Fraction(2) ** (e - bias) for m in range(2**mb)]
    return [v for v in out if v <= Fraction(vmax)]


GRIDS = {name: grid(name) for name in SPEC}


def frac(x) -> Fraction:
    if isinstance(x, mp.mpf):
        m, e = mp.frexp(x)
        with mp.workprec(2000):
            return Fraction(int(mp.ldexp(m, 1500))) * Fraction(2) ** (int(e) - 1500)
    return Fraction(float(x))


def rne(name: str, q: Fraction) -> Fraction:
    """RN_E(q), ties to the even encoding, saturating at the largest value (sign kept)."""
    g = GRIDS[name]
    a = abs(q)
    if a >= g[-1]:
        r = g[-1]
    else:
        i = max(j for j in range(len(g)) if g[j] <= a)
        lo, hi = g[i], g[i + 1]
        r = lo if a - lo < hi - a else hi if a - lo > hi - a else (lo if i % 2 == 0 else hi)
    return -r if q < 0 else r


def ceil_e(name: str, q: Fraction) -> Fraction:
    """The smallest value of the format >= q >= 0, saturating at the largest."""
    return next((v for v in GRIDS[name] if v >= q), GRIDS[name][-1])


def as_float(r: Fraction, neg: bool) -> float:
    v = float(r)
    return -0.0 if (v == 0 and neg) else v


def same(got, want) -> bool:
    """Equal values, NaN where NaN, and the sign of zero."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    return got.shape == want.shape and bool(
        np.all((got == want) & (np.signbit(got) == np.signbit(want)) | (np.isnan(got) & np.isnan(want)))
    )


def floor_log2(a: Fraction) -> int:
    e = a.numerator.bit_length() - a.denominator.bit_length()
    return e if Fraction(2) ** e <= a else e - 1


def k_ocp(name: str, a: Fraction) -> float:
    return float(max(-127, min(127, floor_log2(a) - SPEC[name][4]))) if a else -127.0


def k_ceil(name: str, a: Fraction) -> float:
    if not a:
        return -127.0
    k = floor_log2(a / Fraction(SPEC[name][3])) - 1
    while a > Fraction(SPEC[name][3]) * Fraction(2) ** k:
        k += 1
    return float(max(-127, min(127, k)))


# ------------------------------------------------------------ format names and rules
def test_block_format_names_rules_and_messages():
    for key, elem in MX_ELEM.items():
        for spelled in (key, key.upper(), f"  {key} "):
            bf = blocks.get_block_format(spelled)
            assert (bf.name, bf.elem.name, bf.block, bf.rule, bf.nv) == (key, elem, 32, "ocp", False)
        assert blocks.get_block_format(key, "ceil").rule == "ceil"
        assert blocks.is_block(key.upper()) and blocks.is_block(f" {key} ")
    for spelled in ("nvfp4", " NVFP4 "):
        bf = blocks.get_block_format(spelled, "ceil")
        assert (bf.name, bf.elem.name, bf.block, bf.rule, bf.nv) == ("nvfp4", "fp4_e2m1", 16, "ceil", True)
        assert blocks.get_block_format(spelled).rule == "ocp"
        assert blocks.is_block(spelled)
    for name in (None, "fp8_e4m3", "mxfp9", "", "nvfp8"):
        assert blocks.is_block(name) is False
    known = "mxfp8_e4m3, mxfp8_e5m2, mxfp6_e3m2, mxfp6_e2m3, mxfp4_e2m1, nvfp4"
    with pytest.raises(BadOptionError) as e:
        blocks.get_block_format("MXFP9")
    assert str(e.value) == f"unknown block format 'MXFP9' (known: {known})"
    with pytest.raises(BadOptionError) as e:
        blocks.get_block_format("mxfp8_e4m3", "floor")
    assert str(e.value) == "unknown scale rule 'floor' (known: ocp, ceil)"
    with pytest.raises(BadOptionError) as e:
        blocks.get_block_format("nvfp4", "OCP")
    assert str(e.value) == "unknown scale rule 'OCP' (known: ocp, ceil)"


# ------------------------------------------------------------------- element rounding
def test_elem_round_ties_saturation_signs():
    for name in SPEC:
        E = FORMATS[name]
        g = GRIDS[name]
        vmax = g[-1]
        mids = [(g[i] + g[i + 1]) / 2 for i in range(len(g) - 1)]
        qs = [0.0, -0.0, float(vmax), -float(vmax), float(vmax) * 1.01, -float(vmax) * 1.01, 1e300]
        qs += [float(m) for m in mids] + [-float(m) for m in mids]
        qs += [float(np.nextafter(float(m), np.inf)) for m in mids] + [
            float(np.nextafter(float(m), 0)) for m in mids
        ]
        qs += [float(vmax + (vmax - g[-2]) / 2), 2.0**-30, -(2.0**-30)]
        want = [as_float(rne(name, Fraction(q)), math.copysign(1, q) < 0) for q in qs]
        got = blocks.elem_round(E, np.array(qs))
        assert same(got, want), name
        got = blocks.elem_round(E, np.array([np.inf, -np.inf, np.nan]))
        assert same(got, [float(vmax), -float(vmax), np.nan])


def test_elem_round_mpf_saturates_with_sign():
    for name in ("fp8_e4m3", "fp8_e5m2", "fp4_e2m1"):
        E = FORMATS[name]
        g = GRIDS[name]
        vmax = g[-1]
        with mp.workprec(300):
            vals = [mp.mpf(1.3), -mp.mpf(1.3), mp.mpf(2) ** -40, -(mp.mpf(2) ** -40), mp.mpf(10) ** 6]
            vals += [-(mp.mpf(10) ** 6), mp.mpf(float(vmax)), (vmax + (vmax - g[-2]) / 2)]
            vals = [mp.mpf(v.numerator) / v.denominator if isinstance(v, Fraction) else v for v in vals]
            vals += [vals[-1] * (1 + mp.mpf(2) ** -200), vals[-1] * (1 - mp.mpf(2) ** -200)]
            for v in vals:
                want = as_float(rne(name, frac(v)), v < 0)
                assert same([blocks._elem_round_mpf(E, v)], [want]), (name, v)


def _long_d_case(m: float, above: bool):
    """(y, d): a float64 quotient y / d that lands exactly on the midpoint m while the
    exact quotient lies just above (or below) it, d with a full 53-bit significand."""
    d = 1.0 + 2.0**-52
    while True:
        md = m * d
        for k in range(1, 6):
            y = md
            for _ in range(k):
                y = float(np.nextafter(y, np.inf if above else -np.inf))
            exact_above = Fraction(y) / Fraction(d) > Fraction(m)
            if y / d == m and exact_above == above and (y > md if above else y < md):
                return y, d
        d = float(np.nextafter(d, np.inf)) + 2.0**-40


def test_div_round_exact_quotients():
    E = FORMATS["fp4_e2m1"]
    cases = []
    # exact ties: even below (1.25 -> 1, 5 -> 4) and even above (0.75 -> 1, 1.75 -> 2)
    for m in (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0):
        for d in (3.0, 0.375, 6.0 * float(np.float32(1 / 6)), 2.0**-7):
            for y in (m * d, float(np.nextafter(m * d, np.inf)), float(np.nextafter(m * d, -np.inf))):
                cases += [(y, d), (-y, d)]
    # quotients that float64 rounds onto the midpoint (a long d): decided by y against m * d
    for m in (1.25, 0.75, 2.5, 3.5):
        for above in (True, False):
            y, d = _long_d_case(m, above)
            cases += [(y, d), (-y, d)]
    cases += [(0.0, 3.0), (-0.0, 3.0), (1e300, 1e-10), (-1e300, 1e-10), (7.0, 1.0), (1.0, 6.0)]
    y = np.array([c[0] for c in cases])
    d = np.array([c[1] for c in cases])
    want = [as_float(rne("fp4_e2m1", Fraction(a) / Fraction(b)), math.copysign(1, a) < 0) for a, b in cases]
    assert same(blocks.div_round(E, y, d), want)
    # shapes: a (blocks, B) array against one scalar divisor and against per-row ones
    y2 = y[:40].reshape(4, 10)
    assert same(
        blocks.div_round(E, y2, d[0]),
        [
            [as_float(rne("fp4_e2m1", Fraction(a) / Fraction(d[0])), math.copysign(1, a) < 0) for a in row]
            for row in y2.tolist()
        ],
    )
    dd = np.broadcast_to(d[:4, None], (4, 10))
    assert same(
        blocks.div_round(E, y2, dd),
        [
            [as_float(rne("fp4_e2m1", Fraction(a) / Fraction(b)), math.copysign(1, a) < 0) for a in row]
            for row, b in zip(y2.tolist(), d[:4].tolist())
        ],
    )


# ------------------------------------------------------------------- the MX exponent
def _amax_table(name: str) -> list[float]:
    vmax = SPEC[name][3]
    out = [0.0, 1.0, 1.9, 0.5, 2.0**-119, 2.0**-120, 2.0**-200, 5e-324, 2.0**134, 2.0**135, 2.0**136]
    out += [1.7976931348623157e308, 16.0, float(np.nextafter(16.0, 0)), float(np.nextafter(16.0, np.inf))]
    for j in (-130, -126, -3, 0, 1, 5, 120, 126, 127, 128):
        b = vmax * 2.0**j
        out += [b, float(np.nextafter(b, 0)), float(np.nextafter(b, np.inf)), b * 1.01, b * 0.99]
    return out


def test_mx_exponent_both_rules_every_format():
    for key, name in MX_ELEM.items():
        amax = _amax_table(name)
        for rule, kf in (("ocp", k_ocp), ("ceil", k_ceil)):
            bf = blocks.get_block_format(key, rule)
            got = blocks.mx_exponent(bf, np.array(amax + [np.nan, np.inf]))
            assert got.dtype == np.float64
            want = [kf(name, Fraction(a)) for a in amax] + [np.nan, np.nan]
            assert same(got, want), (key, rule)


class _Bounded(mp.mpf):
    """An mpmath number that refuses to be compared more than 64 times (a scale rule
    takes a step or two, never a search)."""

    calls = 0

    def _count(self):
        type(self).calls += 1
        if type(self).calls > 64:
            raise AssertionError("the scale rule does not terminate")

    def __gt__(self, other):
        self._count()
        return mp.mpf(self) > other

    def __ge__(self, other):
        self._count()
        return mp.mpf(self) >= other

    def __lt__(self, other):
        self._count()
        return mp.mpf(self) < other

    def __le__(self, other):
        self._count()
        return mp.mpf(self) <= other


def test_mx_exponent_mpf_exact_maxima():
    with mp.workprec(400):
        for key, name in MX_ELEM.items():
            vmax = mp.mpf(SPEC[name][3])
            vals = [
                mp.mpf(1.9),
                mp.mpf(0),
                mp.mpf(1),
                mp.mpf(16),
                16 * (1 - mp.mpf(6.4e-58)),
                16 * (1 + mp.mpf(1e-60)),
            ]
            vals += [
                mp.mpf(2) ** -119,
                mp.mpf(2) ** -120,
                mp.mpf(2) ** -3000,
                mp.mpf(2) ** 136,
                mp.mpf(2) ** 5000,
            ]
            for j in (-3, 0, 1, 7, 126, 127):
                b = vmax * mp.mpf(2) ** j
                vals += [b, b * (1 + mp.mpf(2) ** -300), b * (1 - mp.mpf(2) ** -300), b * 2 / 3]
            for rule, kf in (("ceil", k_ceil), ("ocp", k_ocp)):
                bf = blocks.get_block_format(key, rule)
                for v in vals:
                    _Bounded.calls = 0
                    got = blocks.mx_exponent_mpf(bf, _Bounded(v))
                    assert type(got) is float and got == kf(name, frac(v)), (key, rule, v)
    # GELU(16) = 16 (1 - 6.4e-58): the exact maximum gives the smaller scale, 2^(3 - 8)
    bf = blocks.get_block_format("mxfp8_e4m3")
    with mp.workprec(300):
        g16 = 16 * (1 + mp.erf(16 / mp.sqrt(2))) / 2
        assert g16 < 16 and blocks.mx_exponent_mpf(bf, g16) == -5.0
    assert blocks.mx_exponent(bf, np.array([16.0]))[0] == -4.0


# ------------------------------------------------------------------- NVFP4's scales
T6 = float(np.float32(1 / 6))


def _q_table(t: float) -> list[float]:
    den = Fraction(6) * Fraction(t)
    g = GRIDS["fp8_e4m3"]
    out = [0.0, float(448 * 2 * den), float(464 * den), float(449 * den), 1e300]
    for i in (1, 2, 7, 8, 9, 40, 63, 64, 100, 124, 125):
        for q in (g[i], (g[i] + g[i + 1]) / 2, g[i] * Fraction(1001, 1000)):
            y = float(q * den)
            out += [y, float(np.nextafter(y, 0)), float(np.nextafter(y, np.inf))]
    out += [float(Fraction(2) ** -10 * den), float(Fraction(2) ** -11 * den), float(Fraction(3, 2**11) * den)]
    return out


def test_nv_scale_both_rules():
    for t in (1.0, T6, 2.0**-10, float(np.float32(0.3))):
        amax = _q_table(t)
        den = Fraction(6) * Fraction(t)
        for rule, f in (("ocp", rne), ("ceil", ceil_e)):
            bf = blocks.get_block_format("nvfp4", rule)
            got = blocks.nv_scale(bf, np.array(amax + [np.nan, np.inf]), t)
            want = [float(f("fp8_e4m3", Fraction(a) / den)) for a in amax] + [np.nan, np.nan]
            assert same(got, want), (t, rule)


def test_nv_scale_q_exact_quotients():
    g = GRIDS["fp8_e4m3"]
    with mp.workprec(300):
        qs = [mp.mpf(0), mp.mpf(1.05), mp.mpf(1), mp.mpf(449), mp.mpf(464), mp.mpf(1000), mp.mpf(2) ** -12]
        for i in (1, 7, 8, 63, 64, 124, 125, 126):
            v = mp.mpf(g[i].numerator) / g[i].denominator
            qs += [v, v * (1 + mp.mpf(2) ** -200), v * (1 - mp.mpf(2) ** -200)]
            if i < 126:
                m = (g[i] + g[i + 1]) / 2
                mv = mp.mpf(m.numerator) / m.denominator
                qs += [mv, mv * (1 + mp.mpf(2) ** -200), mv * (1 - mp.mpf(2) ** -200)]
        qs.append(mp.mpf(464) * (1 + mp.mpf(2) ** -200))
        for rule, f in (("ocp", rne), ("ceil", ceil_e)):
            bf = blocks.get_block_format("nvfp4", rule)
            for q in qs:
                assert blocks.nv_scale_q(bf, q) == float(f("fp8_e4m3", frac(q))), (rule, q)


def test_tensor_scale():
    # T = RN_fp32(amax / 2688), 1 when the tensor is all zero (or its maximum not a number)
    def rn32(q: Fraction) -> float:
        lo = float(np.float32(float(q)))  # a neighbour candidate, checked exactly below
        cands = [
            lo,
            float(np.nextafter(np.float32(lo), np.float32(np.inf))),
            float(np.nextafter(np.float32(lo), np.float32(-np.inf))),
        ]
        best = min(cands, key=lambda c: (abs(Fraction(c) - q), int(np.float32(c).view(np.uint32)) & 1))
        return best

    amaxes = [1.0, 0.5, 448.0, 3.0e38, 1e-30, 2688.0, 1e-40]
    for a in list(amaxes):
        amaxes += [float(np.nextafter(a, np.inf)), float(np.nextafter(a, 0))]
    for a in amaxes:
        assert blocks.tensor_scale(a) == rn32(Fraction(a) / 2688), a
    for a in (0.0, -0.0, float("nan"), -1.0):
        assert blocks.tensor_scale(a) == 1.0
    with mp.workprec(200):
        for a in amaxes:
            q = mp.mpf(a) / 2688
            assert blocks.tensor_scale_q(q) == rn32(frac(q)), a
        q1 = mp.mpf(1) + mp.mpf(2) ** -100  # just above 1: RN_fp32 is 1
        assert blocks.tensor_scale_q(mp.mpf(1)) == 1.0 and blocks.tensor_scale_q(q1) == 1.0
        assert blocks.tensor_scale_q(mp.mpf(0)) == 1.0


# ------------------------------------------------------------------ quantizing blocks
def _mx_expect(key: str, rule: str, y: np.ndarray):
    name = MX_ELEM[key]
    kf = k_ocp if rule == "ocp" else k_ceil
    scales, elems = [], []
    for row in y.tolist():
        if not all(math.isfinite(v) for v in row):
            scales.append(np.nan)
            elems.append([np.nan] * len(row))
            continue
        k = kf(name, max(abs(Fraction(v)) for v in row))
        X = Fraction(2) ** int(k)
        scales.append(float(X))
        elems.append([as_float(rne(name, Fraction(v) / X), math.copysign(1, v) < 0) for v in row])
    return np.array(scales), np.array(elems)


def test_quantize_mx_hand_worked_blocks():
    below16 = float(np.nextafter(16.0, 0))
    b1 = [below16, -below16 / 3, 1.0, -0.0, 0.0, 2.0**-20, -(2.0**-20), 15.5] + [0.1 * i for i in range(24)]
    b2 = [1.9, 1.8125, 1.75, -1.9, -1.8125, 2.0**-20, -(2.0**-20), 1.0] + [-0.05 * i for i in range(24)]
    b3 = [0.0] * 16 + [-0.0] * 16
    b4 = [1.0, np.nan] + [0.5] * 30
    b5 = [1.0, -np.inf] + [0.5] * 30
    b6 = [448.0 * 2.0**-3, float(np.nextafter(448.0 * 2.0**-3, np.inf))] + [3.0] * 30
    y = np.array([b1, b2, b3, b4, b5, b6])
    for key in MX_ELEM:
        for rule in ("ocp", "ceil"):
            bf = blocks.get_block_format(key, rule)
            q = blocks.quantize(bf, y)
            X, el = _mx_expect(key, rule, y)
            assert same(q.scale, X), (key, rule)
            assert same(q.elems, el), (key, rule)
            assert same(q.values, el * X[:, None]), (key, rule)
            assert q.tensor_scale == 1.0 and q.below is None
    q = blocks.quantize(blocks.get_block_format("mxfp8_e4m3"), y)
    assert q.scale[0] == 2.0**-5 and q.elems[0, 0] == 448.0  # 16 (1 - 2^-53) / 2^-5 saturates
    assert q.scale[2] == 2.0**-127 and q.elems[1, 1] == 448.0  # 464 ties to 448, not to NaN


def _nv_expect(rule: str, y: np.ndarray):
    rows = y.tolist()
    fin = [max(abs(Fraction(v)) for v in row) for row in rows if all(math.isfinite(v) for v in row)]
    amax_t = max(fin) if fin else Fraction(0)
    t = float(np.float32(float(amax_t / 2688))) if amax_t else 1.0
    assert amax_t == 0 or abs(Fraction(t) - amax_t / 2688) <= abs(
        Fraction(float(np.nextafter(np.float32(t), np.float32(np.inf)))) - amax_t / 2688
    )
    scales, elems = [], []
    for row in rows:
        if not all(math.isfinite(v) for v in row):
            scales.append(np.nan)
            elems.append([np.nan] * len(row))
            continue
        a = max(abs(Fraction(v)) for v in row)
        q = a / (6 * Fraction(t))
        s = rne("fp8_e4m3", q) if rule == "ocp" else ceil_e("fp8_e4m3", q)
        scales.append(float(s))
        if s == 0:
            elems.append([0.0] * len(row))
        else:
            elems.append(
                [
                    as_float(rne("fp4_e2m1", Fraction(v) / (s * Fraction(t))), math.copysign(1, v) < 0)
                    for v in row
                ]
            )
    return t, np.array(scales), np.array(elems)


def test_quantize_nvfp4_hand_worked_blocks():
    big = [300.0, -20.0, 1.0, -0.0] + [5.0 * i for i in range(12)]
    t = float(np.float32(300.0 / 2688))
    tie = [6 * t, t * 0.25, -t * 0.75, t * 1.25, t * 2.5, -t * 5.0, t * 1.75, t * 3.5] + [
        0.1 * t
    ] * 8  # S = 1
    tiny = [1e-6, -1e-6] + [0.0] * 14  # amax / (6 T) below 2^-10: S = 0, a block of zeros
    nanb = [1.0, np.nan] + [0.0] * 14
    infb = [np.inf, 1.0] + [0.0] * 14
    mid = [t * 6 * 2.25 * 0.75] + [0.2 * i for i in range(15)]
    for rows in ([big, tie, tiny, nanb, infb, mid], [tiny, [0.0] * 16], [nanb, infb], [[0.0] * 16]):
        y = np.array(rows)
        for rule in ("ocp", "ceil"):
            bf = blocks.get_block_format("nvfp4", rule)
            q = blocks.quantize(bf, y)
            t, s, el = _nv_expect(rule, y)
            assert q.tensor_scale == t, rule
            assert same(q.scale, s), rule
            zero = s == 0
            assert np.all(q.elems[zero] == 0) and same(q.elems[~zero], el[~zero]), rule
            vals = q.values
            assert np.all(vals[zero] == 0) and same(vals[~zero], (el * (s * t)[:, None])[~zero]), rule
    q = blocks.quantize(blocks.get_block_format("nvfp4"), np.array([big, tie]))
    assert q.scale[1] == 1.0 and q.tensor_scale == float(np.float32(300 / 2688))


# ---------------------------------------------------------------------------- inputs
def test_parse_dist_values_and_messages():
    good = {
        "normal:std=2": ("normal", 0.0, 2.0),
        "NORMAL: STD = 0.5 , Mean=-1": ("normal", -1.0, 0.5),
        "normal": ("normal", 0.0, 1.0),
        "normal:mean=3": ("normal", 3.0, 1.0),
        "normal:,std=2,": ("normal", 0.0, 2.0),
        "uniform:lo=-1,hi=2": ("uniform", -1.0, 2.0),
        "Uniform:HI=2,LO=-1": ("uniform", -1.0, 2.0),
        "npy:/tmp/x.npy": ("npy", "/tmp/x.npy"),
        "NPY:a:b": ("npy", "a:b"),
    }
    for spec, want in good.items():
        assert blocks.parse_dist(spec) == want, spec
    nn = "is not NAME=NUMBER"
    bad = {
        "npy:": "npy: needs a file, npy:PATH",
        "normal:std": f"distribution 'normal:std': 'std' {nn}",
        "normal:std=abc": f"distribution 'normal:std=abc': 'std=abc' {nn}",
        "normal:std=inf": f"distribution 'normal:std=inf': 'std=inf' {nn}",
        "normal:mean=nan": f"distribution 'normal:mean=nan': 'mean=nan' {nn}",
        "normal:std=2 mean=1": f"distribution 'normal:std=2 mean=1': 'std=2 mean=1' {nn}",
        "normal:=2": "distribution 'normal:=2': normal takes std > 0 (1 when left out) and optionally mean: normal:std=S[,mean=M] (e.g. normal:std=2,mean=0.5)",
        "normal:std=0": "distribution 'normal:std=0': normal takes std > 0 (1 when left out) and optionally mean: normal:std=S[,mean=M] (e.g. normal:std=2,mean=0.5)",
        "normal:std=-1": "distribution 'normal:std=-1': normal takes std > 0 (1 when left out) and optionally mean: normal:std=S[,mean=M] (e.g. normal:std=2,mean=0.5)",
        "normal:std=1,lo=2": "distribution 'normal:std=1,lo=2': normal takes std > 0 (1 when left out) and optionally mean: normal:std=S[,mean=M] (e.g. normal:std=2,mean=0.5)",
        "uniform:lo=1": "distribution 'uniform:lo=1': uniform takes lo < hi: uniform:lo=A,hi=B (e.g. uniform:lo=-4,hi=4)",
        "uniform:lo=2,hi=1": "distribution 'uniform:lo=2,hi=1': uniform takes lo < hi: uniform:lo=A,hi=B (e.g. uniform:lo=-4,hi=4)",
        "uniform:lo=1,hi=1": "distribution 'uniform:lo=1,hi=1': uniform takes lo < hi: uniform:lo=A,hi=B (e.g. uniform:lo=-4,hi=4)",
        "uniform:lo=0,hi=1,std=2": "distribution 'uniform:lo=0,hi=1,std=2': uniform takes lo < hi: uniform:lo=A,hi=B (e.g. uniform:lo=-4,hi=4)",
        "Gamma:k=1": "unknown distribution 'gamma' (normal:std=S, uniform:lo=A,hi=B, npy:PATH)",
        "normal=1:std=2": "unknown distribution 'normal=1' (normal:std=S, uniform:lo=A,hi=B, npy:PATH)",
    }
    for spec, msg in bad.items():
        with pytest.raises(BadOptionError) as e:
            blocks.parse_dist(spec)
        assert str(e.value) == msg, spec
    assert blocks.parse_dist("normal:std=0.5")[2] == 0.5  # 0 < std <= 1 is a valid spread


def test_inputs_sampled():
    fp16 = FORMATS["fp16"]
    x = blocks.inputs("normal:std=2,mean=1", 64, 7, fp16, 32)
    assert same(x, np.random.default_rng(7).normal(1.0, 2.0, 64).astype(np.float16))
    x = blocks.inputs("uniform:lo=-3,hi=5", 48, 3, fp16, 16)
    assert same(x, np.random.default_rng(3).uniform(-3.0, 5.0, 48).astype(np.float16))
    x = blocks.inputs("normal", 1, 0, FORMATS["fp64"], 1)
    assert same(x, np.random.default_rng(0).normal(0.0, 1.0, 1))
    n = 1 << 24
    x = blocks.inputs("uniform:lo=0,hi=1", n, 1, FORMATS["fp64"], 16)
    assert len(x) == n and x[0] == np.random.default_rng(1).uniform(0.0, 1.0, 1)[0]
    for n, b in ((0, 32), (33, 32), (16, 32), ((1 << 24) + 16, 16)):
        with pytest.raises(BadOptionError) as e:
            blocks.inputs("normal:std=1", n, 0, fp16, b)
        assert str(e.value) == f"--elements must be a positive multiple of {b}, at most 16777216"
    with pytest.raises(BadOptionError) as e:
        blocks.inputs("normal:std=1e6", 64, 0, fp16, 32)
    assert str(e.value) == "inputs overflow fp16"
    with pytest.raises(BadOptionError) as e:
        blocks.inputs("uniform:lo=0,hi=1000", 32, 0, FORMATS["fp8_e4m3"], 32)
    assert str(e.value) == "inputs overflow fp8_e4m3"


def test_inputs_npy(tmp_path):
    fp16 = FORMATS["fp16"]
    vals = np.array([1.0001, -2.5, 0.3, 70000.0 / 2] * 8, dtype=np.float32)
    p = tmp_path / "x.npy"
    np.save(p, vals.reshape(4, 8))
    x = blocks.inputs(f"npy:{p}", 0, 0, fp16, 16)
    assert same(x, vals.astype(np.float16))
    np.save(p, np.arange(-16, 16, dtype=np.int16))
    assert same(blocks.inputs(f"npy:{p}", 0, 0, fp16, 32), np.arange(-16, 16))
    cases = [
        (np.ones(32, dtype=bool), f"{p}: dtype bool: expected numbers"),
        (np.ones(32, dtype=np.complex64), f"{p}: dtype complex64: expected numbers"),
        (np.array([1.0, np.nan] * 16), f"{p}: has non-finite values"),
        (np.array([1.0, np.inf] * 16), f"{p}: has non-finite values"),
        (np.zeros(0), f"{p}: 0 values is not a whole number of blocks of 16"),
        (np.zeros(1), f"{p}: 1 values is not a whole number of blocks of 16"),
        (np.zeros(24), f"{p}: 24 values is not a whole number of blocks of 16"),
    ]
    for a, msg in cases:
        np.save(p, a)
        with pytest.raises(BadFileError) as e:
            blocks.inputs(f"npy:{p}", 0, 0, fp16, 16)
        assert str(e.value) == msg
    np.save(p, np.full(32, 1e6))
    with pytest.raises(BadOptionError) as e:
        blocks.inputs(f"npy:{p}", 0, 0, fp16, 16)
    assert str(e.value) == "inputs overflow fp16"
    # the file is bounded before it is read: 2^24 float64 values at most (128 MiB)
    big = tmp_path / "big.npy"
    with open(big, "wb") as fh:
        np.lib.format.write_array_header_1_0(
            fh, {"descr": "<f8", "fortran_order": False, "shape": (1 << 25,)}
        )
    with pytest.raises(BadFileError) as e:
        blocks.inputs(f"npy:{big}", 0, 0, fp16, 16)
    assert str(e.value) == f"{big}: declares {8 << 25} bytes of data, more than the limit of {8 << 24}"
    mid = tmp_path / "mid.npy"
    np.save(mid, np.zeros(300_000))  # 2.4 MB: well within the bound
    assert len(blocks.inputs(f"npy:{mid}", 0, 0, fp16, 16)) == 300_000
    # only a regular file: a directory (or a FIFO) is refused before anything is read
    with pytest.raises(BadFileError) as e:
        blocks.inputs(f"npy:{tmp_path}", 0, 0, fp16, 16)
    assert str(e.value) == f"{tmp_path}: is a directory, not a file of inputs"
    with pytest.raises(BadFileError) as e:
        blocks.inputs(f"npy:{tmp_path / 'none.npy'}", 0, 0, fp16, 16)
    assert str(e.value) == f"{tmp_path / 'none.npy'}: file of inputs not found"
    assert os.path.isdir(tmp_path)


def test_tensor_scale_stays_positive_and_finite():
    # an NVFP4 tensor whose maximum / 2688 rounds to 0 in fp32 (below 2688 * 2^-150), or
    # overflows it: T is kept at fp32's least positive value / its largest, so no decode
    # scale S T is 0 or infinite and no element turns to NaN
    tmin, tmax = 2.0**-149, float(np.finfo(np.float32).max)
    assert blocks.tensor_scale(1e-44) == tmin and blocks.tensor_scale(5e-324) == tmin
    assert blocks.tensor_scale(1e42) == tmax and blocks.tensor_scale(1e300) == tmax
    with mp.workprec(100):
        assert blocks.tensor_scale_q(mp.mpf(1e-44) / 2688) == tmin
        assert blocks.tensor_scale_q(mp.mpf(1e42) / 2688) == tmax
    for y, t in (([1e-44, -3e-45, 0.0, -0.0] + [1e-45] * 12, tmin), ([1e42, -1.0, 0.0] + [1e41] * 13, tmax)):
        for rule, f in (("ocp", rne), ("ceil", ceil_e)):
            q = blocks.quantize(blocks.get_block_format("nvfp4", rule), np.array([y]))
            assert q.tensor_scale == t
            a = max(abs(Fraction(v)) for v in y)
            s = f("fp8_e4m3", a / (6 * Fraction(t)))
            assert q.scale[0] == float(s) and s > 0
            want = [
                as_float(rne("fp4_e2m1", Fraction(v) / (s * Fraction(t))), math.copysign(1, v) < 0) for v in y
            ]
            assert same(q.elems[0], want) and np.isfinite(q.values).all()


def test_inputs_npy_at_most_2_24_values(tmp_path):
    # the documented bound is on values (2^24), not only on bytes: one-byte values count too
    fp16 = FORMATS["fp16"]
    p = tmp_path / "i8.npy"
    np.save(p, np.zeros((1 << 24) + 1, dtype=np.int8))
    with pytest.raises(BadFileError) as e:
        blocks.inputs(f"npy:{p}", 0, 0, fp16, 16)
    assert str(e.value) == f"{p}: {(1 << 24) + 1} values, more than {1 << 24}"
    np.save(p, np.ones(1 << 24, dtype=np.int8))
    x = blocks.inputs(f"npy:{p}", 0, 0, FORMATS["fp64"], 16)
    assert len(x) == 1 << 24 and x[0] == 1.0 and x[-1] == 1.0


def test_quiet_under_floating_point_traps():
    # the scale and rounding rules compute through overflow (a quotient beyond float64, an
    # inf or NaN block) on purpose: under a caller's np.errstate(all="raise") they still
    # answer, never trap
    fp4 = FORMATS["fp4_e2m1"]
    with np.errstate(all="raise"):
        assert same(blocks.div_round(fp4, np.array([1e300, -1e300]), np.array([1e-10, 1e-10])), [6.0, -6.0])
        assert same(
            blocks.elem_round(fp4, np.array([np.inf, -np.inf, np.nan, 1e300])), [6.0, -6.0, np.nan, 6.0]
        )
        bf = blocks.get_block_format("nvfp4", "ceil")
        assert same(
            blocks.nv_scale(bf, np.array([1e300, np.inf, np.nan]), 2.0**-149), [448.0, np.nan, np.nan]
        )
        bf = blocks.get_block_format("nvfp4")
        assert same(
            blocks.nv_scale(bf, np.array([1e300, np.inf, np.nan]), 2.0**-149), [448.0, np.nan, np.nan]
        )
        for rule in ("ocp", "ceil"):
            bf = blocks.get_block_format("mxfp4_e2m1", rule)
            k = blocks.mx_exponent(bf, np.array([np.nan, np.inf, 0.0, 5e-324, 1.7976931348623157e308]))
            assert same(k, [np.nan, np.nan, -127.0, -127.0, 127.0])
            y = np.array([[np.inf] + [1.0] * 31, [np.nan] + [1.0] * 31, [1e300] + [-1e300] * 31, [0.0] * 32])
            y = np.vstack([y, [[1e300, 5e-324, -5e-324] + [0.0] * 29]])  # 5e-324 / 2^127 underflows
            q = blocks.quantize(bf, y)
            assert same(q.scale, [np.nan, np.nan, 2.0**127, 2.0**-127, 2.0**127])
            assert np.isnan(q.elems[:2]).all() and (q.elems[2, 1:] == -6.0).all() and (q.values[3] == 0).all()
            assert same(q.elems[4, :3], [6.0, 0.0, -0.0])
            y = np.array([[1e300] + [-1e300] * 15, [np.inf] + [1.0] * 15, [np.nan] + [0.0] * 15])
            q = blocks.get_block_format("nvfp4", rule)
            q = blocks.quantize(q, y)
            assert q.scale[0] > 0 and np.isnan(q.scale[1:]).all() and np.isfinite(q.values[0]).all()


def test_div_round_reads_float64():
    # y and d are taken as float64 (what every caller holds): a wider input is rounded to
    # float64 first.  y = 1.25 * 1.75 + (2^-52 - 2^-58) as a long double rounds to the tie
    # 2.1875 (the quotient 1.25 ties to 1, even), though its own quotient would round to 1.5
    fp4 = FORMATS["fp4_e2m1"]
    two = np.longdouble(2.0)
    y = np.array([2.1875], dtype=np.longdouble) + (two**-52 - two**-58)
    assert float(y[0]) == 2.1875 and y[0] != 2.1875
    assert same(blocks.div_round(fp4, y, 1.75), [1.0])
    # d = 1.25 + (2^-53 - 2^-63) rounds to 1.25: 2.1875 / 1.25 is the tie 1.75 (to 2, even)
    d = np.array([1.25], dtype=np.longdouble) + (two**-53 - two**-63)
    assert float(d[0]) == 1.25 and d[0] != 1.25
    assert same(blocks.div_round(fp4, np.array([2.1875]), d), [2.0])


# ---- exact reference, audits (second half of blocks.py)
from audit.oracle.references import get_reference  # noqa: E402
from audit.targets.candidates import catalog  # noqa: E402

# element formats: (p, emin, max, emax); E4M3 and fp32 also as NVFP4's scales
FMT = {
    "fp8_e4m3": (4, -6, Q(448), 8),
    "fp8_e5m2": (3, -14, Q(57344), 15),
    "fp6_e3m2": (3, -2, Q(28), 4),
    "fp6_e2m3": (4, 0, Q(15, 2), 2),
    "fp4_e2m1": (2, 0, Q(6), 2),
    "fp32": (24, -126, Q(2) ** 128, 127),
}
OUT = {"mxfp8_e4m3": "fp8_e4m3", "mxfp8_e5m2": "fp8_e5m2", "mxfp6_e3m2": "fp6_e3m2"}
OUT |= {"mxfp6_e2m3": "fp6_e2m3", "mxfp4_e2m1": "fp4_e2m1", "nvfp4": "fp4_e2m1"}


def _flog2(a: Q) -> int:
    """floor(log2 a) of a positive rational, on its integers."""
    n, d = a.numerator, a.denominator
    e = n.bit_length() - d.bit_length()
    return e if (n >= d << e if e >= 0 else n << -e >= d) else e - 1


_RN: dict = {}


def _rn(a: Q, fmt: str) -> Q:
    """RN(a) ties to even, saturating at the format's maximum (on integers: a / step =
    N / D, the quotient and remainder decide)."""
    key = (a, fmt)
    if key in _RN:
        return _RN[key]
    p, emin, vmax, _ = FMT[fmt]
    if a == 0:
        return Q(0)
    m = abs(a)
    s = max(_flog2(m), emin) - (p - 1)  # the step is 2^s
    N, D = m.numerator, m.denominator
    N, D = (N, D << s) if s >= 0 else (N << -s, D)
    n, r = divmod(N, D)
    if 2 * r > D or (2 * r == D and n % 2):
        n += 1
    v = min(n * Q(2) ** s, vmax)
    _RN[key] = out = v if a > 0 else -v
    return out


def _ulp(a: Q, fmt: str) -> Q:
    p, emin, _, _ = FMT[fmt]
    return Q(2) ** ((max(_flog2(abs(a)), emin) if a else emin) - (p - 1))


def _up_e4m3(s: Q) -> Q:
    """The next E4M3 value above s (448 at most)."""
    return min(s + _ulp(s, "fp8_e4m3") if s else Q(1, 512), Q(448))


def _q(v) -> Q:
    sign, man, exp, _ = v._mpf_
    r = Q(int(man)) * Q(2) ** int(exp)
    return -r if sign else r


def gelu_q(x: float) -> Q:
    """GELU(x) as a rational: x Phi(x); for x > 0, x - g with g = x/2 erfc(x/sqrt 2) (kept at
    least x 2^-300: below that every decision and float64 figure is the same)."""
    with mp.workprec(400):
        xm = mp.mpf(x)
        if x > 0:
            g = xm / 2 * mp.erfc(xm / mp.sqrt(2))
            return Q(x) - (_q(g) if g > xm * mp.ldexp(1, -300) else Q(x) * Q(2) ** -300)
        return _q(xm / 2 * mp.erfc(-xm / mp.sqrt(2)))


def relu_q(x: float) -> Q:
    return Q(x) if x > 0 else Q(0)


def _val(v) -> Q | None:
    """A float as a rational (None: not finite)."""
    return Q(float(v)) if math.isfinite(v) else None


def mx_code(amax: Q, emax: int, vmax: Q, rule: str) -> int:
    if amax == 0:
        return -127
    k = _flog2(amax) - emax
    if rule == "ceil":
        while amax > vmax * Q(2) ** k:
            k += 1
        while amax <= vmax * Q(2) ** (k - 1):
            k -= 1
    return max(-127, min(127, k))


def nv_code(amax: Q, t: Q, rule: str) -> Q:
    s = _rn(amax / (6 * t), "fp8_e4m3")
    if rule == "ceil" and s * 6 * t < amax:
        s = _up_e4m3(s)
    return s


def t_code(amax: Q) -> Q:
    return _rn(amax / 2688, "fp32") if amax else Q(1)


def _fl(v) -> float:
    return math.nan if v is None else float(v)


def model(out: str, rule: str, f: list, y: list, B: int) -> dict:
    """The figures of a sampled block audit from the exact values f (rationals) and the
    candidate's outputs y (floats), worked here on rationals."""
    E = OUT[out]
    p, emin, vmax, emax = FMT[E]
    nv = out == "nvfp4"
    nb = len(f) // B
    yq = [_val(v) for v in y]
    t = tc = Q(1)
    if nv:
        t = t_code(max(abs(v) for v in f))
        # the candidate's tensor maximum: over its blocks that are not NaN (a block holding
        # a NaN or an infinity is NaN whole: none of its values is quantized)
        fin = [abs(v) for b in range(nb) if None not in yq[b * B : b * B + B] for v in yq[b * B : b * B + B]]
        tc = t_code(max(fin)) if fin else Q(1)
    errs, rels, refs, adds = [], [], [], []
    mism = nan_el = 0
    sdiff, blk = [], []
    for b in range(nb):
        fb, yb = f[b * B : b * B + B], yq[b * B : b * B + B]
        amax = max(abs(v) for v in fb)
        if nv:
            S = nv_code(amax, t, rule)
            d = S * t
            ref_scale = S
        else:
            d = ref_scale = Q(2) ** mx_code(amax, emax, vmax, rule)
        if any(v is None for v in yb):
            cd = c_scale = None
        else:
            camax = max(abs(v) for v in yb)
            if nv:
                c_scale = nv_code(camax, tc, rule)
                cd = c_scale * tc
            else:
                cd = c_scale = Q(2) ** mx_code(camax, emax, vmax, rule)
        if c_scale != ref_scale or (nv and t != tc):
            sdiff.append(b)
        bm, bmism, bmax = 0, 0, -1.0
        for fv, yv in zip(fb, yb):
            rel_ = _rn(fv / d, E) if d else Q(0)
            rv = rel_ * d
            if cd is None:
                cel = cv = None
            else:
                cel = _rn(yv / cd, E) if cd else Q(0)
                cv = cel * cd
            dd = d if d else Q(1, 512) * t
            u = dd * _ulp(fv / dd, E)
            refs.append(float(abs(rv - fv) / u))
            bmism += cel != rel_
            if cv is None:
                nan_el += 1
                continue
            mism += cel != rel_
            e = float(abs(cv - fv) / u)
            errs.append(e)
            bmax = max(bmax, e)
            adds.append(float(abs(cv - rv) / u))
            if float(fv) == 0:  # (an exact 0, or below float64: the rule, 1 for a zero result)
                rels.append((0.0 if fv == 0 else 1.0) if cv == 0 else math.inf)
            else:
                rels.append(float(abs(cv - fv) / abs(fv)))
        blk.append((bmax, b, _fl(ref_scale), _fl(c_scale), bmism))
    worst = None
    if errs:
        bmax, w, sr, sc, bm = max(blk, key=lambda r: (r[0], -r[1]))
        worst = {"index": w, "first_element": w * B, "max_elem_ulp": bmax, "scale_ref": sr}
        worst |= {"scale_candidate": sc if not math.isnan(sc) else "nan", "mismatches": bm}
    # a NaN candidate element differs from every reference element
    mism += nan_el
    return {
        "elements": len(f),
        "blocks": nb,
        "max_elem_ulp": max(errs) if errs else math.nan,
        "mean_elem_ulp": math.fsum(errs) / len(errs) if errs else math.nan,
        "max_rel": max(rels) if rels else math.nan,
        "ref_max_elem_ulp": max(refs),
        "mismatches": mism,
        "max_added_ulp": max(adds) if adds else math.nan,
        "scale_diff_blocks": len(sdiff),
        "scale_diff_first": sdiff[:8],
        "worst_block": worst,
        "nan_elements": nan_el,
        "tensor_scale": {"reference": float(t), "candidate": float(tc)} if nv else None,
    }


def near(a, b) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(near(a[k], b[k]) for k in a)
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, str) or isinstance(b, str):  # JSON's 'nan', 'inf', '-inf'
            a, b = (str(v) if isinstance(v, float) and not math.isfinite(v) else v for v in (a, b))
            return a == b
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == pytest.approx(b, rel=1e-9, abs=1e-11)
    return a == b


def check(r, want: dict):
    d = r.to_dict()
    for k, v in want.items():
        assert near(d[k], v), (k, d[k], v)


class Fake:
    """A candidate whose outputs are given (any floats: NaN, infinities, flushes)."""

    id = "fake.given"
    identity = {"engine": "test"}

    def __init__(self, ref: str, y):
        self.reference, self.y = ref, y

    @property
    def ref(self):
        return get_reference(self.reference)

    def resolve_params(self, p):
        return dict(p or {})

    def reference_params(self, p):
        return {}

    def compute_format(self, c):
        return c

    def evaluate(self, x, cf, cf2, p):
        assert len(x) == len(self.y)
        return np.array(self.y, dtype=np.float64)


_GQ: dict = {}


def gq(x) -> Q:
    if x not in _GQ:
        _GQ[x] = gelu_q(x)
    return _GQ[x]


def run(cand, out, rule, x, fq, in_fmt="bf16"):
    bf = blocks.get_block_format(out, rule)
    r = blocks.audit(cand, bf, np.array(x, dtype=np.float64), FORMATS[in_fmt], FORMATS["fp32"], None, "d")
    y = cand.evaluate(np.array(x), FORMATS["fp32"], FORMATS["fp32"], {})
    return r, model(out, rule, [fq(float(v)) for v in x], list(y), bf.block)


def test_gelu16_block_hand_worked():
    """bf16 [16, 1 x 31], gelu.erf, mxfp8_e4m3: the exact maximum 16 (1 - 6.4e-58) < 16 has
    k = 3 - 8 = -5, X = 2^-5; 16 / X = 512 (1 - ...) saturates to 448, cost (16 - 14) / (X 32)
    = 2 ULP of the binade below 512; the candidate's 16.0 gives 2^-4: every element code
    differs (26 against 13: gelu(1) = 0.8413 is 26.9 X, 13.5 (2 X))."""
    x = [16.0] + [1.0] * 31
    c = catalog()["gelu.erf"]
    r, want = run(c, "mxfp8_e4m3", "ocp", x, gq)
    check(r, want)
    assert (r.scale_diff_blocks, r.scale_diff_first, r.mismatches, r.ref_max_elem_ulp) == (1, [0], 32, 2.0)
    assert r.worst_block["scale_ref"] == 2.0**-5 and r.worst_block["scale_candidate"] == 2.0**-4
    assert r.n_mpmath == 1 and r.blocks == 1 and r.elements == 32 and r.tensor_scale is None
    assert (r.candidate, r.reference, r.dtype, r.out_dtype, r.rule, r.compute, r.inputs) == (
        "gelu.erf",
        "gelu",
        "bf16",
        "mxfp8_e4m3",
        "ocp",
        "fp32",
        "d",
    )
    q, ex, n = blocks.reference(blocks.get_block_format("mxfp8_e4m3"), c.ref, np.array(x), {})
    assert q.scale.tolist() == [2.0**-5] and q.elems[0, :2].tolist() == [448.0, 26.0]
    assert q.values[0, 0] == 14.0 and q.tensor_scale == 1.0 and n == 1
    assert q.below.tolist() == [[True] + [False] * 31] and ex[0] == 16.0
    assert ex[1] == float(gq(1.0))


def test_exact_maximum_counts_and_mpmath_counts():
    """relu (exact fast path) [3, 1.5 x 31]: 3 / 2^-7 = 384 and 1.5 / 2^-7 = 192 are E4M3 values
    away from every boundary: mpmath decides nothing.  [4, 1 x 31]: 4 is a power of two (the
    scale's boundary) and every element over X = 2^-6 is one too (a binade boundary): all 32
    go to mpmath."""
    bf = blocks.get_block_format("mxfp8_e4m3")
    ref = get_reference("relu")
    q, _, n = blocks.reference(bf, ref, np.array([3.0] + [1.5] * 31), {})
    assert (q.scale[0], n, q.elems[0, 0], q.elems[0, 1]) == (2.0**-7, 0, 384.0, 192.0)
    q, _, n = blocks.reference(bf, ref, np.array([4.0] + [1.0] * 31), {})
    assert (q.scale[0], n, q.elems[0, 0], q.elems[0, 1]) == (2.0**-6, 32, 256.0, 64.0)
    assert not q.below.any()


def _mixed_inputs():
    """Four bf16 blocks: a maximum f(16) just below a power of two, f(-40) = -1.5e-348 (0 in
    float64, not exactly 0), an exact zero, maxima f(8), small and mid values."""
    g = np.random.default_rng(5)
    b0 = [16.0, -3.0, 0.0, -40.0] + list(g.normal(0, 2, 28))
    b1 = [8.0, 0.5, -0.75, 2.0**-20] + list(g.normal(0, 1, 28))
    b2 = [-40.0] * 16 + [-30.0] * 16
    b3 = list(g.normal(1, 3, 32))
    return [float(v) for v in FORMATS["bf16"].round(np.array(b0 + b1 + b2 + b3))]


@pytest.mark.parametrize("rule", ["ocp", "ceil"])
@pytest.mark.parametrize("out", ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4_e2m1"])
def test_mx_audit_against_rationals(out, rule):
    x = _mixed_inputs()
    r, want = run(catalog()["gelu.tanh"], out, rule, x, gq)
    check(r, want)
    assert r.max_rel == 1.0 or r.max_rel > 1.0  # f(-40): a zero result of a nonzero value


def _poisoned(f: list) -> list:
    """Candidate outputs for 5 blocks of B: a NaN in block 0, +inf in block 1, -inf in
    block 2, a flush to zero (+0 and -0) of block 3, block 4 the exact values times 1 + 2^-5."""
    y = [float(v) * (1 + 2.0**-5) for v in f]
    B = len(f) // 5
    y[3] = math.nan
    y[B + 1] = math.inf
    y[2 * B + 2] = -math.inf
    for i in range(3 * B, 4 * B):
        y[i] = 0.0 if i % 2 else -0.0
    return y


@pytest.mark.parametrize("out", ["mxfp8_e4m3", "mxfp4_e2m1", "nvfp4"])
def test_nan_and_inf_candidates(out):
    """A NaN or an infinity poisons its own block only (NaN scale and elements, counted as
    NaN elements, differing elements and scales), never the figures of the others; a flushed
    block costs its elements' whole value (relative error 1)."""
    B = 16 if out == "nvfp4" else 32
    g = np.random.default_rng(2)
    x = [float(v) for v in FORMATS["bf16"].round(g.normal(0.5, 2, 5 * B))]
    f = [relu_q(v) for v in x]
    cand = Fake("relu", _poisoned([float(v) for v in f]))
    r, want = run(cand, out, "ocp", x, relu_q)
    check(r, want)
    assert r.nan_elements == 3 * B and r.max_rel == 1.0 and r.n_mpmath >= 0
    assert r.scale_diff_first[:4] == [0, 1, 2, 3]
    assert r.worst_block["index"] == 3
    if out != "nvfp4":
        # the flushed block: scale 2^-127, elements 0: |0 - f| / u at the reference's scale
        assert r.worst_block["scale_candidate"] == 2.0**-127


def test_all_nan_candidate():
    """Every element NaN: no finite figure (NaN), every element and scale differs, no worst
    block."""
    x = [1.0 + i / 8 for i in range(32)]
    with warnings.catch_warnings():  # (no numpy warning on the way: nothing finite to reduce)
        warnings.simplefilter("error")
        r = blocks.audit(
            Fake("relu", [math.nan] * 32),
            blocks.get_block_format("mxfp8_e4m3"),
            np.array(x),
            FORMATS["bf16"],
            FORMATS["fp32"],
        )
    d = r.to_dict()
    assert [d[k] for k in ("max_elem_ulp", "mean_elem_ulp", "max_rel", "max_added_ulp")] == ["nan"] * 4
    assert (r.nan_elements, r.mismatches, r.scale_diff_blocks, r.worst_block) == (32, 32, 1, None)
    assert r.inputs == "" and r.n_mpmath >= 0
    # the reference's own cost: 1 + i/8 over X = 2^-6 (amax 4.875) is 64 + 8 i; E4M3's values
    # are 16 apart in [128, 256): 136 (i = 9) is a tie, half an ULP; 32 apart above 256
    assert r.ref_max_elem_ulp == 0.5


@pytest.mark.parametrize("rule", ["ocp", "ceil"])
@pytest.mark.parametrize("cid", ["gelu.tanh", "gelu.erf"])
def test_nvfp4_audit_against_rationals(rule, cid):
    """Blocks of 16 with S = 0 blocks (gelu(-40), gelu(-8): below half E4M3's least scale at
    T), a maximum gelu(16) and mixed values."""
    x = _mixed_inputs()[:96] + [-8.0] * 16 + [1.0] * 16
    r, want = run(catalog()[cid], "nvfp4", rule, x, gq)
    check(r, want)
    q, _, _ = blocks.reference(blocks.get_block_format("nvfp4", rule), get_reference("gelu"), np.array(x), {})
    assert (q.scale == 0).any() == (rule == "ocp") and q.tensor_scale == float(t_code(gq(16.0)))


def test_nvfp4_tensor_scale_on_a_tie():
    """amax / 2688 = 1 + 3 2^-24, an fp32 midpoint: relu's exact value ties to even, T = 1 +
    2^-22; gelu's exact value is below it (by e^-m^2/2): T = 1 + 2^-23.  S = RN_E4M3(amax /
    6T) and the elements follow from T."""
    m = 2688 * (1 + 3 * 2.0**-24)
    x = [m] + [1.0] * 15 + [-m / 2] + [0.25] * 15
    for name, fq, want_t in (("relu", relu_q, 1 + 2.0**-22), ("gelu", gq, 1 + 2.0**-23)):
        for rule in ("ocp", "ceil"):
            bf = blocks.get_block_format("nvfp4", rule)
            q, ex, n = blocks.reference(bf, get_reference(name), np.array(x), {})
            f = [fq(v) for v in x]
            t = t_code(max(abs(v) for v in f))
            assert q.tensor_scale == want_t == float(t) and n >= 1
            for b in range(2):
                fb = f[16 * b : 16 * b + 16]
                S = nv_code(max(abs(v) for v in fb), t, rule)
                assert q.scale[b] == float(S)
                assert q.elems[b].tolist() == [float(_rn(v / (S * t), "fp4_e2m1")) for v in fb]


def model_pairs(out: str, rule: str, xs: list, f: list, y: list) -> dict:
    """The exhaustive pair mode worked on rationals: the block {x, m} has the scale of
    max(|f(x)|, |f(m)|) (the candidate: of its own values, NaN if either is NaN), x's element
    audited in it, every pair counted; the pairs of one x whose m share (reference code,
    candidate code) are alike, so they are taken once with their count."""
    E = OUT[out]
    p, emin, vmax, emax = FMT[E]
    nv = out == "nvfp4"
    yq = [_val(v) for v in y]
    t = tc = Q(1)
    if nv:
        t = t_code(max(abs(v) for v in f))
        fin = [abs(v) for v in yq if v is not None]
        tc = t_code(max(fin)) if fin else Q(1)

    def code(a, tt):
        return nv_code(a, tt, rule) if nv else mx_code(a, emax, vmax, rule)

    def dec(k, tt):
        return k * tt if nv else Q(2) ** k

    kr = [code(abs(v), t) for v in f]
    kc = [None if v is None else code(abs(v), tc) for v in yq]
    classes: dict = {}
    for i in range(len(xs)):
        classes.setdefault((kr[i], kc[i]), [i, 0])[1] += 1
    order = sorted(classes, key=lambda c: (float(c[0]), 1000.0 if c[1] is None else float(c[1])))
    acc = dict(sum=0.0, w=0, mism=0, sdiff=0, nan=0, ref=0.0, rel=0.0, added=0.0, max=-1.0)
    worst = None
    for i, (fv, yv) in enumerate(zip(f, yq)):
        seen: dict = {}  # (K, Kc) -> figures: the classes of m that give x the same scales
        for c in order:
            m, cnt = classes[c]
            K = max(kr[i], c[0])
            Kc = None if kc[i] is None or c[1] is None else max(kc[i], c[1])
            if (K, Kc) not in seen:
                d = dec(K, t)
                el = _rn(fv / d, E) if d else Q(0)
                rv = el * d
                dd = d if d else Q(1, 512) * t
                u = dd * _ulp(fv / dd, E)
                fig = [float(abs(rv - fv) / u)]
                if Kc is not None:
                    Xc = dec(Kc, tc)
                    cel = _rn(yv / Xc, E) if Xc else Q(0)
                    cv = cel * Xc
                    if float(fv):
                        rel = float(abs(cv - fv) / abs(fv))
                    else:
                        rel = (0.0 if fv == 0 else 1.0) if cv == 0 else math.inf
                    # (a scale differs: its code, or for NVFP4 the tensor scale, as in audit())
                    fig += [
                        Kc != K or tc != t,
                        float(abs(cv - fv) / u),
                        cel != el,
                        float(abs(cv - rv) / u),
                        rel,
                    ]
                    fig += [float(K if nv else d), float(Kc if nv else Xc), float(cv), float(rv)]
                seen[K, Kc] = fig
            fig = seen[K, Kc]
            acc["ref"] = max(acc["ref"], fig[0])
            if Kc is None:  # a NaN candidate element where the reference is finite
                acc["nan"] += cnt
                acc["sdiff"] += cnt
                acc["mism"] += cnt  # (an element differing from the reference's, as audit())
                continue
            sd, e, mi, ad, rel, sr, sc, got, rv = fig[1:]
            acc["sdiff"] += cnt if sd else 0
            acc["sum"] += e * cnt
            acc["w"] += cnt
            acc["mism"] += cnt if mi else 0
            acc["added"] = max(acc["added"], ad)
            acc["rel"] = max(acc["rel"], rel)
            if e > acc["max"]:
                acc["max"] = e
                worst = {"x": xs[i], "pair_input": xs[m], "max_elem_ulp": e, "scale_ref": sr}
                worst |= {"scale_candidate": sc, "got": got, "reference": rv, "exact": float(fv)}
    n = len(xs)
    have = acc["w"] > 0
    return {
        "elements": n * n,
        "blocks": n * n,
        "max_elem_ulp": acc["max"] if have else math.nan,
        "mean_elem_ulp": acc["sum"] / acc["w"] if have else math.nan,
        "max_rel": acc["rel"] if have else math.nan,
        "ref_max_elem_ulp": acc["ref"],
        "mismatches": acc["mism"],
        "max_added_ulp": acc["added"] if have else math.nan,
        "scale_diff_blocks": acc["sdiff"],
        "scale_diff_first": [],
        "nan_elements": acc["nan"],
        "tensor_scale": {"reference": float(t), "candidate": float(tc)} if nv else None,
    }, worst


def _pair_inputs(fmt: str) -> list:
    xs = FORMATS[fmt].finite_values()
    return [float(v) for v in xs[~((xs == 0) & np.signbit(xs))]]


@pytest.mark.parametrize(
    "fmt,out,rule,cid",
    [
        ("fp6_e3m2", "mxfp8_e4m3", "ocp", "gelu.tanh"),
        ("fp6_e3m2", "mxfp4_e2m1", "ceil", "gelu.erf"),
        ("fp4_e2m1", "nvfp4", "ocp", "gelu.tanh"),
        ("fp4_e2m1", "nvfp4", "ceil", "gelu.erf"),
        ("fp6_e2m3", "mxfp8_e5m2", "ceil", "gelu.erf"),
    ],
)
def test_exhaustive_pairs_against_rationals(fmt, out, rule, cid):
    c = catalog()[cid]
    xs = _pair_inputs(fmt)
    y = c.evaluate(np.array(xs), FORMATS["fp32"], FORMATS["fp32"], {})
    want, worst = model_pairs(out, rule, xs, [gq(v) for v in xs], list(y))
    r = blocks.exhaustive(c, blocks.get_block_format(out, rule), FORMATS[fmt], FORMATS["fp32"])
    check(r, want)
    w = dict(r.worst_block)
    assert w.pop("x_hex") == FORMATS[fmt].hex(worst["x"])
    assert near(w, worst), (w, worst)
    assert r.inputs == f"exhaustive: every pair (x, m) of {fmt} inputs ({len(xs)} x {len(xs)})"
    assert (r.candidate, r.reference, r.dtype, r.out_dtype, r.rule, r.compute) == (
        cid,
        "gelu",
        fmt,
        out,
        rule,
        "fp32",
    )
    assert r.identity == {} and r.params == {} and r.seconds > 0


@pytest.mark.parametrize("out", ["mxfp8_e4m3", "mxfp4_e2m1", "nvfp4"])
def test_exhaustive_nan_candidate(out, monkeypatch):
    """A candidate NaN at some inputs: every pair holding one of them is NaN (its block's
    scale, x's element), counted as NaN elements and scale differences, nowhere else; in
    chunks of 4 rows of x (the counts summed over the chunks)."""
    monkeypatch.setattr(blocks, "EXHAUSTIVE_ROWS", 4)
    xs = _pair_inputs("fp4_e2m1")
    f = [relu_q(v) for v in xs]
    y = [float(v) * (1 - 2.0**-6) for v in f]
    y[2], y[-3] = math.nan, math.inf
    want, worst = model_pairs(out, "ocp", xs, f, y)
    r = blocks.exhaustive(Fake("relu", y), blocks.get_block_format(out), FORMATS["fp4_e2m1"], FORMATS["fp32"])
    check(r, want)
    w = dict(r.worst_block)
    w.pop("x_hex")
    assert near(w, worst) and r.nan_elements == 2 * 2 * len(xs) - 4 and r.identity == {"engine": "test"}


def test_exhaustive_refuses_wide_inputs():
    with pytest.raises(BadOptionError) as e:
        blocks.exhaustive(
            catalog()["gelu.erf"], blocks.get_block_format("mxfp8_e4m3"), FORMATS["fp32"], FORMATS["fp32"]
        )
    assert str(e.value) == "the exhaustive block mode is for inputs of 16 bits or fewer, not fp32"


def lrelu_q(x: float) -> Q:
    return Q(x) if x >= 0 else Q(x) / 2


def test_sweep_targets_parameters_and_modes():
    """sweep: the candidate's parameters (alpha = 0.5 reaches the reference too: f = x/2
    below 0), the scale rule, the compute format (None: fp32), the sampled inputs and their
    description; comma-separated names and lists; 'exhaustive' (any case, spaces) is the
    pair mode; a function of two inputs is refused in one line."""
    x = [float(v) for v in blocks.inputs("uniform:lo=-4,hi=2", 64, 1, FORMATS["bf16"], 32)]
    (r,) = blocks.sweep(
        "leaky_relu.mul",
        "bf16",
        "mxfp4_e2m1",
        None,
        rule="ceil",
        dist="uniform:lo=-4,hi=2",
        elements=64,
        seed=1,
        params={"alpha": 0.5},
    )
    y = [float(FORMATS["fp32"].round(np.array([v * 0.5 if v < 0 else v]))[0]) for v in x]
    check(r, model("mxfp4_e2m1", "ceil", [lrelu_q(v) for v in x], y, 32))
    assert (r.params, r.compute, r.inputs, r.rule, r.dtype, r.out_dtype) == (
        {"alpha": 0.5},
        "fp32",
        "uniform:lo=-4,hi=2",
        "ceil",
        "bf16",
        "mxfp4_e2m1",
    )
    assert r.mismatches == 0 and r.max_added_ulp == 0.0
    rs = blocks.sweep(
        ["gelu.tanh, relu.max", " gelu.erf,"], "fp4_e2m1", "mxfp8_e4m3", "fp16", dist=" Exhaustive "
    )
    assert [(r.candidate, r.compute, r.elements) for r in rs] == [
        ("gelu.tanh", "fp16", 225),
        ("relu.max", "fp16", 225),
        ("gelu.erf", "fp16", 225),
    ]
    assert all(r.inputs.startswith("exhaustive: every pair") for r in rs)
    (d,) = blocks.sweep("relu.max", "bf16", "nvfp4", elements=32, seed=4)
    assert (d.blocks, d.rule, d.inputs, d.compute, d.elements) == (2, "ocp", "normal:std=1", "fp32", 32)
    x = blocks.inputs("normal:std=1", 32, 4, FORMATS["bf16"], 16)
    f = [relu_q(float(v)) for v in x]
    check(d, model("nvfp4", "ocp", f, [float(v) for v in f], 16))
    for none in ([], None, ", "):
        with pytest.raises(Exception, match="^no candidate given$"):
            blocks.sweep(none, "bf16")
    with pytest.raises(BadOptionError) as e:
        blocks.sweep("gelu_bwd.erf", "bf16")
    assert str(e.value) == "gelu_bwd.erf: block audits are for functions of one input"


def test_result_document():
    """to_dict: every field but the identity, non-finite figures as 'nan' / 'inf' strings;
    document: the schema, the version, the metadata, the results in order."""
    from audit._version import __version__

    r = blocks.BlockResult(
        "c.v",
        "gelu",
        "bf16",
        "nvfp4",
        "ceil",
        "fp32",
        "d",
        16,
        1,
        math.nan,
        math.inf,
        -math.inf,
        0.25,
        3,
        1.5,
        1,
        [0],
        {"index": 0},
        2,
        {"reference": 1.0},
        7,
        0.5,
        {"a": 1.0},
        {"engine": "e"},
    )
    want = {
        "candidate": "c.v",
        "reference": "gelu",
        "dtype": "bf16",
        "out_dtype": "nvfp4",
        "rule": "ceil",
        "compute": "fp32",
        "inputs": "d",
        "elements": 16,
        "blocks": 1,
        "max_elem_ulp": "nan",
        "mean_elem_ulp": "inf",
        "max_rel": "-inf",
        "ref_max_elem_ulp": 0.25,
        "mismatches": 3,
        "max_added_ulp": 1.5,
        "scale_diff_blocks": 1,
        "scale_diff_first": [0],
        "worst_block": {"index": 0},
        "nan_elements": 2,
        "tensor_scale": {"reference": 1.0},
        "n_mpmath": 7,
        "seconds": 0.5,
        "params": {"a": 1.0},
    }
    assert r.to_dict() == want and list(r.to_dict()) == list(want)
    r2 = blocks.BlockResult(
        "b",
        "relu",
        "bf16",
        "mxfp8_e4m3",
        "ocp",
        "fp32",
        "",
        32,
        1,
        0.5,
        0.25,
        0.125,
        0.5,
        0,
        0.0,
        0,
        [],
        None,
        0,
        None,
        0,
    )
    assert r2.to_dict()["params"] == {} and r2.identity == {} and r2.to_dict()["seconds"] == 0.0
    assert blocks.document([r, r2], command="c", seed=1) == {
        "schema": "actaudit.blocks/1",
        "actaudit": __version__,
        "command": "c",
        "seed": 1,
        "results": [want, r2.to_dict()],
    }


# relu values on the boundaries of the reference's rules (its fast path is exact: only the
# enclosure's one step outward makes them ambiguous, and mpmath settles them)
MX_TIES = [4.0, 1.1875, 1.0625, 3.875, 0.5, 2.0, -1.0, 0.0, 2.0**-7, 3 * 2.0**-10, 1.5] + [0.25] * 21
# NVFP4, T = 1 (the tensor maximum 2688): a block maximum 6 * 1.0625 (an E4M3 midpoint,
# S = 1 (ocp) or 1.125 (ceil)), then E2M1 midpoints times S of both rules
NV_TIES = (
    [2688.0]
    + [1.0] * 15
    + [6.375, 2.5, 3.5, 0.75, 5.0, 0.25, 1.25]
    + [v * 1.125 for v in (2.5, 3.5, 0.75, 5.0, 0.25, 1.25)]
    + [0.0, -2.0, 1.0]
)


@pytest.mark.parametrize("rule", ["ocp", "ceil"])
@pytest.mark.parametrize("out", ["mxfp8_e4m3", "mxfp4_e2m1", "mxfp6_e3m2", "nvfp4"])
def test_exact_reference_on_boundaries(out, rule):
    """Ties of the elements (1.1875 / 2^-6 = 76 rounds to even 80, 68 to 64, 248 to 256), a
    power-of-two maximum, NVFP4's block scale on an E4M3 midpoint: the reference's codes
    from the exact values; a candidate computing relu exactly matches it."""
    x = NV_TIES if out == "nvfp4" else MX_TIES
    B = 16 if out == "nvfp4" else 32
    f = [relu_q(v) for v in x]
    bf = blocks.get_block_format(out, rule)
    q, ex, n = blocks.reference(bf, get_reference("relu"), np.array(x), {})
    want = model(out, rule, f, [float(v) for v in f], B)
    assert want["mismatches"] == 0 and n > 0 and ex.tolist() == [float(v) for v in f]
    r = blocks.audit(Fake("relu", [float(v) for v in f]), bf, np.array(x), FORMATS["bf16"], FORMATS["fp32"])
    check(r, want)
    if out == "nvfp4":
        S = [Q(1) if rule == "ocp" else Q(9, 8)]
        assert q.scale[1] == float(S[0]) and q.tensor_scale == 1.0
        assert q.elems[1].tolist() == [float(_rn(v / S[0], "fp4_e2m1")) for v in f[16:]]
    elif out == "mxfp8_e4m3":
        assert q.elems[0, :4].tolist() == [256.0, 80.0, 64.0, 256.0]


class FakeP(Fake):
    """A given-output candidate of a reference with parameters (passed on to it)."""

    def __init__(self, ref: str, y, params: dict):
        super().__init__(ref, y)
        self.p = params

    def resolve_params(self, p):
        return dict(self.p, **(p or {}))

    def reference_params(self, p):
        return dict(p)


def swish_q(x: float, beta: int) -> Q:
    """x sigmoid(beta x) as a rational: for x > 0, x - g with g = x / (1 + e^(beta x)) (kept
    at least x 2^-300, as gelu_q)."""
    with mp.workprec(400):
        xm = mp.mpf(x)
        if x > 0:
            g = xm / (1 + mp.exp(beta * xm))
            return Q(x) - (_q(g) if g > xm * mp.ldexp(1, -300) else Q(x) * Q(2) ** -300)
        return _q(xm / (1 + mp.exp(-beta * xm)))


def test_nvfp4_element_binade_below_a_power_of_two():
    """swish with beta = 10^5: f(x) = x (1 - e^(-10^5 x)), just below x, whose float64 is x.
    T = 1 (the tensor maximum f(2688) < 2688).  Block 1: maximum f(4.5): S = RN_E4M3(0.75-) =
    0.75 (not a power of two), f(1.5) / 0.75 = 2 (1 - ...): in E2M1's binade [1, 2), ULP 0.5:
    the candidate's 1.125 (its element 1.5, 1.125 / 0.75) is |1.125 - 1.5| / 0.375 = 1 ULP
    (at ULP 1 it would be 1/2).  Block 2: maximum f(2^-8): 2^-8 / 6 < 2^-10, S = 0; its
    element ULP at 2^-9 T: 2^-8 / 2^-9 = 2 (1 - ...), ULP 0.5 2^-9: the reference's 0 is 4
    ULP off.  f(2^-9) / 2^-9 = 1-: below 2 the ULP is constant: not 'below'."""
    beta = 100000
    x = [2688.0] + [1.0] * 15 + [4.5, 1.5] + [0.5] * 14 + [2.0**-8, 2.0**-9] + [2.0**-12] * 14
    f = [swish_q(v, beta) for v in x]
    y = [float(v) for v in f]
    y[17] = 1.125
    bf = blocks.get_block_format("nvfp4")
    cand = FakeP("silu", y, {"beta": 1e5})
    r = blocks.audit(cand, bf, np.array(x), FORMATS["bf16"], FORMATS["fp32"])
    check(r, model("nvfp4", "ocp", f, y, 16))
    assert r.params == {"beta": 1e5} and r.tensor_scale == {"reference": 1.0, "candidate": 1.0}
    assert (r.max_elem_ulp, r.ref_max_elem_ulp, r.mismatches) == (4.0, 4.0, 1)
    q, ex, n = blocks.reference(bf, cand.ref, np.array(x), {"beta": 1e5})
    assert q.scale.tolist() == [448.0, 0.75, 0.0] and q.below[1, 1] and q.below[2, 0]
    assert np.count_nonzero(q.below) == 2 and q.below.dtype == bool and q.below.shape == (3, 16)


def test_mx_binade_below_with_parameters():
    """mxfp8_e4m3, the same swish: block maximum f(3) < 3, k = 1 - 8, X = 2^-7; f(2) / X =
    256-: E4M3's binade [128, 256), ULP 16 (float64 256 would say 32): the candidate's 240
    (2^-7 240 = 1.875) is 1 ULP off; f(1) / X = 128-: its 120 (ULP 8) 1 ULP; f(2^-8) / X =
    1/2- (ULP 2^-5, not 2^-4): its 9/16 is 2 ULP off."""
    beta = 100000
    x = [3.0, 2.0, 1.0, 2.0**-8] + [0.375] * 28
    f = [swish_q(v, beta) for v in x]
    y = [float(v) for v in f]
    y[1], y[2], y[3] = 1.875, 0.9375, 2.0**-8 * 1.125
    for rule in ("ocp", "ceil"):
        bf = blocks.get_block_format("mxfp8_e4m3", rule)
        r = blocks.audit(FakeP("silu", y, {"beta": 1e5}), bf, np.array(x), FORMATS["bf16"], FORMATS["fp32"])
        check(r, model("mxfp8_e4m3", rule, f, y, 32))
        assert r.max_elem_ulp == 2.0 and r.mismatches == 3


def test_exact_ties_of_a_function_without_near_form():
    """leaky_relu with alpha = 1/2: f(-2.375) = -1.1875 exactly, -76 X at X = 2^-6: a tie to
    even (-80) that no precision resolves and that has no near form below 0 (near gives None
    there): mpmath's value at the top precision decides it as exact."""
    x = [4.0, -2.375, -2.125, 3.875] + [0.25] * 28
    f = [Q(v) if v >= 0 else Q(v) / 2 for v in x]
    y = [float(v) for v in f]
    bf = blocks.get_block_format("mxfp8_e4m3")
    cand = FakeP("leaky_relu", y, {"alpha": 0.5})
    q, _, n = blocks.reference(bf, cand.ref, np.array(x), {"alpha": 0.5})
    assert q.elems[0, :4].tolist() == [256.0, -80.0, -64.0, 256.0] and n >= 3
    r = blocks.audit(cand, bf, np.array(x), FORMATS["bf16"], FORMATS["fp32"])
    check(r, model("mxfp8_e4m3", "ocp", f, y, 32))
    assert r.mismatches == 0


def test_saturation_beyond_every_precision():
    """tanh(1424) = 1 - 2 e^-2848 (about 1 - 2^-4108), below 1 by less than the top precision
    resolves: the near form (1 - g) puts the block maximum below 1, k = -1 - 8."""
    x = [1424.0] + [0.25] * 31
    q, _, _ = blocks.reference(blocks.get_block_format("mxfp8_e4m3"), get_reference("tanh"), np.array(x), {})
    assert q.scale[0] == 2.0**-9 and q.elems[0, 0] == 448.0 and q.below[0, 0]


def test_maxima_beyond_the_starting_precision():
    """gelu(2^70) = 2^70 (1 - e^-2^139): mpmath at 120 bits plus twice the input's exponent,
    then the near form: the block maximum is below 2^70, k = 69 - 8 (X = 2^61), 2^70 / X
    = 512- saturates to 448, ULP 32 X (the binade below 512); gelu(2^60) / X = 1/2-."""
    x = [2.0**70] + [2.0**60] * 31
    f = [gq(v) for v in x]
    y = [float(v) for v in x]
    r = blocks.audit(
        Fake("gelu", y), blocks.get_block_format("mxfp8_e4m3"), np.array(x), FORMATS["fp32"], FORMATS["fp32"]
    )
    check(r, model("mxfp8_e4m3", "ocp", f, y, 32))
    assert r.worst_block["scale_ref"] == 2.0**61 and r.ref_max_elem_ulp == 2.0 and r.scale_diff_blocks == 1


@pytest.mark.parametrize("rule", ["ocp", "ceil"])
def test_negative_block_maxima_on_boundaries(rule):
    """leaky_relu, alpha = 1/2: block maxima that are negative exact values on a scale
    boundary: |f(-8)| = 4 (a power of two: OCP), |f(-14)| = 7 = 448 2^-6 (the round-up
    rule's boundary), |f(-15)| = 7.5 (2^-6 by OCP, 2^-5 rounding up); decided on |f|."""
    x = [-8.0] + [1.0] * 31 + [-14.0] + [0.5] * 31 + [-15.0, 3.0] + [-0.25] * 30
    f = [Q(v) if v >= 0 else Q(v) / 2 for v in x]
    y = [float(v) for v in f]
    y[1] = 1.0625
    bf = blocks.get_block_format("mxfp8_e4m3", rule)
    cand = FakeP("leaky_relu", y, {"alpha": 0.5})
    r = blocks.audit(cand, bf, np.array(x), FORMATS["bf16"], FORMATS["fp32"])
    check(r, model("mxfp8_e4m3", rule, f, y, 32))
    q, _, _ = blocks.reference(bf, cand.ref, np.array(x), {"alpha": 0.5})
    assert q.scale.tolist() == ([2.0**-6, 2.0**-6, 2.0**-6] if rule == "ocp" else [2.0**-6, 2.0**-6, 2.0**-5])


def test_worst_block_is_never_a_nan_block():
    """Block 0 NaN (an infinity in the candidate's block), block 1 off by half an element ULP
    at most: the worst block is block 1 whatever its error's size, and it holds
    the largest finite element error."""
    x = [float(v) for v in FORMATS["bf16"].round(np.linspace(0.3, 1.7, 64))]
    y = list(x)  # relu computed exactly: only the elements' own rounding, below 1/2 ULP
    y[5] = math.inf
    r = blocks.audit(
        Fake("relu", y), blocks.get_block_format("mxfp8_e4m3"), np.array(x), FORMATS["bf16"], FORMATS["fp32"]
    )
    check(r, model("mxfp8_e4m3", "ocp", [relu_q(v) for v in x], y, 32))
    assert r.worst_block["index"] == 1 and 0 < r.worst_block["max_elem_ulp"] < 1


def test_exhaustive_binade_below_under_the_elements_emin():
    """Every pair of fp4_e2m1 inputs, swish beta = 10^5 (f(x) = x (1 - e^(-10^5 x)) < x):
    f(0.5) alone is below E2M1's emin, yet in a block of scale 2^-4 (its own, k = -2 - 2)
    0.5- / 2^-4 = 8- is in the binade [4, 8): saturating to 6 costs |6 - 8| / 2 = 1 ULP.
    The candidate's outputs are f + 1/16 (in a block of its own scale)."""
    xs = _pair_inputs("fp4_e2m1")
    f = [swish_q(v, 100000) for v in xs]
    y = [float(v) + 0.0625 for v in f]
    cand = FakeP("silu", y, {"beta": 1e5})
    want, worst = model_pairs("mxfp4_e2m1", "ocp", xs, f, y)
    r = blocks.exhaustive(cand, blocks.get_block_format("mxfp4_e2m1"), FORMATS["fp4_e2m1"], FORMATS["fp32"])
    check(r, want)
    w = dict(r.worst_block)
    w.pop("x_hex")
    assert near(w, worst) and r.ref_max_elem_ulp == 1.0 and r.params == {"beta": 1e5}


def test_audit_counts_first_scale_differences_and_identity():
    """Ten blocks whose candidate doubles relu: every block's scale is one step up (elements
    alike): ten scale differences, the first eight listed; the candidate's identity kept."""
    x = [float(v) for v in FORMATS["bf16"].round(np.linspace(0.3, 1.7, 320))]
    y = [2 * v for v in x]
    r = blocks.audit(
        Fake("relu", y), blocks.get_block_format("mxfp8_e4m3"), np.array(x), FORMATS["bf16"], FORMATS["fp32"]
    )
    check(r, model("mxfp8_e4m3", "ocp", [relu_q(v) for v in x], y, 32))
    assert (r.scale_diff_blocks, r.scale_diff_first, r.mismatches) == (10, list(range(8)), 0)
    assert r.identity == {"engine": "test"} and r.candidate == "fake.given"


def test_relative_error_of_values_below_float64():
    """gelu(-40) = -1.5e-348 is 0 in float64 but not 0: its block (scale 2^-127) quantizes it
    to 0, a relative error of 1 (|0 - f| / |f|); the other block's elements are within 1/16
    of their values: max_rel is that 1."""
    x = [-40.0] * 32 + [1.0 + i / 32 for i in range(32)]
    f = [gq(v) for v in x]
    y = [float(v) for v in f]
    assert y[0] == 0 and f[0] != 0
    r = blocks.audit(
        Fake("gelu", y), blocks.get_block_format("mxfp8_e4m3"), np.array(x), FORMATS["bf16"], FORMATS["fp32"]
    )
    check(r, model("mxfp8_e4m3", "ocp", f, y, 32))
    assert r.max_rel == 1.0


def test_exhaustive_mpmath_count_hand_worked():
    """relu over every fp4_e2m1 pair: its fast path is exact, so mpmath decides only the four
    inputs whose relu is a power of two (0.5, 1, 2, 4: boundaries of the OCP scale and of the
    binades); zeros and 1.5, 3, 6 need nothing."""
    for out in ("mxfp8_e4m3", "mxfp4_e2m1"):
        r = blocks.exhaustive(
            catalog()["relu.max"], blocks.get_block_format(out), FORMATS["fp4_e2m1"], FORMATS["fp32"]
        )
        assert (r.n_mpmath, r.mismatches, r.max_elem_ulp, r.elements) == (4, 0, 0.0, 225)


def test_sweep_defaults():
    """sweep's defaults: bf16 inputs, mxfp8_e4m3 outputs, the OCP rule, fp32 compute,
    normal:std=1 sampled with seed 0."""
    (r,) = blocks.sweep("relu.max", elements=64)
    x = blocks.inputs("normal:std=1", 64, 0, FORMATS["bf16"], 32)
    f = [relu_q(float(v)) for v in x]
    check(r, model("mxfp8_e4m3", "ocp", f, [float(v) for v in f], 32))
    assert (r.dtype, r.out_dtype, r.rule, r.compute, r.inputs) == (
        "bf16",
        "mxfp8_e4m3",
        "ocp",
        "fp32",
        "normal:std=1",
    )


def test_exhaustive_all_nan_candidate():
    """A candidate NaN everywhere: every pair is NaN, no finite figure, no worst pair."""
    xs = _pair_inputs("fp4_e2m1")
    r = blocks.exhaustive(
        Fake("relu", [math.nan] * len(xs)),
        blocks.get_block_format("nvfp4"),
        FORMATS["fp4_e2m1"],
        FORMATS["fp32"],
    )
    assert (r.worst_block, r.nan_elements, r.scale_diff_blocks, r.mismatches) == (None, 225, 225, 225)
    assert r.tensor_scale["candidate"] == 1.0  # (no finite value: T of an all-zero tensor, as quantize())
    assert math.isnan(r.max_elem_ulp) and math.isnan(r.mean_elem_ulp) and r.ref_max_elem_ulp >= 0


def test_exact_zeros_of_a_parameter():
    """leaky_relu with alpha = 0 is exactly 0 below 0 (its zero set depends on alpha): a zero
    result there is exact, relative error 0."""
    x = [-1.0] * 16 + [1.0 + i / 64 for i in range(16)]
    f = [Q(v) if v >= 0 else Q(0) for v in x]
    y = [float(v) for v in f]
    r = blocks.audit(
        FakeP("leaky_relu", y, {"alpha": 0.0}),
        blocks.get_block_format("nvfp4"),
        np.array(x),
        FORMATS["bf16"],
        FORMATS["fp32"],
    )
    check(r, model("nvfp4", "ocp", f, y, 16))
    assert r.max_rel < 0.5


def test_sweep_exhaustive_with_parameters():
    """The pair mode takes the candidate's parameters too: leaky_relu.mul at alpha = 1/2
    computes alpha x exactly in fp32 for fp4 inputs, so it matches the reference (alpha = 1/2)
    everywhere: no element or scale differs."""
    (r,) = blocks.sweep("leaky_relu.mul", "fp4_e2m1", "mxfp4_e2m1", dist="exhaustive", params={"alpha": 0.5})
    assert (r.params, r.mismatches, r.scale_diff_blocks, r.max_added_ulp, r.elements) == (
        {"alpha": 0.5},
        0,
        0,
        0.0,
        225,
    )


def test_exhaustive_nvfp4_blocks_of_zero_scale():
    """leaky_relu at alpha = 2^20 over every fp4_e2m1 pair: the tensor maximum is 6 2^20
    (x = -6), T = RN_fp32(6 2^20 / 2688); a block of two inputs >= 0 has |f| <= 6 < 2^-10 6T:
    S = 0, a block of zeros (its element codes 0, though RN_E2M1(x) is x), its element ULP
    at 2^-9 T.  The candidate is exact: no element differs, only the reference's own cost."""
    xs = _pair_inputs("fp4_e2m1")
    f = [Q(v) if v >= 0 else Q(v) * 2**20 for v in xs]
    y = [float(v) for v in f]
    cand = FakeP("leaky_relu", y, {"alpha": 2.0**20})
    want, worst = model_pairs("nvfp4", "ocp", xs, f, y)
    r = blocks.exhaustive(cand, blocks.get_block_format("nvfp4"), FORMATS["fp4_e2m1"], FORMATS["fp32"])
    check(r, want)
    assert r.mismatches == want["mismatches"] == 0 and r.scale_diff_blocks == 0
    w = dict(r.worst_block)
    w.pop("x_hex")
    assert near(w, worst)


@pytest.mark.parametrize("rule", ["ocp", "ceil"])
def test_exhaustive_nvfp4_own_codes_on_boundaries(rule):
    """leaky_relu at alpha = 896 over every fp4_e2m1 pair: the tensor maximum 896 * 6 = 5376
    makes T = 2 exactly, and the inputs' own |f| / 6T land on E4M3 values (1.5 / 12 = 1/8,
    896 * 1.5 / 12 = 112, ...), the boundaries of the round-up rule: each own code is decided
    on |f| / 6T, exactly.  The candidate is off by 1/16."""
    xs = _pair_inputs("fp4_e2m1")
    f = [Q(v) if v >= 0 else Q(v) * 896 for v in xs]
    y = [float(v) + 0.0625 for v in f]
    want, worst = model_pairs("nvfp4", rule, xs, f, y)
    r = blocks.exhaustive(
        FakeP("leaky_relu", y, {"alpha": 896.0}),
        blocks.get_block_format("nvfp4", rule),
        FORMATS["fp4_e2m1"],
        FORMATS["fp32"],
    )
    check(r, want)
    assert r.tensor_scale["reference"] == 2.0 and (r.n_mpmath > 0) == (rule == "ceil")
    w = dict(r.worst_block)
    w.pop("x_hex")
    assert near(w, worst)


class FakeSlow(FakeP):
    """A given-output candidate whose reference has no fast path: mpmath gives every value."""

    @property
    def ref(self):
        import dataclasses

        return dataclasses.replace(get_reference(self.reference), fast=None)


def _chunk_cases():
    xs = _pair_inputs("fp4_e2m1")
    yield xs, [swish_q(v, 100000) for v in xs], FakeP, "silu", {"beta": 1e5}
    yield xs, [lrelu_q(v) for v in xs], FakeP, "leaky_relu", {"alpha": 0.5}
    yield xs, [relu_q(v) for v in xs], FakeSlow, "relu", {}


@pytest.mark.parametrize("rows", [3])
def test_exhaustive_in_chunks_of_rows(monkeypatch, rows):
    """The pair mode in chunks of a few rows of x (EXHAUSTIVE_ROWS): the mpmath decisions,
    exact values and binade decisions of the inputs of later chunks (global indices), against
    the rationals: swish at beta = 10^5 (f just below x: binades below, f(0.5) / 2^-3 = 4-),
    leaky_relu at 1/2 (f(-1.5) / 1 = -0.75, an E2M1 tie), relu without a fast path (every
    value from mpmath); mxfp4, mxfp8 and nvfp4, candidates off by 1/16 or by a quarter."""
    monkeypatch.setattr(blocks, "EXHAUSTIVE_ROWS", rows)
    for xs, f, kind, name, params in _chunk_cases():
        at_half = [0.75 if v == 0.5 else float(g) for v, g in zip(xs, f)]  # 2 ULP at 2^-3
        for y in ([float(v) + 0.0625 for v in f], [float(v) * 1.25 for v in f], at_half):
            cand = kind(name, y, params)
            # (nvfp4 without a fast path: the tensor scale's candidates are found from the
            # enclosure, which is NaN there: not supported, every catalog reference has one)
            for out in ("mxfp4_e2m1", "mxfp8_e4m3") + (("nvfp4",) if kind is FakeP else ()):
                want, worst = model_pairs(out, "ocp", xs, f, y)
                r = blocks.exhaustive(
                    cand, blocks.get_block_format(out), FORMATS["fp4_e2m1"], FORMATS["fp32"]
                )
                check(r, want)
                w = dict(r.worst_block)
                w.pop("x_hex")
                assert near(w, worst), (name, out, w, worst)


def test_exhaustive_one_finite_pair():
    """A candidate NaN at every input but x = 1.5: the one finite pair is (1.5, 1.5), the
    figures are its own (relu exact there: no error); with none finite every figure but the
    reference's is NaN.  A candidate without an identity has an empty one; the time taken
    lies within the call."""
    import time

    xs = _pair_inputs("fp4_e2m1")
    y = [1.5 if v == 1.5 else math.nan for v in xs]

    class Bare(Fake):
        identity = property(lambda self: (_ for _ in ()).throw(AttributeError("identity")))

    n = len(xs)
    t0 = time.perf_counter()
    r = blocks.exhaustive(
        Bare("relu", y), blocks.get_block_format("mxfp4_e2m1"), FORMATS["fp4_e2m1"], FORMATS["fp32"]
    )
    t1 = time.perf_counter()
    assert (r.max_elem_ulp, r.mean_elem_ulp, r.max_rel, r.max_added_ulp) == (0.0, 0.0, 0.0, 0.0)
    assert (r.nan_elements, r.mismatches, r.scale_diff_blocks) == (n * n - 1, n * n - 1, n * n - 1)
    assert r.identity == {} and 0 < r.seconds <= t1 - t0
    r = blocks.exhaustive(
        Fake("relu", [math.nan] * n),
        blocks.get_block_format("mxfp4_e2m1"),
        FORMATS["fp4_e2m1"],
        FORMATS["fp32"],
    )
    d = r.to_dict()
    assert [d[k] for k in ("max_elem_ulp", "mean_elem_ulp", "max_rel", "max_added_ulp")] == ["nan"] * 4


def test_nvfp4_tensor_scale_of_a_negative_maximum_on_a_tie():
    """leaky_relu at alpha = 1/2: the tensor maximum |f(-2m)| = m = 2688 (1 + 3 2^-24), from a
    negative value, is an fp32 midpoint of m / 2688: T is decided on |f|, ties to even."""
    m = 2688 * (1 + 3 * 2.0**-24)
    x = [-2 * m] + [1.0] * 15 + [m / 4] + [0.25] * 15
    f = [Q(v) if v >= 0 else Q(v) / 2 for v in x]
    q, _, n = blocks.reference(
        blocks.get_block_format("nvfp4"), get_reference("leaky_relu"), np.array(x), {"alpha": 0.5}
    )
    t = t_code(max(abs(v) for v in f))
    assert q.tensor_scale == float(t) == 1 + 2.0**-22 and n >= 1
    assert q.scale.tolist() == [float(nv_code(max(abs(v) for v in f[b : b + 16]), t, "ocp")) for b in (0, 16)]


# ------------------------------------------- the fast path's bound, mpmath's precision (5th pass)
import dataclasses  # noqa: E402

# the ties of E4M3 at X = 1 in [1, 4) (every midpoint of two neighbours), and x = 2 f
TIES = [Q(1) + Q(2 * k + 1, 16) for k in range(8)] + [Q(2) + Q(2 * k + 1, 8) for k in range(8)]
TIE_X = [896.0] + [float(2 * t) for t in TIES] + [2.0] * 15  # 896: f = 448, k = 0


def syn(mpf, fast, rel_err=0.0, rel_err_at=None, exact=False, near=None, params=None, zero_at=None):
    """A reference given by its parts (mp, fast path and bound, near split)."""
    return dataclasses.replace(
        get_reference("sigmoid"),
        name="syn",
        mp=mpf,
        fast=fast,
        rel_err=rel_err,
        rel_err_at=rel_err_at,
        exact=exact,
        near=near,
        fast_near=None,
        sign=None,
        zero_at=zero_at,
        params=params or {},
    )


def _codes(ref, x, params=None, out="mxfp8_e4m3"):
    q, _, n = blocks.reference(blocks.get_block_format(out), ref, np.array(x), params or {})
    return q.elems.ravel().tolist(), q.scale.tolist(), n


def test_fast_bound_is_the_declared_one():
    """f = x / 2 on E4M3's ties at X = 1: a fast path off by exactly its declared bound 2^-20
    (below every tie) still sends the ties to mpmath, which rounds them to even; one that is
    exact and 1.5 bounds (2^-30) above the ties sends nothing to mpmath (its bound clears
    every boundary) and rounds them up; a per-input bound (rel_err_at, at the reference's
    parameters) is the one used where given."""
    half = lambda v, **_: v / 2  # noqa: E731
    want = [448.0] + [float(rne("fp8_e4m3", t)) for t in TIES] + [1.0] * 15
    assert sum(w > float(t) for w, t in zip(want[1:17], TIES)) == 8  # half the ties go up
    edge = syn(half, lambda x: x / 2 * (1 - 2.0**-20), rel_err=2.0**-20)
    el, sc, n = _codes(edge, TIE_X)
    assert el == want and sc == [1.0] and n >= 16
    c = 1 + 1.5 * 2.0**-30
    up = [448.0] + [float(next(v for v in GRIDS["fp8_e4m3"] if v > t)) for t in TIES] + [1.0] * 15
    off = syn(
        lambda v, **_: v / 2 * (1 + mp.mpf(1.5) * mp.mpf(2) ** -30), lambda x: x / 2 * c, rel_err=2.0**-30
    )
    assert _codes(off, TIE_X) == (up, [1.0], 0)
    at = syn(
        lambda v, c: v / 2 * (1 + mp.mpf(1.5) * mp.mpf(2) ** -30) * c,
        lambda x, c: x / 2 * (1 + 1.5 * 2.0**-30) * c,
        rel_err=2.0**-20,  # (too wide: every tie would go to mpmath)
        rel_err_at=lambda x, c: np.full(np.shape(x), 2.0**-30 * c),
        params={"c": 1.0},
    )
    assert _codes(at, TIE_X, {"c": 1.0}) == (up, [1.0], 0)


def test_mpmath_precisions_and_memo():
    """An exact tie (f = x / 2, no fast path) never clears its boundary: its value is taken
    once per input value at 300 bits, and its decision starts at 120 + 2 e bits (e = x's
    binary exponent, when positive), doubling until 4096 bits or more, where the tie is
    taken as exact; 32 equal inputs cost one such series (the memo by input value).
    x = 8.5: f = 4.25, k = 2 - 8, q = 4.25 * 64 = 272, the midpoint of 256 and 288: even,
    256; e = 4, so 128 ... 4096.  x = 1.0625 2^-20: q = 1.0625 2^8 = 272 again; e < 0, so
    120 ... 3840, 7680.  The scale (f far from a power of two) needs no decision."""
    seen: list = []

    def half(v, **_):
        seen.append(mp.mp.prec)
        return v / 2

    el, sc, n = _codes(syn(half, None), [8.5] * 32)
    assert sc == [2.0**-6] and el == [256.0] * 32 and float(rne("fp8_e4m3", Q(272))) == 256.0 and n == 32
    assert seen == [300, 128, 256, 512, 1024, 2048, 4096]
    seen.clear()
    el, sc, _ = _codes(syn(half, None), [2.0**-20 * 1.0625] * 32)
    assert sc == [2.0**-29] and el == [256.0] * 32
    assert seen == [300, 120, 240, 480, 960, 1920, 3840, 7680]


def test_a_negative_value_decided_at_the_first_precision():
    """NVFP4, f(0.5) = 2688 (T = 1, S = 448) and f(-0.5) = -6.375 (1 + 2^-60): |f| / 6 lies
    2^-60 above the E4M3 midpoint 1.0625, so its block scale S is 1.125, decided by mpmath
    (the float64 bound holds the midpoint) at the first precision, 120 bits: the magnitude
    ball of a negative value is (-b, -a), above the midpoint at both ends."""
    seen: list = []

    def f(v, **_):
        seen.append(mp.mp.prec)
        return 5376 * v if v > 0 else 12.75 * (1 + mp.mpf(2) ** -60) * v

    with mp.workprec(200):
        assert mp.mpf(6.375) * (1 + mp.mpf(2) ** -60) / 6 > mp.mpf(1.0625)
    q, _, n = blocks.reference(
        blocks.get_block_format("nvfp4"), syn(f, None), np.array([0.5] * 16 + [-0.5] * 16), {}
    )
    assert q.tensor_scale == 1.0 and q.scale.tolist() == [448.0, 1.125] and n == 32
    assert q.elems[0].tolist() == [6.0] * 16 and q.elems[1].tolist() == [-6.0] * 16  # -6.375 / 1.125 = -5.67
    assert sorted(seen) == [120, 300, 300]


def test_near_split_only_where_g_is_tiny():
    """The near split f = P - g decides a side only when |g| <= |P| 2^-200.  f = x / 2 given
    with the valid but useless split (x, x / 2): the exact tie 4.25 (x = 8.5, q = 272 at
    X = 2^-6) is still taken as the exact tie (256, even), not pushed next to P = x.
    f = P (1 - 2^-1000) at P = x = 1.1875 2^-100 (q = 304 at X = 2^-108, the midpoint of 288
    and 320): the split decides, just below P: 288, of the sign of P."""
    half = syn(lambda v, **_: v / 2, None, near=lambda v, **_: (v, v / 2))
    el, sc, _ = _codes(half, [8.5] * 32)
    assert sc == [2.0**-6] and el == [256.0] * 32
    P = 1.1875 * 2.0**-100
    sat = syn(
        lambda v, **_: v - v * mp.mpf(2) ** -1000,
        lambda x: x,
        rel_err=2.0**-50,
        near=lambda v, **_: (v, v * mp.mpf(2) ** -1000),
    )
    el, sc, _ = _codes(sat, [P] * 32)
    assert sc == [2.0**-108] and el == [288.0] * 32
    el, sc, _ = _codes(sat, [-P] * 32)
    assert sc == [2.0**-108] and el == [-288.0] * 32


def test_a_reference_without_a_zero_set():
    """No zero set declared: every exact value is taken as nonzero, so a zero result where
    the float64 exact value is 0 has relative error 1 (relu(-1) = 0 read as an underflow)."""

    class NoZeros(Fake):
        @property
        def ref(self):
            return dataclasses.replace(get_reference("relu"), zero_at=None)

    x = np.array([-1.0] * 16 + [2.0] * 16)
    r = blocks.audit(
        NoZeros("relu", [0.0] * 16 + [2.0] * 16),
        blocks.get_block_format("mxfp8_e4m3"),
        x,
        FORMATS["bf16"],
        FORMATS["fp32"],
    )
    assert r.max_rel == 1.0 and r.mismatches == 0
    r = blocks.audit(
        Fake("relu", [0.0] * 16 + [2.0] * 16),
        blocks.get_block_format("mxfp8_e4m3"),
        x,
        FORMATS["bf16"],
        FORMATS["fp32"],
    )
    assert r.max_rel == 0.0


def test_reference_quiet_under_floating_point_traps():
    """log(0) = -inf and log(-1) (NaN) blocks, exp overflowing float64: the reference's
    bounds compute through inf - inf on purpose, quietly under a caller's errstate."""
    x = np.array([0.0] * 16 + [-1.0] * 16 + [800.0] * 16 + [1.0] * 16)
    for out in ("mxfp8_e4m3", "nvfp4"):
        bf = blocks.get_block_format(out)
        with np.errstate(all="raise"):
            q, _, _ = blocks.reference(bf, get_reference("log"), x, {})
            assert np.isnan(q.scale[: 2 if out == "nvfp4" else 1]).all()
            q, _, _ = blocks.reference(bf, get_reference("exp"), x, {})
            assert np.isfinite(q.scale).all()
            # f(800) is inf in float64: the figures divide inf by an infinite unit, quietly
            r = blocks.audit(catalog()["exp.libm"], bf, x, FORMATS["bf16"], FORMATS["fp32"])
            assert r.nan_elements == bf.block  # (the candidate overflows at 800: its block is NaN)
    # an error far below one ulp of a large block scale underflows: relu(3 2^-1074) flushed to
    # 0 in a block of maximum 2^20 (u = 2^12 2^-9 = 8): quietly, 1.5e-323 / 8 rounded
    x = np.array([2.0**20, 3 * 2.0**-1074] + [0.0] * 30)
    with np.errstate(all="raise"):
        r = blocks.audit(
            Fake("relu", [2.0**20] + [0.0] * 31),
            blocks.get_block_format("mxfp8_e4m3"),
            x,
            FORMATS["fp32"],
            FORMATS["fp32"],
        )
    assert r.max_elem_ulp == 0.0 and r.mismatches == 0  # (1.85e-324 rounds to 0)


def test_audit_against_nan_reference_blocks():
    """log.fastlog is finite at 0 and -1 (bit tricks), where log is -inf and NaN: those two
    blocks are NaN for the reference, so their elements have no error figure and every one
    differs (a number against NaN), and their scales differ; the block [5 x 32]: amax =
    fastlog(5) in [1, 2), X = 2^-8, q = 256 fastlog(5) rounds to 416 (E4M3 step 32), as
    the reference's, u = X 32 = 1/8, error |416/256 - log 5| / u.  An all-NaN reference
    (log.libm at 0): no figure, no warning.  Quiet under errstate(raise); a candidate
    without an identity has an empty one; the time lies within the call."""
    import time

    bf = blocks.get_block_format("mxfp8_e4m3")
    x = np.array([0.0, 1.0, 2.0] + [3.0] * 29 + [-1.0] + [2.0] * 31 + [5.0] * 32)
    c = catalog()["log.fastlog"]
    with mp.workprec(200):
        want = float(abs(mp.mpf(416) / 256 - mp.log(5)) * 8)
    t0 = time.perf_counter()
    with np.errstate(all="raise"):
        r = blocks.audit(c, bf, x, FORMATS["bf16"], FORMATS["fp32"])
    t1 = time.perf_counter()
    assert abs(r.max_elem_ulp - want) <= want * 1e-12 and abs(r.mean_elem_ulp - want) <= want * 1e-12
    assert (r.mismatches, r.scale_diff_blocks, r.scale_diff_first, r.nan_elements) == (64, 2, [0, 1], 0)
    assert 0 < r.seconds <= t1 - t0 and r.identity == {}

    class Bare(Fake):
        identity = property(lambda self: (_ for _ in ()).throw(AttributeError("identity")))

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = blocks.audit(Bare("log", [-math.inf] * 32), bf, np.zeros(32), FORMATS["bf16"], FORMATS["fp32"])
    assert math.isnan(r.max_elem_ulp) and math.isnan(r.ref_max_elem_ulp) and math.isnan(r.max_rel)
    assert (r.mismatches, r.scale_diff_blocks, r.nan_elements, r.worst_block, r.identity) == (
        0,
        0,
        0,
        None,
        {},
    )


class Given(Fake):
    """A candidate of given outputs against a reference given by its parts."""

    def __init__(self, ref, y):
        super().__init__("syn", y)
        self._ref = ref

    @property
    def ref(self):
        return self._ref


def test_exhaustive_tensor_scale_on_a_tie():
    """NVFP4 pairs of fp4_e2m1 inputs, f = C x below 0 and C x / 2 above, C = 448 (1 +
    2^-24): the tensor maximum |f(-6)| = 2688 (1 + 2^-24), so T = RN_fp32(1 + 2^-24), a tie:
    1.0 (even).  The fast bound (2^-40) holds the tie, so T is decided by mpmath, from
    f(-6) alone (|f(6)| is half of it): one element."""
    C = 448 * (1 + 2.0**-24)
    ref = syn(
        lambda v, **_: 448 * (1 + mp.mpf(2) ** -24) * (v if v < 0 else v / 2),
        lambda x: np.where(x < 0, C * x, C * x / 2),
        rel_err=2.0**-40,
    )
    xs = _pair_inputs("fp4_e2m1")
    y = [C * v if v < 0 else C * v / 2 for v in xs]
    r = blocks.exhaustive(
        Given(ref, y), blocks.get_block_format("nvfp4"), FORMATS["fp4_e2m1"], FORMATS["fp32"]
    )
    assert r.tensor_scale["reference"] == 1.0 and r.n_mpmath == 1
    # the same block sampled: T decided from f(-6) alone; S = 448 (saturated), every element
    # (f / 448: -6, 3, 0.5) far from a boundary
    q, _, n = blocks.reference(blocks.get_block_format("nvfp4"), ref, np.array([-6.0, 6.0] + [1.0] * 14), {})
    assert q.tensor_scale == 1.0 and q.scale.tolist() == [448.0] and n == 1
    assert q.elems[0].tolist() == [-6.0, 3.0] + [0.5] * 14


def test_a_nan_block_takes_no_part_in_the_tensor_scale():
    """f = x / 16 for x >= 0, NaN below: the tensor maximum is f(6) = 0.375 (the NaN inputs
    have no magnitude), T = RN_fp32(0.375 / 2688) = RN_fp32(1 / 7168); sampled and in pairs."""
    ref = syn(
        lambda v, **_: v / 16 if v >= 0 else mp.nan,
        lambda x: np.where(x >= 0, x / 16, np.nan),
        exact=True,
    )
    with mp.workprec(24):
        t = float(mp.mpf(1) / 7168)
    bf = blocks.get_block_format("nvfp4")
    q, _, n = blocks.reference(bf, ref, np.array([-1.0] * 16 + [6.0] * 16), {})
    assert q.tensor_scale == t and np.isnan(q.scale[0]) and q.scale[1] > 0 and n == 16
    xs = _pair_inputs("fp4_e2m1")
    r = blocks.exhaustive(
        Given(ref, [v / 16 if v >= 0 else math.nan for v in xs]), bf, FORMATS["fp4_e2m1"], FORMATS["fp32"]
    )
    assert r.tensor_scale == {"reference": t, "candidate": t} and r.scale_diff_blocks == 0


def test_binade_decisions_memoized():
    """f = x / 2 at x = 8 (no fast path): f = 4 is a power of two, so both the block scale
    (the binade of the maximum) and the element's binade (f / X = 256) are decided by
    mpmath, each over the series 128 ... 4096 bits (never clearing: exact), once for 32
    equal inputs; the element 256 itself needs no decision."""
    seen: list = []

    def half(v, **_):
        seen.append(mp.mp.prec)
        return v / 2

    el, sc, _ = _codes(syn(half, None), [8.0] * 32)
    assert sc == [2.0**-6] and el == [256.0] * 32
    series = [128, 256, 512, 1024, 2048, 4096]
    assert seen == [300] + series + series


def test_exhaustive_exact_figures_of_decided_elements():
    """f = 5 x / 8 over fp4_e2m1 pairs to mxfp4_e2m1 (ceil: nothing saturates), through a fast
    path 2^-30 low (bound 2^-20): the ties (f(2) = 1.25 at X = 1, ...) go to mpmath, and their
    float64 figure is then the exact value, so the quantization's own cost is exactly 1/2
    element ulp there and below it elsewhere: ref_max_elem_ulp = 0.5."""
    ref = syn(lambda v, **_: 5 * v / 8, lambda x: 5 * x / 8 * (1 - 2.0**-30), rel_err=2.0**-20)
    xs = _pair_inputs("fp4_e2m1")
    r = blocks.exhaustive(
        Given(ref, [5 * v / 8 for v in xs]),
        blocks.get_block_format("mxfp4_e2m1", "ceil"),
        FORMATS["fp4_e2m1"],
        FORMATS["fp32"],
    )
    assert r.ref_max_elem_ulp == 0.5 and r.n_mpmath > 0


def test_exhaustive_binade_below_far_under_one():
    """f = 2^-100 x (1 - 2^-60) over fp4_e2m1 pairs to mxfp8_e4m3 (ceil), the candidate exact
    but at x = 1, where it gives 1.125 2^-100: f(1) lies just below 2^-100, and with the
    pair's scale 2^-106 (m = 6) or 2^-108 (m = 1/2) its quotient just below 64 or 256, in
    E4M3's binade [32, 64) (ulp 4) or [128, 256) (ulp 16); the candidate's 72 or 288 is then
    8 or 32 away: 2 element ulps (the binade above would give 1).  Every other element
    costs at most 1/2."""
    c = 1 - 2.0**-60
    ref = syn(
        lambda v, **_: mp.mpf(2) ** -100 * v * (1 - mp.mpf(2) ** -60),
        lambda x: 2.0**-100 * x,
        rel_err=2.0**-50,
    )
    xs = _pair_inputs("fp4_e2m1")
    y = [2.0**-100 * 1.125 if v == 1.0 else 2.0**-100 * v * c for v in xs]
    r = blocks.exhaustive(
        Given(ref, y), blocks.get_block_format("mxfp8_e4m3", "ceil"), FORMATS["fp4_e2m1"], FORMATS["fp32"]
    )
    assert r.max_elem_ulp == 2.0 and r.worst_block["x"] == 1.0
