"""``[[diff]]`` entries of the audit spec: two implementations that must agree, in CI.

    [[diff]]                                 # [[tool.actaudit.diff]] in pyproject.toml
    name = "compiled-silu"
    a = "torch-compile:silu"                 # any target diff takes
    b = "torch:silu"
    dtype = ["bf16"]
    expect = "identical"                     # or "not-worse": A never farther from exact than B
    # optional: compute, reference, range = [lo, hi], grid, params = { ... }

``actaudit check`` runs them with the audits; an expectation not met is a failure line
(``FAIL diff/compiled-silu/bf16: ...``).  ``actaudit baseline`` records each one's identity
(both implementations and their own identity, formats, parameters, range, grid, how many
inputs): a diff whose identity differs from the baseline's (a narrowed range, another
implementation) fails too.  A diff over zero inputs is an error, never "identical".
"""

from __future__ import annotations

from pathlib import Path

from audit.errors import ActauditError, BadFileError
from audit.gate import identity as gate_identity
from audit.gate.schema import SPEC_KEYS, entry_head
from audit.gate.schema import is_number as _num

DIFF_KEYS = set(SPEC_KEYS["diff"])
EXPECT = SPEC_KEYS["diff"]["expect"].allowed


def parse(p: Path, raws, where: str) -> list[dict]:
    from audit.gate.shared import resolve_target

    if raws is None:
        return []
    if not isinstance(raws, list):
        raise BadFileError(f"{p}: key '{where}' must be an array of tables ([[diff]])")
    out: list[dict] = []
    names: set[str] = set()
    for i, raw in enumerate(raws):
        w = f"{where}[{i}]"
        bad = entry_head(p, raw, "diff", w, ("name", "a", "b", "dtype"), ("name", "a", "b"), names)
        dt = [raw["dtype"]] if isinstance(raw["dtype"], str) else raw["dtype"]
        if not isinstance(dt, list) or not dt or not all(isinstance(d, str) and d for d in dt):
            bad("dtype", "must be a string or a non-empty list of strings")
        for k in ("compute", "reference"):
            if k in raw and not (isinstance(raw[k], str) and raw[k]):
                bad(k, "must be a non-empty string")
        rng = raw.get("range")
        if rng is not None and not (
            isinstance(rng, list) and len(rng) == 2 and all(_num(v) for v in rng) and rng[0] < rng[1]
        ):
            bad("range", "must be [lo, hi] with finite lo < hi")
        if "grid" in raw and (
            not isinstance(raw["grid"], int) or isinstance(raw["grid"], bool) or not 2 <= raw["grid"] < 2**31
        ):
            bad("grid", "must be an integer >= 2")
        params = raw.get("params", {})
        if not isinstance(params, dict) or not all(_num(v) for v in params.values()):
            bad("params", "must be a table of finite numbers")
        expect = raw.get("expect", "identical")
        if expect not in EXPECT:
            bad("expect", f"must be one of {', '.join(EXPECT)}")
        out.append(
            {
                "name": raw["name"],
                "a": raw["a"],
                "b": raw["b"],
                "run_a": resolve_target(p, raw["a"]),
                "run_b": resolve_target(p, raw["b"]),
                "dtype": dt,
                "compute": raw.get("compute"),
                "reference": raw.get("reference"),
                "range": None if rng is None else (float(rng[0]), float(rng[1])),
                "grid": raw.get("grid"),
                "params": {k: float(v) for k, v in params.items()},
                "expect": expect,
            }
        )
    return out


def run_all(spec_path: Path, entries: list[dict], progress=None) -> list:
    """(entry, DiffResult) per entry and format; zero inputs are an error."""
    from audit.compare.diff import diff

    out = []
    for d in entries:
        for f in d["dtype"]:
            try:
                r = diff(
                    d.get("run_a", d["a"]),
                    d.get("run_b", d["b"]),
                    f,
                    d["compute"],
                    range=d["range"],
                    grid=d["grid"],
                    reference=d["reference"],
                    params=d["params"] or None,
                    progress=progress,
                )
            except ActauditError as e:
                raise type(e)(f"{spec_path}: diff '{d['name']}': {e}") from None
            # named as the spec writes them (paths resolved only to run them)
            for side in ("a", "b"):
                if getattr(r, side) == d.get(f"run_{side}"):
                    setattr(r, side, d[side])
            out.append((d, r))
    return out


def entry_key(d: dict, r) -> str:
    return f"diff/{d['name']}/{r.dtype}"


def entry(d: dict, r) -> dict:
    """A diff's baseline entry: what it compared (its expectation is checked on each run)."""
    return {"kind": "diff", "identity": gate_identity.diff_identity(d, r)}


def check_entry(path, where: str, e: dict) -> None:
    for k in e:
        if k not in ("kind", "identity"):
            raise BadFileError(
                f"{path}: key '{where}.{k}' is unknown in a diff entry (known: identity, kind)"
            )
    if "identity" not in e:
        raise BadFileError(f"{path}: key '{where}.identity' is missing")
    gate_identity.check(path, where, e["identity"], "diff")


def expectation_failures(d: dict, r) -> list[str]:
    ok = (
        r.verdict == "identical"
        if d["expect"] == "identical"
        else r.verdict in ("identical", "A better", "same error")
    )
    if ok:
        return []
    iv = r.intervals[0] if r.intervals else None
    where = f"; first at [{iv['lo']:g}, {iv['hi']:g}]" if iv else ""
    return [
        f"{r.a} vs {r.b} [{r.dtype}/{r.compute}]: expected {d['expect']}, "
        f"got {r.verdict}: {r.differing} of {r.count} inputs differ "
        f"(A closer at {r.a_closer}, B at {r.b_closer}), max distance "
        f"{r.max_distance} ULP{where}"
    ]
