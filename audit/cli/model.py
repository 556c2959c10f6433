"""``actaudit model MODEL.onnx``: the activations a model runs, audited on its own inputs
(docs/how-to/audit-a-model.md).  ``register(app)`` adds it to an app (audit/cli/__init__.py)."""

from __future__ import annotations

import sys

import typer


def model_cmd(
    paths: list[str] = typer.Argument(..., help="The ONNX model (.onnx); two: compare two exports."),
    data: str | None = typer.Option(
        None, "--data", help="A .npz batch or a directory of them (named arrays)."
    ),
    random: bool = typer.Option(False, "--random", help="Synthetic inputs (with --shape and --seed)."),
    shape: list[str] = typer.Option([], "--shape", help="NAME=DIMS of a --random input, e.g. x=1x3x224x224."),
    seed: int = typer.Option(0, "--seed", help="Seed of --random."),
    batches: int = typer.Option(1, "--batches", help="Batches of --random."),
    engine: str = typer.Option("ort", "--engine", help="The engine: ort."),
    opt_level: str = typer.Option(
        "all", "--opt-level", help="ORT graph optimization: off, basic, extended, all."
    ),
    dtype: str | None = typer.Option(
        None, "--dtype", help="Audit in this format (default: the one ORT runs)."
    ),
    compute: str | None = typer.Option(None, "--compute", help="Compute format, as in sweep."),
    bin: str | None = typer.Option(
        None, "--bin", help="fp32 sites: exact (default) or counts per bf16/fp16 value."
    ),
    json_out: str | None = typer.Option(
        None, "--json", help="Write the actaudit.model/1 JSON here ('-': stdout)."
    ),
    report: str | None = typer.Option(None, "--report", help="Write the HTML report into this directory."),
    fix: str | None = typer.Option(
        None, "--fix", help="Write OUT.onnx with the rewrites that make the sites at risk better."
    ),
    effect: bool = typer.Option(
        False, "--effect", help="Each site's effect on the outputs (its output made correctly rounded)."
    ),
) -> None:
    """Audit every activation site of an ONNX model under its observed inputs."""
    import audit.model

    if len(paths) > 2:
        from audit.errors import BadOptionError

        raise BadOptionError(f"model takes one model, or two exports to compare ({len(paths)} given)")
    if len(paths) == 2:
        if report is not None:
            from audit.errors import BadOptionError

            raise BadOptionError("--report takes one model (compare two exports without it)")
        cmp = audit.model.run_compare(
            paths[0], paths[1], json_out, data=data, random=random, shape=shape, seed=seed,
            batches=batches, engine=engine, opt_level=opt_level, dtype=dtype, compute=compute,
            bin=bin, effect=effect,
        )  # fmt: skip
        if json_out == "-":
            from audit.io import dumps

            sys.stdout.write(dumps(cmp) + "\n")
            return
        from reports.model_table import compare_table

        sys.stdout.write(compare_table(cmp) + "\n")
        return
    path = paths[0]
    if fix is not None:
        fdoc = audit.model.run_fix(
            path, fix, json_out, data=data, random=random, shape=shape, seed=seed, batches=batches,
            engine=engine, opt_level=opt_level, dtype=dtype, compute=compute, bin=bin,
        )  # fmt: skip
        if report is not None:  # the model before, its fix results beside each site
            from reports.model_html import write_report

            write_report(fdoc, None, report)
        if json_out == "-":
            from audit.io import dumps

            sys.stdout.write(dumps(fdoc) + "\n")
            return
        from reports.model_table import fix_table

        sys.stdout.write(fix_table(fdoc) + "\n")
        return
    doc, m = audit.model.run(
        path, data, random, shape, seed, batches, engine, opt_level, dtype, compute, bin, json_out, effect
    )
    if report is not None:
        from reports.model_html import write_report

        write_report(doc, m, report)
    if json_out == "-":
        from audit.io import dumps

        sys.stdout.write(dumps(doc) + "\n")
        return
    from reports.model_table import table

    sys.stdout.write(table(doc) + "\n")


def register(app) -> None:
    app.command("model")(model_cmd)
