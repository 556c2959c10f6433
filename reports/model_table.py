"""The table of ``actaudit model``: one line per site and one of its figures, in 80 columns.

    site pattern      engine op            observed range      mean    p99 risks
    s1   erf-gelu     com.microsoft.Gelu   [-4.12, 5.03]      0.485  0.961 -
         ok; fp32, 8,192 inputs; CR 95.0 %; worst 0.961 at -0.676, range bound 2.96

``risks``: nan, inf, unf (flushed to 0), clip (mass outside the safe range), as the
probability of a draw of the site's inputs.  The verdict closes the second line.
"""

from __future__ import annotations

from reports.cells import num

WIDTH = 80


def _cut(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 3] + "..."


def engine_op(d: dict) -> str:
    op = d["engine_op"] or "-"
    if op.startswith("ort:"):
        op = op[4:].split("[")[0]
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


def risks(d: dict) -> str:
    w = d.get("weighted") or {}
    out = []
    for k, tag in (("nan", "nan"), ("inf", "inf"), ("underflow", "unf")):
        v = _f(w.get(k))
        if v:
            out.append(f"{tag} {num(100 * v)}%")
    s = d.get("safe") or {}
    if s and _f(s.get("mass_outside")):
        out.append(f"clip {num(100 * _f(s['mass_outside']))}%")
    return ", ".join(out) or "-"


def verdict(d: dict) -> str:
    if d["status"] != "audited":
        f = d["findings"][-1] if d["findings"] else d["status"]
        return _cut(f, 60)
    w = d.get("weighted") or {}
    if _f(w.get("nan")) or _f(w.get("inf")):
        return "FAILS: NaN/inf on observed inputs"
    if _f(w.get("underflow")):
        return "flushes to 0 on observed inputs"
    p99 = _f(w.get("p99_ulp"))
    if p99 is not None and p99 <= 1:
        return "ok"
    return f"p99 {num(p99)} ULP"


def table(doc: dict) -> str:
    m, e, data = doc["model"], doc["engine"], doc["data"]
    src = "synthetic (--random), seed " + str(data["seed"]) if data["synthetic"] else data["source"]
    lines = [
        _cut(f"model {m['path']} (sha256 {m['sha256'][:12]}), opset {m['opset']}", WIDTH),
        _cut(
            f"{e['name']} {e['version']}, opt level {e['opt_level']}, dispatch {e['dispatch']}"
            + (f", inputs binned to {e['bin']}" if e.get("bin") not in (None, "exact") else ""),
            WIDTH,
        ),
        _cut(f"data: {src}, {data['batches']} batch{'es' if data['batches'] != 1 else ''}", WIDTH),
        f"{'site':<5}{'pattern':<13}{'engine op':<21}{'observed range':<18}{'mean':>7}{'p99':>7} risks",
    ]
    for d in doc["sites"]:
        w = d.get("weighted") or {}
        head = (
            f"{_cut(d['id'], 4):<5}{_cut(d['pattern'], 12):<13}{_cut(engine_op(d), 20):<21}"
            f"{_cut(_range(d), 17):<18}{num(_f(w.get('mean_ulp'))):>7}{num(_f(w.get('p99_ulp'))):>7} "
        )
        lines.append(_cut(head + risks(d), WIDTH))
        i = d.get("inputs") or {}
        wo = d.get("worst") or {}
        parts = [f"{d['dtype'] or '-'}"]
        if i.get("count"):
            parts[0] += f", {i['count']:,} inputs"
        if w:
            parts.append(f"CR {100 * _f(w['correctly_rounded']):.1f} %")
        if wo.get("observed_ulp") is not None:
            rng = wo.get("range_bound_ulp")
            rng_text = (
                f"bound {num(_f(rng))}"
                if rng is not None
                else f"sampled {num(_f(wo.get('range_sampled_ulp')))}"
            )
            parts.append(
                f"worst {num(_f(wo['observed_ulp']))} at {num(_f(wo['observed_x']))}, range {rng_text}"
            )
        lines.append(_cut("     " + verdict(d) + "; " + "; ".join(parts), WIDTH))
    lines.append("")
    lines.append("mean, p99: ULP errors weighted by the site's observed inputs; risks: the")
    lines.append("  probability of nan, inf, unf (flushed to 0), clip (outside the safe range)")
    return "\n".join(lines)
