"""Suggest: which candidate to ship for a reference in an evaluation path, and how to
repair the ones that break.

Every candidate of the reference (the catalog's, plus extra ones such as fitted kernels)
is swept in the path (storage format F, compute format C) and ranked:

1. correctness first: no NaN and no spurious infinity (``nan_count + inf_count == 0``),
   then the special inputs (+-inf, NaN) right, then the largest ULP error, then the p99;
2. then cost: the weighted operation count of :mod:`audit.repair.cost`.

The **Pareto front** holds the candidates that no other candidate beats on both
accuracy (max ULP; NaN, spurious infinities or wrong specials count as infinitely
inaccurate) and cost.

Each **recommendation** answers one finding of one candidate (a NaN interval, an
overflow, a flush, a wrong special) with a repair whose effect was verified by a sweep
over the same inputs:

* ``clip``: apply the clip recommendation of :mod:`audit.measure.clip` (clamp the input to the
  saturation thresholds, or return the constant / x past them); the clipped candidate
  is swept again and its figures reported, with the operations it adds;
* ``replace``: switch to the cheapest candidate of the reference that has no finding of
  that kind, no NaN, no spurious infinity and right specials, and is at least as
  accurate (max ULP) as the broken one; failing that, the most accurate such candidate.
  Its figures are those of its own sweep over the same inputs.

A recommendation is printed only once its re-sweep confirms that the finding is gone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from audit.errors import BadOptionError, UnknownNameError
from audit.io import format_number as num
from audit.io import json_number
from audit.measure import clip as clip_mod
from audit.measure import weighting as weighting_mod
from audit.measure.sweep import SweepResult, run_candidate
from audit.numbers.formats import Format, get_format
from audit.numbers.inputs import domain
from audit.oracle.references import get_reference
from audit.repair import cost as cost_mod
from audit.repair import fit_cache
from audit.targets.candidates import Candidate, catalog

SCHEMA = "actaudit.suggest/1"
FAILURES = {"nan", "overflow", "underflow", "sign", "range", "special"}
FIXABLE = (*sorted(FAILURES), "monotonicity")


@dataclass
class Entry:
    cand: Candidate
    result: SweepResult
    counts: dict
    cost: float
    rank: int = 0
    pareto: bool = False
    ns_per_element: float | None = None  # measured C kernel time (--time-c), when one exists

    @property
    def clean(self) -> bool:
        """No NaN and no spurious infinity over the finite inputs."""
        r = self.result
        return r.nan_count == 0 and r.inf_count == 0

    @property
    def accuracy(self) -> float:
        """max ULP, or inf when the candidate gives NaN or spurious infinities."""
        m = self.result.max_ulp
        return m if self.clean and not math.isnan(m) else math.inf

    def kinds(self) -> set:
        return {f.kind for f in self.result.findings}

    def count(self, kind: str) -> int:
        return sum(f.count for f in self.result.findings if f.kind == kind)

    def key(self, rank: str = "max_ulp"):
        r = self.result
        m = r.max_ulp if not math.isnan(r.max_ulp) else math.inf
        p = r.p99_ulp if not math.isnan(r.p99_ulp) else math.inf
        acc = weighting_mod.rank_key(r.weighted, rank) + (m, p)  # () for max_ulp
        return (r.nan_count + r.inf_count > 0, r.special_failures > 0, *acc, self.cost, self.cand.id)

    def to_dict(self) -> dict:
        r = self.result
        return {
            "rank": self.rank,
            "candidate": self.cand.id,
            "formula": self.cand.formula,
            "pareto": self.pareto,
            "max_ulp": json_number(r.max_ulp),
            "p99_ulp": json_number(r.p99_ulp),
            "mean_ulp": json_number(r.mean_ulp),
            "correctly_rounded_fraction": json_number(r.correctly_rounded_fraction),
            "nan_count": r.nan_count,
            "inf_count": r.inf_count,
            "special_failures": r.special_failures,
            "findings": {f.kind: f.count for f in r.findings},
            "ops": self.counts,
            "cost": self.cost,
            "ns_per_element": self.ns_per_element,
            **({"weighted": weighting_mod.to_json(r.weighted)} if r.weighted else {}),
        }


@dataclass
class Suggestion:
    reference: str
    dtype: str
    compute: str
    exhaustive: bool
    inputs: int
    weights: dict
    entries: list = field(default_factory=list)
    recommendations: list = field(default_factory=list)
    semantics: object = None  # audit.targets.semantics.Semantics (None: ieee)
    rank: str = "max_ulp"  # the accuracy figure ranked by (weighted_p99, weighted_mean: --distribution)
    distribution: str | None = None
    # candidates that always compute in another format (engine models pinned to fp32): not
    # ranked in this path, {id: their compute format}
    left_out: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        from audit._version import __version__

        return {
            "schema": SCHEMA,
            "actaudit": __version__,
            "reference": self.reference,
            "dtype": self.dtype,
            "compute": self.compute,
            "semantics": _sem_label(self.semantics),
            "inputs": {"count": self.inputs, "exhaustive": self.exhaustive},
            "cost_weights": self.weights,
            **({"rank": self.rank, "distribution": self.distribution} if self.distribution else {}),
            "ranking": [e.to_dict() for e in self.entries],
            "pareto": [e.cand.id for e in self.entries if e.pareto],
            "left_out": self.left_out,
            "recommendations": self.recommendations,
        }


def _sem_label(sem) -> str:
    from audit.targets import semantics as semantics_mod

    return semantics_mod.label(sem) if sem is not None else "ieee"


def _semantics(sem):
    """A Semantics from a text or a Semantics; None for ieee."""
    from audit.targets import semantics as semantics_mod

    if sem is None:
        return None
    if isinstance(sem, (list, tuple)):
        if len(sem) != 1:
            raise BadOptionError("suggest ranks under one semantics at a time")
        sem = sem[0]
    s = semantics_mod.parse(sem) if isinstance(sem, str) else sem
    if s.stochastic:
        raise BadOptionError("suggest ranks under a deterministic semantics (not round=stochastic)")
    return None if s.is_default else s


def pareto(entries: list[Entry]) -> None:
    """Mark the entries that no other entry beats on both accuracy and cost."""
    for e in entries:
        e.pareto = not any(
            (o.accuracy <= e.accuracy and o.cost <= e.cost) and (o.accuracy < e.accuracy or o.cost < e.cost)
            for o in entries
            if o is not e
        )


def _effect(r: SweepResult) -> dict:
    return {
        "max_ulp": json_number(r.max_ulp),
        "p99_ulp": json_number(r.p99_ulp),
        "nan_count": r.nan_count,
        "inf_count": r.inf_count,
        "special_failures": r.special_failures,
        "findings": {f.kind: f.count for f in r.findings},
    }


def _delta(a: dict, b: dict) -> dict:
    """Operations that b adds to a (negative: removes), by kind."""
    out = {k: b.get(k, 0) - a.get(k, 0) for k in sorted(set(a) | set(b))}
    return {k: v for k, v in out.items() if v}


def _delta_text(d: dict) -> str:
    return ", ".join(f"{v:+d} {k}" for k, v in d.items()) or "same operations"


def _finding_text(f) -> str:
    iv = f.intervals[0] if f.intervals else None
    where = f" for x in [{num(iv[0], 6)}, {num(iv[1], 6)}]" if iv is not None else ""
    more = f" (+{f.intervals_total - 1} more intervals)" if f.intervals_total > 1 else ""
    return f"{f.kind} at {f.count} inputs{where}{more}"


def _effect_text(r: SweepResult) -> str:
    kinds = ", ".join(f"{f.kind} {f.count}" for f in r.findings) or "no finding"
    return f"{r.nan_count} NaN, {r.inf_count} inf, max {num(r.max_ulp)} ULP, p99 {num(r.p99_ulp)}; {kinds}"


def load_extra(target: str) -> Candidate:
    """'module:NAME' whose NAME is a Candidate (a fitted kernel's module)."""
    from audit.targets.engines import load_callable

    obj = load_callable(target)
    if not isinstance(obj, Candidate):
        raise UnknownNameError(f"'{target}' is not a candidate (a fitted module's CANDIDATE)")
    return obj


def suggest(
    reference: str,
    dtype: str = "fp16",
    compute: str | None = None,
    *,
    extra=(),
    weights: dict | None = None,
    samples: int | None = None,
    seed: int = 0,
    repairs: bool = True,
    time_c: bool = False,
    semantics=None,
    progress=None,
    distribution: str | None = None,
    rank: str = "max_ulp",
) -> Suggestion:
    """Sweep every candidate of ``reference`` (and ``extra`` candidates or 'module:NAME'
    targets) in the path (dtype, compute), rank them, mark the Pareto front and (with
    ``repairs``) verify a repair for every finding.  ``semantics`` (a text such as
    'contract,ftz' or a :class:`audit.targets.semantics.Semantics`): the machine every candidate,
    and every repair, is swept and costed under (contracted products count as FMAs).
    ``distribution`` adds the weighted figures (audit/measure/weighting.py) to every entry;
    ``rank`` ('max_ulp', 'weighted_p99', 'weighted_mean'): the accuracy figure ranked by
    after correctness (the weighted ones first, then max ULP and p99)."""
    dist = weighting_mod.for_ranking(distribution, rank)
    sem = _semantics(semantics)
    ref = get_reference(reference)
    if ref.arity != 1:
        raise BadOptionError(f"suggest ranks functions of one input; {reference} takes two")
    st = get_format(dtype)
    cf = get_format(compute) if compute else st
    w = cost_mod.weights(weights)
    cands = [c for c in catalog().values() if c.reference == reference]
    for x in extra:
        c = load_extra(x) if isinstance(x, str) else x
        if c.reference != reference:
            raise BadOptionError(f"{c.id} approximates {c.reference}, not {reference}")
        cands.append(c)
    cands = [c.with_semantics(sem) for c in cands]
    if not cands:
        raise UnknownNameError(f"no candidate approximates {reference}")
    # a candidate pinned to another compute format (an engine's fp32 kernel) does not run in
    # this path: ranking it under "compute C" would misstate what it computes in
    left_out = {c.id: c.compute for c in cands if c.compute and c.compute != cf.name}
    cands = [c for c in cands if c.id not in left_out]
    if not cands:
        pinned = ", ".join(sorted(set(left_out.values())))
        raise BadOptionError(
            f"every candidate of {reference} computes in {pinned}: rank them with --compute {pinned}"
        )
    dom = domain(st, None, samples=None if st.enumerable else samples, seed=seed)
    if dist is not None:
        weighting_mod.check_sweep([st], False, None, None, None)
        dist = weighting_mod.bind(dist, st)
    entries = []
    for c in cands:
        r = run_candidate(c, st, cf, dom, None, progress=progress, weights=dist)
        n = cost_mod.counts(c, cf)
        entries.append(Entry(c, r, n, cost_mod.cost(n, w)))
    if time_c:
        for e in entries:
            e.ns_per_element = c_time(e.cand, st)
    entries.sort(key=lambda e: e.key(rank))
    for i, e in enumerate(entries, 1):
        e.rank = i
    pareto(entries)
    s = Suggestion(
        reference, st.name, cf.name, dom.exhaustive, dom.count, w, entries, semantics=sem, left_out=left_out
    )
    if dist is not None:
        s.rank, s.distribution = rank, dist.label
    if repairs:
        s.recommendations = _recommend(entries, st, cf, dom, w, progress)
    return s


def _recommend(entries: list[Entry], st: Format, cf: Format, dom, w: dict, progress) -> list:
    out = []
    for e in entries:
        found = [f for f in e.result.findings if f.kind in FIXABLE]
        if not found:
            continue
        clipped = _clip_fix(e, st, cf, dom, progress)
        guarded = _special_fix(e, st, cf, dom, progress)
        for f in found:
            rec = {
                "candidate": e.cand.id,
                "finding": f.kind,
                "count": f.count,
                "problem": _finding_text(f),
                "repairs": [],
            }
            if clipped is not None:
                c, r, n = clipped
                if f.kind not in {g.kind for g in r.findings}:
                    rec["repairs"].append(
                        {
                            "action": "clip",
                            "candidate": c.id,
                            "formula": c.formula,
                            "clip": clip_mod.to_json(e.result.clip),
                            "verified": _effect(r),
                            "ops_added": _delta(e.counts, n),
                            "cost": cost_mod.cost(n, w),
                            "text": f"{clip_text(e.result.clip)}: "
                            f"{_effect_text(r)}; {_delta_text(_delta(e.counts, n))}",
                        }
                    )
            if guarded is not None and f.kind == "special":
                c, r, n = guarded
                if r.special_failures == 0:
                    rec["repairs"].append(
                        {
                            "action": "guard",
                            "candidate": c.id,
                            "formula": c.formula,
                            "verified": _effect(r),
                            "ops_added": _delta(e.counts, n),
                            "cost": cost_mod.cost(n, w),
                            "text": f"{c.formula.split(', guarded: ')[-1]}: {_effect_text(r)}; "
                            f"{_delta_text(_delta(e.counts, n))}",
                        }
                    )
            alt = _alternative(e, f.kind, entries)
            if alt is not None:
                rec["repairs"].append(
                    {
                        "action": "replace",
                        "candidate": alt.cand.id,
                        "formula": alt.cand.formula,
                        "verified": _effect(alt.result),
                        "ops_added": _delta(e.counts, alt.counts),
                        "cost": alt.cost,
                        "text": f"{alt.cand.id}: {_effect_text(alt.result)}; "
                        f"{_delta_text(_delta(e.counts, alt.counts))}",
                    }
                )
            if not rec["repairs"] and st.enumerable:
                rec["repairs"].append(_fit_repair(e.cand.reference, st, w))
            out.append(rec)
    return out


def _fit_repair(reference: str, st: Format, w: dict) -> dict:
    """Where no catalog candidate, clip or guard repairs a finding: the correctly rounded
    kernel `actaudit fit` synthesizes (fp32 compute, verified by the fit at every input), with
    its operation count and measured time per element when this machine has fitted it (the
    fit cache), else the command to run."""
    cmd = fit_cache.command(reference, st.name)
    hit = fit_cache.lookup(reference, st.name)
    if hit is None:
        return {
            "action": "fit",
            "command": cmd,
            "cached": False,
            "ops": None,
            "cost": None,
            "ns_per_element": None,
            "text": f"run `{cmd}` for a correctly rounded kernel (fp32 compute, verified at "
            "every input); suggest quotes its operation count and time per element once it has run",
        }
    ns = hit["ns_per_element"]
    t = "" if ns is None else f", {num(ns)} ns per element (its C version, measured at fit time)"
    return {
        "action": "fit",
        "command": cmd,
        "cached": True,
        "ops": hit["ops"],
        "cost": cost_mod.cost(hit["ops"], w),
        "ns_per_element": ns,
        "text": f"`{cmd}`: a correctly rounded kernel (fp32 compute), verified at every input; "
        f"fitted on this machine: {cost_mod.describe(hit['ops'])} (cost {num(cost_mod.cost(hit['ops'], w))}){t}",
    }


def _clip_fix(e: Entry, st: Format, cf: Format, dom, progress):
    """The clipped candidate, its re-sweep and its operation counts (None: no clip helps)."""
    c = e.result.clip
    if not c or (c["lo_action"] == "none" and c["hi_action"] == "none") or e.result.saturation is None:
        return None
    fixed = clip_mod.apply(e.cand, c, e.result.saturation)
    r = run_candidate(fixed, st, cf, dom, e.result.params, progress=progress)
    return fixed, r, cost_mod.counts(fixed, cf, e.result.params)


def _special_fix(e: Entry, st: Format, cf: Format, dom, progress):
    """The candidate with its wrong infinite inputs answered by a select (x < -max: f(-inf);
    x > max: f(+inf)), its re-sweep and operation counts (None: no infinite input wrong)."""
    bad = [s for s in e.result.specials if not s["ok"] and math.isinf(s["x"])]
    if not bad:
        return None
    m = st.max_finite
    c = {"lo": None, "hi": None, "lo_action": "none", "hi_action": "none"}
    sat = {"low": None, "high": None}
    for s in bad:
        side, key = ("lo", "low") if s["x"] < 0 else ("hi", "high")
        c[side], c[f"{side}_action"] = (-m if side == "lo" else m), "constant"
        sat[key] = {"x": s["x"], "value": s["expected"]}
    fixed = clip_mod.apply(e.cand, c, sat)
    what = "; ".join(f"return {num(s['expected'], 6)} at x = {num(s['x'], 6)}" for s in bad)
    fixed = replace(fixed, id=f"{e.cand.id}+guard", formula=f"{e.cand.formula}, guarded: {what}")
    r = run_candidate(fixed, st, cf, dom, e.result.params, progress=progress)
    return fixed, r, cost_mod.counts(fixed, cf, e.result.params)


def c_source_of(cand: Candidate):
    """The C version of a candidate: NAME.c next to the module that defines its formula
    (as ``actaudit fit`` writes them), with a function NAME; None if there is none."""
    import inspect
    from pathlib import Path

    try:
        src = inspect.getsourcefile(cand.fn)
    except TypeError:
        return None
    if not src:
        return None
    c = Path(src).with_suffix(".c")
    return (c, Path(src).stem) if c.is_file() else None


def c_time(cand: Candidate, fmt: Format, repeat: int = 7) -> float | None:
    """Median ns per element of the candidate's C version (gcc -O2 -ffp-contract=off, called
    through ctypes) over every finite value of fmt, repeated to about 2^20 elements; None
    when it has no C version or gcc is missing.  A measurement: not deterministic."""
    found = c_source_of(cand)
    if found is None:
        return None
    return time_c_file(found[0], found[1], fmt, repeat)


def time_c_file(c, name: str, fmt: Format, repeat: int = 7) -> float | None:
    """Median ns per element of ``void NAME(const float *x, float *y, size_t n)`` in the C
    file c (as c_time measures it); None when gcc is missing or the file has no NAME."""
    import ctypes
    import shutil
    import statistics
    import subprocess
    import tempfile
    import time

    if shutil.which("gcc") is None:
        return None
    with tempfile.TemporaryDirectory(prefix="actaudit-c-") as tmp:
        so = f"{tmp}/{name}.so"
        r = subprocess.run(
            ["gcc", "-O2", "-ffp-contract=off", "-shared", "-fPIC", "-o", so, str(c), "-lm"],
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            raise BadOptionError(f"{c}: gcc failed: {r.stderr.strip().splitlines()[-1] if r.stderr else ''}")
        lib = ctypes.CDLL(so)
        if not hasattr(lib, name):
            return None
        f = getattr(lib, name)
        f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
        f.restype = None
        x = fmt.finite_values() if fmt.enumerable else np.linspace(-10, 10, 1 << 16)
        x = np.ascontiguousarray(np.resize(x.astype(np.float32), max(len(x), 1 << 20)))
        y = np.empty_like(x)
        f(x.ctypes.data, y.ctypes.data, x.size)
        ts = []
        for _ in range(repeat):
            t = time.perf_counter()
            f(x.ctypes.data, y.ctypes.data, x.size)
            ts.append(time.perf_counter() - t)
    return statistics.median(ts) / x.size * 1e9


def for_results(
    results, *, weights: dict | None = None, samples: int | None = None, seed: int = 0, progress=None
) -> list[Suggestion]:
    """One suggestion per (reference, storage, compute, semantics) of sweep results, in the
    order the results first name them: the paths an HTML report shows.  Results that suggest
    cannot rank are left out: references of two inputs, derivatives and backward kernels,
    an --out-dtype, a native compute, a stochastic rounding, references without a catalog
    candidate."""
    from audit.oracle.references import REFERENCES

    refs = {c.reference for c in catalog().values()}
    seen, out = set(), []
    for r in results:
        sem = getattr(r, "semantics", None)
        key = (r.reference, r.dtype, r.compute, None if sem is None else _sem_label(sem))
        if key in seen or r.out_dtype or r.reference not in refs or r.reference not in REFERENCES:
            continue
        seen.add(key)
        if get_reference(r.reference).arity != 1 or (sem is not None and sem.stochastic):
            continue
        try:
            get_format(r.compute)
        except UnknownNameError:
            continue  # native (a library's own arithmetic): no path to rank in
        out.append(
            suggest(
                r.reference,
                r.dtype,
                r.compute,
                weights=weights,
                samples=samples,
                seed=seed,
                semantics=sem,
                progress=progress,
            )
        )
    return out


def clip_text(c: dict) -> str:
    """'clamp x to <= 11.09 (the saturation threshold)' and the like."""
    parts = []
    for side, rel in (("lo", ">="), ("hi", "<=")):
        a, b = c[f"{side}_action"], c[side]
        if a == "clamp":
            parts.append(f"clamp x to {rel} {num(b, 6)}")
        elif a in ("identity", "constant"):
            parts.append(
                f"return {'x' if a == 'identity' else 'the saturation value'} "
                f"for x {'<' if side == 'lo' else '>'} {num(b, 6)}"
            )
    return "; ".join(parts) + " (f has saturated there)"


def _alternative(e: Entry, kind: str, entries: list[Entry]) -> Entry | None:
    """Among the clean candidates with fewer inputs of this kind of finding and no more
    wrong specials (preferring the fewest, then those without other failure findings):
    the cheapest at least as accurate as e; else, where e gives NaN or spurious
    infinities, the most accurate."""
    n = e.count(kind)
    ok = [
        o
        for o in entries
        if o is not e
        and o.clean
        and o.count(kind) < n
        and o.result.special_failures <= e.result.special_failures
    ]
    if not ok:
        return None
    own = e.result.max_ulp if not math.isnan(e.result.max_ulp) else math.inf
    fails = lambda o: (o.count(kind), len(o.kinds() & FAILURES))  # noqa: E731
    good = [o for o in ok if o.accuracy <= own]
    if good:
        return min(good, key=lambda o: (fails(o), o.cost, o.accuracy, o.cand.id))
    if not e.clean:
        return min(ok, key=lambda o: (fails(o), o.accuracy, o.cost, o.cand.id))
    return None
