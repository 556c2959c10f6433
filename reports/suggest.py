"""The suggest section of an HTML report: ranking, Pareto front and verified repairs.

Built from the ``actaudit.suggest/1`` JSON document (:meth:`audit.repair.suggest.Suggestion.to_dict`),
so that any report can embed it: :func:`section` returns a self-contained ``<section>``
fragment (its own scoped style), :func:`page` a whole HTML page around it.
"""

from __future__ import annotations

import textwrap
from html import escape

from .cells import num, percent

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
    return escape(num(v))


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
    by: dict = {}
    for cid, c in sorted(doc.get("left_out", {}).items()):
        by.setdefault(c, []).append(cid)
    left_html = "".join(
        f"<p>Not ranked here (they always compute in {escape(c)}; rank them with --compute "
        f"{escape(c)}): {escape(', '.join(ids))}</p>"
        for c, ids in sorted(by.items())
    )
    return (
        f'<section class="aa-suggest"><style>{STYLE}</style>{head}{table}{left_html}{front_html}'
        f"{rec_html}</section>"
    )


def page(doc: dict) -> str:
    """A standalone HTML page holding the section."""
    title = escape(f"actaudit suggest {doc['reference']} {doc['dtype']}")
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{title}</title></head>'
        f"<body>{section(doc)}</body></html>\n"
    )


def _wrap(text: str, width: int, first: str, rest: str | None = None) -> list[str]:
    return textwrap.wrap(
        text,
        width=max(40, width),
        initial_indent=first,
        subsequent_indent=first if rest is None else rest,
        break_on_hyphens=False,
        break_long_words=False,
    ) or [first.rstrip()]


COLS = (("max ULP", 9), ("p99", 8), ("NaN", 6), ("inf", 5), ("spec", 5), ("cost", 6))  # with a gap


def text(doc: dict, width: int = 80) -> str:
    """The ranking, the Pareto front and the recommendations of one suggest document
    (:meth:`audit.repair.suggest.Suggestion.to_dict`) as plain text fitting ``width``
    columns (80 and up), numbers in the one format of every table (reports/cells.py)."""
    how = "every input" if doc["inputs"]["exhaustive"] else "a sample (a lower bound on the errors)"
    sem = doc.get("semantics", "ieee")
    on = "" if sem == "ieee" else f", semantics {sem}"
    out = _wrap(
        f"suggest {doc['reference']} {doc['dtype']} (compute {doc['compute']}{on}): "
        f"{doc['inputs']['count']} inputs, {how}",
        width,
        "",
        "  ",
    )
    ranking = doc["ranking"]
    cw = max([len("candidate")] + [len(r["candidate"]) for r in ranking])
    fixed = 4 + 2 + sum(w for _, w in COLS) + len("  front")
    alone = fixed + cw > width  # an id too long for the row: on its own line
    cw = 0 if alone else cw
    head = f"{'rank':>4}  {'candidate' if cw else '':{cw}}" + "".join(f" {h:>{w - 1}}" for h, w in COLS)
    out += ["", head.rstrip() + "  front"]
    for r in ranking:
        vals = (r["max_ulp"], r["p99_ulp"], r["nan_count"], r["inf_count"], r["special_failures"], r["cost"])
        cells = "".join(f" {num(v):>{w - 1}}" for v, (_, w) in zip(vals, COLS))
        if alone:
            out.append(f"{r['rank']:>4}  {r['candidate']}")
            out.append(f"{'':4}  {cells}  {'*' if r['pareto'] else ''}".rstrip())
        else:
            out.append(f"{r['rank']:>4}  {r['candidate']:{cw}}{cells}  {'*' if r['pareto'] else ''}".rstrip())
        out += _wrap(_ops(r["ops"]), width, " " * 6)
    out += _wrap(
        "spec: wrong special inputs (+-inf, NaN); cost: weighted operation count; front (*): the "
        "Pareto front of accuracy and cost",
        width,
        "",
    )
    if doc.get("left_out"):
        by: dict[str, list[str]] = {}
        for cid, c in sorted(doc["left_out"].items()):
            by.setdefault(c, []).append(cid)
        for c, ids in sorted(by.items()):
            out += _wrap(
                f"Not ranked here (they always compute in {c}; rank them with --compute {c}): {', '.join(ids)}",
                width,
                "",
                "  ",
            )
    if doc.get("distribution"):
        out += [
            "",
            *_wrap(
                f"Weighted by {doc['distribution']} (ranked by {doc['rank']} after correctness):", width, ""
            ),
        ]
        for r in ranking:
            wd = r.get("weighted") or {}
            out += _wrap(
                f"{r['rank']:>4}  {r['candidate']}: mean {num(wd.get('mean_ulp'))}, p99 {num(wd.get('p99_ulp'))}, "
                f"CR {percent(wd.get('correctly_rounded'))} %",
                width,
                "",
                " " * 6,
            )
    timed = [r for r in ranking if r.get("ns_per_element") is not None]
    if timed:
        out += [""] + _wrap(
            "Measured C kernels (this machine, gcc -O2, median ns per element): "
            + "; ".join(f"{r['candidate']} {num(r['ns_per_element'])} ns" for r in timed),
            width,
            "",
            "  ",
        )
    front = sorted((r for r in ranking if r["pareto"]), key=lambda r: (r["cost"], r["candidate"]))
    acc = lambda r: r["max_ulp"] if not (r["nan_count"] or r["inf_count"]) else "inf"  # noqa: E731
    out += [""] + _wrap(
        "Pareto front (cost, max ULP): "
        + "; ".join(f"{r['candidate']} ({num(r['cost'])}, {num(acc(r))})" for r in front),
        width,
        "",
        "  ",
    )
    recs = doc.get("recommendations", [])
    if recs:
        out += ["", "Recommendations (each verified by a sweep over the same inputs):"]
    told = set()  # fit commands already explained
    for rec in recs:
        out += _wrap(f"{rec['candidate']}: {rec['problem']}", width, "  ", "    ")
        for rep in rec["repairs"]:
            said = rep["text"]
            if rep["action"] == "fit":
                said = f"`{rep['command']}` (above)" if rep["command"] in told else said
                told.add(rep["command"])
            out += _wrap(f"{rep['action']}: {said}", width, "    -> ", "       ")
        if not rec["repairs"]:
            out += _wrap(
                "no verified repair among the catalog's candidates and clips", width, "  -> ", "     "
            )
    return "\n".join(line.rstrip() for line in out) + "\n"
