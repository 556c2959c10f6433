"""ONNX Runtime targets (ort:OP) and the MLAS catalog entries, against sessions built here.

Every expected number comes from an ONNX Runtime session the test builds itself with
onnx.helper (not the tool's model builder), from mpmath, or from hand-worked cases.
onnx and onnxruntime are installed in CI (the engines extra): a missing one fails here.
"""

import importlib
import json
import shlex
import tomllib
from pathlib import Path

import mpmath as mp
import numpy as np
import pytest
from helpers import required as need

import audit
from audit.cli import main
from audit.compare import matrix
from audit.errors import ActauditError
from audit.numbers.formats import get_format
from audit.targets import candidates, engines
from audit.targets.engines import base
from audit.targets.engines import ort as ort_engine
from reports import engines_table

ort = need("onnxruntime")
onnx = need("onnx")
from onnx import TensorProto, helper  # noqa: E402

F32 = get_format("fp32")


def session(op, dtype=TensorProto.FLOAT, domain="", level="off", **attrs):
    """An independent single-op session: x -> op -> y."""
    x = helper.make_tensor_value_info("x", dtype, None)
    y = helper.make_tensor_value_info("y", dtype, None)
    node = helper.make_node(op, ["x"], ["y"], domain=domain or None, **attrs)
    g = helper.make_graph([node], "t", [x], [y])
    ops = [helper.make_opsetid("", 20)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    m = helper.make_model(g, opset_imports=ops)
    m.ir_version = 10
    so = ort.SessionOptions()
    so.graph_optimization_level = {
        "off": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }[level]
    so.intra_op_num_threads = 1
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return lambda a: s.run(None, {"x": a})[0]


def same_bits(a, b) -> bool:
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return bool(np.array_equal(a.view(np.uint32), b.view(np.uint32)))


def test_tanh_fp16_every_input_is_the_engines_output_and_its_error_is_mpmaths():
    (r,) = audit.sweep("ort:Tanh", dtype="fp16", keep_points=True)
    p = r.points
    x16 = p.x.astype(np.float16)
    want = session("Tanh", TensorProto.FLOAT16)(x16).astype(np.float64)
    assert r.domain.count == 63488 and np.array_equal(p.got, want, equal_nan=True)
    mp.mp.prec = 100
    for i in np.random.default_rng(3).choice(len(p.x), 60, replace=False):
        t = mp.tanh(mp.mpf(float(p.x[i])))
        if t == 0:
            continue
        e = int(mp.floor(mp.log(abs(t), 2)))
        ulp = mp.ldexp(1, max(e, -14) - 10)
        assert p.ulp_err[i] == pytest.approx(
            float(abs(mp.mpf(float(p.got[i])) - t) / ulp), rel=1e-6, abs=1e-9
        )
    assert r.identity["engine"] == "onnxruntime" and r.identity["version"] == ort.__version__
    assert r.identity["op"] == "Tanh" and r.identity["dtype"] == "fp16"
    assert r.identity["dispatch"] == ort_engine.dispatch()
    assert r.to_dict()["identity"] == r.identity


def test_fp16_path_is_reported_as_the_graph_ort_runs():
    (c,) = engines.candidates_of("ort:Tanh", get_format("fp16"))
    assert c.identity["precision"] == "fp32 kernel between casts"
    (c32,) = engines.candidates_of("ort:Tanh", F32)
    assert c32.identity["precision"] == "fp32"


def test_a_session_is_never_reused_across_attributes_dtypes_or_levels():
    cache = base.SessionCache()
    eng = engines.get_engine("ort")
    x = np.linspace(-6, 6, 2001).astype(np.float32)
    built = {}
    for approx in ("none", "tanh"):
        for dt in ("fp32", "fp16"):
            for level in ("off", "all"):
                (c,) = base.engine_candidates(
                    eng,
                    "ort:Gelu",
                    get_format(dt),
                    {"approximate": approx, "ort.optimize": level},
                    cache=cache,
                )
                built[(approx, dt, level)] = c
    assert cache.builds == 8 and len(cache.sessions) == 8
    keys = {c.session_key for c in built.values()}
    assert len(keys) == 8
    # the same request again reuses its own session and builds nothing
    base.engine_candidates(eng, "ort:Gelu", F32, {"approximate": "tanh"}, cache=cache)
    assert cache.builds == 8
    # and each session computes its own attribute: compared with sessions built here
    for (approx, dt, level), c in built.items():
        if dt != "fp32":
            continue
        got = c.evaluate(x.astype(np.float64), F32, F32)
        want = session("Gelu", level=level, approximate=approx)(x)
        assert same_bits(got, want), (approx, level)
    a = built[("none", "fp32", "off")].evaluate(x.astype(np.float64), F32, F32)
    b = built[("tanh", "fp32", "off")].evaluate(x.astype(np.float64), F32, F32)
    assert not same_bits(a, b)


def test_gelu_tanh_and_fastgelu_are_one_kernel_and_erf_is_another():
    x = np.random.default_rng(0).standard_normal(50000).astype(np.float32) * 4
    g_tanh = session("Gelu", approximate="tanh")(x)
    fast = session("FastGelu", domain="com.microsoft")(x)
    g_none = session("Gelu")(x)
    assert same_bits(g_tanh, fast) and not same_bits(g_tanh, g_none)
    d = importlib.import_module("audit.compare.diff").diff
    r = d("ort:Gelu", "ort:FastGelu", "fp32", samples=20000, params={"approximate": "tanh"})
    assert r.verdict == "identical" and r.count > 20000
    r2 = d("ort:Gelu[approximate=none]", "ort:FastGelu", "fp32", samples=20000)
    assert r2.verdict != "identical"


def test_attributes_reach_the_engine_and_the_oracle():
    # Elu(alpha=0.5) at x = -1: 0.5 (e^-1 - 1) in float32, as ORT computes it here
    (c,) = engines.candidates_of("ort:Elu", F32, {"alpha": 0.5})
    x = np.array([-1.0, -3.0, 2.0])
    want = session("Elu", alpha=0.5)(x.astype(np.float32))
    assert same_bits(c.evaluate(x, F32, F32), want)
    assert c.reference_params({}) == {"alpha": 0.5}
    assert c.identity["attributes"] == {"alpha": 0.5}
    # per-target brackets and lists
    cs = engines.candidates_of("ort:LeakyRelu", F32, {"alpha": [0.1, 0.2]})
    assert [k.identity["attributes"]["alpha"] for k in cs] == [0.1, 0.2]


@pytest.mark.parametrize(
    "argv, text",
    [
        (["sweep", "ort:Nope"], "unknown onnxruntime op 'Nope'"),
        (["sweep", "ort:Gelu", "-p", "approximate=erf"], "'approximate' is one of none, tanh"),
        (["sweep", "ort:Gelu[alpha=1]"], "Gelu has no attribute 'alpha'"),
        (["sweep", "ort:Tanh", "--dtype", "bf16"], "ort:Tanh takes fp32, fp16, fp64, not bf16"),
        (["sweep", "ort:Tanh", "-p", "ort.optimize=fast"], "'optimize' is one of off, basic, extended, all"),
        (["sweep", "gelu.tanh", "-p", "approximate=tanh"], "is not a number"),
        (["sweep", "ort:QLinearSigmoid"], "reads and writes quantized codes"),
    ],
)
def test_bad_engine_input_is_one_line_and_exit_2(argv, text, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert text in err and len(err.strip().splitlines()) == 1


def test_an_engine_that_is_not_installed_is_one_line(monkeypatch, capsys):
    eng = engines.get_engine("ort")
    monkeypatch.setattr(type(eng), "module", "onnxruntime_not_installed_here")
    assert main(["sweep", "ort:Tanh"]) == 2
    err = capsys.readouterr().err
    assert "onnxruntime_not_installed_here is not installed" in err
    # the hint installs the extra from where this copy runs: here a checkout, so -e DIR[engines]
    # (actaudit is on no index a checkout's user reaches; 'actaudit[engines]' would fail)
    root = Path(__file__).resolve().parent.parent
    hint = err.strip().split(": ")[-1]
    assert shlex.split(hint)[:3] == ["pip", "install", "-e"], hint
    (target,) = shlex.split(hint)[3:]
    where, extra = target[:-1].split("[")
    assert extra == "engines" and (Path.cwd() / where).resolve() == root, hint
    assert (
        "engines" in tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    )


def test_install_hint_follows_where_actaudit_was_installed_from(tmp_path):
    from audit._version import hint_for

    checkout = tmp_path / "src"
    checkout.mkdir()
    (checkout / "pyproject.toml").write_text('[project]\nname = "actaudit"\n')
    site = tmp_path / "site-packages"  # an installed copy: no pyproject.toml above the package
    site.mkdir()
    url = checkout.as_uri()

    def direct(editable):
        return json.dumps({"url": url, "dir_info": {"editable": editable}})

    other = str(tmp_path)
    # running from the checkout (editable, or on PYTHONPATH): -e, '.' where it is the cwd
    assert hint_for("engines", str(checkout), None, str(checkout)) == "pip install -e '.[engines]'"
    assert hint_for("jax", str(checkout), None, other) == f"pip install -e '{checkout}[jax]'"
    # installed with `pip install DIR` (the README's first line), or -e DIR: from that directory
    assert hint_for("engines", str(site), direct(False), other) == f"pip install '{checkout}[engines]'"
    assert hint_for("engines", str(site), direct(True), str(checkout)) == "pip install -e '.[engines]'"
    # from an index (no direct_url.json), an unreadable one, or a directory that is gone
    gone = json.dumps({"url": (tmp_path / "gone").as_uri(), "dir_info": {}})
    for d in (None, "{not json", "[]", json.dumps({"url": 3, "dir_info": {}}), gone):
        assert hint_for("dask", str(site), d, other) == "pip install 'actaudit[dask]'", d


def test_a_refused_model_and_a_wrong_shape_are_one_line(monkeypatch):
    eng = engines.get_engine("ort")
    cache = base.SessionCache()

    def broken(key):
        raise RuntimeError("[ONNXRuntimeError] : 1 : FAIL :\n many\n lines")

    monkeypatch.setattr(eng, "build", broken)
    with pytest.raises(base.EngineError) as e:
        base.engine_candidates(eng, "ort:Tanh", F32, cache=cache)
    assert "refused the model" in str(e.value) and "\n" not in str(e.value)
    monkeypatch.undo()
    monkeypatch.setattr(eng, "build", lambda key: base.Session(lambda a: np.zeros(3, a.dtype), "fp32"))
    (c,) = base.engine_candidates(eng, "ort:Tanh", F32, cache=base.SessionCache())
    with pytest.raises(ActauditError, match=r"returned shape \(3,\), expected \(5,\)"):
        c.evaluate(np.zeros(5), F32, F32)


def test_faked_engine_version_changes_the_identity(monkeypatch):
    (r,) = audit.sweep("ort:Relu", dtype="fp16")
    monkeypatch.setattr(type(engines.get_engine("ort")), "version", lambda self: "0.0.1")
    (r2,) = audit.sweep("ort:Relu", dtype="fp16")
    assert r.identity["version"] == ort.__version__ and r2.identity["version"] == "0.0.1"
    assert r.identity != r2.identity
    assert {k: v for k, v in r.identity.items() if k != "version"} == {
        k: v for k, v in r2.identity.items() if k != "version"
    }


def test_string_parameters_parse_and_catalog_candidates_refuse_them():
    assert candidates.parse_param("approximate=tanh") == ("approximate", "tanh")
    assert candidates.parse_param("alpha=0.5") == ("alpha", 0.5)
    with pytest.raises(ActauditError, match="must be finite"):
        candidates.parse_param("alpha=nan")
    with pytest.raises(ActauditError, match="not a number"):
        candidates.parse_param("alpha=1/2")
    with pytest.raises(ActauditError, match="takes a number"):
        candidates.resolve(["elu.expm1"])[0].resolve_params({"alpha": "two"})


def test_layout_and_length_checks_run_on_engine_targets():
    from audit.compare import consistency

    rep = consistency.layout_check("ort:Sigmoid", "fp32", max_length=17, values=256)
    assert not rep.findings and "length 17" in rep.shapes and "0-d" in rep.shapes
    # independently: lengths 1..9 of the same values give the bits of one call
    s = session("Sigmoid")
    x = np.random.default_rng(1).standard_normal(72).astype(np.float32) * 20
    whole = s(x)
    for n in range(1, 10):
        parts = np.concatenate([s(x[i : i + n]) for i in range(0, len(x), n)])
        assert same_bits(parts, whole)


def test_quantized_sigmoid_codes_are_the_engines():
    from audit.measure import quant

    (r,) = quant.sweep("ort:QLinearSigmoid", "int8:scale=0.0625,zero=0", "int8:scale=0.0078125,zero=-128")
    x = helper.make_tensor_value_info("x", TensorProto.INT8, None)
    y = helper.make_tensor_value_info("y", TensorProto.INT8, None)
    ins = [
        helper.make_tensor_value_info(n, t, [])
        for n, t in (
            ("a", TensorProto.FLOAT),
            ("b", TensorProto.INT8),
            ("c", TensorProto.FLOAT),
            ("d", TensorProto.INT8),
        )
    ]
    node = helper.make_node("QLinearSigmoid", ["x", "a", "b", "c", "d"], ["y"], domain="com.microsoft")
    m = helper.make_model(
        helper.make_graph([node], "q", [x, *ins], [y]),
        opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid("com.microsoft", 1)],
    )
    m.ir_version = 10
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    codes = np.arange(-128, 128).astype(np.int8)
    arr = np.array
    feed = {
        "x": codes,
        "a": arr(0.0625, np.float32),
        "b": arr(0, np.int8),
        "c": arr(2.0**-7, np.float32),
        "d": arr(-128, np.int8),
    }
    want = s.run(None, feed)[0].astype(np.float64)
    assert np.array_equal(r.got, want) and r.count == 256
    # and the oracle code at x = 0: sigmoid(0) = 1/2 -> 0.5 / 2^-7 - 128 = -64 exactly
    i = int(np.flatnonzero(r.x == 0)[0])
    assert r.want[i] == -64
    assert r.identity["op"] == "QLinearSigmoid"


def test_engines_matrix_fits_80_columns_and_holds_the_engine_rows():
    m = matrix.run("tanh", "fp8_e4m3")  # ORT takes no fp8: its row says which types it takes
    text = engines_table.table(m)
    assert max(len(line) for line in text.splitlines()) <= 80
    row = next(r for r in m.rows if r.target == "ort:Tanh")
    assert row.result is None and "takes fp32, fp16, fp64" in row.note
    m16 = matrix.run("erf", "fp16")
    row = next(r for r in m16.rows if r.target == "ort:Erf")
    x = get_format("fp16").finite_values().astype(np.float16)
    want = session("Erf", TensorProto.FLOAT16)(x).astype(np.float64)
    (again,) = audit.sweep("ort:Erf", dtype="fp16", keep_points=True)
    assert np.array_equal(again.points.got, want) and row.result.max_ulp == again.max_ulp
    assert m16.rows[-1].engine == "catalog"
    assert max(len(line) for line in engines_table.table(m16).splitlines()) <= 80


def test_a_baseline_of_another_engine_version_does_not_pass_check(tmp_path, monkeypatch, capsys):
    """After `pip install -U onnxruntime` the engine's version differs from the one the
    baseline recorded: check fails (re-record), it never compares the figures. The upgrade is
    simulated by editing the recorded version, and by faking the installed one."""
    import json

    import onnxruntime

    from audit.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "actaudit.toml").write_text(
        'baseline = "base.json"\n[[audit]]\nname = "e"\ntargets = ["ort:Tanh"]\ndtype = "fp16"\n'
    )
    assert main(["baseline"]) == 0
    assert main(["check"]) == 0
    base = json.loads((tmp_path / "base.json").read_text())
    ((key, ent),) = base["entries"].items()
    assert ent["identity"]["candidate_identity"]["version"] == onnxruntime.__version__
    capsys.readouterr()
    # the baseline was recorded with another version
    ent["identity"]["candidate_identity"]["version"] = "1.0.0"
    (tmp_path / "base.json").write_text(json.dumps(base))
    assert main(["check"]) == 1
    out = capsys.readouterr().out
    assert "re-record with actaudit baseline" in out and "improved" not in out.split("results")[0]
    # or the installed engine is another version than the recorded one
    ent["identity"]["candidate_identity"]["version"] = onnxruntime.__version__
    (tmp_path / "base.json").write_text(json.dumps(base))
    monkeypatch.setattr(onnxruntime, "__version__", "99.0.0")
    assert main(["check"]) == 1
    assert "re-record with actaudit baseline" in capsys.readouterr().out
