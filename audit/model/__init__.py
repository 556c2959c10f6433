"""``actaudit model``: the activations an ONNX model really runs, audited on its inputs.

scan.py (the sites of the graph), optimized.py (what ORT runs for each), capture.py (one
pass over the batches, histograms), audit.py (per-site audits), document.py (JSON
``actaudit.model/1``), effect.py (``--effect``: each site replaced by its correct rounding).
"""

from __future__ import annotations


def run(
    path,
    data=None,
    random=False,
    shape=(),
    seed=0,
    batches=1,
    engine="ort",
    opt_level="all",
    dtype=None,
    compute=None,
    bin=None,
    json_out=None,
    effect=False,
):
    """What ``actaudit model`` does: the audit and its ``actaudit.model/1`` document, the
    JSON written to ``json_out`` (not '-': stdout is the caller's).  (document, ModelAudit)."""
    from audit.io import dumps, write_text
    from audit.model.audit import audit_model
    from audit.model.capture import parse_shapes
    from audit.model.document import document

    m = audit_model(
        path,
        data=data,
        random=random,
        shapes=parse_shapes(shape),
        seed=seed,
        batches=batches,
        engine=engine,
        opt_level=opt_level,
        dtype=dtype,
        compute=compute,
        bin=bin,
        effect=effect,
    )
    doc = document(m)
    if json_out is not None and json_out != "-":
        write_text(json_out, dumps(doc) + "\n")
    return doc, m


def run_compare(path_a, path_b, json_out=None, **kw):
    """``actaudit model A.onnx B.onnx``: both audited on the same data, their sites paired
    (audit/model/compare_exports.py); the JSON written to ``json_out`` (not '-').
    (comparison document)."""
    from audit.io import dumps, write_text
    from audit.model.compare_exports import compare

    doc_a, _ = run(path_a, **kw)
    doc_b, _ = run(path_b, **kw)
    doc = compare(doc_a, doc_b)
    if json_out is not None and json_out != "-":
        write_text(json_out, dumps(doc) + "\n")
    return doc


def run_fix(path, out_path, json_out=None, **kw):
    """``actaudit model MODEL --fix OUT.onnx`` (audit/model/rewrite.py): the fix document
    {fix, written, before, after}; its JSON written to ``json_out`` (not '-')."""
    from audit.io import dumps, write_text
    from audit.model.rewrite import fix

    def audit_file(p, **k):
        return run(p, **k)

    doc = fix(path, out_path, audit_file, **kw)
    doc = {"schema": "actaudit.model-fix/1", **doc}
    if json_out is not None and json_out != "-":
        write_text(json_out, dumps(doc) + "\n")
    return doc
