"""``actaudit model MODEL.onnx``: the activations a model runs, audited on its own inputs.

scan (audit/model/scan.py) -> what ORT runs (audit/model/optimized.py) -> one pass over the
batches with histograms (audit/model/capture.py) -> per site an audit of the op the
engine runs, in its precision, weighted by the site's observed distribution:

* every figure comes from the sweep machinery: the engine op is swept (audit.measure.sweep:
  every finite input of an 8- or 16-bit format; for fp32 the distinct observed values, and
  the observed range sampled), and the site's weighted figures are
  :func:`audit.measure.weighting.chunk` and :func:`~audit.measure.weighting.finish` of those
  per-input errors under the site's histogram as an ``npy:``-like distribution (each
  observed value weighted by its count);
* sites with the same engine op, attributes and format share one sweep;
* the worst error among observed inputs, and beside it the worst over every input of the
  format in the observed range [min, max] (exhaustive, a bound, for 8- and 16-bit formats
  and fp32 ranges of at most RANGE_EXHAUSTIVE values; else a stratified sample of the
  range, said so: ``range_exhaustive`` false).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass, field

import numpy as np

from audit.errors import ActauditError, BadOptionError
from audit.measure import weighting
from audit.model import capture as capture_mod
from audit.model import optimized as opt_mod
from audit.model import scan as scan_mod
from audit.numbers.formats import get_format

RANGE_SAMPLES = 1 << 16  # fp32: samples of the observed range
ENGINES = ("ort",)


@dataclass
class SiteAudit:
    site: scan_mod.Site
    engine: opt_mod.EngineSite
    hist: capture_mod.Histogram | None = None
    dtype: str | None = None  # the format audited
    weighted: dict | None = None
    worst: dict = field(default_factory=dict)
    safe: dict | None = None  # the safe clip range and the observed mass outside it
    findings: list = field(default_factory=list)
    status: str = "audited"  # audited | near match | not audited
    identity: dict | None = None
    max_ulp: float | None = None  # over every input of the format (the sweep's own max)
    curve: dict | None = None  # for the report: counts and max ULP error per bin of x
    sweep: str | None = None  # the site whose sweep this one shares (its own id if none)


@dataclass
class ModelAudit:
    path: str
    sha256: str
    opset: int
    producer: str
    batches: capture_mod.Batches
    engine: dict
    sites: list
    effect: dict | None = None  # audit/model/effect.py, with --effect


def _sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def scan_only(path, opt_level: str = opt_mod.DEFAULT_LEVEL) -> list[tuple[scan_mod.Site, opt_mod.EngineSite]]:
    """The sites of a model file and the op ORT runs for each (no data, no audit)."""
    model = scan_mod.load(path)
    sites = scan_mod.scan(model)
    opt = opt_mod.optimize(model, opt_level, str(path), path)
    es = opt_mod.engine_sites(sites, opt, model)
    return [(s, es[s.id]) for s in sites]


def audit_model(
    path,
    data: str | None = None,
    random: bool = False,
    shapes: dict | None = None,
    seed: int = 0,
    batches: int = 1,
    engine: str = "ort",
    opt_level: str = opt_mod.DEFAULT_LEVEL,
    dtype: str | None = None,
    compute: str | None = None,
    bin: str | None = None,
    effect: bool = False,
) -> ModelAudit:
    """Scan, capture and audit every activation site of the ONNX model at ``path``."""
    if engine not in ENGINES:
        if engine == "openvino":
            raise BadOptionError(
                "--engine openvino: model audits run on ORT's optimized graph only (for now)"
            )
        raise BadOptionError(f"--engine '{engine}': one of {', '.join(ENGINES)}")
    if bin not in (None, "exact", "bf16", "fp16"):
        raise BadOptionError(f"--bin '{bin}': exact, bf16 or fp16")
    if dtype is not None:
        get_format(dtype)
    if compute is not None:
        get_format(compute)
    b = capture_mod.data_batches(data, random, shapes, seed, batches)
    model = scan_mod.load(path)
    ort = opt_mod._ort()
    sites = scan_mod.scan(model)
    opt = opt_mod.optimize(model, opt_level, str(path), path)
    es = opt_mod.engine_sites(sites, opt, model)
    audits = [SiteAudit(s, es[s.id]) for s in sites]
    wants = {a.site.id: a.engine.capture for a in audits if a.engine.capture and a.site.near is None}
    extra = [n for a in audits if a.site.id in wants for n in a.engine.capture_nodes]
    hists, fmts = capture_mod.capture(opt, wants, model, b, bin, extra)
    for a in audits:
        a.hist = hists.get(a.site.id)
        a.engine.dtype = fmts.get(a.site.id)
        if a.engine.dtype and a.site.dtype and a.engine.dtype != a.site.dtype:
            a.findings.append(
                f"the graph computes it in {a.site.dtype}, ORT runs it in {a.engine.dtype} (its inserted casts)"
            )
        a.dtype = dtype or a.engine.dtype
        a.findings += list(a.site.notes) + list(a.engine.notes)
        if a.site.reference and a.site.reference.get("approximation"):
            a.findings.append(
                f"the graph computes {a.site.reference['approximation']}: its errors include the "
                f"approximation's, against {a.site.reference['family']}"
            )
        if a.site.near is not None:
            a.status = "near match"
            a.findings.append(f"near match, not audited: {a.site.near}")
        elif a.site.reference is None:
            a.status = "not audited"
            a.findings.append("not audited: no catalog reference")
        elif a.engine.why is not None:
            a.status = "not audited"
            a.findings.append(f"engine op not auditable alone: {a.engine.why}")
        elif a.hist is None or a.hist.count == 0:
            a.status = "not audited"
            a.findings.append("no finite input observed")
    groups: dict = {}
    for a in audits:
        if a.status == "audited":
            ref = repr(sorted((a.site.reference or {}).items()))
            key = (a.engine.target or opt_mod.structure(a.engine.subgraph), ref, a.dtype, compute)
            groups.setdefault(key, []).append(a)
    for members in groups.values():
        for a in members:
            a.sweep = members[0].site.id
    from audit.targets.engines.ort import dispatch

    for members in groups.values():
        try:
            _audit_group(members, compute, bin)
        except ActauditError as e:
            for a in members:
                a.status = "not audited"
                a.findings.append(f"{a.engine.target or 'its subgraph'} in {a.dtype}: {e}")
    effect_doc = None
    if effect:
        from audit.model.effect import effects

        effect_doc = effects(model, opt, audits, b)
    return ModelAudit(
        str(path),
        _sha256(path),
        max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0),
        f"{model.producer_name} {model.producer_version}".strip(),
        b,
        {
            "name": "onnxruntime",
            "version": ort.__version__,
            "opt_level": opt_level,
            "dtype": dtype,
            "compute": compute,
            "dispatch": dispatch(),
            "bin": bin or "exact",
        },
        audits,
        effect_doc,
    )


def _rebin(h: capture_mod.Histogram, fmt) -> capture_mod.Histogram:
    """The histogram's values rounded to ``fmt`` (an audit in another --dtype)."""
    if h.fmt == fmt.name:
        return h
    vals = get_format(h.fmt).from_bits(h.bits.astype(get_format(h.fmt).uint))
    with np.errstate(all="ignore"):
        r = fmt.round(vals.astype(np.float64))
    ok = np.isfinite(r)
    out = capture_mod.Histogram(fmt.name, h.binned)
    out.nonfinite = dict(h.nonfinite)
    out.nonfinite["inf"] += int(h.counts[~ok & (vals > 0)].sum())
    out.nonfinite["-inf"] += int(h.counts[~ok & (vals < 0)].sum())
    bits = fmt.to_bits(r[ok]).astype(np.uint64)
    ub, inv = np.unique(bits, return_inverse=True)
    uc = np.zeros(len(ub), np.int64)
    np.add.at(uc, inv, h.counts[ok])
    out.bits, out.counts, out.total, out.lo, out.hi = ub, uc, h.total, h.lo, h.hi
    return out


def distribution(site_id: str, h: capture_mod.Histogram) -> weighting.Distribution:
    """The site's observed distribution, as weighting's npy: distributions are (bound)."""
    return weighting.Distribution(
        "npy",
        path="",
        label=f"observed:{site_id}",
        fmt_name=h.fmt,
        bits=h.bits,
        counts=h.counts,
        total=h.total,
        nonfinite=dict(h.nonfinite),
        overflow_count=0,
    )


def _candidate(a: SiteAudit, fmt, compute):
    """The engine op of a site as a candidate of the sweep machinery."""
    from audit.targets.engines import candidates_of

    ref = a.site.reference or {}
    if a.engine.target is not None:
        cands = candidates_of(a.engine.target, fmt, None, None)
        return cands[0]
    return _subgraph_candidate(a, fmt, ref)


def _subgraph_candidate(a: SiteAudit, fmt, ref: dict):
    """The optimized subgraph of a decomposed site, run by ORT (optimizations off)."""
    import onnx
    from onnx import helper

    from audit.targets.engines.base import EngineCandidate, EngineError, one_line
    from audit.targets.engines.callables import wrap_callable
    from audit.targets.engines.ort import _ELEM, dispatch

    ort = opt_mod._ort()
    if fmt.name != a.engine.dtype:
        raise BadOptionError(
            f"ORT runs this site as a subgraph in {a.engine.dtype}: it cannot be audited in {fmt.name}"
        )
    m = onnx.ModelProto()
    m.CopyFrom(a.engine.subgraph)
    elem = getattr(onnx.TensorProto, _ELEM[fmt.name])
    m.graph.input[0].CopyFrom(helper.make_tensor_value_info(m.graph.input[0].name, elem, None))
    try:
        sess = ort.InferenceSession(
            m.SerializeToString(), opt_mod.session_options("off"), providers=["CPUExecutionProvider"]
        )
    except Exception as e:
        raise EngineError(f"onnxruntime refused the site's subgraph: {one_line(e)}") from None
    xname = m.graph.input[0].name

    def run(arr):
        return sess.run(None, {xname: np.require(arr, dtype=fmt.dtype, requirements="C")})[0]

    label = f"ort-graph:{'+'.join(a.engine.nodes)}"
    base = wrap_callable(
        run, ref["family"], fmt, label, f"onnxruntime {ort.__version__} subgraph {a.engine.nodes}"
    )
    identity = {
        "engine": "onnxruntime",
        "version": ort.__version__,
        "op": "graph",
        "nodes": list(a.engine.nodes),
        "attributes": {},
        "dtype": fmt.name,
        "options": {"optimize": "off (the optimized graph's nodes)"},
        "precision": fmt.name,
        "dispatch": dispatch(),
    }
    return EngineCandidate(
        **{f.name: getattr(base, f.name) for f in dataclasses.fields(base) if f.name != "identity"},
        identity=identity,
        bound_ref_params=dict(ref.get("params", {})),
    )


def _audit_group(members: list[SiteAudit], compute, bin) -> None:
    """One sweep of the group's engine op; each site's figures from its per-input errors."""
    from audit.measure.sweep import run_candidate, sweep
    from audit.numbers.inputs import Domain

    fmt = get_format(members[0].dtype)
    cf = get_format(compute) if compute else fmt
    for a in members:
        assert a.hist is not None
        a.hist = _rebin(a.hist, fmt)
    cand = _candidate(members[0], fmt, compute)
    ref = members[0].site.reference or {}
    if cand.reference != ref.get("family"):
        raise BadOptionError(f"{cand.id} computes {cand.reference}, the site {ref.get('family')}")
    if fmt.enumerable:
        r = sweep(cand, dtype=fmt.name, compute=cf.name, keep_points=True, workers=1)[0]
    else:
        vals = np.unique(np.concatenate([a.hist.values() for a in members if a.hist is not None]))
        vals = np.sort(vals, kind="stable")
        dom = Domain(fmt, False, len(vals), values=vals)
        r = run_candidate(cand, fmt, cf, dom, None, keep_points=True, analyze=True, workers=1)
    pts = r.points
    assert pts is not None
    for a in members:
        assert a.hist is not None
        d = distribution(a.site.id, a.hist)
        a.weighted = weighting.finish(d, fmt, [weighting.chunk(d, fmt, pts)])
        a.identity = dict(r.identity or {})
        a.max_ulp = float(r.summary.max_ulp) if fmt.enumerable else None
        m = weighting.masses(d, fmt, pts.x)
        seen = m > 0
        a.worst = _worst(pts, seen, "observed")
        lo, hi = a.hist.lo, a.hist.hi
        a.curve = _curve(pts, m * a.hist.total, seen, lo, hi)
        if fmt.enumerable:
            lo_f, hi_f = float(fmt.round(np.array([lo]))[0]), float(fmt.round(np.array([hi]))[0])
            inr = (pts.x >= lo_f) & (pts.x <= hi_f)
            a.worst.update(_worst(pts, inr, "range"))
            a.worst["range_exhaustive"] = True
            clip = getattr(r, "clip", None)
            if clip:
                out_lo = (
                    pts.x < clip["lo_safe"] if clip.get("lo_safe") is not None else np.zeros(len(pts.x), bool)
                )
                out_hi = (
                    pts.x > clip["hi_safe"] if clip.get("hi_safe") is not None else np.zeros(len(pts.x), bool)
                )
                out = float(np.sum(m[out_lo | out_hi])) / max(float(np.sum(m)), 1e-300)
                a.safe = {"lo": clip.get("lo_safe"), "hi": clip.get("hi_safe"), "mass_outside": out}
        else:
            a.worst.update(_range_worst(cand, fmt, cf, lo, hi, a.worst))
        wt = a.weighted
        for k, what in (("nan", "NaN"), ("inf", "inf"), ("underflow", "flushed to 0")):
            if wt.get(k):
                a.findings.append(f"{what} on {100 * wt[k]:.3g} % of the observed inputs")
        if a.safe and a.safe["mass_outside"] > 0:
            a.findings.append(
                f"{100 * a.safe['mass_outside']:.3g} % of the observed inputs lie outside the safe range"
                f" [{_g(a.safe['lo'])}, {_g(a.safe['hi'])}]"
            )


BINS = 120
RANGE_EXHAUSTIVE = 1 << 20  # fp32: an observed range of at most this many values is swept whole


def _range_worst(cand, fmt, cf, lo: float, hi: float, seen: dict) -> dict:
    """The worst error over the observed range of a 32-bit format: every value of it where
    the range holds at most RANGE_EXHAUSTIVE (a bound), else a stratified sample (not one);
    never below the worst observed error.  A NaN or infinite result in it makes it inf."""
    from audit.measure.sweep import sweep
    from audit.numbers.inputs import _ordinal_bounds

    a, b = _ordinal_bounds(fmt, (lo, hi))
    whole = b - a + 1 + int(a <= 0 <= b) <= RANGE_EXHAUSTIVE
    kw = {"exhaustive": True} if whole else {"samples": RANGE_SAMPLES}
    r = sweep(cand, dtype=fmt.name, compute=cf.name, range=(lo, hi), workers=1, analyze=False, **kw)[0]
    s = r.summary
    if s.nan_count or s.inf_count:
        u, x = math.inf, None
    else:
        u, x = float(r.max_ulp), (s.worst or {}).get("x")
    out = {"range_ulp": u, "range_x": x, "range_exhaustive": whole}
    o = seen.get("observed_ulp")
    if o is not None and math.isfinite(u) and (o > u or math.isnan(o)):
        out.update(range_ulp=o, range_x=seen.get("observed_x"))
    return out


def _curve(pts, counts: np.ndarray, seen: np.ndarray, lo: float, hi: float) -> dict:
    """Per bin of [lo, hi] (BINS of them): the observed count and the largest ULP error of
    the sweep among the observed inputs in it (NaN where none)."""
    if not hi > lo:
        hi = lo + 1.0
    edges = np.linspace(lo, hi, BINS + 1)
    x = np.asarray(pts.x, dtype=np.float64)[seen]
    u = np.asarray(pts.ulp_err, dtype=np.float64)[seen]
    idx = np.clip(np.searchsorted(edges, x, "right") - 1, 0, BINS - 1)
    cnt = np.bincount(idx, weights=counts[seen], minlength=BINS)
    err = np.full(BINS, np.nan)
    np.fmax.at(err, idx, np.where(np.isnan(u), np.inf, u))
    return {"edges": edges.tolist(), "counts": cnt.tolist(), "max_ulp": err.tolist()}


def _g(v) -> str:
    """A safe-range bound: None is a side safe all the way (no bound)."""
    return "any" if v is None else f"{v:g}"


def _worst(pts, sel: np.ndarray, kind: str) -> dict:
    """The largest ULP error (a NaN error or result counts as the worst) among ``sel``."""
    if not sel.any():
        return {f"{kind}_ulp": None, f"{kind}_x": None}
    u = np.asarray(pts.ulp_err, dtype=np.float64)[sel]
    x = np.asarray(pts.x, dtype=np.float64)[sel]
    key = np.where(np.isnan(u), np.inf, u)
    i = int(np.argmax(key))
    return {f"{kind}_ulp": float(u[i]), f"{kind}_x": float(x[i])}


__all__ = ["audit_model", "scan_only", "ModelAudit", "SiteAudit", "distribution"]
