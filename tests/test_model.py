"""actaudit model: sites found with exact counts (onnx.helper graphs for each pattern and each
near miss, torch exports), the op ORT runs after optimization, observed inputs and weighted
figures against an independent computation (our own ORT session with the site's input as an
output, mpmath), the JSON, the 80-column table, the report, one-line errors."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from helpers import optional
from helpers import required as need

onnx = need("onnx")
ort = need("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

from audit.errors import ActauditError  # noqa: E402
from audit.model import scan as scan_mod  # noqa: E402
from audit.model.audit import audit_model, scan_only  # noqa: E402
from audit.model.document import SCHEMA, document  # noqa: E402

F = TensorProto.FLOAT
SQRT2 = float(np.float32(math.sqrt(2)))
ISQRT2 = float(np.float32(1 / math.sqrt(2)))


def const(name, v, dt=np.float32):
    return helper.make_node(
        "Constant", [], [name], value=helper.make_tensor(name + "_t", _elem(dt), [], [dt(v)])
    )


def _elem(dt):
    return {np.float32: F, np.float16: TensorProto.FLOAT16, np.int64: TensorProto.INT64}[dt]


def graph(nodes, out="y", elem=F, extra_out=(), opsets=(("", 17),)):
    """A model: input x (float, shape [N]) -> nodes -> y."""
    g = helper.make_graph(
        nodes,
        "t",
        [helper.make_tensor_value_info("x", elem, ["N"])],
        [helper.make_tensor_value_info(o, elem, None) for o in (out, *extra_out)],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    m.ir_version = 9
    return m


def N(op, ins, outs, **kw):
    return helper.make_node(op, ins, outs, name=outs[0] + "_" + op, **kw)


def erf_gelu(form="torch", k=None, half=0.5, prefix=""):
    p = prefix
    if form == "torch":  # x / sqrt2 -> erf -> +1 -> x * . -> * 0.5
        return [
            const(p + "k", SQRT2 if k is None else k),
            N("Div", ["x", p + "k"], [p + "d"]),
            N("Erf", [p + "d"], [p + "e"]),
            const(p + "one", 1.0),
            N("Add", [p + "e", p + "one"], [p + "a"]),
            N("Mul", ["x", p + "a"], [p + "m"]),
            const(p + "h", half),
            N("Mul", [p + "m", p + "h"], [p + "y"]),
        ]
    if form == "paddle":  # x * RN(1/sqrt2), 0.5 * x first, then * (1 + erf)
        return [
            const(p + "k", ISQRT2 if k is None else k),
            N("Mul", [p + "k", "x"], [p + "d"]),
            N("Erf", [p + "d"], [p + "e"]),
            const(p + "one", 1.0),
            N("Add", [p + "one", p + "e"], [p + "a"]),
            const(p + "h", half),
            N("Mul", [p + "h", "x"], [p + "m"]),
            N("Mul", [p + "a", p + "m"], [p + "y"]),
        ]
    raise ValueError(form)


def tanh_gelu(cube="pow", c2=0.044715):
    k1 = float(np.float32(math.sqrt(2 / math.pi)))
    nodes = []
    if cube == "pow":
        nodes += [const("three", 3.0), N("Pow", ["x", "three"], ["x3"])]
    else:
        nodes += [N("Mul", ["x", "x"], ["x2"]), N("Mul", ["x2", "x"], ["x3"])]
    return nodes + [
        const("c2", float(np.float32(c2))),
        N("Mul", ["x3", "c2"], ["t"]),
        N("Add", ["x", "t"], ["s"]),
        const("k1", k1),
        N("Mul", ["s", "k1"], ["u"]),
        N("Tanh", ["u"], ["th"]),
        const("one", 1.0),
        N("Add", ["th", "one"], ["a"]),
        const("h", 0.5),
        N("Mul", ["x", "h"], ["xh"]),
        N("Mul", ["xh", "a"], ["y"]),
    ]


def patterns(m):
    return [(s.pattern, s.near is None) for s in scan_mod.scan(m)]


# ------------------------------------------------------------------ patterns, near misses
@pytest.mark.parametrize("form", ["torch", "paddle"])
def test_erf_gelu_forms(form):
    sites = scan_mod.scan(graph(erf_gelu(form)))
    assert [(s.pattern, s.reference) for s in sites] == [("erf-gelu", {"family": "gelu", "params": {}})]
    assert sites[0].input == "x" and sites[0].output == "y" and sites[0].dtype == "fp32"
    assert len(sites[0].nodes) == 5


def test_erf_gelu_near_misses_are_reported_never_guessed():
    # sqrt(2) rounded in float64 then float32 is RN_fp32(sqrt 2); 1.4142 is not
    near = scan_mod.scan(graph(erf_gelu("torch", k=1.4142)))
    assert [(s.pattern, s.near is not None, s.reference) for s in near] == [
        ("Erf", False, {"family": "erf", "params": {}}),
        ("erf-gelu", True, None),
    ]
    assert "1.4142" in near[1].near and "sqrt(2)" in near[1].near
    assert patterns(graph(erf_gelu("paddle", half=0.49))) == [("Erf", True), ("erf-gelu", False)]
    # one ULP off RN_fp32(1/sqrt2) is a near miss
    off = float(np.nextafter(np.float32(ISQRT2), np.float32(1)))
    assert patterns(graph(erf_gelu("paddle", k=off))) == [("Erf", True), ("erf-gelu", False)]


def test_tanh_gelu_pow_and_cube_forms_and_a_near_miss():
    for cube in ("pow", "mul"):
        sites = scan_mod.scan(graph(tanh_gelu(cube)))
        assert [(s.pattern, s.reference["approximation"]) for s in sites] == [("tanh-gelu", "gelu.tanh")]
    assert patterns(graph(tanh_gelu("pow", c2=0.0447))) == [("Tanh", True), ("tanh-gelu", False)]
    k1 = float(np.float32(math.sqrt(2 / math.pi)))
    megatron = [  # 0.5 x (1 + tanh(0.79788456 x (1 + 0.044715 x x)))
        N("Mul", ["x", "x"], ["xx"]),
        const("c2", float(np.float32(0.044715))),
        N("Mul", ["c2", "xx"], ["q"]),
        const("one", 1.0),
        N("Add", ["one", "q"], ["p"]),
        const("k1", k1),
        N("Mul", ["k1", "x"], ["kx"]),
        N("Mul", ["kx", "p"], ["u"]),
        N("Tanh", ["u"], ["th"]),
        const("one2", 1.0),
        N("Add", ["one2", "th"], ["a"]),
        N("Mul", ["x", "a"], ["xa"]),
        const("h", 0.5),
        N("Mul", ["xa", "h"], ["y"]),
    ]
    sites = scan_mod.scan(graph(megatron))
    assert [(s.pattern, s.near) for s in sites] == [("tanh-gelu", None)] and len(sites[0].nodes) == 9
    assert patterns(graph([const("c2", 0.0447) if n.output[0] == "c2" else n for n in megatron])) == [
        ("Tanh", True),
        ("tanh-gelu", False),
    ]
    pow29 = [const("three", 2.9) if n.output[0] == "three" else n for n in tanh_gelu("pow")]
    sites = scan_mod.scan(graph(pow29))
    assert [(s.pattern, s.near is None) for s in sites] == [("Tanh", True), ("tanh-gelu", False)]
    assert "Pow exponent 2.9" in sites[1].near


def test_silu_quickgelu_hardswish_mish():
    silu = [N("Sigmoid", ["x"], ["s"]), N("Mul", ["s", "x"], ["y"])]
    quick = [
        const("k", 1.702),
        N("Mul", ["x", "k"], ["kx"]),
        N("Sigmoid", ["kx"], ["s"]),
        N("Mul", ["x", "s"], ["y"]),
    ]
    quick_near = [
        const("k", 1.7),
        N("Mul", ["x", "k"], ["kx"]),
        N("Sigmoid", ["kx"], ["s"]),
        N("Mul", ["x", "s"], ["y"]),
    ]
    hs = [N("HardSigmoid", ["x"], ["h"], alpha=1 / 6, beta=0.5), N("Mul", ["x", "h"], ["y"])]
    hs_near = [N("HardSigmoid", ["x"], ["h"]), N("Mul", ["x", "h"], ["y"])]  # ONNX's alpha 0.2
    clip = [
        const("three", 3.0),
        N("Add", ["x", "three"], ["p"]),
        const("lo", 0.0),
        const("hi", 6.0),
        N("Clip", ["p", "lo", "hi"], ["c"]),
        N("Mul", ["x", "c"], ["xc"]),
        const("six", 6.0),
        N("Div", ["xc", "six"], ["y"]),
    ]
    clip_near = [n if n.output[0] != "six" else const("six", 6.5) for n in clip]
    mish = [N("Softplus", ["x"], ["sp"]), N("Tanh", ["sp"], ["t"]), N("Mul", ["x", "t"], ["y"])]
    assert patterns(graph(silu)) == [("silu", True)]
    assert scan_mod.scan(graph(quick))[0].reference == {
        "family": "silu",
        "params": {"beta": float(np.float32(1.702))},
    }
    assert patterns(graph(quick_near)) == [("Sigmoid", True), ("quick-gelu", False)]
    assert patterns(graph(hs)) == [("hardswish", True)]
    assert patterns(graph(hs_near)) == [("HardSigmoid", True), ("hardswish", False)]
    assert scan_mod.scan(graph(hs_near))[0].reference is None  # alpha 0.2: no catalog reference
    assert patterns(graph(clip)) == [("hardswish", True)]
    assert patterns(graph(clip_near)) == [("Clip(0,6)", True), ("hardswish", False)]  # its Clip stays a ReLU6
    assert patterns(graph(mish)) == [("mish", True)]


def test_softplus_and_sigmoid_forms_and_near_misses():
    H = TensorProto.FLOAT16

    def softplus(order=0, one=1.0, dt=np.float32):
        add = ["e", "one"] if order == 0 else ["one", "e"]
        return [N("Exp", ["x"], ["e"]), const("one", one, dt), N("Add", add, ["a"]), N("Log", ["a"], ["y"])]

    def sig_tanh(arg="div", outer="add", half=0.5):
        if arg == "div":
            nodes = [const("two", 2.0), N("Div", ["x", "two"], ["u"])]
        else:
            nodes = [const("k", 0.5), N("Mul", ["k", "x"], ["u"])]
        nodes.append(N("Tanh", ["u"], ["t"]))
        if outer == "add":  # 0.5 + 0.5 * tanh(x / 2)
            return nodes + [
                const("h", half),
                N("Mul", ["t", "h"], ["m"]),
                const("h2", 0.5),
                N("Add", ["h2", "m"], ["y"]),
            ]
        return nodes + [  # 0.5 * (1 + tanh(x / 2))
            const("one", 1.0),
            N("Add", ["t", "one"], ["a"]),
            const("h", half),
            N("Mul", ["h", "a"], ["y"]),
        ]

    def sig_exp(neg="neg", recip=True, one=1.0):
        nodes = (
            [N("Neg", ["x"], ["n"])] if neg == "neg" else [const("m1", -1.0), N("Mul", ["x", "m1"], ["n"])]
        )
        nodes += [N("Exp", ["n"], ["e"]), const("one", 1.0), N("Add", ["one", "e"], ["a"])]
        if recip:
            return nodes + [N("Reciprocal", ["a"], ["y"])]
        return nodes + [const("num", one), N("Div", ["num", "a"], ["y"])]

    for order in (0, 1):
        [s] = scan_mod.scan(graph(softplus(order)))
        assert (s.pattern, s.reference, s.input, s.output) == (
            "softplus",
            {"family": "softplus", "params": {}},
            "x",
            "y",
        )
        assert len(s.nodes) == 3
    assert patterns(graph(softplus(1, dt=np.float16), elem=H)) == [("softplus", True)]
    # 1 + 2^-10 in fp16: a near match; its Exp and Log stay sites of their own
    assert patterns(graph(softplus(0, 1 + 2**-10, np.float16), elem=H)) == [
        ("Exp", True),
        ("softplus", False),
        ("Log", True),
    ]
    # an Exp that another node reads is not part of a softplus
    shared = graph(softplus(), extra_out=("e",))
    assert patterns(shared) == [("Exp", True), ("Log", True)]
    for arg in ("div", "mul"):
        for outer in ("add", "mul"):
            [s] = scan_mod.scan(graph(sig_tanh(arg, outer)))
            assert (s.pattern, s.reference, s.input) == (
                "sigmoid-tanh",
                {"family": "sigmoid", "params": {}},
                "x",
            )
    near = scan_mod.scan(graph(sig_tanh("div", "add", 0.49)))
    assert [(s.pattern, s.near is None) for s in near] == [("Tanh", True), ("sigmoid-tanh", False)]
    assert "0.49" in near[1].near
    for neg in ("neg", "mul"):
        for recip in (True, False):
            [s] = scan_mod.scan(graph(sig_exp(neg, recip)))
            assert (s.pattern, s.reference, s.input) == (
                "sigmoid-exp",
                {"family": "sigmoid", "params": {}},
                "x",
            )
    ratio = [
        N("Exp", ["x"], ["e"]),
        const("one", 1.0),
        N("Add", ["e", "one"], ["a"]),
        N("Div", ["e", "a"], ["y"]),
    ]
    [s] = scan_mod.scan(graph(ratio))
    assert (s.pattern, s.reference, s.input, len(s.nodes)) == (
        "sigmoid-ratio",
        {"family": "sigmoid", "params": {}},
        "x",
        3,
    )
    assert patterns(graph(ratio, extra_out=("e",))) == [("Exp", True)]  # its Exp read elsewhere: no site
    [e, near] = scan_mod.scan(graph(sig_exp("neg", False, 2.0)))
    assert (e.pattern, near.pattern, near.reference) == ("Exp", "sigmoid-exp", None) and "2.0" in near.near


STANDARD_OPS = (
    "Sigmoid",
    "Tanh",
    "Erf",
    "Softplus",
    "Softsign",
    "Elu",
    "Selu",
    "Celu",
    "LeakyRelu",
    "Mish",
    "Exp",
    "Log",
)


def standard_chain():
    """Each standard op on the one before it, from x, then Clip(0, 6) (a ReLU6) to r6."""
    nodes, prev = [], "x"
    for i, op in enumerate(STANDARD_OPS):
        nodes.append(N(op, [prev], [f"t{i}"]))
        prev = f"t{i}"
    return nodes + [const("lo", 0.0), const("hi", 6.0), N("Clip", [prev, "lo", "hi"], ["r6"])]


def test_standard_ops_and_relu6_and_fused_ops():
    nodes = standard_chain()
    nodes += [const("lo2", -1.0), N("Clip", ["r6", "lo2", "hi"], ["cl"])]  # a clamp, not ReLU6
    nodes += [N("Gelu", ["cl"], ["g"], approximate="tanh"), N("HardSwish", ["g"], ["hw"])]
    nodes += [N("HardSigmoid", ["hw"], ["y"], alpha=1 / 6)]
    sites = scan_mod.scan(graph(nodes, opsets=(("", 20),)))
    assert [s.pattern for s in sites] == [*STANDARD_OPS, "Clip(0,6)", "Gelu", "HardSwish", "HardSigmoid"]
    assert [s.reference["family"] for s in sites][-4:] == ["relu6", "gelu", "hardswish", "hardsigmoid"]
    ms = [
        helper.make_node("Gelu", ["x"], ["a"], domain="com.microsoft", name="g"),
        helper.make_node("FastGelu", ["a"], ["b"], domain="com.microsoft", name="f"),
        helper.make_node("QuickGelu", ["b"], ["y"], domain="com.microsoft", alpha=1.0, name="q"),
    ]
    sites = scan_mod.scan(graph(ms, opsets=(("", 17), ("com.microsoft", 1))))
    assert [(s.pattern, s.reference["family"]) for s in sites] == [
        ("com.microsoft.Gelu", "gelu"),
        ("com.microsoft.FastGelu", "gelu"),
        ("com.microsoft.QuickGelu", "silu"),
    ]


def test_rnn_gate_activations():
    w = helper.make_tensor("W", F, [1, 16, 2], np.zeros(32, np.float32))
    r = helper.make_tensor("R", F, [1, 16, 4], np.zeros(64, np.float32))
    lstm = helper.make_node("LSTM", ["x", "W", "R"], ["y"], hidden_size=4, name="lstm")
    g = helper.make_graph(
        [lstm],
        "t",
        [helper.make_tensor_value_info("x", F, [3, 1, 2])],
        [helper.make_tensor_value_info("y", F, None)],
        [w, r],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    assert [(s.pattern, s.attributes["activation"]) for s in scan_mod.scan(m)] == [
        ("LSTM.f", "Sigmoid"),
        ("LSTM.g", "Tanh"),
        ("LSTM.h", "Tanh"),
    ]
    gru = helper.make_node(
        "GRU", ["x", "W", "R"], ["y"], hidden_size=4, name="gru", direction="bidirectional",
        activations=["Sigmoid", "Tanh", "HardSigmoid", "Relu"],
    )  # fmt: skip
    g2 = helper.make_graph([gru], "t", list(g.input), list(g.output), [w, r])
    sites = scan_mod.scan(helper.make_model(g2, opset_imports=[helper.make_opsetid("", 17)]))
    assert [(s.pattern, s.reference and s.reference["family"]) for s in sites] == [
        ("GRU.f.forward", "sigmoid"),
        ("GRU.g.forward", "tanh"),
        ("GRU.f.reverse", None),
        ("GRU.g.reverse", "relu"),
    ]


# ------------------------------------------------------------------ what ORT runs
def test_engine_ops_after_ort_optimization(tmp_path):
    p = tmp_path / "m.onnx"
    silu = [N("Sigmoid", ["x"], ["s"]), N("Mul", ["x", "s"], ["y"])]
    onnx.save(graph(erf_gelu("torch", prefix="g_"), out="g_y", extra_out=()), p)
    [(s, e)] = scan_only(p)
    assert (s.pattern, e.target) == ("erf-gelu", "ort:com.microsoft.Gelu")  # GeluFusion
    [(s, e)] = scan_only(p, opt_level="off")
    assert e.target is None and e.nodes == ["Div", "Erf", "Add", "Mul", "Mul"]
    onnx.save(graph(silu), p)
    [(s, e)] = scan_only(p)
    assert (s.pattern, e.target, e.attributes) == ("silu", "ort:QuickGelu[alpha=1.0]", {"alpha": 1.0})


def _gelu_model(tmp_path, rows=64, scale=2.0):
    """x [rows, 8] -> MatMul -> erf-GELU (torch form) -> y, random weights."""
    rng = np.random.default_rng(5)
    w = helper.make_tensor("W", F, [8, 8], rng.standard_normal(64).astype(np.float32))
    nodes = [N("MatMul", ["x", "W"], ["h"])] + [
        helper.make_node(n.op_type, [("h" if i == "x" else i) for i in n.input], n.output, name=n.name, **{a.name: helper.get_attribute_value(a) for a in n.attribute})
        for n in erf_gelu("torch", prefix="g_")
    ]  # fmt: skip
    g = helper.make_graph(
        nodes,
        "t",
        [helper.make_tensor_value_info("x", F, ["B", 8])],
        [helper.make_tensor_value_info("g_y", F, None)],
        [w],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    p = tmp_path / "gelu.onnx"
    onnx.save(m, p)
    batches = tmp_path / "data"
    batches.mkdir()
    for k in range(3):
        np.savez(batches / f"b{k}.npz", x=rng.standard_normal((rows, 8)).astype(np.float32) * scale)
    return p, batches


def _ulp_err_mp(got: float, x: float) -> tuple[float, bool]:
    """Independent ULP error of an fp32 result of gelu(x) (mpmath, ulp of the exact value)."""
    import mpmath

    with mpmath.workprec(120):
        X = mpmath.mpf(x)
        ex = X * mpmath.erfc(-X / mpmath.sqrt(2)) / 2  # no cancellation for x << 0
        if ex == 0:
            return (0.0 if got == 0 else math.inf), got == 0
        e = int(mpmath.floor(mpmath.log(abs(ex), 2)))
        ulp = mpmath.mpf(2) ** (max(e, -126) - 23)
        rn = float(mpmath.nint(ex / ulp) * ulp)  # RN_fp32, subnormals included
        err = float(abs(mpmath.mpf(got) - ex) / ulp)
    correct = got == rn
    return (min(err, 0.5) if correct else err), correct


def test_observed_inputs_and_weighted_figures_agree_with_an_independent_computation(tmp_path):
    p, data = _gelu_model(tmp_path)
    m = audit_model(p, data=str(data))
    [a] = m.sites
    assert a.engine.target == "ort:com.microsoft.Gelu" and a.dtype == "fp32" and a.status == "audited"
    # our own session on the original model, the site's input as an output
    model = onnx.load(p)
    model.graph.output.append(helper.make_tensor_value_info("h", F, None))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    xs = np.concatenate([sess.run(["h"], dict(np.load(f)))[0].ravel() for f in sorted(data.iterdir())])
    assert a.hist.count == xs.size == 3 * 64 * 8
    assert (a.hist.lo, a.hist.hi) == (float(xs.min()), float(xs.max()))
    vals, counts = np.unique(xs, return_counts=True)
    assert a.hist.distinct == len(vals)
    # the kernel alone on the distinct values, errors from mpmath
    gm = helper.make_model(
        helper.make_graph(
            [helper.make_node("Gelu", ["x"], ["y"], domain="com.microsoft")],
            "g",
            [helper.make_tensor_value_info("x", F, None)],
            [helper.make_tensor_value_info("y", F, None)],
        ),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
    )
    gm.ir_version = 9
    got = ort.InferenceSession(gm.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(
        None, {"x": vals}
    )[0]
    errs = [_ulp_err_mp(float(g), float(x)) for g, x in zip(got, vals)]
    u = np.array([e for e, _ in errs])
    cr = np.array([c for _, c in errs])
    w = counts / counts.sum()
    assert a.weighted["mean_ulp"] == pytest.approx(float(np.sum(w * u)), rel=1e-9, abs=1e-12)
    assert a.weighted["correctly_rounded"] == pytest.approx(float(np.sum(w[cr])), rel=1e-12)
    order = np.argsort(u, kind="stable")
    cum = np.cumsum(w[order])
    p99 = float(u[order][np.searchsorted(cum, 0.99 * cum[-1] * (1 - 1e-12))])
    assert a.weighted["p99_ulp"] == pytest.approx(p99, rel=1e-9)
    assert a.worst["observed_ulp"] == pytest.approx(float(u.max()), rel=1e-9)
    assert a.worst["observed_x"] == float(vals[int(np.argmax(u))])
    assert a.weighted["nan"] == 0 and a.weighted["mass"]["swept"] == 1.0
    doc = json.loads(json.dumps(document(m)))
    assert doc["schema"] == SCHEMA
    assert doc["data"] == {
        "source": str(data),
        "batches": 3,
        "synthetic": False,
        "digest": m.batches.digest,
        "seed": None,
        "shapes": None,
    }
    s = doc["sites"][0]
    assert s["inputs"]["count"] == 1536 and s["engine_op"] == "ort:com.microsoft.Gelu"
    assert s["identity"]["engine"] == "onnxruntime" and s["identity"]["version"] == ort.__version__
    assert s["identity"]["dispatch"] and set(s["worst"]) >= {
        "observed_ulp",
        "observed_x",
        "range_bound_ulp",
        "range_x",
    }


def test_fp16_sites_share_one_sweep_and_get_an_exhaustive_range_bound(tmp_path):
    H = TensorProto.FLOAT16
    nodes = [N("Sigmoid", ["x"], ["y"]), N("Sigmoid", ["x"], ["y2"])]
    m = graph(nodes, elem=H, extra_out=("y2",))
    p = tmp_path / "s16.onnx"
    onnx.save(m, p)
    rng = np.random.default_rng(3)
    batches = [rng.uniform(0.5, 1.0, 256).astype(np.float16) for _ in range(2)]
    for k, b in enumerate(batches):
        np.savez(tmp_path / f"b{k}.npz", x=b)
    data = tmp_path / "d"
    data.mkdir()
    for k in range(2):
        (tmp_path / f"b{k}.npz").rename(data / f"b{k}.npz")
    res = audit_model(p, data=str(data), opt_level="off")
    a, b = res.sites
    assert (a.dtype, b.dtype) == ("fp16", "fp16") and a.engine.target == "ort:Sigmoid"
    assert a.worst["range_exhaustive"] and a.worst["range_ulp"] >= a.worst["observed_ulp"]
    assert a.sweep == b.sweep == "s1" and a.max_ulp == b.max_ulp  # one sweep for both
    assert a.hist.count == 512 and not res.batches.synthetic
    # the histogram holds the fp16 values' counts exactly
    x = np.concatenate(batches)
    vals, counts = np.unique(x.view(np.uint16), return_counts=True)
    assert np.array_equal(a.hist.bits, vals.astype(np.uint64)) and np.array_equal(a.hist.counts, counts)
    # the weighted figures and the range bound, independently: our own session, mpmath
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])

    def errors(xs):
        got = sess.run(["y"], {"x": xs})[0].astype(np.float64)
        return [_sigmoid_err16(float(g), float(v)) for g, v in zip(got, xs.astype(np.float64))]

    xs = vals.view(np.float16)
    e = errors(xs)
    u = np.array([v for v, _ in e])
    w = counts / counts.sum()
    assert a.weighted["mean_ulp"] == pytest.approx(float(np.sum(w * u)), rel=1e-9)
    assert a.weighted["correctly_rounded"] == pytest.approx(float(np.sum(w[[c for _, c in e]])), rel=1e-12)
    assert a.worst["observed_ulp"] == pytest.approx(float(u.max()), rel=1e-9)
    lo, hi = float(xs.astype(np.float64).min()), float(xs.astype(np.float64).max())
    every = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    every = every[np.isfinite(every) & (every >= lo) & (every <= hi)]
    assert a.worst["range_ulp"] == pytest.approx(max(v for v, _ in errors(every)), rel=1e-9)


def _sigmoid_err16(got: float, x: float) -> tuple[float, bool]:
    """Independent ULP error of an fp16 result of sigmoid(x) (mpmath)."""
    import mpmath

    with mpmath.workprec(80):
        ex = 1 / (1 + mpmath.exp(-mpmath.mpf(x)))
        ulp = mpmath.mpf(2) ** (max(int(mpmath.floor(mpmath.log(ex, 2))), -14) - 10)
        rn = float(mpmath.nint(ex / ulp) * ulp)
        err = float(abs(mpmath.mpf(got) - ex) / ulp)
    return (min(err, 0.5) if got == rn else err), got == rn


# ------------------------------------------------------------------ torch exports
@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    import warnings

    torch = optional("torch")  # CI: a failure when missing (the README's test command installs it)
    d = tmp_path_factory.mktemp("torch")
    torch.manual_seed(0)

    class HFGelu(torch.nn.Module):
        def forward(self, x):
            return x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))

    class NewGELU(torch.nn.Module):
        def forward(self, x):
            return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))

    class Layer(torch.nn.Module):
        def __init__(self, act):
            super().__init__()
            self.up, self.act, self.down = torch.nn.Linear(8, 16), act, torch.nn.Linear(16, 8)
            self.norm = torch.nn.LayerNorm(8)

        def forward(self, x):
            return self.norm(x + self.down(self.act(self.up(x))))

    class SwiGLU(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.o = torch.nn.Linear(8, 16), torch.nn.Linear(8, 16), torch.nn.Linear(16, 8)

        def forward(self, x):
            return self.o(torch.nn.functional.silu(self.a(x)) * self.b(x))

    class Lstm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = torch.nn.LSTM(8, 8, batch_first=True)

        def forward(self, x):
            return self.l(x)[0]

    mods = {
        "bert": torch.nn.Sequential(Layer(HFGelu()), Layer(HFGelu())),
        "gpt2": torch.nn.Sequential(Layer(NewGELU()), Layer(NewGELU())),
        "swiglu": SwiGLU(),
        "hard": torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Hardswish(), torch.nn.Hardsigmoid()),
        "lstm": Lstm(),
    }
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for k, mod in mods.items():
            shape = (2, 3, 8) if k == "lstm" else (4, 8)
            out[k] = d / f"{k}.onnx"
            torch.onnx.export(
                mod.eval(), (torch.randn(*shape),), str(out[k]), dynamo=False, opset_version=17,
                input_names=["x"], dynamic_axes={"x": {0: "batch"}},
            )  # fmt: skip
        out["bert16"] = d / "bert16.onnx"
        torch.onnx.export(
            mods["bert"].half().eval(), (torch.randn(4, 8).half(),), str(out["bert16"]), dynamo=False,
            opset_version=17, input_names=["x"], dynamic_axes={"x": {0: "batch"}},
        )  # fmt: skip
    return out


def test_torch_exports_sites_and_engine_ops(exported):
    got = {
        k: [(s.pattern, e.target or "graph " + " ".join(e.nodes)) for s, e in scan_only(p)]
        for k, p in exported.items()
    }
    assert got["bert"] == [("erf-gelu", "ort:com.microsoft.Gelu")] * 2
    assert [s for s, _ in got["gpt2"]] == ["tanh-gelu"] * 2
    assert got["swiglu"] == [("silu", "ort:QuickGelu[alpha=1.0]")]
    # ORT inlines the HardSwish function into HardSigmoid and Mul
    assert got["hard"] == [
        ("HardSwish", "graph HardSigmoid Mul"),
        ("HardSigmoid", "ort:HardSigmoid[alpha=0.1666666716337204,beta=0.5]"),
    ]
    assert [s for s, _ in got["lstm"]] == ["LSTM.f", "LSTM.g", "LSTM.h"]
    sites16 = scan_mod.scan(scan_mod.load(exported["bert16"]))
    assert [(s.pattern, s.dtype) for s in sites16] == [("erf-gelu", "fp16")] * 2


def test_torch_fp16_model_runs_its_gelu_in_fp32(exported):
    m = audit_model(exported["bert16"], random=True, shapes={"x": (16, 8)}, seed=1)
    for a in m.sites:
        assert (a.site.dtype, a.dtype, a.status) == ("fp16", "fp32", "audited")
        assert any("ORT runs it in fp32" in f for f in a.findings)
        assert a.identity["op"] == "graph" and a.identity["engine"] == "onnxruntime"


def test_torch_lstm_gates_are_reported_not_audited(exported):
    m = audit_model(exported["lstm"], random=True, shapes={"x": (2, 3, 8)})
    assert [(a.site.pattern, a.status) for a in m.sites] == [
        ("LSTM.f", "not audited"),
        ("LSTM.g", "not audited"),
        ("LSTM.h", "not audited"),
    ]


# ------------------------------------------------------------------ CLI: table, JSON, report, errors
def _cli(args):
    """The real command line (audit.cli.main: errors become one line and exit 2)."""
    import contextlib
    import io

    from audit.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["model", *args])
    return type("R", (), {"exit_code": code, "output": out.getvalue() + err.getvalue()})()


def test_cli_table_fits_80_columns_json_and_report(exported, tmp_path):
    r = _cli(
        [
            str(exported["swiglu"]),
            "--random",
            "--shape",
            "x=32x8",
            "--seed",
            "2",
            "--report",
            str(tmp_path / "rep"),
        ]
    )
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert max(map(len, lines)) <= 80
    assert "synthetic" in r.output and "QuickGelu" in r.output
    html = (tmp_path / "rep" / "index.html").read_text()
    assert "<svg" in html and "QuickGelu" in html and "synthetic" in html
    r = _cli([str(exported["swiglu"]), "--random", "--shape", "x=32x8", "--json", "-"])
    doc = json.loads(r.output)
    assert doc["schema"] == SCHEMA and doc["data"]["synthetic"] is True and len(doc["sites"]) == 1


def test_cli_bad_inputs_are_one_line_and_exit_2(exported, tmp_path):
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not a model")
    bad_op = tmp_path / "badop.onnx"
    onnx.save(
        graph(
            [N("Sigmoid", ["x"], ["s"]), helper.make_node("NoSuchOp", ["s"], ["y"], domain="x.y")],
            opsets=(("", 17), ("x.y", 1)),
        ),
        bad_op,
    )
    d = tmp_path / "d.npz"
    np.savez(d, z=np.zeros((4, 8), np.float32))
    d2 = tmp_path / "d2.npz"
    np.savez(d2, x=np.zeros((4, 7), np.float32))
    d3 = tmp_path / "d3.npz"
    np.savez(d3, x=np.zeros((4, 8), np.float64))
    sw = str(exported["swiglu"])
    cases = [
        ([str(junk), "--random", "--shape", "x=4x8"], "not an ONNX model"),
        ([str(bad_op), "--random", "--shape", "x=4"], "refused the model"),
        ([sw, "--data", str(d)], "missing x"),
        ([sw, "--data", str(d2)], "has shape 4x7"),
        ([sw, "--data", str(d3)], "float64"),
        ([sw, "--random", "--shape", "y=4x8"], "missing x"),
        ([sw, "--random", "--shape", "x=4x8", "--engine", "openvino"], "openvino"),
        ([sw, "--random", "--shape", "x=4x8", "--opt-level", "max"], "--opt-level"),
        ([sw], "--data"),
    ]
    for args, want in cases:
        r = _cli(args)
        assert r.exit_code == 2, (args, r.output)
        err = r.output.strip().splitlines()
        assert len(err) == 1 and want in err[0], (args, r.output)


def test_api_errors_are_actaudit_errors(tmp_path):
    with pytest.raises(ActauditError, match="no such file"):
        audit_model(tmp_path / "none.onnx", random=True, shapes={"x": (2,)})


# ------------------------------------------------------------------ the gate: [[model]]
def test_gate_model_entry_binds_model_data_and_engine_version(tmp_path):
    from audit.gate.check import baseline_command, check_command, load_spec

    p, data = _gelu_model(tmp_path, rows=16, scale=0.25)
    spec = tmp_path / "actaudit.toml"
    spec.write_text(
        'baseline = "base.json"\n[[model]]\nname = "gelu"\npath = "gelu.onnx"\ndata = "data"\n'
        "tolerance = { weighted_p99_ulp = 8, weighted_nan = 0 }\n"
    )
    path, n, broken = baseline_command(spec)
    assert n == 1 and broken == []
    base = json.loads(path.read_text())
    [(key, e)] = base["entries"].items()
    assert key == "model/gelu/s1" and e["kind"] == "model"
    assert (
        e["identity"]["engine_version"] == ort.__version__
        and e["identity"]["engine_op"] == "ort:com.microsoft.Gelu"
    )
    _, changes = check_command(spec)
    assert [c.status for c in changes] == ["ok"]
    # other data: the digest differs
    np.savez(data / "b0.npz", x=np.full((16, 8), 0.125, np.float32))
    _, changes = check_command(spec)
    assert changes[0].status == "fail" and any("data_digest" in t for t in changes[0].messages)
    baseline_command(spec)
    # another engine version in the baseline
    doc = json.loads(path.read_text())
    doc["entries"]["model/gelu/s1"]["identity"]["engine_version"] = "0.0.1"
    path.write_text(json.dumps(doc))
    _, changes = check_command(spec)
    assert changes[0].status == "fail" and any("engine_version" in t for t in changes[0].messages)
    baseline_command(spec)
    # another model (other weights): its sha256 differs
    m = onnx.load(p)
    m.graph.initializer[0].raw_data = np.zeros(64, np.float32).tobytes()
    onnx.save(m, p)
    _, changes = check_command(spec)
    assert changes[0].status == "fail" and any("model_sha256" in t for t in changes[0].messages)
    # unknown keys are refused at every level
    spec.write_text('[[model]]\nname = "g"\npath = "gelu.onnx"\ndata = "data"\ntolerance = { p99 = 1 }\n')
    with pytest.raises(ActauditError, match="tolerance.p99' is unknown"):
        load_spec(spec)
    spec.write_text('[[model]]\nname = "g"\npath = "gelu.onnx"\ndata = "random"\n')
    with pytest.raises(ActauditError, match="shape"):
        load_spec(spec)


def test_decomposed_sites_with_one_structure_share_one_sweep(tmp_path):
    """Two tanh-GELUs left decomposed (optimizations off; at 'all' ORT fuses this form into
    FastGelu), with their own tensor names: one subgraph structure, one sweep."""
    a = tanh_gelu("pow")
    b = [
        helper.make_node(n.op_type, [("y" if i == "x" else "b_" + i) for i in n.input], ["b_" + o for o in n.output],
                         name="b_" + n.name, **{t.name: helper.get_attribute_value(t) for t in n.attribute})
        for n in a
    ]  # fmt: skip
    p = tmp_path / "two.onnx"
    onnx.save(graph(a + b, out="b_y"), p)
    m = audit_model(p, random=True, shapes={"x": (64,)}, seed=4, opt_level="off")
    s1, s2 = m.sites
    assert (s1.site.pattern, s2.site.pattern) == ("tanh-gelu", "tanh-gelu")
    assert s1.engine.target is None and s1.engine.nodes == s2.engine.nodes
    from audit.model.optimized import structure

    assert structure(s1.engine.subgraph) == structure(s2.engine.subgraph)
    assert s1.sweep == s2.sweep == "s1"  # one sweep for both
    assert s1.status == s2.status == "audited" and s1.hist.lo != s2.hist.lo
    assert scan_only(p)[0][1].target == "ort:FastGelu"


def test_engine_not_installed_is_one_line(tmp_path, monkeypatch):
    import sys

    p = tmp_path / "s.onnx"
    onnx.save(graph([N("Sigmoid", ["x"], ["y"])]), p)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    r = _cli([str(p), "--random", "--shape", "x=4"])
    assert r.exit_code == 2 and "onnxruntime is not installed" in r.output


def test_conv_sites_in_orts_nchwc_layout(tmp_path):
    """ORT's NCHWc transformer renames the tensors, pads the channels and fuses a Conv's
    activation: the site's inputs are read back through a ReorderOutput (the real channels
    only), and a fused activation says where it went."""
    rng = np.random.default_rng(0)
    w = helper.make_tensor("W", F, [4, 3, 3, 3], rng.standard_normal(108).astype(np.float32))
    w2 = helper.make_tensor("W2", F, [4, 4, 3, 3], rng.standard_normal(144).astype(np.float32))
    nodes = [
        helper.make_node("Conv", ["x", "W"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["c"], ["s"], name="sig"),
        helper.make_node("Mul", ["c", "s"], ["y"], name="mul"),
        helper.make_node("Conv", ["y", "W2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("HardSigmoid", ["c2"], ["z"], name="hs", alpha=1 / 6),
    ]
    g = helper.make_graph(
        nodes, "t", [helper.make_tensor_value_info("x", F, [1, 3, 8, 8])], [helper.make_tensor_value_info("z", F, None)], [w, w2]
    )  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    p = tmp_path / "conv.onnx"
    onnx.save(m, p)
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.savez(tmp_path / "b.npz", x=x)
    res = audit_model(p, data=str(tmp_path / "b.npz"))
    silu, hs = res.sites
    assert (silu.site.pattern, silu.engine.target, silu.status) == (
        "silu",
        "ort:QuickGelu[alpha=1.0]",
        "audited",
    )
    own = onnx.load(p)
    own.graph.output.append(helper.make_tensor_value_info("c", F, None))
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    c = ort.InferenceSession(own.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(
        ["c"], {"x": x}
    )[0]
    assert silu.hist.count == c.size == 256  # the padded channels are not counted
    assert silu.hist.lo == pytest.approx(float(c.min()), rel=1e-5) and silu.hist.hi == pytest.approx(
        float(c.max()), rel=1e-5
    )
    if hs.status != "audited":  # where ORT fused it into its NCHWc Conv
        assert "fused into" in hs.findings[-1] and "activation=HardSigmoid" in hs.findings[-1]


def test_fp32_inputs_binned_to_bf16_are_counted_per_bf16_value(tmp_path):
    from audit.model.capture import Histogram
    from audit.numbers.formats import get_format

    rng = np.random.default_rng(9)
    x = (rng.standard_normal(5000) * 3).astype(np.float32)
    h = Histogram("fp32", "bf16")
    h.add(x[:2000])
    h.add(np.append(x[2000:], [np.nan, np.inf]).astype(np.float32))
    h.finish()
    bf = get_format("bf16")
    r = bf.round(x.astype(np.float64)).astype(np.float32)
    vals, counts = np.unique(r.view(np.uint32), return_counts=True)
    assert np.array_equal(h.bits, vals.astype(np.uint64)) and np.array_equal(h.counts, counts)
    assert h.nonfinite == {"nan": 1, "inf": 1, "-inf": 0} and h.total == 5002
    assert (h.lo, h.hi) == (float(x.min()), float(x.max()))
    p, data = _gelu_model(tmp_path, rows=16)
    a = audit_model(p, data=str(data), bin="bf16").sites[0]
    assert a.status == "audited" and a.hist.binned == "bf16" and a.dtype == "fp32"
    assert a.hist.distinct < a.hist.count


def test_every_table_fits_80_columns_and_the_json_has_the_documented_keys(tmp_path):
    from reports.model_table import table

    nodes = standard_chain()
    nodes += [N("HardSigmoid", ["r6"], ["h"]), N("Mul", ["r6", "h"], ["y"])]  # a near-match hardswish
    p = tmp_path / "std.onnx"
    onnx.save(graph(nodes, opsets=(("", 20),)), p)
    doc = document(audit_model(p, random=True, shapes={"x": (64,)}, seed=1))
    assert len(doc["sites"]) == 15
    assert [s["status"] for s in doc["sites"]][-2:] == ["not audited", "near match"]  # HardSigmoid(0.2)
    text = table(json.loads(json.dumps(doc)))
    assert max(len(x) for x in text.splitlines()) <= 80
    assert set(doc) == {"schema", "actaudit", "model", "data", "engine", "sites"}
    assert set(doc["model"]) == {"path", "sha256", "opset", "producer"}
    assert set(doc["engine"]) == {"name", "version", "opt_level", "dtype", "compute", "dispatch", "bin"}
    assert set(doc["sites"][0]) == {
        "id", "nodes", "pattern", "input", "output", "reference", "engine_op", "engine_nodes", "attributes", "dtype", "graph_dtype",
        "status", "sweep", "inputs", "weighted", "worst", "safe", "max_ulp", "findings", "identity",
    }  # fmt: skip
    assert set(doc["sites"][0]["inputs"]) == {"count", "min", "max", "distinct", "nonfinite", "binned"}


def test_a_narrow_fp32_range_is_swept_whole(tmp_path):
    p = tmp_path / "s.onnx"
    onnx.save(graph([N("Sigmoid", ["x"], ["y"])]), p)
    x = np.random.default_rng(2).uniform(1.0, 1.0625, 4096).astype(np.float32)
    np.savez(tmp_path / "b.npz", x=x)
    [a] = audit_model(p, data=str(tmp_path / "b.npz")).sites
    assert a.worst["range_exhaustive"] and a.worst["range_ulp"] >= a.worst["observed_ulp"]
    assert 1.0 <= a.worst["range_x"] <= 1.0625
    doc = document(audit_model(p, random=True, shapes={"x": (64,)}))
    w = doc["sites"][0]["worst"]  # N(0, 1) inputs: a range of about 2^31 fp32 values, sampled
    assert (
        w["range_exhaustive"] is False and w["range_bound_ulp"] is None and w["range_sampled_ulp"] is not None
    )


def test_gate_model_entry_with_no_audited_site_fails(tmp_path):
    from audit.gate.check import BaselineRefused, baseline_command

    w = helper.make_tensor("W", F, [1, 16, 2], np.zeros(32, np.float32))
    r = helper.make_tensor("R", F, [1, 16, 4], np.zeros(64, np.float32))
    g = helper.make_graph(
        [helper.make_node("LSTM", ["x", "W", "R"], ["y"], hidden_size=4, name="lstm")], "t",
        [helper.make_tensor_value_info("x", F, [3, 1, 2])], [helper.make_tensor_value_info("y", F, None)], [w, r],
    )  # fmt: skip
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "lstm.onnx")
    spec = tmp_path / "actaudit.toml"
    spec.write_text('[[model]]\nname = "l"\npath = "lstm.onnx"\ndata = "random"\nshape = { x = [3, 1, 2] }\n')
    with pytest.raises(BaselineRefused) as e:
        baseline_command(spec, out=tmp_path / "b.json")
    assert e.value.broken == ["model/l: no audited site to gate (zero sites prove nothing)"]
