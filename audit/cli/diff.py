"""`actaudit diff`: two implementations on the same inputs."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from audit.cli import options as opt
from audit.cli.app import app, command_line, terminal_width, write_json
from audit.cli.progress import ProgressBar
from audit.errors import BadOptionError


@app.command("diff")
def diff_cmd(
    a: str = typer.Argument(
        ...,
        help="First candidate: catalog id, ort:OP, openvino:OP, litert:OP, torch:NAME, jax:NAME, c:FILE.c:FUNCTION, torch-compile:NAME, torch-bwd:NAME, pkg.module:function or dump:FILE.",
    ),
    b: str = typer.Argument(..., help="Second candidate (the same kinds)."),
    dtype: str = opt.dtype(),
    compute: str | None = opt.compute(),
    range_: str | None = opt.range_(),
    samples: int | None = opt.samples(),
    seed: int = opt.seed(help="Seed of the sample or grid."),
    exhaustive: bool = opt.exhaustive(help="Every fp32 input, or every pair of a 16-bit format."),
    grid: int | None = opt.grid(help="Values per axis of a bivariate grid."),
    param: list[str] = opt.param(help="Parameter NAME=VALUE of both candidates."),
    param_b: list[str] = typer.Option([], "--param-b", help="Parameter NAME=VALUE of B only."),
    reference: str | None = opt.reference(help="Reference of callables and dumps."),
    device: str = opt.device(help="Device of torch: ops."),
    expect_identical: bool = typer.Option(
        False, "--expect-identical", help="Exit 1 unless every output has the same bits."
    ),
    json_out: str | None = opt.json_out(),
    report_dir: Path | None = opt.report_dir(help="Write an HTML report (distance maps) to DIR."),
):
    """Run two implementations on the same inputs: identical share, ULP distance between them,
    where they disagree and which is closer to the exact value."""
    from audit.compare.diff import diff as run_diff
    from audit.compare.diff import document as diff_document
    from audit.numbers.formats import parse_formats
    from audit.numbers.inputs import parse_range
    from audit.targets.candidates import parse_params

    params, pb = parse_params(param), parse_params(param_b)
    for k, v in {**params, **pb}.items():
        if isinstance(v, list):
            raise BadOptionError(f"parameter '{k}': diff takes one value per parameter")
    rng = parse_range(range_)
    results = []
    with ProgressBar() as bar:
        for f in parse_formats(dtype):
            results.append(
                run_diff(
                    a,
                    b,
                    f,
                    compute,
                    range=rng,
                    samples=samples,
                    seed=seed,
                    exhaustive=exhaustive,
                    grid=grid,
                    reference=reference,
                    params=params,
                    params_b=pb,
                    device=device,
                    progress=bar,
                    keep=report_dir is not None,
                )
            )
    if report_dir is not None:
        from reports import diff as diff_report

        diff_report.build(results, report_dir, command_line())
    if not write_json(diff_document(results, command=command_line()), json_out):
        for r in results:
            print_diff(r)
    differ = any(r.verdict != "identical" for r in results)
    return 1 if expect_identical and differ else 0


def print_diff(r) -> None:
    from reports import diff as diff_report

    sys.stdout.write(diff_report.text(r, terminal_width()))
