"""Candidates that are not catalog formulas: Python callables, framework ops, device dumps.

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
    "gelu": ("gelu", {}), "gelu_tanh": ("gelu", {"approximate": "tanh"}), "silu": ("silu", {}),
    "mish": ("mish", {}), "softplus": ("softplus", {}), "sigmoid": ("sigmoid", {}),
    "tanh": ("tanh", {}), "hardswish": ("hardswish", {}), "hardsigmoid": ("hardsigmoid", {}),
    "elu": ("elu", {}), "selu": ("selu", {}), "celu": ("celu", {}), "relu": ("relu", {}),
    "relu6": ("relu6", {}), "leaky_relu": ("leaky_relu", {}), "hardtanh": ("hardtanh", {}),
    "logsigmoid": ("logsigmoid", {}), "softsign": ("softsign", {}),
}
JAX_OPS = {
    "gelu": ("gelu", {"approximate": False}), "gelu_tanh": ("gelu", {"approximate": True}),
    "silu": ("silu", {}), "swish": ("silu", {}), "mish": ("mish", {}), "softplus": ("softplus", {}),
    "sigmoid": ("sigmoid", {}), "tanh": ("tanh", {}), "hard_swish": ("hardswish", {}),
    "hard_sigmoid": ("hardsigmoid", {}), "elu": ("elu", {}), "selu": ("selu", {}),
    "celu": ("celu", {}), "relu": ("relu", {}), "relu6": ("relu6", {}),
    "leaky_relu": ("leaky_relu", {}), "hard_tanh": ("hardtanh", {}), "log_sigmoid": ("logsigmoid", {}),
    "soft_sign": ("softsign", {}),
}


def is_external(target: str) -> bool:
    return ":" in target


def wrap_callable(func, reference: str, dtype, name: str | None = None,
                  source: str = "user callable") -> Candidate:
    """A candidate that calls ``func(array of the storage dtype)`` and checks its contract."""
    fmt = get_format(dtype)
    get_reference(reference)
    label = name or getattr(func, "__qualname__", None) or repr(func)

    def fn(x, m):
        arr = np.asarray(x.a).astype(fmt.dtype)
        before = arr.copy()
        try:
            out = func(arr)
        except ActauditError:
            raise
        except Exception as e:  # a user's function: any failure is theirs, reported in one line
            raise UserFunctionError(f"{label} raised {type(e).__name__}: {e}") from None
        if not np.array_equal(arr.view(fmt.uint), before.view(fmt.uint)):
            raise UserFunctionError(f"{label} modified its input array")
        out = np.asarray(out)
        if out.shape != arr.shape:
            raise UserFunctionError(f"{label} returned shape {out.shape}, expected {arr.shape}")
        if out.dtype != fmt.dtype:
            raise UserFunctionError(f"{label} returned dtype {out.dtype}, expected {fmt.dtype} "
                                    f"({fmt.name})")
        with np.errstate(all="ignore"):
            return out.astype(np.float64)

    return Candidate(f"{label}", reference, f"{label}(x)", source, fn, compute=fmt.name)


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
    if not callable(obj):
        raise UnknownNameError(f"'{target}' is not callable")
    return obj


def external_candidate(target: str, reference: str | None, fmt: Format, device: str = "cpu") -> Candidate:
    kind, _, name = target.partition(":")
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
    if reference is None:
        raise BadOptionError(f"{target}: give the function's reference with --reference (e.g. gelu)")
    return wrap_callable(load_callable(target), reference, fmt, target, "user callable")


def _need(module: str, extra: str):
    try:
        return importlib.import_module(module)
    except ImportError:
        raise BadOptionError(f"{module} is not installed: pip install \"actaudit[{extra}]\"") from None


def torch_candidate(name: str, fmt: Format, device: str = "cpu", reference: str | None = None) -> Candidate:
    torch = _need("torch", "torch")
    F = importlib.import_module("torch.nn.functional")
    if name not in TORCH_OPS:
        raise UnknownNameError(f"unknown torch op '{name}' (known: {', '.join(TORCH_OPS)})")
    ref, kw = TORCH_OPS[name]
    op = getattr(F, ref if name != "gelu_tanh" else "gelu")
    tdt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32,
           "fp64": torch.float64}.get(fmt.name)
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

    return wrap_callable(call, reference or ref, fmt, f"torch:{name}",
                         f"torch {torch.__version__} torch.nn.functional.{op.__name__}"
                         f"{'(approximate=tanh)' if kw else ''} on {device}")


def jax_candidate(name: str, fmt: Format, reference: str | None = None) -> Candidate:
    jax = _need("jax", "jax")
    jnp = importlib.import_module("jax.numpy")
    if name not in JAX_OPS:
        raise UnknownNameError(f"unknown jax op '{name}' (known: {', '.join(JAX_OPS)})")
    ref, kw = JAX_OPS[name]
    op = getattr(jax.nn, name if name != "gelu_tanh" else "gelu")

    def call(arr):
        return np.asarray(op(jnp.asarray(arr), **kw)).astype(fmt.dtype)

    return wrap_callable(call, reference or ref, fmt, f"jax:{name}",
                         f"jax {jax.__version__} jax.nn.{op.__name__} {kw or ''}")
