"""``openvino:OP``: OpenVINO's CPU plugin on a single-op model.

The model is built in memory with OpenVINO's opset API: one node, its data input a
``Parameter`` of dynamic shape (never a constant, so never folded); attributes that are
inputs in OpenVINO (Swish's beta) are scalar constants.  It is compiled for ``CPU`` with one
inference thread.  ``-p openvino.precision=fp32|bf16|fp16`` sets
``INFERENCE_PRECISION_HINT``; without it (``default``) the plugin's own default is used,
which on a CPU with AVX512_BF16 or AMX is bf16.

What ran is read back from the compiled model, not assumed: the hint the compiled model
reports and the runtime precision of the op's node in the runtime graph (an element-wise op
alone in an fp32 model runs in f32 even under a bf16 hint; under an f16 hint the plugin
inserts a Convert and runs the op in f16).  Both are the result's ``precision``, e.g.
``hint bf16, Eltwise f32``.

Dispatch: the CPU plugin's JIT kernels (and oneDNN's) take the widest instruction set the
CPU has: :func:`dispatch` names it from /proc/cpuinfo as oneDNN does (``avx512_core_amx``,
``avx512_core_bf16``, ``avx512_core``, ``avx2``, ``sse41``), capped by ``ONEDNN_MAX_CPU_ISA``
or ``DNNL_MAX_CPU_ISA`` when set.
"""

from __future__ import annotations

import functools
import os
import platform

import numpy as np

from audit.targets.engines.base import Attr, Engine, EngineError, Op, Session, SessionKey, one_line
from audit.targets.engines.ort import cpu_flags

FLOATS = ("fp32", "fp16", "bf16")

_OPS = [
    Op(
        "Gelu",
        "gelu",
        FLOATS,
        (
            Attr(
                "approximation_mode",
                str,
                "erf",
                ("erf", "tanh"),
                doc="'tanh': the tanh approximation (the reference stays erf-GELU)",
            ),
        ),
        note="opset 7 Gelu",
    ),
    Op("Sigmoid", "sigmoid", FLOATS),
    Op("Tanh", "tanh", FLOATS),
    Op("Erf", "erf", FLOATS),
    Op("Exp", "exp", FLOATS),
    Op(
        "Swish",
        "silu",
        FLOATS,
        (Attr("beta", float, 1.0, ref_param="beta", doc="x * sigmoid(beta x); a scalar constant input"),),
        note="opset 4 Swish: silu with beta",
    ),
    Op("Mish", "mish", FLOATS),
    Op("HSwish", "hardswish", FLOATS),
    Op("HSigmoid", "hardsigmoid", FLOATS),
    Op("SoftPlus", "softplus", FLOATS),
    Op("Elu", "elu", FLOATS, (Attr("alpha", float, 1.0, ref_param="alpha"),)),
]
OPS = {o.name: o for o in _OPS}

_HINT = {"fp32": "f32", "bf16": "bf16", "fp16": "f16"}
_NP = {"fp32": np.float32, "fp16": np.float16}


class OpenVinoEngine(Engine):
    prefix = "openvino"
    name = "openvino"
    module = "openvino"
    ops = OPS
    options = (
        Attr(
            "precision",
            str,
            "default",
            ("default", "fp32", "bf16", "fp16"),
            doc="INFERENCE_PRECISION_HINT (default: the plugin's own default, not set)",
        ),
    )

    def load(self):
        _no_telemetry()
        return super().load()

    def version(self) -> str:
        return self.load().get_version()

    def dispatch(self) -> str:
        return dispatch()

    def build(self, key: SessionKey) -> Session:
        ov = self.load()
        model = make_model(ov, OPS[key.op], key.attrs, key.dtype)
        config: dict[str, int | str] = {"INFERENCE_NUM_THREADS": 1, "NUM_STREAMS": 1}
        hint = key.opts["precision"]
        if hint != "default":
            config["INFERENCE_PRECISION_HINT"] = _HINT[hint]
        try:
            compiled = _core().compile_model(model, "CPU", config)
        except Exception as e:
            raise EngineError(
                f"openvino:{key.op}: openvino {ov.get_version()} refused the {key.dtype} model: {one_line(e)}"
            ) from None
        reported = str(compiled.get_property("INFERENCE_PRECISION_HINT"))
        nodes = runtime_nodes(compiled)
        ran = [prec for (_name, layer, prec) in nodes if layer not in ("Input", "Output", "Convert")]
        precision = f"hint {_short(reported)}, {OPS[key.op].name} ran in {'/'.join(ran) or '?'}"
        if any(layer == "Convert" for (_n, layer, _p) in nodes):
            precision += " between converts"
        return Session(
            _runner(ov, compiled, key.dtype), precision, {"runtime_graph": nodes, "hint": reported}
        )


def _no_telemetry() -> None:
    """Importing openvino sends a telemetry event from a forked process (openvino.tools.ovc,
    through openvino_telemetry): a fork of a process that holds engines' threads (JAX warns
    of a deadlock), and a network call from an offline audit.  Without openvino_telemetry
    openvino uses its own stub, which sends nothing."""
    import sys

    if "openvino" not in sys.modules:
        sys.modules.setdefault("openvino_telemetry", None)  # type: ignore[arg-type]


@functools.lru_cache(maxsize=1)
def _core():
    _no_telemetry()
    import openvino as ov

    return ov.Core()


def _short(t: str) -> str:
    """'<Type: 'bfloat16'>' -> 'bf16'."""
    for long, short in (("bfloat16", "bf16"), ("float16", "f16"), ("float32", "f32")):
        if long in t:
            return short
    return t


def runtime_nodes(compiled) -> list[tuple[str, str, str]]:
    """(name, layer type, runtime precision) of every node the plugin compiled."""
    out = []
    for node in compiled.get_runtime_model().get_ordered_ops():
        rt = node.get_rt_info()
        out.append(
            (node.get_friendly_name(), rt["layerType"].astype(str), rt["runtimePrecision"].astype(str))
        )
    return out


def make_model(ov, op: Op, attrs: dict, dtype: str):
    """The single-op model of ``op`` with ``attrs`` on a ``dtype`` tensor of any 1-d length."""
    from openvino import opset13 as ops

    elem = {"fp32": ov.Type.f32, "fp16": ov.Type.f16, "bf16": ov.Type.bf16}[dtype]
    p = ops.parameter(ov.PartialShape([-1]), elem, name="x")
    n = op.name
    if n == "Gelu":
        y = ops.gelu(p, attrs["approximation_mode"])
    elif n == "Swish":
        beta = ops.constant(np.array(attrs["beta"], dtype=np.float32))
        if dtype != "fp32":
            beta = ops.convert(beta, elem)
        y = ops.swish(p, beta)
    elif n == "Elu":
        y = ops.elu(p, float(attrs["alpha"]))
    else:
        y = {
            "Sigmoid": ops.sigmoid,
            "Tanh": ops.tanh,
            "Erf": ops.erf,
            "Exp": ops.exp,
            "Mish": ops.mish,
            "HSwish": ops.hswish,
            "HSigmoid": ops.hsigmoid,
            "SoftPlus": ops.softplus,
        }[n](p)
    return ov.Model([y], [p], f"actaudit_{n}")


def _runner(ov, compiled, dtype: str):
    request = compiled.create_infer_request()

    def run(arr: np.ndarray) -> np.ndarray:
        shape = arr.shape
        flat = np.ascontiguousarray(arr).reshape(-1)
        if flat.size == 0:
            return np.asarray(arr).copy()
        if dtype == "bf16":  # numpy has no bfloat16 OpenVINO knows: move the bits
            import ml_dtypes

            t = ov.Tensor(ov.Type.bf16, ov.Shape([flat.size]))
            t.data.view(np.uint16)[:] = flat.view(np.uint16)
            request.infer([t])
            out = request.get_output_tensor(0)
            if str(out.get_element_type()) != str(ov.Type.bf16):
                raise EngineError(f"openvino returned {out.get_element_type()} for a bf16 model")
            y = out.data.view(np.uint16).copy().view(ml_dtypes.bfloat16)
        else:
            request.infer([flat.astype(_NP[dtype], copy=False)])
            y = np.array(request.get_output_tensor(0).data, copy=True)
        return y.reshape(shape)

    return run


# ---------------------------------------------------------------------- dispatch
_ISAS = ("sse41", "avx2", "avx512_core", "avx512_core_bf16", "avx512_core_amx")


def dispatch(flags: frozenset | None = None) -> str:
    """The instruction set the CPU plugin's JIT kernels use here, named as oneDNN names it."""
    m = platform.machine().lower()
    if m not in ("x86_64", "amd64"):
        return m or "unknown"
    f = cpu_flags() if flags is None else flags
    isa = "sse41" if "sse4_1" in f else "sse2"
    if {"avx2", "fma"} <= f:
        isa = "avx2"
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= f:
        isa = "avx512_core"
        if "avx512_bf16" in f:
            isa = "avx512_core_bf16"
        if {"amx_bf16", "amx_tile"} <= f:
            isa = "avx512_core_amx"
    cap = (os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or "").lower()
    if cap in _ISAS and isa in _ISAS and _ISAS.index(cap) < _ISAS.index(isa):
        return f"{cap} (capped from {isa})"
    return isa


ENGINE = OpenVinoEngine()
