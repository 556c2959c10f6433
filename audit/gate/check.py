"""The CI gate: an audit spec, a baseline, and the comparison that fails on regressions.

Spec (``actaudit.toml``, or ``[tool.actaudit]`` of pyproject.toml)::

    baseline = "data/baseline.json"          # default path of the baseline
    slack = 1e-9                             # relative slack on metrics (default 1e-9)
    require_certified = false                # true: every oracle table used must be certified
                                             # (actaudit selftest --certify; docs/concepts/certification.md)

    [[audit]]                                # [[tool.actaudit.audit]] in pyproject.toml
    name = "gelu-fp16"
    targets = ["gelu.tanh", "sigmoid"]       # candidates or families
    dtype = ["fp16", "bf16"]
    compute = "fp32"                         # optional
    range = [-10.0, 10.0]                    # optional
    params = { limit = 8.0 }                 # optional
    samples = 65536                          # fp32 / fp64 only; seed = 0
    reference = "gelu"                       # for pkg.module:function targets and dumps
    dump = "outputs.npz"                     # optional: a device dump (with reference)
    tolerance = { max_ulp = 4096, p99_ulp = 64, max_abs = 1e-2, max_rel = 1.0,
                  nan = false, inf = false, safe_range = [-3.0, 3.0] }

Every way of naming a candidate on the command line works here: catalog ids and
families, ``torch:NAME``, ``jax:NAME``, ``pkg.module:function`` (with ``reference``), a
``dump`` (with ``reference``), ``grad = true``.

Every key is in the schema (audit/gate/schema.py, ``SPEC_KEYS``): an unknown key at any
level is refused.  Paths in the spec (``dump``, ``c:FILE.c:FUNCTION``, ``lut:FILE``,
``dump:FILE``, ``PRIM=table:FILE``) are resolved against the spec file's directory;
``cflags`` (a string split as a shell does, or a list of flags) compiles C kernels and is
part of their entries' keys.

The baseline (plain JSON, schema actaudit.baseline/3) records, per audit x candidate x path,
the identity of the run (audit/gate/identity.py: candidate, formats, semantics, parameters,
inputs, the candidate's own identity, ...), the metrics, the counts, the finding intervals
and per-kind counts and the clip range; per ``[[diff]]`` and format, its identity.
``baseline`` refuses results that break their own tolerances.  ``check`` fails when the
run's identity differs from the baseline entry's ("re-record with actaudit baseline"), a
tolerance is exceeded or cannot be decided, a metric is worse than the baseline by more
than the slack, a count rises, a finding interval appears that the baseline did not have,
or the clip range shrinks; it reports improvements and results no longer in the spec apart
(``strict``: those fail too, and so does a baseline of another actaudit version, otherwise
a warning).  Everything read from the spec and the baseline is validated (types,
finiteness, ranges, unknown and duplicate keys) and refused with one line naming the file
and the key; a result over zero inputs is an error.
"""

from __future__ import annotations

import json
import math
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from audit._version import __version__
from audit.errors import ActauditError, BadFileError, BadOptionError
from audit.gate import identity as gate_identity
from audit.gate import verdict as gate_verdict
from audit.gate.schema import PRINTABLE, SPEC_KEYS, is_text, refuse_unknown
from audit.gate.schema import is_number as _is_num
from audit.gate.shared import (  # noqa: F401  (resolve_target, compare_findings: the entry kinds' too)
    _covered,
    _num,
    _spec_path,
    compare_counts,
    compare_findings,
    resolve_semantics,
    resolve_target,
)
from audit.io import dumps, format_number, load_json, read_text, write_text
from audit.measure import weighting as weighting_mod
from audit.measure.sweep import SweepResult, sweep
from audit.targets import semantics as semantics_mod

BASELINE_SCHEMA = "actaudit.baseline/4"
MAX_FILE = 1 << 24  # bytes of a spec or a baseline
METRICS = ("max_ulp", "p99_ulp", "mean_ulp", "max_abs", "max_rel")
COUNTS = ("nan_count", "inf_count", "special_failures")
CLIP_KEYS = ("lo", "hi", "lo_action", "hi_action", "lo_safe", "hi_safe", "note")
BASELINE_KEYS = ("schema", "actaudit", "spec", "verdict", "entries")
FLOAT_ENTRY_KEYS = (
    "candidate",
    "dtype",
    "compute",
    "params",
    "semantics",
    "identity",
    *METRICS,
    *COUNTS,
    "findings",
    "finding_counts",
    "clip",
)
FINDING_KINDS = ("nan", "overflow", "underflow", "sign", "range", "monotonicity", "special", "no_effect")
TOLERANCE_KEYS = set(SPEC_KEYS["tolerance"])
AUDIT_KEYS = set(SPEC_KEYS["audit"])


@dataclass
class Audit:
    name: str
    targets: list
    dtype: list
    compute: list | None = None
    range: tuple | None = None
    params: dict = field(default_factory=dict)
    samples: int | None = None
    seed: int = 0
    grid: int | None = None
    tolerance: dict = field(default_factory=dict)
    reference: str | None = None
    grad: bool = False
    device: str = "cpu"
    dump: str | None = None
    dump_dtype: str | None = None
    semantics: list | None = None  # semantics to audit (audit/targets/semantics.py); None: ieee
    backward: bool = False  # sweep the targets' backward kernels dy * f'(x) over pairs
    out_dtype: str | None = None  # one element format (--out-dtype)
    blocks: str = "normal:std=1"  # block-scaled outputs: input distribution (--blocks)
    scale_rule: str = "ocp"  # block-scaled outputs: scale rule (--scale-rule)
    distribution: str | None = None  # weighted figures (--distribution, audit/measure/weighting.py)
    cflags: list | None = None  # compiler flags of c: kernels, one string per flag
    # the targets and semantics as run: paths in them resolved against the spec file's
    # directory (targets / semantics stay as written: they name the baseline entries)
    run_targets: list = field(default_factory=list)
    run_semantics: list | None = None


@dataclass
class Spec:
    path: Path
    audits: list
    baseline: Path
    slack: float = 1e-9
    diffs: list = field(default_factory=list)  # [[diff]] entries (audit/gate/diffs.py)
    models: list = field(default_factory=list)  # [[model]] entries (audit/gate/models.py)
    require_certified: bool = False  # every oracle table used must carry a certificate


# ------------------------------------------------------------------- spec
def find_spec(path: str | Path | None = None) -> Path:
    if path is not None:
        p = Path(path)
        if not p.exists():
            raise BadFileError(f"{p}: spec file not found")
        return p
    found = [
        cand
        for cand in (Path("actaudit.toml"), Path("pyproject.toml"))
        if (cand.exists() or cand.is_symlink()) and (cand.name == "actaudit.toml" or _has_tool_section(cand))
    ]
    if len(found) > 1:  # one would silently shadow the other (and its baseline entries)
        raise BadFileError(
            f"two audit specs: {found[0]} and [tool.actaudit] in {found[1]}; keep one, or name it with --spec"
        )
    if found:
        return found[0]
    raise BadFileError("no audit spec: write actaudit.toml or [tool.actaudit] in pyproject.toml")


def _has_tool_section(p: Path) -> bool:
    try:
        tool = tomllib.loads(read_text(p, MAX_FILE)).get("tool")  # (its errors are not said)
        return isinstance(tool, dict) and "actaudit" in tool
    except (BadFileError, tomllib.TOMLDecodeError, RecursionError):
        return False


def _toml(p: Path) -> dict:
    text = read_text(p, MAX_FILE, "audit spec")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise BadFileError(f"{p}: malformed TOML ({e})") from None
    except RecursionError:
        raise BadFileError(f"{p}: malformed TOML (nested too deeply)") from None


def load_spec(path: str | Path | None = None, reference: str | None = None) -> Spec:
    """The validated spec; ``reference`` (--reference) applies to audits without one."""
    p = find_spec(path)
    doc = _toml(p)
    where = "tool.actaudit" if p.name == "pyproject.toml" else ""
    if where:
        tool = doc.get("tool")  # `tool = 1` is valid TOML: not a table, no section
        if not isinstance(tool, dict) or not isinstance(tool.get("actaudit"), dict):
            raise BadFileError(f"{p}: no [tool.actaudit] section")
        doc = tool["actaudit"]

    def key(k):
        return f"{where}.{k}" if where else k

    refuse_unknown(p, doc, "spec", where)
    raws = doc.get("audit")
    if raws is None and doc.get("model"):  # a spec of [[model]] entries alone
        raws = []
    elif not isinstance(raws, list) or not raws:
        raise BadFileError(f"{p}: key '{key('audit')}' must be a non-empty array of tables ([[audit]])")
    audits = []
    names = set()
    for i, raw in enumerate(raws):
        audits.append(_audit(p, raw, f"{key('audit')}[{i}]"))
        if audits[-1].name in names:
            raise BadFileError(f"{p}: key '{key('audit')}[{i}].name': duplicate name '{audits[-1].name}'")
        names.add(audits[-1].name)
        if audits[-1].reference is None:
            audits[-1].reference = reference
    base = doc.get("baseline", "data/baseline.json")
    if not isinstance(base, str) or not base:
        raise BadFileError(f"{p}: key '{key('baseline')}' must be a path string")
    slack = doc.get("slack", 1e-9)
    if not _is_num(slack) or not 0 <= slack < 1:
        raise BadFileError(f"{p}: key '{key('slack')}' must be a number in [0, 1) (a relative slack)")
    cert = doc.get("require_certified", False)
    if not isinstance(cert, bool):
        raise BadFileError(f"{p}: key '{key('require_certified')}' must be true or false")
    from audit.gate.diffs import parse as parse_diffs
    from audit.gate.models import parse as parse_models

    return Spec(
        p,
        audits,
        (p.parent / base),
        float(slack),
        parse_diffs(p, doc.get("diff"), key("diff")),
        require_certified=cert,
        models=parse_models(p, doc.get("model"), key("model")),
    )


def _audit(p: Path, raw, where: str) -> Audit:
    def bad(k, msg):
        raise BadFileError(f"{p}: key '{where}.{k}' {msg}")

    if not isinstance(raw, dict):
        raise BadFileError(f"{p}: key '{where}' must be a table")
    refuse_unknown(p, raw, "audit", where)
    for k in ("name", "targets", "dtype"):
        if k not in raw and not (k == "targets" and "dump" in raw):
            bad(k, "is missing")
    if not isinstance(raw["name"], str) or not raw["name"]:
        bad("name", "must be a non-empty string")
    if not is_text(raw["name"]):
        bad("name", PRINTABLE)

    def strings(k):
        v = raw.get(k)
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list) or not v or not all(isinstance(s, str) and s for s in v):
            bad(k, "must be a string or a non-empty list of strings")
        if not all(is_text(s) for s in v):
            bad(k, PRINTABLE)
        return v

    def string(k):
        v = raw.get(k)
        if v is not None and not (isinstance(v, str) and v):
            bad(k, "must be a non-empty string")
        if v is not None and not is_text(v):
            bad(k, PRINTABLE)
        return v

    rng = raw.get("range")
    if rng is not None and not (
        isinstance(rng, list) and len(rng) == 2 and all(_is_num(v) for v in rng) and rng[0] < rng[1]
    ):
        bad("range", "must be [lo, hi] with finite lo < hi")
    params = raw.get("params", {})
    if not isinstance(params, dict) or not all(
        _is_num(v) or (isinstance(v, list) and v and all(_is_num(x) for x in v)) for v in params.values()
    ):
        bad("params", "must be a table of finite numbers or non-empty lists of them")
    for k, lo in (("samples", 1), ("seed", 0), ("grid", 2)):
        if k in raw and (not isinstance(raw[k], int) or isinstance(raw[k], bool) or not lo <= raw[k] < 2**63):
            bad(k, f"must be an integer >= {lo}")
    if "grad" in raw and not isinstance(raw["grad"], bool):
        bad("grad", "must be true or false")
    tol = raw.get("tolerance", {})
    if not isinstance(tol, dict):
        bad("tolerance", "must be a table")
    refuse_unknown(p, tol, "tolerance", f"{where}.tolerance")
    for k, v in tol.items():
        if k in ("nan", "inf") and not isinstance(v, bool):
            bad(f"tolerance.{k}", "must be true or false")
        if k in (
            "max_ulp",
            "p99_ulp",
            "max_abs",
            "max_rel",
            "max_code_error",
            "max_elem_ulp",
            "scale_diff_blocks",
        ) and not (_is_num(v) and v >= 0):
            bad(f"tolerance.{k}", "must be a finite number >= 0")
        if k.startswith("weighted_") and (msg := weighting_mod.check_tolerance(k, v)):
            bad(f"tolerance.{k}", msg)
        if k == "correct_code_fraction" and not (_is_num(v) and 0 <= v <= 1):
            bad(f"tolerance.{k}", "must be a fraction in [0, 1]")
        if k == "safe_range" and not (
            isinstance(v, list) and len(v) == 2 and all(_is_num(x) for x in v) and v[0] <= 0 <= v[1]
        ):
            bad(f"tolerance.{k}", "must be [lo, hi], finite, with lo <= 0 <= hi")
    if not isinstance(raw.get("backward", False), bool):
        bad("backward", "must be true or false")
    compute = raw.get("compute")
    out_dtype = raw.get("out_dtype")
    if out_dtype is not None and not isinstance(out_dtype, str):
        bad("out_dtype", "must be a string (one format)")
    blocks = string("blocks") or "normal:std=1"
    scale_rule = string("scale_rule") or "ocp"
    from audit.measure import blocks as blocks_mod

    try:
        if blocks.strip().lower() != "exhaustive":
            blocks_mod.parse_dist(blocks)
    except ActauditError as e:
        bad("blocks", str(e))
    if scale_rule not in blocks_mod.RULES:
        bad("scale_rule", f"must be one of {', '.join(blocks_mod.RULES)}")
    if blocks.strip().lower() == "exhaustive" and "samples" in raw:
        bad("samples", 'does not apply with blocks = "exhaustive" (every block is swept): drop one')
    cflags = None
    if "cflags" in raw:
        cflags = parse_cflags(raw["cflags"], lambda msg: bad("cflags", msg))
    dump = string("dump")
    reference = string("reference")
    if dump is not None and reference is None:
        bad("dump", "needs 'reference' (the function the device computed)")
    sems = run_sems = None
    if "semantics" in raw:
        sems = strings("semantics")
        run_sems = [resolve_semantics(p, s) for s in sems]
        try:
            semantics_mod.parse_list(sems)
            semantics_mod.parse_list(run_sems)
        except ActauditError as e:
            bad("semantics", str(e))
    dist = None
    if "distribution" in raw:
        text = string("distribution")  # its own line: not caught below as the parser's
        try:
            dist = weighting_mod.spec_distribution(p.parent, text)
        except ActauditError as e:
            bad("distribution", str(e))
    targets = strings("targets") if "targets" in raw else []
    a = Audit(
        raw["name"],
        targets,
        strings("dtype"),
        None if compute is None else strings("compute"),
        None if rng is None else (float(rng[0]), float(rng[1])),
        {k: v for k, v in params.items()},
        raw.get("samples"),
        raw.get("seed", 0),
        raw.get("grid"),
        dict(tol),
        reference,
        raw.get("grad", False),
        string("device") or "cpu",
        None if dump is None else _spec_path(p, dump),
        string("dump_dtype"),
        sems,
        raw.get("backward", False),
        out_dtype,
        blocks,
        scale_rule,
        dist,
        cflags,
        [resolve_target(p, t) for t in targets],
        run_sems,
    )
    return a


def parse_cflags(v, bad) -> list[str]:
    """A spec's ``cflags``: one string, split as a shell splits it (each quoted word one
    flag), or a list of strings, each one flag as it is."""
    import shlex

    from audit.targets.ckernels import check_flag

    if isinstance(v, str):
        try:
            flags = shlex.split(v)
        except ValueError as e:
            bad(f"cannot be split into flags ({e})")
        if not flags:
            bad("holds no flag")
    elif isinstance(v, list) and v and all(isinstance(f, str) and f and "\0" not in f for f in v):
        flags = list(v)
    else:
        bad("must be a string or a non-empty list of non-empty strings (one flag each)")
        raise AssertionError  # bad raises
    for f in flags:  # the allow-list (code generation only): one line naming the flag
        why = check_flag(f)
        if why is not None:
            bad(f"{f!r} {why}")
    return flags


def run_spec(spec: Spec, progress=None, workers: int | None = None) -> list[tuple[Audit, list[SweepResult]]]:
    """Every audit's results (``workers``: processes per sweep; None: one per core)."""
    from audit.gate import formats as gate_formats

    out = []
    for a in spec.audits:
        try:
            if gate_formats.kind_of(a):  # quantized or block-scaled outputs
                if a.cflags is not None:
                    raise BadOptionError(
                        "key 'cflags' applies to C kernels (c:FILE.c:FUNCTION) of float audits"
                    )
                res = gate_formats.run(a)
            else:
                for k, default in (("blocks", "normal:std=1"), ("scale_rule", "ocp")):
                    if getattr(a, k) != default:
                        raise BadOptionError(
                            f"key '{k}' applies to block-scaled outputs (out_dtype = mxfp8_e4m3, ...), "
                            "not to a float audit"
                        )
                res = sweep(
                    a.run_targets or a.targets,
                    a.dtype,
                    a.compute,
                    range=a.range,
                    samples=a.samples,
                    seed=a.seed,
                    params=a.params or None,
                    grid=a.grid,
                    progress=progress,
                    reference=a.reference,
                    grad=a.grad,
                    device=a.device,
                    dump=a.dump,
                    dump_dtype=a.dump_dtype,
                    semantics=a.run_semantics or a.semantics,
                    backward=a.backward,
                    out_dtype=a.out_dtype,
                    cflags=None if a.cflags is None else shlex.join(a.cflags),
                    **({"distribution": a.distribution} if a.distribution else {}),
                    workers=workers,
                )
            _as_written(a, res)
            for r in res:
                n = _input_count(r)
                if not n:
                    raise BadOptionError(
                        f"{r.candidate} [{r.dtype}] was audited over 0 inputs: zero inputs prove nothing"
                    )
        except ActauditError as e:
            raise type(e)(f"{spec.path}: audit '{a.name}': {e}") from None
        out.append((a, res))
    return out


def _input_count(r) -> int:
    from audit.gate import formats as gate_formats

    if gate_formats.is_format_result(r):
        return int(getattr(r, "count", None) or getattr(r, "elements", 0))
    return int(r.domain.count)


def _as_written(a: Audit, results) -> None:
    """Name each result by the target and semantics as the spec writes them (paths resolved
    against the spec's directory only to run them), so baseline keys do not depend on
    where the spec is read from."""
    names = dict(zip(a.run_targets, a.targets))
    sems = {}
    if a.run_semantics:
        for run, written in zip(a.run_semantics, a.semantics or []):
            sems[semantics_mod.parse(run).canonical()] = semantics_mod.parse(written)
    for r in results:
        r.candidate = names.get(r.candidate, r.candidate)
        sem = getattr(r, "semantics", None)
        if sem is not None and sem.canonical() in sems:
            r.semantics = sems[sem.canonical()]


# --------------------------------------------------------------- baseline
def entry_key(audit: str, r: SweepResult, cflags: list | None = None) -> str:
    """The result's id: audit/candidate/dtype[->out_dtype]/compute[/params][@semantics]
    [ cflags=FLAGS], parameters written exactly (repr), so that nearby values never share an
    entry; a C kernel's flags (``cflags``) each as its own word (shell-quoted)."""
    from audit.gate import formats as gate_formats

    if gate_formats.is_format_result(r):
        return gate_formats.entry_key(audit, r)
    p = ",".join(f"{k}={float(v)!r}" for k, v in sorted(r.params.items()))
    sem = "" if r.semantics is None else f"@{r.semantics.canonical()}"  # ieee: today's keys
    dt = r.dtype + (f"->{r.out_dtype}" if r.out_dtype else "")
    fl = f" cflags={shlex.join(cflags)}" if cflags is not None and str(r.candidate).startswith("c:") else ""
    return f"{audit}/{r.candidate}/{dt}/{r.compute}" + (f"/{p}" if p else "") + sem + fl


def entry(r: SweepResult, a: Audit | None = None) -> dict:
    """The baseline entry of result ``r``; with its audit ``a``, its identity too."""
    from audit.gate import formats as gate_formats

    if gate_formats.is_format_result(r):
        return gate_formats.entry(r, a)
    d = r.to_dict()
    return {
        "candidate": r.candidate,
        "dtype": r.dtype,
        "compute": r.compute,
        "params": r.params,
        **({} if r.semantics is None else {"semantics": r.semantics.canonical()}),
        **({} if a is None else {"identity": gate_identity.float_identity(r, a)}),
        **{m: d[m] for m in METRICS},
        **{c: d[c] for c in COUNTS},
        **weighting_mod.baseline_entry(r.weighted),
        "findings": {f["kind"]: f["intervals"] for f in d["findings"]},
        "finding_counts": {f["kind"]: f["count"] for f in d["findings"]},
        "clip": None if d["clip"] is None else {k: d["clip"][k] for k in CLIP_KEYS},
    }


def make_baseline(spec: Spec, runs, diff_runs=(), model_runs=()) -> dict:
    from audit.gate import diffs as gate_diff
    from audit.gate import models as gate_models

    entries, tolerances, expects = {}, {}, {}
    for d, m in model_runs:
        for a in gate_models.gated(d, m):
            if not isinstance(a, str) and a.status == "audited":
                entries[gate_models.entry_key(d, a.site.id)] = gate_models.entry(d, m, a)
    for a, results in runs:
        for r in results:
            k = entry_key(a.name, r, a.cflags)
            entries[k] = entry(r, a)
            tolerances[k] = a.tolerance
    for d, r in diff_runs:
        k = gate_diff.entry_key(d, r)
        entries[k] = gate_diff.entry(d, r)
        expects[k] = d["expect"]
    return {
        "schema": BASELINE_SCHEMA,
        "actaudit": __version__,
        "spec": str(spec.path),
        # the settings the entries are judged under: a looser one fails check (re-record)
        "verdict": gate_verdict.record(spec, tolerances, expects),
        "entries": entries,
    }


def write_baseline(path: Path, doc: dict) -> None:
    write_text(path, dumps(doc))


def load_baseline(path: Path) -> dict:
    """The baseline, every field validated (type, finiteness, range): anything else is
    refused with one line naming the file and the key."""
    if not Path(path).exists():
        raise BadFileError(f"{path}: baseline not found (run 'actaudit baseline')")
    doc = load_json(path, MAX_FILE, "baseline", unique_keys=True)
    if not isinstance(doc, dict):
        raise BadFileError(f"{path}: must be a JSON object (a baseline of 'actaudit baseline')")
    if "schema" not in doc:
        raise BadFileError(f"{path}: key 'schema' is missing (re-record with actaudit baseline)")
    if doc["schema"] != BASELINE_SCHEMA:
        raise BadFileError(
            f"{path}: key 'schema' is {json.dumps(doc['schema'])}, not '{BASELINE_SCHEMA}', the "
            "schema this actaudit reads (re-record with actaudit baseline)"
        )
    for k in doc:
        if k not in BASELINE_KEYS:
            raise BadFileError(
                f"{path}: key '{k}' is unknown in a baseline (known: {', '.join(BASELINE_KEYS)})"
            )
    for k in BASELINE_KEYS:
        if k not in doc:
            raise BadFileError(f"{path}: key '{k}' is missing")
    if not isinstance(doc["actaudit"], str) or not doc["actaudit"]:
        raise BadFileError(f"{path}: key 'actaudit' must be the version string of the actaudit that wrote it")
    if not isinstance(doc["spec"], str):
        raise BadFileError(f"{path}: key 'spec' must be a string")
    ents = doc.get("entries")
    if not isinstance(ents, dict):
        raise BadFileError(f"{path}: key 'entries' must be an object")
    for k, e in ents.items():
        _check_entry(path, f"entries.{k}", e)
    gate_verdict.check(path, doc["verdict"])
    return doc


def _number(v, allow_nan=True) -> bool:
    """A metric as written by the tool: a number >= 0, or 'inf' (or 'nan')."""
    if isinstance(v, str):
        return v == "inf" or (allow_nan and v == "nan")
    return _is_num(v) and v >= 0


def _bound(v) -> bool:
    """An interval or clip bound: a finite number, '-inf', 'inf' or 'nan' (NaN inputs)."""
    return (isinstance(v, str) and v in ("nan", "inf", "-inf")) or _is_num(v)


def _check_entry(path, where: str, e) -> None:
    def bad(k, msg):
        raise BadFileError(f"{path}: key '{where}{'.' + k if k else ''}' {msg}")

    if not isinstance(e, dict):
        bad("", "must be an object")
    if "kind" in e:
        if e["kind"] not in ("quant", "blocks", "diff", "model"):
            bad("kind", "must be 'quant', 'blocks', 'diff' or 'model' (or absent: a float audit)")
        if e["kind"] == "model":
            from audit.gate import models as gate_models

            return gate_models.check_entry(path, where, e)
        if e["kind"] == "diff":
            from audit.gate import diffs as gate_diff

            return gate_diff.check_entry(path, where, e)
        from audit.gate import formats as gate_formats

        return gate_formats.check_entry(path, where, e)
    for k in e:
        if k not in FLOAT_ENTRY_KEYS and k != "weighted":
            bad(k, f"is unknown in a float entry (known: {', '.join(FLOAT_ENTRY_KEYS)}, weighted)")
    for m in FLOAT_ENTRY_KEYS:
        if m not in e and m not in ("semantics", "identity"):
            bad(m, "is missing")
    if "semantics" in e and not isinstance(e["semantics"], str):
        bad("semantics", "must be a string")
    for m in METRICS:
        if not _number(e[m]):
            bad(m, "must be a number >= 0, 'inf' or 'nan'")
    for c in COUNTS:
        if not (isinstance(e[c], int) and not isinstance(e[c], bool) and 0 <= e[c] < 2**63):
            bad(c, "must be an integer >= 0")
    if "weighted" in e:
        weighting_mod.check_entry(e["weighted"], bad)
    for k in ("candidate", "dtype", "compute"):
        if not isinstance(e[k], str):
            bad(k, "must be a string")
    if not isinstance(e["params"], dict) or not all(_is_num(v) for v in e["params"].values()):
        bad("params", "must be an object of finite numbers")
    f, fc = e["findings"], e["finding_counts"]
    if not isinstance(f, dict) or not isinstance(fc, dict):
        bad("findings", "and 'finding_counts' must be objects")
    for kind, ivs in f.items():
        if kind not in FINDING_KINDS:
            bad(f"findings.{kind}", f"is not a finding kind ({', '.join(FINDING_KINDS)})")
        if not isinstance(ivs, list) or not all(
            isinstance(iv, list) and len(iv) == 2 and all(_bound(b) for b in iv) for iv in ivs
        ):
            bad(f"findings.{kind}", "must be a list of [lo, hi] intervals")
        for iv in ivs:
            lo, hi = float(iv[0]), float(iv[1])
            if not (lo <= hi or (math.isnan(lo) and math.isnan(hi))):
                bad(f"findings.{kind}", f"holds a malformed interval {iv}")
    for kind, n in fc.items():
        if kind not in FINDING_KINDS or not (isinstance(n, int) and not isinstance(n, bool) and n >= 0):
            bad(f"finding_counts.{kind}", "must be a finding kind with an integer count >= 0")
    if set(f) != set(fc):
        bad("finding_counts", "must have the same kinds as 'findings'")
    c = e["clip"]
    if c is not None:
        if not isinstance(c, dict) or not all(k in c for k in ("lo", "hi", "lo_action", "hi_action")):
            bad("clip", "must be null or an object with lo, hi, lo_action, hi_action")
        for k in c:
            if k not in CLIP_KEYS:
                bad(f"clip.{k}", f"is unknown in a clip (known: {', '.join(CLIP_KEYS)})")
        for k in ("lo", "hi", "lo_safe", "hi_safe"):
            if c.get(k) is not None and not _is_num(c[k]):
                bad(f"clip.{k}", "must be null or a finite number")
        for k in ("lo_action", "hi_action"):
            if c[k] not in ("none", "clamp", "identity", "constant"):
                bad(f"clip.{k}", "must be one of none, clamp, identity, constant")
        if not isinstance(c.get("note", ""), str):
            bad("clip.note", "must be a string")
    if "identity" not in e:
        bad("identity", "is missing (what produced the entry: re-record with actaudit baseline)")
    gate_identity.check(path, where, e["identity"], "float")
    n = e["identity"]["inputs"]
    if not (isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 2**63):
        bad("identity.inputs", "must be an integer >= 0")
    counts = {c: e[c] for c in COUNTS} | {f"finding_counts.{k}": v for k, v in fc.items()}
    for c, v in counts.items():
        if v > n + 3:  # (the special inputs +-inf and NaN are counted beside the finite ones)
            bad(c, f"is {v}, more than the entry's {n} inputs")


# ---------------------------------------------------------------- compare
@dataclass
class Change:
    key: str
    candidate: str
    status: str  # "fail", "improved", "ok", "removed"
    messages: list = field(default_factory=list)


def _show(a, b=None) -> str:
    """Numbers for people, rounded, with as many digits as it takes to tell a from b."""

    def fmt(v, d):  # NaN said as such (a gate line is not a table cell)
        return "nan" if math.isnan(v) else format_number(v, d)

    a = _num(a)
    if b is None:
        return fmt(a, 5)
    b = _num(b)
    for d in range(5, 18):
        sa, sb = fmt(a, d), fmt(b, d)
        if sa != sb or a == b or (math.isnan(a) and math.isnan(b)):
            return f"{sa} -> {sb}"
    return f"{a!r} -> {b!r}"


def _clip_side(c: dict, side: str) -> float:
    """How far from zero the candidate is within the clip tolerance on one side, unclipped:
    ``lo_safe`` / ``hi_safe`` (+-inf where that is the whole side).  (Baselines without
    them: the clip bound; 0 where no clip helps: fail closed.)"""
    if f"{side}_safe" in c:
        v = c[f"{side}_safe"]
        return (-math.inf if side == "lo" else math.inf) if v is None else _num(v)
    b, action = c[side], c[f"{side}_action"]
    if b is not None:
        return _num(b)
    helps_not = action == "none" and f"{side} side:" in (c.get("note") or "")
    if helps_not:
        return 0.0
    return -math.inf if side == "lo" else math.inf


def tolerance_failures(a: Audit, r: SweepResult) -> list[str]:
    """What breaks the audit's tolerances; a tolerance that cannot be decided fails."""
    from audit.gate import formats as gate_formats

    if gate_formats.is_format_result(r):
        return gate_formats.tolerance_failures(a, r, _show)
    unknown = sorted(
        set(a.tolerance) & {"max_code_error", "correct_code_fraction", "max_elem_ulp", "scale_diff_blocks"}
    )
    tol = a.tolerance
    now = entry(r)
    fails = [
        f"tolerance '{k}' cannot be checked on a float audit (it is for quantized or block-scaled outputs)"
        for k in unknown
    ]
    fails += weighting_mod.tolerance_failures(tol, r.weighted, _show)
    for m in ("max_ulp", "p99_ulp", "max_abs", "max_rel"):
        if m in tol and not _num(now[m]) <= tol[m]:
            fails.append(f"{m} = {_show(now[m])} exceeds the tolerance {_show(tol[m])}")
    for k, c in (("nan", "nan_count"), ("inf", "inf_count")):
        if tol.get(k) is False and now[c]:
            fails.append(f"{now[c]} {k.upper()} results where the tolerance allows none")
    if "safe_range" in tol:
        lo, hi = tol["safe_range"]
        c = now["clip"]
        if c is None:
            fails.append(
                f"safe_range [{_show(lo)}, {_show(hi)}] cannot be checked: no clip "
                f"recommendation for {r.dtype} (it needs a univariate candidate and "
                "every value of a format of 16 bits or fewer)"
            )
        else:
            clo, chi = _clip_side(c, "lo"), _clip_side(c, "hi")
            if clo > lo or chi < hi:
                show = _show
                fails.append(
                    f"safe clip range [{show(clo)}, {show(chi)}] does not cover the "
                    f"required [{_show(lo)}, {_show(hi)}]" + (f" ({c['note']})" if c.get("note") else "")
                )
    return fails


def _against_baseline(spec: Spec, now: dict, base: dict) -> tuple[list[str], list[str]]:
    if base.get("kind") != now.get("kind"):
        return [
            f"the baseline entry is a {base.get('kind') or 'float'} audit, this is a "
            f"{now.get('kind') or 'float'} audit; re-record with actaudit baseline"
        ], []
    differs = gate_identity.difference(*(_described(e) for e in (now, base)))
    if differs:  # other inputs, another candidate...: nothing to compare, never "improved"
        return [differs], []
    if now.get("kind") == "diff":  # its expectation is checked on each run
        return [], []
    if now.get("kind") == "model":
        from audit.gate import models as gate_models

        return gate_models.against_baseline(spec.slack, now, base, _show)
    if "kind" in base:  # now's kind equals base's here: a kind in now is one in base too
        from audit.gate import formats as gate_formats

        if "kind" not in now:
            return [
                f"the baseline entry is a {base['kind']} audit, this is a float audit; "
                "record the baseline again"
            ], []
        return gate_formats.against_baseline(spec.slack, now, base, _show)
    fails, better = [], []
    for m in METRICS:
        b, n = _num(base[m]), _num(now[m])
        if math.isnan(b) and math.isnan(n):
            continue
        if math.isnan(b):  # no finite result then: nothing to compare with, so no pass
            fails.append(
                f"{m} = {_show(n)} has no baseline value (NaN: no finite result when "
                "recorded); record the baseline again"
            )
        elif math.isnan(n) or n > b * (1 + spec.slack) + 1e-300:
            fails.append(f"{m} got worse: {_show(b, n)}")
        elif n < b * (1 - spec.slack):
            better.append(f"{m} improved: {_show(b, n)}")
    f, b = compare_counts(COUNTS, now, base)
    fails += f
    better += b
    f, b = weighting_mod.against_baseline(spec.slack, now.get("weighted"), base.get("weighted"), _show)
    fails += f
    better += b
    f, b = compare_findings(now, base)
    fails += f
    better += b
    bc, nc = base.get("clip"), now["clip"]
    if bc is not None and nc is None:
        fails.append("no clip recommendation any more (the baseline had one)")
    elif bc and nc:
        blo, bhi = _clip_side(bc, "lo"), _clip_side(bc, "hi")
        nlo, nhi = _clip_side(nc, "lo"), _clip_side(nc, "hi")
        if nlo > blo or nhi < bhi:
            fails.append(
                f"safe clip range shrank: [{_show(blo)}, {_show(bhi)}] -> [{_show(nlo)}, {_show(nhi)}]"
                + (f" ({nc['note']})" if nc.get("note") else "")
            )
        # and the recommended clip bounds themselves (where to clamp), where both have one
        for side, inward in (("lo", lambda n, b: n > b), ("hi", lambda n, b: n < b)):
            b0, n0 = bc.get(side), nc.get(side)
            if b0 is not None and n0 is not None and inward(_num(n0), _num(b0)):
                fails.append(f"clip range shrank: {side} {_show(b0, n0)}")
    return fails, better


# the fields of an entry that say what it is (not what it measured): compared with the identity
DESCRIBED = (
    "candidate",
    "dtype",
    "out_dtype",
    "rule",
    "compute",
    "params",
    "semantics",
    "inputs",
    "elements",
    "blocks",
)


def _described(e: dict) -> dict:
    """The entry's identity, and its descriptive fields (as 'entry.FIELD')."""
    return {**{f"entry.{k}": e.get(k) for k in DESCRIBED if k in e}, **e["identity"]}


def compare(
    spec: Spec,
    runs,
    baseline: dict,
    strict: bool = False,
    diff_runs=None,
    model_runs=None,
    allow_removed: bool = False,
) -> list[Change]:
    """One Change per result of the run (audits, then ``[[diff]]`` entries when
    ``diff_runs`` is given), then one per baseline entry that the spec no longer produces:
    a failure (a spec that lost entries, or a second spec file read instead of the first,
    must not pass), 'removed' with ``allow_removed`` (the entries dropped on purpose).  A
    baseline written by another actaudit version: a 'warning' Change first (a failure with
    ``strict``)."""
    from audit.gate import diffs as gate_diff

    out = []
    ents = baseline["entries"]
    seen = set()
    version = baseline.get("actaudit")
    if version != __version__:
        out.append(
            Change(
                "baseline",
                "baseline",
                "fail" if strict else "warning",
                [
                    f"recorded by actaudit {version}, this is actaudit {__version__}"
                    + ("" if strict else " (--strict fails on this)")
                    + "; re-record with actaudit baseline"
                ],
            )
        )

    verdict = baseline.get("verdict")
    if verdict is None:  # (a baseline dict made by hand: load_baseline requires it)
        out.append(
            Change(
                "verdict",
                "baseline",
                "fail",
                ["the baseline records no slack or tolerances; re-record with actaudit baseline"],
            )
        )
    else:
        looser = gate_verdict.looser_spec(spec, verdict)
        if looser:
            out.append(Change("verdict", "spec", "fail", looser))

    def judge(key, name, fails, now, tol=None, expect=None):
        seen.add(key)
        ch = Change(key, name, "ok")
        better: list[str] = []
        base = ents.get(key)
        if base is None:
            fails.append("not in the baseline (run 'actaudit baseline')")
        else:
            f2, better = _against_baseline(spec, now, base)
            fails += f2
            if verdict is not None and tol is not None:
                rec = verdict["tolerances"].get(key)
                if rec is None:
                    fails.append("the baseline records no tolerance for it; re-record with actaudit baseline")
                else:
                    fails += gate_verdict.looser_tolerance(tol, rec)
            if verdict is not None and expect is not None:
                if key not in verdict["expects"]:
                    fails.append(
                        "the baseline records no expectation for it; re-record with actaudit baseline"
                    )
                else:
                    fails += gate_verdict.looser_expect(expect, verdict["expects"][key])
        if fails:
            ch.status, ch.messages = "fail", fails
        elif better:
            ch.status, ch.messages = "improved", better
        out.append(ch)

    for a, results in runs:
        for r in results:
            judge(
                entry_key(a.name, r, a.cflags),
                r.candidate,
                tolerance_failures(a, r),
                entry(r, a),
                tol=a.tolerance,
            )
    for d, r in diff_runs or ():
        judge(
            gate_diff.entry_key(d, r),
            f"{r.a} vs {r.b}",
            gate_diff.expectation_failures(d, r),
            gate_diff.entry(d, r),
            expect=d["expect"],
        )
    from audit.gate import models as gate_models

    for d, m in model_runs or ():
        if not gate_models.gated(d, m):
            out.append(Change(f"model/{d['name']}", d["name"], "fail", [gate_models.NOTHING]))
        for a in gate_models.gated(d, m):
            sid = a if isinstance(a, str) else a.site.id
            key = gate_models.entry_key(d, sid)
            if isinstance(a, str) or a.status != "audited":
                seen.add(key)
                out.append(Change(key, f"{d['name']} {sid}", "fail", gate_models.tolerance_failures(d, a)))
                continue
            judge(
                key,
                f"{d['name']} {sid} {a.site.pattern}",
                gate_models.tolerance_failures(d, a),
                gate_models.entry(d, m, a),
            )
    for key in ents:
        kind = ents[key].get("kind")
        if (
            key not in seen
            and (diff_runs is not None or kind != "diff")
            and (model_runs is not None or kind != "model")
        ):
            e = ents[key]
            out.append(
                Change(
                    key,
                    str(
                        e.get(
                            "candidate",
                            f"{e.get('identity', {}).get('a')} vs {e.get('identity', {}).get('b')}",
                        )
                    ),
                    "removed" if allow_removed and not strict else "fail",
                    [
                        "in the baseline but no longer in the spec"
                        + (
                            " (re-record with actaudit baseline, or drop it with check --allow-removed)"
                            if not allow_removed
                            else " (--strict fails on this)"
                            if not strict
                            else ""
                        )
                    ],
                )
            )
    return out


def baseline_command(
    spec_path=None, out=None, progress=None, reference=None, force: bool = False
) -> tuple[Path, int, list[str]]:
    """Sweep the spec and write its baseline.  Results that break their own tolerances
    are refused (BaselineRefused, listing them), unless ``force``: then written, and the
    list returned for the caller to show."""
    from audit.gate import diffs as gate_diff
    from audit.gate import models as gate_models

    spec = load_spec(spec_path, reference)
    runs = run_spec(spec, progress)
    diff_runs = gate_diff.run_all(spec.path, spec.diffs, progress)
    model_runs = gate_models.run_all(spec.path, spec.models)
    broken = [
        f"{entry_key(a.name, r, a.cflags)}: {m}"
        for a, results in runs
        for r in results
        for m in tolerance_failures(a, r)
    ] + [
        f"{gate_diff.entry_key(d, r)}: {m}"
        for d, r in diff_runs
        for m in gate_diff.expectation_failures(d, r)
    ]
    broken += [
        f"{gate_models.entry_key(d, a if isinstance(a, str) else a.site.id)}: {msg}"
        for d, m in model_runs
        for a in gate_models.gated(d, m)
        for msg in gate_models.tolerance_failures(d, a)
    ]
    broken += [
        f"model/{d['name']}: {gate_models.NOTHING}" for d, m in model_runs if not gate_models.gated(d, m)
    ]
    if broken and not force:
        raise BaselineRefused(broken)
    doc = make_baseline(spec, runs, diff_runs, model_runs)
    path = Path(out) if out else spec.baseline
    write_baseline(path, doc)
    return path, len(doc["entries"]), broken


class BaselineRefused(ActauditError):
    """Results that already break the tolerances they are recorded under."""

    exit_code = 1

    def __init__(self, broken: list[str]):
        self.broken = broken
        super().__init__(
            f"{len(broken)} tolerance failures in the results to record; nothing "
            "written (fix the tolerances, or record anyway with --force)"
        )


def check_command(
    spec_path=None,
    baseline_path=None,
    progress=None,
    reference=None,
    strict: bool = False,
    require_certified: bool = False,
    allow_removed: bool = False,
) -> tuple[Spec, list[Change]]:
    from audit.gate import diffs as gate_diff

    spec = load_spec(spec_path, reference)
    base = load_baseline(Path(baseline_path) if baseline_path else spec.baseline)
    certified = require_certified or spec.require_certified
    # (require_certified: in this process, so that every oracle table the sweeps use is seen)
    runs = run_spec(spec, progress, 1 if certified else None)
    diff_runs = gate_diff.run_all(spec.path, spec.diffs, progress)
    from audit.gate import models as gate_models

    model_runs = gate_models.run_all(spec.path, spec.models)
    changes = compare(spec, runs, base, strict, diff_runs, model_runs, allow_removed)
    if certified:
        from audit.measure.certify import uncertified_used_tables

        changes += [Change(key, "", "fail", [msg]) for key, msg in uncertified_used_tables()]
    return spec, changes
