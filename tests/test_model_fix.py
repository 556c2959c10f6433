"""actaudit model --fix: an fp16 erf-GELU whose 1 + erf cancels, rewritten to ORT's GELU
kernel; the written model's site and output are better on the data, measured by the tool
and here (our own ORT sessions of both models, mpmath for the correct GELU)."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
from helpers import optional


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


def _cr16_gelu(x: np.ndarray) -> np.ndarray:
    import mpmath

    mpmath.mp.prec = 80
    out = np.empty(x.shape, np.float16)
    for i, v in np.ndenumerate(x.astype(np.float64)):
        g = mpmath.mpf(v) / 2 * (1 + mpmath.erf(mpmath.mpf(v) / mpmath.sqrt(2)))
        a = np.float16(float(g))  # then the nearest of its neighbours, decided exactly
        cands = [c for c in (np.nextafter(a, np.float16(-1e4)), a, np.nextafter(a, np.float16(1e4)))]
        out[i] = min(
            cands, key=lambda c: (abs(mpmath.mpf(float(c)) - g), int(np.array(c).view(np.uint16)) & 1)
        )
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
    [r] = doc["rewrites"]
    assert r["rewrite"] == "gelu-kernel" and r["kept"] and doc["written"] == str(out)
    b, a = r["before"]["weighted"], r["after"]["weighted"]
    assert a["p99_ulp"] < b["p99_ulp"] and a["mean_ulp"] < b["mean_ulp"]  # the tool's figures
    # the table: 80 columns
    code, text = _cli([*args, "--fix", str(tmp_path / "f2.onnx")])
    assert code == 0 and max(map(len, text.splitlines())) <= 80 and "gelu-kernel" in text
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
