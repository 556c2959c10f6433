"""`actaudit clip`: a safe input clip range per candidate and format."""

from __future__ import annotations

import sys

import typer

from audit.cli import options as opt
from audit.cli.app import app, terminal_width, write_json
from audit.cli.progress import ProgressBar
from audit.cli.sweep import api_sweep
from audit.errors import BadOptionError


@app.command()
def clip(
    targets: list[str] = typer.Argument(..., help="Candidates or families."),
    dtype: str = opt.dtype(help="Storage format(s) (16 bits or fewer)."),
    compute: str | None = opt.compute(
        help="Compute format(s) (default 'auto': the storage format itself and fp32).",
    ),
    param: list[str] = opt.param(help="Candidate parameter NAME=VALUE."),
    max_ulp: float | None = opt.max_ulp(
        help="Tolerance in ULP (default: the candidate's error on its core)."
    ),
    atol: float | None = opt.atol(help="Absolute tolerance."),
    json_out: str | None = opt.json_out(help="Write JSON to PATH, or '-' for stdout."),
    semantics: list[str] = opt.semantics(),
):
    """Recommend a safe input clip range (and what to do beyond it) per candidate and format."""
    from audit.numbers.formats import parse_formats
    from audit.targets.candidates import parse_params

    for f in parse_formats(dtype):
        if not f.enumerable:
            raise BadOptionError(
                f"clip ranges need every value of the format; {f.name} has too many "
                "(use a format of 16 bits or fewer)"
            )
    with ProgressBar() as bar:
        results = api_sweep(
            targets,
            dtype,
            compute,
            params=parse_params(param),
            progress=bar,
            semantics=semantics,
            max_ulp=opt.tolerance(max_ulp, "--max-ulp"),
            atol=opt.tolerance(atol, "--atol"),
        )
    results = [r for r in results if r.clip is not None]
    if not results:
        raise BadOptionError("no univariate candidate selected: clip ranges apply to f(x)")
    if json_out:
        from audit.measure.clip import document

        if write_json(document(results), json_out):
            return
    from reports import table as table_report
    from reports.listing import clip_text

    sys.stdout.write(clip_text(results, terminal_width(), table_report.sem_label))
