"""Bad command lines and hostile user functions: one line, exit 2 (issue 18 B1, B2, B5, C,
D); outputs never replace special files; stale temporaries are cleaned."""

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from audit.cli import main
from audit.io import write_text

ROOT = Path(__file__).parents[1]


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "args,needle",
    [
        (["sweep", "gelu", "--dtype", "fp32", "--samples", "100", "--seed", "-1"], "seed"),
        (["selftest", "--points", "1", "--seed", "-1"], "--seed"),
        (["sweep", "celu", "--param", "alpha=0"], "division by zero"),
        (["sweep", "gelu", "--workers", "100000"], "workers must be at most 1024"),
        (
            [
                "sweep",
                "sigmoid.clamped",
                "-d",
                "fp8_e4m3",
                "--param",
                "limit=" + ",".join(str(i) for i in range(1, 5000)),
            ],
            "more than 4096",
        ),
        (["sweep", "gelu", "--json", ""], "an empty string after --json"),
        (
            ["sweep", "sigmoid.exp", "--dtype", "int8:scale=0.0625,zero=0", "--csv", "q.csv"],
            "not for quantized or block-scaled",
        ),
        (
            ["sweep", "gelu.tanh", "--out-dtype", "mxfp8_e4m3", "--semantics", "ftz"],
            "not for quantized or block-scaled",
        ),
        (["sweep", "relu.max", "-d", "fp8_e4m3", "--device", "cuda"], "--device applies"),
        (
            [
                "sweep",
                "gelu",
                "-d",
                "fp32",
                "--exhaustive",
                "--range",
                "1:1.001",
                "--checkpoint",
                "ck",
                "--csv",
                "x.csv",
            ],
            "--checkpoint",
        ),
    ],
)
def test_bad_command_lines_are_one_line(tmp_path, monkeypatch, capsys, args, needle):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(capsys, *args)
    assert code == 2 and needle in err and err.count("\n") == 1 and err.startswith("actaudit: error:")
    assert list(tmp_path.iterdir()) == []


def test_the_fp64_grid_holds_no_infinity():
    from audit.numbers.formats import get_format
    from audit.numbers.inputs import axis_values

    fp64 = get_format("fp64")
    for side in (64, 1024):
        ax, _ = axis_values(fp64, None, side, 0)
        assert np.isfinite(ax).all() and ax.max() == np.finfo(np.float64).max
        assert ax.min() == -np.finfo(np.float64).max


def test_the_fp64_gated_sweep_runs(capsys):
    code, out, err = run(capsys, "sweep", "reglu.relu_mul", "--dtype", "fp64", "--grid", "64", "-q")
    assert code == 0, err


USER = """
import sys
import numpy as np

def ragged(x):
    return [[1.0], [1.0, 2.0]]

def chatty(x):
    print("hello from the kernel")
    sys.stdout.flush()
    import os
    os.write(1, b"raw bytes on fd 1\\n")
    return np.maximum(x, np.zeros_like(x))  # relu, exactly

def exits(x):
    sys.exit(3)

def gen_exit(x):
    raise GeneratorExit("odd")

class Odd(BaseException):
    pass

def base_exc(x):
    raise Odd("not an Exception")

def one_arg(x):
    return x

def hangs(x):
    while True:
        try:
            pass
        except Exception:  # cannot swallow the timeout
            pass
"""


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "userfns.py").write_text(USER)
    sys.modules.pop("userfns", None)
    yield
    sys.modules.pop("userfns", None)


@pytest.mark.parametrize(
    "fn,ref,needle",
    [
        ("ragged", "gelu", "ragged"),
        ("exits", "gelu", "sys.exit(3)"),
        ("gen_exit", "gelu", "GeneratorExit"),
        ("base_exc", "gelu", "Odd"),
        ("one_arg", "swiglu", "univariate"),
    ],
)
def test_hostile_user_functions_are_one_line(user_module, capsys, fn, ref, needle):
    code, _, err = run(capsys, "sweep", f"userfns:{fn}", "--reference", ref, "--dtype", "fp16")
    assert code == 2 and err.startswith("actaudit: error:") and err.count("\n") == 1
    assert "Traceback" not in err and (needle in err or (fn == "ragged" and "ValueError" in err))


def test_a_hanging_user_function_times_out(user_module, tmp_path, capsys):
    # in a process of its own: SIGALRM interrupting the user's loop in a pytest process that
    # has loaded OpenVINO or LiteRT before killed that process with SIGSEGV (noted in
    # docs/contributing.md; the command line loads an engine only for an engine target)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
    argv = ["sweep", "userfns:hangs", "--reference", "gelu", "--dtype", "fp16", "--timeout", "0.5"]
    r = subprocess.run([sys.executable, "-m", "audit.cli", *argv], capture_output=True, text=True, env=env)
    code, err = r.returncode, r.stderr
    assert code == 2 and "did not return within 0.5 s" in err and err.count("\n") == 1, err
    code, _, err = run(capsys, "sweep", "userfns:hangs", "--reference", "gelu", "--timeout", "nan")
    assert code == 2 and "--timeout" in err


DANGLING_STACK = """
import ctypes, sys
libc = ctypes.CDLL(None)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


class Stack(ctypes.Structure):
    _fields_ = [("sp", ctypes.c_void_p), ("flags", ctypes.c_int), ("size", ctypes.c_size_t)]


# what a library may leave (OpenVINO's CPU plugin, two Cores torn down out of order): the
# thread's alternate signal stack installed, then freed (here: made inaccessible, so that
# no later allocation can take the place and hide it)
size = 1 << 16
addr = libc.mmap(None, size, 3, 0x22, -1, 0)  # PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS
assert libc.sigaltstack(ctypes.byref(Stack(addr, 0, size)), None) == 0
assert libc.mmap(addr, size, 0, 0x32, -1, 0) == addr  # PROT_NONE, ... | MAP_FIXED
from audit.cli import main

sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sigaltstack through ctypes: Linux")
def test_a_deadline_survives_a_dangling_signal_stack(user_module, tmp_path):
    # CPython runs its signal handlers on the alternate stack (SA_ONSTACK): with a dangling
    # one, the SIGALRM of --timeout wrote its frame into freed memory (SIGSEGV, rc -11)
    (tmp_path / "dangling.py").write_text(DANGLING_STACK)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
    argv = ["sweep", "userfns:hangs", "--reference", "gelu", "--dtype", "fp16", "--timeout", "0.3"]
    r = subprocess.run(
        [sys.executable, str(tmp_path / "dangling.py"), *argv], capture_output=True, text=True, env=env
    )
    assert r.returncode == 2 and "did not return within 0.3 s" in r.stderr, (r.returncode, r.stderr)


def test_a_printing_user_function_does_not_corrupt_json_on_stdout(user_module, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "audit.cli",
            "sweep",
            "userfns:chatty",
            "--reference",
            "relu",
            "--dtype",
            "fp8_e4m3",
            "--json",
            "-",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # the whole of stdout is the document
    assert doc["results"][0]["max_ulp"] == 0.0  # max(x, 0) is relu exactly
    assert "hello from the kernel" in r.stderr and "raw bytes on fd 1" in r.stderr


# ------------------------------------------------------------ special files
def test_outputs_to_a_fifo_and_stdout_are_written_not_replaced(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    # no reader: refused in one line (opening it to write waited for ever)
    args = ["sweep", "relu.max", "-d", "fp8_e4m3", "-c", "fp8_e4m3", "-q", "--json", str(fifo)]
    assert main(args) == 2
    # a reader (its end open before the run: no race), draining as the sweep writes; the
    # test holds a write end too, so that the reader sees the end of file only when the
    # test closes it, after the run (not before the sweep opens its own)
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    os.set_blocking(fd, True)
    wfd = os.open(fifo, os.O_WRONLY)
    got = []

    def drain():
        with os.fdopen(fd, "rb") as fh:
            got.append(fh.read())

    reader = threading.Thread(target=drain)
    reader.start()
    try:
        assert main(args) == 0
    finally:
        os.close(wfd)
    reader.join(60)
    assert stat.S_ISFIFO(fifo.lstat().st_mode)  # still a FIFO
    assert json.loads(got[0])["schema"].startswith("actaudit.sweep/")
    link = tmp_path / "out-link"
    link.symlink_to("/dev/fd/1")  # a symlink to stdout: written through, kept a symlink
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "audit.cli",
            "sweep",
            "relu.max",
            "-d",
            "fp8_e4m3",
            "-c",
            "fp8_e4m3",
            "-q",
            "--csv",
            str(link),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0 and link.is_symlink() and r.stdout.startswith("candidate,dtype")
    assert len(r.stdout.splitlines()) == 1 + 254  # a header and the finite fp8_e4m3 values
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out-link", "pipe"]


def test_a_symlink_to_a_regular_file_replaces_the_file_not_the_link(tmp_path):
    target = tmp_path / "real.json"
    target.write_text("old")
    os.chmod(target, 0o640)
    link = tmp_path / "link.json"
    link.symlink_to(target)
    write_text(link, "new")
    assert link.is_symlink() and target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


def test_stale_temporaries_of_dead_runs_are_cleaned(tmp_path):
    # a pid that no longer exists: a child that has exited and been reaped
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    stale = tmp_path / f".r.json.{p.pid}.abcd1234.tmp"
    stale.write_bytes(b"half")
    # a checkpoint's arrays, killed while saving chunk 5: the next save writes another name
    stale_ck = tmp_path / f".0123abcd.5.npz.{p.pid}.k2j_x9zq.tmp"
    stale_ck.write_bytes(b"half")
    live = tmp_path / f".r.json.{os.getpid()}.efgh5678.tmp"  # a run still going (this process)
    live.write_bytes(b"half")
    mine = tmp_path / f".notes.{p.pid}.tmp"  # not a name atomic_path makes: left alone
    mine.write_bytes(b"keep")
    write_text(tmp_path / "r.json", "{}")
    assert not stale.exists() and not stale_ck.exists() and live.exists() and mine.exists()
    assert (tmp_path / "r.json").read_text() == "{}"


def test_a_shared_cache_directory_follows_the_umask(tmp_path, monkeypatch):
    import audit
    from audit.oracle import oracle

    monkeypatch.setenv("ACTAUDIT_CACHE_DIR", str(tmp_path / "c"))
    oracle._MEMO.clear()
    old = os.umask(0o002)  # group-writable: a cache shared by a team
    try:
        audit.sweep("relu.max", dtype="fp8_e5m2")
    finally:
        os.umask(old)
        oracle._MEMO.clear()
    (f,) = (tmp_path / "c").glob("*.npz")
    assert stat.S_IMODE(f.stat().st_mode) == 0o664


def test_junit_and_markdown_hold_any_audit_name():
    import xml.etree.ElementTree as ET

    from audit.gate.check import Change
    from reports import junit, markdown

    name = "a\x01b\x1b[31m`x``/gelu.tanh/fp16/fp16"
    changes = [Change(name, "gelu.tanh", "fail", ["p99_ulp got worse: 1 -> 2\x00"])]
    root = ET.fromstring(junit.render(changes).split("\n", 1)[1])  # well-formed XML 1.0
    tc = root.find("testsuite/testcase")
    assert tc.get("name") == "a\\x01b\\x1b[31m`x``/gelu.tanh/fp16/fp16"
    md = markdown.render(changes)
    # CommonMark: a code span opened by 3 backticks closes at the next run of exactly 3
    row = next(line for line in md.splitlines() if line.startswith("| fail"))
    assert "| ```a\\x01b\\x1b[31m`x``/gelu.tanh/fp16/fp16``` |" in row


def test_errors_name_the_users_path_not_a_temporary(tmp_path, capsys, monkeypatch):
    import builtins

    real_open = builtins.open

    def full_disk(path, mode="r", *a, **k):
        if "w" in mode and ".tmp" in str(path):
            raise OSError(28, "No space left on device", str(path))
        return real_open(path, mode, *a, **k)

    monkeypatch.setattr(builtins, "open", full_disk)
    code = main(
        ["sweep", "relu.max", "-d", "fp8_e4m3", "-c", "fp8_e4m3", "-q", "--json", str(tmp_path / "r.json")]
    )
    err = capsys.readouterr().err
    assert code == 2 and f"{tmp_path / 'r.json'}: No space left on device" in err and ".tmp" not in err
    assert list(tmp_path.iterdir()) == []


def test_devices_and_descriptors_count_as_special_targets(tmp_path):
    from audit.io import is_special

    # (checked, not written: a regression here must not replace this machine's /dev/null)
    assert is_special("/dev/null") and is_special("-") and is_special("/dev/fd/1")
    assert is_special("/proc/self/fd/2")
    link = tmp_path / "null-link"
    link.symlink_to("/dev/null")
    assert is_special(link)
    assert not is_special(tmp_path / "new.json") and not is_special(tmp_path)


@pytest.mark.parametrize(
    "args,needle",
    [
        (["swep", "gelu"], "No such command 'swep'"),
        (["sweep", "gelu", "--dtyp", "fp16"], "--dtyp"),
        (["sweep", "gelu", "--samples", "abc"], "--samples"),
        (["report", "gelu", "--dtype", "fp16"], "--out"),
        (["diff", "gelu.tanh"], "Missing argument"),
        (["list", "gelu", "silu"], "unexpected extra argument"),  # list takes one FAMILY
    ],
)
def test_usage_errors_are_one_line(capsys, args, needle):
    """Mistakes the option parser catches follow the same contract as every other error."""
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert err.startswith("actaudit: error:") and err.count("\n") == 1 and needle in err, err
    assert out == ""


def _value_options():
    """(command, option) for every option of every command that takes a value."""
    import typer.main

    from audit.cli import app

    group = typer.main.get_command(app)
    for name, cmd in group.commands.items():
        for prm in cmd.params:
            if (
                getattr(prm, "is_flag", True)
                or getattr(prm, "count", False)
                or prm.param_type_name != "option"
            ):
                continue
            for opt in prm.opts:
                yield name, opt


def test_an_empty_value_is_refused_for_every_option_of_every_command(tmp_path, monkeypatch, capsys):
    # "" as a path is the current directory to pathlib: `--report ""` wrote a whole report
    # into it, `baseline -o ""` said ".: is a directory"; a blank value is refused, naming
    # the option, before the command runs (nothing written)
    monkeypatch.chdir(tmp_path)
    seen = set()
    for name, opt in _value_options():
        seen.add(opt)
        forms = {f"after {opt}": [opt, ""], f"after {opt} ": [opt, "  "]}
        if opt.startswith("--"):
            forms[f"in '{opt}= '"] = [opt + "= "]
        for where, form in forms.items():
            code, out, err = run(capsys, name, *form)
            want = f"actaudit: error: an empty string {where.strip()}: no option's value or argument may be empty\n"
            assert code == 2 and err == want, (name, form, err)
    assert {"--out", "-o", "--report", "--json", "--csv", "--dump", "--spec", "--checkpoint"} <= seen
    for args, where in (
        (["sweep", ""], "as an argument"),
        (["sweep", "--exhaustive", ""], "after --exhaustive"),
    ):
        code, out, err = run(capsys, *args)
        assert (
            code == 2
            and err
            == f"actaudit: error: an empty string {where}: no option's value or argument may be empty\n"
        )
    assert not any(tmp_path.iterdir())


def _nothing_runs(*a, **k):
    raise AssertionError("the work ran before its output files were checked")


@pytest.mark.parametrize(
    "command",
    [
        ["sweep", "gelu.erf", "-d", "fp8_e4m3"],
        ["fit", "gelu", "-d", "fp16"],
        ["fit", "gelu", "-d", "fp8_e4m3"],
        ["identify", "gelu.erf"],
        ["suggest", "gelu", "-d", "fp8_e4m3"],
    ],
    ids=["sweep", "fit-vector", "fit-table", "identify", "suggest"],
)
@pytest.mark.parametrize("case", ["directory", "under-a-file", "unwritable", "twice"])
def test_output_files_are_checked_before_the_work(tmp_path, monkeypatch, capsys, command, case):
    # --json (and --csv, --html) into a directory, under a file, where no file can be made, or
    # two options naming one file: refused at once (they failed after the whole sweep or fit,
    # or one output silently replaced the other)
    import audit.measure.sweep as sweep_mod
    from audit.model import site_identify
    from audit.repair import fit, fit_shapes, suggest

    for mod, name in [
        (sweep_mod, "sweep"),
        (fit_shapes, "fit_best"),
        (fit, "fit_and_verify"),
        (site_identify, "identify_target"),
        (suggest, "suggest"),
    ]:
        monkeypatch.setattr(mod, name, _nothing_runs)
    (tmp_path / "f").write_text("")
    path = {
        "directory": tmp_path,
        "under-a-file": tmp_path / "f" / "x.json",
        "unwritable": Path("/proc/self/x.json"),
        "twice": tmp_path / "same.out",
    }[case]
    extra = ["-o", str(tmp_path)] if command[0] == "fit" else []
    second = {"sweep": "--csv", "suggest": "--html"}.get(command[0])
    if case == "twice":
        if second is None:
            pytest.skip("one output file option only")
        extra += [second, str(path)]
    code, _, err = run(capsys, *command, *extra, "--json", str(path))
    assert code == 2 and err.startswith("actaudit: error: ") and err.count("\n") == 1, err
    want = {
        "directory": "is a directory",
        "under-a-file": "is not a directory",
        "unwritable": "cannot write there",
        "twice": "name the same file",
    }[case]
    assert want in err, err


def test_check_checks_its_report_files_before_the_re_sweep(tmp_path, monkeypatch, capsys):
    import audit.gate.check as check_mod

    monkeypatch.setattr(check_mod, "check_command", _nothing_runs)
    same = str(tmp_path / "r.txt")
    code, _, err = run(capsys, "check", "--junit", same, "--markdown", same)
    assert code == 2 and "--junit and --markdown name the same file" in err and err.count("\n") == 1, err
    code, _, err = run(capsys, "check", "--junit", str(tmp_path))
    assert code == 2 and "--junit" in err and "is a directory" in err, err


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_a_set_whose_member_is_not_a_regular_file_writes_nothing(tmp_path, kind):
    # a fit or report set with a directory (or FIFO) where one member goes: refused before
    # any member is written (the others were moved in, then the set failed half-written)
    from audit.errors import BadOptionError
    from audit.io import write_files

    if kind == "directory":
        (tmp_path / "b.txt").mkdir()
    else:
        os.mkfifo(tmp_path / "b.txt")
    with pytest.raises(BadOptionError, match="b.txt: not a regular file"):
        write_files(tmp_path, [("a.txt", "1"), ("b.txt", "2"), ("c.txt", "3")])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.txt"]
    (tmp_path / "link").symlink_to(tmp_path / "b.txt")  # a link is itself replaced: allowed
    write_files(tmp_path, [("a.txt", "1"), ("link", "2")])
    assert (tmp_path / "link").read_text() == "2" and not (tmp_path / "link").is_symlink()


def test_an_error_line_is_bounded(tmp_path, capsys):
    # a 5 MB baseline path in a spec was echoed whole in its one error line
    spec = tmp_path / "actaudit.toml"
    spec.write_text(
        f'baseline = "{"A" * 5_000_000}"\n[[audit]]\nname = "a"\ntargets = ["gelu.erf"]\ndtype = "fp8_e4m3"\n'
    )
    code, _, err = run(capsys, "check", "--spec", str(spec))
    assert code == 2 and err.count("\n") == 1 and err.startswith("actaudit: error: "), err[:200]
    assert len(err) < 2100 and err.rstrip().endswith("more characters)"), err[-200:]


def test_a_semantics_table_is_checked_where_no_candidate_uses_it(tmp_path, capsys):
    # gelu.erf has no exp: exp=table:FILE was never opened, so a missing file (or a FIFO) passed
    os.mkfifo(tmp_path / "fifo.npz")
    for name, needle in (("missing.npz", "No such file"), ("fifo.npz", "not a regular file")):
        args = ["sweep", "gelu.erf", "-d", "fp8_e4m3", "-q", "--semantics", f"exp=table:{tmp_path / name}"]
        code, _, err = run(capsys, *args)
        assert code == 2 and needle in err and err.count("\n") == 1, err


@pytest.mark.parametrize(
    "extra,named",
    [
        (["--elements", "-1"], "--elements"),
        (["--scale-rule", "foo"], "--scale-rule"),
        (["--blocks", "normal:std=nan"], "--blocks"),
        (["--elements", "4096", "--scale-rule", "ocp"], "--elements"),  # (ocp: the default)
    ],
)
def test_block_options_without_block_output_are_refused(capsys, extra, named):
    code, _, err = run(capsys, "sweep", "gelu.erf", "-d", "fp8_e4m3", "-q", *extra)
    assert code == 2 and err.count("\n") == 1 and f"{named}: only for a block-scaled" in err, err


def test_suggest_refuses_two_machines_and_no_samples(capsys):
    base = ["suggest", "gelu", "-d", "fp8_e4m3", "--brief"]
    code, _, err = run(capsys, *base, "--semantics", "ftz", "--semantics", "daz")
    assert code == 2 and "--semantics: one machine" in err and err.count("\n") == 1, err
    code, _, err = run(capsys, *base, "--samples", "0")
    assert code == 2 and "--samples must be positive" in err and err.count("\n") == 1, err
