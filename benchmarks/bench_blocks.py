"""Speed of block-scaled audits (issue 15): one candidate, 2^20 seeded bf16 inputs, the
candidate in fp32, its outputs and the exact reference block-quantized; after imports.
Target: under 5 s.  Prints medians of --repeat runs.
Usage: python benchmarks/bench_blocks.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from audit.measure import blocks


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    blocks.sweep("gelu.tanh", "bf16", "mxfp8_e4m3", elements=64)  # imports done before timing
    print(f"{'candidate':<12}{'out':<12}{'rule':<6}{'elements':>10}{'median s':>10}")
    for cand, out, rule in [
        ("gelu.tanh", "mxfp8_e4m3", "ocp"),
        ("gelu.tanh", "mxfp4_e2m1", "ocp"),
        ("silu.exp", "mxfp6_e3m2", "ceil"),
        ("gelu.tanh", "nvfp4", "ocp"),
    ]:
        ts = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            blocks.sweep(cand, "bf16", out, rule=rule, dist="normal:std=2", elements=1 << 20)
            ts.append(time.perf_counter() - t)
        print(f"{cand:<12}{out:<12}{rule:<6}{1 << 20:>10}{statistics.median(ts):>10.3f}")


if __name__ == "__main__":
    main()
