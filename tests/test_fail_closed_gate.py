"""Fail closed, second pass (issue #39, items 1-5, 11 and 13): a shadowed spec, verdict
settings not recorded, cflags that hide headers, checkpoints that outlive their code,
rounded engine labels, HTML in Markdown, identities bound to paths or missing the
environment.

Each test reproduces the attack and asserts what stops it; expected values come from the
test's own arithmetic, an engine session it builds, or a C compiler it runs.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from helpers import required as need

import audit
from audit.cli import main  # noqa: F401  (the CLI tests below)


# ------------------------------------------------------------------ item 5: labels
def test_engine_attributes_are_written_exactly_and_never_collapse():
    ort = need("onnxruntime")
    need("onnx")
    from onnx import TensorProto, helper

    alphas = (1.0000001, 1.0000002)
    rs = audit.sweep(
        [f"ort:Elu[alpha={a!r}]" for a in alphas], "fp32", samples=64, range=(-4.0, -1.0), seed=1
    )
    assert [r.candidate for r in rs] == [f"ort:Elu[alpha={a!r}]" for a in alphas]
    for a, r in zip(alphas, rs):
        assert r.identity["attributes"]["alpha"] == a
        assert f"alpha={a!r}" in r.to_dict()["candidate"]
    # and each is the session of its own alpha (float32 attributes: two distinct values)
    assert np.float32(alphas[0]) != np.float32(alphas[1])
    x = np.array([-3.0], np.float32)
    outs = []
    for a in alphas:
        node = helper.make_node("Elu", ["x"], ["y"], alpha=a)
        g = helper.make_graph(
            [node],
            "t",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        )
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
        m.ir_version = 10
        s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        outs.append(s.run(None, {"x": x})[0])
    assert outs[0].tobytes() != outs[1].tobytes()  # the two really differ


def test_an_integral_attribute_keeps_its_short_label():
    from audit.targets.engines.base import _show

    assert _show(1.0) == "1" and _show(0.1) == "0.1" and _show(3) == "3"
    assert float(_show(1.0000001)) == 1.0000001 and _show(1e-300) == "1e-300"


# ------------------------------------------------------- item 11: HTML in Markdown
HOSTILE = "x<img src=x onerror=alert(1)>&amp;\\|.npz"


def test_markdown_summary_and_tables_carry_no_raw_html():
    import xml.etree.ElementTree as ET

    from audit.gate.check import Change
    from reports import junit, markdown
    from reports.cells import md_text

    changes = [
        Change(f"a/dump:{HOSTILE}/fp16/fp16", f"dump:{HOSTILE}", "fail", [f"dump:{HOSTILE} got worse"]),
        Change("baseline", "baseline", "warning", [f"recorded by actaudit <b>{HOSTILE}"]),
    ]
    md = markdown.render(changes)
    for line in md.splitlines():
        # outside code spans no '<' or '>' at all, and every '&' starts a reference
        outside = "".join(line.split("`")[0::2])
        assert "<" not in outside and ">" not in outside, line
        import re

        assert "&" not in re.sub("&(amp|lt|gt|#92);", "", outside), line
    assert md_text("a<b>&c\\|d") == "a&lt;b&gt;&amp;c&#92;\\|d"
    # JUnit: well-formed XML whose text reads back exactly as the name
    xml = junit.render(changes)
    assert "<img" not in xml
    tc = ET.fromstring(xml.split("\n", 1)[1]).find("testsuite/testcase")
    assert tc.get("name") == f"a/dump:{HOSTILE}/fp16/fp16"


def test_sweep_markdown_table_escapes_a_callable_name(capsys, monkeypatch):
    import reports.table as table

    class R:  # one row, as reports/table.py reads a result
        pass

    monkeypatch.setattr(table, "_wide_row", lambda r: [HOSTILE] + ["1"] * 15)
    monkeypatch.setattr(table, "findings_summary", lambda r: "")
    md = table.markdown([R()])
    row = next(ln for ln in md.splitlines() if ln.startswith("| x"))
    assert "<img" not in row and "&lt;img src=x onerror=alert(1)&gt;&amp;amp;&#92;\\|.npz" in row


# --------------------------------------------- item 13: a C kernel's engine line
def test_a_c_kernels_note_names_its_compiler_not_none(tmp_path):
    import shutil

    if shutil.which("gcc") is None:
        pytest.fail("gcc is needed to compile the kernel")
    from reports.table import compact, engine_notes

    k = tmp_path / "k.c"
    k.write_text(
        "#include <stddef.h>\nvoid f(const float *x, float *y, size_t n)"
        "{ for (size_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : 0; }\n"
    )
    (r,) = audit.sweep([f"c:{k}:f"], "fp16", reference="relu", cflags="-O1")
    notes = engine_notes([r])
    assert len(notes) == 1 and "None" not in notes[0], notes
    assert "-O1" in notes[0] and "C kernel compiled by" in notes[0]
    assert "None None" not in compact([r], 200)


# ------------------------------------------------------- item 1: a shadowed spec
def _run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_two_spec_sources_are_an_error_naming_both(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.actaudit]\nbaseline = "b.json"\n[[tool.actaudit.audit]]\nname = "t"\n'
        'targets = ["relu.max", "relu6.clamp"]\ndtype = "fp8_e4m3"\n'
    )
    assert main(["baseline"]) == 0
    capsys.readouterr()
    # the 4-line file that would take over, gating one entry of the two
    (tmp_path / "actaudit.toml").write_text(
        'baseline = "b.json"\n[[audit]]\nname = "t"\ntargets = ["relu.max"]\ndtype = "fp8_e4m3"\n'
    )
    for cmd in ("check", "baseline"):
        code, out, err = _run(capsys, cmd)
        assert code == 2, (cmd, out)
        (line,) = err.strip().splitlines()
        assert line.startswith("actaudit: error: two audit specs:")
        assert "actaudit.toml" in line and "pyproject.toml" in line
    # naming one is a choice: then the entry it lost fails unless dropped on purpose
    code, out, _ = _run(capsys, "check", "--spec", "actaudit.toml")
    assert code == 1 and "FAIL     t/relu6.clamp/fp8_e4m3/fp8_e4m3: in the baseline but no longer" in out
    code, out, _ = _run(capsys, "check", "--spec", "actaudit.toml", "--allow-removed")
    assert code == 0 and "removed  t/relu6.clamp/fp8_e4m3/fp8_e4m3" in out
    code, out, _ = _run(capsys, "check", "--spec", "pyproject.toml")
    assert code == 0, out


def test_ci_run_does_not_allow_removed_entries():
    from pathlib import Path

    text = (Path(__file__).parent.parent / ".ci" / "run").read_text()
    assert "actaudit check" in text and "--allow-removed" not in text


# ---------------------------------------------- item 2: the verdict is recorded
SPEC2 = (
    'baseline = "b.json"\n{slack}[[audit]]\nname = "t"\ntargets = ["sigmoid.stable"]\n'
    'dtype = "fp8_e4m3"\n{tol}'
)


def _spec2(tmp_path, slack="", tol="tolerance = { max_ulp = 4, nan = false, safe_range = [-1.0, 1.0] }\n"):
    (tmp_path / "actaudit.toml").write_text(SPEC2.format(slack=slack, tol=tol))


def test_a_looser_slack_than_recorded_fails_saying_re_record(tmp_path, monkeypatch, capsys):
    import json

    monkeypatch.chdir(tmp_path)
    _spec2(tmp_path)
    assert main(["baseline"]) == 0
    doc = json.loads((tmp_path / "b.json").read_text())
    assert doc["verdict"]["slack"] == 1e-9
    assert doc["verdict"]["tolerances"] == {
        "t/sigmoid.stable/fp8_e4m3/fp8_e4m3": {"max_ulp": 4, "nan": False, "safe_range": [-1.0, 1.0]}
    }
    capsys.readouterr()
    # the attack: one line that would let every metric almost double
    _spec2(tmp_path, slack="slack = 0.999999\n")
    code, out, _ = _run(capsys, "check")
    assert code == 1
    assert "FAIL     verdict: slack raised: 1e-09 -> 0.999999; re-record with actaudit baseline" in out
    # a metric almost doubled in the baseline's eyes: caught as a worse metric by the recorded
    # slack once the slack is put back (the gate compares with the recorded figures)
    _spec2(tmp_path, slack="slack = 0.0\n")  # stricter: no new baseline needed
    code, out, _ = _run(capsys, "check")
    assert code == 0, out


@pytest.mark.parametrize(
    "tol,said",
    [
        ("tolerance = { max_ulp = 8, nan = false, safe_range = [-1.0, 1.0] }\n", "'max_ulp' raised: 4 -> 8"),
        ("tolerance = { nan = false, safe_range = [-1.0, 1.0] }\n", "'max_ulp' was removed"),
        ("tolerance = { max_ulp = 4, safe_range = [-1.0, 1.0] }\n", "'nan' allows NAN results"),
        ("tolerance = { max_ulp = 4, nan = false, safe_range = [-0.5, 1.0] }\n", "'safe_range' narrowed"),
        ("", "'max_ulp' was removed"),
    ],
)
def test_a_looser_tolerance_than_recorded_fails(tmp_path, monkeypatch, capsys, tol, said):
    monkeypatch.chdir(tmp_path)
    _spec2(tmp_path)
    assert main(["baseline"]) == 0
    capsys.readouterr()
    _spec2(tmp_path, tol=tol)
    code, out, _ = _run(capsys, "check")
    assert code == 1 and said in out and "re-record with actaudit baseline" in out, out


def test_a_stricter_tolerance_needs_no_new_baseline(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _spec2(tmp_path)
    assert main(["baseline"]) == 0
    _spec2(tmp_path, tol="tolerance = { max_ulp = 2, nan = false, inf = false, safe_range = [-1.0, 1.5] }\n")
    code, out, _ = _run(capsys, "check")
    assert code == 0, out


def test_a_loosened_diff_expectation_and_certification_fail():
    from audit.gate import verdict

    assert verdict.looser_expect("not-worse", "identical")
    assert not verdict.looser_expect("identical", "not-worse")

    class S:
        slack, require_certified = 1e-9, False

    rec = {"slack": 1e-9, "require_certified": True}
    (msg,) = verdict.looser_spec(S, rec)
    assert msg.startswith("require_certified is no longer true") and "re-record" in msg


@pytest.mark.parametrize(
    "verdict,said",
    [
        (None, "key 'verdict' is missing"),
        ({"slack": "nan", "require_certified": False, "tolerances": {}, "expects": {}}, "verdict.slack"),
        ({"slack": 0.0, "require_certified": False, "tolerances": {}}, "verdict.expects' is missing"),
        (
            {"slack": 0.0, "require_certified": False, "tolerances": {"k": {"max_ulp": -1}}, "expects": {}},
            "verdict.tolerances.k.max_ulp",
        ),
        (
            {"slack": 0.0, "require_certified": 0, "tolerances": {}, "expects": {}, "x": 1},
            "verdict.x' is unknown",
        ),
    ],
)
def test_a_malformed_verdict_section_is_one_line(tmp_path, monkeypatch, capsys, verdict, said):
    import json

    monkeypatch.chdir(tmp_path)
    _spec2(tmp_path)
    assert main(["baseline"]) == 0
    doc = json.loads((tmp_path / "b.json").read_text())
    if verdict is None:
        del doc["verdict"]
    else:
        doc["verdict"] = verdict
    (tmp_path / "b.json").write_text(json.dumps(doc))
    capsys.readouterr()
    code, _, err = _run(capsys, "check")
    assert code == 2 and err.count("\n") == 1 and said in err, err


# ------------------------------------------------- item 3: cflags that hide headers
KERNEL = (
    '#include <stddef.h>\n#include "k.h"\nvoid f(const float *x, float *y, size_t n)'
    "{ for (size_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] * K : 0; }\n"
)


def _kernel(tmp_path, k="1.0f"):
    (tmp_path / "k.h").write_text(f"#define K {k}\n")
    (tmp_path / "k.c").write_text(KERNEL)
    return tmp_path / "k.c"


@pytest.mark.parametrize(
    "flag",
    [
        "--output=/dev/null",
        "-Wl,-o,VICTIM",
        "--compile",
        "--preprocess",
        "-save-temps",
        "-o",
        "-oVICTIM",
        "-MD",
        "-MFVICTIM",
        "-M",
        "-E",
        "-c",
        "-Wp,-MD,VICTIM",
        "-Xlinker",
        "-fplugin=./evil.so",
        "-fpreprocessed",
        "-fdump-tree-all",
        "-fprofile-generate",
        "-fprofile-use=VICTIM",
        "-specs=VICTIM",
        "-include",
        "-nostdinc",
        "-INOSUCHDIR",
        "-ffile-prefix-map=/a=/b",
        "-D",
    ],
)
def test_a_flag_off_the_allow_list_is_one_line_and_touches_nothing(tmp_path, capsys, flag):
    k = _kernel(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    flag = flag.replace("VICTIM", str(victim))
    code = main(["sweep", f"c:{k}:f", "--reference", "relu", "--dtype", "fp16", "--cflags", f"-O2 {flag}"])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and err.startswith("actaudit: error: --cflags:"), err
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize(
    "flags",
    [
        "-O3 -ffast-math -fno-math-errno -ffp-contract=off -march=x86-64 -mtune=generic -std=c11",
        "-O2 -DK2=3 -UK3 -fexcess-precision=standard",
        "-Ofast -mfma",
        "-O0",
    ],
)
def test_flags_on_the_allow_list_compile(tmp_path, flags):
    import platform

    if "-mfma" in flags and platform.machine() not in ("x86_64", "AMD64"):
        flags = flags.replace("-mfma", "")
    if "-march=x86-64" in flags and platform.machine() not in ("x86_64", "AMD64"):
        flags = flags.replace("-march=x86-64 -mtune=generic", "")
    k = _kernel(tmp_path)
    (r,) = audit.sweep([f"c:{k}:f"], "fp16", reference="relu", cflags=flags + f" -I{tmp_path}")
    assert r.max_ulp == 0  # relu, exactly (K = 1)


def test_spec_cflags_are_checked_against_the_allow_list(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    k = _kernel(tmp_path)
    (tmp_path / "actaudit.toml").write_text(
        f'[[audit]]\nname = "c"\ntargets = ["c:{k}:f"]\nreference = "relu"\ndtype = "fp16"\n'
        'cflags = ["-O2", "--output=/dev/null"]\n'
    )
    code, _, err = _run(capsys, "check")
    assert code == 2 and err.count("\n") == 1
    assert "key 'audit[0].cflags'" in err and "'--output=/dev/null'" in err


def test_an_edited_header_changes_the_digest_and_the_result(tmp_path):
    k = _kernel(tmp_path)
    (a,) = audit.sweep([f"c:{k}:f"], "fp16", reference="relu", cflags="-O2")
    _kernel(tmp_path, "2.0f")  # the header only
    (b,) = audit.sweep([f"c:{k}:f"], "fp16", reference="relu", cflags="-O2")
    assert a.identity["kernel_digest"] != b.identity["kernel_digest"]
    assert a.max_ulp == 0 and b.max_ulp > 0  # 2x is not relu: the new header was compiled


@pytest.mark.parametrize("written", [None, "kernel:\n", "kernel: /usr/include/stddef.h\n"])
def test_the_dependency_list_comes_from_actauditss_own_file_and_must_name_the_kernel(
    tmp_path, monkeypatch, written
):
    from audit.targets import ckernels

    k = _kernel(tmp_path)
    real = ckernels._run

    def fake(cmd, stdin=b"", timeout=ckernels.COMPILE_TIMEOUT_S):
        if "-M" in cmd:  # a compiler that sends its list anywhere but the file asked for
            mf = cmd[cmd.index("-MF") + 1]
            assert os.path.dirname(mf) != str(tmp_path) and os.path.basename(mf) == "kernel.d"
            if written is not None:
                with open(mf, "w") as fh:
                    fh.write(written)
            return 0, b"kernel: " + str(k).encode() + b"\n", b""
        return real(cmd, stdin, timeout)

    monkeypatch.setattr(ckernels, "_run", fake)
    with pytest.raises(ckernels.KernelError) as e:
        ckernels.compile_kernel(k, "-O2", "f")
    assert "dependency list" in str(e.value)


# ------------------------------------ item 4: checkpoints bound to the candidate's identity
RNG4 = (1.0, 1.0 + 2.0**-9)  # 2^14 + 1 fp32 inputs: 5 chunks of 2^12


def _ck_sweep(target, d, monkeypatch, **kw):
    from audit.numbers import inputs

    monkeypatch.setattr(inputs, "CHUNK", 1 << 12)
    (r,) = audit.sweep(target, "fp32", range=RNG4, exhaustive=True, workers=1, checkpoint=d, **kw)
    return r


def test_a_rewritten_c_kernel_never_resumes_from_the_old_checkpoint(tmp_path, monkeypatch):
    import json

    k = tmp_path / "k.c"
    body = "#include <stddef.h>\nvoid f(const float *x, float *y, size_t n){{ for (size_t i = 0; i < n; i++) y[i] = {}; }}\n"
    k.write_text(body.format("x[i]"))
    ck = tmp_path / "ck"
    a = _ck_sweep(f"c:{k}:f", ck, monkeypatch, reference="relu")
    assert a.max_ulp == 0 and a.domain.count == 2**14 + 1  # relu(x) = x on [1, 1 + 2^-9]
    (state,) = ck.glob("*.json")
    fp = json.loads(state.read_text())["fingerprint"]
    # the checkpoint holds the identity the baseline records (one identity, not a copy of it)
    assert fp["identity"] == json.loads(json.dumps(a.identity))
    assert fp["identity"]["kernel_digest"] and fp["identity"]["cflags"] == ["-O2"]
    k.write_text(body.format("0.0f"))  # the kernel rewritten to return 0
    b = _ck_sweep(f"c:{k}:f", ck, monkeypatch, reference="relu")
    # every output 0 where relu(x) = x >= 1: the error of x = 1 alone is 2^23 ULP (ulp(1) = 2^-23)
    assert b.max_ulp >= 2**23
    assert len(list(ck.glob("*.json"))) == 2  # a new state, the old one untouched


def test_a_rewritten_callable_never_resumes_from_the_old_checkpoint(tmp_path, monkeypatch):
    import sys

    mod = tmp_path / "ckmod_fc1.py"
    mod.write_text("import numpy as np\n\ndef f(x):\n    return x.copy()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ck = tmp_path / "ck"
    a = _ck_sweep("ckmod_fc1:f", ck, monkeypatch, reference="relu")
    assert a.max_ulp == 0
    assert a.identity["callable"] == "ckmod_fc1:f" and a.identity["module_file"]
    mod.write_text("import numpy as np\n\ndef f(x):\n    return np.zeros_like(x)\n")
    sys.modules.pop("ckmod_fc1", None)
    b = _ck_sweep("ckmod_fc1:f", ck, monkeypatch, reference="relu")
    assert b.max_ulp >= 2**23
    assert a.identity["code"] != b.identity["code"]
    assert a.identity["module_file"] != b.identity["module_file"]


def test_two_callables_of_one_name_are_two_identities():
    from audit.targets.identity import callable_identity

    ns1, ns2 = {}, {}
    exec("def f(x):\n    return x + 1\n", ns1)
    exec("def f(x):\n    return x + 2\n", ns2)
    assert ns1["f"].__qualname__ == ns2["f"].__qualname__
    assert callable_identity(ns1["f"])["code"] != callable_identity(ns2["f"])["code"]
    k = 3.0
    g1 = (lambda k: lambda x: x * k)(k)
    g2 = (lambda k: lambda x: x * k)(4.0)
    assert callable_identity(g1)["code"] != callable_identity(g2)["code"]  # the closure's value
    # a closure holding a class, an array, a numpy scalar, itself: digested, never an error
    t, arr = np.float32, np.arange(3.0)

    def h(x):
        return t(x) + arr[0] + np.float64(2.0) + (h if False else 0)

    a1 = callable_identity(h)["code"]
    arr[0] = 5.0
    assert callable_identity(h)["code"] != a1  # the array's bytes are part of it


# ------------------------------ item 13: the environment in the engine identity
def test_the_environment_that_changes_kernels_is_in_the_identity(monkeypatch):
    need("onnxruntime")
    from audit.numbers.formats import get_format
    from audit.targets import engines

    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    (a,) = engines.candidates_of("ort:Sigmoid", get_format("fp32"), {})
    assert "ONEDNN_MAX_CPU_ISA" not in a.identity["environment"]
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    monkeypatch.setenv("ORT_SOME_SETTING", "1")
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=true")  # not ORT's
    (b,) = engines.candidates_of("ort:Sigmoid", get_format("fp32"), {})
    assert b.identity["environment"]["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert b.identity["environment"]["ORT_SOME_SETTING"] == "1"
    assert "XLA_FLAGS" not in b.identity["environment"]


def test_xla_flags_are_in_a_jax_identity(monkeypatch):
    from audit.targets.identity import environment

    env = {"XLA_FLAGS": "--xla_cpu_enable_fast_math=true", "HOME": "/root", "DNNL_MAX_CPU_ISA": "SSE41"}
    assert environment("jax", env) == {
        "DNNL_MAX_CPU_ISA": "SSE41",
        "XLA_FLAGS": "--xla_cpu_enable_fast_math=true",
    }
    assert environment("openvino", {"OV_CPU_DENORMALS_OPTIMIZATION": "YES"}) == {
        "OV_CPU_DENORMALS_OPTIMIZATION": "YES"
    }
    assert environment("c", {"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2"}) == {
        "GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2"
    }


def test_check_fails_re_record_when_an_isa_cap_changes(tmp_path, monkeypatch, capsys):
    need("onnxruntime")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
    (tmp_path / "actaudit.toml").write_text(
        'baseline = "b.json"\n[[audit]]\nname = "e"\ntargets = ["ort:Sigmoid"]\ndtype = "fp16"\n'
    )
    assert main(["baseline"]) == 0
    assert main(["check"]) == 0
    capsys.readouterr()
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "SSE41")
    code, out, _ = _run(capsys, "check")
    assert code == 1 and "ONEDNN_MAX_CPU_ISA" in out and "re-record" in out


# ------------------------------- item 13: an npy: distribution bound to its digest
def test_an_npy_distribution_is_bound_to_its_digest_not_its_path(tmp_path, monkeypatch, capsys):
    import json

    sub = tmp_path / "sub"
    sub.mkdir()
    np.save(sub / "w.npy", np.linspace(-4.0, 4.0, 1001))
    (sub / "actaudit.toml").write_text(
        'baseline = "b.json"\n[[audit]]\nname = "w"\ntargets = ["sigmoid.stable"]\n'
        'dtype = "fp8_e4m3"\ndistribution = "npy:w.npy"\n'
    )
    monkeypatch.chdir(sub)
    assert main(["baseline"]) == 0
    assert main(["check"]) == 0
    (e,) = json.loads((sub / "b.json").read_text())["entries"].values()
    import hashlib

    a = np.load(sub / "w.npy")
    want = hashlib.sha256(f"{a.dtype.str}{a.shape}".encode() + a.tobytes()).hexdigest()
    assert e["identity"]["distribution"] == f"npy:sha256:{want}"
    assert e["weighted"]["distribution"] == f"npy:sha256:{want}"
    capsys.readouterr()
    monkeypatch.chdir(tmp_path)  # the same spec, checked from another directory
    code, out, _ = _run(capsys, "check", "--spec", "sub/actaudit.toml")
    assert code == 0, out
    np.save(sub / "w.npy", np.linspace(-4.0, 4.0, 1003))  # another sample at the same path
    code, out, _ = _run(capsys, "check", "--spec", "sub/actaudit.toml")
    assert code == 1 and "re-record" in out


def test_a_baseline_number_beyond_float64_or_python_is_one_line(tmp_path, capsys):
    """Found by the hostile review: 10^400 (an integer no float64 holds) and an integer of
    5000 digits (more than Python converts) in a baseline ended in tracebacks."""
    import json

    from audit.cli import main

    spec = tmp_path / "actaudit.toml"
    spec.write_text(
        'baseline = "base.json"\nslack = 0.0\n[[audit]]\nname = "a"\ntargets = ["gelu.tanh"]\n'
        'dtype = "fp8_e4m3"\ntolerance = { max_ulp = 20 }\n'
    )
    assert main(["baseline", "--spec", str(spec)]) == 0
    doc = json.loads((tmp_path / "base.json").read_text())
    (key,) = doc["entries"]
    capsys.readouterr()
    for field, text in (("max_ulp", str(10**400)), ("inf_count", "9" * 5000)):
        raw = json.dumps(doc).replace(
            f'"{field}": {json.dumps(doc["entries"][key][field])}', f'"{field}": {text}', 1
        )
        assert text in raw
        bad = tmp_path / f"bad-{field}.json"
        bad.write_text(raw)
        code = main(["check", "--spec", str(spec), "--baseline", str(bad)])
        err = capsys.readouterr().err
        assert code == 2 and err.startswith("actaudit: error:") and err.count("\n") == 1, (field, err)


def test_an_npy_distribution_wholly_beyond_the_format_is_one_line(tmp_path, capsys):
    """Found by the hostile review: every sample beyond fp16's range (1e6, 2e6) left the
    bound distribution without a value and ended in an IndexError; no input has mass."""
    import numpy as np

    from audit.cli import main

    np.save(tmp_path / "d.npy", np.array([1e6, 2e6]))
    code = main(["sweep", "relu", "-d", "fp16", "-q", "--distribution", f"npy:{tmp_path / 'd.npy'}"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("actaudit: error:") and "no mass" in err and err.count("\n") == 1
