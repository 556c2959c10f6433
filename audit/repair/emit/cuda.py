"""CUDA emission of an operation list: one statement per op, in order, every fp32 operation
an explicitly rounded intrinsic (__fadd_rn, __fmul_rn, __fdiv_rn, __fmaf_rn ...), so nvcc
neither contracts (whatever -fmad) nor approximates (whatever -prec-div); never build with
--use_fast_math or -ftz=true."""

from __future__ import annotations

from audit.repair.emit.ir import Program
from audit.repair.emit.printer import C_FAMILY, c_finite, c_io, c_statement, c_uint, float_text, operand_text

NO_GPU = (
    "No GPU on the machine that generated this file: it was not compiled or run there.  Its ops are\n"
    "the operation list the C kernel and the emulator were verified with; run\n"
    "benchmarks/gpu_fit_dump.py on a GPU to check it at every input (actaudit sweep dump:...)."
)
FLAGS = ["-O3", "-ftz=false", "-prec-div=true", "-fmad=false"]


def c_float(v: float) -> str:
    return float_text(
        v, "__int_as_float(0x7fc00000)", "__int_as_float(0x7f800000)", "__int_as_float(0xff800000)", c_finite
    )


def operand(a) -> str:
    return operand_text(a, c_uint, c_float)


CTYPE = {"f": "float", "u": "unsigned int", "m": "bool"}
RN = {"add": "__fadd_rn", "sub": "__fsub_rn", "mul": "__fmul_rn", "div": "__fdiv_rn", "fma": "__fmaf_rn"}


def _call(name: str):
    return lambda *a: f"{name}({', '.join(a)})"


SPELL = {
    **C_FAMILY,
    **{op: _call(name) for op, name in RN.items()},
    "bits": lambda a: f"__float_as_uint({a})",
    "float": lambda a: f"__uint_as_float({a})",
}


def statement(o, ty: dict) -> str:
    return c_statement(o, ty, operand, CTYPE, SPELL)


def source(prog: Program, header: str = "") -> str:
    ty = prog.types()
    io, oo, load, store = c_io(prog, CTYPE, "unsigned short")
    text = (header.strip() + "\n" + NO_GPU).replace("*/", "* /")
    lines = [
        "/* " + text.replace("\n", "\n   "),
        "   Build: nvcc "
        + " ".join(FLAGS)
        + " (the intrinsics make the flags moot; never --use_fast_math). */",
        "",
        f'extern "C" __global__ void {prog.name}(const {io} *__restrict__ xs, {oo} *__restrict__ ys, '
        "unsigned long long n) {",
        "    const unsigned long long j = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;",
        "    if (j >= n) return;",
        "    " + load,
        *["    " + statement(o, ty) for o in prog.ops],
        "    " + store,
        "}",
        "",
    ]
    return "\n".join(lines)
