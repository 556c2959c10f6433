"""The ``actaudit`` command line: a thin layer over the Python API.

Errors the user can cause are :class:`audit.errors.ActauditError`; :func:`main`
prints them as one line (``actaudit: error: ...``) and exits 2.  Ctrl-C prints
one line and exits 130.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import List, Optional

import numpy as np
import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)
from rich.text import Text
from rich.table import Table

from . import __version__
from .candidates import catalog, parse_params
from .errors import ActauditError, BadOptionError
from .formats import FORMATS
from .inputs import parse_range
from .io import dumps, format_number, write_text
from .metrics import CLASS_NAMES
from .sweep import SweepResult, document, sweep as run_sweep

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Audit the accuracy and stability of activation functions and their "
                       "approximations against an exact mpmath oracle.")
out = Console()
if not out.is_terminal:  # piped or redirected: do not squeeze tables into 80 columns
    out = Console(width=160)
err = Console(stderr=True)


def _say(msg: str) -> None:
    """One line on stderr."""
    sys.stderr.write(msg.replace("\n", " ") + "\n")

MAX_CSV_ROWS = 1 << 24


fmt_num = format_number


def _version(value: bool):
    if value:
        out.print(f"actaudit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")):
    pass


@app.command()
def sweep(
    targets: Optional[List[str]] = typer.Argument(None, help="Candidates (gelu.tanh), families (gelu), torch:NAME, jax:NAME or pkg.module:function."),
    dtype: str = typer.Option("fp16", "--dtype", "-d", help="Storage format(s): fp16,bf16,..."),
    compute: Optional[str] = typer.Option(None, "--compute", "-c",
                                          help="Compute format(s) of intermediates (default: the storage format)."),
    range_: Optional[str] = typer.Option(None, "--range", "-r", help="Restrict inputs to LO:HI."),
    samples: Optional[int] = typer.Option(None, "--samples", help="Sample size for fp32 / fp64."),
    seed: int = typer.Option(0, "--seed", help="Seed of the fp32 / fp64 sample."),
    exhaustive: bool = typer.Option(False, "--exhaustive", help="Every fp32 input, or every (a, b) pair of a 16-bit gated unit (chunked)."),
    param: List[str] = typer.Option([], "--param", "-p",
                                    help="Candidate parameter NAME=VALUE, or NAME=V1,V2,... to sweep it (repeatable)."),
    grad: bool = typer.Option(False, "--grad", help="Sweep the derivative (backward) candidates instead."),
    grid: Optional[int] = typer.Option(None, "--grid", help="Values per axis of the (a, b) grid of gated units (default 1024; 8-bit formats: all)."),
    json_out: Optional[str] = typer.Option(None, "--json", help="Write the JSON document to PATH, or '-' for stdout."),
    csv_out: Optional[Path] = typer.Option(None, "--csv", help="Write one row per input to PATH."),
    report_dir: Optional[Path] = typer.Option(None, "--report", help="Write the HTML and PNG report to DIR."),
    reference: Optional[str] = typer.Option(None, "--reference", help="Reference of a callable or a dump (e.g. gelu)."),
    device: str = typer.Option("cpu", "--device", help="Device of torch: ops (cpu, cuda)."),
    dump: Optional[Path] = typer.Option(None, "--dump", help="Outputs dumped from a device (.npz, .npy, .csv or raw binary)."),
    dump_dtype: Optional[str] = typer.Option(None, "--dump-dtype", help="Dtype of a raw binary dump (default: --dtype)."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Processes for chunked (--exhaustive) sweeps (default: every core)."),
    executor: str = typer.Option("local", "--executor", help="Where chunked sweeps run: local (processes) or dask."),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help="Address of the Dask scheduler (tcp://host:8786) for --executor dask."),
    checkpoint: Optional[Path] = typer.Option(None, "--checkpoint", help="Save chunked sweeps' progress in DIR; rerun the command to resume."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No table."),
    details: bool = typer.Option(False, "--findings", "-f", help="Also list each finding with its intervals and cause."),
    max_ulp: Optional[float] = typer.Option(None, "--max-ulp", help="Tolerance of the clip recommendation, in ULP."),
    atol: Optional[float] = typer.Option(None, "--atol", help="Tolerance of the clip recommendation, absolute."),
):
    """Sweep candidates over every input of a format against the exact oracle."""
    rng = parse_range(range_)
    params = parse_params(param)
    if samples is not None and samples < 1:
        raise BadOptionError(f"--samples must be positive, got {samples}")
    with _progress() as bar:
        results = run_sweep(targets, dtype, compute, range=rng, samples=samples, seed=seed,
                            exhaustive=exhaustive, params=params, grad=grad, grid=grid,
                            keep_points=csv_out is not None or report_dir is not None, progress=bar,
                            reference=reference, device=device,
                            dump=None if dump is None else str(dump), dump_dtype=dump_dtype,
                            workers=workers, executor=executor, scheduler=scheduler,
                            checkpoint=checkpoint,
                            max_ulp=_tolerance(max_ulp, "--max-ulp"), atol=_tolerance(atol, "--atol"))
    if csv_out is not None:
        write_csv(results, csv_out)
    if report_dir is not None:
        from reports import html as html_report

        html_report.build(results, report_dir, _command_line())
    doc = document(results, command=_command_line())
    if json_out == "-":
        sys.stdout.write(dumps(doc))
        return
    if json_out:
        write_text(json_out, dumps(doc))
    if not quiet:
        out.print(results_table(results))
        if details:
            print_findings(results)


def _tolerance(v, name):
    if v is not None and not (math.isfinite(v) and v >= 0):
        raise BadOptionError(f"{name} must be a finite number >= 0, got {v}")
    return v


def print_findings(results: list[SweepResult]) -> None:
    for r in results:
        if not (r.findings or r.hidden):
            continue
        out.print(f"[bold]{r.candidate}[/bold] {r.dtype} (compute {r.compute})", highlight=False)
        for f in r.findings:
            iv = ", ".join(f"[{fmt_num(a, 6)}, {fmt_num(b, 6)}]" for a, b in f.intervals[:4])
            more = f" (+{f.intervals_total - 4} more)" if f.intervals_total > 4 else ""
            cause = f"; {f.cause['text']}" if f.cause else ""
            out.print(f"  {f.kind:<12} {f.count:>6} inputs  {iv}{more}{cause}", markup=False, highlight=False)
        for h in r.hidden:
            out.print(f"  {h['kind']:<12} {h['text']}", markup=False, highlight=False)


@app.command()
def clip(
    targets: List[str] = typer.Argument(..., help="Candidates or families."),
    dtype: str = typer.Option("fp16", "--dtype", "-d", help="Storage format(s) (16 bits or fewer)."),
    compute: Optional[str] = typer.Option(None, "--compute", "-c", help="Compute format(s)."),
    param: List[str] = typer.Option([], "--param", "-p", help="Candidate parameter NAME=VALUE."),
    max_ulp: Optional[float] = typer.Option(None, "--max-ulp", help="Tolerance in ULP (default: the candidate's error on its core)."),
    atol: Optional[float] = typer.Option(None, "--atol", help="Absolute tolerance."),
    json_out: Optional[str] = typer.Option(None, "--json", help="Write JSON to PATH, or '-' for stdout."),
):
    """Recommend a safe input clip range (and what to do beyond it) per candidate and format."""
    from .formats import parse_formats

    for f in parse_formats(dtype):
        if not f.enumerable:
            raise BadOptionError(f"clip ranges need every value of the format; {f.name} has too many "
                                 "(use a format of 16 bits or fewer)")
    with _progress() as bar:
        results = run_sweep(targets, dtype, compute, params=parse_params(param), progress=bar,
                            max_ulp=_tolerance(max_ulp, "--max-ulp"), atol=_tolerance(atol, "--atol"))
    results = [r for r in results if r.clip is not None]
    if not results:
        raise BadOptionError("no univariate candidate selected: clip ranges apply to f(x)")
    if json_out:
        doc = {"schema": "actaudit.clip/1", "results": [
            {"candidate": r.candidate, "dtype": r.dtype, "compute": r.compute,
             "saturation": r.to_dict()["saturation"], "clip": r.to_dict()["clip"]} for r in results]}
        if json_out == "-":
            sys.stdout.write(dumps(doc))
            return
        write_text(json_out, dumps(doc))
    t = Table(title="actaudit clip", title_justify="left", header_style="bold")
    for col in ("candidate", "dtype", "compute", "lo", "below lo", "hi", "above hi", "tolerance",
                "max ULP after", "saturation (low / high)", "note"):
        t.add_column(col, overflow="fold")
    for r in results:
        c, s = r.clip, r.saturation
        tol = c["tolerance"]
        tol_s = " or ".join(x for x in ((f"{fmt_num(tol['max_ulp'])} ULP" if tol["max_ulp"] is not None else ""),
                                        (f"{fmt_num(tol['atol'])} abs" if tol["atol"] is not None else "")) if x)
        sat = " / ".join("-" if v is None else f"{fmt_num(v['x'], 6)} -> {v['value'] if isinstance(v['value'], str) else fmt_num(v['value'])}"
                         for v in (s["low"], s["high"]))
        t.add_row(r.candidate, r.dtype, r.compute, fmt_num(c["lo"], 6), c["lo_action"],
                  fmt_num(c["hi"], 6), c["hi_action"], tol_s, fmt_num(c["max_ulp_inside"]), sat,
                  c["note"] or "")
    out.print(t)


@app.command()
def selftest(
    points: int = typer.Option(150, "--points", help="Random points per reference and format."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random points."),
):
    """Check the oracle against mpmath alone for every reference and format; exit 1 on any
    disagreement."""
    from . import selftest as st

    if not 1 <= points <= 100_000:
        raise BadOptionError(f"--points must be in [1, 100000], got {points}")
    with _progress() as bar:
        checks = st.run(n=points, seed=seed, progress=bar)
    bad = [c for c in checks if c.disagreements]
    for c in bad:
        out.print(f"FAIL {c.reference} {c.fmt}: {c.disagreements} of {c.points} inputs disagree; "
                  f"{c.example}", markup=False, highlight=False, soft_wrap=True)
    n = sum(c.points for c in checks)
    out.print(f"actaudit selftest: {len(checks)} reference x format checks, {n} inputs, "
              f"{len(bad)} failed", highlight=False)
    return 1 if bad else 0


@app.command()
def golden(
    reference: str = typer.Argument(..., help="Reference function (gelu, sigmoid, ...)."),
    dtype: str = typer.Option("fp16", "--dtype", "-d", help="Format."),
    out_path: Path = typer.Option(..., "--out", "-o", help="Output file: .npz, .npy or .csv."),
    inputs: Optional[Path] = typer.Option(None, "--inputs", help="Only these inputs (a file read like a dump's outputs)."),
    param: List[str] = typer.Option([], "--param", "-p", help="Reference parameter NAME=VALUE."),
):
    """Write golden test vectors: inputs, correctly rounded outputs and exact values."""
    from .formats import get_format
    from .golden import read_dump, write_golden
    from .references import get_reference

    fmt = get_format(dtype)
    ref = get_reference(reference)
    params = parse_params(param)
    for k in params:
        if k not in ref.params:
            raise BadOptionError(f"{reference} has no parameter '{k}' (parameters: {', '.join(ref.params) or 'none'})")
    xs = None
    if inputs is not None:
        d = read_dump(inputs, fmt)
        xs = d.y  # an input list is read as values, in its own order
    n = write_golden(reference, fmt, out_path, params, xs)
    out.print(f"wrote {out_path} ({n} inputs, {fmt.name})", highlight=False)


@app.command()
def report(
    targets: List[str] = typer.Argument(..., help="Candidates or families."),
    dtype: str = typer.Option("fp16", "--dtype", "-d", help="Storage format(s): fp16,bf16,..."),
    compute: Optional[str] = typer.Option(None, "--compute", "-c", help="Compute format(s)."),
    range_: Optional[str] = typer.Option(None, "--range", "-r", help="Restrict inputs to LO:HI."),
    samples: Optional[int] = typer.Option(None, "--samples", help="Sample size for fp32 / fp64."),
    seed: int = typer.Option(0, "--seed", help="Seed of the fp32 / fp64 sample."),
    param: List[str] = typer.Option([], "--param", "-p", help="Candidate parameter NAME=VALUE[,VALUE...]."),
    grad: bool = typer.Option(False, "--grad", help="Report the derivative candidates."),
    grid: Optional[int] = typer.Option(256, "--grid", help="Values per axis of gated units' grid (default 256 in reports)."),
    out_dir: Path = typer.Option(..., "--out", "-o", help="Output directory."),
):
    """Write an HTML report (self-contained) with one PNG per figure and the run's JSON."""
    from reports import html as html_report

    with _progress() as bar:
        results = run_sweep(targets, dtype, compute, range=parse_range(range_), samples=samples,
                            seed=seed, params=parse_params(param), grad=grad, grid=grid,
                            keep_points=True, progress=bar)
    path = html_report.build(results, out_dir, _command_line())
    out.print(f"wrote {path}", highlight=False)


@app.command()
def baseline(
    spec: Optional[Path] = typer.Option(None, "--spec", help="Audit spec (default: actaudit.toml or [tool.actaudit] in pyproject.toml)."),
    out_path: Optional[Path] = typer.Option(None, "--out", "-o", help="Baseline path (default: the spec's 'baseline')."),
):
    """Sweep the audit spec and record a baseline (plain JSON, written atomically)."""
    from .gate import baseline_command

    with _progress() as bar:
        path, n = baseline_command(spec, out_path, bar)
    out.print(f"wrote {path} ({n} results)", highlight=False)


@app.command()
def check(
    spec: Optional[Path] = typer.Option(None, "--spec", help="Audit spec (default: actaudit.toml or [tool.actaudit] in pyproject.toml)."),
    baseline_path: Optional[Path] = typer.Option(None, "--baseline", "-b", help="Baseline (default: the spec's 'baseline')."),
    junit: Optional[Path] = typer.Option(None, "--junit", help="Write JUnit XML to FILE."),
    markdown: Optional[Path] = typer.Option(None, "--markdown", help="Write a Markdown summary to FILE."),
):
    """Re-sweep the spec and compare with the baseline: exit 1 on any regression."""
    from reports import junit as junit_report
    from reports import markdown as md_report

    from .gate import check_command

    with _progress() as bar:
        _, changes = check_command(spec, baseline_path, bar)
    if junit:
        junit_report.write(junit, changes)
    if markdown:
        md_report.write(markdown, changes)
    fails = [c for c in changes if c.status == "fail"]
    better = [c for c in changes if c.status == "improved"]
    for c in fails + better:  # plain lines: easy to read and to grep in CI logs
        tag = "FAIL" if c.status == "fail" else "improved"
        for m in c.messages:
            out.print(f"{tag:8} {c.key}: {m}", markup=False, highlight=False, soft_wrap=True)
    out.print(f"actaudit check: {len(changes)} results, {len(fails)} failed, {len(better)} improved"
              + ("" if not better or fails else " (refresh with 'actaudit baseline')"), highlight=False)
    return 1 if fails else 0


class _Rate(ProgressColumn):
    """Inputs per second, as 12.3M inputs/s."""

    def render(self, task):
        v = task.speed
        if not v:
            return Text("", style="progress.data.speed")
        for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3), ("", 1)):
            if v >= div:
                return Text(f"{v / div:.1f}{unit} inputs/s", style="progress.data.speed")
        return Text(f"{v:.1f} inputs/s", style="progress.data.speed")


def _ready() -> None:
    """Readiness hook for tests and supervisors: with ACTAUDIT_READY_FILE set, touch that file
    once the work is under way (the first chunk done: signal handlers installed, worker
    processes started), so that a test can wait for it instead of sleeping before it sends
    SIGINT or SIGTERM."""
    import os

    path = os.environ.get("ACTAUDIT_READY_FILE")
    if path:
        try:
            Path(path).touch()
        except OSError:
            pass


class _progress:
    """A rich progress bar on stderr (only on a terminal): one line per result, with its
    inputs done of its total, rate and time remaining; a resumed run starts where its
    checkpoint stopped."""

    def __enter__(self):
        self.p = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                          _Rate(), TimeElapsedColumn(), TimeRemainingColumn(), console=err,
                          transient=True, disable=not err.is_terminal)
        self.p.__enter__()
        self.task = self.p.add_task("sweeping", total=None)
        return self

    def start(self, label: str, total: int) -> None:
        """A new result begins: its own line (the previous one is done)."""
        self.p.update(self.task, visible=False)
        self.label, self.total = label, total
        self.task = self.p.add_task(label, total=total)

    def resumed(self, n: int) -> None:
        """n inputs were done before: counted, not taken for speed (a fresh task)."""
        self.p.remove_task(self.task)
        self.task = self.p.add_task(f"{self.label} (resumed)", total=self.total, completed=n)

    def __call__(self, n: int) -> None:
        self.p.advance(self.task, n)
        if not getattr(self, "_readied", False):  # the first chunk is done: work under way
            self._readied = True
            _ready()

    def __exit__(self, *exc):
        return self.p.__exit__(*exc)


def _command_line() -> str:
    return " ".join(["actaudit", *sys.argv[1:]])


def results_table(results: list[SweepResult]) -> Table:
    t = Table(title="actaudit sweep", title_justify="left", header_style="bold")
    for col, just in [("candidate", "left"), ("dtype", "left"), ("compute", "left"),
                      ("inputs", "right"), ("max ULP", "right"), ("at x (bits)", "left"),
                      ("mean", "right"), ("p99", "right"), ("max abs", "right"),
                      ("max rel", "right"), ("CR %", "right"), ("NaN", "right"),
                      ("inf", "right"), ("findings", "left")]:
        if col == "findings":
            t.add_column(col, justify=just, overflow="fold", max_width=30)
        else:
            t.add_column(col, justify=just, no_wrap=True)
    for r in results:
        w = r.worst
        where = f"{fmt_num(w['x'], 6)} ({w['x_hex']})" if w else "-"
        if w and "b" in w:
            where = f"a={fmt_num(w['x'], 4)}, b={fmt_num(w['b'], 4)}"
        n = f"{r.domain.count}" + ("" if r.domain.exhaustive else "~")
        spec = findings_summary(r)
        name = r.candidate + "".join(f" {k}={v:g}" for k, v in r.params.items()
                                     if v != catalog()[r.candidate].params.get(k))
        t.add_row(escape(name), r.dtype, r.compute, n, fmt_num(r.max_ulp), where,
                  fmt_num(r.mean_ulp), fmt_num(r.p99_ulp), fmt_num(r.max_abs),
                  fmt_num(r.max_rel), f"{100 * r.correctly_rounded_fraction:.2f}",
                  str(r.nan_count), str(r.inf_count), spec)
    if any(not r.domain.exhaustive for r in results):
        t.caption = "~ sampled: the maximum is a lower bound; otherwise exhaustive: an upper bound"
    return t


SHORT = {"nan": "nan", "overflow": "ovf", "underflow": "unf", "sign": "sign", "range": "range",
         "monotonicity": "mono", "special": "spec"}


def findings_summary(r: SweepResult) -> str:
    parts = [f"{SHORT[f.kind]} {f.count}" for f in r.findings]
    if r.hidden:
        parts.append(f"hidden {len(r.hidden)}")
    if not r.findings and r.special_failures:
        parts.append(f"spec {r.special_failures}")
    return ", ".join(parts) or "-"


def write_csv(results: list[SweepResult], path: Path) -> None:
    import pandas as pd

    from .formats import get_format
    from .io import atomic_path

    rows = sum(len(r.points) for r in results if r.points is not None)
    if rows > MAX_CSV_ROWS:
        raise BadOptionError(f"--csv would write {rows} rows (limit {MAX_CSV_ROWS}); narrow --range")
    frames = []
    for r in results:
        e = r.points
        fmt = get_format(r.dtype)
        bits = fmt.to_bits(e.x).astype(np.uint64).tolist()
        width = fmt.bits // 4
        frames.append(pd.DataFrame({
            "candidate": r.candidate, "dtype": r.dtype, "compute": r.compute,
            "x": e.x, "x_hex": [f"0x{b:0{width}x}" for b in bits], "got": e.got,
            "exact": e.exact, "correctly_rounded": e.rounded, "ulp_error": e.ulp_err,
            "ulp_distance": e.ulp_dist, "class": np.asarray(CLASS_NAMES)[e.cls]}))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        pd.concat(frames, ignore_index=True).to_csv(tmp, index=False, float_format=None)


@app.command("list")
def list_(json_: bool = typer.Option(False, "--json", help="Print the candidates as JSON.")):
    """List families, candidates (formula, source, parameters) and formats."""
    cands = sorted(catalog().values(), key=lambda c: c.family)  # stable: variants keep their order
    if json_:
        sys.stdout.write(dumps([c.to_dict() for c in cands]))
        return
    t = Table(title=f"{len(cands)} candidates", title_justify="left", header_style="bold",
              show_lines=False)
    for col in ("candidate", "reference", "formula", "params", "source"):
        t.add_column(col, overflow="fold")
    for c in cands:
        ps = ", ".join(f"{k}={v:g}" for k, v in c.params.items())
        t.add_row(c.id, c.reference, c.formula, ps, c.source)
    out.print(t)
    out.print("formats: " + ", ".join(f"{f.name} ({', '.join(f.aliases[:2])})" for f in FORMATS.values()))


@app.command()
def formats(json_: bool = typer.Option(False, "--json", help="Print as JSON.")):
    """List the number formats and their parameters."""
    if json_:
        sys.stdout.write(dumps([f.to_dict() for f in FORMATS.values()]))
        return
    t = Table(title="formats", title_justify="left", header_style="bold")
    for col in ("name", "aliases", "bits", "p", "emin", "emax", "max finite", "min subnormal", "inf"):
        t.add_column(col)
    for f in FORMATS.values():
        t.add_row(f.name, ", ".join(f.aliases), str(f.bits), str(f.p), str(f.emin), str(f.emax),
                  f"{f.max_finite:.6g}", f"{f.smallest_subnormal:.6g}", "yes" if f.has_inf else "no")
    out.print(t)


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that every atomic write cleans up after itself."""


_TERMINATED = []


def _on_sigterm(signum, frame):
    _TERMINATED.append(signum)
    raise _Terminated()


def main(argv=None) -> int:
    """Entry point: run the app, turning user errors into one line and exit code 2.

    Ctrl-C (SIGINT) and SIGTERM print one line and exit 130 and 143; files being written
    are temporary files until complete, so none is left half-written.
    """
    import signal

    old = None
    try:
        old = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread
        pass
    _TERMINATED.clear()
    try:
        rv = app(args=argv, prog_name="actaudit", standalone_mode=False)
        if rv == 130:  # click turns Ctrl-C (and our SIGTERM) into a quiet exit code 130
            raise _Terminated() if _TERMINATED else KeyboardInterrupt()
        return rv if isinstance(rv, int) else 0
    except ActauditError as e:
        _say(f"actaudit: error: {e}")
        return e.exit_code
    except _Terminated:
        _say("actaudit: terminated")
        return 143
    except (KeyboardInterrupt, typer.Abort):
        _say("actaudit: interrupted")
        return 130
    except OSError as e:  # a path the user gave that cannot be written or read
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        _say(f"actaudit: error: {where}{e.strerror or e}")
        return 2
    except MemoryError:
        _say("actaudit: error: out of memory (narrow --range, or fewer --samples)")
        return 2
    except Exception as e:
        # usage errors of typer's (vendored) click: they know how to show themselves
        if hasattr(e, "show") and isinstance(getattr(e, "exit_code", None), int):
            e.show()
            return e.exit_code
        raise
    finally:
        if old is not None:
            signal.signal(signal.SIGTERM, old)


def console_main() -> None:
    sys.exit(main())


if __name__ == "__main__":
    console_main()
