"""What `actaudit fit` found, remembered for `suggest`: per reference, storage format and
parameters, the fitted kernel's operation counts and its C version's measured time per element.

`suggest` proposes the fitted correctly rounded kernel where no catalog candidate or clip
repairs a finding; it quotes the figures recorded here by the last successful fit on this
machine, or tells the user to run the fit.  One small JSON file per kernel in the cache
directory (``fits/`` under the oracle's cache, ``ACTAUDIT_CACHE_DIR``).  A file read back is
untrusted: a file that is not exactly a record of this schema, for this kernel, with
non-negative integer counts and a finite positive time, is not used (it is a miss: the
proposal says to run the fit), never trusted in part.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

from audit.errors import ActauditError
from audit.io import dumps, load_json, write_text
from audit.oracle.oracle import cache_dir

SCHEMA = "actaudit.fit-cache/1"
KEYS = {"schema", "reference", "dtype", "params", "compute", "ops", "ns_per_element", "command"}
LIMIT = 64 * 1024  # bytes of one record


def command(reference: str, dtype: str, params: dict | None = None) -> str:
    """The command that fits the kernel."""
    ps = "".join(f" --param {k}={v!r}" for k, v in sorted((params or {}).items()))
    return f"actaudit fit {reference} --dtype {dtype}{ps}"


def path(reference: str, dtype: str, params: dict | None = None) -> Path:
    h = hashlib.sha256(json.dumps(params or {}, sort_keys=True).encode()).hexdigest()[:12]
    return cache_dir() / "fits" / f"{reference}-{dtype}-{h}.json"


def record(reference: str, dtype: str, params: dict | None, ops: dict, ns_per_element: float | None):
    """Remember a fitted kernel (its operation counts, its measured time or None)."""
    doc = {
        "schema": SCHEMA,
        "reference": reference,
        "dtype": dtype,
        "params": dict(params or {}),
        "compute": "fp32",
        "ops": {str(k): int(v) for k, v in ops.items()},
        "ns_per_element": ns_per_element,
        "command": command(reference, dtype, params),
    }
    write_text(path(reference, dtype, params), dumps(doc))


def lookup(reference: str, dtype: str, params: dict | None = None) -> dict | None:
    """The record of this kernel, or None (none, or one that is not a valid record of it)."""
    p = path(reference, dtype, params)
    if not p.is_file():
        return None
    try:
        doc = load_json(p, LIMIT, "fit cache record", unique_keys=True, regular=True)
    except (ActauditError, OSError):
        return None
    return doc if _valid(doc, reference, dtype, params) else None


def _valid(doc, reference: str, dtype: str, params) -> bool:
    if not isinstance(doc, dict) or set(doc) != KEYS or doc["schema"] != SCHEMA:
        return False
    if (doc["reference"], doc["dtype"], doc["compute"]) != (reference, dtype, "fp32"):
        return False
    if doc["params"] != dict(params or {}) or doc["command"] != command(reference, dtype, params):
        return False
    ops = doc["ops"]
    if not isinstance(ops, dict) or not ops or len(ops) > 64:
        return False
    if not all(isinstance(k, str) and type(v) is int and 0 <= v < 10**6 for k, v in ops.items()):
        return False
    ns = doc["ns_per_element"]
    if ns is None:
        return True
    return type(ns) is float and math.isfinite(ns) and 0 < ns < 1e9
