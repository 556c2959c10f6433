"""actaudit model --effect: each site's output replaced by its correct rounding, checked
against an independent computation (the test's own ORT sessions for the prefix and the
suffix, correct roundings from mpmath)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

from audit.model.audit import audit_model  # noqa: E402

H = TensorProto.FLOAT


def rn32(v) -> np.float32:
    """RN_fp32 of an mpmath value (ties to even), decided against the neighbours exactly."""
    import mpmath

    a = np.float32(float(v))
    best = None
    for c in (np.nextafter(a, np.float32(-np.inf)), a, np.nextafter(a, np.float32(np.inf))):
        if not np.isfinite(c):
            continue
        d = abs(mpmath.mpf(float(c)) - v)
        key = (d, int(np.array(c).view(np.uint32)) & 1)
        if best is None or key < best[0]:
            best = (key, c)
    return best[1]


def cr32(fn, xs: np.ndarray) -> np.ndarray:
    import mpmath

    mpmath.mp.prec = 120
    cache = {}
    out = np.empty(xs.shape, np.float32)
    for i, x in np.ndenumerate(xs):
        k = float(x)
        if k not in cache:
            cache[k] = rn32(fn(mpmath.mpf(k)))
        out[i] = cache[k]
    return out


def sig(x):
    import mpmath

    return 1 / (1 + mpmath.exp(-x))


def tanh(x):
    import mpmath

    return mpmath.tanh(x)


def _weights():
    rng = np.random.default_rng(11)
    w1 = (rng.standard_normal((8, 8)) * 1.5).astype(np.float32)
    w2 = rng.standard_normal((8, 4)).astype(np.float32)
    return w1, w2


def _model(tmp_path):
    """x [B, 8] fp32 -> MatMul W1 -> h -> Sigmoid -> s -> MatMul W2 -> z -> Tanh -> t [B, 4]."""
    w1, w2 = _weights()
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["h"], name="mm1"),
        helper.make_node("Sigmoid", ["h"], ["s"], name="sig"),
        helper.make_node("MatMul", ["s", "W2"], ["z"], name="mm2"),
        helper.make_node("Tanh", ["z"], ["t"], name="tanh"),
    ]
    g = helper.make_graph(
        nodes,
        "t",
        [helper.make_tensor_value_info("x", H, ["B", 8])],
        [helper.make_tensor_value_info("t", H, ["B", 4])],
        [onnx.numpy_helper.from_array(w1, "W1")],
    )
    g.initializer.append(onnx.numpy_helper.from_array(w2, "W2"))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    rng = np.random.default_rng(3)
    d = tmp_path / "data"
    d.mkdir()
    xs = []
    for k in range(2):
        x = (rng.standard_normal((64, 8)) * 2).astype(np.float32)
        np.savez(d / f"b{k}.npz", x=x)
        xs.append(x)
    return p, d, m, xs


def _sess(m, outputs=None):
    if outputs:
        m2 = onnx.ModelProto()
        m2.CopyFrom(m)
        for o in outputs:
            m2.graph.output.append(helper.make_empty_tensor_value_info(o))
        m = m2
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _suffix(nodes, inp, extra_inits):
    g = helper.make_graph(
        nodes,
        "s",
        [helper.make_tensor_value_info(inp, H, None)],
        [helper.make_tensor_value_info("t", H, None)],
        extra_inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return _sess(m)


def _figures(base, new):
    b, v = base.astype(np.float64), new.astype(np.float64)
    d = np.abs(v - b)
    nz = b != 0
    return {
        "max_abs": float(d.max()),
        "mean_abs": float(d.mean()),
        "max_rel": float((d[nz] / np.abs(b[nz])).max()),
        "rows": int(np.count_nonzero(np.argmax(b, -1) != np.argmax(v, -1))),
    }


def test_effect_of_each_site_and_of_all_agrees_with_an_independent_computation(tmp_path):
    p, d, m, xs = _model(tmp_path)
    _, w2 = _weights()
    full = _sess(m, ["h", "z"])
    after_s = _suffix(
        [
            helper.make_node("MatMul", ["s", "W2"], ["z"]),
            helper.make_node("Tanh", ["z"], ["t"]),
        ],
        "s",
        [onnx.numpy_helper.from_array(w2, "W2")],
    )
    after_s_z = _suffix(
        [helper.make_node("MatMul", ["s", "W2"], ["t"])], "s", [onnx.numpy_helper.from_array(w2, "W2")]
    )
    want = {"s1": [], "s2": [], "joint": []}
    for x in xs:
        t0, h, z = full.run(["t", "h", "z"], {"x": x})
        s_cr = cr32(sig, h)
        want["s1"].append((t0, after_s.run(None, {"s": s_cr})[0]))
        want["s2"].append((t0, cr32(tanh, z)))
        z_j = after_s_z.run(None, {"s": s_cr})[0]  # z computed from the correct sigmoid
        want["joint"].append((t0, cr32(tanh, z_j)))
    r = audit_model(p, data=str(d), effect=True)
    e = r.effect
    assert sorted(e["sites"]) == ["s1", "s2"] and not e["skipped"]
    for key in ("s1", "s2", "joint"):
        got = (e["joint"] if key == "joint" else e["sites"][key])["outputs"]["t"]
        base = np.concatenate([a for a, _ in want[key]])
        new = np.concatenate([b for _, b in want[key]])
        f = _figures(base, new)
        assert f["max_abs"] > 0, key  # the test model's sites change its output
        assert got["max_abs"] == f["max_abs"], key
        assert got["max_rel"] == pytest.approx(f["max_rel"], rel=1e-12), key
        assert got["mean_abs"] == pytest.approx(f["mean_abs"], rel=1e-12), key
        assert got["argmax_changed"] == f["rows"] / base.shape[0], key
    # ranked by the largest argmax change, then by max_abs relative to the output's magnitude
    fs = {
        k: _figures(np.concatenate([a for a, _ in want[k]]), np.concatenate([b for _, b in want[k]]))
        for k in ("s1", "s2")
    }
    order = sorted(fs, key=lambda k: (fs[k]["rows"], fs[k]["max_abs"]), reverse=True)
    assert e["ranking"] == order


def _cli(args):
    import contextlib
    import io

    from audit.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, out.getvalue() + err.getvalue()


def test_effect_table_fits_80_columns_and_json_keys(tmp_path):
    import json

    p, d, _, _ = _model(tmp_path)
    code, out = _cli(["model", str(p), "--data", str(d), "--effect"])
    assert code == 0, out
    assert max(map(len, out.splitlines())) <= 80
    assert "effect on the outputs" in out and "all       2 sites" in out
    code, out = _cli(["model", str(p), "--data", str(d), "--effect", "--json", "-"])
    doc = json.loads(out)
    assert set(doc["effect"]) == {"ranking", "joint", "skipped", "method"}
    for s in doc["sites"]:
        o = s["effect"]["outputs"]["t"]
        assert {"max_abs", "max_rel", "mean_abs", "argmax_changed"} <= set(o)
    assert sorted(s["effect"]["rank"] for s in doc["sites"]) == [1, 2]
    code, out = _cli(["model", str(p), "--data", str(d), "--json", "-"])
    assert "effect" not in json.loads(out)  # only with --effect
    code, out = _cli(["model", str(p), "--data", str(d), "--effect", "--report", str(tmp_path / "r")])
    html = (tmp_path / "r" / "index.html").read_text()
    assert code == 0 and "id='effect-ranking'" in html and "<td>2 sites</td>" in html
    assert "all (2 sites)" in (tmp_path / "r" / "effect-ranking.svg").read_text()


def test_a_site_fused_into_its_producer_is_cut_at_the_fused_ops_output(tmp_path):
    """Gemm + Sigmoid: ORT fuses them into FusedGemm(activation=Sigmoid); the effect is cut
    at the fused op's output, its input read from the unoptimized graph, and said so."""
    rng = np.random.default_rng(2)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Gemm", ["x", "W", "b"], ["p"]), helper.make_node("Sigmoid", ["p"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", H, [32, 8])],
        [helper.make_tensor_value_info("y", H, [32, 4])],
        [onnx.numpy_helper.from_array(w, "W"), onnx.numpy_helper.from_array(b, "b")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    p = tmp_path / "fused.onnx"
    onnx.save(m, p)
    x = (rng.standard_normal((32, 8)) * 3).astype(np.float32)
    np.savez(tmp_path / "b.npz", x=x)
    r = audit_model(p, data=str(tmp_path / "b.npz"), effect=True)
    assert "FusedGemm" in r.sites[0].engine.op  # the premise: ORT fused the Sigmoid
    e = r.effect["sites"]["s1"]
    assert any("fused into" in n and "cut at the fused op's output" in n for n in e["notes"])
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    pre = _sess_opts(m, so, ["p"]).run(["p"], {"x": x})[0]  # the activation's input, unfused
    y = _sess(m).run(None, {"x": x})[0]  # the model as run (fused)
    cr = cr32(sig, pre)
    d = np.abs(cr.astype(np.float64) - y.astype(np.float64))
    got = e["outputs"]["y"]
    assert d.max() > 0  # ORT's fused sigmoid is not correctly rounded everywhere
    assert got["max_abs"] == float(d.max()) and got["mean_abs"] == pytest.approx(float(d.mean()), rel=1e-12)


def _sess_opts(m, so, outputs):
    m2 = onnx.ModelProto()
    m2.CopyFrom(m)
    for o in outputs:
        m2.graph.output.append(helper.make_empty_tensor_value_info(o))
    return ort.InferenceSession(m2.SerializeToString(), so, providers=["CPUExecutionProvider"])


def test_a_selu_site_is_replaced_by_the_correct_rounding_of_selus_own_constants(tmp_path):
    """Selu's attributes (ONNX's fp32 defaults) are the site's parameters, not the catalog
    reference's (its exact constants): the effect used to fail on them (a TypeError)."""
    import mpmath

    g = helper.make_graph(
        [helper.make_node("Selu", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", H, [16, 4])],
        [helper.make_tensor_value_info("y", H, [16, 4])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    p = tmp_path / "selu.onnx"
    onnx.save(m, p)
    x = (np.random.default_rng(4).standard_normal((16, 4)) * 3).astype(np.float32)
    np.savez(tmp_path / "b.npz", x=x)
    r = audit_model(p, data=str(tmp_path / "b.npz"), effect=True)
    scale = mpmath.mpf("1.0507009873554804934193349852946")
    alpha = mpmath.mpf("1.6732632423543772848170429916717")
    cr = cr32(lambda v: scale * (v if v > 0 else alpha * mpmath.expm1(v)), x)
    y = _sess(m).run(None, {"x": x})[0]
    d = np.abs(cr.astype(np.float64) - y.astype(np.float64))
    got = r.effect["sites"]["s1"]["outputs"]["y"]
    assert got["max_abs"] == float(d.max()) and got["mean_abs"] == pytest.approx(float(d.mean()), rel=1e-12)


def cr16(fn, xs: np.ndarray) -> np.ndarray:
    """RN_fp16 of fn at each (float32) x, decided against the neighbours exactly (mpmath)."""
    import mpmath

    mpmath.mp.prec = 120
    out = np.empty(xs.shape, np.float16)
    for i, x in np.ndenumerate(xs):
        v = fn(mpmath.mpf(float(x)))
        a = np.float16(float(v))
        cands = [np.nextafter(a, np.float16(-np.inf)), a, np.nextafter(a, np.float16(np.inf))]
        out[i] = min(
            (c for c in cands if np.isfinite(c)),
            key=lambda c: (abs(mpmath.mpf(float(c)) - v), int(np.array(c).view(np.uint16)) & 1),
        )
    return out


def test_an_fp16_site_fused_into_an_fp32_gemm_reads_its_input_as_the_kernel_computes_it(tmp_path):
    """fp16 Gemm + Sigmoid: ORT runs it in fp32 (its inserted casts) as FusedGemm(activation=
    Sigmoid), then casts to fp16.  The site's x is the fp32 Gemm's result, not the fp16 Gemm
    of the graph without optimizations (which rounds to fp16 first): checked against our own
    fp32 Gemm session and mpmath's RN_fp16(sigmoid(x))."""
    H16 = TensorProto.FLOAT16
    rng = np.random.default_rng(6)
    w = rng.standard_normal((8, 4)).astype(np.float16)
    b = rng.standard_normal(4).astype(np.float16)
    g = helper.make_graph(
        [helper.make_node("Gemm", ["x", "W", "b"], ["p"]), helper.make_node("Sigmoid", ["p"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", H16, [32, 8])],
        [helper.make_tensor_value_info("y", H16, [32, 4])],
        [onnx.numpy_helper.from_array(w, "W"), onnx.numpy_helper.from_array(b, "b")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    p = tmp_path / "fused16.onnx"
    onnx.save(m, p)
    x = (rng.standard_normal((32, 8)) * 2).astype(np.float16)
    np.savez(tmp_path / "b.npz", x=x)
    r = audit_model(p, data=str(tmp_path / "b.npz"), effect=True)
    assert "FusedGemm" in r.sites[0].engine.op  # the premise: ORT fused the Sigmoid
    e = r.effect["sites"]["s1"]
    assert any("without its activation (Gemm)" in n for n in e["notes"])
    g32 = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["x32"], to=H), helper.make_node("Gemm", ["x32", "W", "b"], ["p"])],
        "g32",
        [helper.make_tensor_value_info("x", H16, None)],
        [helper.make_tensor_value_info("p", H, None)],
        [onnx.numpy_helper.from_array(w.astype(np.float32), "W"),
         onnx.numpy_helper.from_array(b.astype(np.float32), "b")],
    )  # fmt: skip
    m32 = helper.make_model(g32, opset_imports=[helper.make_opsetid("", 17)])
    m32.ir_version = 9
    pre = _sess(m32).run(None, {"x": x})[0]
    y = _sess(m).run(None, {"x": x})[0]
    d = np.abs(cr16(sig, pre).astype(np.float64) - y.astype(np.float64))
    got = e["outputs"]["y"]
    assert got["max_abs"] == float(d.max()) and got["mean_abs"] == pytest.approx(float(d.mean()), rel=1e-12)
