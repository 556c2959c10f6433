"""Triton emission of an operation list: one statement per op, in order; fma as tl.fma,
division as tl.math.div_rn (IEEE), bit casts with .to(..., bitcast=True).  Launch with
enable_fp_fusion=False (Triton contracts a*b + c into fma by default)."""

from __future__ import annotations

import math

from audit.repair.emit.cuda import NO_GPU
from audit.repair.emit.ir import CMP_OPS, INT_OPS, Program


def f_const(v: float) -> str:
    if math.isnan(v):
        return 'float("nan")'
    if math.isinf(v):
        return 'float("inf")' if v > 0 else 'float("-inf")'
    return repr(float(v))  # an fp32 value: its shortest float64 repr reads back exactly


def operand(a) -> str:
    if isinstance(a, str):
        return a
    if isinstance(a, int):
        return f"tl.full((), 0x{a:x}, tl.uint32)"
    return f_const(a)


def statement(o) -> str:
    a = [operand(v) for v in o.args]
    op = o.op
    if op == "add":
        e = f"{a[0]} + {a[1]}"
    elif op == "sub":
        e = f"{a[0]} - {a[1]}"
    elif op == "mul":
        e = f"{a[0]} * {a[1]}"
    elif op == "div":
        e = f"tl.math.div_rn({a[0]}, {a[1]})"
    elif op == "fma":
        e = f"tl.fma({a[0]}, {a[1]}, {a[2]})"
    elif op == "neg":
        e = f"-{a[0]}"
    elif op == "abs":
        e = f"tl.abs({a[0]})"
    elif op in CMP_OPS:
        e = f"{a[0]} {CMP_OPS[op]} {a[1]}"
    elif op == "ieq":
        e = f"{a[0]} == {a[1]}"
    elif op == "select":
        e = f"tl.where({a[0]}, {a[1]}, {a[2]})"
    elif op == "bits":
        e = f"{a[0]}.to(tl.uint32, bitcast=True)"
    elif op == "float":
        e = f"{a[0]}.to(tl.float32, bitcast=True)"
    elif op in INT_OPS:
        e = f"{a[0]} {INT_OPS[op]} {a[1]}"
    else:
        raise ValueError(op)
    return f"{o.dest} = {e}"


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
