"""Consistency checks: parameter effect, layout and length, compiled against eager."""

import json

import pytest

from audit.cli import main
from audit.compare import consistency as cons
from audit.compare.diff import diff


def test_parameter_that_is_ignored_is_a_finding():
    f = cons.param_effect("diff_funcs:leaky_ignores_alpha", "alpha", [0.01, 0.2], "fp16")
    assert f.kind == "no_effect" and f.failed
    assert f.count == 63488 + 3  # every finite fp16 value and +-inf, NaN


def test_parameter_that_works_changes_hand_counted_inputs():
    # leaky_relu(x) = alpha x for x < 0: 0.01 x and 0.2 x (fp32 products rounded to fp16)
    # differ at every negative fp16 value (ordinals 1..31743) except the two smallest
    # subnormals 2^-24 and 2^-23, where both products round to -0 (0.2 * 2^-23 = 2.4e-8
    # < 2^-25, half the smallest subnormal); -0, -inf and NaN give the same bits.
    f = cons.param_effect("diff_funcs:leaky_honest", "alpha", [0.01, 0.2], "fp16")
    assert f.kind == "param_effect" and not f.failed
    assert f.count == 31743 - 2
    g = cons.param_effect("swiglu.clamped", "limit", [7, 448], "fp8_e4m3")
    assert not g.failed and g.count > 0


def test_cli_parameter_effect_exit_codes(capsys):
    assert (
        main(
            ["consistency", "diff_funcs:leaky_ignores_alpha", "--param", "alpha=0.01,0.2", "--dtype", "fp16"]
        )
        == 1
    )
    out, _ = capsys.readouterr()
    assert "alpha has no effect" in out
    assert (
        main(
            [
                "consistency",
                "diff_funcs:leaky_honest",
                "--param",
                "alpha=0.01,0.2",
                "--dtype",
                "fp16",
                "--json",
                "-",
            ]
        )
        == 0
    )
    doc = json.loads(capsys.readouterr()[0])
    assert doc["results"][0]["kind"] == "param_effect"
    assert main(["consistency", "gelu.erf"]) == 2  # nothing to check


def test_layout_finds_the_length_dependent_function():
    # gelu_vector_tail: an 8-wide vector loop (tanh form) and a scalar tail (erf form).  The
    # reference call has a length that is a multiple of 64 (no tail), and so have the
    # strided, column-major and offset views; every 1-D length that is not a multiple of 8
    # leaves a tail, and a 0-d call is all tail.
    rep = cons.layout_check("diff_funcs:gelu_vector_tail", "fp32", max_length=17, values=512)
    shapes = {f.shape for f in rep.findings}
    assert shapes == {"0-d"} | {f"length {n}" for n in range(1, 18) if n % 8}
    assert len(rep.shapes) == 1 + 17 + 3
    ok = cons.layout_check("diff_funcs:relu6_exact", "fp16", max_length=17, values=512)
    assert ok.findings == []


def test_layout_torch_op_runs():
    pytest.importorskip("torch")
    rep = cons.layout_check("torch:relu", "bf16", max_length=9, values=256)
    assert len(rep.shapes) == 1 + 9 + 3


@pytest.mark.slow  # Inductor compiles C++ (40 s idle, 6 to 8 min on the shared machine): the slow stage
def test_torch_compile_against_eager():
    """torch.compile on CPU (Inductor generates and compiles C++ with gcc): about 40 s the
    first time on this machine, a few seconds once Inductor's cache holds the kernel.  One
    op, one format, one compiled shape (blocks of a fixed length).  torch 2.13's compiled
    silu gives eager's bits on every bf16 value in [0, 4] (measured: the whole bf16 line
    too); a difference would be a finding about torch, reported as intervals."""
    torch = pytest.importorskip("torch")
    try:
        torch.compile(lambda t: t + 1)(torch.ones(4))
    except Exception as e:  # no working compiler toolchain
        pytest.skip(f"torch.compile does not work here: {type(e).__name__}: {e}")
    r = diff("torch-compile:silu", "torch:silu", "bf16", range=(0, 4))
    # bf16 in [0, 4]: -0 and +0, 127 subnormals, 128 binades [2^-126, 4) of 128 values, 4
    assert r.count == 2 + 127 + 128 * 128 + 1
    assert r.verdict == "identical", r.intervals[:3]
