"""Executors: where the chunks of a chunked sweep run.

Every executor runs the same function on the same chunks (the domain's fixed grid)
and yields the chunk results in chunk order, so the merged numbers do not depend on
where the chunks ran:

* ``local``: in this process (one worker), or on a pool of forked processes, one per
  core by default.  The job reaches the workers through fork, nothing is pickled.
* ``dask``: on a Dask distributed cluster (``--executor dask --scheduler ADDRESS``,
  the extra ``actaudit[dask]``), for work that outgrows one machine.  The job is sent
  to the workers once (Dask serializes it with cloudpickle, between our own
  processes); chunk results come back as they complete and are merged in order, with
  a bounded number of chunks in flight.
"""

from __future__ import annotations

import os
from typing import Callable, Iterator

from .errors import BadOptionError, ExecutorError

EXECUTORS = ("local", "dask")

_POOL: dict = {}  # the job of the forked workers


def run_chunks(fn: Callable, job, ranges: list, *, executor: str = "local", workers: int = 1,
               scheduler: str | None = None) -> Iterator:
    """fn(job, r) for each chunk range r, results in order."""
    if executor == "dask":
        yield from _dask(fn, job, ranges, scheduler)
    elif executor != "local":
        raise BadOptionError(f"unknown executor '{executor}' (known: {', '.join(EXECUTORS)})")
    elif workers <= 1 or len(ranges) < 2:
        keep_freed_memory()
        for r in ranges:
            yield fn(job, r)
    else:
        yield from _pool(fn, job, ranges, workers)


def keep_freed_memory() -> None:
    """Let glibc's malloc keep freed memory instead of returning it to the system.

    A chunk's temporaries are arrays of megabytes; by default each comes from a fresh
    mmap and pays its page faults again (measured: a quarter of an exhaustive fp32
    sweep's time).  Raising the mmap and trim thresholds recycles them; peak memory
    is unchanged.  Elsewhere than glibc this does nothing."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD
        libc.mallopt(-3, 1 << 25)  # M_MMAP_THRESHOLD (glibc's maximum: 32 MiB)
    except (OSError, AttributeError):
        pass


# ------------------------------------------------------------------ local
def _quiet_worker():
    """Workers leave Ctrl-C and SIGTERM to the parent, which stops the pool and reports."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    keep_freed_memory()


def _pool_chunk(r):
    fn, job = _POOL["fn"], _POOL["job"]
    return fn(job, r)


def _pool(fn, job, ranges, workers):
    import multiprocessing as mproc
    from concurrent.futures import ProcessPoolExecutor

    _POOL.update(fn=fn, job=job)  # inherited by the forked workers
    try:
        with ProcessPoolExecutor(max_workers=min(workers, len(ranges)),
                                 mp_context=mproc.get_context("fork"),
                                 initializer=_quiet_worker) as ex:
            try:
                yield from ex.map(_pool_chunk, ranges)
            except BaseException:
                ex.shutdown(wait=False, cancel_futures=True)
                raise
    finally:
        _POOL.clear()


# ------------------------------------------------------------------- dask
def _dask_chunk(fn, job, r):
    keep_freed_memory()
    return fn(job, r)


def _dask(fn, job, ranges, scheduler):
    if not scheduler:
        raise BadOptionError("--executor dask needs --scheduler ADDRESS (e.g. tcp://host:8786)")
    try:
        from distributed import Client
    except ImportError:
        raise BadOptionError("--executor dask needs Dask: pip install 'actaudit[dask]'") from None
    try:
        client = Client(scheduler, timeout=float(os.environ.get("ACTAUDIT_DASK_TIMEOUT", "20")),
                        set_as_default=False)
    except (OSError, TimeoutError) as e:
        raise ExecutorError(f"cannot reach the Dask scheduler at {scheduler}: {e}") from None
    futures: list = []
    try:
        threads = sum(client.nthreads().values()) or 1
        window = max(4, 2 * threads)  # chunks in flight: bounded memory, busy workers
        job_f = client.scatter(job, broadcast=True, hash=False)
        pending = iter(ranges)
        for r in pending:
            futures.append(client.submit(_dask_chunk, fn, job_f, r, pure=False))
            if len(futures) >= window:
                break
        while futures:
            res = futures.pop(0).result()
            nxt = next(pending, None)
            if nxt is not None:
                futures.append(client.submit(_dask_chunk, fn, job_f, nxt, pure=False))
            yield res
    finally:
        if futures:
            client.cancel(futures)
        client.close()
