"""Checkpoints of chunked sweeps, so that an interrupted run resumes where it stopped.

A chunked sweep (exhaustive fp32, exhaustive pairs of a gated unit) merges its chunk
results in chunk order.  With a checkpoint directory it saves that merged state (the
summary, findings and hidden overflows of the first k chunks) every
``SAVE_EVERY`` seconds, when it is interrupted, and when it ends.  Run the same
command again with the same directory and it continues at chunk k; since the chunks
are merged in the same order, the numbers are those of an uninterrupted run, bit for
bit.  A finished result is kept: running it again reads it back.

Files, per result: ``DIR/<key>.json`` (the state; floats written as Python's shortest
repr, which reads back exactly) and ``DIR/<key>.<k>.npz`` (the error arrays kept for
an exact p99), written atomically, never pickled.  The key is a SHA-256 of the
result's fingerprint: candidate, its identity (``Candidate.identity``, the one its baseline
entries record: a C kernel's source, headers, flags and compiler, a callable's code and
module file, an engine's version, attributes and environment), its formula's source and
module file, parameters, formats,
input range, chunk size, analysis options and the actaudit and oracle versions.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import math
import time
from pathlib import Path

import numpy as np

from audit.errors import BadFileError, ExecutorError
from audit.io import atomic_path, load_json, load_npz

SCHEMA = "actaudit.checkpoint/1"
# what save() writes: the run's state (Merged.state) beside the schema, fingerprint and arrays
TOP_KEYS = (
    "schema",
    "fingerprint",
    "arrays",
    "done",
    "n_mpmath",
    "summary",
    "mono_last",
    "findings",
    "hidden",
)
SAVE_EVERY = 30.0  # seconds between saves during a run
MAX_STATE = 1 << 26  # bytes of a state's JSON
MAX_ARRAYS = (1 << 24) * 8 + (1 << 20)  # the error arrays of an exact p99: at most 2^24 float64


def _int(v, lo=0, hi=2**63 - 1) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi


def _flt(v, allow_inf=False) -> bool:
    return (
        isinstance(v, (int, float))
        and not isinstance(v, bool)
        and v >= 0
        and (math.isfinite(v) or (allow_inf and v == math.inf))
    )


def validate(doc: dict, n_chunks: int, chunk_counts: list[int] | None = None) -> None:
    """Raise ValueError unless ``doc`` is a state this code could have written: every
    field of the right type and range, and the counts consistent."""

    def need(ok, what):
        if not ok:
            raise ValueError(what)

    from audit.measure.metrics import STATE_FIELDS

    for k in doc:
        need(k in TOP_KEYS, f"key '{k}' is unknown in a checkpoint")
    need(_int(doc.get("done"), 0, n_chunks), f"'done' must be an integer in [0, {n_chunks}]")
    need(_int(doc.get("n_mpmath")), "'n_mpmath' must be an integer >= 0")
    s = doc.get("summary")
    need(isinstance(s, dict), "'summary' is missing")
    for k in s:
        need(k in STATE_FIELDS or k in ("sums", "hist"), f"key 'summary.{k}' is unknown in a checkpoint")
    for k in ("count", "finite", "correct", "nan_count", "inf_count", "overflow_ok", "max_ulp_distance"):
        need(_int(s.get(k)), f"'summary.{k}' must be an integer >= 0")
    need(
        s["finite"] + s["nan_count"] + s["inf_count"] + s["overflow_ok"] == s["count"]
        and s["correct"] <= s["count"],
        "'summary' counts do not add up",
    )
    if chunk_counts is not None:
        expect = sum(chunk_counts[: doc["done"]])
        need(
            s["count"] == expect,
            f"'summary.count' is {s['count']}, but the first {doc['done']} chunks hold {expect} inputs",
        )
    need(doc["n_mpmath"] <= s["count"], "'n_mpmath' exceeds the inputs done")
    for k in ("max_ulp", "max_abs"):
        need(_flt(s.get(k), True), f"'summary.{k}' must be a number >= 0")
    need(_flt(s.get("max_rel"), True), "'summary.max_rel' must be a number >= 0")
    need(isinstance(s.get("exact_p99"), bool), "'summary.exact_p99' must be true or false")
    need(s.get("worst") is None or isinstance(s["worst"], dict), "'summary.worst' must be an object")
    sums = s.get("sums")
    need(isinstance(sums, list) and all(_flt(v) for v in sums), "'summary.sums' must be numbers >= 0")
    # each chunk's sum of errors is at most its finite results times the largest error (the
    # sum scaled by 2^-600: a sum beyond float64 is refused here, not overflowed later)
    bound = s["finite"] * s["max_ulp"] * 2.0**-600 * (1 + 2.0**-40)
    need(math.fsum(v * 2.0**-600 for v in sums) <= bound, "'summary.sums' exceed the errors they sum")
    hist = s.get("hist")
    need(
        isinstance(hist, list)
        and all(
            isinstance(h, list) and len(h) == 2 and _int(h[0], -(2**31), 2**31) and _int(h[1]) for h in hist
        ),
        "'summary.hist' is malformed",
    )
    kept = sum(len(a) for a in doc["arrays"])
    # every finite result's error is counted once: kept (exact p99) or binned, never both
    need(
        kept + sum(h[1] for h in hist) == s["finite"],
        "kept and binned errors do not add up to the finite results",
    )
    need(
        not (s["exact_p99"] and hist) and not (kept and not s["exact_p99"]),
        "'summary.exact_p99' does not match the errors",
    )
    for a in doc["arrays"]:
        need(a.dtype == np.float64 and a.ndim == 1 and bool(np.all(a >= 0)), "malformed error arrays")
    fs = doc.get("findings")
    need(isinstance(fs, list), "'findings' must be a list")
    for f in fs:
        need(
            isinstance(f, dict)
            and isinstance(f.get("kind"), str)
            and _int(f.get("count"))
            and f["count"] <= s["count"] + 2
            and isinstance(f.get("intervals"), list)
            and _int(f.get("intervals_total"))
            and isinstance(f.get("example"), dict)
            and (f.get("cause") is None or isinstance(f["cause"], dict))
            and isinstance(f.get("note", ""), str)
            and (f.get("last") is None or isinstance(f["last"], list))
            and set(f)
            <= {"kind", "count", "intervals", "example", "cause", "intervals_total", "note", "last"},
            "a malformed finding",
        )
    need(
        isinstance(doc.get("hidden"), list) and all(isinstance(h, dict) for h in doc["hidden"]),
        "'hidden' must be a list of objects",
    )
    ml = doc.get("mono_last")
    need(ml is None or isinstance(ml, list), "'mono_last' must be null or a list")
    for e in ml or []:  # per monotone piece: None or [x, got, exact] (x and got finite)
        need(
            e is None
            or (
                isinstance(e, list)
                and len(e) == 3
                and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in e)
                and math.isfinite(e[0])
                and math.isfinite(e[1])
                and not math.isnan(e[2])
            ),
            "'mono_last' entries must be null or [x, got, exact] numbers (x and got finite)",
        )


def fingerprint(job, n_chunks: int) -> dict:
    from audit._version import __version__
    from audit.oracle import oracle

    c, d = job.cand, job.dom
    try:
        src = hashlib.sha256(inspect.getsource(c.fn).encode()).hexdigest()
    except (OSError, TypeError):
        src = None
    try:
        with open(inspect.getsourcefile(c.fn) or "", "rb") as fh:  # (a formula's helpers)
            module_file = hashlib.sha256(fh.read(1 << 26)).hexdigest()
    except (OSError, TypeError):
        module_file = None
    return {
        "candidate": c.id,
        # the candidate's identity, the one its baseline entries record (Candidate.identity,
        # audit/targets/identity.py): a C kernel's source and header digest, flags and
        # compiler; a callable's code and module file; an engine's version, attributes,
        # options, dispatch and environment.  As JSON reads it back.
        "identity": json.loads(json.dumps(c.identity, sort_keys=True, default=repr)),
        "source": src,
        "module_file": module_file,
        "reference": c.reference,
        "params": _plain(job.params),
        "ref_params": _plain(job.ref_params),
        "storage": job.storage.name,
        "compute": job.compute.name,
        "analyze": job.analyze,
        "domain": {
            "count": d.count,
            "lo": d.lo_ord,
            "hi": d.hi_ord,
            "neg_zero": d.include_neg_zero,
            "pairs": d.axis is not None,
            "axis": None if d.axis is None else hashlib.sha256(d.axis.tobytes()).hexdigest(),
        },
        "chunks": n_chunks,
        "actaudit": __version__,
        "oracle": oracle.ORACLE_VERSION,
        **({} if c.semantics is None else {"semantics": f"{c.semantics.canonical()}#draw{c.semantics.draw}"}),
        **({"inputs": d.fmt.name} if d.fmt != job.storage else {}),
    }  # --out-dtype


def _plain(d: dict) -> dict:
    return {k: (list(v) if isinstance(v, (list, tuple)) else v) for k, v in sorted(d.items())}


def key(fp: dict) -> str:
    return hashlib.sha256(json.dumps(fp, sort_keys=True).encode()).hexdigest()[:24]


class Checkpoint:
    """The checkpoint of one result in directory ``root``."""

    def __init__(self, root, job, n_chunks: int):
        self.root = Path(root)
        self.fp = fingerprint(job, n_chunks)
        self.key = key(self.fp)
        self.path = self.root / f"{self.key}.json"
        self.last_save = time.monotonic()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ExecutorError(f"cannot create checkpoint directory {root}: {e.strerror}") from None

    def load(self, chunk_counts: list[int] | None = None) -> dict | None:
        """The saved state, or None; validated like any untrusted file (types, ranges,
        counts consistent with each other and with the first ``done`` chunks, whose input
        counts are ``chunk_counts``).  The state holds ``arrays`` (the error arrays)."""
        if not self.path.exists():
            return None
        try:
            doc = load_json(self.path, MAX_STATE, "checkpoint")
        except BadFileError as e:
            raise BadFileError(
                f"checkpoint {self.path} is unreadable ({e}); delete it to start over"
            ) from None
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or doc.get("fingerprint") != self.fp:
            raise BadFileError(f"checkpoint {self.path} belongs to another run")
        try:
            if not _int(doc.get("done"), 0, self.fp["chunks"]):
                raise ValueError(f"'done' must be an integer in [0, {self.fp['chunks']}]")
            arrays = []
            if doc.get("arrays") is not None:
                name = doc["arrays"]
                if not (isinstance(name, str) and name == f"{self.key}.{doc.get('done')}.npz"):
                    raise ValueError(f"'arrays' names {name!r}")
                z = load_npz(self.root / name, MAX_ARRAYS, "checkpoint")
                arrays = [z[f"e{i}"] for i in range(len(z))]
            doc["arrays"] = arrays
            validate(doc, self.fp["chunks"], chunk_counts)
            return doc
        except BadFileError as e:
            raise BadFileError(f"checkpoint {self.path} is invalid ({e}); delete it to start over") from None
        except (OSError, ValueError, KeyError, TypeError, AttributeError, OverflowError) as e:
            # (OverflowError: an integer beyond float64 where a float belongs)
            raise BadFileError(f"checkpoint {self.path} is invalid ({e}); delete it to start over") from None

    def due(self) -> bool:
        return time.monotonic() - self.last_save >= SAVE_EVERY

    def save(self, state: dict, arrays: list[np.ndarray]) -> None:
        """Write the state atomically: the arrays first (a new file), then the JSON that
        names them, then remove the arrays the previous state named."""
        old = None
        if self.path.exists():
            with contextlib.suppress(BadFileError, AttributeError):
                old = load_json(self.path, MAX_STATE, "checkpoint").get("arrays")
        name = None
        if arrays:
            name = f"{self.key}.{state['done']}.npz"
            if name != old:
                with atomic_path(self.root / name) as tmp:
                    with open(tmp, "wb") as fh:
                        np.savez(fh, **{f"e{i}": a for i, a in enumerate(arrays)})
        doc = {"schema": SCHEMA, "fingerprint": self.fp, **state, "arrays": name}
        with atomic_path(self.path) as tmp:
            tmp.write_text(json.dumps(doc), encoding="utf-8")
        if old and old != name:
            with contextlib.suppress(OSError):
                (self.root / old).unlink()
        self.last_save = time.monotonic()
