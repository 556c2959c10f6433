"""`actaudit report`: a self-contained HTML report."""

from __future__ import annotations

from pathlib import Path

import typer

from audit.cli import options as opt
from audit.cli.app import app, command_line, out
from audit.cli.progress import ProgressBar
from audit.cli.sweep import api_sweep, formats_sweep


@app.command()
def report(
    ctx: typer.Context,
    targets: list[str] | None = opt.targets(
        help="Candidates, families, ort:OP, openvino:OP, litert:OP, torch:NAME, jax:NAME, c:FILE.c:FUNCTION or pkg.module:function.",
    ),
    dtype: str = opt.dtype(),
    compute: str | None = opt.compute(
        help="Compute format(s) (default 'auto': as sweep, the storage format and fp32 for formats under 32 bits).",
    ),
    range_: str | None = opt.range_(),
    samples: int | None = opt.samples(),
    seed: int = opt.seed(),
    param: list[str] = opt.param(help="Candidate parameter NAME=VALUE[,VALUE...]."),
    grad: bool = opt.grad(help="Report the derivative candidates."),
    backward: bool = opt.backward(help="Report the backward kernels over (x, dy)."),
    grid: int | None = opt.grid(
        default=256, help="Values per axis of gated units' grid (default 256 in reports)."
    ),
    out_dir: Path = opt.out(help="Output directory."),
    reference: str | None = opt.reference(),
    device: str = opt.device(),
    dump: Path | None = opt.dump(),
    dump_dtype: str | None = opt.dump_dtype(),
    semantics: list[str] = opt.semantics(),
    suggest_: bool = typer.Option(
        False,
        "--suggest",
        help="Also rank every candidate of each reference in each path (actaudit suggest) in a 'Suggest' section.",
    ),
    out_dtype: str | None = opt.out_dtype(
        help="Output format: also quantized (uint8:scale=S,zero=Z) or block-scaled (mxfp8_e4m3, nvfp4).",
    ),
    blocks_dist: str = opt.blocks(help="Block-scaled outputs: input distribution (as sweep's)."),
    elements: int = opt.elements(),
    scale_rule: str = opt.scale_rule(help="Block-scaled outputs: ocp or ceil."),
):
    """Write an HTML report (self-contained) with one PNG per figure and the run's JSON."""
    from audit.measure import blocks, quant
    from audit.numbers.inputs import parse_range
    from audit.targets.candidates import parse_params
    from reports import html as html_report

    if blocks.is_block(out_dtype) or quant.is_quant(dtype) or quant.is_quant(out_dtype):
        from reports import formats_html

        results = formats_sweep(
            targets,
            dtype,
            out_dtype,
            compute,
            parse_params(param),
            reference,
            blocks_dist,
            elements,
            seed,
            scale_rule,
        )
        out.print(f"wrote {formats_html.build(results, out_dir, command_line())}", highlight=False)
        return

    with ProgressBar() as bar:
        results = api_sweep(
            targets,
            dtype,
            compute,
            range=parse_range(range_),
            samples=samples,
            seed=seed,
            params=parse_params(param),
            grad=grad,
            backward=backward,
            grid=None if _is_default(ctx, "grid") else grid,
            default_grid=grid,
            keep_points=True,
            progress=bar,
            reference=reference,
            device=device,
            dump=dump,
            dump_dtype=dump_dtype,
            semantics=semantics,
            out_dtype=out_dtype,
        )
        sugg = None
        if suggest_:
            from audit.repair import suggest as suggest_mod

            sugg = suggest_mod.for_results(results, samples=samples, seed=seed, progress=bar)
    path = html_report.build(results, out_dir, command_line(), suggestions=sugg)
    out.print(html_report.written(path, results), highlight=False, markup=False, soft_wrap=True)


def _is_default(ctx: typer.Context, name: str) -> bool:
    """Whether option ``name`` took its default (not given on the command line)."""
    src = ctx.get_parameter_source(name)
    return src is not None and src.name in ("DEFAULT", "DEFAULT_MAP")
