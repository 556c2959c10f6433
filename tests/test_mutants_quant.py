"""audit/measure/quant.py: quantized (int8/int16) outputs, their codes, scales and errors.

They kill mutants that mutmut found surviving the rest of the suite, each with an expectation
worked in the test (docs/design/mutation-testing.md)."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest

from audit.errors import BadOptionError
from audit.measure import quant
from audit.oracle import codes
from audit.oracle.references import REFERENCES
from tests.test_quant import ref_code

LIMITS = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767)}
F01 = Fraction(13421773, 2**27)  # 0.1 rounded to the nearest float32 (24-bit significand)


def want_code(y, kind: str, scale, zero: int, rounding: str):
    """clamp(R(y / s) + z) with y / s an exact rational; R from the fraction against 1/2."""
    if isinstance(y, float) and math.isnan(y):
        return math.nan
    lo, hi = LIMITS[kind]
    if isinstance(y, float) and math.isinf(y):
        return hi if y > 0 else lo
    return ref_code(y, kind, scale, zero, rounding)  # (the exact rational rounding of test_quant)


def to_fraction(v) -> Fraction:
    """An mpmath number as an exact rational."""
    sign, man, exp, _ = mp.mpf(v)._mpf_
    return (-1) ** sign * Fraction(int(man)) * Fraction(2) ** int(exp)


def same(got, want) -> bool:
    got = [float(g) for g in got]
    return len(got) == len(want) and all(
        (math.isnan(g) and math.isnan(w))
        if (math.isnan(g) or (isinstance(w, float) and math.isnan(w)))
        else g == w
        for g, w in zip(got, want)
    )


# --------------------------------------------------------------------- parse_quant
GOOD = [
    ("int8:scale=0.0625,zero=0", ("int8", 0.0625, 0, "even")),
    ("int8:scale=0.0625", ("int8", 0.0625, 0, "even")),
    (" UINT8 : Scale = 0.1 ,, ZERO = 7 , Round = AWAY , ", ("uint8", float(F01), 7, "away")),
    ("int16:zero=-32768,scale=3,round=even", ("int16", 3.0, -32768, "even")),
    ("int16:scale=1,zero=32767", ("int16", 1.0, 32767, "even")),
    ("int8:scale=1,zero=-128", ("int8", 1.0, -128, "even")),
    ("int8:scale=1,zero=127", ("int8", 1.0, 127, "even")),
    ("uint8:scale=1,zero=0", ("uint8", 1.0, 0, "even")),
    ("uint8:scale=1,zero=255", ("uint8", 1.0, 255, "even")),
    ("int8:scale=1.1754943508222875e-38", ("int8", 2.0**-126, 0, "even")),  # the smallest normal
    ("int8:scale=1.1754943e-38", ("int8", 2.0**-126, 0, "even")),  # rounds up onto it in float32
    ("int8:scale=3.4028234663852886e38", ("int8", float(Fraction(2**24 - 1) * 2**104), 0, "even")),
    ("int8:scale=0.30000000000000004,zero=+3", ("int8", float(Fraction(10066330, 2**25)), 3, "even")),
]


@pytest.mark.parametrize("spec,want", GOOD)
def test_parse_quant_reads_every_field(spec, want):
    q = quant.parse_quant(spec)
    assert type(q) is quant.QuantFormat
    assert (q.kind, q.scale, q.zero, q.rounding) == want
    assert type(q.scale) is float and type(q.zero) is int
    assert quant.parse_quant(q) is q


def _msg(text, tail):
    return f"'{text}': {tail}"


BAD = [
    ("int32:scale=1", "unknown quantized format 'int32' (known: int8, uint8, int16)"),
    (" Int4 :scale=1", "unknown quantized format 'int4' (known: int8, uint8, int16)"),
    ("int8", _msg("int8", "a quantized format needs scale=S (and zero=Z)")),
    (" int8:zero=0 ", _msg("int8:zero=0", "a quantized format needs scale=S (and zero=Z)")),
    ("int8:scale", _msg("int8:scale", "expected scale=S,zero=Z[,round=even|away], got 'scale'")),
    (
        "int8:scale=1, foo=2",
        _msg("int8:scale=1, foo=2", "expected scale=S,zero=Z[,round=even|away], got 'foo=2'"),
    ),
    ("int8:=1", _msg("int8:=1", "expected scale=S,zero=Z[,round=even|away], got '=1'")),
    ("int8:scale=1,scale=2", _msg("int8:scale=1,scale=2", "scale given twice")),
    ("int8:scale=1,zero=0,ZERO=0", _msg("int8:scale=1,zero=0,ZERO=0", "zero given twice")),
    ("int8:round=away,scale=1,round=even", _msg("int8:round=away,scale=1,round=even", "round given twice")),
    ("int8:scale=abc", _msg("int8:scale=abc", "scale 'abc' is not a number")),
    ("int8:scale=1:5", _msg("int8:scale=1:5", "scale '1:5' is not a number")),  # one ':' splits
    ("int8:scale=1=2", _msg("int8:scale=1=2", "scale '1=2' is not a number")),  # the first '=' splits
    ("int8:scale=", _msg("int8:scale=", "scale '' is not a number")),
    ("int8:scale=0", _msg("int8:scale=0", "scale must be a positive normal float32, got 0")),
    ("int8:scale=-0.5", _msg("int8:scale=-0.5", "scale must be a positive normal float32, got -0.5")),
    ("int8:scale=nan", _msg("int8:scale=nan", "scale must be a positive normal float32, got nan")),
    ("int8:scale=inf", _msg("int8:scale=inf", "scale must be a positive normal float32, got inf")),
    ("int8:scale=-inf", _msg("int8:scale=-inf", "scale must be a positive normal float32, got -inf")),
    ("int8:scale=1e39", _msg("int8:scale=1e39", "scale must be a positive normal float32, got 1e39")),
    ("int8:scale=1e-60", _msg("int8:scale=1e-60", "scale must be a positive normal float32, got 1e-60")),
    # 2^-127: a float32 subnormal
    (
        "int8:scale=5.877471754111438e-39",
        _msg(
            "int8:scale=5.877471754111438e-39",
            "scale must be a positive normal float32, got 5.877471754111438e-39",
        ),
    ),
    ("int8:scale=1,zero=1.5", _msg("int8:scale=1,zero=1.5", "zero point '1.5' is not an integer")),
    ("int8:scale=1,zero=", _msg("int8:scale=1,zero=", "zero point '' is not an integer")),
    (
        "int8:scale=1,zero=128",
        _msg("int8:scale=1,zero=128", "zero point 128 is outside int8's codes [-128, 127]"),
    ),
    (
        "int8:scale=1,zero=-129",
        _msg("int8:scale=1,zero=-129", "zero point -129 is outside int8's codes [-128, 127]"),
    ),
    (
        "uint8:scale=1,zero=-1",
        _msg("uint8:scale=1,zero=-1", "zero point -1 is outside uint8's codes [0, 255]"),
    ),
    (
        "uint8:scale=1,zero=256",
        _msg("uint8:scale=1,zero=256", "zero point 256 is outside uint8's codes [0, 255]"),
    ),
    (
        "int16:scale=1,zero=32768",
        _msg("int16:scale=1,zero=32768", "zero point 32768 is outside int16's codes [-32768, 32767]"),
    ),
    ("int8:scale=1,round=UP", _msg("int8:scale=1,round=UP", "round must be even or away, got 'up'")),
    ("int8:scale=1,round=", _msg("int8:scale=1,round=", "round must be even or away, got ''")),
]


@pytest.mark.parametrize("spec,message", BAD)
def test_parse_quant_refuses_with_one_line(spec, message):
    with pytest.raises(BadOptionError) as e:
        quant.parse_quant(spec)
    assert str(e.value) == message


def test_is_quant():
    q = quant.QuantFormat("int8", 1.0, 0)
    for spec in (q, "int8", "int8:scale=1", " UINT8 :x", "int16:a:b", "Int16"):
        assert quant.is_quant(spec) is True, spec
    for spec in (None, "fp16", "int32:scale=1", "", "scale:int8", "int8x", "bf16:int8"):
        assert quant.is_quant(spec) is False, spec


# ------------------------------------------------------------------- QuantFormat
def test_format_properties_and_dict():
    for kind, (lo, hi) in LIMITS.items():
        q = quant.QuantFormat(kind, 0.5, 3, "away")
        assert (q.qmin, q.qmax) == (lo, hi)
        assert q.bits == (16 if kind == "int16" else 8)
        c = q.codes()
        assert c.dtype == np.int64 and c.tolist() == list(range(lo, hi + 1))
        v = q.values()
        assert v.dtype == np.float64 and v.tolist() == [(k - 3) * 0.5 for k in range(lo, hi + 1)]
    q = quant.parse_quant("uint8:scale=0.1,zero=200,round=away")
    assert q.name == "uint8:scale=0.10000000149011612,zero=200,round=away"
    assert quant.parse_quant("int8:scale=0.0625").name == "int8:scale=0.0625,zero=0,round=even"
    # (q - z) s exact: the rationals
    got = q.values([0, 7, 255, 200])
    assert [Fraction(g) for g in got] == [(k - 200) * F01 for k in (0, 7, 255, 200)]
    assert q.values(np.array([1.0, 2.0])).tolist() == [float(-199 * F01), float(-198 * F01)]
    # an engine's codes come as uint8 / int8 arrays: q - z in their own type would wrap
    got = q.values(np.array([0, 7, 255], dtype=np.uint8))
    assert [Fraction(g) for g in got] == [(k - 200) * F01 for k in (0, 7, 255)]
    i8 = quant.QuantFormat("int8", 0.5, -100)
    assert i8.values(np.array([127, -128], dtype=np.int8)).tolist() == [113.5, -14.0]
    assert q.hex(5.0) == "5" and q.hex(-3) == "-3" and q.hex(np.int64(255)) == "255"
    assert q.to_dict() == {
        "name": "uint8:scale=0.10000000149011612,zero=200,round=away",
        "kind": "uint8",
        "scale": float(F01),
        "zero": 200,
        "rounding": "away",
        "rounding_rule": "half away from zero (TFLite, ExecuTorch: std::round)",
        "qmin": 0,
        "qmax": 255,
    }
    d = quant.QuantFormat("int16", 2.0, -5).to_dict()
    assert d["rounding_rule"] == "half to even (PyTorch quantize_per_tensor, ONNX QuantizeLinear)"
    assert (d["qmin"], d["qmax"], d["rounding"]) == (-32768, 32767, "even")


SPECS = [
    "int8:scale=0.0625,zero=0",
    "int8:scale=0.0625,zero=0,round=away",
    "int8:scale=0.5,zero=-128,round=away",
    "int8:scale=0.5,zero=127",
    "uint8:scale=0.1,zero=255,round=away",
    "uint8:scale=0.00390625,zero=0",
    "uint8:scale=3,zero=100",
    "int16:scale=0.000244140625,zero=-7,round=away",
    "int16:scale=7,zero=32767",
]


def _points(q):
    s = q.scale
    k = np.arange(q.qmin - q.zero - 4, q.qmax - q.zero + 5, dtype=np.float64)
    if q.kind == "int16":
        k = np.unique(np.concatenate([k[:40], k[::997], k[-40:], np.arange(-6.0, 7.0)]))
    b = (k + 0.5) * s
    extra = [0.0, -0.0, 5e-324, -5e-324, 1e308, -1e308, s * 1e6, -s * 1e6, s / 3, -s / 3]
    return np.concatenate([b, np.nextafter(b, -np.inf), np.nextafter(b, np.inf), k * s, extra])


@pytest.mark.parametrize("spec", SPECS)
def test_quantize_against_rationals(spec):
    q = quant.parse_quant(spec)
    y = _points(q)
    want = [want_code(float(v), q.kind, q.scale, q.zero, q.rounding) for v in y]
    got = q.quantize(y)
    assert got.dtype == np.float64 and got.tolist() == want
    # the same through quantize_mpf, on the float64 points and on points off float64 beside
    # every boundary (b -+ s 2^-80: a float64 rounding would make them ties)
    assert [q.quantize_mpf(mp.mpf(float(v))) for v in y[:: 3 if q.kind == "int16" else 1]] == want[
        :: 3 if q.kind == "int16" else 1
    ]
    s = Fraction(q.scale)
    with mp.workprec(200):
        for k in (
            list(range(q.qmin - q.zero - 3, q.qmin - q.zero + 3))
            + list(range(q.qmax - q.zero - 3, q.qmax - q.zero + 3))
            + list(range(-3, 4))
        ):
            for d in (-1, 1):
                y = (Fraction(k) + Fraction(1, 2) + Fraction(d, 2**80)) * s
                v = mp.mpf(y.numerator) / y.denominator
                assert to_fraction(v) == y
                r = q.quantize_mpf(v)
                assert type(r) is float and r == want_code(y, q.kind, q.scale, q.zero, q.rounding), (k, d)


def test_quantize_reads_narrow_floats_as_float64():
    """A kernel's fp16 or fp32 outputs are quantized as the float64 values they hold: y / s
    in fp16 would be 10008 or 10016 for 1001 / 0.1f = 10009.99985..."""
    q = quant.parse_quant("int16:scale=0.1,zero=0")
    ys = [1001.0, -1001.0, 0.5, 2.25]
    want = [want_code(Fraction(y), "int16", q.scale, 0, "even") for y in ys]
    assert want[0] == 10010
    for dt in (np.float16, np.float32):
        assert q.quantize(np.array(ys, dtype=dt)).tolist() == want
    assert q.quantize([1001, -1001]).tolist() == want[:2]  # integers too


def test_quantize_specials():
    for spec in SPECS:
        q = quant.parse_quant(spec)
        got = q.quantize([math.nan, math.inf, -math.inf, 0.0])
        assert math.isnan(got[0]) and got[1:].tolist() == [q.qmax, q.qmin, q.zero]
        assert math.isnan(q.quantize_mpf(mp.nan))
        assert q.quantize_mpf(mp.inf) == q.qmax and q.quantize_mpf(-mp.inf) == q.qmin
        huge = mp.mpf(10) ** 400
        assert q.quantize_mpf(huge) == q.qmax and q.quantize_mpf(-huge) == q.qmin
        assert q.quantize_mpf(mp.mpf(10) ** -400) == q.zero
        assert q.quantize_mpf(-(mp.mpf(10) ** -400)) == q.zero
    # ties at every parity, both signs, away and even; a scalar input too
    even, away = quant.QuantFormat("int8", 0.25, 0), quant.QuantFormat("int8", 0.25, 0, "away")
    t = [k * 0.25 + 0.125 for k in range(-5, 5)]  # (k + 1/2) s
    assert even.quantize(t).tolist() == [-4, -4, -2, -2, 0, 0, 2, 2, 4, 4]
    assert away.quantize(t).tolist() == [-5, -4, -3, -2, -1, 1, 2, 3, 4, 5]
    assert [even.quantize_mpf(mp.mpf(v)) for v in t] == [-4, -4, -2, -2, 0, 0, 2, 2, 4, 4]
    assert [away.quantize_mpf(mp.mpf(v)) for v in t] == [-5, -4, -3, -2, -1, 1, 2, 3, 4, 5]
    assert even.quantize(0.375).tolist() == 2.0
    # ties at the ends of the code range: 127.5 -> 127 (clamped), -128.5 -> -128
    one = quant.QuantFormat("int8", 1.0, 0)
    ties, want = (127.5, -128.5, 128.5, -129.5, 126.5, -127.5), [127, -128, 127, -128, 126, -128]
    assert one.quantize(list(ties)).tolist() == want
    assert [one.quantize_mpf(mp.mpf(v)) for v in ties] == want


# --------------------------------------------------------------------- the oracle
def test_code_rounding_and_beyond():
    q = quant.parse_quant("uint8:scale=0.5,zero=10,round=away")
    cr = codes._CodeRounding(q)
    assert cr.q is q and cr.smallest_normal == math.inf
    assert cr.round_mpf(mp.mpf(1.25)) == 13.0 and math.isnan(cr.round_mpf(mp.nan))
    b = quant._Beyond(q)
    assert (b.p, b.smallest_normal) == (24, math.inf)
    assert (b.lo, b.hi) == ((0 - 10 - 0.5) * 0.5, (255 - 10 + 0.5) * 0.5)  # -5.25, 122.75
    assert [b.round_mpf(mp.mpf(v)) for v in (-5.25, -5.26, 122.75, 122.76, 0.0, -1e300)] == [
        0,
        -1,
        0,
        1,
        0,
        -1,
    ]
    assert math.isnan(b.round_mpf(mp.nan)) and b.round_mpf(mp.inf) == 1 and b.round_mpf(-mp.inf) == -1


def _mp_code(f, x, q):
    with mp.workprec(300):
        return want_code(to_fraction(f(mp.mpf(float(x)))), q.kind, q.scale, q.zero, q.rounding)


MPF = {
    "sigmoid": lambda x: 1 / (1 + mp.exp(-x)),
    "tanh": mp.tanh,
    "gelu": lambda x: x * (1 + mp.erf(x / mp.sqrt(2))) / 2,
    "relu": lambda x: max(x, 0),
}


@pytest.mark.parametrize("name", ["sigmoid", "tanh", "gelu", "relu"])
def test_exact_codes_against_mpmath(name):
    q = quant.parse_quant("int8:scale=0.03125,zero=-5,round=away")
    x = np.arange(-128, 128) * 0.0625
    codes, exact, n = quant.exact_codes(REFERENCES[name], x, q, {})
    assert codes.tolist() == [_mp_code(MPF[name], v, q) for v in x]
    with mp.workprec(300):
        for v, e in zip(x, exact):
            f = MPF[name](mp.mpf(float(v)))
            assert abs(mp.mpf(float(e)) - f) <= abs(f) * 2.0**-40 + 2.0**-1000, v
    assert 0 <= n <= len(x) and (n == 0 if name == "relu" else True)


def _half(fast, rel_err=1e-12, rel_err_at=None, exact=False):
    """f(x) = x / 2: on int8 codes of scale 1/16 quantized with scale 1/16, a tie at every
    odd code; the fast path given is off by a relative 0.9e-12 at most (within its bound)."""
    return dataclasses.replace(
        REFERENCES["sigmoid"],
        name="half",
        mp=lambda v, **_: v / 2,
        fast=fast,
        rel_err=rel_err,
        rel_err_at=rel_err_at,
        exact=exact,
        near=None,
        fast_near=None,
        sign=None,
    )


@pytest.mark.parametrize("rounding", ["even", "away"])
def test_exact_codes_decide_ties_by_mpmath(rounding):
    q = quant.parse_quant(f"int8:scale=0.0625,zero=0,round={rounding}")
    x = q.values()[::5]  # (every 5th code: odd and even ones)
    want = [want_code(Fraction(float(v)) / 2, "int8", 0.0625, 0, rounding) for v in x]
    odd = int(np.count_nonzero(q.codes()[::5] % 2))
    for fast in (lambda x: x / 2 * (1 + 0.9e-12), lambda x: x / 2 * (1 - 0.9e-12)):
        codes, exact, n = quant.exact_codes(_half(fast), x, q, {})
        assert codes.tolist() == want
        assert n >= odd
        # the ties went to mpmath: their value is exact
        tie = q.codes()[::5] % 2 == 1
        assert exact[tie].tolist() == (x[tie] / 2).tolist()
    # a bound given per input (rel_err_at), tighter scalar bound 0: the per-input one is used
    codes, _, _ = quant.exact_codes(
        _half(lambda x: x / 2 * (1 + 0.9e-12), rel_err=0.0, rel_err_at=lambda x: np.full(np.shape(x), 1e-12)),
        x,
        q,
        {},
    )
    assert codes.tolist() == want
    # no fast path: every input by mpmath
    codes, exact, n = quant.exact_codes(_half(None), x, q, {})
    assert codes.tolist() == want and n == len(x) and exact.tolist() == (x / 2).tolist()
    # an exact fast path: only the non-finite values go to mpmath
    codes, exact, n = quant.exact_codes(_half(lambda x: x / 2, rel_err=0.0, exact=True), x, q, {})
    assert codes.tolist() == want and n == 0


# ------------------------------------------------------------ audit_codes, findings
IN = "int8:scale=0.25,zero=0"  # x = q / 4
OUT = "uint8:scale=0.125,zero=10"  # relu(x) / s + z = 2 q + 10 for q > 0, 10 below


def _relu_want(q: int) -> int:
    return min(2 * max(q, 0) + 10, 255)


def _bad_kernel(identity=None):
    """The correct codes but: NaN at q = -50, 0 (pinned low) at q = -20, 213 for 210 at
    q = 100, 255 (pinned high) for 254 at q = 122, 19 for 20 at q = 5."""
    edits = {-50: math.nan, -20: 0.0, 100: 213.0, 122: 255.0, 5: 19.0}

    def fn(codes, x):
        assert np.asarray(codes).tolist() == list(range(-128, 128)) and np.asarray(x).tolist() == [
            q / 4 for q in range(-128, 128)
        ]
        return [edits.get(int(q), float(_relu_want(int(q)))) for q in codes]

    c = quant.QuantCandidate("bad", "relu", "max(x, 0)", "hand", fn, "fp64")
    if identity is not None:
        c.identity = identity
    return c


PINNED = "code pinned at a range limit (0 or 255) where the correctly quantized code is inside the range"
SATURATED = (
    "f(x) / s + z is beyond the code range by more than 1/2: the correct code is the clamped limit "
    "(the format's cost; informational)"
)
MONO = "the output code moves against the function's direction between consecutive input codes"


def test_audit_codes_hand_worked():
    inq, outq = quant.parse_quant(IN), quant.parse_quant(OUT)
    r = quant.audit_codes(REFERENCES["relu"], inq, outq, _bad_kernel(), None)
    assert (r.candidate, r.reference, r.dtype, r.out_dtype, r.compute) == (
        "bad",
        "relu",
        inq.name,
        outq.name,
        "fp64",
    )
    assert r.params == {} and r.count == 256 and r.n_mpmath == 0 and r.identity == {}
    assert r.x_codes.tolist() == list(range(-128, 128)) and r.x.tolist() == [q / 4 for q in range(-128, 128)]
    assert r.want.tolist() == [_relu_want(q) for q in range(-128, 128)]
    assert r.exact.tolist() == [max(q / 4, 0.0) for q in range(-128, 128)]
    err = {-20: 10.0, 100: 3.0, 122: 1.0, 5: 1.0}
    want_err = [err.get(q, 0.0) for q in range(-128, 128)]
    valid = [q != -50 for q in range(-128, 128)]
    assert r.valid.tolist() == valid
    assert [e for e, v in zip(r.code_err.tolist(), valid) if v] == [e for e, v in zip(want_err, valid) if v]
    assert [e for e, v in zip(r.real_err.tolist(), valid) if v] == [
        e / 8 for e, v in zip(want_err, valid) if v
    ]
    assert r.max_code_err == 10.0 and r.max_real_err == 1.25 and r.max_code_distance == 10
    assert r.mean_code_err == 15 / 255
    assert r.correct_fraction == 251 / 256 and r.nan_count == 1
    assert r.worst == {"x": -5.0, "x_code": -20, "got": 0, "want": 10, "exact": 0.0}
    findings = [
        {
            "kind": "pinned",
            "count": 2,
            "intervals": [[-5.0, -5.0], [30.5, 30.5]],
            "intervals_total": 2,
            "note": PINNED,
        },
        {
            "kind": "saturated",
            "count": 5,
            "intervals": [[30.75, 31.75]],
            "intervals_total": 1,
            "note": SATURATED,
        },
        {
            "kind": "nan",
            "count": 1,
            "intervals": [[-12.5, -12.5]],
            "intervals_total": 1,
            "note": "no code: the kernel produced NaN",
        },
        {
            "kind": "monotonicity",
            "count": 2,
            "intervals": [[-5.0, -5.0], [25.25, 25.25]],
            "intervals_total": 2,
            "note": MONO,
        },
    ]
    assert r.findings == findings
    assert r.seconds > 0
    assert r.to_dict() == {
        "candidate": "bad",
        "reference": "relu",
        "dtype": "int8:scale=0.25,zero=0,round=even",
        "out_dtype": "uint8:scale=0.125,zero=10,round=even",
        "compute": "fp64",
        "params": {},
        "inputs": {"count": 256, "exhaustive": True},
        "max_code_error": 10.0,
        "mean_code_error": 15 / 255,
        "max_code_distance": 10,
        "max_real_error": 1.25,
        "correct_code_fraction": 251 / 256,
        "nan_count": 1,
        "worst": {"x": -5.0, "x_code": -20, "got": 0, "want": 10, "exact": 0.0},
        "oracle_mpmath_count": 0,
        "findings": findings,
    }
    # an engine op's identity is carried into the result and its dictionary
    ident = {"engine": "hand", "version": "1"}
    r = quant.audit_codes(REFERENCES["relu"], inq, outq, _bad_kernel(ident), None, dtype_name="codes")
    assert r.identity == ident and r.to_dict()["identity"] == ident and r.dtype == "codes"
    # a kernel returning the wrong number of codes
    c = quant.QuantCandidate("short", "relu", "", "", lambda codes, x: [0.0] * 255)
    with pytest.raises(BadOptionError) as e:
        quant.audit_codes(REFERENCES["relu"], inq, outq, c)
    assert str(e.value) == "short: (255,) output codes for (256,) inputs"


def test_all_nan_kernel_and_decreasing_pieces():
    inq, outq = quant.parse_quant(IN), quant.parse_quant(OUT)
    nan = quant.QuantCandidate("nan", "relu", "", "", lambda codes, x: np.full(len(codes), math.nan))
    r = quant.audit_codes(REFERENCES["relu"], inq, outq, nan)
    assert math.isnan(r.max_code_err) and math.isnan(r.mean_code_err) and math.isnan(r.max_real_err)
    assert r.max_code_distance == 0 and r.worst is None and r.nan_count == 256 and r.correct_fraction == 0.0
    d = r.to_dict()
    assert (d["max_code_error"], d["mean_code_error"], d["max_real_error"], d["worst"]) == (
        "nan",
        "nan",
        "nan",
        None,
    )
    assert [f["kind"] for f in r.findings] == ["saturated", "nan"]
    assert r.findings[1]["intervals"] == [[-32.0, 31.75]] and r.findings[1]["count"] == 256
    # f(x) = -relu(x) decreasing (one piece): codes clamp at 0 from x > 1.25 (-8 q + 10 < -1/2)
    neg = dataclasses.replace(
        REFERENCES["relu"],
        name="negrelu",
        mp=lambda v, **_: -max(v, 0),
        fast=lambda x, **_: -np.maximum(x, 0.0),
        monotone=((-math.inf, math.inf, -1),),
    )
    want = [min(max(-2 * max(q, 0) + 10, 0), 255) for q in range(-128, 128)]

    def fn(codes, x):
        out = [float(w) for w in want]
        out[128 + 3] = 9.0  # q = 3: 4 -> 9 up, then down to 2 at q = 4 (with the direction)
        out[128 - 2] = 11.0  # q = -2: 10 -> 11 against a decreasing f; then 11 -> 10 with it
        return out

    r = quant.audit_codes(neg, inq, outq, quant.QuantCandidate("n", "negrelu", "", "", fn))
    f = {x["kind"]: x for x in r.findings}
    assert f["monotonicity"]["intervals"] == [[-0.5, -0.5], [0.75, 0.75]]
    assert f["saturated"]["intervals"] == [[1.5, 31.75]] and f["saturated"]["count"] == 122
    assert "pinned" not in f and r.max_code_err == 5.0 and r.worst["x"] == 0.75
    # the saturated codes are correct: 0, against the clamped target 0 (not -8 q + 10)
    assert r.code_err[128 + 6 :].tolist() == [0.0] * 122 and r.code_err[128 - 2] == 1.0


def test_monotone_pieces_share_their_ends():
    """|x| (pieces (-inf, 0] down, [0, 1/4] up, [1/4, inf) up): code 5 at x = 0 between 1 and 1
    steps against both pieces that hold 0; a piece of two inputs is checked too."""
    absx = dataclasses.replace(
        REFERENCES["relu"],
        name="absx",
        mp=lambda v, **_: abs(v),
        fast=lambda x, **_: np.abs(x),
        monotone=((-math.inf, 0.0, -1), (0.0, 0.25, 1), (0.25, math.inf, 1)),
    )
    q = quant.parse_quant("int8:scale=0.25,zero=0")

    def fn(codes, x):
        out = np.minimum(np.abs(np.asarray(codes, dtype=np.float64)), 127)
        out[128] = 5.0
        return out

    r = quant.audit_codes(absx, q, q, quant.QuantCandidate("v", "absx", "", "", fn))
    mono = [f for f in r.findings if f["kind"] == "monotonicity"]
    assert mono == [
        {"kind": "monotonicity", "count": 2, "intervals": [[0.0, 0.25]], "intervals_total": 1, "note": MONO}
    ]


def test_float_inputs_and_fractional_targets():
    """fp8_e4m3 inputs (253 finite values, -0 dropped), sigmoid into int8 of scale 0.1f
    (z = -100): errors against exact rationals; the worst input named by its bits."""
    from audit.numbers.formats import element_format

    e4 = element_format("fp8_e4m3")
    outq = quant.parse_quant("int8:scale=0.1,zero=-100")
    c = quant.QuantCandidate(
        "shift",
        "sigmoid",
        "",
        "",
        lambda codes, x: np.where(x == 1.0, 1.0, outq.quantize(1 / (1 + np.exp(-x)))),
    )
    r = quant.audit_codes(REFERENCES["sigmoid"], e4, outq, c, {}, None)
    assert r.count == 253 and r.dtype == "fp8_e4m3"
    assert 0.0 in r.x.tolist() and not (np.signbit(r.x) & (r.x == 0)).any()
    assert r.x_codes.tolist() == e4.to_bits(r.x).tolist()
    i = r.x.tolist().index(1.0)
    with mp.workprec(200):
        t1 = to_fraction(1 / (1 + mp.exp(-1))) / F01 - 100  # -92.68941...
    assert r.want[i] == -93 and abs(r.code_err[i] - float(1 - t1)) < 1e-9
    assert r.worst == {"x": 1.0, "x_code": "0x38", "got": 1, "want": -93, "exact": r.exact[i]}
    assert abs(r.real_err[i] - float((1 - t1) * F01)) < 1e-9
    ok = np.flatnonzero(r.got == r.want)
    assert len(ok) == 252 and (r.code_err[ok] <= 0.5).all()
    with mp.workprec(200):
        for j in ok[::7]:
            t = to_fraction(1 / (1 + mp.exp(-mp.mpf(float(r.x[j]))))) / F01 - 100
            t = min(max(t, -128), 127)
            assert abs(r.code_err[j] - float(abs(r.got[j] - t))) < 1e-9
    assert r.worst["x_code"] == "0x38"
    assert r.correct_fraction == 252 / 253
    # the bits are written in full: 2 hex digits for fp8 (0x01, the smallest subnormal
    # 2^-9), 2 for fp6_e2m3 (6 bits: 0x01 is 2^-3), 4 for fp16 (0x0001 is 2^-24)
    for name, tiny, code in (
        ("fp8_e4m3", 2.0**-9, "0x01"),
        ("fp6_e2m3", 2.0**-3, "0x01"),
        ("fp16", 2.0**-24, "0x0001"),
    ):
        f = element_format(name)
        out = quant.parse_quant("int8:scale=0.5,zero=0")
        c = quant.QuantCandidate(
            "t",
            "relu",
            "",
            "",
            lambda codes, x, t=tiny, o=out: np.where(x == t, 9.0, o.quantize(np.maximum(x, 0))),
        )
        r = quant.audit_codes(REFERENCES["relu"], f, out, c)
        assert r.worst == {"x": tiny, "x_code": code, "got": 9, "want": 0, "exact": tiny}, name


# ------------------------------------------------------------------- saturated
def _t_raw(exact, q):
    with np.errstate(all="ignore"):
        return np.asarray(exact, dtype=np.float64) / q.scale + q.zero


def _truth_beyond(f: Fraction, q) -> bool:
    t = f / Fraction(q.scale) + q.zero
    return t < q.qmin - Fraction(1, 2) or t > q.qmax + Fraction(1, 2)


def test_saturated_of_an_exact_reference_decided_exactly():
    """relu (exact fast path) into int8 of scale 0.1f, z = 126: the bounds (qmin - z - 1/2) s
    and (qmax - z + 1/2) s, a float64 step or two either side, and steps of 2^-45 .. 2^-29
    relative; f / s + z in float64 rounds some of them onto the bound (1.5 + 2^-52 + 126 is
    127.5): the exact comparison decides."""
    q = quant.parse_quant("int8:scale=0.1,zero=126")
    lo, hi = (-128 - 126 - 0.5) * q.scale, (127 - 126 + 0.5) * q.scale
    pts = [0.0, 1.0, -1e300, 1e300, lo * 2, hi * 2, lo / 2, hi / 2]
    for b in (lo, hi):
        pts += [b, np.nextafter(b, -np.inf), np.nextafter(b, np.inf)]
        pts += [
            np.nextafter(np.nextafter(b, -np.inf), -np.inf),
            np.nextafter(np.nextafter(b, np.inf), np.inf),
        ]
        pts += [b * (1 + d) for d in (2.0**-31, -(2.0**-31), 2.0**-29, -(2.0**-29), 2.0**-45, -(2.0**-45))]
        pts += [b + q.scale * 0.25, b - q.scale * 0.25, b + q.scale, b - q.scale]
    exact = np.array(pts)
    want = [_truth_beyond(Fraction(float(v)), q) for v in exact]
    t = _t_raw(exact, q)
    naive = (t < q.qmin - 0.5) | (t > q.qmax + 0.5)
    assert naive.tolist() != want  # float64's f / s + z is wrong at some of them
    got = quant._beyond_range(REFERENCES["relu"], exact, exact, t, q, {})
    assert got.tolist() == want
    # and with NaN among them: never beyond
    got = quant._beyond_range(
        REFERENCES["relu"], exact, np.append(exact, math.nan), np.append(t, math.nan), q, {}
    )
    assert got.tolist() == want + [False]


class _Counting:
    """f(x) = x / 2 (1 + 2^-40) in mpmath, the fast value x / 2 (within the 2^-36 the oracle
    grants a fast path): the calls made to mpmath are recorded."""

    def __init__(self, eps=2.0**-40):
        self.calls = []
        self.ref = dataclasses.replace(
            REFERENCES["sigmoid"],
            name="halfish",
            mp=self.mp,
            fast=lambda x, **_: np.asarray(x) / 2,
            rel_err=2.0**-36,
            near=None,
            fast_near=None,
            sign=None,
            exact=False,
        )
        self.eps = eps

    def mp(self, v, **_):
        self.calls.append(float(v))
        return v / 2 * (1 + mp.mpf(2) ** -40) if self.eps else v / 2


def test_saturated_near_the_bounds_decided_by_mpmath():
    q = quant.parse_quant("int8:scale=0.1,zero=3")
    lo, hi = (-128 - 3 - 0.5) * q.scale, (127 - 3 + 0.5) * q.scale
    c = _Counting()
    # f = exact (1 + 2^-40): at exact = a bound, f is beyond it; at exact = b (1 - 2^-42) for
    # b = hi (resp. lo: b (1 - 2^-42) is inside) f is beyond hi too; 2^-35 inside stays inside
    near = [hi, hi * (1 - 2.0**-42), hi * (1 - 2.0**-35), lo, lo * (1 - 2.0**-42), lo * (1 - 2.0**-35)]
    far = [0.0, 1.0, hi * 2, lo * 2, hi * (1 - 2.0**-20), lo * (1 + 2.0**-20), hi * (1 + 2.0**-25)]
    exact = np.array(near + far)
    x = exact * 2
    want = [_truth_beyond(to_fraction(mp.mpf(v) * (1 + mp.mpf(2) ** -40)), q) for v in exact]
    assert want == [True, True, False, True, True, False, False, False, True, True, False, True, True]
    got = quant._beyond_range(c.ref, x, exact, _t_raw(exact, q), q, {})
    assert got.tolist() == want
    assert set(c.calls) == set((np.array(near) * 2).tolist())  # mpmath for the near ones only


def test_oracle_precision_limit_takes_a_tie():
    """Beyond oracle.MAX_PREC bits an ambiguity is taken as an exact tie: f(x) = x / 2 (1 +
    2^-(MAX_PREC + 24)) on a tie or a bound of the code range is decided as the tie (the
    rounding rule) or as the bound (inside)."""
    from audit.oracle import oracle

    eps = mp.mpf(2) ** -(oracle.MAX_PREC + 24)
    ref = dataclasses.replace(_half(None), mp=lambda v, **_: v / 2 * (1 + eps))
    q = quant.parse_quant("int8:scale=0.0625,zero=0")
    x = np.array([0.09375, 0.15625, -0.09375, -0.15625]) * 2  # x / 2 = (k + 1/2) s, k = 1, 2, -2, -3
    codes, _, _ = quant.exact_codes(ref, x, q, {})
    assert codes.tolist() == [2, 2, -2, -2]  # half to even, not the true 2, 3, -1, -2
    # (inputs below 1: mpmath starts at 24 + 40 bits and doubles up to MAX_PREC exactly)
    q = quant.parse_quant("int8:scale=0.000244140625,zero=0")
    hi = (127 + 0.5) * q.scale
    got = quant._beyond_range(ref, np.array([2 * hi]), np.array([hi]), np.array([127.5]), q, {})
    assert got.tolist() == [False]


# ------------------------------------------------------------------------- sweep
I8 = "int8:scale=0.0625,zero=0"


def _mp_codes(f, x, q):
    with mp.workprec(300):
        return [want_code(to_fraction(f(mp.mpf(float(v)))), q.kind, q.scale, q.zero, q.rounding) for v in x]


def test_sweep_refuses_in_one_line():
    cases = [
        (("sigmoid.exp", "fp32"), "quantized outputs need enumerable inputs (16 bits or fewer), not fp32"),
        (("sigmoid.exp", "fp16"), "give --out-dtype: a quantized output format"),
        (
            ("sigmoid.exp", I8, "fp16"),
            "--out-dtype fp16: quantized inputs need a quantized output format (int8:..., uint8:..., int16:...)",
        ),
        (("swiglu.silu_mul", I8), "swiglu.silu_mul: quantized audits are for functions of one input"),
    ]
    for args, message in cases:
        with pytest.raises(BadOptionError) as e:
            quant.sweep(*args)
        assert str(e.value) == message, args


def test_sweep_catalog_candidates_with_parameters():
    """elu.expm1 at alpha = 2 (a parameter of the kernel and of the reference), swish.beta
    at beta = 2 (its monotone pieces move: silu_2 decreases down to x = -0.639, not -1.278)."""
    inq, outq = quant.parse_quant(I8), quant.parse_quant("int8:scale=0.03125,zero=0")
    for compute, name in (("fp32", "fp32"), (None, "fp32"), ("", "fp32"), ("fp16", "fp16")):
        (r,) = quant.sweep(
            " elu.expm1 ", I8, "int8:scale=0.03125,zero=0", compute=compute, params={"alpha": 2.0}
        )
        assert (r.candidate, r.reference, r.compute, r.params, r.count) == (
            "elu.expm1",
            "elu",
            name,
            {"alpha": 2.0},
            256,
        )
        assert (r.dtype, r.out_dtype) == (inq.name, outq.name)
        want = _mp_codes(lambda v: v if v > 0 else 2 * mp.expm1(v), inq.values(), outq)
        assert r.want.tolist() == want and r.got.dtype == np.float64
        assert r.max_code_err <= (0.5 if name == "fp32" else 2.0) and np.abs(r.got - r.want).max() <= 1
    outq = quant.parse_quant("int8:scale=0.0078125,zero=0")
    (r,) = quant.sweep(["swish.beta"], inq, outq, params={"beta": 2.0})
    want = _mp_codes(lambda v: v / (1 + mp.exp(-2 * v)), inq.values(), outq)
    assert r.want.tolist() == want and r.got.tolist() == want
    k = [int(np.flatnonzero(inq.values() == v)[0]) for v in (-1.25, -0.6875)]
    assert want[k[1]] < want[k[0]]  # codes fall between -1.278 and -0.639
    assert [f["kind"] for f in r.findings] == ["saturated"]  # no monotonicity finding


def test_sweep_targets_engines_tables(tmp_path):
    """Every kind of target in one sweep, in order: a comma list, a quantized engine op
    (QLinearLeakyRelu at alpha = 0.25), TFLite's int16 lookup, a lut:FILE whose name has a
    comma; each result against mpmath's codes."""
    inq, outq = quant.parse_quant(I8), quant.parse_quant("int8:scale=0.03125,zero=-3")
    lrelu = _mp_codes(lambda v: v if v > 0 else v / 4, inq.values(), outq)
    rs = quant.sweep(
        ["ort:QLinearLeakyRelu", "leaky_relu.mul, ,ort:QLinearLeakyRelu"], inq, outq, params={"alpha": 0.25}
    )
    assert [r.candidate for r in rs] == [
        "ort:QLinearLeakyRelu[alpha=0.25]",
        "leaky_relu.mul",
        "ort:QLinearLeakyRelu[alpha=0.25]",
    ]
    r = rs[0]
    assert (r.reference, r.compute, r.params, r.dtype, r.out_dtype) == (
        "leaky_relu",
        "native",
        {"alpha": 0.25},
        inq.name,
        outq.name,
    )
    assert r.want.tolist() == lrelu and np.abs(r.got - r.want).max() <= 1
    assert r.identity["engine"] == "onnxruntime" and r.identity["attributes"] == {"alpha": 0.25}
    assert rs[1].want.tolist() == lrelu and rs[1].params == {"alpha": 0.25} and rs[1].compute == "fp32"
    assert rs[2].got.tolist() == r.got.tolist() and rs[2].identity == r.identity
    # TFLite's int16 scheme at alpha = 2 (table and reference), then a catalog candidate
    i16, o16 = (
        quant.parse_quant("int16:scale=0.000244140625,zero=0"),
        quant.parse_quant("int16:scale=0.000732421875"),
    )
    rs = quant.sweep("tflite16:elu,elu.expm1", i16, o16, params={"alpha": 2.0})
    assert [(r.candidate, r.reference, r.compute, r.params) for r in rs] == [
        ("tflite16:elu", "elu", "int32", {"alpha": 2.0}),
        ("elu.expm1", "elu", "fp32", {"alpha": 2.0}),
    ]
    x = i16.values()[::509]
    elu2 = _mp_codes(lambda v: v if v > 0 else 2 * mp.expm1(v), x, o16)
    assert rs[0].want[::509].tolist() == elu2 and rs[1].want[::509].tolist() == elu2
    assert rs[0].max_code_err < 2 and np.abs(rs[0].got - rs[0].want).max() <= 2
    # lut:FILE (a comma in its name), the reference given; the entries are the correct codes
    # but one; then a catalog candidate
    p = tmp_path / "a,b.npy"
    table = np.array([max(q, 0) // 2 + (q == 4) for q in range(-128, 128)], dtype=np.int64)
    np.save(p, table)
    rs = quant.sweep([f"lut:{p}", "relu.max"], I8, "int8:scale=0.125,zero=0,round=away", reference="relu")
    assert [r.candidate for r in rs] == [f"lut:{p}", "relu.max"]
    r = rs[0]
    assert (r.reference, r.compute, r.params) == ("relu", "table", {})
    assert r.got.tolist() == table.tolist()
    want = [want_code(Fraction(max(q, 0), 16), "int8", 0.125, 0, "away") for q in range(-128, 128)]
    assert r.want.tolist() == want and int(np.count_nonzero(r.got != r.want)) == 1 + 64


def test_document_and_float_candidate():
    import audit

    (r,) = quant.sweep("sigmoid.exp", I8, "uint8:scale=0.00390625,zero=0")
    doc = quant.document([r, r], command="sweep", note=1)
    assert list(doc) == ["schema", "actaudit", "command", "note", "results"]
    assert doc["schema"] == "actaudit.quant/1" and doc["actaudit"] == audit.__version__
    assert doc["results"] == [r.to_dict(), r.to_dict()] and doc["results"][0]["candidate"] == "sigmoid.exp"
    assert quant.document([]) == {"schema": "actaudit.quant/1", "actaudit": audit.__version__, "results": []}
    from audit.numbers.formats import element_format
    from audit.targets.candidates import resolve

    c = resolve(["elu.expm1"])[0]
    outq = quant.parse_quant("int8:scale=0.03125,zero=0")
    fc = quant.float_candidate(c, outq, element_format("fp32"), {"alpha": 2.0})
    assert (fc.id, fc.reference, fc.formula, fc.source, fc.compute) == (
        "elu.expm1",
        "elu",
        c.formula,
        c.source,
        "fp32",
    )
    assert c.formula and c.source and fc.identity == {}
    x = np.array([-4.0, -1.0, 0.5])
    got = fc.codes(None, x)
    assert got.dtype == np.float64
    assert got.tolist() == _mp_codes(lambda v: v if v > 0 else 2 * mp.expm1(v), x, outq)
    # a kernel's integer codes are float64 codes
    assert (
        quant.QuantCandidate("k", "relu", "", "", lambda c, x: [1, 2]).codes(None, None).dtype == np.float64
    )


def test_audit_codes_parameters_mpmath_count_and_duck_candidates():
    """f(x) = c x / 2 (default c = 3, given c = 1), not marked exact: on int8 codes of scale
    1/16 into int8 of scale 1/16, z = 97, every odd input code is a tie (to mpmath) and
    x = 61/16 lies on the upper bound (127 - 97 + 1/2) s."""
    ref = dataclasses.replace(
        _half(lambda x, c: c * x / 2, rel_err=2.0**-40), mp=lambda v, c: c * v / 2, params={"c": 3.0}
    )
    q = quant.parse_quant(I8)
    outq = quant.parse_quant("int8:scale=0.0625,zero=97")

    class Duck:  # a candidate without identity
        id, compute = "duck", "hand"

        def codes(self, codes, x):
            return np.array([float(want_code(Fraction(float(v)) / 2, "int8", 0.0625, 97, "even")) for v in x])

    import time

    t0 = time.perf_counter()
    r = quant.audit_codes(ref, q, outq, Duck(), {"c": 1.0})
    t1 = time.perf_counter()
    assert 0 < r.seconds <= t1 - t0
    # the ties below the range's end (q <= 60; from q = 61 on both neighbours clamp to 127)
    assert r.params == {"c": 1.0} and r.identity == {} and r.n_mpmath == len(range(-127, 61, 2))
    assert r.want.tolist() == [
        want_code(Fraction(float(v)) / 2, "int8", 0.0625, 97, "even") for v in q.values()
    ]
    assert r.max_code_err == 0.5 and r.correct_fraction == 1.0
    sat = [f for f in r.findings if f["kind"] == "saturated"][0]
    # q / 2 + 97 > 127.5 from q = 62; q = 61 lies on the bound (not beyond it)
    assert sat["intervals"] == [[3.875, 7.9375]] and sat["count"] == 66


def test_audit_codes_quiet_beyond_float64():
    """f(x) = x 2^1000 (exact) into a scale of 2^-100: f / s overflows float64; no warning
    escapes (the CLI's one line on stderr), every input code but 0 saturates."""
    import warnings

    ref = dataclasses.replace(
        _half(lambda x: x * 2.0**1000, rel_err=0.0, exact=True), mp=lambda v, **_: v * mp.mpf(2) ** 1000
    )
    q = quant.parse_quant(I8)
    outq = quant.parse_quant("int8:scale=7.888609052210118e-31,zero=0")  # 2^-100
    assert outq.scale == 2.0**-100
    c = quant.QuantCandidate("k", "x", "", "", lambda codes, x: outq.quantize(x * 2.0**1000))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = quant.audit_codes(ref, q, outq, c)
        codes = outq.quantize([1e308, -1e308, 5e-324])
    assert codes.tolist() == [127, -128, 0]
    assert r.want.tolist() == [-128] * 128 + [0] + [127] * 127 and r.max_code_err == 0.0
    sat = [f for f in r.findings if f["kind"] == "saturated"][0]
    assert sat["count"] == 255 and sat["intervals"] == [[-8.0, -0.0625], [0.0625, 7.9375]]


def test_exact_codes_odd_fast_paths():
    """Fast paths that are not what the oracle hopes: float32 inputs or outputs, NaN where f
    is finite (an "exact" path), overflows that must stay quiet, values below float64."""
    import warnings

    q = quant.parse_quant("int8:scale=0.03125,zero=-5,round=away")
    x = np.arange(-128, 128) * 0.0625
    # float32 inputs are read as float64 (the fast path is not run in float32)
    codes, exact, _ = quant.exact_codes(REFERENCES["sigmoid"], x.astype(np.float32), q, {})
    assert codes.tolist() == [_mp_code(MPF["sigmoid"], v, q) for v in x]
    assert exact.dtype == np.float64
    with mp.workprec(200):
        for v, e in zip(x, exact):
            f = MPF["sigmoid"](mp.mpf(float(v)))
            assert abs(mp.mpf(float(e)) - f) <= f * 2.0**-40, v
    # a fast path that computes in its input's type gets float64 inputs: x / 3 to 2^-53
    third = dataclasses.replace(_half(lambda x: x / 3, rel_err=2.0**-52), mp=lambda v, **_: v / 3)
    codes, exact, _ = quant.exact_codes(third, x.astype(np.float32), q, {})
    assert exact.tolist() == (x / 3).tolist()
    assert codes.tolist() == [
        want_code(Fraction(float(v)) / 3, q.kind, q.scale, q.zero, q.rounding) for v in x
    ]
    # a fast path giving float32 (within its bound): float64 values back, mpmath's in full
    ref = dataclasses.replace(_half(None), mp=lambda v, **_: v / 3, fast=lambda x: (x / 3).astype(np.float32))
    ref = dataclasses.replace(ref, rel_err=2.0**-20)
    codes, exact, n = quant.exact_codes(ref, x, q, {})
    assert exact.dtype == np.float64 and codes.dtype == np.float64
    assert codes.tolist() == [
        want_code(Fraction(float(v)) / 3, q.kind, q.scale, q.zero, q.rounding) for v in x
    ]
    assert n == 0  # x / 3 = m / 48 is 1/192 or more from every boundary (2k + 1) / 64
    # an exact fast path that fails (NaN) above x = 7: those inputs go to mpmath
    ref = _half(lambda x: np.where(x > 7, np.nan, x / 2), rel_err=0.0, exact=True)
    codes, exact, n = quant.exact_codes(ref, x, q, {})
    assert codes.tolist() == [
        want_code(Fraction(float(v)) / 2, q.kind, q.scale, q.zero, q.rounding) for v in x
    ]
    assert n == int(np.count_nonzero(x > 7)) and exact.tolist() == (x / 2).tolist()
    # exp overflows float64 at x = 1000 (mpmath: beyond the range, code qmax): no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        codes, exact, n = quant.exact_codes(REFERENCES["exp"], np.array([1000.0, -1000.0, 0.0]), q, {})
    assert codes.tolist() == [127, -5, 27] and exact[0] == math.inf and n >= 1
    # f below float64's range: mpmath's value keeps its sign (+-5e-324), no fast path
    tiny = dataclasses.replace(_half(None), mp=lambda v, **_: -v * mp.exp(-5000))
    codes, exact, n = quant.exact_codes(tiny, np.array([-1.0, 2.0]), q, {})
    assert codes.tolist() == [-5, -5] and n == 2
    assert exact.tolist() == [5e-324, -5e-324]
    # the same through a fast path that fails there (NaN): mpmath decides those inputs
    tiny = dataclasses.replace(tiny, fast=lambda x: np.full(np.shape(x), np.nan), exact=True)
    codes, exact, n = quant.exact_codes(tiny, np.array([-1.0, 2.0]), q, {})
    assert codes.tolist() == [-5, -5] and n == 2 and exact.tolist() == [5e-324, -5e-324]


def test_exact_codes_slack_is_the_declared_bound():
    """f(x) = x / 2 on ties (k + 1/2) s, int8 codes of scale 1/16 in and out, half away:
    a fast path off by exactly its declared bound 2^-20 (towards zero) is still sent to
    mpmath; an exact fast path 1.5 bounds (2^-30) from the ties is not; a per-input bound
    is read at the reference's parameters."""
    q = quant.parse_quant("int8:scale=0.0625,zero=0,round=away")
    x = q.values()
    want = [want_code(Fraction(float(v)) / 2, "int8", 0.0625, 0, "away") for v in x]
    edge = _half(lambda x: x / 2 * (1 - 2.0**-20), rel_err=2.0**-20)
    codes, _, n = quant.exact_codes(edge, x, q, {})
    assert codes.tolist() == want and n == 128  # every odd code: the ties
    c = 1 + 1.5 * 2.0**-30
    off = dataclasses.replace(
        _half(lambda x: x / 2 * c, rel_err=2.0**-30),
        mp=lambda v, **_: v / 2 * (1 + mp.mpf(1.5) * mp.mpf(2) ** -30),
    )
    codes, _, n = quant.exact_codes(off, x, q, {})
    assert n == 0 and codes.tolist() == [
        want_code(Fraction(float(v)) / 2 * Fraction(c), "int8", 0.0625, 0, "away") for v in x
    ]
    at = dataclasses.replace(
        _half(
            lambda x, c: x / 2 * (1 - 0.9e-12) * c,
            rel_err=0.0,
            rel_err_at=lambda x, c: np.full(np.shape(x), 1e-12 * c),
        ),
        mp=lambda v, c: v / 2 * c,
        params={"c": 1.0},
    )
    codes, _, n = quant.exact_codes(at, x, q, {"c": 1.0})
    assert codes.tolist() == want and n == 128


def test_scale_beyond_float32_is_refused_quietly(capsys):
    """scale=1e39 rounds to +inf in float32: refused in one line, no numpy warning on
    stderr (the CLI's promise)."""
    import warnings

    from audit.cli import main

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(BadOptionError) as e:
            quant.parse_quant("int8:scale=1e39")
    assert str(e.value) == "'int8:scale=1e39': scale must be a positive normal float32, got 1e39"
    assert main(["sweep", "sigmoid.exp", "--dtype", "int8:scale=1e39"]) == 2
    err = capsys.readouterr().err
    assert err == "actaudit: error: 'int8:scale=1e39': scale must be a positive normal float32, got 1e39\n"


def test_a_parameter_with_only_tables_is_refused_naming_the_first(tmp_path):
    # a lut: table is audited at its reference's defaults: parameters are refused, the first
    # name in sorted order in the line (the float path's message); with a catalog candidate
    # beside the table, the candidate takes them
    from audit.targets import lut

    inq = quant.parse_quant("int8:scale=0.0625,zero=0")
    lut.write_table(tmp_path / "t.npy", "elu", inq, inq)
    t = f"lut:{tmp_path / 't.npy'}"
    with pytest.raises(BadOptionError) as e:
        quant.sweep([t], inq, inq, params={"beta": 1.0, "alpha": 2.0}, reference="elu")
    assert str(e.value) == "no selected candidate has a parameter 'alpha'"
    (r,) = quant.sweep([t], inq, inq, reference="elu")  # without parameters: audited
    assert r.valid.all() and r.max_code_distance == 0  # the table is the correct one
