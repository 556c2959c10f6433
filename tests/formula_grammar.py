"""The catalog's formula grammar (docs/concepts/exact-decisions.md), parsed and evaluated
in a compute format independently of audit.targets.compute: every operation in float64 (numpy /
scipy) rounded once with Format.round, constants rounded as written.

    formula  := expr { "," NAME "=" expr }            definitions, used by name
    expr     := sum [ REL sum "?" expr ":" expr ]     REL: < <= > >= ==
    sum      := term { ("+" | "-") term }             left to right
    term     := unary { ("*" | "/") unary | unary }   juxtaposition multiplies; left to right
    unary    := "-" unary | power                     negation is exact
    power    := atom [ "^" INTEGER ]                  x^3 = (x x) x, each product rounded
    atom     := NUMBER | NAME | NAME "(" expr { "," expr } ")" | "(" expr ")" | "|" expr "|"
              | "RN(" const ")"

NUMBER and parameter names are constants: their float64 value rounded to the compute
format.  RN(const) is the real value of a constant expression (numbers, pi, + - * / ^,
sqrt, exp, log) rounded to nearest float64, then to the compute format: one stored
constant.  Functions: exp expm1 log log1p tanh erf erfc sqrt (each correctly rounded:
float64 then rounded), max min, clip(v, lo, hi) = min(max(v, lo), hi), relu6(v) =
clip(v, 0, 6), fma(a, b, c) (one rounding), store(v) (rounded to the storage format and
back: a tensor saved by the forward pass)."""

from __future__ import annotations

import re

import mpmath as mp
import numpy as np
from scipy import special as sc

TOKEN = re.compile(
    r"\s*(?:(\d+\.\d*(?:[eE][-+]?\d+)?|\d+(?:[eE][-+]?\d+)?|\.\d+)|([A-Za-z_][A-Za-z_0-9]*)|(<=|>=|==|[-+*/^(),|?:<>=]))"
)
FUNCS = {
    "exp",
    "expm1",
    "log",
    "log1p",
    "tanh",
    "erf",
    "erfc",
    "sqrt",
    "max",
    "min",
    "clip",
    "relu6",
    "fma",
    "store",
}
UNARY = {
    "exp": np.exp,
    "expm1": np.expm1,
    "log": np.log,
    "log1p": np.log1p,
    "tanh": np.tanh,
    "erf": sc.erf,
    "erfc": sc.erfc,
    "sqrt": np.sqrt,
}


class FormulaError(ValueError):
    pass


def tokenize(text: str) -> list[str]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise FormulaError(f"cannot read {text[pos:]!r}")
        out.append(m.group(0).strip())
        pos = m.end()
    return out


class Parser:
    """Tokens to a tree of tuples: ("num", s), ("name", s), ("call", f, args), ("rn", tree),
    ("abs", t), ("neg", t), ("pow", t, n), (op, a, b) for + - * /, ("if", rel, a, b, t, e)."""

    def __init__(self, text: str):
        self.t = tokenize(text)
        self.i = 0
        self.in_abs = 0

    def peek(self, k=0):
        return self.t[self.i + k] if self.i + k < len(self.t) else None

    def take(self, want=None):
        tok = self.peek()
        if tok is None or (want is not None and tok != want):
            raise FormulaError(f"expected {want!r} at token {self.i} ({tok!r}) in {' '.join(self.t)}")
        self.i += 1
        return tok

    def formula(self):
        main = self.expr()
        defs = {}
        while self.peek() == ",":
            self.take(",")
            name = self.take()
            self.take("=")
            defs[name] = self.expr()
        if self.peek() is not None:
            raise FormulaError(f"unexpected {self.peek()!r} at token {self.i} in {' '.join(self.t)}")
        return main, defs

    def expr(self):
        a = self.sum()
        if self.peek() in ("<", "<=", ">", ">=", "=="):
            rel = self.take()
            b = self.sum()
            self.take("?")
            yes = self.expr()
            self.take(":")
            no = self.expr()
            return ("if", rel, a, b, yes, no)
        return a

    def sum(self):
        a = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            a = (op, a, self.term())
        return a

    def _starts_atom(self, tok):
        if tok is None:
            return False
        if tok == "|":
            return self.in_abs == 0
        return tok == "(" or tok[0].isdigit() or tok[0] == "." or tok[0].isalpha() or tok[0] == "_"

    def term(self):
        a = self.unary()
        while True:
            tok = self.peek()
            if tok in ("*", "/"):
                self.take()
                a = (tok, a, self.unary())
            elif self._starts_atom(tok):
                a = ("*", a, self.unary())
            else:
                return a

    def unary(self):
        if self.peek() == "-":
            self.take()
            return ("neg", self.unary())
        return self.power()

    def power(self):
        a = self.atom()
        if self.peek() == "^":
            self.take()
            n = self.take()
            if not n.isdigit():
                raise FormulaError(f"power {n!r}: only positive integers")
            a = ("pow", a, int(n))
        return a

    def atom(self):
        tok = self.take()
        if tok == "(":
            e = self.expr()
            self.take(")")
            return e
        if tok == "|":
            self.in_abs += 1
            e = self.expr()
            self.in_abs -= 1
            self.take("|")
            return ("abs", e)
        if tok[0].isdigit() or tok[0] == ".":
            return ("num", tok)
        if tok == "RN":
            self.take("(")
            saved, self.in_abs = self.in_abs, 0
            e = self.expr()
            self.in_abs = saved
            self.take(")")
            return ("rn", e)
        if self.peek() == "(" and tok in FUNCS:
            self.take("(")
            saved, self.in_abs = self.in_abs, 0
            args = [self.expr()]
            while self.peek() == ",":
                self.take(",")
                args.append(self.expr())
            self.in_abs = saved
            self.take(")")
            return ("call", tok, args)
        if tok[0].isalpha() or tok[0] == "_":
            return ("name", tok)
        raise FormulaError(f"unexpected {tok!r}")


def parse(text: str):
    return Parser(text).formula()


def _const_value(tree, names: dict) -> mp.mpf:
    """The real value of a constant expression (inside RN()), at 200 bits."""
    k = tree[0]
    if k == "num":
        return mp.mpf(tree[1])
    if k == "name":
        if tree[1] == "pi":
            return +mp.pi
        if tree[1] in names:
            return mp.mpf(repr(float(names[tree[1]])))
        raise FormulaError(f"RN(): unknown constant {tree[1]!r}")
    if k == "neg":
        return -_const_value(tree[1], names)
    if k == "pow":
        return _const_value(tree[1], names) ** tree[2]
    if k in "+-*/":
        a, b = _const_value(tree[1], names), _const_value(tree[2], names)
        return {"+": a + b, "-": a - b, "*": a * b, "/": a / b}[k]
    if k == "call" and tree[1] in ("sqrt", "exp", "log") and len(tree[2]) == 1:
        return getattr(mp, tree[1])(_const_value(tree[2][0], names))
    raise FormulaError(f"RN(): not a constant expression: {tree!r}")


def evaluate(text: str, inputs: dict, compute, storage, params: dict | None = None) -> np.ndarray:
    """The formula's value at the inputs (storage values), in ``compute``, rounded to storage."""
    main, defs = parse(text)
    params = dict(params or {})
    R = compute.round

    def const(v: float):
        return R(np.float64(v))

    vals = {k: R(np.asarray(v, dtype=np.float64)) for k, v in inputs.items()}
    cache: dict = {}

    def ev(t):
        k = t[0]
        if k == "num":
            return const(float(t[1]))
        if k == "name":
            n = t[1]
            if n in vals:
                return vals[n]
            if n in defs:
                if n not in cache:
                    cache[n] = ev(defs[n])
                return cache[n]
            if n in params:
                return const(float(params[n]))
            raise FormulaError(f"unknown name {n!r}")
        if k == "rn":
            with mp.workprec(200):
                return const(float(_const_value(t[1], params)))
        if k == "neg":
            return -ev(t[1])
        if k == "abs":
            return np.abs(ev(t[1]))
        if k == "pow":
            b = ev(t[1])
            out = b
            for _ in range(t[2] - 1):
                out = R(out * b)
            return out
        if k in ("+", "-", "*", "/"):
            a, b = ev(t[1]), ev(t[2])
            fn = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}[k]
            return R(fn(a, b))
        if k == "if":
            _, rel, a, b, yes, no = t
            fn = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal}
            c = fn[rel](ev(a), ev(b))
            return np.where(c, ev(yes), ev(no))
        if k == "call":
            f, args = t[1], [ev(a) for a in t[2]]
            if f in UNARY:
                return R(UNARY[f](args[0]))
            if f == "max":
                return R(np.maximum(*args))
            if f == "min":
                return R(np.minimum(*args))
            if f == "clip":
                return R(np.minimum(R(np.maximum(args[0], args[1])), args[2]))
            if f == "relu6":
                return R(np.minimum(R(np.maximum(args[0], const(0.0))), const(6.0)))
            if f == "store":
                return R(storage.round(args[0]))
            if f == "fma":
                from audit.targets.compute import fused_multiply_add

                return R(np.asarray(fused_multiply_add(compute, *args), dtype=np.float64))
        raise FormulaError(f"cannot evaluate {t!r}")

    with np.errstate(all="ignore"):
        y = ev(main)
        shape = np.shape(next(iter(vals.values())))
        return storage.round(np.broadcast_to(np.asarray(y, dtype=np.float64), shape))
