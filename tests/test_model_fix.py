"""actaudit model --fix: an fp16 erf-GELU whose 1 + erf cancels, rewritten to ORT's GELU
kernel; an fp16 written-out softplus whose Exp overflows, rewritten to ORT's Softplus;
the written model's site and output are better on the data, measured by the tool and here
(our own ORT sessions of both models, mpmath for the correctly rounded activation).  And
the rule: a rewrite that is worse on the data (an fp64 softplus, whose only kernel is
fp32's) is not written."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from helpers import optional


def _export(module, dtype, path):
    """A ``module()`` made after seeding torch, in ``dtype``, exported at opset 17 with a
    dynamic batch axis."""
    import torch

    torch.manual_seed(0)
    net = module().to(dtype).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            net, (torch.randn(4, 8).to(dtype),), str(path), dynamo=False, opset_version=17,
            input_names=["x"], dynamic_axes={"x": {0: "batch"}},
        )  # fmt: skip
    return path


@pytest.fixture(scope="module")
def gelu16(tmp_path_factory):
    torch = optional("torch")
    pytest.importorskip("onnxruntime")

    class HFGelu(torch.nn.Module):
        def forward(self, x):
            return x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), HFGelu(), torch.nn.Linear(16, 4)).half().eval()
    p = tmp_path_factory.mktemp("fix") / "gelu16.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            net, (torch.randn(4, 8).half(),), str(p), dynamo=False, opset_version=17,
            input_names=["x"], dynamic_axes={"x": {0: "batch"}},
        )  # fmt: skip
    return p


def _cli(args):
    import contextlib
    import io

    from audit.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(["model", *args])
    return code, out.getvalue()


def _gelu(v):
    import mpmath

    return v / 2 * (1 + mpmath.erf(v / mpmath.sqrt(2)))


def _softplus(v):
    import mpmath

    return mpmath.log1p(mpmath.exp(v))


def _cr16_gelu(x: np.ndarray, f=_gelu, dt=np.float16) -> np.ndarray:
    """RN_dt(f(x)) elementwise (fp16 by default), f evaluated by mpmath at 80 bits."""
    import mpmath

    mpmath.mp.prec = 80
    out = np.empty(x.shape, dt)
    bits = np.uint16 if dt == np.float16 else np.uint32
    for i, v in np.ndenumerate(x.astype(np.float64)):
        g = f(mpmath.mpf(v))
        a = dt(float(g))  # then the nearest of its neighbours, decided exactly
        cands = [c for c in (np.nextafter(a, dt(-np.inf)), a, np.nextafter(a, dt(np.inf)))]
        out[i] = min(cands, key=lambda c: (abs(mpmath.mpf(float(c)) - g), int(np.array(c).view(bits)) & 1))
    return out


def test_fix_rewrites_a_cancelling_fp16_erf_gelu_and_both_site_and_output_improve(gelu16, tmp_path):
    import onnx
    import onnxruntime as ort

    from audit.model import scan as scan_mod

    out = tmp_path / "fixed.onnx"
    args = [str(gelu16), "--random", "--shape", "x=64x8", "--seed", "1", "--batches", "2"]
    code, text = _cli([*args, "--fix", str(out), "--json", "-"])
    assert code == 0, text
    doc = json.loads(text)
    assert doc["schema"] == "actaudit.model-fix/1" and "rewrites" not in doc
    assert set(doc) == {"schema", "fix", "written", "before", "after"}
    [r] = doc["fix"]
    assert set(r) == {"site", "rewrite", "kept", "why", "before", "after"}
    assert r["rewrite"] == "gelu-kernel" and r["kept"] and doc["written"] == str(out)
    b, a = r["before"]["weighted"], r["after"]["weighted"]
    assert a["p99_ulp"] < b["p99_ulp"] and a["mean_ulp"] < b["mean_ulp"]  # the tool's figures
    # the table: 80 columns; with --report, the page of the model before with its fix results
    code, text = _cli([*args, "--fix", str(tmp_path / "f2.onnx"), "--report", str(tmp_path / "rep")])
    assert code == 0 and max(map(len, text.splitlines())) <= 80 and "gelu-kernel" in text
    html = (tmp_path / "rep" / "index.html").read_text()
    assert (
        "id='fix-outputs'" in html
        and "gelu-kernel" in html
        and (tmp_path / "rep" / "effect-ranking.svg").exists()
    )
    # independently: the site's fp16 output and the model's output, in both models
    [site] = scan_mod.scan(scan_mod.load(gelu16))
    orig, fixed = onnx.load(gelu16), onnx.load(out)
    yname = orig.graph.output[0].name

    def sess(m, extra):
        m2 = onnx.ModelProto()
        m2.CopyFrom(m)
        for t in extra:
            m2.graph.output.append(onnx.helper.make_empty_tensor_value_info(t))
        so = ort.SessionOptions()  # as written: ORT's optimizer would run fp16 Gemm+GELU in fp32
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        return ort.InferenceSession(m2.SerializeToString(), so, providers=["CPUExecutionProvider"])

    s0 = sess(orig, [site.input, site.output])
    x32, y32 = "actaudit_fix_s1_x32", "actaudit_fix_s1_y32"  # the rewrite's fp32 tensors (documented)
    s1 = sess(fixed, [site.output, x32, y32])
    suffix = tmp_path / "suffix.onnx"
    onnx.utils.extract_model(str(gelu16), str(suffix), [site.output], [yname])
    ss = ort.InferenceSession(str(suffix), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(7).standard_normal((64, 8)).astype(np.float16)
    z0, h, g0 = s0.run([yname, site.input, site.output], {"x": x})
    z1, g1, a1, b1 = s1.run([yname, site.output, x32, y32], {"x": x})
    # the site: the fp32 GELU kernel of the rewrite against mpmath, at most 4 ULP (fp32)
    import mpmath

    mpmath.mp.prec = 80
    worst = 0.0
    for v, got in zip(a1.ravel().astype(np.float64), b1.ravel().astype(np.float64)):
        g = mpmath.mpf(v) / 2 * (1 + mpmath.erf(mpmath.mpf(v) / mpmath.sqrt(2)))
        ulp = float(np.spacing(np.float32(abs(float(g))))) if g != 0 else float(np.spacing(np.float32(0)))
        worst = max(worst, float(abs(mpmath.mpf(got) - g)) / ulp)
    assert worst <= 16, worst
    # the original site's fp16 results: no closer to RN_fp16(gelu(x)) than the rewritten one's
    cr = _cr16_gelu(h)
    assert np.count_nonzero(g1 != cr) <= np.count_nonzero(g0 != cr)
    # the output: closer to the model whose GELU is correctly rounded (our own suffix session)
    ideal = ss.run(None, {site.output: cr})[0].astype(np.float64)
    d0 = np.abs(z0.astype(np.float64) - ideal)
    d1 = np.abs(z1.astype(np.float64) - ideal)
    assert d1.max() <= d0.max() and d1.mean() < d0.mean(), (d0.max(), d1.max(), d0.mean(), d1.mean())


class _Softplus:  # torch's export of log(1 + exp(16 x)) (log1p(exp(.)) exports the same)
    @staticmethod
    def export(path, dtype):
        torch = optional("torch")

        class SP(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(8, 4)

            def forward(self, x):
                return self.lin(torch.log(1 + torch.exp(x * 16.0)))

        return _export(SP, dtype, path)


def _sess(m, extra=()):
    import onnx
    import onnxruntime as ort

    m2 = onnx.ModelProto()
    m2.CopyFrom(m)
    for t in extra:
        m2.graph.output.append(onnx.helper.make_empty_tensor_value_info(t))
    return ort.InferenceSession(m2.SerializeToString(), providers=["CPUExecutionProvider"])


def test_fix_rewrites_an_overflowing_fp16_softplus_and_both_site_and_output_improve(tmp_path):
    optional("torch")
    pytest.importorskip("onnxruntime")
    import onnx

    from audit.model import scan as scan_mod

    src = _Softplus.export(tmp_path / "sp16.onnx", optional("torch").float16)
    x = (np.random.default_rng(3).standard_normal((64, 8)) * 4).astype(np.float16)
    np.savez(tmp_path / "data.npz", x=x)
    out = tmp_path / "fixed.onnx"
    args = [str(src), "--data", str(tmp_path / "data.npz")]
    code, text = _cli([*args, "--fix", str(out), "--json", "-"])
    assert code == 0, text
    doc = json.loads(text)
    [r] = doc["fix"]
    assert r["site"] == "s1" and r["rewrite"] == "softplus-kernel" and r["kept"], r
    assert doc["written"] == str(out)
    b, a = r["before"]["weighted"], r["after"]["weighted"]  # the tool's figures
    assert b["inf"] > 0 and a["inf"] == 0 and a["p99_ulp"] < b["p99_ulp"] and a["mean_ulp"] < b["mean_ulp"]
    jb = doc["before"]["effect"]["joint"]["outputs"]
    ja = doc["after"]["effect"]["joint"]["outputs"]
    assert [o["nonfinite_changed"] for o in ja.values()] == [0]
    assert all(o["nonfinite_changed"] > 0 for o in jb.values())
    code, text = _cli([*args, "--fix", str(tmp_path / "f2.onnx")])
    assert code == 0 and max(map(len, text.splitlines())) <= 80 and "softplus-kernel" in text
    # the written graph: the three nodes became Cast, Softplus, Cast on the same tensors
    [site] = scan_mod.scan(scan_mod.load(src))
    assert site.pattern == "softplus" and len(site.nodes) == 3
    fixed, orig = onnx.load(out), onnx.load(src)
    new = [n for n in fixed.graph.node if n.name.startswith("actaudit_fix_s1")]
    assert [n.op_type for n in new] == ["Cast", "Softplus", "Cast"]
    assert new[0].input[0] == site.input and new[-1].output[0] == site.output
    assert not {"Exp", "Log"} & {n.op_type for n in fixed.graph.node}
    # independently: our own sessions of both models, the site against mpmath's RN_fp16
    yname = orig.graph.output[0].name
    z0, h0, g0 = _sess(orig, [site.input, site.output]).run([yname, site.input, site.output], {"x": x})
    z1, h1, g1 = _sess(fixed, [site.input, site.output]).run([yname, site.input, site.output], {"x": x})
    assert np.array_equal(h0, h1) and float(h0.max()) > 89  # past fp32's exp overflow (88.72)
    cr = _cr16_gelu(h0, _softplus)
    assert np.isfinite(cr).all()
    bad0, bad1 = np.count_nonzero(g0 != cr), np.count_nonzero(g1 != cr)
    assert np.isinf(g0).any() and np.isfinite(g1).all()
    assert bad1 < bad0 and bad1 <= cr.size // 100, (bad0, bad1)
    # the output: the suffix fed the correctly rounded softplus (our own session)
    suffix = tmp_path / "suffix.onnx"
    onnx.utils.extract_model(str(src), str(suffix), [site.output], [yname])
    ideal = _sess(onnx.load(suffix)).run(None, {site.output: cr})[0].astype(np.float64)
    d0, d1 = z0.astype(np.float64) - ideal, z1.astype(np.float64) - ideal
    assert not np.isfinite(d0).all() and np.isfinite(d1).all()
    fin = np.isfinite(d0)
    assert np.abs(d1[fin]).max() <= np.abs(d0[fin]).max() and np.abs(d1).max() <= np.abs(ideal).max() * 2**-9


def test_fix_does_not_write_a_rewrite_that_is_worse_an_fp64_softplus(tmp_path):
    torch = optional("torch")
    pytest.importorskip("onnxruntime")
    import mpmath

    from audit.model import rewrite
    from audit.model import scan as scan_mod

    src = _Softplus.export(tmp_path / "sp64.onnx", torch.float64)
    x = np.random.default_rng(5).uniform(-0.2, 0.2, (64, 8))  # the site sees 16 x: [-3.2, 3.2]
    np.savez(tmp_path / "data.npz", x=x)
    out = tmp_path / "fixed.onnx"
    code, text = _cli([str(src), "--data", str(tmp_path / "data.npz"), "--fix", str(out), "--json", "-"])
    assert code == 0, text
    doc = json.loads(text)
    [r] = doc["fix"]
    assert (
        r["rewrite"] == "softplus-kernel" and not r["kept"] and r["why"] == "the site is worse on the data"
    ), r
    assert (r["before"]["dtype"], r["after"]["dtype"]) == ("fp64", "fp32")  # the kernel's format
    assert doc["written"] is None and not out.exists()
    # independently: the rewrite (its fp32 Softplus between casts) is worse than the fp64
    # Exp/Add/Log at the site, against mpmath
    model = scan_mod.load(src)
    [site] = scan_mod.scan(model)
    h, g0 = _sess(model, [site.input, site.output]).run([site.input, site.output], {"x": x})
    [g1] = _sess(rewrite.apply(model, site, "softplus-kernel"), [site.output]).run([site.output], {"x": x})
    mpmath.mp.prec = 120
    exact = np.array([float(_softplus(mpmath.mpf(float(v)))) for v in h.ravel()])
    e0, e1 = np.abs(g0.ravel() - exact), np.abs(g1.ravel() - exact)
    assert e1.mean() > 1e3 * e0.mean() and e0.max() > 0


def _sigmoid(v):
    import mpmath

    return 1 / (1 + mpmath.exp(-v))


def _export_sigmoid(path, form, dtype):
    torch = optional("torch")

    class S(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 4)

        def forward(self, x):
            v = x * 4.0
            return self.lin(0.5 + 0.5 * torch.tanh(v / 2) if form == "tanh" else 1 / (1 + torch.exp(-v)))

    return _export(S, dtype, path)


def test_fix_rewrites_an_fp16_tanh_sigmoid_to_the_exp_form_and_site_and_output_improve(tmp_path):
    torch = optional("torch")
    pytest.importorskip("onnxruntime")
    import onnx

    from audit.model import scan as scan_mod

    src = _export_sigmoid(tmp_path / "sig16.onnx", "tanh", torch.float16)
    x = np.random.default_rng(11).uniform(-4.5, 0.5, (64, 8)).astype(np.float16)  # the site: [-18, 2]
    np.savez(tmp_path / "data.npz", x=x)
    out = tmp_path / "fixed.onnx"
    code, text = _cli([str(src), "--data", str(tmp_path / "data.npz"), "--fix", str(out), "--json", "-"])
    assert code == 0, text
    doc = json.loads(text)
    by = {r["rewrite"]: r for r in doc["fix"]}
    assert set(by) == {"sigmoid-kernel", "sigmoid-exp-form"} and doc["written"] == str(out)
    r = by["sigmoid-exp-form"]
    assert r["kept"] and not by["sigmoid-kernel"]["kept"], doc["fix"]
    b, a = r["before"]["weighted"], r["after"]["weighted"]  # the tool's figures
    assert a["p99_ulp"] < b["p99_ulp"] and a["mean_ulp"] < b["mean_ulp"]
    [site] = scan_mod.scan(scan_mod.load(src))
    assert site.pattern == "sigmoid-tanh"
    fixed, orig = onnx.load(out), onnx.load(src)
    new = [n.op_type for n in fixed.graph.node if n.name.startswith("actaudit_fix_s1")]
    assert new == ["Neg", "Exp", "Add", "Reciprocal"] and "Tanh" not in {n.op_type for n in fixed.graph.node}
    # independently: our own sessions, the site's fp16 values against mpmath's RN_fp16(sigmoid)
    yname = orig.graph.output[0].name
    z0, h0, g0 = _sess(orig, [site.input, site.output]).run([yname, site.input, site.output], {"x": x})
    z1, h1, g1 = _sess(fixed, [site.input, site.output]).run([yname, site.input, site.output], {"x": x})
    assert np.array_equal(h0, h1)
    cr = _cr16_gelu(h0, _sigmoid)
    bad0, bad1 = np.count_nonzero(g0 != cr), np.count_nonzero(g1 != cr)
    assert bad1 < bad0 and bad1 <= cr.size // 100, (bad0, bad1)
    assert float(g1.min()) >= 0 and float(g1.max()) <= 1  # a form that cannot leave [0, 1]
    suffix = tmp_path / "suffix.onnx"
    onnx.utils.extract_model(str(src), str(suffix), [site.output], [yname])
    ideal = _sess(onnx.load(suffix)).run(None, {site.output: cr})[0].astype(np.float64)
    d0, d1 = np.abs(z0.astype(np.float64) - ideal), np.abs(z1.astype(np.float64) - ideal)
    assert d1.max() <= d0.max() and d1.mean() <= d0.mean(), (d0.max(), d1.max(), d0.mean(), d1.mean())


def test_fix_does_not_write_the_sigmoid_kernel_where_it_is_worse_than_the_exp_form(tmp_path):
    torch = optional("torch")
    pytest.importorskip("onnxruntime")
    import mpmath

    from audit.model import rewrite
    from audit.model import scan as scan_mod

    src = _export_sigmoid(tmp_path / "sig32.onnx", "exp", torch.float32)
    x = np.random.default_rng(12).uniform(-4.5, 0.5, (64, 8)).astype(np.float32)
    np.savez(tmp_path / "data.npz", x=x)
    out = tmp_path / "fixed.onnx"
    code, text = _cli([str(src), "--data", str(tmp_path / "data.npz"), "--fix", str(out), "--json", "-"])
    assert code == 0, text
    doc = json.loads(text)
    [r] = doc["fix"]
    assert r["rewrite"] == "sigmoid-kernel" and not r["kept"] and r["why"] == "the site is worse on the data"
    assert doc["written"] is None and not out.exists()
    # independently: ORT's fp32 Sigmoid kernel is farther from mpmath than 1 / (1 + exp(-x))
    model = scan_mod.load(src)
    [site] = scan_mod.scan(model)
    h, g0 = _sess(model, [site.input, site.output]).run([site.input, site.output], {"x": x})
    [g1] = _sess(rewrite.apply(model, site, "sigmoid-kernel"), [site.output]).run([site.output], {"x": x})
    mpmath.mp.prec = 80
    exact = np.array([float(_sigmoid(mpmath.mpf(float(v)))) for v in h.ravel()])
    e0 = np.abs(g0.ravel().astype(np.float64) - exact) / exact
    e1 = np.abs(g1.ravel().astype(np.float64) - exact) / exact
    assert e1.mean() > e0.mean() and e1.max() > e0.max()


def test_allow_custom_ops_does_not_exist(tmp_path):
    # docs/how-to/fix-model-sites.md: an ORT custom op needs a library built against ORT's
    # C headers, which the wheel does not ship; the option is refused, not faked
    code, text = _cli([str(tmp_path / "m.onnx"), "--fix", str(tmp_path / "o.onnx"), "--allow-custom-ops"])
    assert code == 2 and text.strip().splitlines() == [
        "actaudit: error: No such option: --allow-custom-ops (see 'actaudit model --help')"
    ]


def test_fix_clips_the_overflowing_exp_of_a_ratio_sigmoid_with_an_exact_bound(tmp_path):
    torch = optional("torch")
    pytest.importorskip("onnxruntime")
    import mpmath
    import onnx

    from audit.model import scan as scan_mod

    class S(torch.nn.Module):  # e / (1 + e), e = exp(16 x): NaN (inf / inf) past x = 88.72 / 16
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(8, 4)

        def forward(self, x):
            e = torch.exp(x * 16.0)
            return self.lin(e / (1 + e))

    torch.manual_seed(0)
    src = tmp_path / "ratio.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            S().eval(), (torch.randn(4, 8),), str(src), dynamo=False, opset_version=17,
            input_names=["x"], dynamic_axes={"x": {0: "batch"}},
        )  # fmt: skip
    x = (np.random.default_rng(3).standard_normal((64, 8)) * 4).astype(np.float32)
    np.savez(tmp_path / "data.npz", x=x)
    out = tmp_path / "fixed.onnx"
    code, text = _cli([str(src), "--data", str(tmp_path / "data.npz"), "--fix", str(out), "--json", "-"])
    assert code == 0, text
    doc = json.loads(text)
    by = {r["rewrite"]: r for r in doc["fix"]}
    assert set(by) == {"sigmoid-kernel", "sigmoid-exp-form", "exp-clip"}, doc["fix"]
    r = by["exp-clip"]
    assert r["kept"] and doc["written"] == str(out) and not by["sigmoid-kernel"]["kept"]
    b, a = r["before"]["weighted"], r["after"]["weighted"]  # the tool's figures
    assert b["nan"] > 0 and a["nan"] == 0 and a["p99_ulp"] <= b["p99_ulp"]
    # the graph edit: one Clip(x, max=H) in front of the Exp, H exact: the largest fp32
    # whose exp is finite (below FLT_MAX + half an ulp), where e^H / (1 + e^H) is 1
    [site] = scan_mod.scan(scan_mod.load(src))
    assert site.pattern == "sigmoid-ratio"
    fixed, orig = onnx.load(out), onnx.load(src)
    [clip] = [n for n in fixed.graph.node if n.op_type == "Clip"]
    [exp] = [n for n in fixed.graph.node if n.op_type == "Exp"]
    assert exp.input[0] == clip.output[0] and clip.input[0] == site.input and clip.input[1] == ""
    [hi] = [onnx.numpy_helper.to_array(t) for t in fixed.graph.initializer if t.name == clip.input[2]]
    mpmath.mp.prec = 200
    top = mpmath.log(mpmath.mpf(float(np.finfo(np.float32).max)) + mpmath.mpf(2) ** 103)
    h = np.float32(float(top))
    while mpmath.mpf(float(h)) >= top:
        h = np.nextafter(h, np.float32(0))
    assert hi.dtype == np.float32 and hi.tobytes() == h.tobytes()
    assert mpmath.mpf(float(np.nextafter(h, np.float32(np.inf)))) >= top  # the largest one
    assert mpmath.exp(mpmath.mpf(float(h))) > 2**25  # 1 + e^H rounds to e^H: the ratio is 1
    # independently: our own sessions; the site where the original is finite is unchanged,
    # and where it was NaN it is 1, the correct rounding of sigmoid there
    yname = orig.graph.output[0].name
    z0, h0, g0 = _sess(orig, [site.input, site.output]).run([yname, site.input, site.output], {"x": x})
    z1, g1 = _sess(fixed, [site.output]).run([yname, site.output], {"x": x})
    nan = np.isnan(g0)
    assert nan.any() and np.array_equal(g1[~nan], g0[~nan]) and np.all(g1[nan] == 1)
    cr = _cr16_gelu(h0, _sigmoid, np.float32)
    assert np.all(cr[nan] == 1) and np.count_nonzero(g1 != cr) < np.count_nonzero(g0 != cr)
    fin = np.isfinite(z0)
    assert not fin.all() and np.isfinite(z1).all() and np.array_equal(z1[fin], z0[fin])
    suffix = tmp_path / "suffix.onnx"
    onnx.utils.extract_model(str(src), str(suffix), [site.output], [yname])
    ideal = _sess(onnx.load(suffix)).run(None, {site.output: cr})[0].astype(np.float64)
    assert np.abs(z1.astype(np.float64) - ideal).max() <= 2**-20 * np.abs(ideal).max()


def test_exp_clip_bounds_are_the_largest_values_whose_exp_is_finite():
    import mpmath

    from audit.model.rewrite import exp_clip_bound

    mpmath.mp.prec = 200
    half = np.arange(0, 0x7C00, dtype=np.uint16).view(np.float16)  # every finite fp16 >= 0
    for engine, fmax, ulp in (("fp32", float(np.finfo(np.float32).max), 2.0**104), ("fp16", 65504.0, 32.0)):
        top = mpmath.log(mpmath.mpf(fmax) + mpmath.mpf(ulp) / 2)
        want = max(float(v) for v in half if mpmath.mpf(float(v)) < top)
        assert exp_clip_bound("fp16", engine) == want, engine
    assert exp_clip_bound("fp16", "fp32") == 88.6875 and exp_clip_bound("fp16", "fp16") == 11.0859375
