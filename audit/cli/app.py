"""The ``actaudit`` application: the Typer app, its consoles, the root options, and
:func:`main`, which turns errors into one line and an exit code.

Errors the user can cause are :class:`audit.errors.ActauditError`; :func:`main`
prints them as one line (``actaudit: error: ...``) and exits 2.  Ctrl-C prints
one line and exits 130.  The commands register themselves on :data:`app` when
``audit.cli`` imports their modules, in the order ``actaudit --help`` lists them.
"""

from __future__ import annotations

import contextlib
import os
import sys

import typer
from rich.console import Console

from audit._version import __version__
from audit.errors import ActauditError, BadOptionError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Audit the accuracy and stability of activation functions and their "
    "approximations against an exact mpmath oracle.",
)
out = Console()
if not out.is_terminal and not os.environ.get("COLUMNS"):  # piped, no width asked for: do not
    out = Console(width=160)  # squeeze tables into 80 columns
err = Console(stderr=True)


MAX_MESSAGE = 2000  # characters of an error line (a 5 MB string in a spec was echoed whole)


def _say(msg: str) -> None:
    """One line on stderr, of at most MAX_MESSAGE characters (the rest counted, not shown)."""
    msg = msg.replace("\n", " ")
    if len(msg) > MAX_MESSAGE:
        msg = f"{msg[:MAX_MESSAGE]}... ({len(msg) - MAX_MESSAGE:,} more characters)"
    sys.stderr.write(msg + "\n")


def command_line() -> str:
    """The command as typed (the JSON documents and reports record it)."""
    return " ".join(["actaudit", *sys.argv[1:]])


def terminal_width() -> int:
    """Columns of the terminal (80 where there is none): the width of tables."""
    import shutil

    return shutil.get_terminal_size((80, 24)).columns


def write_json(doc, path: str | None) -> bool:
    """The JSON document to PATH, or to stdout where PATH is '-' (then True: the document
    is the command's output)."""
    from audit.io import dumps, write_text

    if path == "-":
        sys.stdout.write(dumps(doc))
        return True
    if path:
        write_text(path, dumps(doc))
    return False


def _version(value: bool):
    if value:
        out.print(f"actaudit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
):
    pass


# The page of the documentation each command's --help ends with (a path in the repository;
# tests/test_docs.py checks that every command has one and that it exists).
DOCS_PAGES = {
    "sweep": "docs/getting-started/first-sweep.md",
    "diff": "docs/how-to/compare-implementations.md",
    "consistency": "docs/how-to/check-consistency.md",
    "clip": "docs/concepts/findings.md",
    "suggest": "docs/how-to/pick-or-fit-a-replacement.md",
    "fit": "docs/how-to/pick-or-fit-a-replacement.md",
    "selftest": "docs/design/robustness.md",
    "lut": "docs/concepts/lookup-tables.md",
    "golden": "docs/how-to/audit-a-device-dump.md",
    "report": "docs/getting-started/first-report.md",
    "baseline": "docs/how-to/gate-a-repository.md",
    "check": "docs/how-to/gate-a-repository.md",
    "list": "docs/reference/catalog.md",
    "formats": "docs/reference/formats.md",
    "engines": "docs/how-to/audit-an-engine.md",
    "model": "docs/how-to/audit-a-model.md",
    "identify": "docs/how-to/identify-a-formula.md",
}


def _docs_epilogs() -> None:
    """End each command's --help with the path of its page (docs/reference/cli.md if none)."""
    for info in app.registered_commands:
        name = info.name or (info.callback.__name__ if info.callback else "")
        if info.epilog is None:
            info.epilog = f"Docs: {DOCS_PAGES.get(name.replace('_', '-'), 'docs/reference/cli.md')}"


def _refuse_blank(args: list[str]) -> None:
    """No option's value or argument is an empty (or blank) string: ``--report ""`` would be
    the current directory (pathlib reads "" as "."), ``-o ""`` a file named "" -- refused,
    naming the option, before any command runs."""
    for i, a in enumerate(args):
        _, eq, value = a.partition("=")
        if a.startswith("--") and eq and not value.strip():
            where = f"in '{a}'"
        elif not a.strip():
            where = f"after {args[i - 1]}" if i and args[i - 1].startswith("-") else "as an argument"
        else:
            continue
        raise BadOptionError(f"an empty string {where}: no option's value or argument may be empty")


def main(argv=None) -> int:
    """Entry point: run the app, turning user errors into one line and exit code 2.

    Ctrl-C (SIGINT) and SIGTERM print one line and exit 130 and 143; files being written
    are temporary files until complete, so none is left half-written.
    """
    from audit.signals import INTERRUPTED as interrupted
    from audit.signals import TERMINATED as terminated
    from audit.signals import Terminated, handlers

    _docs_epilogs()
    args = sys.argv[1:] if argv is None else [str(a) for a in argv]
    try:
        _refuse_blank(args)
        with handlers():
            rv = app(args=args, prog_name="actaudit", standalone_mode=False)
        # click turns Ctrl-C (and our SIGTERM) into a quiet exit code 130; a signal that a
        # library swallowed (its exception caught and dropped) still ends the command so
        if rv == 130 or terminated or interrupted:
            raise Terminated() if terminated else KeyboardInterrupt()
        return rv if isinstance(rv, int) else 0
    except Terminated:
        _say("actaudit: terminated")
        return 143
    except (KeyboardInterrupt, typer.Abort):
        if terminated:
            _say("actaudit: terminated")
            return 143
        _say("actaudit: interrupted")
        return 130
    except Exception as e:
        if terminated or interrupted:
            # what a library made of the signal's exception on its way out: a Ctrl-C
            # during the import of a pybind11 module (scipy's HiGHS) came out as
            # 'ImportError: initialization failed', with its traceback
            _say("actaudit: terminated" if terminated else "actaudit: interrupted")
            return 143 if terminated else 130
        return _error_exit(e)


def _error_exit(e: Exception) -> int:
    """The exit code of an error, its line printed; an exception that is not the user's
    (a bug) is raised again, with its traceback."""
    if isinstance(e, ActauditError):
        _say(f"actaudit: error: {e}")
        return e.exit_code
    if isinstance(e, OSError):  # a path the user gave that cannot be written or read
        where = f"{e.filename}: " if getattr(e, "filename", None) else ""
        _say(f"actaudit: error: {where}{e.strerror or e}")
        return 2
    if isinstance(e, MemoryError):
        _say("actaudit: error: out of memory (narrow --range, or fewer --samples)")
        return 2
    if isinstance(e, RecursionError):
        _say("actaudit: error: input nested too deeply")
        return 2
    # usage errors of typer's (vendored) click: one line, like every other error (a bare
    # `actaudit` or a command without its arguments still shows its help)
    code = getattr(e, "exit_code", None)
    if hasattr(e, "show") and isinstance(code, int):
        if type(e).__name__ == "NoArgsIsHelpError" or not hasattr(e, "format_message"):
            e.show()
            return code
        ctx = getattr(e, "ctx", None)
        where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        msg = " ".join(str(e.format_message()).split())
        _say(f"actaudit: error: {msg}{where}")
        return 2
    raise e


def console_main() -> None:
    """The console script: main(), then the exit.  Before it, every object this process
    made is moved out of the garbage collector's reach (gc.freeze): the interpreter's
    last collection over them took 0.07-0.1 s of the first command's 0.6 s; modules are
    still torn down and atexit handlers run as usual.  The command has ended and said so
    (exit code 130 and its line after Ctrl-C): a SIGINT that arrives during the exit is
    ignored, where with the default action inherited it killed the process (-2) after
    its line (once in a CI run, tests/test_fit.py).  After an interrupt the process ends
    with os._exit once the atexit handlers have run: see :func:`_exit_interrupted`."""
    import signal

    code = main()
    import gc

    gc.freeze()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if code == 130:
        _exit_interrupted()
    sys.exit(code)


def _exit_interrupted() -> None:
    """Exit 130 after Ctrl-C, the command's line printed: the atexit handlers, the standard
    streams flushed, then os._exit.  CPython marks a KeyboardInterrupt unhandled whenever
    one leaves code that exec() runs from a string, even if it is caught further out, and
    the exit of ``python -m`` then ends in kill(SIGINT) with the default action (-2)
    whatever exit code was asked (a script, as the console script is, exits before that
    check); scipy's array-API layer imports numpy through exec, so a Ctrl-C during
    ``import scipy.optimize`` (the first LP of ``fit``) did this in 15% of tries (twice in
    CI, tests/test_fit.py, which runs ``python -m audit.cli``).  Nothing is lost: every
    file is written whole or not at all and every worker is already stopped."""
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(130)
