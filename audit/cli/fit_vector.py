"""`actaudit fit --shape vector`: fit, verify the compiled C at every input, emit, report."""

from __future__ import annotations

import tempfile

from audit.cli.app import write_json
from audit.errors import BadOptionError
from audit.io import format_number
from audit.repair import fit_shapes as fs
from audit.repair.emit import TARGETS


def run(
    reference, dtype, compute, max_degree, out_dir, json_out, emit_targets, out, search=False, chosen=None
) -> int | None:
    """The exit code; None where ``chosen`` (--shape auto chose vector: (shape, why)) and no
    variant of the vector shape fits, so that the caller fits the table kernel instead."""
    from audit.io import check_out_dir, write_files

    if max_degree is None:
        max_degree = fs.MAX_DEGREE
    if compute != "fp32":
        raise BadOptionError("fit emits fp32 kernels: --compute fp32")
    bad = [t for t in emit_targets if t not in TARGETS]
    if bad:
        raise BadOptionError(f"--emit: one of {', '.join(TARGETS)}; not {', '.join(bad)}")
    if not 2 <= max_degree <= 12:
        raise BadOptionError(f"--max-degree must be in [2, 12] for --shape vector, got {max_degree}")
    fs.targets(reference, dtype)  # refuses unsupported pairs before the work
    d = check_out_dir(out_dir, "fit writes the kernel's C and its other --emit files into one")
    variants = []
    checks = None
    paths = []
    with tempfile.TemporaryDirectory(prefix="actaudit-fit-") as tmp:
        if search:
            fit, variants = fs.search(reference, dtype, tmp)
        else:
            fit = fs.fit_best(reference, dtype, max_degree=max_degree)
        if fit.program is None and chosen is not None:
            if json_out != "-":
                out.print(
                    f"shape vector: {chosen[1]}; but {fit.message}: the table kernel instead",
                    markup=False,
                    highlight=False,
                    soft_wrap=True,
                )
            return None
        if fit.program is not None:
            checks = fs.verify_c(fit, tmp, time_n=1 << 20)
    if fit.program is not None:
        names = fs.files(fit, sorted(set(emit_targets), key=list(TARGETS).index))
        write_files(d, names)
        paths = [str(d / n) for n, _ in names]
    doc = fs.to_dict(fit, checks)
    doc["files"] = paths
    if chosen is not None:
        doc["shape"] = {"chosen": chosen[0], "why": chosen[1]}
    if search:
        doc["variants"] = variants
    ok = fit.ok and checks is not None and all(c[v]["wrong"] == 0 for c in checks for v in ("f32", "u16"))
    if write_json(doc, json_out):
        return 0 if ok else 1
    say = lambda m: out.print(m, markup=False, highlight=False, soft_wrap=True)  # noqa: E731
    if chosen is not None:
        say(f"shape {chosen[0]}: {chosen[1]}")
    say(f"actaudit fit {reference} {dtype} --shape vector (compute fp32): {fit.message}")
    if fit.program is None:
        return 1
    for v in variants:
        say(
            f"  variant a1={v['a1']} exceptions<={v['max_exceptions']} tie={v['tie']}: "
            + (
                f"{v['ops']} ops, {format_number(v['ns_per_element'])} ns/element (fastest of 7)"
                if v["ok"]
                else "no fit"
            )
        )
    say(f"kernel {fs.describe(fit)}")
    assert checks is not None  # set with the program
    for c in checks:
        for v in ("f32", "u16"):
            r = c[v]
            say(
                f"  compiled {c['build']:<6} {v}: {'vectorized' if r['vectorized'] else 'scalar':<10} "
                f"{r['wrong']} wrong of every input; {format_number(r['ns_per_element'])} ns/element (this machine, now)"
            )
    for pth in paths:
        say(f"wrote {pth}")
    return 0 if ok else 1
