"""numpy emission of an operation list: a self-contained module (numpy only) computing the
same fp32 operations in the same order; its fma is exact (float64 product and TwoSum,
rounded to odd, then to fp32: one rounding)."""

from __future__ import annotations

import math

from audit.repair.emit.ir import CMP_OPS, INT_OPS, Program

PRELUDE = '''import numpy as np

F = np.float32
U = np.uint32


def _fma(a, b, c):
    """RN_fp32(a*b + c), one rounding: the float64 product is exact, TwoSum gives the
    float64 sum's error, rounding the sum to odd keeps it (Boldo-Melquiond)."""
    a, b, c = (np.asarray(v, dtype=np.float64) for v in np.broadcast_arrays(a, b, c))
    p = a * b
    s = p + c
    bb = s - p
    e = np.where(np.isfinite(s), (p - (s - bb)) + (c - bb), 0.0)
    bump = (e != 0) & ((s.view(np.int64) & 1) == 0)
    s = np.where(bump, np.nextafter(s, np.copysign(np.inf, e)), s)
    return s.astype(np.float32)
'''


def f_const(v: float) -> str:
    if math.isnan(v):
        return "F(np.nan)"
    if math.isinf(v):
        return "F(np.inf)" if v > 0 else "F(-np.inf)"
    if v == 0:
        return "F(-0.0)" if math.copysign(1, v) < 0 else "F(0.0)"
    return f"F(float.fromhex('{float(v).hex()}'))"


def operand(a) -> str:
    if isinstance(a, str):
        return a
    if isinstance(a, int):
        return f"U(0x{a:x})"
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
        e = f"{a[0]} / {a[1]}"
    elif op == "fma":
        e = f"_fma({a[0]}, {a[1]}, {a[2]})"
    elif op == "neg":
        e = f"-{a[0]}"
    elif op == "abs":
        e = f"np.abs({a[0]})"
    elif op in CMP_OPS:
        e = f"{a[0]} {CMP_OPS[op]} {a[1]}"
    elif op == "ieq":
        e = f"{a[0]} == {a[1]}"
    elif op == "select":
        e = f"np.where({a[0]}, {a[1]}, {a[2]})"
    elif op == "bits":
        e = f"np.asarray({a[0]}, dtype=F).view(U)"
    elif op == "float":
        e = f"np.asarray({a[0]}, dtype=U).view(F)"
    elif op in INT_OPS:
        e = f"{a[0]} {INT_OPS[op]} {a[1]}"
    else:
        raise ValueError(op)
    return f"{o.dest} = {e}"


def source(prog: Program, header: str = "") -> str:
    dt = "np.uint16" if prog.in_type == "u16" else "F"
    load = (
        "x = np.asarray(xs, dtype=np.uint16).astype(U)"
        if prog.in_type == "u16"
        else "x = np.asarray(xs, dtype=F)"
    )
    out = (
        f"np.asarray({prog.out}, dtype=U).astype(np.uint16)"
        if prog.out_type == "u16"
        else f"np.asarray({prog.out}, dtype=F)"
    )
    lines = [
        '"""' + header.strip().replace('"""', "'''"),
        f"Call {prog.name}(xs) with a {dt} array; returns the results (same shape).",
        '"""',
        "",
        PRELUDE,
        "",
        f"def {prog.name}(xs):",
        "    " + load,
        "    with np.errstate(all='ignore'):",
        *["        " + statement(o) for o in prog.ops],
        f"    return {out}",
        "",
    ]
    return "\n".join(lines)
