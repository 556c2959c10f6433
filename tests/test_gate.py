"""The CI gate: spec, baseline, check, JUnit and Markdown, assert_accuracy."""

import dataclasses
import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from audit.cli import main
from audit.targets import candidates
from audit.testing import assert_accuracy

SPEC = """
baseline = "base.json"

[[audit]]
name = "small"
targets = ["gelu.tanh", "sigmoid.naive"]
dtype = "fp16"

[[audit]]
name = "tight"
targets = ["gelu.erfc"]
dtype = ["fp8_e4m3"]
tolerance = { max_ulp = 16, nan = false, inf = false }
"""


@pytest.fixture
def project(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "actaudit.toml").write_text(SPEC)
    assert main(["baseline"]) == 0
    capsys.readouterr()
    return tmp_path


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def replace_candidate(monkeypatch, cid, fn):
    old = candidates.REGISTRY[cid]
    monkeypatch.setitem(candidates.REGISTRY, cid, dataclasses.replace(old, fn=fn))


def test_check_passes_on_an_unchanged_tree(project, capsys):
    doc = json.loads((project / "base.json").read_text())
    assert doc["schema"] == "actaudit.baseline/4" and len(doc["entries"]) == 3
    code, out, _ = run(capsys, "check", "--junit", "j.xml", "--markdown", "s.md")
    assert code == 0 and "0 failed" in out
    root = ET.parse(project / "j.xml").getroot()
    suite = root.find("testsuite")
    assert suite.get("tests") == "3" and suite.get("failures") == "0"
    assert len(suite.findall("testcase")) == 3
    assert "## actaudit check: passed" in (project / "s.md").read_text()


def test_check_fails_when_a_constant_changes(project, capsys, monkeypatch):
    from approximations.primitives import SQRT_2_OVER_PI

    def worse(x, m):  # 0.044715 -> 0.0457 (0.0447 would round to the same fp16 constant)
        return 0.5 * x * (1 + m.tanh(SQRT_2_OVER_PI * (x + 0.0457 * (x * x * x))))

    replace_candidate(monkeypatch, "gelu.tanh", worse)
    code, out, _ = run(capsys, "check", "--junit", "j.xml", "--markdown", "s.md")
    assert code == 1
    assert "gelu.tanh" in out and "p99_ulp got worse" in out and "mean_ulp got worse" in out
    root = ET.parse(project / "j.xml").getroot()
    fails = [tc for tc in root.iter("testcase") if tc.find("failure") is not None]
    assert len(fails) == 1 and "gelu.tanh" in fails[0].get("name")
    assert "got worse" in fails[0].find("failure").get("message")
    md = (project / "s.md").read_text()
    assert "FAILED" in md and "| fail | `small/gelu.tanh/fp16/fp16` |" in md


def test_check_fails_on_a_new_nan_interval(project, capsys, monkeypatch):
    base = candidates.REGISTRY["sigmoid.naive"].fn

    def nan_below(x, m):
        y = base(x, m)
        return m.where(x < -100, np.nan, y)

    replace_candidate(monkeypatch, "sigmoid.naive", nan_below)
    code, out, _ = run(capsys, "check")
    below = float(np.float16(-100) - np.float16(2.0**-4))  # the largest fp16 below -100
    assert below == -100.0625
    assert code == 1 and f"new nan interval [-65504.0, {below}]" in out


def test_improvements_are_told_apart(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "actaudit.toml").write_text(SPEC)
    base = candidates.catalog()["gelu.tanh"].fn
    with monkeypatch.context() as mpatch:  # a baseline recorded from a worse kernel
        replace_candidate(mpatch, "gelu.tanh", lambda x, m: m.where(x < -100, np.nan, base(x, m)))
        assert main(["baseline"]) == 0
    capsys.readouterr()
    code, out, _ = run(capsys, "check")
    assert code == 0 and "improved" in out and "actaudit baseline" in out


def test_tolerances_and_safe_range(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "actaudit.toml").write_text(
        '[[audit]]\nname = "t"\ntargets = ["sigmoid.naive"]\ndtype = "fp16"\n'
        "tolerance = { max_ulp = 1.0, nan = false, safe_range = [-20.0, 20.0] }\n"
    )
    code, out, err = run(capsys, "baseline")  # results breaking their own tolerances: refused
    assert code == 1 and "--force" in err and not (tmp_path / "data").exists()
    assert "max_ulp" in out and "NAN results" in out and "safe clip range" in out
    assert main(["baseline", "--force"]) == 0
    assert "WARNING" in capsys.readouterr().out
    code, out, _ = run(capsys, "check")
    assert code == 1
    assert "max_ulp" in out and "NAN results" in out and "safe clip range" in out


@pytest.mark.parametrize(
    "text,needle",
    [
        ("[[audit\nname=", "malformed TOML"),
        ('[[audit]]\nname = "a"\ndtype = "fp16"\n', "audit[0].targets' is missing"),
        ('[[audit]]\nname = "a"\ntargets = 3\ndtype = "fp16"\n', "audit[0].targets' must be"),
        ('[[audit]]\nname = "a"\ntargets = ["gelux"]\ndtype = "fp16"\n', "unknown candidate"),
        (
            '[[audit]]\nname = "a"\ntargets = ["gelu"]\ndtype = "fp16"\ntolerance = { max_ulp = "x" }\n',
            "tolerance.max_ulp",
        ),
        ("audit = []\n", "non-empty array"),
    ],
)
def test_malformed_spec_exits_2(tmp_path, monkeypatch, capsys, text, needle):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "actaudit.toml").write_text(text)
    code, out, err = run(capsys, "baseline")
    assert code == 2 and needle in err and "actaudit.toml" in err
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    "mangle,needle",
    [
        (lambda t: t[: len(t) // 2], "corrupted JSON"),
        (lambda t: t.replace("actaudit.baseline/4", "other"), "key 'schema'"),
        (
            lambda t: json.dumps(
                {
                    "schema": "actaudit.baseline/4",
                    "actaudit": "0.1.0",
                    "spec": "actaudit.toml",
                    "verdict": {"slack": 0.0, "require_certified": False, "tolerances": {}, "expects": {}},
                    "entries": {"a": {"max_ulp": 1}},
                }
            ),
            "entries.a.candidate' is missing",
        ),
    ],
)
def test_corrupted_baseline_exits_2(project, capsys, mangle, needle):
    p = project / "base.json"
    p.write_text(mangle(p.read_text()))
    code, _, err = run(capsys, "check")
    assert code == 2 and needle in err and "base.json" in err


def test_pyproject_tool_section(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    body = "\n".join(
        line.replace("[[audit]]", "[[tool.actaudit.audit]]")
        for line in SPEC.splitlines()
        if not line.startswith("baseline")
    )
    (tmp_path / "pyproject.toml").write_text("[tool.actaudit]\n" + body)
    assert main(["baseline", "--out", "b.json"]) == 0
    assert main(["check", "--baseline", "b.json"]) == 0


def test_assert_accuracy():
    r = assert_accuracy("gelu.erfc", dtype="fp16", max_ulp=16, specials=True)  # its NaN at -inf allowed
    assert r.max_ulp <= 16
    with pytest.raises(AssertionError) as e:
        assert_accuracy("sigmoid.naive", dtype="fp16", max_ulp=1)
    msg = str(e.value)
    # NaN from x = 11.09375 (e^x >= 65520 rounds to inf, then inf / inf) to 65504: in [8, 16)
    # (16 - 11.09375) / 2^-7 = 628 values, then the 12 binades 2^4 .. 2^15 of 1024 each
    assert f"{628 + 12 * 1024} NaN results" in msg and "inf / inf = NaN" in msg
    # the worst finite input, found independently: exp, + and / each rounded to fp16
    # (numpy's float16 ops round once from float32: exact for + and /), sigmoid in float64
    x = np.arange(0x7C00, dtype=np.uint16)
    x = np.concatenate([x, x | 0x8000]).view(np.float16)
    with np.errstate(all="ignore"):
        t = np.exp(x.astype(np.float64)).astype(np.float16)
        got = (t / (np.float16(1) + t)).astype(np.float64)
        f = 1 / (1 + np.exp(-x.astype(np.float64)))
        ulp = 2.0 ** (np.maximum(np.floor(np.log2(f)), -14) - 10)
        err = np.where(np.isfinite(got), np.abs(got - f) / ulp, -1)
    worst = x[int(np.argmax(err))]
    assert f"x = {float(worst)!r} (0x{int(worst.view(np.uint16)):04x})" in msg

    def my_sigmoid(x):  # a user's function on float16 arrays
        return (1 / (1 + np.exp(-x.astype(np.float64)))).astype(np.float16)

    assert assert_accuracy(my_sigmoid, reference="sigmoid", dtype="fp16", max_ulp=0.5).max_ulp <= 0.5
