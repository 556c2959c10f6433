"""`actaudit sweep`: candidates over every input of a format against the exact oracle; also
the summary and findings that other commands print."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from audit.cli import options as opt
from audit.cli.app import app, command_line, terminal_width
from audit.cli.progress import ProgressBar
from audit.errors import BadOptionError
from audit.io import dumps, write_text

if TYPE_CHECKING:
    from audit.measure.sweep import SweepResult


@app.command()
def sweep(
    targets: list[str] | None = opt.targets(
        help="Candidates (gelu.tanh), families (gelu), ort:OP, openvino:OP, litert:OP, torch:NAME, jax:NAME, c:FILE.c:FUNCTION or pkg.module:function.",
    ),
    dtype: str = opt.dtype(),
    compute: str | None = opt.compute(
        help="Compute format(s) of intermediates (default 'auto': for storage formats under 32 bits both the storage format itself and fp32, else the storage format).",
    ),
    range_: str | None = opt.range_(),
    samples: int | None = opt.samples(),
    seed: int = opt.seed(),
    exhaustive: bool = opt.exhaustive(
        help="Every fp32 input, or every (a, b) pair of a 16-bit gated unit (chunked)."
    ),
    param: list[str] = opt.param(
        help="Candidate parameter NAME=VALUE, or NAME=V1,V2,... to sweep it (repeatable).",
    ),
    grad: bool = opt.grad(help="Sweep the derivative (backward) candidates instead."),
    backward: bool = opt.backward(help="Sweep the backward kernels dx = dy * f'(x) over pairs (x, dy)."),
    grid: int | None = opt.grid(
        help="Values per axis of the (a, b) grid of gated units (default 1024; 8-bit formats: all).",
    ),
    json_out: str | None = opt.json_out(),
    csv_out: Path | None = typer.Option(None, "--csv", help="Write one row per input to PATH."),
    report_dir: Path | None = opt.report_dir(help="Write the HTML and PNG report to DIR."),
    reference: str | None = opt.reference(),
    device: str = opt.device(),
    dump: Path | None = opt.dump(),
    dump_dtype: str | None = opt.dump_dtype(),
    workers: int | None = typer.Option(
        None, "--workers", help="Processes for chunked (--exhaustive) sweeps (default: every core)."
    ),
    executor: str = typer.Option(
        "local", "--executor", help="Where chunked sweeps run: local (processes) or dask."
    ),
    scheduler: str | None = typer.Option(
        None, "--scheduler", help="Address of the Dask scheduler (tcp://host:8786) for --executor dask."
    ),
    checkpoint: Path | None = typer.Option(
        None, "--checkpoint", help="Save chunked sweeps' progress in DIR; rerun the command to resume."
    ),
    quiet: bool = typer.Option(
        False, "--quiet", "-q", help="No summary table (--findings still lists the findings)."
    ),
    wide: bool = typer.Option(
        False, "--wide", "-w", help="Every column of the summary (as wide as it needs)."
    ),
    format_: str = typer.Option("table", "--format", help="Summary on stdout: table, markdown, csv or json."),
    details: bool = typer.Option(
        False, "--findings", "-f", help="Also list each finding with its intervals and cause."
    ),
    max_ulp: float | None = opt.max_ulp(help="Tolerance of the clip recommendation, in ULP."),
    atol: float | None = opt.atol(help="Tolerance of the clip recommendation, absolute."),
    timeout: float | None = typer.Option(
        None,
        "--timeout",
        help="Seconds one call of a pkg.module:function or of a c:FILE.c:FUNCTION kernel may take "
        "(C kernels: 600 by default).",
    ),
    semantics: list[str] = opt.semantics(),
    cflags: str | None = typer.Option(
        None,
        "--cflags",
        help="Compiler flags of c:FILE.c:FUNCTION kernels (default -O2), e.g. '-O2 -mfma -ffp-contract=fast'.",
    ),
    out_dtype: str | None = opt.out_dtype(
        help="Output format (default: --dtype): results, oracle and metrics in it."
    ),
    blocks_dist: str = opt.blocks(
        help="Block-scaled outputs: input distribution (normal:std=S[,mean=M], uniform:lo=A,hi=B, npy:PATH).",
    ),
    elements: int = opt.elements(),
    scale_rule: str = opt.scale_rule(
        help="Block-scaled outputs: ocp (OCP MX 6.3 floor rule; NVFP4 round to nearest) or ceil (round-up).",
    ),
    distribution: str | None = opt.distribution(
        help="Weight the figures by an input distribution: normal:std=S[,mean=M], uniform:lo=A,hi=B, "
        "laplace:scale=S[,mean=M] or npy:PATH (a 'weighted' section per result).",
    ),
):
    """Sweep candidates over every input of a format against the exact oracle."""
    from audit.io import check_out_files

    check_out_files(("--json", json_out), ("--csv", csv_out))  # before the work, not after it
    from audit.measure.sweep import document
    from audit.numbers.inputs import parse_range
    from audit.targets.candidates import parse_params

    rng = parse_range(range_)
    params = parse_params(param)
    from audit.measure import blocks, quant
    from reports import table as table_report

    if format_ not in table_report.FORMATS:
        raise BadOptionError(f"--format must be one of {', '.join(table_report.FORMATS)}, got '{format_}'")
    if json_out == "-" and format_ != "table":
        raise BadOptionError("--json - already prints the JSON document on stdout; drop --format")
    if blocks.is_block(out_dtype) or quant.is_quant(dtype) or quant.is_quant(out_dtype):
        # what these audits do not take is refused, never silently ignored
        given = [
            name
            for name, v in (
                ("--csv", csv_out),
                ("--report", report_dir),
                ("--semantics", semantics),
                ("--checkpoint", checkpoint),
                ("--dump", dump),
                ("--range", range_),
                ("--grad", grad),
                ("--backward", backward),
                ("--exhaustive", exhaustive),
                ("--distribution", distribution),
                ("--samples", samples),
                ("--dump-dtype", dump_dtype),
                ("--grid", grid),
            )
            if v
        ]
        if given:
            raise BadOptionError(
                f"{', '.join(given)}: not for quantized or block-scaled audits "
                "(their HTML report: actaudit report ... --out-dtype)"
            )
        block = blocks.is_block(out_dtype)
        results = formats_sweep(
            targets, dtype, out_dtype, compute, params, reference, blocks_dist, elements, seed, scale_rule
        )
        doc = (blocks if block else quant).document(results, command=command_line())
        return _formats_summary(results, doc, json_out, quiet, details and not block, (format_, wide))
    if samples is not None and samples < 1:
        raise BadOptionError(f"--samples must be positive, got {samples}")
    # block-scaled options where the output is not block-scaled: refused, never ignored
    # (their values were not even checked: --elements -1, --scale-rule foo passed)
    given = [
        name
        for name, v, default in (
            ("--blocks", blocks_dist, opt.BLOCKS),
            ("--elements", elements, opt.ELEMENTS),
            ("--scale-rule", scale_rule, opt.SCALE_RULE),
        )
        if v != default
    ]
    if given:
        raise BadOptionError(
            f"{', '.join(given)}: only for a block-scaled --out-dtype (mxfp8_e4m3, nvfp4, ...)"
        )
    with ProgressBar() as bar:
        results = api_sweep(
            targets,
            dtype,
            compute,
            range=rng,
            samples=samples,
            seed=seed,
            exhaustive=exhaustive,
            params=params,
            grad=grad,
            backward=backward,
            grid=grid,
            keep_points=csv_out is not None or report_dir is not None,
            progress=bar,
            reference=reference,
            device=device,
            dump=dump,
            dump_dtype=dump_dtype,
            workers=workers,
            executor=executor,
            scheduler=scheduler,
            checkpoint=checkpoint,
            semantics=semantics,
            cflags=cflags,
            out_dtype=out_dtype,
            distribution=distribution,
            max_ulp=opt.tolerance(max_ulp, "--max-ulp"),
            atol=opt.tolerance(atol, "--atol"),
            timeout=timeout,
        )
    if csv_out is not None:
        from reports.csv import write_csv

        write_csv(results, csv_out)
    if report_dir is not None:
        from reports import html as html_report

        html_report.build(results, report_dir, command_line())
    # the JSON document only where one is written (the table alone does not need it)
    doc = document(results, command=command_line()) if json_out or format_ == "json" else None
    if json_out == "-" or (format_ == "json" and not quiet):
        sys.stdout.write(dumps(doc))
        if json_out in (None, "-"):
            return
    if json_out and json_out != "-":
        write_text(json_out, dumps(doc))
    if not quiet and format_ != "json":
        sys.stdout.write(summary(results, format_, wide))
        if out_dtype is not None and format_ == "table":
            print(f"outputs, oracle and metrics in {results[0].out_dtype}; inputs in --dtype")
    if details and format_ == "table":
        print_findings(results)


def api_sweep(targets, dtype, compute, *, semantics=(), dump=None, **options) -> list[SweepResult]:
    """The API's sweep of options as the command line has them: compute 'auto' where none
    is given, no --semantics as None, --dump's path as text (`sweep`, `clip`, `report`)."""
    from audit.measure.sweep import sweep as run_sweep

    return run_sweep(
        targets,
        dtype,
        "auto" if compute is None else compute,
        semantics=semantics or None,
        dump=None if dump is None else str(dump),
        **options,
    )


def formats_sweep(targets, dtype, out_dtype, compute, params, reference, dist, elements, seed, rule):
    """The audit of a quantized (int8:..., uint8:..., int16:...) input or output format, or of
    a block-scaled output format (mxfp8_e4m3, ..., nvfp4): `sweep` and `report`."""
    from audit.measure import blocks, quant

    if blocks.is_block(out_dtype):
        return blocks.sweep(
            targets,
            dtype,
            out_dtype,
            compute or "fp32",
            rule=rule,
            dist=dist,
            elements=elements,
            seed=seed,
            params=params,
        )
    return quant.sweep(targets, dtype, out_dtype, compute or "fp32", params, reference)


def summary(results: list[SweepResult], format_: str = "table", wide: bool = False) -> str:
    """The sweep summary in a format (reports/table.py), at the terminal's width."""
    from reports import table as table_report

    if format_ == "markdown":
        return table_report.markdown(results)
    if format_ == "csv":
        return table_report.csv_text(results)
    if wide:
        return table_report.wide(results)
    return table_report.compact(results, width=terminal_width())


def _formats_summary(results, doc, json_out, quiet, findings, shape) -> None:
    """The quantized or block sweep's document and summary (reports/formats_table.py), and
    with FINDINGS the quantized audit's findings."""
    from reports import formats_table

    format_, wide = shape
    if json_out == "-" or (format_ == "json" and not quiet):
        sys.stdout.write(dumps(doc))
        if json_out in (None, "-"):
            return
    if json_out:
        write_text(json_out, dumps(doc))
    if quiet or format_ == "json":
        return
    sys.stdout.write(formats_table.summary(results, format_, wide, terminal_width()))
    if findings and format_ == "table":
        sys.stdout.write(formats_table.quant_findings(results, terminal_width()))


def print_findings(results: list[SweepResult]) -> None:
    from reports import table as table_report

    sys.stdout.write(table_report.findings_text(results, terminal_width()))
