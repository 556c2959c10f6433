"""Findings, causes, hidden overflow, lossy constants, saturation and clip ranges,
checked against thresholds computed independently in the tests."""

import json
import math

import mpmath as mp
import numpy as np
import pytest

import audit
from audit.measure import clip as clip_mod
from audit.numbers.formats import get_format

H = get_format("fp16")
FP16 = H.finite_values()


def finding(r, kind):
    fs = [f for f in r.findings if f.kind == kind]
    assert len(fs) == 1, [f.kind for f in r.findings]
    return fs[0]


def smallest_fp16(pred, lo=0.0, hi=65504.0):
    return min(float(v) for v in FP16 if lo <= v <= hi and pred(mp.mpf(float(v))))


EXP_OVERFLOWS = smallest_fp16(lambda x: mp.exp(x) >= 65520, 8, 16)  # RN_fp16(e^x) = inf


def test_sigmoid_naive_nan_interval_and_cause():
    assert EXP_OVERFLOWS == 11.09375
    (r,) = audit.sweep("sigmoid.naive", dtype="fp16")
    f = finding(r, "nan")
    assert f.intervals == [[EXP_OVERFLOWS, 65504.0]]
    assert f.count == int((FP16 >= EXP_OVERFLOWS).sum())
    assert "exp overflowed to inf" in f.cause["text"] and "inf / inf = NaN" in f.cause["text"]
    assert f.cause["op"] == "/" and f.cause["line"] > 0


def test_softplus_naive_inf_interval():
    (r,) = audit.sweep("softplus.naive", dtype="fp16")
    f = finding(r, "overflow")
    assert f.intervals == [[EXP_OVERFLOWS, 65504.0]]
    assert f.cause["op"] == "exp"


def test_tanh_gelu_through_exp_in_fp32_for_bf16_nans_from_about_10():
    # independent: the same formula in numpy float32 (exp taken in float64, then rounded)
    b = get_format("bf16").finite_values()
    x = b[(b > 0) & (b < 1e4)].astype(np.float32)
    with np.errstate(all="ignore"):
        k, c = np.float32(math.sqrt(2 / math.pi)), np.float32(0.044715)
        u = k * (x + c * (x * x * x))
        e = np.exp((np.float32(2) * u).astype(np.float64)).astype(np.float32)
        y = np.float32(0.5) * x * (np.float32(1) + (e - np.float32(1)) / (e + np.float32(1)))
    thr = float(x[np.isnan(y)].min())
    assert 9 <= thr <= 11
    (r,) = audit.sweep("gelu.tanh_exp", dtype="bf16", compute="fp32")
    f = finding(r, "nan")
    assert f.intervals[0][0] == thr and f.intervals[-1][1] == get_format("bf16").max_finite
    assert "exp overflowed" in f.cause["text"]


def test_tanh_gelu_in_fp16_hidden_cube_overflow_and_nan_at_minus_inf():
    with np.errstate(all="ignore"):
        x = FP16.astype(np.float16)
        cube = (x * x) * x
    thr = float(FP16[np.isinf(cube) & (FP16 > 0)].min())
    assert 40.25 <= thr <= 40.5
    (r,) = audit.sweep("gelu.tanh", dtype="fp16")
    (h,) = [h for h in r.hidden if h["kind"] == "hidden_overflow"]
    assert h["op"] == "*"
    assert h["intervals"] == [[-65504.0, -thr], [thr, 65504.0]]
    s = finding(r, "special")
    assert s.intervals == [[-math.inf, -math.inf]] and "NaN" in s.cause["text"]


def ulp16(f):
    e = mp.frexp(f)[1] - 1
    return mp.ldexp(1, max(e, -14) - 10)


def test_safe_clip_gelu_is_far_off_above_its_clip():
    (r,) = audit.sweep("gelu.safe_clip", dtype="fp16", keep_points=True)
    p = r.points
    rng = np.random.default_rng(2)
    big = np.flatnonzero(p.x > 3.45)
    for i in rng.choice(big, 200, replace=False):
        f = mp.mpf(p.x[i]) * mp.ncdf(mp.mpf(p.x[i]))
        err = float(abs(mp.mpf(p.got[i]) - f) / ulp16(f))
        assert err == pytest.approx(p.ulp_err[i], rel=1e-6)
        assert err > 200 and (p.x[i] < 64 or err > 1000)
    assert r.max_ulp > 2000


@pytest.mark.slow  # the whole catalog in fp16: .ci/run's slow stage
def test_every_breaking_finding_of_the_catalog_has_a_cause():
    res = audit.sweep(list(audit.catalog()), dtype="fp16", grid=48)
    seen = 0
    for r in res:
        for f in r.findings:
            if f.kind in ("nan", "overflow", "underflow", "special", "sign", "range", "monotonicity"):
                seen += 1
                assert f.cause is not None, (r.candidate, f.kind, f.example)
                assert f.cause["line"] is not None
    assert seen > 50


def test_lossy_constants():
    (r,) = audit.sweep("tanh.pade", dtype="fp16")
    texts = [h["text"] for h in r.hidden if h["kind"] == "constant"]
    assert any("135135" in t and "overflows" in t for t in texts)
    (r,) = audit.sweep("tanh.rational_half", dtype="fp16")
    zero = [h for h in r.hidden if h["kind"] == "constant" and "underflows to 0" in h["text"]]
    assert {h["value"] for h in zero} >= {-2.76076847742355e-16, 2.00018790482477e-13}
    (r,) = audit.sweep("gelu.fastgelu_v2", dtype="fp16")
    assert any(h["kind"] == "constant" and h["value"] == 1e-12 for h in r.hidden)
    assert finding(r, "nan").intervals == [[-0.0, 0.0]]  # sgn(0) = 0/0


def test_saturation_thresholds_from_the_exact_function():
    # sigmoid rounds to 1 in fp16 once 1 - s(x) <= 2^-12 (the tie goes to 1, the even side),
    # and to 0 while s(x) <= 2^-25
    hi = smallest_fp16(lambda x: 1 / (1 + mp.exp(x)) <= mp.ldexp(1, -12), 4, 20)
    lo = max(
        float(v) for v in FP16 if -30 < v < 0 and 1 / (1 + mp.exp(-mp.mpf(float(v)))) <= mp.ldexp(1, -25)
    )
    (r,) = audit.sweep("sigmoid.exp", dtype="fp16")
    assert r.saturation == {"high": {"x": hi, "value": 1.0}, "low": {"x": lo, "value": 0.0}}

    # GELU: RN(gelu(x)) = x once x Phi(-x) is within half the gap to x's lower neighbour
    def stays_x(x):
        below = mp.mpf(float(H.from_ordinal([H.ordinal([float(x)])[0] - 1])[0]))
        return x * mp.ncdf(-x) < (x - below) / 2

    vals = [float(v) for v in FP16 if 1 <= v <= 8]
    last_bad = max(v for v in vals if not stays_x(mp.mpf(v)))
    (r,) = audit.sweep("gelu.erfc", dtype="fp16")
    assert r.saturation["high"] == {"x": vals[vals.index(last_bad) + 1], "value": "identity"}


@pytest.mark.parametrize("family", ["sigmoid", "gelu", "silu"])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_clip_recommendations_hold_when_applied(family, dtype):
    fmt = get_format(dtype)
    for r in audit.sweep(family, dtype=dtype, keep_points=True):
        c, cand = r.clip, audit.catalog()[r.candidate]
        tol = c["tolerance"]["max_ulp"]
        fixed = clip_mod.apply(cand, c, r.saturation)
        dom = audit.inputs.domain(fmt)
        fr = audit.sweep_module.run_candidate(
            fixed, fmt, get_format(r.compute), dom, keep_points=True, analyze=False
        )
        e, p = fr.points, r.points
        assert fr.max_ulp == pytest.approx(c["max_ulp_inside"], rel=1e-12) or (
            math.isinf(c["max_ulp_inside"])
        )
        inside = np.ones(len(e.x), bool)
        if c["hi"] is not None:
            out = e.x > c["hi"]
            inside &= ~out
            assert np.all(e.cls[out] == 0) and np.all(e.ulp_err[out] <= tol), (r.candidate, "hi")
        if c["lo"] is not None:
            out = e.x < c["lo"]
            inside &= ~out
            assert np.all(e.cls[out] == 0) and np.all(e.ulp_err[out] <= tol), (r.candidate, "lo")
        # inside the range the candidate is untouched
        assert np.array_equal(e.got[inside], p.got[inside], equal_nan=True)
        # a side without a note is within tolerance everywhere
        for side, sel in (("hi", e.x > 0), ("lo", e.x < 0)):
            if f"{side} side" not in c["note"]:
                assert np.all(e.cls[sel] == 0) and np.all(e.ulp_err[sel] <= tol), (r.candidate, side)


def test_clip_of_sigmoid_naive_is_a_clamp_below_the_nan_threshold():
    (r,) = audit.sweep("sigmoid.naive", dtype="fp16")
    assert r.clip["hi_action"] == "clamp" and r.clip["hi"] < EXP_OVERFLOWS


def test_json_fields():
    doc = audit.document(audit.sweep("gelu.tanh", dtype="fp16"))
    res = doc["results"][0]
    json.dumps(doc, allow_nan=False)
    f = res["findings"][0]
    assert set(f) >= {"kind", "count", "intervals", "example", "cause"}
    assert set(f["example"]) >= {"x", "got", "exact"}
    assert set(res["saturation"]) == {"low", "high"}
    assert set(res["clip"]) >= {"lo", "hi", "lo_action", "hi_action", "max_ulp_inside", "tolerance"}
    assert isinstance(res["hidden"], list)


def test_clip_cli(capsys):
    from audit.cli import main

    assert main(["clip", "sigmoid.naive", "--dtype", "fp16", "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["results"][0]["clip"]["hi_action"] == "clamp"
    assert main(["clip", "gelu.tanh", "--dtype", "fp32"]) == 2
    assert main(["clip", "gelu.tanh", "--max-ulp", "-1"]) == 2


@pytest.mark.parametrize("beta", [2.0, 0.5, -1.0])
def test_swish_monotone_pieces_follow_beta(beta):
    """x sigmoid(beta x) turns where its derivative vanishes: sigmoid(bx) (1 + bx (1 -
    sigmoid(bx))) = 0, at x = r / beta with r the root of 1 + t (1 - sigmoid(t)) (mpmath),
    decreasing before it for beta > 0 and increasing for beta < 0.  A correctly rounded
    result is never reported as going backwards (it used to be, at silu's own turning point)."""
    import mpmath as mp

    from audit.oracle.references import REFERENCES

    r = mp.findroot(lambda t: 1 + t * (1 - 1 / (1 + mp.exp(-t))), -1.3)
    (a0, b0, d0), (a1, b1, d1) = REFERENCES["silu"].pieces({"beta": beta})
    assert b0 == a1 and abs(b0 - float(r) / beta) < 1e-12
    assert (d0, d1) == ((-1, 1) if beta > 0 else (1, -1))
    (res,) = audit.sweep("swish.beta", dtype="fp16", compute="fp32", params={"beta": beta})
    assert res.correctly_rounded_fraction > 0.999
    assert not [f for f in res.findings if f.kind == "monotonicity"]


def test_causes_from_one_trace_are_each_inputs_own():
    # find() traces every kind's example input at once; each cause is the one a trace of
    # that input alone gives (real catalog candidates with several finding kinds)
    from audit.measure import findings as F
    from audit.measure.sweep import sweep
    from audit.numbers.formats import get_format
    from audit.targets.candidates import resolve

    for cid in ("gelu.erf_rational", "gelu.tanh_exp", "gelu.fastgelu_v2"):
        r = sweep(cid, "fp16", "fp16", keep_points=True)[0]
        e = r.points
        kinds = [f for f in r.findings if f.kind != "special"]
        assert len(kinds) >= 2, cid
        for f in kinds:
            i = int(np.flatnonzero(e.x == f.example["x"])[0])
            fmt = get_format("fp16")
            alone = F.explain(resolve([cid])[0], fmt, fmt, {}, e.x[i : i + 1], None, f.kind)
            assert f.cause == alone, (cid, f.kind)
