"""Checking the Python API's arguments: a wrong type or value is an ActauditError, never a
TypeError or AttributeError from deep inside the sweep.

:func:`audit.sweep` takes its targets as a name ('gelu.tanh', 'gelu', 'torch:gelu',
'pkg.module:function'), a comma-separated string of names, a Python callable
(``f(array of the storage dtype) -> array``, with ``reference=``, as
:func:`audit.testing.assert_accuracy` takes it), a :class:`audit.Candidate`, or a list or
tuple mixing them.
"""

from __future__ import annotations

import math
import numbers

from audit.errors import BadOptionError, BadParameterError, BadRangeError, UnknownNameError


def split_targets(targets) -> tuple[list[str], list, list]:
    """targets -> (names, callables, Candidate objects), each in the order given."""
    from audit.targets.candidates import Candidate

    if targets is None:
        items = []
    elif isinstance(targets, (str, Candidate)) or callable(targets):
        items = [targets]
    elif isinstance(targets, (list, tuple)):
        items = list(targets)
    else:
        raise UnknownNameError(
            f"targets must be a name, a callable, a Candidate or a list of them, not {type(targets).__name__}"
        )
    names, funcs, cands = [], [], []
    for t in items:
        if isinstance(t, str):
            names.extend(n.strip() for n in split_names(t) if n.strip())
        elif isinstance(t, Candidate):
            cands.append(t)
        elif callable(t):
            funcs.append(t)
        else:
            raise UnknownNameError(
                f"a target must be a name, a callable or a Candidate, not {type(t).__name__} ({t!r:.60})"
            )
    return names, funcs, cands


def split_names(text: str) -> list[str]:
    """'a,ort:Gelu[approximate=tanh,ort.optimize=all],b' -> the names (commas inside
    brackets belong to a target's attributes)."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out


def integer(name: str, v, lo: int | None = None, hi: int | None = None):
    """None or an integer (not a bool) in [lo, hi]."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise BadOptionError(f"{name} must be an integer, got {v!r:.60}")
    if lo is not None and v < lo:
        raise BadOptionError(f"{name} must be at least {lo}, got {v}")
    if hi is not None and v > hi:
        raise BadOptionError(f"{name} must be at most {hi}, got {v}")
    return int(v)


def tolerance(name: str, v):
    """None or a finite number >= 0."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not (math.isfinite(v) and v >= 0):
        raise BadOptionError(f"{name} must be a finite number >= 0, got {v!r:.60}")
    return float(v)


def input_range(r):
    """None or (lo, hi), two numbers (the bounds are checked by inputs.check_range)."""
    if r is None:
        return None
    if isinstance(r, str):
        from audit.numbers.inputs import parse_range

        return parse_range(r)
    if (
        not isinstance(r, (list, tuple))
        or len(r) != 2
        or not all(isinstance(x, numbers.Real) and not isinstance(x, bool) for x in r)
    ):
        raise BadRangeError(f"range must be (lo, hi), two numbers, or 'LO:HI', got {r!r:.60}")
    return (float(r[0]), float(r[1]))


def params(p):
    """None or {name: number or list of numbers}, every number finite (a string: an engine
    attribute, checked by the engine; a catalog candidate refuses it)."""
    if p is None:
        return None
    if not isinstance(p, dict):
        raise BadParameterError(f"params must be a dict {{name: value}}, got {type(p).__name__}")
    for k, v in p.items():
        vals = v if isinstance(v, (list, tuple)) else [v]
        if (
            not isinstance(k, str)
            or not vals
            or not all(
                isinstance(x, str)
                or (isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x))
                for x in vals
            )
        ):
            raise BadParameterError(f"parameter {k!r:.40}: a finite number or a list of them, got {v!r:.60}")
    return p


def text(name: str, v):
    """None or a string."""
    if v is not None and not isinstance(v, str):
        raise BadOptionError(f"{name} must be a string, got {type(v).__name__}")
    return v
