"""`actaudit fit`: a kernel correctly rounded at every input, synthesized and verified
(``--shape vector``: audit/cli/fit_vector.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from audit.cli import options as opt
from audit.cli.app import app, out, write_json
from audit.cli.progress import ProgressBar
from audit.cli.sweep import summary
from audit.errors import BadOptionError
from audit.io import format_number
from audit.targets.candidates import parse_params


@app.command()
def fit(
    reference: str = opt.reference_arg(),
    dtype: str = opt.dtype(default="bf16", help="Output format (enumerable: fp8, fp16, bf16)."),
    compute: str = opt.compute(default="fp32", help="Compute format of the kernel (fp32)."),
    max_degree: int = typer.Option(6, "--max-degree", help="Largest polynomial degree tried."),
    pieces: int | None = typer.Option(
        None, "--pieces", help="At most K table pieces, of power-of-two width (default: try 16 to 512)."
    ),
    param: list[str] = opt.param(help="Reference parameter NAME=VALUE."),
    out_dir: Path = opt.out(default=Path("."), help="Directory for NAME.py, NAME.c, NAME.toml."),
    time_limit: float = typer.Option(300.0, "--time-limit", help="Seconds before the search gives up."),
    json_out: str | None = opt.json_out(help="Write JSON to PATH, or '-' for stdout."),
    fma: bool = typer.Option(
        False,
        "--fma",
        help="Horner steps as fused multiply-adds (fmaf in C), verified with one rounding each.",
    ),
    semantics: str | None = opt.semantics(
        default=None, help="Verify on this machine: flags contract (implies --fma), ftz, daz."
    ),
    symmetry: bool = typer.Option(
        True,
        "--symmetry/--no-symmetry",
        help="Fit x >= 0 only for odd or even functions (detected over every input).",
    ),
    shape: str = typer.Option(
        "table",
        "--shape",
        help="table: piecewise table kernel (C, candidate module, gate entry); vector: branch-free "
        "vectorizable kernel (gelu, silu, sigmoid, tanh, erf; bf16, fp16), compiled and checked at every input.",
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
    if shape not in ("table", "vector"):
        raise BadOptionError(f"--shape: table or vector; not {shape}")
    if shape == "vector":
        from audit.cli import fit_vector as fit_vector_cli

        return fit_vector_cli.run(
            reference, dtype, compute, max_degree, out_dir, json_out, emit or ["c"], out, search
        )
    if emit or search:
        raise BadOptionError("--emit and --search need --shape vector")
    from audit.repair import cost as cost_mod
    from audit.repair import fit as fit_mod

    opt.positive(time_limit, "--time-limit")
    fit_mod.check_out_dir(out_dir)  # before the fit, not after it
    from audit.signals import ready

    ready("fit")
    with ProgressBar() as bar:
        rep, results, paths, doc = fit_mod.fit_and_verify(
            reference,
            dtype,
            compute,
            out_dir,
            bar,
            max_degree=max_degree,
            pieces=pieces,
            params=parse_params(param),
            time_limit=time_limit,
            fma=fma,
            semantics=semantics,
            symmetry=symmetry,
        )
    if write_json(doc, json_out):
        return 0 if rep.ok else 1
    how = "".join(
        [
            ", FMA" if fma or (semantics and "contract" in semantics) else "",
            f", semantics {semantics}" if semantics else "",
        ]
    )
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
        f"kernel {k.name}: degree {k.degree}, {k.pieces} pieces of width {format_number(1 / k.inv_w, 6)}{sym}; "
        f"ops per element: {cost_mod.describe(doc['ops_traced'])}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    for pth in paths.values():
        out.print(f"wrote {pth}", markup=False, highlight=False)
    sys.stdout.write(summary(results))
    return 0 if results[0].max_ulp <= 0.5 and results[0].nan_count == 0 else 1
