"""The HTML report of ``actaudit model --report DIR``: one self-contained page (index.html):
the sites table, and per audited site its observed histogram (counts per bin, log scale)
with the largest ULP error among the observed inputs of each bin over the same x axis
(inline SVG, no scripts, nothing fetched)."""

from __future__ import annotations

import math
from html import escape
from pathlib import Path

from reports.cells import num, percent
from reports.model_table import engine_op, risks, verdict

W, H, PAD = 760, 300, 56


def _f(v):
    return float(v) if isinstance(v, str) else v


def _svg(curve: dict, title: str) -> str:
    edges, counts, errs = curve["edges"], curve["counts"], curve["max_ulp"]
    lo, hi = edges[0], edges[-1]
    n = len(counts)
    pw, ph = W - 2 * PAD, (H - 3 * PAD // 2) / 2
    cmax = max(counts) or 1.0
    fin = [e for e in errs if e is not None and not math.isnan(e) and not math.isinf(e)]
    emax = max(fin + [1.0])
    bw = pw / n
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" role="img" aria-label="{escape(title)}">'
    ]
    out.append(f'<rect width="{W}" height="{H}" fill="white"/>')
    top, bot = PAD / 2, PAD / 2 + ph + 16
    for k, c in enumerate(counts):  # histogram, log scale
        if c > 0:
            h = ph * math.log1p(c) / math.log1p(cmax)
            out.append(
                f'<rect x="{PAD + k * bw:.1f}" y="{top + ph - h:.1f}" width="{max(bw - 0.5, 0.5):.1f}" height="{h:.1f}" fill="#4a7bd0"/>'
            )
    out.append(
        f'<text x="{PAD}" y="{top - 6}" font-size="12">observed inputs (count per bin, log scale; max {num(cmax)})</text>'
    )
    for k, e in enumerate(errs):  # error panel
        if e is None or (isinstance(e, float) and math.isnan(e)):
            continue
        v = emax if math.isinf(e) else e
        h = ph * math.log1p(v) / math.log1p(emax)
        color = "#c0392b" if math.isinf(e) or v > 1 else "#27ae60"
        out.append(
            f'<rect x="{PAD + k * bw:.1f}" y="{bot + ph - h:.1f}" width="{max(bw - 0.5, 0.5):.1f}" height="{h:.1f}" fill="{color}"/>'
        )
    out.append(
        f'<text x="{PAD}" y="{bot - 4}" font-size="12">largest ULP error among observed inputs (log scale; max {num(emax)}; red: above 1 ULP)</text>'
    )
    for y0 in (top, bot):
        out.append(f'<line x1="{PAD}" y1="{y0 + ph}" x2="{PAD + pw}" y2="{y0 + ph}" stroke="#333"/>')
    out.append(f'<text x="{PAD}" y="{H - 8}" font-size="12">{escape(num(lo))}</text>')
    out.append(f'<text x="{PAD + pw}" y="{H - 8}" font-size="12" text-anchor="end">{escape(num(hi))}</text>')
    if lo < 0 < hi:  # where x = 0 is
        zx = PAD + pw * (0 - lo) / (hi - lo)
        out.append(
            f'<line x1="{zx:.1f}" y1="{top}" x2="{zx:.1f}" y2="{bot + ph}" stroke="#999" stroke-dasharray="3,3"/>'
        )
        out.append(f'<text x="{zx:.1f}" y="{H - 8}" font-size="12" text-anchor="middle">0</text>')
    else:
        out.append(f'<text x="{W / 2}" y="{H - 8}" font-size="12" text-anchor="middle">x</text>')
    out.append("</svg>")
    return "".join(out)


def _bad(what: str):
    from audit.errors import BadFileError

    return BadFileError(f"the model report: {what}")


def _dict(v, what: str) -> dict:
    if not isinstance(v, dict):
        raise _bad(f"{what} is {type(v).__name__}, not an object")
    return v


def _list(v, what: str) -> list:
    if not isinstance(v, list):
        raise _bad(f"{what} is {type(v).__name__}, not a list")
    return v


def _td(v, pct: bool = False) -> str:
    """A number's cell: the table's format, the exact value in data-value and the tooltip."""
    f = _num_of(v)
    if f is None:
        return "<td class='n'>-</td>"
    shown = f"{num(100 * f, 2)}%" if pct and f else num(f)
    return f"<td class='n' data-value='{escape(repr(f))}' title='{escape(repr(f))}'>{escape(shown)}</td>"


def _num_of(v):
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, str):
        if v not in ("nan", "inf", "-inf"):
            raise _bad(f"'{v[:40]}' is not a number")
        return float(v)
    if not isinstance(v, (int, float)):
        raise _bad(f"{type(v).__name__} where a number belongs")
    return float(v)


OUT_KEYS = ("max_abs", "max_rel", "mean_abs", "argmax_changed", "nonfinite_changed")


def _outputs(o, what: str) -> dict:
    o = _dict(o, what)
    for name, fig in o.items():
        fig = _dict(fig, f"{what}[{name!r}]")
        missing = [k for k in OUT_KEYS[:3] if k not in fig]
        if missing:
            raise _bad(f"{what}[{name!r}] has no {', '.join(missing)}")
        for k in (*OUT_KEYS, "scale"):
            _num_of(fig.get(k))
    return o


def effect_rows(doc: dict) -> list[tuple[str, str, dict, dict | None]]:
    """(key, label, outputs, site) of the effect ranking in rank order, the joint effect
    last (key 'joint', site None); [] without --effect."""
    e = doc.get("effect")
    if e is None:
        return []
    e = _dict(e, "effect")
    by_id = {d.get("id"): d for d in doc["sites"]}
    rows = []
    for sid in _list(e.get("ranking"), "effect.ranking"):
        d = by_id.get(sid)
        if d is None or not isinstance(d.get("effect"), dict):
            raise _bad(f"effect.ranking names {str(sid)[:40]!r}, a site with no effect")
        se = d["effect"]
        out = _outputs(se.get("outputs"), f"site {sid}'s effect.outputs")
        rows.append((sid, f"{sid} {d['pattern'].replace('com.microsoft.', 'ms.')}"[:28], out, d))
    j = e.get("joint")
    if j is not None and rows:
        j = _dict(j, "effect.joint")
        n = len(_list(j.get("sites"), "effect.joint.sites"))
        rows.append(("joint", f"all ({n} sites)", _outputs(j.get("outputs"), "effect.joint.outputs"), None))
    return rows


def _effect_section(doc: dict, picture: str | None) -> str:
    rows = effect_rows(doc)
    e = doc.get("effect")
    if e is None:
        return ""
    skipped = _dict(e.get("skipped") or {}, "effect.skipped")
    head = ["rank", "site", "pattern", "cut at", "output", "max abs", "max rel", "mean abs",
            "argmax changed", "non-finite changed"]  # fmt: skip
    body = []
    for r, (key, _label, outs, d) in enumerate(rows, 1):
        if d is None:
            j = e["joint"]
            lead = ["all", f"{len(j['sites'])} sites", "every site at once", f"{j.get('runs', '-')} runs"]
        else:
            se = d["effect"]
            lead = [str(r), d["id"], d["pattern"], f"{se.get('tensor', '-')} ({se.get('dtype') or '-'})"]
        for k, (name, o) in enumerate(outs.items()):
            cells = [f"<td>{escape(str(c))}</td>" for c in lead] if k == 0 else ["<td></td>"] * len(lead)
            body.append(
                f"<tr data-site='{escape(key)}' data-output='{escape(str(name))}'>"
                + "".join(cells)
                + f"<td>{escape(str(name))}</td>"
                + _td(o["max_abs"])
                + _td(o["max_rel"])
                + _td(o["mean_abs"])
                + (_td(o.get("argmax_changed"), pct=True))
                + _td(o.get("nonfinite_changed"))
                + "</tr>"
            )
        for note in (d or {}).get("effect", {}).get("notes") or []:
            body.append(
                f"<tr class='note'><td></td><td colspan='{len(head) - 1}'>{escape(str(note))}</td></tr>"
            )
    table = (
        "<table id='effect-table'><tr>"
        + "".join(f"<th>{h}</th>" for h in head)
        + "</tr>"
        + "".join(body)
        + "</table>"
    )
    skip = "".join(f"<li>{escape(str(k))}: {escape(str(v))}</li>" for k, v in skipped.items())
    img = (
        f"<img id='effect-ranking' src='data:image/svg+xml;base64,{picture}' "
        "alt='the sites ranked by their effect on the outputs'>"
        if picture
        else ""
    )
    return (
        "<section id='effect'><h2>Effect of each site on the outputs</h2>"
        "<p>Each site's output replaced by its correct rounding (the rest of the graph run as the "
        "engine runs it, in the same formats, on the same data). Ranked by the share of rows whose "
        "argmax changes, then by the largest change, then by the mean change, relative to the output's largest magnitude; "
        "<i>all</i>: every site replaced at once. Hover a figure for its exact value.</p>"
        + img
        + table
        + (f"<p>Not cut:</p><ul>{skip}</ul>" if skip else "")
        + (f"<p class='small'>method: {escape(str(e.get('method') or '-'))}</p>")
        + "</section>"
    )


# ------------------------------------------------------------------ fix results
def fix_of(doc: dict):
    """(records, before document, after document, written) of the fix results the document
    holds (``fix``: the records {site, rewrite, kept, why, before, after}, or an object with
    them under ``fix`` or ``rewrites`` and the documents before and after), or None."""
    f = doc.get("fix")
    if f is None:
        return None
    before = after = written = None
    if isinstance(f, dict):
        before, after, written = f.get("before"), f.get("after"), f.get("written")
        f = f.get("fix", f.get("rewrites"))
    recs = _list(f, "fix")
    for k, r in enumerate(recs):
        r = _dict(r, f"fix[{k}]")
        for key, typ in (("site", str), ("rewrite", str), ("kept", bool)):
            if not isinstance(r.get(key), typ):
                raise _bad(f"fix[{k}].{key} is missing or not a {typ.__name__}")
        if r.get("why") is not None and not isinstance(r["why"], str):
            raise _bad(f"fix[{k}].why is not a string")
        for side in ("before", "after"):
            if r.get(side) is not None:
                _dict(r[side], f"fix[{k}].{side}")
    for what, d in (("before", before), ("after", after)):
        if d is not None:
            _dict(d, f"fix {what}")
    return recs, before, after, written


def _site_figs(d) -> list[str]:
    if not d:
        return ["<td class='n'>-</td>"] * 5
    w = d.get("weighted") or {}
    if d.get("status") != "audited" or not w:
        return [f"<td colspan='5'>{escape(str(d.get('status', '-')))}</td>"]
    return [
        _td(w.get("mean_ulp")),
        _td(w.get("p99_ulp")),
        _td(w.get("nan"), pct=True),
        _td(w.get("inf"), pct=True),
        _td(w.get("underflow"), pct=True),
    ]


def _fix_section(doc: dict) -> str:
    got = fix_of(doc)
    if got is None:
        return ""
    recs, before, after, written = got
    head1 = (
        "<tr><th rowspan='2'>site</th><th rowspan='2'>rewrite</th><th rowspan='2'>kept</th>"
        "<th colspan='5'>before (weighted ULP, shares)</th><th colspan='5'>after</th></tr><tr>"
        + "<th>mean</th><th>p99</th><th>NaN</th><th>inf</th><th>flushed</th>" * 2
        + "</tr>"
    )
    body = []
    for r in recs:
        kept = "yes" if r["kept"] else "no"
        body.append(
            f"<tr data-site='{escape(r['site'])}' data-rewrite='{escape(r['rewrite'])}'>"
            f"<td>{escape(r['site'])}</td><td>{escape(r['rewrite'])}</td><td>{kept}</td>"
            + "".join(_site_figs(r.get("before")))
            + "".join(_site_figs(r.get("after")))
            + "</tr>"
        )
        if not r["kept"]:
            body.append(
                f"<tr class='note'><td></td><td colspan='12'>not kept: {escape(r.get('why') or '-')}</td></tr>"
            )
    out = [
        "<section id='fix'><h2>Fixes</h2>",
        "<p>Each rewrite tried on a site at risk, applied alone and the model audited again on the "
        "same data; kept only where neither the site nor any output is worse. The figures after: "
        "those of the model written.</p>",
        f"<table id='fix-table'>{head1}{''.join(body)}</table>"
        if recs
        else "<p>no site at risk has a rewrite</p>",
    ]
    jb = (((before or {}).get("effect") or {}).get("joint") or {}).get("outputs") or {}
    ja = (((after or {}).get("effect") or {}).get("joint") or {}).get("outputs") or {}
    if jb:
        jb = _outputs(jb, "fix before's joint effect")
        ja = _outputs(ja, "fix after's joint effect") if ja else {}
        rows = "".join(
            f"<tr data-output='{escape(str(k))}'><td>{escape(str(k))}</td>"
            + _td(ob["max_abs"])
            + _td((ja.get(k) or {}).get("max_abs"))
            + _td(ob["mean_abs"])
            + _td((ja.get(k) or {}).get("mean_abs"))
            + "</tr>"
            for k, ob in jb.items()
        )
        out.append(
            "<p>Distance of each output to the model whose every site is correctly rounded (the joint "
            "effect), before and after:</p><table id='fix-outputs'><tr><th>output</th><th>max abs before"
            "</th><th>max abs after</th><th>mean abs before</th><th>mean abs after</th></tr>"
            + rows
            + "</table>"
        )
    out.append(f"<p>written: {escape(str(written))}</p>" if written else "<p>nothing written</p>")
    out.append("</section>")
    return "".join(out)


# ------------------------------------------------------------------ identify results
def _identify_of(doc: dict, d: dict) -> list:
    v = d.get("identify")
    if v is None:
        top = doc.get("identify")
        v = _dict(top, "identify").get(d["id"]) if top is not None else None
    if v is None:
        return []
    if isinstance(v, dict):
        v = v.get("identify")
    out = []
    for k, m in enumerate(_list(v, f"site {d['id']}'s identify")):
        m = _dict(m, f"site {d['id']}'s identify[{k}]")
        if not isinstance(m.get("candidate"), str):
            raise _bad(f"site {d['id']}'s identify[{k}] has no candidate")
        out.append(m)
    return out


def _identify_block(doc: dict, d: dict) -> str:
    ms = _identify_of(doc, d)
    if not ms:
        return ""
    rows = []
    for m in ms[:8]:
        fd = m.get("first_difference")
        if fd is None:
            diff = "identical on every input compared"
        else:
            fd = _dict(fd, "first_difference")
            diff = (
                f"differs on {num(_num_of(fd.get('differing')))} inputs; at x = {fd.get('x')!r} the "
                f"engine gives {fd.get('target')!r}, the candidate {fd.get('candidate')!r}"
            )
        rows.append(
            f"<tr><td>{escape(m['candidate'])}</td><td>{escape(str(m.get('path', '-')))}</td>"
            + _td(m.get("identical_fraction"), pct=True)
            + f"<td>{escape(diff)}</td></tr>"
        )
    return (
        "<p>Which formula the engine op computes (actaudit identify), best matches first:</p>"
        "<table class='identify'><tr><th>candidate</th><th>path</th><th>identical</th>"
        "<th>where the candidate differs</th></tr>" + "".join(rows) + "</table>"
    )


def _site_effect_line(d: dict) -> str:
    se = d.get("effect")
    if not isinstance(se, dict):
        return ""
    parts = []
    for name, o in (se.get("outputs") or {}).items():
        arg = _num_of(o.get("argmax_changed"))
        parts.append(
            f"{escape(str(name))}: max abs {escape(num(_num_of(o.get('max_abs'))))}, max rel "
            f"{escape(num(_num_of(o.get('max_rel'))))}"
            + (f", argmax {escape(num(100 * arg, 2))}%" if arg else "")
        )
    return f"<p>effect rank {se.get('rank', '-')} (<a href='#effect'>ranking</a>): {'; '.join(parts)}</p>"


def page(doc: dict, curves: dict, picture: str | None = None) -> str:
    """The page of an ``actaudit.model/1`` document (or of a fix document
    ``actaudit.model-fix/1``: its model before the fix, with the fix results); ``curves``:
    site id -> the histogram and error curve; ``picture``: the effect ranking, base64 SVG."""
    doc = _dict(doc, "the document")
    if doc.get("schema") == "actaudit.model-fix/1":
        records = doc.get("fix", doc.get("rewrites"))
        doc = {**_dict(doc.get("before"), "the fix document's before"), "fix": {**doc, "fix": records}}
    _list(doc.get("sites"), "sites")
    m, e, data = doc["model"], doc["engine"], doc["data"]
    src = f"synthetic (--random, seed {data['seed']})" if data["synthetic"] else escape(str(data["source"]))
    rows = []
    for d in doc["sites"]:
        w = d.get("weighted") or {}
        i = d.get("inputs") or {}
        rng = f"[{num(_f(i.get('min')))}, {num(_f(i.get('max')))}]" if i.get("count") else "-"
        rows.append(
            "<tr>"
            + "".join(
                f"<td>{escape(str(c))}</td>"
                for c in (
                    d["id"],
                    ", ".join(d["nodes"])[:80],
                    d["pattern"],
                    engine_op(d),
                    d["dtype"] or "-",
                    rng,
                    num(_f(w.get("mean_ulp"))),
                    num(_f(w.get("p99_ulp"))),
                    risks(d),
                    verdict(d),
                )
            )
            + "</tr>"
        )
    sections = []
    for d in doc["sites"]:
        c = curves.get(d["id"])
        body = _svg(c, f"site {d['id']}") if c else ("<p>not audited</p>" if d["status"] != "audited" else "")
        finds = "".join(f"<li>{escape(f)}</li>" for f in d["findings"]) or "<li>none</li>"
        ident = d.get("identity") or {}
        w, wo = d.get("weighted") or {}, d.get("worst") or {}
        figures = ""
        if w:
            bound = wo.get("range_bound_ulp")
            rtext = (
                f"bound {num(_f(bound))}"
                if bound is not None
                else f"sampled {num(_f(wo.get('range_sampled_ulp')))}"
            )
            figures = (
                f"<p>weighted by {num((d.get('inputs') or {}).get('count'))} observed inputs: mean "
                f"{num(_f(w.get('mean_ulp')))}, p99 {num(_f(w.get('p99_ulp')))}, p99.9 {num(_f(w.get('p999_ulp')))} ULP; "
                f"correctly rounded {percent(_f(w['correctly_rounded']))} %. Worst on an observed input "
                f"{num(_f(wo.get('observed_ulp')))} ULP at x = {num(_f(wo.get('observed_x')))}; over the observed "
                f"range {escape(rtext)} ULP.</p>"
            )
        sections.append(
            f"<section id='{escape(d['id'])}'><h2>{escape(d['id'])}: {escape(d['pattern'])} &rarr; "
            f"{escape(d['engine_op'] or '-')}</h2><p>engine: {escape(str(ident.get('engine', '-')))} "
            f"{escape(str(ident.get('version', '')))}, precision {escape(str(ident.get('precision', '-')))}, "
            f"dispatch {escape(str(ident.get('dispatch', '-')))}</p>{figures}{_site_effect_line(d)}{body}"
            f"<ul>{finds}</ul>{_identify_block(doc, d)}</section>"
        )
    head = (
        "site",
        "nodes",
        "pattern",
        "engine op",
        "dtype",
        "observed range",
        "w mean",
        "w p99",
        "risks",
        "verdict",
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>actaudit model</title>"
        "<style>body{font-family:Helvetica,Arial,sans-serif;margin:24px;max-width:1100px}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}"
        "th{background:#eee}td.n{text-align:right;font-variant-numeric:tabular-nums}"
        "tr.note td{border:none;color:#555;font-size:12px}.small{font-size:12px;color:#555}"
        "#effect-ranking{display:block;margin:8px 0 12px}table{margin-bottom:8px}</style></head><body>"
        f"<h1>actaudit model: {escape(m['path'])}</h1>"
        f"<p>sha256 {escape(m['sha256'])}, opset {m['opset']}, producer {escape(m['producer'] or '-')}<br>"
        f"{escape(e['name'])} {escape(e['version'])}, opt level {escape(e['opt_level'])}, dispatch "
        f"{escape(e['dispatch'])}<br>data: {src}, {data['batches']} batch(es), digest {escape(data['digest'][:16])}</p>"
        "<p>w mean, w p99: ULP errors weighted by each site's observed inputs. The worst case is not weighted: "
        "see each site's worst error.</p>"
        "<table><tr>"
        + "".join(f"<th>{h}</th>" for h in head)
        + "</tr>"
        + "".join(rows)
        + "</table>"
        + _effect_section(doc, picture)
        + _fix_section(doc)
        + "".join(sections)
        + "</body></html>"
    )


def write_report(doc: dict, m, out_dir) -> Path:
    """DIR/index.html (self-contained: the effect ranking embedded) and, with --effect,
    DIR/effect-ranking.svg.  ``m``: the ModelAudit (its histograms), or None (a document
    alone, e.g. a fix document: no histograms)."""
    import base64

    from audit.io import write_files

    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    curves = {a.site.id: a.curve for a in m.sites if a.curve} if m is not None else {}
    shown = doc
    if isinstance(doc, dict) and doc.get("schema") == "actaudit.model-fix/1":
        shown = _dict(doc.get("before"), "the fix document's before")
    rows = effect_rows(_dict(shown, "the document"))
    picture = None
    files: list[tuple[str, str | bytes]] = []
    if rows:
        from reports.model_figures import effect_ranking_svg

        svg = effect_ranking_svg([(k, label, outs) for k, label, outs, _ in rows])
        files.append(("effect-ranking.svg", svg))
        picture = base64.b64encode(svg).decode("ascii")
    p = d / "index.html"
    files.append(("index.html", page(doc, curves, picture)))  # (written as a set, index.html last)
    write_files(d, files)
    return p
