"""Executors: where the chunks of a chunked sweep run.

Every executor runs the same function on the same chunks (the domain's fixed grid)
and yields the chunk results in chunk order, so the merged numbers do not depend on
where the chunks ran:

* ``local``: in this process (one worker), or on a pool of forked processes, one per
  core by default.  The job reaches the workers through fork, nothing is pickled.  A
  process that holds an inference engine's threads (JAX, torch, onnxruntime, OpenVINO,
  LiteRT imported: :func:`engine_threads`) is never forked: its workers are fresh
  interpreters (fork and exec in one step) and the job is pickled to them; a job that
  does not pickle runs here, in this process.  (The sweep evaluates engine
  ops, and every other target with its own arithmetic, in this process then, and fans
  out only the oracle and the metrics: audit/measure/sweep.py.)
* ``dask``: on a Dask distributed cluster (``--executor dask --scheduler ADDRESS``,
  the extra ``actaudit[dask]``), for work that outgrows one machine.  The job is sent
  to the workers once (Dask serializes it with cloudpickle, between our own
  processes); chunk results come back as they complete and are merged in order, with
  a bounded number of chunks in flight.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator

from audit.errors import BadOptionError, ExecutorError

EXECUTORS = ("local", "dask")

_POOL: dict = {}  # the job of the forked workers


def run_chunks(
    fn: Callable,
    job,
    ranges: list,
    *,
    executor: str = "local",
    workers: int = 1,
    scheduler: str | None = None,
) -> Iterator:
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
# modules that start threads of their own (thread pools, XLA's runtime): a process that
# imported one of them is never forked (its child would inherit their locks, not their
# threads, and deadlock on them: JAX's warning says so)
ENGINE_MODULES = (
    "jax",
    "jaxlib",
    "torch",
    "onnxruntime",
    "openvino",
    "ai_edge_litert",
    "tensorflow",
    "tflite_runtime",
)


def engine_threads() -> bool:
    """Whether this process imported an engine that runs threads of its own."""
    return any(m in sys.modules for m in ENGINE_MODULES)


IN_FLIGHT = 2  # chunks sent to a worker and not yet returned: one running, one queued
CHECK_PARENT = 1.0  # seconds between a waiting worker's checks that its parent lives


def _set_pdeathsig() -> None:
    """Ask Linux to kill this process when its parent dies (PR_SET_PDEATHSIG); elsewhere
    nothing (the worker's parent-pid checks remain)."""
    import ctypes
    import ctypes.util
    import signal

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass


class _Spawned:
    """A worker that is not a fork of this process: a fresh interpreter (fork and exec in
    one step, which runs none of Python's at-fork hooks and no code in a copy of this
    process) on one end of a socket pair, given the pickled (fn, job) as its first
    message.  The interface of multiprocessing.Process that :func:`_pool` uses."""

    def __init__(self, popen, pidfd: int):
        self.popen = popen
        self.pid = popen.pid
        self.sentinel = pidfd

    @classmethod
    def start(cls, task: bytes):
        import json
        import socket
        import subprocess
        from multiprocessing.connection import Connection

        here, there = socket.socketpair()
        code = (
            "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
            "from audit.measure.executors import _spawned_main; _spawned_main(int(sys.argv[2]), int(sys.argv[3]))"
        )
        try:
            popen = subprocess.Popen(
                [sys.executable, "-c", code, json.dumps(sys.path), str(there.fileno()), str(os.getpid())],
                pass_fds=(there.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=sys.stderr.fileno() if _has_fileno(sys.stderr) else None,
            )
        finally:
            there.close()
        conn = Connection(here.detach())
        try:
            conn.send_bytes(task)
            return cls(popen, os.pidfd_open(popen.pid)), conn
        except BaseException:
            conn.close()
            with contextlib.suppress(OSError):
                os.kill(popen.pid, 9)
            popen.wait()
            raise

    @property
    def exitcode(self):
        return self.popen.poll()

    def join(self, timeout=None) -> None:
        import subprocess

        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout)
        if self.popen.returncode is not None and self.sentinel >= 0:
            os.close(self.sentinel)
            self.sentinel = -1


def _has_fileno(f) -> bool:
    try:
        f.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    return True


def _spawned_main(fd: int, parent: int) -> None:
    """The entry point of a :class:`_Spawned` worker."""
    from multiprocessing.connection import Connection

    conn = Connection(fd)
    try:
        task = conn.recv_bytes()
    except (EOFError, OSError):
        os._exit(0)
    _worker(conn, parent, task)


def _worker(conn, parent: int, task: bytes | None = None) -> None:
    """A worker: Ctrl-C is the parent's to handle (ignored here), SIGTERM kills it, and it
    dies with its parent.  Receives (i, range), sends back (i, 'ok'|'err', value).
    ``task``: the pickled (fn, job) of a :class:`_Spawned` worker (else the fork's)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _set_pdeathsig()
    signal.pthread_sigmask(signal.SIG_SETMASK, set())  # (blocked by the parent around fork)
    if os.getppid() != parent:  # the parent died before PR_SET_PDEATHSIG took effect
        os._exit(0)
    keep_freed_memory()
    if task is not None:
        import pickle

        fn, job = pickle.loads(task)
    else:
        fn, job = _POOL["fn"], _POOL["job"]
    from audit.signals import ready

    ready("worker")
    try:
        while True:
            if not conn.poll(CHECK_PARENT):
                if os.getppid() != parent:
                    os._exit(0)
                continue
            msg = conn.recv()
            if msg is None:
                break
            i, r = msg
            try:
                out = (i, "ok", fn(job, r))
            except Exception as e:  # sent to the parent, raised there
                out = (i, "err", e)
            try:
                conn.send(out)
            except Exception as e:  # an exception that does not pickle
                if out[1] == "ok":
                    raise
                conn.send((i, "err", ExecutorError(f"{type(e).__name__}: {e}")))
    except (EOFError, OSError):
        pass
    os._exit(0)


def _pool(fn, job, ranges, workers):
    """Chunks on ``workers`` forked processes, results in chunk order.

    At most IN_FLIGHT chunks per worker are outstanding, and none is sent more than
    ``4 * workers`` chunks ahead of the next one to yield, so memory stays bounded and an
    interrupt stops the run at once: whatever ends this generator (the results consumed,
    an error, KeyboardInterrupt or SIGTERM raised by the parent's handler at any point)
    kills the workers (SIGKILL) and reaps them.  SIGINT and SIGTERM are blocked around
    each fork, so no signal is lost or handled by a half-started worker."""
    import multiprocessing as mproc
    import signal
    from multiprocessing.connection import wait

    task = None
    if engine_threads():  # never fork this process: fresh interpreters, the job pickled
        import pickle

        try:
            task = pickle.dumps((fn, job), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # (a job that cannot travel: run here)
            for r in ranges:
                yield fn(job, r)
            return
    else:
        ctx = mproc.get_context("fork")
        _POOL.update(fn=fn, job=job)
    nw = min(workers, len(ranges))
    procs: list = []
    conns: list = []
    parent = os.getpid()
    try:
        for _ in range(nw):
            old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
            try:
                if task is not None:
                    p, here = _Spawned.start(task)
                    there = None
                else:
                    here, there = ctx.Pipe()
                    p = ctx.Process(target=_worker, args=(there, parent), daemon=True)
                    p.start()
                procs.append(p)
                conns.append(here)
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, old)
            if there is not None:
                there.close()
        n = len(ranges)
        # a spawned worker's chunks carry megabytes (the engine's outputs): one at a time, so
        # that this process never blocks sending to a worker that is blocked sending back
        in_flight = 1 if task is not None else IN_FLIGHT
        queued: list = [[] for _ in procs]  # chunk indices outstanding per worker
        done: dict = {}
        nxt = want = 0
        ahead = 4 * nw

        def feed(w):
            nonlocal nxt
            while len(queued[w]) < in_flight and nxt < n and nxt < want + ahead:
                conns[w].send((nxt, ranges[nxt]))
                queued[w].append(nxt)
                nxt += 1

        for w in range(nw):
            feed(w)
        while want < n:
            if want in done:
                kind, val = done.pop(want)
                want += 1
                if kind == "err":
                    raise val
                for w in range(nw):
                    feed(w)
                yield val
                continue
            ready = wait(conns + [p.sentinel for p in procs], timeout=CHECK_PARENT)
            for w, c in enumerate(conns):
                if c in ready:
                    try:
                        i, kind, val = c.recv()
                    except (EOFError, OSError):
                        _worker_died(procs[w])
                    queued[w].remove(i)
                    done[i] = (kind, val)
            for w, p in enumerate(procs):
                if p.sentinel in ready and conns[w] not in ready and queued[w]:
                    _worker_died(p)
    finally:
        for p in procs:
            if p.pid is not None and p.exitcode is None:
                with contextlib.suppress(OSError):
                    os.kill(p.pid, 9)
        for c in conns:
            c.close()
        for p in procs:
            p.join(5)
        _POOL.clear()


def _worker_died(p) -> None:
    """A worker ended without its chunk: if a signal that stops the run killed it (SIGTERM
    or SIGINT sent to the whole group), deliver it to this process too, so the run stops
    as that signal says; otherwise (killed by the OOM killer, a crash) say so."""
    import signal

    p.join(1)
    code = p.exitcode
    if code is not None and -code in (signal.SIGTERM, signal.SIGINT):
        os.kill(os.getpid(), -code)
        signal.pthread_sigmask(signal.SIG_SETMASK, set())  # (delivered here, if handled)
    how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
    raise ExecutorError(f"a worker process died ({how}; out of memory?)")


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
        from audit._version import install_hint

        raise BadOptionError(f"--executor dask needs Dask: {install_hint('dask')}") from None
    try:
        client = Client(
            scheduler, timeout=float(os.environ.get("ACTAUDIT_DASK_TIMEOUT", "20")), set_as_default=False
        )
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
