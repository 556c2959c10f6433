"""Links and FIFOs planted in actaudit's caches (issue 39, items 7, 8): a symbolic link
is refused, never followed (its target was overwritten with a zip archive); a FIFO is
never opened blocking (the run hung forever); a cache directory actaudit makes is 0700.

Runs that could hang go to a subprocess with a time limit (a failure, never a hang)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
HAS_GCC = shutil.which("gcc") is not None


def _actaudit(args, cache: Path, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "ACTAUDIT_CACHE_DIR": str(cache),
    }
    env.pop("ACTAUDIT_NO_CACHE", None)
    return subprocess.run(
        [sys.executable, "-m", "audit.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _table_path(cache: Path, ref: str, fmt: str) -> Path:
    from audit.numbers.formats import get_format
    from audit.oracle import oracle
    from audit.oracle.references import get_reference

    r = get_reference(ref)
    return cache / f"{oracle.cache_key(r, get_format(fmt), r.with_defaults({}))}.npz"


SWEEP = ["sweep", "relu.max", "-d", "fp8_e4m3", "-q"]


def test_a_new_cache_directory_is_private(tmp_path):
    cache = tmp_path / "cache"
    r = _actaudit(SWEEP, cache, tmp_path)
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    assert [p.name for p in cache.iterdir()] == [_table_path(cache, "relu", "fp8_e4m3").name]


def test_a_symlink_in_the_oracle_cache_is_refused_and_its_target_untouched(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    _table_path(cache, "relu", "fp8_e4m3").symlink_to(victim)
    r = _actaudit(SWEEP, cache, tmp_path)
    assert victim.read_text() == "precious\n"
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("actaudit: error: ") and "symbolic link" in line


def test_a_fifo_as_an_oracle_table_is_rebuilt_not_waited_on(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    fifo = _table_path(cache, "relu", "fp8_e4m3")
    os.mkfifo(fifo)
    r = _actaudit(SWEEP, cache, tmp_path, timeout=60)  # before: blocked in open() forever
    assert r.returncode == 0, r.stderr
    assert stat.S_ISREG(os.lstat(fifo).st_mode)  # replaced by a table, by rename


@pytest.mark.skipif(not HAS_GCC, reason="needs gcc")
def test_links_and_fifos_among_compiled_kernels(tmp_path):
    cache = tmp_path / "cache"
    k = tmp_path / "k.c"
    k.write_text(
        "#include <stddef.h>\nvoid k(const float *x, float *y, size_t n) { for (size_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : 0; }\n"
    )
    args = ["sweep", f"c:{k}:k", "--reference", "relu", "-d", "fp8_e4m3", "-q"]
    assert _actaudit(args, cache, tmp_path).returncode == 0
    kernels = cache / "ckernels"
    (so,) = [p for p in kernels.glob("*.so")]
    # a FIFO as the object's record: compiled again, never waited on
    rec = so.with_suffix(".json")
    rec.unlink()
    os.mkfifo(rec)
    r = _actaudit(args, cache, tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    assert stat.S_ISREG(os.lstat(rec).st_mode)
    # a symlink as the object: refused, its target untouched
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    so.unlink()
    so.symlink_to(victim)
    r = _actaudit(args, cache, tmp_path)
    assert victim.read_text() == "precious\n"
    assert r.returncode == 2 and "symbolic link" in r.stderr and "Traceback" not in r.stderr, r.stderr
