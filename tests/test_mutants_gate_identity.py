"""audit/gate/identity.py and audit/gate/schema.py: the run identity a baseline is bound to, and the spec keys.

They kill mutants that mutmut found surviving the rest of the suite, each with an expectation
worked in the test (docs/design/mutation-testing.md)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from audit.compare.diff import DiffResult
from audit.errors import BadFileError
from audit.gate import identity as gi
from audit.gate.check import Audit
from audit.gate.schema import IDENTITY_FIELDS, refuse_unknown
from audit.measure.blocks import BlockResult
from audit.measure.quant import QuantResult
from audit.measure.sweep import SweepResult

# The fields each kind of entry records, written out here from the definition of a run
# (module docstring of audit/gate/identity.py): what makes two runs the same run.
FLOAT_FIELDS = (
    "candidate reference dtype out_dtype compute semantics params range samples seed distribution "
    "exhaustive inputs specials grid grad backward cflags candidate_identity"
).split()
QUANT_FIELDS = (
    "candidate reference dtype out_dtype compute params exhaustive inputs candidate_identity".split()
)
BLOCKS_FIELDS = (
    "candidate reference dtype out_dtype rule compute params distribution samples seed exhaustive "
    "inputs elements blocks candidate_identity"
).split()
DIFF_FIELDS = (
    "a b reference dtype compute params range grid exhaustive inputs specials a_identity b_identity"
).split()


MODEL_FIELDS = """
model model_sha256 data data_digest engine engine_version dispatch opt_level dtype compute bin
site pattern nodes engine_op
""".split()


def test_the_identity_fields_of_each_kind():
    assert IDENTITY_FIELDS == {
        "float": tuple(FLOAT_FIELDS),
        "quant": tuple(QUANT_FIELDS),
        "blocks": tuple(BLOCKS_FIELDS),
        "diff": tuple(DIFF_FIELDS),
        "model": tuple(MODEL_FIELDS),
    }


class Sem:
    """A semantics as float_identity reads it: its canonical spelling."""

    def canonical(self):
        return "daz,ftz"


def sweep_result(**kw):
    base = dict(
        candidate="relu.max",
        reference="relu",
        dtype="fp16",
        compute="fp16",
        params={},
        domain=SimpleNamespace(exhaustive=0, count=5),
        summary=None,
    )
    return SweepResult(**{**base, **kw})


C_AUDIT = Audit(
    name="g",
    targets=["c:kern.c:gelu_f", "relu.max"],
    dtype=["fp16"],
    range=(-4, 4),
    samples=1000,
    seed=7,
    grid=33,
    grad=True,
    backward=True,
    distribution="normal:std=2",
    cflags=["-O2", "-ffast-math"],
)


def test_a_c_kernels_float_identity_records_everything_that_made_it():
    r = sweep_result(
        candidate="c:kern.c:gelu_f",
        reference="gelu",
        compute="fp32",
        out_dtype="fp8_e4m3",
        semantics=Sem(),
        params={"beta": 2, "alpha": 0.5},
        domain=SimpleNamespace(exhaustive=1, count=np.int64(63488)),
        specials=[math.nan, math.inf, -math.inf],
        identity={"digest": "ab12", "cc": "gcc 12"},
    )
    got = gi.float_identity(r, C_AUDIT)
    assert got == {
        "backward": True,
        "candidate": "c:kern.c:gelu_f",
        "candidate_identity": {"cc": "gcc 12", "digest": "ab12"},
        "cflags": ["-O2", "-ffast-math"],
        "compute": "fp32",
        "distribution": "normal:std=2",
        "dtype": "fp16",
        "exhaustive": True,
        "grad": True,
        "grid": 33,
        "inputs": 63488,
        "out_dtype": "fp8_e4m3",
        "params": {"alpha": 0.5, "beta": 2.0},
        "range": [-4.0, 4.0],
        "reference": "gelu",
        "samples": 1000,
        "seed": 7,
        "semantics": "daz,ftz",
        "specials": 3,
    }
    assert list(got) == sorted(FLOAT_FIELDS)  # written sorted: the same text for the same run
    assert type(got["params"]["beta"]) is float and type(got["inputs"]) is int


def test_a_float_identity_of_a_plain_candidate_beside_a_c_kernel():
    """The C flags belong to the C kernel's entry only; nothing given is recorded as nothing."""
    r = sweep_result(specials=[])
    a = Audit(name="g", targets=["c:kern.c:gelu_f", "relu.max"], dtype=["fp16"], cflags=["-O2"])
    assert gi.float_identity(r, a) == {
        "backward": False,
        "candidate": "relu.max",
        "candidate_identity": {},
        "cflags": None,
        "compute": "fp16",
        "distribution": None,
        "dtype": "fp16",
        "exhaustive": False,
        "grad": False,
        "grid": None,
        "inputs": 5,
        "out_dtype": None,
        "params": {},
        "range": None,
        "reference": "relu",
        "samples": None,
        "seed": 0,
        "semantics": None,
        "specials": 0,
    }


def test_two_float_runs_that_differ_are_told_apart_field_by_field_in_order():
    """Another seed and no backward kernels: both named, alphabetically (the recorded order)."""
    r = sweep_result(candidate="c:kern.c:gelu_f", identity={"cc": "gcc 12"})
    base = gi.float_identity(r, C_AUDIT)
    other = dataclasses.replace(C_AUDIT, seed=0, backward=False)
    assert gi.difference(gi.float_identity(r, other), base) == (
        "the spec's run differs from what produced the baseline entry: backward false (baseline true), "
        "seed 0 (baseline 7); the figures cannot be compared: re-record with actaudit baseline"
    )
    assert gi.difference(gi.float_identity(r, C_AUDIT), base) is None


def quant_result(**kw):
    base = dict(
        candidate="sigmoid.exp",
        reference="sigmoid",
        dtype="int8:scale=0.0625,zero=0",
        out_dtype="uint8:scale=0.00390625,zero=0",
        compute="fp32",
        params={"k": 3},
        count=np.int64(256),
        x=None,
        x_codes=None,
        got=None,
        want=None,
        exact=None,
        code_err=None,
        real_err=None,
    )
    return QuantResult(**{**base, **kw})


def test_a_quant_identity():
    r = quant_result(identity={"version": "1.17", "engine": "onnxruntime"})
    got = gi.quant_identity(r)
    assert got == {
        "candidate": "sigmoid.exp",
        "candidate_identity": {"engine": "onnxruntime", "version": "1.17"},
        "compute": "fp32",
        "dtype": "int8:scale=0.0625,zero=0",
        "exhaustive": True,  # every input code of the format, always
        "inputs": 256,
        "out_dtype": "uint8:scale=0.00390625,zero=0",
        "params": {"k": 3.0},
        "reference": "sigmoid",
    }
    assert list(got) == sorted(QUANT_FIELDS)
    assert gi.quant_identity(quant_result(params={}))["candidate_identity"] == {}


def block_result(inputs, **kw):
    base = dict(
        candidate="gelu.tanh",
        reference="gelu",
        dtype="bf16",
        out_dtype="mxfp8_e4m3",
        rule="ceil",
        compute="fp32",
        inputs=inputs,
        elements=np.int64(512),
        blocks=np.int64(16),
        max_elem_ulp=0.0,
        mean_elem_ulp=0.0,
        max_rel=0.0,
        ref_max_elem_ulp=0.0,
        mismatches=0,
        max_added_ulp=0.0,
        scale_diff_blocks=0,
        scale_diff_first=[],
        worst_block=None,
        nan_elements=0,
        tensor_scale=None,
        n_mpmath=0,
    )
    return BlockResult(**{**base, **kw})


BLOCK_AUDIT = Audit(
    name="b",
    targets=["gelu.tanh"],
    dtype=["bf16"],
    out_dtype="mxfp8_e4m3",
    samples=512,
    seed=3,
    blocks="normal:std=2",
)


@pytest.mark.parametrize(
    "inputs,exhaustive",
    [
        ("normal:std=2 (seed 3)", False),
        ("exhaustive: every pair (x, m) of fp8_e4m3 inputs (254 x 254)", True),
    ],
)
def test_a_blocks_identity(inputs, exhaustive):
    r = block_result(inputs, params={"alpha": 1}, identity={"engine": "torch", "device": "cpu"})
    got = gi.blocks_identity(r, BLOCK_AUDIT)
    assert got == {
        "blocks": 16,
        "candidate": "gelu.tanh",
        "candidate_identity": {"device": "cpu", "engine": "torch"},
        "compute": "fp32",
        "distribution": "normal:std=2",
        "dtype": "bf16",
        "elements": 512,
        "exhaustive": exhaustive,
        "inputs": inputs,
        "out_dtype": "mxfp8_e4m3",
        "params": {"alpha": 1.0},
        "reference": "gelu",
        "rule": "ceil",
        "samples": 512,
        "seed": 3,
    }
    assert list(got) == sorted(BLOCKS_FIELDS)


def test_a_diff_identity():
    r = DiffResult(
        "gelu.tanh",
        "gelu.erf",
        "gelu",
        "bf16",
        "fp32",
        count=np.int64(65280),
        exhaustive=1,
        specials=[0.0, math.nan],
        params={"b": {"x": 1}, "a": {}},
        identities={"b": {"engine": "jax"}, "a": {"version": "2.1", "engine": "torch"}},
    )
    got = gi.diff_identity({"range": (-1, 2), "grid": 9}, r)
    assert got == {
        "a": "gelu.tanh",
        "a_identity": {"engine": "torch", "version": "2.1"},
        "b": "gelu.erf",
        "b_identity": {"engine": "jax"},
        "compute": "fp32",
        "dtype": "bf16",
        "exhaustive": True,
        "grid": 9,
        "inputs": 65280,
        "params": {"a": {}, "b": {"x": 1.0}},
        "range": [-1.0, 2.0],
        "reference": "gelu",
        "specials": 2,
    }
    assert list(got) == sorted(DIFF_FIELDS)
    plain = DiffResult("a.x", "a.y", "a", "fp16", "fp16", count=3, exhaustive=False)
    assert gi.diff_identity({"range": None, "grid": None}, plain) == {
        "a": "a.x",
        "a_identity": {},
        "b": "a.y",
        "b_identity": {},
        "compute": "fp16",
        "dtype": "fp16",
        "exhaustive": False,
        "grid": None,
        "inputs": 3,
        "params": {},
        "range": None,
        "reference": "a",
        "specials": 0,
    }


class Thing:
    def __repr__(self):
        return "<thing 1>"


def test_normalize_gives_what_json_gives_back():
    got = gi.normalize(
        {"z": (1, 2.5, None, "s", True), "a": {"k": [math.nan, math.inf, -math.inf, -0.5]}, 3: Thing()}
    )
    assert got == {
        "3": "<thing 1>",
        "a": {"k": ["nan", "inf", "-inf", -0.5]},
        "z": [1, 2.5, None, "s", True],
    }
    assert list(got) == ["3", "a", "z"]
    assert [type(v) for v in got["z"]] == [int, float, type(None), str, bool]
    assert gi.normalize(-math.inf) == "-inf" and gi.normalize(None) is None


IDENT = "entries.q/x.identity"
QUANT_KNOWN = (
    "candidate, reference, dtype, out_dtype, compute, params, exhaustive, inputs, candidate_identity"
)


@pytest.mark.parametrize(
    "kind,ident,message",
    [
        ("quant", ["candidate"], f"b.json: key '{IDENT}' must be an object (what produced the entry)"),
        (
            "quant",
            {**dict.fromkeys(QUANT_FIELDS), "zeta": 1},
            f"b.json: key '{IDENT}.zeta' is unknown in a quant entry's identity (known: {QUANT_KNOWN})",
        ),
        (
            "quant",
            {k: None for k in QUANT_FIELDS if k not in ("params", "inputs")},
            f"b.json: key '{IDENT}.params' is missing",
        ),
        ("quant", dict.fromkeys(QUANT_FIELDS), None),
        ("float", dict.fromkeys(FLOAT_FIELDS), None),
        ("blocks", dict.fromkeys(BLOCKS_FIELDS), None),
        ("diff", dict.fromkeys(DIFF_FIELDS), None),
        ("diff", {}, f"b.json: key '{IDENT}.a' is missing"),
    ],
)
def test_an_identity_read_from_a_baseline_has_exactly_its_kinds_fields(kind, ident, message):
    if message is None:
        assert gi.check(Path("b.json"), "entries.q/x", ident, kind) is None
    else:
        with pytest.raises(BadFileError) as e:
            gi.check(Path("b.json"), "entries.q/x", ident, kind)
        assert str(e.value) == message


TAIL = "; the figures cannot be compared: re-record with actaudit baseline"
HEAD = "the spec's run differs from what produced the baseline entry: "


@pytest.mark.parametrize(
    "now,base,message",
    [
        # JSON objects have no order: the same identity read back in another order is the same
        ({"ci": {"a": 1, "b": [1, {"y": 2, "x": 3}]}}, {"ci": {"b": [1, {"x": 3, "y": 2}], "a": 1}}, None),
        (
            {"seed": 0, "range": None, "ci": {"v": "1.1"}},
            {"range": [-1.0, 1.0], "seed": 0, "ci": {"v": "1.0", "cc": "gcc"}, "grid": 5},
            HEAD + 'range null (baseline [-1.0, 1.0]), ci {"v": "1.1"} (baseline {"cc": "gcc", "v": "1.0"}), '
            "grid null (baseline 5)" + TAIL,
        ),
        ({"samples": 5}, {}, HEAD + "samples 5 (baseline null)" + TAIL),
        # exact, types included: 1 is neither true nor 1.0
        (
            {"exhaustive": 1, "inputs": 1.0},
            {"exhaustive": True, "inputs": 1},
            HEAD + "exhaustive 1 (baseline true), inputs 1.0 (baseline 1)" + TAIL,
        ),
        ({}, {}, None),
    ],
)
def test_difference_names_every_field_that_differs(now, base, message):
    assert gi.difference(now, base) == message


KNOWN_TOP = "audit, baseline, diff, model, require_certified, slack"
KNOWN_DIFF = "a, b, compute, dtype, expect, grid, name, params, range, reference"
KNOWN_TOL = (
    "correct_code_fraction, inf, max_abs, max_code_error, max_elem_ulp, max_rel, max_ulp, nan, p99_ulp, "
    "safe_range, scale_diff_blocks, weighted_mean_ulp, weighted_nan, weighted_p99_ulp, weighted_underflow"
)


@pytest.mark.parametrize(
    "raw,level,where,message",
    [
        (
            {"zeta": 1, "baseline": "b.json", "alpha": 2},
            "spec",
            "",
            f"a.toml: key 'alpha' is unknown in the spec's top level (known: {KNOWN_TOP})",
        ),
        (
            {"name": "d", "y": 1, "range": [0, 1], "x": 2},
            "diff",
            "diff[1]",
            f"a.toml: key 'diff[1].x' is unknown in [[diff]] (known: {KNOWN_DIFF})",
        ),
        (
            {"max_ulps": 1},
            "tolerance",
            "audit[0].tolerance",
            f"a.toml: key 'audit[0].tolerance.max_ulps' is unknown in a tolerance table (known: {KNOWN_TOL})",
        ),
        (
            {"max_ulps": 1},
            "tolerance",
            "",
            f"a.toml: key 'max_ulps' is unknown in a tolerance table (known: {KNOWN_TOL})",
        ),
        ({"name": "d", "a": "x", "b": "y", "expect": "identical"}, "diff", "diff[0]", None),
        ({}, "spec", "", None),
    ],
)
def test_refuse_unknown_names_the_first_unknown_key(raw, level, where, message):
    if message is None:
        assert refuse_unknown(Path("a.toml"), raw, level, where) is None
    else:
        with pytest.raises(BadFileError) as e:
            refuse_unknown(Path("a.toml"), raw, level, where)
        assert str(e.value) == message
