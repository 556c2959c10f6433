"""`actaudit list` and `actaudit formats`: the catalog and the number formats."""

from __future__ import annotations

import sys

import typer

from audit.cli import options as opt
from audit.cli.app import app, terminal_width
from audit.io import dumps


@app.command("list")
def list_(
    family: str | None = typer.Argument(
        None, help="Only this family (gelu), or the candidates of this reference (silu)."
    ),
    json_: bool = opt.json_flag(help="Print the candidates as JSON."),
):
    """List families, candidates (formula, source, parameters) and formats."""
    from audit.numbers.formats import FORMATS
    from audit.targets.candidates import catalog

    cands = sorted(catalog().values(), key=lambda c: c.family)  # stable: variants keep their order
    if family is not None:
        from audit.targets.candidates import of_family

        cands = of_family(cands, family)
    if json_:
        sys.stdout.write(dumps([c.to_dict() for c in cands]))
        return
    from reports.listing import candidates_text

    sys.stdout.write(candidates_text(cands, terminal_width()))
    if family is not None:
        return
    import textwrap

    print(
        textwrap.fill(
            "formats: " + ", ".join(f.name for f in FORMATS.values()) + " (actaudit formats)",
            terminal_width(),
            break_on_hyphens=False,
        )
    )


@app.command()
def formats(json_: bool = opt.json_flag(help="Print as JSON.")):
    """List the number formats and their parameters."""
    from audit.numbers.formats import FORMATS

    if json_:
        sys.stdout.write(dumps([f.to_dict() for f in FORMATS.values()]))
        return
    from reports.listing import formats_text

    sys.stdout.write(formats_text(list(FORMATS.values()), terminal_width()))
    from audit.measure.blocks import MX
    from audit.measure.quant import RANGES

    print(f"quantized (--dtype/--out-dtype KIND:scale=S,zero=Z[,round=even|away]):\n  {', '.join(RANGES)}")
    print(f"block-scaled outputs (--out-dtype):\n  {', '.join(MX)}, nvfp4")
