"""Every op x dtype x attribute value x option value the engines declare, against a session
built here (issue 40, item 3).

The matrix is read from the engines' own declarations (``Engine.ops``, ``Op.dtypes``,
``Op.attrs``, ``Engine.options``), so an op, dtype or option added later is in it without an
edit here; what each case expects comes from a session this file builds itself with the
engine's own API, never through the adapter:

* ONNX Runtime: a model made with ``onnx.helper`` and an ``InferenceSession`` whose graph
  optimization level is set here (BiasGelu with a zero bias input);
* OpenVINO: a model made with the opset-13 API, compiled for CPU with one thread and the
  ``INFERENCE_PRECISION_HINT`` set here (none for ``default``);
* LiteRT: an ``Interpreter`` with the op resolver chosen here (``BUILTIN`` applies XNNPACK,
  ``BUILTIN_WITHOUT_DEFAULT_DELEGATES``, ``BUILTIN_REF``), on the .tflite of
  ``litert.make_model`` (whose flatbuffer tests/test_engines_openvino_litert.py reads back
  with LiteRT's schema reader: one op on a graph input, its options written).

Each case: the adapter's candidate evaluated on every finite input of fp16 and bf16, or
4,099 fp32/fp64 inputs (normal draws, zeros, subnormals, the largest values), equals the
own session bit for bit (signed zeros and NaN included). Cases at an option's default run in
the fast suite; the others (every other optimization level, precision hint and resolver)
are ``slow`` (.ci/run's slow stage). Besides: each attribute and option changes the session
key; the attributes that change the function change the result; a pinned attribute refuses
other values; each OpenVINO precision hint is the one the compiled model reports.
"""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest
from helpers import required as need

from audit.errors import ActauditError
from audit.numbers.formats import get_format
from audit.targets import engines
from audit.targets.engines import base

ort = need("onnxruntime")
onnx = need("onnx")
ov = need("openvino")
litert = need("ai_edge_litert.interpreter")

# a value other than the default for each free attribute (each has a reference parameter)
OTHER = {"alpha": 0.5, "beta": 2.0}


def attr_values(a: base.Attr) -> tuple:
    if a.choices:
        return a.choices
    return (a.default, OTHER[a.name])


def matrix():
    """(engine prefix, op, dtype, {attr: value}, {option: value}) for every declared case."""
    for eng in engines.engines():
        for op in eng.ops.values():
            if op.quantized:  # integer codes: tests/test_engines_ort.py's quantized tests
                continue
            for dtype in op.dtypes:
                names = [a.name for a in op.attrs]
                for combo in itertools.product(*(attr_values(a) for a in op.attrs)):
                    for opt in eng.options:
                        for v in opt.choices:
                            yield eng.prefix, op.name, dtype, dict(zip(names, combo)), {opt.name: v}


def case_id(c):
    prefix, op, dtype, attrs, opts = c
    a = ",".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in attrs.items())
    o = ",".join(f"{k}={v}" for k, v in opts.items())
    return f"{prefix}:{op}[{a}]-{dtype}-{o}"


def is_default(c) -> bool:
    eng = engines.get_engine(c[0])
    return all(eng.option(k).default == v for k, v in c[4].items())


CASES = list(matrix())
PARAMS = [pytest.param(c, id=case_id(c), marks=() if is_default(c) else pytest.mark.slow) for c in CASES]


# ------------------------------------------------------------------------- inputs
def finite_all(np_dtype, uint) -> np.ndarray:
    v = np.arange(1 << 16, dtype=np.uint32).astype(uint).view(np_dtype)
    return v[np.isfinite(v.astype(np.float32))]


def inputs(dtype: str) -> np.ndarray:
    """The inputs of a case, in the storage dtype."""
    if dtype == "fp16":
        return finite_all(np.float16, np.uint16)
    if dtype == "bf16":
        return finite_all(ml_dtypes.bfloat16, np.uint16)
    g = np.random.default_rng(40)
    t = np.float32 if dtype == "fp32" else np.float64
    fi = np.finfo(t)
    x = np.concatenate(
        [
            g.standard_normal(4000) * 6,
            [0.0, -0.0, fi.smallest_subnormal, -fi.smallest_subnormal, fi.tiny, fi.max, -fi.max],
            np.linspace(-20, 20, 92),
        ]
    )
    return x.astype(t)


def same(got, want) -> bool:
    """Equal values, NaN where NaN, the same sign of zero."""
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return (
        g.shape == w.shape
        and bool(np.array_equal(g, w, equal_nan=True))
        and bool(np.array_equal(np.signbit(g[g == 0]), np.signbit(w[w == 0])))
    )


# -------------------------------------------------------------- sessions built here
def own_ort(op_name, dtype, attrs, opts):
    from onnx import TensorProto, helper

    op = engines.get_engine("ort").ops[op_name]
    elem = {"fp32": TensorProto.FLOAT, "fp16": TensorProto.FLOAT16, "fp64": TensorProto.DOUBLE}[dtype]
    ins = [helper.make_tensor_value_info("x", elem, None)]
    names = ["x"]
    if op_name == "BiasGelu":
        ins.append(helper.make_tensor_value_info("b", elem, None))
        names.append("b")
    node_type = "Gelu" if op_name == "com.microsoft.Gelu" else op_name
    domain = "com.microsoft" if op_name in ("com.microsoft.Gelu", "FastGelu", "BiasGelu", "QuickGelu") else ""
    assert domain == op.domain  # (the declaration agrees with ONNX's namespaces)
    node = helper.make_node(node_type, names, ["y"], domain=domain or None, **attrs)
    g = helper.make_graph([node], "own", ins, [helper.make_tensor_value_info("y", elem, None)])
    sets = [helper.make_opsetid("", 20)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    m = helper.make_model(g, opset_imports=sets)
    m.ir_version = 10
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = {
        "off": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }[opts["optimize"]]
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    if op_name == "BiasGelu":
        return lambda a: s.run(None, {"x": a, "b": np.zeros(a.shape[-1:], a.dtype)})[0]
    return lambda a: s.run(None, {"x": a})[0]


OV_NODES = {
    "Gelu": lambda ops, p, t, a: ops.gelu(p, a["approximation_mode"]),
    "Sigmoid": lambda ops, p, t, a: ops.sigmoid(p),
    "Tanh": lambda ops, p, t, a: ops.tanh(p),
    "Erf": lambda ops, p, t, a: ops.erf(p),
    "Exp": lambda ops, p, t, a: ops.exp(p),
    "Swish": lambda ops, p, t, a: ops.swish(p, ops.convert(ops.constant(np.float32(a["beta"])), t)),
    "Mish": lambda ops, p, t, a: ops.mish(p),
    "HSwish": lambda ops, p, t, a: ops.hswish(p),
    "HSigmoid": lambda ops, p, t, a: ops.hsigmoid(p),
    "SoftPlus": lambda ops, p, t, a: ops.softplus(p),
    "Elu": lambda ops, p, t, a: ops.elu(p, a["alpha"]),
}
OV_HINT = {"fp32": "f32", "fp16": "f16", "bf16": "bf16"}


def own_ov_compiled(op_name, dtype, attrs, opts):
    from openvino import opset13 as ops

    t = {"fp32": ov.Type.f32, "fp16": ov.Type.f16, "bf16": ov.Type.bf16}[dtype]
    p = ops.parameter(ov.PartialShape([-1]), t)
    m = ov.Model([OV_NODES[op_name](ops, p, t, attrs)], [p])
    cfg = {"INFERENCE_NUM_THREADS": 1}
    if opts["precision"] != "default":
        cfg["INFERENCE_PRECISION_HINT"] = OV_HINT[opts["precision"]]
    return ov.Core().compile_model(m, "CPU", cfg)


def own_ov(op_name, dtype, attrs, opts):
    compiled = own_ov_compiled(op_name, dtype, attrs, opts)
    req = compiled.create_infer_request()

    def run(a):
        if dtype == "bf16":
            t = ov.Tensor(ov.Type.bf16, ov.Shape([a.size]))
            t.data.view(np.uint16)[:] = a.view(np.uint16)
            req.infer([t])
            return req.get_output_tensor(0).data.view(np.uint16).copy().view(ml_dtypes.bfloat16)
        req.infer([a])
        return np.array(req.get_output_tensor(0).data, copy=True)

    return run


def own_litert(op_name, dtype, attrs, opts):
    from audit.targets.engines.litert import OPS, make_model

    kind = {
        "xnnpack": litert.OpResolverType.BUILTIN,
        "builtin": litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
        "reference": litert.OpResolverType.BUILTIN_REF,
    }[opts["resolver"]]
    content = make_model(OPS[op_name], attrs, dtype, None)
    interp = litert.Interpreter(model_content=content, num_threads=1, experimental_op_resolver_type=kind)
    interp.allocate_tensors()  # (where a resolver has no kernel for the op, it says so here)

    def run(a):
        i = interp.get_input_details()[0]
        interp.resize_tensor_input(i["index"], [a.size])
        interp.allocate_tensors()
        interp.set_tensor(i["index"], a)
        interp.invoke()
        return interp.get_tensor(interp.get_output_details()[0]["index"]).copy()

    return run


OWN = {"ort": own_ort, "openvino": own_ov, "litert": own_litert}


def candidate(prefix, op, dtype, attrs, opts, cache=None):
    eng = engines.get_engine(prefix)
    given = {**attrs, **{f"{prefix}.{k}": v for k, v in opts.items()}}
    (c,) = base.engine_candidates(eng, f"{prefix}:{op}", get_format(dtype), given, cache=cache)
    return c


# ---------------------------------------------------------------------------- tests
def test_the_matrix_is_every_declared_case():
    """The cases are the product of what each engine declares (nothing dropped), and every
    declared op and dtype is in it at least once."""
    for eng in engines.engines():
        n = sum(
            len(op.dtypes)
            * int(np.prod([len(attr_values(a)) for a in op.attrs]))
            * int(np.prod([len(o.choices) for o in eng.options]))
            for op in eng.ops.values()
            if not op.quantized
        )
        assert sum(1 for c in CASES if c[0] == eng.prefix) == n
        ops = {c[1] for c in CASES if c[0] == eng.prefix}
        assert ops == {o.name for o in eng.ops.values() if not o.quantized}


@pytest.mark.parametrize("case", PARAMS)
def test_every_op_dtype_attribute_and_option_is_the_engines_own_session(case):
    prefix, op, dtype, attrs, opts = case
    try:
        own = OWN[prefix](op, dtype, attrs, opts)
    except Exception as e:  # the engine has no kernel for it (LiteRT's reference ELU): refused
        with pytest.raises(base.EngineError, match="refused the model"):
            candidate(prefix, op, dtype, attrs, opts)
        assert prefix == "litert" and "Didn't find op" in str(e)  # (the one such case here)
        return
    c = candidate(prefix, op, dtype, attrs, opts)
    x = inputs(dtype)
    fmt = get_format(dtype)
    got = c.evaluate(x.astype(np.float64), fmt, fmt)
    want = own(x)
    assert same(got, want), case_id(case)
    assert c.identity["op"] == op and c.identity["dtype"] == dtype
    assert c.identity["attributes"] == {
        a.name: attrs.get(a.name, a.default) for a in engines.get_engine(prefix).ops[op].attrs
    }
    assert c.identity["options"] == opts


# the attributes that change the function computed (the others are pinned to one value)
FUNCTION_ATTRS = [
    (prefix, op.name, a.name)
    for prefix in ("ort", "openvino", "litert")
    for op in engines.get_engine(prefix).ops.values()
    for a in op.attrs
    if len(attr_values(a)) > 1 and not op.quantized
]


@pytest.mark.parametrize("prefix,op,attr", FUNCTION_ATTRS, ids=lambda v: str(v))
def test_each_attribute_changes_the_key_and_the_result(prefix, op, attr):
    eng = engines.get_engine(prefix)
    o = eng.ops[op]
    a = o.attr(attr)
    dtype = o.dtypes[0]
    cache = base.SessionCache()
    v0, v1 = attr_values(a)[:2]
    c0 = candidate(prefix, op, dtype, {attr: v0}, {}, cache)
    c1 = candidate(prefix, op, dtype, {attr: v1}, {}, cache)
    assert c0.session_key != c1.session_key and cache.builds == 2
    assert dict(c1.session_key.attributes)[attr] == v1
    x = inputs(dtype)
    fmt = get_format(dtype)
    y0, y1 = (c.evaluate(x.astype(np.float64), fmt, fmt) for c in (c0, c1))
    assert not same(y0, y1)  # the attribute reached the engine
    if a.ref_param is not None:  # and the oracle: the reference parameter follows it
        assert c1.reference_params({})[a.ref_param] == v1
        assert c0.reference_params({})[a.ref_param] == v0


PINNED = [
    (prefix, op.name, a)
    for prefix in ("ort", "openvino", "litert")
    for op in engines.get_engine(prefix).ops.values()
    for a in op.attrs
    if len(attr_values(a)) == 1
]


@pytest.mark.parametrize("prefix,op,a", PINNED, ids=lambda v: v.name if isinstance(v, base.Attr) else str(v))
def test_a_pinned_attribute_refuses_other_values(prefix, op, a):
    dtype = engines.get_engine(prefix).ops[op].dtypes[0]
    with pytest.raises(ActauditError, match=f"'{a.name}' is one of"):
        candidate(prefix, op, dtype, {a.name: a.default * 2 + 0.25}, {})


@pytest.mark.parametrize("prefix", ["ort", "openvino", "litert"])
def test_each_option_value_is_its_own_session_key(prefix):
    eng = engines.get_engine(prefix)
    (opt,) = eng.options
    op = next(iter(eng.ops.values()))
    cache = base.SessionCache()
    keys = {
        candidate(prefix, op.name, op.dtypes[0], {}, {opt.name: v}, cache).session_key for v in opt.choices
    }
    assert len(keys) == len(opt.choices) == cache.builds
    assert {dict(k.options)[opt.name] for k in keys} == set(opt.choices)
    # and each dtype is its own key
    dkeys = {candidate(prefix, op.name, d, {}, {}, cache).session_key for d in op.dtypes}
    assert len(dkeys) == len(op.dtypes)


OV_HINTS = [
    pytest.param(
        op, dtype, hint, id=f"{op}-{dtype}-{hint}", marks=() if dtype == "fp32" else pytest.mark.slow
    )
    for op in engines.get_engine("openvino").ops
    for dtype in engines.get_engine("openvino").ops[op].dtypes
    for hint in ("default", "fp32", "fp16", "bf16")
]


@pytest.mark.parametrize("op,dtype,hint", OV_HINTS)
def test_openvino_precision_hint_is_what_the_compiled_model_reports(op, dtype, hint):
    attrs = {a.name: a.default for a in engines.get_engine("openvino").ops[op].attrs}
    c = candidate("openvino", op, dtype, {}, {"precision": hint})
    reported = str(
        own_ov_compiled(op, dtype, attrs, {"precision": hint}).get_property("INFERENCE_PRECISION_HINT")
    )
    short = next(
        s for long, s in (("bfloat16", "bf16"), ("float16", "f16"), ("float32", "f32")) if long in reported
    )
    # (the plugin may run another precision than the hint asks: on a CPU with AVX512_BF16 and
    # no FP16 arithmetic, OpenVINO 2026.4 reports bf16 for an f16 hint; the result says what ran)
    assert c.identity["precision"].startswith(f"hint {short},"), (c.identity["precision"], reported)
