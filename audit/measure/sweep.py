"""The sweep: format -> inputs -> oracle -> candidate -> errors -> summary.

:func:`sweep` is the Python API behind ``actaudit sweep``; it returns one
:class:`SweepResult` per candidate and evaluation path (storage format x
compute format), with the fields of the JSON document.
"""

from __future__ import annotations

import itertools
import math
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace

import numpy as np

from audit.errors import BadOptionError, BadParameterError, UnknownNameError
from audit.io import json_number
from audit.measure import arguments, native_check, param_effect, replay
from audit.measure import clip as clip_mod
from audit.measure import findings as findings_mod
from audit.measure import weighting as weighting_mod
from audit.measure.executors import EXECUTORS, engine_threads, run_chunks
from audit.measure.metrics import EXACT_P99_LIMIT, PointErrors, Summary, point_errors
from audit.numbers.formats import Format, get_format, parse_formats
from audit.numbers.inputs import CHUNK, Domain, domain, pair_domain, special_inputs
from audit.oracle import oracle
from audit.targets import dumps
from audit.targets import engines as adapters
from audit.targets import engines as engines_mod
from audit.targets import semantics as semantics_mod
from audit.targets.candidates import Candidate, catalog, dump_candidate, families, resolve

SCHEMA = "actaudit.sweep/1"
KEEP_LIMIT = 1 << 24  # inputs whose per-input data may be kept in memory
NATIVE = "native"  # the compute of callables and framework ops: their own arithmetic
AUTO = "auto"  # compute: the storage format itself, and fp32 for formats narrower than 32 bits


@dataclass
class SweepResult:
    candidate: str
    reference: str
    dtype: str
    compute: str
    params: dict
    domain: Domain = field(repr=False)
    summary: Summary = field(repr=False)
    specials: list = field(default_factory=list)
    oracle_mpmath: int = 0
    seconds: float = 0.0
    points: PointErrors | None = field(default=None, repr=False)  # per-input data, when kept
    findings: list = field(default_factory=list)
    saturation: dict | None = None
    clip: dict | None = None
    hidden: list = field(default_factory=list)
    semantics: object = None  # audit.targets.semantics.Semantics (None: ieee)
    stochastic: dict | None = None  # worst case and mean over the draws of round=stochastic
    changed: dict | None = None  # inputs whose result differs from the ieee run's
    out_dtype: str | None = None  # the output format (--out-dtype) when it differs from dtype
    param_effect: dict | None = None  # swept parameter -> its effect (audit/measure/param_effect.py)
    weighted: dict | None = None  # figures weighted by --distribution (audit/measure/weighting.py)
    identity: dict = field(default_factory=dict)  # the candidate's own identity (Candidate.identity)

    @property
    def formats_label(self) -> str:
        """'bf16', or 'bf16->fp8_e4m3' with an output format (--out-dtype)."""
        return self.dtype + (f"->{self.out_dtype}" if self.out_dtype else "")

    # fields of the JSON document --------------------------------------------
    @property
    def max_ulp(self) -> float:
        return self.summary.max_ulp if self.summary.finite else math.nan

    @property
    def worst(self) -> dict | None:
        return self.summary.worst

    @property
    def mean_ulp(self) -> float:
        return self.summary.mean_ulp

    @property
    def p99_ulp(self) -> float:
        return self.summary.p99_ulp

    @property
    def max_abs(self) -> float:
        return self.summary.max_abs

    @property
    def max_rel(self) -> float:
        return self.summary.max_rel

    @property
    def max_ulp_distance(self) -> int:
        return self.summary.max_ulp_distance

    @property
    def correctly_rounded_fraction(self) -> float:
        return self.summary.correctly_rounded_fraction

    @property
    def nan_count(self) -> int:
        return self.summary.nan_count

    @property
    def inf_count(self) -> int:
        return self.summary.inf_count

    @property
    def overflow_miss_count(self) -> int:
        return self.summary.overflow_miss

    @property
    def special_failures(self) -> int:
        return sum(not s["ok"] for s in self.specials)

    def to_dict(self) -> dict:
        s = self.summary
        w = None
        if s.worst is not None:
            w = {k: (json_number(v) if not isinstance(v, str) else v) for k, v in s.worst.items()}
        return {
            "candidate": self.candidate,
            "reference": self.reference,
            "dtype": self.dtype,
            "out_dtype": self.out_dtype or self.dtype,
            "compute": self.compute,
            "params": self.params,
            "inputs": {
                "count": self.domain.count,
                "exhaustive": self.domain.exhaustive,
                "specials": len(self.specials),
            },
            "max_ulp": json_number(self.max_ulp),
            "worst": w,
            "mean_ulp": json_number(self.mean_ulp),
            "p99_ulp": json_number(self.p99_ulp),
            "p99_exact": s.p99_exact,
            "max_abs": json_number(self.max_abs),
            "max_rel": json_number(self.max_rel),
            "max_ulp_distance": self.max_ulp_distance,
            "correctly_rounded_fraction": json_number(self.correctly_rounded_fraction),
            "nan_count": s.nan_count,
            "inf_count": s.inf_count,
            "overflow_ok_count": s.overflow_ok,
            "overflow_miss_count": s.overflow_miss,
            "undefined_count": s.undefined,
            "finite_count": s.finite,
            "specials": [
                {k: json_number(v) if k in ("x", "got", "expected") else v for k, v in sp.items()}
                for sp in self.specials
            ],
            "special_failures": self.special_failures,
            "oracle_mpmath_count": self.oracle_mpmath,
            "findings": [f.to_dict() for f in self.findings],
            "saturation": _sat_json(self.saturation),
            "clip": clip_mod.to_json(self.clip),
            "hidden": self.hidden,
            "semantics": semantics_mod.result_json(self.semantics, self.stochastic, self.changed),
            **({"param_effect": self.param_effect} if self.param_effect else {}),
            **({"weighted": weighting_mod.to_json(self.weighted)} if self.weighted else {}),
            **({"identity": self.identity} if self.identity else {}),
        }


def _sat_json(s):
    if s is None:
        return None
    return {
        k: (
            None
            if v is None
            else {
                "x": json_number(v["x"]),
                "value": v["value"] if isinstance(v["value"], str) else json_number(v["value"]),
            }
        )
        for k, v in s.items()
    }


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def check_specials(
    cand: Candidate,
    storage: Format,
    compute_fmt: Format,
    params: dict,
    ref_params: dict,
    inputs: Format | None = None,
) -> list[dict]:
    """The non-finite inputs (of ``inputs``, default the storage format), results in storage."""
    xs = special_inputs(inputs or storage) if cand.special_inputs is None else list(cand.special_inputs)
    if not xs:
        return []
    got = cand.evaluate(np.array(xs), storage, compute_fmt, params)
    ref = cand.ref
    out = []
    for x, g in zip(xs, got.tolist()):
        exp = float(storage.round([ref.special(x, ref_params)])[0])
        out.append({"x": x, "got": g, "expected": exp, "ok": _same(g, exp)})
    return out


@dataclass
class _Job:
    cand: Candidate
    storage: Format
    compute: Format
    params: dict
    ref_params: dict
    analyze: bool
    keep: bool
    dom: Domain
    inputs: Format | None = None  # the input format where it differs from storage (the output)
    outputs: bool = False  # keep the outputs' bits or digests (audit/measure/param_effect.py)
    weights: weighting_mod.Distribution | None = None  # --distribution, bound to the inputs' format


def _chunk(job: _Job, part):
    """(summary, findings, hidden, mpmath count, point errors or None, monotone edges or
    None) of one chunk."""
    x, x2 = part if isinstance(part, tuple) else (part, None)
    c, st = job.cand, job.storage
    if job.inputs is None:
        ov = oracle.evaluate(c.ref, st, x, job.ref_params, x2)
    else:  # inputs of another format: no per-format cache; mpmath alone for fp64 inputs
        ov = (
            oracle._compute(c.ref, st, x, job.ref_params, x2)
            if job.inputs.p <= 24
            else oracle.exact_points(c.ref, x, st, job.ref_params, x2)
        )
    watched = [] if job.analyze and x2 is None else None  # for the hidden-overflow scan
    got = c.evaluate(x, st, job.compute, job.params, x2, trace=watched, watch=True)
    e = point_errors(
        x,
        got,
        ov,
        st,
        x2,
        settle=lambda idx: oracle.settle(c.ref, st, ov, idx, x, job.ref_params, x2),
        beyond=lambda idx, g: oracle.beyond_errors(
            c.ref, st, x[idx], g, job.ref_params, None if x2 is None else x2[idx]
        ),
    )
    s = Summary(exact_p99=job.dom.count <= EXACT_P99_LIMIT)
    s.add(e, st)
    if job.inputs is not None and s.worst is not None:  # inputs written in their own format
        for k in ("x", "b"):
            if k in s.worst:
                s.worst[k + "_hex"] = job.inputs.hex(s.worst[k])
    found, hid, edges = [], [], None
    if job.analyze:
        masks = findings_mod.masks(e, c, st, job.ref_params)
        found = findings_mod.find(e, c, st, job.compute, job.params, job.ref_params, masks)
        if job.keep:  # (for the clip's default tolerance: run_candidate)
            e.failing = findings_mod.failing(e, c, st, job.ref_params, masks)
        hid = findings_mod.hidden(c, st, job.compute, job.params, e, watched)
        if c.ref.pieces(job.ref_params) and x2 is None:
            edges = findings_mod.monotone_edges(e, c.ref.pieces(job.ref_params))
    outs = param_effect.chunk_outputs(got, st, job.dom.values is not None) if job.outputs else None
    w = None if job.weights is None else weighting_mod.chunk(job.weights, job.inputs or st, e)
    return s, found, hid, ov.n_mpmath, (e if job.keep else None), edges, outs, w


def _range_chunk(job: _Job, r):
    return _chunk(job, job.dom.chunk_values(r))


@dataclass
class _Merged:
    """The chunk results of one sweep merged so far, in chunk order: what a checkpoint
    saves and a resumed run starts from."""

    summary: Summary
    findings: dict = field(default_factory=dict)  # kind -> Finding
    hidden: list = field(default_factory=list)
    n_mpmath: int = 0
    done: int = 0  # chunks merged
    mono_last: list | None = None  # per monotone piece: the last input so far with a finite result
    kept: list = field(default_factory=list)  # per-input errors, when kept
    outputs: list = field(default_factory=list)  # per chunk: output bits or digests, when kept
    weighted: list = field(default_factory=list)  # per chunk: weighting.Part, with --distribution

    def add(self, res, job: _Job) -> None:
        s, found, hid, n, e, edges, outs, w = res
        if w is not None:
            self.weighted.append(w)
        if outs is not None:
            self.outputs.append(outs)
        fmt = job.inputs or job.storage  # (intervals of inputs)
        self.summary.merge(s)
        if edges is not None:  # steps across the chunk edge, before the chunk's own findings
            if self.mono_last is None:
                self.mono_last = [None] * len(edges)
            for i, (edge, (_, _, direction)) in enumerate(zip(edges, job.cand.ref.pieces(job.ref_params))):
                if edge is None:
                    continue
                if self.mono_last[i] is not None:
                    f = findings_mod.edge_finding(
                        self.mono_last[i], edge[0], direction, job.cand, fmt, job.compute, job.params
                    )
                    if f is not None:
                        _fold_findings(self.findings, [f], fmt)
                self.mono_last[i] = edge[1]
        _fold_findings(self.findings, found, fmt)
        if hid:
            self.hidden = _merge_hidden(self.hidden + hid, fmt)
        self.n_mpmath += n
        if e is not None:
            self.kept.append(e)
        self.done += 1

    def state(self) -> tuple[dict, list]:
        d, arrays = self.summary.state()
        return (
            {
                "done": self.done,
                "n_mpmath": self.n_mpmath,
                "summary": d,
                "mono_last": self.mono_last,
                "findings": [vars(f) for f in self.findings.values()],
                "hidden": self.hidden,
            },
            arrays,
        )

    @classmethod
    def from_state(cls, doc: dict) -> _Merged:
        return cls(
            Summary.from_state(doc["summary"], doc["arrays"]),
            {f["kind"]: findings_mod.Finding(**f) for f in doc["findings"]},
            list(doc["hidden"]),
            int(doc["n_mpmath"]),
            int(doc["done"]),
            doc["mono_last"],
        )


def _run_chunks(
    job: _Job, progress, executor: str, workers: int, scheduler: str | None, checkpoint
) -> _Merged:
    """The chunk results of the job, merged: in memory domains chunk by chunk here;
    chunked domains on the executor, from and to the checkpoint if one is given."""
    dom = job.dom
    merged = _Merged(Summary(exact_p99=dom.count <= EXACT_P99_LIMIT))
    if dom.values is not None:
        for part in dom.chunks():
            res = _chunk(job, part)
            merged.add(res, job)
            if progress:
                progress(res[0].count)
        return merged
    ranges = dom.chunk_ranges()
    ck = None
    if checkpoint is not None and not job.keep:
        from audit.measure.checkpoint import Checkpoint

        ck = Checkpoint(checkpoint, job, len(ranges))
        doc = ck.load(dom.chunk_counts(ranges))
        if doc is not None:
            merged = _Merged.from_state(doc)
            if progress:
                _note_resumed(progress, merged.summary.count)
    saved = merged.done
    todo = ranges[merged.done :]
    workers = 1 if job.keep else workers
    native_check.prepare(job.storage.name, dom.count)  # (before the workers fork: they inherit it)
    fn, sent, items = _range_chunk, job, todo
    if _replays(job, executor, workers, len(todo)):  # the candidate evaluated here only
        sent = replace(job, cand=replace(job.cand, fn=replay.Replay()))
        fn = replay.Replayed(_range_chunk, _chunk_inputs)
        items = replay.Evaluated(todo, lambda r: _outputs(job, r))
    chunks = run_chunks(fn, sent, items, executor=executor, workers=workers, scheduler=scheduler)
    try:
        for res in chunks:
            merged.add(res, job)
            if progress:
                progress(res[0].count)
            if ck is not None and ck.due():
                ck.save(*merged.state())
                saved = merged.done
    finally:  # (interrupted too: the merged state is consistent after every chunk)
        chunks.close()  # stop the workers first
        if ck is not None and (merged.done > saved or not ck.path.exists()):
            ck.save(*merged.state())
    return merged


def _replays(job: _Job, executor: str, workers: int, n: int) -> bool:
    """Whether the candidate is evaluated in this process and its outputs replayed where
    the chunks run (audit/measure/replay.py): a target with its own arithmetic (engine op,
    callable, C kernel), one input, on a Dask cluster or on workers that are not forks of
    this process (it holds an engine's threads)."""
    if not job.cand.native or job.cand.arity != 1 or job.dom.axis is not None:
        return False
    return executor == "dask" or (executor == "local" and workers > 1 and n >= 2 and engine_threads())


def _chunk_inputs(job: _Job, r):
    return job.dom.chunk_values(r)


def _outputs(job: _Job, r) -> np.ndarray:
    """The candidate's outputs at the inputs of chunk ``r`` (as _chunk evaluates it)."""
    return job.cand.evaluate(job.dom.chunk_values(r), job.storage, job.compute, job.params)


def _note_resumed(progress, n: int) -> None:
    if hasattr(progress, "resumed"):
        progress.resumed(n)
    else:
        progress(n)


def run_candidate(
    cand: Candidate,
    storage: Format,
    compute_fmt: Format,
    dom: Domain,
    params: dict | None = None,
    keep_points: bool = False,
    progress: Callable[[int], None] | None = None,
    analyze: bool = True,
    max_ulp: float | None = None,
    atol: float | None = None,
    workers: int = 1,
    executor: str = "local",
    scheduler: str | None = None,
    checkpoint=None,
    inputs: Format | None = None,
    outputs: bool = False,
    weights: weighting_mod.Distribution | None = None,
) -> SweepResult:
    """Sweep one candidate in one evaluation path over a domain.

    analyze: also find stability findings (with causes), hidden overflows and lossy
    constants, saturation thresholds and the clip recommendation (max_ulp / atol: its
    tolerance; the clip needs the whole domain in one chunk).  Chunked domains run on
    ``executor`` ('local': ``workers`` processes; 'dask': the cluster at ``scheduler``)
    and, with a ``checkpoint`` directory, resume from the chunks already merged there.
    inputs: the format of the domain's values where it differs from ``storage``, which is
    then the output format (--out-dtype): results, oracle and metrics in ``storage``.
    outputs: keep the results' bits (or digests) for the parameter-effect check.
    weights: an input distribution (audit/measure/weighting.py, bound to the inputs' format): adds
    the ``weighted`` figures.
    """
    inputs = None if inputs is None or inputs == storage else inputs
    t0 = time.perf_counter()
    params = cand.resolve_params(params)
    ref_params = cand.ref.with_defaults(cand.reference_params(params))
    compute_fmt = cand.compute_format(compute_fmt)
    one_chunk = dom.values is not None and len(dom.values) <= CHUNK
    keep = keep_points or (analyze and one_chunk)
    job = _Job(cand, storage, compute_fmt, params, ref_params, analyze, keep, dom, inputs, outputs, weights)
    if progress and hasattr(progress, "start"):
        progress.start(
            f"{cand.id} {(inputs or storage).name}"
            + (f"->{storage.name}" if inputs else "")
            + (f"/{compute_fmt.name}" if compute_fmt != (inputs or storage) else ""),
            dom.count,
        )
    merged = _run_chunks(job, progress, executor, workers, scheduler, checkpoint)
    summary = merged.summary
    points = _concat(merged.kept)
    specials = (
        check_specials(cand, storage, compute_fmt, params, ref_params, inputs) if cand.arity == 1 else []
    )
    res = SweepResult(
        cand.id,
        cand.reference,
        (inputs or storage).name,
        NATIVE if cand.native else compute_fmt.name,
        params,
        dom,
        summary,
        specials,
        merged.n_mpmath,
        0.0,
        points if keep_points else None,
        out_dtype=storage.name if inputs else None,
        identity=dict(cand.identity),
    )
    if outputs:
        res._outputs = param_effect.merged_outputs(merged.outputs, merged.done)
    if weights is not None:
        res.weighted = weighting_mod.finish(weights, inputs or storage, merged.weighted)
    if cand.semantics is not None and points is not None and len(points.got) == dom.count:
        res._sem_got = points.got  # for semantics.changed_inputs, which drops it
    if analyze:
        res.findings = list(merged.findings.values())
        res.findings += findings_mod.special_findings(cand, storage, compute_fmt, params, specials)
        res.hidden = merged.hidden
        if cand.arity == 1 and inputs is None and (storage.enumerable or dom.values is not None):
            # (over the swept inputs for sampled formats; none for chunked exhaustive runs)
            res.saturation = clip_mod.saturation(
                cand.ref, storage, ref_params, None if storage.enumerable else dom.values
            )
            if (
                one_chunk
                and points is not None
                and storage.enumerable
                and dom.count == len(storage.finite_values())
            ):
                # (points.failing: made with the findings, since analyze keeps this one chunk)
                res.clip = clip_mod.recommend(points, storage, res.saturation, max_ulp, atol, points.failing)
    res.seconds = time.perf_counter() - t0
    return res


def _fold_findings(out: dict, chunk: list, fmt: Format) -> None:
    """Fold the findings of the next chunk into ``out`` (kind -> Finding): one per kind,
    runs across chunk edges joined, the first KEEP_INTERVALS intervals kept, all counted."""
    keep = findings_mod.KEEP_INTERVALS
    for f in chunk:
        if f.kind not in out:
            # the chunk's own Finding, kept (no copy of its 256 intervals: a chunk's findings
            # are made fresh by findings.find, or unpickled from a worker, and used only here)
            out[f.kind] = f
            continue
        g = out[f.kind]
        g.count += f.count
        iv = f.intervals
        if f.intervals_total == 0:
            continue
        joined = (
            g.last is not None and int(fmt.ordinal([iv[0][0]])[0]) - int(fmt.ordinal([g.last[1]])[0]) <= 1
        )
        if joined:
            if len(g.intervals) == g.intervals_total:  # g's last interval is in the list
                g.intervals[-1][1] = iv[0][1]
            g.last = [g.last[0], f.last[1]] if f.intervals_total == 1 else list(f.last)
            iv = iv[1:]
            g.intervals_total += f.intervals_total - 1
        else:
            g.last = list(f.last)
            g.intervals_total += f.intervals_total
        g.intervals.extend([list(v) for v in iv[: max(0, keep - len(g.intervals))]])


def _merge_hidden(items: list[dict], fmt: Format) -> list[dict]:
    """Hidden overflows and lossy constants of consecutive chunks: one per operation
    (counts added, runs across chunk edges joined, the first MAX_INTERVALS kept)."""
    out: dict = {}
    for h in items:
        key = (h["kind"], h.get("file"), h.get("line"), h.get("op"), h.get("value"))
        if key not in out:
            out[key] = (
                {**h, "intervals": [list(v) for v in h.get("intervals", [])]}
                if h["kind"] == "hidden_overflow"
                else h
            )
            continue
        if h["kind"] != "hidden_overflow":
            continue
        g = out[key]
        g["count"] += h["count"]
        iv = [list(v) for v in h["intervals"]]
        g["intervals_total"] += h["intervals_total"]
        if (
            g["intervals"]
            and iv
            and len(g["intervals"]) == g["intervals_total"] - h["intervals_total"]
            and int(fmt.ordinal([iv[0][0]])[0]) - int(fmt.ordinal([g["intervals"][-1][1]])[0]) <= 1
        ):
            g["intervals"][-1][1] = iv[0][1]  # (g's last run is in its list: join)
            iv = iv[1:]
            g["intervals_total"] -= 1
        g["intervals"] = (g["intervals"] + iv)[: findings_mod.MAX_INTERVALS]
        findings_mod.with_hidden_text(g)
    return list(out.values())


def _concat(parts: list[PointErrors]) -> PointErrors | None:
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    cols = {}
    for f in PointErrors.__dataclass_fields__:
        vals = [getattr(p, f) for p in parts]
        cols[f] = None if vals[0] is None else np.concatenate(vals)
    return PointErrors(**cols)


def grad_candidates(cands: list[Candidate]) -> list[Candidate]:
    """The derivative candidates (family NAME_grad) of the given candidates."""
    cat = catalog()
    fams = families()
    out: list[Candidate] = []
    for c in cands:
        if c.family.endswith("_grad"):
            g = [c]
        elif f"{c.family}_grad.{c.variant}" in cat:
            g = [cat[f"{c.family}_grad.{c.variant}"]]
        else:  # no backward of this variant: the family's backward kernels
            g = fams.get(f"{c.family}_grad", [])
        out.extend(x for x in g if x not in out)
    if not out:
        names = ", ".join(c.id for c in cands)
        fams = sorted({c.family for c in cat.values() if c.family.endswith("_grad")})
        raise BadOptionError(
            f"no derivative candidate for {names} (derivatives exist for: "
            f"{', '.join(f.removesuffix('_grad') for f in fams)})"
        )
    return out


MAX_WORKERS = 1024  # worker processes of one sweep
MAX_RESULTS = 4096  # results of one sweep call


def param_sets(cand: Candidate, params: dict | None) -> list[dict]:
    """Parameter combinations for a candidate: each value may be a list (a parameter sweep)."""
    mine = {k: v for k, v in (params or {}).items() if k in cand.params}
    keys = list(mine)
    lists = [v if isinstance(v, (list, tuple)) else [v] for v in mine.values()]
    return [dict(zip(keys, combo)) for combo in itertools.product(*lists)] or [{}]


def sweep(
    targets: str | Iterable[str],
    dtype="fp16",
    compute=None,
    *,
    range=None,
    samples: int | None = None,
    seed: int = 0,
    exhaustive: bool = False,
    params: dict | None = None,
    grad: bool = False,
    backward: bool = False,
    grid: int | None = None,
    default_grid: int | None = None,
    keep_points: bool = False,
    analyze: bool = True,
    max_ulp: float | None = None,
    atol: float | None = None,
    reference: str | None = None,
    device: str = "cpu",
    dump: str | None = None,
    dump_dtype: str | None = None,
    workers: int | None = None,
    executor: str = "local",
    scheduler: str | None = None,
    checkpoint=None,
    progress: Callable[[int], None] | None = None,
    timeout: float | None = None,
    semantics=None,
    cflags: str | None = None,
    out_dtype=None,
    distribution: str | None = None,
) -> list[SweepResult]:
    """Sweep candidates over every evaluation path.

    cflags: compiler flags of c:FILE.c:FUNCTION kernels (default -O2).
    semantics: the machine (audit.targets.semantics): None (ieee), flags ('ftz,daz'), a profile
    name, or a list of them to compare side by side (one result each).

    targets: candidate ids or family names ('gelu', 'gelu.tanh'), 'torch:gelu', 'jax:silu',
    'pkg.module:function' or a Python callable f(array) -> array (both with reference=), a
    Candidate, or a list of them.  Wrong arguments raise ActauditError subclasses.  dump: a file of device outputs to audit
    against reference (dump_dtype: the dtype of a raw binary dump).  workers: processes
    for chunked (exhaustive fp32 or pair) sweeps; default: every core.  executor:
    'local' or 'dask' (with scheduler, the address of a Dask scheduler).  checkpoint: a
    directory where chunked sweeps save their progress and from which they resume.
    timeout: seconds one call of a user's function (pkg.module:function or a callable)
    may take; beyond, an ActauditError.
    dtype: storage format(s), a name, 'fp16,bf16' or a list.
    compute: compute format(s); default: each storage format itself.  'auto' (the
    command line's default): both the storage format itself and fp32 for storage formats
    narrower than 32 bits, the storage format alone otherwise; a candidate whose compute
    is fixed (bit tricks, callables) runs once per storage format.
    range: (lo, hi) to restrict the inputs; samples/seed for fp32 and fp64;
    exhaustive: every fp32 value, or every pair of a 16-bit gated unit (chunked).
    params: candidate parameters, each a
    value or a list of values to sweep.  grad: sweep the derivative candidates.
    backward: sweep the backward candidates (dx = dy * f'(x) over pairs (x, dy)).
    grid: values per axis of the (a, b) grid of gated units (default 1024; refused where
    no selected target is a gated unit).  default_grid: the grid where ``grid`` is not
    given (reports: 256), never refused.
    keep_points: keep the per-input errors on each result (for CSV and plots).
    analyze: add findings, hidden overflows, saturation and the clip recommendation
    (tolerance max_ulp / atol; default: the candidate's error on its core).
    out_dtype: the output format (default: each dtype): inputs in dtype, results rounded
    to out_dtype, oracle and metrics in out_dtype (saturation and clip only without it).
    distribution: an input distribution ('normal:std=1', 'uniform:lo=A,hi=B',
    'laplace:scale=S', 'npy:PATH'): each result gets the ``weighted`` figures
    (audit/measure/weighting.py); enumerable formats and fp32 --exhaustive, one-input functions.
    """
    names, funcs, objs = arguments.split_targets(targets)
    names, dump = _dump_target(names, dump)
    range, params = arguments.input_range(range), arguments.params(params)
    samples, seed = arguments.integer("samples", samples, 1), arguments.integer("seed", seed, 0, 2**63 - 1)
    grid, workers = arguments.integer("grid", grid), arguments.integer("workers", workers, 1, MAX_WORKERS)
    grid_given = grid is not None
    if grid is None:
        grid = arguments.integer("default_grid", default_grid)
    max_ulp, atol = arguments.tolerance("max_ulp", max_ulp), arguments.tolerance("atol", atol)
    _check_texts(
        reference=reference, device=device, dump_dtype=dump_dtype, executor=executor, scheduler=scheduler
    )
    chosen = _resolve_targets(names, funcs, objs, params, reference, grad, backward, dump)
    paths = _resolve_paths(dtype, compute, semantics, cflags, out_dtype, chosen, dump)
    plan = _Plan(
        chosen,
        paths,
        range=range,
        samples=samples,
        seed=seed,
        exhaustive=exhaustive,
        grid=grid,
        grid_given=grid_given,
        reference=reference,
        device=device,
        timeout=timeout,
        cflags=cflags,
        dump=dump,
        dump_dtype=dump_dtype,
        keep_points=keep_points,
        progress=progress,
        analyze=analyze,
        max_ulp=max_ulp,
        atol=atol,
        workers=(os.cpu_count() or 1) if workers is None else workers,
        executor=executor,
        scheduler=scheduler,
        checkpoint=checkpoint,
    )
    _check_selection(plan)
    _check_execution(plan)
    plan = replace(plan, dist=_distribution(plan, distribution))
    _check_kept_inputs(plan)
    results = [r for st in paths.storages for r in _sweep_storage(plan, st)]
    if chosen.swept:  # the parameter-effect check across the results of each swept parameter
        param_effect.attach(results, chosen.swept, analyze)
    return results


# The steps of sweep(), in their order: the targets resolved, the evaluation paths, the
# options checked, the distribution; then per storage format the candidates of the external
# targets, the (compute, candidate) paths, their input domains, each result evaluated, a
# dump's result; the parameter-effect check last.
@dataclass(frozen=True)
class _Targets:
    """What a sweep runs, resolved from its targets and -p values."""

    cands: list  # catalog candidates and Candidate objects (their derivatives with --grad, ...)
    external: list  # names of external targets (torch:, jax:, pkg.module:function, c:, lut:)
    engines: list  # names of engine targets (ort:, openvino:, ...)
    funcs: list  # Python callables
    params: dict | None  # the -p values of the targets other than engines
    eng_params: dict  # the -p values some engine target takes
    keyed: list  # external targets that take the -p values as keywords
    swept: list  # parameters given several distinct values (the parameter-effect check)


@dataclass(frozen=True)
class _Paths:
    """The evaluation paths: storage formats x compute formats x semantics."""

    storages: list  # Format
    computes: list | None  # Format; None: the storage format (and fp32 with auto)
    auto: bool  # compute 'auto'
    sems: list  # audit.targets.semantics.Semantics
    out_fmt: Format | None  # --out-dtype


@dataclass(frozen=True)
class _Plan:
    """The checked arguments of one sweep call."""

    targets: _Targets
    paths: _Paths
    # the inputs
    range: tuple | None = None
    samples: int | None = None
    seed: int = 0
    exhaustive: bool = False
    grid: int | None = None
    grid_given: bool = False  # grid given (not a command's default): refused without a gated unit
    # external targets and dumps
    reference: str | None = None
    device: str = "cpu"
    timeout: float | None = None
    cflags: str | None = None
    dump: str | None = None
    dump_dtype: str | None = None
    # each run
    keep_points: bool = False
    progress: Callable[[int], None] | None = None
    analyze: bool = True
    max_ulp: float | None = None
    atol: float | None = None
    workers: int = 1
    executor: str = "local"
    scheduler: str | None = None
    checkpoint: object = None
    dist: weighting_mod.Distribution | None = None  # --distribution, parsed


def _check_texts(**texts) -> None:
    """The options that are strings or None, in the order given."""
    for k, v in texts.items():
        arguments.text(k, v)


def _dump_target(names: list, dump):
    """A target 'dump:FILE' is the dump FILE (as diff takes it, and as --dump FILE): one at a
    time.  (names without it, the dump)."""
    dumps_named = [n for n in names if n.startswith("dump:")]
    if not dumps_named:
        return names, dump
    if len(dumps_named) > 1 or dump is not None:
        raise BadOptionError("one dump at a time: a target dump:FILE or --dump FILE")
    if not dumps_named[0][5:]:
        raise BadOptionError("dump: needs a file, dump:FILE")
    return [n for n in names if n != dumps_named[0]], dumps_named[0][5:]


def _resolve_targets(names, funcs, objs, params, reference, grad, backward, dump) -> _Targets:
    """The targets sorted by kind (catalog, external, engine, callable) and the -p values
    split between the engine targets and the others."""
    if funcs and reference is None:
        raise BadOptionError("a callable target needs reference= (the function it computes, e.g. 'gelu')")
    external = [n for n in names if adapters.is_external(n)]
    engine_targets = [n for n in external if engines_mod.is_engine(n)]
    external = [n for n in external if n not in engine_targets]
    eng_params = {
        k: v for k, v in (params or {}).items() if any(engines_mod.target_takes(t, k) for t in engine_targets)
    }
    if params is not None:  # the -p values no engine target takes go to the others
        params = {k: v for k, v in params.items() if k not in eng_params}
        for k, v in params.items():
            if any(isinstance(e, str) for e in (v if isinstance(v, (list, tuple)) else [v])):
                raise BadParameterError(
                    f"parameter '{k}': '{v}' is not a number (and no engine target takes it)"
                )
    formulas = [n for n in names if not adapters.is_external(n)]
    cands = resolve(formulas) if formulas else []
    cands += [c for c in objs if c not in cands]
    cands = _derived_candidates(cands, grad, backward, bool(external or engine_targets), funcs, dump)
    if reference is not None:
        for c in cands:
            if c.reference != reference:
                raise BadOptionError(f"{c.id} approximates {c.reference}, not --reference {reference}")
    keyed = [t for t in external if not t.startswith(("c:", "lut:"))] if params else []
    return _Targets(
        cands, external, engine_targets, funcs, params, eng_params, keyed, param_effect.varied(params)
    )


def _derived_candidates(cands: list, grad: bool, backward: bool, external: bool, funcs, dump) -> list:
    """The candidates themselves, their derivatives (--grad) or their backward kernels
    (--backward); external: whether external or engine targets are given."""
    if grad:
        if external or funcs or dump is not None:
            raise BadOptionError("--grad applies to catalog candidates")
        cands = grad_candidates(cands)
    if backward:
        from audit.targets.backward_sweep import backward_candidates

        if grad:
            raise BadOptionError(
                "--grad and --backward exclude each other (--grad sweeps f'(x), "
                "--backward dy * f'(x) over pairs)"
            )
        if external or dump is not None:
            raise BadOptionError("--backward applies to catalog candidates")
        cands = backward_candidates(cands)
    return cands


def _resolve_paths(dtype, compute, semantics, cflags, out_dtype, chosen: _Targets, dump) -> _Paths:
    """The storage and compute formats, the semantics and the output format (with the
    checks of --cflags and --out-dtype against the targets)."""
    storages = _formats(dtype)
    auto = isinstance(compute, str) and compute.strip().lower() == AUTO
    computes = _formats(compute) if compute is not None and not auto else None
    sems = semantics_mod.parse_list(semantics)
    if cflags is not None and not any(t.startswith("c:") for t in chosen.external):
        raise BadOptionError("--cflags applies to C kernels (c:FILE.c:FUNCTION)")
    out_fmt = None if out_dtype is None else _out_format(out_dtype)
    if out_fmt is not None and (
        any(not t.startswith("lut:") for t in chosen.external) or dump is not None or chosen.funcs
    ):
        raise BadOptionError("--out-dtype applies to catalog candidates and lut: tables")
    return _Paths(storages, computes, auto, sems, out_fmt)


def _check_selection(plan: _Plan) -> None:
    """What was selected against the options: parameters, dump, samples, device, timeout."""
    t, storages = plan.targets, plan.paths.storages
    for k in t.params or {}:
        if not any(k in c.params for c in t.cands) and not t.keyed:
            raise BadOptionError(f"no selected candidate has a parameter '{k}'")
    if plan.dump is not None:
        if len(storages) != 1:
            raise BadOptionError("a dump holds one format: give a single --dtype")
        if plan.reference is None:
            raise BadOptionError("--dump needs --reference (the function the device computed)")
    if not t.cands and not t.external and not t.engines and not t.funcs and plan.dump is None:
        raise UnknownNameError("no candidate given")
    if plan.samples is not None and all(st.enumerable for st in storages):
        raise BadOptionError(
            f"{', '.join(st.name for st in storages)} are swept exhaustively; "
            "--samples applies to fp32 and fp64"
        )
    _check_applies(plan)
    if t.keyed and plan.device != "cpu":
        raise BadOptionError("--param on torch: ops runs them on the CPU; drop --device")
    if plan.device != "cpu" and not any(n.startswith("torch:") for n in t.external):
        raise BadOptionError("--device applies to torch: candidates")
    timeout = plan.timeout
    if timeout is not None and not (isinstance(timeout, (int, float)) and 0 < timeout < 1e6):
        raise BadOptionError(f"--timeout must be a number of seconds in (0, 1e6), got {timeout!r}")


def _check_applies(plan: _Plan) -> None:
    """Options that would change nothing are refused, never silently accepted: --dump-dtype
    without a dump, --grid without a gated unit, a seed where no input is drawn."""
    t, storages = plan.targets, plan.paths.storages
    if plan.dump_dtype is not None and plan.dump is None:
        raise BadOptionError("--dump-dtype applies to --dump (the dtype of a raw binary dump)")
    pairs = any(c.arity == 2 for c in t.cands)
    if plan.grid_given and (not pairs or plan.dump is not None):
        raise BadOptionError(
            "--grid applies to gated units (functions of two inputs: swiglu, geglu, ...); "
            "no selected target is one"
        )
    if plan.seed != 0:
        drawn = not plan.exhaustive and (
            any(not st.enumerable for st in storages) or (pairs and any(st.bits > 8 for st in storages))
        )
        if not drawn or plan.dump is not None:
            raise BadOptionError(
                f"--seed {plan.seed}: no input is drawn at random here "
                f"({'a dump' if plan.dump is not None else ', '.join(st.name for st in storages) + ' swept exhaustively'}); "
                "--seed applies to samples of fp32 and fp64 and to the grid of gated units"
            )


def _check_execution(plan: _Plan) -> None:
    """How the sweep runs: the per-input data, the number of results, the executor."""
    executor, scheduler, checkpoint = plan.executor, plan.scheduler, plan.checkpoint
    if checkpoint is not None and plan.keep_points:
        raise BadOptionError(
            "--checkpoint keeps merged results, not per-input data: "
            "it cannot be combined with --csv or --report"
        )
    n_results = _count_results(plan)
    if n_results > MAX_RESULTS:
        raise BadOptionError(
            f"{n_results} results (candidates x parameter values x formats) "
            f"is more than {MAX_RESULTS}: sweep fewer at a time"
        )
    if executor not in EXECUTORS:
        raise BadOptionError(f"unknown executor '{executor}' (known: {', '.join(EXECUTORS)})")
    if executor == "dask" and not scheduler:
        raise BadOptionError("--executor dask needs --scheduler ADDRESS (e.g. tcp://host:8786)")
    if scheduler and executor != "dask":
        raise BadOptionError("--scheduler applies to --executor dask")
    if (checkpoint is not None or executor != "local") and not plan.exhaustive:
        raise BadOptionError("--checkpoint and --executor apply to chunked sweeps: add --exhaustive")
    for sem in plan.paths.sems:  # each table:FILE, even where no candidate uses its primitive
        for _, v in sem.prims:
            if v.startswith("table:"):
                semantics_mod.table_file(v[6:])


def _count_results(plan: _Plan) -> int:
    """The results a sweep would give at most: (catalog parameter sets + keyed targets x
    their parameter values) x storage formats x compute formats (before semantics, engines
    and deduplication)."""
    t = plan.targets
    n_keyed = len(t.keyed) * math.prod(
        len(v) if isinstance(v, (list, tuple)) else 1 for v in (t.params or {}).values()
    )
    per_format = sum(len(param_sets(c, t.params)) for c in t.cands) + n_keyed
    return per_format * len(plan.paths.storages) * len(plan.paths.computes or [1])


def _distribution(plan: _Plan, spec: str | None) -> weighting_mod.Distribution | None:
    """The --distribution, parsed and checked against the sweep (not bound to a format)."""
    dist = None if spec is None else weighting_mod.parse(spec)
    if dist is not None:
        weighting_mod.check_sweep(plan.paths.storages, plan.exhaustive, plan.checkpoint, plan.dump, plan.grid)
    return dist


def _check_kept_inputs(plan: _Plan) -> None:
    """Per-input data of an exhaustive sweep of a format that is not enumerable (fp32) must
    fit in memory (KEEP_LIMIT inputs), before any candidate runs."""
    storages = plan.paths.storages
    if plan.keep_points and plan.exhaustive and any(not st.enumerable for st in storages):
        lo_hi = plan.range or (-math.inf, math.inf)
        from audit.numbers.inputs import _ordinal_bounds

        for st in storages:
            if not st.enumerable:
                a, b = _ordinal_bounds(st, lo_hi)
                if b - a + 1 > KEEP_LIMIT:
                    raise BadOptionError(
                        f"per-input data (CSV, reports) of {b - a + 1} {st.name} inputs "
                        f"would not fit in memory (limit {KEEP_LIMIT}): narrow --range"
                    )


def _sweep_storage(plan: _Plan, st: Format) -> list[SweepResult]:
    """The results of one storage format: every (compute, candidate) path, each parameter
    set and semantics, over the candidate's domain; then the dump's result."""
    wd = None if plan.dist is None else weighting_mod.bind(plan.dist, st)
    ext = _external_candidates(plan, st)
    doms: dict[int, Domain] = {}
    results = []
    for cf, c in _evaluation_paths(plan.paths, st, plan.targets.cands + ext):
        dom = _domain_of(plan, st, c.arity, doms)
        for p in param_sets(c, plan.targets.params):
            for sem in plan.paths.sems:
                results.append(_evaluate(plan, st, cf, c, p, sem, dom, wd))
    if plan.dump is not None:
        results.append(_sweep_dump(plan, st))
    return results


def _external_candidates(plan: _Plan, st: Format) -> list[Candidate]:
    """The candidates of the external targets, the engine targets (one per listed -p value
    and, for an engine with a precision option, per compute format) and the callables."""
    t, reference, timeout = plan.targets, plan.reference, plan.timeout
    computes = plan.paths.computes
    ext = [
        _lut(x, st, plan.paths.out_fmt or st, reference)
        if x.startswith("lut:")
        else param_effect.external_candidate(x, list(t.params), reference, st, timeout)
        if x in t.keyed
        else adapters.external_candidate(x, reference, st, plan.device, timeout, plan.cflags)
        for x in t.external
    ]
    for x in t.engines:
        prec = f"{x.partition(':')[0].strip()}.precision"
        if computes and engines_mod.target_takes(x, prec):
            # --compute sets an engine's precision option (OpenVINO's INFERENCE_PRECISION_HINT)
            for cf in computes:
                ext += engines_mod.candidates_of(x, st, {**t.eng_params, prec: cf.name}, reference)
        else:
            ext += engines_mod.candidates_of(x, st, t.eng_params, reference)
    for x in t.external + t.engines if ext else []:
        bad = sorted({f for sem in plan.paths.sems for f in sem.op_flags})
        if bad:  # the kernel's own machine computes it: these flags would change nothing
            raise BadOptionError(
                f"{x}: --semantics {', '.join(bad)} acts on a formula's "
                "operations, which an external kernel does not expose; "
                "give conversion flags only (or compile with --cflags)"
            )
    ext += [adapters.wrap_callable(f, reference, st, timeout=timeout) for f in t.funcs]
    return ext


def _compute_formats(paths: _Paths, st: Format) -> list[Format]:
    """The compute formats of storage st: those given; with auto, st and fp32 for formats
    narrower than 32 bits; else st."""
    return paths.computes or ([st, get_format("fp32")] if paths.auto and st.bits < 32 else [st])


def _evaluation_paths(paths: _Paths, st: Format, cands: list) -> Iterator[tuple[Format, Candidate]]:
    """(compute format, candidate) in sweep order, compute formats outermost; a candidate
    whose compute is fixed (native), or any candidate under auto, once per compute it
    really runs in."""
    done: set = set()
    for cf in _compute_formats(paths, st):
        for c in cands:
            if paths.auto or c.native:  # a fixed compute gives the same result on every path
                # the candidate itself (the same object met again), never its display name:
                # two engine ops whose labels read alike are two candidates
                key = (id(c), "native" if c.native else c.compute_format(cf).name)
                if key in done:
                    continue
                done.add(key)
            yield cf, c


def _domain_of(plan: _Plan, st: Format, arity: int, doms: dict[int, Domain]) -> Domain:
    """The inputs of st for candidates of ``arity`` inputs, made once per arity (in doms);
    with per-input data, at most KEEP_LIMIT inputs in chunks."""
    if arity not in doms:
        doms[arity] = (
            domain(
                st,
                plan.range,
                samples=None if st.enumerable else plan.samples,
                seed=plan.seed,
                exhaustive=plan.exhaustive,
            )
            if arity == 1
            else pair_domain(st, plan.range, side=plan.grid, seed=plan.seed, exhaustive=plan.exhaustive)
        )
    dom = doms[arity]
    if plan.keep_points and dom.values is None and dom.count > KEEP_LIMIT:
        raise BadOptionError(
            f"per-input data (CSV, reports) of {dom.count} "
            f"{st.name} inputs would not fit in memory (limit {KEEP_LIMIT}): "
            "narrow --range"
        )
    return dom


def _evaluate(
    plan: _Plan, st: Format, cf: Format, c: Candidate, p: dict, sem, dom: Domain, wd
) -> SweepResult:
    """One result: candidate c with parameters p under semantics sem, inputs in st, results
    in the output format, computed in cf (wd: the distribution bound to st)."""
    out = plan.paths.out_fmt or st

    def run(cs: Candidate) -> SweepResult:
        return run_candidate(
            cs,
            out,
            cf,
            dom,
            p,
            plan.keep_points,
            plan.progress,
            plan.analyze,
            plan.max_ulp,
            plan.atol,
            plan.workers,
            plan.executor,
            plan.scheduler,
            plan.checkpoint,
            inputs=st,
            outputs=bool(plan.targets.swept),
            weights=weighting_mod.for_candidate(wd, c, dom.count),
        )

    return semantics_mod.run_with(sem, c, run, out, cf, p, dom)


def _sweep_dump(plan: _Plan, st: Format) -> SweepResult:
    """The result of a dump of device outputs, read in st, against the reference."""
    d = dumps.read_dump(plan.dump, st, plan.dump_dtype)
    dc, ddom = dump_candidate(d, plan.reference)
    return run_candidate(
        dc, st, st, ddom, None, plan.keep_points, plan.progress, plan.analyze, plan.max_ulp, plan.atol
    )


def _lut(target: str, st: Format, out: Format, reference: str | None) -> Candidate:
    from audit.targets.lut import float_candidate

    return float_candidate(target, st, out, reference)


def _out_format(spec) -> Format:
    """The --out-dtype format: one element format."""
    from audit.numbers.formats import element_format

    if isinstance(spec, Format):
        return spec
    if "," in str(spec):
        raise BadOptionError(f"--out-dtype takes one format, got '{spec}'")
    return element_format(spec)


def _formats(spec) -> list[Format]:
    if isinstance(spec, (list, tuple)):
        return [get_format(s) for s in spec]
    return parse_formats(spec)


def document(results: list[SweepResult], **meta) -> dict:
    """The versioned JSON document of a run."""
    from audit._version import __version__

    return {
        "schema": SCHEMA,
        "actaudit": __version__,
        "oracle_version": oracle.ORACLE_VERSION,
        **meta,
        "results": [r.to_dict() for r in results],
    }
