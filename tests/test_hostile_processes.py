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
