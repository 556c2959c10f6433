"""The engines matrix (``actaudit engines REF --dtype D``) as text fitting 80 columns: one row
per engine op, its figures against the exact oracle and the letters of its findings."""

from __future__ import annotations

from audit.compare.matrix import Matrix, Row

from .cells import num, percent

LETTERS = {
    "nan": "n",
    "overflow": "o",
    "sign": "s",
    "range": "r",
    "monotonicity": "m",
    "special": "x",
}


def _short(row: Row) -> tuple[str, str]:
    """(engine column, op column): the target's prefix and the rest."""
    if ":" in row.target:
        prefix, _, op = row.target.partition(":")
        return prefix, op
    return row.engine, row.target


def table(m: Matrix, width: int = 80) -> str:
    """The matrix as text fitting ``width`` columns (80 by default)."""
    lines = [f"{m.reference}, {m.dtype}: every engine op against the exact oracle"]
    for k, v in m.versions.items():
        lines.append(f"  {k}: {v}"[:width])
    cols = [("engine", 8, "<"), ("op", 23, "<"), ("max ULP", 7, ">"), ("p99", 6, ">"), ("CR %", 6, ">")]
    cols += [("NaN", 5, ">"), ("inf", 5, ">"), ("unf", 5, ">")]
    lines += ["", (" ".join(f"{n:{a}{w}}" for n, w, a in cols) + " finds")[:width]]
    for row in m.rows:
        eng, op = _short(row)
        if len(op) > 23:
            op = op[:22] + "~"
        if row.result is None:
            note = row.note.removeprefix(row.target).strip(" :")
            room = width - 33
            note = note if len(note) <= room else note[: room - 1] + "~"
            lines.append(f"{eng[:8]:<8} {op:<23} {note}")
            continue
        r = row.result
        unf = sum(f.count for f in r.findings if f.kind == "underflow")
        kinds = {LETTERS.get(f.kind, "?") for f in r.findings if f.kind != "underflow"}
        if r.special_failures:
            kinds.add("x")
        cells = [eng[:8], op, num(r.max_ulp), num(r.p99_ulp), percent(r.correctly_rounded_fraction)]
        cells += [num(r.nan_count), num(r.inf_count), num(unf)]
        line = " ".join(f"{c:{a}{w}}" for c, (_, w, a) in zip(cells, cols)) + " " + "".join(sorted(kinds))
        lines.append(line[:width])
    lines += [
        "",
        "CR % correctly rounded; unf: flushed to 0; finds: n NaN, o overflow, s wrong",
        "  sign, r out of range, m monotonicity, x specials (sweep TARGET --findings)",
    ]
    return "\n".join(x.rstrip() for x in lines) + "\n"
