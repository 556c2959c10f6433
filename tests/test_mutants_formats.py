"""audit/numbers/formats.py against oracles written here: ml_dtypes' own casts and bit layouts for the
accelerator formats, float32's bits shifted for tf32, hand-worked values and the IEEE
definitions.  Each test kills mutants that mutmut found surviving the rest of the suite
(docs/design/mutation-testing.md)."""

import math
import warnings

import ml_dtypes
import mpmath as mp
import numpy as np
import pytest

from audit.errors import UnknownNameError
from audit.numbers import formats as formats_mod
from audit.numbers.formats import FORMATS, element_format, get_format, parse_formats

ML = {
    "fp8_e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
    "fp8_e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
    "fp6_e3m2": ml_dtypes.float6_e3m2fn,
    "fp6_e2m3": ml_dtypes.float6_e2m3fn,
    "fp4_e2m1": ml_dtypes.float4_e2m1fn,
    "e8m0": ml_dtypes.float8_e8m0fnu,
}
BITS = {"fp8_e4m3fnuz": 8, "fp8_e5m2fnuz": 8, "fp6_e3m2": 6, "fp6_e2m3": 6, "fp4_e2m1": 4, "e8m0": 8}


def _no_warnings():
    c = warnings.catch_warnings()
    c.__enter__()
    warnings.simplefilter("error")
    return c


def _ml_values(name):
    """Every bit pattern of the format decoded by ml_dtypes (float64), and the patterns."""
    bits = np.arange(1 << BITS[name], dtype=np.uint8)
    return bits, bits.view(ML[name]).astype(np.float64)


def _same(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return bool(np.all((np.isnan(a) & np.isnan(b)) | ((a == b) & (np.signbit(a) == np.signbit(b)))))


@pytest.mark.parametrize("name", list(ML))
def test_coded_bits_are_ml_dtypes_bits(name):
    f = get_format(name)
    bits, vals = _ml_values(name)
    c = _no_warnings()
    try:
        got = f.from_bits(bits)
        assert got.dtype == np.float64
        # fnuz: ml_dtypes decodes 0x80 as NaN; the others' patterns are all values or NaN
        assert _same(got, vals)
        keep = np.isfinite(vals) if name != "e8m0" else np.isfinite(vals) & (vals > 0)
        extra = [math.nan, 0.0, -0.0] if f.has_nan else [0.0, -0.0]
        if name == "e8m0":
            extra = [math.nan, 0.0, -0.0, -1.0, -(2.0**-127)]  # no zero, no sign: all NaN
        v = np.concatenate([vals[keep], extra])
        want = v.astype(ML[name]).view(np.uint8)
        out = f.to_bits(v)
        assert out.dtype == np.uint8
        assert out.tolist() == want.tolist()
    finally:
        c.__exit__(None, None, None)


def test_fnuz_infinities_encode_as_their_nan():
    for name in ("fp8_e4m3fnuz", "fp8_e5m2fnuz"):
        f = get_format(name)
        v = np.array([math.inf, -math.inf])
        assert f.to_bits(v).tolist() == v.astype(ML[name]).view(np.uint8).tolist() == [0x80, 0x80]


def test_tf32_bits_are_float32_bits_shifted():
    f = get_format("tf32")
    b = np.arange(1 << 19, dtype=np.uint32)
    with np.errstate(invalid="ignore"):  # NaN patterns
        want = (b << np.uint32(13)).view(np.float32).astype(np.float64)  # IEEE binary32 layout
    c = _no_warnings()
    try:
        got = f.from_bits(b)
        assert _same(got, want)
        fin = ~np.isnan(want)
        out = f.to_bits(want[fin])
        assert out.dtype == np.uint32 and out.tolist() == b[fin].tolist()
        qnan = int(np.array([np.nan], dtype=np.float32).view(np.uint32)[0]) >> 13
        assert f.to_bits([math.nan, math.inf, -math.inf]).tolist() == [qnan, 0x3FC00, 0x7FC00]
        assert f.hex(math.nan) == f"0x{qnan:05x}" and f.hex(-math.inf) == "0x7fc00"
    finally:
        c.__exit__(None, None, None)


@pytest.mark.parametrize("name", list(ML) + ["tf32", "fp16", "fp8_e4m3", "bf16", "fp8_e5m2"])
def test_ordinals_count_values_from_zero(name):
    f = get_format(name)
    if name in ML:
        _, vals = _ml_values(name)
    elif name == "tf32":
        vals = (np.arange(0, 0x3FC00, 7, dtype=np.uint32) << np.uint32(13)).view(np.float32).astype(float)
    else:
        with np.errstate(invalid="ignore"):  # NaN patterns
            vals = np.arange(1 << f.bits, dtype=np.uint32).astype(f.uint).view(f.dtype).astype(np.float64)
    pos = np.unique(vals[np.isfinite(vals) & (vals > 0)])  # ascending positive values
    if name == "tf32":  # a stride of the patterns: ordinals are the patterns themselves
        k = (pos.astype(np.float32).view(np.uint32) >> np.uint32(13)).astype(np.int64)
    else:
        k = np.arange(1, len(pos) + 1)
    if name == "e8m0":  # no zero: consecutive scales are consecutive ordinals
        assert np.diff(f.ordinal(pos)).tolist() == [1] * (len(pos) - 1)
        return
    assert f.ordinal(pos).tolist() == k.tolist()
    assert f.ordinal(pos).dtype == np.int64
    assert f.ordinal(-pos).tolist() == (-k).tolist()
    assert f.ordinal([0.0, -0.0]).tolist() == [0, 0]
    back = f.from_ordinal(np.concatenate([k, -k, [0]]))
    assert _same(back, np.concatenate([pos, -pos, [0.0]]))  # +0 from ordinal 0, never -0
    top = int(k[-1]) if name != "tf32" else f.max_ordinal
    if f.coded:  # one step past the largest value: inf, or NaN where there is no inf
        assert f.ordinal([math.inf, -math.inf, math.nan]).tolist() == [top + 1, -(top + 1), top + 1]
        past = f.from_ordinal([top + 1, -(top + 1)])
        if f.has_inf:
            assert past.tolist() == [math.inf, -math.inf]
        else:
            assert np.isnan(past).all()  # fnuz: the NaN; saturating formats: no encoding


def test_fp64_ordinals_are_exact_integers():
    f = get_format("fp64")
    top = 0x7FEFFFFFFFFFFFFF  # the bit pattern of the largest double (IEEE binary64)
    assert f.ordinal([1.7976931348623157e308, -1.7976931348623157e308]).tolist() == [top, -top]
    assert f.max_ordinal == top
    assert f.from_ordinal([-1, -top]).tolist() == [-5e-324, -1.7976931348623157e308]


@pytest.mark.parametrize("name", list(FORMATS))
def test_outputs_are_float64_whatever_the_input_type(name):
    f = get_format(name)
    ints = [1, 2, 3, 6]
    for arg in (ints, np.array(ints, dtype=np.float32)):
        r = f.round(arg)
        assert r.dtype == np.float64 and _same(r, f.round(np.array(ints, dtype=np.float64)))
        u = f.ulp(arg)
        assert u.dtype == np.float64 and _same(u, f.ulp(np.array(ints, dtype=np.float64)))
    big = 2**60 + 1  # a Python int beyond float64's integers: rounded like its float64
    assert _same(f.round([big]), f.round([float(big)]))
    assert f.round([big]).dtype == np.float64


def test_fp16_from_a_python_list_of_patterns():
    assert get_format("fp16").from_bits([0x3C00, 0xC000, 0x7C00]).tolist() == [1.0, -2.0, math.inf]


def test_e8m0_rounds_positive_values_only():
    e = get_format("e8m0")
    # powers of two only: 0.7 is nearer 0.5 than 1; 2.9 nearer 2 than 4; below 2^-127 the smallest
    got = e.round([0.7, 2.9, 1.0, 2.0**-130, 0.0, -0.0, -1.0, math.nan])
    assert _same(got, [0.5, 2.0, 1.0, 2.0**-127, math.nan, math.nan, math.nan, math.nan])


def test_rounding_never_warns_on_extremes():
    x = [1.7976931348623157e308, -1.7976931348623157e308, math.inf, -math.inf, math.nan, 5e-324, 0.0]
    c = _no_warnings()
    try:
        for f in FORMATS.values():
            f.round(x)
            f.round_key(x)
            f.ulp(x)
        h = get_format("fp16").round(x[:2])
        assert h.tolist() == [math.inf, -math.inf]
        k = get_format("fp32").round_key(x)
        assert k[:4].tolist() == [math.inf, -math.inf, math.inf, -math.inf]
    finally:
        c.__exit__(None, None, None)


@pytest.mark.parametrize("name", ["fp32", "fp64", "fp16", "bf16"])
def test_round_key_is_equal_exactly_where_round_is(name):
    f = get_format(name)
    p = f.p
    # the tie 1 + 2^-p rounds to 1 (even), a hair above it to 1 + 2^(1-p); distinct
    # float64 values that round to one value of the format share a key
    x = np.array([1.0, 1 + 2.0**-p, 1 + 2.0**-p + 2.0**-52, 1 + 2.0 ** (1 - p), 1 + 2.0**-52])
    r, k = f.round(x), f.round_key(x)
    eq_r = r[:, None] == r[None, :]
    eq_k = k[:, None] == k[None, :]
    assert (eq_r == eq_k).all()
    assert eq_r.sum() > len(x) and not eq_r.all()  # the check compares something


def test_round_mpf_of_infinities_nan_and_beyond_float64():
    with mp.workprec(200):
        for name in ("fp16", "fp8_e4m3", "fp4_e2m1", "fp64", "tf32"):
            f = get_format(name)
            over = math.inf if f.has_inf else (f.max_finite if f.saturate else math.nan)
            assert _same([f.round_mpf(mp.inf), f.round_mpf(-mp.inf)], [over, -over])
            assert math.isnan(f.round_mpf(mp.nan))
        d = get_format("fp64")
        top = mp.mpf(2) ** 1024 - mp.mpf(2) ** 971  # the largest double, exactly
        assert d.round_mpf(top) == 1.7976931348623157e308
        assert d.round_mpf(mp.mpf(2) ** 1024) == math.inf
        assert d.round_mpf(top + mp.mpf(2) ** 970) == math.inf  # the tie goes to even: 2^1024
        assert d.round_mpf(-(mp.mpf(2) ** 1100)) == -math.inf
        e = get_format("e8m0")
        assert e.round_mpf(mp.mpf(4)) == 4.0
        assert math.isnan(e.round_mpf(mp.mpf(1) + mp.mpf(2) ** -100))  # not a float64: refused


def test_ulp_reads_only_the_exponent():
    # ulp_F(y) = 2^(max(floor(log2|y|), emin) - p + 1): the significand does not matter
    odd = 1 + 2.0**-52  # lowest significand bit set
    assert get_format("fp64").ulp([odd, -odd, 3.0000000000000004]).tolist() == [2.0**-52] * 2 + [2.0**-51]
    assert get_format("fp16").ulp([odd, np.nextafter(2.0, 0)]).tolist() == [2.0**-10, 2.0**-10]


def test_hex_widths_and_nan_patterns():
    assert get_format("fp16").hex(0.0) == "0x0000"
    assert get_format("fp8_e4m3").hex(0.0) == "0x00"
    assert get_format("fp4_e2m1").hex(-0.0) == "0x8"
    assert get_format("fp6_e3m2").hex(-28.0) == "0x3f"
    assert get_format("tf32").hex(1.0) == f"0x{0x3F800000 >> 13:05x}"  # 19 bits: 5 digits
    for name, dt in (("fp16", np.float16), ("fp32", np.float32), ("fp8_e4m3", ml_dtypes.float8_e4m3fn)):
        f = get_format(name)
        want = int(np.array([np.nan]).astype(dt).view(f"uint{np.dtype(dt).itemsize * 8}")[0])
        assert f.hex(math.nan) == f"0x{want:0{np.dtype(dt).itemsize * 2}x}"
    assert get_format("fp8_e4m3fnuz").hex(math.nan) == "0x80"
    assert get_format("fp4_e2m1").hex(math.nan) == "nan"


def test_to_dict_hand_written():
    assert get_format("fp16").to_dict() == {
        "name": "fp16",
        "aliases": ["half", "float16", "f16", "binary16"],
        "bits": 16,
        "precision": 11,
        "emin": -14,
        "emax": 15,
        "max_finite": 65504.0,
        "smallest_normal": 2.0**-14,
        "smallest_subnormal": 2.0**-24,
        "has_inf": True,
        "has_nan": True,
        "negative_zero": True,
        "overflow": "inf",
        "kind": "float",
        "description": "IEEE 754 binary16",
        "source": "",
    }
    d = get_format("fp4_e2m1").to_dict()
    assert (d["overflow"], d["has_nan"], d["max_finite"], d["smallest_subnormal"]) == (
        "saturates to max",
        False,
        6.0,
        0.5,
    )
    assert get_format("fp8_e4m3").to_dict()["overflow"] == "NaN"
    d = get_format("e8m0").to_dict()
    assert (d["kind"], d["negative_zero"]) == ("scale", False)


def test_fmt_builds_ieee_parameters():
    # IEEE: max = (2 - 2^(1-p)) * 2^emax
    f = formats_mod._fmt("x16", 16, 11, -14, 15, True, np.float16, ["h"], "desc", coded=True, source="s")
    assert (f.name, f.bits, f.p, f.emin, f.emax, f.has_inf) == ("x16", 16, 11, -14, 15, True)
    assert f.max_finite == 65504.0 and type(f.max_finite) is float
    assert f.dtype == np.dtype(np.float16) and f.aliases == ("h",) and f.description == "desc"
    assert f.coded and f.source == "s"
    g = formats_mod._fmt("x8", 8, 4, -6, 8, False, ml_dtypes.float8_e4m3fn, (), "", max_finite=448)
    assert g.max_finite == 448.0 and type(g.max_finite) is float
    assert formats_mod._fmt("b", 16, 8, -126, 127, True, ml_dtypes.bfloat16, (), "").max_finite == float(
        ml_dtypes.finfo(ml_dtypes.bfloat16).max
    )


def test_names_and_errors_hand_written():
    assert get_format("fp8-e4m3") is FORMATS["fp8_e4m3"]  # '-' read as '_'
    known = (
        "fp8_e4m3, fp8_e5m2, bf16, fp16, fp32, fp64, fp8_e4m3fnuz, fp8_e5m2fnuz, "
        "fp6_e3m2, fp6_e2m3, fp4_e2m1, e8m0, tf32"
    )
    with pytest.raises(UnknownNameError) as e:
        get_format("zzzzzzzzzzzz")
    assert str(e.value) == f"unknown format 'zzzzzzzzzzzz' (known: {known})"
    with pytest.raises(UnknownNameError) as e:
        get_format("fp8_e4m3f")  # fp8_e4m3, fp8_e4m3fn, fp8_e4m3fnuz, float8_e4m3fn...: three shown
    hint = str(e.value).split("; did you mean ")[1].split("?")[0].split(", ")
    assert len(hint) == 3 and "fp8_e4m3fn" in hint
    with pytest.raises(UnknownNameError) as e:
        element_format("e8m0")
    assert str(e.value) == (
        "e8m0 holds block scales only (powers of two, no zero): it is not an element format to audit in"
    )
    with pytest.raises(UnknownNameError) as e:
        parse_formats(" , ")
    assert str(e.value) == "no format given in ' , '"


def test_suggestions_reach_similarity_one_half():
    # difflib's ratio 2M/T: 'bfl' and 'bf16' share M = 2 of T = 7 characters, 4/7 < 0.6 (the default
    # cutoff) but >= 0.5
    with pytest.raises(UnknownNameError, match="did you mean bf16"):
        get_format("bfl")


def test_every_alias_is_found_as_written():
    """An alias with a '-' (tensorfloat-32) is found: names are matched as get_format
    normalizes them."""
    from audit.numbers.formats import FORMATS, get_format

    for f in FORMATS.values():
        for a in (f.name, *f.aliases):
            assert get_format(a) is f and get_format(a.upper()) is f
