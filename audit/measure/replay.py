"""Engine outputs computed in this process, replayed where the chunks run.

A target with its own arithmetic (an engine op, a user's callable, a C kernel: a
``native`` candidate) may hold threads (JAX, torch, onnxruntime...) or objects that do
not travel (sessions, closures, memory files).  When a chunked sweep runs on other
processes that do not share this one's memory -- workers started by a fork server
(this process holds an engine's threads, so it is never forked) or a Dask cluster --
the candidate is evaluated here, chunk by chunk as the chunks are sent (at most the
executor's window ahead), and only the oracle, the errors and the findings run there:

* :class:`Evaluated` is the sequence of chunks sent, each ``(range, outputs)``, the
  outputs computed when the executor takes the chunk;
* :class:`Replayed` runs the sweep's chunk function on a worker with the candidate's
  function replaced by :class:`Replay`, which answers every evaluation (the chunk's, and
  the one-input evaluations that explain a finding) from those outputs, by the exact bits
  of each input.  An input that is not in the chunk is an error, never a guess.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from audit.errors import ExecutorError

_CURRENT: list = []  # [(sorted input bits, their order, outputs)] of the chunk being run


class Replay:
    """The function of a native candidate on a worker: its outputs at the chunk's inputs,
    as computed by the main process (picklable: it holds nothing)."""

    def __call__(self, x, ops, **params):
        a = np.asarray(x.a, dtype=np.float64)
        if not _CURRENT:
            raise ExecutorError("a replayed candidate was evaluated outside its chunk")
        keys, order, got = _CURRENT[-1]
        bits = a.reshape(-1).view(np.int64)
        i = np.searchsorted(keys, bits)
        i = np.minimum(i, len(keys) - 1)
        if len(keys) == 0 or not np.array_equal(keys[i], bits):
            raise ExecutorError("a replayed candidate was evaluated at an input its chunk does not hold")
        return got[order[i]].reshape(a.shape)


class Evaluated(Sequence):
    """The chunks of ``ranges`` with the candidate's outputs, each ``(range, outputs)``,
    computed (by ``outputs(range)``) when the chunk is taken."""

    def __init__(self, ranges: list, outputs: Callable):
        self.ranges = list(ranges)
        self.outputs = outputs

    def __len__(self) -> int:
        return len(self.ranges)

    def __getitem__(self, i):
        r = self.ranges[i]
        return r, np.asarray(self.outputs(r), dtype=np.float64)


class Replayed:
    """``chunk(job, range)`` on a worker, the candidate's outputs given: ``values(job,
    range)`` are the chunk's inputs (for pairs, only the first input is looked up by its
    bits together with the second: pairs replay by position)."""

    def __init__(self, chunk: Callable, values: Callable):
        self.chunk = chunk
        self.values = values

    def __call__(self, job, item):
        r, got = item
        x = self.values(job, r)
        if isinstance(x, tuple):
            raise ExecutorError("a replayed candidate takes one input")
        bits = np.asarray(x, dtype=np.float64).reshape(-1).view(np.int64)
        order = np.argsort(bits, kind="stable")
        _CURRENT.append((bits[order], order, np.asarray(got, dtype=np.float64).reshape(-1)))
        try:
            return self.chunk(job, r)
        finally:
            _CURRENT.pop()
