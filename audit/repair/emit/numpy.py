"""numpy emission of an operation list: a self-contained module (numpy only) computing the
same fp32 operations in the same order; its fma is exact (float64 product and TwoSum,
rounded to odd, then to fp32: one rounding)."""

from __future__ import annotations

import math

from audit.repair.emit.ir import Program
from audit.repair.emit.printer import float_text, operand_text, py_statement

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


def _finite(v: float) -> str:
    if v == 0:
        return "F(-0.0)" if math.copysign(1, v) < 0 else "F(0.0)"
    return f"F(float.fromhex('{v.hex()}'))"


def f_const(v: float) -> str:
    return float_text(v, "F(np.nan)", "F(np.inf)", "F(-np.inf)", _finite)


def operand(a) -> str:
    return operand_text(a, lambda u: f"U(0x{u:x})", f_const)


SPELL = {
    "fma": lambda a, b, c: f"_fma({a}, {b}, {c})",
    "abs": lambda a: f"np.abs({a})",
    "select": lambda m, a, b: f"np.where({m}, {a}, {b})",
    "bits": lambda a: f"np.asarray({a}, dtype=F).view(U)",
    "float": lambda a: f"np.asarray({a}, dtype=U).view(F)",
}


def statement(o) -> str:
    return py_statement(o, operand, SPELL)


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
