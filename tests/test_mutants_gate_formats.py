"""audit/gate/formats.py and audit/gate/diffs.py: the gate entries of block, quantized and diff audits.

They kill mutants that mutmut found surviving the rest of the suite, each with an expectation
worked in the test (docs/design/mutation-testing.md)."""

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from audit.compare import diff as diff_mod
from audit.compare.diff import DiffResult
from audit.errors import BadFileError, BadOptionError
from audit.gate import diffs as gate_diff
from audit.gate import formats as gate_formats
from audit.gate.check import Audit
from audit.measure import blocks as blocks_mod
from audit.measure import quant as quant_mod

QIN = "int8:scale=0.0625,zero=0"
QOUT = "uint8:scale=0.00390625,zero=0"


def show(a, b=None):
    """A stand-in for the gate's number printer: the exact values it was handed."""
    return f"<{a!r}>" if b is None else f"<{a!r}|{b!r}>"


# ------------------------------------------------------------------ results built by hand
def qresult(got, want, code_err, params=None, findings=()):
    """A QuantResult of len(got) input codes 0, 1, ...; got NaN = no output."""
    n = len(got)
    x = np.arange(n, dtype=np.float64) / 16
    return quant_mod.QuantResult(
        candidate="sigmoid.exp",
        reference="sigmoid",
        dtype=QIN,
        out_dtype=QOUT,
        compute="fp32",
        params=dict(params or {}),
        count=n,
        x=x,
        x_codes=np.arange(n),
        got=np.array(got, dtype=np.float64),
        want=np.array(want, dtype=np.float64),
        exact=np.array(want, dtype=np.float64) / 256,
        code_err=np.array(code_err, dtype=np.float64),
        real_err=np.array(code_err, dtype=np.float64) / 256,
        findings=list(findings),
    )


# 4 codes: one wrong by 1 code, one without output, two right: max 1 code, 2 of 4 correct, 1 NaN
Q = qresult([0, 1, math.nan, 3], [0, 1, 2, 2], [0.25, 0.0, math.nan, 1.0])
# two NaN outputs
Q2 = qresult([math.nan, 1, math.nan, 3], [0, 1, 2, 3], [math.nan, 0.0, math.nan, 0.5])


def bresult(**over):
    kw = dict(
        candidate="gelu.tanh",
        reference="gelu",
        dtype="bf16",
        out_dtype="mxfp8_e4m3",
        rule="ocp",
        compute="fp32",
        inputs="normal:std=1 (seed 0)",
        elements=64,
        blocks=2,
        max_elem_ulp=2.0,
        mean_elem_ulp=0.5,
        max_rel=0.125,
        ref_max_elem_ulp=0.5,
        mismatches=4,
        max_added_ulp=1.0,
        scale_diff_blocks=3,
        scale_diff_first=[0, 1, 2],
        worst_block={"index": 1, "max_elem_ulp": 2.0, "scale_candidate": 0.5, "scale_ref": 0.25},
        nan_elements=2,
        tensor_scale=None,
        n_mpmath=0,
    )
    kw.update(over)
    return blocks_mod.BlockResult(**kw)


B = bresult()
B0 = bresult(nan_elements=0)


# ------------------------------------------------------------------ tolerances
TAKES_Q = "correct_code_fraction, max_code_error, nan"
TAKES_B = "max_elem_ulp, nan, scale_diff_blocks"


@pytest.mark.parametrize(
    "r, tol, want",
    [
        (Q, {"max_code_error": 1.0}, []),  # equal to the tolerance: within it
        (Q, {"max_code_error": 0.75}, ["max_code_error = <1.0> exceeds the tolerance <0.75>"]),
        (Q, {"correct_code_fraction": 0.5}, []),
        (
            Q,
            {"correct_code_fraction": 0.75},
            ["correct_code_fraction = <0.5> is below the tolerance <0.75>"],
        ),
        (Q, {"nan": False}, ["1 NaN results where the tolerance allows none"]),
        (Q2, {"nan": False}, ["2 NaN results where the tolerance allows none"]),
        (Q2, {"nan": True}, []),
        (Q2, {}, []),
        (
            Q,
            {"scale_diff_blocks": 0, "max_elem_ulp": 0.5},
            [
                f"tolerance 'max_elem_ulp' cannot be checked on a quant audit (it takes {TAKES_Q})",
                f"tolerance 'scale_diff_blocks' cannot be checked on a quant audit (it takes {TAKES_Q})",
            ],
        ),
        (B, {"max_elem_ulp": 2.0}, []),
        (B, {"max_elem_ulp": 1.5}, ["max_elem_ulp = <2.0> exceeds the tolerance <1.5>"]),
        (B, {"scale_diff_blocks": 3}, []),
        (B, {"scale_diff_blocks": 2}, ["scale_diff_blocks = 3 exceeds the tolerance <2>"]),
        (B, {"nan": False}, ["2 NaN results where the tolerance allows none"]),
        (B0, {"nan": False}, []),
        (B, {"nan": True}, []),
        (
            B,
            {"max_code_error": 1, "correct_code_fraction": 0.5},
            [
                f"tolerance 'correct_code_fraction' cannot be checked on a blocks audit (it takes {TAKES_B})",
                f"tolerance 'max_code_error' cannot be checked on a blocks audit (it takes {TAKES_B})",
            ],
        ),
    ],
)
def test_tolerance_failures(r, tol, want):
    assert gate_formats.tolerance_failures(SimpleNamespace(tolerance=tol), r, show) == want


# ------------------------------------------------------------------ entries and their keys
def test_entry_has_an_identity_only_with_its_audit():
    for r in (Q, B):
        assert "identity" not in gate_formats.entry(r)
        assert "identity" in gate_formats.entry(r, Audit("a", ["x"], ["bf16"]))


def test_entry_key_names_params_and_rule():
    r = qresult([0], [0], [0.0], params={"beta": 2, "alpha": 0.5})
    assert gate_formats.entry_key("aud", r) == f"aud/sigmoid.exp/{QIN}->{QOUT}/fp32/alpha=0.5,beta=2.0"
    assert gate_formats.entry_key("aud", qresult([0], [0], [0.0])) == f"aud/sigmoid.exp/{QIN}->{QOUT}/fp32"
    assert (
        gate_formats.entry_key("b", bresult(params={"k": 3})) == "b/gelu.tanh/bf16->mxfp8_e4m3@ocp/fp32/k=3.0"
    )


def test_num_reads_strings_none_and_numbers():
    assert gate_formats._num("inf") == math.inf
    assert math.isnan(gate_formats._num("nan"))
    assert math.isnan(gate_formats._num(None))
    assert gate_formats._num(2) == 2.0


# ------------------------------------------------------------------ baseline entries: validation
QKEYS = (
    "kind, identity, candidate, dtype, out_dtype, compute, params, inputs, max_code_error, "
    "mean_code_error, max_real_error, correct_code_fraction, nan_count, max_code_distance, "
    "findings, finding_counts, worst"
)
BKEYS = (
    "kind, identity, candidate, dtype, out_dtype, rule, compute, params, inputs, elements, blocks, "
    "max_elem_ulp, mean_elem_ulp, max_rel, max_added_ulp, scale_diff_blocks, mismatches, "
    "nan_elements, worst_block"
)
QIDENT = "candidate reference dtype out_dtype compute params exhaustive inputs candidate_identity"
BIDENT = (
    "candidate reference dtype out_dtype rule compute params distribution samples seed exhaustive "
    "inputs elements blocks candidate_identity"
)


def qentry():
    return {
        "kind": "quant",
        "identity": dict.fromkeys(QIDENT.split()),
        "candidate": "sigmoid.exp",
        "dtype": QIN,
        "out_dtype": QOUT,
        "compute": "fp32",
        "params": {"alpha": 1.5, "n": 2},
        "inputs": {"count": 256, "exhaustive": True},
        "max_code_error": "inf",
        "mean_code_error": 0,
        "max_real_error": "nan",
        "correct_code_fraction": 1,
        "nan_count": 0,
        "max_code_distance": 2**63 - 1,
        "findings": {"saturated": [[0.0, 1.0], [2, 2]], "nan": []},
        "finding_counts": {"saturated": 3, "nan": 0},
        "worst": None,
    }


def bentry():
    return {
        "kind": "blocks",
        "identity": dict.fromkeys(BIDENT.split()),
        "candidate": "gelu.tanh",
        "dtype": "bf16",
        "out_dtype": "mxfp8_e4m3",
        "rule": "ocp",
        "compute": "fp32",
        "params": {},
        "inputs": "normal:std=1 (seed 0)",
        "elements": 64,
        "blocks": 2,
        "max_elem_ulp": 0.0,
        "mean_elem_ulp": "nan",
        "max_rel": "inf",
        "max_added_ulp": 1.5,
        "scale_diff_blocks": 0,
        "mismatches": 2**63 - 1,
        "nan_elements": 0,
        "worst_block": None,
    }


def test_valid_entries_pass():
    gate_formats.check_entry("base.json", "entries.k", qentry())
    gate_formats.check_entry("base.json", "entries.k", bentry())


def _set(k, v):
    return lambda e: e.update({k: v})


def _find(ivs, count=0, kind="nan"):
    return lambda e: e.update(findings={kind: ivs}, finding_counts={kind: count})


NUM = "must be a number >= 0, 'inf' or 'nan'"
INT = "must be an integer >= 0"
IVS = "must be a list of finite [lo, hi] intervals"
SAME = "and 'finding_counts' must be objects with the same kinds"
FIN = "must be an object of finite numbers"


@pytest.mark.parametrize(
    "make, edit, key, msg",
    [
        (qentry, _set("bogus", 1), "bogus", f"is unknown in a quant entry (known: {QKEYS})"),
        (bentry, _set("findings", {}), "findings", f"is unknown in a blocks entry (known: {BKEYS})"),
        (qentry, lambda e: e.pop("worst"), "worst", "is missing"),
        (bentry, lambda e: e.pop("max_rel"), "max_rel", "is missing"),
        (qentry, _set("max_code_error", -1), "max_code_error", NUM),
        (qentry, _set("max_code_error", "bogus"), "max_code_error", NUM),
        (qentry, _set("max_code_error", "-inf"), "max_code_error", NUM),
        (qentry, _set("mean_code_error", True), "mean_code_error", NUM),
        (qentry, _set("max_real_error", math.inf), "max_real_error", NUM),
        (bentry, _set("max_added_ulp", -0.5), "max_added_ulp", NUM),
        (qentry, _set("correct_code_fraction", 1.5), "correct_code_fraction", "must be a fraction in [0, 1]"),
        (qentry, _set("nan_count", 2**63), "nan_count", INT),
        (qentry, _set("nan_count", -1), "nan_count", INT),
        (qentry, _set("max_code_distance", 1.0), "max_code_distance", INT),
        (bentry, _set("mismatches", 2**63), "mismatches", INT),
        (bentry, _set("nan_elements", False), "nan_elements", INT),
        (qentry, _set("candidate", 5), "candidate", "must be a string"),
        (bentry, _set("compute", None), "compute", "must be a string"),
        (qentry, _set("params", {"a": math.inf}), "params", FIN),
        (qentry, _set("params", {"a": True}), "params", FIN),
        (qentry, _set("params", {"a": "1"}), "params", FIN),
        (qentry, _set("params", []), "params", FIN),
        (bentry, _set("params", {"a": math.nan}), "params", FIN),
        (qentry, lambda e: e.update(findings={}, finding_counts={"nan": 0}), "findings", SAME),
        (qentry, lambda e: e.update(findings={"nan": []}, finding_counts={}), "findings", SAME),
        (qentry, lambda e: e.update(findings=[], finding_counts={}), "findings", SAME),
        (qentry, lambda e: e.update(findings={}, finding_counts=[]), "findings", SAME),
        (
            qentry,
            _find([], kind="overflow"),
            "findings.overflow",
            "is not a finding kind (pinned, saturated, monotonicity, nan)",
        ),
        (qentry, _find({}), "findings.nan", IVS),
        (qentry, _find("ab"), "findings.nan", IVS),
        (qentry, _find([[0.0, math.inf]]), "findings.nan", IVS),
        (qentry, _find([[math.nan, math.nan]]), "findings.nan", IVS),
        (qentry, _find([[1.0, 2.0, 3.0]]), "findings.nan", IVS),
        (qentry, _find([[1.0]]), "findings.nan", IVS),
        (qentry, _find([[2.0, 1.0]]), "findings.nan", IVS),
        (qentry, _find([[True, 2]]), "findings.nan", IVS),
        (qentry, _find([[0, "1"]]), "findings.nan", IVS),
        (qentry, _find([(0, 1)]), "findings.nan", IVS),
        (qentry, _find([[0, 1]], count=-1), "finding_counts.nan", INT),
        (qentry, _find([[0, 1]], count=2**63), "finding_counts.nan", INT),
    ],
)
def test_bad_entries_are_refused_with_one_line(make, edit, key, msg):
    e = make()
    edit(e)
    with pytest.raises(BadFileError) as ei:
        gate_formats.check_entry("base.json", "entries.k", e)
    assert str(ei.value) == f"base.json: key 'entries.k.{key}' {msg}"


@pytest.mark.parametrize("make, kind", [(qentry, "quant"), (bentry, "blocks")])
def test_an_identity_with_an_unknown_field_is_refused(make, kind):
    e = make()
    e["identity"]["bogus"] = 1
    with pytest.raises(BadFileError) as ei:
        gate_formats.check_entry("base.json", "entries.k", e)
    assert str(ei.value).startswith(
        f"base.json: key 'entries.k.identity.bogus' is unknown in a {kind} entry's identity (known: "
    )


# ------------------------------------------------------------------ against the baseline
WORST = {"x": 0.5, "x_code": 8, "got": 3, "want": 2, "exact": 0.0078125}
WORST_LINE = "worst input x = 0.5 (code 8): code 3, correct 2"


def qd(**over):
    d = {
        "kind": "quant",
        "inputs": {"count": 256, "exhaustive": True},
        "max_code_error": 1.0,
        "mean_code_error": 0.25,
        "max_real_error": 0.5,
        "correct_code_fraction": 0.75,
        "nan_count": 0,
        "max_code_distance": 1,
        "findings": {},
        "finding_counts": {},
        "worst": WORST,
    }
    d.update(over)
    return d


WB = {"index": 3, "first_element": 96, "max_elem_ulp": 2.5, "scale_candidate": 0.25, "scale_ref": 0.125}


def bd(**over):
    d = {
        "kind": "blocks",
        "inputs": "normal:std=1 (seed 3)",
        "elements": 128,
        "max_elem_ulp": 1.0,
        "mean_elem_ulp": 0.25,
        "max_rel": 0.0625,
        "max_added_ulp": 0.5,
        "scale_diff_blocks": 0,
        "mismatches": 2,
        "nan_elements": 0,
        "worst_block": WB,
    }
    d.update(over)
    return d


AGAIN = "the figures cannot be compared: record the baseline again"


@pytest.mark.parametrize(
    "slack, now, base, fails, better",
    [
        (
            0.0,
            qd(),
            {"kind": "blocks"},
            ["the baseline entry is a blocks audit, this is a quant audit; record the baseline again"],
            [],
        ),
        (
            0.0,
            bd(),
            {},
            ["the baseline entry is a float audit, this is a blocks audit; record the baseline again"],
            [],
        ),
        (
            0.0,
            qd(),
            qd(inputs={"count": 128, "exhaustive": True}, max_code_error=2.0),
            [
                "the inputs changed ({'count': 128, 'exhaustive': True} -> "
                f"{{'count': 256, 'exhaustive': True}}); {AGAIN}"
            ],
            [],
        ),
        (
            0.0,
            bd(inputs="normal:std=1 (seed 4)"),
            bd(),
            [f"the inputs changed (normal:std=1 (seed 3) -> normal:std=1 (seed 4)); {AGAIN}"],
            [],
        ),
        (
            0.0,
            bd(elements=256),
            bd(),
            [f"the inputs changed (normal:std=1 (seed 3) -> normal:std=1 (seed 3)); {AGAIN}"],
            [],
        ),
        (0.0, qd(), qd(), [], []),
        (0.0, bd(), bd(), [], []),
        (
            0.0,
            qd(),
            qd(max_code_error="nan"),
            [
                "max_code_error = <1.0> has no baseline value (NaN when recorded); record the baseline again",
                WORST_LINE,
            ],
            [],
        ),
        (
            0.0,
            qd(max_code_error="nan", mean_code_error=0.5),
            qd(max_code_error="nan"),
            ["mean_code_error got worse: <0.25|0.5>", WORST_LINE],
            [],
        ),
        (0.0, qd(max_real_error="nan"), qd(), ["max_real_error got worse: <0.5|nan>", WORST_LINE], []),
        (0.0, qd(max_real_error="inf"), qd(), ["max_real_error got worse: <0.5|inf>", WORST_LINE], []),
        # within the slack (0.25 of the baseline value), both ways; exactly at it is within
        (0.25, qd(max_code_error=1.1875), qd(), [], []),
        (0.25, qd(max_code_error=1.25), qd(), [], []),
        (0.25, qd(max_code_error=0.75), qd(), [], []),
        (0.25, qd(max_real_error=2.25), qd(max_real_error=2.0), [], []),
        (0.25, qd(max_real_error=1.75), qd(max_real_error=2.0), [], []),
        (0.25, qd(correct_code_fraction=0.40625), qd(correct_code_fraction=0.5), [], []),
        (0.25, qd(correct_code_fraction=0.59375), qd(correct_code_fraction=0.5), [], []),
        (0.25, qd(mean_code_error=0), qd(mean_code_error=0), [], []),
        (0.0, qd(mean_code_error=0), qd(mean_code_error=0), [], []),
        (
            0.25,
            qd(max_code_error=1.5),
            qd(),
            ["max_code_error got worse: <1.0|1.5>", WORST_LINE],
            [],
        ),
        (0.25, qd(max_code_error=0.5), qd(), [], ["max_code_error improved: <1.0|0.5>"]),
        (
            0.25,
            qd(correct_code_fraction=0.25),
            qd(correct_code_fraction=0.5),
            ["correct_code_fraction got worse: <0.5|0.25>", WORST_LINE],
            [],
        ),
        (
            0.25,
            qd(correct_code_fraction=0.75),
            qd(correct_code_fraction=0.5),
            [],
            ["correct_code_fraction improved: <0.5|0.75>"],
        ),
        (0.0, qd(mean_code_error=1e-300), qd(mean_code_error=0), [], []),
        (0.0, qd(max_code_distance=2), qd(), ["max_code_distance rose: 1 -> 2", WORST_LINE], []),
        (0.0, qd(max_code_distance=1), qd(max_code_distance=2), [], ["max_code_distance fell: 2 -> 1"]),
        (0.0, qd(worst=None, nan_count=3), qd(), ["nan_count rose: 0 -> 3"], []),
        (
            0.0,
            qd(findings={"nan": [[0.5, 1.0]]}, finding_counts={"nan": 2}, max_code_error=0.5),
            qd(),
            ["nan findings rose: 0 -> 2 inputs", "new nan interval [0.5, 1.0]", WORST_LINE],
            ["max_code_error improved: <1.0|0.5>"],
        ),
        (
            0.0,
            bd(max_elem_ulp=2.5, mean_elem_ulp=0.125),
            bd(),
            [
                "max_elem_ulp got worse: <1.0|2.5>",
                "worst block: block 3, <2.5> element ULP, scale <0.25> (reference <0.125>)",
            ],
            ["mean_elem_ulp improved: <0.25|0.125>"],
        ),
        (
            0.0,
            bd(
                mismatches=3,
                worst_block={
                    "x": 1.5,
                    "pair_input": -2.0,
                    "max_elem_ulp": 1.0,
                    "scale_candidate": 1.0,
                    "scale_ref": 0.5,
                },
            ),
            bd(),
            [
                "mismatches rose: 2 -> 3",
                "worst block: x = 1.5 paired with -2.0, <1.0> element ULP, scale <1.0> (reference <0.5>)",
            ],
            [],
        ),
        (0.0, bd(scale_diff_blocks=1, worst_block=None), bd(), ["scale_diff_blocks rose: 0 -> 1"], []),
    ],
)
def test_against_baseline(slack, now, base, fails, better):
    assert gate_formats.against_baseline(slack, now, base, show) == (fails, better)


# ------------------------------------------------------------------ run: keys refused, sweeps called
QUANT_BAD = [
    ("range", {"range": (-1.0, 1.0)}),
    ("grid", {"grid": 16}),
    ("grad", {"grad": True}),
    ("backward", {"backward": True}),
    ("dump", {"dump": "d.npz"}),
    ("semantics", {"semantics": ["ftz"]}),
    ("device", {"device": "cuda"}),
    ("samples", {"samples": 10}),
    ("seed", {"seed": 5}),
    ("blocks", {"blocks": "normal:std=2"}),
    ("scale_rule", {"scale_rule": "nv"}),
]


@pytest.mark.parametrize("key, over", QUANT_BAD)
def test_keys_a_quantized_audit_refuses(key, over):
    a = Audit("q", ["sigmoid.exp"], [QIN], out_dtype=QOUT, **over)
    with pytest.raises(BadOptionError) as ei:
        gate_formats.run(a)
    assert str(ei.value) == f"key '{key}' does not apply to a quantized audit (every input code is swept)"


@pytest.mark.parametrize("key, over", QUANT_BAD[:7])
def test_keys_a_block_audit_refuses(key, over):
    a = Audit("b", ["gelu.tanh"], ["bf16"], out_dtype="mxfp8_e4m3", **over)
    with pytest.raises(BadOptionError) as ei:
        gate_formats.run(a)
    assert (
        str(ei.value) == f"key '{key}' does not apply to a block-scaled audit (inputs: blocks, samples, seed)"
    )


def test_run_hands_the_audit_to_the_quant_sweep(monkeypatch):
    calls = []

    def sweep(*args, **kw):
        calls.append((args, kw))
        return [("result", args[1], args[3])]

    monkeypatch.setattr(quant_mod, "sweep", sweep)
    q2 = "int8:scale=0.125,zero=0"
    a = Audit(
        "q",
        ["lut:t.npz"],
        [QIN, q2],
        compute=["bf16", "fp64"],
        params={"alpha": 1.5},
        reference="tanh",
        out_dtype=QOUT,
    )
    assert gate_formats.run(a) == [
        ("result", QIN, "bf16"),
        ("result", QIN, "fp64"),
        ("result", q2, "bf16"),
        ("result", q2, "fp64"),
    ]
    assert calls == [
        ((["lut:t.npz"], d, QOUT, c, {"alpha": 1.5}, "tanh"), {}) for d in (QIN, q2) for c in ("bf16", "fp64")
    ]


def test_run_hands_the_audit_to_the_block_sweep(monkeypatch):
    calls = []

    def sweep(*args, **kw):
        calls.append((args, kw))
        return [
            SimpleNamespace(inputs="exhaustive (65536 inputs)" if kw["dist"] == "exhaustive" else kw["dist"])
        ]

    monkeypatch.setattr(blocks_mod, "sweep", sweep)
    a = Audit(
        "b",
        ["gelu.tanh"],
        ["bf16", "fp16"],
        compute=["bf16"],
        params={"k": 2.0},
        out_dtype="mxfp4_e2m1",
        samples=256,
        seed=5,
        blocks="normal:std=2",
        scale_rule="nv",
    )
    assert [r.inputs for r in gate_formats.run(a)] == ["normal:std=2 (seed 5)"] * 2
    kw = {"rule": "nv", "dist": "normal:std=2", "elements": 256, "seed": 5, "params": {"k": 2.0}}
    assert calls == [((["gelu.tanh"], d, "mxfp4_e2m1", "bf16"), kw) for d in ("bf16", "fp16")]

    calls.clear()
    a = Audit("b", ["gelu.tanh"], ["bf16"], compute=["fp64"], out_dtype="mxfp8_e4m3", blocks="exhaustive")
    assert [r.inputs for r in gate_formats.run(a)] == ["exhaustive (65536 inputs)"]
    kw = {"rule": "ocp", "dist": "exhaustive", "elements": 65536, "seed": 0, "params": None}
    assert calls == [((["gelu.tanh"], "bf16", "mxfp8_e4m3", "fp64"), kw)]


# ================================================================== audit/gate/diffs.py

SPEC = Path("spec.toml")


def raw(**over):
    d = {"name": "n", "a": "torch:silu", "b": "silu.exp", "dtype": "bf16"}
    d.update(over)
    return {k: v for k, v in d.items() if v is not ...}


def test_parse_a_minimal_and_a_full_diff():
    assert gate_diff.parse(SPEC, None, "diff") == []
    assert gate_diff.parse(SPEC, [], "diff") == []
    assert gate_diff.parse(SPEC, [raw()], "diff") == [
        {
            "name": "n",
            "a": "torch:silu",
            "b": "silu.exp",
            "run_a": "torch:silu",
            "run_b": "silu.exp",
            "dtype": ["bf16"],
            "compute": None,
            "reference": None,
            "range": None,
            "grid": None,
            "params": {},
            "expect": "identical",
        }
    ]
    full = raw(
        a="lut:t.npz",
        b="c:k.c:f",
        dtype=["fp16", "bf16"],
        compute="fp32",
        reference="tanh",
        range=[-1, 2],
        grid=2,
        params={"alpha": 1, "beta": 0.5},
        expect="not-worse",
    )
    (d,) = gate_diff.parse(Path("/d/spec.toml"), [full], "tool.actaudit.diff")
    assert d == {
        "name": "n",
        "a": "lut:t.npz",
        "b": "c:k.c:f",
        "run_a": "lut:/d/t.npz",
        "run_b": "c:/d/k.c:f",
        "dtype": ["fp16", "bf16"],
        "compute": "fp32",
        "reference": "tanh",
        "range": (-1.0, 2.0),
        "grid": 2,
        "params": {"alpha": 1.0, "beta": 0.5},
        "expect": "not-worse",
    }
    assert all(type(v) is float for v in (*d["range"], *d["params"].values()))
    # the largest grid, two entries of other names
    two = gate_diff.parse(SPEC, [raw(grid=2**31 - 1), raw(name="m")], "diff")
    assert [(d["name"], d["grid"]) for d in two] == [("n", 2**31 - 1), ("m", None)]


NONEMPTY = "must be a non-empty string"
DTYPE = "must be a string or a non-empty list of strings"
RANGE = "must be [lo, hi] with finite lo < hi"
GRID = "must be an integer >= 2"
PARAMS = "must be a table of finite numbers"


@pytest.mark.parametrize(
    "raws, key, msg",
    [
        ({"name": "n"}, "diff", "must be an array of tables ([[diff]])"),
        ("n", "diff", "must be an array of tables ([[diff]])"),
        ([raw(), "n"], "diff[1]", "must be a table"),
        ([raw(name=...)], "diff[0].name", "is missing"),
        ([raw(a=...)], "diff[0].a", "is missing"),
        ([raw(b=...)], "diff[0].b", "is missing"),
        ([raw(dtype=...)], "diff[0].dtype", "is missing"),
        ([raw(name="")], "diff[0].name", NONEMPTY),
        ([raw(a=5)], "diff[0].a", NONEMPTY),
        ([raw(b="")], "diff[0].b", NONEMPTY),
        ([raw(), raw(b="x")], "diff[1].name", "duplicate name 'n'"),
        ([raw(dtype=[])], "diff[0].dtype", DTYPE),
        ([raw(dtype="")], "diff[0].dtype", DTYPE),
        ([raw(dtype=["bf16", ""])], "diff[0].dtype", DTYPE),
        ([raw(dtype=["bf16", 16])], "diff[0].dtype", DTYPE),
        ([raw(dtype=16)], "diff[0].dtype", DTYPE),
        ([raw(compute="")], "diff[0].compute", NONEMPTY),
        ([raw(compute=32)], "diff[0].compute", NONEMPTY),
        ([raw(reference="")], "diff[0].reference", NONEMPTY),
        ([raw(reference=["tanh"])], "diff[0].reference", NONEMPTY),
        ([raw(range=[1, 1])], "diff[0].range", RANGE),
        ([raw(range=[2.0, 1.0])], "diff[0].range", RANGE),
        ([raw(range=[0.0, math.inf])], "diff[0].range", RANGE),
        ([raw(range=[-math.inf, 0.0])], "diff[0].range", RANGE),
        ([raw(range=[math.nan, 1.0])], "diff[0].range", RANGE),
        ([raw(range=[False, 1])], "diff[0].range", RANGE),
        ([raw(range=[0, "1"])], "diff[0].range", RANGE),
        ([raw(range=[0, 1, 2])], "diff[0].range", RANGE),
        ([raw(range=[0])], "diff[0].range", RANGE),
        ([raw(range=(0, 1))], "diff[0].range", RANGE),
        ([raw(range="0,1")], "diff[0].range", RANGE),
        ([raw(grid=1)], "diff[0].grid", GRID),
        ([raw(grid=2**31)], "diff[0].grid", GRID),
        ([raw(grid=True)], "diff[0].grid", GRID),
        ([raw(grid=16.0)], "diff[0].grid", GRID),
        ([raw(grid=None)], "diff[0].grid", GRID),
        ([raw(params=[])], "diff[0].params", PARAMS),
        ([raw(params={"a": math.inf})], "diff[0].params", PARAMS),
        ([raw(params={"a": math.nan})], "diff[0].params", PARAMS),
        ([raw(params={"a": True})], "diff[0].params", PARAMS),
        ([raw(params={"a": "1"})], "diff[0].params", PARAMS),
        ([raw(expect="same")], "diff[0].expect", "must be one of identical, not-worse"),
        ([raw(expect=None)], "diff[0].expect", "must be one of identical, not-worse"),
        ([raw(), raw(name="m", expect="same")], "diff[1].expect", "must be one of identical, not-worse"),
    ],
)
def test_parse_refuses_bad_diffs_with_one_line(raws, key, msg):
    with pytest.raises(BadFileError) as ei:
        gate_diff.parse(SPEC, raws, "diff")
    assert str(ei.value) == f"spec.toml: key '{key}' {msg}"


def test_parse_refuses_unknown_keys():
    with pytest.raises(BadFileError) as ei:
        gate_diff.parse(SPEC, [raw(samples=10)], "diff")
    assert str(ei.value).startswith("spec.toml: key 'diff[0].samples' is unknown in [[diff]] (known: ")


DIDENT = "a b reference dtype compute params range grid exhaustive inputs specials a_identity b_identity"


def test_diff_baseline_entries_are_validated():
    ok = {"kind": "diff", "identity": dict.fromkeys(DIDENT.split())}
    gate_diff.check_entry("base.json", "entries.k", ok)
    cases = [
        (
            {**ok, "bogus": 1},
            "base.json: key 'entries.k.bogus' is unknown in a diff entry (known: identity, kind)",
        ),
        ({"kind": "diff"}, "base.json: key 'entries.k.identity' is missing"),
    ]
    for e, msg in cases:
        with pytest.raises(BadFileError) as ei:
            gate_diff.check_entry("base.json", "entries.k", e)
        assert str(ei.value) == msg
    with pytest.raises(BadFileError) as ei:
        gate_diff.check_entry(
            "base.json", "entries.k", {"kind": "diff", "identity": {**ok["identity"], "x": 1}}
        )
    assert str(ei.value).startswith(
        "base.json: key 'entries.k.identity.x' is unknown in a diff entry's identity"
    )


def dres(**over):
    kw = dict(a="torch:silu", b="silu.exp", reference="silu", dtype="bf16", compute="fp32", count=4, same=4)
    kw.update(over)
    return DiffResult(**kw)


IVS2 = [
    {"lo": 0.5, "hi": 1.0, "count": 1, "a_closer": 0, "b_closer": 1, "max_distance": 3},
    {"lo": 2.0, "hi": 3.0, "count": 1, "a_closer": 0, "b_closer": 1, "max_distance": 1},
]


@pytest.mark.parametrize(
    "expect, r, want",
    [
        ("identical", dres(), []),
        ("not-worse", dres(), []),
        ("not-worse", dres(same=2, a_closer=2), []),
        ("not-worse", dres(same=2, ties=2), []),
        (
            "identical",
            dres(same=2, a_closer=2, max_distance=1),
            [
                "torch:silu vs silu.exp [bf16/fp32]: expected identical, got A better: 2 of 4 inputs differ "
                "(A closer at 2, B at 0), max distance 1 ULP"
            ],
        ),
        (
            "identical",
            dres(same=2, ties=2, max_distance=1),
            [
                "torch:silu vs silu.exp [bf16/fp32]: expected identical, got same error: 2 of 4 inputs "
                "differ (A closer at 0, B at 0), max distance 1 ULP"
            ],
        ),
        (
            "not-worse",
            dres(same=2, b_closer=2, max_distance=3, intervals=IVS2, compute="fp64"),
            [
                "torch:silu vs silu.exp [bf16/fp64]: expected not-worse, got B better: 2 of 4 inputs differ "
                "(A closer at 0, B at 2), max distance 3 ULP; first at [0.5, 1]"
            ],
        ),
        (
            "not-worse",
            dres(same=1, a_closer=1, b_closer=2, max_distance=2, intervals=IVS2[1:]),
            [
                "torch:silu vs silu.exp [bf16/fp32]: expected not-worse, got mixed: 3 of 4 inputs differ "
                "(A closer at 1, B at 2), max distance 2 ULP; first at [2, 3]"
            ],
        ),
    ],
)
def test_expectation_failures(expect, r, want):
    assert gate_diff.expectation_failures({"expect": expect}, r) == want


def test_run_all_runs_each_format_and_names_the_sides_as_written(monkeypatch):
    calls = []

    def diff(a, b, f, compute, **kw):
        calls.append((a, b, f, compute, kw))
        # a side the diff names otherwise than the resolved path keeps its name
        return dres(a=a, b="other" if b == "silu.exp" else b, dtype=f)

    monkeypatch.setattr(diff_mod, "diff", diff)
    progress = object()
    d1 = {
        "name": "n",
        "a": "lut:t.npz",
        "b": "silu.exp",
        "run_a": "lut:/d/t.npz",
        "run_b": "silu.exp",
        "dtype": ["fp16", "bf16"],
        "compute": "fp32",
        "reference": "silu",
        "range": (-1.0, 2.0),
        "grid": 4,
        "params": {"alpha": 1.0},
        "expect": "identical",
    }
    d2 = {**d1, "name": "m", "dtype": ["fp8_e4m3"], "params": {}, "b": "x", "run_b": "lut:/d/x.npz"}
    del d2["run_a"]
    d3 = {**d1, "name": "o", "dtype": ["fp16"]}
    del d3["run_b"]
    out = gate_diff.run_all(Path("/d/spec.toml"), [d1, d2, d3], progress)
    kw1 = {
        "range": (-1.0, 2.0),
        "grid": 4,
        "reference": "silu",
        "params": {"alpha": 1.0},
        "progress": progress,
    }
    kw2 = {**kw1, "params": None}
    assert calls == [
        ("lut:/d/t.npz", "silu.exp", "fp16", "fp32", kw1),
        ("lut:/d/t.npz", "silu.exp", "bf16", "fp32", kw1),
        ("lut:t.npz", "lut:/d/x.npz", "fp8_e4m3", "fp32", kw2),
        ("lut:/d/t.npz", "silu.exp", "fp16", "fp32", kw1),
    ]
    assert [(d["name"], r.a, r.b, r.dtype) for d, r in out] == [
        ("n", "lut:t.npz", "other", "fp16"),
        ("n", "lut:t.npz", "other", "bf16"),
        ("m", "lut:t.npz", "x", "fp8_e4m3"),
        ("o", "lut:t.npz", "other", "fp16"),
    ]
    assert [gate_diff.entry_key(d, r) for d, r in out] == [
        "diff/n/fp16",
        "diff/n/bf16",
        "diff/m/fp8_e4m3",
        "diff/o/fp16",
    ]
    e = gate_diff.entry(d1, out[0][1])
    assert sorted(e) == ["identity", "kind"] and e["kind"] == "diff"
    assert sorted(e["identity"]) == sorted(DIDENT.split())
    assert e["identity"]["grid"] == 4 and e["identity"]["range"] == [-1.0, 2.0]


def test_run_all_names_the_diff_in_its_errors(monkeypatch):
    def diff(*a, **kw):
        raise BadOptionError("no such input")

    monkeypatch.setattr(diff_mod, "diff", diff)
    d = gate_diff.parse(SPEC, [raw()], "diff")
    with pytest.raises(BadOptionError) as ei:
        gate_diff.run_all(Path("/d/spec.toml"), d)
    assert str(ei.value) == "/d/spec.toml: diff 'n': no such input"
    assert ei.value.__cause__ is None and ei.value.__suppress_context__


@pytest.mark.parametrize(
    "dtype, out, kind",
    [
        (["bf16"], "mxfp8_e4m3", "blocks"),
        (["bf16"], "nvfp4", "blocks"),
        (["bf16"], QOUT, "quant"),
        ([QIN], None, "quant"),
        (["bf16", QIN], None, "quant"),
        ([QIN, "bf16"], None, "quant"),
        ([QIN], QOUT, "quant"),
        (["bf16"], None, None),
        (["bf16", "fp16"], "fp16", None),
    ],
)
def test_kind_of(dtype, out, kind):
    assert gate_formats.kind_of(Audit("a", ["gelu.tanh"], dtype, out_dtype=out)) == kind
