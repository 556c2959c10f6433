"""Signals of the command line: one line and a clean exit on SIGINT and SIGTERM, from the
first moment of the process to its last.

* :func:`early` (called first thing by ``audit/__init__``, before the heavy imports) gives
  an ``actaudit`` process handlers that print ``actaudit: interrupted`` / ``terminated``
  and exit 130 / 143 at once: nothing has been written yet.  Only in the CLI process
  (``actaudit`` or ``python -m audit.cli``): importing the library changes no handler.
* :func:`handlers` (used by ``cli.main``) then raises KeyboardInterrupt on SIGINT and
  :class:`Terminated` (a KeyboardInterrupt) on SIGTERM, so that every atomic write and
  every worker pool cleans up on the way out; each is also recorded (:data:`INTERRUPTED`,
  :data:`TERMINATED`), since a library may turn the exception into another on its way
  out (pybind11's module initialization: ``ImportError: initialization failed``), drop it
  (a gc callback) or swallow it (a bare ``except:``): :func:`check`.
* A SIGINT that the process inherited as ignored (a background job of a
  non-interactive shell) stays ignored, as job control means it to; SIGTERM always stops.
* :func:`ready` appends a line to the file (or FIFO) named by ``$ACTAUDIT_READY_FILE`` at
  each stage: ``imports`` (the early handlers are in place), ``sweep`` (a result's work
  starts), ``chunk`` (its first chunk is merged), ``kernel`` (a C kernel's process is
  started, reported by the process that started it), ``fit`` (``fit`` starts its search),
  ``verify`` (it found a kernel and starts its verification sweep), ``worker`` (a pool's worker
  is ready for chunks, reported by the worker): tests wait for it instead of sleeping.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

_INT_IGNORED = signal.getsignal(signal.SIGINT) is signal.SIG_IGN


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that every atomic write cleans up after itself."""


def _is_cli() -> bool:
    if os.path.basename(sys.argv[0] if sys.argv else "") == "actaudit":
        return True
    orig = list(getattr(sys, "orig_argv", []))
    return any(a == "-m" and b == "audit.cli" for a, b in zip(orig, orig[1:]))


def _exit_now(signum, frame):
    os.write(2, b"actaudit: interrupted\n" if signum == signal.SIGINT else b"actaudit: terminated\n")
    os._exit(130 if signum == signal.SIGINT else 143)


def early() -> None:
    if not _is_cli():
        return
    with contextlib.suppress(ValueError):  # (not the main thread)
        if not _INT_IGNORED:
            signal.signal(signal.SIGINT, _exit_now)
        signal.signal(signal.SIGTERM, _exit_now)
    ready("imports")


TERMINATED: list = []  # set when SIGTERM arrived (click may wrap the exception)
INTERRUPTED: list = []  # set when SIGINT arrived (a library may turn the exception into another)


def _on_sigterm(signum, frame):
    TERMINATED.append(signum)
    raise Terminated()


def _on_sigint(signum, frame):
    INTERRUPTED.append(signum)
    raise KeyboardInterrupt()


_ACTIVE: list = []  # non-empty while handlers() is in force
_GUARD = threading.Lock()  # _ACTIVE's end, against a signal raised again late


def _pending() -> None:
    """Nothing: calling a Python function makes the interpreter act on a signal already
    tripped (by :func:`_unraisable`'s thread) while the handler in force is still ours."""


def check() -> None:
    """Raise the signal's exception again if SIGINT or SIGTERM arrived under
    :func:`handlers` and the work goes on: a library swallowed it (mpmath's choice of
    backend, ``except: pass`` around ``import gmpy2``, took a Ctrl-C during that import
    and the sweep ran to its end).  Called where long work reports its progress, never
    from cleanup code."""
    if not _ACTIVE:
        return
    if TERMINATED:
        raise Terminated()
    if INTERRUPTED:
        raise KeyboardInterrupt()


def _unraisable(previous):
    """sys.unraisablehook while handlers() is in force: the signal's exception raised where
    Python drops exceptions (a gc callback, such as JAX's; a __del__; a weakref callback) is
    not printed as 'Exception ignored'; the signal is raised again in the main thread, by a
    new thread (from the hook itself, its exception would come back inside the hook and be
    dropped there).  Should that land in such a place again, this repeats; if it is lost
    all the same, :func:`check` and the end of the command still act on it."""
    import _thread

    def again(signum) -> None:
        with _GUARD:  # never once handlers() has ended (an in-process caller's own code)
            if _ACTIVE:
                _thread.interrupt_main(signum)

    def hook(u) -> None:
        if isinstance(u.exc_value, KeyboardInterrupt) and (TERMINATED or INTERRUPTED):
            signum = signal.SIGTERM if TERMINATED else signal.SIGINT
            with contextlib.suppress(KeyboardInterrupt, RuntimeError):
                _thread.start_new_thread(again, (signum,))
            return
        previous(u)

    return hook


@contextlib.contextmanager
def handlers():
    """SIGINT -> KeyboardInterrupt (unless inherited ignored), SIGTERM -> Terminated, for
    the duration, each recorded; an exception of theirs that Python drops is raised again
    (:func:`_unraisable`); the previous handlers restored after (in-process callers, tests)."""
    old = {}
    TERMINATED.clear()
    INTERRUPTED.clear()
    try:
        if not _INT_IGNORED:
            old[signal.SIGINT] = signal.signal(signal.SIGINT, _on_sigint)
        old[signal.SIGTERM] = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread: leave signals alone
        old = {}
    hook = sys.unraisablehook
    if old:
        sys.unraisablehook = _unraisable(hook)
        _ACTIVE.append(True)
    try:
        yield
    finally:
        if old:
            with _GUARD:
                _ACTIVE.clear()
            _pending()  # one raised again just before its end is acted on while ours still holds
            sys.unraisablehook = hook
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def own_signal_stack(size: int = 1 << 16):
    """The calling thread's alternate signal stack is one of ours (``size`` bytes, mapped
    here) for the duration; the previous one is restored after.

    Python's handlers run on the alternate stack (CPython installs them with SA_ONSTACK),
    and a library may leave a dangling one: OpenVINO's CPU plugin installs an 11,568-byte
    stack of its own in the thread that compiles a model and changes it again when its Core
    goes; after several Cores came and went in one process (the tests' own sessions beside
    the adapter's), the stack left was no longer valid, and the next signal handled there
    (a SIGALRM deadline) wrote its frame into    freed memory: SIGSEGV.  Where it cannot (no libc, not Linux/macOS) it changes nothing."""
    import ctypes
    import mmap

    class _Stack(ctypes.Structure):
        _fields_ = [("ss_sp", ctypes.c_void_p), ("ss_flags", ctypes.c_int), ("ss_size", ctypes.c_size_t)]

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        sigaltstack = libc.sigaltstack
    except (OSError, AttributeError):
        yield
        return
    buf = mmap.mmap(-1, size)
    mine = _Stack(ctypes.addressof(ctypes.c_char.from_buffer(buf)), 0, size)
    old = _Stack()
    if sigaltstack(ctypes.byref(mine), ctypes.byref(old)) != 0:
        del mine
        buf.close()
        yield
        return
    try:
        yield
    finally:
        sigaltstack(ctypes.byref(old), None)
        del mine  # (the buffer's export is released before it is unmapped)
        with contextlib.suppress(BufferError):
            buf.close()


_READY_DONE: set = set()


def ready(stage: str) -> None:
    """Tell a waiting test that ``stage`` is reached (once per stage and process)."""
    path = os.environ.get("ACTAUDIT_READY_FILE")
    key = (stage, os.getpid())  # (a forked worker reports its own stages)
    if not path or key in _READY_DONE:
        return
    _READY_DONE.add(key)
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o644)
        try:
            os.write(fd, f"{stage} {os.getpid()}\n".encode())
        finally:
            os.close(fd)
