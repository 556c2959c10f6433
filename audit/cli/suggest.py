"""`actaudit suggest`: every candidate of a reference ranked, with repairs."""

from __future__ import annotations

from pathlib import Path

import typer

from audit.cli import options as opt
from audit.cli.app import app, out, terminal_width, write_json
from audit.cli.progress import ProgressBar
from audit.errors import BadOptionError
from audit.io import write_text


@app.command()
def suggest(
    reference: str = opt.reference_arg(),
    dtype: str = opt.dtype(help="Storage format."),
    compute: str | None = opt.compute(),
    extra: list[str] = typer.Option(
        [],
        "--extra",
        help="Also rank MODULE:NAME, a candidate such as a fitted kernel's module (repeatable).",
    ),
    cost_weight: list[str] = typer.Option(
        [],
        "--cost-weight",
        help="Override an operation weight KIND=W (repeatable; kinds in audit/repair/cost.py).",
    ),
    samples: int | None = opt.samples(),
    brief: bool = typer.Option(False, "--brief", help="Ranking and Pareto front only (no repairs)."),
    time_c: bool = typer.Option(
        False,
        "--time-c",
        help="Also time the C version of candidates that have one (a fitted module's NAME.c).",
    ),
    json_out: str | None = opt.json_out(help="Write JSON to PATH, or '-' for stdout."),
    html_out: Path | None = typer.Option(
        None, "--html", help="Write the ranking and repairs as an HTML page."
    ),
    semantics: list[str] = opt.semantics(
        default=[],
        help="Rank under this machine semantics (one; flags as in sweep, e.g. contract,ftz).",
    ),
    distribution: str | None = opt.distribution(
        help="Input distribution of the weighted figures (as sweep's)."
    ),
    rank: str = typer.Option(
        "max_ulp",
        "--rank",
        help="Accuracy figure to rank by after correctness: max_ulp, weighted_p99 or weighted_mean "
        "(these with --distribution).",
    ),
):
    """Rank every candidate of a reference (correctness, then cost), show the Pareto front and
    a verified repair for every finding."""
    from audit.io import check_out_files
    from audit.repair import cost as cost_mod
    from audit.repair import suggest as suggest_mod

    check_out_files(("--json", json_out), ("--html", html_out))  # before the work, not after it
    if len(semantics) > 1:  # (a second one silently replaced the first)
        raise BadOptionError(
            "--semantics: one machine for suggest (its flags joined by commas: contract,ftz)"
        )
    if samples is not None and samples < 1:
        raise BadOptionError(f"--samples must be positive, got {samples}")
    w = cost_mod.parse_weights(cost_weight)
    with ProgressBar() as bar:
        s = suggest_mod.suggest(
            reference,
            dtype,
            compute,
            extra=extra,
            weights=w,
            samples=samples,
            repairs=not brief,
            time_c=time_c,
            semantics=semantics[0] if semantics else None,
            progress=bar,
            distribution=distribution,
            rank=rank,
        )
    if html_out is not None:
        from reports import suggest as suggest_report

        write_text(html_out, suggest_report.page(s.to_dict()))
    if json_out and write_json(s.to_dict(), json_out):
        return
    from reports import suggest as suggest_report

    out.print(
        suggest_report.text(s.to_dict(), terminal_width()),
        markup=False,
        highlight=False,
        soft_wrap=True,
        end="",
    )
