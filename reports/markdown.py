"""A Markdown summary of `actaudit check` for pull-request comments and CI step summaries."""

from __future__ import annotations

import re
from pathlib import Path

from audit.io import write_text

from .cells import md_text


def _cell(s: str) -> str:
    return md_text(s)


def _code(s: str) -> str:
    """A code span that holds any text: delimited by one more backtick than the longest
    run inside it (CommonMark), padded where the text starts or ends with one."""
    # (inside a code span HTML is inert and character references are not decoded: only
    # control characters and '|' are escaped there)
    s = re.sub("[\x00-\x1f\x7f]", lambda m: f"\\x{ord(m.group()):02x}", str(s).replace("\n", " "))
    s = s.replace("|", "\\|")
    longest = max((len(r) for r in re.findall("`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def render(changes) -> str:
    fails = [c for c in changes if c.status == "fail"]
    better = [c for c in changes if c.status == "improved"]
    removed = [c for c in changes if c.status == "removed"]
    warned = [c for c in changes if c.status == "warning"]  # (a baseline of another version)
    changes = [c for c in changes if c.status != "warning"]
    head = "FAILED" if fails else "passed"
    lines = [
        f"## actaudit check: {head}",
        "",
        f"{len(changes)} results: {len(fails)} failed, {len(better)} improved, "
        f"{len(changes) - len(fails) - len(better) - len(removed)} unchanged.",
        "",
    ]
    lines += [f"Warning: {_cell('; '.join(c.messages))}" for c in warned] + ([""] if warned else [])
    if removed:
        lines += [f"{len(removed)} baseline results are no longer in the spec.", ""]
    if fails or better or removed:
        lines += ["| status | result | details |", "|---|---|---|"]
        for c in fails + better + removed:
            lines.append(f"| {c.status} | {_code(c.key)} | {_cell('; '.join(c.messages))} |")
        lines.append("")
    if better and not fails:
        lines.append("Refresh the baseline with `actaudit baseline` to keep the improvements.")
    return "\n".join(lines) + "\n"


def write(path, changes) -> None:
    write_text(Path(path), render(changes))
