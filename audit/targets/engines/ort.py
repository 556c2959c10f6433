"""``ort:OP``: ONNX Runtime's CPU execution provider on a single-op model.

The model is built in memory with ``onnx.helper``: one node, its input a graph input of no
fixed shape (never an initializer, so never constant-folded), one output.  The session runs
on the CPU execution provider with one intra-op thread and one inter-op thread, sequential
execution, and graph optimizations off (``ORT_DISABLE_ALL``) unless ``-p ort.optimize=``
``basic|extended|all`` asks for them (to audit the fused path).  ORT still inserts the casts
its partitioner needs where the CPU provider has no kernel for a type (fp16 on most
activations): the fp16 result is then fp32 kernel between casts, reported as it is.

Quantized ops (QLinearSigmoid, QLinearLeakyRelu) read int8/uint8 codes with the scale and
zero point of ``--dtype int8:scale=S,zero=Z`` (the same for input and output) and are
audited by :mod:`audit.measure.quant` (:func:`quant_candidate`).

Dispatch: MLAS picks its kernels from CPUID at start-up; :func:`dispatch` reads the flags
of /proc/cpuinfo (x86) and names the path MLAS takes for the float activations: ``avx512f``
(AVX-512F present), ``avx2-fma`` (AVX2 and FMA), ``sse2`` otherwise (or the machine name).
"""

from __future__ import annotations

import functools
import platform

import numpy as np

from audit.errors import BadOptionError
from audit.targets.engines.base import Attr, Engine, EngineError, Op, Session, SessionKey, one_line

MS = "com.microsoft"
FLOATS = ("fp32", "fp16")  # probed on onnxruntime 1.32 (CPU EP): see docs/reference/engines.md
F64 = ("fp32", "fp16", "fp64")  # ops whose CPU kernels also take double

_ELEM = {  # actaudit format -> onnx TensorProto element type name
    "fp32": "FLOAT",
    "fp16": "FLOAT16",
    "bf16": "BFLOAT16",
    "fp64": "DOUBLE",
    "fp8_e4m3": "FLOAT8E4M3FN",
    "fp8_e5m2": "FLOAT8E5M2",
    "fp8_e4m3fnuz": "FLOAT8E4M3FNUZ",
    "fp8_e5m2fnuz": "FLOAT8E5M2FNUZ",
    "int8": "INT8",
    "uint8": "UINT8",
}


def _pinned(name: str, default: float, why: str) -> Attr:
    """An attribute the reference cannot follow: only its default is audited."""
    return Attr(name, float, default, choices=(default,), doc=why)


_SELU_A = 1.67326319217681884765625  # ONNX's defaults (float32 values)
_SELU_G = 1.05070102214813232421875
_SIXTH = float(np.float32(1 / 6))

_OPS = [
    Op(
        "Gelu",
        "gelu",
        FLOATS,
        (Attr("approximate", str, "none", ("none", "tanh"), doc="'tanh': the tanh approximation"),),
        note="ai.onnx opset 20",
    ),
    Op("Sigmoid", "sigmoid", F64),
    Op("Tanh", "tanh", F64),
    Op("Erf", "erf", FLOATS),
    Op("Exp", "exp", F64),
    Op("Elu", "elu", FLOATS, (Attr("alpha", float, 1.0, ref_param="alpha"),)),
    Op(
        "Selu",
        "selu",
        FLOATS,
        (
            _pinned("alpha", _SELU_A, "selu's reference fixes alpha"),
            _pinned("gamma", _SELU_G, "selu's reference fixes gamma"),
        ),
    ),
    Op("Celu", "celu", ("fp32",), (Attr("alpha", float, 1.0, ref_param="alpha"),)),
    Op("Softplus", "softplus", FLOATS),
    Op("Softsign", "softsign", FLOATS),
    Op(
        "HardSigmoid",
        "hardsigmoid",
        FLOATS,
        (
            _pinned(
                "alpha",
                _SIXTH,
                "hardsigmoid is relu6(x + 3) / 6: alpha = 1/6 (ONNX's default 0.2 is another function)",
            ),
            _pinned("beta", 0.5, "hardsigmoid's reference fixes beta = 0.5"),
        ),
        note="alpha defaults to float32(1/6), not ONNX's 0.2, to compute the reference's function",
    ),
    Op("HardSwish", "hardswish", FLOATS),
    Op("Mish", "mish", FLOATS, note="ai.onnx opset 18"),
    Op("LeakyRelu", "leaky_relu", FLOATS, (Attr("alpha", float, 0.01, ref_param="alpha"),)),
    Op("Relu", "relu", F64),
    Op(
        "ThresholdedRelu",
        "relu",
        FLOATS,
        (_pinned("alpha", 0.0, "ThresholdedRelu(alpha = 0) is relu; other thresholds have no reference"),),
        note="audited at alpha = 0 (relu); ONNX's default is 1",
    ),
    Op("com.microsoft.Gelu", "gelu", FLOATS, domain=MS, node="Gelu", note="com.microsoft Gelu (erf)"),
    Op("FastGelu", "gelu", F64, domain=MS, note="com.microsoft FastGelu (tanh approximation), no bias"),
    Op("BiasGelu", "gelu", FLOATS, domain=MS, note="com.microsoft BiasGelu with a zero bias"),
    Op(
        "QuickGelu",
        "silu",
        F64,
        (Attr("alpha", float, 1.702, ref_param="beta"),),
        domain=MS,
        note="x * sigmoid(alpha x): silu with beta = alpha",
    ),
    Op("QLinearSigmoid", "sigmoid", ("int8", "uint8"), domain=MS, quantized=True),
    Op(
        "QLinearLeakyRelu",
        "leaky_relu",
        ("int8", "uint8"),
        (Attr("alpha", float, 0.01, ref_param="alpha"),),
        domain=MS,
        quantized=True,
    ),
]
# ai.onnx's Gelu is 'Gelu', com.microsoft's 'com.microsoft.Gelu'; the other names are unique
OPS = {o.name: o for o in _OPS}


class OrtEngine(Engine):
    prefix = "ort"
    name = "onnxruntime"
    module = "onnxruntime"
    ops = OPS
    options = (
        Attr(
            "optimize",
            str,
            "off",
            ("off", "basic", "extended", "all"),
            doc="graph optimization level: off (ORT_DISABLE_ALL, the default) to all (ORT_ENABLE_ALL)",
        ),
    )

    def version(self) -> str:
        return self.load().__version__

    def dispatch(self) -> str:
        return dispatch()

    def build(self, key: SessionKey) -> Session:
        ort = self.load()
        onnx = _need_onnx()
        op = OPS[key.op]
        model = make_model(op, key.attrs, key.dtype)
        so = session_options(ort, key.opts["optimize"])
        import os
        import tempfile

        with tempfile.TemporaryDirectory(prefix="actaudit-ort-") as tmp:
            # the graph ORT will run (its inserted casts, function expansions, fusions)
            so.optimized_model_filepath = os.path.join(tmp, "run.onnx")
            try:
                sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
            except Exception as e:
                raise EngineError(
                    f"ort:{key.op}: onnxruntime {ort.__version__} refused the {key.dtype} model: {one_line(e)}"
                ) from None
            try:
                ran = onnx.load(so.optimized_model_filepath).graph.node
                nodes = [_node_text(n) for n in ran]
            except Exception:  # the file is ORT's; its absence only costs the description
                nodes = []
        if op.quantized:
            out = Session(_refuse_floats(op), precision_text(op, key.dtype, nodes), {"graph": nodes})
            out.run_quant = _quant_runner(sess)  # type: ignore[attr-defined]
            return out
        run = _runner(sess, op, key.dtype)
        return Session(run, precision_text(op, key.dtype, nodes), {"graph": nodes})


_CAST_TO: dict[int | None, str] = {1: "fp32", 10: "fp16", 16: "bf16", 11: "fp64"}


def session_options(ort, level: str):
    """ORT's session options as actaudit runs every session: one thread, sequential, quiet,
    at graph optimization ``level`` (off, basic, extended, all)."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.log_severity_level = 3
    so.graph_optimization_level = {
        "off": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }[level]
    return so


def _node_text(n) -> str:
    if n.op_type == "Cast":
        to = next((a.i for a in n.attribute if a.name == "to"), None)
        return f"Cast(->{_CAST_TO.get(to, to)})"
    return n.op_type


def precision_text(op: Op, dtype: str, nodes: list) -> str:
    """What ORT runs, in words: the dtype itself where the graph is the op alone, else the
    nodes it runs ('fp32 kernel between casts', a function body, a fusion)."""
    if nodes == [op.node_type]:
        return dtype
    if (
        len(nodes) == 3
        and nodes[1] == op.node_type
        and nodes[0].startswith("Cast")
        and nodes[2].startswith("Cast")
    ):
        return f"{nodes[0][7:-1]} kernel between casts"
    if not nodes:
        return f"{dtype} (graph not reported)"
    return "graph " + " ".join(nodes)


def _need_onnx():
    from audit.targets.engines.callables import _need

    return _need("onnx", "engines")


def make_model(op: Op, attrs: dict, dtype: str):
    """The single-op ONNX model of ``op`` with ``attrs`` on a ``dtype`` tensor of any shape."""
    onnx = _need_onnx()
    from onnx import TensorProto, helper

    elem = getattr(TensorProto, _ELEM[dtype])
    x = helper.make_tensor_value_info("x", elem, None)
    y = helper.make_tensor_value_info("y", elem, None)
    inputs = ["x"]
    inits: list = []
    graph_inputs = [x]
    if op.name == "BiasGelu":
        graph_inputs.append(helper.make_tensor_value_info("bias", elem, None))
        inputs.append("bias")
    if op.quantized:
        # x_scale, x_zero_point, y_scale, y_zero_point as graph inputs (never folded)
        for n, t in (("xs", TensorProto.FLOAT), ("xz", elem), ("ys", TensorProto.FLOAT), ("yz", elem)):
            graph_inputs.append(helper.make_tensor_value_info(n, t, []))
        inputs += ["xs", "xz", "ys", "yz"]
    kw = {k: v for k, v in attrs.items()}
    node = helper.make_node(op.node_type, inputs, ["y"], domain=op.domain or None, **kw)
    graph = helper.make_graph([node], f"actaudit_{op.node_type}", graph_inputs, [y], initializer=inits)
    opsets = [helper.make_opsetid("", 20)]
    if op.domain:
        opsets.append(helper.make_opsetid(op.domain, 1))
    model = helper.make_model(graph, opset_imports=opsets, producer_name="actaudit")
    model.ir_version = min(model.ir_version, 10)
    del onnx
    return model


def _refuse_floats(op: Op):
    def run(arr):
        raise BadOptionError(f"ort:{op.name} reads quantized codes: --dtype int8:scale=S,zero=Z")

    return run


def _quant_runner(sess):
    def run(codes, xs, xz, ys, yz):
        return sess.run(
            None,
            {
                "x": codes,
                "xs": np.array(xs, np.float32),
                "xz": np.array(xz, codes.dtype),
                "ys": np.array(ys, np.float32),
                "yz": np.array(yz, codes.dtype),
            },
        )[0]

    return run


def _runner(sess, op: Op, dtype: str):
    np_dt = {"fp32": np.float32, "fp16": np.float16, "fp64": np.float64}.get(dtype)
    if np_dt is None:
        raise BadOptionError(f"ort:{op.name}: no numpy carrier for {dtype}")

    if op.name == "BiasGelu":

        def run_bias(arr):
            a = np.require(arr, dtype=np_dt, requirements="C")
            shp = a.shape
            a1 = a.reshape(1) if a.ndim == 0 else a
            bias = np.zeros(a1.shape[-1:], np_dt)
            return sess.run(None, {"x": a1, "bias": bias})[0].reshape(shp)

        return run_bias

    def run(arr):
        # np.require keeps a 0-d array 0-d (np.ascontiguousarray would make it 1-d)
        return sess.run(None, {"x": np.require(arr, dtype=np_dt, requirements="C")})[0]

    return run


# ---------------------------------------------------------------------- dispatch
@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset:
    """The CPU's feature flags (/proc/cpuinfo; empty where it cannot be read)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def dispatch(flags: frozenset | None = None) -> str:
    """The code path MLAS takes for its float activation kernels on this machine: MLAS uses
    its AVX-512F kernels where the CPU has AVX-512F, its AVX2/FMA3 kernels where it has AVX2
    and FMA, SSE2 otherwise (platform.cpp: MlasPlatform's CPUID checks)."""
    m = platform.machine().lower()
    if m not in ("x86_64", "amd64", "i386", "i686"):
        return m or "unknown"
    f = cpu_flags() if flags is None else flags
    if "avx512f" in f:
        return "avx512f"
    if "avx2" in f and "fma" in f:
        return "avx2-fma"
    return "sse2"


ENGINE = OrtEngine()
