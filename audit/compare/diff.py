"""Differential audits: two implementations on the same inputs (``actaudit diff A B``).

Both candidates (catalog ids, ``pkg.module:function``, ``torch:NAME``, ``jax:NAME``,
``dump:FILE`` device dumps) run on the same inputs of one storage format (and compute
format), and the oracle gives the exact value at each.  A :class:`DiffResult` has:

* ``identical``: the share of inputs whose two outputs have the same bits (every NaN
  counts as one pattern; +0 and -0 are different bits, counted in ``zero_sign``);
* ``max_distance``: the largest ULP distance |ord(a) - ord(b)| between the two outputs
  on the format's number line (+-inf one step past the largest finite value; inputs where
  exactly one output is NaN are counted in ``nan_mismatch`` instead);
* ``intervals``: the disagreements as input intervals (runs of consecutive inputs whose
  outputs differ; for pairs, intervals of the first argument), each with how many inputs
  it holds, at how many A is closer to the exact value, at how many B is, and its largest
  distance;
* ``verdict``: ``identical``; ``A better`` (A is closer wherever they differ by more than
  a tie: B nowhere closer); ``B better``; ``mixed`` (each closer somewhere); or ``same
  error`` (the bits differ, but never the distance to the exact value: +0 against -0, or
  two roundings equally far on either side).  Closer means a smaller ULP error against the exact value; a NaN or
  infinite result where the correctly rounded value is not is farther than any finite one.

Non-finite inputs (+-inf, NaN) of univariate candidates are compared too (``specials``);
a special that differs makes the result not identical.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from audit.errors import BadOptionError, BadParameterError
from audit.io import json_number
from audit.measure.metrics import FINITE, OVERFLOW_OK, _ordinals, point_errors
from audit.numbers.formats import Format, get_format
from audit.numbers.inputs import Domain, domain, pair_domain, special_inputs
from audit.oracle import oracle
from audit.targets import dumps
from audit.targets import engines as adapters
from audit.targets.candidates import Candidate, dump_candidate, resolve

SCHEMA = "actaudit.diff/1"
MAX_INTERVALS = 64
KEEP_LIMIT = 1 << 24  # inputs whose per-input data a report may keep


@dataclass
class DiffResult:
    a: str
    b: str
    reference: str
    dtype: str
    compute: str
    count: int = 0
    exhaustive: bool = True
    same: int = 0
    zero_sign: int = 0
    nan_mismatch: int = 0
    max_distance: int = 0
    worst: dict | None = None  # the input of the largest distance
    a_closer: int = 0
    b_closer: int = 0
    ties: int = 0
    a_max_ulp: float = 0.0
    b_max_ulp: float = 0.0
    intervals: list = field(default_factory=list)  # dicts lo, hi, count, a_closer, b_closer, max_distance
    intervals_total: int = 0
    specials: list = field(default_factory=list)
    params: dict = field(default_factory=dict)
    identities: dict = field(default_factory=dict)  # "a", "b": each candidate's Candidate.identity
    points: dict | None = field(default=None, repr=False)  # per input, with keep=True (reports)

    @property
    def identical_fraction(self) -> float:
        return self.same / self.count if self.count else math.nan

    @property
    def differing(self) -> int:
        return self.count - self.same

    @property
    def verdict(self) -> str:
        if self.differing == 0 and all(s["same"] for s in self.specials):
            return "identical"
        a = self.a_closer + sum(s["closer"] == "A" for s in self.specials)
        b = self.b_closer + sum(s["closer"] == "B" for s in self.specials)
        if a and not b:
            return "A better"
        if b and not a:
            return "B better"
        return "mixed" if a and b else "same error"

    def to_dict(self) -> dict:
        return {
            "a": self.a,
            "b": self.b,
            "reference": self.reference,
            "dtype": self.dtype,
            "compute": self.compute,
            "params": self.params,
            "inputs": {"count": self.count, "exhaustive": self.exhaustive},
            "identical": self.same,
            "identical_fraction": json_number(self.identical_fraction),
            "differing": self.differing,
            "zero_sign": self.zero_sign,
            "nan_mismatch": self.nan_mismatch,
            "max_distance": self.max_distance,
            "worst": None
            if self.worst is None
            else {k: json_number(v) if not isinstance(v, str) else v for k, v in self.worst.items()},
            "a_closer": self.a_closer,
            "b_closer": self.b_closer,
            "ties": self.ties,
            "a_max_ulp": json_number(self.a_max_ulp),
            "b_max_ulp": json_number(self.b_max_ulp),
            "intervals": [
                {**iv, "lo": json_number(iv["lo"]), "hi": json_number(iv["hi"])}
                for iv in self.intervals[:MAX_INTERVALS]
            ],
            "intervals_total": self.intervals_total,
            "specials": [
                {k: json_number(v) if isinstance(v, float) else v for k, v in s.items()}
                for s in self.specials
            ],
            "verdict": self.verdict,
        }


def _score(e) -> np.ndarray:
    """Distance to the exact value for 'closer': the ULP error of finite results, 0 for a
    correctly rounded overflow, inf for a NaN or infinite result that is wrong."""
    s = np.where(e.cls == FINITE, e.ulp_err, np.inf)
    s[e.cls == OVERFLOW_OK] = 0.0
    return s


def _same_bits(fmt: Format, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(same bits, NaN counted as one pattern; zeros of opposite signs)."""
    with np.errstate(all="ignore"):
        na, nb = np.isnan(a), np.isnan(b)
        eq = (a == b) & (np.signbit(a) == np.signbit(b))
        zs = (a == 0) & (b == 0) & (np.signbit(a) != np.signbit(b))
        return eq | (na & nb), zs


def load(target: str, fmt: Format, reference: str | None, device: str = "cpu", params: dict | None = None):
    """A candidate from any target; (candidate, dump domain or None).  params: the -p values,
    of which an engine target (ort:OP) takes those its op has."""
    if target.startswith("dump:"):
        if reference is None:
            raise BadOptionError(f"{target}: give the dump's function with --reference (e.g. gelu)")
        d = dumps.read_dump(target[5:], fmt)
        return dump_candidate(d, reference)
    if adapters.is_external(target):
        return adapters.external_candidate(target, reference, fmt, device, params=params), None
    found = resolve([target])
    if len(found) != 1:
        raise BadOptionError(
            f"'{target}' names {len(found)} candidates; diff takes one each (e.g. {found[0].id})"
        )
    return found[0], None


def _engine_keys(c) -> set:
    """The -p names an engine candidate took (its attributes and PREFIX.options)."""
    key = getattr(c, "session_key", None)
    if key is None:
        return set()
    return set(key.attrs) | {f"{key.engine}.{k}" for k in key.opts}


def diff(
    a: str,
    b: str,
    dtype="fp16",
    compute=None,
    *,
    range=None,
    samples: int | None = None,
    seed: int = 0,
    exhaustive: bool = False,
    grid: int | None = None,
    reference: str | None = None,
    params: dict | None = None,
    params_b: dict | None = None,
    device: str = "cpu",
    progress=None,
    keep: bool = False,
) -> DiffResult:
    """Run candidates ``a`` and ``b`` on the same inputs of storage format ``dtype`` and
    compare them with each other and with the exact value.  params: parameters of both
    (those each has); params_b: parameters of b only (overriding params).  keep: keep per
    input x (and x2), the distance and which is closer (0 same bits, 1 A, 2 B, 3 tie), as
    ``points`` (for reports; at most KEEP_LIMIT inputs)."""
    fmt = get_format(dtype)
    both = {**(params or {}), **(params_b or {})}
    ca, da = load(a, fmt, reference, device, params)
    cb, db = load(b, fmt, reference, device, both)
    for k in both:
        taken = [c for c in (ca, cb) if k in c.params or k in _engine_keys(c)]
        if not taken:
            raise BadParameterError(f"neither {ca.id} nor {cb.id} takes a parameter '{k}'")
    if ca.reference != cb.reference:
        raise BadOptionError(
            f"{ca.id} approximates {ca.reference} and {cb.id} {cb.reference}: "
            "diff compares implementations of one function"
        )
    if reference is not None and ca.reference != reference:
        raise BadOptionError(f"{ca.id} approximates {ca.reference}, not --reference {reference}")
    pa = {k: v for k, v in (params or {}).items() if k in ca.params}
    pb = {k: v for k, v in {**(params or {}), **(params_b or {})}.items() if k in cb.params}
    pa, pb = ca.resolve_params(pa), cb.resolve_params(pb)
    ref = ca.ref
    ref_params = ref.with_defaults(ca.reference_params(pa))
    if ref.with_defaults(cb.reference_params(pb)) != ref_params:
        raise BadOptionError("the two candidates' parameters give different exact functions")
    cf = get_format(compute) if compute is not None else fmt
    dom = da or db
    if dom is not None:
        vals = np.sort(dom.values)
        dom = Domain(fmt, dom.exhaustive, len(vals), values=vals)
    elif ref.arity == 2:
        dom = pair_domain(fmt, range, side=grid, seed=seed, exhaustive=exhaustive)
    else:
        dom = domain(
            fmt, range, samples=None if fmt.enumerable else samples, seed=seed, exhaustive=exhaustive
        )
    if not dom.count:  # (a dump of non-finite inputs alone, an empty one): no evidence
        raise BadOptionError(
            f"{ca.id} vs {cb.id} [{fmt.name}]: 0 finite inputs to compare: zero inputs prove nothing"
        )
    if keep and dom.count > KEEP_LIMIT:
        raise BadOptionError(
            f"per-input data (reports) of {dom.count} inputs would not fit in "
            f"memory (limit {KEEP_LIMIT}): narrow --range or --grid"
        )
    res = DiffResult(
        ca.id, cb.id, ca.reference, fmt.name, cf.name, 0, dom.exhaustive, params={"a": pa, "b": pb}
    )
    res.identities = {"a": dict(ca.identity), "b": dict(cb.identity)}
    kept: list = []
    last_run = None  # the run open at the end of the previous chunk
    if progress and hasattr(progress, "start"):
        progress.start(f"diff {ca.id} {cb.id} {fmt.name}", dom.count)
    for part in dom.chunks():
        x, x2 = part if isinstance(part, tuple) else (part, None)
        ga = ca.evaluate(x, fmt, cf, pa, x2)
        gb = cb.evaluate(x, fmt, cf, pb, x2)
        ov = oracle.evaluate(ref, fmt, x, ref_params, x2)

        def settle_a(idx, ov=ov, x=x, x2=x2):  # bound now: the errors may settle lazily, later
            return oracle.settle(ref, fmt, ov, idx, x, ref_params, x2)

        ea = point_errors(x, ga, ov, fmt, x2, settle_a)
        eb = point_errors(x, gb, ov, fmt, x2, settle_a)
        _fold(res, fmt, x, x2, ga, gb, ea, eb)
        last_run = _runs(res, fmt, x, x2, ga, gb, ea, eb, last_run)
        if keep:
            kept.append(_points(fmt, x, x2, ga, gb, ea, eb))
        if progress:
            progress(len(x))
    if ref.arity == 1:  # a dump's own non-finite inputs (those it holds), else the format's
        dumped = [c.special_inputs for c, d in ((ca, da), (cb, db)) if d is not None]
        xs = None if not dumped else _union(dumped)
        res.specials = _specials(ca, cb, fmt, cf, pa, pb, ref_params, xs)
    if keep and kept:
        res.points = {
            k: (None if kept[0][k] is None else np.concatenate([p[k] for p in kept])) for k in kept[0]
        }
    return res


def _points(fmt, x, x2, ga, gb, ea, eb) -> dict:
    same, _ = _same_bits(fmt, ga, gb)
    sa, sb = _score(ea), _score(eb)
    closer = np.where(same, 0, np.where(sa < sb, 1, np.where(sb < sa, 2, 3))).astype(np.int8)
    d, one_nan = _distance(fmt, ga, gb)
    return {
        "x": np.asarray(x, dtype=np.float64),
        "x2": None if x2 is None else np.asarray(x2, dtype=np.float64),
        "distance": np.where(one_nan, -1, d),
        "closer": closer,
    }


def _distance(fmt: Format, ga, gb) -> tuple[np.ndarray, np.ndarray]:
    """(ULP distance, one output NaN and the other not)."""
    with np.errstate(all="ignore"):
        na, nb = np.isnan(ga), np.isnan(gb)
        if fmt.has_inf:
            one_nan = na != nb
        else:  # E4M3FN: NaN is the overflow value, one step past the largest finite
            one_nan = np.zeros(len(ga), bool)
        d = np.abs(_ordinals(fmt, np.where(na & nb, 0.0, ga)) - _ordinals(fmt, np.where(na & nb, 0.0, gb)))
        d[one_nan] = 0
        return d, one_nan


def _fold(res: DiffResult, fmt, x, x2, ga, gb, ea, eb) -> None:
    same, zs = _same_bits(fmt, ga, gb)
    n = len(x)
    res.count += n
    res.same += int(np.count_nonzero(same))
    res.zero_sign += int(np.count_nonzero(zs))
    d, one_nan = _distance(fmt, ga, gb)
    res.nan_mismatch += int(np.count_nonzero(one_nan))
    if n and d.max() > res.max_distance:
        i = int(np.argmax(d))
        res.max_distance = int(d[i])
        res.worst = {
            "x": float(x[i]),
            "x_hex": fmt.hex(float(x[i])),
            "a": float(ga[i]),
            "b": float(gb[i]),
            "exact": float(ea.exact[i]),
        }
        if x2 is not None:
            res.worst["x2"] = float(x2[i])
    sa, sb = _score(ea), _score(eb)
    diff = ~same
    res.a_closer += int(np.count_nonzero(diff & (sa < sb)))
    res.b_closer += int(np.count_nonzero(diff & (sb < sa)))
    res.ties += int(np.count_nonzero(diff & (sa == sb)))
    for e, attr in ((ea, "a_max_ulp"), (eb, "b_max_ulp")):
        fin = e.cls == FINITE
        if fin.any():
            setattr(res, attr, max(getattr(res, attr), float(e.ulp_err[fin].max())))


def _runs(res: DiffResult, fmt, x, x2, ga, gb, ea, eb, last_run):
    """Append this chunk's disagreement runs (over x; for pairs over distinct x) to res,
    joining the first with the previous chunk's last when they are adjacent."""
    same, _ = _same_bits(fmt, ga, gb)
    diff = ~same
    sa, sb = _score(ea), _score(eb)
    d, _ = _distance(fmt, ga, gb)
    if x2 is not None:  # per distinct x (ascending): counts summed over its pairs
        ux, inv = np.unique(x, return_inverse=True)
        inv = inv.reshape(-1)
        red = lambda v: np.bincount(inv, weights=v, minlength=len(ux)).astype(np.int64)  # noqa: E731
        cnt, ac, bc = red(diff), red(diff & (sa < sb)), red(diff & (sb < sa))
        md = np.zeros(len(ux), np.int64)
        np.maximum.at(md, inv, np.where(diff, d, 0))
        xs, mask = ux, cnt > 0
    else:
        xs, mask = x, diff
        cnt, ac, bc = (
            diff.astype(np.int64),
            (diff & (sa < sb)).astype(np.int64),
            (diff & (sb < sa)).astype(np.int64),
        )
        md = np.where(diff, d, 0)
    m = mask.view(np.int8) if mask.dtype == bool else mask.astype(np.int8)
    if not m.any():
        return None
    dd = np.diff(m, prepend=np.int8(0), append=np.int8(0))
    starts, ends = np.flatnonzero(dd == 1), np.flatnonzero(dd == -1)
    runs = []
    for s, e in zip(starts.tolist(), ends.tolist()):
        runs.append(
            {
                "lo": float(xs[s]),
                "hi": float(xs[e - 1]),
                "count": int(cnt[s:e].sum()),
                "a_closer": int(ac[s:e].sum()),
                "b_closer": int(bc[s:e].sum()),
                "max_distance": int(md[s:e].max()),
            }
        )
    first = runs[0]
    if (
        last_run is not None
        and int(fmt.ordinal([first["lo"]])[0]) - int(fmt.ordinal([last_run["hi"]])[0]) <= 1
    ):
        last_run["hi"] = first["hi"]
        for k in ("count", "a_closer", "b_closer"):
            last_run[k] += first[k]
        last_run["max_distance"] = max(last_run["max_distance"], first["max_distance"])
        runs = runs[1:]
    for r in runs:
        res.intervals_total += 1
        if len(res.intervals) < MAX_INTERVALS:
            res.intervals.append(r)
    tail_open = bool(mask[-1])
    if not tail_open:
        return None
    return runs[-1] if runs else last_run


def _union(groups) -> list:
    """The non-finite inputs of the dumps, each once (NaN once whatever its payload)."""
    out: list = []
    for g in groups:
        for v in g or ():
            if not any((math.isnan(v) and math.isnan(o)) or v == o for o in out):
                out.append(float(v))
    return out


def _specials(ca: Candidate, cb: Candidate, fmt: Format, cf: Format, pa, pb, ref_params, xs=None) -> list:
    """Both candidates at the non-finite inputs ``xs`` (default: the format's)."""
    xs = special_inputs(fmt) if xs is None else xs
    if not xs:
        return []
    x = np.array(xs)
    ga, gb = ca.evaluate(x, fmt, cf, pa), cb.evaluate(x, fmt, cf, pb)
    out = []
    for v, a, b in zip(xs, ga.tolist(), gb.tolist()):
        exp = float(fmt.round([ca.ref.special(v, ref_params)])[0])
        same_ab = (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))

        def ok(g, exp=exp):
            return (math.isnan(g) and math.isnan(exp)) or g == exp

        closer = None if same_ab or ok(a) == ok(b) else ("A" if ok(a) else "B")
        out.append({"x": v, "a": a, "b": b, "expected": exp, "same": same_ab, "closer": closer})
    return out


def document(results: list[DiffResult], **meta) -> dict:
    from audit._version import __version__

    return {"schema": SCHEMA, "actaudit": __version__, **meta, "results": [r.to_dict() for r in results]}
