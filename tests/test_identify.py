"""actaudit identify: the four examples of the issue, each target built in the test (our
own ORT session, jax.numpy, a table read by a Python callable, a formula written here)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from audit.compare.identify import identify

FAST = {"window": 256, "samples": 4096}  # fp32: fewer inputs than the command's default


def _write(tmp_path, monkeypatch, name, text):
    (tmp_path / f"{name}.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    importlib.invalidate_caches()
    return importlib.import_module(name)


def test_ort_gelu_tanh_is_mlas_tanh(tmp_path, monkeypatch):
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    g = helper.make_graph(
        [helper.make_node("Gelu", ["x"], ["y"], approximate="tanh")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N"])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    m.ir_version = 9
    onnx.save(m, tmp_path / "gelu.onnx")
    _write(
        tmp_path,
        monkeypatch,
        "ortgelu",
        "import numpy as np, onnxruntime as ort\n"
        f"S = ort.InferenceSession({str(tmp_path / 'gelu.onnx')!r}, providers=['CPUExecutionProvider'])\n"
        "def gelu(x):\n"
        "    return S.run(None, {'x': np.ascontiguousarray(x, np.float32).reshape(-1)})[0]\n",
    )
    r = identify("ortgelu:gelu", "gelu", "fp32", **FAST)
    best = r.matches[0]
    assert (best.candidate, best.path) == ("gelu.mlas_tanh", "compute fp32")
    assert best.identical == best.count  # every input compared
    assert r.matches[1].identical < best.count  # and nothing else is
    assert r.to_dict()["identify"][0]["identical_fraction"] == 1.0


def test_jax_tanh_is_tanh_xla(tmp_path, monkeypatch):
    pytest.importorskip("jax")
    _write(
        tmp_path,
        monkeypatch,
        "jaxtanh",
        "import numpy as np, jax, jax.numpy as jnp\n"
        "jax.config.update('jax_platforms', 'cpu')\n"
        "def tanh(x):\n"
        "    return np.asarray(jnp.tanh(jnp.asarray(np.asarray(x, np.float32))))\n",
    )
    r = identify("jaxtanh:tanh", "tanh", "fp32", **FAST)
    best = r.matches[0]
    assert best.candidate == "tanh.xla" and best.path == "compute fp32"
    assert best.identical == best.count
    assert all(m.identical < m.count for m in r.matches if m.candidate != "tanh.xla")


def test_an_fp16_table_behind_an_fp32_function_is_named_a_table(tmp_path, monkeypatch):
    import mpmath

    # the table: GELU at every fp16 value, in float64 from mpmath, stored as fp16
    mpmath.mp.prec = 80
    xs = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    tab = np.empty(1 << 16, np.float16)
    for i, x in enumerate(xs.astype(np.float64)):
        if math.isfinite(x):
            v = mpmath.mpf(x) / 2 * (1 + mpmath.erf(mpmath.mpf(x) / mpmath.sqrt(2)))
            # (float64 first: a double rounding, rarely off; a zero keeps the sign of x)
            tab[i] = np.float16(math.copysign(float(v), x) if v == 0 else float(v))
        else:  # the limits at +-inf (gelu(-inf) = -0), NaN at NaN
            tab[i] = np.inf if x == np.inf else -0.0 if x == -np.inf else x
    np.save(tmp_path / "tab.npy", tab)
    _write(
        tmp_path,
        monkeypatch,
        "lutgelu",
        "import numpy as np\n"
        f"T = np.load({str(tmp_path / 'tab.npy')!r})\n"
        "def gelu(x):\n"
        "    i = np.asarray(x, np.float32).astype(np.float16).view(np.uint16)\n"
        "    return T[i].astype(np.float32)\n",
    )
    r = identify("lutgelu:gelu", "gelu", "fp32", **FAST)
    best = r.matches[0]
    assert best.candidate == "table fp16" and "entries in fp16" in best.path
    assert best.identical_fraction > 0.999
    formulas = [m for m in r.matches if not m.candidate.startswith(("table", "cr"))]
    assert formulas and max(m.identical_fraction for m in formulas) < 0.9


def test_sigmoid_as_half_plus_half_tanh_is_that_form(tmp_path, monkeypatch):
    _write(
        tmp_path,
        monkeypatch,
        "sigtanh",
        "import numpy as np\n"
        "def sigmoid(x):\n"  # fp32 arithmetic, each step rounded: 0.5 + 0.5 * tanh(0.5 * x)
        "    x = np.asarray(x, np.float32)\n"
        "    t = np.tanh(np.float64(np.float32(0.5) * x)).astype(np.float32)\n"
        "    return (np.float32(0.5) + np.float32(0.5) * t).astype(np.float16)\n",
    )
    r = identify("sigtanh:sigmoid", "sigmoid", "fp16")  # every fp16 input
    assert r.exhaustive and r.inputs == 63488
    best = r.matches[0]
    assert best.candidate == "sigmoid.tanh"
    assert best.identical == best.count
    assert all(m.identical < m.count for m in r.matches if m.candidate != "sigmoid.tanh")


def test_cli_identify_fits_80_columns_json_and_one_line_errors(tmp_path, monkeypatch):
    import contextlib
    import io
    import json

    from audit.cli import main

    def cli(args):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            code = main(["identify", *args])
        return code, out.getvalue()

    _write(
        tmp_path,
        monkeypatch,
        "sigtanh2",
        "import numpy as np\n"
        "def sigmoid(x):\n"
        "    x = np.asarray(x, np.float32)\n"
        "    t = np.tanh(np.float64(np.float32(0.5) * x)).astype(np.float32)\n"
        "    return (np.float32(0.5) + np.float32(0.5) * t).astype(np.float16)\n",
    )
    code, out = cli(["sigtanh2:sigmoid", "--reference", "sigmoid", "--dtype", "fp16"])
    assert code == 0, out
    assert max(map(len, out.splitlines())) <= 80 and "sigmoid.tanh" in out.splitlines()[3]
    code, out = cli(["sigtanh2:sigmoid", "--reference", "sigmoid", "--dtype", "fp16", "--json", "-"])
    d = json.loads(out)["identify"][0]
    assert set(d) >= {"candidate", "path", "identical_fraction", "first_difference"}
    for bad in (["model:nope.onnx#s1"], ["model:x.onnx"], ["sigtanh2:sigmoid", "--top", "0"]):
        code, out = cli(bad)
        assert code == 2 and out.startswith("actaudit: error:") and len(out.splitlines()) == 1, out


def test_a_model_site_is_identified_as_the_op_ort_runs(tmp_path):
    """A Sigmoid site of a model: what ORT runs for it, identified as the same formula our own
    ORT session of a lone Sigmoid is (checked here on every fp32 input compared)."""
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    F = TensorProto.FLOAT
    w = onnx.numpy_helper.from_array(np.eye(4, dtype=np.float32) * 2, "W")
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Sigmoid", ["h"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", F, ["N", 4])],
        [helper.make_tensor_value_info("y", F, None)],
        [w],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    onnx.save(m, tmp_path / "net.onnx")
    from audit.compare.identify import inputs
    from audit.model.site_identify import identify_target
    from audit.numbers.formats import get_format

    r = identify_target(f"model:{tmp_path / 'net.onnx'}#s1", **FAST)
    best = r.matches[0]
    assert best.identical == best.count and r.reference == "sigmoid"
    # independently: our own session of a lone Sigmoid against that candidate, same inputs
    lone = helper.make_graph(
        [helper.make_node("Sigmoid", ["x"], ["y"])],
        "l",
        [helper.make_tensor_value_info("x", F, ["N"])],
        [helper.make_tensor_value_info("y", F, ["N"])],
    )
    lm = helper.make_model(lone, opset_imports=[helper.make_opsetid("", 17)])
    lm.ir_version = 9
    s = ort.InferenceSession(lm.SerializeToString(), providers=["CPUExecutionProvider"])
    x, _ = inputs(get_format("fp32"), FAST["window"], FAST["samples"])
    got = s.run(None, {"x": x.astype(np.float32)})[0]
    from audit.targets.registry import catalog

    f32 = get_format("fp32")
    want = catalog()[best.candidate].evaluate(x, f32, f32).astype(np.float32)
    assert got.view(np.uint32).tolist() == want.view(np.uint32).tolist()
