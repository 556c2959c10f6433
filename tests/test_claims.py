"""The README's claims, each pinned by a number derived in the test (mpmath, exact rationals,
hand-worked cases with the derivation in a comment), never copied from the tool's output.

The first block catches the ten bugs that issue #20 found the suite let through (each test
is named after what it checks); benchmarks/mutation.py re-introduces them, and more, one at a
time and runs these tests to prove it.
"""

import importlib
import json
import math
import re
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import mpmath as mp
import numpy as np
import pytest

import audit
from audit.cli import main

ROOT = Path(__file__).resolve().parent.parent

# Every finite fp16 value, ascending, decoded from bit patterns by numpy (not the tool):
# 0x0000..0x7bff are +0 .. 65504, 0x8000..0xfbff are -0 .. -65504.
_BITS = np.arange(0x10000, dtype=np.uint32).astype(np.uint16)
_ALL16 = _BITS.view(np.float16)
FP16 = np.sort(_ALL16[np.isfinite(_ALL16)].astype(np.float64), kind="stable")
assert len(FP16) == 2 * 0x7C00  # 63,488 finite values, both zeros


def fp16_between(lo, hi):
    return FP16[(FP16 >= lo) & (FP16 <= hi)]


def ulp16(f):
    """ulp_fp16(f) per the README: 2^(max(e, -14) - 10), e = floor(log2 |f|); 2^-24 at 0."""
    f = np.asarray(f, dtype=np.float64)
    with np.errstate(divide="ignore"):
        e = np.floor(np.log2(np.abs(f)))
    e = np.where(f == 0, -14, e)
    return np.ldexp(1.0, (np.maximum(e, -14) - 10).astype(int))


@pytest.fixture
def usermod(tmp_path, monkeypatch):
    """Write a user module ``name`` (source text) on the path: 'name:function' targets."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def make(name, source):
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        sys.modules.pop(name, None)
        importlib.invalidate_caches()
        return name

    return make


def finding(r, kind):
    fs = [f for f in r.findings if f.kind == kind]
    assert len(fs) == 1, (kind, [f.kind for f in r.findings])
    return fs[0]


def kinds(r):
    return sorted(f.kind for f in r.findings)


# ----------------------------------------------------------------------------------------
# 1. the clip's upper bound for sigmoid.naive in fp16 (README: hi = 11.0859375, clamp;
#    its NaN starts at 11.09375; after the clip its worst error is 1.76 ULP)
# ----------------------------------------------------------------------------------------


def naive_sigmoid_fp16(x):
    """exp(x) / (1 + exp(x)) with every operation rounded to fp16: exp in float64 rounded,
    + and / by numpy's float16 (computed in float32 and rounded: 24 >= 2*11 + 2 bits, so
    the double rounding is innocuous and each operation is the correctly rounded one)."""
    h = np.float16
    with np.errstate(all="ignore"):
        t = np.exp(np.asarray(x, dtype=np.float64)).astype(h)
        return (t / (h(1) + t)).astype(np.float64)


def test_sigmoid_naive_fp16_clip_hi_is_the_last_input_before_exp_overflows():
    # exp(x) rounds to inf in fp16 once e^x >= 65504 + 16 (the largest finite value plus half
    # of its ulp, 32): then inf / inf = NaN.  The last fp16 input below that is the clip's hi.
    last_finite = max(float(v) for v in fp16_between(8, 16) if mp.exp(mp.mpf(float(v))) < 65520)
    assert last_finite == 11.0859375  # the README's figure (11 + 11/128; fp16 steps 2^-7 here)
    nxt = float(FP16[np.searchsorted(FP16, last_finite) + 1])
    assert nxt == 11.09375 and math.isnan(naive_sigmoid_fp16([nxt])[0])
    (r,) = audit.sweep("sigmoid.naive", dtype="fp16")
    c = r.clip
    assert c["hi"] == last_finite and c["hi_action"] == "clamp"
    assert c["lo"] is None and c["lo_action"] == "none"  # e^x underflows to 0: 0 / 1 = 0, right


def test_sigmoid_naive_fp16_default_tolerance_and_error_after_the_clip():
    # the exact sigmoid in float64 (relative error ~1e-16: ample for ULP errors to 1e-9)
    def sig(x):
        return 1.0 / (1.0 + np.exp(-x))

    with np.errstate(all="ignore"):
        core = fp16_between(-2, 2)
        err_core = np.abs(naive_sigmoid_fp16(core) - sig(core)) / ulp16(sig(core))
        tol = max(2.0, 2 * float(err_core.max()))  # README: twice the core's worst, >= 2 ULP
        clamped = np.minimum(FP16, 11.0859375)
        f = sig(FP16)
        inside = float((np.abs(naive_sigmoid_fp16(clamped) - f) / ulp16(f)).max())
    (r,) = audit.sweep("sigmoid.naive", dtype="fp16")
    assert r.clip["tolerance"]["max_ulp"] == pytest.approx(tol, rel=1e-9)
    assert r.clip["max_ulp_inside"] == pytest.approx(inside, rel=1e-9)
    assert round(inside, 2) == 1.76  # the README's figure


# ----------------------------------------------------------------------------------------
# 2-3. sign and range findings on small hand-built candidates
# ----------------------------------------------------------------------------------------


def test_sign_finding_on_a_hand_built_tanh(usermod):
    usermod(
        "signmod",
        """
        import numpy as np
        def f(x):  # tanh with the sign flipped on [0.5, 1], and -0 for tiny positive x
            y = np.tanh(x.astype(np.float64))
            y = np.where((x >= 0.5) & (x <= 1), -y, y)
            y = np.where((x > 0) & (x <= 2.0**-20), -0.0, y)
            return y.astype(x.dtype)
    """,
    )
    (r,) = audit.sweep("signmod:f", reference="tanh", dtype="fp16")
    s = finding(r, "sign")
    # [0.5, 1]: the binade [0.5, 1) holds 2^10 fp16 values, plus 1.0 itself
    assert s.intervals == [[0.5, 1.0]] and s.count == 1024 + 1
    # a zero result is a flush (underflow), never a sign finding: (0, 2^-20] holds the
    # subnormals k 2^-24 for k = 1 .. 2^4 (2^-20 < 2^-14, the smallest normal)
    u = finding(r, "underflow")
    assert u.intervals == [[2.0**-24, 2.0**-20]] and u.count == len(fp16_between(2.0**-24, 2.0**-20))
    assert u.count == 16


def test_range_findings_on_hand_built_sigmoid_and_gelu(usermod):
    usermod(
        "rangemod",
        """
        import numpy as np
        from scipy.special import expit, erfc
        def sig(x):  # right except 1 + 2^-10 (> 1, outside [0, 1]) for x >= 4
            y = expit(x.astype(np.float64))
            return np.where(x >= 4, 1 + 2.0**-10, y).astype(x.dtype)
        def gelu(x):  # x (1 + 2^-10) > x = max(0, x) on [1, 2]
            x64 = x.astype(np.float64)
            y = 0.5 * x64 * erfc(-x64 / np.sqrt(2))
            return np.where((x >= 1) & (x <= 2), x64 * (1 + 2.0**-10), y).astype(x.dtype)
    """,
    )
    (r,) = audit.sweep("rangemod:sig", reference="sigmoid", dtype="fp16")
    f = finding(r, "range")
    assert f.intervals == [[4.0, 65504.0]] and f.count == len(fp16_between(4, 65504))
    # 4 .. 65504: the 14 binades 2^2 .. 2^15, 1024 values each (65504 = 0x7bff is the last
    # value of the binade 2^15)
    assert f.count == 14 * 1024
    (r,) = audit.sweep("rangemod:gelu", reference="gelu", dtype="fp16")
    f = finding(r, "range")
    # x (1 + 2^-10) on [1, 2) lies at least one fp16 step (2^-10) above x; at 2 it is 2 + 2^-9,
    # an fp16 value: every input of [1, 2] (1025 of them) leaves [min(0, x), max(0, x)]
    assert f.intervals == [[1.0, 2.0]] and f.count == 1025


# ----------------------------------------------------------------------------------------
# 4-6. the gate: a shrunken clip range, a result missing from the baseline, the slack
# ----------------------------------------------------------------------------------------

GATE_SPEC = """
baseline = "base.json"
slack = {slack}

[[audit]]
name = "g"
targets = ["sigmoid.naive", "erf.rational"]
dtype = "fp16"
"""


@pytest.fixture
def gate(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)

    def setup(slack="1e-9"):
        (tmp_path / "actaudit.toml").write_text(GATE_SPEC.format(slack=slack))
        assert main(["baseline"]) == 0
        capsys.readouterr()
        return json.loads((tmp_path / "base.json").read_text())

    def check(doc):
        (tmp_path / "base.json").write_text(json.dumps(doc))
        code = main(["check"])
        return code, capsys.readouterr().out

    return setup, check


def test_gate_passes_its_own_baseline_and_fails_a_shrunken_clip_range(gate):
    setup, check = gate
    doc = setup()
    code, out = check(doc)
    assert code == 0, out
    naive, rational = "g/sigmoid.naive/fp16/fp16", "g/erf.rational/fp16/fp16"
    # the baseline had a wider range than now: sigmoid.naive up to 11.09375 (one step more)
    d = json.loads(json.dumps(doc))
    assert d["entries"][naive]["clip"]["hi"] == 11.0859375
    d["entries"][naive]["clip"]["hi"] = 11.09375
    code, out = check(d)
    assert code == 1 and "clip range shrank" in out and "sigmoid.naive" in out
    # the lo side: erf.rational's range [-a, a] (erf saturates at +-1 in fp16), baseline -a - 1
    d = json.loads(json.dumps(doc))
    lo = d["entries"][rational]["clip"]["lo"]
    assert lo is not None and lo < 0
    d["entries"][rational]["clip"]["lo"] = lo - 1
    code, out = check(d)
    assert code == 1 and "clip range shrank" in out and "erf.rational" in out
    # a wider range now than in the baseline is no failure
    d = json.loads(json.dumps(doc))
    d["entries"][naive]["clip"]["hi"] = 11.0
    code, out = check(d)
    assert code == 0, out


def test_gate_fails_a_result_missing_from_the_baseline(gate):
    setup, check = gate
    doc = setup()
    del doc["entries"]["g/erf.rational/fp16/fp16"]
    code, out = check(doc)
    assert code == 1 and "not in the baseline" in out and "erf.rational" in out


def test_gate_slack_is_relative_and_compared_the_right_way(gate):
    setup, check = gate
    doc = setup(slack="1e-3")
    key = "g/sigmoid.naive/fp16/fp16"
    # relative: a metric of any magnitude (max_ulp ~ 1.8, max_abs ~ 1e-4, mean_ulp ~ 0.2)
    for m in ("max_ulp", "max_abs", "mean_ulp"):
        now = doc["entries"][key][m]
        assert 0 < now < 10
        for base, fails in (
            (now / (1 + 2e-3), True),  # now 0.2% worse: beyond a slack of 0.1%
            (now / (1 + 0.5e-3), False),  # now 0.05% worse: within the slack
            (now * 2, False),
        ):  # better than the baseline: passes
            d = json.loads(json.dumps(doc))
            d["entries"][key][m] = base
            code, out = check(d)
            assert (code == 1) == fails, (m, base, out)
            assert (f"{m} got worse" in out) == fails


# ----------------------------------------------------------------------------------------
# 7. the 0.5 ULP cap for correctly rounded results
# ----------------------------------------------------------------------------------------


def _oracle(rounded, hi, lo=None):
    from audit.oracle.oracle import OracleValues

    hi = np.asarray(hi, dtype=np.float64)
    return OracleValues(
        np.asarray(rounded, dtype=np.float64),
        hi,
        np.zeros_like(hi) if lo is None else np.asarray(lo, dtype=np.float64),
        0,
    )


def test_ulp_error_of_a_correctly_rounded_result_is_capped_at_half():
    from audit.measure.metrics import point_errors
    from audit.numbers.formats import get_format

    h = get_format("fp16")
    # f(x) carried in float64 as 1 + 2^-11 + 2^-52: a hair above the fp16 midpoint between 1
    # and 1 + 2^-10, while the oracle (deciding exactly) says RN(f) = 1.  Uncapped, the result
    # 1 would be (2^-11 + 2^-52) / 2^-10 = 0.5 + 2^-42 ULP off: reported as exactly 0.5.
    e = point_errors([0.0], [1.0], _oracle([1.0], [1 + 2.0**-11 + 2.0**-52]), h)
    assert e.ulp_err[0] == 0.5 and bool(e.correct[0])
    # the same value with a result that is not the rounding: not capped (1 - 2^-11 below 1
    # has ulp 2^-11 in the binade [0.5, 1); the error is (2^-11 + 2^-11 + 2^-52) / 2^-10)
    e = point_errors([0.0], [1 - 2.0**-11], _oracle([1.0], [1 + 2.0**-11 + 2.0**-52]), h)
    assert e.ulp_err[0] == 1.0 + 2.0**-42 and not bool(e.correct[0])


# ----------------------------------------------------------------------------------------
# 8. overflow findings: saturated to the largest finite value; finite where f overflows
# ----------------------------------------------------------------------------------------


def test_overflow_finding_sub_cases_on_a_hand_built_exp(usermod):
    usermod(
        "ovmod",
        """
        import numpy as np
        def f(x):
            y = np.exp(x.astype(np.float64))
            y = np.where((x >= 10) & (x <= 11), 65504.0, y)   # saturated: e^11 = 59874 < 65504
            y = np.where(x >= 12, 65504.0, y)                  # finite where e^x overflows fp16
            with np.errstate(over="ignore"):
                return y.astype(x.dtype)
    """,
    )
    (r,) = audit.sweep("ovmod:f", reference="exp", dtype="fp16")
    f = finding(r, "overflow")
    # e^11 = 59874.1 rounds to 59872 in fp16 (steps of 32): < 65504, so [10, 11] is saturated.
    # Between 11 and 12 the result e^x is right (inf from 11.09375 on, e^x >= 65520); from 12
    # on the exact value overflows fp16 and the result 65504 is finite.
    assert float(mp.exp(11)) < 65504 - 16 and mp.exp(12) >= 65520
    assert f.intervals == [[10.0, 11.0], [12.0, 65504.0]]
    assert f.count == len(fp16_between(10, 11)) + len(fp16_between(12, 65504))
    assert len(fp16_between(10, 11)) == 129  # steps of 2^-7 in [8, 16): 128 steps + 1


# ----------------------------------------------------------------------------------------
# 9. relative error where f(x) = 0
# ----------------------------------------------------------------------------------------


def test_relative_error_is_inf_where_the_exact_value_is_zero(usermod):
    usermod(
        "zmod",
        """
        import numpy as np
        def f(x):  # relu, but 2^-24 (the smallest fp16 subnormal) at x = 0 (both zeros)
            y = np.maximum(x.astype(np.float64), 0.0)
            return np.where(x == 0, 2.0**-24, y).astype(x.dtype)
    """,
    )
    (r,) = audit.sweep("zmod:f", reference="relu", dtype="fp16")
    # |2^-24 - 0| / |0| is infinite; in ULPs it is 2^-24 / ulp(0) = 2^-24 / 2^-24 = 1
    assert r.max_rel == math.inf
    assert r.max_ulp == 1.0 and r.max_abs == 2.0**-24
    assert r.to_dict()["max_rel"] in ("inf", math.inf)
    # and where f(x) = 0 and the result is 0 too, the relative error is 0 (relu itself)
    (r,) = audit.sweep("relu.max", dtype="fp16")
    assert r.max_rel == 0.0 and r.max_ulp == 0.0


# ----------------------------------------------------------------------------------------
# 10. p99: its definition, and the exact / histogram switch at 2^24 finite results
# ----------------------------------------------------------------------------------------


def _errors(u):
    from audit.measure.metrics import PointErrors

    u = np.asarray(u, dtype=np.float64)
    n = len(u)
    z = np.zeros(n)
    return PointErrors(
        z, z, z, z, z, u, np.zeros(n, np.int64), u.copy(), u.copy(), np.zeros(n, np.int8), np.zeros(n, bool)
    )


def test_p99_is_the_smallest_error_bounding_99_percent():
    from audit.measure.metrics import Summary
    from audit.numbers.formats import get_format

    h = get_format("fp16")
    s = Summary(exact_p99=True)
    s.add(_errors([i / 100 for i in range(100, 0, -1)]), h)
    # 100 errors 0.01 .. 1.00: 99 of them (99%) are <= 0.99, and no smaller value bounds 99
    assert s.p99_ulp == 0.99 and s.p99_exact
    s = Summary(exact_p99=True)
    s.add(_errors([1.0] * 98 + [5.0, 7.0]), h)  # 99 inputs are <= 5.0, only 98 <= 1.0
    assert s.p99_ulp == 5.0
    # histogram mode: 3.0 = 1.5 * 2^1 falls in the bin [3, 3 + 2^1 * 2^-8) of relative width
    # 2^-8; the p99 reported is that bin's upper edge, 3.0078125, an upper bound
    s = Summary(exact_p99=False)
    s.add(_errors([3.0] * 100), h)
    assert s.p99_ulp == 3.0 + 2.0**-7 and not s.p99_exact


def test_p99_stays_exact_up_to_2_pow_24_errors_then_switches_to_a_histogram():
    from audit.measure.metrics import Summary
    from audit.numbers.formats import get_format

    h = get_format("fp16")
    s = Summary(exact_p99=True)
    s.add(_errors([0.0]), h)
    d, _ = s.state()
    # a state holding 2^24 - 2 errors (a zero-stride view: no memory), as if from a checkpoint
    d = dict(d, count=2**24 - 2, finite=2**24 - 2)
    big = np.broadcast_to(np.float64(0.0), (2**24 - 2,))
    s = Summary.from_state(d, [big])
    s.add(_errors([1.0, 2.0]), h)  # 2^24 errors in all: still exact (README: up to 2^24)
    assert s.p99_exact
    s.add(_errors([1.0]), h)  # 2^24 + 1: a histogram from here on
    assert not s.p99_exact
    assert s.finite == 2**24 + 1


# ----------------------------------------------------------------------------------------
# Definitions: ulp, ULP error, ULP distance, absolute and relative error, classes
# ----------------------------------------------------------------------------------------


def test_ulp_definition_hand_worked():
    from audit.numbers.formats import get_format

    h, b, e4 = get_format("fp16"), get_format("bf16"), get_format("fp8_e4m3")
    # fp16 p = 11, emin = -14: ulp(1) = 2^-10, ulp(65504) = 2^(15 - 10) = 32,
    # ulp(2^-14) = 2^-24, ulp(2^-20) = 2^(max(-20, -14) - 10) = 2^-24, ulp(0) = 2^-24
    assert h.ulp([1.0, 1.5, 65504.0, 2.0**-14, 2.0**-20, 0.0, -3.0]).tolist() == [
        2.0**-10,
        2.0**-10,
        32.0,
        2.0**-24,
        2.0**-24,
        2.0**-24,
        2.0**-9,
    ]
    # bf16 p = 8: ulp(1) = 2^-7; E4M3 p = 4, emin = -6: ulp(448) = 2^(8 - 3) = 32, ulp(0) = 2^-9
    assert b.ulp([1.0])[0] == 2.0**-7
    assert e4.ulp([448.0, 0.0])[0:2].tolist() == [32.0, 2.0**-9]


def test_ulp_error_distance_abs_rel_on_a_hand_worked_fp16_case(usermod):
    usermod(
        "offmod",
        """
        import numpy as np
        def f(x):  # x + 3 ulps of fp16 at x = 1 (1 + 3 * 2^-10); identity elsewhere
            y = x.astype(np.float64)
            return np.where(x == 1, 1 + 3 * 2.0**-10, y).astype(x.dtype)
    """,
    )
    (r,) = audit.sweep("offmod:f", reference="hardtanh", dtype="fp16", range=(0.5, 1.0))
    # hardtanh(1) = 1 exactly: ULP error 3 * 2^-10 / 2^-10 = 3, distance 3 steps,
    # absolute 3 * 2^-10, relative 3 * 2^-10 / 1; the 1025 inputs of [0.5, 1]: one wrong
    assert r.max_ulp == 3.0 and r.max_ulp_distance == 3
    assert r.max_abs == 3 * 2.0**-10 and r.max_rel == 3 * 2.0**-10
    assert r.worst["x"] == 1.0 and r.worst["x_hex"] == "0x3c00" and r.worst["got"] == 1 + 3 * 2.0**-10
    assert r.domain.count == 1025
    assert r.correctly_rounded_fraction == Fraction(
        1024, 1025
    ) or r.correctly_rounded_fraction == pytest.approx(1024 / 1025, rel=1e-15)
    assert r.mean_ulp == pytest.approx(3 / 1025, rel=1e-12)


def test_ulp_distance_treats_both_zeros_as_one_point_and_inf_one_past_max():
    from audit.measure.metrics import point_errors
    from audit.numbers.formats import get_format

    h = get_format("fp16")
    # -0 against +0: 0 steps; 2^-24 against -2^-24: 2 steps (through the single zero);
    # 65504 against 65472: 1 step (fp16 steps of 32 there)
    e = point_errors(
        [0, 0, 0],
        [-0.0, 2.0**-24, 65504.0],
        _oracle([0.0, -(2.0**-24), 65472.0], [0.0, -(2.0**-24), 65472.0]),
        h,
    )
    assert e.ulp_dist.tolist() == [0, 2, 1]


def test_input_classes_hand_worked():
    from audit.measure.metrics import FINITE, INF, NAN, OVERFLOW_OK, point_errors
    from audit.numbers.formats import get_format

    h = get_format("fp16")
    inf, nan = math.inf, math.nan
    # results:   inf (exact overflows: right), NaN (exact 1), inf (exact 1), -inf (exact +inf)
    e = point_errors([0] * 4, [inf, nan, inf, -inf], _oracle([inf, 1.0, 1.0, inf], [1e6, 1.0, 1.0, 1e6]), h)
    assert e.cls.tolist() == [OVERFLOW_OK, NAN, INF, INF]
    e4 = get_format("fp8_e4m3")  # E4M3FN: overflow gives NaN, and a NaN result there is right
    e = point_errors([0], [nan], _oracle([nan], [1e4]), e4)
    assert e.cls.tolist() == [OVERFLOW_OK]
    # a zero result for a nonzero exact value: finite, a large error (2^-14 / 2^-24 = 1024)
    e = point_errors([0], [0.0], _oracle([2.0**-14], [2.0**-14]), h)
    assert e.cls.tolist() == [FINITE] and e.ulp_err[0] == 1024.0


# ----------------------------------------------------------------------------------------
# Specials with signed zeros
# ----------------------------------------------------------------------------------------


def test_specials_are_the_functions_limits_with_signed_zeros(usermod):
    (r,) = audit.sweep("gelu.erfc", dtype="fp16")  # 0.5 x erfc(-x / sqrt 2)
    by = {str(s["x"]): s for s in r.specials}
    # GELU(-inf) = lim x Phi(x) = -0 (x < 0, Phi(x) > 0): the sign bit set
    assert by["-inf"]["expected"] == 0 and math.copysign(1, by["-inf"]["expected"]) == -1
    assert by["inf"]["expected"] == math.inf and math.isnan(by["nan"]["expected"])
    # erfc form: -inf * erfc(inf) = -inf * 0 = NaN: a special failure
    assert math.isnan(by["-inf"]["got"]) and not by["-inf"]["ok"]
    # a kernel returning the limit -0 at -inf passes (the tool does not yet tell +0 from -0
    # in specials: exp.schraudolph(-inf) = -0 and logsigmoid(inf) = +0 pass; see issue #20)
    usermod(
        "zeromod",
        """
        import numpy as np
        from scipy.special import erfc
        def minus(x):
            x64 = x.astype(np.float64)
            with np.errstate(invalid="ignore"):
                y = 0.5 * x64 * erfc(-x64 / np.sqrt(2))
            return np.where(x64 == -np.inf, -0.0, y).astype(x.dtype)
    """,
    )
    (r,) = audit.sweep("zeromod:minus", reference="gelu", dtype="fp16")
    s = {str(s["x"]): s for s in r.specials}["-inf"]
    assert s["got"] == 0 and math.copysign(1, s["got"]) == -1
    assert s["ok"] and r.special_failures == 0


# ----------------------------------------------------------------------------------------
# Metrics: NaN never enters a maximum; the worst input is the first of equal maxima
# ----------------------------------------------------------------------------------------


def test_max_ulp_is_over_finite_results_only():
    # sigmoid.naive in fp16 is NaN from 11.09375 on: the maximum is over the other inputs,
    # computed here against the float64 sigmoid
    with np.errstate(all="ignore"):
        got = naive_sigmoid_fp16(FP16)
        f = 1.0 / (1.0 + np.exp(-FP16))
        fin = np.isfinite(got)
        worst = float((np.abs(got[fin] - f[fin]) / ulp16(f[fin])).max())
    (r,) = audit.sweep("sigmoid.naive", dtype="fp16")
    assert r.max_ulp == pytest.approx(worst, rel=1e-9) and math.isfinite(r.mean_ulp)
    assert r.nan_count == int((~fin).sum()) == len(fp16_between(11.09375, 65504))


def test_worst_input_is_the_first_of_equal_maxima_when_chunks_merge():
    from audit.measure.metrics import Summary
    from audit.numbers.formats import get_format

    h = get_format("fp16")
    a, b = Summary(), Summary()
    ea, eb = _errors([1.0, 3.0]), _errors([3.0, 2.0])
    ea.x[:] = [1.0, 2.0]
    eb.x[:] = [3.0, 4.0]
    a.add(ea, h)
    b.add(eb, h)
    a.merge(b)  # chunks merged in input order: the 3.0 at x = 2 comes first
    assert a.max_ulp == 3.0 and a.worst["x"] == 2.0
    assert a.count == 4 and a.mean_ulp == (1 + 3 + 3 + 2) / 4


# ----------------------------------------------------------------------------------------
# Clip: the default tolerance leaves failing inputs out of the core
# ----------------------------------------------------------------------------------------


def test_default_clip_tolerance_leaves_findings_out_of_the_core(usermod):
    usermod(
        "coremod",
        """
        import numpy as np
        from scipy.special import expit
        def f(x):  # sigmoid rounded from float64 (errors <= 0.5 ULP + 1e-12), but 1 + 2^-10 at x = 1
            y = expit(x.astype(np.float64))
            return np.where(x == 1, 1 + 2.0**-10, y).astype(x.dtype)
    """,
    )
    (r,) = audit.sweep("coremod:f", reference="sigmoid", dtype="fp16")
    assert finding(r, "range").intervals == [[1.0, 1.0]]
    # x = 1 (a range finding) is left out of the core, whose worst error is then at most
    # 0.5 ULP (+ float64's rounding): the tolerance is the floor, 2 ULP.  Had x = 1 counted,
    # it would be 2 (1 + 2^-10 - 0.7311) / 2^-11 = 1103 ULP.
    assert r.clip["tolerance"]["max_ulp"] == 2.0
    assert r.max_ulp == pytest.approx(float((1 + 2.0**-10 - 1 / (1 + mp.e**-1)) / 2.0**-11), rel=1e-9)


# ----------------------------------------------------------------------------------------
# Bit-trick candidates compute in fp32 whatever the storage format
# ----------------------------------------------------------------------------------------


def test_schraudolph_exp_always_computes_in_fp32():
    # bits_as_float32(int(12102203 x + 1064866805)), every operation in float32 (numpy);
    # 12102203 < 2^24 is exact in float32, 1064866805 rounds to 1064866816 (a multiple of 64)
    x = fp16_between(-80, 80)
    with np.errstate(all="ignore"):
        t = np.float32(12102203) * x.astype(np.float32) + np.float32(1064866805)
        y = np.trunc(t).astype(np.int64).astype(np.uint32).view(np.float32)
        expect = y.astype(np.float16).astype(np.float64)
    for compute in (None, "fp16"):
        (r,) = audit.sweep(
            "exp.schraudolph", dtype="fp16", compute=compute, range=(-80, 80), keep_points=True
        )
        assert r.compute == "fp32"
        assert np.array_equal(r.points.got, expect)


# ----------------------------------------------------------------------------------------
# Resource refusals: samples beyond 2^24 (fp32) or 2^20 (fp64), grids beyond 16384
# ----------------------------------------------------------------------------------------


def test_resource_limits_are_refused_up_front():
    from audit.errors import BadOptionError

    with pytest.raises(BadOptionError, match="more than"):
        audit.sweep("relu.max", dtype="fp32", samples=2**24 + 1)
    with pytest.raises(BadOptionError, match="more than"):
        audit.sweep("gelu.tanh", dtype="fp64", samples=2**20 + 1)
    with pytest.raises(BadOptionError, match="16384"):
        audit.sweep("swiglu.silu_mul", dtype="fp16", grid=16385)


# ----------------------------------------------------------------------------------------
# The gate: a NaN metric never passes a tolerance
# ----------------------------------------------------------------------------------------


def test_gate_tolerance_fails_a_nan_metric(tmp_path, monkeypatch, capsys):
    import dataclasses

    from audit.targets import candidates

    monkeypatch.chdir(tmp_path)
    (tmp_path / "actaudit.toml").write_text(
        'baseline = "b.json"\n[[audit]]\nname = "n"\ntargets = ["relu.max"]\ndtype = "fp8_e4m3"\n'
        "tolerance = { p99_ulp = 1, mean_ulp = 1 }\n".replace(", mean_ulp = 1", "")
    )
    assert main(["baseline"]) == 0 and main(["check"]) == 0
    capsys.readouterr()

    def all_nan(x, m):  # every result NaN: no finite result, so p99 is NaN
        return x * math.nan

    old = candidates.REGISTRY["relu.max"]
    monkeypatch.setitem(candidates.REGISTRY, "relu.max", dataclasses.replace(old, fn=all_nan))
    assert main(["check"]) == 1
    out = capsys.readouterr().out
    assert "p99_ulp = nan exceeds the tolerance" in out


# ----------------------------------------------------------------------------------------
# Optional dependencies: in CI a missing one that the README's test command installs fails
# ----------------------------------------------------------------------------------------


def test_missing_optional_dependency_fails_in_ci_and_skips_elsewhere(monkeypatch):
    from _pytest.outcomes import Failed, Skipped
    from helpers import optional

    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    monkeypatch.setitem(sys.modules, "jax", None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(Failed, match="README's test command installs it"):
        optional("torch")
    with pytest.raises(Skipped, match="not installed by the README's test command"):
        optional("jax")  # jax is not in the README's install command: it may skip
    monkeypatch.delenv("CI")
    with pytest.raises(Skipped):
        optional("torch")


# ----------------------------------------------------------------------------------------
# RN_F beyond the largest finite value (README: overflow beyond max + half an ulp of max,
# the tie included as the even side allows; NaN in E4M3FN)
# ----------------------------------------------------------------------------------------


def test_rounding_at_the_top_of_the_range_hand_worked():
    from audit.numbers.formats import get_format

    h, e4, b = get_format("fp16"), get_format("fp8_e4m3"), get_format("bf16")
    # fp16: max 65504 = 2047 * 32 (odd significand), ulp 32: below 65520 rounds to 65504;
    # 65520 is the tie, whose even side is 2048 * 32 = 65536, beyond max: inf
    got = h.round([65504 + 15.99, -(65504 + 15.99), 65520.0, -65520.0, 1e6]).tolist()
    assert got == [65504.0, -65504.0, math.inf, -math.inf, math.inf]
    # E4M3FN: max 448 = 14 * 32 (even significand; 15 * 32 = 480 is NaN's pattern): the
    # tie 464 rounds to 448, anything above it overflows to NaN
    got = e4.round([464.0, -464.0, 464.5, 1e4])
    assert got[:2].tolist() == [448.0, -448.0] and np.isnan(got[2:]).all()
    # bf16: max (2^8 - 1) 2^-7 2^127, ulp 2^120: the tie max + 2^119 overflows (odd max)
    top = float((2**8 - 1) * 2.0**120)
    assert b.round([top + 2.0**119 - 2.0**100, top + 2.0**119]).tolist() == [top, math.inf]


# ----------------------------------------------------------------------------------------
# Formats (README's table), exhaustive counts, rounding without ml_dtypes' double rounding
# ----------------------------------------------------------------------------------------


def test_formats_table_matches_the_readme(capsys):
    assert main(["formats", "--json"]) == 0
    got = {f["name"]: f for f in json.loads(capsys.readouterr().out)}
    readme = {
        "fp16": (11, -14),
        "bf16": (8, -126),
        "fp8_e4m3": (4, -6),
        "fp8_e5m2": (3, -14),
        "fp32": (24, -126),
        "fp64": (53, -1022),
    }
    for name, (p, emin) in readme.items():
        assert (got[name]["precision"], got[name]["emin"]) == (p, emin), name
    from audit.numbers.formats import get_format

    # E4M3FN: max 448 (1.75 * 2^8), no infinities; fp8_e5m2: (2 - 2^-2) 2^15 = 57344
    assert get_format("fp8_e4m3").max_finite == 448.0 and not get_format("fp8_e4m3").has_inf
    assert get_format("fp8_e5m2").max_finite == 57344.0


def test_16_bit_formats_are_swept_over_every_finite_value_both_zeros():
    # fp16: exponent field 0..30 of 31 (31 is inf/NaN): 2 signs * 31 * 1024 = 63,488;
    # bf16: fields 0..254: 2 * 255 * 128 = 65,280; E4M3FN: 2 * 128 - 2 NaN patterns = 254
    for dtype, n in (("fp16", 2 * 31 * 1024), ("bf16", 2 * 255 * 128), ("fp8_e4m3", 2 * 128 - 2)):
        (r,) = audit.sweep("relu.max", dtype=dtype, keep_points=True)
        assert r.domain.exhaustive and r.domain.count == n == len(r.points.x)
        zeros = r.points.x[r.points.x == 0]
        assert sorted(math.copysign(1, z) for z in zeros) == [-1.0, 1.0]
    assert (63488, 65280) == (2 * 31 * 1024, 2 * 255 * 128)  # the README's figures


def test_bf16_and_fp8_rounding_is_single_not_through_float32():
    from helpers import PARAMS, round_exact

    from audit.numbers.formats import get_format

    # 1 + 2^-8 + 2^-30: above the bf16 midpoint 1 + 2^-8 between 1 and 1 + 2^-7, so it rounds
    # up to 1.0078125; through float32 it would first become 1 + 2^-8 (the tie) and then 1.0
    v = 1 + 2.0**-8 + 2.0**-30
    assert get_format("bf16").round([v])[0] == 1.0078125 == 1 + 2.0**-7
    # the same trap in every format narrower than float32, at every binade of [1, 2^4): the
    # midpoint above 1 * 2^k plus less than half a float32 ulp rounds up, from the definitions
    for name in ("bf16", "fp8_e4m3", "fp8_e5m2"):
        p = PARAMS[name][0]
        for k in range(4):
            x = Fraction(2**k) * (1 + Fraction(1, 2**p) + Fraction(1, 2**30))
            want = round_exact(name, x)
            assert want == Fraction(2**k) * (1 + Fraction(2, 2**p)), (name, k)
            assert get_format(name).round([float(x)])[0] == float(want), (name, k)


# ----------------------------------------------------------------------------------------
# Saturation thresholds (README: sigmoid -> 1 from 8.3203125, -> 0 up to -17.34375 in fp16;
# GELU = x from 3.447265625)
# ----------------------------------------------------------------------------------------


def test_saturation_thresholds_quoted_in_the_readme():
    # sigmoid rounds to 1 once 1 - s(x) = 1 / (1 + e^x) <= 2^-12 (half the ulp 2^-11 below 1;
    # the tie goes to 1, the even side): the first fp16 x with that
    hi = min(float(v) for v in fp16_between(4, 16) if 1 / (1 + mp.exp(mp.mpf(float(v)))) <= mp.ldexp(1, -12))
    # and to 0 while s(x) <= 2^-25 (half the smallest subnormal, the tie to 0, even)
    lo = max(
        float(v) for v in fp16_between(-30, 0) if 1 / (1 + mp.exp(-mp.mpf(float(v)))) <= mp.ldexp(1, -25)
    )
    assert (hi, lo) == (8.3203125, -17.34375)
    (r,) = audit.sweep("sigmoid.stable", dtype="fp16")
    assert r.saturation == {"high": {"x": hi, "value": 1.0}, "low": {"x": lo, "value": 0.0}}

    # GELU(x) rounds to x once x - GELU(x) = x Phi(-x) < half the step below x, for all larger
    # x (the step is below x: where x is a power of two, the smaller step of the binade below)
    def rounds_to_x(v):
        below = float(FP16[np.searchsorted(FP16, v) - 1])
        return mp.mpf(v) * mp.ncdf(-mp.mpf(v)) < (v - below) / 2

    vals = [float(v) for v in fp16_between(1, 8)]
    first = vals[max(i for i, v in enumerate(vals) if not rounds_to_x(v)) + 1]
    assert first == 3.447265625
    (r,) = audit.sweep("gelu.erf", dtype="fp16")
    assert r.saturation["high"] == {"x": first, "value": "identity"}


# ----------------------------------------------------------------------------------------
# Golden data for chosen inputs (--inputs), checked against mpmath
# ----------------------------------------------------------------------------------------


def test_golden_with_inputs_in_fp32_is_correctly_rounded(tmp_path, capsys):
    from helpers import is_nearest_even

    from audit.numbers.formats import get_format

    xs = np.array([-3.0, -0.5, 2.0**-149, 0.1, 1.0, 5.5], dtype=np.float32)
    # read like a dump: today only a dump with both columns is accepted in fp32 (a single
    # column is taken as outputs in golden order, which fp32 has not: refused; reported)
    (tmp_path / "in.csv").write_text("x,y\n" + "".join(f"{float(v)!r},{float(v)!r}\n" for v in xs))
    assert (
        main(
            [
                "golden",
                "gelu",
                "--dtype",
                "fp32",
                "--inputs",
                str(tmp_path / "in.csv"),
                "-o",
                str(tmp_path / "g.npz"),
            ]
        )
        == 0
    )
    with np.load(tmp_path / "g.npz", allow_pickle=False) as z:
        x, y, hi, lo = z["x"], z["y"], z["exact"], z["exact_lo"]
        assert z["x_bits"].tolist() == xs.view(np.uint32).tolist()
        assert z["y_bits"].tolist() == y.astype(np.float32).view(np.uint32).tolist()
    assert x.tolist() == xs.astype(np.float64).tolist()  # the inputs, in their own order
    f32 = get_format("fp32")
    with mp.workprec(200):
        for xi, yi, h, lw in zip(x.tolist(), y.tolist(), hi.tolist(), lo.tolist()):
            g = mp.mpf(xi) * mp.ncdf(mp.mpf(xi))  # GELU, independently of the tool's erfc form
            assert is_nearest_even(f32, g, yi), xi
            if g != 0:  # README: exact to the fast path's bound, 2^-45 (1 + x^2/2), <= 2^-36
                bound = min(mp.mpf(2) ** -45 * (1 + mp.mpf(xi) ** 2 / 2), mp.mpf(2) ** -36)
                assert abs((mp.mpf(h) + mp.mpf(lw) - g) / g) <= bound, xi
    # 2^-149: GELU = 2^-150 + a positive x^2 term: just above the tie, rounds up to 2^-149
    assert y[2] == 2.0**-149


# ----------------------------------------------------------------------------------------
# Report colour tiers (README: correctly rounded, <= 4, <= 64, <= 1024 ULP, worse or NaN/inf)
# ----------------------------------------------------------------------------------------


def test_report_colour_tiers_at_their_bounds():
    from reports.html import tier

    tiers = [tier(v) for v in (0.0, 0.5, 0.5000001, 4, 4.01, 64, 64.5, 1024, 1024.5, math.inf, math.nan)]
    # five distinct tiers, in order, each bound included in its own tier
    order = list(dict.fromkeys(tiers))
    assert len(order) == 5
    assert tiers == [order[i] for i in (0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 4)]


# ----------------------------------------------------------------------------------------
# Monotonicity findings on a hand-built candidate
# ----------------------------------------------------------------------------------------


def test_monotonicity_finding_where_a_hand_built_sigmoid_steps_back(usermod):
    usermod(
        "monomod",
        """
        import numpy as np
        from scipy.special import expit
        def f(x):  # sigmoid rounded from float64, but 2 fp16 steps (2 * 2^-11) low at x = 1
            y = expit(x.astype(np.float64))
            return np.where(x == 1, y - 2 * 2.0**-11, y).astype(x.dtype)
    """,
    )
    (r,) = audit.sweep("monomod:f", reference="sigmoid", dtype="fp16")
    m = finding(r, "monotonicity")
    # sigmoid increases everywhere; the rounded values never decrease, except at x = 1, which
    # lies below its predecessor's result (s(1) - 2^-10 + 2^-11 / 2 < s(1 - 2^-10)); the next
    # input's result is above it again (a forward step)
    assert m.intervals == [[1.0, 1.0]] and m.count == 1


# ----------------------------------------------------------------------------------------
# The README's first table: gelu.tanh in fp16 (unf 655, spec 1, hidden 1: x^3 overflows for
# |x| >= 40.3 though the result is right)
# ----------------------------------------------------------------------------------------


def gelu_tanh_fp16_by_hand(x):
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), every operation rounded to fp16
    (numpy float16: * and + rounded once from float32, exact), tanh in float64 then rounded."""
    h = np.float16
    with np.errstate(all="ignore"):
        x = np.asarray(x).astype(h)
        cube = (x * x) * x
        u = h(math.sqrt(2 / math.pi)) * (x + h(0.044715) * cube)
        t = np.tanh(u.astype(np.float64)).astype(h)
        return (h(0.5) * x * (h(1) + t)).astype(np.float64), cube


def test_readme_table_gelu_tanh_fp16_underflow_and_hidden_overflow():
    got, cube = gelu_tanh_fp16_by_hand(FP16)
    # a flush: the result is 0 where RN(GELU(x)) is not, i.e. |GELU(x)| > 2^-25 (half the
    # smallest subnormal; exactly 2^-25 would tie to 0, the even side), decided in mpmath
    zero = np.flatnonzero(got == 0)
    flushed = [
        float(FP16[i])
        for i in zero
        if abs(mp.mpf(float(FP16[i])) * mp.ncdf(mp.mpf(float(FP16[i])))) > mp.ldexp(1, -25)
    ]
    assert len(flushed) == 655  # the README's "unf 655"
    neg = [v for v in flushed if v < 0]
    # the negative tail, one run of consecutive inputs; and x = 2^-24, where GELU = 2^-25 +
    # a positive x^2 term rounds up to 2^-24 but 0.5 x rounds the tie 2^-25 to even, 0
    assert [min(neg), max(neg)] == [-5.72265625, -3.5859375]
    assert len(neg) == len(fp16_between(min(neg), max(neg)))
    assert [v for v in flushed if v > 0] == [2.0**-24]
    # x^3 overflows fp16 (RN((x x) x) infinite) exactly for |x| >= 40.34375, and the result
    # is finite there (x, or -0)
    over = np.isinf(cube)
    t = float(np.abs(FP16[over]).min())
    assert t == 40.34375 and over.sum() == len(fp16_between(t, 65504)) * 2
    assert np.isfinite(got[over]).all()
    (r,) = audit.sweep("gelu.tanh", dtype="fp16")
    u = finding(r, "underflow")
    assert u.count == 655 and u.intervals == [[min(neg), max(neg)], [2.0**-24, 2.0**-24]]
    (h,) = [h for h in r.hidden if h["kind"] == "hidden_overflow"]
    assert h["op"] == "*" and h["count"] == int(over.sum()) == 21994
    assert h["intervals"] == [[-65504.0, -t], [t, 65504.0]]
    assert r.domain.count == 63488 and r.special_failures == 1


# ----------------------------------------------------------------------------------------
# Catalog, families, gated units, parameters
# ----------------------------------------------------------------------------------------


def test_catalog_size_quoted_in_the_readme(capsys):
    assert main(["list", "--json"]) == 0
    cands = json.loads(capsys.readouterr().out)
    ids = [c["id"] for c in cands]
    # the catalog page's sentence "N candidates in F families, approximating R exact
    # references" (generated by docs/hooks/generate.py when the site is built)
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "hooks" / "generate.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    m = re.search(
        r"(\d+) candidates in (\d+) families, approximating (\d+) exact references",
        hook.render_catalog(),
    )
    n, fams, refs = (int(g) for g in m.groups())
    assert len(ids) == len(set(ids)) == n
    assert len({i.split(".")[0] for i in ids}) == fams
    assert len({c["reference"] for c in cands}) == refs
    assert all(c["formula"] and c["source"] for c in cands)
    # a bare family name selects all of its variants: GELU's 11 formulas and the four engine
    # models (gelu.mlas_tanh, gelu.mlas_erf: approximations/mlas.py; gelu.onednn_erf,
    # gelu.onednn_tanh: approximations/onednn.py)
    gelu = [i for i in ids if i.startswith("gelu.")]
    assert len(gelu) == 15
    # a bare family name selects all of its variants, and the README's first output lists
    # every one: those pinned to fp32 compute (the engine models) in the fp32 table alone
    pinned = {c["id"] for c in cands if c["id"] in gelu and c.get("compute") == "fp32"}
    readme = (ROOT / "README.md").read_text()
    shown = readme[readme.index("<!-- --8<-- [start:first-output] -->") : readme.index("[end:first-output]")]
    tables = shown.split("\n\n")
    rows = [re.findall(r"^(gelu\.\w+) ", t, re.M) for t in tables[:2]]
    assert sorted(rows[0]) == sorted(set(gelu) - pinned)
    assert sorted(rows[1]) == sorted(gelu) and pinned
    assert [r.candidate for r in audit.sweep("gelu", dtype="fp8_e4m3", analyze=False)] == gelu


def test_gated_units_exhaustive_in_fp8_and_a_grid_with_edges_in_fp16():
    (r,) = audit.sweep("swiglu.silu_mul", dtype="fp8_e4m3", analyze=False)
    assert r.domain.exhaustive and r.domain.count == 254 * 254
    (r,) = audit.sweep("swiglu.silu_mul", dtype="fp16", grid=16, analyze=False, keep_points=True)
    a = np.unique(r.points.x)
    assert not r.domain.exhaustive and r.domain.count == len(a) ** 2
    # the edges: +-max, +-smallest subnormal, +-1, 0
    assert {-65504.0, 65504.0, -(2.0**-24), 2.0**-24, -1.0, 1.0, 0.0} <= set(a.tolist())
    assert 16 <= len(a) <= 16 + 7


def test_swept_parameter_gives_one_result_per_value_and_moves_the_reference():
    res = audit.sweep("swish.beta", dtype="fp8_e4m3", params={"beta": [0.5, 1.0, 2.0]}, keep_points=True)
    assert [r.params["beta"] for r in res] == [0.5, 1.0, 2.0]
    # swish_beta(x) = x sigmoid(beta x): the exact value moves with beta; at x = 1 (E4M3:
    # 1.0 is a value) it is 1 / (1 + e^-beta)
    for r in res:
        i = int(np.flatnonzero(r.points.x == 1.0)[0])
        exact = 1 / (1 + mp.exp(-r.params["beta"]))
        assert r.points.exact[i] + r.points.exact_lo[i] == pytest.approx(float(exact), rel=1e-15)


# ----------------------------------------------------------------------------------------
# Checkpoint cadence: saved every 30 s (SAVE_EVERY), when interrupted and when it ends
# ----------------------------------------------------------------------------------------


def test_checkpoint_cadence(tmp_path, monkeypatch):
    from audit.measure import checkpoint
    from audit.numbers import inputs

    assert checkpoint.SAVE_EVERY == 30.0  # the README's "every 30 s"
    saves = []
    real = checkpoint.Checkpoint.save
    monkeypatch.setattr(
        checkpoint.Checkpoint, "save", lambda self, *a: (saves.append(a[0]["done"]), real(self, *a))[1]
    )
    monkeypatch.setattr(inputs, "CHUNK", 1 << 12)
    rng = (1.0, 1.0 + 2.0**-9)  # 2^14 + 1 fp32 inputs: 5 chunks of 2^12

    def run(d):
        saves.clear()
        audit.sweep("gelu.tanh", dtype="fp32", range=rng, exhaustive=True, workers=1, checkpoint=d)
        return list(saves)

    # never due during the run (a clock that does not move): one save, when it ends
    from types import SimpleNamespace

    monkeypatch.setattr(checkpoint, "time", SimpleNamespace(monotonic=lambda: 0.0))
    assert run(tmp_path / "a") == [5]
    # a clock 31 s further at every look: due after every chunk, nothing left at the end
    clock = iter(range(0, 10**6, 31))
    monkeypatch.setattr(checkpoint, "time", SimpleNamespace(monotonic=lambda: float(next(clock))))
    assert run(tmp_path / "b") == [1, 2, 3, 4, 5]


# ----------------------------------------------------------------------------------------
# Golden order (README: every finite value, ascending, -0 before +0) and golden values
# ----------------------------------------------------------------------------------------


def test_golden_order_and_values_in_fp8(tmp_path):
    from helpers import is_nearest_even

    from audit.numbers.formats import get_format

    assert main(["golden", "sigmoid", "--dtype", "fp8_e4m3", "-o", str(tmp_path / "g.npz")]) == 0
    with np.load(tmp_path / "g.npz", allow_pickle=False) as z:
        xb, x, y = z["x_bits"], z["x"], z["y"]
    # E4M3FN bits: 0xfe (-448) down to 0x80 (-0), then 0x00 (+0) up to 0x7e (448); 0x7f and
    # 0xff are NaN
    assert xb.tolist() == list(range(0xFE, 0x7F, -1)) + list(range(0x00, 0x7F))
    assert math.copysign(1, x[126]) == -1 and math.copysign(1, x[127]) == 1 and x[126] == x[127] == 0
    assert np.all(np.diff(x) >= 0)
    e4 = get_format("fp8_e4m3")
    for xi, yi in zip(x.tolist(), y.tolist()):
        assert is_nearest_even(e4, 1 / (1 + mp.exp(-mp.mpf(xi))), yi), xi
