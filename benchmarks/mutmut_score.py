"""The mutation score from mutmut's results, against the list of equivalent mutants.

mutmut (configured in pyproject.toml, ``[tool.mutmut]``) writes its verdicts to
``mutants/**/*.meta``.  This script reads them (mutmut's own exit-code table decides what a
code means), reads the equivalent mutants listed in ``benchmarks/mutants/*.toml``, checks
every listed one (it exists, it survived, and its diff still shows the recorded line: a
renumbering after a code change is caught), and prints, per module, how many mutants were
generated, killed, equivalent, surviving without a reason, and not decided::

    nice -n 19 mutmut run --max-children 2        # hours for the seven modules
    python benchmarks/mutmut_score.py             # the table; exit 1 unless complete
    python benchmarks/mutmut_score.py --survivors audit.gate.check   # each unlisted survivor's diff

The modules are those ``[tool.mutmut] only_mutate`` names in pyproject.toml (the gate,
metrics, formats, findings, clip, the quantized modules, blocks and, since issue 40,
weighting): one that the results do not hold is reported (``MODULE: configured ... but
mutmut has no result``) and the run is not complete, so a module added to the
configuration and never run cannot pass unnoticed; a run of a narrowed copy of the
configuration reads that copy's pyproject.toml.

The score of a module is killed / (generated - equivalent).  The exit status is 0 only when
every mutant of every module asked for was decided and every survivor is listed as
equivalent: the state issue 24 asks for.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LISTS = ROOT / "benchmarks" / "mutants"
KILLED = {"killed", "caught by type check"}
_NUM = re.compile(r"__mutmut_(\d+)$")


def _status_table() -> dict:
    from mutmut.stats import status_by_exit_code

    return status_by_exit_code


def load_results(mutants: Path) -> dict[str, str]:
    """Every mutant's name and mutmut's verdict, from the .meta files."""
    table = _status_table()
    out: dict[str, str] = {}
    for meta in sorted(mutants.rglob("*.py.meta")):
        data = json.loads(meta.read_text())
        for name, code in data.get("exit_code_by_key", {}).items():
            out[name] = table[code]
    return out


def module_of(name: str) -> str:
    """``audit.gate.check.x_check__mutmut_3`` -> ``audit.gate.check``."""
    return name.rsplit(".", 1)[0]


class Sources:
    """The mutated modules in ``mutants/``, parsed once each: a mutant's diff from its original."""

    def __init__(self, mutants: Path):
        self.mutants = mutants
        self._defs: dict[str, dict[str, str]] = {}

    def _module(self, module: str) -> dict[str, str]:
        if module not in self._defs:
            path = self.mutants / Path(*module.split(".")).with_suffix(".py")
            text = path.read_text()
            lines = text.splitlines()
            defs = {}
            for node in ast.walk(ast.parse(text)):  # (get_source_segment is linear in the file)
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and "__mutmut_" in node.name:
                    defs[node.name] = "\n".join(lines[node.lineno - 1 : node.end_lineno])
            self._defs[module] = defs
        return self._defs[module]

    def diff(self, name: str) -> list[str]:
        module, func = name.rsplit(".", 1)
        defs = self._module(module)
        orig = _NUM.sub("__mutmut_orig", func)
        if func not in defs or orig not in defs:
            return []
        a = defs[orig].replace(orig, func, 1).splitlines()
        b = defs[func].splitlines()
        return [ln for ln in difflib.unified_diff(a, b, lineterm="", n=1)][2:]


def configured_modules(root: Path = ROOT) -> list[str]:
    """The modules ``[tool.mutmut] only_mutate`` names (globs expanded), as dotted names."""
    conf = tomllib.loads((root / "pyproject.toml").read_text()).get("tool", {}).get("mutmut", {})
    out: list[str] = []
    for pattern in conf.get("only_mutate", []):
        for f in sorted(root.glob(pattern)):
            if f.suffix == ".py" and f.name != "__init__.py":
                out.append(".".join(f.relative_to(root).with_suffix("").parts))
    return out


@dataclass
class Equivalent:
    mutant: str
    line: str
    why: str
    source: str


def load_equivalents(lists: Path) -> dict[str, Equivalent]:
    out: dict[str, Equivalent] = {}
    for f in sorted(lists.glob("*.toml")):
        data = tomllib.loads(f.read_text())
        unknown = set(data) - {"equivalent"}
        if unknown:
            raise SystemExit(f"{f}: unknown key {sorted(unknown)[0]!r}")
        for i, e in enumerate(data.get("equivalent", [])):
            if set(e) != {"mutant", "line", "why"} or not all(isinstance(e[k], str) for k in e):
                raise SystemExit(f"{f}: entry {i + 1} must have exactly the strings mutant, line, why")
            if not e["why"].strip():
                raise SystemExit(f"{f}: {e['mutant']}: no reason given")
            if e["mutant"] in out:
                raise SystemExit(f"{f}: {e['mutant']} listed twice")
            out[e["mutant"]] = Equivalent(e["mutant"], e["line"], e["why"], f.name)
    return out


@dataclass
class Row:
    module: str
    generated: int = 0
    killed: int = 0
    equivalent: int = 0
    survived: list[str] = field(default_factory=list)
    undecided: dict[str, int] = field(default_factory=dict)

    @property
    def score(self) -> float:
        n = self.generated - self.equivalent
        return self.killed / n if n else 1.0


def score(results: dict[str, str], equivalents: dict[str, Equivalent], sources: Sources, modules):
    rows: dict[str, Row] = {}
    problems: list[str] = []
    for name, status in sorted(results.items()):
        mod = module_of(name)
        if modules and not any(mod == m or mod.startswith(m + ".") or name.startswith(m) for m in modules):
            continue
        row = rows.setdefault(mod, Row(mod))
        row.generated += 1
        eq = equivalents.get(name)
        if status in KILLED:
            row.killed += 1
            if eq:
                problems.append(f"{name}: listed as equivalent ({eq.source}) but killed")
        elif status == "survived":
            if eq:
                plus = [ln[1:].strip() for ln in sources.diff(name) if ln.startswith("+")]
                if eq.line.strip() not in plus:
                    problems.append(
                        f"{name}: its diff no longer shows {eq.line!r} ({eq.source}): renumbered?"
                    )
                    row.survived.append(name)
                else:
                    row.equivalent += 1
            else:
                row.survived.append(name)
        else:
            row.undecided[status] = row.undecided.get(status, 0) + 1
    mutated = {module_of(n) for n in results}  # (a run may have mutated some modules only)
    for name, eq in equivalents.items():
        if module_of(name) not in mutated:
            continue
        if name not in results and (not modules or any(name.startswith(m) for m in modules)):
            problems.append(f"{name}: listed as equivalent ({eq.source}) but mutmut has no such mutant")
    return rows, problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("modules", nargs="*", help="module names (audit.gate.check) or mutant name prefixes")
    ap.add_argument("--mutants", type=Path, default=ROOT / "mutants", help="mutmut's work directory")
    ap.add_argument("--lists", type=Path, default=LISTS, help="the equivalent-mutant lists")
    ap.add_argument("--survivors", action="store_true", help="print each unlisted survivor's diff")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    results = load_results(a.mutants)
    if not results:
        print(f"no mutmut results under {a.mutants}: run mutmut first", file=sys.stderr)
        return 2
    sources = Sources(a.mutants)
    rows, problems = score(results, load_equivalents(a.lists), sources, a.modules)
    for mod in configured_modules(a.mutants.parent):
        if mod not in rows and (not a.modules or any(mod == m or mod.startswith(m + ".") for m in a.modules)):
            problems.append(f"{mod}: configured in [tool.mutmut] only_mutate but mutmut has no result for it")
    if a.json:
        print(
            json.dumps(
                [
                    {
                        "module": r.module,
                        "generated": r.generated,
                        "killed": r.killed,
                        "equivalent": r.equivalent,
                        "survived": len(r.survived),
                        "undecided": r.undecided,
                        "score": r.score,
                    }
                    for r in rows.values()
                ],
                indent=1,
            )
        )
    else:
        print(
            f"{'module':28} {'mutants':>8} {'killed':>8} {'equiv.':>7} {'survived':>9} {'undecided':>10} {'score':>7}"
        )
        tot = Row("total")
        for r in rows.values():
            und = sum(r.undecided.values())
            print(
                f"{r.module:28} {r.generated:8d} {r.killed:8d} {r.equivalent:7d} {len(r.survived):9d} "
                f"{und:10d} {100 * r.score:6.1f}%"
            )
            tot.generated += r.generated
            tot.killed += r.killed
            tot.equivalent += r.equivalent
            tot.survived += r.survived
            for k, v in r.undecided.items():
                tot.undecided[k] = tot.undecided.get(k, 0) + v
        und = sum(tot.undecided.values())
        print(
            f"{'total':28} {tot.generated:8d} {tot.killed:8d} {tot.equivalent:7d} {len(tot.survived):9d} "
            f"{und:10d} {100 * tot.score:6.1f}%"
        )
        if tot.undecided:
            print("undecided: " + ", ".join(f"{v} {k}" for k, v in sorted(tot.undecided.items())))
    for p in problems:
        print("problem: " + p, file=sys.stderr)
    if a.survivors:
        for r in rows.values():
            for name in r.survived:
                print(f"\n## {name}")
                print("\n".join(sources.diff(name)))
    complete = not problems and all(not r.survived and not r.undecided for r in rows.values())
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
