"""Whole-process time of the README's first command, `actaudit sweep gelu --dtype fp16`.

Each figure is the median of 5 runs of a fresh Python process (imports included), after one
run that warms the oracle cache (a temporary cache directory, so the figure does not depend
on what this machine has cached before).  Also: the process that only imports the CLI, and
the same command with a cold cache.

    python benchmarks/bench_first_command.py [--against OTHER_SOURCE_TREE]

--against also times another checkout (e.g. the previous release), runs interleaved with
this tree's, so that both see the same load.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

RUNS = 5
CMD = [sys.executable, "-m", "audit.cli", "sweep", "gelu", "--dtype", "fp16"]


CPU: list = []  # CPU seconds (user + system) of each run, beside its wall time


def wall(cmd, env) -> float:
    """Wall seconds of one run; its CPU seconds are appended to CPU (on a busy machine the
    wall time grows with the load, the CPU time much less: both are printed)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True)
    t = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    return t


def timed(cmd, env) -> tuple[float, float]:
    w = wall(cmd, env)
    return w, CPU[-1]


def main() -> None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if "--against" in sys.argv:
        return against(root, sys.argv[sys.argv.index("--against") + 1])
    with tempfile.TemporaryDirectory() as cache:
        env = {
            **os.environ,
            "ACTAUDIT_CACHE_DIR": cache,
            "COLUMNS": "80",
            "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", ""),
        }
        cold = []
        for _ in range(RUNS):
            for f in os.listdir(cache):
                os.remove(os.path.join(cache, f))
            cold.append(timed(CMD, env))
        wall(CMD, env)  # warm the cache
        warm = [timed(CMD, env) for _ in range(RUNS)]
        imports = [timed([sys.executable, "-c", "import audit.cli"], env) for _ in range(RUNS)]
        bare = [timed([sys.executable, "-c", "pass"], env) for _ in range(RUNS)]
    print(f"load average (1 min) after the runs: {os.getloadavg()[0]:.1f}")
    print(f"| `{' '.join(['actaudit', *CMD[3:]])}` | wall, median of {RUNS} | CPU time, median |")
    print("|---|---|---|")
    for label, v in (
        ("whole process, warm oracle cache", warm),
        ("whole process, cold oracle cache", cold),
        ("of which: `import audit.cli` (a process that only imports)", imports),
        ("of which: the Python interpreter itself", bare),
    ):
        print(
            f"| {label} | {statistics.median(w for w, _ in v):.2f} s | "
            f"{statistics.median(c for _, c in v):.2f} s |"
        )


def against(root: str, other: str) -> None:
    times: dict = {root: [], other: []}
    with tempfile.TemporaryDirectory() as cache:
        envs = {
            t: {**os.environ, "ACTAUDIT_CACHE_DIR": cache, "COLUMNS": "80", "PYTHONPATH": t} for t in times
        }
        for t in times:
            wall(CMD, envs[t])  # warm the cache
        for _ in range(RUNS):
            for t in times:
                times[t].append(timed(CMD, envs[t]))
    for t, v in times.items():
        print(
            f"{t}: median wall {statistics.median(w for w, _ in v):.2f} s, CPU "
            f"{statistics.median(c for _, c in v):.2f} s, of {RUNS} runs (warm cache)"
        )


if __name__ == "__main__":
    main()
