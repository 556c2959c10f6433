"""The gate fails closed on edited specs and baselines and on empty evidence (issue 23,
items 1-3 and the spec gaps): every case of the issue reproduced, each now exit 1 or 2
with one line.

Independent sides: relu's exact values are max(x, 0) computed by numpy here; the C kernels
are compiled by gcc; a regression is a formula written in the test, checked to be worse
above x = 5 with mpmath before it is used."""

from __future__ import annotations

import dataclasses
import json
import math

import mpmath as mp
import numpy as np
import pytest

from audit.cli import main
from audit.gate.schema import IDENTITY_FIELDS, SPEC_KEYS
from audit.targets import candidates


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def one_error(code, err, *needles):
    """Exit 2, one line on stderr, naming each needle."""
    assert code == 2, err
    assert err.startswith("actaudit: error:") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for n in needles:
        assert n in err, (n, err)


def fail_lines(out):
    return [x for x in out.splitlines() if x.startswith("FAIL")]


RELU = '[[audit]]\nname = "t"\ntargets = ["relu.max"]\ndtype = "fp8_e4m3"\n'


def write(tmp_path, body, baseline="b.json", name="actaudit.toml"):
    (tmp_path / name).write_text(f'baseline = "{baseline}"\n' + body)


# ----------------------------------------------------------------- 1. unknown keys
@pytest.mark.parametrize(
    "body,needle",
    [
        # a tolerance table misplaced at the top level: was dropped, the audit then unbounded
        (RELU + "[tolerance]\nmax_ulp = 0\n", "key 'tolerance' is unknown in the spec's top level"),
        # [[diffs]] for [[diff]]: was dropped, the diff never ran
        (RELU + '[[diffs]]\nname = "d"\na = "relu.max"\nb = "relu.max"\ndtype = "fp16"\n', "'diffs'"),
        (RELU + "tolerance = { max_ulp = 0, max_upl = 1 }\n", "'audit[0].tolerance.max_upl'"),
        (
            RELU + '[[diff]]\nname = "d"\na = "relu.max"\nb = "relu.max"\ndtype = "fp16"\nexpct = "x"\n',
            "diff[0].expct",
        ),
        (RELU + "sampels = 3\n", "'audit[0].sampels' is unknown in [[audit]]"),
    ],
)
def test_unknown_keys_are_refused_at_every_level(tmp_path, monkeypatch, capsys, body, needle):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, body)
    for cmd in ("baseline", "check"):
        code, _, err = run(capsys, cmd)
        one_error(code, err, needle, "known:")
    assert not (tmp_path / "b.json").exists()


def test_unknown_keys_in_pyproject_are_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.actaudit]\nbaseline = "b.json"\nslak = 0.5\n\n'
        '[[tool.actaudit.audit]]\nname = "t"\ntargets = ["relu.max"]\ndtype = "fp8_e4m3"\n'
    )
    code, _, err = run(capsys, "baseline")
    one_error(
        code,
        err,
        "pyproject.toml",
        "'tool.actaudit.slak'",
        "known: audit, baseline, diff, model, require_certified, slack",
    )


def test_the_schema_is_one_data_structure():
    """Every level's keys carry a type and a description (the docs are made from them), and
    the gate's own key sets are these."""
    from audit.gate import check as gate
    from audit.gate import diffs as gate_diff

    assert set(SPEC_KEYS) == {"spec", "audit", "tolerance", "diff", "model", "model_tolerance"}
    for level in SPEC_KEYS.values():
        for k, key in level.items():
            assert key.type and key.description, k
    assert gate.AUDIT_KEYS == set(SPEC_KEYS["audit"]) and gate_diff.DIFF_KEYS == set(SPEC_KEYS["diff"])
    from audit.gate import models as gate_models

    assert gate_models.MODEL_KEYS == set(SPEC_KEYS["model"])
    assert "cflags" in SPEC_KEYS["audit"]
    from audit.measure import blocks

    assert set(SPEC_KEYS["audit"]["scale_rule"].allowed) == set(blocks.RULES)


# ------------------------------------------------------------------- spec gaps
def test_diff_params_must_be_finite(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # the CLI refuses --param limit=nan; so does the spec now
    write(
        tmp_path,
        RELU + '[[diff]]\nname = "d"\na = "gelu.tanh"\nb = "gelu.erfc"\ndtype = "fp8_e4m3"\n'
        "params = { limit = nan }\n",
    )
    code, _, err = run(capsys, "baseline")
    one_error(code, err, "diff[0].params", "finite")


def test_samples_with_exhaustive_blocks_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # samples was silently ignored
    write(
        tmp_path,
        '[[audit]]\nname = "b"\ntargets = ["gelu.tanh"]\ndtype = "fp8_e4m3"\nout_dtype = "mxfp4_e2m1"\n'
        'blocks = "exhaustive"\nsamples = 64\n',
    )
    code, _, err = run(capsys, "baseline")
    one_error(code, err, "audit[0].samples", "exhaustive")


def test_block_keys_on_a_float_audit_are_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, RELU + 'scale_rule = "ceil"\n')
    code, _, err = run(capsys, "baseline")
    one_error(code, err, "scale_rule", "float audit")


KERNEL = """
#include <stddef.h>
void relu(const float *x, float *y, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}
"""
BROKEN = """
#include <stddef.h>
void relu(const float *x, float *y, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = x[i] + 1.0f;
}
"""


def kernel_spec(flags=None):
    return (
        '[[audit]]\nname = "k"\ntargets = ["c:k.c:relu"]\nreference = "relu"\ndtype = "fp8_e4m3"\n'
        + ("" if flags is None else f"cflags = {flags}\n")
        + "tolerance = { max_ulp = 0 }\n"
    )


def test_c_paths_resolve_against_the_spec_file(tmp_path, monkeypatch, capsys):
    """c:k.c beside the spec is the kernel audited, not another k.c in the working directory
    (which was used before, while dump resolved against the spec); keys keep the spec's text."""
    monkeypatch.chdir(tmp_path)
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "k.c").write_text(KERNEL)
    (tmp_path / "k.c").write_text(BROKEN)  # off by 1: breaks max_ulp = 0 if it were run
    write(sub, kernel_spec())
    code, out, err = run(capsys, "baseline", "--spec", "sub/actaudit.toml")
    assert code == 0, out + err
    doc = json.loads((sub / "b.json").read_text())
    assert list(doc["entries"]) == ["k/c:k.c:relu/fp8_e4m3/native"]
    code, out, _ = run(capsys, "check", "--spec", "sub/actaudit.toml")
    assert code == 0 and "0 failed" in out


def test_table_and_dump_paths_resolve_against_the_spec_file(tmp_path, monkeypatch, capsys):
    """PRIM=table:FILE in semantics and dump:FILE in a [[diff]] are read beside the spec."""
    monkeypatch.chdir(tmp_path)
    sub = tmp_path / "sub"
    sub.mkdir()
    x = np.array([-2.0, -0.5, 0.25, 1.0, 3.0], dtype=np.float16)
    relu_dump(sub / "r.npz", x, np.maximum(x, np.float16(0)))  # relu, exactly
    assert main(["golden", "exp", "--dtype", "fp8_e4m3", "-o", "sub/t.npz"]) == 0  # the table's data
    write(
        sub,
        '[[audit]]\nname = "s"\ntargets = ["sigmoid.naive"]\ndtype = "fp8_e4m3"\n'
        'semantics = ["exp=table:t.npz"]\n'
        '[[diff]]\nname = "d"\na = "relu.max"\nb = "dump:r.npz"\nreference = "relu"\ndtype = "fp16"\n',
    )
    code, out, err = run(capsys, "baseline", "--spec", "sub/actaudit.toml")
    assert code == 0, out + err
    keys = sorted(json.loads((sub / "b.json").read_text())["entries"])
    assert keys == ["diff/d/fp16", "s/sigmoid.naive/fp8_e4m3/fp8_e4m3@exp=table:t.npz"]
    assert json.loads((sub / "b.json").read_text())["entries"]["diff/d/fp16"]["identity"]["inputs"] == 5
    code, out, _ = run(capsys, "check", "--spec", "sub/actaudit.toml")
    assert code == 0 and "0 failed" in out


def test_cflags_are_a_spec_key_and_part_of_the_entry(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k.c").write_text(KERNEL)
    write(tmp_path, kernel_spec('["-O1", "-DK=2 -DJ"]'))
    code, out, err = run(capsys, "baseline")
    assert code == 0, out + err
    (key,) = json.loads((tmp_path / "b.json").read_text())["entries"]
    e = json.loads((tmp_path / "b.json").read_text())["entries"][key]
    assert e["identity"]["cflags"] == ["-O1", "-DK=2 -DJ"]
    # the same words split otherwise are other flags: another entry, not the baseline's
    write(tmp_path, kernel_spec('"-O1 -DK=2 -DJ"'))
    code, out, _ = run(capsys, "check")
    assert code == 1 and any("not in the baseline" in x for x in fail_lines(out))
    write(tmp_path, kernel_spec("\"-O2 '-DK=2 -DJ'\""))  # split as a shell does: the same flags
    code, out, _ = run(capsys, "check")
    assert code == 1  # -O2 is not -O1
    write(tmp_path, kernel_spec("\"-O1 '-DK=2 -DJ'\""))
    code, out, _ = run(capsys, "check")
    assert code == 0, out


@pytest.mark.parametrize(
    "flags,needle",
    [("'-O2 \"x'", "cannot be split"), ("[]", "non-empty list"), ('["-O2", 3]', "one flag each")],
)
def test_bad_cflags_are_one_line(tmp_path, monkeypatch, capsys, flags, needle):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, kernel_spec(flags))
    code, _, err = run(capsys, "baseline")
    one_error(code, err, "audit[0].cflags", needle)


def test_cflags_without_a_c_kernel_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, RELU + 'cflags = "-O2"\n')
    code, _, err = run(capsys, "baseline")
    one_error(code, err, "cflags")


# ------------------------------------------------------------- 2. baseline identity
def worse_above_5(x, m):
    """sigmoid that is wrong above x = 5 (1 - e^-x / 2 there): the regression."""
    big = x > 5.0
    return m.where(big, 1.0 - 0.5 * m.exp(-x), 1.0 / (1.0 + m.exp(-x)))


def test_the_regression_is_real():
    """At x = 6 the replacement is off by about e^-6 / 2 = 0.00124 from sigmoid; an fp16 ulp
    below 1 is 2^-11 = 0.000488: off by more than 2 ulp, so the full range must see it."""
    exact = 1 / (1 + mp.exp(-6))
    wrong = 1 - mp.exp(-6) / 2
    assert abs(exact - wrong) > 2 * mp.mpf(2) ** -11


def test_narrowing_the_range_after_a_regression_fails(tmp_path, monkeypatch, capsys):
    """The issue: range [-10, 10] -> [-3, 3] after a regression above x = 5 passed and said
    'improved'."""
    monkeypatch.chdir(tmp_path)
    body = '[[audit]]\nname = "s"\ntargets = ["sigmoid.stable"]\ndtype = "fp16"\nrange = RANGE\n'
    write(tmp_path, body.replace("RANGE", "[-10.0, 10.0]"))
    assert main(["baseline"]) == 0
    old = candidates.REGISTRY["sigmoid.stable"]
    monkeypatch.setitem(candidates.REGISTRY, "sigmoid.stable", dataclasses.replace(old, fn=worse_above_5))
    capsys.readouterr()
    code, out, _ = run(capsys, "check")
    assert code == 1 and "got worse" in out  # the regression is seen over the recorded range
    write(tmp_path, body.replace("RANGE", "[-3.0, 3.0]"))
    code, out, _ = run(capsys, "check")
    (line,) = fail_lines(out)
    assert code == 1 and "range [-3.0, 3.0] (baseline [-10.0, 10.0])" in line
    assert "re-record with actaudit baseline" in line and "improved" not in line
    assert not [x for x in out.splitlines() if x.startswith("improved")]


def test_fewer_samples_fail(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # samples = 20000 -> 16 passed
    body = '[[audit]]\nname = "s"\ntargets = ["sigmoid.stable"]\ndtype = "fp32"\nsamples = N\n'
    write(tmp_path, body.replace("N", "2000"))
    assert main(["baseline"]) == 0
    write(tmp_path, body.replace("N", "16"))
    capsys.readouterr()
    code, out, _ = run(capsys, "check")
    (line,) = fail_lines(out)
    assert code == 1 and "samples 16 (baseline 2000)" in line and "inputs " in line


def baselined(tmp_path, monkeypatch, capsys, body):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, body)
    assert main(["baseline"]) == 0
    capsys.readouterr()
    return json.loads((tmp_path / "b.json").read_text())


def edit_check(tmp_path, capsys, doc, edit):
    ((key, e),) = doc["entries"].items()
    edit(e)
    (tmp_path / "b.json").write_text(json.dumps(doc))
    return run(capsys, "check")


@pytest.mark.parametrize(
    "edit,needle",
    [
        (lambda e: e["identity"].update(candidate="relu.other"), "candidate"),
        (lambda e: e.update(candidate="relu.other"), "entry.candidate"),
        (lambda e: e["identity"].update(dtype="fp8_e5m2"), "dtype"),
        (lambda e: e.update(dtype="fp8_e5m2"), "entry.dtype"),
        (lambda e: e.update(compute="fp32"), "entry.compute"),
        (lambda e: e["identity"].update(compute="fp32"), "compute"),
        (lambda e: e["identity"].update(params={"alpha": 1.0}), "params"),
        (lambda e: e.update(semantics="ftz"), "entry.semantics"),
        (lambda e: e["identity"].update(semantics="ftz"), "semantics"),
        (lambda e: e["identity"].update(inputs=9999), "inputs 254 (baseline 9999)"),
        (lambda e: e["identity"].update(seed=7), "seed 0 (baseline 7)"),
        (lambda e: e["identity"].update(range=[-1.0, 1.0]), "range null"),
        (lambda e: e["identity"].update(samples=5), "samples"),
        (lambda e: e["identity"].update(exhaustive=False), "exhaustive"),
        (lambda e: e["identity"].update(exhaustive=1), "exhaustive"),  # 1 is not true
        (lambda e: e["identity"].update(candidate_identity={"engine": "x"}), "candidate_identity"),
    ],
)
def test_an_edited_float_entry_fails(tmp_path, monkeypatch, capsys, edit, needle):
    doc = baselined(tmp_path, monkeypatch, capsys, RELU)
    code, out, _ = edit_check(tmp_path, capsys, doc, edit)
    (line,) = fail_lines(out)
    assert code == 1 and needle in line and "re-record with actaudit baseline" in line


def test_a_float_identity_holds_every_field(tmp_path, monkeypatch, capsys):
    doc = baselined(tmp_path, monkeypatch, capsys, RELU)
    ((key, e),) = doc["entries"].items()
    ident = e["identity"]
    assert tuple(ident) == tuple(sorted(IDENTITY_FIELDS["float"]))  # (written sorted)
    assert ident["inputs"] == 2 * (2**7 - 1)  # every finite fp8_e4m3 value: 127 codes a side
    assert ident["exhaustive"] is True and ident["seed"] == 0 and ident["distribution"] is None
    assert ident["candidate"] == "relu.max" and ident["reference"] == "relu"


@pytest.mark.parametrize("bad", [{}, {"x": 1}, "id"])
def test_a_malformed_identity_is_refused(tmp_path, monkeypatch, capsys, bad):
    doc = baselined(tmp_path, monkeypatch, capsys, RELU)
    code, _, err = edit_check(tmp_path, capsys, doc, lambda e: e.update(identity=bad))
    one_error(code, err, "identity")


def test_an_unknown_entry_key_is_refused(tmp_path, monkeypatch, capsys):
    doc = baselined(tmp_path, monkeypatch, capsys, RELU)
    code, _, err = edit_check(tmp_path, capsys, doc, lambda e: e.update(note="ok"))
    one_error(code, err, "note", "unknown")


def test_the_candidates_own_identity_is_recorded_and_compared(tmp_path, monkeypatch, capsys):
    old = candidates.REGISTRY["relu.max"]
    ident = {"engine": "fake", "version": "1.0", "dispatch": "avx2"}
    monkeypatch.setitem(candidates.REGISTRY, "relu.max", dataclasses.replace(old, identity=ident))
    doc = baselined(tmp_path, monkeypatch, capsys, RELU)
    ((_, e),) = doc["entries"].items()
    assert e["identity"]["candidate_identity"] == ident
    assert main(["check"]) == 0
    capsys.readouterr()
    new = dict(ident, version="1.1")
    monkeypatch.setitem(candidates.REGISTRY, "relu.max", dataclasses.replace(old, identity=new))
    code, out, _ = run(capsys, "check")
    (line,) = fail_lines(out)
    assert code == 1 and '"version": "1.1"' in line and '"version": "1.0"' in line


QUANT = (
    '[[audit]]\nname = "q"\ntargets = ["sigmoid.exp"]\ndtype = "int8:scale=0.0625,zero=0"\n'
    'out_dtype = "uint8:scale=0.00390625,zero=0,round=away"\n'
)
BLOCKS = (
    '[[audit]]\nname = "b"\ntargets = ["gelu.tanh"]\ndtype = "bf16"\nout_dtype = "mxfp8_e4m3"\n'
    'samples = 512\nseed = 3\nblocks = "normal:std=2"\n'
)


@pytest.mark.parametrize(
    "body,edit,needle",
    [
        (QUANT, lambda e: e.update(candidate="sigmoid.other"), "entry.candidate"),
        (QUANT, lambda e: e["identity"].update(dtype="int8:scale=0.125,zero=0"), "scale=0.125"),
        (QUANT, lambda e: e.update(out_dtype="uint8:scale=0.00390625,zero=1,round=away"), "zero=1"),
        (BLOCKS, lambda e: e.update(rule="ceil"), "entry.rule"),
        (BLOCKS, lambda e: e["identity"].update(distribution="normal:std=1"), "distribution"),
        (BLOCKS, lambda e: e["identity"].update(samples=4096), "samples"),
        (BLOCKS, lambda e: e["identity"].update(seed=0), "seed"),
    ],
)
def test_an_edited_format_entry_fails(tmp_path, monkeypatch, capsys, body, edit, needle):
    doc = baselined(tmp_path, monkeypatch, capsys, body)
    code, out, _ = edit_check(tmp_path, capsys, doc, edit)
    (line,) = fail_lines(out)
    assert code == 1 and needle in line and "re-record with actaudit baseline" in line


def test_block_rule_edited_in_the_spec_fails(tmp_path, monkeypatch, capsys):
    baselined(tmp_path, monkeypatch, capsys, BLOCKS.replace("seed = 3", 'seed = 3\nscale_rule = "ocp"'))
    write(tmp_path, BLOCKS.replace('blocks = "normal:std=2"', 'blocks = "normal:std=1"'))
    code, out, _ = run(capsys, "check")
    (line,) = fail_lines(out)
    assert code == 1 and "distribution" in line and "re-record" in line


def test_a_duplicate_json_key_is_refused(tmp_path, monkeypatch, capsys):
    """A loosened second copy of an entry's field (JSON keeps the last) is refused."""
    baselined(tmp_path, monkeypatch, capsys, RELU)
    text = (tmp_path / "b.json").read_text()
    assert text.count('"max_ulp": 0.0,') == 1
    (tmp_path / "b.json").write_text(text.replace('"max_ulp": 0.0,', '"max_ulp": 0.0, "max_ulp": 1e9,'))
    code, _, err = run(capsys, "check")
    one_error(code, err, "'max_ulp' appears twice")


def test_another_tool_version_warns_and_fails_with_strict(tmp_path, monkeypatch, capsys):
    doc = baselined(tmp_path, monkeypatch, capsys, RELU)
    doc["actaudit"] = "99.0"
    (tmp_path / "b.json").write_text(json.dumps(doc))
    code, out, _ = run(capsys, "check", "--junit", "j.xml", "--markdown", "s.md")
    warn = [x for x in out.splitlines() if x.startswith("WARNING")]
    assert code == 0 and len(warn) == 1 and "actaudit 99.0" in warn[0]
    assert "actaudit check: 1 results, 0 failed" in out  # the warning is not a result
    import xml.etree.ElementTree as ET

    suite = ET.parse(tmp_path / "j.xml").getroot().find("testsuite")
    assert suite.get("tests") == "1" and "actaudit 99.0" in suite.find("system-out").text
    md = (tmp_path / "s.md").read_text()
    assert "passed" in md and "Warning: recorded by actaudit 99.0" in md and "1 results" in md
    code, out, _ = run(capsys, "check", "--strict")
    (line,) = fail_lines(out)
    assert code == 1 and "actaudit 99.0" in line


@pytest.mark.parametrize(
    "edit,needle",
    [
        (lambda d: d.pop("actaudit"), "'actaudit' is missing"),
        (lambda d: d.update(actaudit=3), "'actaudit' must be"),
        (lambda d: d.pop("schema"), "'schema' is missing"),
        (lambda d: d.update(schema="actaudit.baseline/2"), "actaudit.baseline/2"),
        (lambda d: d.update(schema="actaudit.baseline/99"), "'schema'"),
        (lambda d: d.update(extra=1), "'extra' is unknown"),
    ],
)
def test_version_and_schema_are_checked(tmp_path, monkeypatch, capsys, edit, needle):
    doc = baselined(tmp_path, monkeypatch, capsys, RELU)
    edit(doc)
    (tmp_path / "b.json").write_text(json.dumps(doc))
    code, _, err = run(capsys, "check")
    one_error(code, err, needle)


# ---------------------------------------------------------------- 3. evidence
def relu_dump(path, x, y):
    """An fp16 dump of inputs x and outputs y."""
    np.savez(path, x=np.asarray(x, dtype=np.float16), y=np.asarray(y, dtype=np.float16))


@pytest.mark.parametrize(
    "x,y",
    [([], []), ([math.inf, -math.inf, math.nan], [math.inf, 0.0, math.nan])],
    ids=["empty", "specials-only"],
)
def test_an_empty_dump_is_no_evidence(tmp_path, monkeypatch, capsys, x, y):
    """diff ... dump:empty.npz --expect-identical said 'identical at 0 (nan%)' with exit 0."""
    monkeypatch.chdir(tmp_path)
    relu_dump(tmp_path / "d.npz", x, y)
    code, _, err = run(
        capsys, "diff", "sigmoid.stable", "dump:d.npz", "--reference", "sigmoid", "--expect-identical"
    )
    one_error(code, err, "d.npz", "no finite inputs")
    code, _, err = run(capsys, "sweep", "--dump", "d.npz", "--reference", "sigmoid")
    one_error(code, err, "no finite inputs")
    # a [[diff]] against it, and an [[audit]] of it with nan = false, inf = false
    write(
        tmp_path,
        RELU + '[[diff]]\nname = "d"\na = "sigmoid.stable"\nb = "dump:d.npz"\nreference = "sigmoid"\n'
        'dtype = "fp16"\n',
    )
    code, _, err = run(capsys, "baseline")
    one_error(code, err, "diff 'd'", "no finite inputs")
    write(
        tmp_path,
        '[[audit]]\nname = "e"\ndump = "d.npz"\nreference = "sigmoid"\ndtype = "fp16"\n'
        "tolerance = { nan = false, inf = false }\n",
    )
    code, _, err = run(capsys, "baseline")
    one_error(code, err, "audit 'e'", "no finite inputs")
    assert not (tmp_path / "b.json").exists()


def test_a_dumps_specials_are_compared(tmp_path, capsys):
    """A dump's non-finite inputs were dropped by diff (specials: [] and 'identical'): relu
    at -inf is 0, so a dump saying 1 there is not identical to relu.max."""
    x = np.array([-2.0, -0.5, 0.25, 1.0, 3.0], dtype=np.float16)
    y = np.maximum(x, np.float16(0))  # relu, exactly, independently of the tool
    good = tmp_path / "good.npz"
    bad = tmp_path / "bad.npz"
    relu_dump(good, [*x, math.inf, -math.inf], [*y, math.inf, 0.0])
    relu_dump(bad, [*x, math.inf, -math.inf], [*y, math.inf, 1.0])
    args = ["relu.max", "--reference", "relu", "--expect-identical", "--json", "-"]
    code, out, _ = run(capsys, "diff", args[0], f"dump:{good}", *args[1:])
    doc = json.loads(out)["results"][0]
    assert code == 0 and doc["verdict"] == "identical" and len(doc["specials"]) == 2
    code, out, _ = run(capsys, "diff", args[0], f"dump:{bad}", *args[1:])
    doc = json.loads(out)["results"][0]
    assert code == 1 and doc["verdict"] != "identical"
    (s,) = [s for s in doc["specials"] if s["x"] == "-inf"]
    assert s["same"] is False and s["b"] == 1.0


def test_a_diff_entry_is_bound_to_its_identity(tmp_path, monkeypatch, capsys):
    """A [[diff]] is recorded in the baseline: narrowing its range afterwards fails."""
    body = RELU + '[[diff]]\nname = "d"\na = "relu.max"\nb = "relu.max"\ndtype = "fp8_e4m3"\nrange = RANGE\n'
    monkeypatch.chdir(tmp_path)
    write(tmp_path, body.replace("RANGE", "[-8.0, 8.0]"))
    code, out, err = run(capsys, "baseline")
    assert code == 0, out + err
    doc = json.loads((tmp_path / "b.json").read_text())
    assert doc["entries"]["diff/d/fp8_e4m3"]["kind"] == "diff"
    assert main(["check"]) == 0
    capsys.readouterr()
    write(tmp_path, body.replace("RANGE", "[-1.0, 1.0]"))
    code, out, _ = run(capsys, "check")
    (line,) = fail_lines(out)
    assert code == 1 and "diff/d/fp8_e4m3" in line and "range [-1.0, 1.0] (baseline [-8.0, 8.0])" in line


@pytest.mark.parametrize(
    "body,needle",
    [
        # math.isfinite(10**400) raises OverflowError: the [[diff]] and [[model]] checks used it
        (
            RELU
            + '[[diff]]\nname = "d"\na = "relu.max"\nb = "relu.max"\ndtype = "fp16"\nrange = [0, 1'
            + "0" * 400
            + "]\n",
            "range",
        ),
        (
            RELU
            + '[[diff]]\nname = "d"\na = "elu.expm1"\nb = "elu.expm1"\ndtype = "fp16"\nparams = { alpha = 1'
            + "0" * 400
            + " }\n",
            "params",
        ),
        (
            '[[model]]\nname = "m"\npath = "m.onnx"\ndata = "random:x=4x8"\ntolerance = { p99_ulp = 1'
            + "0" * 400
            + " }\n",
            "tolerance.p99_ulp",
        ),
    ],
    ids=["diff-range", "diff-params", "model-tolerance"],
)
def test_an_integer_beyond_float64_in_a_diff_or_model_entry_is_one_line(
    tmp_path, monkeypatch, capsys, body, needle
):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, body)
    code, _, err = run(capsys, "check")
    one_error(code, err, needle)


@pytest.mark.parametrize(
    "body,needle",
    [
        ('[[audit]]\nname = "t\\u001b[2K ok"\ntargets = ["relu.max"]\ndtype = "fp8_e4m3"\n', "audit[0].name"),
        (
            '[[audit]]\nname = "t"\ntargets = ["relu.max\\nPASS all"]\ndtype = "fp8_e4m3"\n',
            "audit[0].targets",
        ),
        ('[[audit]]\nname = "t\\u202e"\ntargets = ["relu.max"]\ndtype = "fp8_e4m3"\n', "audit[0].name"),
        (RELU + '[[diff]]\nname = "d\\r"\na = "relu.max"\nb = "relu.max"\ndtype = "fp16"\n', "diff[0].name"),
        ('[[model]]\nname = "m"\npath = "m\\u0007.onnx"\ndata = "random:x=4x8"\n', "model[0].path"),
    ],
    ids=["esc-in-name", "newline-in-target", "bidi-override", "cr-in-diff", "bell-in-model-path"],
)
def test_a_name_or_target_with_control_characters_is_refused(tmp_path, monkeypatch, capsys, body, needle):
    # the gate prints names and targets: ESC, CR or a newline in one would forge its lines
    monkeypatch.chdir(tmp_path)
    write(tmp_path, body)
    code, _, err = run(capsys, "check")
    one_error(code, err, needle, "printable")
    assert "\x1b" not in err and "\r" not in err and "\u202e" not in err
