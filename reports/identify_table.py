"""The table of ``actaudit identify``: the best matches, in 80 columns.

identify ort:Gelu[approximate=tanh] (gelu, fp32): 254,721 inputs, 165 paths
rank  candidate          identical  path
1     gelu.mlas_tanh      100.000%  compute fp32
...
best: identical on every input compared
"""

from __future__ import annotations

from reports.cells import percent

WIDTH = 80


def _cut(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 3] + "..."


def _pct(f: float) -> str:
    """The share of identical outputs as every table writes a share (truncated: 100 only when
    every output is identical)."""
    return "100%" if f >= 1 else f"{percent(f)}%"


def table(doc: dict) -> str:
    how = "every finite input" if doc["exhaustive"] else "branch-point windows and samples"
    lines = [
        _cut(f"identify {doc['target']} ({doc['reference']}, {doc['dtype']})", WIDTH),
        _cut(f"{doc['inputs']:,} inputs ({how}), {doc['paths']} paths tried", WIDTH),
        f"{'rank':<6}{'candidate':<19}{'identical':>10}  path",
    ]
    for i, m in enumerate(doc["identify"], 1):
        lines.append(
            _cut(
                f"{i:<6}{_cut(m['candidate'], 18):<19}{_pct(m['identical_fraction']):>10}  {m['path']}", WIDTH
            )
        )
    if doc["identify"]:
        best = doc["identify"][0]
        fd = best["first_difference"]
        ties = doc.get("ties", 1)
        if ties > 1:
            lines.append(_cut(f"{ties} paths agree as well as the best on these inputs", WIDTH))
        if fd is None:
            lines.append("best: identical on every input compared")
        else:
            lines += [
                _cut(f"best differs on {fd['differing']:,} inputs; nearest 0 at x = {fd['x']!r}:", WIDTH),
                _cut(f"  the target gives {fd['target']!r}, {best['candidate']} {fd['candidate']!r}", WIDTH),
            ]
    return "\n".join(lines)
