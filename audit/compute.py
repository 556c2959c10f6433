"""Evaluation paths: running a candidate's formula in a compute format.

A candidate is written once as a formula over :class:`Val` values and the
primitives of :class:`Ops`.  In compute format C every operation's result and
every constant is rounded to C, as a kernel working in C would do:

* ``+ - * /`` and ``sqrt`` are evaluated in float64 and rounded once to C.
  Since float64 has at least 2p+2 bits for every C of p <= 24 bits, this equals
  the correctly rounded operation in C (no double-rounding error).  fp32 and fp64
  compute natively in numpy's float32 / float64, whose arithmetic is IEEE.
* Transcendental primitives (exp, tanh, erf, ...) are evaluated in float64
  (numpy / scipy, never numpy's float16 loops, whose results depend on the
  CPU) and rounded to C: the model of a well-implemented library function in C.
  Approximations of these primitives are written out explicitly as candidates.

Inputs arrive in the storage format and are rounded to C (exact when C is at
least as wide); the result is rounded back to the storage format.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import numpy as np
import scipy.special as sc

from .formats import Format


@dataclass
class TraceEntry:
    op: str
    file: str
    line: int
    ins: tuple  # input arrays (float64 values of the compute format)
    out: np.ndarray  # the rounded result
    exact: np.ndarray  # the result before rounding (the constant as written, for "const")


def _formula_line() -> tuple[str, int]:
    """File and line of the innermost frame of the catalog (or a user's formula)."""
    f = sys._getframe(2)
    here = __file__
    while f is not None and f.f_code.co_filename == here:
        f = f.f_back
    if f is None:
        return "?", 0
    name = f.f_code.co_filename
    short = os.path.join(*name.split(os.sep)[-2:]) if os.sep in name else name
    return short, f.f_lineno


class Val:
    """An array of values of the compute format; arithmetic rounds to it."""

    __slots__ = ("a", "ops")
    __array_priority__ = 1000  # numpy scalars defer to Val's operators

    def __init__(self, a, ops: "Ops"):
        self.a = a
        self.ops = ops

    # arithmetic ----------------------------------------------------------
    def _bin(self, other, fn, name, swap=False):
        o = self.ops.lift(other)
        l, r = (o, self) if swap else (self, o)
        return self.ops.op(name, fn(l.a, r.a), (l.a, r.a))

    def __add__(self, o): return self._bin(o, np.add, "+")
    def __radd__(self, o): return self._bin(o, np.add, "+", True)
    def __sub__(self, o): return self._bin(o, np.subtract, "-")
    def __rsub__(self, o): return self._bin(o, np.subtract, "-", True)
    def __mul__(self, o): return self._bin(o, np.multiply, "*")
    def __rmul__(self, o): return self._bin(o, np.multiply, "*", True)
    def __truediv__(self, o): return self._bin(o, np.divide, "/")
    def __rtruediv__(self, o): return self._bin(o, np.divide, "/", True)
    def __neg__(self): return Val(-self.a, self.ops)  # exact
    def __abs__(self): return Val(np.abs(self.a), self.ops)  # exact

    def __pow__(self, n):
        """Integer powers by repeated multiplication, each product rounded: x**3 = (x*x)*x."""
        if not isinstance(n, int) or n < 1:
            raise ValueError("only positive integer powers are supported")
        out = self
        for _ in range(n - 1):
            out = out * self
        return out

    # comparisons give plain boolean masks ---------------------------------
    def __lt__(self, o): return self.a < self.ops.lift(o).a
    def __le__(self, o): return self.a <= self.ops.lift(o).a
    def __gt__(self, o): return self.a > self.ops.lift(o).a
    def __ge__(self, o): return self.a >= self.ops.lift(o).a


class Ops:
    """The primitives available to a formula, in compute format ``fmt``.

    With ``trace`` a list, every rounded operation appends a :class:`TraceEntry`
    (operation, source file and line of the formula, inputs, output): the raw
    material of root causes, hidden overflows and lossy constants.  With ``watch``,
    only constants and operations with a non-finite output are recorded: what the
    hidden-overflow scan needs, at the cost of one finiteness check per operation.
    """

    def __init__(self, fmt: Format, trace: list | None = None, watch: bool = False):
        self.fmt = fmt
        self.trace = trace
        self.watch = watch
        # fp32 and fp64 compute natively: numpy's float32/float64 + - * / are IEEE operations,
        # correctly rounded, so values stay in the format's own dtype (no rounding passes)
        self.native = {"fp32": np.float32, "fp64": np.float64}.get(fmt.name)
        self.storage: Format | None = None  # the storage format of the evaluation (store())

    # values --------------------------------------------------------------
    def op(self, name: str, a, ins=()) -> Val:
        """Round a result to the compute format (one place for every op)."""
        if self.native is not None:
            out = a if getattr(a, "dtype", None) == self.native else np.asarray(a).astype(self.native)
        else:
            out = self.fmt.round(a)
        if self.trace is not None and not (self.watch and name != "const" and np.isfinite(out).all()):
            self.trace.append(TraceEntry(name, *_formula_line(), tuple(ins), out, np.asarray(a)))
        return Val(out, self)

    def const(self, c: float) -> Val:
        """A constant, rounded to the compute format as a kernel would store it."""
        return self.op("const", np.float64(c))

    def lift(self, v) -> Val:
        if isinstance(v, Val):
            return v
        return self.const(v)

    # elementary functions --------------------------------------------------
    def _f(self, name, fn, *args):
        ins = tuple(self.lift(a).a for a in args)
        # primitives in float64 (never numpy's low-precision loops), then rounded
        return self.op(name, fn(*(np.asarray(i, dtype=np.float64) for i in ins)), ins)

    def exp(self, x): return self._f("exp", np.exp, x)
    def expm1(self, x): return self._f("expm1", np.expm1, x)
    def log(self, x): return self._f("log", np.log, x)
    def log1p(self, x): return self._f("log1p", np.log1p, x)
    def tanh(self, x): return self._f("tanh", np.tanh, x)
    def erf(self, x): return self._f("erf", sc.erf, x)
    def erfc(self, x): return self._f("erfc", sc.erfc, x)
    def sqrt(self, x): return self._f("sqrt", np.sqrt, x)
    def abs(self, x): return Val(np.abs(self.lift(x).a), self)
    def maximum(self, a, b): return self._f("max", np.maximum, a, b)
    def minimum(self, a, b): return self._f("min", np.minimum, a, b)
    def clip(self, x, lo, hi): return self.minimum(self.maximum(x, lo), hi)
    def fma(self, a, b, c): return self._f("fma", lambda p, q, r: p * q + r, a, b, c)

    def store(self, v) -> Val:
        """v as a tensor saved in the storage format and loaded again: rounded to storage,
        then to the compute format (the saved output y of a forward, read by a backward
        kernel; a fused kernel's intermediate written out and read back)."""
        a = np.asarray(self.lift(v).a, dtype=np.float64)
        return self.op("store", (self.storage or self.fmt).round(a), (a,))

    def where(self, cond, a, b) -> Val:
        out = np.where(cond, self.lift(a).a, self.lift(b).a)
        return Val(out.astype(self.native) if self.native else out, self)

    def floor(self, x) -> Val:
        return Val(np.floor(self.lift(x).a), self)  # exact, dtype kept

    def ldexp(self, x, n) -> Val:
        """x * 2**n for integer-valued n (the exponent-field trick), rounded on over/underflow."""
        return self.op("ldexp", np.ldexp(self.lift(x).a, self.lift(n).a.astype(np.int64)))

    def int32_bits_as_float32(self, t) -> Val:
        """Truncate t to int32 and reinterpret its bits as a float32, as bit-trick kernels do.

        Values out of int32 range give 0x80000000 (x86's 'integer indefinite'), i.e. -0.0.
        """
        a = self.lift(t).a
        ok = np.isfinite(a) & (np.abs(a) < 2.0**31)
        i = np.where(ok, np.trunc(np.where(ok, a, 0.0)), -(2.0**31)).astype(np.int64)
        bits = (i & 0xFFFFFFFF).astype(np.uint32)
        return self.op("bits", bits.view(np.float32).astype(np.float64), (a,))


def evaluate(fn, x: np.ndarray, storage: Format, compute: Format, params: dict,
             x2: np.ndarray | None = None, trace: list | None = None,
             watch: bool = False) -> np.ndarray:
    """Run formula ``fn(x, ops, **params)`` (or ``fn(x, x2, ops, **params)``) on storage
    values; return storage values.  ``trace``: a list to record every operation in
    (``watch``: only constants and operations with non-finite outputs)."""
    ops = Ops(compute, trace, watch)
    ops.storage = storage
    with np.errstate(all="ignore"):
        cast = (lambda v: compute.round(v).astype(ops.native)) if ops.native else compute.round
        args = [Val(cast(x), ops)]
        if x2 is not None:
            args.append(Val(cast(x2), ops))
        y = fn(*args, ops, **params)
        y = y.a if isinstance(y, Val) else np.asarray(y)
        out = storage.round(np.broadcast_to(y, x.shape).astype(np.float64))
        if trace is not None and storage != compute and not (watch and np.isfinite(out).all()):
            trace.append(TraceEntry(f"rounding to {storage.name}", "(storage)", 0, (y,), out, y))
        return out
