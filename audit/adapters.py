"""Candidates that are not catalog formulas: Python callables, framework ops, device dumps.

* ``pkg.module:NAME`` where NAME is an :class:`audit.candidates.Candidate` (the
  ``CANDIDATE`` of a module written by ``actaudit fit``): used as it is, a formula candidate.
* ``pkg.module:function`` -- any callable taking an array of the storage dtype (numpy
  float16/float32/float64, ml_dtypes bfloat16/float8) and returning one of the same shape
  and dtype.
* ``torch:NAME`` -- torch.nn.functional.NAME (``torch:gelu_tanh`` is gelu with
  approximate='tanh'), on CPU or on ``device`` ('cuda'); optional extra ``actaudit[torch]``.
* ``jax:NAME`` -- jax.nn.NAME; optional extra ``actaudit[jax]``.

All of them become :class:`audit.candidates.Candidate` objects whose formula calls the
function on the storage values (computing in whatever the function computes in); every
metric, finding, clip and report then applies to them as to a catalog candidate.
"""

from __future__ import annotations

import importlib
import os
import sys

import numpy as np

from .candidates import Candidate
from .errors import ActauditError, BadOptionError, UnknownNameError
from .formats import Format, get_format
from .references import get_reference


class UserFunctionError(ActauditError):
    """A user's function (or a framework op) failed or broke its contract."""


# reference of each framework op name
TORCH_OPS = {
    "gelu": ("gelu", {}),
    "gelu_tanh": ("gelu", {"approximate": "tanh"}),
    "silu": ("silu", {}),
    "mish": ("mish", {}),
    "softplus": ("softplus", {}),
    "sigmoid": ("sigmoid", {}),
    "tanh": ("tanh", {}),
    "hardswish": ("hardswish", {}),
    "hardsigmoid": ("hardsigmoid", {}),
    "elu": ("elu", {}),
    "selu": ("selu", {}),
    "celu": ("celu", {}),
    "relu": ("relu", {}),
    "relu6": ("relu6", {}),
    "leaky_relu": ("leaky_relu", {}),
    "hardtanh": ("hardtanh", {}),
    "logsigmoid": ("logsigmoid", {}),
    "softsign": ("softsign", {}),
}
JAX_OPS = {
    "gelu": ("gelu", {"approximate": False}),
    "gelu_tanh": ("gelu", {"approximate": True}),
    "silu": ("silu", {}),
    "swish": ("silu", {}),
    "mish": ("mish", {}),
    "softplus": ("softplus", {}),
    "sigmoid": ("sigmoid", {}),
    "tanh": ("tanh", {}),
    "hard_swish": ("hardswish", {}),
    "hard_sigmoid": ("hardsigmoid", {}),
    "elu": ("elu", {}),
    "selu": ("selu", {}),
    "celu": ("celu", {}),
    "relu": ("relu", {}),
    "relu6": ("relu6", {}),
    "leaky_relu": ("leaky_relu", {}),
    "hard_tanh": ("hardtanh", {}),
    "log_sigmoid": ("logsigmoid", {}),
    "soft_sign": ("softsign", {}),
}


def is_external(target: str) -> bool:
    return ":" in target


class _Timeout(BaseException):
    """A user's function ran past its time (a BaseException: `except Exception` in the
    function cannot swallow it)."""


class _deadline:
    """SIGALRM after ``seconds`` raises _Timeout in the call (main thread only; elsewhere,
    and with seconds None, no limit)."""

    def __init__(self, seconds):
        import threading

        self.seconds = seconds if threading.current_thread() is threading.main_thread() else None

    def __enter__(self):
        if self.seconds:
            import signal

            def ring(signum, frame):
                raise _Timeout()

            self.old = signal.signal(signal.SIGALRM, ring)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, *exc):
        if self.seconds:
            import signal

            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.old)
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

    return Candidate(f"{label}", reference, f"{label}(x)", source, fn, compute=fmt.name, native=True)


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


def external_candidate(
    target: str,
    reference: str | None,
    fmt: Format,
    device: str = "cpu",
    timeout: float | None = None,
    cflags: str | None = None,
) -> Candidate:
    kind, _, name = target.partition(":")
    if kind == "c":  # a C kernel, c:FILE.c:FUNCTION (audit/ckernels.py)
        from .ckernels import c_candidate

        return c_candidate(target, reference, fmt, cflags, timeout)
    if kind == "torch":
        return torch_candidate(name, fmt, device, reference)
    if kind == "jax":
        return jax_candidate(name, fmt, reference)
    if kind == "torch-compile":  # torch.compile of the op (audit/consistency.py)
        from .consistency import compiled_candidate

        return compiled_candidate(name, fmt, reference)
    if kind == "torch-bwd":  # PyTorch's backward kernel of the op, through autograd
        from .consistency import torch_backward_candidate

        return torch_backward_candidate(name, fmt, device)
    obj = load_callable(target)
    if isinstance(obj, Candidate):  # a formula candidate (a fitted kernel's CANDIDATE)
        if reference is not None and obj.reference != reference:
            raise BadOptionError(f"{target} approximates {obj.reference}, not --reference {reference}")
        return obj
    if reference is None:
        raise BadOptionError(f"{target}: give the function's reference with --reference (e.g. gelu)")
    return wrap_callable(obj, reference, fmt, target, "user callable", timeout)


def _need(module: str, extra: str):
    try:
        return importlib.import_module(module)
    except ImportError:
        raise BadOptionError(f'{module} is not installed: pip install "actaudit[{extra}]"') from None


def torch_candidate(name: str, fmt: Format, device: str = "cpu", reference: str | None = None) -> Candidate:
    torch = _need("torch", "torch")
    F = importlib.import_module("torch.nn.functional")
    if name not in TORCH_OPS:
        raise UnknownNameError(f"unknown torch op '{name}' (known: {', '.join(TORCH_OPS)})")
    ref, kw = TORCH_OPS[name]
    op = getattr(F, ref if name != "gelu_tanh" else "gelu")
    tdt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "fp64": torch.float64}.get(
        fmt.name
    )
    if tdt is None:
        raise BadOptionError(f"torch ops are audited in fp16, bf16, fp32 and fp64, not {fmt.name}")
    if device != "cpu" and not (device.startswith("cuda") and torch.cuda.is_available()):
        raise BadOptionError(f"device '{device}' is not available to torch here")
    ints = {16: (np.int16, torch.int16), 32: (np.int32, torch.int32), 64: (np.int64, torch.int64)}

    def call(arr):  # through the bit patterns: torch cannot take ml_dtypes' bfloat16 directly
        ni, ti = ints[fmt.bits]
        t = torch.from_numpy(arr.view(ni).copy()).view(tdt).to(device)
        with torch.no_grad():
            y = op(t, **kw)
        return y.to("cpu").contiguous().view(ti).numpy().view(fmt.dtype)

    return wrap_callable(
        call,
        reference or ref,
        fmt,
        f"torch:{name}",
        f"torch {torch.__version__} torch.nn.functional.{op.__name__}"
        f"{'(approximate=tanh)' if kw else ''} on {device}",
    )


def jax_candidate(name: str, fmt: Format, reference: str | None = None) -> Candidate:
    jax = _need("jax", "jax")
    jnp = importlib.import_module("jax.numpy")
    if name not in JAX_OPS:
        raise UnknownNameError(f"unknown jax op '{name}' (known: {', '.join(JAX_OPS)})")
    ref, kw = JAX_OPS[name]
    op = getattr(jax.nn, name if name != "gelu_tanh" else "gelu")

    def call(arr):
        return np.asarray(op(jnp.asarray(arr), **kw)).astype(fmt.dtype)

    return wrap_callable(
        call, reference or ref, fmt, f"jax:{name}", f"jax {jax.__version__} jax.nn.{op.__name__} {kw or ''}"
    )
