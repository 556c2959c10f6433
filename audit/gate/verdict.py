"""What decides a verdict, recorded with the baseline and never loosened silently.

The figures of a baseline are compared under settings of the spec: the ``slack`` on every
metric, each audit's ``tolerance`` table, each ``[[diff]]``'s ``expect`` and the spec's
``require_certified``.  A spec edited to loosen one of them (``slack = 0.999999`` lets
every metric almost double) would pass a regression against an unchanged baseline, so the
baseline records them (its ``verdict`` section) and ``check`` fails, "re-record with
actaudit baseline", on any setting looser than the recorded one: a larger slack or bound,
a bound removed, NaN or infinite results allowed that were not, a smaller correct-code
fraction, a narrower safe range, ``not-worse`` for ``identical``, certification no longer
required.  A stricter setting needs no new baseline (it is checked on each run anyway).
"""

from __future__ import annotations

import json
import math

from audit.errors import BadFileError
from audit.gate.schema import SPEC_KEYS

KEYS = ("slack", "require_certified", "tolerances", "expects")
TOLERANCE_KEYS = tuple(SPEC_KEYS["tolerance"])
EXPECTS = ("identical", "not-worse")  # strictest first
RERECORD = "re-record with actaudit baseline to accept it"


def record(spec, tolerances: dict, expects: dict) -> dict:
    """The baseline's ``verdict`` section: ``tolerances`` (entry key -> the audit's
    tolerance table), ``expects`` (diff entry key -> its expectation)."""
    return {
        "slack": float(spec.slack),
        "require_certified": bool(spec.require_certified),
        "tolerances": {k: _plain(v) for k, v in tolerances.items()},
        "expects": dict(expects),
    }


def _plain(tol: dict) -> dict:
    return {k: (list(v) if isinstance(v, (list, tuple)) else v) for k, v in sorted(tol.items())}


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def check(path, doc) -> None:
    """The ``verdict`` section of a baseline read from disk: every field typed and bounded."""

    def bad(k, msg):
        raise BadFileError(f"{path}: key 'verdict{'.' + k if k else ''}' {msg}")

    if not isinstance(doc, dict):
        bad("", "must be an object (the settings the baseline was judged under)")
    for k in doc:
        if k not in KEYS:
            bad(k, f"is unknown (known: {', '.join(KEYS)})")
    for k in KEYS:
        if k not in doc:
            bad(k, "is missing (re-record with actaudit baseline)")
    if not (_num(doc["slack"]) and 0 <= doc["slack"] < 1):
        bad("slack", "must be a number in [0, 1)")
    if not isinstance(doc["require_certified"], bool):
        bad("require_certified", "must be true or false")
    if not isinstance(doc["tolerances"], dict):
        bad("tolerances", "must be an object (entry key -> tolerance table)")
    for key, tol in doc["tolerances"].items():
        where = f"tolerances.{key}"
        if not isinstance(tol, dict):
            bad(where, "must be an object")
        for k, v in tol.items():
            if k not in TOLERANCE_KEYS:
                bad(f"{where}.{k}", f"is not a tolerance ({', '.join(TOLERANCE_KEYS)})")
            if k in ("nan", "inf"):
                ok = isinstance(v, bool)
            elif k == "safe_range":
                ok = isinstance(v, list) and len(v) == 2 and all(_num(x) for x in v) and v[0] <= 0 <= v[1]
            else:
                ok = _num(v) and v >= 0
            if not ok:
                bad(f"{where}.{k}", "has a value of the wrong type or range")
    if not isinstance(doc["expects"], dict) or not all(v in EXPECTS for v in doc["expects"].values()):
        bad("expects", f"must be an object of {' or '.join(EXPECTS)}")


def _show(v) -> str:
    return json.dumps(v)


def looser_tolerance(now: dict, base: dict) -> list[str]:
    """One line per tolerance of ``now`` that lets through more than the recorded ``base``."""
    out = []
    for k in TOLERANCE_KEYS:
        b, n = base.get(k), now.get(k)
        if k in ("nan", "inf"):  # absent: allowed
            if b is False and n is not False:
                out.append(f"tolerance '{k}' allows {k.upper()} results now (recorded: {k} = false)")
            continue
        if b is None:
            continue  # not recorded: any value now is stricter
        if n is None:
            out.append(f"tolerance '{k}' was removed (recorded: {_show(b)})")
        elif k == "safe_range":
            if n[0] > b[0] or n[1] < b[1]:
                out.append(f"tolerance 'safe_range' narrowed: {_show(b)} -> {_show(n)}")
        elif k == "correct_code_fraction":
            if n < b:
                out.append(f"tolerance '{k}' lowered: {b!r} -> {n!r}")
        elif n > b:
            out.append(f"tolerance '{k}' raised: {b!r} -> {n!r}")
    return [f"{m}; {RERECORD}" for m in out]


def looser_spec(spec, base: dict) -> list[str]:
    """The spec-wide settings looser than recorded (slack, require_certified)."""
    out = []
    if spec.slack > base["slack"]:
        out.append(f"slack raised: {base['slack']!r} -> {spec.slack!r}; {RERECORD}")
    if base["require_certified"] and not spec.require_certified:
        out.append(f"require_certified is no longer true; {RERECORD}")
    return out


def looser_expect(now: str, base: str | None) -> list[str]:
    if base is not None and EXPECTS.index(now) > EXPECTS.index(base):
        return [f"expect loosened: {base} -> {now}; {RERECORD}"]
    return []
