"""Signals stop actaudit within seconds, at any moment, whatever the load (issue 18 B3, B4,
C): SIGINT or SIGTERM to the main process alone stops a parallel sweep; workers die with
their parent; signals during the imports give one line.

Every test waits for a readiness line that actaudit writes to a FIFO
($ACTAUDIT_READY_FILE) at the stage it wants to interrupt (never a fixed sleep), and sets
the child's SIGINT disposition explicitly (it may be inherited as ignored, e.g. under &)."""

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ACTAUDIT = [sys.executable, "-m", "audit.cli"]
LONG = ["sweep", "gelu.tanh", "--dtype", "fp32", "--exhaustive", "--range", "1:1e30", "--quiet"]
ROOT = Path(__file__).parents[1]


# SIGINT and SIGTERM set to their defaults, then actaudit exec'd (same pid): a preexec_fn
# would run Python in a fork of this test process, which may hold an engine's threads
# (JAX warns "os.fork() was called ... deadlock", issue 39)
_DEFAULT_SIGNALS = (
    "import os, signal, sys\n"
    "signal.signal(signal.SIGINT, signal.SIG_DFL)\n"
    "signal.signal(signal.SIGTERM, signal.SIG_DFL)\n"
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])\n"
)


def _with_default_signals(cmd: list[str]) -> list[str]:
    return [cmd[0], "-c", _DEFAULT_SIGNALS, *cmd[1:]]


class Run:
    """actaudit in a subprocess, with a FIFO on which it reports its stages."""

    def __init__(self, args, tmp_path, cwd=None, env=None, session=False):
        fifo = tmp_path / "ready"
        os.mkfifo(fifo)
        self.fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # a reader (and a writer: no EOF)
        env = {
            **os.environ,
            **(env or {}),
            "ACTAUDIT_READY_FILE": str(fifo),
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        }
        self.p = subprocess.Popen(
            _with_default_signals(ACTAUDIT + args),
            cwd=cwd or tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=session,
        )
        self.seen = b""

    def wait_for(self, stage: str) -> int:
        """Block until actaudit reports ``stage``; its pid."""
        while f"{stage} ".encode() not in self.seen:
            r, _, _ = select.select([self.fd], [], [], 300)
            assert r, f"actaudit never reached {stage}"
            self.seen += os.read(self.fd, 4096)
        line = next(ln for ln in self.seen.decode().splitlines() if ln.startswith(stage + " "))
        return int(line.split()[1])

    def finish(self, timeout=60):
        t0 = time.monotonic()
        out, err = self.p.communicate(timeout=timeout)
        os.close(self.fd)
        return self.p.returncode, out, err, time.monotonic() - t0


def _children(pid: int) -> list[int]:
    kids = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        kids += [int(k) for k in (task / "children").read_text().split()]
    return kids


def _gone(pids, timeout=30.0) -> bool:
    """Wait (on pidfds: no polling) until every process in pids has exited."""
    fds = []
    for pid in pids:
        try:
            fds.append(os.pidfd_open(pid))
        except ProcessLookupError:
            continue
    try:
        end = time.monotonic() + timeout
        while fds:
            r, _, _ = select.select(fds, [], [], max(0.0, end - time.monotonic()))
            if not r:
                return False
            for fd in r:
                fds.remove(fd)
                os.close(fd)
    finally:
        for fd in fds:
            os.close(fd)
    return True


needs_proc = pytest.mark.skipif(
    not Path("/proc/self/task").exists() or not hasattr(os, "pidfd_open"),
    reason="needs Linux /proc and pidfd_open",
)


@needs_proc
@pytest.mark.parametrize(
    "sig,stage,code,line",
    [
        (signal.SIGINT, "sweep", 130, "actaudit: interrupted"),  # while the pool starts
        (signal.SIGINT, "chunk", 130, "actaudit: interrupted"),  # while the workers run
        (signal.SIGTERM, "chunk", 143, "actaudit: terminated"),
    ],
)
def test_a_signal_to_the_main_process_alone_stops_a_parallel_sweep(tmp_path, sig, stage, code, line):
    run = Run(LONG + ["--workers", "2", "--json", "r.json"], tmp_path)
    pid = run.wait_for(stage)
    kids = _children(pid) if stage == "chunk" else []
    assert stage == "sweep" or kids, "the pool has workers"
    os.kill(pid, sig)  # the main process only, as `timeout -s INT` or a CI runner does
    rc, _, err, took = run.finish()
    assert rc == code and err.strip().splitlines()[-1] == line and "Traceback" not in err
    assert took < 30  # seconds; it ran for ~minutes otherwise (all 2^31 inputs)
    assert _gone(kids)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ready"]  # no partial JSON


@needs_proc
def test_sigterm_to_the_whole_group_is_one_line(tmp_path):
    run = Run(LONG + ["--workers", "2"], tmp_path)
    pid = run.wait_for("chunk")
    kids = _children(pid)
    for k in kids + [pid]:
        os.kill(k, signal.SIGTERM)
    rc, _, err, _ = run.finish()
    assert rc == 143 and err.strip() == "actaudit: terminated", err
    assert _gone(kids)


@needs_proc
def test_workers_die_with_their_parent(tmp_path):
    run = Run(LONG + ["--workers", "2"], tmp_path)
    pid = run.wait_for("chunk")
    kids = _children(pid)
    assert kids
    os.kill(pid, signal.SIGKILL)
    run.finish()
    assert _gone(kids), "workers outlived their parent"


@pytest.mark.parametrize(
    "sig,code,line",
    [(signal.SIGINT, 130, "actaudit: interrupted"), (signal.SIGTERM, 143, "actaudit: terminated")],
)
def test_a_signal_during_the_imports_is_one_line(tmp_path, sig, code, line):
    run = Run(["sweep", "gelu", "--dtype", "fp16", "-q"], tmp_path)
    pid = run.wait_for("imports")  # the heavy imports are about to start
    os.kill(pid, sig)
    rc, _, err, _ = run.finish()
    assert rc == code and err.strip() == line, err


@needs_proc
def test_ctrl_c_to_the_group_while_a_report_renders_is_one_line(tmp_path):
    run = Run(["report", "gelu", "--dtype", "fp16,bf16", "--out", "rep"], tmp_path, session=True)
    pid = run.wait_for("render")  # figures are being drawn on every core
    kids = _children(pid)
    os.killpg(pid, signal.SIGINT)  # what the terminal does on Ctrl-C
    rc, _, err, _ = run.finish()
    assert rc == 130 and "Traceback" not in err and err.strip().splitlines()[-1] == "actaudit: interrupted"
    assert _gone(kids)
    assert not (tmp_path / "rep" / "index.html").exists()


# ------------------------------------------------------------------ C kernels (issue 23)
SPIN = r"""#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
/* copies small calls (the special inputs); on a chunk, says so on the readiness FIFO with
   its own pid, then never returns */
void spin(const float *x, float *y, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = x[i];
    if (n <= 64) return;
    const char *path = getenv("ACTAUDIT_READY_FILE");
    int fd = path ? open(path, O_WRONLY | O_APPEND | O_NONBLOCK) : -1;
    if (fd >= 0) { dprintf(fd, "spinning %d\n", (int)getpid()); close(fd); }
    for (;;) {}
}
"""
SPIN_ARGS = ["sweep", "c:spin.c:spin", "--dtype", "fp32", "--exhaustive", "--range", "1:2"]
SPIN_ARGS += ["--reference", "relu", "--quiet"]


def _spinning(run, count: int) -> list[int]:
    """Block until ``count`` kernel processes report that they spin; their pids."""
    while True:
        pids = {int(ln.split()[1]) for ln in run.seen.decode().splitlines() if ln.startswith("spinning ")}
        if len(pids) >= count:
            return sorted(pids)
        r, _, _ = select.select([run.fd], [], [], 300)
        assert r, "the kernels never started"
        run.seen += os.read(run.fd, 4096)


def _descendants(pid: int) -> list[int]:
    import psutil

    return [p.pid for p in psutil.Process(pid).children(recursive=True)]


@needs_proc
@pytest.mark.parametrize(
    "sig,workers",
    [
        (signal.SIGTERM, 2),
        (signal.SIGINT, 2),
        (signal.SIGTERM, 1),
        (signal.SIGINT, 1),
        (signal.SIGKILL, 1),
        (signal.SIGKILL, 2),
    ],
)
def test_a_c_kernel_that_never_returns_dies_with_the_run(tmp_path, sig, workers):
    # issue 23: SIGTERM/SIGINT to the main process took 10.2 s with --workers 2 and left the
    # kernel processes spinning at parent 1; SIGKILL orphaned the kernel without --workers
    (tmp_path / "spin.c").write_text(SPIN)
    run = Run(SPIN_ARGS + ["--workers", str(workers)], tmp_path)
    kernels = _spinning(run, workers)
    pid = run.wait_for("imports")
    procs = sorted(set(_descendants(pid)) | set(kernels))
    os.kill(pid, sig)  # the main process alone
    t0 = time.monotonic()
    rc, out, err, _ = run.finish()
    took = time.monotonic() - t0
    assert _gone(procs), "a kernel or worker process outlived the run"
    if sig == signal.SIGKILL:
        assert rc == -signal.SIGKILL
    else:
        line = "actaudit: interrupted" if sig == signal.SIGINT else "actaudit: terminated"
        assert rc == (130 if sig == signal.SIGINT else 143), err
        assert err.strip().splitlines()[-1] == line and "Traceback" not in err
        assert took < 8, took  # was 10.2 s (a 5 s join per worker)
    assert out == ""
