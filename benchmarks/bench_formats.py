"""Speed of sweeps in the accelerator formats (issue 15): one candidate, exhaustive, in
process, after imports.  cold: empty oracle cache (disk and memory); warm: in-process memo.
Target: well under 0.1 s.  Prints medians of --repeat runs.
Usage: python benchmarks/bench_formats.py [--repeat 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import audit
from audit.numbers import formats
from audit.oracle import oracle


def one(target: str, dtype: str, compute: str | None, cold: bool) -> float:
    if cold:
        os.environ["ACTAUDIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="actaudit-bench-")
        oracle._MEMO.clear()
        oracle._POS.clear()
        formats._finite_values.cache_clear()
    t = time.perf_counter()
    audit.sweep(target, dtype=dtype, compute=compute)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    audit.catalog()
    print(
        f"{'candidate':<12}{'dtype':<14}{'compute':<14}{'inputs':>7}{'cold median s':>15}{'warm median s':>15}"
    )
    for target, dtype, compute in [
        ("gelu.tanh", "fp8_e4m3fnuz", None),
        ("gelu.tanh", "fp8_e5m2fnuz", None),
        ("gelu.tanh", "fp4_e2m1", None),
        ("gelu.tanh", "fp4_e2m1", "fp32"),
        ("silu.exp", "fp6_e3m2", None),
    ]:
        cold = [one(target, dtype, compute, True) for _ in range(args.repeat)]
        warm = [one(target, dtype, compute, False) for _ in range(args.repeat)]
        n = audit.sweep(target, dtype=dtype)[0].domain.count
        print(
            f"{target:<12}{dtype:<14}{compute or dtype:<14}{n:>7}{statistics.median(cold):>15.4f}"
            f"{statistics.median(warm):>15.4f}"
        )


if __name__ == "__main__":
    main()
