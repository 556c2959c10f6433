"""`actaudit baseline` and `actaudit check`: the accuracy gate of a repository."""

from __future__ import annotations

from pathlib import Path

import typer

from audit.cli import options as opt
from audit.cli.app import app, out
from audit.cli.progress import ProgressBar

GATE_REFERENCE = "Reference of callables and dumps in audits that give none."


@app.command()
def baseline(
    spec: Path | None = opt.spec(),
    out_path: Path | None = opt.out(default=None, help="Baseline path (default: the spec's 'baseline')."),
    reference: str | None = opt.reference(help=GATE_REFERENCE),
    force: bool = typer.Option(
        False, "--force", help="Record results that break their own tolerances (each is listed)."
    ),
):
    """Sweep the audit spec and record a baseline (plain JSON, written atomically).
    Results that already break their tolerances are refused (exit 1) unless --force."""
    from audit.gate.check import BaselineRefused, baseline_command

    try:
        with ProgressBar() as bar:
            path, n, broken = baseline_command(spec, out_path, bar, reference, force)
    except BaselineRefused as e:
        for line in e.broken:
            _line(f"FAIL     {line}")
        raise
    for line in broken:
        _line(f"WARNING  recorded although it breaks its tolerance: {line}")
    out.print(
        f"wrote {path} ({n} results" + (f", {len(broken)} breaking their tolerances)" if broken else ")"),
        highlight=False,
    )


@app.command()
def check(
    spec: Path | None = opt.spec(),
    baseline_path: Path | None = typer.Option(
        None, "--baseline", "-b", help="Baseline (default: the spec's 'baseline')."
    ),
    junit: Path | None = typer.Option(None, "--junit", help="Write JUnit XML to FILE."),
    markdown: Path | None = typer.Option(None, "--markdown", help="Write a Markdown summary to FILE."),
    reference: str | None = opt.reference(help=GATE_REFERENCE),
    strict: bool = typer.Option(
        False,
        "--strict",
        help="Also fail on a baseline recorded by another actaudit version (and on removed "
        "results, even with --allow-removed).",
    ),
    allow_removed: bool = typer.Option(
        False,
        "--allow-removed",
        help="Pass baseline results the spec no longer produces (listed as removed); without it they fail.",
    ),
    require_certified: bool = typer.Option(
        False,
        "--require-certified",
        help="Also fail on any oracle table used that 'actaudit selftest --certify' has not certified.",
    ),
):
    """Re-sweep the spec and compare with the baseline: exit 1 on any regression, and on
    any result whose run differs from what produced its baseline entry."""
    from audit.gate.check import check_command
    from audit.io import check_out_files
    from reports import junit as junit_report
    from reports import markdown as md_report

    check_out_files(("--junit", junit), ("--markdown", markdown))  # before the re-sweep
    with ProgressBar() as bar:
        _, changes = check_command(
            spec, baseline_path, bar, reference, strict, require_certified, allow_removed
        )
    if junit:
        junit_report.write(junit, changes)
    if markdown:
        md_report.write(markdown, changes)
    fails = [c for c in changes if c.status == "fail"]
    better = [c for c in changes if c.status == "improved"]
    removed = [c for c in changes if c.status == "removed"]
    warned = [c for c in changes if c.status == "warning"]
    tags = {"fail": "FAIL", "improved": "improved", "removed": "removed", "warning": "WARNING"}
    for c in warned + fails + better + removed:  # plain lines: easy to read and to grep in CI logs
        _line(f"{tags[c.status]:8} {c.key}: {'; '.join(c.messages)}")
    out.print(
        f"actaudit check: {len(changes) - len(removed) - len(warned)} results, {len(fails)} failed, "
        f"{len(better)} improved"
        + (f", {len(removed)} no longer in the spec" if removed else "")
        + ("" if not better or fails else " (refresh with 'actaudit baseline')"),
        highlight=False,
        soft_wrap=True,
    )
    return 1 if fails else 0


def _line(text: str) -> None:
    """One plain line of the gate's log, as it is (no markup, no wrapping)."""
    out.print(text, markup=False, highlight=False, soft_wrap=True)
