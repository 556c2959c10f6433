"""`actaudit selftest`: the oracle against mpmath alone, or (``--certify``) the cached oracle
tables proved with ball arithmetic."""

from __future__ import annotations

import os
import sys

import typer

from audit.cli import options as opt
from audit.cli.app import app, out
from audit.cli.progress import ProgressBar
from audit.errors import BadOptionError
from audit.io import dumps


@app.command()
def selftest(
    points: int = typer.Option(150, "--points", help="Random points per reference and format."),
    seed: int = opt.seed(help="Seed of the random points."),
    certify: bool = typer.Option(
        False,
        "--certify",
        help="Instead, prove every entry of every cached oracle table (univariate references, "
        "float formats of 16 bits or fewer) with Arb ball arithmetic; exit 1 on any uncertified one.",
    ),
    reference: list[str] = typer.Option(
        [], "--reference", "-r", help="With --certify: only these references."
    ),
    dtype: list[str] = opt.dtype(default=[], help="With --certify: only these formats."),
    workers: int = typer.Option(
        1, "--workers", "-j", help="With --certify: processes (one per core at most)."
    ),
    json_: bool = opt.json_flag(help="With --certify: print the result as JSON."),
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
    with ProgressBar() as bar:
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
    with ProgressBar() as bar:
        results = cert.run(references or None, formats or None, workers, bar)
    if json_:
        sys.stdout.write(dumps(cert.to_json(results)))
    else:
        sys.stdout.write(text(results))
    return 1 if any(r.n_uncertified for r in results) else 0
