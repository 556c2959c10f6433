"""Whole-process time of the README's first command, `actaudit sweep gelu --dtype fp16`, of
`actaudit --version`, and of importing each dependency.

Each figure is the median of 7 runs of a fresh Python process (imports included), run as the
console script runs it (the tree's own `[project.scripts]` entry point), after runs that warm
the oracle cache (a temporary cache directory, so the figure does not depend on what this
machine has cached before) and the bytecode cache (a temporary PYTHONPYCACHEPREFIX: the .pyc
files an installed copy has, without writing into the trees).  Also: the process that only
imports the CLI, each dependency imported alone, and the bare interpreter.

    python benchmarks/bench_first_command.py [--against OTHER_SOURCE_TREE] [--runs N]

--against also times another checkout (e.g. the previous release), runs interleaved with this
tree's, so that both see the same load.  The check: exit 1 when this tree's first command
takes more than 0.6 s or `--version` more than 0.15 s (medians; on a busy machine the wall
times grow with the load, the CPU times much less: both are printed, with the load average).
"""

from __future__ import annotations

import importlib.util
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib

RUNS = 7
LIMITS = {"first": 0.6, "version": 0.15}
# every dependency the first command imports, and the heavy ones it must not (pydantic: what
# typer 0.29 imports to parse options, capped for that; a module this venv lacks is listed so)
DEPENDENCIES = ["typer", "rich.console", "numpy", "mpmath", "scipy.special", "pydantic", "ml_dtypes",
                "pandas", "matplotlib.pyplot"]  # fmt: skip


def timed(cmd, env) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one run, in a directory of no tree (`python -c`
    puts the current directory first on sys.path: run from a checkout, it would import that
    checkout whatever PYTHONPATH says)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True, cwd=env["ACTAUDIT_CACHE_DIR"])
    t = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return t, r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime


def console(tree: str, *args: str) -> list[str]:
    """The command line the console script `actaudit ARGS` of TREE runs."""
    with open(os.path.join(tree, "pyproject.toml"), "rb") as f:
        entry = tomllib.load(f)["project"]["scripts"]["actaudit"]
    module, func = entry.split(":")
    code = f"import sys; sys.argv = ['actaudit', *sys.argv[1:]]; from {module} import {func}; {func}()"
    return [sys.executable, "-c", code, *args]


def cases(tree: str) -> dict[str, list[str]]:
    return {
        "first": console(tree, "sweep", "gelu", "--dtype", "fp16"),
        "version": console(tree, "--version"),
        "help": console(tree, "--help"),
        "import audit.cli": [sys.executable, "-c", "import audit.cli"],
    }


def env_for(tree: str, cache: str, pyc: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "ACTAUDIT_NO_CACHE")}
    env.update(ACTAUDIT_CACHE_DIR=cache, COLUMNS="80", PYTHONPATH=tree, PYTHONPYCACHEPREFIX=pyc)
    return env


def main() -> int:
    global RUNS
    if "--runs" in sys.argv:
        RUNS = int(sys.argv[sys.argv.index("--runs") + 1])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = [root]
    if "--against" in sys.argv:
        trees.append(os.path.abspath(sys.argv[sys.argv.index("--against") + 1]))
    times: dict = {(t, c): [] for t in trees for c in cases(t)}
    present = [d for d in DEPENDENCIES if importlib.util.find_spec(d.partition(".")[0]) is not None]
    deps: dict = {d: [] for d in ["(bare interpreter)", *present]}
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as pyc:
        envs = {t: env_for(t, os.path.join(cache, str(i)), pyc) for i, t in enumerate(trees)}
        for e in envs.values():
            os.makedirs(e["ACTAUDIT_CACHE_DIR"])
        for t in trees:  # warm: the oracle cache, the bytecode
            for cmd in cases(t).values():
                timed(cmd, envs[t])
        for d in present:
            timed([sys.executable, "-c", f"import {d}"], envs[root])
        for _ in range(RUNS):  # interleaved: every figure sees the same load
            for t in trees:
                for c, cmd in cases(t).items():
                    times[t, c].append(timed(cmd, envs[t]))
            for d in deps:
                code = "pass" if d.startswith("(") else f"import {d}"
                deps[d].append(timed([sys.executable, "-c", code], envs[root]))
        # the machine's own speed at the time (a virtual machine's drifts by a third within
        # minutes here): a fixed pure-Python loop, median of 5, read beside the figures
        loop = statistics.median(
            timed([sys.executable, "-c", "s = 0\nfor i in range(3_000_000): s += i"], envs[root])[1]
            for _ in range(5)
        )
    load = os.getloadavg()

    def med(v, i):
        return statistics.median(x[i] for x in v)

    print(f"load average after the runs: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} (1, 5, 15 min)")
    print(
        f"machine speed: a loop of 3,000,000 Python additions took {loop:.2f} s of CPU (0.28-0.33 s in quiet minutes here)"
    )
    print(f"medians of {RUNS} runs, wall / CPU (user + system)")
    print("| command | " + " | ".join(trees) + " |")
    print("|---|" + "---|" * len(trees))
    for c in cases(root):
        label = (
            f"`actaudit {' '.join(cases(root)[c][3:])}`" if c != "import audit.cli" else "`import audit.cli`"
        )
        print(
            f"| {label} | "
            + " | ".join(f"{med(times[t, c], 0):.2f} s / {med(times[t, c], 1):.2f} s" for t in trees)
            + " |"
        )
    print("\n| import, alone (with what it imports) | wall | CPU |\n|---|---|---|")
    for d, v in deps.items():
        print(f"| `{d}` | {med(v, 0):.3f} s | {med(v, 1):.3f} s |")
    for d in DEPENDENCIES:
        if d not in present:
            print(f"| `{d}` | not installed | |")
    bad = [
        f"{c}: {med(times[root, c], 0):.2f} s > {lim} s"
        for c, lim in LIMITS.items()
        if med(times[root, c], 0) > lim
    ]
    if bad:
        print("CHECK FAILED (wall medians of this tree): " + "; ".join(bad))
        return 1
    print(f"check passed: first command <= {LIMITS['first']} s, --version <= {LIMITS['version']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
