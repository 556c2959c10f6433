"""torch.nn.functional's ops as functions on numpy arrays (eager and ``torch.compile``:
``torch-compile:NAME``), and PyTorch's backward kernels as candidates (``torch-bwd:NAME``)."""

from __future__ import annotations

import importlib

import numpy as np

from audit.errors import BadOptionError, UnknownNameError
from audit.numbers.formats import Format
from audit.targets.candidates import Candidate
from audit.targets.engines import callables as adapters  # noqa: I001
from audit.targets.engines.torch import TORCH_OPS

COMPILE_BLOCK = 1 << 12

_TORCH_DT = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64"}
_INTS = {16: np.int16, 32: np.int32, 64: np.int64}


def _torch_op(name: str, fmt: Format, compiled: bool = False):
    """fn(numpy array of fmt.dtype, **kw) -> numpy array, calling torch.nn.functional's op
    (through bit patterns: torch takes no ml_dtypes bfloat16)."""
    torch = adapters._need("torch", "torch")
    F = importlib.import_module("torch.nn.functional")
    if name not in TORCH_OPS:
        raise UnknownNameError(f"unknown torch op '{name}' (known: {', '.join(TORCH_OPS)})")
    ref, kw0 = TORCH_OPS[name]
    op = getattr(F, ref if name != "gelu_tanh" else "gelu")
    if fmt.name not in _TORCH_DT:
        raise BadOptionError(f"torch ops are audited in fp16, bf16, fp32 and fp64, not {fmt.name}")
    tdt = getattr(torch, _TORCH_DT[fmt.name])
    ti = {16: torch.int16, 32: torch.int32, 64: torch.int64}[fmt.bits]
    ni = _INTS[fmt.bits]

    def to_t(arr):
        return torch.from_numpy(np.array(arr, copy=True, order="C").view(ni)).view(tdt)

    def to_np(t):
        return t.contiguous().view(ti).numpy().view(fmt.dtype)

    if compiled:
        cop = _compiled(torch, op, kw0)

        def call_compiled(arr, **kw):
            if kw:
                raise BadOptionError(
                    f"torch-compile:{name} is compiled without parameters; "
                    f"check {', '.join(kw)} on torch:{name}"
                )
            flat = np.asarray(arr).reshape(-1)
            out = np.empty_like(flat)
            for i in range(0, len(flat), COMPILE_BLOCK):
                part = flat[i : i + COMPILE_BLOCK]
                pad = np.zeros(COMPILE_BLOCK, dtype=flat.dtype)
                pad[: len(part)] = part
                with torch.no_grad():
                    out[i : i + len(part)] = to_np(cop(to_t(pad)))[: len(part)]
            return out.reshape(np.shape(arr))

        return call_compiled, ref

    def call(arr, **kw):
        t = to_t(arr)
        with torch.no_grad():
            return to_np(op(t, **kw0, **kw))

    setattr(call, "torch_view", (to_t, to_np, op, kw0, torch))  # noqa: B010  (for the layout check's views)
    return call, ref


_COMPILED: dict = {}


def _compiled(torch, op, kw0):
    key = (op.__name__, tuple(sorted(kw0.items())))
    if key not in _COMPILED:
        _COMPILED[key] = torch.compile(lambda t: op(t, **kw0), dynamic=False)
    return _COMPILED[key]


def compiled_candidate(name: str, fmt: Format, reference: str | None = None) -> Candidate:
    """``torch-compile:NAME``: torch.compile of torch.nn.functional's op, on CPU."""
    call, ref = _torch_op(name, fmt, compiled=True)
    torch = importlib.import_module("torch")
    return adapters.wrap_callable(
        call,
        reference or ref,
        fmt,
        f"torch-compile:{name}",
        f"torch {torch.__version__} torch.compile(torch.nn.functional.{name}) (Inductor, CPU)",
    )


def torch_backward_candidate(name: str, fmt: Format, device: str = "cpu") -> Candidate:
    """``torch-bwd:NAME``: PyTorch's own backward kernel of torch.nn.functional's op, through
    autograd: x and dy as tensors of the storage dtype, dx = x.grad after
    op(x).backward(dy); audited against the exact NAME_bwd(x, dy) = dy * f'(x)."""
    from audit.oracle.references import REFERENCES
    from audit.targets.candidates import catalog

    torch = adapters._need("torch", "torch")
    F = importlib.import_module("torch.nn.functional")
    if name not in TORCH_OPS:
        raise UnknownNameError(f"unknown torch op '{name}' (known: {', '.join(TORCH_OPS)})")
    ref, kw0 = TORCH_OPS[name]
    catalog()  # registers the NAME_bwd references
    bwd = f"{ref}_bwd"
    if bwd not in REFERENCES:
        have = sorted(n.removesuffix("_bwd") for n in REFERENCES if n.endswith("_bwd"))
        raise BadOptionError(
            f"no exact backward reference for torch:{name} (backward references: {', '.join(have)})"
        )
    if fmt.name not in _TORCH_DT:
        raise BadOptionError(f"torch ops are audited in fp16, bf16, fp32 and fp64, not {fmt.name}")
    if device != "cpu" and not (device.startswith("cuda") and torch.cuda.is_available()):
        raise BadOptionError(f"device '{device}' is not available to torch here")
    op = getattr(F, ref if name != "gelu_tanh" else "gelu")
    tdt = getattr(torch, _TORCH_DT[fmt.name])
    ti = {16: torch.int16, 32: torch.int32, 64: torch.int64}[fmt.bits]
    ni = _INTS[fmt.bits]

    def to_t(a):
        bits = np.asarray(a, dtype=np.float64).astype(fmt.dtype).view(ni)
        return torch.from_numpy(bits.copy()).view(tdt).to(device)

    def fn(x, dy, m):
        xt = to_t(x.a).requires_grad_(True)
        try:
            op(xt, **kw0).backward(to_t(dy.a))
        except Exception as e:
            raise adapters.UserFunctionError(f"torch-bwd:{name} raised {type(e).__name__}: {e}") from None
        g = xt.grad.detach().to("cpu").contiguous().view(ti).numpy().view(fmt.dtype)
        with np.errstate(all="ignore"):
            return g.astype(np.float64)

    return Candidate(
        f"torch-bwd:{name}",
        bwd,
        f"autograd of torch.nn.functional.{op.__name__}"
        f"{'(approximate=tanh)' if kw0 else ''}: x.grad after op(x).backward(dy)",
        f"torch {torch.__version__} on {device}",
        fn,
        compute=fmt.name,
    )
