"""audit/gate/check.py, the baseline side: recording a baseline, loading it, comparing a run with it, tolerances.

They kill mutants that mutmut found surviving the rest of the suite, each with an expectation
worked in the test (docs/design/mutation-testing.md)."""

import copy
import json
import math
from functools import lru_cache
from pathlib import Path

import pytest

from audit._version import __version__
from audit.errors import ActauditError, BadFileError
from audit.gate import check as gate
from audit.gate.schema import IDENTITY_FIELDS
from audit.measure.sweep import sweep

NAN, INF = math.nan, math.inf
UP = math.nextafter


# ------------------------------------------------------------------ helpers
@lru_cache(maxsize=1)
def _real():
    """One real result (exhaustive fp8_e4m3, a tenth of a second): its domain, identity, ..."""
    return sweep("sigmoid.naive", "fp8_e4m3")[0]


def result(weighted=None, **figures):
    """The real result, its figures replaced by the ones given (hand-chosen)."""
    r = copy.copy(_real())
    d = {
        "max_ulp": 0.5,
        "p99_ulp": 0.5,
        "mean_ulp": 0.25,
        "max_abs": 0.01,
        "max_rel": 0.01,
        "nan_count": 0,
        "inf_count": 0,
        "special_failures": 0,
        "findings": [],
        "clip": None,
    }
    d.update(figures)
    r.to_dict = lambda: d
    r.weighted = weighted
    return r


def audit(**tolerance):
    return gate.Audit(name="a", targets=["sigmoid.naive"], dtype=["fp8_e4m3"], tolerance=tolerance)


def spec(slack=0.25, path="/x/actaudit.toml"):
    return gate.Spec(Path(path), [], Path("/x/base.json"), slack)


def clip(lo=None, hi=None, lo_safe=None, hi_safe=None, note="", lo_action="none", hi_action="none"):
    return {
        "lo": lo,
        "hi": hi,
        "lo_action": lo_action,
        "hi_action": hi_action,
        "lo_safe": lo_safe,
        "hi_safe": hi_safe,
        "note": note,
    }


def fe(**over):
    """A float baseline entry written here (every field valid)."""
    e = {
        "candidate": "c",
        "dtype": "fp8_e4m3",
        "compute": "fp8_e4m3",
        "params": {},
        "identity": {**{k: None for k in IDENTITY_FIELDS["float"]}, "inputs": 254},
        "max_ulp": 1.0,
        "p99_ulp": 1.0,
        "mean_ulp": 1.0,
        "max_abs": 1.0,
        "max_rel": 1.0,
        "nan_count": 3,
        "inf_count": 3,
        "special_failures": 3,
        "findings": {},
        "finding_counts": {},
        "clip": None,
    }
    e.update(over)
    return e


WEIGHTED = {
    "distribution": "normal:std=1",
    "mean_ulp": 1.0,
    "p99_ulp": 1.0,
    "p999_ulp": 1.0,
    "nan": 0.0,
    "inf": 0.0,
    "underflow": 0.0,
    "correctly_rounded": 0.5,
}


# ------------------------------------------------------------------ _show, _num
def test_show_rounds_to_five_digits_and_adds_digits_until_two_numbers_differ():
    assert gate._show(1.234567) == "1.2346"
    assert gate._show(123456.0) == "1.2346e5"  # the one number format (audit/io.py)
    assert gate._show(NAN) == "nan" and gate._show(None) == "nan" and gate._show("inf") == "inf"
    assert gate._show(1.234567, 2.0) == "1.2346 -> 2"
    assert gate._show(1.234567, 1.234567) == "1.2346 -> 1.2346"  # equal: the first rounding
    assert gate._show(1.234561, 1.234569) == "1.23456 -> 1.23457"
    # neighbours: every one of the 17 digits
    assert gate._show(1.1, UP(1.1, 2)) == "1.1000000000000001 -> 1.1000000000000003"
    assert gate._show(NAN, NAN) == "nan -> nan"
    assert gate._show(0.5, "nan") == "0.5 -> nan"
    assert gate._show("inf", "inf") == "inf -> inf"
    assert gate._num("inf") == INF and gate._num(3) == 3.0 and isinstance(gate._num(3), float)
    assert math.isnan(gate._num(None)) and math.isnan(gate._num("nan"))


# ------------------------------------------------------------------ tolerance_failures
QUANT_ONLY = "tolerance '{}' cannot be checked on a float audit (it is for quantized or block-scaled outputs)"


def test_tolerances_of_quantized_outputs_cannot_be_checked_on_a_float_audit():
    tol = {"scale_diff_blocks": 1, "max_elem_ulp": 1, "correct_code_fraction": 1, "max_code_error": 1}
    assert gate.tolerance_failures(audit(**tol), result()) == [
        QUANT_ONLY.format(k)
        for k in ("correct_code_fraction", "max_code_error", "max_elem_ulp", "scale_diff_blocks")
    ]


@pytest.mark.parametrize("m", ["max_ulp", "p99_ulp", "max_abs", "max_rel"])
def test_a_metric_tolerance_is_inclusive_and_nan_breaks_it(m):
    assert gate.tolerance_failures(audit(**{m: 1.234567}), result(**{m: 1.234567})) == []
    above = UP(1.234567, 2)
    assert gate.tolerance_failures(audit(**{m: 1.234567}), result(**{m: above})) == [
        f"{m} = 1.2346 exceeds the tolerance 1.2346"
    ]
    assert gate.tolerance_failures(audit(**{m: 2.0}), result(**{m: "nan"})) == [
        f"{m} = nan exceeds the tolerance 2"
    ]
    assert gate.tolerance_failures(audit(**{m: 2.0}), result(**{m: 3.5})) == [
        f"{m} = 3.5 exceeds the tolerance 2"
    ]
    # mean_ulp is no tolerance: a huge one never fails
    assert gate.tolerance_failures(audit(**{m: 2.0}), result(mean_ulp=1e9)) == []


def test_nan_and_inf_false_allow_not_one_result():
    assert gate.tolerance_failures(audit(nan=False), result(nan_count=1)) == [
        "1 NAN results where the tolerance allows none"
    ]
    assert gate.tolerance_failures(audit(inf=False), result(inf_count=1)) == [
        "1 INF results where the tolerance allows none"
    ]
    assert gate.tolerance_failures(audit(nan=False, inf=False), result(nan_count=2, inf_count=7)) == [
        "2 NAN results where the tolerance allows none",
        "7 INF results where the tolerance allows none",
    ]
    assert gate.tolerance_failures(audit(nan=False, inf=False), result()) == []
    assert gate.tolerance_failures(audit(nan=True, inf=True), result(nan_count=2, inf_count=7)) == []
    assert gate.tolerance_failures(audit(), result(nan_count=2, inf_count=7)) == []


def test_weighted_tolerances_are_checked_on_the_weighted_figures():
    assert gate.tolerance_failures(audit(weighted_mean_ulp=1.0), result()) == [
        "tolerance 'weighted_mean_ulp' cannot be computed: the audit has no 'distribution'"
    ]
    assert gate.tolerance_failures(audit(weighted_mean_ulp=1.0), result(weighted=dict(WEIGHTED))) == []
    w = {**WEIGHTED, "mean_ulp": 1.5}
    assert gate.tolerance_failures(audit(weighted_mean_ulp=1.0), result(weighted=w)) == [
        "weighted mean_ulp = 1.5 exceeds the tolerance 1"
    ]


SAFE = "safe clip range [{}, {}] does not cover the required [-3, 3]"


def test_safe_range_against_the_clip_recommendation():
    a = audit(safe_range=[-3.0, 3.0])
    assert gate.tolerance_failures(a, result()) == [
        "safe_range [-3, 3] cannot be checked: no clip recommendation for fp8_e4m3 (it needs a "
        "univariate candidate and every value of a format of 16 bits or fewer)"
    ]
    assert gate.tolerance_failures(a, result(clip=clip(lo_safe=-3.0, hi_safe=3.0))) == []  # inclusive
    assert gate.tolerance_failures(a, result(clip=clip())) == []  # both sides whole
    assert gate.tolerance_failures(a, result(clip=clip(lo_safe=-2.5, hi_safe=3.0))) == [
        SAFE.format("-2.5", "3")
    ]
    assert gate.tolerance_failures(a, result(clip=clip(lo_safe=-3.0, hi_safe=2.5, note="why"))) == [
        SAFE.format("-3", "2.5") + " (why)"
    ]
    assert gate.tolerance_failures(a, result(clip=clip(hi_safe=UP(3.0, 0)))) == [SAFE.format("-inf", "3")]


# ------------------------------------------------------------------ _clip_side
def test_clip_side_reads_the_safe_bound_then_old_baselines_clip_bound():
    side = gate._clip_side
    assert side(clip(lo_safe=-2.0, hi_safe=2.5), "lo") == -2.0
    assert side(clip(lo_safe=-2.0, hi_safe=2.5), "hi") == 2.5
    assert side(clip(lo=-9.0, hi=9.0), "lo") == -INF and side(clip(lo=-9.0, hi=9.0), "hi") == INF
    old = {"lo": -4.0, "hi": None, "lo_action": "clamp", "hi_action": "identity"}  # no *_safe
    assert side(old, "lo") == -4.0 and side(old, "hi") == INF
    old = {"lo": None, "hi": 5.0, "lo_action": "none", "hi_action": "none"}
    assert side(old, "lo") == -INF and side(old, "hi") == 5.0
    # no clip bound, and a note that says the side does not hold: nothing of it is safe
    helps_not = {"lo": None, "hi": None, "lo_action": "none", "hi_action": "none"}
    assert side({**helps_not, "note": "lo side: beyond tolerance"}, "lo") == 0.0
    assert side({**helps_not, "note": "lo side: beyond tolerance"}, "hi") == INF
    assert side({**helps_not, "note": "hi side: beyond tolerance"}, "hi") == 0.0
    assert side({**helps_not, "note": "hi side: beyond tolerance"}, "lo") == -INF
    assert side({**helps_not, "note": None}, "lo") == -INF
    assert side({**helps_not, "lo_action": "constant", "note": "lo side: x"}, "lo") == -INF


# ------------------------------------------------------------------ compare_findings, _covered
def test_findings_compared_by_count_and_by_interval():
    base = {"findings": {"nan": [[1.0, 4.0], ["nan", "nan"]]}, "finding_counts": {"nan": 5}}
    same = {"findings": {"nan": [[1.0, 4.0]]}, "finding_counts": {"nan": 5}}
    assert gate.compare_findings(same, base) == ([], [])
    inside = {"findings": {"nan": [[2.0, 3.0], ["nan", "nan"]]}, "finding_counts": {"nan": 4}}
    assert gate.compare_findings(inside, base) == ([], ["nan findings fell: 5 -> 4 inputs"])
    rose = {"findings": {"nan": [[1.0, 4.0]]}, "finding_counts": {"nan": 6}}
    assert gate.compare_findings(rose, base) == (["nan findings rose: 5 -> 6 inputs"], [])
    new = {"findings": {"nan": [[0.5, 4.0], [1.0, 4.5], [5.0, 6.0]]}, "finding_counts": {"nan": 5}}
    assert gate.compare_findings(new, base) == (["new nan interval [0.5, 4.0] and 2 more"], [])
    two = {"findings": {"nan": [[0.5, 4.0], [1.0, 4.5]]}, "finding_counts": {"nan": 5}}
    assert gate.compare_findings(two, base) == (["new nan interval [0.5, 4.0] and 1 more"], [])
    one = {"findings": {"nan": [[1.0, 4.0], [0.0, 0.0]]}, "finding_counts": {"nan": 5}}
    assert gate.compare_findings(one, base) == (["new nan interval [0.0, 0.0]"], [])
    other = {"findings": {"sign": [[1.0, 1.0]]}, "finding_counts": {"sign": 1}}
    assert gate.compare_findings(other, base) == (
        ["sign findings rose: 0 -> 1 inputs", "new sign interval [1.0, 1.0]"],
        ["nan findings fell: 5 -> 0 inputs"],
    )
    gone = {"findings": {}, "finding_counts": {}}
    assert gate.compare_findings(
        gone, {"findings": {"sign": [[1.0, 1.0]]}, "finding_counts": {"sign": 1}}
    ) == (
        [],
        ["sign findings fell: 1 -> 0 inputs"],
    )


def test_a_nan_input_interval_is_covered_by_a_nan_input_interval_only():
    cov = gate._covered
    assert cov(["nan", "nan"], [[-INF, INF], ["nan", "nan"]])  # after a finite one
    assert not cov(["nan", "nan"], [[-INF, INF]])
    assert not cov(["nan", "nan"], [["nan", 1.0], [1.0, "nan"]])
    assert cov(["nan", 1.0], [["nan", "nan"]]) and cov([1.0, "nan"], [["nan", "nan"]])
    assert not cov([0.0, 5.0], [[1.0, 5.0]]) and not cov([1.0, 6.0], [[1.0, 5.0]])
    assert cov([1.0, 5.0], [[1.0, 5.0]]) and cov([2.0, 3.0], [[0.0, 1.0], [2.0, 3.0]])
    assert not cov([1.0, 1.0], [])


# ------------------------------------------------------------------ _against_baseline
def ab(now, base, slack=0.25):
    return gate._against_baseline(spec(slack), now, base)


@pytest.mark.parametrize("m", gate.METRICS)
def test_a_metric_against_its_baseline_with_the_slack(m):
    base = fe(**{m: 4.0})
    assert ab(fe(**{m: 5.0}), base) == ([], [])  # 4 * (1 + 0.25): within the slack
    assert ab(fe(**{m: 4.0}), base) == ([], [])
    assert ab(fe(**{m: UP(5.0, 9)}), base) == ([f"{m} got worse: 4 -> 5"], [])
    assert ab(fe(**{m: 3.0}), base) == ([], [])  # 4 * (1 - 0.25)
    assert ab(fe(**{m: UP(3.0, 0)}), base) == ([], [f"{m} improved: 4 -> 3"])
    assert ab(fe(**{m: "nan"}), base) == ([f"{m} got worse: 4 -> nan"], [])
    assert ab(fe(**{m: "inf"}), base) == ([f"{m} got worse: 4 -> inf"], [])
    assert ab(fe(**{m: "inf"}), fe(**{m: "inf"})) == ([], [])
    assert ab(fe(**{m: "nan"}), fe(**{m: "nan"})) == ([], [])
    assert ab(fe(**{m: 2.0}), fe(**{m: "nan"})) == (
        [f"{m} = 2 has no baseline value (NaN: no finite result when recorded); record the baseline again"],
        [],
    )
    # zero: equal is no regression, a tiny positive one is
    assert ab(fe(**{m: 0.0}), fe(**{m: 0.0}), slack=0.0) == ([], [])
    assert ab(fe(**{m: 1e-300}), fe(**{m: 0.0}), slack=0.0) == ([], [])
    assert ab(fe(**{m: 3e-300}), fe(**{m: 0.0}), slack=0.0) == ([f"{m} got worse: 0 -> 3e-300"], [])
    assert ab(fe(**{m: UP(4.0, 9)}), base, slack=0.0) == ([f"{m} got worse: 4 -> 4.000000000000001"], [])
    assert ab(fe(**{m: UP(4.0, 0)}), base, slack=0.0) == ([], [f"{m} improved: 4 -> 3.9999999999999996"])


@pytest.mark.parametrize("c", gate.COUNTS)
def test_a_count_rising_by_one_fails(c):
    assert ab(fe(**{c: 4}), fe(**{c: 3})) == ([f"{c} rose: 3 -> 4"], [])
    assert ab(fe(**{c: 3}), fe(**{c: 3})) == ([], [])
    assert ab(fe(**{c: 2}), fe(**{c: 3})) == ([], [f"{c} fell: 3 -> 2"])


def test_the_entry_kind_and_identity_must_match_before_any_figure():
    q = {"kind": "quant", "identity": {}}
    assert ab(fe(), q) == (
        ["the baseline entry is a quant audit, this is a float audit; re-record with actaudit baseline"],
        [],
    )
    assert ab(q, fe()) == (
        ["the baseline entry is a float audit, this is a quant audit; re-record with actaudit baseline"],
        [],
    )
    other = fe(identity={**fe()["identity"], "seed": 1}, max_ulp=0.5)  # better, but not comparable
    want = (
        "the spec's run differs from what produced the baseline entry: {}; the figures cannot be "
        "compared: re-record with actaudit baseline"
    )
    assert ab(other, fe()) == ([want.format("seed 1 (baseline null)")], [])
    both = fe(candidate="d", identity={**fe()["identity"], "seed": 1})
    assert ab(both, fe()) == ([want.format('entry.candidate "d" (baseline "c"), seed 1 (baseline null)')], [])
    assert ab(fe(params={"k": 1.0}), fe(params={"k": 2.0})) == (
        [want.format('entry.params {"k": 1.0} (baseline {"k": 2.0})')],
        [],
    )
    # compare() takes a baseline dict as given: an entry of kind null is no float entry either
    assert ab(fe(), fe(kind=None)) == (
        ["the baseline entry is a None audit, this is a float audit; record the baseline again"],
        [],
    )
    d1 = {"kind": "diff", "identity": {"a": "x"}}
    assert ab(d1, {"kind": "diff", "identity": {"a": "x"}}) == ([], [])
    assert ab(d1, {"kind": "diff", "identity": {"a": "y"}}) == ([want.format('a "x" (baseline "y")')], [])


def test_quantized_entries_are_compared_by_their_own_rules():
    def qe(**over):
        e = {"kind": "quant", "identity": {}, "inputs": 5, "findings": {}, "finding_counts": {}}
        e.update({k: 0 for k in ("max_code_error", "mean_code_error", "max_real_error")})
        e.update({"correct_code_fraction": 1.0, "nan_count": 0, "max_code_distance": 0})
        e.update(over)
        return e

    assert ab(qe(), qe()) == ([], [])
    assert ab(qe(max_code_error=2.0), qe(max_code_error=1.0)) == (["max_code_error got worse: 1 -> 2"], [])


def test_weighted_figures_against_the_baseline():
    w = dict(WEIGHTED)
    assert ab(fe(weighted=w), fe(weighted=dict(w))) == ([], [])
    assert ab(fe(weighted={**w, "mean_ulp": 2.0}), fe(weighted=w)) == (
        ["weighted mean_ulp got worse: 1 -> 2"],
        [],
    )
    assert ab(fe(), fe(weighted=w)) == (
        [
            "the baseline entry was recorded under distribution normal:std=1 and this result has none; "
            "record the baseline again"
        ],
        [],
    )
    assert ab(fe(weighted={**w, "distribution": "uniform"}), fe(weighted=w)) == (
        ["distribution changed: normal:std=1 -> uniform; record the baseline again"],
        [],
    )


def test_findings_go_into_the_comparison():
    base = fe(findings={"nan": [[1.0, 2.0]]}, finding_counts={"nan": 2})
    now = fe(findings={"nan": [[1.0, 3.0]]}, finding_counts={"nan": 1})
    assert ab(now, base) == (["new nan interval [1.0, 3.0]"], ["nan findings fell: 2 -> 1 inputs"])


def test_the_clip_range_may_not_shrink():
    wide = clip(lo=-3.0, hi=3.0, lo_safe=-2.0, hi_safe=2.0)
    assert ab(fe(clip=None), fe(clip=wide)) == (
        ["no clip recommendation any more (the baseline had one)"],
        [],
    )
    assert ab(fe(clip=wide), fe(clip=None)) == ([], [])
    assert ab(fe(clip=dict(wide)), fe(clip=wide)) == ([], [])
    wider = clip(lo=-4.0, hi=4.0, lo_safe=-5.0, hi_safe=5.0)
    assert ab(fe(clip=wider), fe(clip=wide)) == ([], [])
    assert ab(fe(clip={**wide, "lo_safe": -1.5}), fe(clip=wide)) == (
        ["safe clip range shrank: [-2, 2] -> [-1.5, 2]"],
        [],
    )
    assert ab(fe(clip={**wide, "hi_safe": 1.5, "note": "n"}), fe(clip=wide)) == (
        ["safe clip range shrank: [-2, 2] -> [-2, 1.5] (n)"],
        [],
    )
    assert ab(fe(clip={**wide, "lo": -2.5}), fe(clip=wide)) == (["clip range shrank: lo -3 -> -2.5"], [])
    assert ab(fe(clip={**wide, "hi": 2.5}), fe(clip=wide)) == (["clip range shrank: hi 3 -> 2.5"], [])
    assert ab(fe(clip={**wide, "lo": None, "hi": None}), fe(clip=wide)) == ([], [])
    assert ab(fe(clip=wide), fe(clip={**wide, "lo": None, "hi": None})) == ([], [])
    # a baseline of an older actaudit: no *_safe, its clip bounds are the safe range
    old = {"lo": -3.0, "hi": 3.0, "lo_action": "clamp", "hi_action": "clamp"}
    assert ab(fe(clip=clip(lo=-3.0, hi=3.0, lo_safe=-3.0, hi_safe=3.0)), fe(clip=old)) == ([], [])
    assert ab(fe(clip=clip(lo=-3.0, hi=3.0, hi_safe=2.0)), fe(clip=old)) == (
        ["safe clip range shrank: [-3, 3] -> [-inf, 2]"],
        [],
    )


# ------------------------------------------------------------------ compare
KEY = "a/sigmoid.naive/fp8_e4m3/fp8_e4m3"


def runs(r=None, **tol):
    return [(audit(**tol), [r or result()])]


def test_compare_judges_each_result_and_lists_what_the_spec_no_longer_makes():
    s = spec()
    base = gate.make_baseline(s, runs())
    assert base["schema"] == "actaudit.baseline/4" and base["actaudit"] == __version__
    assert base["spec"] == "/x/actaudit.toml" and list(base["entries"]) == [KEY]
    out = gate.compare(s, runs(), base)
    assert [(c.key, c.candidate, c.status, c.messages) for c in out] == [(KEY, "sigmoid.naive", "ok", [])]
    worse = gate.compare(s, runs(result(nan_count=1), nan=False), base)
    assert [(c.status, c.messages) for c in worse] == [
        ("fail", ["1 NAN results where the tolerance allows none", "nan_count rose: 0 -> 1"])
    ]
    better = gate.compare(s, runs(result(max_ulp=0.25)), base)
    assert [(c.status, c.messages) for c in better] == [("improved", ["max_ulp improved: 0.5 -> 0.25"])]
    base["entries"]["gone/x"] = {**base["entries"][KEY], "candidate": "gone.x"}
    base["entries"]["diff/d/fp8_e4m3"] = {"kind": "diff", "identity": {"a": "p", "b": "q"}}
    out = gate.compare(s, runs(), base)  # a removed entry fails unless dropped on purpose
    assert [(c.key, c.candidate, c.status, c.messages) for c in out] == [
        (KEY, "sigmoid.naive", "ok", []),
        (
            "gone/x",
            "gone.x",
            "fail",
            [
                "in the baseline but no longer in the spec (re-record with actaudit baseline, "
                "or drop it with check --allow-removed)"
            ],
        ),
    ]
    out = gate.compare(s, runs(), base, allow_removed=True)
    assert [(c.key, c.candidate, c.status, c.messages) for c in out] == [
        (KEY, "sigmoid.naive", "ok", []),
        (
            "gone/x",
            "gone.x",
            "removed",
            ["in the baseline but no longer in the spec (--strict fails on this)"],
        ),
    ]
    out = gate.compare(s, runs(), base, strict=True, diff_runs=[], allow_removed=True)
    assert [(c.key, c.candidate, c.status, c.messages) for c in out] == [
        (KEY, "sigmoid.naive", "ok", []),
        ("gone/x", "gone.x", "fail", ["in the baseline but no longer in the spec"]),
        ("diff/d/fp8_e4m3", "p vs q", "fail", ["in the baseline but no longer in the spec"]),
    ]
    del base["entries"][KEY]
    out = gate.compare(s, runs(), base)
    assert (out[0].key, out[0].status, out[0].messages) == (
        KEY,
        "fail",
        ["not in the baseline (run 'actaudit baseline')"],
    )


def test_a_baseline_of_another_version_warns_or_fails_with_strict():
    s = spec()
    base = gate.make_baseline(s, runs())
    base["actaudit"] = "0.0.1"
    out = gate.compare(s, runs(), base)
    assert [(c.key, c.candidate, c.status, c.messages) for c in out][0] == (
        "baseline",
        "baseline",
        "warning",
        [
            f"recorded by actaudit 0.0.1, this is actaudit {__version__} (--strict fails on this); "
            "re-record with actaudit baseline"
        ],
    )
    assert out[1].status == "ok" and len(out) == 2
    out = gate.compare(s, runs(), base, strict=True)
    assert (out[0].status, out[0].messages) == (
        "fail",
        [f"recorded by actaudit 0.0.1, this is actaudit {__version__}; re-record with actaudit baseline"],
    )


# ------------------------------------------------------------------ baseline_command, check_command
SPEC = """baseline = "base.json"
[[audit]]
name = "s"
targets = ["sigmoid.naive"]
dtype = "fp8_e4m3"
tolerance = { max_code_error = 1 }

[[diff]]
name = "d"
a = "sigmoid.naive"
b = "sigmoid.naive"
dtype = ["fp8_e4m3"]
expect = "identical"
"""
BROKEN = "s/sigmoid.naive/fp8_e4m3/fp8_e4m3: " + QUANT_ONLY.format("max_code_error")


def test_baseline_refuses_results_that_break_their_tolerances_unless_forced(tmp_path):
    p = tmp_path / "actaudit.toml"
    p.write_text(SPEC)
    with pytest.raises(gate.BaselineRefused) as e:
        gate.baseline_command(p)
    assert e.value.broken == [BROKEN] and e.value.exit_code == 1
    assert str(e.value) == (
        "1 tolerance failures in the results to record; nothing written (fix the tolerances, "
        "or record anyway with --force)"
    )
    assert not (tmp_path / "base.json").exists()
    assert gate.baseline_command(p, force=True) == (tmp_path / "base.json", 2, [BROKEN])
    doc = json.loads((tmp_path / "base.json").read_text())
    assert set(doc) == {"schema", "actaudit", "spec", "verdict", "entries"} and doc["spec"] == str(p)
    assert list(doc["entries"]) == ["s/sigmoid.naive/fp8_e4m3/fp8_e4m3", "diff/d/fp8_e4m3"]
    assert doc["entries"]["diff/d/fp8_e4m3"]["kind"] == "diff"
    assert gate.load_baseline(tmp_path / "base.json") == doc
    out = tmp_path / "other" / "b.json"
    assert gate.baseline_command(p, out=out, force=True) == (out, 2, [BROKEN])
    assert json.loads(out.read_text()) == doc
    # the check: the same failure each run, the diff met
    s, changes = gate.check_command(p)
    assert s.path == p
    assert [(c.key, c.candidate, c.status, c.messages) for c in changes] == [
        ("s/sigmoid.naive/fp8_e4m3/fp8_e4m3", "sigmoid.naive", "fail", [BROKEN.split(": ", 1)[1]]),
        ("diff/d/fp8_e4m3", "sigmoid.naive vs sigmoid.naive", "ok", []),
    ]
    (tmp_path / "base.json").unlink()
    s, changes = gate.check_command(p, baseline_path=out)
    assert [c.status for c in changes] == ["fail", "ok"]


def test_write_baseline_writes_the_document_as_json(tmp_path):
    doc = {"schema": "s", "entries": {"k": {"v": [1.5, None]}}}
    gate.write_baseline(tmp_path / "d" / "b.json", doc)
    text = (tmp_path / "d" / "b.json").read_text()
    assert json.loads(text) == doc and text.endswith("}\n") and "\n  " in text


# ------------------------------------------------------------------ load_baseline, _check_entry
def write(tmp_path, doc, raw=None):
    p = tmp_path / "b.json"
    p.write_text(raw if raw is not None else json.dumps(doc))
    return p


def good_doc(**entries):
    return {
        "schema": "actaudit.baseline/4",
        "actaudit": "1.0",
        "spec": "s.toml",
        "verdict": {"slack": 1e-9, "require_certified": False, "tolerances": {}, "expects": {}},
        "entries": entries,
    }


def test_a_valid_baseline_loads(tmp_path):
    doc = good_doc(k=fe(), w=fe(weighted=dict(WEIGHTED), semantics="ftz"))
    doc["entries"]["f"] = fe(
        max_ulp="inf",
        p99_ulp="nan",
        mean_ulp=0,
        nan_count=0,
        inf_count=2**63 - 1,
        identity={**fe()["identity"], "inputs": 2**63 - 1},
        params={"k": 1, "j": -2.5},
        findings={"nan": [["nan", "nan"], ["-inf", "inf"], [1, 1]], "sign": []},
        finding_counts={"nan": 0, "sign": 4},
        clip={"lo": -1.0, "hi": 1, "lo_action": "clamp", "hi_action": "identity", "lo_safe": None},
    )
    for action in ("none", "constant"):
        doc["entries"][action] = fe(clip={"lo": None, "hi": None, "lo_action": action, "hi_action": action})
    doc["entries"]["q"] = {"kind": "diff", "identity": {k: None for k in IDENTITY_FIELDS["diff"]}}
    assert gate.load_baseline(write(tmp_path, doc)) == doc


KNOWN = (
    "candidate, dtype, compute, params, semantics, identity, max_ulp, p99_ulp, mean_ulp, max_abs, "
    "max_rel, nan_count, inf_count, special_failures, findings, finding_counts, clip, weighted"
)
BAD_ENTRIES = [
    ([], "", "must be an object"),
    (
        {**fe(), "kind": "float"},
        ".kind",
        "must be 'quant', 'blocks', 'diff' or 'model' (or absent: a float audit)",
    ),
    ({"kind": "diff", "x": 1}, ".x", "is unknown in a diff entry (known: identity, kind)"),
    ({**fe(), "extra": 1}, ".extra", f"is unknown in a float entry (known: {KNOWN})"),
    ({**fe(), "semantics": 1}, ".semantics", "must be a string"),
    ({**fe(), "weighted": []}, ".weighted", "must be an object"),
    (
        fe(weighted={**WEIGHTED, "nan": 2.0}),
        ".weighted.nan",
        "must be a number >= 0 (a probability in [0, 1]), 'inf' or 'nan'",
    ),
    (fe(params=[]), ".params", "must be an object of finite numbers"),
    (fe(params={"k": "1"}), ".params", "must be an object of finite numbers"),
    (fe(params={"k": INF}), ".params", "must be an object of finite numbers"),
    (fe(findings=[]), ".findings", "and 'finding_counts' must be objects"),
    (fe(finding_counts=[]), ".findings", "and 'finding_counts' must be objects"),
    (
        fe(findings={"bogus": []}, finding_counts={"bogus": 0}),
        ".findings.bogus",
        "is not a finding kind (nan, overflow, underflow, sign, range, monotonicity, special, no_effect)",
    ),
    (
        fe(findings={"nan": 1}, finding_counts={"nan": 0}),
        ".findings.nan",
        "must be a list of [lo, hi] intervals",
    ),
    (
        fe(findings={"nan": [1]}, finding_counts={"nan": 0}),
        ".findings.nan",
        "must be a list of [lo, hi] intervals",
    ),
    (
        fe(findings={"nan": [[1]]}, finding_counts={"nan": 0}),
        ".findings.nan",
        "must be a list of [lo, hi] intervals",
    ),
    (
        fe(findings={"nan": [[1, 2, 3]]}, finding_counts={"nan": 0}),
        ".findings.nan",
        "must be a list of [lo, hi] intervals",
    ),
    (
        fe(findings={"nan": [["x", 1]]}, finding_counts={"nan": 0}),
        ".findings.nan",
        "must be a list of [lo, hi] intervals",
    ),
    (
        fe(findings={"nan": [[1, "y"]]}, finding_counts={"nan": 0}),
        ".findings.nan",
        "must be a list of [lo, hi] intervals",
    ),
    (
        fe(findings={"nan": [[True, 1]]}, finding_counts={"nan": 0}),
        ".findings.nan",
        "must be a list of [lo, hi] intervals",
    ),
    (
        fe(findings={"nan": [[None, 1]]}, finding_counts={"nan": 0}),
        ".findings.nan",
        "must be a list of [lo, hi] intervals",
    ),
    (
        fe(findings={"nan": [[0, 1], [2, 1]]}, finding_counts={"nan": 0}),
        ".findings.nan",
        "holds a malformed interval [2, 1]",
    ),
    (
        fe(findings={"nan": [["nan", 1]]}, finding_counts={"nan": 0}),
        ".findings.nan",
        "holds a malformed interval ['nan', 1]",
    ),
    (
        fe(findings={"nan": [[1, "nan"]]}, finding_counts={"nan": 0}),
        ".findings.nan",
        "holds a malformed interval [1, 'nan']",
    ),
    (
        fe(findings={"nan": [["inf", "-inf"]]}, finding_counts={"nan": 0}),
        ".findings.nan",
        "holds a malformed interval ['inf', '-inf']",
    ),
    (
        fe(findings={}, finding_counts={"bogus": 1}),
        ".finding_counts.bogus",
        "must be a finding kind with an integer count >= 0",
    ),
    (
        fe(findings={"nan": []}, finding_counts={"nan": -1}),
        ".finding_counts.nan",
        "must be a finding kind with an integer count >= 0",
    ),
    (
        fe(findings={"nan": []}, finding_counts={"nan": True}),
        ".finding_counts.nan",
        "must be a finding kind with an integer count >= 0",
    ),
    (
        fe(findings={"nan": []}, finding_counts={"nan": 1.0}),
        ".finding_counts.nan",
        "must be a finding kind with an integer count >= 0",
    ),
    (
        fe(findings={"nan": []}, finding_counts={}),
        ".finding_counts",
        "must have the same kinds as 'findings'",
    ),
    (fe(findings={}, finding_counts={"nan": 0}), ".finding_counts", "must have the same kinds as 'findings'"),
    (fe(clip=[]), ".clip", "must be null or an object with lo, hi, lo_action, hi_action"),
    *[
        (
            fe(clip={k: v for k, v in clip().items() if k != gone}),
            ".clip",
            "must be null or an object with lo, hi, lo_action, hi_action",
        )
        for gone in ("lo", "hi", "lo_action", "hi_action")
    ],
    *[
        (fe(clip={**clip(), k: "inf"}), f".clip.{k}", "must be null or a finite number")
        for k in ("lo", "hi", "lo_safe", "hi_safe")
    ],
    *[(fe(clip={**clip(), k: True}), f".clip.{k}", "must be null or a finite number") for k in ("lo", "hi")],
    *[
        (fe(clip={**clip(), k: "clip"}), f".clip.{k}", "must be one of none, clamp, identity, constant")
        for k in ("lo_action", "hi_action")
    ],
    (fe(clip={**clip(), "note": 1}), ".clip.note", "must be a string"),
    (fe(clip={**clip(), "note": None}), ".clip.note", "must be a string"),
    (
        {k: v for k, v in fe().items() if k != "identity"},
        ".identity",
        "is missing (what produced the entry: re-record with actaudit baseline)",
    ),
    (fe(identity=[]), ".identity", "must be an object (what produced the entry)"),
    (
        fe(identity={**fe()["identity"], "x": 1}),
        ".identity.x",
        "is unknown in a float entry's identity (known: " + ", ".join(IDENTITY_FIELDS["float"]) + ")",
    ),
]
for _m in gate.METRICS:
    for _v in (-1, -0.5, "-inf", "x", True, None, [1]):
        BAD_ENTRIES.append((fe(**{_m: _v}), f".{_m}", "must be a number >= 0, 'inf' or 'nan'"))
for _c in gate.COUNTS:
    for _v in (-1, True, 2**63, 1.0, "1", None):
        BAD_ENTRIES.append((fe(**{_c: _v}), f".{_c}", "must be an integer >= 0"))
for _k in ("candidate", "dtype", "compute"):
    BAD_ENTRIES.append((fe(**{_k: 1}), f".{_k}", "must be a string"))
for _k in gate.FLOAT_ENTRY_KEYS:
    if _k not in ("semantics", "identity"):
        BAD_ENTRIES.append(({k: v for k, v in fe().items() if k != _k}, f".{_k}", "is missing"))


@pytest.mark.parametrize("e, key, msg", BAD_ENTRIES)
def test_a_malformed_entry_is_refused_with_one_line(tmp_path, e, key, msg):
    p = write(tmp_path, good_doc(ok=fe(), **{"e.1": e}))
    with pytest.raises(BadFileError) as err:
        gate.load_baseline(p)
    assert str(err.value) == f"{p}: key 'entries.e.1{key}' {msg}"


def test_a_quantized_entry_is_checked_by_its_own_rules(tmp_path):
    for kind in ("blocks", "quant"):
        p = write(tmp_path, good_doc(q={"kind": kind, "bogus": 1}))
        with pytest.raises(BadFileError) as err:
            gate.load_baseline(p)
        assert str(err.value).startswith(f"{p}: key 'entries.q.bogus' is unknown in a {kind} entry (known: ")


BAD_DOCS = [
    ([], "must be a JSON object (a baseline of 'actaudit baseline')"),
    ({"entries": {}}, "key 'schema' is missing (re-record with actaudit baseline)"),
    (
        {**good_doc(), "schema": "actaudit.baseline/2"},
        "key 'schema' is \"actaudit.baseline/2\", not 'actaudit.baseline/4', the schema this actaudit "
        "reads (re-record with actaudit baseline)",
    ),
    (
        {**good_doc(), "x": 1},
        "key 'x' is unknown in a baseline (known: schema, actaudit, spec, verdict, entries)",
    ),
    *[
        ({k: v for k, v in good_doc().items() if k != gone}, f"key '{gone}' is missing")
        for gone in ("actaudit", "spec", "entries")
    ],
    *[
        (
            {**good_doc(), "actaudit": v},
            "key 'actaudit' must be the version string of the actaudit that wrote it",
        )
        for v in ("", 1, None)
    ],
    ({**good_doc(), "spec": None}, "key 'spec' must be a string"),
    ({**good_doc(), "entries": []}, "key 'entries' must be an object"),
]


@pytest.mark.parametrize("doc, msg", BAD_DOCS)
def test_a_malformed_baseline_is_refused_with_one_line(tmp_path, doc, msg):
    p = write(tmp_path, doc)
    with pytest.raises(BadFileError) as err:
        gate.load_baseline(p)
    assert str(err.value) == f"{p}: {msg}"


def test_a_baseline_file_is_read_with_its_limits(tmp_path):
    p = tmp_path / "none.json"
    with pytest.raises(BadFileError) as err:
        gate.load_baseline(p)
    assert str(err.value) == f"{p}: baseline not found (run 'actaudit baseline')"
    p = write(tmp_path, None, raw='{"schema": "actaudit.baseline/4", "schema": "actaudit.baseline/4"}')
    with pytest.raises(BadFileError) as err:
        gate.load_baseline(p)
    assert (
        str(err.value) == f"{p}: key 'schema' appears twice in one object (refused: the last copy would win)"
    )
    text = json.dumps(good_doc())
    p = write(tmp_path, None, raw=text + " " * ((1 << 24) - len(text) + 1))  # one byte over 16 MiB
    with pytest.raises(BadFileError) as err:
        gate.load_baseline(p)
    assert str(err.value) == f"{p}: over 16777216 bytes, more than a baseline may hold (too large)"
    p = write(tmp_path, None, raw=text + " " * ((1 << 24) - len(text)))  # 16 MiB exactly
    assert gate.load_baseline(p) == good_doc()


def test_the_commands_pass_on_progress_and_the_reference(tmp_path):
    from audit.errors import BadOptionError

    p = tmp_path / "actaudit.toml"
    p.write_text(SPEC)
    # fp8_e4m3: 256 codes, two of them NaN (0x7f, 0xff): 254 inputs for the audit, 254 for the diff
    calls = []
    gate.baseline_command(p, progress=calls.append, force=True)
    assert calls == [254, 254]
    calls = []
    gate.check_command(p, progress=calls.append)
    assert calls == [254, 254]
    for command in (gate.baseline_command, gate.check_command):
        with pytest.raises(BadOptionError) as err:
            command(p, reference="gelu")
        assert str(err.value) == f"{p}: audit 's': sigmoid.naive approximates sigmoid, not --reference gelu"


def test_a_quantized_audit_is_held_to_its_own_tolerances(tmp_path):
    import re

    p = tmp_path / "actaudit.toml"
    p.write_text(
        '[[audit]]\nname = "q"\ntargets = ["sigmoid.naive"]\ndtype = "fp8_e4m3"\n'
        'out_dtype = "int8:scale=0.01,zero=0"\ntolerance = { max_ulp = 1, max_code_error = 0 }\n'
    )
    with pytest.raises(gate.BaselineRefused) as e:
        gate.baseline_command(p)
    keys = {b.split(": ", 1)[0] for b in e.value.broken}
    msgs = [b.split(": ", 1)[1] for b in e.value.broken]
    assert len(keys) == 1 and keys.pop().startswith("q/sigmoid.naive/fp8_e4m3->int8:")
    assert msgs[0] == (
        "tolerance 'max_ulp' cannot be checked on a quant audit (it takes correct_code_fraction, "
        "max_code_error, nan)"
    )
    # int8 codes of scale 0.01 cannot hold sigmoid exactly: some error above zero
    assert len(msgs) == 2 and re.fullmatch(r"max_code_error = [0-9.e+-]+ exceeds the tolerance 0", msgs[1])


RELU_C = """
#include <stddef.h>
void relu(const float *x, float *y, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""


def test_a_c_kernels_flags_are_part_of_its_key_everywhere(tmp_path):
    (tmp_path / "k.c").write_text(RELU_C)
    p = tmp_path / "actaudit.toml"
    p.write_text(
        'baseline = "base.json"\n[[audit]]\nname = "k"\ntargets = ["c:k.c:relu"]\nreference = "relu"\ndtype = "fp8_e4m3"\n'
        'cflags = ["-O1", "-DK=2 -DJ"]\ntolerance = { max_code_error = 1 }\n'
    )
    key = "k/c:k.c:relu/fp8_e4m3/native cflags=-O1 '-DK=2 -DJ'"
    with pytest.raises(gate.BaselineRefused) as e:
        gate.baseline_command(p)
    assert e.value.broken == [f"{key}: " + QUANT_ONLY.format("max_code_error")]
    gate.baseline_command(p, force=True)
    assert list(json.loads((tmp_path / "base.json").read_text())["entries"]) == [key]
    _, changes = gate.check_command(p)
    assert [(c.key, c.status, c.messages) for c in changes] == [
        (key, "fail", [QUANT_ONLY.format("max_code_error")])
    ]


def test_require_certified_adds_a_failure_per_uncertified_table(tmp_path, monkeypatch):
    p = tmp_path / "actaudit.toml"
    p.write_text(SPEC)
    gate.baseline_command(p, force=True)
    monkeypatch.setenv("ACTAUDIT_NO_CACHE", "1")  # no table is certified then: one line says so
    nocache = (
        "oracle-tables",
        "",
        "fail",
        ["the oracle cache is disabled (ACTAUDIT_NO_CACHE): nothing is certified"],
    )
    plain = [("s/sigmoid.naive/fp8_e4m3/fp8_e4m3", "fail"), ("diff/d/fp8_e4m3", "ok")]
    _, changes = gate.check_command(p)
    assert [(c.key, c.status) for c in changes] == plain
    _, changes = gate.check_command(p, require_certified=True)
    assert [(c.key, c.status) for c in changes[:2]] == plain
    assert [(c.key, c.candidate, c.status, c.messages) for c in changes[2:]] == [nocache]
    p.write_text("require_certified = true\n" + SPEC)
    _, changes = gate.check_command(p)
    assert [(c.key, c.candidate, c.status, c.messages) for c in changes[2:]] == [nocache]


def test_check_command_of_the_python_api_warns_on_another_tool_version(tmp_path, monkeypatch):
    """check_command's default is not strict: a baseline recorded by another actaudit version
    is one warning, and the results are still compared (as `actaudit check` without --strict)."""
    import json

    from audit.cli import main
    from audit.gate import check as gate

    monkeypatch.chdir(tmp_path)
    (tmp_path / "actaudit.toml").write_text(
        'baseline = "b.json"\n[[audit]]\nname = "t"\ntargets = ["relu.max"]\ndtype = "fp8_e4m3"\n'
    )
    assert main(["baseline"]) == 0
    doc = json.loads((tmp_path / "b.json").read_text())
    doc["actaudit"] = "99.0"
    (tmp_path / "b.json").write_text(json.dumps(doc))
    _, changes = gate.check_command("actaudit.toml")
    assert sorted(c.status for c in changes) == ["ok", "warning"]
    _, changes = gate.check_command("actaudit.toml", strict=True)
    assert "fail" in [c.status for c in changes]


# ------------------------------------------------------------------ what the survivors of the last run showed
def test_a_metric_nan_in_both_skips_that_metric_alone():
    """Both NaN: nothing to compare for that metric; every other metric is still compared."""
    base = fe(max_ulp="nan", p99_ulp=1.0, max_rel=1.0)
    now = fe(max_ulp="nan", p99_ulp=2.0, max_rel=0.5)  # slack 0.25: 2 > 1.25, 0.5 < 0.75
    assert ab(now, base) == (["p99_ulp got worse: 1 -> 2"], ["max_rel improved: 1 -> 0.5"])
    last = fe(**{m: "nan" for m in gate.METRICS[:-1]}, nan_count=4)  # and the counts after them
    assert ab(last, fe(**{m: "nan" for m in gate.METRICS[:-1]})) == (["nan_count rose: 3 -> 4"], [])


def test_a_removed_entry_without_an_identity_is_named_by_its_candidate():
    """compare() takes a baseline dict as given: an entry of gate.entry(r) without its audit
    has no identity, and is still said by its candidate when the spec no longer makes it."""
    s = spec()
    base = gate.make_baseline(s, runs())
    base["entries"]["gone/y"] = gate.entry(result())
    assert "identity" not in base["entries"]["gone/y"]
    out = gate.compare(s, runs(), base, allow_removed=True)
    assert [(c.key, c.candidate, c.status) for c in out] == [
        (KEY, "sigmoid.naive", "ok"),
        ("gone/y", "sigmoid.naive", "removed"),
    ]
    base["entries"]["diff/e/fp8_e4m3"] = {"kind": "diff"}  # no identity, no candidate
    out = gate.compare(s, runs(), base, diff_runs=[])
    assert [(c.key, c.candidate) for c in out[1:]] == [
        ("gone/y", "sigmoid.naive"),
        ("diff/e/fp8_e4m3", "None vs None"),
    ]


# a [[diff]] whose expectation is not met: fp8_e4m3 (256 codes, 2 NaN) is 254 inputs
FAILING_DIFF = """
[[diff]]
name = "e"
a = "sigmoid.naive"
b = "sigmoid.exp"
dtype = "fp8_e4m3"
"""
NO_INPUT_DIFF = """
[[diff]]
name = "z"
a = "sigmoid.naive"
b = "sigmoid.naive"
dtype = "fp8_e4m3"
range = [1000.0, 2000.0]
"""


def test_baseline_lists_a_diff_that_fails_its_expectation_by_its_key(tmp_path):
    import re

    p = tmp_path / "actaudit.toml"
    p.write_text(SPEC + FAILING_DIFF)
    with pytest.raises(gate.BaselineRefused) as e:
        gate.baseline_command(p)
    assert len(e.value.broken) == 2 and e.value.broken[0] == BROKEN
    key, msg = e.value.broken[1].split(": ", 1)
    assert key == "diff/e/fp8_e4m3"
    assert re.fullmatch(
        r"sigmoid\.naive vs sigmoid\.exp \[fp8_e4m3/fp8_e4m3\]: expected identical, got [a-zA-Z ]+: "
        r"[1-9][0-9]* of 254 inputs differ \(A closer at [0-9]+, B at [0-9]+\), max distance [0-9.]+ ULP"
        r"; first at \[[^,]+, [^\]]+\]",
        msg,
    ), msg
    assert gate.baseline_command(p, force=True)[1:] == (3, e.value.broken)


def test_an_error_of_a_diff_names_the_spec_file_and_the_diff(tmp_path):
    p = tmp_path / "actaudit.toml"
    p.write_text(SPEC)
    gate.baseline_command(p, force=True)  # a baseline to check against
    p.write_text(SPEC + NO_INPUT_DIFF)
    # fp8_e4m3's largest finite value is 448: no input in [1000, 2000]
    want = f"{p}: diff 'z': range [1000.0, 2000.0] holds no finite fp8_e4m3 value"
    for command in (gate.baseline_command, gate.check_command):
        with pytest.raises(ActauditError) as err:
            command(p)
        assert str(err.value) == want


def test_check_sweeps_in_this_process_when_certification_is_required(tmp_path, monkeypatch):
    """require_certified (the argument or the spec key): the sweeps run in this process
    (workers = 1), so that every oracle table they use is one this process has seen;
    otherwise one worker per core (None), as baseline does.  (Today no result shows the
    count: every domain a spec sweeps is held in memory and swept in this process; the
    argument is what keeps certification whole if that changes.)"""
    real, seen = gate.sweep, []

    def spy(*args, **kw):
        seen.append(kw["workers"])
        return real(*args, **kw)

    monkeypatch.setattr(gate, "sweep", spy)
    monkeypatch.setenv("ACTAUDIT_NO_CACHE", "1")
    p = tmp_path / "actaudit.toml"
    p.write_text(SPEC)
    gate.baseline_command(p, force=True)
    gate.check_command(p)
    gate.check_command(p, require_certified=True)
    p.write_text("require_certified = true\n" + SPEC)
    gate.check_command(p)
    assert seen == [None, None, 1, 1]
