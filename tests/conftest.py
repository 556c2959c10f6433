import atexit
import os
import shutil
import sys
import tempfile

import pytest

# Bytecode: with PYTHONDONTWRITEBYTECODE set (some containers set it), every one of the
# suite's subprocesses (the docs examples, the CLI tests: hundreds of `actaudit` runs) compiled
# audit/ from source again, 0.3 s each, and every xdist worker rewrote every test module's
# asserts anew (10 s). The session writes __pycache__ (git-ignored), as Python does by default.
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
    sys.dont_write_bytecode = False

# Every test session gets a fresh oracle cache, so that tests never see a stale one; the
# process that made it removes it at exit (a pytest started by a test inherits it and keeps it:
# mkdtemp only where none is set, or every nested or mutant pytest left one in /tmp).
#
# Under pytest-xdist each worker gets a directory of its own below the session's (gw0/,
# gw1/, ...), and its own TMPDIR there: the workers never share a cache file, a lock or a
# temporary name (the controller made the directory; it removes the whole tree at exit).
_worker = os.environ.get("PYTEST_XDIST_WORKER")
if "ACTAUDIT_CACHE_DIR" not in os.environ:
    _cache = tempfile.mkdtemp(prefix="actaudit-cache-")
    os.environ["ACTAUDIT_CACHE_DIR"] = _cache
    os.environ["ACTAUDIT_TEST_SESSION_CACHE"] = _cache
    _owner = os.getpid()
    atexit.register(lambda: os.getpid() == _owner and shutil.rmtree(_cache, ignore_errors=True))
elif _worker and os.environ.get("ACTAUDIT_TEST_SESSION_CACHE") == os.environ["ACTAUDIT_CACHE_DIR"]:
    _mine = os.path.join(os.environ["ACTAUDIT_CACHE_DIR"], _worker)
    os.makedirs(os.path.join(_mine, "tmp"), exist_ok=True)
    os.environ["ACTAUDIT_CACHE_DIR"] = os.path.join(_mine, "cache")
    os.environ["TMPDIR"] = os.path.join(_mine, "tmp")
    tempfile.tempdir = None  # tempfile reads TMPDIR again


def pytest_configure(config):
    """Under pytest-xdist's `--dist loadgroup` the tests of one xdist_group (a docs page's
    blocks, which run in order in one directory) must reach one worker.  xdist 3.8 marks them
    by a suffix it writes to ``item._nodeid``, which pytest 9.2 no longer reads (its node ids
    are kept elsewhere): the groups are then ignored and a page's blocks land on different
    workers.  Detected here, at run time, before any worker starts: the run stops, saying so."""
    from _pytest.nodes import Node

    if (
        _worker
        or getattr(config.option, "dist", None) != "loadgroup"
        or not getattr(config.option, "numprocesses", None)
    ):
        return
    reads = getattr(getattr(Node, "nodeid", None), "fget", None)
    if reads is not None and "_nodeid" not in reads.__code__.co_names:
        raise pytest.UsageError(
            f"pytest {pytest.__version__} ignores the group pytest-xdist adds to node ids, so "
            "--dist loadgroup would split a docs page over workers: install pytest<9.2 "
            '(pip install -e ".[test]" does)'
        )


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty oracle cache directory, and the in-process memo cleared."""
    from audit.oracle import oracle

    monkeypatch.setenv("ACTAUDIT_CACHE_DIR", str(tmp_path / "cache"))
    oracle._MEMO.clear()
    yield tmp_path / "cache"
    oracle._MEMO.clear()


def pytest_runtest_logreport(report):
    """With ACTAUDIT_TEST_DURATIONS=PATH, each test's duration is appended to PATH as it ends
    (`--durations` prints them only when the run is over)."""
    path = os.environ.get("ACTAUDIT_TEST_DURATIONS")
    if path and report.when == "call" and not _worker:
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{report.duration:.2f} {report.outcome} {report.nodeid}\n")
