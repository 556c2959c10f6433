"""`actaudit consistency`: a parameter that changes nothing, results that depend on the
tensor's shape."""

from __future__ import annotations

import typer

from audit.cli import options as opt
from audit.cli.app import app, command_line, out, write_json
from audit.errors import BadOptionError


@app.command()
def consistency(
    target: str = typer.Argument(
        ...,
        help="Catalog candidate, ort:OP, openvino:OP, litert:OP, torch:NAME, jax:NAME, c:FILE.c:FUNCTION or pkg.module:function.",
    ),
    dtype: str = opt.dtype(default="fp32", help="Storage format(s)."),
    compute: str | None = opt.compute(help="Compute format of catalog candidates."),
    param: list[str] = opt.param(
        help="NAME=V1,V2,...: check that the parameter changes some output (repeatable)."
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
    range_: str | None = opt.range_(help="Restrict the parameter check's inputs to LO:HI."),
    json_out: str | None = opt.json_out(),
):
    """Consistency checks: a parameter that changes nothing, results that depend on the
    tensor's shape. Exit 1 when there is a finding."""
    from audit.compare import consistency as cons
    from audit.numbers.inputs import parse_range

    if not param and not layout:
        raise BadOptionError("give --param NAME=V1,V2 (parameter effect) and/or --layout")
    rng = parse_range(range_)
    checks = cons.run(target, dtype, compute, param, layout, range=rng, max_length=max_length, values=values)
    failed = [c for c in checks if (c.findings if isinstance(c, cons.LayoutReport) else c.failed)]
    if not write_json(cons.document(checks, command=command_line()), json_out):
        for c in checks:
            if isinstance(c, cons.LayoutReport):
                _print_layout(c)
            else:
                mark = "FINDING " if c.failed else "ok "
                out.print(f"{c.target} {c.dtype}: {mark}{c.text}", markup=False, highlight=False)
    return 1 if failed else 0


def _print_layout(c) -> None:
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
