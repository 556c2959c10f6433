"""Speed of ``actaudit selftest --certify`` (issue 24): Arb proofs of oracle table entries.

Per (reference, format) of a representative set, the median over --repeat runs of proving
every entry of the table (the table itself built beforehand, not timed), side by side:

* ``cheap first``: the default schedule, 64 bits first, raised to 256, 1024, 4096 only where
  the ball does not fit one rounding interval;
* ``256 bits``: every ball at 256 bits from the start (what a schedule without the cheap
  first try costs);
* ``2 workers``: the default schedule on the project's pool of forked processes.

--full instead times one whole run (every univariate reference, every float format of 16
bits or fewer, tables built or loaded from the cache as the CLI does) and prints values/s.
Usage: python benchmarks/bench_certify.py [--repeat 3] [--full]
"""

from __future__ import annotations

import argparse
import statistics
import time

from audit.measure import certify
from audit.numbers.formats import FORMATS
from audit.oracle import oracle
from audit.oracle.references import REFERENCES

CASES = [
    ("gelu", "bf16"),
    ("gelu_grad", "fp16"),
    ("mish_grad", "bf16"),
    ("softplus", "fp16"),
    ("tanh", "fp16"),
    ("hardswish", "bf16"),
]


def timed(fn, *args, **kw) -> float:
    t = time.perf_counter()
    fn(*args, **kw)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--full", action="store_true")
    args = ap.parse_args()
    certify.certified_references()  # (imports the fused and backward references)
    if args.full:
        t = time.perf_counter()
        res = certify.run(workers=1)
        dt = time.perf_counter() - t
        n = sum(r.total for r in res)
        bad = sum(r.n_uncertified for r in res)
        print(
            f"full run: {len(res)} tables, {n} values, {bad} uncertified, {dt:.1f} s, {n / dt:,.0f} values/s"
        )
        return
    print(
        f"{'reference':<11}{'format':<7}{'values':>7}{'cheap first s':>15}{'256 bits s':>12}{'2 workers s':>13}{'values/s':>11}"
    )
    for name, fname in CASES:
        ref, fmt = REFERENCES[name], FORMATS[fname]
        params = ref.with_defaults({})
        x = fmt.finite_values()
        r = oracle.table(ref, fmt).rounded
        a = (ref, fmt, params, x, r)
        cheap = [timed(certify.certify_values, *a) for _ in range(args.repeat)]
        wide = [timed(certify.certify_values, *a, precisions=(256, 1024, 4096)) for _ in range(args.repeat)]
        two = [timed(certify._run, *a, 2) for _ in range(args.repeat)]
        m = statistics.median(cheap)
        print(
            f"{name:<11}{fname:<7}{len(x):>7}{m:>15.2f}{statistics.median(wide):>12.2f}"
            f"{statistics.median(two):>13.2f}{len(x) / m:>11,.0f}"
        )


if __name__ == "__main__":
    main()
