"""Accuracy assertions for test suites (pytest or any other runner).

    from audit.testing import assert_accuracy
    assert_accuracy("gelu.tanh", dtype="fp16", max_ulp=4096, nan=False)
    assert_accuracy(my_gelu, reference="gelu", dtype="bf16", max_ulp=2)

``candidate_or_callable`` is a catalog id, a :class:`audit.Candidate`, or a Python
callable taking an array of the storage dtype and returning one of the same shape.
"""

from __future__ import annotations

from audit.errors import BadOptionError
from audit.measure.sweep import SweepResult, run_candidate
from audit.numbers.formats import get_format
from audit.numbers.inputs import domain
from audit.targets.candidates import Candidate, catalog, resolve
from audit.targets.engines import wrap_callable


def callable_candidate(func, reference: str, dtype) -> Candidate:
    """Wrap f(array of the storage dtype) -> array as a candidate."""
    return wrap_callable(func, reference, dtype)


def assert_accuracy(
    candidate_or_callable,
    reference: str | None = None,
    dtype="fp16",
    compute=None,
    *,
    max_ulp: float | None = None,
    p99_ulp: float | None = None,
    max_abs: float | None = None,
    max_rel: float | None = None,
    nan: bool = False,
    inf: bool = False,
    overflow: bool = False,
    specials: bool = False,
    range=None,
    samples=None,
    seed: int = 0,
    params: dict | None = None,
    semantics=None,
) -> SweepResult:
    """Sweep and raise AssertionError naming the worst input when a tolerance is exceeded.

    nan / inf / overflow: whether NaN results, infinite results (where the exact value is
    a number) and finite results where the exact value overflows the format are allowed;
    specials: whether wrong results at the special inputs +-inf and NaN are (by default
    they fail: GELU(-inf) must be -0, not NaN).  semantics: one machine semantics
    (audit.targets.semantics), e.g. "ftz,daz" or "ascend_sat"."""
    __tracebackhide__ = True  # pytest: show the message, not this function's source
    c = candidate_or_callable
    if isinstance(c, str):
        cand = catalog()[c] if c in catalog() else resolve([c])[0]
    elif isinstance(c, Candidate):
        cand = c
    elif callable(c):
        if reference is None:
            raise BadOptionError("a callable needs reference=")
        cand = callable_candidate(c, reference, dtype)
    else:
        raise BadOptionError(f"not a candidate or callable: {c!r}")
    if reference is not None and cand.reference != reference:
        raise BadOptionError(f"{cand.id} approximates {cand.reference}, not {reference}")
    fmt = get_format(dtype)
    cf = get_format(compute) if compute else fmt
    from audit.targets import semantics as semantics_mod

    sem = semantics_mod.parse(semantics) if semantics is not None else None
    if sem is not None and sem.stochastic:
        raise BadOptionError("assert_accuracy takes a deterministic semantics (no round=stochastic)")
    r = run_candidate(
        cand.with_semantics(sem), fmt, cf, domain(fmt, range, samples=samples, seed=seed), params
    )
    r.semantics = None if sem is None or sem.is_default else sem
    problems = []
    for name, lim, val in (
        ("max ULP", max_ulp, r.max_ulp),
        ("p99 ULP", p99_ulp, r.p99_ulp),
        ("max abs", max_abs, r.max_abs),
        ("max rel", max_rel, r.max_rel),
    ):
        if lim is not None and not val <= lim:
            problems.append(f"{name} {val:.6g} > {lim:g}")
    if not nan and r.nan_count:
        problems.append(f"{r.nan_count} NaN results")
    if not inf and r.inf_count:
        problems.append(f"{r.inf_count} infinite results")
    if not overflow and r.overflow_miss_count:
        problems.append(f"{r.overflow_miss_count} finite results where the exact value overflows {fmt.name}")
    if not specials and r.special_failures:
        bad = [s for s in r.specials if not s["ok"]]
        problems.append(
            "wrong at special inputs: "
            + ", ".join(f"f({s['x']!r}) gave {s['got']!r}, expected {s['expected']!r}" for s in bad)
        )
    if problems:
        w = r.worst or {}
        where = (
            (
                f"worst input x = {w.get('x')!r} ({w.get('x_hex')}): got {w.get('got')!r}, "
                f"exact {w.get('exact')!r}"
            )
            if w
            else "no finite result"
        )
        fs = "; ".join(
            f"{f.kind}: {f.count} inputs in {f.intervals[:3]}" + (f" ({f.cause['text']})" if f.cause else "")
            for f in r.findings
        )
        on = "" if r.semantics is None else f" under {r.semantics.name}"
        raise AssertionError(
            f"{cand.id} in {fmt.name} (compute {cf.name}){on}: {', '.join(problems)}; "
            f"{where}" + (f"; findings: {fs}" if fs else "")
        )
    return r


__all__ = ["assert_accuracy", "callable_candidate"]
