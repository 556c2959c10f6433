"""audit/blocks.py: MX and NVFP4 block audits, block scales and element codes.

They kill mutants that mutmut found surviving the rest of the suite, each with an expectation
worked in the test (docs/design/mutation-testing.md)."""

# ---- formats, rounding, scales (first half of blocks.py)
from __future__ import annotations  # noqa: E402  (after the docstring only)

import math  # noqa: E402
import os  # noqa: E402
from fractions import Fraction  # noqa: E402

import mpmath as mp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from audit import blocks  # noqa: E402
from audit.errors import BadFileError, BadOptionError  # noqa: E402
from audit.formats import FORMATS  # noqa: E402

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
        "normal:=2": "distribution 'normal:=2': normal takes std > 0 and mean",
        "normal:std=0": "distribution 'normal:std=0': normal takes std > 0 and mean",
        "normal:std=-1": "distribution 'normal:std=-1': normal takes std > 0 and mean",
        "normal:std=1,lo=2": "distribution 'normal:std=1,lo=2': normal takes std > 0 and mean",
        "uniform:lo=1": "distribution 'uniform:lo=1': uniform takes lo < hi",
        "uniform:lo=2,hi=1": "distribution 'uniform:lo=2,hi=1': uniform takes lo < hi",
        "uniform:lo=1,hi=1": "distribution 'uniform:lo=1,hi=1': uniform takes lo < hi",
        "uniform:lo=0,hi=1,std=2": "distribution 'uniform:lo=0,hi=1,std=2': uniform takes lo < hi",
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
    assert (
        str(e.value) == f"{tmp_path}: not a regular file (a file of inputs is read from a regular file only)"
    )
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
