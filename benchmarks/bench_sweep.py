"""Time an exhaustive 16-bit sweep of one candidate, after imports.

cold: empty oracle cache on disk and in memory (the oracle is computed and
written); warm: the oracle comes from the in-process memo.  Prints medians of
--repeat runs.  Usage: python benchmarks/bench_sweep.py [--repeat 7]
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


def one(target: str, dtype: str, cold: bool, semantics=None) -> float:
    if cold:
        os.environ["ACTAUDIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="actaudit-bench-")
        oracle._MEMO.clear()
        oracle._POS.clear()
        formats._finite_values.cache_clear()
    t = time.perf_counter()
    audit.sweep(target, dtype=dtype, semantics=semantics)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    audit.catalog()  # imports done before timing
    print(f"{'candidate':<14}{'dtype':<7}{'inputs':>8}{'cold median s':>15}{'warm median s':>15}")
    for target, dtype in [
        ("gelu.tanh", "fp16"),
        ("gelu.tanh", "bf16"),
        ("gelu.erf", "fp16"),
        ("gelu", "fp16"),
    ]:
        cold = [one(target, dtype, True) for _ in range(args.repeat)]
        warm = [one(target, dtype, False) for _ in range(args.repeat)]
        n = audit.sweep(target, dtype=dtype)[0].domain.count
        print(f"{target:<14}{dtype:<7}{n:>8}{statistics.median(cold):>15.4f}{statistics.median(warm):>15.4f}")
    # flagged semantics (audit/targets/semantics.py): warm oracle, in-process
    print(f"\n{'candidate':<14}{'dtype':<7}{'semantics':<34}{'warm median s':>15}")
    for target, dtype, sem in [
        ("gelu.tanh", "fp16", "ftz,daz"),
        ("gelu.tanh", "fp16", "saturate"),
        ("gelu.tanh", "fp16", "contract"),
        ("gelu.tanh", "fp16", "ftz,daz,contract,saturate,round=rtz"),
        ("sigmoid.naive", "fp16", "saturate"),
        ("gelu.tanh", "fp16", "cuda_fast"),
        ("exp.u20", "fp16", "ftz,daz"),
        ("sigmoid.exp", "fp16", "exp=exp.u20"),
    ]:
        one(target, dtype, False, sem)
        warm = [one(target, dtype, False, sem) for _ in range(args.repeat)]
        print(f"{target:<14}{dtype:<7}{sem:<34}{statistics.median(warm):>15.4f}")


if __name__ == "__main__":
    main()
