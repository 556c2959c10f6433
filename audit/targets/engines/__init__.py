"""Targets that are not catalog formulas: inference engines, framework ops, Python callables.

* ``ort:OP`` -- ONNX Runtime's CPU execution provider (:mod:`audit.targets.engines.ort`).
* ``torch:NAME`` -- torch.nn.functional.NAME (:mod:`audit.targets.engines.torch`).
* ``jax:NAME`` -- jax.nn.NAME (:mod:`audit.targets.engines.jax`).
* ``pkg.module:function`` / ``pkg.module:NAME`` -- a Python callable or a Candidate
  (:mod:`audit.targets.engines.callables`); ``c:FILE.c:FUNCTION`` (audit/targets/ckernels.py),
  ``torch-compile:`` and ``torch-bwd:`` (audit/compare/consistency.py), ``lut:`` (audit/targets/lut.py).

Engines declared through :mod:`audit.targets.engines.base` (an :class:`~audit.targets.engines.base.Engine`
with its op table) are registered here by prefix in :data:`ENGINE_MODULES`: the module is
imported on first use and must define ``ENGINE``, an Engine instance.  Adding an engine is
one module and one line here (see docs/reference/engines.md).
"""

from __future__ import annotations

import importlib

import numpy as np

from audit.errors import BadOptionError, UnknownNameError
from audit.numbers.formats import Format
from audit.targets.candidates import Candidate
from audit.targets.engines.base import (
    SESSIONS,
    Engine,
    EngineError,
    _show,
    engine_candidates,
    split_target,
    takes,
)
from audit.targets.engines.callables import (
    UserFunctionError,
    _need,
    is_external,
    load_callable,
    wrap_callable,
)
from audit.targets.engines.jax import JAX_OPS, jax_candidate
from audit.targets.engines.torch import TORCH_OPS, torch_candidate

# target prefix -> module of audit.targets.engines defining ENGINE (declared engines only)
ENGINE_MODULES: dict[str, str] = {
    "ort": "ort",
    "openvino": "openvino",
    "litert": "litert",
}
_LOADED: dict[str, Engine] = {}


def register(prefix: str, module: str) -> None:
    """Declare an engine module (``audit.targets.engines.MODULE`` or a dotted path) for ``prefix``."""
    ENGINE_MODULES[prefix] = module
    _LOADED.pop(prefix, None)


def is_engine(target) -> bool:
    return isinstance(target, str) and target.partition(":")[0].strip() in ENGINE_MODULES


def get_engine(prefix: str) -> Engine:
    """The Engine of a prefix (its module imported; the engine itself is imported on use)."""
    if prefix not in _LOADED:
        if prefix not in ENGINE_MODULES:
            raise BadOptionError(f"unknown engine '{prefix}' (known: {', '.join(ENGINE_MODULES)})")
        name = ENGINE_MODULES[prefix]
        mod = importlib.import_module(name if "." in name else f"{__name__}.{name}")
        _LOADED[prefix] = mod.ENGINE
    return _LOADED[prefix]


def engines() -> list[Engine]:
    """Every declared engine (installed or not)."""
    return [get_engine(p) for p in ENGINE_MODULES]


def target_takes(target: str, key: str) -> bool:
    """Whether an engine target takes -p ``key`` (an attribute of its op or an option)."""
    prefix, op, _ = split_target(target)
    return takes(get_engine(prefix), op, key)


def candidates_of(target: str, fmt: Format, params: dict | None = None, reference: str | None = None):
    """The candidates of an engine target (one per combination of listed -p values)."""
    return engine_candidates(get_engine(split_target(target)[0]), target, fmt, params, reference)


def external_candidate(
    target: str,
    reference: str | None,
    fmt: Format,
    device: str = "cpu",
    timeout: float | None = None,
    cflags: str | None = None,
    params: dict | None = None,
) -> Candidate:
    """The candidate of any external target (``params``: -p values, for engine targets)."""
    kind, _, name = target.partition(":")
    if is_engine(target):
        found = candidates_of(target, fmt, params, reference)
        if len(found) != 1:
            raise BadOptionError(f"{target}: {len(found)} attribute combinations; give one value each here")
        return found[0]
    if kind == "c":  # a C kernel, c:FILE.c:FUNCTION (audit/targets/ckernels.py)
        from audit.targets.ckernels import c_candidate

        return c_candidate(target, reference, fmt, cflags, timeout)
    if kind == "torch":
        return torch_candidate(name, fmt, device, reference)
    if kind == "jax":
        return jax_candidate(name, fmt, reference)
    if kind == "torch-compile":  # torch.compile of the op (audit/compare/consistency.py)
        from audit.targets.engines.torch_ops import compiled_candidate

        return compiled_candidate(name, fmt, reference)
    if kind == "torch-bwd":  # PyTorch's backward kernel of the op, through autograd
        from audit.targets.engines.torch_ops import torch_backward_candidate

        return torch_backward_candidate(name, fmt, device)
    obj = load_callable(target)
    if isinstance(obj, Candidate):  # a formula candidate (a fitted kernel's CANDIDATE)
        if reference is not None and obj.reference != reference:
            raise BadOptionError(f"{target} approximates {obj.reference}, not --reference {reference}")
        return obj
    if reference is None:
        raise BadOptionError(f"{target}: give the function's reference with --reference (e.g. gelu)")
    return wrap_callable(obj, reference, fmt, target, "user callable", timeout)


__all__ = [
    "ENGINE_MODULES",
    "SESSIONS",
    "Engine",
    "EngineError",
    "JAX_OPS",
    "TORCH_OPS",
    "UserFunctionError",
    "candidates_of",
    "engines",
    "external_candidate",
    "get_engine",
    "is_engine",
    "is_external",
    "jax_candidate",
    "load_callable",
    "register",
    "target_takes",
    "torch_candidate",
    "wrap_callable",
    "_need",
]


def engine_function(target: str, fmt: Format):
    """(fn(array of fmt's dtype, **attributes) -> array, reference) of an engine target: the
    op's session for the target's attributes updated with ``attributes`` (layout, length
    and parameter-effect checks call it on arrays of any shape)."""
    from audit.targets.engines.base import SESSIONS, check_dtype, resolve_key

    prefix, op_name, own = split_target(target)
    engine = get_engine(prefix)
    op = engine.op(op_name)
    check_dtype(engine, op, fmt.name)
    engine.load()

    def fn(arr, **kw):
        key, _ = resolve_key(engine, op, fmt.name, {**own, **kw})
        out = SESSIONS.get(engine, key).run(arr)
        return out

    return fn, op.reference


def quant_candidate(target: str, inq, outq, params: dict | None = None):
    """(audit.measure.quant.QuantCandidate, reference, reference parameters) of a quantized engine op
    (ort:QLinearSigmoid): input codes of ``inq`` in, output codes of ``outq`` out, the scales
    and zero points fed as tensors with every call."""
    from audit.numbers.quant import QuantFormat
    from audit.oracle.references import get_reference
    from audit.targets.engines.base import SESSIONS, EngineInfo, resolve_key
    from audit.targets.quantized import QuantCandidate

    prefix, op_name, own = split_target(target)
    engine = get_engine(prefix)
    op = engine.op(op_name)
    codes = op.dtypes if op.quantized else op.qdtypes
    if not codes:
        raise BadOptionError(
            f"{target} takes {', '.join(op.dtypes)} values; quantized codes are for "
            f"{', '.join(n for n, o in engine.ops.items() if o.quantized or o.qdtypes) or 'no op'}"
        )
    if not isinstance(inq, QuantFormat) or inq.kind not in codes:
        raise BadOptionError(f"{target} takes {' or '.join(codes)} codes: --dtype int8:scale=S,zero=Z")
    if outq.kind != inq.kind:
        raise BadOptionError(f"{target} writes the codes of its input type ({inq.kind}), not {outq.kind}")
    engine.load()
    from audit.targets.engines.base import engine_params

    given = {**engine_params(engine, op, params or {}), **own}
    for k, v in given.items():
        if isinstance(v, (list, tuple)):
            raise BadOptionError(f"{target}: one value of '{k}' per quantized audit")
    key, given = resolve_key(
        engine, op, f"{inq.name}->{outq.name}" if engine.quant_in_model else inq.kind, given
    )
    session = SESSIONS.get(engine, key)
    info = EngineInfo(
        engine.name,
        engine.version(),
        op.name,
        key.attrs,
        inq.name,
        key.opts,
        session.precision,
        engine.dispatch(),
    )
    ctype = {"int8": np.int8, "uint8": np.uint8, "int16": np.int16}[inq.kind]

    def fn(codes, _x):
        out = session.run_quant(np.asarray(codes).astype(ctype), inq.scale, inq.zero, outq.scale, outq.zero)
        out = np.asarray(out)
        if out.shape != np.shape(codes):
            raise EngineError(
                f"{target}: {engine.name} returned shape {out.shape}, expected {np.shape(codes)}"
            )
        return out.astype(np.float64)

    ref_params = dict(op.ref_params)
    for a in op.attrs:
        if a.ref_param is not None:
            ref_params[a.ref_param] = key.attrs[a.name]
    label = f"{prefix}:{op.name}" + (
        f"[{','.join(f'{k}={_show(v)}' for k, v in sorted(given.items()))}]" if given else ""
    )
    qc = QuantCandidate(
        label,
        op.reference,
        f"{op.name} on {inq.kind} codes",
        f"{engine.name} {info.version} {op.domain}.{op.name} precision {info.precision}, dispatch {info.dispatch}",
        fn,
        "native",
    )
    qc.identity = info.to_dict()
    get_reference(op.reference)
    return qc, get_reference(op.reference), ref_params


def external_function(target: str, fmt: Format):
    """(fn(numpy array, **params) -> numpy array, reference name or None) of an external
    target (engine op, ``torch:``, ``jax:``, ``torch-compile:``, ``pkg.module:function``), as
    the consistency and parameter-effect checks call it with keywords."""
    kind, _, name = target.partition(":")
    from audit.targets.engines.torch_ops import _torch_op

    if is_engine(target):
        return engine_function(target, fmt)
    if kind == "torch":
        return _torch_op(name, fmt)
    if kind == "jax":
        _need("jax", "jax")
        jax = importlib.import_module("jax")
        jnp = importlib.import_module("jax.numpy")
        if name not in JAX_OPS:
            raise UnknownNameError(f"unknown jax op '{name}' (known: {', '.join(JAX_OPS)})")
        ref, kw0 = JAX_OPS[name]
        op = getattr(jax.nn, name if name != "gelu_tanh" else "gelu")
        return (lambda arr, **kw: np.asarray(op(jnp.asarray(arr), **kw0, **kw)).astype(fmt.dtype)), ref
    if kind == "torch-compile":
        return _torch_op(name, fmt, compiled=True)
    return load_callable(target), None
