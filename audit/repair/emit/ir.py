"""One operation list for a fitted kernel: the single source every emitter (C, CUDA,
Triton, numpy) prints and the exact emulator evaluates.

A :class:`Program` is a straight-line list of :class:`Op` (no branches, no loops, no
table lookups): fp32 arithmetic (``add sub mul div fma neg abs``), comparisons
(``lt le gt ge eq ne``, giving a mask), ``select(mask, a, b)``, bit casts (``bits``:
f32 -> u32, ``float``: u32 -> f32) and 32-bit unsigned integer operations (``and or
shl shr iadd``; ``ieq`` compares).  Operands are names of earlier values or constants
(a Python float for fp32 operands, exactly representable; an int for u32 operands).
Every operation rounds as IEEE 754 binary32 round-to-nearest-even (``fma`` once), so the
emulator below is the specification: a target computes the same bits iff it performs
these operations in this order without contraction or fast-math.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

FLOAT_OPS = {"add": 2, "sub": 2, "mul": 2, "div": 2, "fma": 3, "neg": 1, "abs": 1}
CMP_OPS = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
INT_OPS = {"and": "&", "or": "|", "shl": "<<", "shr": ">>", "iadd": "+"}
OTHER_OPS = {"bits": 1, "float": 1, "select": 3, "ieq": 2}
ALL_OPS = set(FLOAT_OPS) | set(CMP_OPS) | set(INT_OPS) | set(OTHER_OPS)


@dataclass(frozen=True)
class Op:
    dest: str
    op: str
    args: tuple  # value names (str) or constants (float: fp32 operand, int: u32 operand)


@dataclass
class Program:
    """A kernel: input ``x`` (fp32, or u32 holding a 16-bit code when ``in_type`` is
    bf16/fp16 bits), ops, the output value's name and its type."""

    name: str
    ops: list = field(default_factory=list)
    out: str = ""
    in_type: str = "f32"  # "f32" or "u16" (the 16-bit code, zero-extended)
    out_type: str = "f32"  # "f32" or "u16"
    comment: str = ""
    polys: dict = field(default_factory=dict)  # fitted polynomial -> names of its coefficient slots
    # (start, end): ops[start:end] round one fp32 value to fp16 (nearest, ties to even; NaN
    # stays NaN) and nothing else: a C build with F16C computes that span by VCVTPS2PH and
    # VCVTPH2PS instead (emit/c.py); every other emitter, and the emulator, runs the ops
    round16: tuple | None = None
    # the 16-bit in/out variant (fp16): ops[load16[0]:load16[1]] turn the code x into its fp32
    # value and ops[store16[0]:store16[1]] (the last ops) an fp16 value into its code; a C
    # build with F16C computes those by VCVTPH2PS and VCVTPS2PH
    load16: tuple | None = None
    store16: tuple | None = None

    def types(self) -> dict:
        """The type of every value: 'f' (fp32), 'u' (u32), 'm' (mask)."""
        ty = {"x": "u" if self.in_type == "u16" else "f"}
        for o in self.ops:
            if o.op in FLOAT_OPS or o.op == "float":
                t = "f"
            elif o.op in CMP_OPS or o.op == "ieq":
                t = "m"
            elif o.op in INT_OPS or o.op == "bits":
                t = "u"
            elif o.op == "select":
                a = o.args[1]
                t = ty[a] if isinstance(a, str) else ("u" if isinstance(a, int) else "f")
            else:
                raise ValueError(f"unknown op {o.op}")
            ty[o.dest] = t
        return ty

    def counts(self) -> dict:
        """Operations per element by kind (bit casts are free: no instruction)."""
        kinds: dict[str, int] = {}
        for o in self.ops:
            if o.op in ("bits", "float"):
                continue
            k = (
                "fma"
                if o.op == "fma"
                else "div"
                if o.op == "div"
                else "mul"
                if o.op == "mul"
                else "add"
                if o.op in ("add", "sub")
                else "compare"
                if o.op in CMP_OPS or o.op == "ieq"
                else "select"
                if o.op == "select"
                else "int"
                if o.op in INT_OPS
                else "sign"
            )
            kinds[k] = kinds.get(k, 0) + 1
        return dict(sorted(kinds.items()))


class Builder:
    """Appends ops with fresh names; methods return the new value's name."""

    def __init__(self, prog: Program):
        self.p = prog
        self.n = 0

    def _op(self, op: str, *args, name: str | None = None) -> str:
        if name is None:
            name = f"v{self.n}"
            self.n += 1
        for a in args:
            if isinstance(a, float) and not np.isnan(a) and float(np.float32(a)) != a:
                raise ValueError(f"constant {a!r} is not an fp32 value")
        self.p.ops.append(Op(name, op, tuple(args)))
        return name

    def __getattr__(self, op: str):
        if op in ALL_OPS:
            return lambda *a, name=None: self._op(op, *a, name=name)
        raise AttributeError(op)

    def horner(self, t: str, coefs: list, tag: str) -> str:
        """c_d t^d + ... + c_0 by Horner with fma (degree >= 1): fma(c_d, t, c_{d-1}), then
        fma(p, t, c_j); the ops are named tag_{d-1}, ..., tag_1 and tag (the value)."""
        d = len(coefs) - 1
        if d < 1:
            raise ValueError("degree >= 1")
        p: str | float = float(coefs[d])
        for j in range(d - 1, -1, -1):
            p = self._op("fma", p, t, float(coefs[j]), name=f"{tag}_{j}" if j else tag)
        self.p.polys[tag] = {"t": t, "degree": d}
        assert isinstance(p, str)  # degree >= 1: at least one fma
        return p


def _slot(tag: str, j: int) -> str:
    return f"{tag}_{j}" if j else tag


def coefficients(prog: Program, tag: str) -> list:
    """c_0..c_d of polynomial ``tag``, read from its ops."""
    d = prog.polys[tag]["degree"]
    ops = {o.dest: o for o in prog.ops}
    c = [ops[_slot(tag, j)].args[2] for j in range(d)]
    return c + [ops[_slot(tag, d - 1)].args[0]]


def set_coefficients(prog: Program, tag: str, coefs: list) -> None:
    """Write coefficients c_0..c_d (rounded to fp32) into the ops of polynomial ``tag``."""
    d = prog.polys[tag]["degree"]
    if len(coefs) != d + 1:
        raise ValueError("wrong number of coefficients")
    c = [float(np.float32(v)) for v in coefs]
    for i, o in enumerate(prog.ops):
        for j in range(d):
            if o.dest == _slot(tag, j):
                first = c[d] if j == d - 1 else o.args[0]
                prog.ops[i] = Op(o.dest, o.op, (first, o.args[1], c[j]))


# ------------------------------------------------------------------ the emulator
def _u(v):
    return v if isinstance(v, np.ndarray) and v.dtype == np.uint32 else np.uint32(v)


def evaluate(prog: Program, x: np.ndarray, overrides: dict | None = None, env: dict | None = None) -> dict:
    """Every value of the program at inputs x, computed exactly as binary32 (fma with one
    rounding, by :func:`audit.targets.compute.fused_multiply_add`).  ``overrides``: values to use
    in place of the named ops' results (the fit's interval search); ``env``: values already
    computed (only ops not in it, or depending on an override, are recomputed)."""
    from audit.numbers.formats import get_format
    from audit.targets.compute import fused_multiply_add

    f32 = get_format("fp32")
    overrides = overrides or {}
    if env is None:
        env = {"x": np.asarray(x, dtype=np.uint32 if prog.in_type == "u16" else np.float32)}
        todo = prog.ops
    else:
        env = dict(env)
        dirty = set(overrides)
        todo = []
        for o in prog.ops:
            if o.dest in dirty or any(isinstance(a, str) and a in dirty for a in o.args):
                dirty.add(o.dest)
                todo.append(o)
    n = len(env["x"])

    def val(a):
        if isinstance(a, str):
            return env[a]
        if isinstance(a, bool):
            raise TypeError("bool operand")
        if isinstance(a, int):
            return np.full(n, a, dtype=np.uint32)
        return np.full(n, a, dtype=np.float32)

    with np.errstate(all="ignore"):
        for o in todo:
            if o.dest in overrides:
                env[o.dest] = np.asarray(overrides[o.dest], dtype=np.float32)
                continue
            a = [val(v) for v in o.args]
            op = o.op
            if op == "add":
                r = a[0] + a[1]
            elif op == "sub":
                r = a[0] - a[1]
            elif op == "mul":
                r = a[0] * a[1]
            elif op == "div":
                r = a[0] / a[1]
            elif op == "fma":
                r = fused_multiply_add(f32, a[0], a[1], a[2]).astype(np.float32)
            elif op == "neg":
                r = -a[0]
            elif op == "abs":
                r = np.abs(a[0])
            elif op in CMP_OPS:
                r = {
                    "lt": np.less,
                    "le": np.less_equal,
                    "gt": np.greater,
                    "ge": np.greater_equal,
                    "eq": np.equal,
                    "ne": np.not_equal,
                }[op](a[0], a[1])
            elif op == "ieq":
                r = a[0] == a[1]
            elif op == "select":
                r = np.where(a[0], a[1], a[2])
            elif op == "bits":
                r = a[0].astype(np.float32).view(np.uint32)
            elif op == "float":
                r = a[0].astype(np.uint32).view(np.float32)
            elif op == "and":
                r = a[0] & a[1]
            elif op == "or":
                r = a[0] | a[1]
            elif op == "shl":
                r = (a[0] << a[1]).astype(np.uint32)
            elif op == "shr":
                r = a[0] >> a[1]
            elif op == "iadd":
                r = (a[0].astype(np.uint64) + a[1].astype(np.uint64)).astype(np.uint32)
            else:
                raise ValueError(f"unknown op {op}")
            env[o.dest] = r
    return env


def run(prog: Program, x: np.ndarray) -> np.ndarray:
    """The program's output at x (fp32 values, or u16 codes)."""
    y = evaluate(prog, x)[prog.out]
    return y.astype(np.uint16) if prog.out_type == "u16" else y.astype(np.float32)
