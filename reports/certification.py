"""``actaudit selftest --certify``: the table of certified oracle entries, 80 columns wide."""

from __future__ import annotations

HEADER = f"{'reference':<15} {'format':<13} {'certified':>9} {'total':>7} {'exact':>7} {'raised':>7}  status"


def text(results) -> str:
    """One row per (reference, format): entries certified of the table's total, of them
    proven as exact cases and those that needed more than the first precision; then every
    uncertified entry listed (the first few of each table)."""
    lines = [HEADER, "-" * len(HEADER)]
    for r in results:
        status = "ok" if r.n_uncertified == 0 else "FAIL"
        lines.append(
            f"{r.reference:<15} {r.format:<13} {r.certified:>9} {r.total:>7} {r.exact:>7} {r.raised:>7}  {status}"
        )
    for r in results:
        for x, v in r.uncertified:
            lines.append(f"UNCERTIFIED {r.reference} {r.format}: x = {x!r}, table value {v!r}")
        if r.n_uncertified > len(r.uncertified):
            lines.append(f"UNCERTIFIED {r.reference} {r.format}: {r.n_uncertified - len(r.uncertified)} more")
    n = sum(r.total for r in results)
    bad = sum(r.n_uncertified for r in results)
    lines.append(
        f"actaudit selftest --certify: {len(results)} tables, {n} values, "
        f"{n - bad} certified, {bad} uncertified"
    )
    return "\n".join(lines) + "\n"
