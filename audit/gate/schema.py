"""The audit spec's schema, as data: every key of every level, its type, its allowed values
and what it means (``SPEC_KEYS``), and the identity fields each baseline entry records
(``IDENTITY_FIELDS``).

Nothing outside this schema is accepted: :func:`refuse_unknown` turns a key that is not in
its level into one line naming the key, where it is, and the keys that level knows (a
misplaced ``[tolerance]`` at the top level, ``[[diffs]]`` for ``[[diff]]``, a typo in
``[tool.actaudit]``: refused, never dropped).  The documentation's reference of the spec
can be generated from ``SPEC_KEYS``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from audit.errors import BadFileError


@dataclass(frozen=True)
class Key:
    type: str  # as a person reads it: "string", "strings", "number", "integer", "bool", ...
    description: str
    allowed: tuple = ()  # the values it may take, where they are a closed set
    default: object = None


SPEC_KEYS: dict[str, dict[str, Key]] = {
    # the top level of actaudit.toml, or [tool.actaudit] of pyproject.toml
    "spec": {
        "baseline": Key(
            "string", "path of the baseline, relative to the spec file", (), "data/baseline.json"
        ),
        "slack": Key("number", "relative slack on metrics, in [0, 1)", (), 1e-9),
        "audit": Key("array of tables", "the audits ([[audit]])"),
        "diff": Key("array of tables", "implementations that must agree ([[diff]])"),
        "model": Key("array of tables", "ONNX models whose activation sites are gated ([[model]])"),
        "require_certified": Key(
            "bool",
            "fail unless every oracle table the audits use was certified (actaudit selftest --certify)",
            (True, False),
            False,
        ),
    },
    "audit": {
        "name": Key("string", "the audit's name (unique; first part of its baseline keys)"),
        "targets": Key(
            "strings", "candidates, families, torch:NAME, jax:NAME, c:FILE.c:FUNCTION, lut:FILE, ..."
        ),
        "dtype": Key("strings", "storage format(s)"),
        "compute": Key("strings", "compute format(s) (default: each storage format)"),
        "range": Key("[lo, hi]", "finite lo < hi: restrict the inputs"),
        "params": Key("table", "candidate parameters: finite numbers or non-empty lists of them"),
        "samples": Key("integer", "sample size for fp32 / fp64 (>= 1); block audits: elements"),
        "seed": Key("integer", "seed of the sample (>= 0)", (), 0),
        "tolerance": Key("table", "limits the results must meet (see the 'tolerance' level)"),
        "grid": Key("integer", "values per axis of gated units' grid (>= 2)"),
        "reference": Key("string", "the function of callables, C kernels, tables and dumps"),
        "grad": Key("bool", "sweep the derivative candidates", (True, False), False),
        "device": Key("string", "device of torch: ops (cpu, cuda)", (), "cpu"),
        "dump": Key("string", "outputs dumped from a device (path relative to the spec file)"),
        "dump_dtype": Key("string", "dtype of a raw binary dump"),
        "semantics": Key("strings", "machine semantics to audit (PRIM=table:FILE relative to the spec file)"),
        "backward": Key("bool", "sweep the backward kernels dy * f'(x)", (True, False), False),
        "out_dtype": Key("string", "one output format: element, quantized or block-scaled"),
        "blocks": Key(
            "string", "block-scaled outputs: input distribution, or 'exhaustive'", (), "normal:std=1"
        ),
        "scale_rule": Key("string", "block-scaled outputs: scale rule", ("ocp", "ceil"), "ocp"),
        "cflags": Key(
            "strings",
            "compiler flags of c: kernels: one string (split as a shell does) or a list, one flag each",
        ),
        "distribution": Key(
            "string",
            "weight the figures by an input distribution: normal:std=S[,mean=M], uniform:lo=A,hi=B, "
            "laplace:scale=S, npy:PATH (relative to the spec file)",
        ),
    },
    "tolerance": {
        "max_ulp": Key("number", "largest ULP error allowed (>= 0)"),
        "p99_ulp": Key("number", "99th percentile ULP error allowed (>= 0)"),
        "max_abs": Key("number", "largest absolute error allowed (>= 0)"),
        "max_rel": Key("number", "largest relative error allowed (>= 0)"),
        "nan": Key("bool", "whether NaN results are allowed", (True, False)),
        "inf": Key("bool", "whether infinite results are allowed", (True, False)),
        "safe_range": Key("[lo, hi]", "finite, lo <= 0 <= hi: the safe clip range must cover it"),
        "max_code_error": Key("number", "quantized audits: largest code error allowed (>= 0)"),
        "correct_code_fraction": Key(
            "number", "quantized audits: least fraction of correct codes, in [0, 1]"
        ),
        "max_elem_ulp": Key("number", "block-scaled audits: largest element ULP error allowed (>= 0)"),
        "scale_diff_blocks": Key("number", "block-scaled audits: most blocks whose scale may differ (>= 0)"),
        "weighted_mean_ulp": Key(
            "number", "audits with a distribution: largest weighted mean ULP error (>= 0)"
        ),
        "weighted_p99_ulp": Key(
            "number", "audits with a distribution: largest weighted p99 ULP error (>= 0)"
        ),
        "weighted_nan": Key("number", "audits with a distribution: largest probability of a NaN, in [0, 1]"),
        "weighted_underflow": Key(
            "number", "audits with a distribution: largest probability of a flushed result, in [0, 1]"
        ),
    },
    "diff": {
        "name": Key("string", "the diff's name (unique)"),
        "a": Key("string", "implementation A (any target diff takes; dump:FILE relative to the spec file)"),
        "b": Key("string", "implementation B"),
        "dtype": Key("strings", "storage format(s)"),
        "compute": Key("string", "compute format"),
        "reference": Key("string", "the function of callables and dumps"),
        "range": Key("[lo, hi]", "finite lo < hi: restrict the inputs"),
        "grid": Key("integer", "values per axis of gated units' grid (>= 2)"),
        "params": Key("table", "parameters of both: finite numbers"),
        "expect": Key("string", "what must hold", ("identical", "not-worse"), "identical"),
    },
    "model": {
        "name": Key("string", "the entry's name (unique; first part of its baseline keys)"),
        "path": Key("string", "the ONNX model, relative to the spec file"),
        "data": Key("string", 'a .npz batch or a directory of them (relative to the spec file), or "random"'),
        "shape": Key("table", 'data = "random": NAME = [dims] for each graph input'),
        "seed": Key("integer", 'data = "random": the seed (>= 0)', (), 0),
        "batches": Key("integer", 'data = "random": how many batches (>= 1)', (), 1),
        "engine": Key("string", "the engine", ("ort",), "ort"),
        "dtype": Key("string", "audit every site in this format (default: the one ORT runs)"),
        "compute": Key("string", "compute format, as in sweep"),
        "opt_level": Key(
            "string", "ORT's graph optimization level", ("off", "basic", "extended", "all"), "all"
        ),
        "bin": Key(
            "string",
            "fp32 sites: exact counts, or counts per value of bf16/fp16",
            ("exact", "bf16", "fp16"),
            "exact",
        ),
        "tolerance": Key("table", "limits every gated site must meet (see the 'model_tolerance' level)"),
        "sites": Key("strings", "the site ids to gate (default: every audited site)"),
    },
    "model_tolerance": {
        "weighted_mean_ulp": Key("number", "largest weighted mean ULP error (>= 0)"),
        "weighted_p99_ulp": Key("number", "largest weighted p99 ULP error (>= 0)"),
        "weighted_nan": Key("number", "largest probability of a NaN, in [0, 1]"),
        "weighted_inf": Key("number", "largest probability of a spurious inf, in [0, 1]"),
        "weighted_underflow": Key("number", "largest probability of a flushed result, in [0, 1]"),
        "observed_ulp": Key("number", "largest ULP error on an observed input (>= 0)"),
    },
}

LEVELS = {
    "spec": "the spec's top level",
    "audit": "[[audit]]",
    "tolerance": "a tolerance table",
    "diff": "[[diff]]",
    "model": "[[model]]",
    "model_tolerance": "a [[model]] tolerance table",
}


def refuse_unknown(p: Path, raw: dict, level: str, where: str) -> None:
    """One line for the first key of ``raw`` (in sorted order) that ``level`` does not know."""
    known = SPEC_KEYS[level]
    unknown = sorted(str(k) for k in raw if k not in known)
    if unknown:
        name = f"{where}.{unknown[0]}" if where else unknown[0]
        raise BadFileError(
            f"{p}: key '{name}' is unknown in {LEVELS[level]} (known: {', '.join(sorted(known))})"
        )


# ------------------------------------------------------------ baseline identity
# What each kind of baseline entry records of what produced it; `check` compares every
# field with the spec's run and fails on any difference ("re-record with actaudit baseline").
IDENTITY_FIELDS: dict[str, tuple[str, ...]] = {
    "float": (
        "candidate",
        "reference",
        "dtype",
        "out_dtype",
        "compute",
        "semantics",
        "params",
        "range",
        "samples",
        "seed",
        "distribution",
        "exhaustive",
        "inputs",
        "specials",
        "grid",
        "grad",
        "backward",
        "cflags",
        "candidate_identity",
    ),
    "quant": (
        "candidate",
        "reference",
        "dtype",
        "out_dtype",
        "compute",
        "params",
        "exhaustive",
        "inputs",
        "candidate_identity",
    ),
    "blocks": (
        "candidate",
        "reference",
        "dtype",
        "out_dtype",
        "rule",
        "compute",
        "params",
        "distribution",
        "samples",
        "seed",
        "exhaustive",
        "inputs",
        "elements",
        "blocks",
        "candidate_identity",
    ),
    "diff": (
        "a",
        "b",
        "reference",
        "dtype",
        "compute",
        "params",
        "range",
        "grid",
        "exhaustive",
        "inputs",
        "specials",
        "a_identity",
        "b_identity",
    ),
    "model": (
        "model",
        "model_sha256",
        "data",
        "data_digest",
        "engine",
        "engine_version",
        "dispatch",
        "opt_level",
        "dtype",
        "compute",
        "bin",
        "site",
        "pattern",
        "nodes",
        "engine_op",
    ),
}


def is_number(v) -> bool:
    """A finite int or float (TOML has no other numbers; bools are not numbers); an integer
    beyond float64's range is not one (no figure can hold it; math.isfinite would raise)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    return abs(v) < 2**1024 if isinstance(v, int) else math.isfinite(v)


PRINTABLE = "must be printable (no control or format characters: a newline or ESC would forge lines)"


def is_text(v) -> bool:
    """A non-empty string of printable characters: a name or a target the gate prints (a
    newline, ESC or a bidirectional override would forge or hide lines of its report)."""
    return isinstance(v, str) and bool(v) and v.isprintable()


def entry_head(p: Path, raw, kind: str, where: str, required, texts, names: set):
    """The checks a [[diff]] or [[model]] entry starts with: a table, no unknown key, every
    ``required`` key present, each of ``texts`` a non-empty printable string, its name not
    used by an entry before (then added to ``names``).  Returns ``bad(key, message)`` for the
    entry's other keys: one line naming ``where.key``."""

    def bad(k, msg):
        raise BadFileError(f"{p}: key '{where}.{k}' {msg}")

    if not isinstance(raw, dict):
        raise BadFileError(f"{p}: key '{where}' must be a table")
    refuse_unknown(p, raw, kind, where)
    for k in required:
        if k not in raw:
            bad(k, "is missing")
    for k in texts:
        if not isinstance(raw[k], str) or not raw[k]:
            bad(k, "must be a non-empty string")
        if not is_text(raw[k]):
            bad(k, PRINTABLE)
    if raw["name"] in names:
        bad("name", f"duplicate name '{raw['name']}'")
    names.add(raw["name"])
    return bad
