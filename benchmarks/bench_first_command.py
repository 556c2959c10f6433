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
import statistics
import subprocess
import sys
import tempfile
import time

RUNS = 5
CMD = [sys.executable, "-m", "audit.cli", "sweep", "gelu", "--dtype", "fp16"]


def wall(cmd, env) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def main() -> None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if "--against" in sys.argv:
        return against(root, sys.argv[sys.argv.index("--against") + 1])
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "ACTAUDIT_CACHE_DIR": cache, "COLUMNS": "80",
               "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
        cold = []
        for _ in range(RUNS):
            for f in os.listdir(cache):
                os.remove(os.path.join(cache, f))
            cold.append(wall(CMD, env))
        wall(CMD, env)  # warm the cache
        warm = [wall(CMD, env) for _ in range(RUNS)]
        imports = [wall([sys.executable, "-c", "import audit.cli"], env) for _ in range(RUNS)]
        bare = [wall([sys.executable, "-c", "pass"], env) for _ in range(RUNS)]
    print(f"| `{' '.join(['actaudit', *CMD[3:]])}` | median of {RUNS} |")
    print("|---|---|")
    print(f"| whole process, warm oracle cache | {statistics.median(warm):.2f} s |")
    print(f"| whole process, cold oracle cache | {statistics.median(cold):.2f} s |")
    print(f"| of which: `import audit.cli` (a process that only imports) | {statistics.median(imports):.2f} s |")
    print(f"| of which: the Python interpreter itself | {statistics.median(bare):.2f} s |")


def against(root: str, other: str) -> None:
    times: dict = {root: [], other: []}
    with tempfile.TemporaryDirectory() as cache:
        envs = {t: {**os.environ, "ACTAUDIT_CACHE_DIR": cache, "COLUMNS": "80", "PYTHONPATH": t}
                for t in times}
        for t in times:
            wall(CMD, envs[t])  # warm the cache
        for _ in range(RUNS):
            for t in times:
                times[t].append(wall(CMD, envs[t]))
    for t, v in times.items():
        print(f"{t}: median {statistics.median(v):.2f} s of {RUNS} (warm cache)")


if __name__ == "__main__":
    main()
