"""Run an emitted fitted kernel (Triton, or CUDA through CuPy) on a GPU at every input of its
format and write a dump for the audit workflow:

    python benchmarks/gpu_fit_dump.py sigmoid bf16 --target triton --out sigmoid_bf16_gpu.npz
    actaudit sweep --dump sigmoid_bf16_gpu.npz --reference sigmoid --dtype bf16

(needs a CUDA GPU and triton, or cupy for --target cuda; not run in CI).  The kernel is
fitted here (audit/repair/fit_shapes.py), emitted from its operation list (audit/repair/emit/), compiled
for the GPU without contraction or fast math (Triton: enable_fp_fusion=False; CUDA: explicit
__f*_rn intrinsics), and run on every value of the format (every finite value, +-inf, NaN).
The script also compares the device's bits with the C kernel's emulator and prints how many
differ (0 expected: the same operations in the same order).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
from pathlib import Path

import numpy as np

from audit.repair import fit_shapes as fs
from audit.repair.emit import emit, ir


def run_triton(prog: ir.Program, x: np.ndarray, tmp: Path) -> np.ndarray:
    import torch

    src = tmp / f"{prog.name}_triton.py"
    src.write_text(emit(prog, "triton", ""))
    spec = importlib.util.spec_from_file_location(prog.name + "_triton", src)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    kern = getattr(mod, prog.name)
    xd = torch.from_numpy(x).cuda()
    yd = torch.empty_like(xd)
    block = 1024
    grid = ((x.size + block - 1) // block,)
    kern[grid](xd, yd, x.size, BLOCK=block, enable_fp_fusion=False)
    torch.cuda.synchronize()
    return yd.cpu().numpy()


def run_cuda(prog: ir.Program, x: np.ndarray) -> np.ndarray:
    import cupy as cp

    k = cp.RawKernel(
        emit(prog, "cuda", ""), prog.name, options=("-ftz=false", "-prec-div=true", "-fmad=false")
    )
    xd = cp.asarray(x)
    yd = cp.empty_like(xd)
    block = 256
    k(((x.size + block - 1) // block,), (block,), (xd, yd, np.uint64(x.size)))
    return cp.asnumpy(yd)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("reference", choices=fs.SUPPORTED)
    ap.add_argument("dtype", choices=fs.DTYPES)
    ap.add_argument("--target", choices=("triton", "cuda"), default="triton")
    ap.add_argument("--out", required=True, help="the dump (.npz with x and y)")
    args = ap.parse_args()
    fit = fs.fit_vector(args.reference, args.dtype)
    if not fit.ok:
        print(f"fit failed: {fit.message}", file=sys.stderr)
        return 2
    tg = fs.targets(args.reference, args.dtype)
    x = np.ascontiguousarray(tg.x32)
    with tempfile.TemporaryDirectory() as tmp:
        y = run_triton(fit.program, x, Path(tmp)) if args.target == "triton" else run_cuda(fit.program, x)
    emu = ir.run(fit.program, x)
    differ = int(np.sum(~fs._same_bits(y.view(np.uint32), emu.view(np.uint32))))
    wrong = int(np.sum(~fs._same_bits(y.view(np.uint32), tg.y_bits)))
    np.savez(args.out, x=tg.x, y=y.astype(np.float64))
    print(
        f"{fit.program.name} on the GPU ({args.target}): {len(x)} inputs, {differ} differ from the "
        f"emulated operation list, {wrong} not RN_{args.dtype}(f(x)); wrote {args.out}\n"
        f"audit it: actaudit sweep --dump {args.out} --reference {args.reference} --dtype {args.dtype}"
    )
    return 0 if differ == 0 and wrong == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
