"""Chunked, parallel, resumed and distributed sweeps give the numbers of a direct run.

The direct run is a single process going through the chunk grid in order; parallel,
resumed and Dask runs must equal it bit for bit.  A run with every input in one chunk
must agree too, in every field but the mean's last bits (its sum is taken per chunk).
Ranges are picked so that findings cross chunk edges: an underflow interval that starts
inside a chunk and runs over several (gelu.tanh flushes to 0 where fp32's tanh rounds
to -1), monotonicity findings of hundreds of thousands of intervals (more than are
kept, with backward steps at chunk edges), and a hidden overflow (x*x*x beyond
6.98e12) that starts inside a chunk.
"""

import json
import math

import numpy as np
import pytest
from helpers import optional

import audit
from audit.errors import ActauditError
from audit.numbers import inputs

RANGES = [(-6.0, -5.0), (-1.6, -1.5), (6.9e12, 7.1e12)]
SMALL_CHUNK = 1 << 17


def _doc(r):
    d = r.to_dict()
    return json.dumps(d, sort_keys=True)


def _run(rng, **kw):
    (r,) = audit.sweep("gelu.tanh", dtype="fp32", range=rng, exhaustive=True, **kw)
    return r


@pytest.fixture(scope="module")
def direct():
    """rng -> (JSON, result) of the direct run: one process, chunks of SMALL_CHUNK."""
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(inputs, "CHUNK", SMALL_CHUNK)
        for rng in RANGES:
            r = _run(rng, workers=1)
            assert len(r.domain.chunk_ranges()) >= 3
            out[rng] = (_doc(r), r)
    return out


@pytest.mark.parametrize("rng", RANGES)
def test_one_chunk_agrees_with_the_chunked_direct_run(direct, rng, monkeypatch):
    monkeypatch.setattr(inputs, "CHUNK", 1 << 22)
    whole = _run(rng, workers=1)
    assert len(whole.domain.chunk_ranges()) == 1
    a, b = whole.to_dict(), json.loads(direct[rng][0])
    assert a.pop("mean_ulp") == pytest.approx(b.pop("mean_ulp"), rel=1e-13)
    assert json.loads(json.dumps(a, sort_keys=True)) == b


@pytest.mark.parametrize("rng", RANGES)
def test_parallel_runs_equal_the_direct_run(direct, rng, monkeypatch):
    monkeypatch.setattr(inputs, "CHUNK", SMALL_CHUNK)
    assert _doc(_run(rng, workers=2)) == direct[rng][0]


def test_findings_cross_chunk_edges_as_in_a_direct_run(direct):
    """Hand-checkable facts of the three ranges."""
    r = direct[(-6.0, -5.0)][1]
    under = next(f for f in r.findings if f.kind == "underflow")
    assert under.intervals_total == 1 and under.intervals[0][0] == -6.0  # one run from -6 up
    mono = next(f for f in direct[(-1.6, -1.5)][1].findings if f.kind == "monotonicity")
    assert mono.intervals_total > 1000 and len(mono.intervals) == 256  # counted, not all kept
    (h,) = direct[(6.9e12, 7.1e12)][1].hidden
    x = np.float32(6.9e12)  # the first fp32 x whose x*x*x overflows fp32, found directly
    with np.errstate(over="ignore"):
        while np.isfinite(x * x * x):
            x = np.nextafter(x, np.float32(np.inf))
    hi = np.float32(7.1e12)  # the last fp32 value of the range
    hi = hi if hi <= 7.1e12 else np.nextafter(hi, np.float32(0))
    assert h["intervals"] == [[float(x), float(hi)]]
    assert h["intervals_total"] == 1 and f"for {h['count']} inputs" in h["text"]


class _Stop(Exception):
    pass


@pytest.mark.parametrize("workers", [1, 2])
def test_an_interrupted_run_resumes_to_the_direct_result(direct, tmp_path, monkeypatch, workers):
    monkeypatch.setattr(inputs, "CHUNK", SMALL_CHUNK)
    rng = RANGES[0]
    seen = []

    def stop_after_3(n):
        seen.append(n)
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _run(rng, workers=workers, checkpoint=tmp_path, progress=stop_after_3)
    (state,) = tmp_path.glob("*.json")
    doc = json.loads(state.read_text())
    total = doc["fingerprint"]["chunks"]
    assert doc["done"] == 3 < total
    again = []
    r = _run(rng, workers=workers, checkpoint=tmp_path, progress=again.append)
    assert _doc(r) == direct[rng][0]
    # it resumed: the 3 chunks done before are reported at once, then only the rest ran
    assert again[0] == sum(seen) and len(again) == 1 + total - 3
    # a finished result is read back, nothing is swept again
    once_more = []
    assert _doc(_run(rng, workers=workers, checkpoint=tmp_path, progress=once_more.append)) == direct[rng][0]
    assert len(once_more) == 1


def test_a_checkpoint_of_another_run_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(inputs, "CHUNK", 1 << 17)
    _run((1.0, 1.01), workers=1, checkpoint=tmp_path)
    (state,) = tmp_path.glob("*.json")
    doc = json.loads(state.read_text())
    doc["fingerprint"]["candidate"] = "gelu.erf"
    state.write_text(json.dumps(doc))
    with pytest.raises(ActauditError, match="another run"):
        _run((1.0, 1.01), workers=1, checkpoint=tmp_path)
    state.write_text("{not json")
    with pytest.raises(ActauditError, match="unreadable"):
        _run((1.0, 1.01), workers=1, checkpoint=tmp_path)


def test_checkpoint_files_are_json_and_npz_without_pickle(tmp_path, monkeypatch):
    monkeypatch.setattr(inputs, "CHUNK", 1 << 17)
    _run((1.0, 1.02), workers=1, checkpoint=tmp_path)
    names = sorted(p.suffix for p in tmp_path.iterdir())
    assert names == [".json", ".npz"]  # the exact p99's errors beside the state
    (z,) = tmp_path.glob("*.npz")
    with np.load(z, allow_pickle=False) as f:
        assert all(f[k].dtype == np.float64 for k in f.files)


def test_dask_executor_on_a_local_cluster_equals_a_direct_run(direct, monkeypatch):
    distributed = optional("distributed")  # CI: a failure when missing
    monkeypatch.setattr(inputs, "CHUNK", SMALL_CHUNK)
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        for rng in RANGES:
            r = _run(rng, executor="dask", scheduler=cluster.scheduler_address)
            assert _doc(r) == direct[rng][0]
    # threaded workers share mpmath's global precision: the oracle serializes its use
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
    ) as cluster:
        r = _run(RANGES[1], executor="dask", scheduler=cluster.scheduler_address)
        assert _doc(r) == direct[RANGES[1]][0]


def test_dask_executor_errors_are_one_line(monkeypatch):
    optional("distributed")
    monkeypatch.setenv("ACTAUDIT_DASK_TIMEOUT", "1")
    with pytest.raises(ActauditError, match="cannot reach the Dask scheduler"):
        _run((1.0, 1.01), executor="dask", scheduler="tcp://127.0.0.1:9")
    with pytest.raises(ActauditError, match="needs --scheduler"):
        _run((1.0, 1.01), executor="dask")
    with pytest.raises(ActauditError, match="add --exhaustive"):
        audit.sweep("gelu.tanh", dtype="fp16", checkpoint="x")


def test_exhaustive_pairs_chunk_every_pair_in_row_major_order():
    d = inputs.pair_domain(audit.get_format("fp16"), exhaustive=True)
    n = 63488
    assert d.count == n * n == 4030726144 and d.values is None
    last = d.chunk_ranges()[-1]
    a, b = d.chunk_values(last)
    assert (a[-1], b[-1]) == (65504.0, 65504.0) and last[1] == n * n
    a, b = d.chunk_values((n + 2, n + 4, False))  # the second row: a is the second value
    assert a.tolist() == [-65472.0, -65472.0] and b.tolist() == [-65440.0, -65408.0]


def test_exhaustive_pairs_of_a_gated_unit_equal_the_in_memory_grid(monkeypatch):
    """A range small enough for the in-memory grid (every pair of its values) to be
    exhaustive too: the chunked exhaustive run gives the same numbers."""
    monkeypatch.setattr(inputs, "CHUNK", 1 << 12)
    rng = (0.5, 0.5 + 2**-4)  # 129 fp16 values
    (grid,) = audit.sweep("swiglu.silu_mul", dtype="fp16", range=rng, grid=4096)
    assert grid.domain.exhaustive and grid.domain.count == 129 * 129
    (chunked,) = audit.sweep("swiglu.silu_mul", dtype="fp16", range=rng, exhaustive=True, workers=2)
    assert chunked.domain.values is None and len(chunked.domain.chunk_ranges()) == 5
    a, b = json.loads(_doc(grid)), json.loads(_doc(chunked))
    assert a == b
    assert math.isfinite(a["max_ulp"])
