"""openvino:OP and litert:OP targets, checked against sessions built here, the flatbuffer read
back with LiteRT's own schema reader, and mpmath."""

from __future__ import annotations

import json
import subprocess
import sys

import ai_edge_litert.interpreter as litert  # engines are installed in CI: an import error fails
import ml_dtypes
import mpmath as mp
import numpy as np
import openvino as ov
import pytest

import audit
import audit.measure.quant
import audit.targets.engines
from audit.errors import ActauditError
from audit.targets.engines import get_engine
from audit.targets.engines.base import SESSIONS, SessionKey


def all_bf16() -> np.ndarray:
    b = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(ml_dtypes.bfloat16)
    return b[np.isfinite(b.astype(np.float32))]


def own_ov(node, dtype, hint=None):
    """An OpenVINO session built here, from the opset API, independent of the adapter."""
    from openvino import opset13 as ops

    t = {"fp32": ov.Type.f32, "bf16": ov.Type.bf16, "fp16": ov.Type.f16}[dtype]
    p = ops.parameter(ov.PartialShape([-1]), t)
    m = ov.Model([node(ops, p)], [p])
    cfg = {"INFERENCE_NUM_THREADS": 1}
    if hint:
        cfg["INFERENCE_PRECISION_HINT"] = hint
    return ov.Core().compile_model(m, "CPU", cfg)


def run_own_bf16(compiled, x_bf16):
    t = ov.Tensor(ov.Type.bf16, ov.Shape([x_bf16.size]))
    t.data.view(np.uint16)[:] = x_bf16.view(np.uint16)
    req = compiled.create_infer_request()
    req.infer([t])
    return req.get_output_tensor(0).data.view(np.uint16).copy()


@pytest.mark.parametrize(
    "target,node",
    [
        ("openvino:Gelu", lambda ops, p: ops.gelu(p, "erf")),
        ("openvino:Gelu[approximation_mode=tanh]", lambda ops, p: ops.gelu(p, "tanh")),
        ("openvino:Tanh", lambda ops, p: ops.tanh(p)),
    ],
)
def test_openvino_bf16_every_input_equals_own_session(target, node):
    from audit.numbers.formats import get_format

    x = all_bf16()
    (cand,) = audit.targets.engines.candidates_of(target, get_format("bf16"))
    got = np.asarray(cand.fn(type("V", (), {"a": x})(), None)).astype(ml_dtypes.bfloat16)
    want = run_own_bf16(own_ov(node, "bf16"), x)
    assert np.array_equal(got.view(np.uint16), want)
    ident = cand.identity
    assert ident["engine"] == "openvino" and ident["version"] == ov.get_version()
    assert ident["dtype"] == "bf16" and ident["dispatch"]


def test_openvino_precision_hint_is_what_the_compiled_model_reports():
    """The identity says the precision the compiled model reports and the precisions its nodes
    ran in, as a model compiled here with the same hint reports them: the plugin may not honour
    a hint (openvino 2026.4's CPU plugin answers f16 with bf16 where the CPU has no f16
    arithmetic), and what it did is what the identity must say."""
    from audit.numbers.formats import get_format

    names = {"f32": "'float32'", "f16": "'float16'", "bf16": "'bfloat16'"}
    for hint, short in (("fp32", "f32"), ("fp16", "f16"), ("bf16", "bf16")):
        (cand,) = audit.targets.engines.candidates_of(
            f"openvino:Tanh[openvino.precision={hint}]", get_format("fp32")
        )
        own = own_ov(lambda ops, p: ops.tanh(p), "fp32", short)
        reported = str(own.get_property("INFERENCE_PRECISION_HINT"))
        (said,) = [s for s, name in names.items() if name in reported]
        nodes = [
            (n.get_rt_info()["layerType"].astype(str), n.get_rt_info()["runtimePrecision"].astype(str))
            for n in own.get_runtime_model().get_ordered_ops()
        ]
        ran = "/".join(p for layer, p in nodes if layer not in ("Input", "Output", "Convert"))
        precision = cand.identity["precision"]
        assert precision.startswith(f"hint {said}, Tanh ran in {ran}"), (hint, reported, precision)
        assert ("between converts" in precision) == any(layer == "Convert" for layer, _ in nodes), precision
        x = np.linspace(-4, 4, 1001, dtype=np.float32)
        assert np.array_equal(np.asarray(cand.fn(type("V", (), {"a": x})(), None), np.float32), own(x)[0])


def test_openvino_sessions_never_shared_across_attributes_or_hints():
    e = get_engine("openvino")
    keys = [
        SessionKey("openvino", "Gelu", (("approximation_mode", m),), "fp32", (("precision", p),))
        for m in ("erf", "tanh")
        for p in ("default", "fp32")
    ]
    sessions = [SESSIONS.get(e, k) for k in keys]
    assert len({id(s) for s in sessions}) == 4
    x = np.array([-3.0, -1.0, 0.5], np.float32)
    erf, tanh = sessions[1].run(x), sessions[3].run(x)
    assert not np.array_equal(erf, tanh)  # one kernel per mode, never the other's session


def test_openvino_swish_beta_is_silu_with_beta():
    from audit.numbers.formats import get_format

    (res,) = audit.sweep("openvino:Swish", dtype="fp16", params={"beta": 2.0})
    assert res.reference == "silu" and res.identity["attributes"] == {"beta": 2.0}
    (cand,) = audit.targets.engines.candidates_of("openvino:Swish[beta=2]", get_format("fp16"))
    x = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    x = x[np.isfinite(x)]
    own = own_ov(lambda ops, p: ops.swish(p, ops.convert(ops.constant(np.float32(2.0)), ov.Type.f16)), "fp16")
    got = np.asarray(cand.fn(type("V", (), {"a": x})(), None)).astype(np.float16)
    assert np.array_equal(got.view(np.uint16), own(x)[0].view(np.uint16))
    # the oracle follows beta: OpenVINO's Swish is within a few fp16 ulp of x sigmoid(2x)
    # (mpmath, here) at sample points, so a sweep against silu with beta = 1 would show
    # errors of thousands of ulp where the sweep's (beta = 2) worst case stays small
    pts = np.float16([-3.0, -1.0, 0.5, 1.0, 2.5])
    ovs = own(pts)[0].astype(np.float64)
    for v, y in zip(pts, ovs):
        exact = float(mp.mpf(float(v)) / (1 + mp.exp(-2 * mp.mpf(float(v)))))
        assert abs(y - exact) <= 4 * float(np.spacing(np.float16(abs(exact))))
    assert res.summary.max_ulp < 64


# ------------------------------------------------------------------------ LiteRT
def parse_tflite(content: bytes):
    from ai_edge_litert import schema_py_generated as S

    m = S.Model.GetRootAs(content, 0)
    assert S.Model.ModelBufferHasIdentifier(content, 0)
    sg = m.Subgraphs(0)
    op = sg.Operators(0)
    code = m.OperatorCodes(op.OpcodeIndex()).BuiltinCode()
    return m, sg, op, code


@pytest.mark.parametrize("name", ["LOGISTIC", "TANH", "GELU", "HARD_SWISH", "ELU"])
def test_litert_model_reads_back_as_one_op_on_a_graph_input(name):
    from ai_edge_litert import schema_py_generated as S

    from audit.targets.engines.litert import OPS, make_model

    content = make_model(OPS[name], {a.name: a.default for a in OPS[name].attrs}, "fp32")
    m, sg, op, code = parse_tflite(content)
    assert code == getattr(S.BuiltinOperator, name)
    assert sg.InputsAsNumpy().tolist() == [0] and sg.OutputsAsNumpy().tolist() == [1]
    x = sg.Tensors(0)
    assert x.Type() == S.TensorType.FLOAT32 and x.ShapeSignatureAsNumpy().tolist() == [-1]
    assert m.Buffers(x.Buffer()).DataLength() == 0  # no data: never a constant


def test_litert_gelu_approximate_option_is_written():
    from ai_edge_litert import schema_py_generated as S

    from audit.targets.engines.litert import OPS, make_model

    for value, want in (("false", False), ("true", True)):
        _m, _sg, op, _code = parse_tflite(make_model(OPS["GELU"], {"approximate": value}, "fp32"))
        assert op.BuiltinOptionsType() == S.BuiltinOptions.GeluOptions
        opts = S.GeluOptions()
        t = op.BuiltinOptions()
        opts.Init(t.Bytes, t.Pos)
        assert bool(opts.Approximate()) is want


def test_litert_resolvers_are_distinct_sessions_and_recorded():
    from audit.numbers.formats import get_format

    x = np.linspace(-12, 12, 4097, dtype=np.float32)
    outs = {}
    for r in ("xnnpack", "builtin", "reference"):
        (cand,) = audit.targets.engines.candidates_of(f"litert:TANH[litert.resolver={r}]", get_format("fp32"))
        assert cand.identity["options"] == {"resolver": r}
        outs[r] = np.asarray(cand.fn(type("V", (), {"a": x})(), None), np.float32)
        assert ("xnnpack" in cand.identity["precision"]) == (r == "xnnpack")
    # the reference kernel computes std::tanh in float: within 2 ulp of mpmath's tanh
    ref = np.array([float(mp.tanh(mp.mpf(float(v)))) for v in x], np.float64)
    ulp = np.spacing(np.abs(ref.astype(np.float32))).astype(np.float64)
    assert np.max(np.abs(outs["reference"] - ref) / ulp) <= 2.5
    # independent check of the resolver: an interpreter built here on the same model
    from audit.targets.engines.litert import OPS, make_model

    own = litert.Interpreter(
        model_content=make_model(OPS["TANH"], {}, "fp32"),
        num_threads=1,
        experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF,
    )
    own.resize_tensor_input(0, [x.size])
    own.allocate_tensors()
    own.set_tensor(own.get_input_details()[0]["index"], x)
    own.invoke()
    assert np.array_equal(own.get_tensor(own.get_output_details()[0]["index"]), outs["reference"])


def test_litert_refuses_other_types_in_one_line():
    r = subprocess.run(
        [sys.executable, "-m", "audit.cli", "sweep", "litert:TANH", "--dtype", "bf16"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "takes fp32" in lines[0], r.stderr


def test_engine_identity_in_json():
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "audit.cli",
            "sweep",
            "openvino:Sigmoid",
            "--dtype",
            "fp8_e4m3",
            "--json",
            "-",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    # fp8 is not a type the plugin takes: one line naming the types
    assert r.returncode == 2 and "takes fp32, fp16, bf16" in r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "audit.cli", "sweep", "litert:LOGISTIC", "--dtype", "fp32", "--json", "-"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads(r.stdout)
    res = doc["results"] if isinstance(doc, dict) and "results" in doc else doc
    ident = res[0]["identity"]
    assert ident["engine"] == "litert" and ident["options"] == {"resolver": "xnnpack"}


def test_unknown_op_is_one_line():
    with pytest.raises(ActauditError, match="unknown openvino op 'Gleu'.*Gelu"):
        from audit.numbers.formats import get_format

        audit.targets.engines.candidates_of("openvino:Gleu", get_format("fp32"))


# ------------------------------------------------------------- LiteRT integer kernels
def own_quant_interpreter(name, inq, outq, resolver):
    from audit.targets.engines.litert import OPS, make_model

    content = make_model(OPS[name], {a.name: a.default for a in OPS[name].attrs}, "q", (inq, outq))
    interp = litert.Interpreter(model_content=content, num_threads=1, experimental_op_resolver_type=resolver)
    return interp


def run_interp(interp, codes):
    i = interp.get_input_details()[0]
    interp.resize_tensor_input(i["index"], [codes.size])
    interp.allocate_tensors()
    interp.set_tensor(i["index"], codes)
    interp.invoke()
    return interp.get_tensor(interp.get_output_details()[0]["index"]).astype(np.int64)


@pytest.mark.parametrize(
    "name,kind,ins,outs,ref",
    [
        ("LOGISTIC", "int8", (0.0625, 0), (1 / 256, -128), lambda v: 1 / (1 + mp.exp(-v))),
        ("TANH", "int16", (2.0**-12, 0), (2.0**-15, 0), mp.tanh),
    ],
)
def test_litert_integer_kernels_against_mpmath(name, kind, ins, outs, ref):
    """Every input code through an interpreter built here (reference resolver) and the
    sweep's figures recomputed from mpmath's correctly quantized codes."""
    from audit.measure.quant import parse_quant

    inq = parse_quant(f"{kind}:scale={ins[0]!r},zero={ins[1]}")
    outq = parse_quant(f"{kind}:scale={outs[0]!r},zero={outs[1]}")
    lo, hi = (-128, 127) if kind == "int8" else (-32768, 32767)
    codes = np.arange(lo, hi + 1).astype(np.int8 if kind == "int8" else np.int16)
    got = run_interp(own_quant_interpreter(name, inq, outq, litert.OpResolverType.BUILTIN_REF), codes)
    mp.mp.prec = 80
    want = []
    for q in codes.astype(np.int64):
        y = ref(mp.mpf(int(q) - ins[1]) * mp.mpf(ins[0])) / mp.mpf(outs[0]) + outs[1]
        want.append(int(min(max(mp.nint(y), lo), hi)))  # nearest, ties to even (mpmath nint)
    want = np.array(want)
    correct = float(np.mean(got == want))
    (res,) = audit.measure.quant.sweep(
        [f"litert:{name}[litert.resolver=reference]"], dtype=inq.name, out_dtype=outq.name
    )
    assert abs(res.correct_fraction - correct) < 1e-12, (res.correct_fraction, correct)
    assert res.to_dict()["correct_code_fraction"] == pytest.approx(correct, abs=1e-12)
    assert res.identity["engine"] == "litert" and res.identity["dtype"] == inq.name


def test_litert_integer_kernels_refuse_other_output_scales_and_bind_them():
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "audit.cli",
            "sweep",
            "litert:LOGISTIC",
            "--dtype",
            "int8:scale=0.0625,zero=0",
        ],
        # no --out-dtype: the output codes would be the input format, which LOGISTIC refuses
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "scale 0.00390625 and zero point -128" in r.stderr
    # sessions are keyed by the full quantized formats: two input scales, two sessions
    from audit.targets.engines.base import SESSIONS

    before = SESSIONS.builds
    for s in ("0.0625", "0.125"):
        audit.measure.quant.sweep(
            ["litert:LOGISTIC"], dtype=f"int8:scale={s},zero=0", out_dtype="int8:scale=0.00390625,zero=-128"
        )
    assert SESSIONS.builds - before == 2
