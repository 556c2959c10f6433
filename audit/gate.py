"""The CI gate: an audit spec, a baseline, and the comparison that fails on regressions.

Spec (``actaudit.toml``, or ``[tool.actaudit]`` of pyproject.toml)::

    baseline = "data/baseline.json"          # default path of the baseline
    slack = 1e-9                             # relative slack on metrics (default 1e-9)

    [[audit]]                                # [[tool.actaudit.audit]] in pyproject.toml
    name = "gelu-fp16"
    targets = ["gelu.tanh", "sigmoid"]       # candidates or families
    dtype = ["fp16", "bf16"]
    compute = "fp32"                         # optional
    range = [-10.0, 10.0]                    # optional
    params = { limit = 8.0 }                 # optional
    samples = 65536                          # fp32 / fp64 only; seed = 0
    tolerance = { max_ulp = 4096, p99_ulp = 64, max_abs = 1e-2, max_rel = 1.0,
                  nan = false, inf = false, safe_range = [-3.0, 3.0] }

The baseline (plain JSON) records, per audit x candidate x path, the metrics, the finding
intervals and the clip range.  ``check`` fails when a tolerance is exceeded, a metric is
worse than the baseline by more than the slack, a finding interval appears that the
baseline did not have, or the clip range shrinks; it reports improvements apart.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__
from .errors import ActauditError, BadFileError
from .io import dumps, write_text
from .sweep import SweepResult, sweep

import tomllib

BASELINE_SCHEMA = "actaudit.baseline/1"
MAX_FILE = 1 << 24
METRICS = ("max_ulp", "p99_ulp", "mean_ulp", "max_abs", "max_rel")
COUNTS = ("nan_count", "inf_count")
TOLERANCE_KEYS = {"max_ulp", "p99_ulp", "max_abs", "max_rel", "nan", "inf", "safe_range"}
AUDIT_KEYS = {"name", "targets", "dtype", "compute", "range", "params", "samples", "seed",
              "tolerance", "grid", "out_dtype"}


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
    out_dtype: str | None = None  # one element format (--out-dtype)


@dataclass
class Spec:
    path: Path
    audits: list
    baseline: Path
    slack: float = 1e-9


# ------------------------------------------------------------------- spec
def find_spec(path: str | Path | None = None) -> Path:
    if path is not None:
        p = Path(path)
        if not p.exists():
            raise BadFileError(f"{p}: spec file not found")
        return p
    for cand in (Path("actaudit.toml"), Path("pyproject.toml")):
        if cand.exists() and (cand.name == "actaudit.toml" or _has_tool_section(cand)):
            return cand
    raise BadFileError("no audit spec: write actaudit.toml or [tool.actaudit] in pyproject.toml")


def _has_tool_section(p: Path) -> bool:
    try:
        return "actaudit" in tomllib.loads(p.read_text(encoding="utf-8")).get("tool", {})
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return False


def load_spec(path: str | Path | None = None) -> Spec:
    p = find_spec(path)
    if p.stat().st_size > MAX_FILE:
        raise BadFileError(f"{p}: {p.stat().st_size} bytes is too large for an audit spec")
    try:
        doc = tomllib.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise BadFileError(f"{p}: cannot read ({e})") from None
    except tomllib.TOMLDecodeError as e:
        raise BadFileError(f"{p}: malformed TOML ({e})") from None
    where = "tool.actaudit" if p.name == "pyproject.toml" else ""
    if where:
        doc = doc.get("tool", {}).get("actaudit")
        if doc is None:
            raise BadFileError(f"{p}: no [tool.actaudit] section")
    key = (lambda k: f"{where}.{k}" if where else k)
    raws = doc.get("audit")
    if not isinstance(raws, list) or not raws:
        raise BadFileError(f"{p}: key '{key('audit')}' must be a non-empty array of tables ([[audit]])")
    audits = []
    names = set()
    for i, raw in enumerate(raws):
        audits.append(_audit(p, raw, f"{key('audit')}[{i}]"))
        if audits[-1].name in names:
            raise BadFileError(f"{p}: key '{key('audit')}[{i}].name': duplicate name '{audits[-1].name}'")
        names.add(audits[-1].name)
    base = doc.get("baseline", "data/baseline.json")
    if not isinstance(base, str):
        raise BadFileError(f"{p}: key '{key('baseline')}' must be a path string")
    slack = doc.get("slack", 1e-9)
    if not isinstance(slack, (int, float)) or isinstance(slack, bool) or not slack >= 0:
        raise BadFileError(f"{p}: key '{key('slack')}' must be a number >= 0")
    return Spec(p, audits, (p.parent / base), float(slack))


def _audit(p: Path, raw, where: str) -> Audit:
    def bad(k, msg):
        raise BadFileError(f"{p}: key '{where}.{k}' {msg}")

    if not isinstance(raw, dict):
        raise BadFileError(f"{p}: key '{where}' must be a table")
    unknown = set(raw) - AUDIT_KEYS
    if unknown:
        bad(sorted(unknown)[0], f"is unknown (known: {', '.join(sorted(AUDIT_KEYS))})")
    for k in ("name", "targets", "dtype"):
        if k not in raw:
            bad(k, "is missing")
    if not isinstance(raw["name"], str) or not raw["name"]:
        bad("name", "must be a non-empty string")

    def strings(k):
        v = raw.get(k)
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list) or not v or not all(isinstance(s, str) for s in v):
            bad(k, "must be a string or a non-empty list of strings")
        return v

    rng = raw.get("range")
    if rng is not None and not (isinstance(rng, list) and len(rng) == 2
                                and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in rng)):
        bad("range", "must be [lo, hi]")
    params = raw.get("params", {})
    if not isinstance(params, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) or
            (isinstance(v, list) and all(isinstance(x, (int, float)) for x in v)) for v in params.values()):
        bad("params", "must be a table of numbers")
    for k in ("samples", "seed", "grid"):
        if k in raw and (not isinstance(raw[k], int) or isinstance(raw[k], bool)):
            bad(k, "must be an integer")
    tol = raw.get("tolerance", {})
    if not isinstance(tol, dict):
        bad("tolerance", "must be a table")
    for k, v in tol.items():
        if k not in TOLERANCE_KEYS:
            bad(f"tolerance.{k}", f"is unknown (known: {', '.join(sorted(TOLERANCE_KEYS))})")
        if k in ("nan", "inf") and not isinstance(v, bool):
            bad(f"tolerance.{k}", "must be true or false")
        if k in ("max_ulp", "p99_ulp", "max_abs", "max_rel") and (
                not isinstance(v, (int, float)) or isinstance(v, bool) or not v >= 0):
            bad(f"tolerance.{k}", "must be a number >= 0")
        if k == "safe_range" and not (isinstance(v, list) and len(v) == 2 and
                                      all(isinstance(x, (int, float)) for x in v)):
            bad(f"tolerance.{k}", "must be [lo, hi]")
    compute = raw.get("compute")
    out_dtype = raw.get("out_dtype")
    if out_dtype is not None and not isinstance(out_dtype, str):
        bad("out_dtype", "must be a string (one format)")
    return Audit(raw["name"], strings("targets"), strings("dtype"),
                 None if compute is None else strings("compute"),
                 None if rng is None else (float(rng[0]), float(rng[1])),
                 {k: v for k, v in params.items()}, raw.get("samples"), raw.get("seed", 0),
                 raw.get("grid"), dict(tol), out_dtype)


def run_spec(spec: Spec, progress=None) -> list[tuple[Audit, list[SweepResult]]]:
    out = []
    for a in spec.audits:
        try:
            res = sweep(a.targets, a.dtype, a.compute, range=a.range, samples=a.samples,
                        seed=a.seed, params=a.params or None, grid=a.grid, progress=progress,
                        out_dtype=a.out_dtype)
        except ActauditError as e:
            raise type(e)(f"{spec.path}: audit '{a.name}': {e}") from None
        out.append((a, res))
    return out


# --------------------------------------------------------------- baseline
def entry_key(audit: str, r: SweepResult) -> str:
    p = ",".join(f"{k}={v:g}" for k, v in sorted(r.params.items()))
    dt = r.dtype + (f"->{r.out_dtype}" if r.out_dtype else "")
    return f"{audit}/{r.candidate}/{dt}/{r.compute}" + (f"/{p}" if p else "")


def entry(r: SweepResult) -> dict:
    d = r.to_dict()
    return {"candidate": r.candidate, "dtype": r.dtype, "compute": r.compute, "params": r.params,
            "inputs": d["inputs"], "seed": None,
            **{m: d[m] for m in METRICS}, **{c: d[c] for c in COUNTS},
            "findings": {f["kind"]: f["intervals"] for f in d["findings"]},
            "clip": None if d["clip"] is None else {"lo": d["clip"]["lo"], "hi": d["clip"]["hi"]}}


def make_baseline(spec: Spec, runs) -> dict:
    entries = {}
    for a, results in runs:
        for r in results:
            e = entry(r)
            e["seed"] = a.seed
            entries[entry_key(a.name, r)] = e
    return {"schema": BASELINE_SCHEMA, "actaudit": __version__, "spec": str(spec.path),
            "entries": entries}


def write_baseline(path: Path, doc: dict) -> None:
    write_text(path, dumps(doc))


def load_baseline(path: Path) -> dict:
    try:
        if Path(path).stat().st_size > MAX_FILE * 64:
            raise BadFileError(f"{path}: too large for a baseline")
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadFileError(f"{path}: baseline not found (run 'actaudit baseline')") from None
    except (OSError, UnicodeDecodeError) as e:
        raise BadFileError(f"{path}: cannot read ({e})") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise BadFileError(f"{path}: corrupted JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(doc, dict) or doc.get("schema") != BASELINE_SCHEMA:
        raise BadFileError(f"{path}: key 'schema' must be '{BASELINE_SCHEMA}'")
    ents = doc.get("entries")
    if not isinstance(ents, dict):
        raise BadFileError(f"{path}: key 'entries' must be an object")
    for k, e in ents.items():
        if not isinstance(e, dict):
            raise BadFileError(f"{path}: key 'entries.{k}' must be an object")
        for m in METRICS + COUNTS + ("findings",):
            if m not in e:
                raise BadFileError(f"{path}: key 'entries.{k}.{m}' is missing")
        for m in METRICS:
            if not isinstance(e[m], (int, float, str)) or (isinstance(e[m], str) and e[m] not in ("nan", "inf", "-inf")):
                raise BadFileError(f"{path}: key 'entries.{k}.{m}' must be a number")
        if not isinstance(e["findings"], dict):
            raise BadFileError(f"{path}: key 'entries.{k}.findings' must be an object")
    return doc


# ---------------------------------------------------------------- compare
@dataclass
class Change:
    key: str
    candidate: str
    status: str  # "fail", "improved", "ok"
    messages: list = field(default_factory=list)


def _num(v) -> float:
    if isinstance(v, str):
        return float(v)
    return math.nan if v is None else float(v)


def _covered(iv, base_ivs) -> bool:
    """Whether interval iv lies inside one of base_ivs (a NaN input covers a NaN input)."""
    lo, hi = _num(iv[0]), _num(iv[1])
    for b in base_ivs:
        blo, bhi = _num(b[0]), _num(b[1])
        if math.isnan(lo) or math.isnan(hi):
            if math.isnan(blo) and math.isnan(bhi):
                return True
            continue
        if blo <= lo and hi <= bhi:
            return True
    return False


def compare(spec: Spec, runs, baseline: dict) -> list[Change]:
    out = []
    ents = baseline["entries"]
    for a, results in runs:
        tol = a.tolerance
        for r in results:
            key = entry_key(a.name, r)
            now = entry(r)
            ch = Change(key, r.candidate, "ok")
            fails, better = ch.messages, []
            # tolerances
            for m in ("max_ulp", "p99_ulp", "max_abs", "max_rel"):
                if m in tol and not _num(now[m]) <= tol[m]:
                    fails.append(f"{r.candidate} [{r.dtype}/{r.compute}]: {m} = {now[m]} exceeds "
                                 f"the tolerance {tol[m]}")
            for k, c in (("nan", "nan_count"), ("inf", "inf_count")):
                if tol.get(k) is False and now[c]:
                    fails.append(f"{r.candidate} [{r.dtype}/{r.compute}]: {now[c]} {k.upper()} results "
                                 f"where the tolerance allows none")
            if "safe_range" in tol and now["clip"] is not None:
                lo, hi = tol["safe_range"]
                c = now["clip"]
                if (c["lo"] is not None and _num(c["lo"]) > lo) or (c["hi"] is not None and _num(c["hi"]) < hi):
                    fails.append(f"{r.candidate} [{r.dtype}/{r.compute}]: safe clip range "
                                 f"[{c['lo']}, {c['hi']}] does not cover the required [{lo}, {hi}]")
            base = ents.get(key)
            if base is None:
                fails.append(f"{key}: not in the baseline (run 'actaudit baseline')")
            else:
                for m in METRICS:
                    b, n = _num(base[m]), _num(now[m])
                    if math.isnan(b) and math.isnan(n):
                        continue
                    if n > b * (1 + spec.slack) + 1e-300 or (math.isnan(n) and not math.isnan(b)):
                        fails.append(f"{r.candidate} [{r.dtype}/{r.compute}]: {m} got worse: "
                                     f"{base[m]} -> {now[m]}")
                    elif n < b * (1 - spec.slack) or (math.isnan(b) and not math.isnan(n)):
                        better.append(f"{m} improved: {base[m]} -> {now[m]}")
                for c in COUNTS:
                    if now[c] > base[c]:
                        fails.append(f"{r.candidate} [{r.dtype}/{r.compute}]: {c} rose: {base[c]} -> {now[c]}")
                    elif now[c] < base[c]:
                        better.append(f"{c} fell: {base[c]} -> {now[c]}")
                for kind, ivs in now["findings"].items():
                    new = [iv for iv in ivs if not _covered(iv, base["findings"].get(kind, []))]
                    if new:
                        fails.append(f"{r.candidate} [{r.dtype}/{r.compute}]: new {kind} interval "
                                     f"[{new[0][0]}, {new[0][1]}]" + (f" and {len(new) - 1} more" if len(new) > 1 else ""))
                bc, nc = base.get("clip"), now["clip"]
                if bc and nc:
                    if (bc["lo"] is not None and (nc["lo"] is None or _num(nc["lo"]) > _num(bc["lo"])) and nc["lo"] != bc["lo"]) \
                            or (bc["hi"] is not None and (nc["hi"] is None or _num(nc["hi"]) < _num(bc["hi"])) and nc["hi"] != bc["hi"]):
                        fails.append(f"{r.candidate} [{r.dtype}/{r.compute}]: safe clip range shrank: "
                                     f"[{bc['lo']}, {bc['hi']}] -> [{nc['lo']}, {nc['hi']}]")
            if fails:
                ch.status = "fail"
            elif better:
                ch.status = "improved"
                ch.messages = better
            out.append(ch)
    return out


def baseline_command(spec_path=None, out=None, progress=None) -> tuple[Path, int]:
    spec = load_spec(spec_path)
    runs = run_spec(spec, progress)
    doc = make_baseline(spec, runs)
    path = Path(out) if out else spec.baseline
    write_baseline(path, doc)
    return path, len(doc["entries"])


def check_command(spec_path=None, baseline_path=None, progress=None) -> tuple[Spec, list[Change]]:
    spec = load_spec(spec_path)
    base = load_baseline(Path(baseline_path) if baseline_path else spec.baseline)
    runs = run_spec(spec, progress)
    return spec, compare(spec, runs, base)
