"""The printer every emitter shares (:mod:`~audit.repair.emit.c`, :mod:`~audit.repair.emit.cuda`,
:mod:`~audit.repair.emit.numpy`, :mod:`~audit.repair.emit.triton`): one op of the operation list
as a C-family declaration (``const T v = e;``) or a Python-family assignment (``v = e``).

A target spells only what it writes its own way: its fp32 constants (NaN, +-infinity, the
finite values), its u32 constants, and ``spell`` (op -> function of the operand texts).  The
rest is spelled alike in all four: add, sub, mul, div as ``+ - * /``, neg as ``-a``, the
comparisons and the integer operations infix, ieq as ``==``."""

from __future__ import annotations

import math
from collections.abc import Callable

from audit.repair.emit.ir import CMP_OPS, INT_OPS, Program

INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/"}


def float_text(v: float, nan: str, inf: str, ninf: str, finite: Callable[[float], str]) -> str:
    """An fp32 constant: the target's NaN, +infinity and -infinity, else ``finite(v)``."""
    if math.isnan(v):
        return nan
    if math.isinf(v):
        return inf if v > 0 else ninf
    return finite(float(v))


def operand_text(a, u32: Callable[[int], str], f32: Callable[[float], str]) -> str:
    """An operand: a value's name as it is, an int (a u32 constant) as ``u32(a)``, a float (an
    fp32 constant) as ``f32(a)``."""
    if isinstance(a, str):
        return a
    if isinstance(a, int):
        return u32(a)
    return f32(a)


def expression(o, operand: Callable, spell: dict) -> str:
    """The expression of op ``o``: ``spell[o.op]`` of the operand texts where the target
    spells it, else the spelling all targets share."""
    a = [operand(v) for v in o.args]
    op = o.op
    if op in spell:
        return spell[op](*a)
    if op in INFIX:
        return f"{a[0]} {INFIX[op]} {a[1]}"
    if op == "neg":
        return f"-{a[0]}"
    if op in CMP_OPS:
        return f"{a[0]} {CMP_OPS[op]} {a[1]}"
    if op == "ieq":
        return f"{a[0]} == {a[1]}"
    if op in INT_OPS:
        return f"{a[0]} {INT_OPS[op]} {a[1]}"
    raise ValueError(op)


# ------------------------------------------------------------------ the C family (C, CUDA)
def c_finite(v: float) -> str:
    """A finite fp32 constant in C: a hex float with the f suffix (-0 keeps its sign)."""
    if v == 0:
        return "-0.0f" if math.copysign(1, v) < 0 else "0.0f"
    return v.hex() + "f"


def c_uint(a: int) -> str:
    """A u32 constant in C."""
    return f"0x{a:x}u"


# |x| and select are spelled alike in C and CUDA
C_FAMILY = {
    "abs": lambda a: f"fabsf({a})",
    "select": lambda m, a, b: f"{m} ? {a} : {b}",
}


def c_statement(o, ty: dict, operand: Callable, ctype: dict, spell: dict) -> str:
    """One op as a C-family statement: ``const T v = e;`` (T: ``ctype`` of the value's type)."""
    return f"const {ctype[ty[o.dest]]} {o.dest} = {expression(o, operand, spell)};"


def c_io(prog: Program, ctype: dict, u16: str) -> tuple[str, str, str, str]:
    """(input element type, output element type, the load of x, the store of the result) of a
    C-family kernel's loop body: 16-bit codes travel as ``u16``, widened to the u32 type on
    load and cast back on store."""
    io = u16 if prog.in_type == "u16" else "float"
    oo = u16 if prog.out_type == "u16" else "float"
    load = f"const {ctype['u'] if prog.in_type == 'u16' else ctype['f']} x = xs[j];"
    store = f"ys[j] = ({u16}){prog.out};" if prog.out_type == "u16" else f"ys[j] = {prog.out};"
    return io, oo, load, store


# ------------------------------------------------------------------ the Python family (numpy, Triton)
def py_statement(o, operand: Callable, spell: dict) -> str:
    """One op as a Python-family statement: ``v = e``."""
    return f"{o.dest} = {expression(o, operand, spell)}"
