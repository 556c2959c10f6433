"""The house (docs/design/architecture.md): every import of actaudit's own modules, at module
level or inside a function, runs down the stages, and no modules import each other round a
circle.  The imports are read from the source with ``ast`` (no module is imported), so a
new upward import or circle fails here as it fails ``lint-imports`` in .ci/run.  Imports under
``if TYPE_CHECKING:`` (annotations only) do not run and are not counted."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("audit", "reports", "approximations")

# highest first; names on one line are one stage (siblings that do not import each other)
STAGES = [
    ["audit.cli"],
    ["reports"],
    ["audit.gate", "audit.repair", "audit.testing"],
    ["audit.model"],
    ["audit.compare"],
    ["audit.measure"],
    ["approximations"],
    ["audit.targets"],
    ["audit.oracle"],
    ["audit.numbers"],
    ["audit.io", "audit.signals"],
    ["audit.errors", "audit._version"],
]
# the one import upwards, by design: the registry loads its catalog on the first query
PLUGIN = ("audit.targets.registry", "approximations")


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for p in (ROOT / pkg).rglob("*.py"):
            parts = list(p.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = p
    return out


def _runtime_nodes(tree):
    """Every node but those under ``if TYPE_CHECKING:`` (imports for annotations only)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                todo.extend(child.orelse)
            else:
                todo.append(child)


def imports(mods: dict[str, Path]) -> set[tuple[str, str]]:
    """(importer, imported) for every import statement between our modules: a name imported
    from a package that is a module of its own counts as that module."""
    edges = set()
    for m, p in mods.items():
        pkg = m if p.name == "__init__.py" else m.rpartition(".")[0]
        for node in _runtime_nodes(ast.parse(p.read_text(), str(p))):
            if isinstance(node, ast.Import):
                found = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                subs = [f"{base}.{a.name}" for a in node.names]
                found = [s for s in subs if s in mods]
                if len(found) < len(subs):
                    found.append(base)
            else:
                continue
            edges.update((m, t) for t in found if t in mods and t != m)
    return edges


def stage_of(m: str) -> tuple[int, str] | None:
    for i, names in enumerate(STAGES):
        for n in names:
            if m == n or m.startswith(n + "."):
                return i, n
    return None


MODS = modules()
EDGES = imports(MODS)


def test_every_module_has_a_stage():
    assert [m for m in MODS if stage_of(m) is None] == ["audit"]  # the API's facade alone


def test_the_top_level_of_audit_is_small():
    entries = sorted(p.name for p in (ROOT / "audit").iterdir() if p.name != "__pycache__")
    packages = [e for e in entries if (ROOT / "audit" / e).is_dir()]
    assert packages == [
        "cli",
        "compare",
        "gate",
        "measure",
        "model",
        "numbers",
        "oracle",
        "repair",
        "targets",
    ]
    assert [e for e in entries if e not in packages] == [
        "__init__.py",
        "_version.py",
        "errors.py",
        "io.py",
        "signals.py",
        "testing.py",
    ]


def test_imports_run_down_the_stages():
    bad = []
    for a, b in sorted(EDGES):
        if (a, b) == PLUGIN or a == "audit" or b == "audit":
            continue
        (sa, na), (sb, nb) = stage_of(a), stage_of(b)
        if sb < sa or (sa == sb and na != nb):
            bad.append(f"{a} -> {b}")
    assert bad == []


def test_nothing_imports_the_api_facade():
    """``audit/__init__`` imports the API; a module importing it back would close a circle."""
    assert sorted(a for a, b in EDGES if b == "audit") == []


def _cycles(edges) -> list[list[str]]:
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_circles():
    assert _cycles(EDGES - {PLUGIN}) == []


def test_the_cycle_finder_finds_a_circle():
    assert _cycles({("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")}) == [["a", "b", "c"]]
    assert _cycles({("a", "b"), ("b", "c")}) == []


CLI_MODULES = sorted(m for m in MODS if m == "audit.cli" or m.startswith("audit.cli."))


def test_the_cli_is_one_module_per_command_group():
    assert {"audit.cli", "audit.cli.app", "audit.cli.options", "audit.cli.sweep"} <= set(CLI_MODULES)


@pytest.mark.parametrize("module", CLI_MODULES)
def test_the_cli_holds_no_numerics(module):
    """The CLI parses options and calls the API: no module of it imports a numerical library."""
    heavy = {"numpy", "mpmath", "scipy", "gmpy2", "flint", "ml_dtypes"}
    p = MODS[module]
    found = set()
    for node in ast.walk(ast.parse(p.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    assert found & heavy == set()


def test_the_architecture_picture_is_current():
    """docs/design/architecture.svg is drawn from the tree: redraw it after moving a module
    (python docs/hooks/architecture.py)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("arch", ROOT / "docs" / "hooks" / "architecture.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert (ROOT / "docs" / "design" / "architecture.svg").read_text() == mod.draw()
    drawn = {p for _, paths, _ in mod.STAGES for p in paths}
    assert {
        "audit/" + p.name for p in (ROOT / "audit").iterdir() if p.is_dir() and p.name != "__pycache__"
    } <= drawn
