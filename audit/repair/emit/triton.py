"""Triton emission of an operation list: one statement per op, in order; fma as tl.fma,
division as tl.math.div_rn (IEEE), bit casts with .to(..., bitcast=True).  Launch with
enable_fp_fusion=False (Triton contracts a*b + c into fma by default)."""

from __future__ import annotations

from audit.repair.emit.cuda import NO_GPU
from audit.repair.emit.ir import Program
from audit.repair.emit.printer import float_text, operand_text, py_statement


def f_const(v: float) -> str:
    # finite: an fp32 value, whose shortest float64 repr reads back exactly
    return float_text(v, 'float("nan")', 'float("inf")', 'float("-inf")', repr)


def operand(a) -> str:
    return operand_text(a, lambda u: f"tl.full((), 0x{u:x}, tl.uint32)", f_const)


SPELL = {
    "div": lambda a, b: f"tl.math.div_rn({a}, {b})",
    "fma": lambda a, b, c: f"tl.fma({a}, {b}, {c})",
    "abs": lambda a: f"tl.abs({a})",
    "select": lambda m, a, b: f"tl.where({m}, {a}, {b})",
    "bits": lambda a: f"{a}.to(tl.uint32, bitcast=True)",
    "float": lambda a: f"{a}.to(tl.float32, bitcast=True)",
}


def statement(o) -> str:
    return py_statement(o, operand, SPELL)


def source(prog: Program, header: str = "") -> str:
    load = (
        "x = tl.load(x_ptr + offs, mask=mask, other=0).to(tl.uint32)"
        if prog.in_type == "u16"
        else "x = tl.load(x_ptr + offs, mask=mask, other=0.0)"
    )
    out = f"{prog.out}.to(tl.uint16)" if prog.out_type == "u16" else prog.out
    text = (
        header.strip() + "\n" + NO_GPU + "\nLaunch with enable_fp_fusion=False (no contraction of a*b + c)."
    )
    lines = [
        '"""' + text.replace('"""', "'''"),
        '"""',
        "",
        "import triton",
        "import triton.language as tl",
        "",
        "",
        "@triton.jit",
        f"def {prog.name}(x_ptr, y_ptr, n, BLOCK: tl.constexpr):",
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)",
        "    mask = offs < n",
        "    " + load,
        *["    " + statement(o) for o in prog.ops],
        f"    tl.store(y_ptr + offs, {out}, mask=mask)",
        "",
    ]
    return "\n".join(lines)
