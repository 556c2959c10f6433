"""``litert:OP``: LiteRT (``ai-edge-litert``), the TensorFlow Lite interpreter, on a single-op
model.

The ``.tflite`` model is written here in pure Python with ``flatbuffers`` and the schema
module LiteRT ships (``ai_edge_litert.schema_py_generated``): one subgraph, one operator, its
input a graph input (no buffer data, so nothing is folded), of dynamic length (shape
signature ``[-1]``, resized per call).  No TensorFlow is involved.

The op resolver is explicit and recorded (``-p litert.resolver=...``):

* ``xnnpack`` (the default): LiteRT's default, ``OpResolverType.BUILTIN``, which applies the
  XNNPACK delegate; it is what ``Interpreter(model_content=...)`` runs out of the box, hence
  what a deployment gets.  Whether XNNPACK took the node is read back from the interpreter
  (a ``DELEGATE`` node replaces it) and recorded: where it did not, the builtin kernel ran.
* ``builtin``: ``BUILTIN_WITHOUT_DEFAULT_DELEGATES``, LiteRT's optimized builtin kernels.
* ``reference``: ``BUILTIN_REF``, the reference kernels.

The interpreter runs one thread.  Float ops take float32 (LiteRT's builtin activations have
no fp16 or bf16 kernels; those types are refused with the types the op takes).
"""

from __future__ import annotations

import functools

import numpy as np

from audit.targets.engines.base import Attr, Engine, EngineError, Op, Session, SessionKey, one_line

_OPS = [
    Op("LOGISTIC", "sigmoid", ("fp32",), qdtypes=("int8", "int16")),
    Op("TANH", "tanh", ("fp32",), qdtypes=("int8", "int16")),
    Op(
        "GELU",
        "gelu",
        ("fp32",),
        (Attr("approximate", str, "false", ("false", "true"), doc="GeluOptions.approximate (tanh form)"),),
        qdtypes=("int8",),
    ),
    Op("HARD_SWISH", "hardswish", ("fp32",), qdtypes=("int8",)),
    Op("ELU", "elu", ("fp32",), note="alpha is 1 (the op has no options)", qdtypes=("int8",)),
]

# the output quantization each integer kernel requires (TFLite's quantization spec:
# tensorflow/lite/kernels/activations.cc checks these and refuses others)
FIXED_OUTPUT = {
    ("LOGISTIC", "int8"): (1 / 256, -128),
    ("LOGISTIC", "int16"): (1 / 32768, 0),
    ("TANH", "int8"): (1 / 128, 0),
    ("TANH", "int16"): (1 / 32768, 0),
}
OPS = {o.name: o for o in _OPS}

RESOLVERS = ("xnnpack", "builtin", "reference")


class LiteRtEngine(Engine):
    prefix = "litert"
    name = "litert"
    module = "ai_edge_litert.interpreter"
    ops = OPS
    quant_in_model = True  # scales and zero points are tensor parameters of the .tflite
    options = (
        Attr(
            "resolver",
            str,
            "xnnpack",
            RESOLVERS,
            doc="op resolver: xnnpack (LiteRT's default, BUILTIN with XNNPACK), builtin, reference",
        ),
    )

    def version(self) -> str:
        return _version()

    def dispatch(self) -> str:
        from audit.targets.engines.ort import dispatch as cpu_dispatch

        return cpu_dispatch()

    def build(self, key: SessionKey) -> Session:
        interp_mod = self.load()
        quant = _quant_formats(key)
        content = make_model(OPS[key.op], key.attrs, key.dtype, quant)
        resolver = key.opts["resolver"]
        kind = {
            "xnnpack": interp_mod.OpResolverType.BUILTIN,
            "builtin": interp_mod.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
            "reference": interp_mod.OpResolverType.BUILTIN_REF,
        }[resolver]
        try:
            with _quiet_stderr():  # "INFO: Created TensorFlow Lite XNNPACK delegate" from C++
                interp = interp_mod.Interpreter(
                    model_content=content, num_threads=1, experimental_op_resolver_type=kind
                )
                interp.allocate_tensors()
        except Exception as e:
            raise EngineError(
                f"litert:{key.op}: litert {_version()} refused the model: {one_line(e)}"
            ) from None
        ran = [d["op_name"] for d in interp._get_ops_details()]
        delegated = any(n == "DELEGATE" for n in ran)
        if resolver == "xnnpack":
            precision = "xnnpack delegate" if delegated else f"builtin kernel ({key.op} not delegated)"
        else:
            precision = f"{resolver} kernel"
        if quant is not None:
            session = Session(_refuse_floats(key.op), f"{quant[0].kind}, {precision}", {"nodes": ran})
            session.run_quant = _quant_runner(interp, quant)  # type: ignore[attr-defined]
            return session
        return Session(_runner(interp), f"fp32, {precision}", {"nodes": ran})


class _quiet_stderr:
    """File descriptor 2 sent to /dev/null while LiteRT's C++ start-up logs (its messages
    are informational; a refusal still arrives as a Python exception)."""

    def __enter__(self):
        import os
        import sys

        sys.stderr.flush()
        self.saved = os.dup(2)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        os.close(null)
        return self

    def __exit__(self, *exc):
        import os

        os.dup2(self.saved, 2)
        os.close(self.saved)
        return False


@functools.lru_cache(maxsize=1)
def _version() -> str:
    from importlib.metadata import version

    try:
        return version("ai-edge-litert")
    except Exception:
        return "unknown"


def _quant_formats(key: SessionKey):
    """(input, output) QuantFormat of a quantized session key ('IN->OUT'), or None."""
    if "->" not in key.dtype:
        return None
    from audit.numbers.quant import parse_quant

    inq, outq = (parse_quant(t) for t in key.dtype.split("->"))
    need = FIXED_OUTPUT.get((key.op, inq.kind))
    if need is not None and (outq.scale, outq.zero) != (float(np.float32(need[0])), need[1]):
        raise EngineError(
            f"litert:{key.op} on {inq.kind} writes codes of scale {need[0]:g} and zero point {need[1]} "
            f"(TFLite's quantization spec): --out-dtype {inq.kind}:scale={need[0]!r},zero={need[1]}"
        )
    if inq.kind == "int16" and (inq.zero != 0 or outq.zero != 0):
        raise EngineError(f"litert:{key.op} on int16 takes symmetric codes: zero=0")
    return inq, outq


# TFLite op versions whose kernels take integer codes (register.cc: int8 from version 2, int16
# from version 3 for LOGISTIC and TANH; HARD_SWISH and ELU take int8 at version 1)
_QVERSION = {("LOGISTIC", "int16"): 3, ("TANH", "int16"): 3, ("HARD_SWISH", "int8"): 1, ("ELU", "int8"): 1}


def make_model(op: Op, attrs: dict, dtype: str, quant=None) -> bytes:
    """The ``.tflite`` flatbuffer of a single ``op`` on a vector of any length: float32, or
    the integer codes of ``quant`` = (input, output) QuantFormat."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as S

    if quant is None and dtype != "fp32":
        raise EngineError(f"litert:{op.name} takes fp32, not {dtype}")
    code = getattr(S.BuiltinOperator, op.name)
    oc = S.OperatorCodeT()
    oc.builtinCode = code
    oc.deprecatedBuiltinCode = min(code, S.BuiltinOperator.PLACEHOLDER_FOR_GREATER_OP_CODES)
    oc.version = 1 if quant is None else _QVERSION.get((op.name, quant[0].kind), 2)

    def tensor(name: bytes, buf: int, q=None):
        t = S.TensorT()
        t.shape = [1]
        t.shapeSignature = [-1]
        t.type = S.TensorType.FLOAT32
        if q is not None:
            t.type = S.TensorType.INT8 if q.kind == "int8" else S.TensorType.INT16
            qp = S.QuantizationParametersT()
            qp.scale = [float(q.scale)]
            qp.zeroPoint = [int(q.zero)]
            t.quantization = qp
        t.buffer = buf
        t.name = name
        return t

    node = S.OperatorT()
    node.opcodeIndex = 0
    node.inputs = [0]
    node.outputs = [1]
    if op.name == "GELU":
        node.builtinOptionsType = S.BuiltinOptions.GeluOptions
        opts = S.GeluOptionsT()
        opts.approximate = attrs["approximate"] == "true"
        node.builtinOptions = opts
    sg = S.SubGraphT()
    qin, qout = quant if quant is not None else (None, None)
    sg.tensors = [tensor(b"x", 1, qin), tensor(b"y", 2, qout)]
    sg.inputs = [0]
    sg.outputs = [1]
    sg.operators = [node]
    sg.name = b"main"
    model = S.ModelT()
    model.version = 3
    model.operatorCodes = [oc]
    model.subgraphs = [sg]
    model.buffers = [S.BufferT(), S.BufferT(), S.BufferT()]
    model.description = b"actaudit single-op model"
    b = flatbuffers.Builder(1024)
    b.Finish(model.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def _runner(interp, carrier=np.float32):
    inp = interp.get_input_details()[0]["index"]
    out = interp.get_output_details()[0]["index"]
    state = {"n": 1}

    def run(arr: np.ndarray) -> np.ndarray:
        shape = arr.shape
        flat = np.ascontiguousarray(arr, dtype=carrier).reshape(-1)
        if flat.size == 0:
            return np.asarray(arr).copy()
        if flat.size != state["n"]:
            interp.resize_tensor_input(inp, [flat.size], strict=False)
            interp.allocate_tensors()
            state["n"] = flat.size
        interp.set_tensor(inp, flat)
        interp.invoke()
        return np.array(interp.get_tensor(out), copy=True).reshape(shape)

    return run


def _refuse_floats(op_name: str):
    def run(arr):
        raise EngineError(f"litert:{op_name}: this session reads quantized codes")

    return run


def _quant_runner(interp, quant):
    """run_quant(codes, in_scale, in_zero, out_scale, out_zero): the model's own scales must
    be the ones asked for (they are baked into the .tflite; the session key binds them)."""
    inq, outq = quant
    inner = _runner(interp, np.int8 if inq.kind == "int8" else np.int16)

    def run(codes, xs, xz, ys, yz):
        if (float(xs), int(xz), float(ys), int(yz)) != (inq.scale, inq.zero, outq.scale, outq.zero):
            raise EngineError("litert: quantization parameters differ from the model's")
        return inner(np.asarray(codes))

    return run


ENGINE = LiteRtEngine()
