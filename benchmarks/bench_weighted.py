"""Cost of the weighted figures (issue 27): an fp16 sweep (every finite input, one
evaluation path) without and with --distribution, runs interleaved so that the machine's
load falls on both alike; medians of --repeat runs of the process's CPU time (steadier than
wall time on a shared machine; wall medians follow), side by side, after imports and a
warm-up (oracle cache filled).  Target: the weighted figures (normal) add under 10%; the npy
column adds reading and rounding its 2^20 samples, once per run whatever the candidates.
Usage: python benchmarks/bench_weighted.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from audit.measure.sweep import sweep


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        npy = Path(tmp) / "acts.npy"
        np.save(npy, np.random.default_rng(0).normal(0, 1.5, 1 << 20))
        modes = {"plain": None, "normal:std=1": "normal:std=1", "npy (2^20 samples)": f"npy:{npy}"}
        print(f"{'candidate':<12}{'dtype':<7}" + "".join(f"{m:>20}" for m in modes) + f"{'added':>10}")
        for cand, compute in (("gelu.tanh", "fp16"), ("silu.exp", "fp16"), ("gelu", "auto")):
            # (gelu with compute auto: the family, every candidate in fp16 and in fp32, as
            # `actaudit sweep gelu --dtype fp16` runs it)
            for d in modes.values():  # warm-up: imports, oracle cache
                sweep(cand, "fp16", compute, distribution=d)
            ts: dict[str, list[float]] = {m: [] for m in modes}
            ws: dict[str, list[float]] = {m: [] for m in modes}
            for _ in range(args.repeat):
                for m, d in modes.items():
                    t, w = time.process_time(), time.perf_counter()
                    sweep(cand, "fp16", compute, distribution=d)
                    ts[m].append(time.process_time() - t)
                    ws[m].append(time.perf_counter() - w)
            for label, v in (("cpu", ts), ("wall", ws)):
                med = {m: statistics.median(x) for m, x in v.items()}
                added = med["normal:std=1"] / med["plain"] - 1
                print(
                    f"{cand:<12}{'fp16':<7}"
                    + "".join(f"{med[m]:>19.3f}s" for m in modes)
                    + f"{100 * added:>+9.1f}%  ({label}; added: normal)"
                )


if __name__ == "__main__":
    main()
