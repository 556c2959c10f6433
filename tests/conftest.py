import os
import tempfile

import pytest

# Every test session gets a fresh oracle cache, so that tests never see a stale one.
os.environ.setdefault("ACTAUDIT_CACHE_DIR", tempfile.mkdtemp(prefix="actaudit-cache-"))


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty oracle cache directory, and the in-process memo cleared."""
    from audit import oracle

    monkeypatch.setenv("ACTAUDIT_CACHE_DIR", str(tmp_path / "cache"))
    oracle._MEMO.clear()
    yield tmp_path / "cache"
    oracle._MEMO.clear()
