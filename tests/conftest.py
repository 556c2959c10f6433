import atexit
import os
import shutil
import tempfile

import pytest

# Every test session gets a fresh oracle cache, so that tests never see a stale one; the
# process that made it removes it at exit (a pytest started by a test inherits it and keeps it:
# mkdtemp only where none is set, or every nested or mutant pytest left one in /tmp).
if "ACTAUDIT_CACHE_DIR" not in os.environ:
    _cache = tempfile.mkdtemp(prefix="actaudit-cache-")
    os.environ["ACTAUDIT_CACHE_DIR"] = _cache
    _owner = os.getpid()
    atexit.register(lambda: os.getpid() == _owner and shutil.rmtree(_cache, ignore_errors=True))


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty oracle cache directory, and the in-process memo cleared."""
    from audit.oracle import oracle

    monkeypatch.setenv("ACTAUDIT_CACHE_DIR", str(tmp_path / "cache"))
    oracle._MEMO.clear()
    yield tmp_path / "cache"
    oracle._MEMO.clear()
