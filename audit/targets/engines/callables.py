"""Python callables as candidates: ``pkg.module:function`` (any f(array) -> array of the
storage dtype) and ``pkg.module:NAME`` holding an :class:`audit.targets.candidates.Candidate`.

:func:`wrap_callable` is what every engine adapter ends in: it calls the function on the
storage values and checks its contract (shape, dtype, input left untouched, a time limit,
prints sent to stderr), so that every metric, finding and report applies to it.
"""

from __future__ import annotations

import importlib
import os
import sys

import numpy as np

from audit.errors import ActauditError, BadOptionError, UnknownNameError
from audit.numbers.formats import get_format
from audit.oracle.references import get_reference
from audit.targets.candidates import Candidate


class UserFunctionError(ActauditError):
    """A user's function (or a framework op) failed or broke its contract."""


def is_external(target: str) -> bool:
    return ":" in target


class _Timeout(BaseException):
    """A user's function ran past its time (a BaseException: `except Exception` in the
    function cannot swallow it)."""


class _deadline:
    """SIGALRM after ``seconds`` raises _Timeout in the call (main thread only; elsewhere,
    and with seconds None, no limit).  The handler runs on a signal stack of ours
    (audit.signals.own_signal_stack): an engine loaded earlier may have left the thread a
    dangling one."""

    def __init__(self, seconds):
        import threading

        self.seconds = seconds if threading.current_thread() is threading.main_thread() else None

    def __enter__(self):
        if self.seconds:
            import signal

            def ring(signum, frame):
                raise _Timeout()

            from audit.signals import own_signal_stack

            self.stack = own_signal_stack()
            self.stack.__enter__()
            self.old = signal.signal(signal.SIGALRM, ring)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, *exc):
        if self.seconds:
            import signal

            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.old)
            self.stack.__exit__(None, None, None)
        return False


def wrap_callable(
    func,
    reference: str,
    dtype,
    name: str | None = None,
    source: str = "user callable",
    timeout: float | None = None,
) -> Candidate:
    """A candidate that calls ``func(array of the storage dtype)`` and checks its contract;
    ``timeout``: seconds a call may take (then one line, exit 2)."""
    fmt = get_format(dtype)
    if get_reference(reference).arity != 1:
        raise BadOptionError(
            f"a callable f(x) is audited against a univariate reference; "
            f"{reference} takes two inputs (gated units: catalog candidates only)"
        )
    label = name or getattr(func, "__qualname__", None) or repr(func)

    def fn(x, m):
        arr = np.asarray(x.a).astype(fmt.dtype)
        before = arr.copy()
        try:
            with _stdout_to_stderr(), _deadline(timeout):  # its prints must not corrupt `--json -`
                out = func(arr)
            out = np.asarray(out)
        except ActauditError:
            raise
        except _Timeout:
            raise UserFunctionError(
                f"{label} did not return within {timeout:g} s (called on {arr.size} inputs; --timeout)"
            ) from None
        except KeyboardInterrupt:  # Ctrl-C and SIGTERM stop the run
            raise
        except SystemExit as e:
            raise UserFunctionError(f"{label} called sys.exit({e.code!r})") from None
        except BaseException as e:  # a user's function: any failure is theirs, reported in one line
            raise UserFunctionError(f"{label} raised {type(e).__name__}: {e}") from None
        if not np.array_equal(arr.view(fmt.uint), before.view(fmt.uint)):
            raise UserFunctionError(f"{label} modified its input array")
        if out.shape != arr.shape:
            raise UserFunctionError(f"{label} returned shape {out.shape}, expected {arr.shape}")
        if out.dtype != fmt.dtype:
            raise UserFunctionError(f"{label} returned dtype {out.dtype}, expected {fmt.dtype} ({fmt.name})")
        with np.errstate(all="ignore"):
            return out.astype(np.float64)

    from audit.targets.identity import callable_identity

    return Candidate(
        f"{label}",
        reference,
        f"{label}(x)",
        source,
        fn,
        compute=fmt.name,
        native=True,
        identity=callable_identity(func),  # its code and module file (engines replace it)
    )


class _stdout_to_stderr:
    """Send what a user's function prints (Python's sys.stdout and file descriptor 1) to
    stderr while it runs."""

    def __enter__(self):
        import contextlib

        sys.stdout.flush()
        self.saved = None
        try:
            self.saved = os.dup(1)
            os.dup2(2, 1)
        except OSError:
            self.saved = None
        self.redirect = contextlib.redirect_stdout(sys.stderr)
        self.redirect.__enter__()
        return self

    def __exit__(self, *exc):
        self.redirect.__exit__(*exc)
        try:
            sys.stderr.flush()
        finally:
            if self.saved is not None:
                os.dup2(self.saved, 1)
                os.close(self.saved)
        return False


def load_callable(target: str):
    """'pkg.module:function' -> the function."""
    mod_name, _, attr = target.partition(":")
    if not mod_name or not attr:
        raise UnknownNameError(f"'{target}' is not MODULE:FUNCTION")
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")  # the current directory, as `python -m` does
    try:
        mod = importlib.import_module(mod_name)
    except Exception as e:
        raise UnknownNameError(f"cannot import module '{mod_name}': {type(e).__name__}: {e}") from None
    obj = mod
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise UnknownNameError(f"module '{mod_name}' has no attribute '{attr}'")
        obj = getattr(obj, part)
    if not callable(obj) and not isinstance(obj, Candidate):
        raise UnknownNameError(f"'{target}' is not callable")
    return obj


def _need(module: str, extra: str):
    from audit.io import import_held

    try:
        return import_held(module)
    except ImportError:
        from audit._version import install_hint

        raise BadOptionError(f"{module} is not installed: {install_hint(extra)}") from None
