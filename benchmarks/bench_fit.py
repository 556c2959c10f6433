"""The fitted, correctly rounded GELU kernel (bf16 outputs, fp32 compute) against a C
tanh-GELU using tanhf: time per element, operation counts, accuracy.

Both are compiled with gcc -O2 (-ffp-contract=off for the fitted one: its operation
order is the verified one) into shared libraries and called through ctypes on the same
2^22 inputs (seeded standard normal values rounded to bf16, typical activations; a second
set uniform over the fitted core [-13.5, 2.8]).  Prints medians of --repeat runs.
Usage: python benchmarks/bench_fit.py [--repeat 21] [--dtype bf16]
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import ml_dtypes
import numpy as np

from audit import cost, fit, oracle
from audit.candidates import catalog
from audit.formats import get_format
from audit.references import get_reference

TANH_GELU_C = r"""
#include <math.h>
#include <stddef.h>
void gelu_tanh_c(const float *x, float *y, size_t n) {
    for (size_t j = 0; j < n; j++) {
        float v = x[j];
        y[j] = 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * (v * v * v))));
    }
}
"""


def compile_lib(src: str, name: str, tmp: Path, extra=()) -> ctypes.CDLL:
    c = tmp / f"{name}.c"
    c.write_text(src)
    so = tmp / f"{name}.so"
    subprocess.run(["gcc", "-O2", *extra, "-shared", "-fPIC", "-o", str(so), str(c), "-lm"], check=True)
    return ctypes.CDLL(str(so))


def timer(f, x: np.ndarray, repeat: int) -> float:
    """Median seconds per element of f over x."""
    y = np.empty_like(x)
    f(x.ctypes.data, y.ctypes.data, x.size)  # warm up
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        f(x.ctypes.data, y.ctypes.data, x.size)
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) / x.size


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=21)
    ap.add_argument("--dtype", default="bf16")
    args = ap.parse_args()
    fmt = get_format(args.dtype)
    rep = fit.fit("gelu", args.dtype)
    if not rep.ok:
        raise SystemExit(f"fit failed: {rep.message}")
    k = rep.kernel
    tmp = Path(tempfile.mkdtemp(prefix="actaudit-bench-fit-"))
    lib_fit = compile_lib(fit.c_source(k), k.name, tmp, ["-ffp-contract=off"])
    lib_tanh = compile_lib(TANH_GELU_C, "gelu_tanh_c", tmp)
    f_fit, f_tanh = getattr(lib_fit, k.name), lib_tanh.gelu_tanh_c
    for f in (f_fit, f_tanh):
        f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
        f.restype = None

    # accuracy of both C functions at every finite input, against the oracle
    x_all = fmt.finite_values()
    rn = oracle.evaluate(get_reference("gelu"), fmt, x_all, {}).rounded
    xa = x_all.astype(np.float32)
    acc = {}
    for name, f in (("fitted", f_fit), ("tanh-GELU", f_tanh)):
        y = np.empty_like(xa)
        f(xa.ctypes.data, y.ctypes.data, xa.size)
        yr = fmt.round(y.astype(np.float64))
        same = (yr == rn) | (np.isnan(yr) & np.isnan(rn))
        acc[name] = (int(same.sum()), len(same))

    rng = np.random.default_rng(0)
    n = 1 << 22
    sets = {"normal(0, 1)": rng.standard_normal(n), "uniform [-13.5, 2.8]": rng.uniform(-13.5, 2.8, n)}
    ops_fit = cost.counts(fit.candidate(k), get_format("fp32"))
    ops_tanh = cost.counts(catalog()["gelu.tanh"], get_format("fp32"))
    print(
        f"fitted kernel {k.name}: degree {k.degree}, {k.pieces} pieces, "
        f"table {k.pieces * (k.degree + 2) * 4} bytes; fit took {rep.seconds:.1f} s"
    )
    print(
        f"ops per element: fitted {cost.describe(ops_fit)} (cost {cost.cost(ops_fit):g}); "
        f"gelu.tanh {cost.describe(ops_tanh)} (cost {cost.cost(ops_tanh):g})"
    )
    for name, (ok, tot) in acc.items():
        print(
            f"{name:>10} C function, outputs rounded to {fmt.name}: correctly rounded at "
            f"{ok} of {tot} finite inputs"
        )
    print(
        f"{'inputs (2^22, rounded to ' + fmt.name + ')':<34}{'fitted ns/elem':>15}"
        f"{'tanhf GELU ns/elem':>20}{'speedup':>9}"
    )
    for label, v in sets.items():
        x = v.astype(ml_dtypes.bfloat16 if fmt.name == "bf16" else np.float16).astype(np.float32)
        x = np.ascontiguousarray(x)
        t_fit = timer(f_fit, x, args.repeat)
        t_tanh = timer(f_tanh, x, args.repeat)
        print(f"{label:<34}{t_fit * 1e9:>15.2f}{t_tanh * 1e9:>20.2f}{t_tanh / t_fit:>8.1f}x")


if __name__ == "__main__":
    main()
