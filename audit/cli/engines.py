"""`actaudit engines`: every installed engine's ops for one function, in one table."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from audit.cli import options as opt
from audit.cli.app import app, command_line, write_json
from audit.cli.progress import ProgressBar


@app.command("engines")
def engines_cmd(
    reference: str = typer.Argument(..., help="The function: gelu, tanh, sigmoid, erf, ..."),
    dtype: str = opt.dtype(help="Storage format of the inputs."),
    samples: int | None = opt.samples(help="Sample size for fp32."),
    seed: int = opt.seed(help="Seed of the sample."),
    exhaustive: bool = opt.exhaustive(help="Every fp32 input (of --range)."),
    range_: str | None = opt.range_(),
    json_out: str | None = opt.json_out(help="Write the JSON document to PATH, or '-'."),
    report_dir: Path | None = opt.report_dir(help="Write the matrix as an HTML report to DIR."),
):
    """Every installed engine's ops for REFERENCE (ONNX Runtime, PyTorch, JAX, ...) and the
    catalog's best candidate, on the same inputs, in one table."""
    from audit.compare import matrix
    from audit.numbers.inputs import parse_range
    from reports import engines_table

    with ProgressBar() as bar:
        m = matrix.run(
            reference,
            dtype,
            samples=samples,
            seed=seed,
            exhaustive=exhaustive,
            range=parse_range(range_),
            keep_points=report_dir is not None,
            progress=bar,
        )
    if report_dir is not None:
        from reports import engines_html

        engines_html.build(m, report_dir, command_line())
    if not write_json(matrix.document(m, command=command_line()), json_out):
        sys.stdout.write(engines_table.table(m))
    return 0
