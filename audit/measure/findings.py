"""Stability findings: where a candidate breaks, as input intervals, with root causes.

Kinds (the README states the same):

* ``nan``: NaN result where the exact value is a number.
* ``overflow``: infinite result where RN_F(f(x)) is finite; a result saturated to the
  largest finite value where RN_F(f(x)) is smaller; or (the reverse) a finite result
  where the exact value overflows F.
* ``underflow``: a zero result where RN_F(f(x)) is nonzero (a flush).
* ``sign``: result and exact value are nonzero and of opposite signs.
* ``range``: the result leaves the function's known range (|tanh| > 1, sigmoid outside
  [0, 1], GELU(x)/x outside [0, 1], ...).
* ``monotonicity``: the reference is monotone on an interval and the result goes backwards
  between consecutive inputs there.
* ``special``: +-inf or NaN input handled wrongly.

Causes come from re-running the formula on the affected inputs with every operation
traced (:mod:`audit.targets.compute`): the first operation that produced an infinite, NaN or
zero intermediate from ordinary operands.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from audit.io import json_number
from audit.measure.metrics import INF, NAN, PointErrors, finite_result
from audit.numbers import native
from audit.numbers.formats import Format
from audit.targets.candidates import Candidate

MAX_INTERVALS = 64  # per finding in the JSON; `intervals_total` gives the full count
KEEP_INTERVALS = 256  # per finding in memory (figures shade up to 200)


@dataclass
class Finding:
    kind: str
    count: int
    intervals: list  # [[lo, hi], ...] of inputs, runs of consecutive inputs merged
    example: dict
    cause: dict | None = None
    intervals_total: int = 0
    note: str = ""
    last: list | None = None  # the last interval (joins runs across chunk edges)

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "count": self.count,
            "intervals": [[json_number(a), json_number(b)] for a, b in self.intervals[:MAX_INTERVALS]],
            "intervals_total": self.intervals_total,
            "example": {k: json_number(v) for k, v in self.example.items()},
            "cause": self.cause,
            "note": self.note,
        }


def runs(x: np.ndarray, mask: np.ndarray, keep: int = KEEP_INTERVALS) -> tuple[list, list | None, int]:
    """Runs of consecutive True in mask (over inputs x in domain order): the first
    ``keep`` as [lo, hi], the last one, and how many there are."""
    m = np.asarray(mask, dtype=bool).view(np.int8)
    if not m.any():
        return [], None, 0
    d = np.diff(m, prepend=np.int8(0), append=np.int8(0))
    starts, ends = np.flatnonzero(d == 1), np.flatnonzero(d == -1) - 1
    first = [[float(x[a]), float(x[b])] for a, b in zip(starts[:keep].tolist(), ends[:keep].tolist())]
    return first, [float(x[starts[-1]]), float(x[ends[-1]])], len(starts)


def x_runs(x: np.ndarray, mask: np.ndarray, keep: int = KEEP_INTERVALS) -> tuple[list, list | None, int]:
    """Runs over the distinct values of x (ascending) of those at which mask holds for some
    pair: the x intervals of a backward finding."""
    ux, inv = np.unique(x, return_inverse=True)
    hit = np.bincount(inv.reshape(-1), weights=np.asarray(mask, dtype=np.float64), minlength=len(ux)) > 0
    return runs(ux, hit, keep)


FAILURE_KINDS = ("nan", "overflow", "underflow", "sign", "range")


def masks(e: PointErrors, cand: Candidate, fmt: Format, ref_params: dict) -> dict[str, tuple]:
    """kind -> (mask, note) over the inputs of e.

    Each kind is first tested with a cheap whole-array check (a reduction); its mask is
    built only where that finds something, since this runs on every input of an
    exhaustive fp32 sweep and most chunks have no finding at all."""
    got, rn = e.got, e.rounded
    m = fmt.max_finite
    with np.errstate(all="ignore"):
        # the counts each kind tests first: by the compiled helper in one pass (fp32), else here
        c = _mask_counts_native(e, fmt)
        if c is None:
            nonfinite = ~np.isfinite(got)
            any_nonfinite = bool(nonfinite.any())
            if any_nonfinite:
                top, bottom = (
                    got.max(initial=-np.inf, where=~nonfinite),
                    got.min(initial=np.inf, where=~nonfinite),
                )
            else:  # (plain reductions: twice as fast as the masked ones)
                top, bottom = got.max(initial=-np.inf), got.min(initial=np.inf)
            big = bool(top >= m or bottom <= -m)  # a finite result at or beyond +-max
            rn_all_finite = bool(np.isfinite(rn).all())
        else:
            any_nonfinite, big, rn_all_finite = c.n_nonfinite > 0, c.n_big > 0, c.n_rn_nonfinite == 0
            nonfinite = ~np.isfinite(got) if any_nonfinite else np.zeros(len(got), bool)
        out = {"nan": (e.cls == NAN if any_nonfinite else np.zeros(len(got), bool), "")}
        over = e.cls == INF if any_nonfinite else np.zeros(len(got), bool)
        if big:
            over |= ~nonfinite & (np.abs(got) == m) & np.isfinite(rn) & (np.abs(rn) < m)
        rn_over = _NONE if rn_all_finite else np.flatnonzero(~np.isfinite(rn) & ~np.isnan(e.exact))
        if len(rn_over):
            g = got[rn_over]
            over[rn_over] |= np.isfinite(g) & (np.abs(g) < np.abs(e.exact[rn_over] + e.exact_lo[rn_over]))
        if fmt.saturate and (np.abs(rn) == m).any():  # below +-max where the exact value overflows
            over |= (np.abs(rn) == m) & (np.abs(got) < m) & (np.abs(e.exact) >= fmt.overflow_threshold)
        out["overflow"] = (
            over,
            "infinite, or saturated to the largest finite value, where the exact "
            "value is in range; or finite where the exact value overflows",
        )
        under = got == 0 if c is None or c.n_zero else np.zeros(len(got), bool)
        if under.any():
            under &= (rn != 0) & ~np.isnan(rn)
        out["underflow"] = (under, "")
        sign = np.signbit(got) != np.signbit(e.exact) if c is None or c.n_sign else np.zeros(len(got), bool)
        if sign.any():
            idx = np.flatnonzero(sign)
            g, exact = got[idx], e.exact[idx] + e.exact_lo[idx]
            # opposite signs, both nonzero; an undefined exact value (NaN, of either sign bit) has none
            sign[idx] = np.isfinite(g) & (g != 0) & (rn[idx] != 0) & (np.sign(g) * np.sign(exact) < 0)
        out["sign"] = (sign, "")
        ref = cand.ref
        if ref.bounds is not None and ref.arity == 1:
            lo, hi = ref.bounds(e.x, **ref_params)
            # RN_F is monotone: a correctly rounded result lies in [RN_F(lo), RN_F(hi)] (with
            # --out-dtype a bound such as x itself need not be a value of the output format).
            # got is a value of F, so got < RN_F(lo) implies got < lo (got >= lo gives
            # got = RN_F(got) >= RN_F(lo)): the rounded bounds are needed only where the
            # unrounded ones already fail
            rng = (got < lo) | (got > hi)
            if rng.any():
                fail = np.flatnonzero(rng)
                g = got[fail]
                lo, hi = (np.broadcast_to(np.asarray(b, dtype=np.float64), got.shape) for b in (lo, hi))
                rng[fail] = (g < fmt.round(lo[fail])) | (g > fmt.round(hi[fail]))
            if any_nonfinite:
                rng &= ~nonfinite
            out["range"] = (rng, "")
        pieces = ref.pieces(ref_params)
        if pieces and ref.arity == 1:
            out["monotonicity"] = (_backwards(e.x, got, finite_result(e.cls), pieces), "")
    return out


_NONE = np.zeros(0, np.int64)


def _mask_counts_native(e: PointErrors, fmt: Format) -> native.MaskCounts | None:
    """masks' first tests by the compiled helper (audit/numbers/native.py), where it is
    loaded and applies (fp32, a chunk of CHUNK_MIN inputs or more)."""
    loaded = native.for_fp32(fmt.name, e.got)
    return (
        None if loaded is None else native.mask_counts_fp32(loaded, e.got, e.rounded, e.exact, fmt.max_finite)
    )


def _backwards(x, got, ok, pieces) -> np.ndarray:
    """Inputs x[i+1] where the result moved against the reference's direction (between
    consecutive inputs with finite results inside one monotone piece)."""
    bad = np.zeros(len(x), bool)
    if len(x) < 2:
        return bad
    for a, b, direction in pieces:
        if a <= x[0] and x[-1] <= b and ok.all():  # the chunk inside one piece: no masks
            # compared, not subtracted: b - a < 0 exactly where b < a (unequal floats never
            # differ by 0, gradual underflow; an overflowing difference keeps its sign), and
            # no float temporary of the chunk's size is made (0.37 -> 0.16 ns an input)
            if direction > 0:
                np.less(got[1:], got[:-1], out=bad[1:])
            else:
                np.greater(got[1:], got[:-1], out=bad[1:])
            return bad
    for a, b, direction in pieces:
        inside = ok & (x >= a) & (x <= b)
        idx = np.flatnonzero(inside)
        if len(idx) < 2:
            continue
        g = got[idx]
        back = g[1:] < g[:-1] if direction > 0 else g[1:] > g[:-1]
        bad[idx[1:][back]] = True
    return bad


def monotone_edges(e: PointErrors, pieces) -> list:
    """Per monotone piece: the first and last inputs of e with a finite result inside it,
    as [x, got, exact] pairs (or None).  A chunked sweep compares the last of one chunk
    with the first of the next (:func:`edge_finding`): the steps across chunk edges that
    a single run over every input compares too."""
    out = []
    ok = finite_result(e.cls)
    if len(e.x) and ok.all():  # the common case: the chunk inside one piece, no masks
        for i, (a, b, _) in enumerate(pieces):
            if a < e.x[0] and e.x[-1] < b:  # (an end of a piece may begin the next one)
                ends = [[float(e.x[j]), float(e.got[j]), float(e.exact[j])] for j in (0, -1)]
                return [ends if k == i else None for k in range(len(pieces))]
    for a, b, _ in pieces:
        idx = np.flatnonzero(ok & (e.x >= a) & (e.x <= b))
        out.append(
            None
            if not len(idx)
            else [[float(e.x[i]), float(e.got[i]), float(e.exact[i])] for i in (idx[0], idx[-1])]
        )
    return out


def edge_finding(
    prev: list,
    first: list,
    direction: int,
    cand: Candidate,
    storage: Format,
    compute_fmt: Format,
    params: dict,
) -> Finding | None:
    """The monotonicity finding at ``first`` = [x, got, exact] when its result moved
    against ``direction`` from ``prev`` = [x, got, ...], the inputs before and after a
    chunk edge."""
    if not (first[1] - prev[1]) * direction < 0:
        return None
    x = first[0]
    cause = explain(cand, storage, compute_fmt, params, np.array([x]), None, "monotonicity")
    return Finding(
        "monotonicity", 1, [[x, x]], {"x": x, "got": first[1], "exact": first[2]}, cause, 1, "", [x, x]
    )


def failing(
    e: PointErrors, cand: Candidate, fmt: Format, ref_params: dict, masks_made: dict | None = None
) -> np.ndarray:
    """Inputs with a nan, overflow, underflow, sign or range finding (``masks_made``: masks()
    of these errors, where already made)."""
    fail = np.zeros(len(e), bool)
    made = masks(e, cand, fmt, ref_params) if masks_made is None else masks_made
    for kind, (m, _) in made.items():
        if kind in FAILURE_KINDS:
            fail |= m
    return fail


def find(
    e: PointErrors,
    cand: Candidate,
    storage: Format,
    compute_fmt: Format,
    params: dict,
    ref_params: dict,
    masks_made: dict | None = None,
) -> list[Finding]:
    """Every finding over the inputs of e, with causes for formula candidates (``masks_made``:
    masks() of e, where already made)."""
    out: list[Finding] = []
    kinds = []  # (kind, mask, note, count, first input) of the kinds found
    made = masks(e, cand, storage, ref_params) if masks_made is None else masks_made
    for kind, (mask, note) in made.items():
        n = int(np.count_nonzero(mask))
        if n:
            kinds.append((kind, mask, note, n, int(np.flatnonzero(mask)[0])))
    entries = None
    if kinds and getattr(cand, "semantics", None) is None:
        # one trace at every kind's example input (the ops are elementwise: each input's
        # values are those of its own trace; a semantics flag's note speaks of the whole
        # array, so those candidates are traced one input at a time)
        at = np.array([k[4] for k in kinds])
        entries = _all_ops(
            trace(cand, storage, compute_fmt, params, e.x[at], None if e.x2 is None else e.x2[at])
        )
    for j, (kind, mask, note, n, i) in enumerate(kinds):
        ex = {"x": float(e.x[i]), "got": float(e.got[i]), "exact": float(e.exact[i])}
        if e.x2 is not None:
            ex["b"] = float(e.x2[i])
        if e.x2 is None:
            iv, last, total = runs(e.x, mask)
        elif getattr(cand.ref, "x_intervals", False):  # backward: the x at which some dy fails
            iv, last, total = x_runs(e.x, mask)
        else:
            iv, last, total = [], None, 0
        cause = explain(
            cand,
            storage,
            compute_fmt,
            params,
            e.x[i : i + 1],
            None if e.x2 is None else e.x2[i : i + 1],
            kind,
            entries,
            j,
        )
        if kind == "underflow" and getattr(cand.ref, "x_intervals", False):
            note = "dead gradient: dx = 0 where dy * f'(x) rounds to a nonzero value"
        out.append(Finding(kind, n, iv, ex, cause, total, note, last))
    return out


def special_findings(
    cand: Candidate, storage: Format, compute_fmt: Format, params: dict, specials: list
) -> list[Finding]:
    """The ``special`` finding: +-inf or NaN inputs handled wrongly, with its cause."""
    bad = [s for s in specials if not s["ok"]]
    if not bad:
        return []
    s0 = bad[0]
    why = "nan" if isinstance(s0["got"], float) and math.isnan(s0["got"]) else "special"
    cause = explain(cand, storage, compute_fmt, params, np.array([s0["x"]]), None, why)
    return [
        Finding(
            "special",
            len(bad),
            [[s["x"], s["x"]] for s in bad],
            {"x": s0["x"], "got": s0["got"], "exact": s0["expected"]},
            cause,
            len(bad),
        )
    ]


# ------------------------------------------------------------------ causes
_SYMBOL = {"+": "+", "-": "-", "*": "*", "/": "/"}


def _fmt(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.6g}"


def trace(cand: Candidate, storage: Format, compute_fmt: Format, params: dict, x, x2=None):
    entries: list = []
    cand.evaluate(
        np.asarray(x, dtype=np.float64),
        storage,
        compute_fmt,
        params,
        None if x2 is None else np.asarray(x2, dtype=np.float64),
        trace=entries,
    )
    return entries


def _at(a, i=0):
    a = np.asarray(a)
    return float(a.reshape(-1)[i] if a.size > 1 else a.reshape(-1)[0])


def _show(t, ins) -> str:
    if t.op in _SYMBOL and len(ins) == 2:
        return f" {_SYMBOL[t.op]} ".join(_fmt(v) for v in ins)
    return f"{t.op}({', '.join(_fmt(v) for v in ins)})"


def _all_ops(entries: list) -> list:
    return [t for t in entries if t.op != "const"]


def explain(
    cand: Candidate,
    storage: Format,
    compute_fmt: Format,
    params: dict,
    x,
    x2,
    kind: str,
    entries: list | None = None,
    j: int = 0,
) -> dict | None:
    """The first operation that produced the bad intermediate at input x (one input).

    nan: the first NaN from non-NaN operands (after the overflow that fed it, if any);
    overflow: the first infinity from finite operands, an int32 bit trick out of range,
    or the first value rounded onto the largest finite number; underflow: the first zero
    from nonzero operands (x / inf, cancellation, a clamp, an underflow, or an argument
    absorbed by rounding); special: as nan, or the operation that turned the non-finite
    input into a finite value.
    """
    if entries is None:  # (else: a trace of several inputs, of which this one is the j-th)
        entries, j = _all_ops(trace(cand, storage, compute_fmt, params, x, x2)), 0
    first_over = None

    def after_overflow(text):
        if first_over is not None and first_over is not t:
            return f"{first_over.op} overflowed to inf at {first_over.file}:{first_over.line}, then {text}"
        return text

    for t in entries:
        ins = [_at(a, j) for a in t.ins]
        out, ex = _at(t.out, j), _at(t.exact, j)
        finite_ins = all(math.isfinite(v) for v in ins)
        if t.note and kind == "underflow" and out == 0 and "ftz" in t.note:
            return _cause(t, f"{_show(t, ins)} = {_fmt(ex)}, subnormal, {t.note}")
        if t.note and kind == "overflow" and t.note.startswith("saturated"):
            return _cause(t, f"{_show(t, ins)} = {_fmt(ex)} {t.note} to {_fmt(out)}")
        if (
            t.op == "bits"
            and ins
            and (not math.isfinite(ins[0]) or abs(ins[0]) >= 2.0**31)
            and kind in ("overflow", "special", "underflow", "nan")
        ):
            return _cause(t, f"int32 conversion of {_fmt(ins[0])} is out of range (gives 0x80000000)")
        if first_over is None and math.isinf(out) and finite_ins:
            first_over = t
            if kind == "overflow":
                return _cause(t, f"{t.op} overflowed to {_fmt(out)} (exact {_fmt(ex)})")
        if math.isnan(out) and not any(math.isnan(v) for v in ins):
            return _cause(t, after_overflow(f"{_show(t, ins)} = NaN"))
        if (
            kind == "overflow"
            and math.isfinite(out)
            and abs(out) == t_max(t, compute_fmt, storage)
            and abs(ex) < abs(out) * (1 + 2.0**-compute_fmt.p)
        ):
            return _cause(t, f"{_show(t, ins)} rounded to the largest finite value {_fmt(out)}")
        if kind == "overflow" and t.op in ("max", "min") and ins and out != ins[0]:
            return _cause(t, f"{_show(t, ins)} = {_fmt(out)}: the formula clamps, the exact value does not")
        if kind == "underflow" and out == 0 and any(v != 0 and not math.isnan(v) for v in ins):
            if any(math.isinf(v) for v in ins):
                return _cause(t, after_overflow(f"{_show(t, ins)} = 0"))
            if t.op in ("+", "-"):
                return _cause(t, f"{_show(t, ins)} = 0: cancellation (an operand rounded onto the other)")
            if t.op in ("max", "min"):
                return _cause(t, f"{_show(t, ins)} = 0: the formula clamps to 0")
            if ex != 0:
                return _cause(t, f"{t.op} underflowed to 0 (exact {_fmt(ex)})")
            return _cause(
                t, f"{_show(t, ins)} = 0 exactly: an earlier rounding absorbed the small term of its argument"
            )
        if kind == "special" and math.isfinite(out) and not finite_ins:
            return _cause(t, f"{_show(t, ins)} = {_fmt(out)}: the non-finite input is lost")
    if first_over is not None and kind in ("nan", "special"):  # (an overflow returned at first_over)
        return _cause(first_over, f"{first_over.op} overflowed to inf")
    if kind in ("sign", "range", "monotonicity", "overflow") and entries:
        # no exceptional operation: the approximation (or its rounding) itself; point at the
        # operation that produced the result
        t = next((t for t in reversed(entries) if t.file != "(storage)"), entries[-1])
        what = {
            "sign": "has the wrong sign",
            "range": "leaves the function's range",
            "monotonicity": "goes backwards",
            "overflow": "is finite where the exact value overflows (or is a pole)",
        }[kind]
        return _cause(
            t,
            f"no exceptional operation: the result of {t.op} {what} through approximation or rounding error",
        )
    return None


def t_max(t, compute_fmt: Format, storage: Format) -> float:
    return storage.max_finite if t.file == "(storage)" else compute_fmt.max_finite


def _cause(t, text: str) -> dict:
    return {"op": t.op, "file": t.file, "line": t.line, "text": f"{text} at {t.file}:{t.line}"}


# ------------------------------------------------- hidden overflow, constants
def hidden(
    cand: Candidate,
    storage: Format,
    compute_fmt: Format,
    params: dict,
    e: PointErrors,
    entries: list | None = None,
) -> list[dict]:
    """Intermediates that overflowed or became NaN where the final result is finite, and
    constants that the compute format cannot hold (to 0, subnormal, inf, or losing more
    than half of the format's significant bits).  ``entries``: the trace of the
    evaluation that gave e.got, if it was recorded (a watch trace is enough)."""
    if e.x2 is not None:
        return []
    if entries is None:
        entries = trace(cand, storage, compute_fmt, params, e.x)
    ok = np.isfinite(e.got)
    consts: dict = {}
    bad_by_op: dict = {}
    for t in entries:
        if t.op == "const":
            d = _lossy_constant(t, compute_fmt)
            if d:
                consts.setdefault((t.file, t.line, d["value"]), d)
            continue
        o = np.broadcast_to(t.out, e.x.shape)
        insf = np.ones(e.x.shape, bool)
        for a in t.ins:
            insf &= np.isfinite(np.broadcast_to(a, e.x.shape))
        bad = ok & ~np.isfinite(o) & insf
        if bad.any():
            key = (t.file, t.line, t.op)
            bad_by_op[key] = bad_by_op.get(key, np.zeros(e.x.shape, bool)) | bad
    out: list[dict] = []
    for (file, line, op), bad in bad_by_op.items():
        iv, _, total = runs(e.x, bad, MAX_INTERVALS)
        h = {
            "kind": "hidden_overflow",
            "op": op,
            "file": file,
            "line": line,
            "count": int(bad.sum()),
            "intervals": iv,
            "intervals_total": total,
        }
        out.append(with_hidden_text(h))
    return out + list(consts.values())


def with_hidden_text(h: dict) -> dict:
    h["text"] = (
        f"{h['op']} at {h['file']}:{h['line']} overflowed to inf/NaN for {h['count']} "
        "inputs whose final result is finite (right only by saturation; "
        "a source of NaN gradients)"
    )
    return h


def _lossy_constant(t, fmt: Format) -> dict | None:
    if np.size(t.exact) != 1 or np.size(t.out) != 1:  # a table of constants (per-input lookups)
        return None
    c, r = float(np.asarray(t.exact).reshape(())), float(np.asarray(t.out).reshape(()))
    if c == 0 or c == r:
        return None
    what = None
    if r == 0:
        what = "underflows to 0"
    elif math.isinf(r) or math.isnan(r):
        what = "overflows"
    elif abs(r) < fmt.smallest_normal:
        what = "is subnormal"
    elif abs(r - c) / abs(c) > 2.0 ** (-fmt.p / 2):
        what = "loses more than half its significant bits"
    if what is None:
        return None
    return {
        "kind": "constant",
        "value": c,
        "rounded": json_number(r),
        "file": t.file,
        "line": t.line,
        "text": f"constant {c:.10g} {what} in {fmt.name} (becomes {_fmt(r)}) at {t.file}:{t.line}",
    }
