"""The documentation's examples run as written: every code block of README.md, CONTRIBUTING.md
and docs/**/*.md, in order, each file in its own fresh directory (one oracle cache shared by all).

* ``bash`` blocks and blocks without a language: each command is run (``actaudit ...`` as
  ``python -m audit.cli ...`` from this source tree) and must exit 0. A line ``$ COMMAND``
  is followed by the output the page shows: the real output (at COLUMNS=80) must equal it
  line for line, where a line ``...`` stands for any number of lines.
* ``python`` blocks are executed; one whose first line is ``# file: NAME`` is also saved as
  NAME (a module that later commands of the same page import).
* ``output`` blocks show what the ``python`` block just before them prints: its real
  standard output must equal it line for line (``...`` as above).
* ``toml`` blocks are parsed; one whose first line starts with ``# NAME.toml`` is saved as NAME.toml
  (``actaudit.toml`` takes the place of the project's pyproject.toml copied into the page's
  directory: two spec sources at once are an error, as in a reader's repository).
* ``text`` blocks are command synopses: every ``--option`` they show must be in the command's
  ``--help``.
* ``mermaid`` blocks are diagrams: not run.
* A block right after a line ``<!-- not run: REASON -->`` is not run (the marker for blocks
  that are not meant to run; the reason is required). Any other language fails the test.
* A line ``--8<-- "FILE:SECTION"`` includes a section of another file (pymdownx.snippets): it
  is tested where it is written, in that file.

Exemptions, each stated on its page: the set-up commands of the README's first block (``pip
install`` and the test suite itself, see EXEMPT); a block introduced by "the docs test runs
this block with `ARGS` appended" runs with ARGS appended; the placeholder scheduler address
``tcp://host:8786`` must give the one-line error (exit 2); a missing optional extra ("X is not
installed: pip install ...", exit 2) is accepted.

``python tests/test_docs.py --update`` rewrites the output shown after each ``$ actaudit`` line
(see update_docs).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOC_FILES = [README, ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
NOT_RUN = re.compile(r"^<!-- not run: \S.* -->$")

# Commands that are not run, and why (exact command texts, not patterns).
EXEMPT = {
    "pip install .": "installs the package: this test runs the source tree itself",
    'pip install -e ".[test]" torch==2.13.0': "installs the test dependencies: already installed",
    "python -m pytest": "the test suite, which this test is part of",
    "python -m pytest -n auto": "the test suite on every core, which this test is part of",
}
_EXEMPT = {shlex.join(shlex.split(k)) for k in EXEMPT}  # as _commands writes them
PLACEHOLDER_SCHEDULER = "tcp://host:8786"
APPENDED = re.compile(r"docs test runs this block with `([^`]+)` appended")


def parse_blocks(text: str):
    """(language, lines, first line number, the prose since the previous block); a block
    after a ``<!-- not run: REASON -->`` line has the language ``not-run``."""
    out, lines, i, prose = [], text.splitlines(), 0, []
    while i < len(lines):
        m = re.match(r"^\s*```(\w*)\s*$", lines[i])
        if not m:
            prose.append(lines[i])
            i += 1
            continue
        indent = len(lines[i]) - len(lines[i].lstrip())
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not lines[i].lstrip().startswith("```"):
            line = lines[i]
            body.append(line[indent:] if not indent or line[:indent].isspace() else line.lstrip())
            i += 1
        skipped = bool(prose) and NOT_RUN.match(prose[-1].strip()) is not None
        out.append(("not-run" if skipped else m.group(1) or "", body, start + 1, " ".join(prose)))
        prose = []
        i += 1
    return out


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


BLOCKS = parse_blocks(README.read_text())  # the README's alone
ALL_BLOCKS = [(_rel(f), *b) for f in DOC_FILES if f.exists() for b in parse_blocks(f.read_text())]


_WORKDIRS: dict = {}


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("docs-cache")


def _workdir(page: str, tmp_path_factory, cache_dir: Path) -> Path:
    """The fresh directory in which one page's blocks run, in order."""
    if page in _WORKDIRS:
        return _WORKDIRS[page]
    d = tmp_path_factory.mktemp(page.replace("/", "_").replace(".md", ""))
    # the project's own gate (`actaudit check` in the first block) reads its spec and baseline
    shutil.copy(ROOT / "pyproject.toml", d / "pyproject.toml")
    (d / "data").mkdir()
    shutil.copy(ROOT / "data" / "baseline.json", d / "data" / "baseline.json")
    shutil.copytree(ROOT / "examples", d / "examples")  # the example C kernels the pages audit
    (d / ".cache").symlink_to(cache_dir, target_is_directory=True)  # one oracle cache for all
    _WORKDIRS[page] = d
    return d


def _save_toml(workdir: Path, name: str, src: str) -> None:
    """A page's ``# NAME.toml`` block saved; a page's own actaudit.toml replaces the project's
    pyproject.toml copied in (its [tool.actaudit] would be a second spec)."""
    if name == "actaudit.toml":
        (workdir / "pyproject.toml").unlink(missing_ok=True)
    (workdir / name).write_text(src)


def _env(workdir: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("ACTAUDIT_NO_CACHE",)}
    env.update(
        COLUMNS="80",
        LINES="50",
        ACTAUDIT_CACHE_DIR=str(workdir / ".cache"),
        PYTHONPATH=str(ROOT) + os.pathsep + str(workdir),
        MPLBACKEND="Agg",
    )
    return env


def _commands(line: str) -> list[str]:
    """The commands of one shell line: '&&'-separated, comments dropped."""
    words = shlex.split(line, comments=True)
    cmds, cur = [], []
    for w in words + ["&&"]:
        if w == "&&":
            if cur:
                cmds.append(shlex.join(cur))
            cur = []
        else:
            cur.append(w)
    return cmds


def _run(cmd: str, workdir: Path, extra: list[str]) -> subprocess.CompletedProcess:
    argv = shlex.split(cmd)
    assert argv[0] == "actaudit", (
        f"command {cmd!r}: only actaudit commands are run "
        "(add an exemption to EXEMPT, with its reason, or make it one)"
    )
    argv = [sys.executable, "-m", "audit.cli", *argv[1:], *extra]
    env = _env(workdir)
    if PLACEHOLDER_SCHEDULER in cmd:  # no need to wait dask's 20 s to learn it is unreachable
        env["ACTAUDIT_DASK_TIMEOUT"] = "1"
    return subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=600)


def _check_rc(cmd: str, p: subprocess.CompletedProcess) -> None:
    if PLACEHOLDER_SCHEDULER in cmd:  # (the README says: it stands for your scheduler)
        assert p.returncode == 2 and p.stderr.startswith("actaudit: error:") and p.stderr.count("\n") == 1, (
            cmd,
            p.stderr,
        )
        return
    if p.returncode == 2 and re.match(r"actaudit: error: \w+ is not installed: pip install", p.stderr):
        return  # an optional extra this machine lacks (jax)
    assert p.returncode == 0, f"{cmd}\nexit {p.returncode}\n{p.stderr[-3000:]}"


def matches(expected: list[str], actual: list[str]) -> bool:
    """Line for line; a line '...' matches any number of lines."""
    if not expected:
        return not actual
    if expected[0] == "...":
        return any(matches(expected[1:], actual[k:]) for k in range(len(actual) + 1))
    return bool(actual) and actual[0] == expected[0] and matches(expected[1:], actual[1:])


_PYTHON_OUT: dict = {}  # the standard output of the latest python block, for an output block


def _ids():
    return [f"{page}:{line}:{lang or 'plain'}" for page, lang, _, line, _ in ALL_BLOCKS]


def _marks(block) -> list:
    """A page's blocks run in order in one directory (a block may use the file an earlier one
    wrote): under pytest-xdist (`-n auto --dist loadgroup`) they stay on one worker.  The
    README's set-up block (`actaudit selftest`, `actaudit check`: the whole catalog re-swept,
    minutes) is in the slow stage; .ci/run also runs those commands themselves."""
    marks = [pytest.mark.xdist_group(block[0])]
    if block is ALL_BLOCKS[0]:
        marks.append(pytest.mark.slow)
    return marks


@pytest.mark.parametrize("block", [pytest.param(b, marks=_marks(b)) for b in ALL_BLOCKS], ids=_ids())
def test_docs_block(block, tmp_path_factory, cache_dir, capsys):
    page, lang, body, line, prose = block
    workdir = _workdir(page, tmp_path_factory, cache_dir)
    where = f"{page}:{line}"
    if lang in ("not-run", "mermaid"):
        return
    if any(x.lstrip().startswith('--8<-- "') for x in body):
        pytest.fail(f"{where}: a snippet include inside a code block")
    if lang in ("", "bash", "sh"):
        m = APPENDED.search(" ".join(prose.split()))
        extra = shlex.split(m.group(1)) if m else []
        if any(x.startswith("$ ") for x in body):
            _shown_output(body, workdir, extra)
            return
        for text in body:
            for cmd in _commands(text):
                if cmd in _EXEMPT:
                    continue
                _check_rc(cmd, _run(cmd, workdir, extra))
    elif lang == "python":
        src = "\n".join(body) + "\n"
        m = re.match(r"# file: ([\w.]+)", body[0]) if body else None
        if m:
            _save_toml(workdir, m.group(1), src)
        p = subprocess.run(
            [sys.executable, "-"],
            input=src,
            cwd=workdir,
            env=_env(workdir),
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert p.returncode == 0, f"{where}: python block failed\n{p.stderr[-3000:]}"
        _PYTHON_OUT[page] = [x.rstrip() for x in p.stdout.splitlines()]
    elif lang == "output":
        got = _PYTHON_OUT.pop(page, None)
        assert got is not None, f"{where}: an output block must follow a python block"
        shown = [x.rstrip() for x in body]
        assert matches(shown, got), f"{where}: the python block above prints:\n" + "\n".join(got)
    elif lang == "toml":
        src = "\n".join(body) + "\n"
        tomllib.loads(src)
        m = re.match(r"# ([\w.-]+\.toml)\b", body[0]) if body else None
        if m:
            _save_toml(workdir, m.group(1), src)
    elif lang == "text":
        _synopsis(body, capsys)
    else:
        pytest.fail(
            f"{where}: a ```{lang} block: give it a language this test runs "
            "(bash, python, output, toml, text, mermaid) or mark it <!-- not run: REASON -->"
        )


def _shown_output(body: list[str], workdir: Path, extra: list[str]) -> None:
    steps: list[tuple[str, list[str]]] = []
    for x in body:
        if x.startswith("$ "):
            steps.append((x[2:], []))
        else:
            assert steps, "output before the first '$ ' command"
            steps[-1][1].append(x.rstrip())
    for cmd, shown in steps:
        p = _run(cmd, workdir, extra)
        _check_rc(cmd, p)
        got = [x.rstrip() for x in p.stdout.splitlines()]
        assert matches(shown, got), (
            f"$ {cmd}\nthe page shows:\n" + "\n".join(shown) + "\n\nthe command prints:\n" + "\n".join(got)
        )


def _synopsis(body: list[str], capsys) -> None:
    from audit.cli import main

    entries: list[tuple[str, str]] = []
    for x in body:
        m = re.match(r"actaudit (\w+)", x)
        if m:
            entries.append((m.group(1), x))
        elif x.startswith(" ") and entries:
            entries[-1] = (entries[-1][0], entries[-1][1] + " " + x)
    assert entries
    for cmd, text in entries:
        main([cmd, "--help"])
        help_text = capsys.readouterr().out
        for opt in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", text.split("#")[0]):
            assert opt in help_text, f"the synopsis of 'actaudit {cmd}' shows {opt}, its --help does not"


def test_matcher_hand_cases():
    assert matches(["a", "...", "d"], ["a", "b", "c", "d"])
    assert matches(["a", "...", "d"], ["a", "d"])
    assert not matches(["a", "...", "d"], ["a", "b"])
    assert not matches(["a", "b"], ["a", "b", "c"])


def test_first_screen_is_the_first_command_at_80_columns():
    """The README opens with the first command, then shows what it prints at 80 columns."""
    text = README.read_text()
    first_cmd = next(c for b in BLOCKS[:1] for x in b[1] for c in _commands(x) if c.startswith("actaudit"))
    shown = next(b for b in BLOCKS if any(x == f"$ {first_cmd}" for x in b[1]))
    assert shown[2] < 60, "the output of the first command is on the README's first screen"
    assert max(len(x) for x in shown[1]) <= 80
    assert text.index(f"$ {first_cmd}") < text.index("## ")


def update_file(path: Path) -> bool:
    """Rewrite the output shown after each `$ actaudit` line of one page with what the command
    prints now (at 80 columns), and each ```output block with what the python block before it
    prints, where they do not elide lines with '...'. The page's
    blocks run in order in one fresh directory, as test_docs_block runs them (python blocks,
    `# NAME.toml` files, commands without shown output), so that a command finds the files the
    blocks before it wrote. A command that fails stops the update with its stderr, leaving the
    page as it was. True if the file changed."""
    import tempfile

    text = path.read_text()
    lines = text.splitlines()
    page = _rel(path)
    blocks = {line - 2: (lang, body, prose) for lang, body, line, prose in parse_blocks(text)}
    out, i = [], 0
    with tempfile.TemporaryDirectory() as d, tempfile.TemporaryDirectory() as cache:
        work = Path(d)
        shutil.copy(ROOT / "pyproject.toml", work / "pyproject.toml")
        (work / "data").mkdir()
        shutil.copy(ROOT / "data" / "baseline.json", work / "data" / "baseline.json")
        shutil.copytree(ROOT / "examples", work / "examples")
        (work / ".cache").symlink_to(cache, target_is_directory=True)
        extra: list[str] = []
        python_out: list[str] = []
        while i < len(lines):
            if i in blocks:
                lang, body, prose = blocks[i]
                m = APPENDED.search(" ".join(prose.split()))
                extra = shlex.split(m.group(1)) if m else []
                if lang == "python":
                    src = "\n".join(body) + "\n"
                    fm = re.match(r"# file: ([\w.]+)", body[0]) if body else None
                    if fm:
                        (work / fm.group(1)).write_text(src)
                    p = subprocess.run(
                        [sys.executable, "-"],
                        input=src,
                        cwd=work,
                        env=_env(work),
                        capture_output=True,
                        text=True,
                        timeout=600,
                    )
                    if p.returncode != 0:
                        sys.exit(f"{page}:{i + 2}: python block failed\n{p.stderr[-3000:]}")
                    python_out = [x.rstrip() for x in p.stdout.splitlines()]
                elif lang in ("not-run", "mermaid"):  # shown as written, never run
                    out += lines[i : i + 2 + len(body)]
                    i += 2 + len(body)
                    continue
                elif lang == "output" and "..." not in [x.strip() for x in body]:
                    pad = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
                    out.append(lines[i])
                    out += [(pad + x).rstrip() for x in python_out]
                    i += 1 + len(body)  # the closing fence is appended below
                    continue
                elif lang == "toml":
                    tm = re.match(r"# ([\w.-]+\.toml)\b", body[0]) if body else None
                    if tm:
                        _save_toml(work, tm.group(1), "\n".join(body) + "\n")
                elif lang in ("", "bash", "sh") and not any(x.startswith("$ ") for x in body):
                    for x in body:
                        for cmd in _commands(x):
                            if cmd not in _EXEMPT:
                                p = _run(cmd, work, extra)
                                if p.returncode != 0 and PLACEHOLDER_SCHEDULER not in cmd:
                                    sys.exit(
                                        f"{page}:{i + 2}: {cmd}: exit {p.returncode}\n{p.stderr[-3000:]}"
                                    )
            out.append(lines[i])
            head = lines[i].lstrip()
            pad = lines[i][: len(lines[i]) - len(head)]
            if head.startswith("$ actaudit"):
                j = i + 1
                while j < len(lines) and not lines[j].lstrip().startswith(("$ ", "```")):
                    j += 1
                p = _run(head[2:], work, extra)  # run even where shown lines are elided: its files
                if p.returncode != 0:
                    sys.exit(f"{page}:{i + 1}: {head}: exit {p.returncode}\n{p.stderr[-3000:]}")
                if "..." not in [x.strip() for x in lines[i + 1 : j]]:
                    out += [(pad + x).rstrip() for x in p.stdout.splitlines()]
                    i = j
                    continue
            i += 1
    new = "\n".join(out) + "\n"
    if new != text:
        path.write_text(new)
    return new != text


def update_docs(paths=None) -> None:
    """`python tests/test_docs.py --update [FILE...]`: update_file for README.md, CONTRIBUTING.md
    and every page of docs/ (or the files named). Read the diff before committing it."""
    for f in [Path(p).resolve() for p in paths] if paths else DOC_FILES:
        if f.exists() and update_file(f):
            print(f"updated {_rel(f)}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--update"]:
        update_docs(sys.argv[2:])
    else:
        sys.exit("usage: python tests/test_docs.py --update [FILE...]")


# --------------------------------------------------------------------- the generated reference
def _hook():
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "hooks" / "generate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _markers() -> dict:
    """page -> the generated sections its source asks for."""
    out: dict = {}
    for f in (ROOT / "docs").rglob("*.md"):
        for m in re.finditer(r"^<!-- generated: ([\w-]+) -->$", f.read_text(), re.M):
            out.setdefault(m.group(1), []).append(_rel(f))
    return out


def test_generated_pages_list_every_candidate_and_every_command():
    """The catalog page holds every registered candidate (id, formula, source), the CLI page
    every command of the Typer app, each with every option; both are asked for by a page."""
    from audit.targets.candidates import REGISTRY, catalog

    hook = _hook()
    marks = _markers()
    assert set(marks) == set(hook.RENDER), marks
    catalog()
    page = hook.render_catalog()
    assert len(REGISTRY) > 100
    for cid, c in REGISTRY.items():
        assert f"#### `{cid}`" in page, cid
        assert hook.cell(c.formula) in page and hook.cell(c.source) in page, cid
    import typer.main

    from audit.cli import app

    cli_page = hook.render_cli()
    for name, cmd in typer.main.get_command(app).commands.items():
        assert f"## actaudit {name}\n" in cli_page, name
        for p in cmd.params:
            for opt in getattr(p, "opts", []):
                if opt.startswith("--"):
                    assert f"`{opt}`" in cli_page, (name, opt)


def test_generated_formats_and_semantics_follow_their_definitions():
    from audit.numbers.formats import FORMATS
    from audit.targets import semantics

    hook = _hook()
    formats = hook.render_formats()
    for name, f in FORMATS.items():
        row = next(x for x in formats.splitlines() if x.startswith(f"| `{name}` |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[2:6] == [str(f.bits), str(f.p), str(f.emin), str(f.emax)], name
        assert float(cells[6]) == float(f"{f.max_finite:.6g}"), name
    sem = hook.render_semantics()
    for flag in semantics.FLAGS:
        assert f"| `{flag}` |" in sem
    for prof, (flags, _) in semantics.PROFILES.items():
        assert f"| `{prof}` | {f'`{flags}`' if flags else 'none'} |" in sem


def test_every_command_help_ends_with_its_docs_page(capsys):
    """`actaudit COMMAND --help` ends with the path of an existing page, named in DOCS_PAGES."""
    import typer.main

    from audit.cli import DOCS_PAGES, app, main

    names = list(typer.main.get_command(app).commands)
    assert set(names) <= set(DOCS_PAGES), set(names) - set(DOCS_PAGES)
    for name in names:
        assert main([name, "--help"]) == 0
        last = capsys.readouterr().out.strip().splitlines()[-1].strip()
        assert last == f"Docs: {DOCS_PAGES[name]}", (name, last)
        assert (ROOT / DOCS_PAGES[name]).is_file(), DOCS_PAGES[name]


def test_list_family_filters_the_catalog(capsys):
    """`actaudit list FAMILY` shows exactly the family's candidates; a reference name gives
    the candidates approximating it; an unknown name is one line and exit 2."""
    from audit.cli import main
    from audit.targets.candidates import REGISTRY, catalog

    catalog()
    for fam in ("gelu", "swish", "lut"):
        assert main(["list", fam, "--json"]) == 0
        got = [c["id"] for c in __import__("json").loads(capsys.readouterr().out)]
        assert got == [i for i in REGISTRY if i.split(".")[0] == fam], fam
    assert main(["list", "gelu_bias"]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"{sum(i.startswith('gelu_bias.') for i in REGISTRY)} candidates")
    assert main(["list", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("actaudit: error: unknown family or reference 'nosuch'") and err.count("\n") == 1


def test_ci_runs_the_readme_test_command_then_the_slow_stage():
    """`.ci/run` runs exactly the README's test command (its first block's second line), after
    lint, types and the docs build, in a fresh venv without cached wheels; then only the slow
    stage and the certification."""
    ci = [x for x in (ROOT / ".ci" / "run").read_text().splitlines() if x.strip()]
    readme = BLOCKS[0][1][1]
    assert readme.endswith("python -m pytest -n auto") and ci.count(readme) == 1
    assert ci[ci.index(readme) + 1 :] == ["python -m pytest -m slow -n auto", "actaudit selftest --certify"]
    for step in ("ruff check .", "ruff format --check .", "mypy", "mkdocs build --strict"):
        assert step in ci[: ci.index(readme)], step
    assert "export CI=true PIP_NO_CACHE_DIR=1" in ci and any(" -m venv " in x for x in ci)
    assert len(README.read_text().splitlines()) <= 200


def test_figures_the_pages_quote_are_the_tools():
    """Issue 35, item 14: the figures that reading-the-table quotes in its prose are those of
    the line they explain (gelu.tanh's max ULP in both paths and its fp16 findings), computed
    here by a sweep; the README defines p99 and evaluation path before the first output shows
    them."""
    import audit
    from reports import table

    page = (ROOT / "docs" / "getting-started" / "reading-the-table.md").read_text()
    m = re.search(r"`gelu\.tanh` is off by (\S+) ULP\s+when it computes in fp16 and by (\S+) ULP", page)
    assert m, "reading-the-table no longer quotes gelu.tanh's figures"
    res = {
        (r.candidate, r.compute): r
        for r in audit.sweep(["gelu.tanh", "gelu.erf"], dtype="fp16", compute="fp16,fp32")
    }
    assert m.group(1) == table.num(res["gelu.tanh", "fp16"].max_ulp)
    assert m.group(2) == table.num(res["gelu.tanh", "fp32"].max_ulp)
    m2 = re.search(r"\(`gelu\.erf`: (\S+) and (\S+) ULP\)", page)
    assert m2 and m2.groups() == (
        table.num(res["gelu.erf", "fp16"].max_ulp),
        table.num(res["gelu.erf", "fp32"].max_ulp),
    )
    found = table.findings_summary(res["gelu.tanh", "fp16"])
    for quoted in re.findall(r"`((?:unf|spec|hidden) \d+)`", page):
        assert quoted in found.split(", "), (quoted, found)
    readme = README.read_text()
    before = readme[: readme.index("<!-- --8<-- [start:first-output] -->")]
    assert "p99" in before and "evaluation path" in before
