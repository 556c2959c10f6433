"""audit/findings.py's small pieces with expectations worked here: runs of a mask by hand,
the failure kinds' union, number and cause text formats, and explain() over hand-built
traces (the ftz and saturation notes).  They kill the mutants that mutmut found surviving
the rest of the suite (docs/design/mutation-testing.md)."""

import math
from types import SimpleNamespace

import numpy as np

from audit import findings as F
from audit.candidates import catalog
from audit.formats import get_format


def test_runs_by_hand():
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    # an int mask is a truth mask, as a bool one
    assert F.runs(x, [0, 1, 1, 0, 1]) == ([[2.0, 3.0], [5.0, 5.0]], [5.0, 5.0], 2)
    assert F.runs(x, np.zeros(5, bool)) == ([], None, 0)
    assert F.runs(x, [1, 0, 1, 0, 1], keep=1) == ([[1.0, 1.0]], [5.0, 5.0], 3)


def test_x_runs_over_distinct_inputs():
    # pairs (x, dy): x = 3 fails for one of its two pairs, x = 1 for none, x = 2 for both
    x = np.array([3.0, 1.0, 2.0, 3.0, 2.0, 1.0, 4.0])
    mask = np.array([False, False, True, True, True, False, True])
    assert F.x_runs(x, mask) == ([[2.0, 4.0]], [2.0, 4.0], 1)
    assert F.x_runs(x, mask.astype(int)) == ([[2.0, 4.0]], [2.0, 4.0], 1)


def test_failing_is_the_union_of_the_failure_kinds(monkeypatch):
    a = np.array([True, False, False, False])
    b = np.array([False, True, False, False])
    mono = np.array([False, False, True, False])
    monkeypatch.setattr(
        F, "masks", lambda *args: {"nan": (a, ""), "monotonicity": (mono, ""), "sign": (b, "")}
    )
    got = F.failing(_Len(4), None, None, {})
    assert got.tolist() == [True, True, False, False]  # monotonicity is not a failure


class _Len:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


def test_number_text():
    assert [F._fmt(v) for v in (math.nan, math.inf, -math.inf, 1 / 3, 0.0)] == [
        "NaN",
        "inf",
        "-inf",
        "0.333333",
        "0",
    ]


def test_at_picks_one_element():
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    assert F._at(a, 2) == 3.0 and F._at(a) == 1.0
    assert F._at(np.array([7.0]), 3) == 7.0  # one element: the same for every input
    assert F._at(np.array(5.0), 1) == 5.0
    assert F._at(np.array([8.0, 9.0]), 1) == 9.0


def _t(op, ins, out, exact, note="", file="f.py", line=3):
    return SimpleNamespace(op=op, ins=ins, out=out, exact=exact, note=note, file=file, line=line)


def test_show_and_hidden_text():
    assert F._show(_t("+", [], 0, 0), [1.0, 2.5]) == "1 + 2.5"
    assert F._show(_t("fma", [], 0, 0), [1.0, 2.0, 3.0]) == "fma(1, 2, 3)"
    h = F.with_hidden_text({"op": "exp", "file": "a.py", "line": 7, "count": 3})
    assert h["text"] == (
        "exp at a.py:7 overflowed to inf/NaN for 3 inputs whose final result is finite "
        "(right only by saturation; a source of NaN gradients)"
    )


def test_t_max_is_the_storage_format_for_the_storage_rounding():
    s, c = get_format("fp16"), get_format("fp32")
    assert F.t_max(_t("round", [], 0, 0, file="(storage)"), c, s) == 65504.0
    assert F.t_max(_t("*", [], 0, 0, file="x.py"), c, s) == c.max_finite


def _explain(monkeypatch, entries, kind, x2=None, params=None):
    seen = {}

    def fake(cand, storage, compute_fmt, p, x, y=None):
        seen.update(params=p, x2=y)
        return entries

    monkeypatch.setattr(F, "trace", fake)
    f = get_format("fp16")
    out = F.explain(None, f, f, params or {"a": 1}, np.array([1.0]), x2, kind)
    return out, seen


def test_explain_ftz_and_saturation_notes(monkeypatch):
    const = _t("const", [], math.nan, 0.1)  # a constant entry is never the cause
    ftz = _t("*", [1e-4, 1e-4], 0.0, 1e-8, note="ftz: subnormal flushed to zero", line=5)
    got, seen = _explain(monkeypatch, [const, ftz], "underflow", x2=np.array([2.0]), params={"alpha": 2})
    assert got == {
        "op": "*",
        "file": "f.py",
        "line": 5,
        "text": "0.0001 * 0.0001 = 1e-08, subnormal, ftz: subnormal flushed to zero at f.py:5",
    }
    assert seen["params"] == {"alpha": 2} and seen["x2"].tolist() == [2.0]
    # the same entry does not explain an overflow; a NaN kind goes past the constant
    assert _explain(monkeypatch, [const, ftz], "nan")[0] is None
    # out != 0: the ftz note is no flush here
    nz = _t("*", [1e-4, 1e-4], 1e-8, 1e-8, note="ftz: subnormal flushed to zero")
    assert _explain(monkeypatch, [nz], "underflow")[0] is None
    # a note without "ftz": the ordinary underflow text
    other = _t("*", [1e-4, 1e-4], 0.0, 1e-8, note="rounded")
    assert (
        _explain(monkeypatch, [other], "underflow")[0]["text"] == "* underflowed to 0 (exact 1e-08) at f.py:3"
    )
    sat = _t("round", [70000.0], 65504.0, 70000.0, note="saturated", line=9)
    assert _explain(monkeypatch, [sat], "overflow")[0]["text"] == (
        "round(70000) = 70000 saturated to 65504 at f.py:9"
    )
    assert _explain(monkeypatch, [sat], "underflow")[0] is None
    unsat = _t("round", [1.0], 1.0, 1.0, note="rounded")
    assert _explain(monkeypatch, [unsat], "sign")[0]["text"].startswith("no exceptional operation")
    assert (
        _explain(monkeypatch, [_t("round", [1.0], 2.0, 2.0, note="x saturated")], "overflow")[0] is not None
    )


def test_trace_passes_params_and_the_second_input():
    fp32 = get_format("fp32")
    c = catalog()
    # elu(x) = alpha (e^x - 1) for x < 0: alpha = 2 at x = -1
    out = float(
        np.asarray(F.trace(c["elu.expm1"], fp32, fp32, {"alpha": 2.0}, [-1.0])[-1].out).reshape(-1)[0]
    )
    assert math.isclose(out, 2.0 * math.expm1(-1.0), rel_tol=1e-6)
    # gelu_bwd(x, dy) = dy (Phi(x) + x phi(x)): dy = 2 at x = 1
    e = F.trace(c["gelu_bwd.erf"], fp32, fp32, {}, [1.0], [2.0])
    want = 2.0 * (0.5 * (1 + math.erf(1 / math.sqrt(2))) + math.exp(-0.5) / math.sqrt(2 * math.pi))
    assert math.isclose(float(np.asarray(e[-1].out).reshape(-1)[0]), want, rel_tol=1e-6)


def test_finding_to_dict_hand_written():
    f = F.Finding("sign", 3, [[1.0, 2.0]], {"x": 1.0, "got": -0.5, "exact": math.inf}, None, 7, "why")
    assert f.to_dict() == {
        "kind": "sign",
        "count": 3,
        "intervals": [[1.0, 2.0]],
        "intervals_total": 7,
        "example": {"x": 1.0, "got": -0.5, "exact": "inf"},
        "cause": None,
        "note": "why",
    }


def test_edge_finding_across_a_chunk_edge():
    fp16, fp32 = get_format("fp16"), get_format("fp32")
    cand = catalog()["sigmoid.naive"]
    # the result fell from 0.5 to 0.25 across the edge where the reference rises
    f = F.edge_finding([1.0, 0.5], [2.0, 0.25, 0.75], 1, cand, fp16, fp32, {})
    assert (f.kind, f.count, f.intervals, f.intervals_total, f.last) == (
        "monotonicity",
        1,
        [[2.0, 2.0]],
        1,
        [2.0, 2.0],
    )
    assert f.example == {"x": 2.0, "got": 0.25, "exact": 0.75} and f.note == ""
    assert f.cause["text"].startswith("no exceptional operation") and "goes backwards" in f.cause["text"]
    assert F.edge_finding([1.0, 0.5], [2.0, 0.25, 0.75], -1, cand, fp16, fp32, {}) is None  # falls: allowed
    assert (
        F.edge_finding([1.0, 0.5], [2.0, 0.5, 0.75], 1, cand, fp16, fp32, {}) is None
    )  # equal: no step back


def test_x_runs_keeps_what_it_is_asked_to():
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 1.0])
    mask = np.array([True, False, True, False, True, False])
    assert F.x_runs(x, mask, keep=1) == ([[1.0, 1.0]], [5.0, 5.0], 3)
