"""A Markdown summary of `actaudit check` for pull-request comments and CI step summaries."""

from __future__ import annotations

from pathlib import Path

from audit.io import write_text


def _cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def render(changes) -> str:
    fails = [c for c in changes if c.status == "fail"]
    better = [c for c in changes if c.status == "improved"]
    head = "FAILED" if fails else "passed"
    lines = [f"## actaudit check: {head}", "",
             f"{len(changes)} results: {len(fails)} failed, {len(better)} improved, "
             f"{len(changes) - len(fails) - len(better)} unchanged.", ""]
    if fails or better:
        lines += ["| status | result | details |", "|---|---|---|"]
        for c in fails + better:
            lines.append(f"| {c.status} | `{_cell(c.key)}` | {_cell('; '.join(c.messages))} |")
        lines.append("")
    if better and not fails:
        lines.append("Refresh the baseline with `actaudit baseline` to keep the improvements.")
    return "\n".join(lines) + "\n"


def write(path, changes) -> None:
    write_text(Path(path), render(changes))
