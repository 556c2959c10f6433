"""``[[model]]`` entries of the audit spec: a model's activation sites, gated in CI.

    [[model]]                                # [[tool.actaudit.model]] in pyproject.toml
    name = "bert"
    path = "models/bert.onnx"                # relative to the spec file
    data = "calib/"                          # a .npz batch or a directory of them, or "random"
    # with data = "random": shape = { x = [1, 128, 768] }, seed = 0, batches = 1
    engine = "ort"
    opt_level = "all"                        # ORT's graph optimization level (default all)
    # optional: dtype, compute, bin ("exact", "bf16", "fp16"), sites = ["s1", "s3"]
    tolerance = { weighted_p99_ulp = 4, weighted_nan = 0, observed_ulp = 64 }

``actaudit baseline`` records one entry per audited site (``model/NAME/SITE``): its
identity binds the model's sha256, the data's digest (the batches' names, dtypes, shapes
and bytes; for "random" the seed and shapes), the engine and its version, dispatch, opt
level, dtype, compute and bin, and the site's pattern, nodes and engine op; beside it the
weighted figures and the worst observed error.  ``actaudit check`` runs the model again:
another model, other data, another ORT version or level is a failure naming what changed
(re-record with actaudit baseline), never a comparison; the figures must meet the
tolerance and not get worse than the baseline's (the spec's slack).  A site not audited
(no reference, a near match, an engine op that cannot run alone) is not gated; a listed
site that is not audited fails, and so does an entry with no audited site at all.
"""

from __future__ import annotations

import math
from pathlib import Path

from audit.errors import ActauditError, BadFileError
from audit.gate.schema import SPEC_KEYS, entry_head, refuse_unknown
from audit.gate.schema import is_number as _num

MODEL_KEYS = set(SPEC_KEYS["model"])
TOLERANCES = tuple(SPEC_KEYS["model_tolerance"])
NOTHING = "no audited site to gate (zero sites prove nothing)"
FIGURES = ("mean_ulp", "p99_ulp", "nan", "inf", "underflow", "correctly_rounded")


def parse(p: Path, raws, where: str) -> list[dict]:
    if raws is None:
        return []
    if not isinstance(raws, list):
        raise BadFileError(f"{p}: key '{where}' must be an array of tables ([[model]])")
    out: list[dict] = []
    names: set[str] = set()
    for i, raw in enumerate(raws):
        w = f"{where}[{i}]"
        keys = ("name", "path", "data")
        bad = entry_head(p, raw, "model", w, keys, keys, names)
        random = raw["data"] == "random"
        shape = raw.get("shape")
        if random:
            if not isinstance(shape, dict) or not shape:
                bad("shape", 'is required with data = "random": a table NAME = [dims]')
            assert isinstance(shape, dict)
            for k, v in shape.items():
                if not (
                    isinstance(v, list)
                    and v
                    and all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in v)
                ):
                    bad(f"shape.{k}", "must be a non-empty list of positive integers")
        else:
            for k in ("shape", "seed", "batches"):
                if k in raw:
                    bad(k, 'applies to data = "random"')
        for k in ("seed", "batches"):
            if k in raw and not (
                isinstance(raw[k], int)
                and not isinstance(raw[k], bool)
                and raw[k] >= (0 if k == "seed" else 1)
            ):
                bad(k, "must be an integer >= " + ("0" if k == "seed" else "1"))
        for k in ("engine", "opt_level", "dtype", "compute", "bin"):
            if k in raw and not (isinstance(raw[k], str) and raw[k]):
                bad(k, "must be a non-empty string")
        allowed = {k: SPEC_KEYS["model"][k].allowed for k in ("engine", "opt_level", "bin")}
        for k, vals in allowed.items():
            if k in raw and raw[k] not in vals:
                bad(k, f"must be one of {', '.join(vals)}")
        sites = raw.get("sites")
        if sites is not None and not (
            isinstance(sites, list) and all(isinstance(s, str) and s for s in sites)
        ):
            bad("sites", "must be a list of site ids (s1, s2, ...)")
        tol = raw.get("tolerance", {})
        if not isinstance(tol, dict):
            bad("tolerance", "must be a table")
        refuse_unknown(p, tol, "model_tolerance", f"{w}.tolerance")
        for k, v in tol.items():
            if (
                not _num(v)
                or v < 0
                or (k in ("weighted_nan", "weighted_inf", "weighted_underflow") and v > 1)
            ):
                bad(f"tolerance.{k}", "must be a number >= 0 (a probability in [0, 1])")
        out.append(
            {
                "name": raw["name"],
                "path": raw["path"],
                "run_path": str(p.parent / raw["path"]),
                "data": raw["data"],
                "run_data": None if random else str(p.parent / raw["data"]),
                "shape": {k: tuple(v) for k, v in (shape or {}).items()} if random else None,
                "seed": int(raw.get("seed", 0)),
                "batches": int(raw.get("batches", 1)),
                "engine": raw.get("engine", "ort"),
                "opt_level": raw.get("opt_level", "all"),
                "dtype": raw.get("dtype"),
                "compute": raw.get("compute"),
                "bin": raw.get("bin"),
                "sites": sites,
                "tolerance": {k: float(v) for k, v in tol.items()},
            }
        )
    return out


def run_all(spec_path: Path, entries: list[dict]) -> list:
    """(entry, ModelAudit) per entry."""
    from audit.model.audit import audit_model

    out = []
    for d in entries:
        try:
            m = audit_model(
                d["run_path"],
                data=d["run_data"],
                random=d["run_data"] is None,
                shapes=d["shape"],
                seed=d["seed"],
                batches=d["batches"],
                engine=d["engine"],
                opt_level=d["opt_level"],
                dtype=d["dtype"],
                compute=d["compute"],
                bin=d["bin"],
            )
        except ActauditError as e:
            raise type(e)(f"{spec_path}: model '{d['name']}': {e}") from None
        out.append((d, m))
    return out


def gated(d: dict, m) -> list:
    """The sites of the entry: every audited one, or those ``sites`` names (each must be)."""
    if d["sites"] is None:
        return [a for a in m.sites if a.status == "audited"]
    by_id = {a.site.id: a for a in m.sites}
    return [by_id.get(s) or s for s in d["sites"]]


def entry_key(d: dict, site_id: str) -> str:
    return f"model/{d['name']}/{site_id}"


def identity(d: dict, m, a) -> dict:
    from audit.gate.identity import normalize

    b = m.batches
    return normalize(
        {
            "model": d["path"],
            "model_sha256": m.sha256,
            "data": d["data"],
            "data_digest": b.digest,
            "engine": m.engine["name"],
            "engine_version": m.engine["version"],
            "dispatch": m.engine["dispatch"],
            "opt_level": m.engine["opt_level"],
            "dtype": a.dtype,
            "compute": m.engine["compute"],
            "bin": m.engine["bin"],
            "site": a.site.id,
            "pattern": a.site.pattern,
            "nodes": list(a.site.nodes),
            "engine_op": a.engine.target or "graph " + " ".join(a.engine.nodes),
        }
    )


def entry(d: dict, m, a) -> dict:
    from audit.io import json_number

    w = a.weighted or {}
    return {
        "kind": "model",
        "identity": identity(d, m, a),
        "weighted": {k: json_number(float(w[k])) for k in FIGURES if k in w},
        "observed_ulp": json_number(float(a.worst.get("observed_ulp", math.nan))),
    }


def _f(v) -> float:
    return float(v) if isinstance(v, str) else float(v)


def tolerance_failures(d: dict, a) -> list[str]:
    if isinstance(a, str):
        return [f"site {a} is not in the model"]
    if a.status != "audited":
        return [f"site {a.site.id} is not audited: {a.findings[-1] if a.findings else a.status}"]
    out = []
    w = a.weighted or {}
    now = {f"weighted_{k}": w.get(k) for k in ("mean_ulp", "p99_ulp", "nan", "inf", "underflow")}
    now["observed_ulp"] = a.worst.get("observed_ulp")
    for k, lim in d["tolerance"].items():
        v = now.get(k)
        if v is None or math.isnan(float(v)) or float(v) > lim:
            out.append(f"{k} = {v!r} exceeds {lim:g}")
    return out


def check_entry(path, where: str, e: dict) -> None:
    from audit.gate import identity as gate_identity

    for k in e:
        if k not in ("kind", "identity", "weighted", "observed_ulp"):
            raise BadFileError(
                f"{path}: key '{where}.{k}' is unknown in a model entry (known: identity, kind, observed_ulp, weighted)"
            )
    for k in ("identity", "weighted", "observed_ulp"):
        if k not in e:
            raise BadFileError(f"{path}: key '{where}.{k}' is missing")
    gate_identity.check(path, where, e["identity"], "model")
    if not isinstance(e["weighted"], dict) or set(e["weighted"]) - set(FIGURES):
        raise BadFileError(f"{path}: key '{where}.weighted' must be an object of {', '.join(FIGURES)}")
    for k, v in [*e["weighted"].items(), ("observed_ulp", e["observed_ulp"])]:
        if not ((_num(v) and v >= 0) or v in ("nan", "inf")):
            raise BadFileError(f"{path}: key '{where}.{k}' must be a number >= 0, 'inf' or 'nan'")


def against_baseline(slack: float, now: dict, base: dict, show) -> tuple[list[str], list[str]]:
    """Figures that got worse (rose; correctly_rounded: fell) or improved."""
    fails, better = [], []
    pairs = [(f"weighted.{k}", base["weighted"].get(k), now["weighted"].get(k)) for k in FIGURES]
    pairs.append(("observed_ulp", base["observed_ulp"], now["observed_ulp"]))
    for k, b, n in pairs:
        if b is None or n is None:
            continue
        b, n = _f(b), _f(n)
        if math.isnan(b) and math.isnan(n):
            continue
        up = k != "weighted.correctly_rounded"
        worse = math.isnan(n) or (n > b * (1 + slack) + 1e-300 if up else n < b * (1 - slack))
        if worse:
            fails.append(f"{k} got worse: {show(b, n)}")
        elif (n < b * (1 - slack)) if up else (n > b * (1 + slack)):
            better.append(f"{k} improved: {show(b, n)}")
    return fails, better
