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
result's fingerprint: candidate (and its formula's source), parameters, formats,
input range, chunk size, analysis options and the actaudit and oracle versions.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import time
from pathlib import Path

import numpy as np

from .errors import BadFileError, ExecutorError
from .io import atomic_path

SCHEMA = "actaudit.checkpoint/1"
SAVE_EVERY = 30.0  # seconds between saves during a run


def fingerprint(job, n_chunks: int) -> dict:
    from . import __version__, oracle

    c, d = job.cand, job.dom
    try:
        src = hashlib.sha256(inspect.getsource(c.fn).encode()).hexdigest()
    except (OSError, TypeError):
        src = None
    return {"candidate": c.id, "source": src, "reference": c.reference,
            "params": _plain(job.params), "ref_params": _plain(job.ref_params),
            "storage": job.storage.name, "compute": job.compute.name, "analyze": job.analyze,
            "domain": {"count": d.count, "lo": d.lo_ord, "hi": d.hi_ord,
                       "neg_zero": d.include_neg_zero, "pairs": d.axis is not None,
                       "axis": None if d.axis is None else hashlib.sha256(d.axis.tobytes()).hexdigest()},
            "chunks": n_chunks, "actaudit": __version__, "oracle": oracle.ORACLE_VERSION,
            **({"inputs": d.fmt.name} if d.fmt != job.storage else {})}  # --out-dtype


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

    def load(self) -> dict | None:
        """The saved state, or None.  The state holds ``arrays`` (the error arrays)."""
        if not self.path.exists():
            return None
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
            if doc.get("schema") != SCHEMA or doc.get("fingerprint") != self.fp:
                raise BadFileError(f"checkpoint {self.path} belongs to another run")
            arrays = []
            if doc.get("arrays"):
                with np.load(self.root / doc["arrays"], allow_pickle=False) as z:
                    arrays = [z[f"e{i}"] for i in range(len(z.files))]
            doc["arrays"] = arrays
            return doc
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise BadFileError(f"checkpoint {self.path} is unreadable ({e}); delete it to start over") from None

    def due(self) -> bool:
        return time.monotonic() - self.last_save >= SAVE_EVERY

    def save(self, state: dict, arrays: list[np.ndarray]) -> None:
        """Write the state atomically: the arrays first (a new file), then the JSON that
        names them, then remove the arrays the previous state named."""
        old = None
        if self.path.exists():
            with contextlib.suppress(OSError, ValueError):
                old = json.loads(self.path.read_text(encoding="utf-8")).get("arrays")
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
