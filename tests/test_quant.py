"""Quantized integer formats: the oracle codes against mpmath and exact rational rounding
written here; the framework convention R(y / s) + z; findings; the CLI."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest

from audit.errors import BadOptionError
from audit.measure import quant


def ref_code(y: Fraction | float, kind: str, scale: float, zero: int, rounding: str) -> int:
    """clamp(R(y / s) + z): y / s as an exact rational, R by comparing its fraction with 1/2."""
    lo, hi = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767)}[kind]
    w = Fraction(y) / Fraction(scale)
    k = math.floor(w)
    frac = w - k
    if frac > Fraction(1, 2):
        n = k + 1
    elif frac < Fraction(1, 2):
        n = k
    elif rounding == "even":
        n = k if k % 2 == 0 else k + 1
    else:
        n = k + 1 if w > 0 else k
    return min(max(n + zero, lo), hi)


def mp_fraction(f, x: float, prec: int = 200) -> Fraction:
    with mp.workprec(prec):
        v = f(mp.mpf(x))
        m, e = mp.frexp(v)
        return (
            Fraction(int(mp.ldexp(m, prec)), 1) * Fraction(2) ** (e - prec)
            if e - prec < 0
            else Fraction(int(mp.ldexp(m, prec)) * 2 ** (e - prec))
        )


MPF = {
    "gelu": lambda x: x * (1 + mp.erf(x / mp.sqrt(2))) / 2,
    "silu": lambda x: x / (1 + mp.exp(-x)),
    "sigmoid": lambda x: 1 / (1 + mp.exp(-x)),
    "tanh": mp.tanh,
}


def test_ties_round_before_the_zero_point():
    """s = 0.5: y = 1.25 is y/s = 2.5, a tie.  Half to even: 2, half away: 3; y = -1.25:
    -2 and -3; y = +-0.25 (y/s = +-0.5): 0 and +-1.  With z = 1 the rounding applies to y/s and z is added after: 2 + 1 = 3
    (rounding 2.5 + 1 = 3.5 to even would give 4)."""
    even = quant.parse_quant("int8:scale=0.5,zero=0")
    away = quant.parse_quant("int8:scale=0.5,zero=0,round=away")
    z1 = quant.parse_quant("int8:scale=0.5,zero=1")
    # y = +-0.25: y/s = +-0.5, ties between 0 and +-1
    assert even.quantize([1.25, -1.25, 0.25, -0.25]).tolist() == [2, -2, 0, 0]
    assert away.quantize([1.25, -1.25, 0.25, -0.25]).tolist() == [3, -3, 1, -1]
    assert z1.quantize([1.25]).tolist() == [3]
    # clamped, with the infinities; NaN stays NaN
    assert even.quantize([1e9, -1e9, math.inf, -math.inf]).tolist() == [127, -128, 127, -128]
    assert np.isnan(even.quantize([math.nan])[0])
    # quantize_mpf agrees on the ties
    for y in (1.25, -1.25, 0.25, -0.25, 0.3):
        assert even.quantize_mpf(mp.mpf(y)) == even.quantize([y])[0]
        assert away.quantize_mpf(mp.mpf(y)) == away.quantize([y])[0]


def test_quantize_matches_rational_rounding_at_every_boundary():
    rng = np.random.default_rng(3)
    for spec in (
        "int8:scale=0.0625,zero=0",
        "uint8:scale=0.00392156862745098,zero=0,round=away",
        "int16:scale=0.000244140625,zero=-7,round=away",
        "int8:scale=0.1,zero=5",
    ):
        q = quant.parse_quant(spec)
        k = np.arange(q.qmin - q.zero - 3, q.qmax - q.zero + 3, dtype=np.float64)
        if q.kind == "int16":  # every boundary near the ends, every 13th between (time)
            k = np.unique(np.concatenate([k[:300], k[::13], k[-300:]]))
        b = (k + 0.5) * q.scale  # every boundary (exact: 19 bits times a float32)
        pts = np.concatenate(
            [
                b,
                np.nextafter(b, -np.inf),
                np.nextafter(b, np.inf),
                k * q.scale,
                rng.uniform(-q.scale * 70000, q.scale * 70000, 500),
            ]
        )
        got = q.quantize(pts)
        want = [ref_code(float(p), q.kind, q.scale, q.zero, q.rounding) for p in pts]
        assert got.tolist() == want, spec


@pytest.mark.parametrize("ref", ["gelu", "silu", "sigmoid", "tanh"])
def test_oracle_codes_against_mpmath(ref):
    """Every int8 code, and every 61st int16 code, of four references."""
    from audit.oracle.references import REFERENCES

    for spec, step in (("int8:scale=0.0625,zero=-3,round=away", 1), ("int16:scale=0.0009765625,zero=0", 61)):
        q = quant.parse_quant(spec)
        x = q.values()[::step]
        codes, _, _ = quant.exact_codes(REFERENCES[ref], x, q, {})
        want = [ref_code(mp_fraction(MPF[ref], float(v)), q.kind, q.scale, q.zero, q.rounding) for v in x]
        assert codes.tolist() == want, (ref, spec)


def test_metrics_and_findings_hand_worked():
    """sigmoid.hard = clip(x/6 + 1/2, 0, 1) on int8 inputs (s = 1/16) into uint8 (s = 1/32,
    z = 0): at x = -4 it gives 0, where sigmoid(-4) = 0.01799 is 0.5757 codes: the correct
    code is 1, so code 0 is pinned at the lower limit with code error 0.5757."""
    r = quant.sweep("sigmoid.hard", "int8:scale=0.0625,zero=0", "uint8:scale=0.03125,zero=0")[0]
    i = int(np.flatnonzero(r.x == -4.0)[0])
    s = float(1 / (1 + mp.exp(4)))
    assert (r.got[i], r.want[i]) == (0, 1)
    assert abs(r.code_err[i] - s / 0.03125) < 1e-12
    assert abs(r.real_err[i] - s) < 1e-12
    kinds = {f["kind"]: f for f in r.findings}
    assert (
        "pinned" in kinds and kinds["pinned"]["intervals"][0][0] <= -4 <= kinds["pinned"]["intervals"][0][1]
    )
    assert r.count == 256 and r.correct_fraction == np.mean(r.got == r.want)


def test_non_monotone_codes_are_found():
    """A kernel whose code goes down once (hand-made) on an increasing reference."""
    q = quant.parse_quant("int8:scale=0.0625,zero=0")
    from audit.oracle.references import REFERENCES

    def fn(codes, x):
        out = q.quantize(1 / (1 + np.exp(-x)))
        out[200] -= 3  # a step backwards at code 200 - 128 = 72 and forwards after it
        return out

    cand = quant.QuantCandidate("bad", "sigmoid", "", "", fn, "fp64")
    r = quant.audit_codes(REFERENCES["sigmoid"], q, q, cand)
    mono = [f for f in r.findings if f["kind"] == "monotonicity"]
    assert mono and mono[0]["count"] == 1 and mono[0]["intervals"][0] == [72 * 0.0625, 72 * 0.0625]


@pytest.mark.parametrize(
    "bad",
    [
        "int8",
        "int8:scale=0",
        "int8:scale=-1,zero=0",
        "int8:scale=nan",
        "int8:scale=0.1,zero=200",
        "uint8:scale=0.1,zero=-1",
        "int8:scale=0.1,zero=1.5",
        "int8:scale=0.1,round=up",
        "int8:scale=0.1,foo=1",
        "int8:scale=0.1,scale=0.2",
        "int32:scale=1",
    ],
)
def test_bad_specs_are_refused(bad):
    with pytest.raises(BadOptionError):
        quant.parse_quant(bad)


def test_cli_quantized_sweep(capsys):
    from audit.cli import main

    code = main(["sweep", "gelu.tanh", "--dtype", "int8:scale=0.0625,zero=0", "--json", "-"])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    assert doc["schema"] == "actaudit.quant/1"
    r = doc["results"][0]
    assert r["inputs"] == {"count": 256, "exhaustive": True} and r["max_code_error"] <= 1.5
    code = main(["sweep", "gelu.tanh", "--dtype", "int8:scale=0,zero=0"])
    _, err = capsys.readouterr()
    assert code == 2 and err.startswith("actaudit: error:")


def test_mpmath_path_of_the_oracle_codes():
    """The codes with the fast path removed (every input decided by mpmath), and exact ties
    decided by mpmath (the precision doubles to its limit, then the tie rule applies)."""
    import dataclasses

    from audit.oracle.references import REFERENCES

    q = quant.parse_quant("int8:scale=0.0625,zero=0,round=away")
    slow = dataclasses.replace(REFERENCES["silu"], fast=None)
    x = q.values()[::5]
    codes, _, n = quant.exact_codes(slow, x, q, {})
    assert n == len(x)
    assert codes.tolist() == [
        ref_code(mp_fraction(MPF["silu"], float(v)), q.kind, q.scale, q.zero, q.rounding) for v in x
    ]
    # ties decided exactly by mpmath: f(x) = x / 2 (a reference without a fast path) on
    # int8 codes of scale 1/16 quantized with scale 1/16: x/2 = k/32, a tie for odd k
    half = dataclasses.replace(REFERENCES["silu"], fast=None, mp=lambda v, **_: v / 2)
    for rnd in ("even", "away"):
        q = quant.parse_quant(f"int8:scale=0.0625,zero=0,round={rnd}")
        x = q.values()
        codes, _, _ = quant.exact_codes(half, x, q, {})
        assert codes.tolist() == [ref_code(Fraction(float(v)) / 2, "int8", 0.0625, 0, rnd) for v in x]


def test_tflite_int16_interpolation_against_integers():
    """tflite16:sigmoid: the 513-entry table from mpmath and rational rounding here, then the
    lookup in Python integers for every 7th input code (floor division is the arithmetic
    shift: (slope * offset + 64) // 128)."""
    inq = quant.parse_quant("int16:scale=0.000244140625,zero=0")
    outq = quant.parse_quant("int16:scale=0.000030517578125,zero=0")
    r = quant.sweep("tflite16:sigmoid", inq, outq)[0]
    table = [
        ref_code(
            mp_fraction(MPF["sigmoid"], ((i - 256) * 128) * 0.000244140625),
            "int16",
            0.000030517578125,
            0,
            "even",
        )
        for i in range(513)
    ]
    for k in range(0, 65536, 7):
        q = k - 32768
        idx, off = 256 + q // 128, q % 128
        want = table[idx] + ((table[idx + 1] - table[idx]) * off + 64) // 128
        assert r.got[k] == want, q
    with pytest.raises(BadOptionError):
        quant.sweep("tflite16:sigmoid", "int8:scale=0.0625,zero=0")
