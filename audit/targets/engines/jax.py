"""``jax:NAME``: jax.nn.NAME (XLA on CPU); optional extra ``actaudit[jax]``."""

from __future__ import annotations

import dataclasses
import importlib

import numpy as np

from audit.errors import UnknownNameError
from audit.numbers.formats import Format
from audit.targets.candidates import Candidate
from audit.targets.engines.base import EngineInfo
from audit.targets.engines.callables import _need, wrap_callable

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
    "erf": ("erf", {}),  # jax.scipy.special.erf (not in jax.nn)
}


def jax_candidate(name: str, fmt: Format, reference: str | None = None) -> Candidate:
    jax = _need("jax", "jax")
    jnp = importlib.import_module("jax.numpy")
    if name not in JAX_OPS:
        raise UnknownNameError(f"unknown jax op '{name}' (known: {', '.join(JAX_OPS)})")
    ref, kw = JAX_OPS[name]
    if name == "erf":
        op = importlib.import_module("jax.scipy.special").erf
    else:
        op = getattr(jax.nn, name if name != "gelu_tanh" else "gelu")

    def call(arr):
        return np.asarray(op(jnp.asarray(arr), **kw)).astype(fmt.dtype)

    cand = wrap_callable(
        call, reference or ref, fmt, f"jax:{name}", f"jax {jax.__version__} jax.nn.{op.__name__} {kw or ''}"
    )
    backend = jax.default_backend()
    info = EngineInfo(  # (as torch_candidate's: the baseline is bound to version and backend)
        engine="jax",
        version=str(jax.__version__),
        op="jax.scipy.special.erf" if name == "erf" else f"jax.nn.{op.__name__}",
        attributes=dict(kw),
        dtype=fmt.name,
        options={"backend": backend},
        precision=fmt.name,
        dispatch=f"eager on {backend}, jaxlib {importlib.import_module('jaxlib').__version__}",
    )
    return dataclasses.replace(cand, identity=info.to_dict())
