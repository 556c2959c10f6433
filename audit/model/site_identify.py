"""``actaudit identify model:FILE.onnx#SITE``: which formula a model site's engine op computes.

The site (its id from ``actaudit model``, e.g. ``s2``) is resolved here: the op ORT runs for
it after its graph optimizations (audit/model/optimized.py), an ``ort:`` op with its
attributes or the optimized subgraph run by ORT, and handed to
:func:`audit.compare.identify.identify` as a candidate.
"""

from __future__ import annotations

from audit.errors import BadOptionError


def site_candidate(spec: str, dtype: str | None):
    """(candidate, reference, dtype) of ``model:FILE.onnx#SITE``."""
    from audit.model import optimized as opt_mod
    from audit.model import scan as scan_mod
    from audit.model.audit import SiteAudit, _candidate
    from audit.numbers.formats import get_format

    body = spec[len("model:") :]
    path, sep, sid = body.rpartition("#")
    if not sep or not path or not sid:
        raise BadOptionError(f"'{spec}': model:FILE.onnx#SITE, e.g. model:net.onnx#s2")
    model = scan_mod.load(path)
    sites = scan_mod.scan(model)
    site = next((s for s in sites if s.id == sid), None)
    if site is None:
        raise BadOptionError(f"{path} has no site '{sid}' (its sites: {', '.join(s.id for s in sites)})")
    if site.reference is None:
        raise BadOptionError(f"{spec}: a near match has no reference ({site.near})")
    opt = opt_mod.optimize(model, opt_mod.DEFAULT_LEVEL, path, path)
    es = opt_mod.engine_sites([site], opt, model)[site.id]
    if es.why is not None:
        raise BadOptionError(f"{spec}: the engine op is not auditable alone: {es.why}")
    if es.dtype is None and es.capture:  # the format ORT runs it in (fp32 for an fp16 graph
        # whose casts ORT moved), from the optimized graph
        producer = {o: n for n in opt.graph.node for o in n.output}
        inits = {t.name: t for t in opt.graph.initializer}
        es.dtype = scan_mod.ELEM.get(opt_mod._elem_type(opt, es.capture[0], producer, inits) or 0)
    fmt = get_format(dtype or es.dtype or site.dtype or "fp32")
    es.dtype = es.dtype or site.dtype
    a = SiteAudit(site, es)
    return _candidate(a, fmt, None), site.reference["family"], fmt.name


def identify_target(target: str, reference=None, dtype=None, **kw):
    """:func:`audit.compare.identify.identify` of any target, ``model:FILE#SITE`` included."""
    from audit.compare.identify import identify

    if target.startswith("model:"):
        cand, ref, dt = site_candidate(target, dtype)
        if reference is not None and reference != ref:
            raise BadOptionError(f"{target} computes {ref}, not --reference {reference}")
        return identify(cand, ref, dt, label=target, **kw)
    return identify(target, reference, dtype or "fp32", **kw)
