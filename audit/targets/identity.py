"""What makes an external candidate what it is, beyond its name: ``Candidate.identity``.

One identity per candidate, computed here (or, for engines and C kernels, from what this
module gives them) when the candidate is built, and used everywhere a result is bound to
what produced it: the gate's baseline entries (audit/gate/identity.py records it verbatim as
``candidate_identity``) and the checkpoints of chunked sweeps (audit/measure/checkpoint.py
keys a saved state by it), so that a resumed run and a baseline can never outlive a change
of code or machine the other would notice.

* A Python callable (``pkg.module:function``, or a function given to the API): its
  qualified name, a digest of its code (bytecode, constants, names, recursively through
  nested functions; its defaults; the values its closure holds) and the SHA-256 of its
  module's file.
* An engine op: its :class:`audit.targets.engines.base.EngineInfo` (engine, version, op,
  attributes, dtype, options, precision, dispatch) and :func:`environment`.
* A C kernel: its flags, the digest of its source and every header, the compiler, and
  :func:`environment`.

:func:`environment` is every environment variable known to change the kernels an engine (or
the C library) runs, as set: XLA_FLAGS (``--xla_cpu_enable_fast_math=true`` changes jax's
results), the ISA caps and math modes of oneDNN and MKL, ATen's CPU capability, glibc's
hwcaps tunables, ONNX Runtime's and OpenVINO's own settings.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import sys
import types

import numpy as np

# the variables every engine's kernels (and libm) read: ISA caps, math modes, preloads
_COMMON = (
    "ONEDNN_MAX_CPU_ISA",
    "DNNL_MAX_CPU_ISA",
    "ONEDNN_CPU_ISA_HINTS",
    "DNNL_CPU_ISA_HINTS",
    "ONEDNN_DEFAULT_FPMATH_MODE",
    "DNNL_DEFAULT_FPMATH_MODE",
    "MKL_CBWR",
    "MKL_ENABLE_INSTRUCTIONS",
    "MKL_DEBUG_CPU_TYPE",
    "OPENBLAS_CORETYPE",
    "GLIBC_TUNABLES",
    "LD_PRELOAD",
)
ENVIRONMENT = {  # engine kind -> (names, prefixes of the engine's own settings)
    "c": ((*_COMMON,), ()),
    "onnxruntime": ((*_COMMON,), ("ORT_", "ONNXRUNTIME_")),
    "openvino": ((*_COMMON, "OV_CPU_CAPABILITY"), ("OV_", "OPENVINO_")),
    "litert": ((*_COMMON, "TF_ENABLE_ONEDNN_OPTS", "TF_XLA_FLAGS"), ("TFLITE_", "XNNPACK_")),
    "torch": (
        (*_COMMON, "ATEN_CPU_CAPABILITY", "NVIDIA_TF32_OVERRIDE", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"),
        (),
    ),
    "jax": (
        (
            *_COMMON,
            "XLA_FLAGS",
            "JAX_ENABLE_X64",
            "JAX_DEFAULT_MATMUL_PRECISION",
            "JAX_DEFAULT_DTYPE_BITS",
            "JAX_PLATFORMS",
            "JAX_PLATFORM_NAME",
            "JAX_ENABLE_CHECKS",
            "NVIDIA_TF32_OVERRIDE",
        ),
        (),
    ),
}


def environment(kind: str, env=None) -> dict:
    """The variables of ``kind`` (an engine's name, or 'c') that are set, and their values."""
    env = os.environ if env is None else env
    names, prefixes = ENVIRONMENT.get(kind, (_COMMON, ()))
    return {k: str(env[k]) for k in sorted(env) if k in names or any(k.startswith(p) for p in prefixes)}


def _sha_file(path) -> str | None:
    try:
        with open(path, "rb") as fh:
            return hashlib.sha256(fh.read(1 << 26)).hexdigest()
    except (OSError, TypeError, ValueError):
        return None


def code_digest(func) -> str:
    """A SHA-256 of what ``func`` computes with: its code objects (bytecode, constants, names,
    nested functions), defaults and the values its closure holds (numbers, strings, arrays
    by their bytes, functions by their code)."""
    h = hashlib.sha256()
    seen: set = set()

    def feed_code(co: types.CodeType) -> None:
        h.update(co.co_code)
        h.update(repr((co.co_names, co.co_varnames, co.co_freevars)).encode())
        for c in co.co_consts:
            if isinstance(c, types.CodeType):
                feed_code(c)
            else:
                h.update(repr(c).encode())

    def feed_value(v, depth=0) -> None:
        if depth > 4 or id(v) in seen:
            return
        seen.add(id(v))
        if isinstance(v, (int, float, complex, str, bytes, bool, type(None))):
            h.update(repr(v).encode())
        elif isinstance(v, (tuple, list)):
            for w in v:
                feed_value(w, depth + 1)
        elif isinstance(v, (np.ndarray, np.generic)):  # an array, a numpy scalar
            h.update(str(v.dtype).encode() + repr(v.shape).encode() + np.ascontiguousarray(v).tobytes())
        elif isinstance(v, types.FunctionType):
            feed_function(v, depth + 1)
        else:
            h.update(f"{type(v).__module__}.{type(v).__qualname__}".encode())

    def feed_function(f, depth=0) -> None:
        feed_code(f.__code__)
        feed_value(f.__defaults__, depth + 1)
        feed_value(tuple(sorted((f.__kwdefaults__ or {}).items())), depth + 1)
        for cell in f.__closure__ or ():
            try:
                feed_value(cell.cell_contents, depth + 1)
            except ValueError:  # an empty cell
                h.update(b"<empty>")

    target = func
    if not isinstance(target, types.FunctionType):
        target = getattr(func, "__func__", None) or inspect.getattr_static(type(func), "__call__", None)
    if isinstance(target, types.FunctionType):
        feed_function(target)
    else:  # a builtin or a ufunc: its name is all there is
        h.update(
            f"{type(func).__module__}.{getattr(func, '__qualname__', getattr(func, '__name__', ''))}".encode()
        )
    return h.hexdigest()


def callable_identity(func) -> dict:
    """A Python callable's identity: its qualified name, its code's digest and its module
    file's SHA-256 (None where it has no file)."""
    mod_name = str(getattr(func, "__module__", None) or getattr(type(func), "__module__", ""))
    mod = sys.modules.get(mod_name)
    try:
        path = inspect.getsourcefile(func) or (getattr(mod, "__file__", None) if mod else None)
    except TypeError:
        path = getattr(mod, "__file__", None) if mod else None
    qual = getattr(func, "__qualname__", None) or type(func).__qualname__
    return {
        "callable": f"{mod_name}:{qual}",
        "code": code_digest(func),
        "module_file": _sha_file(path),
    }
