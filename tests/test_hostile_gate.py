"""The gate cannot be fooled (issue 18 A2-A4; issue 19 items 3, 4, 6): safe_range fails
closed, baselines are validated field by field, parameter keys are exact, removed results
are told, a user's kernel can be gated from the spec."""

import json
import os
import re
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest

from audit.cli import main
from audit.gate import check as gate

HOSTILE = Path(__file__).parent / "fixtures" / "hostile"


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def spec(tmp_path, body, baseline="b.json"):
    (tmp_path / "actaudit.toml").write_text(f'baseline = "{baseline}"\n' + body)


def test_safe_range_where_no_clip_helps_fails(tmp_path, monkeypatch, capsys):
    """gelu.tanh in fp16 flushes its negative tail to 0 before GELU saturates: no clip
    helps on that side (its clip says so), so no safe_range that reaches into it holds."""
    monkeypatch.chdir(tmp_path)
    spec(
        tmp_path,
        '[[audit]]\nname = "t"\ntargets = ["gelu.tanh"]\ndtype = "fp16"\n'
        "tolerance = { safe_range = [-10.0, 10.0] }\n",
    )
    code, out, err = run(capsys, "baseline")
    assert code == 1 and "no clip helps" in out and "does not cover" in out
    assert not (tmp_path / "b.json").exists()
    assert main(["baseline", "--force"]) == 0
    code, out, _ = run(capsys, "check")
    assert code == 1 and "no clip helps" in out


def test_safe_range_that_cannot_be_decided_fails(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # fp32 has no clip recommendation (needs every value)
    spec(
        tmp_path,
        '[[audit]]\nname = "t"\ntargets = ["sigmoid.stable"]\ndtype = "fp32"\n'
        "samples = 2000\ntolerance = { safe_range = [-1.0, 1.0] }\n",
    )
    code, out, _ = run(capsys, "baseline")
    assert code == 1 and "cannot be checked" in out


@pytest.mark.parametrize(
    "fixture,needle",
    [
        ("spec_safe_range_nan.toml", "tolerance.safe_range"),
        ("spec_slack_inf.toml", "'slack'"),
    ],
)
def test_hostile_specs_are_refused(tmp_path, monkeypatch, capsys, fixture, needle):
    monkeypatch.chdir(tmp_path)
    shutil.copy(HOSTILE / fixture, tmp_path / "actaudit.toml")
    code, _, err = run(capsys, "baseline")
    assert code == 2 and needle in err and err.count("\n") == 1 and err.startswith("actaudit: error:")


def test_a_spec_nested_50000_deep_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "actaudit.toml").write_text("a = " + "[" * 50000 + "]" * 50000 + "\n")
    code, _, err = run(capsys, "check")
    assert code == 2 and "Traceback" not in err and err.count("\n") == 1


def test_a_baseline_of_nans_does_not_pass(tmp_path, monkeypatch, capsys):
    """The issue's attack: NaN counts and metrics, findings covering [-inf, inf]. sigmoid.naive
    in fp16 has NaN results (exp overflows from x = 11.09: inf / inf), so check must fail."""
    monkeypatch.chdir(tmp_path)
    spec(tmp_path, '[[audit]]\nname = "t"\ntargets = ["sigmoid.naive"]\ndtype = "fp16"\n')
    shutil.copy(HOSTILE / "baseline_nan_counts.json", tmp_path / "b.json")
    code, out, err = run(capsys, "check")
    assert code == 2 and "nan_count' must be an integer" in err and "b.json" in err


@pytest.mark.parametrize(
    "field,value,needle",
    [
        ("nan_count", "12", "must be an integer"),
        ("nan_count", None, "must be an integer"),
        ("nan_count", -1, "must be an integer"),
        ("nan_count", 300, "more than the entry's 254 inputs"),
        ("max_ulp", -3.0, "must be a number >= 0"),
        ("max_ulp", [1, 2], "must be a number >= 0"),
        ("findings", {"nan": [[1.0]]}, "intervals"),
        ("findings", {"nan": "all"}, "intervals"),
        ("findings", {"bogus": []}, "not a finding kind"),
        ("finding_counts", {"nan": 1.5}, "integer count"),
        ("clip", {"lo": "x", "hi": 1.0, "lo_action": "none", "hi_action": "none"}, "clip.lo"),
        ("clip", [], "clip"),
        (
            "clip",
            {"lo": 1.0, "hi": 2.0, "lo_action": "none", "hi_action": "none", "zzz": 1},
            "clip.zzz' is unknown in a clip",
        ),
        ("params", {"limit": "8"}, "params"),
        ("candidate", 3, "candidate"),
    ],
)
def test_every_baseline_field_is_validated(tmp_path, monkeypatch, capsys, field, value, needle):
    monkeypatch.chdir(tmp_path)
    spec(tmp_path, '[[audit]]\nname = "t"\ntargets = ["relu.max"]\ndtype = "fp8_e4m3"\n')
    assert main(["baseline"]) == 0
    doc = json.loads((tmp_path / "b.json").read_text())
    (entry,) = doc["entries"].values()
    entry[field] = value
    (tmp_path / "b.json").write_text(json.dumps(doc))
    capsys.readouterr()
    code, _, err = run(capsys, "check")
    assert code == 2 and needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_huge_baseline_is_refused_before_parsing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(gate, "MAX_FILE", 1000)
    spec(tmp_path, '[[audit]]\nname = "t"\ntargets = ["relu.max"]\ndtype = "fp8_e4m3"\n')
    (tmp_path / "b.json").write_text("[" + "[]," * 1000 + "[]]")
    code, _, err = run(capsys, "check")
    assert code == 2 and "too large" in err


def test_nearby_parameters_get_their_own_entries(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    spec(
        tmp_path,
        '[[audit]]\nname = "t"\ntargets = ["sigmoid.clamped"]\ndtype = "fp8_e4m3"\n'
        "params = { limit = [2.0000001, 2.0000004] }\n",
    )
    assert main(["baseline"]) == 0
    keys = list(json.loads((tmp_path / "b.json").read_text())["entries"])
    assert keys == [
        "t/sigmoid.clamped/fp8_e4m3/fp8_e4m3/limit=2.0000001",
        "t/sigmoid.clamped/fp8_e4m3/fp8_e4m3/limit=2.0000004",
    ]


def test_results_removed_from_the_spec_fail_unless_allowed(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    spec(tmp_path, '[[audit]]\nname = "t"\ntargets = ["relu.max", "relu6.clamp"]\ndtype = "fp8_e4m3"\n')
    assert main(["baseline"]) == 0
    spec(tmp_path, '[[audit]]\nname = "t"\ntargets = ["relu.max"]\ndtype = "fp8_e4m3"\n')
    capsys.readouterr()
    code, out, _ = run(capsys, "check")
    assert code == 1 and "FAIL     t/relu6.clamp/fp8_e4m3/fp8_e4m3: in the baseline but no longer" in out
    code, out, _ = run(capsys, "check", "--allow-removed")
    assert code == 0 and "removed  t/relu6.clamp/fp8_e4m3/fp8_e4m3" in out
    code, out, _ = run(capsys, "check", "--allow-removed", "--strict")
    assert code == 1 and "FAIL     t/relu6.clamp/fp8_e4m3/fp8_e4m3: in the baseline but no longer" in out


def test_per_kind_finding_counts_are_compared(tmp_path, monkeypatch, capsys):
    """gelu.tanh in fp16 has 1460 monotonicity breaks (README) in more intervals than the
    baseline lists: one input more than the baseline's count fails, though every listed
    interval is covered."""
    monkeypatch.chdir(tmp_path)
    spec(tmp_path, '[[audit]]\nname = "t"\ntargets = ["gelu.tanh"]\ndtype = "fp16"\n')
    assert main(["baseline"]) == 0
    doc = json.loads((tmp_path / "b.json").read_text())
    (entry,) = doc["entries"].values()
    assert entry["finding_counts"]["monotonicity"] > len(entry["findings"]["monotonicity"])
    entry["finding_counts"]["monotonicity"] -= 1
    entry["findings"]["monotonicity"] = [["-inf", "inf"]]
    (tmp_path / "b.json").write_text(json.dumps(doc))
    capsys.readouterr()
    code, out, _ = run(capsys, "check")
    assert code == 1 and "monotonicity findings rose" in out


def test_check_lines_are_rounded_and_name_the_result_once(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    spec(tmp_path, '[[audit]]\nname = "t"\ntargets = ["gelu.tanh"]\ndtype = "fp16"\n')
    assert main(["baseline"]) == 0
    doc = json.loads((tmp_path / "b.json").read_text())
    (entry,) = doc["entries"].values()
    entry["p99_ulp"] = entry["p99_ulp"] / 3  # now looks 3x worse
    (tmp_path / "b.json").write_text(json.dumps(doc))
    capsys.readouterr()
    code, out, _ = run(capsys, "check")
    line = next(ln for ln in out.splitlines() if ln.startswith("FAIL"))
    assert code == 1 and line.count("gelu.tanh") == 1
    worse = line.split("p99_ulp got worse: ")[1]
    a, b = worse.split(" -> ")
    assert len(a) <= 8 and len(b) <= 8 and float(b) == pytest.approx(3 * float(a), rel=1e-3)


def test_baseline_and_outputs_follow_the_umask(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    spec(tmp_path, '[[audit]]\nname = "t"\ntargets = ["relu.max"]\ndtype = "fp8_e4m3"\n')
    old = os.umask(0o022)
    try:
        assert main(["baseline"]) == 0
        assert stat.S_IMODE((tmp_path / "b.json").stat().st_mode) == 0o644
        os.chmod(tmp_path / "b.json", 0o664)  # an existing file keeps its mode
        assert main(["baseline"]) == 0
        assert stat.S_IMODE((tmp_path / "b.json").stat().st_mode) == 0o664
        assert main(["sweep", "relu.max", "-d", "fp8_e4m3", "--json", "r.json", "--csv", "r.csv"]) == 0
        assert stat.S_IMODE((tmp_path / "r.json").stat().st_mode) == 0o644
        assert stat.S_IMODE((tmp_path / "r.csv").stat().st_mode) == 0o644
    finally:
        os.umask(old)


KERNEL = '''
import numpy as np

def gelu_tanh_fp32(x):
    """tanh-GELU computed in float32, returned in the storage dtype."""
    t = x.astype(np.float32)
    c = np.float32(0.7978845608028654)
    y = np.float32(0.5) * t * (np.float32(1) + np.tanh(c * (t + np.float32(0.044715) * t * t * t)))
    return y.astype(x.dtype)
'''


def test_a_users_kernel_is_gated_from_the_spec(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "mykern.py").write_text(KERNEL)
    spec(
        tmp_path,
        '[[audit]]\nname = "k"\ntargets = ["mykern:gelu_tanh_fp32"]\ndtype = "fp16"\nreference = "gelu"\n',
    )
    assert main(["baseline"]) == 0
    assert main(["check"]) == 0
    out = capsys.readouterr().out
    assert "1 results, 0 failed" in out
    # without the key, --reference supplies it
    spec(tmp_path, '[[audit]]\nname = "k"\ntargets = ["mykern:gelu_tanh_fp32"]\ndtype = "fp16"\n')
    assert main(["check"]) == 2
    assert "--reference" in capsys.readouterr().err
    assert main(["check", "--reference", "gelu"]) == 0
    assert (
        main(["report", "mykern:gelu_tanh_fp32", "--reference", "gelu", "--dtype", "fp16", "--out", "rep"])
        == 0
    )
    assert (tmp_path / "rep" / "index.html").exists()


def test_a_dump_is_gated_from_the_spec(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["golden", "relu", "--dtype", "fp8_e4m3", "-o", "g.npz"]) == 0
    with np.load(tmp_path / "g.npz") as z:
        np.savez(tmp_path / "out.npz", x=z["x"], y=z["y"])  # a device that rounds correctly
    spec(
        tmp_path,
        '[[audit]]\nname = "d"\ndump = "out.npz"\nreference = "relu"\n'
        'dtype = "fp8_e4m3"\ntolerance = { max_ulp = 0.5 }\n',
    )
    assert main(["baseline"]) == 0 and main(["check"]) == 0


def test_assert_accuracy_gates_special_inputs_by_default():
    from audit.testing import assert_accuracy

    # tanh-GELU: 0.5 x (1 + tanh(...)) at x = -inf is -inf * 0 = NaN; GELU(-inf) = -0
    with pytest.raises(AssertionError, match=r"f\(-inf\) gave nan"):
        assert_accuracy("gelu.tanh", dtype="fp16", max_ulp=1e9)
    assert assert_accuracy("gelu.tanh", dtype="fp16", max_ulp=1e9, specials=True).special_failures == 1


def test_a_pytest_failure_of_assert_accuracy_is_concise(tmp_path):
    import subprocess
    import sys

    (tmp_path / "test_user.py").write_text(
        "from audit.testing import assert_accuracy\n\n"
        "def test_mine():\n"
        "    assert_accuracy('sigmoid.naive', dtype='fp16', max_ulp=1)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert r.returncode == 1 and "12916 NaN results" in r.stdout
    assert "problems = []" not in r.stdout and "__tracebackhide__" not in r.stdout


def test_the_readme_example_spec_works_as_written(tmp_path, monkeypatch, capsys):
    """The spec of docs/getting-started/first-gate.md (the README's CI gate section once)."""
    gate_section = (Path(__file__).parents[1] / "docs" / "getting-started" / "first-gate.md").read_text()
    toml = gate_section.split("```toml\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "actaudit.toml").write_text(toml)
    code, out, err = run(capsys, "baseline")
    assert code == 0, out + err
    code, out, err = run(capsys, "check")
    assert code == 0 and "0 failed" in out, out + err


def test_the_readme_assert_accuracy_block_runs():
    page = Path(__file__).parents[1] / "docs" / "how-to" / "gate-a-repository.md"
    text = page.read_text()
    block = text[text.index("In test suites:") :].split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(block, str(page), "exec"), {})


def test_the_python_api_takes_callables_and_raises_only_its_own_errors():
    import audit
    from audit.errors import ActauditError

    def my_gelu(x):  # erf-GELU in float64, rounded once to the storage dtype
        from scipy.special import erf

        t = x.astype(np.float64)
        return (0.5 * t * (1 + erf(t / np.sqrt(2)))).astype(x.dtype)

    (r,) = audit.sweep(my_gelu, reference="gelu", dtype="fp16")
    (r2,) = audit.sweep([my_gelu], reference="gelu", dtype="fp16")
    assert r.max_ulp == r2.max_ulp and r.domain.count == 63488
    assert r.correctly_rounded_fraction > 0.99
    for bad in (dict(targets=3), dict(targets=[my_gelu]), dict(targets=[None], reference="gelu")):
        kw = {"reference": None, **bad}
        with pytest.raises(ActauditError):
            audit.sweep(kw.pop("targets"), dtype="fp16", **kw)


def test_nan_metrics_in_a_baseline_do_not_pass_finite_ones(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    spec(tmp_path, '[[audit]]\nname = "t"\ntargets = ["gelu.tanh"]\ndtype = "fp16"\n')
    assert main(["baseline"]) == 0
    doc = json.loads((tmp_path / "b.json").read_text())
    (entry,) = doc["entries"].values()
    for m in ("max_ulp", "p99_ulp", "mean_ulp", "max_abs", "max_rel"):
        entry[m] = "nan"  # valid as written (a result without finite outputs), but not here
    (tmp_path / "b.json").write_text(json.dumps(doc))
    capsys.readouterr()
    code, out, _ = run(capsys, "check")
    assert code == 1 and re.search(r"max_ulp = [0-9.e+]+ has no baseline value", out)
