"""The CI gate on quantized and block-scaled outputs (audit/gate/formats.py): baselined,
checked, a regression fails, a tolerance of the wrong kind fails, bad entries are refused."""

import dataclasses
import json
import math

import ml_dtypes
import mpmath as mp
import numpy as np
import pytest

from audit.cli import main
from audit.targets import candidates

QSPEC = """
baseline = "base.json"

[[audit]]
name = "q"
targets = ["sigmoid.exp"]
dtype = "int8:scale=0.0625,zero=0"
out_dtype = "uint8:scale=0.00390625,zero=0,round=away"
tolerance = { max_code_error = 0.5, correct_code_fraction = 1.0, nan = false }
"""

BSPEC = """
baseline = "base.json"

[[audit]]
name = "b"
targets = ["gelu.tanh"]
dtype = "bf16"
out_dtype = "mxfp8_e4m3"
samples = 2048
seed = 3
blocks = "normal:std=2"
"""


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def replace_candidate(monkeypatch, cid, fn):
    old = candidates.REGISTRY[cid]
    monkeypatch.setitem(candidates.REGISTRY, cid, dataclasses.replace(old, fn=fn))


def project(tmp_path, monkeypatch, capsys, spec):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "actaudit.toml").write_text(spec)
    code, out, err = run(capsys, "baseline")
    assert code == 0, out + err
    return json.loads((tmp_path / "base.json").read_text())


def test_quant_audit_is_baselined_and_a_regression_fails(tmp_path, monkeypatch, capsys):
    doc = project(tmp_path, monkeypatch, capsys, QSPEC)
    ((key, e),) = doc["entries"].items()
    assert (
        key
        == "q/sigmoid.exp/int8:scale=0.0625,zero=0,round=even->uint8:scale=0.00390625,zero=0,round=away/fp32"
    )
    assert e["kind"] == "quant" and e["inputs"] == {"count": 256, "exhaustive": True}
    # saturated: codes whose sigmoid(x) * 256 exceeds 255.5, counted here with mpmath
    sat = sum(1 for q in range(-128, 128) if mp.sigmoid(mp.mpf(q) / 16) * 256 > mp.mpf("255.5"))
    assert e["finding_counts"] == {"saturated": sat} and sat > 0
    code, out, _ = run(capsys, "check")
    assert code == 0 and "0 failed" in out

    # the kernel now adds 3 output codes (3/256, exact in fp32) to every value
    replace_candidate(monkeypatch, "sigmoid.exp", lambda x, m: 1.0 / (1.0 + m.exp(-x)) + 0.01171875)
    code, out, _ = run(capsys, "check")
    assert code == 1 and "1 failed" in out
    assert "max_code_error got worse" in out and "correct_code_fraction got worse" in out
    assert "max_code_distance rose: 0 -> 3" in out
    assert "pinned findings rose: 0 ->" in out
    assert "max_code_error = " in out and "exceeds the tolerance 0.5" in out
    assert "worst input x = " in out


def test_quant_tolerance_breaks_refuse_the_baseline_and_wrong_kinds_fail(tmp_path, monkeypatch, capsys):
    spec = QSPEC.replace("sigmoid.exp", "sigmoid.hard")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "actaudit.toml").write_text(spec)
    code, out, err = run(capsys, "baseline")
    assert code == 1 and "correct_code_fraction" in out and "is below the tolerance 1" in out
    assert not (tmp_path / "base.json").exists()
    # a float tolerance on a quantized audit cannot be decided: it fails
    (tmp_path / "actaudit.toml").write_text(QSPEC.replace("nan = false", "max_ulp = 1"))
    code, out, err = run(capsys, "baseline")
    assert code == 1 and "tolerance 'max_ulp' cannot be checked on a quant audit" in out


def _gelu_mx_exponents(n, seed, std, factor):
    """Per block of 32: floor(log2(max |factor * gelu(x)|)) for seeded bf16 inputs, gelu by
    mpmath (the MX scale exponent is that minus E4M3's emax, 8, on both sides)."""
    x = np.random.default_rng(seed).normal(0.0, std, n).astype(ml_dtypes.bfloat16).astype(np.float64)
    out = []
    for b in range(n // 32):
        amax = max(abs(mp.mpf(float(v)) * mp.ncdf(mp.mpf(float(v)))) for v in x[b * 32 : (b + 1) * 32])
        out.append(int(mp.floor(mp.log(amax * factor, 2))))
    return out


def test_block_audit_is_baselined_and_a_regression_fails(tmp_path, monkeypatch, capsys):
    doc = project(tmp_path, monkeypatch, capsys, BSPEC)
    ((key, e),) = doc["entries"].items()
    assert key == "b/gelu.tanh/bf16->mxfp8_e4m3@ocp/fp32"
    assert e["kind"] == "blocks" and e["elements"] == 2048 and e["blocks"] == 64
    assert e["inputs"] == "normal:std=2 (seed 3)"
    code, out, _ = run(capsys, "check")
    assert code == 0 and "0 failed" in out

    # the kernel now returns 1.5 gelu: a block's scale moves up where 1.5 amax crosses a power
    # of two (counted here from mpmath values of gelu)
    ref = _gelu_mx_exponents(2048, 3, 2.0, 1)
    bad = _gelu_mx_exponents(2048, 3, 2.0, mp.mpf(1.5))
    moved = sum(a != b for a, b in zip(ref, bad))
    assert e["scale_diff_blocks"] == 0 and 0 < moved < 64
    replace_candidate(
        monkeypatch,
        "gelu.tanh",
        lambda x, m: 1.5 * (0.5 * x * (1 + m.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))),
    )
    code, out, _ = run(capsys, "check")
    assert code == 1 and "1 failed" in out
    assert f"scale_diff_blocks rose: 0 -> {moved}" in out
    assert "max_elem_ulp got worse" in out and "worst block: block " in out


def test_block_inputs_changed_fail_closed(tmp_path, monkeypatch, capsys):
    project(tmp_path, monkeypatch, capsys, BSPEC)
    (tmp_path / "actaudit.toml").write_text(BSPEC.replace("seed = 3", "seed = 4"))
    code, out, _ = run(capsys, "check")
    (line,) = [x for x in out.splitlines() if x.startswith("FAIL")]
    assert code == 1 and "re-record with actaudit baseline" in line and "improved " not in out
    assert (
        '"normal:std=2 (seed 4)" (baseline "normal:std=2 (seed 3)")' in line and "seed 4 (baseline 3)" in line
    )


@pytest.mark.parametrize(
    "edit, key",
    [
        (lambda e: e.pop("max_elem_ulp"), "max_elem_ulp"),
        (lambda e: e.update(scale_diff_blocks=-1), "scale_diff_blocks"),
        (lambda e: e.update(kind="weird"), "kind"),
        (lambda e: e.update(max_rel=math.inf), "max_rel"),
    ],
)
def test_hostile_block_entries_are_refused(tmp_path, monkeypatch, capsys, edit, key):
    doc = project(tmp_path, monkeypatch, capsys, BSPEC)
    ((k, e),) = doc["entries"].items()
    edit(e)
    (tmp_path / "base.json").write_text(json.dumps(doc).replace("Infinity", "1e999"))
    code, out, err = run(capsys, "check")
    assert code == 2 and err.startswith("actaudit: error:") and key in err and "Traceback" not in err


@pytest.mark.parametrize(
    "line, key", [('blocks = "gamma:k=1"', "blocks"), ('scale_rule = "up"', "scale_rule")]
)
def test_bad_block_keys_in_the_spec(tmp_path, monkeypatch, capsys, line, key):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "actaudit.toml").write_text(BSPEC.replace('blocks = "normal:std=2"', line))
    code, out, err = run(capsys, "baseline")
    assert code == 2 and f"audit[0].{key}'" in err


@pytest.mark.parametrize(
    "spec, key",
    [
        (QSPEC.replace("tolerance", "samples = 10\ntolerance"), "samples"),
        (QSPEC.replace("tolerance", "range = [-1.0, 1.0]\ntolerance"), "range"),
        (BSPEC + "grid = 16\n", "grid"),
        (QSPEC.replace("uint8:scale=0.00390625", "uint8:scale=nope"), "scale"),
    ],
)
def test_keys_that_do_not_apply_are_refused(tmp_path, monkeypatch, capsys, spec, key):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "actaudit.toml").write_text(spec)
    code, out, err = run(capsys, "baseline")
    assert code == 2 and err.startswith("actaudit: error:") and key in err and "Traceback" not in err
