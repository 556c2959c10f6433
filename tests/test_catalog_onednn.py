"""tanh.onednn, gelu.onednn_erf and gelu.onednn_tanh are bit-identical to OpenVINO's CPU plugin
on this machine's AVX-512 path, at every bf16 and fp16 input (fp32 models) and every bf16 input
of bf16 models; the OpenVINO models are built here with its opset API."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import openvino as ov
import pytest
from openvino import opset13 as ops

from audit.numbers.formats import get_format
from audit.targets.candidates import catalog
from audit.targets.compute import evaluate
from audit.targets.engines.openvino import dispatch
from audit.targets.semantics import parse

F32 = get_format("fp32")
NODES = {
    "tanh.onednn": lambda p: ops.tanh(p),
    "gelu.onednn_erf": lambda p: ops.gelu(p, "erf"),
    "gelu.onednn_tanh": lambda p: ops.gelu(p, "tanh"),
}


@pytest.fixture(scope="module", autouse=True)
def avx512():
    """The candidates model the AVX-512 path: on a CPU whose plugin dispatches to another
    (avx2 on a CPU without AVX-512) there is nothing to compare them with, so these tests
    are skipped, the ISA named; never compared against another path's kernel."""
    isa = dispatch()
    if not isa.startswith("avx512_core"):
        pytest.skip(f"these models are of OpenVINO's avx512_core path; this CPU takes {isa}")


def compiled(node, elem, hint="f32"):
    p = ops.parameter(ov.PartialShape([-1]), elem)
    m = ov.Model([node(p)], [p])
    return ov.Core().compile_model(m, "CPU", {"INFERENCE_NUM_THREADS": 1, "INFERENCE_PRECISION_HINT": hint})


def same_bits(a, b):
    return (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))


def cases():
    bf16 = (np.arange(65536, dtype=np.uint32) << 16).view(np.float32)
    fp16 = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
    rng = np.random.default_rng(20261201)
    bits = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return {"bf16": bf16, "fp16": fp16, "random-bits": bits}


@pytest.mark.parametrize("cid", list(NODES))
def test_fp32_model_bit_identical(cid):
    c = compiled(NODES[cid], ov.Type.f32)
    cand = catalog()[cid]
    for name, x in cases().items():
        got = evaluate(cand.fn, x.astype(np.float64), F32, F32, {}).astype(np.float32)
        want = c(x)[0]
        ok = same_bits(got, want)
        assert ok.all(), (cid, name, x[~ok][:4], got[~ok][:4], want[~ok][:4])


@pytest.mark.parametrize("cid", list(NODES))
def test_bf16_model_is_the_fp32_kernel_converted_by_vcvtneps2bf16(cid):
    """A bf16 model runs the fp32 kernel and converts its result with VCVTNEPS2BF16, which
    reads subnormal float32 values as zero (DAZ on the conversion: semantics daz_out)."""
    c = compiled(NODES[cid], ov.Type.bf16, "bf16")
    x = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    t = ov.Tensor(ov.Type.bf16, ov.Shape([x.size]))
    t.data.view(np.uint16)[:] = x
    req = c.create_infer_request()
    req.infer([t])
    want = req.get_output_tensor(0).data.view(np.uint16).copy()
    xf = x.view(ml_dtypes.bfloat16).astype(np.float64)
    bf16 = get_format("bf16")
    got = evaluate(catalog()[cid].fn, xf, bf16, F32, {}, semantics=parse("daz_out")).astype(np.float32)
    got16 = got.astype(ml_dtypes.bfloat16).view(np.uint16)
    wf = want.view(ml_dtypes.bfloat16).astype(np.float32)
    ok = (got16 == want) | (np.isnan(got) & np.isnan(wf))
    assert ok.all(), (cid, xf[~ok][:4], got[~ok][:4], wf[~ok][:4])


def test_nan_passes_through_tanh():
    """The injector's blends would give +-1 for NaN; the plugin gives NaN, and so does the
    model (measured here, not assumed)."""
    c = compiled(NODES["tanh.onednn"], ov.Type.f32)
    y = c(np.float32([np.nan, -np.nan]))[0]
    assert np.isnan(y).all()
    got = evaluate(catalog()["tanh.onednn"].fn, np.array([np.nan]), F32, F32, {})
    assert np.isnan(got).all()
