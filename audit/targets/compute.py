"""Evaluation paths: running a candidate's formula in a compute format.

A candidate is written once as a formula over :class:`Val` values and the
primitives of :class:`Ops`.  In compute format C every operation's result and
every constant is rounded to C, as a kernel working in C would do:

* ``+ - * /`` and ``sqrt`` are evaluated in float64 and rounded once to C.
  Since float64 has at least 2p+2 bits for every C of p <= 24 bits, this equals
  the correctly rounded operation in C (no double-rounding error).  fp32 and fp64
  compute natively in numpy's float32 / float64, whose arithmetic is IEEE.
* ``fma(a, b, c)`` is one rounding of the exact a*b + c (see :func:`fused_multiply_add`):
  the product is exact in float64 for every format of p <= 26 bits, the sum is carried
  exactly as a double-double (TwoSum), rounded to odd at 53 bits (53 >= p + 2, so a later
  round-to-nearest into C is the correct rounding of the exact value), then rounded once
  into C.  In fp64 it is gmpy2's (MPFR) correctly rounded fma in the IEEE binary64 context.
* Transcendental primitives (exp, tanh, erf, ...) are evaluated in float64
  (numpy / scipy, never numpy's float16 loops, whose results depend on the
  CPU) and rounded to C: the model of a well-implemented library function in C.
  Approximations of these primitives are written out explicitly as candidates.

Inputs arrive in the storage format and are rounded to C (exact when C is at
least as wide); the result is rounded back to the storage format.

That is the ieee machine.  A :class:`audit.targets.semantics.Semantics` other than ieee (FTZ/DAZ,
contraction, saturation, conversion rounding, primitive implementations) is run by
:class:`SemOps` and :func:`_evaluate_semantics` at the end of this module; the default path
above does not look at it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, replace

import numpy as np

from audit.numbers.formats import Format
from audit.numbers.special import sc


@dataclass
class TraceEntry:
    op: str
    file: str
    line: int
    ins: tuple  # input arrays (float64 values of the compute format)
    out: np.ndarray  # the rounded result
    exact: np.ndarray  # the result before rounding (the constant as written, for "const")
    note: str = ""  # what a semantics flag did to the result ("flushed to zero (ftz)", ...)


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

    def __init__(self, a, ops: Ops):
        self.a = a
        self.ops = ops

    # arithmetic ----------------------------------------------------------
    def _bin(self, other, fn, name, swap=False):
        return self.ops.binary(name, fn, self, other, swap)

    def __add__(self, o):
        return self._bin(o, np.add, "+")

    def __radd__(self, o):
        return self._bin(o, np.add, "+", True)

    def __sub__(self, o):
        return self._bin(o, np.subtract, "-")

    def __rsub__(self, o):
        return self._bin(o, np.subtract, "-", True)

    def __mul__(self, o):
        return self._bin(o, np.multiply, "*")

    def __rmul__(self, o):
        return self._bin(o, np.multiply, "*", True)

    def __truediv__(self, o):
        return self._bin(o, np.divide, "/")

    def __rtruediv__(self, o):
        return self._bin(o, np.divide, "/", True)

    def __neg__(self):
        return Val(-self.a, self.ops)  # exact

    def __abs__(self):
        return Val(np.abs(self.a), self.ops)  # exact

    def __pow__(self, n):
        """Integer powers by repeated multiplication, each product rounded: x**3 = (x*x)*x."""
        if not isinstance(n, int) or n < 1:
            raise ValueError("only positive integer powers are supported")
        out = self
        for _ in range(n - 1):
            out = out * self
        return out

    # comparisons give plain boolean masks ---------------------------------
    def __lt__(self, o):
        return self.ops.compare(np.less, self, o)

    def __le__(self, o):
        return self.ops.compare(np.less_equal, self, o)

    def __gt__(self, o):
        return self.ops.compare(np.greater, self, o)

    def __ge__(self, o):
        return self.ops.compare(np.greater_equal, self, o)


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

    def binary(self, name: str, fn, v: Val, other, swap: bool = False) -> Val:
        o = self.lift(other)
        lhs, r = (o, v) if swap else (v, o)
        return self.op(name, fn(lhs.a, r.a), (lhs.a, r.a))

    def compare(self, fn, lhs: Val, r) -> np.ndarray:
        return fn(lhs.a, self.lift(r).a)

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

    def exp(self, x):
        return self._f("exp", np.exp, x)

    def expm1(self, x):
        return self._f("expm1", np.expm1, x)

    def log(self, x):
        return self._f("log", np.log, x)

    def log1p(self, x):
        return self._f("log1p", np.log1p, x)

    def tanh(self, x):
        return self._f("tanh", np.tanh, x)

    def erf(self, x):
        return self._f("erf", sc.erf, x)

    def erfc(self, x):
        return self._f("erfc", sc.erfc, x)

    def sqrt(self, x):
        return self._f("sqrt", np.sqrt, x)

    def exp2(self, x):
        return self._f("exp2", np.exp2, x)

    def rsqrt(self, x):
        return self._f("rsqrt", lambda v: 1.0 / np.sqrt(v), x)

    def sigmoid(self, x):
        return self._f("sigmoid", sc.expit, x)

    def abs(self, x):
        return Val(np.abs(self.lift(x).a), self)

    def maximum(self, a, b):
        return self._f("max", np.maximum, a, b)

    def minimum(self, a, b):
        return self._f("min", np.minimum, a, b)

    def clip(self, x, lo, hi):
        return self.minimum(self.maximum(x, lo), hi)

    def fma(self, a, b, c) -> Val:
        """a*b + c with one rounding into the compute format (a fused multiply-add)."""
        ins = tuple(self.lift(v).a for v in (a, b, c))
        return self.op("fma", fused_multiply_add(self.fmt, *ins), ins)

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


def _round_to_odd(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """The float64 value of s + e (s = RN64(s + e)) rounded to odd: s itself where e = 0 or
    s's last significand bit is odd, else its float64 neighbour on e's side (which is odd)."""
    bump = (e != 0) & ((s.view(np.int64) & 1) == 0)
    if bump.any():
        s = s.copy()
        s[bump] = np.nextafter(s[bump], np.copysign(np.inf, e[bump]))
    return s


def fused_multiply_add(fmt: Format, a, b, c) -> np.ndarray:
    """RN_fmt(a*b + c) of the exact value, for values a, b, c of ``fmt``: one rounding.

    For p <= 26 the product of two values of the format is exact in float64 (2p <= 53 bits
    and no float64 over/underflow for exponents within fp32's), so a*b + c = s + e exactly
    with (s, e) = TwoSum(a*b, c).  s + e rounded to odd at 53 bits keeps the sticky
    information; since 53 >= p + 2, rounding that to nearest at p bits is RN_p(s + e)
    (Boldo & Melquiond, IEEE TC 57(4), 2008: round-to-odd then round-to-nearest).  Non-finite
    operands give IEEE results (inf*0 + c = NaN, inf - inf = NaN).  fp64: MPFR's fma
    (gmpy2, IEEE binary64 context with subnormals), element by element.
    Returns float64 arrays (float32 for fp32) of values of the format.
    """
    with np.errstate(all="ignore"):
        if fmt.p > 26:
            return _fma_fp64(a, b, c)
        a64, b64, c64 = (np.asarray(v, dtype=np.float64) for v in (a, b, c))
        p = a64 * b64  # exact: at most 2p <= 52 significant bits, exponents far inside float64's
        s = p + c64
        bb = s - p
        e = (p - (s - bb)) + (c64 - bb)  # TwoSum: s + e = p + c exactly
        e = np.where(np.isfinite(s), e, 0.0)  # non-finite operands: s is the IEEE answer
        odd = _round_to_odd(np.asarray(s, dtype=np.float64), np.asarray(e, dtype=np.float64))
        if fmt.name == "fp32":
            return odd.astype(np.float32)  # the hardware double -> single conversion is RN
        return fmt.round(odd)


def _fma_fp64(a, b, c) -> np.ndarray:
    import gmpy2

    a, b, c = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (a, b, c)))
    out = np.empty(a.shape, dtype=np.float64)
    with gmpy2.context(gmpy2.ieee(64)):
        mpfr, fma = gmpy2.mpfr, gmpy2.fma
        for i, (p, q, r) in enumerate(zip(a.ravel().tolist(), b.ravel().tolist(), c.ravel().tolist())):
            out.flat[i] = float(fma(mpfr(p), mpfr(q), mpfr(r)))
    return out


def evaluate(
    fn,
    x: np.ndarray,
    storage: Format,
    compute: Format,
    params: dict,
    x2: np.ndarray | None = None,
    trace: list | None = None,
    watch: bool = False,
    semantics=None,
) -> np.ndarray:
    """Run formula ``fn(x, ops, **params)`` (or ``fn(x, x2, ops, **params)``) on storage
    values; return storage values.  ``trace``: a list to record every operation in
    (``watch``: only constants and operations with non-finite outputs).  ``semantics``:
    an :class:`audit.targets.semantics.Semantics` other than ieee (None: ieee, today's path)."""
    if semantics is not None and not semantics.is_default:
        return _evaluate_semantics(
            fn, np.asarray(x, dtype=np.float64), storage, compute, params, x2, trace, watch, semantics
        )
    ops = Ops(compute, trace, watch)
    ops.storage = storage
    with np.errstate(all="ignore"):
        # fp32 / fp64 compute: one conversion, the correctly rounded one (round() for fp32 is
        # this conversion and back: the same values, two passes fewer)
        cast = (lambda v: np.asarray(v, dtype=np.float64).astype(ops.native)) if ops.native else compute.round
        args = [Val(cast(x), ops)]
        if x2 is not None:
            args.append(Val(cast(x2), ops))
        y = fn(*args, ops, **params)
        y = y.a if isinstance(y, Val) else np.asarray(y)
        y64 = np.broadcast_to(y, x.shape).astype(np.float64)
        # a float32 result stored as fp32 (a float32 or float64 one as fp64) is its own
        # rounding: round() would convert it there and back to the same values
        own = y.dtype == np.float32 if storage.name == "fp32" else y.dtype in (np.float32, np.float64)
        out = y64 if storage.name in ("fp32", "fp64") and own else storage.round(y64)
        if trace is not None and storage != compute and not (watch and np.isfinite(out).all()):
            trace.append(TraceEntry(f"rounding to {storage.name}", "(storage)", 0, (y,), out, y))
        return out


# ------------------------------------------------------------------ semantics
# The machine of a Semantics (audit/targets/semantics.py) other than ieee.  The default path above
# is untouched: Ops and evaluate() take it only when a semantics is given.


class PVal(Val):
    """A product under ``contract``: its number in evaluation order and, when it is to be
    fused into the addition that uses it, its (unrounded) operands."""

    __slots__ = ("pid", "fused")

    def __init__(self, a, ops, pid, fused):
        super().__init__(a, ops)
        self.pid = pid
        self.fused = fused

    def __neg__(self):
        # -(a*b) is the product (-a)*b, exactly: its uses are the product's (as GCC's
        # contraction looks through a negation: -(a*b) + c is one FMA, fma(-a, b, c))
        fused = None if self.fused is None else (-self.fused[0], self.fused[1])
        return PVal(-self.a, self.ops, self.pid, fused)

    def __abs__(self):
        self.ops.use(self, "other")
        return Val(np.abs(self.a), self.ops)


class SemOps(Ops):
    """Ops under a semantics: flushes, saturation, contraction, primitive implementations.

    plan: the products to fuse (numbers in evaluation order), None while recording their
    uses; shift: -1, 0 or +1, the direction of bound:K primitives in this evaluation."""

    def __init__(self, fmt: Format, trace, watch, sem, plan=None, shift: int = 0):
        super().__init__(fmt, trace, watch)
        self.sem = sem
        self.plan = plan
        self.shift = shift
        self.uses: dict = {}
        self.n_mul = 0

    # contraction bookkeeping ------------------------------------------------
    def use(self, v, kind: str) -> None:
        if isinstance(v, PVal):
            self.uses.setdefault(v.pid, []).append(kind)

    def lift(self, v) -> Val:
        self.use(v, "other")
        return super().lift(v)

    def _daz(self, a):
        return flush_subnormals(self.fmt, a) if self.sem.daz else a

    # rounding ----------------------------------------------------------------
    def op(self, name: str, a, ins=(), bound: int = 0, note: str = "") -> Val:
        sem = self.sem
        if self.native is not None:
            out = a if getattr(a, "dtype", None) == self.native else np.asarray(a).astype(self.native)
        else:
            out = self.fmt.round(a)
        if name not in ("const", "bits"):
            if bound and self.shift:
                out = _sem().step(self.fmt, out, self.shift * bound)
                note = note or f"bound: moved {self.shift * bound:+d} ulp (envelope)"
            if sem.saturate_ops:
                sat = _sem().saturate(self.fmt, out, a, sem.sat_nan)
                if sat is not out:
                    note = note or "saturated (saturate)"
                out = sat
            if sem.ftz:
                fl = flush_subnormals(self.fmt, out)
                if fl is not out:
                    note = note or "flushed to zero (ftz)"
                out = fl
        if self.trace is not None and not (self.watch and name != "const" and np.isfinite(out).all()):
            self.trace.append(TraceEntry(name, *_formula_line(), tuple(ins), out, np.asarray(a), note))
        return Val(out, self)

    # operations --------------------------------------------------------------
    def binary(self, name: str, fn, v: Val, other, swap: bool = False) -> Val:
        o = super().lift(other)
        lhs, r = (o, v) if swap else (v, o)
        kind = name if name in ("+", "-") else "other"
        self.use(lhs, kind)
        self.use(r, kind)
        la, ra = self._daz(lhs.a), self._daz(r.a)
        if self.plan is not None and name in ("+", "-"):
            for first, prod, rest in ((True, lhs, ra), (False, r, la)):
                if isinstance(prod, PVal) and prod.fused is not None:
                    p, q = prod.fused
                    if name == "-":
                        if first:
                            rest = -rest  # a*b - c = fma(a, b, -c)
                        else:
                            p = -p  # c - a*b = fma(-a, b, c)
                    return self.op(
                        "fma",
                        fused_multiply_add(self.fmt, p, q, rest),
                        (p, q, rest),
                        note=f"contracted: * and {name} fused (contract)",
                    )
        if name == "/" and self.sem.prim("div") == "rcp":
            rc = self.rcp(Val(ra, self))
            return self.op("*", la * rc.a, (la, rc.a), note="division by reciprocal (div=rcp)")
        out = self.op(name, fn(la, ra), (la, ra))
        if name == "*" and self.sem.contract:
            pid = self.n_mul
            self.n_mul += 1
            fuse = self.plan is not None and pid in self.plan
            return PVal(out.a, self, pid, (la, ra) if fuse else None)
        return out

    def compare(self, fn, lhs: Val, r) -> np.ndarray:
        self.use(lhs, "other")
        return fn(self._daz(lhs.a), self._daz(self.lift(r).a))

    def fma(self, a, b, c) -> Val:
        ins = tuple(self._daz(self.lift(v).a) for v in (a, b, c))
        return self.op("fma", fused_multiply_add(self.fmt, *ins), ins)

    def _f(self, name, fn, *args):
        ins = tuple(self._daz(self.lift(a).a) for a in args)
        impl = self.sem.prim(name)
        if impl == "cr" or impl.startswith("bound:"):
            return self.op(
                name, fn(*(np.asarray(i, dtype=np.float64) for i in ins)), ins, bound=self.sem.bound(name)
            )
        if impl.startswith("table:"):  # measured on a device, every value of the format
            look = _sem().table_lookup(impl[6:], self.fmt)
            cr = fn(*(np.asarray(i, dtype=np.float64) for i in ins))
            return self.op(name, look(ins[0], cr), ins, note=f"{name} = {impl}")
        # a catalog candidate as the primitive, in its own compute format if it pins one
        from audit.numbers.formats import get_format
        from audit.targets.registry import catalog

        cand = catalog()[impl]
        sub_fmt = get_format(cand.compute) if cand.compute else self.fmt
        sub = SemOps(sub_fmt, self.trace, self.watch, replace(self.sem, prims=(), contract=False))
        xin = sub_fmt.round(np.asarray(ins[0], dtype=np.float64))
        y = cand.fn(Val(xin.astype(sub.native) if sub.native else xin, sub), sub, **cand.params)
        y = y.a if isinstance(y, Val) else np.asarray(y)
        return self.op(name, np.asarray(y, dtype=np.float64), ins, note=f"{name} = {impl}")

    def rcp(self, x) -> Val:
        return self._f("rcp", lambda v: 1.0 / v, x)


def flush_subnormals(fmt: Format, a):
    return _sem().flush(fmt, a)


def _sem():
    from audit.targets import semantics

    return semantics


def _evaluate_semantics(
    fn, x, storage: Format, compute: Format, params: dict, x2, trace, watch, sem
) -> np.ndarray:
    S = _sem()
    plan = None
    if sem.contract:  # which products have one use, an addition: from a one-input run
        rec = SemOps(compute, None, False, sem)
        with np.errstate(all="ignore"):
            _run(
                fn,
                rec,
                x.reshape(-1)[:1],
                None if x2 is None else np.asarray(x2, dtype=np.float64).reshape(-1)[:1],
                storage,
                compute,
                params,
                sem,
            )
        plan = {pid for pid, u in rec.uses.items() if len(u) == 1 and u[0] in ("+", "-")}
    shifts = (0, -1, 1) if sem.envelope else (0,)
    outs = []
    for shift in shifts:
        ops = SemOps(compute, trace if shift == 0 else None, watch, sem, plan, shift)
        with np.errstate(all="ignore"):
            y = _run(fn, ops, x, x2, storage, compute, params, sem)
            out = S.convert_out(np.broadcast_to(y, x.shape), x, storage, compute, sem)
        if (
            shift == 0
            and trace is not None
            and not (watch and np.isfinite(out).all())
            and (storage != compute or not sem.is_default)
        ):
            trace.append(
                TraceEntry(f"rounding to {storage.name}", "(storage)", 0, (y,), out, y, _conversion_note(sem))
            )
        outs.append(out)
    if len(outs) == 1:
        return outs[0]
    # the envelope: per input, the result farthest from the one with correctly rounded
    # primitives (NaN and inf count as farthest)
    base = outs[0]
    with np.errstate(all="ignore"):
        dist = np.stack([np.abs(o - base) for o in outs])
        both_nan = np.stack([np.isnan(o) & np.isnan(base) for o in outs])
        dist = np.where(both_nan, 0.0, np.where(np.isnan(dist), np.inf, dist))
    pick = np.argmax(dist, axis=0)
    return np.choose(pick, outs)


def _conversion_note(sem) -> str:
    parts = [f for f in ("daz_out", "ftz_out", "saturate_out") if getattr(sem, f)]
    if sem.rounding != "rne":
        parts.append(f"round={sem.rounding}")
    return ",".join(parts)


def _run(fn, ops: SemOps, x, x2, storage: Format, compute: Format, params: dict, sem):
    S = _sem()
    cast = (lambda v: v.astype(ops.native)) if ops.native else (lambda v: v)
    args = [Val(cast(S.convert_in(x, storage, compute, sem)), ops)]
    if x2 is not None:
        args.append(Val(cast(S.convert_in(x2, storage, compute, sem)), ops))
    y = fn(*args, ops, **params)
    ops.use(y, "other")
    y = y.a if isinstance(y, Val) else np.asarray(y)
    return np.asarray(y).astype(np.float64)
