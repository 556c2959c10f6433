"""The suggest section of an HTML report: ranking, Pareto front and verified repairs.

Built from the ``actaudit.suggest/1`` JSON document (:meth:`audit.repair.suggest.Suggestion.to_dict`),
so that any report can embed it: :func:`section` returns a self-contained ``<section>``
fragment (its own scoped style), :func:`page` a whole HTML page around it.
"""

from __future__ import annotations

from html import escape

STYLE = """
.aa-suggest table { border-collapse: collapse; font: 13px/1.4 system-ui, sans-serif; }
.aa-suggest th, .aa-suggest td { border-bottom: 1px solid #ddd; padding: 2px 8px; text-align: right; }
.aa-suggest td.l, .aa-suggest th.l { text-align: left; }
.aa-suggest tr.pareto td { background: #eef7ee; }
.aa-suggest tr.bad td.n { color: #b00020; font-weight: 600; }
.aa-suggest ul, .aa-suggest p { font: 13px/1.4 system-ui, sans-serif; }
.aa-suggest details > summary { cursor: pointer; font: 600 14px/1.6 system-ui, sans-serif; }
"""


def _num(v) -> str:
    if isinstance(v, str):
        return escape(v)
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _ops(ops: dict) -> str:
    return ", ".join(f"{n} {k}" for k, n in ops.items()) or "-"


def section(doc: dict, level: int = 2) -> str:
    """An HTML <section> for one suggest document (its title a heading of that level)."""
    how = "every input" if doc["inputs"]["exhaustive"] else "a sample (errors are lower bounds)"
    sem = doc.get("semantics", "ieee")
    on = "" if sem == "ieee" else f", semantics {escape(sem)}"
    h = f"h{level}"
    head = (
        f"<{h}>Suggest: {escape(doc['reference'])} in {escape(doc['dtype'])} "
        f"(compute {escape(doc['compute'])}{on})</{h}><p>{doc['inputs']['count']} inputs, "
        f"{how}. Ranked by correctness (NaN, inf, specials, max ULP, p99), then cost "
        f"(weighted operation counts). Shaded: the Pareto front of accuracy and cost.</p>"
    )
    cols = ("rank", "candidate", "max ULP", "p99", "NaN", "inf", "specials wrong", "cost", "operations")
    rows = []
    for r in doc["ranking"]:
        bad = r["nan_count"] or r["inf_count"] or r["special_failures"]
        cls = " ".join(c for c in ("pareto" if r["pareto"] else "", "bad" if bad else "") if c)
        cells = [
            _num(r["rank"]),
            f'<td class="l">{escape(r["candidate"])}</td>',
            _num(r["max_ulp"]),
            _num(r["p99_ulp"]),
            _num(r["nan_count"]),
            _num(r["inf_count"]),
            _num(r["special_failures"]),
            _num(r["cost"]),
            f'<td class="l">{escape(_ops(r["ops"]))}</td>',
        ]
        tds = "".join(
            c
            if c.startswith("<td")
            else (f'<td class="n">{c}</td>' if i in (4, 5, 6) and c != "0" else f"<td>{c}</td>")
            for i, c in enumerate(cells)
        )
        rows.append(f'<tr class="{cls}">{tds}</tr>')
    ths = "".join(
        f'<th class="l">{c}</th>' if c in ("candidate", "operations") else f"<th>{c}</th>" for c in cols
    )
    table = f"<table><thead><tr>{ths}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    recs = []
    for rec in doc.get("recommendations", []):
        reps = "".join(f"<li>{escape(rep['action'])}: {escape(rep['text'])}</li>" for rep in rec["repairs"])
        reps = reps or "<li>no verified repair among the catalog's candidates and clips</li>"
        recs.append(f"<li><b>{escape(rec['candidate'])}</b>: {escape(rec['problem'])}<ul>{reps}</ul></li>")
    rec_html = (
        f"<details open><summary>Repairs of {len(recs)} findings (each verified by a "
        f"sweep over the same inputs)</summary><ul>{''.join(recs)}</ul></details>"
        if recs
        else ""
    )
    front = sorted((r for r in doc["ranking"] if r["pareto"]), key=lambda r: (r["cost"], r["candidate"]))
    front_html = (
        "<p>Pareto front (cost, max ULP): "
        + "; ".join(f"{escape(r['candidate'])} ({_num(r['cost'])}, {_num(r['max_ulp'])})" for r in front)
        + "</p>"
        if front
        else ""
    )
    return f'<section class="aa-suggest"><style>{STYLE}</style>{head}{table}{front_html}{rec_html}</section>'


def page(doc: dict) -> str:
    """A standalone HTML page holding the section."""
    title = escape(f"actaudit suggest {doc['reference']} {doc['dtype']}")
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{title}</title></head>'
        f"<body>{section(doc)}</body></html>\n"
    )
