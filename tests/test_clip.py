"""audit/measure/clip.py in isolation: the tolerance test and the clip applied, with expectations
worked here (hand-built clips, sigmoid evaluated with math).  These kill the mutants that
mutmut found surviving in clip.py (docs/design/mutation-testing.md)."""

import math

import numpy as np
import pytest

import audit
from audit.measure import clip as clip_mod
from audit.measure.metrics import FINITE, NAN
from audit.targets.candidates import catalog


def test_within_tolerance_includes_the_bound_and_is_either_criterion():
    ulp = np.array([2.0, 2.0, 3.0, 3.0, 0.0])
    abs_err = np.array([0.5, 0.1, 0.1, 0.5, 0.0])
    cls = np.array([FINITE, FINITE, FINITE, FINITE, NAN])
    # max_ulp alone: 2 ULP is within a 2 ULP tolerance (<=), 3 is not; a NaN result never is
    assert clip_mod._ok(ulp, abs_err, cls, 2.0, None).tolist() == [True, True, False, False, False]
    # atol alone: 0.1 <= 0.1
    assert clip_mod._ok(ulp, abs_err, cls, None, 0.1).tolist() == [False, True, True, False, False]
    # both: within either one
    assert clip_mod._ok(ulp, abs_err, cls, 2.0, 0.1).tolist() == [True, True, True, False, False]


def _sigmoid():
    return catalog()["sigmoid.naive"]


SAT = {"low": {"x": -20.0, "value": 0.0}, "high": {"x": 20.0, "value": 1.0}}


@pytest.mark.parametrize("lo_a,hi_a", [("constant", "constant"), ("identity", "identity")])
def test_applied_clip_returns_the_action_beyond_the_bounds(lo_a, hi_a):
    cand = _sigmoid()
    fixed = clip_mod.apply(cand, {"lo": -5.0, "hi": 5.0, "lo_action": lo_a, "hi_action": hi_a}, SAT)
    x = np.array([-10.0, -5.0, 0.0, 5.0, 10.0])
    y = fixed.fn(x, np)
    want_lo = 0.0 if lo_a == "constant" else -10.0
    want_hi = 1.0 if hi_a == "constant" else 10.0
    s5 = 1 / (1 + math.exp(-5))
    assert y.tolist() == pytest.approx([want_lo, 1 / (1 + math.exp(5)), 0.5, s5, want_hi], rel=1e-12, abs=0)
    assert fixed.id == "sigmoid.naive+clip"
    assert fixed.formula == f"{cand.formula}, clipped [-5.0, 5.0] ({lo_a}, {hi_a})"


def test_clamp_clips_the_input_and_no_saturation_is_needed():
    cand = _sigmoid()
    fixed = clip_mod.apply(
        cand, {"lo": -4.0, "hi": 3.0, "lo_action": "clamp", "hi_action": "clamp"}, {"low": None, "high": None}
    )
    y = fixed.fn(np.array([-9.0, 9.0, 1.0]), np)
    assert y.tolist() == pytest.approx(
        [1 / (1 + math.exp(4)), 1 / (1 + math.exp(-3)), 1 / (1 + math.exp(-1))]
    )


def test_an_explicit_tolerance_is_the_one_used():
    (r,) = audit.sweep("sigmoid.naive", dtype="fp8_e4m3", max_ulp=8)
    assert r.clip["tolerance"] == {"max_ulp": 8.0, "atol": None}
    (r,) = audit.sweep("sigmoid.naive", dtype="fp8_e4m3", atol=0.5)
    assert r.clip["tolerance"] == {"max_ulp": None, "atol": 0.5}


def test_applied_clip_passes_the_parameters_on():
    cand = catalog()["elu.expm1"]
    fixed = clip_mod.apply(
        cand,
        {"lo": -50.0, "hi": 50.0, "lo_action": "clamp", "hi_action": "clamp"},
        {"low": None, "high": None},
    )
    y = fixed.fn(np.array([-1.0, 2.0]), np, alpha=2.0)
    assert y.tolist() == pytest.approx([2.0 * math.expm1(-1.0), 2.0], rel=1e-15)


def test_default_tolerance_core_includes_its_edge():
    # gelu in fp8_e4m3, correctly rounded everywhere but at x = 2, the edge of the core
    # |x| <= 2, where the result is 2.5 for gelu(2) = 1.9545 (ulp 1/8 there): that error,
    # (2.5 - 1.9545) * 8 = 4.36 ULP, sets the default tolerance to twice itself
    from audit.measure.metrics import point_errors
    from audit.numbers.formats import FORMATS
    from audit.oracle import oracle
    from audit.oracle.references import REFERENCES

    ref, fmt = REFERENCES["gelu"], FORMATS["fp8_e4m3"]
    x = fmt.finite_values()
    ov = oracle.evaluate(ref, fmt, x)
    got = ov.rounded.copy()
    i = int(np.flatnonzero(x == 2.0)[0])
    got[i] = 2.5
    e = point_errors(x, got, ov, fmt)
    gelu2 = 1 + math.erf(math.sqrt(2))  # 2 Phi(2)
    assert e.ulp_err[i] == pytest.approx((2.5 - gelu2) * 8, rel=1e-12)
    c = clip_mod.recommend(e, fmt, clip_mod.saturation(ref, fmt, {}))
    assert c["tolerance"]["max_ulp"] == pytest.approx(2 * (2.5 - gelu2) * 8, rel=1e-12)


def test_to_json_writes_non_finite_bounds_as_strings():
    c = {"lo": -math.inf, "hi": 4.0, "max_ulp_inside": math.nan, "lo_safe": -3.5, "hi_safe": math.inf, "n": 2}
    assert clip_mod.to_json(c) == {
        "lo": "-inf",
        "hi": 4.0,
        "max_ulp_inside": "nan",
        "lo_safe": -3.5,
        "hi_safe": "inf",
        "n": 2,
    }
    assert c["lo"] == -math.inf  # the argument is not changed
    assert clip_mod.to_json(None) is None


def _clip(lo_a="none", hi_a="none", lo=None, hi=None, note=""):
    return {
        "lo": lo,
        "hi": hi,
        "lo_action": lo_a,
        "hi_action": hi_a,
        "max_ulp_inside": 0.5,
        "tolerance": {"max_ulp": 2.0, "atol": None},
        "note": note,
    }


def test_the_clip_sentence_when_there_is_nothing_to_clip(tmp_path):
    """Nothing to clip reads as a sentence, never 'below -: none; above -: none' (issue 35,
    item 12), in the sentence and in the HTML report of a candidate that needs no clip."""
    from reports import html as html_report

    s = clip_mod.sentence(_clip())
    assert s == "Nothing to clip: every input is within the tolerance (max 0.500 ULP)."
    why = "hi side: f does not saturate in fp16: no clip helps"
    assert clip_mod.sentence(_clip(note=why)) == f"Nothing to clip: {why} (max 0.500 ULP)."
    s = clip_mod.sentence(_clip("constant", "clamp", -17.5, 11.0859375))
    assert (
        s == "Return f's limit for x < -17.5 and clamp x to <= 11.0859: max 0.500 ULP left inside the range."
    )
    r = audit.sweep("relu.max", dtype="fp8_e4m3", keep_points=True)[0]
    assert r.clip["lo_action"] == r.clip["hi_action"] == "none"
    page = html_report.build([r], tmp_path, "t").read_text(encoding="utf-8")
    assert "Nothing to clip" in page and ": none;" not in page and "below -" not in page


def test_action_errors_are_reused_only_for_the_same_bits():
    # a clip's action errors are kept (clip._ACTIONS) and reused only where the inputs and
    # the oracle's values are the same bits: one hi changed (an input settled by mpmath for
    # another candidate) gives errors computed anew, equal to point_errors' own
    from audit.measure.metrics import point_errors
    from audit.numbers.formats import get_format
    from audit.oracle.oracle import OracleValues

    fmt = get_format("fp16")
    x = np.array([1.0, 2.0, 4.0, 8.0])
    idx = np.arange(4)
    rounded = np.array([1.0, 2.0, 4.0, 8.0])
    hi = np.array([1.0 + 2.0**-12, 2.0, 4.0, 8.0])
    ov = OracleValues(rounded, hi, np.zeros(4), 0)
    first = clip_mod._action_errors(x, idx, "identity", ov, fmt)
    assert (
        clip_mod._action_errors(x, idx, "identity", OracleValues(rounded, hi.copy(), np.zeros(4), 0), fmt)
        is first
    )
    hi2 = hi.copy()
    hi2[0] = 1.0 + 2.0**-13
    again = clip_mod._action_errors(x, idx, "identity", OracleValues(rounded, hi2, np.zeros(4), 0), fmt)
    want = point_errors(x, x, OracleValues(rounded, hi2, np.zeros(4), 0), fmt)
    assert again is not first and np.array_equal(again.ulp_err, want.ulp_err)
    assert again.ulp_err[0] != first.ulp_err[0]
    # another action value, and -0.0 against 0.0, are other entries
    zero = clip_mod._action_errors(x, idx, 0.0, ov, fmt)
    assert clip_mod._action_errors(x, idx, -0.0, ov, fmt) is not zero


def _sigmoid_thresholds(fmt):
    """(low, high) of sigmoid in fmt worked here with mpmath: the largest x up to which
    RN(sigmoid(x)) is RN(sigmoid(min)), the smallest x from which it is RN(sigmoid(max))."""
    import mpmath as mp

    vals = fmt.finite_values()
    with mp.workprec(200):
        rn = [fmt.round_mpf(1 / (1 + mp.exp(-mp.mpf(v)))) for v in vals.tolist()]
    i = 0
    while rn[i + 1] == rn[0]:
        i += 1
    j = len(rn) - 1
    while rn[j - 1] == rn[-1]:
        j -= 1
    return {"x": float(vals[i]), "value": rn[0]}, {"x": float(vals[j]), "value": rn[-1]}


def test_saturation_is_worked_out_once_per_table_and_handed_out_as_a_copy(fresh_cache):
    from audit.numbers.formats import get_format
    from audit.oracle import oracle
    from audit.oracle.references import get_reference

    fmt, ref = get_format("fp8_e4m3"), get_reference("sigmoid")
    low, high = _sigmoid_thresholds(fmt)
    sat = clip_mod.saturation(ref, fmt, {})
    assert sat == {"low": low, "high": high}
    sat["high"]["x"] = 123.0  # a caller's change does not reach the next caller
    assert clip_mod.saturation(ref, fmt, {}) == {"low": low, "high": high}
    # another table object under the same key (a table certified or rebuilt): worked out again
    key = oracle.cache_key(ref, fmt, ref.with_defaults({}))
    tbl = oracle._MEMO[key]
    other = oracle.OracleValues(np.zeros_like(tbl.rounded), tbl.hi, tbl.lo, 0, tbl.unsure)
    oracle._MEMO[key] = other
    # a constant table saturates from the first input on, and up to the last
    top = float(fmt.max_finite)
    assert clip_mod.saturation(ref, fmt, {}) == {
        "low": {"x": top, "value": 0.0},
        "high": {"x": -top, "value": 0.0},
    }


def test_the_sweep_hands_the_clip_the_failing_inputs_of_its_own_findings():
    """The failure masks made once for the findings are those the clip's default tolerance
    leaves out: the same as made afresh from the errors, NaN results among them."""
    import dataclasses

    from audit.measure import findings
    from audit.numbers.formats import get_format

    cand, fmt = catalog()["gelu.tanh_exp"], get_format("fp16")
    (r,) = audit.sweep([cand.id], "fp16", "fp16", keep_points=True)
    pts = r.points
    assert pts.failing is not None and pts.failing.dtype == bool
    afresh = findings.failing(dataclasses.replace(pts, failing=None), cand, fmt, cand.ref.with_defaults({}))
    assert np.array_equal(pts.failing, afresh)
    nan = np.isnan(pts.got)
    assert (
        nan.any()
        and pts.failing[nan].all()
        and not pts.failing[(np.abs(pts.x) >= 0.25) & (np.abs(pts.x) <= 1)].any()
    )
