"""Scale figures, side by side in one run (issue #8's benchmark):

(a) an exhaustive fp16 sweep of one candidate per family against the naive approach a user
    would write (mpmath at every input, correctly rounded; timed on a sample of inputs and
    extrapolated to all 63,488), as a ratio;
(b) fp32 throughput in inputs per second per core (one worker, an exhaustive range);
(c) peak resident memory of this process.

Usage: python benchmarks/bench_scale.py [--repeat 3] [--fp32-inputs 16777216] [--naive-sample 400]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

import mpmath as mp
import numpy as np

import audit
from audit.candidates import families
from audit.formats import get_format


def naive_seconds_per_input(ref, fmt, x) -> float:
    t = time.perf_counter()
    params = ref.with_defaults({})
    with mp.workprec(fmt.p + 60):
        for xi in x.tolist():
            fmt.round_mpf(ref.mp(mp.mpf(xi), **params))
    return (time.perf_counter() - t) / len(x)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--fp32-inputs", type=int, default=1 << 24)
    ap.add_argument("--naive-sample", type=int, default=400)
    args = ap.parse_args()
    fmt = get_format("fp16")
    allx = fmt.finite_values()
    rng = np.random.default_rng(0)
    sample = rng.choice(allx, args.naive_sample, replace=False)
    print("(a) exhaustive fp16 sweep (63,488 inputs, findings and clip included) vs naive mpmath")
    print(f"{'candidate':<24}{'actaudit s':>12}{'naive s (est.)':>16}{'ratio':>10}")
    ratios = []
    for fam, cands in sorted(families().items()):
        c = cands[0]
        if c.arity != 1:
            continue
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            audit.sweep(c.id, dtype="fp16")
            times.append(time.perf_counter() - t)
        ours = statistics.median(times)
        naive = naive_seconds_per_input(c.ref, fmt, sample) * len(allx)
        ratios.append(naive / ours)
        print(f"{c.id:<24}{ours:>12.3f}{naive:>16.1f}{naive / ours:>10.0f}")
    print(f"median ratio {statistics.median(ratios):.0f}x")

    n = args.fp32_inputs
    lo = 1.0
    hi = float(get_format("fp32").from_ordinal([get_format("fp32").ordinal([lo])[0] + n - 1])[0])
    times = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        (r,) = audit.sweep("gelu.tanh", dtype="fp32", range=(lo, hi), exhaustive=True, workers=1)
        times.append(time.perf_counter() - t)
    rate = r.domain.count / statistics.median(times)
    print(f"(b) fp32 gelu.tanh, {r.domain.count} inputs, one worker: {rate / 1e6:.2f} M inputs/s/core "
          f"(median of {args.repeat}); full fp32 on 2 cores: {2**32 / rate / 2 / 60:.1f} min")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"(c) peak resident memory: {peak:.0f} MiB")


if __name__ == "__main__":
    main()
