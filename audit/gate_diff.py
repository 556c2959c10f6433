"""``[[diff]]`` entries of the audit spec: two implementations that must agree, in CI.

    [[diff]]                                 # [[tool.actaudit.diff]] in pyproject.toml
    name = "compiled-silu"
    a = "torch-compile:silu"                 # any target diff takes
    b = "torch:silu"
    dtype = ["bf16"]
    expect = "identical"                     # or "not-worse": A never farther from exact than B
    # optional: compute, reference, range = [lo, hi], grid, params = { ... }

``actaudit check`` runs them with the audits; an expectation not met is a failure line
(``FAIL diff/compiled-silu/bf16: ...``).  They need no baseline.
"""

from __future__ import annotations

from pathlib import Path

from .errors import ActauditError, BadFileError

DIFF_KEYS = {"name", "a", "b", "dtype", "compute", "reference", "range", "grid", "params", "expect"}
EXPECT = ("identical", "not-worse")


def parse(p: Path, raws, where: str) -> list[dict]:
    if raws is None:
        return []
    if not isinstance(raws, list):
        raise BadFileError(f"{p}: key '{where}' must be an array of tables ([[diff]])")
    out, names = [], set()
    for i, raw in enumerate(raws):
        w = f"{where}[{i}]"

        def bad(k, msg, w=w):
            raise BadFileError(f"{p}: key '{w}.{k}' {msg}")

        if not isinstance(raw, dict):
            raise BadFileError(f"{p}: key '{w}' must be a table")
        unknown = set(raw) - DIFF_KEYS
        if unknown:
            bad(sorted(unknown)[0], f"is unknown (known: {', '.join(sorted(DIFF_KEYS))})")
        for k in ("name", "a", "b", "dtype"):
            if k not in raw:
                bad(k, "is missing")
        for k in ("name", "a", "b"):
            if not isinstance(raw[k], str) or not raw[k]:
                bad(k, "must be a non-empty string")
        if raw["name"] in names:
            bad("name", f"duplicate name '{raw['name']}'")
        names.add(raw["name"])
        dt = [raw["dtype"]] if isinstance(raw["dtype"], str) else raw["dtype"]
        if not isinstance(dt, list) or not dt or not all(isinstance(d, str) for d in dt):
            bad("dtype", "must be a string or a non-empty list of strings")
        for k in ("compute", "reference"):
            if k in raw and not isinstance(raw[k], str):
                bad(k, "must be a string")
        rng = raw.get("range")
        if rng is not None and not (
            isinstance(rng, list)
            and len(rng) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in rng)
        ):
            bad("range", "must be [lo, hi]")
        if "grid" in raw and (not isinstance(raw["grid"], int) or isinstance(raw["grid"], bool)):
            bad("grid", "must be an integer")
        params = raw.get("params", {})
        if not isinstance(params, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in params.values()
        ):
            bad("params", "must be a table of numbers")
        expect = raw.get("expect", "identical")
        if expect not in EXPECT:
            bad("expect", f"must be one of {', '.join(EXPECT)}")
        out.append(
            {
                "name": raw["name"],
                "a": raw["a"],
                "b": raw["b"],
                "dtype": dt,
                "compute": raw.get("compute"),
                "reference": raw.get("reference"),
                "range": None if rng is None else (float(rng[0]), float(rng[1])),
                "grid": raw.get("grid"),
                "params": dict(params),
                "expect": expect,
            }
        )
    return out


def run(spec_path: Path, entries: list[dict], progress=None) -> list:
    """One Change per entry and format: 'fail' when the expectation is not met."""
    from .diff import diff
    from .gate import Change

    out = []
    for d in entries:
        for f in d["dtype"]:
            try:
                r = diff(
                    d["a"],
                    d["b"],
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
            key = f"diff/{d['name']}/{r.dtype}"
            ch = Change(key, f"{r.a} vs {r.b}", "ok")
            ok = (
                r.verdict == "identical"
                if d["expect"] == "identical"
                else r.verdict in ("identical", "A better", "same error")
            )
            if not ok:
                iv = r.intervals[0] if r.intervals else None
                where = f"; first at [{iv['lo']:g}, {iv['hi']:g}]" if iv else ""
                ch.status = "fail"
                ch.messages.append(
                    f"{r.a} vs {r.b} [{r.dtype}/{r.compute}]: expected {d['expect']}, "
                    f"got {r.verdict}: {r.differing} of {r.count} inputs differ "
                    f"(A closer at {r.a_closer}, B at {r.b_closer}), max distance "
                    f"{r.max_distance} ULP{where}"
                )
            out.append(ch)
    return out
