"""Exhaustive bf16 backward sweeps (2^32 pairs (x, dy)) against the pair machinery's speed.

An exhaustive backward sweep (``actaudit sweep gelu.tanh --backward --dtype bf16
--exhaustive``) walks every pair of finite bf16 values, 65,280^2 = 4.26 billion, in
chunks of 2^18 pairs.  This measures, on one core, chunks spread evenly over that pair
index space (the same chunks, i.e. the same (x, dy) values, for every candidate), each
evaluated end to end exactly as the sweep does (oracle, candidate, errors, statistics,
findings), timed in CPU seconds of the process (the machine is shared), and extrapolates
to all 2^32 pairs (per core: workers split the chunks); the gated unit swiglu.silu_mul on the
same chunks is the pair machinery's reference speed.  Medians of --repeat runs.

Usage: python benchmarks/bench_backward.py [--chunks 16] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from audit.measure.sweep import _Job, _range_chunk
from audit.numbers.formats import get_format
from audit.numbers.inputs import pair_domain
from audit.targets.candidates import catalog

CASES = [
    ("swiglu.silu_mul", "bf16"),
    ("swiglu.silu_mul", "fp32"),
    ("gelu_bwd.tanh", "bf16"),
    ("gelu_bwd.tanh", "fp32"),
    ("tanh_bwd.from_output", "fp32"),
    ("sigmoid_bwd.from_output", "fp32"),
    ("gelu_bwd.erf", "fp32"),
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chunks", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    st = get_format("bf16")
    dom = pair_domain(st, exhaustive=True)
    ranges = dom.chunk_ranges()
    pick = [ranges[i] for i in np.linspace(0, len(ranges) - 1, args.chunks).astype(int)]
    pairs = sum(b - a for a, b, _ in pick)
    cores = os.cpu_count() or 1
    print(
        f"bf16 pairs: {dom.count:,} in {len(ranges):,} chunks; timing {len(pick)} chunks "
        f"({pairs:,} pairs) spread over them, 1 core, median of {args.repeat}"
    )
    print(
        f"{'candidate':<26}{'compute':<9}{'M pairs/s':>10}{'all pairs, 1 core':>20}"
        f"{f'on {cores} cores':>14}{'vs swiglu':>11}"
    )
    base = {}
    for cid, comp in CASES:
        cand = catalog()[cid]
        cf = get_format(comp)
        params = cand.resolve_params(None)
        ref_params = cand.ref.with_defaults(cand.reference_params(params))
        job = _Job(cand, st, cf, params, ref_params, True, False, dom)
        _range_chunk(job, pick[0])  # warm: imports, constants
        times = []
        for _ in range(args.repeat):
            t = time.process_time()  # CPU time of this process: robust on a shared machine
            for r in pick:
                _range_chunk(job, r)
            times.append(time.process_time() - t)
        rate = pairs / statistics.median(times)
        base.setdefault(comp, rate) if cid.startswith("swiglu") else None
        total = dom.count / rate
        rel = f"{rate / base[comp]:.2f}x" if comp in base else "-"
        print(
            f"{cid:<26}{comp:<9}{rate / 1e6:>10.2f}{total / 60:>17.1f} min"
            f"{total / 60 / cores:>10.1f} min{rel:>11}"
        )


if __name__ == "__main__":
    main()
