"""The MLAS catalog entries are bit-identical to ONNX Runtime on this machine's dispatch path.

Each ``FAMILY.mlas`` candidate models MLAS's AVX2/FMA3 kernels (which MLAS keeps on AVX-512
CPUs for these functions).  The test reads the CPU's flags itself and fails -- loudly, not
skipping -- on a CPU whose MLAS path is another (SSE2 only, or not x86-64), where these models
are not what ONNX Runtime runs.  Inputs: every finite fp16 and bf16 value (as fp32 inputs),
and fp32 ranges around the clamps, the split points, the tiny inputs (subnormals, where x^2
underflows) and the tails.
"""

import platform

import ml_dtypes
import numpy as np
import pytest
from helpers import required as need

from audit.numbers.formats import get_format
from audit.targets.candidates import catalog

ort = need("onnxruntime")
need("onnx")
from onnx import TensorProto, helper  # noqa: E402

F32 = get_format("fp32")


def cpu_flags() -> set:
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


@pytest.fixture(scope="module", autouse=True)
def fma3_dispatch():
    flags = cpu_flags() if platform.machine() in ("x86_64", "AMD64") else set()
    if not ({"avx2", "fma"} <= flags):
        pytest.fail(
            f"MLAS dispatch here is not the AVX2/FMA3 path the *.mlas candidates model "
            f"(machine {platform.machine()}, AVX2 {'avx2' in flags}, FMA {'fma' in flags}): "
            "these fidelity tests prove nothing on this CPU"
        )
    from audit.targets.engines import ort as ort_engine

    assert ort_engine.dispatch() in ("avx2-fma", "avx512f")


def session(op, domain="", **attrs):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, None)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"], domain=domain or None, **attrs)], "t", [x], [y])
    ops = [helper.make_opsetid("", 20)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    m = helper.make_model(g, opset_imports=ops)
    m.ir_version = 10
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return lambda a: s.run(None, {"x": a})[0]


PAIRS = {
    "tanh.mlas": ("Tanh", "", {}),
    "sigmoid.mlas": ("Sigmoid", "", {}),
    "erf.mlas": ("Erf", "", {}),
    "gelu.mlas_tanh": ("Gelu", "", {"approximate": "tanh"}),
    "gelu.mlas_erf": ("Gelu", "", {}),
}


def around(v: float, n: int = 1 << 13) -> np.ndarray:
    """2n consecutive fp32 values centred on v, and their negatives."""
    b = np.float32(v).view(np.int32)
    xs = (np.arange(b - n, b + n, dtype=np.int64)).astype(np.int32).view(np.float32)
    return np.concatenate([xs, -xs])


def inputs() -> np.ndarray:
    f16 = get_format("fp16").finite_values().astype(np.float32)
    bf = np.arange(1 << 16, dtype=np.uint16).view(ml_dtypes.bfloat16).astype(np.float32)
    bf = bf[np.isfinite(bf)]
    parts = [f16, bf, np.array([np.inf, -np.inf, np.nan, 0.0, -0.0], np.float32)]
    # clamps and splits (tanh +-9, sigmoid +-18, erf 0.921875 and 3.925), tiny inputs, tails
    for v in (9.0, 18.0, 0.921875, 3.925, 5.0, 1e-38, 2.0**-149 * 4096, 1e-20, 88.0, 3e38, 0.5, 1.0):
        parts.append(around(v))
    parts.append(np.arange(0, 1 << 14, dtype=np.int32).view(np.float32))  # the smallest subnormals
    return np.concatenate(parts)


X = inputs()


@pytest.mark.parametrize("cid", list(PAIRS))
def test_mlas_candidate_is_bit_identical_to_onnxruntime(cid):
    op, domain, attrs = PAIRS[cid]
    want = session(op, domain, **attrs)(X)
    got = catalog()[cid].evaluate(X.astype(np.float64), F32, F32).astype(np.float32)
    wb, gb = want.view(np.uint32), got.view(np.uint32)
    both_nan = np.isnan(want) & np.isnan(got)
    bad = np.flatnonzero((wb != gb) & ~both_nan)
    assert len(X) > 250_000
    assert not len(bad), (
        f"{cid}: {len(bad)} inputs differ, first x = {X[bad[0]]!r}: {got[bad[0]]!r} vs {want[bad[0]]!r}"
    )


def test_the_fidelity_inputs_reach_each_branch():
    # hand-worked: tanh clamps beyond 9, sigmoid's kernel exceeds 1 near 17.8, erf splits at
    # 0.921875; the inputs cover both sides of each
    assert (np.abs(X) > 9).any() and ((np.abs(X) > 8.9) & (np.abs(X) < 9)).any()
    s = session("Sigmoid")(np.array([17.844], np.float32))
    assert s[0] == np.float32(1 + 2.0**-23)  # no upper clamp in the FMA3 kernel
    assert ((X > 0.92) & (X < 0.921875)).any() and ((X > 0.921875) & (X < 0.93)).any()
    assert ((X > 0) & (X < 2.0**-126)).sum() > 10000
