"""Speed of engine targets (issue 28): an exhaustive fp16 sweep of one ONNX Runtime op
(target < 2 s warm) and an exhaustive fp32 sweep of a 2^24-input range (target < 15 s), with
the engine's own call time and the oracle's time measured apart on the same inputs.
warm: the session built and the oracle's in-process memo filled by a first run.
Prints medians of --repeat runs.
Usage: python benchmarks/bench_engines.py [--repeat 5] [--workers N]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import audit
from audit.numbers.formats import get_format
from audit.numbers.inputs import _ordinal_bounds
from audit.oracle import oracle
from audit.targets import engines


def median_time(fn, repeat: int) -> float:
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args()
    f16, f32 = get_format("fp16"), get_format("fp32")
    print(f"{'run':<44}{'inputs':>10}{'median s':>10}")
    for op in ("ort:Tanh", "ort:Gelu"):
        audit.sweep(op, dtype="fp16")  # warm: session and oracle memo
        t = median_time(lambda op=op: audit.sweep(op, dtype="fp16"), args.repeat)
        print(f"{'sweep ' + op + ' fp16 exhaustive (warm)':<44}{63488:>10}{t:>10.3f}")
        (c,) = engines.candidates_of(op, f16)
        x = f16.finite_values()
        t = median_time(lambda c=c, x=x: c.evaluate(x, f16, f16), args.repeat)
        print(f"{'  engine calls alone':<44}{len(x):>10}{t:>10.3f}")
        ref = c.ref
        t = median_time(lambda ref=ref, x=x: oracle.evaluate(ref, f16, x, {}), args.repeat)
        print(f"{'  oracle alone (memo warm)':<44}{len(x):>10}{t:>10.3f}")
    lo, hi = 1.0, 4.0  # [1, 4): 2^24 fp32 inputs
    a, b = _ordinal_bounds(f32, (lo, hi))
    n = int(b - a + 1)
    kw = {"exhaustive": True, "range": (lo, np.nextafter(np.float32(hi), np.float32(0)).item())}
    if args.workers:
        kw["workers"] = args.workers
    t = median_time(lambda: audit.sweep("ort:Tanh", dtype="fp32", **kw), max(1, args.repeat // 2))
    print(f"{'sweep ort:Tanh fp32 --exhaustive [1, 4)':<44}{n:>10}{t:>10.3f}")
    (c,) = engines.candidates_of("ort:Tanh", f32)
    x = f32.from_ordinal(np.arange(a, a + (1 << 22)))
    t = median_time(lambda: c.evaluate(x, f32, f32), args.repeat) * (n / len(x))
    print(f"{'  engine calls alone (scaled from 2^22)':<44}{n:>10}{t:>10.3f}")
    t = median_time(lambda: oracle.evaluate(c.ref, f32, x, {}), args.repeat) * (n / len(x))
    print(f"{'  oracle alone (scaled from 2^22)':<44}{n:>10}{t:>10.3f}")


if __name__ == "__main__":
    main()
