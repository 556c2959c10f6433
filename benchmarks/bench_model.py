"""actaudit model on a BERT-base-sized graph: 12 layers (hidden 768, intermediate 3072, one
erf-GELU per layer in torch's exported form), sequence 128, 8 batches of synthetic inputs,
fp32 sites counted per bf16 value (--bin bf16).  Times the whole audit (scan, ORT's
optimization, the capture pass, the audits) and its peak memory (the child process's
maximum resident set) and CPU time (user + system: steadier than the wall time on a shared
machine), the model built beforehand in the parent.

    python benchmarks/bench_model.py [--layers 12] [--batches 8] [--bin bf16]
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def build(path: Path, layers: int, hidden: int = 768, inner: int = 3072, seed: int = 0) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    nodes, inits = [], []

    def w(name, *shape, scale):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def c(name, v):
        inits.append(numpy_helper.from_array(np.array(v, np.float32), name))
        return name

    c("sqrt2", math.sqrt(2))
    c("one", 1.0)
    c("half", 0.5)
    x = "x"
    for i in range(layers):
        p = f"l{i}_"
        nodes += [
            helper.make_node(
                "MatMul",
                [x, w(p + "w1", hidden, inner, scale=1 / math.sqrt(hidden))],
                [p + "mm1"],
                name=p + "mm1",
            ),
            helper.make_node("Add", [p + "mm1", w(p + "b1", inner, scale=0.1)], [p + "h"], name=p + "add1"),
            helper.make_node("Div", [p + "h", "sqrt2"], [p + "d"], name=p + "div"),
            helper.make_node("Erf", [p + "d"], [p + "e"], name=p + "erf"),
            helper.make_node("Add", [p + "e", "one"], [p + "a"], name=p + "add"),
            helper.make_node("Mul", [p + "h", p + "a"], [p + "m"], name=p + "mul"),
            helper.make_node("Mul", [p + "m", "half"], [p + "g"], name=p + "mul_1"),
            helper.make_node(
                "MatMul",
                [p + "g", w(p + "w2", inner, hidden, scale=1 / math.sqrt(inner))],
                [p + "mm2"],
                name=p + "mm2",
            ),
            helper.make_node("Add", [p + "mm2", x], [p + "r"], name=p + "res"),
            helper.make_node(
                "LayerNormalization",
                [p + "r", c(p + "gam", np.ones(hidden)), c(p + "bet", np.zeros(hidden))],
                [p + "y"],
                name=p + "ln",
                axis=-1,
            ),  # fmt: skip
        ]
        x = p + "y"
    g = helper.make_graph(
        nodes, "bert_base_ffn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 128, hidden])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, None)], inits,
    )  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    onnx.save(m, str(path))


CHILD = """
import json, sys, time
t = time.perf_counter()
from audit.model.audit import audit_model
m = audit_model(sys.argv[1], random=True, shapes={"x": (1, 128, 768)}, seed=0, batches=int(sys.argv[2]), bin=sys.argv[3])
print(json.dumps({"seconds": time.perf_counter() - t, "sites": len(m.sites),
                  "audited": sum(a.status == "audited" for a in m.sites),
                  "engine_ops": sorted({a.engine.target or "graph" for a in m.sites}),
                  "inputs": sum(a.hist.count for a in m.sites if a.hist)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--bin", default="bf16")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-model-") as tmp:
        p = Path(tmp) / "bert_base.onnx"
        build(p, a.layers)
        t = time.perf_counter()
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(p), str(a.batches), a.bin], capture_output=True, text=True
        )
        wall = time.perf_counter() - t
        if out.returncode:
            sys.exit(out.stderr)
        res = json.loads(out.stdout.strip().splitlines()[-1])
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        peak = ru.ru_maxrss / 1024  # KiB -> MiB
        res.update(
            {
                "wall_seconds": wall,
                "cpu_seconds": ru.ru_utime + ru.ru_stime,
                "peak_mib": peak,
                "model_mib": p.stat().st_size / 2**20,
                "load_average": __import__("os").getloadavg()[0],
            }
        )
        print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
