"""Processes a hostile kernel or a multithreaded engine can leave behind or hang (issue 39,
items 6, 9, 10): a compiler fed ``#include "/dev/zero"`` runs under resource limits; a
kernel's descendants (double-forked, setsid) do not outlive the call; a parallel or Dask
sweep of an engine op never forks a process that holds the engine's threads.

Every process a test starts is waited for (readiness lines, pidfds), never slept on."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
HAS_GCC = shutil.which("gcc") is not None


def _python(code: str, tmp_path: Path, timeout: float = 120, env=None) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        **(env or {}),
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "ACTAUDIT_CACHE_DIR": str(tmp_path / "cache"),
    }
    env.pop("ACTAUDIT_NO_CACHE", None)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.skipif(not HAS_GCC, reason="needs gcc")
def test_a_kernel_including_a_fifo_is_stopped_with_its_whole_process_group(tmp_path):
    # the compiler blocks opening the FIFO (no CPU time used: the CPU limit never acts);
    # the wall limit stops it, and kills cc1 with the driver (no orphan left blocked)
    fifo = tmp_path / "pipe.h"
    os.mkfifo(fifo)
    k = tmp_path / "k.c"
    k.write_text(
        f'#include "{fifo}"\n#include <stddef.h>\n'
        "void k(const float *x, float *y, size_t n) { for (size_t i = 0; i < n; i++) y[i] = x[i]; }\n"
    )
    code = f"""
import sys
from audit.targets import ckernels
ckernels.COMPILE_TIMEOUT_S = 1.0
try:
    ckernels.compile_kernel(ckernels.Path({str(k)!r}), None, "k")
except ckernels.KernelError as e:
    print(e)
    sys.exit(2)
"""
    r = _python(code, tmp_path, timeout=120)
    assert r.returncode == 2, r.stderr
    msg = r.stdout.strip()
    assert len(msg.splitlines()) == 1 and "did not finish within 1 s" in msg, msg
    left = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                cmd = open(f"/proc/{d}/cmdline", "rb").read()
            except OSError:
                continue
            if str(k).encode() in cmd:
                left.append((d, cmd))
    assert not left, left


# ------------------------------------------------------------------ item 9
@pytest.mark.skipif(not HAS_GCC, reason="needs gcc")
def test_a_kernel_including_dev_zero_stops_at_the_compilers_memory_limit(tmp_path):
    k = tmp_path / "k.c"
    k.write_text(
        '#include "/dev/zero"\n#include <stddef.h>\n'
        "void k(const float *x, float *y, size_t n) { for (size_t i = 0; i < n; i++) y[i] = x[i]; }\n"
    )
    # an outer limit keeps the test safe where actaudit sets none (cc1 would grow until
    # the OOM killer acts): only actaudit's own, lower, limit names itself in the message
    code = f"""
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))
from audit.targets import ckernels
ckernels.COMPILE_MEMORY = 256 << 20
try:
    ckernels.compile_kernel(ckernels.Path({str(k)!r}), None, "k")
except ckernels.KernelError as e:
    print(e)
    sys.exit(2)
"""
    r = _python(code, tmp_path)
    assert r.returncode == 2, r.stderr
    msg = r.stdout.strip()
    assert len(msg.splitlines()) == 1
    assert "out of memory" in msg and "at most 256 MiB of address space" in msg


# ----------------------------------------------------------------- item 10
ESCAPES = r"""
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stddef.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* a child that calls setsid() and forks a grandchild (double fork: the grandchild is an
   orphan in a session of its own); the grandchild writes its pid to the kernel through a
   pipe (its readiness signal) and waits forever; the kernel appends that pid to PIDS */
static void escape(void) {
    int fd[2];
    if (pipe(fd) != 0) return;
    pid_t c = fork();
    if (c == 0) {
        setsid();
        if (fork() == 0) {
            char line[32];
            int len = snprintf(line, sizeof line, "%d\n", (int)getpid());
            write(fd[1], line, (size_t)len);
            for (;;) pause();
        }
        _exit(0);
    }
    close(fd[1]);
    char line[32];
    ssize_t got = read(fd[0], line, sizeof line);
    close(fd[0]);
    waitpid(c, NULL, 0);
    if (got > 0) {
        int out = open("PIDS", O_WRONLY | O_APPEND | O_CREAT, 0600);
        write(out, line, (size_t)got);
        close(out);
    }
}

void k(const float *x, float *y, size_t n) {
    escape();
    for (size_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : 0;
}

void hang(const float *x, float *y, size_t n) {
    escape();
    for (;;) pause();
}
"""


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (not a zombie)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.mark.skipif(not HAS_GCC, reason="needs gcc")
@pytest.mark.parametrize(
    "func, extra, code", [("k", [], 0), ("hang", ["--timeout", "0.5"], 2)], ids=["returns", "timeout"]
)
def test_a_kernels_setsid_grandchild_does_not_outlive_the_call(tmp_path, monkeypatch, func, extra, code):
    from audit.cli import main

    monkeypatch.setenv("ACTAUDIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "e.c").write_text(ESCAPES)
    pids: list[int] = []
    try:
        got = main(
            ["sweep", f"c:{tmp_path}/e.c:{func}", "-d", "fp8_e4m3", "--reference", "relu", "-q", *extra]
        )
        pids = [int(v) for v in (tmp_path / "PIDS").read_text().split()]
        assert got == code and pids  # the kernel ran, and its grandchildren reported
        assert [p for p in pids if _alive(p)] == []
    finally:  # (on failure: leave no process behind)
        for p in pids or [int(v) for v in (tmp_path / "PIDS").read_text().split()]:
            if _alive(p):
                os.kill(p, 9)


# ------------------------------------------------------------------ item 6
ENGINES = ["torch:tanh", "jax:tanh", "ort:Tanh", "openvino:Tanh", "litert:TANH"]
DRIVER = """
import json, sys
import distributed
import audit
from audit.numbers import inputs

inputs.CHUNK = 4096  # several chunks in a small range
def doc(**kw):
    (r,) = audit.sweep(TARGET, dtype="fp32", range=(1.0, 1.001), exhaustive=True, **kw)
    return json.dumps(r.to_dict(), sort_keys=True)

with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                              dashboard_address=None, host="127.0.0.1") as cluster:
    for TARGET in sys.argv[1:]:
        one = doc(workers=1)
        two = doc(workers=2)
        print(TARGET, "workers", one == two, flush=True)
        dask = doc(executor="dask", scheduler=cluster.scheduler_address)
        print(TARGET, "dask", one == dask, flush=True)
"""


def test_every_engine_kind_with_two_workers_and_dask_never_forks_an_engines_threads(tmp_path):
    """Before: jax:tanh with --workers 2 forked a process that held XLA's threads (JAX
    warned, and the workers hung at 0 s of CPU); the Dask executor could not send an
    engine's session.  Each line the driver prints is its readiness signal."""
    import select

    fifo = tmp_path / "ready"
    os.mkfifo(fifo)
    rfd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "ACTAUDIT_CACHE_DIR": str(tmp_path / "cache"),
        "ACTAUDIT_READY_FILE": str(fifo),
        "PYTHONWARNINGS": "always",
    }
    p = subprocess.Popen(
        [sys.executable, "-c", DRIVER, *ENGINES],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    try:
        while len(lines) < 2 * len(ENGINES):
            r, _, _ = select.select([p.stdout], [], [], 240)
            assert r, f"no progress after {lines}: a deadlock"
            line = p.stdout.readline()
            assert line, f"the driver ended after {lines}: {p.stderr.read()[-2000:]}"
            lines.append(line.split())
        err = p.communicate(timeout=120)[1]
    finally:
        if p.poll() is None:
            os.killpg(p.pid, 9)
            p.wait()
        seen = b""
        with __import__("contextlib").suppress(BlockingIOError):
            while chunk := os.read(rfd, 65536):
                seen += chunk
        os.close(rfd)
    assert p.returncode == 0, err[-2000:]
    assert lines == [[t, mode, "True"] for t in ENGINES for mode in ("workers", "dask")]
    assert "fork" not in err, err[-2000:]  # JAX's "os.fork() was called" warning among others
    workers = {ln.split()[1] for ln in seen.decode().splitlines() if ln.startswith("worker ")}
    assert len(workers) >= 2 * len(ENGINES)  # spawned workers started (two per engine)
