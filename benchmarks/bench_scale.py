"""Scale figures, side by side in one run (issue #8's benchmark; the README quotes them):

(a) the exhaustive fp16 sweep of one candidate per family (findings and clip included)
    against the naive approach a user would write: mpmath at every input, correctly
    rounded (timed on a seeded sample of inputs and extrapolated to all 63,488), as a ratio;
(b) fp32 throughput of gelu.tanh, end to end (oracle, candidate, error statistics,
    findings), in inputs per second per core: one worker over 8 exhaustive ranges of 2^25
    inputs spread evenly over fp32's number line (both signs, tiny to huge, the ties at
    subnormals), then the same ranges on every core; and the exhaustive pairs of a gated
    unit (swiglu.silu_mul, fp16);
(c) peak resident memory of this process and of its worker processes;
(d) the marginal fp32 rate of gelu.tanh in [1, 64] (50 million inputs) on every core (the
    rate of the whole range less that of a small one: the per-sweep set-up left out), with
    the compiled helper of audit/numbers/native.py and without it (runs interleaved), the
    CPU seconds per input of one worker split into the oracle alone and the rest (its
    share), and the oracle alone in values/s beside MPFR's correctly rounded erfc, exp and
    tanh through gmpy2 at 24 and 53 bits per value (the limit a proven library sets).

Medians of --repeat runs.  Usage:
  python benchmarks/bench_scale.py [--repeat 3] [--naive-sample 300] [--fp32-range 33554432]
                                   [--only d] [--marginal-range 1:64]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time

import mpmath as mp
import numpy as np

import audit
from audit.numbers.formats import get_format
from audit.numbers.inputs import _ordinal_bounds
from audit.targets.candidates import families


def naive_seconds_per_input(ref, fmt, x) -> float:
    """mpmath at every input, rounded to fmt (at p + 60 bits: no ambiguity handling, so
    this underestimates the naive cost, and the ratio is a lower bound)."""
    params = ref.with_defaults({})
    t = time.perf_counter()
    with mp.workprec(fmt.p + 60):
        for xi in x.tolist():
            fmt.round_mpf(ref.mp(mp.mpf(xi), **params))
    return (time.perf_counter() - t) / len(x)


def fp32_ranges(n: int, k: int = 8) -> list[tuple[float, float]]:
    """k ranges of n consecutive fp32 values, their starts evenly spread over the ordinals."""
    f = get_format("fp32")
    lo, hi = _ordinal_bounds(f, None)
    out = []
    for s in np.linspace(lo, hi - n, k).astype(np.int64).tolist():
        a, b = f.from_ordinal([s, s + n - 1])
        out.append((float(a), float(b)))
    return out


def timed(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def oracle_figures(rng: tuple[float, float], repeat: int) -> None:
    """(d): marginal rate on every core, the oracle's share of one worker's CPU time, the
    oracle alone beside gmpy2 (MPFR)."""
    from audit.measure import native_check
    from audit.measure.executors import keep_freed_memory
    from audit.numbers import native
    from audit.numbers.inputs import CHUNK
    from audit.oracle import oracle
    from audit.targets.candidates import resolve

    cores = os.cpu_count() or 1
    small = (rng[0], rng[0] * (1 + 2.0**-8))  # 32,769 inputs: the set-up of a sweep
    counts = {}

    def sweep(r, workers):
        (res,) = audit.sweep("gelu.tanh", dtype="fp32", range=r, exhaustive=True, workers=workers)
        counts[r] = res.domain.count

    # the compiled helper (audit/numbers/native.py) built once, as the first large sweep
    # builds it; each figure then with it and without it (its numpy path), runs interleaved
    compiled = []
    real_compile = native.compile_to
    native.compile_to = lambda *a: compiled.append(1) or real_compile(*a)  # (to say which it was)
    t = time.perf_counter()
    try:
        built = native_check.prepare("fp32", native.SWEEP_MIN)
    finally:
        native.compile_to = real_compile
    build_s = time.perf_counter() - t
    modes = [("numpy path", "1")] + ([("compiled helper", "")] if built else [])
    how = "built" if compiled else "loaded from the cache and checked"
    why = "ACTAUDIT_NO_NATIVE is set" if not native.enabled() else "no compiler, or a failed build or check"
    print(
        f"(d) the compiled helper: {how + ' in ' + format(build_s, '.2f') + ' s' if built else 'not used (' + why + ')'}"
    )

    def in_mode(flag, fn):
        before = os.environ.get("ACTAUDIT_NO_NATIVE")
        os.environ["ACTAUDIT_NO_NATIVE"] = flag
        try:
            return fn()
        finally:  # (the caller's own setting back)
            if before is None:
                os.environ.pop("ACTAUDIT_NO_NATIVE", None)
            else:
                os.environ["ACTAUDIT_NO_NATIVE"] = before

    def wall(fn):
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t

    big_t = {m: [] for m, _ in modes}
    small_t = {m: [] for m, _ in modes}
    for _ in range(repeat):
        for m, flag in modes:
            big_t[m].append(in_mode(flag, lambda: wall(lambda: sweep(rng, cores))))
            small_t[m].append(in_mode(flag, lambda: wall(lambda: sweep(small, cores))))
    big_n, small_n = counts[rng], counts[small]
    for m, _ in modes:
        b, sm = statistics.median(big_t[m]), statistics.median(small_t[m])
        marginal = (big_n - small_n) / (b - sm)
        print(
            f"(d) gelu.tanh fp32 in [{rng[0]:g}, {rng[1]:g}], {big_n:,} inputs, {cores} workers, {m}: "
            f"{big_n / b / 1e6:.2f} M inputs/s whole, {marginal / 1e6:.2f} M/s marginal "
            f"(less a sweep of {small_n:,} inputs: {sm:.2f} s)"
        )
    # one worker's CPU time: the whole chunk pipeline against the oracle alone, same chunks
    (c,) = resolve(["gelu.tanh"])
    fmt = get_format("fp32")
    params = c.ref.with_defaults({})
    lo = int(np.float32(rng[0]).view(np.uint32))
    starts = np.linspace(lo, int(np.float32(rng[1]).view(np.uint32)) - CHUNK, 8).astype(np.int64)
    chunks = [
        (np.arange(s, s + CHUNK, dtype=np.int64).astype(np.uint32)).view(np.float32).astype(np.float64)
        for s in starts.tolist()
    ]
    keep_freed_memory()

    def cpu(fn) -> float:
        ts = []
        for _ in range(max(repeat, 5)):
            t = time.process_time()
            for x in chunks:
                fn(x)
            ts.append(time.process_time() - t)
        return statistics.median(ts) / (len(chunks) * CHUNK)

    part = (float(chunks[0][0]), float(chunks[0][0]) * 1.25)  # 2^21 + 1 inputs from the first chunk on

    def whole():
        t = time.process_time()
        (res,) = audit.sweep("gelu.tanh", dtype="fp32", range=part, exhaustive=True, workers=1)
        return (time.process_time() - t) / res.domain.count

    per_fast = cpu(lambda x: c.ref.fast(x, **params))
    for m, flag in modes:
        per_oracle = in_mode(flag, lambda: cpu(lambda x: oracle.evaluate(c.ref, fmt, x, params)))
        per_all = in_mode(flag, lambda: statistics.median([whole() for _ in range(max(repeat, 5))]))
        print(
            f"    {m}, 1 worker, CPU time per input: {per_all * 1e9:.1f} ns end to end ({1 / per_all / 1e6:.1f} M/s "
            f"per core), oracle alone {per_oracle * 1e9:.1f} ns ({per_oracle / per_all:.0%}; its float64 fast "
            f"value {per_fast * 1e9:.1f} ns): {1 / per_oracle / 1e6:.1f} M correctly rounded values/s per core"
        )
    try:
        import gmpy2
    except ImportError:
        print("    gmpy2 not installed: no MPFR comparison")
        return
    xs = chunks[0][:20000].tolist()
    for prec in (24, 53):
        with gmpy2.context(gmpy2.get_context(), precision=prec):
            row = []
            for name, f in (("erfc", gmpy2.erfc), ("exp", gmpy2.exp), ("tanh", gmpy2.tanh)):
                ts = []
                for _ in range(max(repeat, 3)):
                    t = time.process_time()
                    for v in xs:
                        f(v)
                    ts.append(time.process_time() - t)
                row.append(f"{name} {len(xs) / statistics.median(ts) / 1e6:.2f}")
        print(f"    MPFR (gmpy2, {prec} bits, one call per value, M values/s per core): " + ", ".join(row))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--naive-sample", type=int, default=300)
    ap.add_argument("--fp32-range", type=int, default=1 << 25)
    ap.add_argument("--only", default="abcd", help="which figures: any of a, b, c, d")
    ap.add_argument("--marginal-range", default="1:64")
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    if "d" in args.only:
        a, b = (float(v) for v in args.marginal_range.split(":"))
        oracle_figures((a, b), args.repeat)
    if set(args.only) <= {"d"}:
        return

    fmt = get_format("fp16")
    allx = fmt.finite_values()
    sample = np.random.default_rng(0).choice(allx, args.naive_sample, replace=False)
    print("(a) exhaustive fp16 sweep (63,488 inputs, findings and clip included) vs naive mpmath")
    print(f"{'candidate':<24}{'actaudit s':>12}{'naive s (est.)':>16}{'ratio':>10}")
    ratios = []
    for _fam, cands in sorted(families().items()):
        c = cands[0]
        if c.arity != 1:
            continue
        audit.sweep(c.id, dtype="fp16")  # the oracle table is cached on disk: time warm runs
        ours = timed(lambda c=c: audit.sweep(c.id, dtype="fp16"), args.repeat)
        naive = naive_seconds_per_input(c.ref, fmt, sample) * len(allx)
        ratios.append(naive / ours)
        print(f"{c.id:<24}{ours:>12.3f}{naive:>16.1f}{naive / ours:>10.0f}")
    print(f"median ratio {statistics.median(ratios):.0f}x over {len(ratios)} families")

    ranges = fp32_ranges(args.fp32_range)
    n = 0

    def run(workers):
        nonlocal n
        n = 0
        mpm = 0
        for rng in ranges:
            (r,) = audit.sweep("gelu.tanh", dtype="fp32", range=rng, exhaustive=True, workers=workers)
            n += r.domain.count
            mpm += r.oracle_mpmath
        return mpm

    one = timed(lambda: run(1), args.repeat)
    rate1 = n / one
    mpm = run(1)
    print(
        f"(b) fp32 gelu.tanh, {n:,} inputs in {len(ranges)} ranges over the number line, "
        f"{mpm} decided by mpmath:"
    )
    print(f"    1 worker: {rate1 / 1e6:.2f} M inputs/s/core")
    if cores > 1:
        alln = timed(lambda: run(cores), args.repeat)
        rate = n / alln
        print(
            f"    {cores} workers: {rate / 1e6:.2f} M inputs/s ({rate / cores / 1e6:.2f} per core); "
            f"all 2^32 fp32 inputs: {2**32 / rate / 60:.1f} min"
        )
    pair_rng = (0.5, 0.5 + 2**-1)  # 1,025 fp16 values: 1,050,625 pairs
    pairs = [0]

    def run_pairs():
        (r,) = audit.sweep("swiglu.silu_mul", dtype="fp16", range=pair_rng, exhaustive=True, workers=1)
        pairs[0] = r.domain.count

    pt = timed(run_pairs, args.repeat)
    prate = pairs[0] / pt
    print(
        f"    swiglu.silu_mul fp16 pairs, 1 worker: {prate / 1e6:.2f} M pairs/s/core; "
        f"all 63,488^2 pairs on {cores} cores: {63488**2 / prate / cores / 60:.1f} min"
    )
    me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"(c) peak resident memory: {me:.0f} MiB (this process), {kids:.0f} MiB (largest worker)")


if __name__ == "__main__":
    main()
