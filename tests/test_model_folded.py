"""A site whose last node ORT folds into the op after it: an fp16 MatMul feeding a decomposed
erf-GELU (Div, Erf, Add, Mul, Mul by 0.5) and another MatMul.  ORT runs the fp16 graph in
fp32 (its inserted casts) and MatMulScaleFusion folds the GELU's * 0.5 into the next MatMul
(``FusedMatMul`` alpha=0.5): the site's output tensor is gone from the optimized graph.  The
site used to be skipped ("its output is not in ORT's optimized graph"); it is audited (its
kept nodes, then * 0.5) and its effect cut at the fused op's input, said so.  Checked
against our own ORT sessions (the prefix in fp32 as ORT runs it, the suffix as a plain
MatMul) and mpmath's GELU."""

from __future__ import annotations

import math

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from test_model_effect import cr32  # noqa: E402

from audit.model.audit import audit_model  # noqa: E402


def gelu(x):
    import mpmath

    return x / 2 * (1 + mpmath.erf(x / mpmath.sqrt(2)))


def _weights():
    rng = np.random.default_rng(0)
    return rng.standard_normal((8, 16)).astype(np.float16), (rng.standard_normal((16, 4)) * 0.25).astype(
        np.float16
    )


def _model(tmp_path):
    w1, w2 = _weights()

    def c(name, v):
        return numpy_helper.from_array(np.array(v, np.float16), name)

    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["h"], name="mm1"),
        helper.make_node("Div", ["h", "sqrt2"], ["d"], name="div"),
        helper.make_node("Erf", ["d"], ["e"], name="erf"),
        helper.make_node("Add", ["e", "one"], ["a"], name="add"),
        helper.make_node("Mul", ["h", "a"], ["m"], name="mul"),
        helper.make_node("Mul", ["m", "half"], ["g"], name="mul_1"),
        helper.make_node("MatMul", ["g", "W2"], ["y"], name="mm2"),
    ]
    graph = helper.make_graph(
        nodes, "g16", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["B", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, ["B", 4])],
        [numpy_helper.from_array(w1, "W1"), numpy_helper.from_array(w2, "W2"), c("sqrt2", math.sqrt(2)),
         c("one", 1.0), c("half", 0.5)],
    )  # fmt: skip
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    p = tmp_path / "g16.onnx"
    onnx.save(m, p)
    x = (np.random.default_rng(1).standard_normal((48, 8))).astype(np.float16)
    np.savez(tmp_path / "b.npz", x=x)
    return p, m, x


def _sess(m, **opts):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    for k, v in opts.items():
        setattr(so, k, v)
    return ort.InferenceSession(m.SerializeToString() if not isinstance(m, str) else m, so,
                                providers=["CPUExecutionProvider"])  # fmt: skip


def _fp32_graph(nodes, inputs, outputs, inits):
    g = helper.make_graph(
        nodes,
        "s",
        [helper.make_tensor_value_info(i, e, None) for i, e in inputs],
        [helper.make_tensor_value_info(o, e, None) for o, e in outputs],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return _sess(m)


def test_a_gelu_whose_last_mul_ort_folds_into_the_next_matmul_is_audited_and_cut(tmp_path):
    p, m, x = _model(tmp_path)
    # the premise, from ORT itself: no tensor g (nor its cast) in the optimized graph, and a
    # FusedMatMul with alpha 0.5 reading the GELU's x * (1 + erf(x / sqrt2))
    opt_path = str(tmp_path / "opt.onnx")
    _sess(m, optimized_model_filepath=opt_path)
    opt = onnx.load(opt_path)
    names = {o for n in opt.graph.node for o in n.output}
    assert not {"g", "InsertedPrecisionFreeCast_g"} & names
    [fm] = [n for n in opt.graph.node if n.op_type == "FusedMatMul"]
    assert helper.get_attribute_value(next(a for a in fm.attribute if a.name == "alpha")) == 0.5

    r = audit_model(p, data=str(tmp_path / "b.npz"), effect=True)
    [a] = r.sites
    assert a.site.pattern == "erf-gelu" and a.status == "audited", a.findings
    assert any("folded the site's last * 0.5 into" in f for f in a.findings)
    # its inputs: h as ORT runs it, in fp32 (x and W1 cast to fp32, an fp32 MatMul)
    w1, w2 = _weights()
    F, H = TensorProto.FLOAT, TensorProto.FLOAT16
    pre = _fp32_graph(
        [helper.make_node("Cast", ["x"], ["x32"], to=F), helper.make_node("MatMul", ["x32", "W1"], ["h"])],
        [("x", H)],
        [("h", F)],
        [numpy_helper.from_array(w1.astype(np.float32), "W1")],
    )
    h = pre.run(None, {"x": x})[0]
    assert a.dtype == "fp32" and a.hist.count == h.size
    assert (a.hist.lo, a.hist.hi) == (float(h.min()), float(h.max()))
    # the effect: the model's output as run, against the suffix fed RN_fp32(gelu(h))
    post = _fp32_graph(
        [helper.make_node("MatMul", ["g", "W2"], ["y32"]), helper.make_node("Cast", ["y32"], ["y"], to=H)],
        [("g", F)],
        [("y", H)],
        [numpy_helper.from_array(w2.astype(np.float32), "W2")],
    )
    y = _sess(m).run(None, {"x": x})[0].astype(np.float64)
    y_cr = post.run(None, {"g": cr32(gelu, h)})[0].astype(np.float64)
    d = np.abs(y_cr - y)
    e = r.effect["sites"]["s1"]
    assert not r.effect["skipped"]
    assert any("cut at that fused op's input" in n and "fed 2.0 x RN(f(x))" in n for n in e["notes"])
    got = e["outputs"]["y"]
    assert d.max() > 0  # the GELU's errors move the output
    assert got["max_abs"] == float(d.max())
    assert got["mean_abs"] == pytest.approx(float(d.mean()), rel=1e-12)


def test_a_folded_product_that_is_not_a_power_of_two_is_reported_with_its_reason(tmp_path):
    """x * clip(x + 3, 0, 6) * RN(1/6) in fp16 before a MatMul: ORT folds the * RN(1/6) into
    the MatMul's alpha, which scales the product, so no tensor ever holds the site's output;
    the site is not audited, and the reason names the fused op and its alpha."""
    rng = np.random.default_rng(2)

    def c(name, v):
        return numpy_helper.from_array(np.array(v, np.float16), name)

    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["h"], name="mm1"),
        helper.make_node("Add", ["h", "three"], ["p"], name="add"),
        helper.make_node("Clip", ["p", "zero", "six"], ["q"], name="clip"),
        helper.make_node("Mul", ["h", "q"], ["m"], name="mul"),
        helper.make_node("Mul", ["m", "sixth"], ["g"], name="mul_1"),
        helper.make_node("MatMul", ["g", "W2"], ["y"], name="mm2"),
    ]
    graph = helper.make_graph(
        nodes, "hs16", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["B", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, ["B", 4])],
        [numpy_helper.from_array(rng.standard_normal((8, 16)).astype(np.float16), "W1"),
         numpy_helper.from_array(rng.standard_normal((16, 4)).astype(np.float16), "W2"),
         c("three", 3.0), c("zero", 0.0), c("six", 6.0), c("sixth", 1 / 6)],
    )  # fmt: skip
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    p = tmp_path / "hs16.onnx"
    onnx.save(m, p)
    opt_path = str(tmp_path / "opt.onnx")
    _sess(m, optimized_model_filepath=opt_path)
    [fm] = [n for n in onnx.load(opt_path).graph.node if n.op_type == "FusedMatMul"]
    alpha = helper.get_attribute_value(next(a for a in fm.attribute if a.name == "alpha"))
    assert alpha == float(np.float16(1 / 6))  # the premise: ORT folded the * RN(1/6)
    np.savez(tmp_path / "b.npz", x=rng.standard_normal((16, 8)).astype(np.float16))
    r = audit_model(p, data=str(tmp_path / "b.npz"), effect=True)
    [a] = r.sites
    assert a.site.pattern == "hardswish" and a.status == "not audited"
    why = r.effect["skipped"]["s1"]
    assert f"FusedMatMul {fm.name} (alpha={alpha!r}, not a power of two" in why
    assert why in a.findings[-1]


def test_identify_follows_the_folded_site_in_the_format_ort_runs_it(tmp_path):
    """``identify model:FILE#SITE`` of the folded GELU: ORT's kept nodes and the * 0.5, in
    fp32 (the format ORT runs the fp16 graph in; it used to build the subgraph in fp16 and
    fail).  The best match's count of identical outputs, checked against our own fp32
    session of those nodes (constants as ORT casts them) and the candidate on the same
    inputs."""
    from audit.compare.identify import inputs
    from audit.model.site_identify import identify_target
    from audit.numbers.formats import get_format
    from audit.targets.registry import catalog

    p, _, _ = _model(tmp_path)
    fast = {"window": 256, "samples": 4096}
    r = identify_target(f"model:{p}#s1", **fast)
    assert r.dtype == "fp32" and r.reference == "gelu"
    best = r.matches[0]
    F = TensorProto.FLOAT

    def c(name, v):
        return numpy_helper.from_array(np.array(np.float16(v), np.float32), name)

    s = _fp32_graph(
        [
            helper.make_node("Div", ["x", "sqrt2"], ["d"]),
            helper.make_node("Erf", ["d"], ["e"]),
            helper.make_node("Add", ["e", "one"], ["a"]),
            helper.make_node("Mul", ["x", "a"], ["m"]),
            helper.make_node("Mul", ["m", "half"], ["y"]),
        ],
        [("x", F)],
        [("y", F)],
        [c("sqrt2", math.sqrt(2)), c("one", 1.0), c("half", 0.5)],
    )
    f32 = get_format("fp32")
    x, _ = inputs(f32, fast["window"], fast["samples"])
    got = s.run(None, {"x": x.astype(np.float32)})[0]
    want = catalog()[best.candidate].evaluate(x, f32, f32).astype(np.float32)
    assert best.count == x.size
    assert best.identical == int(np.count_nonzero(got.view(np.uint32) == want.view(np.uint32)))
