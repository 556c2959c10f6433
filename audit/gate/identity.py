"""What produced a baseline entry: its identity, recorded with it and compared by ``check``.

A baseline's figures mean something only for the run that made them: the same candidate,
reference, formats, compute, semantics, parameters, inputs (range, samples, seed,
distribution, how many, exhaustive or not) and the candidate's own identity (an engine's
name, version and dispatch, a C kernel's flags and source digest: ``Candidate.identity``,
recorded verbatim).  ``check`` computes the identity of the spec's run and fails on any
difference with the baseline's, one line per entry naming what differs ("re-record with
actaudit baseline"): a narrowed range, fewer samples, another seed or candidate is never
taken for an improvement.  The fields of each kind of entry are
:data:`audit.gate.schema.IDENTITY_FIELDS`.
"""

from __future__ import annotations

import json
import math

from audit.errors import BadFileError
from audit.gate.schema import IDENTITY_FIELDS


def normalize(v):
    """``v`` as JSON gives it back (tuples as lists, non-finite floats as strings), so that a
    fresh identity and one read from a baseline compare equal exactly when they are."""

    def clean(x):
        if isinstance(x, float) and not math.isfinite(x):
            return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
        if isinstance(x, dict):
            return {str(k): clean(w) for k, w in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(w) for w in x]
        if isinstance(x, (str, int, float, bool)) or x is None:
            return x
        return repr(x)

    return json.loads(json.dumps(clean(v), allow_nan=False, sort_keys=True))


def _params(params) -> dict:
    return {k: float(v) for k, v in sorted((params or {}).items())}


def _range(rng):
    return None if rng is None else [float(rng[0]), float(rng[1])]


def float_identity(r, a) -> dict:
    """A float result of audit ``a`` (audit.gate.check.Audit)."""
    has_c = any(str(t).startswith("c:") for t in a.targets)
    return normalize(
        {
            "candidate": r.candidate,
            "reference": r.reference,
            "dtype": r.dtype,
            "out_dtype": r.out_dtype,
            "compute": r.compute,
            "semantics": None if r.semantics is None else r.semantics.canonical(),
            "params": _params(r.params),
            "range": _range(a.range),
            "samples": a.samples,
            "seed": a.seed,
            # the distribution as its figures are bound to it: an npy: sample by its digest,
            # never by its path (checking from another directory is the same run)
            "distribution": (r.weighted or {}).get("distribution_id", a.distribution),
            "exhaustive": bool(r.domain.exhaustive),
            "inputs": int(r.domain.count),
            "specials": len(r.specials),
            "grid": a.grid,
            "grad": bool(a.grad),
            "backward": bool(a.backward),
            "cflags": a.cflags if has_c and str(r.candidate).startswith("c:") else None,
            "candidate_identity": dict(r.identity),
        }
    )


def quant_identity(r) -> dict:
    return normalize(
        {
            "candidate": r.candidate,
            "reference": r.reference,
            "dtype": r.dtype,
            "out_dtype": r.out_dtype,
            "compute": r.compute,
            "params": _params(r.params),
            "exhaustive": True,
            "inputs": int(r.count),
            "candidate_identity": dict(r.identity),
        }
    )


def blocks_identity(r, a) -> dict:
    return normalize(
        {
            "candidate": r.candidate,
            "reference": r.reference,
            "dtype": r.dtype,
            "out_dtype": r.out_dtype,
            "rule": r.rule,
            "compute": r.compute,
            "params": _params(r.params),
            "distribution": a.blocks,
            "samples": a.samples,
            "seed": a.seed,
            "exhaustive": str(r.inputs).startswith("exhaustive"),
            "inputs": r.inputs,
            "elements": int(r.elements),
            "blocks": int(r.blocks),
            "candidate_identity": dict(r.identity),
        }
    )


def diff_identity(d: dict, r) -> dict:
    """A ``[[diff]]`` entry ``d`` (audit.gate.diffs.parse) and its DiffResult."""
    ids = r.identities
    return normalize(
        {
            "a": r.a,
            "b": r.b,
            "reference": r.reference,
            "dtype": r.dtype,
            "compute": r.compute,
            "params": {k: _params(v) for k, v in sorted(r.params.items())},
            "range": _range(d["range"]),
            "grid": d["grid"],
            "exhaustive": bool(r.exhaustive),
            "inputs": int(r.count),
            "specials": len(r.specials),
            "a_identity": dict(ids.get("a") or {}),
            "b_identity": dict(ids.get("b") or {}),
        }
    )


def check(path, where: str, ident, kind: str) -> None:
    """A baseline entry's identity: an object with exactly the fields of its kind."""
    fields = IDENTITY_FIELDS[kind]
    if not isinstance(ident, dict):
        raise BadFileError(f"{path}: key '{where}.identity' must be an object (what produced the entry)")
    for k in ident:
        if k not in fields:
            raise BadFileError(
                f"{path}: key '{where}.identity.{k}' is unknown in a {kind} entry's identity "
                f"(known: {', '.join(fields)})"
            )
    for k in fields:
        if k not in ident:
            raise BadFileError(f"{path}: key '{where}.identity.{k}' is missing")


def _show(v) -> str:
    return json.dumps(v, sort_keys=True)


def difference(now: dict, base: dict) -> str | None:
    """One message naming every field of the identity that differs, or None."""
    diffs = [
        f"{k} {_show(now.get(k))} (baseline {_show(base.get(k))})"
        for k in dict.fromkeys(list(now) + list(base))
        if _show(now.get(k)) != _show(base.get(k))  # exact, types included (1 is not true)
    ]
    if not diffs:
        return None
    return (
        f"the spec's run differs from what produced the baseline entry: {', '.join(diffs)}; "
        "the figures cannot be compared: re-record with actaudit baseline"
    )
