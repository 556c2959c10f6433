"""The fp16 kernels' final rounding by the operation list against F16C's conversions, side by side
in one run (audit/repair/emit/c.py): each fp16 vector kernel of ``actaudit fit`` compiled twice
with the widest build this CPU runs, its rounding by its own 16 operations and by VCVTPS2PH /
VCVTPH2PS in blocks of 512; both checked at every input, then timed interleaved on 2^22 fp16
values in [-8, 8] (fp32 in and out), ns per element, medians of 15.

Usage: python benchmarks/bench_fit_f16c.py
"""

import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from audit.repair import fit_shapes as fs
from audit.repair.emit import c as emit_c

tmp = Path(tempfile.mkdtemp())
build = fs.runnable_builds()[0]
x = np.ascontiguousarray(
    np.random.default_rng(0).uniform(-8, 8, 1 << 22).astype(np.float16).astype(np.float32)
)
y = np.empty_like(x)
for ref in ("gelu", "silu", "tanh", "sigmoid", "erf"):
    r = fs.fit_best(ref, "fp16")
    p = r.program
    old = replace(p, name=p.name + "_old", round16=None)  # the rounding by its ops
    new = replace(p, name=p.name + "_new")
    ks = {
        n: emit_c.compile_source(emit_c.source(q, ""), q.name, build, tmp)
        for n, q in (("ops", old), ("F16C", new))
    }
    tg = fs.targets(ref, "fp16")
    for n, k in ks.items():
        assert fs._same_bits(k(tg.x32).view(np.uint32), tg.y_bits).all(), (ref, n)
    t = {n: [] for n in ks}
    for _ in range(15):
        for n, k in ks.items():
            a = time.perf_counter()
            k.fn(x.ctypes.data, y.ctypes.data, x.size)
            t[n].append((time.perf_counter() - a) / x.size * 1e9)
    m = {n: statistics.median(v) for n, v in t.items()}
    print(
        f"{ref} fp16 ({build}): rounding by ops {m['ops']:.3f} ns, by F16C {m['F16C']:.3f} ns "
        f"({m['F16C'] / m['ops'] - 1:+.0%}); both correct at every input",
        flush=True,
    )
