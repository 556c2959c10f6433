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


@app.command()
def fit(
    reference: str = opt.reference_arg(),
    dtype: str = opt.dtype(default="bf16", help="Output format (enumerable: fp8, fp16, bf16)."),
    compute: str = opt.compute(default="fp32", help="Compute format of the kernel (fp32)."),
    max_degree: int | None = typer.Option(
        None,
        "--max-degree",
        help="Largest polynomial degree tried (default: 6 for the table, 12 for vector).",
    ),
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
    from audit.io import check_out_files

    check_out_files(("--json", json_out))  # before the fit, not after it
    if shape not in ("auto", "table", "vector"):
        raise BadOptionError(f"--shape: auto, table or vector; not {shape}")
    opt.positive(time_limit, "--time-limit")
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
    from audit.repair import cost as cost_mod
    from audit.repair import fit as fit_mod
    from audit.targets.candidates import parse_params

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
    if chosen is not None:
        doc["shape"] = {"chosen": chosen[0], "why": chosen[1]}
    if write_json(doc, json_out):
        return 0 if rep.ok else 1
    if chosen is not None:
        out.print(f"shape {chosen[0]}: {chosen[1]}", markup=False, highlight=False, soft_wrap=True)
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
