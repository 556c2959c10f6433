"""The parameter-effect finding of a sweep (audit/measure/param_effect.py): `sweep --param NAME=V1,V2`
whose outputs do not change anywhere is a `no_effect` finding."""

import json

import pytest

import audit
from audit.cli import main

FP16_FINITE = 63488  # 2^16 patterns less the 2 * 1024 with an all-ones exponent (+-inf, NaNs)
FP16_SPECIALS = 3  # +inf, -inf, NaN


def _kinds(r):
    return [f.kind for f in r.findings]


def test_function_that_ignores_its_parameter_is_a_finding():
    rs = audit.sweep(
        "diff_funcs:leaky_ignores_alpha", dtype="fp16", reference="leaky_relu", params={"alpha": [0.01, 0.2]}
    )
    assert [r.params for r in rs] == [{"alpha": 0.01}, {"alpha": 0.2}]
    for r in rs:
        (f,) = [f for f in r.findings if f.kind == "no_effect"]
        assert f.count == FP16_FINITE + FP16_SPECIALS
        assert "alpha has no effect" in f.note
        assert r.param_effect == {
            "alpha": {"values": [0.01, 0.2], "changed": 0, "inputs": FP16_FINITE + FP16_SPECIALS}
        }
    # the accuracy audit itself sees the ignored slope: 0.01 x where 0.2 x is exact is
    # 20 times too small, far more than half an ULP
    assert rs[1].max_ulp > 100


def test_catalog_parameter_that_matters_changes_hand_counted_inputs():
    # leaky_relu.mul: x >= 0 ? x : alpha x.  Rounded to fp16 (in fp16 or fp32 compute),
    # 0.01 x and 0.2 x differ at every negative finite fp16 value (31743 of them: -0
    # excluded) except -2^-24 and -2^-23, where 0.2 k 2^-24 <= 2^-25 (half the smallest
    # subnormal, k <= 2) and both round to -0; from k = 3, 0.2 x rounds to a nonzero value
    # while 0.01 x is nonzero (then 20 times smaller) or -0.  x >= 0, -0 and the
    # specials (+-inf: +-inf either way, NaN) give the same bits.
    rs = audit.sweep("leaky_relu.mul", dtype="fp16", compute="fp16,fp32", params={"alpha": [0.01, 0.2]})
    assert len(rs) == 4
    for r in rs:
        assert "no_effect" not in _kinds(r)
        assert r.param_effect["alpha"]["changed"] == 31743 - 2
        assert r.param_effect["alpha"]["inputs"] == FP16_FINITE + FP16_SPECIALS


def test_one_value_is_no_check():
    (r,) = audit.sweep("leaky_relu.mul", dtype="fp16", compute="fp16", params={"alpha": 0.2})
    assert r.param_effect is None and "no_effect" not in _kinds(r)
    assert "param_effect" not in r.to_dict()


def test_torch_op_with_parameter():
    pytest.importorskip("torch")
    # torch leaky_relu in bf16: 32639 negative finite bf16 values (-0 excluded); the two
    # smallest subnormals (2^-133, 2^-132) give -0 for both slopes (as in fp16 above)
    rs = audit.sweep("torch:leaky_relu", dtype="bf16", params={"negative_slope": [0.01, 0.2]})
    assert [r.params for r in rs] == [{"negative_slope": 0.01}, {"negative_slope": 0.2}]
    for r in rs:
        assert "no_effect" not in _kinds(r)
        assert r.param_effect["negative_slope"]["changed"] == 32639 - 2
        assert r.max_ulp <= 0.5  # audited against leaky_relu with alpha = negative_slope


def test_chunked_sweep_compares_digests():
    # every fp32 value in [-1 - 2^-4, -1] (2^19 + 1 of them: three chunks of 2^18), plus
    # +-inf and NaN: the function that ignores alpha gives the same bits for both values
    # everywhere; the honest one changes every input (0.01 x and 0.2 x, both normal)
    for func, same in (("leaky_ignores_alpha", True), ("leaky_honest", False)):
        rs = audit.sweep(
            f"diff_funcs:{func}",
            dtype="fp32",
            reference="leaky_relu",
            exhaustive=True,
            range=(-1.0625, -1),
            params={"alpha": [0.01, 0.2]},
            workers=1,
        )
        for r in rs:
            assert r.domain.count == (1 << 19) + 1 and r.domain.values is None
            assert ("no_effect" in _kinds(r)) == same
            # digests decide "changed or not" but give no count
            assert r.param_effect["alpha"]["changed"] == (0 if same else None)
    # a catalog parameter that acts only at the specials: sigmoid.clamped clips x to
    # [-limit, limit], so on [1, 1 + 2^-4] limits 8 and 9 agree, but sigmoid(+inf) is
    # computed as sigmoid(8) or sigmoid(9): an effect, at the specials
    rs = audit.sweep(
        "sigmoid.clamped",
        dtype="fp32",
        exhaustive=True,
        range=(1, 1.0625),
        params={"limit": [8, 9]},
        workers=1,
    )
    for r in rs:
        assert "no_effect" not in _kinds(r)


def test_cli_sweep_reports_the_finding(capsys):
    assert (
        main(
            [
                "sweep",
                "diff_funcs:leaky_ignores_alpha",
                "--reference",
                "leaky_relu",
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
    for r in doc["results"]:
        assert [f["kind"] for f in r["findings"]][-1] == "no_effect"
        assert r["param_effect"]["alpha"]["changed"] == 0
    assert (
        main(
            [
                "sweep",
                "diff_funcs:leaky_ignores_alpha",
                "--reference",
                "leaky_relu",
                "--param",
                "alpha=0.01,0.2",
                "--dtype",
                "fp16",
                "--findings",
            ]
        )
        == 0
    )
    assert "alpha has no effect" in capsys.readouterr()[0]


def test_parameter_without_counterpart_in_the_reference_is_refused(capsys):
    pytest.importorskip("torch")
    assert main(["sweep", "torch:softplus", "--param", "threshold=1,20", "--dtype", "bf16"]) == 2
    err = capsys.readouterr()[1]
    assert err.startswith("actaudit: error:") and "consistency torch:softplus" in err
