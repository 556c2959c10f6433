"""Fitted vector kernels (correctly rounded, audit/repair/fit_shapes.py) against ONNX Runtime's
kernels for the same op, single thread, side by side in one run.

For each target (gelu, silu, sigmoid, tanh, erf x bf16, fp16 outputs; fp32 compute) the
kernel is fitted, emitted as C, compiled with the flags its header names (AVX-512, AVX2+FMA,
scalar) and run on every input of the format (65,536 codes) against the oracle: the
"correct" column is that exhaustive check of the compiled code, all builds.  Timing: 2^22
inputs uniform in [-8, 8] rounded to the format, stored as fp32 (ORT's Gelu, Sigmoid, Tanh,
Erf take fp32 in and out; SiLU against the faster of QuickGelu(alpha=1) and x * Sigmoid(x);
Gelu against the faster of ONNX Gelu and com.microsoft Gelu), intra_op_num_threads=1, ORT
writing into a preallocated output (io_binding) as the C kernels do.  The fp32-in/fp32-out
kernel returns the correctly rounded bf16/fp16 value stored as fp32; the u16 column is the
native 16-bit in/out variant (the same ops plus the conversions).  Each repeat times every
kernel once, interleaved; the table shows medians, and "min ratio" the ratio of the fastest
runs (fit AVX-512 over the fastest ORT form), the least disturbed by other load.  The kernel
of each target is the fastest of its variants (audit.repair.fit_shapes.search; --no-search: the
default variant, the kernel plain `actaudit fit` writes: fit_shapes.fit_best).  --before adds the table kernel of
``actaudit fit`` (audit/repair/fit.py) for the targets given with --before.

Usage: python benchmarks/bench_fit.py [--repeat 15] [--targets gelu:bf16,...] [--before gelu:bf16]
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

from audit.repair import fit_shapes as fs
from audit.repair.emit import c as emit_c

ORT_OPS = {
    "gelu": [("Gelu", "", 20), ("Gelu", "com.microsoft", 1)],
    "silu": [("QuickGelu", "com.microsoft", 1), ("x*Sigmoid", "", 20)],
    "sigmoid": [("Sigmoid", "", 20)],
    "tanh": [("Tanh", "", 20)],
    "erf": [("Erf", "", 20)],
}


def ort_session(op: str, domain: str, opset: int):
    import onnxruntime as ort
    from onnx import TensorProto, helper

    X = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None])
    Y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])
    if op == "x*Sigmoid":
        nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])]
    else:
        kw = {"alpha": 1.0} if op == "QuickGelu" else {}
        nodes = [helper.make_node(op, ["x"], ["y"], domain=domain, **kw)]
    imports = [helper.make_opsetid("", 20)] + ([helper.make_opsetid(domain, opset)] if domain else [])
    m = helper.make_model(helper.make_graph(nodes, "g", [X], [Y]), opset_imports=imports)
    m.ir_version = 9
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])


def ort_runner(sess, x: np.ndarray, y: np.ndarray):
    b = sess.io_binding()
    b.bind_cpu_input("x", x)
    b.bind_output("y", "cpu", 0, np.float32, list(x.shape), y.ctypes.data)
    keep = (sess, x, y)  # the output buffer must outlive the binding

    def run():
        sess.run_with_iobinding(b)
        return keep

    return run


def c_runner(fn, x: np.ndarray, y: np.ndarray):
    return lambda: fn(x.ctypes.data, y.ctypes.data, x.size)


def table_kernel(ref: str, dtype: str, tmp: Path):
    """The piecewise table kernel of audit/repair/fit.py, gcc -O3 -march=x86-64-v4 (v3 without AVX-512; its own flags:
    -ffp-contract=off)."""
    from audit.repair import fit

    rep = fit.fit(ref, dtype)
    if not rep.ok:
        return None, rep.message
    k = rep.kernel
    src = tmp / f"{k.name}.c"
    src.write_text(fit.c_source(k))
    so = tmp / f"{k.name}.so"
    subprocess.run(
        [
            "gcc",
            "-O3",
            "-march=x86-64-v4" if "avx512" in fs.runnable_builds() else "-march=x86-64-v3",
            "-ffp-contract=off",
            "-shared",
            "-fPIC",
            "-o",
            str(so),
            str(src),
            "-lm",
        ],
        check=True,
    )
    fn = getattr(ctypes.CDLL(str(so)), k.name)
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    fn.restype = None
    return fn, f"{k.pieces} pieces, degree {k.degree}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument(
        "--no-search", dest="search", action="store_false", help="the default variants, no timed search"
    )
    ap.add_argument("--n", type=int, default=1 << 22)
    ap.add_argument("--targets", default=",".join(f"{r}:{d}" for r in fs.SUPPORTED for d in fs.DTYPES))
    ap.add_argument(
        "--before", default="", help="targets (ref:dtype,...) to time audit/repair/fit.py's table kernel for"
    )
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="actaudit-bench-fit-"))
    before = {tuple(t.split(":")) for t in args.before.split(",") if t}
    builds = fs.runnable_builds()  # what this CPU runs: an AVX-512 build on a CPU without it is SIGILL
    vector = [b for b in builds if b != "scalar"]
    if not vector:
        raise SystemExit("bench_fit: this CPU runs no vector build (AVX2+FMA+F16C or AVX-512)")
    wide = vector[0]
    print(f"builds this CPU runs: {', '.join(builds)}; timed: {', '.join(vector)}, u16 and the ratio: {wide}")
    rows = []
    for spec in args.targets.split(","):
        ref, dtype = spec.split(":")
        r, variants = fs.search(ref, dtype, tmp) if args.search else (fs.fit_best(ref, dtype), [])
        if not r.ok:
            print(f"{ref} {dtype}: fit failed: {r.message}")
            continue
        tg = fs.targets(ref, dtype)
        prog, prog16 = r.program, fs.native(r.program, r.shape)
        codes = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
        np16 = ml_dtypes.bfloat16 if dtype == "bf16" else np.float16
        want16 = tg.y.astype(np16).view(np.uint16)
        with np.errstate(invalid="ignore"):
            x16 = codes.view(np16).astype(np.float64)
        kern, correct = {}, True
        for build in builds:
            k = emit_c.compile_source(emit_c.source(prog, fs.header(r)), prog.name, build, tmp)
            correct &= bool(fs._same_bits(k(tg.x32).view(np.uint32), tg.y_bits).all())
            correct &= (build == "scalar") or bool(k.vectorized)
            kern[build] = k
        k16 = emit_c.compile_source(emit_c.source(prog16, fs.header(r)), prog16.name, wide, tmp)
        got16 = k16(codes)
        # every 16-bit code: the native kernel against RN_F(f(x)) (NaN codes: any NaN)
        xs_val = {int(b): i for i, b in enumerate(tg.x32.view(np.uint32)) if np.isfinite(tg.x[i])}
        fin = np.isfinite(x16)
        idx = np.array([xs_val[int(b)] for b in x16[fin].astype(np.float32).view(np.uint32)])
        correct &= bool(np.array_equal(got16[fin], want16[idx]))
        correct &= bool(np.all(np.isnan(got16[~fin & np.isnan(x16)].view(np16).astype(np.float32))))
        rng = np.random.default_rng(0)
        xr = rng.uniform(-8, 8, args.n).astype(np16)
        x = np.ascontiguousarray(xr.astype(np.float32))
        xh = np.ascontiguousarray(xr.view(np.uint16))
        runs = {}
        for build in vector:
            runs[f"fit {build}"] = c_runner(kern[build].fn, x, np.empty_like(x))
        runs["fit u16"] = c_runner(k16.fn, xh, np.empty_like(xh))
        ort_names = []
        for op, dom, opset in ORT_OPS[ref]:
            name = f"ORT {op}" + (" (ms)" if dom else "")
            runs[name] = ort_runner(ort_session(op, dom, opset), x, np.empty_like(x))
            ort_names.append(name)
        note = ""
        if (ref, dtype) in before:
            fn, note = table_kernel(ref, dtype, tmp)
            if fn is not None:
                runs["table fit"] = c_runner(fn, x, np.empty_like(x))
        times = {k: [] for k in runs}
        for f in runs.values():
            f()  # warm up (pages, ORT's first run)
        for _ in range(args.repeat):
            for k, f in runs.items():
                t = time.perf_counter()
                f()
                times[k].append(time.perf_counter() - t)
        med = {k: statistics.median(v) / args.n * 1e9 for k, v in times.items()}
        low = {k: min(v) / args.n * 1e9 for k, v in times.items()}
        best_ort = min(ort_names, key=lambda k: med[k])
        rows.append((ref, dtype, r, med, best_ort, correct, note, low))
        tried = "; ".join(
            f"a1={v['a1']} exc<={v['max_exceptions']} tie={v['tie']}: "
            + (f"{v['ops']} ops {v['ns_per_element']:.3f} ns" if v["ok"] else "no fit")
            for v in variants
        )
        print(
            f"{ref} {dtype}: {fs.describe(r)}; fit {r.seconds:.1f} s"
            + (f"; variants: {tried}" if tried else ""),
            flush=True,
        )
    print()
    print(
        f"{'target':<14}{'ops':>5}{'fit ns/el':>11}{'ORT ns/el':>11}{'ratio':>7}{'CR':>5}"
        f"{'avx2':>8}{'u16':>8}{'min ratio':>10}  ORT kernel (others)  [fit ns/el, ratio, u16: {wide}]"
    )
    for ref, dtype, r, med, best_ort, correct, note, low in rows:
        others = ", ".join(f"{k} {v:.2f}" for k, v in med.items() if k.startswith("ORT") and k != best_ort)
        if "table fit" in med:
            others += f"; before (audit/repair/fit.py table, {note}) {med['table fit']:.2f} = {med['table fit'] / med[best_ort]:.2f}x"
        print(
            f"{ref + ' ' + dtype:<14}{sum(r.program.counts().values()):>5}{med['fit ' + wide]:>11.3f}"
            f"{med[best_ort]:>11.3f}{med['fit ' + wide] / med[best_ort]:>6.2f}x{'yes' if correct else 'NO':>5}"
            f"{med['fit avx2']:>8.3f}{med['fit u16']:>8.3f}"
            f"{low['fit ' + wide] / min(low[k] for k in low if k.startswith('ORT')):>9.2f}x  {best_ort}"
            + (f" ({others})" if others else "")
        )


if __name__ == "__main__":
    main()
