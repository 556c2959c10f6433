"""What the gate's entry kinds share: files named in a spec resolved against the spec's
directory, and a result's counts and findings compared with its baseline entry."""

from __future__ import annotations

import math
from pathlib import Path


def _spec_path(p: Path, path: str) -> str:
    """``path`` of a spec resolved against the spec file's directory."""
    if not path or Path(path).is_absolute() or str(p.parent) == ".":  # (a Path's parent is never "")
        return path
    return str(p.parent / path)


def resolve_target(p: Path, t: str) -> str:
    """A target with the file it names (c:FILE.c:FUNCTION, lut:FILE, dump:FILE) resolved
    against the spec file's directory, as ``dump`` is."""
    if t.startswith("c:"):
        path, sep, func = t[2:].rpartition(":")
        return f"c:{_spec_path(p, path)}{sep}{func}" if sep else t
    for prefix in ("lut:", "dump:"):
        if t.startswith(prefix):
            return prefix + _spec_path(p, t[len(prefix) :])
    return t


def resolve_semantics(p: Path, text: str) -> str:
    """Semantics flags with each PRIM=table:FILE resolved against the spec file's directory."""
    out = []
    for tok in str(text).split(","):
        k, eq, v = tok.partition("=")
        if eq and v.strip().lower().startswith("table:"):
            tok = f"{k}=table:{_spec_path(p, v.strip()[6:])}"
        out.append(tok)
    return ",".join(out)


def _num(v) -> float:
    if isinstance(v, str):
        return float(v)
    return math.nan if v is None else float(v)


def compare_counts(names, now: dict, base: dict) -> tuple[list[str], list[str]]:
    """(failures, improvements) of a result's counts (NaN results, overflows, ...) against
    its baseline entry: a count that rose fails, one that fell is an improvement."""
    fails, better = [], []
    for c in names:
        if now[c] > base[c]:
            fails.append(f"{c} rose: {base[c]} -> {now[c]}")
        elif now[c] < base[c]:
            better.append(f"{c} fell: {base[c]} -> {now[c]}")
    return fails, better


def compare_findings(now: dict, base: dict) -> tuple[list[str], list[str]]:
    """(failures, improvements) of a result's findings against its baseline entry: a kind
    with more inputs, or an interval the baseline did not cover, fails."""
    fails, better = [], []
    for kind, ivs in now["findings"].items():
        bcount = base["finding_counts"].get(kind, 0)
        if now["finding_counts"][kind] > bcount:
            fails.append(f"{kind} findings rose: {bcount} -> {now['finding_counts'][kind]} inputs")
        new = [iv for iv in ivs if not _covered(iv, base["findings"].get(kind, []))]
        if new:
            fails.append(
                f"new {kind} interval [{new[0][0]}, {new[0][1]}]"
                + (f" and {len(new) - 1} more" if len(new) > 1 else "")
            )
    for kind, bcount in base["finding_counts"].items():
        if now["finding_counts"].get(kind, 0) < bcount:
            better.append(f"{kind} findings fell: {bcount} -> {now['finding_counts'].get(kind, 0)} inputs")
    return fails, better


def _covered(iv, base_ivs) -> bool:
    """Whether interval iv lies inside one of base_ivs (a NaN input covers a NaN input)."""
    lo, hi = _num(iv[0]), _num(iv[1])
    for b in base_ivs:
        blo, bhi = _num(b[0]), _num(b[1])
        if math.isnan(lo) or math.isnan(hi):
            if math.isnan(blo) and math.isnan(bhi):
                return True
            continue
        if blo <= lo and hi <= bhi:
            return True
    return False
