"""``actaudit model MODEL --fix OUT.onnx``: rewrites of the sites at risk, kept only where
the tool measures them better on the data.

A site is *at risk* where its audit is not ok: a weighted p99 above 1 ULP, or NaN, inf or
flushed results on its observed inputs.  The rewrites, each an exact graph edit that keeps
the site's input and output tensors (so the rest of the graph is untouched):

* ``gelu-kernel``: a decomposed erf-GELU (``x * 0.5 * (1 + erf(x / sqrt2))`` in any of the
  forms scan.py matches, whose 1 + erf cancels for negative x) becomes one GELU kernel:
  ai.onnx ``Gelu`` (approximate="none") where the model's opset is at least 20, else
  ``com.microsoft.Gelu``; no constants.  A site in fp16 (or bf16, fp64) is wrapped in
  Casts to fp32 and back: ORT would otherwise inline a GELU of that format into fp32
  Mul/Erf/Add nodes, the same cancellation; with the casts it runs its fp32 GELU kernel;
* ``gelu-approximate-none``: a ``Gelu`` node with approximate="tanh" gets
  approximate="none" (the exact erf form; same node, one attribute);
* ``softplus-kernel``: a written-out softplus ``Log(Add(1, Exp(x)))`` (its Exp overflows
  past x = 11.09 in fp16, 88.72 in fp32; its 1 + exp(x) rounds to 1 below x = -16.64 in
  fp32) becomes one ai.onnx ``Softplus`` node, in Casts to fp32 and back as above (ORT's
  CPU has no fp16 Softplus).
* ``sigmoid-kernel``: a written-out sigmoid (sigmoid-tanh ``0.5 + 0.5 * tanh(x / 2)``,
  sigmoid-exp ``1 / (1 + exp(-x))``) becomes one ai.onnx ``Sigmoid`` node, in Casts to fp32
  and back as above;
* ``sigmoid-exp-form``: a sigmoid-tanh becomes ``Reciprocal(Add(Exp(Neg(x)), 1))`` in the
  site's own dtype (the 1 an initializer of it): it cannot leave [0, 1], and its
  negative side does not cancel;
* ``exp-clip``: a sigmoid-ratio ``exp(x) / (1 + exp(x))``, whose overflowing Exp makes
  inf/inf = NaN, gets ``Clip(x, max=H)`` before its Exp, H exact (:func:`exp_clip_bound`):
  the largest value of the site's dtype whose exp is finite in the engine's format, where
  the ratio is exactly 1, sigmoid's correct rounding for every larger x.

A site with several candidates has each tried; the best at the site is kept.  The site's
Constant nodes that nothing else reads go with it.  A rewritten site is worse where it is
not audited (a Softplus that ORT fuses into the Gemm before it), audited in a coarser
format than the site was (an fp64 site made an fp32 kernel), or has a larger weighted
figure (in a finer format, the same absolute error is more ULPs: conservative).

Each candidate rewrite is applied alone to the model and the model re-audited with
``--effect`` on the same data: it is kept only if the site is not worse (weighted mean and
p99 ULP, and the shares of NaN, inf and flushed results, none larger) and no output is
worse (the joint effect, the distance of each output to the model whose every site is
correctly rounded: max abs, mean abs, non-finite changes and changed argmaxes, none
larger; max and mean abs not compared where the rewrite leaves fewer non-finite changes:
they are then over more positions).  The kept rewrites are written together to OUT.onnx,
which is audited once more: the before/after figures are those of the original model and
of the written one.  A rewrite that makes any site or output worse there is dropped and
the check repeated without it.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np

from audit.errors import ActauditError, BadOptionError

REWRITES = (
    "gelu-kernel",
    "gelu-approximate-none",
    "softplus-kernel",
    "sigmoid-kernel",
    "sigmoid-exp-form",
    "exp-clip",
)
KERNEL = {"softplus": ("softplus-kernel", "Softplus"), "sigmoid-tanh": ("sigmoid-kernel", "Sigmoid")}
KERNEL["sigmoid-exp"] = KERNEL["sigmoid-ratio"] = ("sigmoid-kernel", "Sigmoid")


def at_risk(d: dict) -> bool:
    if d["status"] != "audited":
        return False
    w = d.get("weighted") or {}
    f = _f
    return bool(f(w.get("nan")) or f(w.get("inf")) or f(w.get("underflow")) or (f(w.get("p99_ulp")) or 0) > 1)


def _f(v):
    return float(v) if isinstance(v, str) else v


def candidates(site) -> list[str]:
    """The rewrites that apply to a site, each tried on the data (the best one kept)."""
    if site.near is not None:
        return []
    if site.pattern == "erf-gelu":
        return ["gelu-kernel"]
    if site.pattern == "Gelu" and site.attributes.get("approximate") == "tanh":
        return ["gelu-approximate-none"]
    if site.pattern == "sigmoid-tanh":
        return ["sigmoid-kernel", "sigmoid-exp-form"]
    if site.pattern == "sigmoid-ratio":
        return ["sigmoid-kernel", "sigmoid-exp-form", "exp-clip"]
    if site.pattern in KERNEL:
        return [KERNEL[site.pattern][0]]
    return []


def exp_clip_bound(site_dtype: str, engine_dtype: str) -> float | None:
    """exp-clip's bound H, exact (mpmath): the largest value of the site's dtype whose exp
    is finite in the format the engine computes in (e^H below its overflow threshold,
    max_finite + half an ulp), provided sigmoid is saturated there: RN(sigmoid(x)) is 1
    from x = ln(2^(p+1) - 1) on (1 - sigmoid(x) = 1 / (1 + e^x) at most 2^-(p+1), half an
    ulp below 1, the tie going to the even 1), and 1 + e^H rounds to e^H (e^H at least
    2^(p+1)), so that e^H / (1 + e^H) is exactly 1 and every clipped input gets its own
    correct rounding.  None where no such value exists."""
    import mpmath

    from audit.model.scan import PRECISION
    from audit.numbers.formats import get_format

    p = PRECISION[engine_dtype]
    fmt = get_format(site_dtype)
    with mpmath.workprec(200):
        ef = get_format(engine_dtype)
        big = mpmath.mpf(ef.max_finite) + mpmath.mpf(float(ef.ulp([ef.max_finite])[0])) / 2
        top = mpmath.log(big)  # e^x overflows from here on
        h = float(fmt.round(np.array([float(top)]))[0])
        while mpmath.mpf(h) >= top:  # the largest value of the site's dtype below ln(overflow)
            h = float(np.nextafter(fmt.dtype.type(h), fmt.dtype.type(-np.inf)))
        if mpmath.exp(mpmath.mpf(h)) < mpmath.mpf(2) ** (p + 1):
            return None
    return h


def apply(model, site, rewrite: str, engine_dtype: str | None = None):
    """A copy of ``model`` with ``rewrite`` applied to ``site`` (an exact graph edit;
    ``engine_dtype``: the format the engine computes the site in, for exp-clip's bound)."""
    import onnx
    from onnx import helper

    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    names = {n.name or f"{n.op_type}#{i}": n for i, n in enumerate(g.node)}
    if rewrite == "gelu-approximate-none":
        n = names[site.nodes[-1]]
        for a in n.attribute:
            if a.name == "approximate":
                a.s = b"none"
        return m
    if rewrite == "gelu-kernel":
        opset = max((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), default=0)
        if opset >= 20:
            return _kernel(m, site, "Gelu", [], approximate="none")
        if not any(o.domain == "com.microsoft" for o in m.opset_import):
            m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
        return _kernel(m, site, "Gelu", [], domain="com.microsoft")
    if rewrite in ("softplus-kernel", "sigmoid-kernel") and KERNEL.get(site.pattern, ("",))[0] == rewrite:
        return _kernel(m, site, KERNEL[site.pattern][1], [])
    if rewrite == "exp-clip" and site.pattern == "sigmoid-ratio":
        return _exp_clip(m, site, engine_dtype or site.dtype)
    if rewrite == "sigmoid-exp-form" and site.pattern in ("sigmoid-tanh", "sigmoid-ratio"):
        return _kernel(m, site, "Reciprocal", [("Neg", {}), ("Exp", {}), ("Add1", {})], cast=False)
    raise BadOptionError(f"unknown rewrite '{rewrite}'")


def _exp_clip(m, site, engine_dtype):
    """``m`` with ``Clip(x, max=H)`` in front of the site's Exp (H: exp_clip_bound, an
    initializer ``actaudit_fix_SITE_hi`` of the site's dtype)."""
    from onnx import helper, numpy_helper

    from audit.model.scan import _np_dtype

    h = exp_clip_bound(site.dtype, engine_dtype) if site.dtype and engine_dtype else None
    if h is None:
        raise BadOptionError(f"exp-clip: no bound for {site.dtype} computed in {engine_dtype}")
    g = m.graph
    names = {n.name or f"{n.op_type}#{i}": n for i, n in enumerate(g.node)}
    exp = next(names[k] for k in site.nodes if names[k].op_type == "Exp")
    hi, t = f"actaudit_fix_{site.id}_hi", f"actaudit_fix_{site.id}_clipped"
    g.initializer.append(numpy_helper.from_array(np.array(h, dtype=_np_dtype(site.dtype)), hi))
    clip = helper.make_node("Clip", [exp.input[0], "", hi], [t], name=f"actaudit_fix_{site.id}")
    exp.input[0] = t
    nodes = list(g.node)
    at = next(i for i, n in enumerate(nodes) if n is exp or n == exp)
    del g.node[:]
    g.node.extend(nodes[:at] + [clip] + nodes[at:])
    return m


def _kernel(m, site, op: str, chain: list, domain: str = "", cast: bool = True, **attrs):
    """``m`` with the site's nodes replaced by one ``op`` node reading the site's input and
    writing its output (after the ``chain`` of (op, attributes) nodes, where given; "Add1"
    adds a constant 1 of the format it runs in, an initializer ``actaudit_fix_SITE_one``); with
    ``cast``, a site in fp16, bf16 or fp64 wrapped in Casts to fp32 and back
    (tensors ``actaudit_fix_SITE_x32``, ``actaudit_fix_SITE_y32``), so that ORT runs its fp32
    kernel whatever it would do with the format (inline a function op such as GELU into
    the same decomposed nodes, or have no kernel of it)."""
    import onnx
    from onnx import helper, numpy_helper

    from audit.model.scan import _np_dtype

    g = m.graph
    names = {n.name or f"{n.op_type}#{i}": n for i, n in enumerate(g.node)}
    drop = {id(names[k]) for k in site.nodes}
    at = min(i for i, n in enumerate(g.node) if id(n) in drop)
    keep = [n for n in g.node if id(n) not in drop]
    x, y, new = site.input, site.output, []
    wrapped = cast and site.dtype in ("fp16", "bf16", "fp64")
    if wrapped:
        x, y = f"actaudit_fix_{site.id}_x32", f"actaudit_fix_{site.id}_y32"
        new.append(helper.make_node("Cast", [site.input], [x], name=f"{x}_cast", to=onnx.TensorProto.FLOAT))
    for k, (cop, cattrs) in enumerate(chain):
        t = f"actaudit_fix_{site.id}_t{k}"
        if cop == "Add1":
            one = f"actaudit_fix_{site.id}_one"
            fmt = "fp32" if wrapped else (site.dtype or "fp32")
            g.initializer.append(numpy_helper.from_array(np.ones((), _np_dtype(fmt)), one))
            new.append(helper.make_node("Add", [x, one], [t], name=t))
        else:
            new.append(helper.make_node(cop, [x], [t], name=t, **cattrs))
        x = t
    new.append(helper.make_node(op, [x], [y], name=f"actaudit_fix_{site.id}", domain=domain, **attrs))
    if y != site.output:
        elem = {
            "fp16": onnx.TensorProto.FLOAT16,
            "bf16": onnx.TensorProto.BFLOAT16,
            "fp64": onnx.TensorProto.DOUBLE,
        }
        new.append(helper.make_node("Cast", [y], [site.output], name=f"{y}_cast", to=elem[site.dtype]))
    # the new nodes where the site's first node was (graph order stays topological)
    before = [n for n in g.node[:at] if id(n) not in drop]
    nodes = before + new + [n for n in keep if n not in before]
    # the site's Constant nodes (its 1, 0.5...) that nothing reads any more (none removed
    # where a node has a subgraph, which could read them by name)
    fed = {i for n in g.node if id(n) in drop for i in n.input}
    read = {i for n in nodes for i in n.input} | {o.name for o in g.output}
    if not any(
        a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for n in nodes for a in n.attribute
    ):
        nodes = [
            n
            for n in nodes
            if not (n.op_type == "Constant" and set(n.output) <= fed and not set(n.output) & read)
        ]
    del g.node[:]
    g.node.extend(nodes)
    return m


def _site_worse(b: dict, a: dict) -> bool:
    """The site after is worse than before: not audited, audited in a coarser format than
    before (its ULP figures are not comparable: an fp64 site made an fp32 kernel is worse),
    or any of its weighted figures larger (in a finer format the same absolute error is
    more ULPs: the comparison is conservative)."""
    from audit.model.scan import PRECISION

    wb, wa = b.get("weighted") or {}, a.get("weighted") or {}
    if a["status"] != "audited":
        return True
    if PRECISION.get(str(a.get("dtype")), 0) < PRECISION.get(str(b.get("dtype")), 0):
        return True
    for k in ("mean_ulp", "p99_ulp", "nan", "inf", "underflow"):
        vb, va = _f(wb.get(k)) or 0.0, _f(wa.get(k)) or 0.0
        if va > vb:
            return True
    return False


def _rank(d: dict) -> tuple:
    """A rewritten site's figures, best first: non-finite and flushed shares, p99, mean."""
    w = d.get("weighted") or {}
    g = [_f(w.get(k)) or 0.0 for k in ("nan", "inf", "underflow", "p99_ulp", "mean_ulp")]
    return (g[0] + g[1], g[2], g[3], g[4])


def _outputs_worse(b: dict, a: dict) -> bool:
    jb, ja = (b.get("effect") or {}).get("joint"), (a.get("effect") or {}).get("joint")
    if jb is None or ja is None:
        return False
    for k, ob in jb["outputs"].items():
        oa = ja["outputs"].get(k)
        if oa is None:
            return True
        fields = ["nonfinite_changed", "argmax_changed"]
        if (_f(oa.get("nonfinite_changed")) or 0) >= (_f(ob.get("nonfinite_changed")) or 0):
            # fewer non-finite values: max and mean abs are over more positions after than
            # before (the values made finite), so they are not compared
            fields += ["max_abs", "mean_abs"]
        for f in fields:
            if (_f(oa.get(f)) or 0) > (_f(ob.get(f)) or 0):
                return True
    return False


def fix(path, out_path, run, **kw) -> dict:
    """``run(path, **kw)`` -> (document, ModelAudit) audits a model file with --effect; the
    fix document {fix: [{site, rewrite, kept, why, before, after}], written, before, after}:
    per rewrite tried, the site's entries (actaudit.model/1) before and after it (after:
    null where the rewritten site is not found), then the two models' documents."""
    import onnx

    from audit.io import atomic_path
    from audit.model import scan as scan_mod

    before, mb = run(path, effect=True, **kw)
    model = scan_mod.load(path)
    by_id = {d["id"]: d for d in before["sites"]}
    eng = {a.site.id: a.engine.dtype or a.site.dtype for a in mb.sites}  # what the engine computes in
    tried = []
    with tempfile.TemporaryDirectory(prefix="actaudit-fix-") as tmp:

        def audit_of(m, name):
            p = os.path.join(tmp, name)
            onnx.save(m, p)
            return run(p, effect=True, **kw)[0]

        def site_of(doc, site):
            outs = (site.output, f"actaudit_fix_{site.id}_y32")
            return next((d for d in doc["sites"] if d.get("output") in outs), None)

        for a in mb.sites:
            if not at_risk(by_id[a.site.id]):
                continue
            good = []
            for rw in candidates(a.site):
                rec = {
                    "site": a.site.id,
                    "rewrite": rw,
                    "kept": False,
                    "why": "",
                    "before": by_id[a.site.id],
                    "after": None,
                }
                tried.append((rec, a.site))
                try:
                    edited = apply(model, a.site, rw, eng[a.site.id])
                except ActauditError as e:  # exp-clip without a bound in these formats
                    rec["why"] = str(e)
                    continue
                doc = audit_of(edited, f"{a.site.id}-{rw}.onnx")
                s = rec["after"] = site_of(doc, a.site)
                if s is None:
                    rec["why"] = "the rewritten site is not found in the rewritten model"
                elif s["status"] != "audited":
                    rec["why"] = "the rewritten site is not audited: " + (s.get("findings") or ["?"])[-1]
                elif _site_worse(by_id[a.site.id], s):
                    rec["why"] = "the site is worse on the data"
                elif _outputs_worse(before, doc):
                    rec["why"] = "an output is worse on the data"
                else:
                    rec["kept"] = True
                    good.append(rec)
            # the best of the site's rewrites under its own observed distribution
            good.sort(key=lambda r: _rank(r["after"]))
            for r in good[1:]:
                r["kept"], r["why"] = False, f"{good[0]['rewrite']} is better at the site"
        kept = [(r, s) for r, s in tried if r["kept"]]
        after = None
        while kept:
            m = model
            for r, s in kept:
                m = apply(m, s, r["rewrite"], eng[r["site"]])
            after = audit_of(m, "all.onnx")
            bad = [
                (r, s)
                for r, s in kept
                if site_of(after, s) is None or _site_worse(by_id[r["site"]], site_of(after, s))
            ]
            for r, s in kept:
                r["after"] = site_of(after, s)
            if not bad and not _outputs_worse(before, after):
                with atomic_path(out_path) as tmp_out:
                    onnx.save(m, str(tmp_out))
                break
            drop = bad[:1] or kept[-1:]
            for r, _s in drop:
                r["kept"], r["why"] = False, "worse together with the other rewrites"
            kept = [k for k in kept if k not in drop]
            after = None
    return {
        "fix": [r for r, _ in tried],
        "written": out_path if after is not None else None,
        "before": before,
        "after": after,
    }
