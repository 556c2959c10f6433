"""Bad input never gives a traceback; interruption leaves no partial file; the oracle's
self-test passes and catches a broken oracle."""

import dataclasses
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit.cli import main
from audit.measure import selftest
from audit.oracle import oracle, references

ACTAUDIT = [sys.executable, "-m", "audit.cli"]

WORDS = st.sampled_from(
    [
        "gelu.tanh",
        "relu.max",
        "sigmoid.exp",
        "swiglu.reglu",
        "gelu",
        "nope",
        "torch:nothing",
        "nomod:f",
        "",
        "-",
        "--",
        "fp8_e4m3",
        "fp8_e5m2",
        "fp17",
        "nan",
        "inf",
        "-1e309",
        "3:1",
        "1:2",
        "nan:1",
        ":",
        "0",
        "-5",
        "1e30",
        "99999999999999999999",
        "limit=8",
        "beta=x",
        "a=1,2",
        "=3",
        "gelu_grad.tanh",
        "x" * 300,
        "<b>",
        "é",
        "0x3c00",
        "--dtype",
        "--range",
        "--samples",
        "--param",
        "--json",
        "--compute",
        "--grid",
        "--max-ulp",
        "--atol",
        "--grad",
        "--exhaustive",
        "--seed",
        "--reference",
        "--quiet",
        "--findings",
        # issue 18: hostile values and the options they reach
        "--workers",
        "100000",
        "-1",
        "celu",
        "alpha=0",
        "reglu.relu_mul",
        "fp64",
        "--checkpoint",
        "--csv",
        "--device",
        "cuda",
        "--dump",
        "/dev/zero",
        "--inputs",
        "swiglu",
        "--strict",
        "--force",
        "--spec",
        "--baseline",
        "--grid",
        "2",
        "limit=1,2,3",
        "--json",
        "--report",
    ]
)
COMMANDS = st.sampled_from(
    [
        "sweep",
        "clip",
        "list",
        "formats",
        "golden",
        "selftest",
        "check",
        "baseline",
        "nonsense",
        "--version",
        "--help",
    ]
)


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(cmd=COMMANDS, args=st.lists(WORDS, max_size=7))
def test_cli_fuzz_never_tracebacks(cmd, args, capsys):
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as d:
        os.chdir(d)  # nothing is written where the tests run
        try:
            if cmd == "selftest":
                args = ["--points", "1"] + [a for a in args if a != "--points"]
            code = main([cmd] + args)
        finally:
            os.chdir(here)
    out, err = capsys.readouterr()
    assert code in (0, 1, 2), (cmd, args, code, err)
    assert "Traceback" not in out + err, (cmd, args)


def test_usage_errors_exit_2(capsys):
    assert main(["sweep", "gelu", "--nonsense"]) == 2
    assert main(["sweep", "gelu", "--samples", "abc"]) == 2
    assert main(["sweep", "gelu", "--dtype", "fp32", "--samples", str(10**12)]) == 2
    assert main(["sweep", "gelu", "--dtype", "fp32", "--exhaustive", "--csv", "x.csv"]) == 2
    assert main(["sweep", "gelu", "--dtype", "fp16", "--exhaustive", "--samples", "5"]) == 2
    assert main(["sweep", "swiglu", "--grid", "1000000"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err


def test_untrusted_input_lists_and_huge_dumps(tmp_path, capsys, monkeypatch):
    garbage = tmp_path / "in.npy"
    garbage.write_bytes(b"\x93NUMPY garbage")
    assert main(["golden", "gelu", "--inputs", str(garbage), "-o", str(tmp_path / "g.npz")]) == 2
    assert "in.npy" in capsys.readouterr().err
    trunc = tmp_path / "t.npy"
    np.save(trunc, np.zeros(100, np.float16))
    trunc.write_bytes(trunc.read_bytes()[:150])
    assert main(["sweep", "--dump", str(trunc), "--reference", "gelu"]) == 2
    assert "t.npy" in capsys.readouterr().err
    from audit.targets import dumps

    monkeypatch.setattr(dumps, "MAX_DUMP_BYTES", 100)
    big = tmp_path / "big.bin"
    big.write_bytes(b"\0" * 200)
    assert main(["sweep", "--dump", str(big), "--reference", "gelu"]) == 2
    assert "more than a dump" in capsys.readouterr().err
    assert not (tmp_path / "g.npz").exists()


def _run_and_signal(args, sig, stage, cwd, env=None):
    """Run actaudit, wait until it reports ``stage`` on its readiness FIFO (no fixed sleep),
    then send ``sig`` to it; its SIGINT disposition is set explicitly (it may be inherited
    as ignored)."""
    from tests.test_signals import Run

    run = Run(args, Path(tempfile.mkdtemp(prefix="ready-")), cwd=cwd, env=env)
    pid = run.wait_for(stage)
    assert run.p.poll() is None, "finished before the signal: make the work longer"
    os.kill(pid, sig)
    code, out, err, _ = run.finish()
    return code, out, err


def _leftovers(d: Path):
    return sorted(str(p.relative_to(d)) for p in d.rglob("*"))


def test_sigint_during_report_leaves_no_partial_output(tmp_path):
    out = tmp_path / "rep"
    code, _, err = _run_and_signal(
        ["report", "gelu", "--dtype", "fp16,bf16", "--out", str(out)], signal.SIGINT, "sweep", tmp_path
    )
    assert code == 130 and err.strip().splitlines()[-1] == "actaudit: interrupted"
    assert "Traceback" not in err
    assert _leftovers(out) == [] if out.exists() else True
    # a later run works normally
    r = subprocess.run(
        ACTAUDIT + ["report", "relu.max", "--dtype", "fp8_e4m3", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert r.returncode == 0 and (out / "index.html").exists()
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


def test_sigterm_during_sweep_leaves_no_partial_json(tmp_path):
    # per-input output of 838M inputs is refused up front, before any work
    r = subprocess.run(
        ACTAUDIT
        + [
            "sweep",
            "gelu.tanh",
            "--dtype",
            "fp32",
            "--exhaustive",
            "--range",
            "1:1e30",
            "--csv",
            str(tmp_path / "r.csv"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert r.returncode == 2 and "narrow --range" in r.stderr and _leftovers(tmp_path) == []
    code, _, err = _run_and_signal(
        [
            "sweep",
            "gelu.tanh",
            "--dtype",
            "fp32",
            "--exhaustive",
            "--range",
            "1:1e30",
            "--json",
            str(tmp_path / "r.json"),
        ],
        signal.SIGTERM,
        "chunk",
        tmp_path,
    )
    assert code == 143 and err.strip().splitlines()[-1] == "actaudit: terminated"
    assert _leftovers(tmp_path) == []


def test_sigint_during_baseline_leaves_no_baseline(tmp_path):
    (tmp_path / "actaudit.toml").write_text(
        '[[audit]]\nname = "slow"\ntargets = ["gelu"]\ndtype = "fp32"\nsamples = 4000000\n'
    )
    code, _, err = _run_and_signal(["baseline"], signal.SIGINT, "sweep", tmp_path)
    assert code == 130
    assert _leftovers(tmp_path) == ["actaudit.toml"]


def test_two_runs_at_once_share_the_cache(tmp_path):
    env = {**os.environ, "ACTAUDIT_CACHE_DIR": str(tmp_path / "cache")}
    procs = [
        subprocess.Popen(
            ACTAUDIT + ["sweep", "sigmoid", "exp", "--dtype", "bf16", "-q"],
            env=env,
            cwd=tmp_path,
            stderr=subprocess.PIPE,
        )
        for _ in range(3)
    ]
    assert [p.wait(timeout=300) for p in procs] == [0, 0, 0]
    files = list((tmp_path / "cache").glob("*.npz"))
    assert len(files) == 2 and not list((tmp_path / "cache").glob("*.tmp"))
    from audit.numbers.formats import get_format

    x = get_format("bf16").finite_values()
    assert all(oracle._load(f, x) is not None for f in files)


def test_selftest_passes_and_catches_a_broken_oracle(monkeypatch, capsys):
    assert main(["selftest", "--points", "40"]) == 0
    assert "0 failed" in capsys.readouterr().out
    good = references.REFERENCES["sigmoid"]
    broken = dataclasses.replace(good, fast=lambda x: good.fast(x) * (1 + 1e-3))
    monkeypatch.setitem(references.REFERENCES, "sigmoid", broken)
    monkeypatch.setenv("ACTAUDIT_NO_CACHE", "1")
    oracle._MEMO.clear()
    checks = selftest.run(["sigmoid"], ("fp16",), n=60)
    assert checks[0].disagreements > 0 and "sigmoid" in checks[0].reference
    assert main(["selftest", "--points", "40"]) == 1
    assert "FAIL sigmoid" in capsys.readouterr().out
    oracle._MEMO.clear()


def test_unwritable_paths_are_one_line(tmp_path, capsys):
    f = tmp_path / "afile"
    f.write_text("x")
    assert main(["report", "relu.max", "-d", "fp8_e4m3", "--out", str(f)]) == 2
    assert main(["golden", "gelu", "-o", str(f / "g.npz")]) == 2
    assert main(["sweep", "relu.max", "-d", "fp8_e4m3", "--json", str(f / "r.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("actaudit: error:") == 3 and "Traceback" not in err
