"""``torch:NAME``: torch.nn.functional.NAME on CPU (or ``device``, 'cuda'); optional extra
``actaudit[torch]``.  ``torch:gelu_tanh`` is gelu with approximate='tanh'."""

from __future__ import annotations

import dataclasses
import importlib

import numpy as np

from audit.errors import BadOptionError, UnknownNameError
from audit.numbers.formats import Format
from audit.targets.candidates import Candidate
from audit.targets.engines.base import EngineInfo
from audit.targets.engines.callables import _need, wrap_callable

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

    cand = wrap_callable(
        call,
        reference or ref,
        fmt,
        f"torch:{name}",
        f"torch {torch.__version__} torch.nn.functional.{op.__name__}"
        f"{'(approximate=tanh)' if kw else ''} on {device}",
    )
    # what a baseline of this candidate is bound to: another torch version or device is
    # another run (check says: re-record), never compared as the same one
    info = EngineInfo(
        engine="torch",
        version=str(torch.__version__),
        op=f"torch.nn.functional.{op.__name__}",
        attributes=dict(kw),
        dtype=fmt.name,
        options={"device": device},
        precision=fmt.name,
        dispatch=f"eager on {device}",
    )
    return dataclasses.replace(cand, identity=info.to_dict())
