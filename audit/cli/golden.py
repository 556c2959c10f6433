"""`actaudit golden`: golden test vectors of a reference."""

from __future__ import annotations

from pathlib import Path

import typer

from audit.cli import options as opt
from audit.cli.app import app, out


@app.command()
def golden(
    reference: str = opt.reference_arg(),
    dtype: str = opt.dtype(help="Format."),
    out_path: Path = opt.out(help="Output file: .npz, .npy or .csv."),
    inputs: Path | None = typer.Option(
        None, "--inputs", help="Only these inputs (a file read like a dump's outputs)."
    ),
    param: list[str] = opt.param(help="Reference parameter NAME=VALUE."),
    semantics: str | None = opt.semantics(
        default=None,
        help="Conversion flags of the machine: daz_in, ftz_out, saturate (the result stored saturated), sat_nan=keep.",
    ),
):
    """Write golden test vectors: inputs, correctly rounded outputs and exact values."""
    from audit.numbers.formats import get_format
    from audit.oracle.references import get_reference
    from audit.targets import semantics as semantics_mod
    from audit.targets.candidates import parse_params
    from audit.targets.dumps import read_inputs
    from audit.targets.golden import write_golden

    fmt = get_format(dtype)
    ref = get_reference(reference)
    params = opt.known_params(reference, ref, parse_params(param))
    xs = None
    if inputs is not None:
        xs = read_inputs(inputs, fmt)  # values, in the file's own order
    n = write_golden(
        reference, fmt, out_path, params, xs, None if semantics is None else semantics_mod.parse(semantics)
    )
    out.print(f"wrote {out_path} ({n} inputs, {fmt.name})", highlight=False)
