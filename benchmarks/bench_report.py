"""Whole-process time and size of `actaudit report gelu --dtype fp16,bf16` (issue 35, item 9).

Each figure is the median of RUNS runs (--runs, default 3) of a fresh Python process, after
one run that warms the oracle cache (the user's cache: the oracle of gelu in fp16 and bf16 is what a second
report reuses).  Printed: wall and CPU seconds (on a busy machine the wall time grows with
the load, the CPU time much less: both, and the load average before and after), the size of
index.html, the number of images written and the total size of the directory.

The CPU time is split into the command's own process (the sweep and the page: serial) and
its workers (the figures, rendered on every core); "idle wall" is the estimate for an idle
machine of CORES cores (--cores, default this machine's): the serial part plus the workers'
part divided among the cores, what the wall time is when nothing else runs.

    python benchmarks/bench_report.py [--runs N] [--cores N] [--against OTHER_SOURCE_TREE]

--against also runs another checkout (e.g. the commit before a change), interleaved with
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
from pathlib import Path

ARGS = ["report", "gelu", "--dtype", "fp16,bf16"]


# the command, in a process that writes its own CPU time and its waited-for children's at exit
RUN = (
    "import atexit, os, resource, runpy, sys\n"
    "def _cpu():\n"
    "    s, c = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))\n"
    "    with open(os.environ['BENCH_CPU'], 'w') as f:\n"
    "        f.write(f'{s.ru_utime + s.ru_stime} {c.ru_utime + c.ru_stime}')\n"
    "atexit.register(_cpu)\n"
    "sys.argv = ['actaudit', *sys.argv[1:]]\n"
    "runpy.run_module('audit.cli', run_name='__main__')\n"
)


def once(root: str, out: Path) -> dict:
    cpu_file = out.with_suffix(".cpu")
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": root, "BENCH_CPU": str(cpu_file)}
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", RUN, *ARGS, "-o", str(out)],
        env=env,
        cwd=root,  # (sys.path[0] is the working directory: run elsewhere, a tree runs another's code)
        stdout=subprocess.DEVNULL,
        check=True,
    )
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    own, workers = map(float, cpu_file.read_text().split())
    files = [p for p in out.iterdir() if p.is_file()]
    return {
        "wall": wall,
        "cpu": r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime,
        "serial": own,
        "workers": workers,
        "html": (out / "index.html").stat().st_size,
        "images": sum(p.suffix in (".png", ".svg") for p in files),
        "dir": sum(p.stat().st_size for p in files),
    }


def main() -> None:
    here = str(Path(__file__).resolve().parents[1])
    runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 3
    cores = int(sys.argv[sys.argv.index("--cores") + 1]) if "--cores" in sys.argv else os.cpu_count() or 1
    trees = {"this tree": here}
    if "--against" in sys.argv:
        trees["against"] = str(Path(sys.argv[sys.argv.index("--against") + 1]).resolve())
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}; {os.cpu_count()} cores")
    got: dict = {k: [] for k in trees}
    with tempfile.TemporaryDirectory() as tmp:
        once(here, Path(tmp) / "warm")  # the oracle cache (the trees share it: one oracle version)
        for i in range(runs):
            for name, root in trees.items():
                got[name].append(once(root, Path(tmp) / f"{name.replace(' ', '')}-{i}"))
    for name, rs in got.items():
        med = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        idle = [r["serial"] + r["workers"] / cores for r in rs]
        print(
            f"{name} ({trees[name]}): median of {runs}: wall {med['wall']:.1f} s, CPU {med['cpu']:.1f} s "
            f"(serial {med['serial']:.1f} s, workers {med['workers']:.1f} s), idle wall on {cores} cores "
            f"{statistics.median(idle):.1f} s; index.html {med['html'] / 1e6:.2f} MB; {med['images']:.0f} images; "
            f"directory {med['dir'] / 1e6:.2f} MB"
        )
        for k in ("wall", "cpu", "serial", "workers"):
            print(f"  {k}: " + ", ".join(f"{r[k]:.1f}" for r in rs))
        print("  idle wall: " + ", ".join(f"{v:.1f}" for v in idle))
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
