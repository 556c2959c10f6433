"""Hostile inputs that gave tracebacks or were accepted silently (issue 39, items 12, 13).

Each case is one line ``actaudit: error: ...`` and exit 2 (or, where the docs describe
what the command does, that result), never a traceback."""

from __future__ import annotations

import ast
import os

import numpy as np
import pytest

from audit.cli import main


def _one_line(code, err, *words):
    assert code == 2, err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("actaudit: error: "), err
    for w in words:
        assert w in lines[0], err


# ------------------------------------------------------------ item 12: .npy
def _npy_with_shape(path, shape, dtype="<f4", n=6):
    """A .npy file whose header declares ``shape`` (written by hand: numpy refuses to)."""
    header = repr({"descr": dtype, "fortran_order": False, "shape": shape}).encode()
    header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
    path.write_bytes(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + b"\0" * 4 * n)
    assert ast.literal_eval(header.decode().strip())["shape"] == shape


@pytest.mark.parametrize(
    "args",
    [
        ["sweep", "gelu.tanh", "-d", "fp16", "--distribution", "npy:{f}"],
        ["sweep", "lut:{f}", "-d", "fp8_e4m3", "--reference", "relu"],
        ["sweep", "--dump", "{f}", "--reference", "relu", "-d", "fp8_e4m3"],
        ["golden", "gelu", "--inputs", "{f}", "-o", "g.npz"],
        ["sweep", "gelu.tanh", "-d", "bf16", "--out-dtype", "mxfp8_e4m3", "--blocks", "npy:{f}"],
        ["baseline"],  # the spec's distribution = "npy:neg.npy"
    ],
    ids=["distribution", "lut", "dump", "inputs", "blocks", "spec"],
)
def test_an_npy_whose_negative_dimensions_multiply_to_a_positive_count(tmp_path, capsys, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    f = tmp_path / "neg.npy"
    _npy_with_shape(f, (-2, -3))  # (-2) * (-3) = 6 elements, 24 bytes of data: all there
    (tmp_path / "actaudit.toml").write_text(
        '[[audit]]\nname = "w"\ntargets = ["gelu.tanh"]\ndtype = "fp16"\ndistribution = "npy:neg.npy"\n'
    )
    code = main([a.format(f=f) for a in args])
    _one_line(code, capsys.readouterr().err, "neg.npy")


def test_the_npy_reader_refuses_a_negative_dimension_itself(tmp_path):
    from audit.errors import BadFileError
    from audit.io import load_npy

    f = tmp_path / "neg.npy"
    _npy_with_shape(f, (-2, -3))
    with pytest.raises(BadFileError, match="negative dimension"):
        load_npy(f, 1 << 20)


# ---------------------------------------------------- item 12: lut int8 -> fp16
def test_a_table_from_int8_codes_to_fp16_is_written_as_the_docs_describe(tmp_path, capsys):
    """docs/concepts/lookup-tables.md: one entry per input code, the bit patterns of
    RN_OUT(f(x)) for a float OUT (it was an AttributeError)."""
    import mpmath

    out = tmp_path / "t.npz"
    code = main(["lut", "gelu", "-d", "int8:scale=0.1,zero=0", "--out-dtype", "fp16", "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    with np.load(out, allow_pickle=False) as z:
        table = z["table"]
    assert len(table) == 256
    scale = float(np.float32(0.1))  # the scale as the format holds it (fp32)
    for i in (0, 37, 128, 129, 200, 255):
        q = i - 128
        x = mpmath.mpf(q) * mpmath.mpf(scale)
        with mpmath.workdps(60):
            f = x * (1 + mpmath.erf(x / mpmath.sqrt(2))) / 2
        want = np.float16(float(f))  # fp16 round of a double: exact enough away from ties
        assert np.uint16(table[i]) == want.view(np.uint16), (i, float(f))


# ----------------------------------------------------------- item 12: mathtext
def test_file_names_holding_dollars_are_drawn_as_plain_text(tmp_path, capsys, monkeypatch):
    from audit.numbers.formats import get_format

    monkeypatch.chdir(tmp_path)
    x = get_format("fp8_e4m3").finite_values()
    name = "d$\\foo{$.npz"  # invalid mathtext: matplotlib raised ParseFatalException
    np.savez(name, x=x.astype(np.float32), y=np.maximum(x, 0).astype(np.float32))
    code = main(["report", "--dump", name, "--reference", "relu", "-d", "fp8_e4m3", "--out", "rep"])
    err = capsys.readouterr().err
    assert code == 0 and "Traceback" not in err, err
    assert (tmp_path / "rep" / "index.html").exists()
    code = main(
        ["diff", f"dump:{name}", "relu.max", "-d", "fp8_e4m3", "--reference", "relu", "--report", "drep"]
    )
    err = capsys.readouterr().err
    assert code in (0, 1) and "Traceback" not in err, err
    assert any((tmp_path / "drep").iterdir())
    assert os.path.exists(name)


# ------------------------------------------------ item 13: stale report sets
def test_a_set_left_by_a_killed_writer_is_removed_by_the_next_run(tmp_path):
    """A SIGKILL during report/fit left .actaudit-report-XXXX/ forever.  The set's lock
    names a process: a dead one (a child started and reaped here) makes the set stale; a
    live one (this process) keeps it."""
    import subprocess
    import sys

    from audit.io import SET_LOCK, SET_PREFIX, write_files

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its pid names no process now
    stale, live = tmp_path / f"{SET_PREFIX}stale", tmp_path / f"{SET_PREFIX}live"
    for d, pid in ((stale, dead.pid), (live, os.getpid())):
        d.mkdir()
        (d / SET_LOCK).write_text(f"{pid}\n")
        (d / "fig.png").write_bytes(b"x" * 10)
    write_files(tmp_path, [("a.txt", "A"), ("index.html", "<p>")])
    assert not stale.exists() and live.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["a.txt", "index.html", live.name])


def test_a_report_killed_with_sigkill_leaves_a_set_the_next_report_removes(tmp_path):
    import signal
    import sys

    from tests.test_signals import Run

    out = tmp_path / "rep"
    out.mkdir()
    (tmp_path / "r").mkdir()
    run = Run(["report", "gelu", "--dtype", "fp16,bf16", "--out", str(out)], tmp_path / "r", cwd=tmp_path)
    pid = run.wait_for("sweep")
    # a set as the killed writer leaves it (SIGKILL at the moment of the write)
    left = out / ".actaudit-report-killed"
    left.mkdir()
    (left / ".pid").write_text(f"{pid}\n")
    os.kill(pid, signal.SIGKILL)
    code, _, _, _ = run.finish()
    assert code == -signal.SIGKILL and left.exists()
    import subprocess

    r = subprocess.run(
        [sys.executable, "-m", "audit.cli", "report", "relu.max", "-d", "fp8_e4m3", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert not left.exists() and (out / "index.html").exists()


# --------------------------------------- item 13: options that do not apply
@pytest.mark.parametrize(
    "args, words",
    [
        (["sweep", "gelu.tanh", "-d", "fp16", "--dump-dtype", "fp16"], ["--dump-dtype applies to --dump"]),
        (["sweep", "gelu.tanh", "-d", "bf16", "--grid", "8"], ["--grid applies to gated units"]),
        (["sweep", "gelu.tanh", "-d", "fp16", "--seed", "3"], ["--seed 3", "fp16 swept exhaustively"]),
        (
            ["sweep", "gelu.tanh", "-d", "fp32", "--exhaustive", "--range", "1:1.001", "--seed", "3"],
            ["--seed 3"],
        ),
        (["sweep", "swiglu", "-d", "fp8_e4m3", "--seed", "3"], ["--seed 3"]),  # every pair of 8 bits
        (
            [
                "sweep",
                "gelu",
                "-d",
                "int8:scale=0.1,zero=0",
                "--out-dtype",
                "int8:scale=0.01,zero=0",
                "--samples",
                "9",
            ],
            ["--samples"],
        ),
        (
            [
                "sweep",
                "gelu.tanh",
                "-d",
                "bf16",
                "--out-dtype",
                "mxfp8_e4m3",
                "--blocks",
                "exhaustive",
                "--elements",
                "64",
            ],
            ["--elements applies to sampled --blocks"],
        ),
    ],
    ids=["dump-dtype", "grid", "seed-fp16", "seed-exhaustive", "seed-fp8-pairs", "samples-int8", "elements"],
)
def test_options_that_do_not_apply_are_refused(capsys, args, words):
    _one_line(main(args), capsys.readouterr().err, *words)


def test_the_same_options_where_they_apply_are_taken(capsys):
    assert main(["sweep", "gelu.tanh", "-d", "fp32", "--samples", "2000", "--seed", "3", "-q"]) == 0
    assert main(["sweep", "swiglu", "-d", "bf16", "--grid", "8", "--seed", "2", "-q"]) == 0
    assert "error" not in capsys.readouterr().err
