"""The cost of ``actaudit model --effect`` (issue 38: "a 12-site model with 8 batches should
finish in a few minutes on 2 cores"): an MLP of 12 activation layers of mixed kinds, six in
fp32 then six in fp16 (MatMul, Add, activation; a Cast between the halves), 8 batches of
synthetic inputs.

Each figure is the median of RUNS runs (--runs, default 3) of a fresh process running the
command as the console script does, wall and CPU time (user + system: steadier than the
wall time on a shared machine), side by side: the audit alone and the audit with
``--effect``, runs interleaved so that both see the same load.  --against OTHER_TREE times
another checkout the same way, interleaved too.  --quick: one run of each, 2 batches (a
smoke test of the benchmark itself).  --profile: one run of the effect in this process under
cProfile, the 25 functions of most cumulative time.

    python benchmarks/bench_model_effect.py [--runs 3] [--batches 8] [--rows 256]
        [--hidden 256] [--against OTHER_TREE] [--quick] [--profile]

The check: exit 1 when this tree's effect run takes more than LIMIT seconds of wall time
(median).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

LIMIT = 180.0  # seconds: "a few minutes"
FP32 = ["Sigmoid", "Tanh", "Softplus", "Elu", "Gelu", "Mish"]
FP16 = ["Sigmoid", "Tanh", "Softsign", "Selu", "HardSwish", "Erf"]


def build(path: Path, hidden: int, seed: int = 0) -> None:
    """x [B, hidden] fp32 -> 6 x (MatMul, Add, activation) in fp32 -> Cast fp16 -> 6 x
    (MatMul, Add, activation) in fp16 -> y; weights scaled to keep the activations' inputs
    of order one."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    x = "x"
    for i, (op, dt) in enumerate([(o, np.float32) for o in FP32] + [(o, np.float16) for o in FP16]):
        if i == len(FP32):
            nodes.append(helper.make_node("Cast", [x], ["x16"], to=TensorProto.FLOAT16, name="to16"))
            x = "x16"
        w = (rng.standard_normal((hidden, hidden)) * 1.5 / np.sqrt(hidden)).astype(dt)
        b = (rng.standard_normal(hidden) * 0.1).astype(dt)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes += [
            helper.make_node("MatMul", [x, f"w{i}"], [f"m{i}"], name=f"mm{i}"),
            helper.make_node("Add", [f"m{i}", f"b{i}"], [f"h{i}"], name=f"add{i}"),
            helper.make_node(op, [f"h{i}"], [f"a{i}"], name=f"act{i}_{op.lower()}"),
        ]
        x = f"a{i}"
    g = helper.make_graph(
        nodes, "mlp12", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", hidden])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT16, ["B", hidden])], inits,
    )  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    m.ir_version = 9
    onnx.save(m, str(path))


def command(tree: str, model: Path, rows: int, hidden: int, batches: int, effect: bool) -> list[str]:
    code = "import sys; sys.argv = ['actaudit', *sys.argv[1:]]; from audit.cli import main; sys.exit(main())"
    args = ["model", str(model), "--random", "--shape", f"x={rows}x{hidden}", "--batches", str(batches)]
    return [sys.executable, "-c", code, *args, *(["--effect"] if effect else [])]


def timed(cmd, env, cwd) -> tuple[float, float]:
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    t = time.perf_counter() - t0
    if p.returncode:
        sys.exit(f"{' '.join(cmd[3:])}: exit {p.returncode}\n{p.stderr[-2000:]}")
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return t, r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime


def profile(model: Path, rows: int, hidden: int, batches: int) -> None:
    import cProfile
    import pstats

    from audit.model.audit import audit_model

    pr = cProfile.Profile()
    pr.enable()
    audit_model(model, random=True, shapes={"x": (rows, hidden)}, batches=batches, effect=True)
    pr.disable()
    pstats.Stats(pr).sort_stats("cumulative").print_stats(25)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--rows", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--against")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.runs, a.batches = 1, 2
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = [root] + ([os.path.abspath(a.against)] if a.against else [])
    with tempfile.TemporaryDirectory(prefix="bench-model-effect-") as tmp:
        model = Path(tmp) / "mlp12.onnx"
        build(model, a.hidden)
        if a.profile:
            profile(model, a.rows, a.hidden, a.batches)
            return 0
        cache = Path(tmp) / "cache"
        cache.mkdir()
        env = {**os.environ, "ACTAUDIT_CACHE_DIR": str(cache), "COLUMNS": "80"}
        envs = {t: {**env, "PYTHONPATH": t} for t in trees}
        cases = {
            (t, e): command(t, model, a.rows, a.hidden, a.batches, e) for t in trees for e in (False, True)
        }
        times: dict = {k: [] for k in cases}
        for t in trees:  # warm: the oracle cache, the bytecode
            timed(cases[t, False], envs[t], tmp)
        for _ in range(a.runs):
            for (t, e), cmd in cases.items():
                times[t, e].append(timed(cmd, envs[t], tmp))
    load = os.getloadavg()

    def med(v, i):
        return statistics.median(x[i] for x in v)

    print(f"12 sites (6 fp32, 6 fp16), {a.batches} batches of {a.rows}x{a.hidden}; load average "
          f"after the runs {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")  # fmt: skip
    print(f"medians of {a.runs} runs, wall / CPU (user + system)")
    print("| tree | `actaudit model` | `actaudit model --effect` | the effect alone |")
    print("|---|---|---|---|")
    for t in trees:
        b, e = times[t, False], times[t, True]
        print(
            f"| {t} | {med(b, 0):.1f} s / {med(b, 1):.1f} s | {med(e, 0):.1f} s / {med(e, 1):.1f} s | "
            f"{med(e, 0) - med(b, 0):.1f} s / {med(e, 1) - med(b, 1):.1f} s |"
        )
    if med(times[root, True], 0) > LIMIT:
        print(f"CHECK FAILED: the effect run took {med(times[root, True], 0):.1f} s > {LIMIT} s")
        return 1
    print(f"check passed: the effect run <= {LIMIT} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
