"""The ``actaudit`` command line: a thin layer over the Python API.

Errors the user can cause are :class:`audit.errors.ActauditError`; :func:`main`
prints them as one line (``actaudit: error: ...``) and exits 2.  Ctrl-C prints
one line and exits 130.
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import numpy as np
import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from audit._version import __version__
from audit.errors import ActauditError, BadOptionError
from audit.io import dumps, format_number, write_text
from audit.measure.metrics import CLASS_NAMES
from audit.measure.sweep import SweepResult, document
from audit.measure.sweep import sweep as run_sweep
from audit.numbers.formats import FORMATS
from audit.numbers.inputs import parse_range
from audit.targets import semantics as semantics_mod
from audit.targets.candidates import catalog, parse_params

SEM_HELP = (
    "Machine semantics: flags joined by commas (ftz,daz,contract,saturate,round=rtz,"
    "exp=exp.u20,div=rcp,exp=bound:2, ...) or a profile (ieee, ascend_sat, cuda_fast, "
    "bf16_trunc); repeat the option to compare semantics side by side."
)

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Audit the accuracy and stability of activation functions and their "
    "approximations against an exact mpmath oracle.",
)
out = Console()
if not out.is_terminal and not os.environ.get("COLUMNS"):  # piped, no width asked for: do not
    out = Console(width=160)  # squeeze tables into 80 columns
err = Console(stderr=True)


def _say(msg: str) -> None:
    """One line on stderr."""
    sys.stderr.write(msg.replace("\n", " ") + "\n")


MAX_CSV_ROWS = 1 << 24


fmt_num = format_number


def _version(value: bool):
    if value:
        out.print(f"actaudit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
):
    pass


@app.command()
def sweep(
    targets: list[str] | None = typer.Argument(
        None,
        help="Candidates (gelu.tanh), families (gelu), ort:OP, openvino:OP, litert:OP, torch:NAME, jax:NAME, c:FILE.c:FUNCTION or pkg.module:function.",
    ),
    dtype: str = typer.Option("fp16", "--dtype", "-d", help="Storage format(s): fp16,bf16,..."),
    compute: str | None = typer.Option(
        None,
        "--compute",
        "-c",
        help="Compute format(s) of intermediates (default 'auto': for storage formats under 32 bits both the storage format itself and fp32, else the storage format).",
    ),
    range_: str | None = typer.Option(None, "--range", "-r", help="Restrict inputs to LO:HI."),
    samples: int | None = typer.Option(None, "--samples", help="Sample size for fp32 / fp64."),
    seed: int = typer.Option(0, "--seed", help="Seed of the fp32 / fp64 sample."),
    exhaustive: bool = typer.Option(
        False, "--exhaustive", help="Every fp32 input, or every (a, b) pair of a 16-bit gated unit (chunked)."
    ),
    param: list[str] = typer.Option(
        [],
        "--param",
        "-p",
        help="Candidate parameter NAME=VALUE, or NAME=V1,V2,... to sweep it (repeatable).",
    ),
    grad: bool = typer.Option(False, "--grad", help="Sweep the derivative (backward) candidates instead."),
    backward: bool = typer.Option(
        False, "--backward", help="Sweep the backward kernels dx = dy * f'(x) over pairs (x, dy)."
    ),
    grid: int | None = typer.Option(
        None,
        "--grid",
        help="Values per axis of the (a, b) grid of gated units (default 1024; 8-bit formats: all).",
    ),
    json_out: str | None = typer.Option(
        None, "--json", help="Write the JSON document to PATH, or '-' for stdout."
    ),
    csv_out: Path | None = typer.Option(None, "--csv", help="Write one row per input to PATH."),
    report_dir: Path | None = typer.Option(None, "--report", help="Write the HTML and PNG report to DIR."),
    reference: str | None = typer.Option(
        None, "--reference", help="Reference of a callable or a dump (e.g. gelu)."
    ),
    device: str = typer.Option("cpu", "--device", help="Device of torch: ops (cpu, cuda)."),
    dump: Path | None = typer.Option(
        None, "--dump", help="Outputs dumped from a device (.npz, .npy, .csv or raw binary)."
    ),
    dump_dtype: str | None = typer.Option(
        None, "--dump-dtype", help="Dtype of a raw binary dump (default: --dtype)."
    ),
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
    max_ulp: float | None = typer.Option(
        None, "--max-ulp", help="Tolerance of the clip recommendation, in ULP."
    ),
    atol: float | None = typer.Option(None, "--atol", help="Tolerance of the clip recommendation, absolute."),
    timeout: float | None = typer.Option(
        None,
        "--timeout",
        help="Seconds one call of a pkg.module:function or of a c:FILE.c:FUNCTION kernel may take "
        "(C kernels: 600 by default).",
    ),
    semantics: list[str] = typer.Option([], "--semantics", help=SEM_HELP),
    cflags: str | None = typer.Option(
        None,
        "--cflags",
        help="Compiler flags of c:FILE.c:FUNCTION kernels (default -O2), e.g. '-O2 -mfma -ffp-contract=fast'.",
    ),
    out_dtype: str | None = typer.Option(
        None, "--out-dtype", help="Output format (default: --dtype): results, oracle and metrics in it."
    ),
    blocks_dist: str = typer.Option(
        "normal:std=1",
        "--blocks",
        help="Block-scaled outputs: input distribution (normal:std=S[,mean=M], uniform:lo=A,hi=B, npy:PATH).",
    ),
    elements: int = typer.Option(
        1 << 16, "--elements", help="Block-scaled outputs: number of seeded input elements."
    ),
    scale_rule: str = typer.Option(
        "ocp",
        "--scale-rule",
        help="Block-scaled outputs: ocp (OCP MX 6.3 floor rule; NVFP4 round to nearest) or ceil (round-up).",
    ),
    distribution: str | None = typer.Option(
        None,
        "--distribution",
        help="Weight the figures by an input distribution: normal:std=S[,mean=M], uniform:lo=A,hi=B, "
        "laplace:scale=S[,mean=M] or npy:PATH (a 'weighted' section per result).",
    ),
):
    """Sweep candidates over every input of a format against the exact oracle."""
    rng = parse_range(range_)
    params = parse_params(param)
    for name, v in (
        ("--json", json_out),
        ("--csv", csv_out),
        ("--report", report_dir),
        ("--dump", dump),
        ("--checkpoint", checkpoint),
    ):
        if v is not None and not str(v).strip():
            raise BadOptionError(f"{name} needs a path, got an empty string")
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
            )
            if v
        ]
        if given:
            raise BadOptionError(
                f"{', '.join(given)}: not for quantized or block-scaled audits "
                "(their HTML report: actaudit report ... --out-dtype)"
            )
    if blocks.is_block(out_dtype):
        return _block_sweep(
            targets,
            dtype,
            out_dtype,
            compute,
            params,
            json_out,
            quiet,
            blocks_dist,
            elements,
            seed,
            scale_rule,
            (format_, wide),
        )
    if quant.is_quant(dtype) or quant.is_quant(out_dtype):
        return _quant_sweep(
            targets, dtype, out_dtype, compute, params, json_out, quiet, details, reference, (format_, wide)
        )
    if samples is not None and samples < 1:
        raise BadOptionError(f"--samples must be positive, got {samples}")
    with _progress() as bar:
        results = run_sweep(
            targets,
            dtype,
            "auto" if compute is None else compute,
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
            dump=None if dump is None else str(dump),
            dump_dtype=dump_dtype,
            workers=workers,
            executor=executor,
            scheduler=scheduler,
            checkpoint=checkpoint,
            semantics=semantics or None,
            cflags=cflags,
            out_dtype=out_dtype,
            distribution=distribution,
            max_ulp=_tolerance(max_ulp, "--max-ulp"),
            atol=_tolerance(atol, "--atol"),
            timeout=timeout,
        )
    if csv_out is not None:
        write_csv(results, csv_out)
    if report_dir is not None:
        from reports import html as html_report

        html_report.build(results, report_dir, _command_line())
    doc = document(results, command=_command_line())
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


def summary(results: list[SweepResult], format_: str = "table", wide: bool = False) -> str:
    """The sweep summary in a format (reports/table.py), at the terminal's width."""
    import shutil

    from reports import table as table_report

    if format_ == "markdown":
        return table_report.markdown(results)
    if format_ == "csv":
        return table_report.csv_text(results)
    if wide:
        return table_report.wide(results)
    return table_report.compact(results, width=shutil.get_terminal_size((80, 24)).columns)


def _formats_summary(results, doc, json_out, quiet, shape) -> bool:
    """The quantized or block sweep's document and summary (reports/formats_table.py); False
    when nothing more is to be printed."""
    import shutil

    from reports import formats_table

    format_, wide = shape
    if json_out == "-" or (format_ == "json" and not quiet):
        sys.stdout.write(dumps(doc))
        if json_out in (None, "-"):
            return False
    if json_out:
        write_text(json_out, dumps(doc))
    if quiet or format_ == "json":
        return False
    sys.stdout.write(
        formats_table.summary(results, format_, wide, shutil.get_terminal_size((80, 24)).columns)
    )
    return format_ == "table"


def _quant_sweep(
    targets,
    dtype,
    out_dtype,
    compute,
    params,
    json_out,
    quiet,
    details,
    reference=None,
    shape=("table", False),
) -> None:
    """sweep with a quantized (int8:..., uint8:..., int16:...) input or output format."""
    from audit.measure import quant

    results = quant.sweep(targets, dtype, out_dtype, compute or "fp32", params, reference)
    doc = quant.document(results, command=_command_line())
    if not _formats_summary(results, doc, json_out, quiet, shape):
        return
    if details:
        import shutil

        from reports import formats_table

        sys.stdout.write(formats_table.quant_findings(results, shutil.get_terminal_size((80, 24)).columns))


def _block_sweep(
    targets,
    dtype,
    out_dtype,
    compute,
    params,
    json_out,
    quiet,
    dist,
    elements,
    seed,
    rule,
    shape=("table", False),
) -> None:
    """sweep with a block-scaled output format (mxfp8_e4m3, ..., nvfp4)."""
    from audit.measure import blocks

    results = blocks.sweep(
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
    doc = blocks.document(results, command=_command_line())
    _formats_summary(results, doc, json_out, quiet, shape)


def _tolerance(v, name):
    if v is not None and not (math.isfinite(v) and v >= 0):
        raise BadOptionError(f"{name} must be a finite number >= 0, got {v}")
    return v


def print_findings(results: list[SweepResult]) -> None:
    import shutil

    from reports import table as table_report

    sys.stdout.write(table_report.findings_text(results, shutil.get_terminal_size((80, 24)).columns))


@app.command("diff")
def diff_cmd(
    a: str = typer.Argument(
        ...,
        help="First candidate: catalog id, ort:OP, openvino:OP, litert:OP, torch:NAME, jax:NAME, c:FILE.c:FUNCTION, torch-compile:NAME, torch-bwd:NAME, pkg.module:function or dump:FILE.",
    ),
    b: str = typer.Argument(..., help="Second candidate (the same kinds)."),
    dtype: str = typer.Option("fp16", "--dtype", "-d", help="Storage format(s): fp16,bf16,..."),
    compute: str | None = typer.Option(
        None, "--compute", "-c", help="Compute format (default: the storage format)."
    ),
    range_: str | None = typer.Option(None, "--range", "-r", help="Restrict inputs to LO:HI."),
    samples: int | None = typer.Option(None, "--samples", help="Sample size for fp32 / fp64."),
    seed: int = typer.Option(0, "--seed", help="Seed of the sample or grid."),
    exhaustive: bool = typer.Option(
        False, "--exhaustive", help="Every fp32 input, or every pair of a 16-bit format."
    ),
    grid: int | None = typer.Option(None, "--grid", help="Values per axis of a bivariate grid."),
    param: list[str] = typer.Option([], "--param", "-p", help="Parameter NAME=VALUE of both candidates."),
    param_b: list[str] = typer.Option([], "--param-b", help="Parameter NAME=VALUE of B only."),
    reference: str | None = typer.Option(None, "--reference", help="Reference of callables and dumps."),
    device: str = typer.Option("cpu", "--device", help="Device of torch: ops."),
    expect_identical: bool = typer.Option(
        False, "--expect-identical", help="Exit 1 unless every output has the same bits."
    ),
    json_out: str | None = typer.Option(
        None, "--json", help="Write the JSON document to PATH, or '-' for stdout."
    ),
    report_dir: Path | None = typer.Option(
        None, "--report", help="Write an HTML report (distance maps) to DIR."
    ),
):
    """Run two implementations on the same inputs: identical share, ULP distance between them,
    where they disagree and which is closer to the exact value."""
    from audit.compare.diff import diff as run_diff
    from audit.compare.diff import document as diff_document
    from audit.numbers.formats import parse_formats

    params, pb = parse_params(param), parse_params(param_b)
    for k, v in {**params, **pb}.items():
        if isinstance(v, list):
            raise BadOptionError(f"parameter '{k}': diff takes one value per parameter")
    rng = parse_range(range_)
    results = []
    with _progress() as bar:
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

        diff_report.build(results, report_dir, _command_line())
    doc = diff_document(results, command=_command_line())
    if json_out == "-":
        sys.stdout.write(dumps(doc))
    else:
        if json_out:
            write_text(json_out, dumps(doc))
        for r in results:
            print_diff(r)
    differ = any(r.verdict != "identical" for r in results)
    return 1 if expect_identical and differ else 0


def print_diff(r) -> None:
    import shutil

    from reports import diff as diff_report

    sys.stdout.write(diff_report.text(r, shutil.get_terminal_size((80, 24)).columns))


@app.command("engines")
def engines_cmd(
    reference: str = typer.Argument(..., help="The function: gelu, tanh, sigmoid, erf, ..."),
    dtype: str = typer.Option("fp16", "--dtype", "-d", help="Storage format of the inputs."),
    samples: int | None = typer.Option(None, "--samples", help="Sample size for fp32."),
    seed: int = typer.Option(0, "--seed", help="Seed of the sample."),
    exhaustive: bool = typer.Option(False, "--exhaustive", help="Every fp32 input (of --range)."),
    range_: str | None = typer.Option(None, "--range", "-r", help="Restrict inputs to LO:HI."),
    json_out: str | None = typer.Option(None, "--json", help="Write the JSON document to PATH, or '-'."),
    report_dir: Path | None = typer.Option(
        None, "--report", help="Write the matrix as an HTML report to DIR."
    ),
):
    """Every installed engine's ops for REFERENCE (ONNX Runtime, PyTorch, JAX, ...) and the
    catalog's best candidate, on the same inputs, in one table."""
    from audit.compare import matrix
    from reports import engines_table

    with _progress() as bar:
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

        engines_html.build(m, report_dir, _command_line())
    doc = matrix.document(m, command=_command_line())
    if json_out == "-":
        sys.stdout.write(dumps(doc))
        return 0
    if json_out:
        write_text(json_out, dumps(doc))
    sys.stdout.write(engines_table.table(m))
    return 0


@app.command()
def consistency(
    target: str = typer.Argument(
        ...,
        help="Catalog candidate, ort:OP, openvino:OP, litert:OP, torch:NAME, jax:NAME, c:FILE.c:FUNCTION or pkg.module:function.",
    ),
    dtype: str = typer.Option("fp32", "--dtype", "-d", help="Storage format(s)."),
    compute: str | None = typer.Option(None, "--compute", "-c", help="Compute format of catalog candidates."),
    param: list[str] = typer.Option(
        [], "--param", "-p", help="NAME=V1,V2,...: check that the parameter changes some output (repeatable)."
    ),
    layout: bool = typer.Option(
        False,
        "--layout",
        help="Check 0-d, lengths 1..--max-length and non-contiguous views against one contiguous call.",
    ),
    max_length: int = typer.Option(
        65,
        "--max-length",
        help="Longest 1-D length of the layout check (a vector width plus one and beyond).",
    ),
    values: int = typer.Option(
        4096, "--values", help="Values of the layout check (a seeded sample, plus the specials)."
    ),
    range_: str | None = typer.Option(
        None, "--range", "-r", help="Restrict the parameter check's inputs to LO:HI."
    ),
    json_out: str | None = typer.Option(
        None, "--json", help="Write the JSON document to PATH, or '-' for stdout."
    ),
):
    """Consistency checks: a parameter that changes nothing, results that depend on the
    tensor's shape. Exit 1 when there is a finding."""
    from audit.compare import consistency as cons
    from audit.numbers.formats import parse_formats

    if not param and not layout:
        raise BadOptionError("give --param NAME=V1,V2 (parameter effect) and/or --layout")
    checks: list = []
    rng = parse_range(range_)
    for f in parse_formats(dtype):
        for text in param:
            if "=" not in text:
                raise BadOptionError(f"--param '{text}' is not NAME=V1,V2")
            name, vals = text.split("=", 1)
            checks.append(
                cons.param_effect(target, name.strip(), cons.parse_values(vals), f, compute, range=rng)
            )
        if layout:
            checks.append(cons.layout_check(target, f, max_length=max_length, values=values))
    failed = [c for c in checks if (c.findings if isinstance(c, cons.LayoutReport) else c.failed)]
    doc = cons.document(checks, command=_command_line())
    if json_out == "-":
        sys.stdout.write(dumps(doc))
    else:
        if json_out:
            write_text(json_out, dumps(doc))
        for c in checks:
            if isinstance(c, cons.LayoutReport):
                out.print(
                    f"{c.target} {c.dtype}: layout: {len(c.shapes)} shapes, {c.values} values; "
                    f"{len(c.findings)} differ from one contiguous call",
                    markup=False,
                    highlight=False,
                )
                for f in c.findings[:12]:
                    ex = f.example
                    out.print(
                        f"  {f.text}; e.g. x = {ex['x']!r} ({ex['x_hex']}): {ex['got']!r}, "
                        f"contiguous {ex['contiguous']!r}",
                        markup=False,
                        highlight=False,
                    )
                if len(c.findings) > 12:
                    out.print(f"  (+{len(c.findings) - 12} more shapes)", highlight=False)
            else:
                mark = "FINDING " if c.failed else "ok "
                out.print(f"{c.target} {c.dtype}: {mark}{c.text}", markup=False, highlight=False)
    return 1 if failed else 0


@app.command()
def clip(
    targets: list[str] = typer.Argument(..., help="Candidates or families."),
    dtype: str = typer.Option("fp16", "--dtype", "-d", help="Storage format(s) (16 bits or fewer)."),
    compute: str | None = typer.Option(
        None,
        "--compute",
        "-c",
        help="Compute format(s) (default 'auto': the storage format itself and fp32).",
    ),
    param: list[str] = typer.Option([], "--param", "-p", help="Candidate parameter NAME=VALUE."),
    max_ulp: float | None = typer.Option(
        None, "--max-ulp", help="Tolerance in ULP (default: the candidate's error on its core)."
    ),
    atol: float | None = typer.Option(None, "--atol", help="Absolute tolerance."),
    json_out: str | None = typer.Option(None, "--json", help="Write JSON to PATH, or '-' for stdout."),
    semantics: list[str] = typer.Option([], "--semantics", help=SEM_HELP),
):
    """Recommend a safe input clip range (and what to do beyond it) per candidate and format."""
    from audit.numbers.formats import parse_formats

    for f in parse_formats(dtype):
        if not f.enumerable:
            raise BadOptionError(
                f"clip ranges need every value of the format; {f.name} has too many "
                "(use a format of 16 bits or fewer)"
            )
    with _progress() as bar:
        results = run_sweep(
            targets,
            dtype,
            "auto" if compute is None else compute,
            params=parse_params(param),
            progress=bar,
            semantics=semantics or None,
            max_ulp=_tolerance(max_ulp, "--max-ulp"),
            atol=_tolerance(atol, "--atol"),
        )
    results = [r for r in results if r.clip is not None]
    if not results:
        raise BadOptionError("no univariate candidate selected: clip ranges apply to f(x)")
    if json_out:
        doc = {
            "schema": "actaudit.clip/1",
            "results": [
                {
                    "candidate": r.candidate,
                    "dtype": r.dtype,
                    "compute": r.compute,
                    "semantics": r.to_dict()["semantics"]["name"],
                    "saturation": r.to_dict()["saturation"],
                    "clip": r.to_dict()["clip"],
                }
                for r in results
            ],
        }
        if json_out == "-":
            sys.stdout.write(dumps(doc))
            return
        write_text(json_out, dumps(doc))
    import shutil

    from reports import table as table_report
    from reports.listing import clip_text

    sys.stdout.write(clip_text(results, shutil.get_terminal_size((80, 24)).columns, table_report.sem_label))


@app.command()
def suggest(
    reference: str = typer.Argument(..., help="Reference function (gelu, sigmoid, ...)."),
    dtype: str = typer.Option("fp16", "--dtype", "-d", help="Storage format."),
    compute: str | None = typer.Option(
        None, "--compute", "-c", help="Compute format (default: the storage format)."
    ),
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
    samples: int | None = typer.Option(None, "--samples", help="Sample size for fp32 / fp64."),
    brief: bool = typer.Option(False, "--brief", help="Ranking and Pareto front only (no repairs)."),
    time_c: bool = typer.Option(
        False,
        "--time-c",
        help="Also time the C version of candidates that have one (a fitted module's NAME.c).",
    ),
    json_out: str | None = typer.Option(None, "--json", help="Write JSON to PATH, or '-' for stdout."),
    html_out: Path | None = typer.Option(
        None, "--html", help="Write the ranking and repairs as an HTML page."
    ),
    semantics: str | None = typer.Option(
        None,
        "--semantics",
        help="Rank under this machine semantics (one; flags as in sweep, e.g. contract,ftz).",
    ),
    distribution: str | None = typer.Option(
        None, "--distribution", help="Input distribution of the weighted figures (as sweep's)."
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
    from audit.repair import cost as cost_mod
    from audit.repair import suggest as suggest_mod

    w = cost_mod.parse_weights(cost_weight)
    with _progress() as bar:
        s = suggest_mod.suggest(
            reference,
            dtype,
            compute,
            extra=extra,
            weights=w,
            samples=samples,
            repairs=not brief,
            time_c=time_c,
            semantics=semantics,
            progress=bar,
            distribution=distribution,
            rank=rank,
        )
    if html_out is not None:
        from reports import suggest as suggest_report

        write_text(html_out, suggest_report.page(s.to_dict()))
    if json_out:
        if json_out == "-":
            sys.stdout.write(dumps(s.to_dict()))
            return
        write_text(json_out, dumps(s.to_dict()))
    out.print(suggest_mod.text(s), markup=False, highlight=False, soft_wrap=True)


@app.command()
def fit(
    reference: str = typer.Argument(..., help="Reference function (gelu, sigmoid, ...)."),
    dtype: str = typer.Option("bf16", "--dtype", "-d", help="Output format (enumerable: fp8, fp16, bf16)."),
    compute: str = typer.Option("fp32", "--compute", "-c", help="Compute format of the kernel (fp32)."),
    max_degree: int | None = typer.Option(
        None,
        "--max-degree",
        help="Largest polynomial degree tried (default: 6 for the table, 12 for vector).",
    ),
    pieces: int | None = typer.Option(
        None, "--pieces", help="At most K table pieces, of power-of-two width (default: try 16 to 512)."
    ),
    param: list[str] = typer.Option([], "--param", "-p", help="Reference parameter NAME=VALUE."),
    out_dir: Path = typer.Option(Path("."), "--out", "-o", help="Directory for NAME.py, NAME.c, NAME.toml."),
    time_limit: float = typer.Option(300.0, "--time-limit", help="Seconds before the search gives up."),
    json_out: str | None = typer.Option(None, "--json", help="Write JSON to PATH, or '-' for stdout."),
    fma: bool = typer.Option(
        False,
        "--fma",
        help="Horner steps as fused multiply-adds (fmaf in C), verified with one rounding each.",
    ),
    semantics: str | None = typer.Option(
        None, "--semantics", help="Verify on this machine: flags contract (implies --fma), ftz, daz."
    ),
    symmetry: bool = typer.Option(
        True,
        "--symmetry/--no-symmetry",
        help="Fit x >= 0 only for odd or even functions (detected over every input).",
    ),
    shape: str = typer.Option(
        "auto",
        "--shape",
        help="table: piecewise table kernel (C, candidate module, gate entry); vector: branch-free "
        "vectorizable kernel (gelu, silu, sigmoid, tanh, erf; bf16, fp16), compiled and checked at every input; "
        "auto (default): vector where the reference and format have one, else table (the choice is reported).",
    ),
    emit: list[str] = typer.Option(
        [], "--emit", help="With --shape vector: c, cuda, triton, numpy (repeatable; default c)."
    ),
    search: bool = typer.Option(
        False, "--search", help="With --shape vector: fit the shape's variants, keep the fastest here."
    ),
):
    """Synthesize a kernel correctly rounded at every input (rounding-interval LP), write it
    as a candidate module, a C function and a gate entry, and sweep it exhaustively."""
    if shape not in ("auto", "table", "vector"):
        raise BadOptionError(f"--shape: auto, table or vector; not {shape}")
    if not (time_limit > 0 and math.isfinite(time_limit)):
        raise BadOptionError(f"--time-limit must be a positive number, got {time_limit}")
    chosen = None  # (shape, why) when --shape auto chose
    if shape == "auto":
        from audit.repair import fit_shapes as fs

        given = [("--pieces", pieces is not None), ("--param", bool(param)), ("--fma", fma)]
        given += [("--semantics", semantics is not None), ("--no-symmetry", not symmetry)]
        vec = [("--emit", bool(emit)), ("--search", search)]
        chosen = fs.choose_shape(
            reference, dtype, compute, [n for n, on in given if on], [n for n, on in vec if on]
        )
        shape = chosen[0]
    if shape == "vector":
        from audit.cli import fit_vector as fit_vector_cli

        code = fit_vector_cli.run(
            reference,
            dtype,
            compute,
            max_degree,
            out_dir,
            json_out,
            emit or ["c"],
            out,
            search,
            chosen=chosen,
        )
        if code is not None:
            return code
        chosen = ("table", "the vector shape found no kernel correctly rounded at every input")
    if emit or search:
        raise BadOptionError("--emit and --search need --shape vector")
    if max_degree is None:
        max_degree = 6
    from audit.measure.sweep import run_candidate
    from audit.numbers.formats import get_format
    from audit.numbers.inputs import domain
    from audit.repair import cost as cost_mod
    from audit.repair import fit as fit_mod

    fit_mod.check_out_dir(out_dir)  # before the fit, not after it
    from audit.signals import ready

    ready("fit")
    with _progress() as bar:
        state = {}

        def step(label, done, total):
            if state.get("label") != label:
                bar.start(f"fit {reference} {dtype}: {label}", total)
                state["label"] = label
            bar(done)

        rep = fit_mod.fit(
            reference,
            dtype,
            compute,
            max_degree=max_degree,
            pieces=pieces,
            params=parse_params(param),
            time_limit=time_limit,
            fma=fma,
            semantics=semantics,
            symmetry=symmetry,
            progress=step,
        )
        results = []
        if rep.kernel is not None:  # verified first, then written as one set
            ready("verify")
            cand = fit_mod.candidate(rep.kernel)
            st = get_format(dtype)
            results = [run_candidate(cand, st, get_format(compute), domain(st), progress=bar)]
            paths = fit_mod.write(rep.kernel, out_dir)
    doc = fit_mod.to_dict(rep)
    if chosen is not None:
        doc["shape"] = {"chosen": chosen[0], "why": chosen[1]}
    if rep.kernel is not None:
        doc["files"] = paths
        doc["ops_traced"] = cost_mod.counts(cand, get_format(compute))
        doc["audit"] = document(results)["results"]
    if json_out == "-":
        sys.stdout.write(dumps(doc))
        return 0 if rep.ok else 1
    if json_out:
        write_text(json_out, dumps(doc))
    how = "".join(
        [
            ", FMA" if fma or (semantics and "contract" in semantics) else "",
            f", semantics {semantics}" if semantics else "",
        ]
    )
    if chosen is not None:
        out.print(f"shape {chosen[0]}: {chosen[1]}", markup=False, highlight=False, soft_wrap=True)
    out.print(
        f"actaudit fit {reference} {dtype} (compute {compute}{how}): {rep.message}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    if rep.kernel is None:
        for t in rep.tried[-3:]:
            out.print(
                f"  degree {t['degree']}, {t['pieces']} pieces: {t['failing_pieces']} pieces, "
                f"{t['failing_inputs']} inputs wrong",
                highlight=False,
            )
        return 1
    k = rep.kernel
    sym = f" ({k.symmetry} function: fitted on x >= 0)" if k.symmetry != "none" else ""
    out.print(
        f"kernel {k.name}: degree {k.degree}, {k.pieces} pieces of width {1 / k.inv_w:g}{sym}; "
        f"ops per element: {cost_mod.describe(doc['ops_traced'])}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    for pth in paths.values():
        out.print(f"wrote {pth}", markup=False, highlight=False)
    sys.stdout.write(summary(results))
    return 0 if results[0].max_ulp <= 0.5 and results[0].nan_count == 0 else 1


@app.command()
def selftest(
    points: int = typer.Option(150, "--points", help="Random points per reference and format."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random points."),
    certify: bool = typer.Option(
        False,
        "--certify",
        help="Instead, prove every entry of every cached oracle table (univariate references, "
        "float formats of 16 bits or fewer) with Arb ball arithmetic; exit 1 on any uncertified one.",
    ),
    reference: list[str] = typer.Option(
        [], "--reference", "-r", help="With --certify: only these references."
    ),
    dtype: list[str] = typer.Option([], "--dtype", "-d", help="With --certify: only these formats."),
    workers: int = typer.Option(
        1, "--workers", "-j", help="With --certify: processes (one per core at most)."
    ),
    json_: bool = typer.Option(False, "--json", help="With --certify: print the result as JSON."),
):
    """Check the oracle against mpmath alone for every reference and format; exit 1 on any
    disagreement.  With --certify, prove the cached tables with ball arithmetic instead."""
    from audit.measure import selftest as st

    if certify:
        return _certify(reference, dtype, workers, json_)
    if reference or dtype or json_ or workers != 1:
        raise BadOptionError("--reference, --dtype, --workers and --json go with --certify")
    if not 1 <= points <= 100_000:
        raise BadOptionError(f"--points must be in [1, 100000], got {points}")
    with _progress() as bar:
        checks = st.run(n=points, seed=seed, progress=bar)
    bad = [c for c in checks if c.disagreements]
    for c in bad:
        out.print(
            f"FAIL {c.reference} {c.fmt}: {c.disagreements} of {c.points} inputs disagree; {c.example}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    n = sum(c.points for c in checks)
    out.print(
        f"actaudit selftest: {len(checks)} reference x format checks, {n} inputs, {len(bad)} failed",
        highlight=False,
    )
    return 1 if bad else 0


def _certify(references: list[str], formats: list[str], workers: int, json_: bool) -> int:
    from audit.measure import certify as cert
    from reports.certification import text

    if not 1 <= workers <= (os.cpu_count() or 1):
        raise BadOptionError(f"--workers must be in [1, {os.cpu_count() or 1}], got {workers}")
    with _progress() as bar:
        results = cert.run(references or None, formats or None, workers, bar)
    if json_:
        sys.stdout.write(dumps(cert.to_json(results)))
    else:
        sys.stdout.write(text(results))
    return 1 if any(r.n_uncertified for r in results) else 0


@app.command()
def lut(
    reference: str = typer.Argument(..., help="Reference function (gelu, sigmoid, ...)."),
    dtype: str = typer.Option(
        ...,
        "--dtype",
        "-d",
        help="Input format: int8:scale=S,zero=Z, uint8:..., int16:..., or a float format of 16 bits or fewer.",
    ),
    out_dtype: str | None = typer.Option(None, "--out-dtype", help="Output format (default: --dtype)."),
    out_path: Path = typer.Option(
        ..., "--out", "-o", help="Output file: .npy, .npz, .csv, or .h/.c (a C array)."
    ),
    param: list[str] = typer.Option([], "--param", "-p", help="Reference parameter NAME=VALUE."),
):
    """Write the correctly rounded lookup table of a reference and print its audit."""
    from audit.measure import lut_audit
    from audit.oracle.references import get_reference
    from audit.targets import lut as lut_mod

    ref = get_reference(reference)
    params = parse_params(param)
    for k in params:
        if k not in ref.params:
            raise BadOptionError(
                f"{reference} has no parameter '{k}' (parameters: {', '.join(ref.params) or 'none'})"
            )
    inq, outf = lut_mod.formats_of(dtype, out_dtype)
    w = lut_mod.write_table(out_path, reference, inq, outf, params)
    out.print(
        f"wrote {out_path} ({w['entries']} entries, {w['in_dtype']} -> {w['out_dtype']})", highlight=False
    )
    a = lut_audit.audit_table(w, reference, inq, outf, params)
    if a is None:
        return
    if isinstance(a, dict):
        out.print(
            f"audit (read back): {a['correct']} of {a['inputs']} finite inputs correctly rounded, "
            f"max {format_number(a['max_ulp'])} ULP",
            highlight=False,
        )
    else:
        found = ", ".join(f"{f['kind']} {f['count']}" for f in a.findings) or "none"
        out.print(
            f"audit (read back): {a.count} codes, {100 * a.correct_fraction:.2f}% correct, "
            f"max code error {format_number(a.max_code_err)}, findings: {found}",
            highlight=False,
        )


@app.command()
def golden(
    reference: str = typer.Argument(..., help="Reference function (gelu, sigmoid, ...)."),
    dtype: str = typer.Option("fp16", "--dtype", "-d", help="Format."),
    out_path: Path = typer.Option(..., "--out", "-o", help="Output file: .npz, .npy or .csv."),
    inputs: Path | None = typer.Option(
        None, "--inputs", help="Only these inputs (a file read like a dump's outputs)."
    ),
    param: list[str] = typer.Option([], "--param", "-p", help="Reference parameter NAME=VALUE."),
    semantics: str | None = typer.Option(
        None,
        "--semantics",
        help="Conversion flags of the machine: daz_in, ftz_out, saturate (the result stored saturated), sat_nan=keep.",
    ),
):
    """Write golden test vectors: inputs, correctly rounded outputs and exact values."""
    from audit.numbers.formats import get_format
    from audit.oracle.references import get_reference
    from audit.targets.dumps import read_inputs
    from audit.targets.golden import write_golden

    fmt = get_format(dtype)
    ref = get_reference(reference)
    params = parse_params(param)
    for k in params:
        if k not in ref.params:
            raise BadOptionError(
                f"{reference} has no parameter '{k}' (parameters: {', '.join(ref.params) or 'none'})"
            )
    xs = None
    if inputs is not None:
        xs = read_inputs(inputs, fmt)  # values, in the file's own order
    n = write_golden(
        reference, fmt, out_path, params, xs, None if semantics is None else semantics_mod.parse(semantics)
    )
    out.print(f"wrote {out_path} ({n} inputs, {fmt.name})", highlight=False)


@app.command()
def report(
    targets: list[str] | None = typer.Argument(
        None,
        help="Candidates, families, ort:OP, openvino:OP, litert:OP, torch:NAME, jax:NAME, c:FILE.c:FUNCTION or pkg.module:function.",
    ),
    dtype: str = typer.Option("fp16", "--dtype", "-d", help="Storage format(s): fp16,bf16,..."),
    compute: str | None = typer.Option(
        None,
        "--compute",
        "-c",
        help="Compute format(s) (default 'auto': as sweep, the storage format and fp32 for formats under 32 bits).",
    ),
    range_: str | None = typer.Option(None, "--range", "-r", help="Restrict inputs to LO:HI."),
    samples: int | None = typer.Option(None, "--samples", help="Sample size for fp32 / fp64."),
    seed: int = typer.Option(0, "--seed", help="Seed of the fp32 / fp64 sample."),
    param: list[str] = typer.Option([], "--param", "-p", help="Candidate parameter NAME=VALUE[,VALUE...]."),
    grad: bool = typer.Option(False, "--grad", help="Report the derivative candidates."),
    backward: bool = typer.Option(False, "--backward", help="Report the backward kernels over (x, dy)."),
    grid: int | None = typer.Option(
        256, "--grid", help="Values per axis of gated units' grid (default 256 in reports)."
    ),
    out_dir: Path = typer.Option(..., "--out", "-o", help="Output directory."),
    reference: str | None = typer.Option(
        None, "--reference", help="Reference of a callable or a dump (e.g. gelu)."
    ),
    device: str = typer.Option("cpu", "--device", help="Device of torch: ops (cpu, cuda)."),
    dump: Path | None = typer.Option(
        None, "--dump", help="Outputs dumped from a device (.npz, .npy, .csv or raw binary)."
    ),
    dump_dtype: str | None = typer.Option(
        None, "--dump-dtype", help="Dtype of a raw binary dump (default: --dtype)."
    ),
    semantics: list[str] = typer.Option([], "--semantics", help=SEM_HELP),
    suggest_: bool = typer.Option(
        False,
        "--suggest",
        help="Also rank every candidate of each reference in each path (actaudit suggest) in a 'Suggest' section.",
    ),
    out_dtype: str | None = typer.Option(
        None,
        "--out-dtype",
        help="Output format: also quantized (uint8:scale=S,zero=Z) or block-scaled (mxfp8_e4m3, nvfp4).",
    ),
    blocks_dist: str = typer.Option(
        "normal:std=1", "--blocks", help="Block-scaled outputs: input distribution (as sweep's)."
    ),
    elements: int = typer.Option(
        1 << 16, "--elements", help="Block-scaled outputs: number of seeded input elements."
    ),
    scale_rule: str = typer.Option("ocp", "--scale-rule", help="Block-scaled outputs: ocp or ceil."),
):
    """Write an HTML report (self-contained) with one PNG per figure and the run's JSON."""
    from audit.measure import blocks, quant
    from reports import html as html_report

    if blocks.is_block(out_dtype) or quant.is_quant(dtype) or quant.is_quant(out_dtype):
        from reports import formats_html

        results = (
            blocks.sweep(
                targets,
                dtype,
                out_dtype,
                compute or "fp32",
                rule=scale_rule,
                dist=blocks_dist,
                elements=elements,
                seed=seed,
                params=parse_params(param),
            )
            if blocks.is_block(out_dtype)
            else quant.sweep(targets, dtype, out_dtype, compute or "fp32", parse_params(param), reference)
        )
        out.print(f"wrote {formats_html.build(results, out_dir, _command_line())}", highlight=False)
        return

    with _progress() as bar:
        results = run_sweep(
            targets,
            dtype,
            "auto" if compute is None else compute,
            range=parse_range(range_),
            samples=samples,
            seed=seed,
            params=parse_params(param),
            grad=grad,
            backward=backward,
            grid=grid,
            keep_points=True,
            progress=bar,
            reference=reference,
            device=device,
            dump=None if dump is None else str(dump),
            dump_dtype=dump_dtype,
            semantics=semantics or None,
            out_dtype=out_dtype,
        )
        sugg = None
        if suggest_:
            from audit.repair import suggest as suggest_mod

            sugg = suggest_mod.for_results(results, samples=samples, seed=seed, progress=bar)
    path = html_report.build(results, out_dir, _command_line(), suggestions=sugg)
    out.print(f"wrote {path}", highlight=False)


@app.command()
def baseline(
    spec: Path | None = typer.Option(
        None, "--spec", help="Audit spec (default: actaudit.toml or [tool.actaudit] in pyproject.toml)."
    ),
    out_path: Path | None = typer.Option(
        None, "--out", "-o", help="Baseline path (default: the spec's 'baseline')."
    ),
    reference: str | None = typer.Option(
        None, "--reference", help="Reference of callables and dumps in audits that give none."
    ),
    force: bool = typer.Option(
        False, "--force", help="Record results that break their own tolerances (each is listed)."
    ),
):
    """Sweep the audit spec and record a baseline (plain JSON, written atomically).
    Results that already break their tolerances are refused (exit 1) unless --force."""
    from audit.gate.check import BaselineRefused, baseline_command

    try:
        with _progress() as bar:
            path, n, broken = baseline_command(spec, out_path, bar, reference, force)
    except BaselineRefused as e:
        for line in e.broken:
            out.print(f"FAIL     {line}", markup=False, highlight=False, soft_wrap=True)
        raise
    for line in broken:
        out.print(
            f"WARNING  recorded although it breaks its tolerance: {line}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    out.print(
        f"wrote {path} ({n} results" + (f", {len(broken)} breaking their tolerances)" if broken else ")"),
        highlight=False,
    )


@app.command()
def check(
    spec: Path | None = typer.Option(
        None, "--spec", help="Audit spec (default: actaudit.toml or [tool.actaudit] in pyproject.toml)."
    ),
    baseline_path: Path | None = typer.Option(
        None, "--baseline", "-b", help="Baseline (default: the spec's 'baseline')."
    ),
    junit: Path | None = typer.Option(None, "--junit", help="Write JUnit XML to FILE."),
    markdown: Path | None = typer.Option(None, "--markdown", help="Write a Markdown summary to FILE."),
    reference: str | None = typer.Option(
        None, "--reference", help="Reference of callables and dumps in audits that give none."
    ),
    strict: bool = typer.Option(
        False,
        "--strict",
        help="Also fail on baseline results the spec no longer produces, and on a baseline "
        "recorded by another actaudit version.",
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
    from reports import junit as junit_report
    from reports import markdown as md_report

    with _progress() as bar:
        _, changes = check_command(spec, baseline_path, bar, reference, strict, require_certified)
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
        out.print(
            f"{tags[c.status]:8} {c.key}: {'; '.join(c.messages)}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    out.print(
        f"actaudit check: {len(changes) - len(removed) - len(warned)} results, {len(fails)} failed, "
        f"{len(better)} improved"
        + (f", {len(removed)} no longer in the spec" if removed else "")
        + ("" if not better or fails else " (refresh with 'actaudit baseline')"),
        highlight=False,
        soft_wrap=True,
    )
    return 1 if fails else 0


class _Rate(ProgressColumn):
    """Inputs per second, as 12.3M inputs/s."""

    def render(self, task):
        v = task.speed
        if not v:
            return Text("", style="progress.data.speed")
        for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3), ("", 1)):
            if v >= div:
                return Text(f"{v / div:.1f}{unit} inputs/s", style="progress.data.speed")
        return Text(f"{v:.1f} inputs/s", style="progress.data.speed")


class _progress:
    """A rich progress bar on stderr (only on a terminal): one line per result, with its
    inputs done of its total, rate and time remaining; a resumed run starts where its
    checkpoint stopped."""

    def __enter__(self):
        self.p = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            _Rate(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=err,
            transient=True,
            disable=not err.is_terminal,
        )
        self.p.__enter__()
        self.task = self.p.add_task("sweeping", total=None)
        return self

    def start(self, label: str, total: int) -> None:
        """A new result begins: its own line (the previous one is done)."""
        from audit.signals import ready

        ready("sweep")
        self.p.update(self.task, visible=False)
        self.label, self.total = label, total
        self.task = self.p.add_task(label, total=total)

    def resumed(self, n: int) -> None:
        """n inputs were done before: counted, not taken for speed (a fresh task)."""
        self.p.remove_task(self.task)
        self.task = self.p.add_task(f"{self.label} (resumed)", total=self.total, completed=n)

    def __call__(self, n: int) -> None:
        from audit.signals import ready

        ready("chunk")
        self.p.advance(self.task, n)

    def __exit__(self, *exc):
        return self.p.__exit__(*exc)


def _command_line() -> str:
    return " ".join(["actaudit", *sys.argv[1:]])


def _exact_column(r: SweepResult, e) -> np.ndarray:
    """The CSV's exact values: float64 (shortest repr) where float64 holds f(x) (to its
    double-double's rounding), and where f is nonzero but its float64 is 0 (below 2^-1075,
    or the oracle's +-5e-324 stand-in of a value lost to underflow) mpmath's decimal string
    (oracle.exact_text): never a signed zero for a nonzero exact value."""
    from audit.oracle.oracle import exact_text
    from audit.oracle.references import get_reference

    col = np.asarray(e.exact, dtype=np.float64).astype(object)
    lost = np.flatnonzero((np.asarray(e.exact) == 0) & (np.asarray(e.exact_lo) != 0))
    if len(lost):
        ref = get_reference(r.reference)
        rp = ref.with_defaults({k: v for k, v in (r.params or {}).items() if k in ref.params})
        for i in lost.tolist():
            x2 = None if e.x2 is None else float(e.x2[i])
            col[i] = exact_text(ref, float(e.x[i]), rp, x2)
    return col


def write_csv(results: list[SweepResult], path: Path) -> None:
    import pandas as pd

    from audit.io import atomic_path
    from audit.numbers.formats import get_format

    rows = sum(len(r.points) for r in results if r.points is not None)
    if rows > MAX_CSV_ROWS:
        raise BadOptionError(f"--csv would write {rows} rows (limit {MAX_CSV_ROWS}); narrow --range")
    frames = []
    show_sem = any(r.semantics is not None for r in results)  # a column only when asked for
    for r in results:
        e = r.points
        fmt = get_format(r.dtype)
        bits = fmt.to_bits(e.x).astype(np.uint64).tolist()
        width = fmt.bits // 4
        frames.append(
            pd.DataFrame(
                {
                    "candidate": r.candidate,
                    "dtype": r.dtype,
                    "compute": r.compute,
                    **({"semantics": semantics_mod.label(r.semantics)} if show_sem else {}),
                    "x": e.x,
                    "x_hex": [f"0x{b:0{width}x}" for b in bits],
                    "got": e.got,
                    "exact": _exact_column(r, e),
                    "correctly_rounded": e.rounded,
                    "ulp_error": e.ulp_err,
                    "ulp_distance": e.ulp_dist,
                    "class": np.asarray(CLASS_NAMES)[e.cls],
                }
            )
        )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        pd.concat(frames, ignore_index=True).to_csv(tmp, index=False, float_format=None)


@app.command("list")
def list_(
    family: str | None = typer.Argument(
        None, help="Only this family (gelu), or the candidates of this reference (silu)."
    ),
    json_: bool = typer.Option(False, "--json", help="Print the candidates as JSON."),
):
    """List families, candidates (formula, source, parameters) and formats."""
    cands = sorted(catalog().values(), key=lambda c: c.family)  # stable: variants keep their order
    if family is not None:
        cands = _of_family(cands, family)
    if json_:
        sys.stdout.write(dumps([c.to_dict() for c in cands]))
        return
    import shutil

    from reports.listing import candidates_text

    sys.stdout.write(candidates_text(cands, shutil.get_terminal_size((80, 24)).columns))
    if family is not None:
        return
    import textwrap

    print(
        textwrap.fill(
            "formats: " + ", ".join(f.name for f in FORMATS.values()) + " (actaudit formats)",
            shutil.get_terminal_size((80, 24)).columns,
            break_on_hyphens=False,
        )
    )


def _of_family(cands: list, name: str) -> list:
    """The candidates of family NAME, or else those approximating reference NAME."""
    import difflib

    from audit.errors import UnknownNameError

    name = name.strip()
    found = [c for c in cands if c.family == name] or [c for c in cands if c.reference == name]
    if not found:
        known = sorted({c.family for c in cands} | {c.reference for c in cands})
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UnknownNameError(
            f"unknown family or reference '{name}'{hint} (run 'actaudit list' to see them)"
        )
    return found


@app.command()
def formats(json_: bool = typer.Option(False, "--json", help="Print as JSON.")):
    """List the number formats and their parameters."""
    if json_:
        sys.stdout.write(dumps([f.to_dict() for f in FORMATS.values()]))
        return
    import shutil

    from reports.listing import formats_text

    sys.stdout.write(formats_text(list(FORMATS.values()), shutil.get_terminal_size((80, 24)).columns))
    from audit.measure.blocks import MX
    from audit.measure.quant import RANGES

    print(f"quantized (--dtype/--out-dtype KIND:scale=S,zero=Z[,round=even|away]):\n  {', '.join(RANGES)}")
    print(f"block-scaled outputs (--out-dtype):\n  {', '.join(MX)}, nvfp4")


# The page of the documentation each command's --help ends with (a path in the repository;
# tests/test_docs.py checks that every command has one and that it exists).
DOCS_PAGES = {
    "sweep": "docs/getting-started/first-sweep.md",
    "diff": "docs/how-to/compare-implementations.md",
    "consistency": "docs/how-to/check-consistency.md",
    "clip": "docs/concepts/findings.md",
    "suggest": "docs/how-to/pick-or-fit-a-replacement.md",
    "fit": "docs/how-to/pick-or-fit-a-replacement.md",
    "selftest": "docs/design/robustness.md",
    "lut": "docs/concepts/lookup-tables.md",
    "golden": "docs/how-to/audit-a-device-dump.md",
    "report": "docs/getting-started/first-report.md",
    "baseline": "docs/how-to/gate-a-repository.md",
    "check": "docs/how-to/gate-a-repository.md",
    "list": "docs/reference/catalog.md",
    "formats": "docs/reference/formats.md",
    "engines": "docs/how-to/audit-an-engine.md",
}


def _docs_epilogs() -> None:
    """End each command's --help with the path of its page (docs/reference/cli.md if none)."""
    for info in app.registered_commands:
        name = info.name or (info.callback.__name__ if info.callback else "")
        if info.epilog is None:
            info.epilog = f"Docs: {DOCS_PAGES.get(name.replace('_', '-'), 'docs/reference/cli.md')}"


def main(argv=None) -> int:
    """Entry point: run the app, turning user errors into one line and exit code 2.

    Ctrl-C (SIGINT) and SIGTERM print one line and exit 130 and 143; files being written
    are temporary files until complete, so none is left half-written.
    """
    from audit.signals import TERMINATED as terminated
    from audit.signals import Terminated, handlers

    _docs_epilogs()
    try:
        with handlers():
            rv = app(args=argv, prog_name="actaudit", standalone_mode=False)
        if rv == 130:  # click turns Ctrl-C (and our SIGTERM) into a quiet exit code 130
            raise Terminated() if terminated else KeyboardInterrupt()
        return rv if isinstance(rv, int) else 0
    except ActauditError as e:
        _say(f"actaudit: error: {e}")
        return e.exit_code
    except Terminated:
        _say("actaudit: terminated")
        return 143
    except (KeyboardInterrupt, typer.Abort):
        if terminated:
            _say("actaudit: terminated")
            return 143
        _say("actaudit: interrupted")
        return 130
    except OSError as e:  # a path the user gave that cannot be written or read
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        _say(f"actaudit: error: {where}{e.strerror or e}")
        return 2
    except MemoryError:
        _say("actaudit: error: out of memory (narrow --range, or fewer --samples)")
        return 2
    except RecursionError:
        _say("actaudit: error: input nested too deeply")
        return 2
    except Exception as e:
        # usage errors of typer's (vendored) click: one line, like every other error (a bare
        # `actaudit` or a command without its arguments still shows its help)
        if hasattr(e, "show") and isinstance(getattr(e, "exit_code", None), int):
            if type(e).__name__ == "NoArgsIsHelpError" or not hasattr(e, "format_message"):
                e.show()
                return e.exit_code
            ctx = getattr(e, "ctx", None)
            where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            msg = " ".join(str(e.format_message()).split())
            _say(f"actaudit: error: {msg}{where}")
            return 2
        raise


def console_main() -> None:
    sys.exit(main())
