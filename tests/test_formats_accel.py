"""The accelerator formats of issue 15 against an independent implementation written here.

The independent side works on the encodings and on exact rationals (fractions.Fraction):
each format is given by its bit fields (exponent bits, mantissa bits, bias) and its rules
(NaN code, negative zero, saturation); every code is decoded with integer arithmetic, and a
real number is rounded by searching the sorted table of decoded values for the nearest one,
a tie going to the code with an even mantissa field.  Nothing here calls audit.numbers.formats'
rounding or ml_dtypes."""

from __future__ import annotations

import bisect
import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest

from audit.errors import UnknownNameError
from audit.measure.metrics import FINITE, OVERFLOW_OK, point_errors
from audit.numbers.formats import FORMATS, get_format, parse_formats
from audit.oracle.oracle import OracleValues

# name: (exponent bits, mantissa bits, bias, rules)
#   fnuz: code 0x80 (the pattern of -0) is the only NaN, no -0, no inf, overflow -> NaN
#   sat: no inf, no NaN, overflow (and +-inf) saturate to +-max (OCP MX v1.0)
SPECS = {
    "fp8_e4m3fnuz": (4, 3, 8, "fnuz"),
    "fp8_e5m2fnuz": (5, 2, 16, "fnuz"),
    "fp6_e3m2": (3, 2, 3, "sat"),
    "fp6_e2m3": (2, 3, 1, "sat"),
    "fp4_e2m1": (2, 1, 1, "sat"),
}


def decode(code: int, eb: int, mb: int, bias: int, rule: str):
    """Value of an encoding as a Fraction, or 'nan'; (value, negative)."""
    bits = 1 + eb + mb
    sign = code >> (bits - 1)
    e = (code >> mb) & ((1 << eb) - 1)
    m = code & ((1 << mb) - 1)
    if rule == "fnuz" and sign and e == 0 and m == 0:
        return "nan", False
    if e == 0:
        v = Fraction(m, 1 << mb) * Fraction(2) ** (1 - bias)
    else:
        v = (1 + Fraction(m, 1 << mb)) * Fraction(2) ** (e - bias)
    return (-v if sign else v), bool(sign)


class Ref:
    """Independent rounding into one format: nearest value in the table, ties to even code."""

    def __init__(self, name):
        eb, mb, bias, rule = SPECS[name]
        self.rule, self.mb = rule, mb
        pos = {}
        for code in range(1 << (eb + mb)):  # the sign bit clear: the magnitudes
            v, _ = decode(code, eb, mb, bias, rule)
            pos[v] = code
        self.vals = sorted(pos)
        self.codes = [pos[v] for v in self.vals]
        self.max = self.vals[-1]
        # the value after max in an unbounded exponent range: max + ulp(max)
        ulp_max = Fraction(2) ** ((2**eb - 1) - bias - mb)
        self.threshold = self.max + ulp_max / 2  # overflow at or beyond (max's mantissa is odd)

    def round(self, x: float) -> float:
        if math.isnan(x):
            return math.nan
        if math.isinf(x):
            return math.copysign(float(self.max), x) if self.rule == "sat" else math.nan
        a = abs(Fraction(x))
        if a >= self.threshold:
            r = self.max if self.rule == "sat" else None
            if r is None:
                return math.nan
        else:
            i = bisect.bisect_left(self.vals, a)
            if i < len(self.vals) and self.vals[i] == a:
                r = a
            else:
                lo, hi = self.vals[i - 1], self.vals[i] if i < len(self.vals) else None
                if hi is None:
                    r = lo
                elif a - lo < hi - a:
                    r = lo
                elif hi - a < a - lo:
                    r = hi
                else:  # tie: the even mantissa field
                    r = lo if self.codes[i - 1] % 2 == 0 else hi
        out = float(r)
        if x < 0 or (x == 0 and math.copysign(1, x) < 0):
            out = -out
        if out == 0 and self.rule == "fnuz":
            out = 0.0  # no negative zero
        return out

    def boundary_points(self) -> list[float]:
        """Every value, every midpoint between neighbours, the float64 neighbours of each
        (+-1 float64 ulp: exactly representable in float64), the overflow threshold and its
        neighbours, half the smallest subnormal, and beyond: both signs."""
        pts = []
        vs = [float(v) for v in self.vals]
        for a, b in zip(vs[:-1], vs[1:]):
            m = (a + b) / 2  # exact in float64
            pts += [a, m, np.nextafter(m, -1.0), np.nextafter(m, 2 * b), b]
        t = float(self.threshold)
        pts += [
            t,
            np.nextafter(t, 0.0),
            np.nextafter(t, np.inf),
            2 * t,
            1e300,
            math.inf,
            vs[1] / 2,
            np.nextafter(vs[1] / 2, 0.0),
            np.nextafter(vs[1] / 2, 1.0),
            5e-324,
            0.0,
        ]
        pts = [float(p) for p in pts]
        return pts + [-p for p in pts] + [math.nan]


def same(a, b) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1, a) == math.copysign(1, b)


@pytest.mark.parametrize("name", list(SPECS))
def test_rounding_at_every_boundary(name):
    f, ref = FORMATS[name], Ref(name)
    pts = ref.boundary_points()
    got = f.round(np.array(pts))
    bad = [(p, g, ref.round(p)) for p, g in zip(pts, got.tolist()) if not same(g, ref.round(p))]
    assert not bad, bad[:5]
    # the mpmath path (the oracle's exact rounding) agrees too, at the finite points
    for p in pts:
        if math.isfinite(p):
            assert same(f.round_mpf(mp.mpf(p)), ref.round(p) if p != 0 else 0.0), p


@pytest.mark.parametrize("name", list(SPECS))
def test_codes_decode_encode_and_order(name):
    f = FORMATS[name]
    eb, mb, bias, rule = SPECS[name]
    codes = np.arange(1 << (1 + eb + mb))
    got = f.from_bits(codes)
    for c, g in zip(codes.tolist(), got.tolist()):
        v, neg = decode(c, eb, mb, bias, rule)
        if v == "nan":
            assert math.isnan(g), hex(c)
        else:
            assert g == float(v) and (math.copysign(1, g) < 0) == neg, hex(c)
    fin = np.isfinite(got)
    assert np.array_equal(f.to_bits(got[fin]), codes[fin])
    # finite values ascending; ordinals consecutive from -max to +max, 0 shared by +-0
    vals = f.finite_values()
    o = f.ordinal(vals)
    uniq = np.unique(o)
    assert np.array_equal(uniq, np.arange(-f.max_ordinal, f.max_ordinal + 1))
    assert np.array_equal(f.from_ordinal(uniq), np.unique(vals))
    assert f.max_finite == float(Ref(name).max)
    # the stated maxima of the issue
    assert {"fp8_e4m3fnuz": 240, "fp8_e5m2fnuz": 57344, "fp6_e3m2": 28, "fp6_e2m3": 7.5, "fp4_e2m1": 6}[
        name
    ] == f.max_finite


def test_fnuz_has_one_nan_and_no_negative_zero():
    for name in ("fp8_e4m3fnuz", "fp8_e5m2fnuz"):
        f = FORMATS[name]
        r = f.round(np.array([-0.0, -1e-30, -f.smallest_subnormal / 2]))
        assert np.all(r == 0) and not np.signbit(r).any()  # a negative result rounding to 0 is +0
        assert f.hex(math.nan) == "0x80" and len(f.finite_values()) == 255
        assert np.isnan(f.round([f.overflow_threshold, -math.inf])).all()  # overflow gives NaN


def test_saturating_formats_keep_negative_zero_and_clamp():
    f = FORMATS["fp4_e2m1"]
    # fp4 values: 0 0.5 1 1.5 2 3 4 6; ties: 0.25 -> 0 (even), 0.75 -> 1, 2.5 -> 2, 5 -> 4,
    # 6.9 -> 6, 7 (= 6 + ulp(6)/2, the tie past the top) -> saturates to 6
    assert f.round([0.25, 0.75, 2.5, 3.5, 5.0, 6.9, 7.0, 1e9, -math.inf]).tolist() == [
        0.0,
        1.0,
        2.0,
        4.0,
        4.0,
        6.0,
        6.0,
        6.0,
        -6.0,
    ]
    assert np.signbit(f.round([-0.1]))[0]
    assert f.hex(math.nan) == "nan"


def test_tf32_against_integer_rounding():
    """tf32 = fp32's exponent range with p = 11: rounding of float64 values on integers."""
    f = FORMATS["tf32"]
    rng = np.random.default_rng(5)

    def ref(x: float) -> float:
        if not math.isfinite(x) or x == 0:
            return x
        fr = abs(Fraction(x))
        e = fr.numerator.bit_length() - fr.denominator.bit_length()
        if Fraction(2) ** e > fr:
            e -= 1  # floor(log2 |x|)
        q = max(e, -126) - 10
        n, rem = divmod(fr / Fraction(2) ** q, 1)
        n = int(n)
        if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2):
            n += 1
        v = n * Fraction(2) ** q
        out = math.inf if v >= Fraction(2) ** 128 else float(v)
        return math.copysign(out, x)

    # random tf32 values over the whole range (normal and subnormal), their midpoints and
    # the float64 neighbours of each midpoint; the top and the overflow threshold
    o = rng.integers(-f.max_ordinal, f.max_ordinal, 3000)
    a, b = f.from_ordinal(o), f.from_ordinal(o + 1)
    m = (a + b) / 2
    pts = np.concatenate(
        [
            a,
            m,
            np.nextafter(m, -np.inf),
            np.nextafter(m, np.inf),
            [
                f.max_finite,
                f.overflow_threshold,
                np.nextafter(f.overflow_threshold, 0),
                2.0**-136,
                2.0**-137,
                np.nextafter(2.0**-137, 1),
            ],
        ]
    )
    got = f.round(pts)
    want = np.array([ref(float(p)) for p in pts])
    assert np.array_equal(got, want)
    for p in pts[::50]:
        assert f.round_mpf(mp.mpf(float(p))) == ref(float(p))
    bits = f.to_bits(a)
    assert bits.max() < 1 << 19 and np.array_equal(f.from_bits(bits), a)
    # the 19-bit layout: sign, 8 exponent bits, 10 fraction bits (fp32's top 19 bits)
    assert np.array_equal(bits, a.astype(np.float32).view(np.uint32) >> 13)


def test_e8m0_is_scales_only():
    f = FORMATS["e8m0"]
    assert f.from_bits([0, 127, 254, 255])[:3].tolist() == [2.0**-127, 1.0, 2.0**127]
    assert np.isnan(f.from_bits([255])[0])
    assert f.to_bits([1.0, 2.0**-127]).tolist() == [127, 0]
    with pytest.raises(UnknownNameError):
        parse_formats("e8m0")


def test_saturated_results_are_overflow_ok():
    """fp4: threshold 7 (= 6 + ulp(6)/2 with ulp(6) = 2).  Exact 7.5 with result 6: the
    correct saturation (overflow_ok); exact 6.9, result 6: a finite correctly rounded value
    (error 0.9 / 2 = 0.45 ulp); exact 7.5 with result 4: finite, |4 - 7.5| / 2."""
    f = get_format("fp4_e2m1")
    hi = np.array([7.5, 6.9, 7.5, 7.0, 7.0])
    lo = np.array([0.0, 0.0, 0.0, 0.0, -1e-20])  # 7 - 1e-20 rounds down to 6: not overflow
    rounded = f.round(hi)
    ov = OracleValues(rounded, hi, lo, 0, np.zeros(5, bool))
    got = np.array([6.0, 6.0, 4.0, 6.0, 6.0])
    e = point_errors(np.arange(5.0), got, ov, f)
    assert e.cls.tolist() == [OVERFLOW_OK, FINITE, FINITE, OVERFLOW_OK, FINITE]
    assert abs(e.ulp_err[1] - 0.45) < 1e-12 and e.ulp_err[2] == 1.75 and np.isnan(e.ulp_err[0])


@pytest.mark.slow  # the whole catalog in each accelerator format: .ci/run's slow stage
@pytest.mark.parametrize("name", list(SPECS))
def test_every_catalog_candidate_sweeps(name):
    import audit
    from audit.targets.candidates import catalog

    res = audit.sweep(list(catalog()), dtype=name)
    assert len(res) >= len(catalog())
    n = len(FORMATS[name].finite_values())
    for r in res:
        assert r.domain.exhaustive
        s = r.summary
        assert (
            s.finite + s.nan_count + s.inf_count + s.overflow_ok + s.undefined == r.domain.count
        )  # (overflow misses are finite results)
        if r.domain.values2 is None and r.domain.axis is None:
            assert r.domain.count == n


def test_formats_command_lists_them(capsys):
    from audit.cli import main

    assert main(["formats", "--json"]) == 0
    names = {f["name"] for f in __import__("json").loads(capsys.readouterr()[0])}
    assert {"fp8_e4m3fnuz", "fp8_e5m2fnuz", "fp6_e3m2", "fp6_e2m3", "fp4_e2m1", "e8m0", "tf32"} <= names
    assert main(["sweep", "gelu.tanh", "--dtype", "e8m0"]) == 2
    assert capsys.readouterr()[1].startswith("actaudit: error:")


# ------------------------------------------------------------------ --out-dtype
def test_out_dtype_oracle_and_metrics_in_the_output_format():
    """Inputs: every fp8_e4m3 value; outputs in fp4_e2m1.  The correctly rounded value of
    each point is checked against mpmath's GELU rounded by the independent fp4 rounding."""
    import audit

    r = audit.sweep("gelu.erf", dtype="fp8_e4m3", out_dtype="fp4_e2m1", compute="fp32", keep_points=True)[0]
    assert (r.dtype, r.out_dtype, r.to_dict()["out_dtype"]) == ("fp8_e4m3", "fp4_e2m1", "fp4_e2m1")
    p = r.points
    assert len(p.x) == 254 and r.domain.exhaustive  # every finite E4M3 input, +-0 both
    ref = Ref("fp4_e2m1")
    mp.mp.prec = 80
    for x, rn in zip(p.x.tolist(), p.rounded.tolist()):
        g = float(mp.mpf(x) * (1 + mp.erf(mp.mpf(x) / mp.sqrt(2))) / 2)
        assert same(rn, ref.round(g)) or (g == 0 and rn == 0), (x, rn, ref.round(g))
    # the worst input is written in the input format's bits
    w = r.worst
    assert w["x_hex"] == FORMATS["fp8_e4m3"].hex(w["x"])
    # ULP error in fp4 units: |got - exact| / ulp_fp4(exact), for every finite point
    fin = p.cls == FINITE
    # (f = exact + exact_lo, except where gelu's value underflows float64, as at x = -448:
    # exact_lo is then the +-2^-1074 stand-in of a nonzero f, docs/concepts/exact-decisions.md)
    want = np.abs((p.got - p.exact) - p.exact_lo) / FORMATS["fp4_e2m1"].ulp(p.exact)
    # there the error itself is far below float64's range: its float64 rounding, from the exact
    # f in mpmath (Phi as erfc, no cancellation), is the figure (0 for x = -448)
    ulps = FORMATS["fp4_e2m1"].ulp(p.exact)
    for i in np.flatnonzero(fin & (p.exact == 0) & (p.exact_lo != 0)):
        x = mp.mpf(float(p.x[i]))
        f = x * mp.erfc(-x / mp.sqrt(2)) / 2
        want[i] = float(abs(mp.mpf(float(p.got[i])) - f) / mp.mpf(float(ulps[i])))
    want = np.where(p.correct, np.minimum(want, 0.5), want)
    assert np.allclose(p.ulp_err[fin], want[fin], rtol=1e-12, atol=0)


def test_out_dtype_equal_to_dtype_changes_nothing():
    import audit

    a = audit.sweep("silu.exp", dtype="fp8_e5m2fnuz")[0].to_dict()
    b = audit.sweep("silu.exp", dtype="fp8_e5m2fnuz", out_dtype="fp8_e5m2fnuz")[0].to_dict()
    a.pop("seconds", None), b.pop("seconds", None)
    assert a == b


def test_out_dtype_double_rounding_is_seen():
    """silu(19) = 18.9999999 (mpmath): RN_e4m3 = 18 (the e4m3 values near it: 18, 20);
    silu.exp in fp32 gives 19.0 exactly, a tie in e4m3 that goes to 20 (even): not
    correctly rounded, half an ulp and a bit."""
    import audit

    exact = float(mp.mpf(19) / (1 + mp.exp(-19)))
    assert 18.99999 < exact < 19
    r = audit.sweep(
        "silu.exp", dtype="bf16", out_dtype="fp8_e4m3", compute="fp32", range=(19, 19), keep_points=True
    )[0]
    assert r.points.got.tolist() == [20.0] and r.points.rounded.tolist() == [18.0]
    assert 0.5 < r.max_ulp < 0.5001


def test_out_dtype_cli_errors(capsys):
    from audit.cli import main

    for bad in ("e8m0", "fp16,bf16", "nope"):
        code = main(["sweep", "silu.exp", "--dtype", "bf16", "--out-dtype", bad])
        err = capsys.readouterr()[1]
        assert code == 2 and err.startswith("actaudit: error:"), (bad, err)


def test_gate_spec_with_accelerator_formats_and_out_dtype(tmp_path, monkeypatch, capsys):
    """A spec auditing in fp8_e4m3fnuz and fp4_e2m1, and bf16 -> fp8_e4m3 with out_dtype: the
    baseline records keys naming the output format, and check passes on it; an out_dtype
    that is not a string is refused."""
    import json

    from audit.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "actaudit.toml").write_text(
        'baseline = "base.json"\n[[audit]]\nname = "accel"\ntargets = ["silu.exp"]\n'
        'dtype = ["fp8_e4m3fnuz", "fp4_e2m1"]\n'
        '[[audit]]\nname = "cast"\ntargets = ["silu.exp"]\ndtype = "bf16"\ncompute = "fp32"\n'
        'out_dtype = "fp8_e4m3"\n'
    )
    assert main(["baseline"]) == 0
    keys = set(json.loads((tmp_path / "base.json").read_text())["entries"])
    assert {
        "accel/silu.exp/fp8_e4m3fnuz/fp8_e4m3fnuz",
        "accel/silu.exp/fp4_e2m1/fp4_e2m1",
        "cast/silu.exp/bf16->fp8_e4m3/fp32",
    } <= keys
    assert main(["check"]) == 0
    capsys.readouterr()
    (tmp_path / "actaudit.toml").write_text(
        '[[audit]]\nname = "cast"\ntargets = ["silu.exp"]\ndtype = "bf16"\ncompute = "fp32"\nout_dtype = 3\n'
    )
    assert main(["check"]) == 2


def test_report_names_the_output_format(tmp_path):
    import audit
    from reports import html

    res = audit.sweep("silu.exp", dtype="fp8_e4m3", out_dtype="fp4_e2m1", compute="fp32", keep_points=True)
    assert res[0].formats_label == "fp8_e4m3->fp4_e2m1"
    html.build(res, tmp_path / "rep", "test")
    assert "fp8_e4m3-&gt;fp4_e2m1 storage" in (tmp_path / "rep" / "index.html").read_text()


def test_golden_of_formats_without_negative_zero_and_tf32_bits(tmp_path):
    """fnuz has no -0: gelu's underflowing negative tail is +0 in y as in y_bits (0x00,
    the fnuz NaN being 0x80); tf32's y_bits are 19-bit tf32 patterns like its x_bits:
    sigmoid(0.5) = 0.62246 rounds to 1.0010111110110... (11 bits) = 0x1f8fb (hand-worked:
    sign 0, exponent 126 -> 0x7e << 10 = 0x1f800, fraction 0b0011111011 = 0xfb)."""
    from audit.cli import main

    assert main(["golden", "gelu", "--dtype", "fp8_e5m2fnuz", "-o", str(tmp_path / "g.npz")]) == 0
    d = np.load(tmp_path / "g.npz")
    zero = d["y"] == 0
    assert zero.any() and not np.signbit(d["y"][zero]).any() and (d["y_bits"][zero] == 0).all()
    np.save(tmp_path / "in.npy", np.array([0.5]))
    assert (
        main(
            [
                "golden",
                "sigmoid",
                "--dtype",
                "tf32",
                "--inputs",
                str(tmp_path / "in.npy"),
                "-o",
                str(tmp_path / "s.npz"),
            ]
        )
        == 0
    )
    d = np.load(tmp_path / "s.npz")
    assert int(d["x_bits"][0]) == 0x1F800 and int(d["y_bits"][0]) == 0x1F8FB


def test_golden_inputs_from_an_x_column_or_key(tmp_path):
    """golden --inputs takes a file's x column (CSV, with or without a header) or x key (npz)."""
    from audit.cli import main

    (tmp_path / "a.csv").write_text("x\n-0.0\n1.5\n")
    (tmp_path / "b.csv").write_text("-0.0\n1.5\n")
    np.savez(tmp_path / "c.npz", x=np.array([-0.0, 1.5]))
    for f in ("a.csv", "b.csv", "c.npz"):
        assert (
            main(
                [
                    "golden",
                    "tanh",
                    "--dtype",
                    "fp64",
                    "--inputs",
                    str(tmp_path / f),
                    "-o",
                    str(tmp_path / "t.npz"),
                ]
            )
            == 0
        )
        d = np.load(tmp_path / "t.npz")
        assert int(d["y_bits"][0]) == 0x8000000000000000  # tanh(-0) = -0
        with mp.workprec(200):
            assert d["y"][1] == float(mp.tanh(1.5))  # correctly rounded (mpmath, 200 bits)
