"""The table of ``actaudit model``: one line per site and one of its figures, in 80 columns.

    id  pattern     engine op        observed range    mean   p99 risks
    s1  erf-gelu    ms.Gelu          [-9.44, 11.5]    0.458  2.79 unf 0.27% clip 10%
        flushes to 0; fp16, 4,096 in; CR 76.6%; worst 4.04 @ -4.09, range bound 4.04

``risks``: nan, inf, unf (flushed to 0), clip (mass outside the safe range), as the
probability of a draw of the site's inputs.  The verdict opens the second line: ok (p99 at
most 1 ULP), close (at most 4), inaccurate; "rare large errors" where the worst observed
error exceeds 16 ULP and 64 times the p99; FAILS (NaN or inf results), flushes to 0; or
why the site is not audited.
"""

from __future__ import annotations

from reports.cells import num, percent

WIDTH = 80


def _cut(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 3] + "..."


def engine_op(d: dict) -> str:
    op = d["engine_op"] or "-"
    if op.startswith("ort:"):
        op = op[4:].split("[")[0].replace("com.microsoft.", "ms.")
    elif op.startswith("graph "):
        op = "graph " + "+".join(op.split()[1:])
    return op


def _range(d: dict) -> str:
    i = d.get("inputs") or {}
    if not i or not i.get("count"):
        return "-"
    return f"[{num(_f(i['min']))}, {num(_f(i['max']))}]"


def _f(v):
    if isinstance(v, str):
        return float(v)
    return v


def _pct(v: float) -> str:
    """A probability in percent, in the one number format of every table: 10%, 0.27%, 1.2e-3%."""
    return f"{num(100 * v, 2)}%"


def risks(d: dict) -> str:
    w = d.get("weighted") or {}
    out = []
    for k, tag in (("nan", "nan"), ("inf", "inf"), ("underflow", "unf")):
        v = _f(w.get(k))
        if v:
            out.append(f"{tag} {_pct(v)}")
    s = d.get("safe") or {}
    if s and _f(s.get("mass_outside")):
        out.append(f"clip {_pct(_f(s['mass_outside']))}")
    return " ".join(out) or "-"


def verdict(d: dict) -> str:
    if d["status"] != "audited":
        f = d["findings"][-1] if d["findings"] else d["status"]
        return _cut(f, 60)
    w = d.get("weighted") or {}
    if _f(w.get("nan")) or _f(w.get("inf")):
        return "FAILS: NaN/inf"
    if _f(w.get("underflow")):
        return "flushes to 0"
    p99 = _f(w.get("p99_ulp"))
    worst = _f((d.get("worst") or {}).get("observed_ulp"))
    rare = worst is not None and p99 is not None and worst > max(16.0, 64 * p99)
    if p99 is not None and p99 <= 1:
        return "ok, rare large errors" if rare else "ok"
    if p99 is not None and p99 <= 4:
        return "close, rare large errors" if rare else "close"
    return "inaccurate"


def _second(d: dict) -> str:
    """The site's second line: its verdict, then format, inputs, CR and worst errors."""
    w = d.get("weighted") or {}
    i = d.get("inputs") or {}
    wo = d.get("worst") or {}
    parts = [verdict(d)]
    if d["status"] != "audited":
        return "    " + parts[0]
    parts.append(f"{d['dtype']}, {i['count']:,} in" if i.get("count") else str(d["dtype"]))
    if w:
        parts.append(f"CR {percent(_f(w['correctly_rounded']))}%")
    if wo.get("observed_ulp") is not None:
        rng = wo.get("range_bound_ulp")
        r = f"bound {num(_f(rng))}" if rng is not None else f"~{num(_f(wo.get('range_sampled_ulp')))}"
        parts.append(f"worst {num(_f(wo['observed_ulp']))} @ {num(_f(wo['observed_x']))}, range {r}")
    return "    " + "; ".join(parts)


def table(doc: dict) -> str:
    m, e, data = doc["model"], doc["engine"], doc["data"]
    src = "synthetic (--random), seed " + str(data["seed"]) if data["synthetic"] else data["source"]
    lines = [
        _cut(f"model {m['path']} (sha256 {m['sha256'][:12]}), opset {m['opset']}", WIDTH),
        _cut(
            f"{e['name']} {e['version']}, opt level {e['opt_level']}, dispatch {e['dispatch']}"
            + (f", fp32 inputs binned to {e['bin']}" if e.get("bin") not in (None, "exact") else ""),
            WIDTH,
        ),
        _cut(f"data: {src}, {data['batches']} batch{'es' if data['batches'] != 1 else ''}", WIDTH),
        f"{'id':<4}{'pattern':<12}{'engine op':<17}{'observed range':<16}{'mean':>6}{'p99':>6} risks",
    ]
    for d in doc["sites"]:
        w = d.get("weighted") or {}
        head = (
            f"{_cut(d['id'], 3):<4}{_cut(d['pattern'].replace('com.microsoft.', 'ms.'), 11):<12}"
            f"{_cut(engine_op(d), 16):<17}"
            f"{_cut(_range(d), 15):<16}{num(_f(w.get('mean_ulp'))):>6}{num(_f(w.get('p99_ulp'))):>6} "
        )
        lines.append(_cut(head + risks(d), WIDTH))
        lines.append(_cut(_second(d), WIDTH))
    lines += [
        "",
        "mean, p99: ULP errors weighted by each site's observed inputs; risks: their",
        "  probability of nan, inf, unf (flushed to 0), clip (outside the safe range);",
        "  worst: on an observed input; range: over the observed range (bound:",
        "  exhaustive; ~: sampled); ms. com.microsoft",
    ]
    if doc.get("effect") is not None:
        lines += [""] + effect_lines(doc)
    return "\n".join(lines)


def _arg(v) -> str:
    return "-" if v is None else _pct(_f(v)) if _f(v) else "0"


def effect_lines(doc: dict) -> list[str]:
    """The effect ranking: per site and graph output, the change of the output when the
    site's output is replaced by its correct rounding; then all sites at once."""
    e = doc["effect"]
    by_id = {d["id"]: d for d in doc["sites"]}
    lines = [
        "effect on the outputs: each site's output replaced by its correct rounding",
        f"{'rank':<5}{'site':<5}{'pattern':<12}{'output':<14}{'max abs':>10}{'max rel':>10}"
        f"{'mean abs':>10}{'argmax':>8}",
    ]

    def rows(label, pattern, outs):
        out = []
        for k, (name, o) in enumerate(outs.items()):
            lead = f"{label:<10}{_cut(pattern, 11):<12}" if k == 0 else " " * 22
            out.append(
                _cut(
                    f"{lead}{_cut(name, 13):<14}{num(_f(o['max_abs'])):>10}{num(_f(o['max_rel'])):>10}"
                    f"{num(_f(o['mean_abs'])):>10}{_arg(o['argmax_changed']):>8}",
                    WIDTH,
                )
            )
        return out

    for r, sid in enumerate(e["ranking"], 1):
        d = by_id[sid]
        se = d["effect"]
        lines += rows(f"{r:<5}{_cut(sid, 4)}", d["pattern"].replace("com.microsoft.", "ms."), se["outputs"])
        import textwrap

        for n in se.get("notes") or []:
            lines += textwrap.wrap(n, WIDTH, initial_indent="    ", subsequent_indent="      ")
    if e.get("joint"):
        lines += rows("all", f"{len(e['joint']['sites'])} sites", e["joint"]["outputs"])
    for sid, why in (e.get("skipped") or {}).items():
        lines.append(_cut(f"{'-':<5}{sid:<5}not cut: {why}", WIDTH))
    lines += [
        "ranked by the outputs' argmax changes (argmax: the fraction of rows whose",
        "  top score moves; classifier-shaped outputs only), then max abs, then mean",
        "  abs, relative to the output's largest magnitude; all: every site at once",
    ]
    return lines


def _fig(d: dict) -> str:
    w = d.get("weighted") or {}
    if d["status"] != "audited":
        return d["status"]
    return f"mean {num(_f(w.get('mean_ulp')))} p99 {num(_f(w.get('p99_ulp')))} {risks(d)}".rstrip(" -")


def compare_table(cmp: dict) -> str:
    """Two exports site by site: each pair, what changed, both sites' figures."""
    a, b = cmp["a"], cmp["b"]
    sa = {d["id"]: d for d in a["sites"]}
    sb = {d["id"]: d for d in b["sites"]}
    lines = [
        _cut(f"A {a['model']['path']} (sha256 {a['model']['sha256'][:12]})", WIDTH),
        _cut(f"B {b['model']['path']} (sha256 {b['model']['sha256'][:12]})", WIDTH),
        f"{'A':<4}{'B':<4}{'pattern A':<13}{'pattern B':<13}{'engine op A':<17}engine op B",
    ]
    for p in cmp["pairs"]:
        da, db = sa[p["a"]], sb[p["b"]]
        pat = (da["pattern"].replace("com.microsoft.", "ms."), db["pattern"].replace("com.microsoft.", "ms."))
        lines.append(
            _cut(
                f"{_cut(p['a'], 3):<4}{_cut(p['b'], 3):<4}{_cut(pat[0], 12):<13}{_cut(pat[1], 12):<13}"
                f"{_cut(engine_op(da), 16):<17}{engine_op(db)}",
                WIDTH,
            )
        )
        import textwrap

        lines += textwrap.wrap(
            "; ".join(p["changes"]) or "unchanged", WIDTH, initial_indent="    ", subsequent_indent="      "
        )
        for side, d in (("A", da), ("B", db)):
            lines.append(_cut(f"    {side} {d['dtype'] or '-'}: {_fig(d)}", WIDTH))
    for side in ("a", "b"):
        for sid in cmp["unpaired"][side]:
            d = (sa if side == "a" else sb)[sid]
            lines.append(_cut(f"{side.upper()} only: {sid} {d['pattern']} ({engine_op(d)})", WIDTH))
    lines += [
        "",
        "sites paired along the graphs by order and reference family; changes: the",
        "  formula, attributes, the graph's and the engine's dtype, the engine op;",
        "  mean, p99: ULP errors weighted by each site's observed inputs",
    ]
    return "\n".join(lines)


def fix_table(doc: dict) -> str:
    """``--fix``: each rewrite tried, kept or why not, the site's figures before and after;
    then each output's distance to the model with every site correctly rounded."""
    before = {d["id"]: d for d in doc["before"]["sites"]}
    lines = [
        _cut(f"fix {doc['before']['model']['path']}: rewrites of the sites at risk", WIDTH),
        f"{'site':<6}{'rewrite':<24}{'kept':<6}{'before mean/p99':>20}{'after mean/p99':>20}",
    ]

    def mp(d):
        w = (d or {}).get("weighted") or {}
        return f"{num(_f(w.get('mean_ulp')))} / {num(_f(w.get('p99_ulp')))}" if w else "-"

    for r in doc["fix"]:
        lines.append(
            _cut(
                f"{r['site']:<6}{r['rewrite']:<24}{'yes' if r['kept'] else 'no':<6}"
                f"{mp(before.get(r['site'])):>20}{mp(r.get('after')):>20}",
                WIDTH,
            )
        )
        if not r["kept"]:
            lines.append(_cut(f"      not kept: {r['why']}", WIDTH))
    if not doc["fix"]:
        lines.append("no site at risk has a rewrite")
    jb = ((doc["before"].get("effect") or {}).get("joint") or {}).get("outputs", {})
    ja = (((doc.get("after") or {}).get("effect") or {}).get("joint") or {}).get("outputs", {})
    if jb and ja:
        lines += [
            "",
            "distance of each output to the model with every site correctly rounded",
            f"{'output':<12}{'max abs before':>14}{'after':>10}{'mean abs before':>16}{'after':>10}"
            f"{'non-finite b/a':>16}",
        ]
        for k, ob in jb.items():
            oa = ja.get(k, {})
            nf = f"{ob.get('nonfinite_changed', 0)} / {oa.get('nonfinite_changed', '-')}"
            lines.append(
                _cut(
                    f"{_cut(k, 11):<12}{num(_f(ob['max_abs'])):>14}{num(_f(oa.get('max_abs'))):>10}"
                    f"{num(_f(ob['mean_abs'])):>16}{num(_f(oa.get('mean_abs'))):>10}{nf:>16}",
                    WIDTH,
                )
            )
    lines.append(_cut(f"written: {doc['written']}" if doc["written"] else "nothing written", WIDTH))
    return "\n".join(lines)
