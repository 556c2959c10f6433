"""The JSON document of a model audit: schema ``actaudit.model/1``.

Top level: ``model`` {path, sha256, opset, producer}, ``data`` {source, batches, synthetic,
digest, seed, shapes}, ``engine`` {name, version, opt_level, dtype, compute, dispatch, bin},
``sites``: one entry per site {id, nodes, pattern, input, output (the tensors it reads and writes), reference, engine_op, attributes, dtype,
status, sweep (the id of the site whose sweep it shares), inputs {count, min, max, distinct, nonfinite, binned}, weighted (the sweep's weighted
section: audit/measure/weighting.py), worst {observed_ulp, observed_x, range_bound_ulp
(null unless the observed range was swept exhaustively), range_sampled_ulp, range_x,
range_exhaustive}, safe (the safe clip range and the observed mass outside it), max_ulp,
findings, identity (engine, version, op, attributes, dtype, options, precision, dispatch)}.
With ``--effect`` (audit/model/effect.py): each site's ``effect`` {tensor (the tensor of
ORT's optimized graph that was cut), dtype (its format), rank (1: the largest effect),
outputs {per graph output: max_abs, max_rel, mean_abs, argmax_changed (null unless the
output is classifier-shaped), nonfinite_changed, scale (its largest magnitude as run)},
notes} (null for a site that cannot be cut, said in ``effect.skipped``), and at the top
level ``effect`` {ranking (site ids), joint {outputs, runs, sites}, skipped {id: why},
method}; without it both are absent.
Non-finite numbers are the strings "nan", "inf", "-inf".
"""

from __future__ import annotations

from audit.measure import weighting

SCHEMA = "actaudit.model/1"


def _num(v):
    from audit.io import json_number

    return json_number(v) if isinstance(v, float) else v


def site_dict(a) -> dict:
    s, e, h = a.site, a.engine, a.hist
    w = a.worst or {}
    exhaustive = bool(w.get("range_exhaustive"))
    return {
        "id": s.id,
        "nodes": list(s.nodes),
        "pattern": s.pattern,
        "input": s.input,
        "output": s.output,
        "reference": s.reference,
        "engine_op": e.target or ("graph " + " ".join(e.nodes) if e.nodes else e.op),
        "engine_nodes": list(e.node_names),
        "attributes": {k: _num(v) for k, v in (e.attributes or s.attributes).items()},
        "dtype": a.dtype,
        "graph_dtype": s.dtype,
        "status": a.status,
        "sweep": a.sweep,
        "inputs": None
        if h is None
        else {
            "count": h.count,
            "min": _num(h.lo) if h.count else None,
            "max": _num(h.hi) if h.count else None,
            "distinct": h.distinct,
            "nonfinite": dict(h.nonfinite),
            "binned": h.binned,
        },
        "weighted": weighting.to_json(a.weighted),
        "worst": {
            "observed_ulp": _num(w.get("observed_ulp")),
            "observed_x": _num(w.get("observed_x")),
            "range_bound_ulp": _num(w.get("range_ulp")) if exhaustive else None,
            "range_sampled_ulp": None if exhaustive else _num(w.get("range_ulp")),
            "range_x": _num(w.get("range_x")),
            "range_exhaustive": exhaustive if w else None,
        },
        "safe": None if a.safe is None else {k: _num(v) for k, v in a.safe.items()},
        "max_ulp": _num(a.max_ulp),
        "findings": list(a.findings),
        "identity": a.identity,
    }


def _outputs(outs: dict) -> dict:
    return {k: {f: _num(v) for f, v in o.items()} for k, o in outs.items()}


def effect_dict(e: dict) -> dict:
    """The top-level ``effect`` of the document."""
    j = e.get("joint")
    return {
        "ranking": list(e["ranking"]),
        "joint": None if j is None else {**j, "outputs": _outputs(j["outputs"])},
        "skipped": dict(e["skipped"]),
        "method": e.get("method"),
    }


def site_effect(e: dict, site: str) -> dict | None:
    s = e["sites"].get(site)
    if s is None:
        return None
    return {**s, "rank": e["ranking"].index(site) + 1, "outputs": _outputs(s["outputs"])}


def document(m) -> dict:
    """The ``actaudit.model/1`` document of a ModelAudit."""
    from audit._version import __version__

    b = m.batches
    out: dict = {
        "schema": SCHEMA,
        "actaudit": __version__,
        "model": {"path": m.path, "sha256": m.sha256, "opset": m.opset, "producer": m.producer},
        "data": {
            "source": b.source,
            "batches": b.n,
            "synthetic": b.synthetic,
            "digest": b.digest,
            "seed": b.seed if b.synthetic else None,
            "shapes": {k: list(v) for k, v in b.shapes.items()} if b.synthetic else None,
        },
        "engine": dict(m.engine),
        "sites": [site_dict(a) for a in m.sites],
    }
    e = getattr(m, "effect", None)
    if e is not None:
        for d in out["sites"]:
            d["effect"] = site_effect(e, d["id"])
        out["effect"] = effect_dict(e)
    return out
