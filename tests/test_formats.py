import math

import ml_dtypes
import mpmath as mp
import numpy as np
import pytest
from helpers import is_nearest_even, neighbours, to_fraction

from audit.errors import UnknownNameError
from audit.numbers.formats import FORMATS, get_format, parse_formats

SMALL = ["fp8_e4m3", "fp8_e5m2", "bf16", "fp16"]
ALL = list(FORMATS)


@pytest.mark.parametrize(
    "name,dtype",
    [
        ("fp8_e4m3", ml_dtypes.float8_e4m3fn),
        ("fp8_e5m2", ml_dtypes.float8_e5m2),
        ("bf16", ml_dtypes.bfloat16),
        ("fp16", np.float16),
        ("fp32", np.float32),
        ("fp64", np.float64),
    ],
)
def test_parameters_match_finfo(name, dtype):
    f, fi = get_format(name), ml_dtypes.finfo(dtype)
    assert f.max_finite == float(fi.max)
    assert f.smallest_normal == float(fi.smallest_normal)
    assert f.smallest_subnormal == float(fi.smallest_subnormal)
    assert f.p == fi.nmant + 1


def test_hand_worked_parameters():
    assert get_format("e4m3").max_finite == 448.0 and not get_format("e4m3").has_inf
    assert get_format("e5m2").max_finite == 57344.0
    assert get_format("half").max_finite == 65504.0
    assert get_format("half").smallest_subnormal == 2.0**-24
    assert get_format("bfloat16").smallest_subnormal == 2.0**-133


def test_aliases_and_errors():
    assert get_format("float16") is get_format("FP16") is get_format("half")
    assert [f.name for f in parse_formats("fp16, bf16,fp16")] == ["fp16", "bf16"]
    with pytest.raises(UnknownNameError, match="did you mean"):
        get_format("fp17")


@pytest.mark.parametrize("name", SMALL)
def test_enumeration_counts(name):
    f = get_format(name)
    vals = f.finite_values()
    # all bit patterns minus NaNs and infinities
    bits = np.arange(1 << f.bits, dtype=np.uint32).astype(f.uint)
    with np.errstate(all="ignore"):
        n_finite = int(np.isfinite(bits.view(f.dtype).astype(np.float64)).sum())
    assert len(vals) == n_finite
    assert np.all(np.diff(vals) >= 0)
    assert vals[0] == -f.max_finite and vals[-1] == f.max_finite
    zeros = vals[vals == 0]
    assert len(zeros) == 2 and np.signbit(zeros[0]) and not np.signbit(zeros[1])


def _adversarial(f):
    """Midpoints between consecutive values, and values a hair either side."""
    if f.enumerable:
        v = f.finite_values()
        v = v[v >= 0]
    else:
        rng = np.random.default_rng(1)
        v = np.sort(np.abs(f.from_ordinal(rng.integers(0, f.max_ordinal, 3000))))
    mids = (v[:-1] + v[1:]) / 2  # exact in float64 for p <= 52
    if len(mids) > 4000:  # all of both ends (subnormals, near max) and a stride between
        mids = np.unique(np.concatenate([mids[:700], mids[::23], mids[-700:]]))
    return np.concatenate(
        [
            mids,
            np.nextafter(mids, np.inf),
            np.nextafter(mids, -np.inf),
            [
                f.max_finite * (1 + 2.0**-f.p),
                f.max_finite * (1 + 2.0**-f.p) * (1 - 1e-15),
                f.max_finite * 4,
                f.smallest_subnormal / 2,
                f.smallest_subnormal / 3,
            ],
        ]
    )


@pytest.mark.parametrize("name", SMALL + ["fp32"])
def test_round_is_nearest_even_at_midpoints(name):
    f = get_format(name)
    x = _adversarial(f)
    x = np.concatenate([x, -x])
    r = f.round(x)
    for xi, ri in zip(x.tolist(), r.tolist()):
        if math.isinf(ri) or math.isnan(ri):
            # overflow: x is at least max + half an ulp of max
            half = 2.0 ** (math.floor(math.log2(f.max_finite)) - f.p + 1) / 2
            assert abs(xi) >= f.max_finite + half
            assert math.isnan(ri) == (not f.has_inf)
        else:
            assert is_nearest_even(f, xi, ri), (name, xi, ri)


@pytest.mark.parametrize("name", ALL)
def test_round_mpf_agrees_with_round(name):
    f = get_format(name)
    x = _adversarial(f)[:2000] if f.bits < 64 else np.array([1.0, 1.5, 2.0**-1074, 1e308])
    for xi in x.tolist():
        assert f.round_mpf(mp.mpf(xi)) == f.round(np.array([xi]))[0] or (
            math.isnan(f.round_mpf(mp.mpf(xi))) and math.isnan(f.round(np.array([xi]))[0])
        )


def test_round_mpf_exact_ties_and_beyond_float64():
    f = get_format("fp16")
    with mp.workprec(200):
        one_plus = mp.mpf(1) + mp.mpf(2) ** -11  # tie between 1 and 1+2^-10: even is 1
        assert f.round_mpf(one_plus) == 1.0
        assert f.round_mpf(one_plus + mp.mpf(2) ** -150) == 1 + 2**-10  # a hair above the tie
        assert f.round_mpf(mp.mpf(65520)) == math.inf
        assert f.round_mpf(mp.mpf(65520) - mp.mpf(2) ** -100) == 65504.0
        assert f.round_mpf(mp.mpf(2) ** -25) == 0.0  # tie between 0 and the smallest subnormal
        assert f.round_mpf(mp.mpf(2) ** -25 + mp.mpf(2) ** -200) == 2.0**-24
        assert get_format("fp64").round_mpf(mp.mpf(2) ** 2000) == math.inf
        assert get_format("e4m3").round_mpf(mp.mpf(464)) == 448.0  # tie: 448 is even
        assert math.isnan(get_format("e4m3").round_mpf(mp.mpf(465)))


def test_bfloat16_rounds_once():
    # ml_dtypes goes through float32 and rounds twice; we must not
    x = 1 + 2.0**-8 + 2.0**-30
    assert get_format("bf16").round([x])[0] == 1 + 2.0**-7


def test_ulp_hand_worked():
    h = get_format("fp16")
    assert h.ulp([1.0])[0] == 2.0**-10
    assert h.ulp([1.999])[0] == 2.0**-10
    assert h.ulp([2.0])[0] == 2.0**-9
    assert h.ulp([-3.0])[0] == 2.0**-9
    assert h.ulp([65504.0])[0] == 32.0
    assert h.ulp([1e6])[0] == 2.0 ** (19 - 10)  # beyond the range the formula still holds
    assert h.ulp([2.0**-14])[0] == 2.0**-24  # smallest normal
    assert h.ulp([2.0**-20])[0] == 2.0**-24  # subnormal: fixed
    assert h.ulp([0.0])[0] == 2.0**-24
    assert math.isnan(h.ulp([math.inf])[0])
    b = get_format("bf16")
    assert b.ulp([1.0])[0] == 2.0**-7 and b.ulp([0.0])[0] == 2.0**-133
    e = get_format("e4m3")
    assert e.ulp([448.0])[0] == 32.0 and e.ulp([0.0])[0] == 2.0**-9
    d = get_format("fp64")  # float64 subnormals and zeros: the clamp at 2**emin
    assert d.ulp([5e-324, 0.0, -0.0, 2.0**-1022, 1.0, -3.0]).tolist() == [5e-324] * 3 + [
        5e-324,
        2.0**-52,
        2.0**-51,
    ]
    assert math.isnan(d.ulp([math.nan])[0]) and math.isnan(d.ulp([-math.inf])[0])
    s = get_format("fp32")
    assert s.ulp([2.0**-149, -0.0, 2.0**-126, 1e-300, 3e38]).tolist() == [2.0**-149] * 4 + [2.0 ** (127 - 23)]


def test_ordinals_and_hex():
    h = get_format("fp16")
    assert h.ordinal([0.0, -0.0, 2.0**-24, -(2.0**-24), 65504.0]).tolist() == [0, 0, 1, -1, 0x7BFF]
    assert h.hex(1.0) == "0x3c00" and h.hex(-2.0) == "0xc000"
    assert get_format("fp32").hex(1.0) == "0x3f800000"
    f = get_format("fp64")
    assert f.ordinal([-1.0])[0] == -0x3FF0000000000000
    assert f.from_ordinal([1])[0] == 5e-324


@pytest.mark.parametrize("name", SMALL)
def test_neighbours_helper_is_consistent(name):
    f = get_format(name)
    v = f.finite_values()
    b, a = neighbours(f, float(v[len(v) // 2 + 3]))
    assert b < v[len(v) // 2 + 3] < a
    assert to_fraction(mp.mpf(0.5)) == 0.5


# (exponent bits, mantissa bits, bias, IEEE specials: all-ones exponent is inf/NaN; else only
# S.1111.111 is NaN, OCP FP8 E4M3FN)
_LAYOUTS = {"bf16": (8, 7, 127, True), "fp8_e5m2": (5, 2, 15, True), "fp8_e4m3": (4, 3, 7, False)}


@pytest.mark.parametrize("name", sorted(_LAYOUTS))
def test_bit_layouts_decode_from_the_fields_of_every_pattern(name):
    """from_bits and to_bits of bf16 and the OCP fp8 formats (numpy views, no ml_dtypes) against
    the value each bit pattern denotes by its sign, exponent and fraction fields."""
    ebits, mbits, bias, ieee = _LAYOUTS[name]
    fmt = get_format(name)
    want = []
    for b in range(1 << (1 + ebits + mbits)):
        s, e, m = b >> (ebits + mbits), (b >> mbits) & ((1 << ebits) - 1), b & ((1 << mbits) - 1)
        top = e == (1 << ebits) - 1
        if (ieee and top) or (not ieee and top and m == (1 << mbits) - 1):
            v = math.nan if m or not ieee else math.inf
        elif e == 0:
            v = math.ldexp(m, 1 - bias - mbits)
        else:
            v = math.ldexp((1 << mbits) + m, e - bias - mbits)
        want.append(-v if s else v)
    want = np.array(want)
    bits = np.arange(1 << (1 + ebits + mbits)).astype(fmt.uint)
    got = fmt.from_bits(bits)
    assert np.array_equal(got, want, equal_nan=True) and np.array_equal(np.signbit(got), np.signbit(want))
    ok = ~np.isnan(want)
    assert np.array_equal(fmt.to_bits(want[ok]), bits[ok])
    # NaN: the quiet NaN of its sign (all fraction bits set in E4M3FN)
    quiet = 0x7F if not ieee else ((1 << ebits) - 1) << mbits | 1 << (mbits - 1)
    sign = 1 << (ebits + mbits)
    assert fmt.to_bits([math.nan, -math.nan]).tolist() == [quiet, quiet | sign]
    assert fmt.hex(math.nan) == f"0x{quiet:0{(fmt.bits + 3) // 4}x}"


def _rint_round(fmt, v):
    """The test's own rounding to p bits with q = max(e, emin) - p + 1 (every step exact in
    float64: frexp, scaling by powers of two, rint's ties to even), no overflow handling."""
    with np.errstate(all="ignore"):
        _, k = np.frexp(v)
        q = np.maximum(k - 1, fmt.emin) - (fmt.p - 1)
        return np.ldexp(np.rint(np.ldexp(v, -q)), q)


SPLIT = [f for f in FORMATS.values() if f.kind == "float" and 2 <= f.p <= 24]


@pytest.mark.parametrize("fmt", SPLIT, ids=lambda f: f.name)
def test_split_rounding_at_every_midpoint(fmt):
    """The splitting rounding (Veltkamp's) of every format it serves, at every midpoint
    between consecutive values (where ties to even decide), one float64 ulp either side, 2^-30
    of the value either side, every value, beyond the range, the specials and random values
    of every exponent, both signs: the same bits as the rounding written from the definition
    (ties to even by rint), and above max_finite exactly where that one is."""
    if fmt.bits <= 16:
        vals = fmt.finite_values()
    else:  # tf32, fp32: the values of a few binades and the subnormal edge
        vals = np.concatenate([np.linspace(1, 2, 4097), np.linspace(0, 4, 4097) * fmt.smallest_normal])
        vals = np.unique(_rint_round(fmt, np.concatenate([vals, vals * 2.0**100])))
    vals = np.unique(np.abs(vals))
    mid = (vals[:-1] + vals[1:]) / 2
    # past the top: max_finite plus its ulp (in the 16-bit and smaller formats, where vals[-2]
    # is the value below max_finite; a value beyond the range in the others)
    top = fmt.max_finite * 2 - (fmt.max_finite - float(vals[-2]))
    rng = np.random.default_rng(7)
    rand = rng.uniform(1, 2, 200_000) * np.exp2(rng.integers(fmt.emin - fmt.p - 4, fmt.emax + 4, 200_000))
    x = np.concatenate(
        [
            vals,
            mid,
            np.nextafter(mid, 0),
            np.nextafter(mid, np.inf),
            mid * (1 + 2.0**-30),
            mid * (1 - 2.0**-30),
            [top, (top + fmt.max_finite) / 2, 1e300, 1.7e308, np.inf, 5e-324, 2.0**-1074 * 3],
            rand,
        ]
    )
    x = np.concatenate([x, -x, [0.0, -0.0]])
    want = _rint_round(fmt, x)
    got = fmt._split_round(x)
    inside = np.abs(want) <= fmt.max_finite
    assert np.array_equal(got[inside], want[inside])
    assert np.array_equal(np.signbit(got[inside]), np.signbit(want[inside]))
    assert (np.abs(got[~inside]) > fmt.max_finite).all()  # overflows where the definition does
    tiny = np.abs(x) < fmt.smallest_normal  # alone: the path for arrays of mostly tiny values
    got = fmt._split_round(x[tiny])
    assert np.array_equal(got, want[tiny]) and np.array_equal(np.signbit(got), np.signbit(want[tiny]))
    assert np.isnan(fmt._split_round(np.array([np.nan])))[0]
    two = x[: len(x) // 2 * 2].reshape(2, -1)  # any shape, 0-d included
    assert np.array_equal(fmt.round(two), fmt.round(two.ravel()).reshape(two.shape), equal_nan=True)
    neg = fmt.round(-fmt.smallest_subnormal / 4)  # a 0-d input, rounding to zero
    assert neg.shape == () and neg == 0 and np.signbit(neg) == fmt.neg_zero


def test_fp16_round_at_double_rounding_traps():
    """round() agrees with the rounding from the definitions (Fractions) where a rounding
    through float32 would round twice, and at the tie of the smallest subnormals."""
    from fractions import Fraction

    from helpers import round_exact

    traps = [Fraction(2**k) * (1 + Fraction(1, 2**11) + Fraction(1, 2**30)) for k in range(-14, 16)]
    traps += [-t for t in traps] + [Fraction(2**-24) * Fraction(3, 2) + Fraction(1, 2**60)]
    traps += [Fraction(2**-25), Fraction(3, 2**26), -Fraction(2**-25) * (1 + Fraction(1, 2**52))]
    got = FORMATS["fp16"].round([float(t) for t in traps])
    assert [Fraction(float(g)) for g in got] == [round_exact("fp16", t) for t in traps]
    assert np.signbit(FORMATS["fp16"].round([-(2.0**-26), -(2.0**-25)])).all()  # -0 keeps its sign
