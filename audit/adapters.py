"""Compatibility: the adapters moved to the package :mod:`audit.engines` (one module per
engine; callables in :mod:`audit.engines.callables`).  Every public name stays importable
from here."""

from __future__ import annotations

from .engines import (  # noqa: F401
    JAX_OPS,
    TORCH_OPS,
    UserFunctionError,
    _need,
    external_candidate,
    is_engine,
    is_external,
    jax_candidate,
    load_callable,
    torch_candidate,
    wrap_callable,
)
from .engines.callables import _deadline, _stdout_to_stderr, _Timeout  # noqa: F401
