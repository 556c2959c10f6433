"""Saturation thresholds of the exact function, and safe clip ranges of a candidate.

Saturation (a property of f in format F, from the oracle over F's values):

* ``high``: the smallest x from which on RN_F(f(x)) stays one constant, or equals x
  (value ``"identity"``);
* ``low``: the largest x up to which RN_F(f(x)) stays one constant (0 included).

Clip recommendation for a candidate and a tolerance (``max_ulp`` and/or ``atol``; by
default twice the candidate's largest ULP error on its well-behaved core -- the inputs
with |x| <= 2 where it has no nan, overflow, underflow, sign or range finding -- and at
least 2 ULP): on each side of zero, the bound t up to which the candidate stays within
tolerance, and the action beyond it -- ``clamp`` (clamp the input to t), ``identity``
(return x), ``constant`` (return the saturation value) or ``none`` (no threshold needed,
or none that helps) -- such that the fixed candidate has no NaN or inf and stays within
tolerance over the whole format.  The largest such t is chosen.
"""

from __future__ import annotations

import copy
import math
from dataclasses import replace

import numpy as np

from audit.io import format_number, json_number
from audit.measure.metrics import finite_result, point_errors
from audit.numbers.formats import Format
from audit.oracle import oracle
from audit.oracle.oracle import OracleValues
from audit.oracle.references import Reference
from audit.targets.candidates import Candidate

CORE = 2.0


_SATURATION: dict = {}  # oracle table key -> (the table, its saturation)


def saturation(ref: Reference, fmt: Format, ref_params: dict, x: np.ndarray | None = None) -> dict:
    """{'low': {'x', 'value'} | None, 'high': {'x', 'value'} | None} over every value of fmt
    (or over x, for formats too large to enumerate)."""
    if ref.arity != 1:
        return {"low": None, "high": None}
    if fmt.enumerable and oracle._cache_enabled():
        # a property of the table alone: the first command's 26 results computed it 26 times
        tbl = oracle.table(ref, fmt, ref_params)
        key = oracle.cache_key(ref, fmt, ref.with_defaults(ref_params))
        hit = _SATURATION.get(key)
        if hit is None or hit[0] is not tbl:  # (bound to the very table object it came from)
            vals = fmt.finite_values_shared()
            hit = _SATURATION[key] = (tbl, {"high": _high(vals, tbl.rounded), "low": _low(vals, tbl.rounded)})
        return copy.deepcopy(hit[1])
    vals = fmt.finite_values() if fmt.enumerable else np.sort(np.asarray(x, dtype=np.float64))
    rn = oracle.evaluate(ref, fmt, vals, ref_params).rounded
    return {"high": _high(vals, rn), "low": _low(vals, rn)}


def _run_from_end(mask: np.ndarray) -> int:
    """Index where the final run of True in mask starts (len(mask) if it ends False)."""
    bad = np.flatnonzero(~mask)
    return 0 if not len(bad) else int(bad[-1]) + 1


def _high(vals, rn):
    n = len(vals)
    i_c = _run_from_end(rn == rn[-1])
    i_id = _run_from_end(rn == vals)
    if min(i_c, i_id) >= n - 1:
        return None
    if i_id < i_c:
        return {"x": float(vals[i_id]), "value": "identity"}
    return {"x": float(vals[i_c]), "value": float(rn[-1])}


def _low(vals, rn):
    n = len(vals)
    j = n - _run_from_end((rn == rn[0])[::-1]) - 1  # last index of the first run
    if j <= 0:
        return None
    return {"x": float(vals[j]), "value": float(rn[0])}


# The errors of a clip's action (x itself, or the saturation constant) depend on the inputs
# and the oracle only, not on the candidate: the 26 results of the first command computed
# the same ones 52 times (a tenth of its evaluation time).  The last few are kept, each
# with the arrays it was computed from, and reused only where those are the same bits
# (an input settled by mpmath for one candidate has other hi/lo bits: computed anew).
_ACTIONS: list = []
ACTIONS_KEPT = 4


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


def _action_errors(x: np.ndarray, idx: np.ndarray, value, ov: OracleValues, fmt: Format):
    """point_errors of the action ``value`` at the inputs idx (reused where the same)."""
    xi, taken = x[idx], ov.take(idx)
    key = (fmt.name, repr(value), *(_bits(a) for a in (xi, taken.rounded, taken.hi, taken.lo)))
    for k, ea in _ACTIONS:
        if k == key:
            return ea
    out = xi if value == "identity" else np.full(len(idx), value)
    ea = point_errors(xi, out, taken, fmt)
    _ACTIONS.append((key, ea))
    del _ACTIONS[:-ACTIONS_KEPT]
    return ea


def _ok(ulp, abs_err, cls, max_ulp, atol):
    good = np.zeros(len(ulp), bool)
    with np.errstate(invalid="ignore"):
        if max_ulp is not None:
            good |= ulp <= max_ulp
        if atol is not None:
            good |= abs_err <= atol
    return good & finite_result(cls)


def recommend(
    e,
    fmt: Format,
    sat: dict,
    max_ulp: float | None = None,
    atol: float | None = None,
    failing: np.ndarray | None = None,
) -> dict:
    """The clip recommendation from a candidate's per-input errors over the whole format
    (``failing``: inputs with a failure finding, left out of the default tolerance)."""
    x = e.x
    if max_ulp is None and atol is None:
        core = finite_result(e.cls) & (np.abs(x) <= CORE)
        if failing is not None:
            core &= ~failing
        max_ulp = max(2.0, 2 * float(np.max(e.ulp_err[core]))) if core.any() else 2.0
    okc = _ok(e.ulp_err, e.abs_err, e.cls, max_ulp, atol)
    ov = OracleValues(e.rounded, e.exact, e.exact_lo, 0)
    fixed = e.ulp_err.copy()
    fixed[~finite_result(e.cls)] = np.inf
    sides = {}
    safe = {}
    notes = []
    for side, sel, key in (("hi", x > 0, "high"), ("lo", x < 0, "low")):
        idx = np.flatnonzero(sel)
        if side == "lo":
            idx = idx[::-1]  # from the centre outwards
        s = sat.get(key)
        action, bound, note = "none", None, ""
        safe[side] = None  # the whole side is within the tolerance
        if len(idx) and not okc[idx].all():
            k = int(np.flatnonzero(~okc[idx])[0])
            safe[side] = float(x[idx][k - 1]) if k else 0.0
            if s is None:
                note = f"{side} side: f does not saturate in {fmt.name}: no clip helps"
            else:
                ea = _action_errors(x, idx, s["value"], ov, fmt)
                oka = _ok(ea.ulp_err, ea.abs_err, ea.cls, max_ulp, atol)
                pre = np.cumprod(okc[idx]).astype(bool)
                suf = np.cumprod(oka[::-1])[::-1].astype(bool)
                # feasible bounds: within up to j, the action within beyond it; j is never the
                # last input (some input of this side is out), so something is always left beyond
                feas = pre & np.append(suf[1:], True)
                if feas.any():
                    j = int(np.flatnonzero(feas)[-1])
                    bound = float(x[idx][j])
                    rest = idx[j + 1 :]
                    fixed[rest] = ea.ulp_err[j + 1 :]
                    action = "identity" if s["value"] == "identity" else "constant"
                    if action == "constant" and e.got[idx][j] == s["value"]:
                        action = "clamp"  # clamping the input there already gives the constant
                else:
                    first_bad = float(x[idx][int(np.flatnonzero(~okc[idx])[0])])
                    note = (
                        f"{side} side: off by more than the tolerance from x = {first_bad:g} "
                        f"on, before f saturates (x = {s['x']:g}): no clip helps"
                    )
        sides[side] = (bound, action)
        if note:
            notes.append(note)
    (hi, hi_action), (lo, lo_action) = sides["hi"], sides["lo"]
    with np.errstate(invalid="ignore"):
        inside = float(np.max(fixed)) if len(fixed) else math.nan
    # lo_safe / hi_safe: the farthest input from zero up to which every input of that side is
    # within the tolerance, unclipped (None: the whole side is; 0.0: not even the first)
    return {
        "lo": lo,
        "hi": hi,
        "lo_action": lo_action,
        "hi_action": hi_action,
        "lo_safe": safe["lo"],
        "hi_safe": safe["hi"],
        "max_ulp_inside": inside,
        "tolerance": {"max_ulp": max_ulp, "atol": atol},
        "note": "; ".join(notes),
    }


def to_json(c: dict | None) -> dict | None:
    if c is None:
        return None
    out = dict(c)
    for k in ("lo", "hi", "max_ulp_inside", "lo_safe", "hi_safe"):
        out[k] = json_number(out[k])
    return out


def apply(cand: Candidate, clip: dict, sat: dict) -> Candidate:
    """The candidate with the recommended clip applied: a new candidate to sweep."""
    lo, hi = clip["lo"], clip["hi"]
    lo_a, hi_a = clip["lo_action"], clip["hi_action"]
    c_lo = sat["low"]["value"] if sat.get("low") else None
    c_hi = sat["high"]["value"] if sat.get("high") else None
    base = cand.fn

    def fixed(x, m, **p):
        xc = x
        if hi_a == "clamp":
            xc = m.minimum(xc, hi)
        if lo_a == "clamp":
            xc = m.maximum(xc, lo)
        y = base(xc, m, **p)
        if hi_a in ("identity", "constant"):
            y = m.where(x > hi, x if hi_a == "identity" else c_hi, y)
        if lo_a in ("identity", "constant"):
            y = m.where(x < lo, x if lo_a == "identity" else c_lo, y)
        return y

    return replace(
        cand, id=f"{cand.id}+clip", fn=fixed, formula=f"{cand.formula}, clipped [{lo}, {hi}] ({lo_a}, {hi_a})"
    )


def document(results: list) -> dict:
    """`actaudit clip --json`: each result's saturation and clip recommendation."""
    return {
        "schema": "actaudit.clip/1",
        "results": [
            {
                "candidate": r.candidate,
                "dtype": r.dtype,
                "compute": r.compute,
                "semantics": r.to_dict()["semantics"]["name"],
                "saturation": r.to_dict()["saturation"],
                "clip": r.to_dict()["clip"],
            }
            for r in results
        ],
    }


def sentence(c: dict) -> str:
    """The clip recommendation as one sentence for people: what to do past each side, or that
    nothing needs clipping (and why no clip helps, where that is so)."""
    num = format_number
    parts = []
    for side, cmp_, past in (("lo", ">=", "<"), ("hi", "<=", ">")):
        a, b = c[f"{side}_action"], c[side]
        if a == "clamp":
            parts.append(f"clamp x to {cmp_} {num(b, 6)}")
        elif a == "identity":
            parts.append(f"return x for x {past} {num(b, 6)} (f(x) = x there)")
        elif a == "constant":
            parts.append(f"return f's limit for x {past} {num(b, 6)}")
    inside = num(c["max_ulp_inside"])
    if not parts:
        why = c["note"] or "every input is within the tolerance"
        return f"Nothing to clip: {why} (max {inside} ULP)."
    text = " and ".join(parts)
    more = f" ({c['note']})" if c["note"] else ""
    return f"{text[0].upper()}{text[1:]}: max {inside} ULP left inside the range{more}."
