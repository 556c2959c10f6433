"""``actaudit identify TARGET``: which catalog formula, in which evaluation path, a target
computes (docs/how-to/identify-a-formula.md).  ``register(app)`` adds it to an app."""

from __future__ import annotations

import sys

import typer


def identify_cmd(
    target: str = typer.Argument(
        ..., help="Any target sweep takes (ort:OP, jax:NAME, module:function, ...) or model:FILE.onnx#SITE."
    ),
    reference: str | None = typer.Option(
        None, "--reference", help="The exact function (default: the target's)."
    ),
    dtype: str | None = typer.Option(None, "--dtype", help="Storage format (default fp32; a site: its own)."),
    top: int = typer.Option(5, "--top", help="How many matches to show."),
    json_out: str | None = typer.Option(None, "--json", help="Write the JSON here ('-': stdout)."),
) -> None:
    """Rank the catalog's candidates and paths by bitwise agreement with TARGET."""
    from audit.io import dumps, write_text
    from audit.model.site_identify import identify_target

    if not 1 <= top <= 100:
        from audit.errors import BadOptionError

        raise BadOptionError(f"--top must be in [1, 100], got {top}")
    from audit.io import check_out_files

    check_out_files(("--json", json_out))  # before the work, not after it
    doc = identify_target(target, reference, dtype).to_dict(top)
    if json_out is not None and json_out != "-":
        write_text(json_out, dumps(doc) + "\n")
    if json_out == "-":
        sys.stdout.write(dumps(doc) + "\n")
        return
    from reports.identify_table import table

    sys.stdout.write(table(doc) + "\n")


def register(app) -> None:
    app.command("identify")(identify_cmd)
