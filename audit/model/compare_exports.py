"""``actaudit model A.onnx B.onnx``: two exports of one network, site by site.

Both models are audited on the same data (the same ``--random`` draws, or the same
batches).  Their sites are paired along the graph by order and by what they compute: the
sequences of the sites' reference families (gelu, sigmoid, ...; a near match by its
pattern) are aligned (the longest matching blocks, difflib), so that an erf-GELU and a
tanh-GELU at the same place pair, and a site present in one export only is left unpaired.
For each pair, what changed: the pattern (the formula: ``erf-gelu`` -> ``tanh-gelu``,
``Sigmoid`` -> ``silu``), the attributes (``approximate``), the format the graph computes
it in, the format and the op ORT runs; each pair with both sites' figures.
"""

from __future__ import annotations

import difflib

SCHEMA = "actaudit.model-compare/1"


def _key(d: dict) -> str:
    ref = d.get("reference") or {}
    return ref.get("family") or d["pattern"]


def changes(a: dict, b: dict) -> list[str]:
    """What differs between two paired sites (their actaudit.model/1 entries)."""
    out = []
    if a["pattern"] != b["pattern"]:
        out.append(f"formula {a['pattern']} -> {b['pattern']}")
    ra, rb = (a.get("reference") or {}).get("approximation"), (b.get("reference") or {}).get("approximation")
    if ra != rb:
        out.append(f"approximation {ra or 'none'} -> {rb or 'none'}")
    aa, ab = a.get("attributes") or {}, b.get("attributes") or {}
    for k in sorted(set(aa) | set(ab)):
        if aa.get(k) != ab.get(k):
            out.append(f"{k} {aa.get(k, '-')} -> {ab.get(k, '-')}")
    if a.get("graph_dtype") != b.get("graph_dtype"):
        out.append(f"graph dtype {a.get('graph_dtype')} -> {b.get('graph_dtype')}")
    if a.get("dtype") != b.get("dtype"):
        out.append(f"engine dtype {a.get('dtype')} -> {b.get('dtype')}")
    if a.get("engine_op") != b.get("engine_op"):
        out.append(f"engine op {a.get('engine_op')} -> {b.get('engine_op')}")
    return out


def pair(sa: list, sb: list) -> tuple[list, list, list]:
    """(pairs of indices, unpaired of A, unpaired of B), along the graphs."""
    ka, kb = [_key(d) for d in sa], [_key(d) for d in sb]
    sm = difflib.SequenceMatcher(None, ka, kb, autojunk=False)
    pairs, ua, ub = [], [], []
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            pairs += list(zip(range(i1, i2), range(j1, j2)))
        else:
            ua += list(range(i1, i2))
            ub += list(range(j1, j2))
    return pairs, ua, ub


def compare(doc_a: dict, doc_b: dict) -> dict:
    """The comparison document of two actaudit.model/1 documents."""
    sa, sb = doc_a["sites"], doc_b["sites"]
    pairs, ua, ub = pair(sa, sb)
    return {
        "schema": SCHEMA,
        "a": doc_a,
        "b": doc_b,
        "pairs": [{"a": sa[i]["id"], "b": sb[j]["id"], "changes": changes(sa[i], sb[j])} for i, j in pairs],
        "unpaired": {"a": [sa[i]["id"] for i in ua], "b": [sb[j]["id"] for j in ub]},
    }
