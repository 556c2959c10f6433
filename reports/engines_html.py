"""The report of ``actaudit engines REFERENCE --report DIR``: the usual HTML report of every
engine op's result (index.html: one detail per op, each linking to the matrix and naming
the engine, version, attributes, precision and dispatch it was bound to) plus engines.html,
the cross-engine matrix (one row per op, linking to its detail), and engines.json.  Written
as one set (audit.io.write_files); every text that can come from a user is escaped."""

from __future__ import annotations

import tempfile
from pathlib import Path

from audit.compare.matrix import document
from audit.io import dumps, write_files

from . import html as html_report
from .cells import num, percent
from .html import CSS, e, slug
from .table import SHORT


def anchor(r) -> str:
    """The id of a result's detail in index.html (as reports.html names it)."""
    return slug(f"{r.candidate}-{r.dtype}-{r.compute}-{html_report._ptext(r)}")


def _identity_text(ident: dict) -> str:
    if not ident:
        return ""
    attrs = ", ".join(f"{k}={v}" for k, v in ident.get("attributes", {}).items()) or "none"
    opts = ", ".join(f"{k}={v}" for k, v in ident.get("options", {}).items()) or "none"
    return (
        f"{ident.get('engine')} {ident.get('version')} op {ident.get('op')}; attributes {attrs}; "
        f"options {opts}; dtype {ident.get('dtype')}; precision {ident.get('precision')}; "
        f"dispatch {ident.get('dispatch')}"
    )


def matrix_page(m, command: str = "") -> str:
    rows = []
    for i, row in enumerate(m.rows):
        r = row.result
        if r is None:
            rows.append(
                f"<tr id='row-{i}'><td>{e(row.engine)}</td><td>{e(row.target)}</td>"
                f"<td colspan='8' class='note'>{e(row.note)}</td></tr>"
            )
            continue
        unf = sum(f.count for f in r.findings if f.kind == "underflow")
        kinds = ", ".join(sorted({SHORT.get(f.kind, f.kind) for f in r.findings if f.kind != "underflow"}))
        ident = row.identity
        rows.append(
            f"<tr id='row-{i}'><td>{e(row.engine)}</td>"
            f"<td><a href='index.html#{e(anchor(r))}'>{e(row.target)}</a></td>"
            f"<td>{e(ident.get('precision', r.compute))}</td><td>{e(ident.get('dispatch', ''))}</td>"
            f"<td>{e(num(r.max_ulp))}</td><td>{e(num(r.p99_ulp))}</td>"
            f"<td>{e(percent(r.correctly_rounded_fraction))}</td><td>{r.nan_count}</td>"
            f"<td>{r.inf_count}</td><td>{unf}</td><td>{e(kinds)}</td></tr>"
        )
    vers = "".join(f"<li>{e(k)}: {e(v)}</li>" for k, v in m.versions.items())
    head = (
        "<tr><th>engine</th><th>op</th><th>precision</th><th>dispatch</th><th>max ULP</th>"
        "<th>p99</th><th>CR %</th><th>NaN</th><th>inf</th><th>flushed</th><th>findings</th></tr>"
    )
    return (
        f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>actaudit engines "
        f"{e(m.reference)} {e(m.dtype)}</title><style>{CSS}</style></head><body><main>"
        f"<h1>{e(m.reference)} in every engine ({e(m.dtype)})</h1>"
        f"<p class='note'>Every engine op computing {e(m.reference)}, on the same {e(m.dtype)} "
        f"inputs, against the exact oracle; the last row is the catalog's best candidate. "
        f"Click an op for its detail (<a href='index.html'>the full report</a>).</p><ul>{vers}</ul>"
        f"<table class='sortable'><thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>"
        f"<p class='note'>command: <code>{e(command)}</code></p></main></body></html>"
    )


def build(m, out_dir, command: str = "") -> Path:
    """Write DIR/engines.html (the matrix), DIR/index.html (the details), figures, run.json
    and engines.json; return the matrix page's path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results = [row.result for row in m.rows if row.result is not None]
    files: list = []
    with tempfile.TemporaryDirectory(prefix=".actaudit-engines-", dir=out) as tmp:
        if results:
            html_report.build(results, tmp, command)
            for p in sorted(Path(tmp).iterdir()):
                if p.is_file():
                    files.append((p.name, p.read_bytes()))
    index = next((i for i, (n, _) in enumerate(files) if n == "index.html"), None)
    if index is not None:
        page = files[index][1].decode("utf-8")
        page = page.replace(
            "<h1>actaudit report</h1>",
            "<h1>actaudit report</h1><p><a href='engines.html'>Cross-engine matrix</a></p>",
            1,
        )
        for i, row in enumerate(m.rows):
            if row.result is None:
                continue
            tag = f"id='{anchor(row.result)}'>"
            at = page.find(tag)
            end = page.find("</summary>", at)
            if at < 0 or end < 0:
                continue
            link = (
                f"<p class='note'>{e(_identity_text(row.identity) or row.note)} &middot; "
                f"<a href='engines.html#row-{i}'>in the cross-engine matrix</a></p>"
            )
            page = page[: end + len("</summary>")] + link + page[end + len("</summary>") :]
        files[index] = ("index.html", page)
        files.append(files.pop(index))  # index.html last
    files.insert(0, ("engines.json", dumps(document(m, command=command))))
    files.insert(len(files) - (1 if index is not None else 0), ("engines.html", matrix_page(m, command)))
    write_files(out, files)
    return out / "engines.html"
