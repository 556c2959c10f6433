"""Cost of a candidate: operation counts by kind, from its traced evaluation.

The formula runs once, traced (:mod:`audit.targets.compute`), on a small set of inputs that
spans the format (both signs, zero, tiny and large values), and every rounded operation
it performs is counted by kind.  Formulas are branch-free array code (``where`` evaluates
both sides), so the count is the work per element of a vectorized kernel.

Under a semantics with ``contract`` (:mod:`audit.targets.semantics`), a product that the machine
fuses into the addition that uses it counts as one ``fma`` (not a ``mul`` and an ``add``).

Kinds: ``add`` (+ and -), ``mul``, ``div``, ``fma``, ``sqrt``, ``select`` (one per
``where``, its comparison included; ``min``/``max`` too), ``bits`` (bit tricks: ldexp,
integer reinterpretation), and one kind per transcendental primitive (``exp``, ``expm1``,
``log``, ``log1p``, ``tanh``, ``erf``, ``erfc``).  Constants, negation and abs are free.

The cost is the weighted sum of the counts.  Default weights (``WEIGHTS``), in units of
one add: add, mul, fma, select, bits 1; div and sqrt 4; every transcendental 20 (a libm
call of about 20 cycles of throughput against 1 for an add, roughly right for
float32 on x86-64 and GPUs' SFU-less paths).  Override with ``weights={'div': 8}``
(``--cost-weight div=8`` on the command line).
"""

from __future__ import annotations

import numpy as np

from audit.errors import BadOptionError
from audit.numbers.formats import Format
from audit.targets.candidates import Candidate
from audit.targets.compute import Ops, Val

TRANSCENDENTAL = ("exp", "expm1", "log", "log1p", "tanh", "erf", "erfc")
WEIGHTS = {
    "add": 1.0,
    "mul": 1.0,
    "fma": 1.0,
    "select": 1.0,
    "bits": 1.0,
    "div": 4.0,
    "sqrt": 4.0,
    **{k: 20.0 for k in TRANSCENDENTAL},
}
KIND = {
    "+": "add",
    "-": "add",
    "*": "mul",
    "/": "div",
    "fma": "fma",
    "sqrt": "sqrt",
    "max": "select",
    "min": "select",
    "ldexp": "bits",
    "bits": "bits",
    **{k: k for k in TRANSCENDENTAL},
}
PROBE = (-100.0, -7.5, -1.5, -0.25, -1e-3, 0.0, 1e-3, 0.25, 1.5, 7.5, 100.0)


class _CountingOps(Ops):
    """Ops that also count ``where`` (a compare and a select)."""

    def __init__(self, fmt, trace):
        super().__init__(fmt, trace)
        self.selects = 0

    def where(self, cond, a, b) -> Val:
        self.selects += 1
        return super().where(cond, a, b)


def weights(overrides: dict | None = None) -> dict:
    """The default weights updated with ``overrides`` (unknown kinds and negative or
    non-finite weights are refused)."""
    out = dict(WEIGHTS)
    for k, v in (overrides or {}).items():
        if k not in out:
            raise BadOptionError(
                f"unknown operation kind '{k}' in the cost weights (kinds: {', '.join(out)})"
            )
        v = float(v)
        if not np.isfinite(v) or v < 0:
            raise BadOptionError(f"cost weight {k}={v} must be a finite number >= 0")
        out[k] = v
    return out


def counts(cand: Candidate, compute: Format, params: dict | None = None) -> dict:
    """Operations per element by kind (kinds with a nonzero count, sorted by name)."""
    if cand.arity != 1:
        raise BadOptionError(f"{cand.id}: costs are counted for functions of one input")
    fmt = cand.compute_format(compute)
    trace: list = []
    ops = _CountingOps(fmt, trace)
    x = np.array(PROBE, dtype=np.float64)
    with np.errstate(all="ignore"):
        xv = fmt.round(x)
        xv = xv.astype(ops.native) if ops.native else xv
        cand.fn(Val(xv, ops), ops, **cand.resolve_params(params))
    out: dict[str, int] = {}
    for t in trace:
        k = KIND.get(t.op)
        if k is not None:
            out[k] = out.get(k, 0) + 1
    if ops.selects:
        out["select"] = out.get("select", 0) + ops.selects
    sem = getattr(cand, "semantics", None)
    if sem is not None and sem.contract:
        # the machine fuses a product into the addition that uses it: one fma instead of
        # a mul and an add (the contracted operations of a traced run under the semantics)
        from audit.targets.compute import evaluate

        t2: list = []
        with np.errstate(all="ignore"):
            evaluate(cand.fn, x[:1], fmt, fmt, cand.resolve_params(params), trace=t2, semantics=sem)
        fused = sum(1 for t in t2 if t.op == "fma" and "contracted" in (t.note or ""))
        if fused:
            out["mul"] -= fused
            out["add"] -= fused
            out["fma"] = out.get("fma", 0) + fused
            out = {k: v for k, v in out.items() if v}
    return dict(sorted(out.items()))


def cost(c: dict, w: dict | None = None) -> float:
    """The weighted sum of operation counts ``c`` (weights ``w``, default WEIGHTS)."""
    w = WEIGHTS if w is None else w
    return float(sum(w.get(k, 1.0) * n for k, n in c.items()))


def describe(c: dict) -> str:
    """'2 add, 4 mul, 1 tanh' (kinds in a fixed order)."""
    return ", ".join(f"{n} {k}" for k, n in c.items()) or "no operation"


def parse_weights(texts) -> dict:
    """['div=8', 'exp=10'] -> {'div': 8.0, 'exp': 10.0}."""
    out = {}
    for t in texts or []:
        k, sep, v = t.partition("=")
        if not sep:
            raise BadOptionError(f"cost weight '{t}' is not KIND=WEIGHT")
        try:
            out[k.strip()] = float(v)
        except ValueError:
            raise BadOptionError(f"cost weight '{t}': '{v}' is not a number") from None
    return weights(out)
