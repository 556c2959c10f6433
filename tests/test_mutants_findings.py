"""audit/measure/findings.py's small pieces with expectations worked here: runs of a mask by hand,
the failure kinds' union, number and cause text formats, and explain() over hand-built
traces (the ftz and saturation notes).  They kill the mutants that mutmut found surviving
the rest of the suite (docs/design/mutation-testing.md).  Further down: hand-built sweeps
(PointErrors with the class each definition gives) and hand-built traces, each with the exact
finding (kind, inputs, count, intervals, cause text) that docs/concepts/findings.md defines."""

import math
import warnings
from types import SimpleNamespace

import numpy as np

from audit.measure import findings as F
from audit.measure import metrics
from audit.measure.metrics import PointErrors
from audit.numbers.formats import get_format
from audit.targets.candidates import Candidate, catalog


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


def _explain(monkeypatch, entries, kind, x2=None, params=None, storage="fp16", compute="fp16"):
    seen = {}

    def fake(cand, storage, compute_fmt, p, x, y=None):
        seen.update(params=p, x2=y)
        return entries

    monkeypatch.setattr(F, "trace", fake)
    out = F.explain(
        None, get_format(storage), get_format(compute), params or {"a": 1}, np.array([1.0]), x2, kind
    )
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


# ------------------------------------------------- hand-built sweeps (PointErrors) and candidates
# the classes of docs/concepts/definitions.md
FINITE, OVER_OK, NAN_, INF_, MISS, UNDEF = (
    metrics.FINITE,
    metrics.OVERFLOW_OK,
    metrics.NAN,
    metrics.INF,
    metrics.OVERFLOW_MISS,
    metrics.UNDEFINED,
)
OVER_NOTE = (
    "infinite, or saturated to the largest finite value, where the exact "
    "value is in range; or finite where the exact value overflows"
)


def _pe(x, got, exact, rounded, cls=None, lo=None, x2=None):
    """A PointErrors built by hand: only the columns that findings read are meaningful."""
    x, got, exact, rounded = (np.asarray(a, dtype=np.float64) for a in (x, got, exact, rounded))
    if cls is None:  # the class by its definition
        same = (got == rounded) | (np.isnan(got) & np.isnan(rounded))
        cls = np.where(
            np.isnan(exact),
            UNDEF,
            np.where(
                np.isfinite(got),
                np.where(np.isfinite(rounded), FINITE, MISS),
                np.where(same, OVER_OK, np.where(np.isnan(got), NAN_, INF_)),
            ),
        )
    z = np.zeros(len(x))
    return PointErrors(
        x,
        got,
        exact,
        z if lo is None else np.asarray(lo, dtype=np.float64),
        rounded,
        z,
        z.astype(np.int64),
        z,
        z,
        np.asarray(cls, dtype=np.int8),
        got == rounded,
        None if x2 is None else np.asarray(x2, dtype=np.float64),
    )


def _ref(bounds=None, pieces=(), arity=1, **kw):
    return SimpleNamespace(bounds=bounds, arity=arity, pieces=lambda p: pieces, **kw)


def _masks(e, fmt="fp16", **ref):
    out = F.masks(e, SimpleNamespace(ref=_ref(**ref)), get_format(fmt), {})
    return {k: (m.tolist(), note) for k, (m, note) in out.items()}


def test_masks_saturation_next_to_a_nan_on_either_side():
    # fp16: 65504 returned where RN(f) = 65472 (f = 65470): saturated, an overflow finding;
    # a NaN elsewhere in the chunk must not hide it from the cheap whole-array check
    e = _pe([1.0, 2.0, 3.0], [math.nan, 65504.0, 1.0], [0.5, 65470.0, 1.0], [0.5, 65472.0, 1.0])
    assert _masks(e) == {
        "nan": ([True, False, False], ""),
        "overflow": ([False, True, False], OVER_NOTE),
        "underflow": ([False, False, False], ""),
        "sign": ([False, False, False], ""),
    }
    e = _pe([1.0, 2.0, 3.0], [math.nan, -65504.0, 1.0], [0.5, -65470.0, 1.0], [0.5, -65472.0, 1.0])
    assert _masks(e)["overflow"] == ([False, True, False], OVER_NOTE)
    # every result finite
    e = _pe([1.0, 2.0], [65504.0, 3.0], [65470.0, 3.0], [65472.0, 3.0])
    assert _masks(e)["overflow"] == ([True, False], OVER_NOTE)
    e = _pe([1.0, 2.0], [3.0, -65504.0], [3.0, -65470.0], [3.0, -65472.0])
    assert _masks(e)["overflow"] == ([False, True], OVER_NOTE)
    # exactly 65504 where RN(f) is 65504: correct, no finding
    e = _pe([1.0, 2.0], [65504.0, -65504.0], [65500.0, -65500.0], [65504.0, -65504.0])
    assert _masks(e)["overflow"] == ([False, False], OVER_NOTE)


def test_masks_raise_no_floating_point_warning():
    # fp64 results from -max to +max: the step between them overflows float64 (inf); the
    # monotonicity check must neither warn nor lose the step's sign
    big = 1.7976931348623157e308
    inc = ((-math.inf, math.inf, 1),)
    with warnings.catch_warnings(), np.errstate(all="warn"):
        warnings.simplefilter("error")
        e = _pe([1.0, 2.0], [-big, big], [-big, big], [-big, big])
        assert _masks(e, "fp64", pieces=inc)["monotonicity"] == ([False, False], "")
        e = _pe([1.0, 2.0], [big, -big], [big, big], [big, big])
        assert _masks(e, "fp64", pieces=inc)["monotonicity"] == ([False, True], "")


def _first_line(fn):
    return fn.__code__.co_firstlineno + 1


def _sqrt_of_x_minus_a(x, m, a):
    return m.sqrt(x - a)


SQRT = Candidate("t.sqrt", "sigmoid", "sqrt(x - a)", "the test", _sqrt_of_x_minus_a, {"a": 0.0})
HERE = "tests/test_mutants_findings.py"


def test_edge_finding_explains_its_own_input_with_its_parameters():
    fp16 = get_format("fp16")
    at = f"{HERE}:{_first_line(_sqrt_of_x_minus_a)}"
    # sqrt(2 - 3) = NaN: the first NaN from ordinary operands is the cause at x = 2, a = 3
    f = F.edge_finding([1.0, 0.5], [2.0, 0.25, 0.75], 1, SQRT, fp16, fp16, {"a": 3.0})
    assert f.cause == {
        "op": "sqrt",
        "file": HERE,
        "line": _first_line(_sqrt_of_x_minus_a),
        "text": f"sqrt(-1) = NaN at {at}",
    }
    f = F.edge_finding([1.0, 0.5], [2.0, 0.25, 0.75], 1, SQRT, fp16, fp16, {"a": 1.5})
    assert f.cause["text"] == (
        f"no exceptional operation: the result of sqrt goes backwards through approximation or rounding error at {at}"
    )
    # a decreasing piece: a rise is the step back
    f = F.edge_finding([1.0, 0.25], [2.0, 0.5, 0.75], -1, SQRT, fp16, fp16, {"a": 4.0})
    assert f.cause["text"] == f"sqrt(-2) = NaN at {at}" and f.example == {"x": 2.0, "got": 0.5, "exact": 0.75}


def test_x_runs_of_a_grid_and_of_an_object_mask():
    # x as a grid of pairs (one row per dy), the mask over its elements in order
    x = np.array([[3.0, 1.0], [2.0, 4.0], [5.0, 3.0]])
    mask = np.array([True, False, False, False, False, True])
    assert F.x_runs(x, mask) == ([[3.0, 3.0]], [3.0, 3.0], 1)
    assert F.x_runs(x, [0, 0, 1, 1, 1, 0]) == ([[2.0, 2.0], [4.0, 5.0]], [4.0, 5.0], 2)
    # a mask of Python truth values (an object array), as runs() takes it
    obj = np.array([True, False, True, False, False, False], dtype=object)
    assert F.x_runs(x, obj) == ([[2.0, 3.0]], [2.0, 3.0], 1)
    assert F.runs(np.array([1.0, 2.0, 3.0]), obj[:3]) == ([[1.0, 1.0], [3.0, 3.0]], [3.0, 3.0], 2)


V = ((-math.inf, 0.0, -1), (0.0, math.inf, 1))  # decreasing up to 0, increasing from 0 (|x|-like)


def _b(x, got, ok=None, pieces=V):
    x, got = np.array(x, dtype=float), np.array(got, dtype=float)
    ok = np.isfinite(got) if ok is None else np.array(ok)
    return F._backwards(x, got, ok, pieces).tolist()


def test_backwards_steps_by_hand():
    assert _b([], []) == [] and _b([1.0], [5.0]) == [False]
    # inside the increasing piece: 3 -> 2 goes back (at x = 3), 2 -> 2 does not
    assert _b([1.0, 2.0, 3.0, 4.0], [1.0, 3.0, 2.0, 2.0]) == [False, False, True, False]
    # inside the decreasing piece: 3 -> 3.5 goes back
    assert _b([-4.0, -3.0, -2.0, -1.0], [4.0, 3.0, 3.5, 1.0]) == [False, False, True, False]
    # the ends of a piece belong to it: x = 0 is the last of one piece and the first of the other
    assert _b([-2.0, -1.0, 0.0, 1.0, 2.0], [2.0, 2.5, 0.0, -1.0, 3.0]) == [False, True, False, True, False]
    assert _b([-1.0, 0.0], [1.0, 2.0]) == [False, True]
    assert _b([0.0, 1.0], [2.0, 1.0]) == [False, True]
    # an input without a finite result is skipped: 1 -> 0.5 across it goes back
    assert _b([1.0, 2.0, 3.0], [1.0, math.nan, 0.5]) == [False, False, True]
    assert _b([1.0, 2.0, 3.0], [1.0, 9.0, 0.5], ok=[True, False, True]) == [False, False, True]
    # one input in a piece compares nothing; a piece that the chunk leaves
    assert _b([-1.0, 1.0, 2.0], [0.0, 3.0, 2.0]) == [False, False, True]
    assert _b([-1.0, 1.0, 2.0], [3.0, 0.0, 1.0]) == [False, False, False]  # 3 -> 0 crosses the turn
    assert _b([-1.0, 0.0, 1.0], [1.0, 2.0, 3.0]) == [False, True, False]  # 1 -> 2 rises up to the turn
    # equal results, and steps smaller than 1, are no step back, on either path
    assert _b([-3.0, -2.0, -1.0], [4.0, 4.0, 3.0]) == [False, False, False]
    assert _b([-1.0, 1.0, 2.0, 3.0], [0.0, 3.0, 3.0, 3.5]) == [False, False, False, False]
    assert _b([-2.0, -1.0, 1.0], [0.5, 0.25, 3.0]) == [False, False, False]
    assert F._backwards(np.array([1.0, 2.0]), np.array([2.0, 1.0]), np.array([True, True]), V).dtype == bool
    assert F._backwards(np.array([-1.0, 2.0]), np.array([2.0, 1.0]), np.array([True, True]), V).dtype == bool
    assert F._backwards(np.array([1.0]), np.array([2.0]), np.array([True]), V).dtype == bool
    assert _b([1.0, 2.0], [2.0, 1.0], pieces=((5.0, 9.0, 1),)) == [False, False]
    # a chunk inside a piece that is not the first
    assert _b([1.0, 2.0, 3.0], [2.0, 1.0, 3.0], pieces=((-9.0, 0.5, 1), (0.5, 9.0, -1))) == [
        False,
        False,
        True,
    ]
    assert _b([1.0, 2.0, 3.0], [2.0, 1.0, 3.0], pieces=((-9.0, 0.5, -1), (0.5, 9.0, 1))) == [
        False,
        True,
        False,
    ]


def _edges(x, got, cls=None, pieces=V):
    exact = [g + 0.25 for g in got]
    return F.monotone_edges(_pe(x, got, exact, exact, cls), pieces)


def test_monotone_edges_by_hand():
    assert _edges([], []) == [None, None]
    # the chunk inside the increasing piece
    assert _edges([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]) == [None, [[1.0, 1.0, 1.25], [3.0, 3.0, 3.25]]]
    assert _edges([-3.0, -2.0, -1.0], [3.0, 2.0, 1.0]) == [[[-3.0, 3.0, 3.25], [-1.0, 1.0, 1.25]], None]
    # across the turning point, which belongs to both pieces
    assert _edges([-1.0, 0.0, 1.0], [1.0, 0.0, 1.0]) == [
        [[-1.0, 1.0, 1.25], [0.0, 0.0, 0.25]],
        [[0.0, 0.0, 0.25], [1.0, 1.0, 1.25]],
    ]
    # only finite results count: nan and inf are skipped, an overflow miss (finite) is not
    assert _edges([1.0, 2.0, 3.0, 4.0], [math.nan, 2.0, 3.0, math.inf], cls=[NAN_, FINITE, MISS, INF_]) == [
        None,
        [[2.0, 2.0, 2.25], [3.0, 3.0, 3.25]],
    ]
    assert _edges([-1.0, 1.0], [math.nan, 1.0], cls=[NAN_, FINITE]) == [
        None,
        [[1.0, 1.0, 1.25], [1.0, 1.0, 1.25]],
    ]
    assert _edges([1.0, 2.0], [1.0, 2.0], pieces=((5.0, 9.0, 1),)) == [None]
    edges = _edges([1.0, 2.0], [1.0, 2.0], pieces=((-9.0, 0.5, 1), (0.5, 9.0, -1)))
    assert edges == [None, [[1.0, 1.0, 1.25], [2.0, 2.0, 2.25]]]
    assert all(type(v) is float for v in edges[1][0] + edges[1][1])


INF, NAN = math.inf, math.nan
AT = " at f.py:3"
NOEXC = "no exceptional operation: the result of {} {} through approximation or rounding error"
WHAT = {
    "sign": "has the wrong sign",
    "range": "leaves the function's range",
    "monotonicity": "goes backwards",
    "overflow": "is finite where the exact value overflows (or is a pole)",
}
STORE = _t("rounding to fp16", [1.0], 1.0, 1.0, file="(storage)", line=0)
EXPLAIN_CASES = [
    # an int32 bit trick out of range: 2^31 and beyond on either side, non-finite
    (
        [_t("bits", [2.0**31], 0.0, 0.0)],
        "overflow",
        "int32 conversion of 2.14748e+09 is out of range (gives 0x80000000)" + AT,
    ),
    (
        [_t("bits", [-(2.0**31)], 0.0, 0.0)],
        "nan",
        "int32 conversion of -2.14748e+09 is out of range (gives 0x80000000)" + AT,
    ),
    (
        [_t("bits", [INF], 0.0, 0.0)],
        "underflow",
        "int32 conversion of inf is out of range (gives 0x80000000)" + AT,
    ),
    (
        [_t("bits", [NAN], 0.0, 0.0)],
        "special",
        "int32 conversion of NaN is out of range (gives 0x80000000)" + AT,
    ),
    ([_t("bits", [2.0**31 - 1], 0.0, 0.0)], "overflow", NOEXC.format("bits", WHAT["overflow"]) + AT),
    ([_t("bits", [2.0**31], 0.0, 0.0)], "sign", NOEXC.format("bits", WHAT["sign"]) + AT),
    ([_t("bits", [], 0.0, 0.0)], "nan", None),
    # overflow to an infinity from finite operands
    ([_t("exp", [12.0], INF, 162754.791419)], "overflow", "exp overflowed to inf (exact 162755)" + AT),
    ([_t("*", [-300.0, 300.0], -INF, -90000.0)], "overflow", "* overflowed to -inf (exact -90000)" + AT),
    ([_t("exp", [INF], INF, INF)], "overflow", NOEXC.format("exp", WHAT["overflow"]) + AT),
    ([_t("exp", [12.0], INF, 1.6e5, line=2)], "special", "exp overflowed to inf at f.py:2"),
    ([_t("exp", [12.0], INF, 1.6e5, line=2)], "nan", "exp overflowed to inf at f.py:2"),
    ([_t("exp", [12.0], INF, 1.6e5, line=2)], "underflow", None),
    (
        [_t("exp", [12.0], INF, 1.6e5, line=2)],
        "monotonicity",
        NOEXC.format("exp", WHAT["monotonicity"]) + " at f.py:2",
    ),
    # the first NaN from ordinary operands, after the (first) overflow that fed it
    (
        [
            _t("exp", [12.0], INF, 1.6e5, line=2),
            _t("exp", [13.0], INF, 4.4e5, line=5),
            _t("-", [INF, INF], NAN, NAN, line=7),
        ],
        "nan",
        "exp overflowed to inf at f.py:2, then inf - inf = NaN at f.py:7",
    ),
    ([_t("sqrt", [-1.0], NAN, NAN)], "underflow", "sqrt(-1) = NaN" + AT),
    ([_t("sqrt", [-1.0], NAN, NAN)], "sign", "sqrt(-1) = NaN" + AT),
    ([_t("+", [NAN, 1.0], NAN, NAN)], "nan", None),
    # rounded onto the largest finite value of the compute format (fp16: 65504, p = 11)
    (
        [_t("*", [300.0, 218.0], 65504.0, 65400.0)],
        "overflow",
        "300 * 218 rounded to the largest finite value 65504" + AT,
    ),
    (
        [_t("*", [-300.0, 218.0], -65504.0, -65400.0)],
        "overflow",
        "-300 * 218 rounded to the largest finite value -65504" + AT,
    ),
    (
        [_t("*", [300.0, 220.0], 65504.0, 65504.0 * (1 + 2.0**-11))],
        "overflow",
        NOEXC.format("*", WHAT["overflow"]) + AT,
    ),
    (
        [_t("*", [300.0, 220.0], 65504.0, 65535.0)],
        "overflow",
        "300 * 220 rounded to the largest finite value 65504" + AT,
    ),
    ([_t("*", [300.0, 218.0], 65472.0, 65470.0)], "overflow", NOEXC.format("*", WHAT["overflow"]) + AT),
    ([_t("*", [300.0, 218.0], 65504.0, 65400.0)], "range", NOEXC.format("*", WHAT["range"]) + AT),
    # a clamp
    (
        [_t("max", [-3.0, 0.0], 0.0, 0.0)],
        "overflow",
        "max(-3, 0) = 0: the formula clamps, the exact value does not" + AT,
    ),
    ([_t("min", [3.0, 5.0], 3.0, 3.0)], "overflow", NOEXC.format("min", WHAT["overflow"]) + AT),
    (
        [_t("min", [5.0, 3.0], 3.0, 3.0)],
        "overflow",
        "min(5, 3) = 3: the formula clamps, the exact value does not" + AT,
    ),
    ([_t("max", [-3.0, 0.0], 0.0, 0.0)], "sign", NOEXC.format("max", WHAT["sign"]) + AT),
    # zeros from nonzero operands
    ([_t("/", [1.0, INF], 0.0, 0.0)], "underflow", "1 / inf = 0" + AT),
    (
        [_t("exp", [12.0], INF, 1.6e5, line=2), _t("/", [1.0, INF], 0.0, 0.0)],
        "underflow",
        "exp overflowed to inf at f.py:2, then 1 / inf = 0" + AT,
    ),
    (
        [_t("+", [1.0, -1.0], 0.0, 0.0)],
        "underflow",
        "1 + -1 = 0: cancellation (an operand rounded onto the other)" + AT,
    ),
    (
        [_t("-", [2.0, 2.0], 0.0, 0.0)],
        "underflow",
        "2 - 2 = 0: cancellation (an operand rounded onto the other)" + AT,
    ),
    ([_t("max", [-2.0, 0.0], 0.0, 0.0)], "underflow", "max(-2, 0) = 0: the formula clamps to 0" + AT),
    ([_t("min", [0.0, 2.0], 0.0, 0.0)], "underflow", "min(0, 2) = 0: the formula clamps to 0" + AT),
    (
        [_t("*", [1e-4, 0.0], 0.0, 0.0)],
        "underflow",
        "0.0001 * 0 = 0 exactly: an earlier rounding absorbed the small term of its argument" + AT,
    ),
    ([_t("exp", [-20.0], 0.0, 2.06e-9)], "underflow", "exp underflowed to 0 (exact 2.06e-09)" + AT),
    ([_t("*", [0.0, 0.0], 0.0, 0.0)], "underflow", None),
    ([_t("max", [NAN, 0.0], 0.0, 0.0)], "underflow", None),
    ([_t("*", [1e-4, 1e-4], 1e-8, 1e-8)], "underflow", None),
    ([_t("/", [1.0, INF], 0.0, 0.0)], "overflow", NOEXC.format("/", WHAT["overflow"]) + AT),
    # a non-finite input turned into a finite value
    ([_t("tanh", [INF], 1.0, 1.0)], "special", "tanh(inf) = 1: the non-finite input is lost" + AT),
    ([_t("tanh", [-INF], -1.0, -1.0)], "special", "tanh(-inf) = -1: the non-finite input is lost" + AT),
    ([_t("tanh", [2.0], 1.0, 0.96)], "special", None),
    ([_t("tanh", [INF], 1.0, 1.0)], "nan", None),
    # no exceptional operation: the last operation of the formula, not the storage rounding
    ([_t("*", [2.0, 3.0], 6.0, 6.0), STORE], "range", NOEXC.format("*", WHAT["range"]) + AT),
    (
        [_t("*", [2.0, 3.0], 6.0, 6.0, line=2), _t("+", [6.0, 1.0], 7.0, 7.0), STORE],
        "monotonicity",
        NOEXC.format("+", WHAT["monotonicity"]) + AT,
    ),
    ([STORE], "sign", NOEXC.format("rounding to fp16", WHAT["sign"]) + " at (storage):0"),
    ([], "sign", None),
    ([], "overflow", None),
    ([_t("*", [2.0, 3.0], 6.0, 6.0)], "underflow", None),
    ([_t("*", [2.0, 3.0], 6.0, 6.0)], "nan", None),
]


def test_explain_table_of_hand_built_traces(monkeypatch):
    for entries, kind, text in EXPLAIN_CASES:
        got = _explain(monkeypatch, entries, kind)[0]
        if text is None:
            assert got is None, (entries, kind, got)
            continue
        assert got is not None and got["text"] == text, (entries, kind, got)
        t = next(t for t in entries if got["text"].endswith(f"at {t.file}:{t.line}") and t.op == got["op"])
        assert got == {"op": t.op, "file": t.file, "line": t.line, "text": text}


def test_masks_finite_where_the_exact_value_overflows_and_saturating_formats():
    # fp16: 65504 where f = e^12 = 162754.8 overflows (RN = inf): an overflow miss; inf there is
    # its correct rounding; an undefined value (exact NaN) is no overflow
    e = _pe(
        [12.0, 13.0, -1.0, 0.0],
        [65504.0, INF, 65504.0, -3.0],
        [162754.79, 442413.39, NAN, -INF],
        [INF, INF, NAN, -INF],
    )
    assert _masks(e)["overflow"] == ([True, False, False, True], OVER_NOTE)
    # fp4_e2m1 saturates: max 6, overflow from 7 = 6 + ulp(6)/2 on; RN(f) = +-6 beyond it
    e = _pe(
        [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        [4.0, -4.0, 4.0, 6.0, 6.0, 4.0],
        [7.0, -100.0, 6.99, 100.0, 5.0, 4.0],
        [6.0, -6.0, 6.0, 6.0, 4.0, 4.0],
        cls=[FINITE, FINITE, FINITE, 1, FINITE, FINITE],
    )
    assert _masks(e, "fp4_e2m1")["overflow"] == ([True, True, False, False, True, False], OVER_NOTE)
    # fp16 does not saturate: 4 where RN(f) is 65504 and f is beyond 65520 is just an error
    e = _pe([1.0], [4.0], [1e6], [65504.0])
    assert _masks(e)["overflow"] == ([False], OVER_NOTE)


def test_masks_flush_sign_range_and_which_kinds():
    e = _pe(
        [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        [0.0, 0.0, 0.0, -0.0, 1.0, 0.0],
        [1e-5, 0.0, NAN, -1e-5, 1.0, -1e-5],
        [1e-5, 0.0, NAN, -1e-5, 1.0, -1e-5],
    )
    assert _masks(e)["underflow"] == ([True, False, False, True, False, True], "")
    assert _masks(_pe([1.0], [1.0], [1.0], [1.0]))["underflow"] == ([False], "")
    # opposite signs, both nonzero and the result finite
    e = _pe(
        [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
        [-1.0, -0.0, 1.0, -INF, 2.0, -2.0, 1.0],
        [1.0, 1.0, -0.0, 1.0, 3.0, -3.0, -0.5],
        [1.0, 1.0, -0.0, 1.0, 3.0, -3.0, -0.5],
    )
    assert _masks(e)["sign"] == ([True, False, False, False, False, False, True], "")
    # the range [0, 1] of sigmoid, NaN and inf are other kinds
    unit = lambda x: (np.zeros_like(x), np.ones_like(x))  # noqa: E731
    e = _pe(
        [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        [-0.001, 0.0, 1.0, 1.001, NAN, INF],
        [0.5] * 6,
        [0.5] * 6,
    )
    assert _masks(e, bounds=unit)["range"] == ([True, False, False, True, False, False], "")
    e = _pe([1.0, 2.0], [-0.5, 1.5], [0.5] * 2, [0.5] * 2)
    assert _masks(e, bounds=unit)["range"] == ([True, True], "")
    # the bounds are rounded to the output format: RN_fp16(1.0007) = 1.0009765625 is in range
    ident = lambda x: (np.minimum(x, 0), np.maximum(x, 0))  # noqa: E731
    e = _pe([1.0007, 1.0007, -1.0007], [1.0009765625, 1.001953125, -1.0009765625], [1.0] * 3, [1.0] * 3)
    assert _masks(e, bounds=ident)["range"] == ([False, True, False], "")
    # the reference's parameters reach its bounds
    seen = {}

    def scaled(x, beta):
        seen["beta"] = beta
        return np.full_like(x, -beta), np.full_like(x, beta)

    e = _pe([1.0, 2.0], [1.5, 2.5], [1.0] * 2, [1.0] * 2)
    out = F.masks(e, SimpleNamespace(ref=_ref(bounds=scaled)), get_format("fp16"), {"beta": 2.0})
    assert out["range"][0].tolist() == [False, True] and seen == {"beta": 2.0}
    # a gated (two-argument) reference: no range or monotonicity kind
    both = dict(bounds=unit, pieces=V)
    assert list(_masks(_pe([1.0], [0.5], [0.5], [0.5]), **both)) == [
        "nan",
        "overflow",
        "underflow",
        "sign",
        "range",
        "monotonicity",
    ]
    assert list(_masks(_pe([1.0], [0.5], [0.5], [0.5]), arity=2, **both)) == [
        "nan",
        "overflow",
        "underflow",
        "sign",
    ]
    # monotonicity over finite results: an overflow miss (finite) counts, NaN does not
    e = _pe([1.0, 2.0, 3.0, 4.0], [3.0, NAN, 2.0, 1.0], [3.0, 2.0, 2.0, INF], [3.0, 2.0, 2.0, INF])
    assert _masks(e, pieces=V)["monotonicity"] == ([False, False, True, True], "")


def test_failing_is_every_failure_kind(monkeypatch):
    kinds = ("nan", "overflow", "underflow", "sign", "range", "monotonicity", "special", "no_effect")
    ms = {k: (np.arange(len(kinds)) == i, "") for i, k in enumerate(kinds)}
    e, cand, fmt, rp = _Len(len(kinds)), object(), object(), {"beta": 1}

    def fake(*args):
        assert len(args) == 4 and all(a is b for a, b in zip(args, (e, cand, fmt, rp)))
        return ms

    monkeypatch.setattr(F, "masks", fake)
    assert F.failing(e, cand, fmt, rp).tolist() == [True] * 5 + [False] * 3


def test_find_builds_each_finding(monkeypatch):
    calls = []

    def fake_masks(e_, cand, fmt, ref_params):
        assert e_ is e and cand in (plain, bwd, gated)
        calls.append(("masks", fmt.name, ref_params))
        return {
            "nan": (np.array([False, True, True, False, True]), ""),
            "sign": (np.zeros(5, bool), ""),
            "underflow": (np.array([1, 0, 0, 0, 0], bool), ""),
            "overflow": (np.array([False, False, False, True, False]), "a note"),
        }

    traced = [SimpleNamespace(op="const"), SimpleNamespace(op="mul")]

    def fake_trace(cand, storage, compute_fmt, params, x, x2=None):
        # one trace at every kind's example input, in the kinds' order
        calls.append(
            ("trace", storage.name, compute_fmt.name, params, x.tolist(), None if x2 is None else x2.tolist())
        )
        return traced

    def fake_explain(cand, storage, compute_fmt, params, x, x2, kind, entries=None, j=0):
        assert cand in (plain, bwd, gated)
        assert entries == traced[1:]  # the trace's operations (its constants left out)
        calls.append(
            (
                "explain",
                storage.name,
                compute_fmt.name,
                params,
                x.tolist(),
                None if x2 is None else x2.tolist(),
                kind,
                j,
            )
        )
        return {"text": kind}

    monkeypatch.setattr(F, "masks", fake_masks)
    monkeypatch.setattr(F, "trace", fake_trace)
    monkeypatch.setattr(F, "explain", fake_explain)
    s, c = get_format("fp16"), get_format("fp32")
    e = _pe([1.0, 2.0, 3.0, 4.0, 5.0], [0.0, NAN, NAN, INF, NAN], [0.1, 0.2, 0.3, 0.4, 0.5], [0.1] * 5)
    plain = SimpleNamespace(ref=SimpleNamespace(), semantics=None)
    bwd = SimpleNamespace(ref=SimpleNamespace(x_intervals=True), semantics=None)
    gated = SimpleNamespace(ref=SimpleNamespace(), semantics=None)  # a Reference has no x_intervals
    got = [vars(f) for f in F.find(e, plain, s, c, {"a": 1}, {"b": 2})]
    assert got == [
        dict(
            kind="nan",
            count=3,
            intervals=[[2.0, 3.0], [5.0, 5.0]],
            example={"x": 2.0, "got": NAN, "exact": 0.2},
            cause={"text": "nan"},
            intervals_total=2,
            note="",
            last=[5.0, 5.0],
        )
        | {"example": got[0]["example"]},
        dict(
            kind="underflow",
            count=1,
            intervals=[[1.0, 1.0]],
            example={"x": 1.0, "got": 0.0, "exact": 0.1},
            cause={"text": "underflow"},
            intervals_total=1,
            note="",
            last=[1.0, 1.0],
        ),
        dict(
            kind="overflow",
            count=1,
            intervals=[[4.0, 4.0]],
            example={"x": 4.0, "got": INF, "exact": 0.4},
            cause={"text": "overflow"},
            intervals_total=1,
            note="a note",
            last=[4.0, 4.0],
        ),
    ]
    assert (
        got[0]["example"]["x"] == 2.0
        and math.isnan(got[0]["example"]["got"])
        and got[0]["example"]["exact"] == 0.2
    )
    assert all(type(v) is float for f in got for v in f["example"].values())
    assert calls == [
        ("masks", "fp16", {"b": 2}),
        ("trace", "fp16", "fp32", {"a": 1}, [2.0, 1.0, 4.0], None),
        ("explain", "fp16", "fp32", {"a": 1}, [2.0], None, "nan", 0),
        ("explain", "fp16", "fp32", {"a": 1}, [1.0], None, "underflow", 1),
        ("explain", "fp16", "fp32", {"a": 1}, [4.0], None, "overflow", 2),
    ]
    # pairs (x, dy) of a backward reference: intervals over x, the dead-gradient note
    calls.clear()
    e = _pe(
        [3.0, 1.0, 3.0, 2.0, 1.0],
        [0.0, NAN, NAN, INF, NAN],
        [0.1, 0.2, 0.3, 0.4, 0.5],
        [0.1] * 5,
        x2=[5.0, 6.0, 7.0, 8.0, 9.0],
    )
    got = [vars(f) for f in F.find(e, bwd, s, c, {}, {})]
    assert [
        (f["kind"], f["count"], f["intervals"], f["intervals_total"], f["last"], f["note"]) for f in got
    ] == [
        ("nan", 3, [[1.0, 1.0], [3.0, 3.0]], 2, [3.0, 3.0], ""),
        (
            "underflow",
            1,
            [[3.0, 3.0]],
            1,
            [3.0, 3.0],
            "dead gradient: dx = 0 where dy * f'(x) rounds to a nonzero value",
        ),
        ("overflow", 1, [[2.0, 2.0]], 1, [2.0, 2.0], "a note"),
    ]
    assert got[1]["example"] == {"x": 3.0, "got": 0.0, "exact": 0.1, "b": 5.0}
    assert calls[1:] == [
        ("trace", "fp16", "fp32", {}, [1.0, 3.0, 2.0], [6.0, 5.0, 8.0]),
        ("explain", "fp16", "fp32", {}, [1.0], [6.0], "nan", 0),
        ("explain", "fp16", "fp32", {}, [3.0], [5.0], "underflow", 1),
        ("explain", "fp16", "fp32", {}, [2.0], [8.0], "overflow", 2),
    ]
    # a gated unit (x, b): no intervals, the note as masks gives it
    got = [vars(f) for f in F.find(e, gated, s, c, {}, {})]
    assert [
        (f["kind"], f["count"], f["intervals"], f["intervals_total"], f["last"], f["note"]) for f in got
    ] == [
        ("nan", 3, [], 0, None, ""),
        ("underflow", 1, [], 0, None, ""),
        ("overflow", 1, [], 0, None, "a note"),
    ]


def test_special_findings_by_hand(monkeypatch):
    calls = []
    cand, f16, f32 = object(), get_format("fp16"), get_format("fp32")

    def fake(c, s, cf, p, x, x2, kind):
        assert c is cand and s is f16 and cf is f32
        calls.append((p, x.tolist(), x2, kind))
        return {"k": kind}

    monkeypatch.setattr(F, "explain", fake)
    ok = {"x": INF, "ok": True, "got": 1.0, "expected": 1.0}
    assert F.special_findings(cand, f16, f32, {}, [ok]) == [] and calls == []
    bad = [
        ok,
        {"x": -INF, "ok": False, "got": NAN, "expected": 0.0},
        {"x": NAN, "ok": False, "got": 1.0, "expected": NAN},
    ]
    (f,) = F.special_findings(cand, f16, f32, {"a": 3}, bad)
    assert (f.kind, f.count, f.intervals, f.intervals_total, f.cause, f.note, f.last) == (
        "special",
        2,
        [[-INF, -INF], [NAN, NAN]][:1] + [f.intervals[1]],
        2,
        {"k": "nan"},
        "",
        None,
    )
    assert math.isnan(f.intervals[1][0]) and math.isnan(f.intervals[1][1])
    assert f.example["x"] == -INF and math.isnan(f.example["got"]) and f.example["exact"] == 0.0
    assert calls == [({"a": 3}, [-INF], None, "nan")]
    # a finite (or non-float) result where another is expected: the special kind of cause
    for got in (1.0, 0, None):
        calls.clear()
        (f,) = F.special_findings(cand, f16, f32, {}, [{"x": INF, "ok": False, "got": got, "expected": 0.0}])
        assert calls == [({}, [INF], None, "special")] and f.count == 1 and f.intervals == [[INF, INF]]


def test_masks_kinds_together_in_one_chunk():
    # inf where RN(f) = 1 (class inf), -inf where RN(f) = +inf (the other sign: class inf too)
    # and a saturated 65504 in one chunk: all three are overflows
    e = _pe(
        [1.0, 2.0, 3.0, 4.0], [INF, -INF, 65504.0, 2.0], [1.0, 1e6, 65470.0, 2.0], [1.0, INF, 65472.0, 2.0]
    )
    assert _masks(e)["overflow"] == ([True, True, True, False], OVER_NOTE)
    assert _masks(e)["nan"] == ([False] * 4, "")
    # every result finite: the masks are still boolean arrays
    out = F.masks(
        _pe([1.0, 2.0], [1.0, 2.0], [1.0, 2.0], [1.0, 2.0]),
        SimpleNamespace(ref=_ref()),
        get_format("fp16"),
        {},
    )
    assert all(m.dtype == bool and m.shape == (2,) for m, _ in out.values())
    # a finite result where f is undefined (NaN of the same sign bit) has no sign
    e = _pe([-1.0, -2.0], [1.0, 2.0], [NAN, NAN], [NAN, NAN])
    assert _masks(e)["sign"] == ([False, False], "")
    # the reference's parameters choose its monotone pieces
    seen = []
    ref = SimpleNamespace(bounds=None, arity=1, pieces=lambda p: seen.append(p) or ((-INF, INF, -1),))
    out = F.masks(
        _pe([1.0, 2.0], [1.0, 2.0], [1.0, 2.0], [1.0, 2.0]),
        SimpleNamespace(ref=ref),
        get_format("fp16"),
        {"beta": -1.0},
    )
    assert seen == [{"beta": -1.0}] and out["monotonicity"][0].tolist() == [False, True]


def test_sign_needs_a_defined_exact_value():
    # a finite result of the other sign bit than the exact NaN (numpy's log(-1) is -NaN): no sign
    e = _pe([-1.0, -2.0, 3.0], [-1.0, 2.0, -1.0], [NAN, -NAN, 1.0], [NAN, NAN, 1.0])
    assert _masks(e)["sign"] == ([False, False, True], "")


def test_explain_largest_finite_value_of_the_storage_format(monkeypatch):
    # fp32 arithmetic, fp16 storage: the storage rounding onto 65504 is judged against fp16's
    # largest value, an operation of the formula against fp32's
    store = _t("rounding to fp16", [65504.001], 65504.0, 65504.001, file="(storage)", line=0)
    got = _explain(monkeypatch, [store], "overflow", storage="fp16", compute="fp32")[0]
    assert got == {
        "op": "rounding to fp16",
        "file": "(storage)",
        "line": 0,
        "text": "rounding to fp16(65504) rounded to the largest finite value 65504 at (storage):0",
    }
    op = _t("*", [256.0, 255.875], 65504.0, 65504.0)
    got = _explain(monkeypatch, [op], "overflow", storage="fp16", compute="fp32")[0]
    assert got["text"] == NOEXC.format("*", WHAT["overflow"]) + AT


def test_masks_all_at_the_saturation_value_and_a_sign_beside_an_undefined_value():
    # every RN(f) is the largest value 6 of fp4_e2m1: 4 is below it where f = 100 overflows
    e = _pe([1.0], [4.0], [100.0], [6.0])
    assert _masks(e, "fp4_e2m1")["overflow"] == ([True], OVER_NOTE)
    # a real sign finding next to a finite result where f is undefined
    e = _pe([1.0, 2.0], [-1.0, 1.0], [1.0, NAN], [1.0, NAN])
    assert _masks(e)["sign"] == ([True, False], "")


def _const(exact, out, line=3):
    return _t("const", [], np.asarray(out, dtype=float), np.asarray(exact, dtype=float), line=line)


def test_lossy_constants_by_hand():
    f16, b16 = get_format("fp16"), get_format("bf16")

    def lossy(exact, out, fmt=f16):
        return F._lossy_constant(_const(exact, out), fmt)

    assert lossy(1e-9, 0.0) == {
        "kind": "constant",
        "value": 1e-9,
        "rounded": 0.0,
        "file": "f.py",
        "line": 3,
        "text": "constant 1e-09 underflows to 0 in fp16 (becomes 0) at f.py:3",
    }
    assert lossy(135135.0, INF)["text"] == "constant 135135 overflows in fp16 (becomes inf) at f.py:3"
    assert lossy(-135135.0, -INF)["rounded"] == "-inf"
    d = lossy(1.0, NAN)
    assert d["rounded"] == "nan" and d["text"] == "constant 1 overflows in fp16 (becomes NaN) at f.py:3"
    # fp16's subnormals are below 2^-14 = 6.103515625e-05, that value itself is normal
    assert lossy(1e-5, 1.0013580322265625e-05)["text"] == (
        "constant 1e-05 is subnormal in fp16 (becomes 1.00136e-05) at f.py:3"
    )
    assert lossy(-1e-5, -1.0013580322265625e-05)["text"].startswith("constant -1e-05 is subnormal")
    assert lossy(6.1035e-05, 2.0**-14) is None
    # half of bf16's 8 bits: a relative change of more than 2^-4
    assert lossy(1.0, 1.0625, b16) is None
    assert lossy(1.0, 1.07, b16)["text"] == (
        "constant 1 loses more than half its significant bits in bf16 (becomes 1.07) at f.py:3"
    )
    assert lossy(-1.0, -1.07, b16)["value"] == -1.0
    assert lossy(0.1234567891234, 0.2, b16)["text"].startswith("constant 0.1234567891 loses")
    assert lossy(1.0, 1.07, f16)["rounded"] == 1.07  # (fp16 keeps 11 bits: 2^-5.5 = 0.022 < 0.07)
    assert lossy(1.0, 1.02, f16) is None
    # no finding: an exact zero, a constant kept exactly, a table of constants
    assert lossy(0.0, 0.0) is None and lossy(0.0, 1.0) is None and lossy(0.1, 0.1) is None
    assert lossy([1e-9, 1.0], [0.0, 1.0]) is None and lossy(1e-9, [0.0, 0.0]) is None
    assert lossy([1e-9, 1.0], 0.0) is None
    assert lossy([1e-9], [0.0])["value"] == 1e-9


def test_hidden_overflow_by_hand(monkeypatch):
    f16, f32 = get_format("fp16"), get_format("fp32")
    x = np.arange(1.0, 7.0)
    e = _pe(x, [1.0, 2.0, 3.0, NAN, 5.0, 6.0], x, x)
    ones = np.ones(6)
    entries = [
        _const(135135.0, INF, line=4),
        _const(135135.0, 0.0, line=4),  # the same constant again: listed once, as first seen
        _const(0.5, 0.5, line=6),
        _t("*", [x, x], np.array([1.0, INF, INF, INF, 5.0, NAN]), x, line=5),
        _t("exp", [np.full(6, INF)], np.full(6, INF), x, line=7),  # from an infinite operand: not hidden
        _t("/", [np.full(6, INF), x], np.full(6, INF), x, line=7),
        _const(1e-9, 0.0, line=10),  # another lossy constant
        _t("*", [x, ones], np.array([INF, 1.0, 1.0, 1.0, 1.0, 1.0]), x, line=5),  # the same operation
        _t("+", [np.array(1.0)], np.array(INF), np.array(INF), line=8),  # one value for every input
        _t("-", [x], x, x, line=9),
    ]
    text = "{} at f.py:{} overflowed to inf/NaN for {} inputs whose final result is finite (right only by saturation; a source of NaN gradients)"
    got = F.hidden(None, f16, f16, {}, e, entries)
    assert got == [
        {
            "kind": "hidden_overflow",
            "op": "*",
            "file": "f.py",
            "line": 5,
            "count": 4,
            "intervals": [[1.0, 3.0], [6.0, 6.0]],
            "intervals_total": 2,
            "text": text.format("*", 5, 4),
        },
        {
            "kind": "hidden_overflow",
            "op": "+",
            "file": "f.py",
            "line": 8,
            "count": 5,
            "intervals": [[1.0, 3.0], [5.0, 6.0]],
            "intervals_total": 2,
            "text": text.format("+", 8, 5),
        },
        {
            "kind": "constant",
            "value": 135135.0,
            "rounded": "inf",
            "file": "f.py",
            "line": 4,
            "text": "constant 135135 overflows in fp16 (becomes inf) at f.py:4",
        },
        {
            "kind": "constant",
            "value": 1e-9,
            "rounded": 0.0,
            "file": "f.py",
            "line": 10,
            "text": "constant 1e-09 underflows to 0 in fp16 (becomes 0) at f.py:10",
        },
    ]
    assert all(type(h["count"]) is int for h in got[:2])
    # constants are judged in the compute format (storage fp16 both times)
    sub = [_const(1e-5, 1.0013580322265625e-05)]
    assert (
        F.hidden(None, f16, f16, {}, e, sub)[0]["text"]
        == "constant 1e-05 is subnormal in fp16 (becomes 1.00136e-05) at f.py:3"
    )
    assert F.hidden(None, f16, f32, {}, e, sub)[0]["text"] == (
        "constant 1e-05 loses more than half its significant bits in fp32 (becomes 1.00136e-05) at f.py:3"
    )
    # at most MAX_INTERVALS runs are listed
    x = np.arange(130.0)
    e = _pe(x, x, x, x)
    out = np.where(np.arange(130) % 2 == 0, INF, 1.0)
    (h,) = F.hidden(None, f16, f16, {}, e, [_t("*", [x], out, x)])
    assert len(h["intervals"]) == 64 and h["intervals_total"] == 65 and h["count"] == 65
    assert h["intervals"][63] == [126.0, 126.0]
    # no recorded trace: the formula is traced at e's inputs, with its parameters
    seen = []

    def fake_trace(cand, storage, compute_fmt, params, xs, x2=None):
        seen.append((cand, storage, compute_fmt, params, xs.tolist(), x2))
        return [_const(1e-9, 0.0)]

    monkeypatch.setattr(F, "trace", fake_trace)
    e = _pe([1.0, 2.0], [1.0, 2.0], [1.0, 2.0], [1.0, 2.0])
    assert [h["kind"] for h in F.hidden("cand", f16, f32, {"a": 1}, e)] == ["constant"]
    assert seen == [("cand", f16, f32, {"a": 1}, [1.0, 2.0], None)]
    # a gated unit (x, b): nothing, not even a trace
    e = _pe([1.0], [1.0], [1.0], [1.0], x2=[2.0])
    assert (
        F.hidden("cand", f16, f32, {}, e) == []
        and F.hidden("cand", f16, f32, {}, e, entries) == []
        and len(seen) == 1
    )


def test_monotone_edges_of_a_chunk_that_ends_or_starts_at_the_turning_point():
    # the turning point belongs to both pieces: a chunk ending (or starting) there has an edge
    # in the piece it begins (or ends) too, so that the step across the chunk edge is compared
    assert _edges([-2.0, -1.0, 0.0], [2.0, 1.0, 0.0]) == [
        [[-2.0, 2.0, 2.25], [0.0, 0.0, 0.25]],
        [[0.0, 0.0, 0.25], [0.0, 0.0, 0.25]],
    ]
    assert _edges([0.0, 1.0], [0.0, 1.0]) == [
        [[0.0, 0.0, 0.25], [0.0, 0.0, 0.25]],
        [[0.0, 0.0, 0.25], [1.0, 1.0, 1.25]],
    ]


def test_backwards_steps_worked_by_hand():
    # a result that moves against its piece's direction from one input to the next; equal
    # results (and -0 then +0) are no step back, and a piece's steps skip the inputs outside it
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    got = np.array([3.0, 3.0, 2.0, 2.5, -0.0, 0.0])
    ok = np.ones(6, bool)
    down, up = ((-math.inf, math.inf, -1),), ((-math.inf, math.inf, 1),)
    assert F._backwards(x, got, ok, down).tolist() == [False, False, False, True, False, False]
    assert F._backwards(x, got, ok, up).tolist() == [False, False, True, False, True, False]
    # two pieces (up to 3, down from 3): the masked path; x = 5 (not finite here) is skipped,
    # so x = 6 steps from x = 4's 2.5 down to 0: no step back on the decreasing piece
    ok[4] = False
    two = ((-math.inf, 3.0, 1), (3.0, math.inf, -1))
    assert F._backwards(x, got, ok, two).tolist() == [False, False, True, True, False, False]
    got[5] = 2.5  # equal to x = 4's: no step back
    assert F._backwards(x, got, ok, two).tolist() == [False, False, True, True, False, False]
    got[5] = 4.0  # now up from 2.5: a step back at x = 6
    assert F._backwards(x, got, ok, two).tolist() == [False, False, True, True, False, True]
