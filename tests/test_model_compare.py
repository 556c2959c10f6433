"""actaudit model A.onnx B.onnx: two exports of one torch network (GELU approximate none /
tanh, and the same network converted to fp16), their sites paired and their changes found."""

from __future__ import annotations

import json
import warnings

import pytest
from helpers import optional


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    torch = optional("torch")
    pytest.importorskip("onnxruntime")
    d = tmp_path_factory.mktemp("exports")
    out = {}
    for name, approx, half, opset in (
        ("none", "none", False, 20),
        ("tanh", "tanh", False, 20),
        ("fp16", "none", True, 17),
    ):
        torch.manual_seed(0)
        net = torch.nn.Sequential(
            torch.nn.Linear(8, 16),
            torch.nn.GELU(approximate=approx),
            torch.nn.Linear(16, 4),
            torch.nn.Sigmoid(),
        )
        x = torch.randn(4, 8)
        if half:
            net, x = net.half(), x.half()
        out[name] = d / f"{name}.onnx"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                net.eval(), (x,), str(out[name]), dynamo=False, opset_version=opset,
                input_names=["x"], dynamic_axes={"x": {0: "batch"}},
            )  # fmt: skip
    return out


def _cli(args):
    import contextlib
    import io

    from audit.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(["model", *args])
    return code, out.getvalue()


RANDOM = ["--random", "--shape", "x=16x8", "--seed", "1"]


def test_approximate_none_to_tanh_is_found(exports):
    code, out = _cli([str(exports["none"]), str(exports["tanh"]), *RANDOM, "--json", "-"])
    assert code == 0, out
    doc = json.loads(out)
    assert [(p["a"], p["b"]) for p in doc["pairs"]] == [("s1", "s1"), ("s2", "s2")]
    gelu, sig = doc["pairs"]
    assert "approximate none -> tanh" in gelu["changes"]
    assert sig["changes"] == []
    assert doc["unpaired"] == {"a": [], "b": []}
    code, out = _cli([str(exports["none"]), str(exports["tanh"]), *RANDOM])
    assert code == 0 and max(map(len, out.splitlines())) <= 80
    assert "approximate none -> tanh" in out


def test_an_fp16_conversion_is_found(exports):
    code, out = _cli([str(exports["none"]), str(exports["fp16"]), *RANDOM, "--json", "-"])
    assert code == 0, out
    doc = json.loads(out)
    assert len(doc["pairs"]) == 2
    for p in doc["pairs"]:
        assert "graph dtype fp32 -> fp16" in p["changes"], p
    # opset 17 has no Gelu op: torch writes erf-GELU out, a formula change too
    assert any(c.startswith("formula Gelu -> erf-gelu") for c in doc["pairs"][0]["changes"])


def test_three_models_or_a_report_of_two_are_one_line_errors(exports, tmp_path):
    p = [str(exports["none"]), str(exports["tanh"])]
    for args in ([*p, p[0], *RANDOM], [*p, *RANDOM, "--report", str(tmp_path / "r")]):
        code, out = _cli(args)
        assert code == 2 and out.startswith("actaudit: error:") and len(out.splitlines()) == 1, out
