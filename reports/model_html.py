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


def _effect_svg(doc: dict) -> str:
    """The effect ranking: per site (ranked) and the joint effect, a bar of the largest
    max abs change of an output relative to that output's largest magnitude (log scale),
    with the argmax change written beside it."""
    e = doc["effect"]
    by_id = {d["id"]: d for d in doc["sites"]}
    rows = [(f"{sid} {by_id[sid]['pattern']}", by_id[sid]["effect"]["outputs"]) for sid in e["ranking"]]
    if e.get("joint"):
        rows.append((f"all ({len(e['joint']['sites'])} sites)", e["joint"]["outputs"]))

    def rel(outs):
        r, arg = 0.0, 0.0
        for o in outs.values():
            s, ma = _f(o.get("scale")) or 0.0, _f(o["max_abs"])
            r = max(r, math.inf if o.get("nonfinite_changed") else (ma / s if s > 0 else 0.0))
            arg = max(arg, _f(o.get("argmax_changed")) or 0.0)
        return r, arg

    vals = [rel(o) for _, o in rows]
    fin = [v for v, _ in vals if v > 0 and math.isfinite(v)]
    lo = math.floor(math.log10(min(fin))) if fin else -8
    hi = math.ceil(math.log10(max(fin))) if fin else 0
    hi = max(hi, lo + 1)
    rh, lw = 26, 220
    h = PAD + rh * len(rows) + 24
    pw = W - lw - 150
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" role="img" aria-label="effect ranking">',
        f'<rect width="{W}" height="{h}" fill="white"/>',
        '<text x="8" y="18" font-size="12">largest |output change| / output magnitude when the site is made '
        "correctly rounded (log scale)</text>",
    ]
    for k, ((label, _), (v, arg)) in enumerate(zip(rows, vals)):
        y = PAD / 2 + 8 + k * rh
        out.append(
            f'<text x="{lw - 8}" y="{y + 15}" font-size="12" text-anchor="end">{escape(label[:30])}</text>'
        )
        if v > 0:
            frac = 1.0 if math.isinf(v) else (math.log10(v) - lo + 1) / (hi - lo + 1)
            color = "#c0392b" if arg > 0 or math.isinf(v) else "#4a7bd0"
            out.append(
                f'<rect x="{lw}" y="{y + 3}" width="{max(2.0, pw * frac):.1f}" height="{rh - 8}" fill="{color}"/>'
            )
        txt = ("inf" if math.isinf(v) else num(v)) + (f", argmax {num(100 * arg, 2)}%" if arg else "")
        out.append(f'<text x="{lw + pw + 8}" y="{y + 15}" font-size="12">{escape(txt)}</text>')
    out.append(
        f'<text x="{lw}" y="{h - 6}" font-size="11">1e{lo - 1} at the left edge; red: a top-1 answer '
        "changes (or a non-finite output)</text>"
    )
    out.append("</svg>")
    return "".join(out)


def page(doc: dict, curves: dict) -> str:
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
        body = _svg(c, f"site {d['id']}") if c else "<p>not audited</p>"
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
            f"dispatch {escape(str(ident.get('dispatch', '-')))}</p>{figures}{body}<ul>{finds}</ul></section>"
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
        "th{background:#eee}</style></head><body>"
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
        + (
            "<section id='effect'><h2>Effect of each site on the outputs</h2>"
            "<p>Each site's output replaced by its correct rounding, the rest of the graph run as the "
            "engine runs it; ranked by argmax changes, then by the change relative to the output.</p>"
            + _effect_svg(doc)
            + "</section>"
            if doc.get("effect") and doc["effect"]["ranking"]
            else ""
        )
        + "".join(sections)
        + "</body></html>"
    )


def write_report(doc: dict, m, out_dir) -> Path:
    from audit.io import write_text

    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    curves = {a.site.id: a.curve for a in m.sites if a.curve}
    p = d / "index.html"
    write_text(p, page(doc, curves))
    return p
