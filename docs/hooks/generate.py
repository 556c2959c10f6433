"""MkDocs hook: the reference pages generated from the code, so that they cannot rot.

A page holds a marker ``<!-- generated: NAME -->`` on a line of its own; at build time the
marker is replaced by ``RENDER[NAME]()``, Markdown computed from the definitions themselves:

* ``cli``: every command of the Typer app (``typer.main.get_command``), its help, usage and
  options (``audit/cli/``, one module per command group);
* ``catalog``: every registered candidate (``audit.targets.candidates.catalog()``): id, family,
  reference, formula, source, parameters, pinned compute format, the engine it models
  where the candidate says so;
* ``formats``: ``audit.numbers.formats.FORMATS``, the quantized kinds and the block-scaled outputs;
* ``semantics``: the flags, roundings, primitives and profiles of ``audit/targets/semantics.py``,
  each flag explained by ``audit.targets.semantics.explain`` (the sentence reports print);
* ``gate-keys``: every key of every level of the spec (``audit.gate.schema.SPEC_KEYS``).

``tests/test_docs.py`` imports this file to check that every candidate and every command
appears in what it renders.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!-- generated: ([\w-]+) -->$", re.M)


def _path() -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))


def cell(text) -> str:
    """A Markdown table cell: pipes escaped, one line, text as given."""
    s = "" if text is None else str(text)
    return " ".join(s.replace("|", "\\|").split())


def code(text) -> str:
    s = cell(text)
    return f"`{s}`" if s else ""


# ------------------------------------------------------------------------------ CLI
def commands() -> dict:
    """name -> the click command of every ``actaudit`` command, in registration order."""
    _path()
    import typer.main

    from audit.cli import _docs_epilogs, app

    _docs_epilogs()  # each command's help ends with its page, as `--help` shows it
    return dict(typer.main.get_command(app).commands)


def _usage(name, cmd) -> str:
    parts = [f"actaudit {name}"]
    for p in cmd.params:
        if getattr(p, "param_type_name", "") == "argument":
            meta = p.name.upper() + ("..." if p.nargs == -1 else "")
            parts.append(meta if p.required else f"[{meta}]")
    if any(getattr(p, "param_type_name", "") == "option" for p in cmd.params):
        parts.append("[OPTIONS]")
    return " ".join(parts)


def render_cli() -> str:
    out = []
    for name, cmd in commands().items():
        out += [f"## actaudit {name}", ""]
        help_text = (cmd.help or "").strip()
        if help_text:
            out += [help_text, ""]
        out += ["```text", _usage(name, cmd), "```", ""]
        rows = []
        for p in cmd.params:
            kind = getattr(p, "param_type_name", "")
            if kind == "argument":
                names = code(p.name.upper())
            else:
                names = ", ".join(code(o) for o in [*p.opts, *p.secondary_opts])
            default = p.default
            if getattr(p, "is_flag", False) or default in (None, (), []) or callable(default):
                shown = ""
            else:
                shown = code(default)
            rows.append(f"| {names} | {cell(getattr(p, 'help', '') or '')} | {shown} |")
        if rows:
            out += ["| argument or option | meaning | default |", "|---|---|---|", *rows, ""]
        if cmd.epilog:
            out += [cell(cmd.epilog), ""]
    return "\n".join(out)


# ------------------------------------------------------------------------------ catalog
def candidates() -> list:
    _path()
    from audit.targets.candidates import catalog

    return sorted(catalog().values(), key=lambda c: c.family)  # stable: variants keep order


def _engine(c) -> str:
    d = c.to_dict()
    return d.get("engine") or getattr(c, "engine", "") or ""


def render_catalog() -> str:
    cands = candidates()
    fams: dict[str, list] = {}
    for c in cands:
        fams.setdefault(c.family, []).append(c)
    refs = {c.reference for c in cands}
    out = [
        f"{len(cands)} candidates in {len(fams)} families, approximating {len(refs)} exact "
        "references (generated from the candidate registry, `actaudit list --json`).",
        "",
        "| family | reference | candidates |",
        "|---|---|---|",
    ]
    for fam, cs in fams.items():
        links = ", ".join(f"[`{c.variant}`](#{c.id.replace('.', '')})" for c in cs)
        out.append(f"| [{fam}](#family-{fam}) | `{cs[0].reference}` | {links} |")
    out.append("")
    for fam, cs in fams.items():
        out += [f"### {fam} {{ #family-{fam} }}", ""]
        for c in cs:
            out += [f"#### `{c.id}` {{ #{c.id.replace('.', '')} }}", ""]
            rows = [
                ("family", code(c.family)),
                ("reference", code(c.reference)),
                ("formula", cell(c.formula)),
                ("source", cell(c.source)),
            ]
            if c.params:
                rows.append(("parameters", ", ".join(code(f"{k}={v}") for k, v in c.params.items())))
            if c.compute:
                rows.append(("compute", f"always {code(c.compute)}"))
            if _engine(c):
                rows.append(("engine it models", cell(_engine(c))))
            if c.notes:
                rows.append(("notes", cell(c.notes)))
            out += ["| | |", "|---|---|", *[f"| {k} | {v} |" for k, v in rows], ""]
    return "\n".join(out)


# ------------------------------------------------------------------------------ formats
def render_formats() -> str:
    _path()
    from audit.measure.blocks import MX
    from audit.measure.quant import RANGES
    from audit.numbers.formats import FORMATS

    out = [
        "| format | aliases | bits | p | emin | emax | max | smallest subnormal | "
        "inf | NaN | -0 | overflow | description | source |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for f in FORMATS.values():
        d = f.to_dict()
        yes = {True: "yes", False: "no"}
        out.append(
            "| "
            + " | ".join(
                [
                    code(d["name"]),
                    ", ".join(code(a) for a in d["aliases"]),
                    str(d["bits"]),
                    str(d["precision"]),
                    str(d["emin"]),
                    str(d["emax"]),
                    f"{d['max_finite']:.6g}",
                    f"{d['smallest_subnormal']:.6g}",
                    yes[bool(d["has_inf"])],
                    yes[bool(d["has_nan"])],
                    yes[bool(d["negative_zero"])],
                    cell(d["overflow"]),
                    cell(d["description"]),
                    cell(d["source"]),
                ]
            )
            + " |"
        )
    out += [
        "",
        "## Quantized formats",
        "",
        "`--dtype` / `--out-dtype` `KIND:scale=S,zero=Z[,round=even|away]` "
        "([concepts](../concepts/quantized.md)):",
        "",
        "| kind | codes |",
        "|---|---|",
    ]
    for k, v in RANGES.items():
        lo, hi = v if isinstance(v, tuple | list) and len(v) == 2 else (v, "")
        out.append(f"| `{k}` | {lo} .. {hi} |" if hi != "" else f"| `{k}` | {cell(v)} |")
    out += [
        "",
        "## Block-scaled outputs",
        "",
        "`--out-dtype` ([concepts](../concepts/block-scaled.md)):",
        "",
        "| output | element format | block | scale |",
        "|---|---|---|---|",
    ]
    for name, spec in MX.items():
        elem = getattr(spec, "element", None) or (spec[0] if isinstance(spec, tuple | list) else spec)
        out.append(f"| `{name}` | {code(elem)} | 32 | E8M0 |")
    out.append("| `nvfp4` | `fp4_e2m1` | 16 | unsigned E4M3 per block, times an fp32 tensor scale |")
    return "\n".join(out)


# ------------------------------------------------------------------------------ semantics
def render_semantics() -> str:
    _path()
    from audit.targets import semantics as s

    def explained(text: str) -> str:
        return cell("; ".join(x for x in s.explain(s.parse(text)) if not x.startswith("profile ")))

    out = ["## Flags", "", "| flag | meaning (as reports state it) |", "|---|---|"]
    for f in s.FLAGS:
        out.append(f"| `{f}` | {explained(f)} |")
    for f in ("saturate", "saturate_ops", "saturate_out", "saturate,sat_nan=keep"):
        out.append(f"| `{f}` | {explained(f)} |")
    for r in s.ROUNDINGS:
        if r != "rne":
            out.append(f"| `round={r}` | {explained('round=' + r)} |")
    for r in s.ROUNDINGS:
        if r not in ("rne", "stochastic"):
            out.append(f"| `round_in={r}` | {explained('round_in=' + r)} |")
    out += [
        "",
        "## Primitives",
        "",
        "`PRIM=IMPL` for PRIM in " + ", ".join(f"`{p}`" for p in s.PRIMITIVES) + "; IMPL is `cr` "
        "(the default), a catalog candidate of that reference, `bound:K` (K at most "
        f"{s.MAX_BOUND}), `table:FILE`, or `rcp` for `div`. `round=stochastic` takes `seed=S` and "
        f"`draws=N` (at most {s.MAX_DRAWS}). Examples:",
        "",
        "| semantics | meaning (as reports state it) |",
        "|---|---|",
    ]
    for ex in ("exp=exp.u20", "div=rcp", "exp=bound:2"):
        out.append(f"| `{ex}` | {explained(ex)} |")
    out += ["", "## Profiles", "", "| profile | flags | description |", "|---|---|---|"]
    for name, (flags, text) in s.PROFILES.items():
        out.append(f"| `{name}` | {code(flags) or 'none'} | {cell(text)} |")
    return "\n".join(out)


# ------------------------------------------------------------------------------ gate keys
def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return f'"{v}"' if isinstance(v, str) else str(v)


def render_gate_keys() -> str:
    """One table per level of ``audit.gate.schema.SPEC_KEYS``: key, type, allowed values,
    default, description."""
    _path()
    from audit.gate.schema import LEVELS, SPEC_KEYS

    titles = {
        "spec": "Top level (`actaudit.toml`, or `[tool.actaudit]` in `pyproject.toml`)",
        "audit": "`[[audit]]` (`[[tool.actaudit.audit]]`)",
        "tolerance": "`tolerance` of an audit",
        "diff": "`[[diff]]` (`[[tool.actaudit.diff]]`)",
        "model": "`[[model]]` (`[[tool.actaudit.model]]`)",
        "model_tolerance": "`tolerance` of a model",
    }
    out = []
    for level, keys in SPEC_KEYS.items():
        out += [
            f"### {titles.get(level, cell(LEVELS[level]))}",
            "",
            "| key | type | allowed values | default | description |",
            "|---|---|---|---|---|",
        ]
        for name, k in keys.items():
            allowed = ", ".join(code(_value(a)) for a in k.allowed)
            default = "" if k.default is None else code(_value(k.default))
            out.append(f"| `{name}` | {cell(k.type)} | {allowed} | {default} | {cell(k.description)} |")
        out.append("")
    return "\n".join(out)


RENDER = {
    "cli": render_cli,
    "catalog": render_catalog,
    "formats": render_formats,
    "semantics": render_semantics,
    "gate-keys": render_gate_keys,
}


# A ```bash block whose first line is `$ command` shows a session: the command and what it
# printed. Rendered as `console` (prompt lines highlighted as shell, the rest as plain output)
# rather than as a script, whose highlighting colours the numbers and words of the output.
SESSION = re.compile(r"^([ \t]*)```(?:bash|sh)?[ \t]*\n(?=[ \t]*\$ )", re.M)


def expand(markdown: str) -> str:
    markdown = SESSION.sub(lambda m: f"{m.group(1)}```console\n", markdown)
    return MARKER.sub(lambda m: RENDER[m.group(1)](), markdown)


def on_page_markdown(markdown, page, config, files):  # noqa: ARG001 (mkdocs hook signature)
    return expand(markdown)
