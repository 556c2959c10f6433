"""A signal in the instant after a temporary file is made, and before the code that removes
it knows of it, leaves nothing behind; one during an engine's import waits for its end
(a hostile run of 1,640 signalled commands found each window: an empty
.actaudit-probe-*, a .NAME.PID.*.tmp, a .actaudit-report-*/ with its .pid, and torch's
C++ initialization aborting the process on a KeyboardInterrupt)."""

import contextlib
import os
import shutil
import signal
import sys
import tempfile

import pytest

from audit import io


@contextlib.contextmanager
def _sigint_raises():
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def _sigint() -> None:
    """SIGINT's handler in force, called as a signal calls it (not a real signal: the
    process's signal state is the test runner's, and a real one raised in an xdist worker
    was acted on after the test, outside it, once in three runs of the suite: the worker
    died and the run hung)."""
    signal.getsignal(signal.SIGINT)(signal.SIGINT, None)


def _then_signal(real):
    """real(...), then SIGINT."""

    def call(*a, **k):
        out = real(*a, **k)
        _sigint()
        return out

    return call


def test_atomic_path_leaves_no_temporary_file(tmp_path, monkeypatch):
    monkeypatch.setattr(io.tempfile, "mkstemp", _then_signal(tempfile.mkstemp))
    with _sigint_raises(), pytest.raises(KeyboardInterrupt):
        io.write_text(tmp_path / "a.json", "{}")
    assert os.listdir(tmp_path) == []


def test_the_probe_of_a_directory_leaves_no_file(tmp_path, monkeypatch):
    monkeypatch.setattr(io.tempfile, "mkstemp", _then_signal(tempfile.mkstemp))
    with _sigint_raises(), pytest.raises(KeyboardInterrupt):
        io.check_out_dir(tmp_path, "the set")
    assert os.listdir(tmp_path) == []


def test_a_cache_file_leaves_no_temporary_file(tmp_path, monkeypatch):
    real = os.open

    def opened(path, *a, **k):
        fd = real(path, *a, **k)
        if str(path).endswith(".tmp"):
            _sigint()
        return fd

    (tmp_path / "c").mkdir(mode=0o700)
    monkeypatch.setattr(io.os, "open", opened)
    with _sigint_raises(), pytest.raises(KeyboardInterrupt):
        with io.cache_file(tmp_path / "c" / "t.npz") as fh:
            fh.write(b"x")
    monkeypatch.undo()
    assert os.listdir(tmp_path / "c") == []


def test_a_file_set_leaves_no_temporary_directory(tmp_path, monkeypatch):
    monkeypatch.setattr(io.tempfile, "mkdtemp", _then_signal(tempfile.mkdtemp))
    with _sigint_raises(), pytest.raises(KeyboardInterrupt):
        io.write_files(tmp_path, [("a.txt", "a"), ("index.html", "b")])
    assert os.listdir(tmp_path) == []
    # a signal as the temporary directory is being removed: removed all the same
    monkeypatch.undo()
    real = shutil.rmtree

    def rmtree(*a, **k):
        _sigint()
        return real(*a, **k)

    monkeypatch.setattr(shutil, "rmtree", rmtree)
    with _sigint_raises(), pytest.raises(KeyboardInterrupt):
        io.write_files(tmp_path, [("a.txt", "a"), ("index.html", "b")])
    assert sorted(os.listdir(tmp_path)) == ["a.txt", "index.html"]


def _need_engines(name):
    from audit.targets.engines.callables import _need

    return _need(name, "engines")


# every engine's package comes through callables._need (torch, jax, onnx, onnxruntime,
# LiteRT, OpenVINO), which imports with io.import_held
@pytest.mark.parametrize("importer", [io.import_held, _need_engines], ids=["import_held", "_need"])
def test_an_engine_import_ends_before_the_signal_acts(tmp_path, monkeypatch, importer):
    name = f"aa_engine_probe_{importer.__name__}"
    (tmp_path / f"{name}.py").write_text(
        "import signal\nsignal.getsignal(signal.SIGINT)(signal.SIGINT, None)\nwhole = True\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    with _sigint_raises(), pytest.raises(KeyboardInterrupt):
        importer(name)
    assert sys.modules[name].whole
