"""`actaudit lut`: the correctly rounded lookup table of a reference, and its audit."""

from __future__ import annotations

from pathlib import Path

from audit.cli import options as opt
from audit.cli.app import app, out
from audit.io import format_number
from reports.cells import percent


@app.command()
def lut(
    reference: str = opt.reference_arg(),
    dtype: str = opt.dtype(
        default=...,
        help="Input format: int8:scale=S,zero=Z, uint8:..., int16:..., or a float format of 16 bits or fewer.",
    ),
    out_dtype: str | None = opt.out_dtype(help="Output format (default: --dtype)."),
    out_path: Path = opt.out(help="Output file: .npy, .npz, .csv, or .h/.c (a C array)."),
    param: list[str] = opt.param(help="Reference parameter NAME=VALUE."),
):
    """Write the correctly rounded lookup table of a reference and print its audit."""
    from audit.measure import lut_audit
    from audit.oracle.references import get_reference
    from audit.targets import lut as lut_mod
    from audit.targets.candidates import parse_params

    ref = get_reference(reference)
    params = opt.known_params(reference, ref, parse_params(param))
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
            f"audit (read back): {a.count} codes, {percent(a.correct_fraction)}% correct, "
            f"max code error {format_number(a.max_code_err)}, findings: {found}",
            highlight=False,
        )
