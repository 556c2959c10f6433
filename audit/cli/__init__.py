"""The ``actaudit`` command line: a thin layer over the Python API.

One module per command group, each registering its commands on the Typer app of
:mod:`audit.cli.app` (which also holds :func:`main`, the one place errors become exit codes);
the options several commands share are declared once, in :mod:`audit.cli.options`.

Errors the user can cause are :class:`audit.errors.ActauditError`; :func:`main`
prints them as one line (``actaudit: error: ...``) and exits 2.  Ctrl-C prints
one line and exits 130.

Importing this package imports nothing else: ``actaudit --version`` answers from
:func:`console_main` before Typer and rich are imported (0.1 s), and the app, with every
command registered, is imported on the first read of ``app``, ``main``, ``DOCS_PAGES`` or
``_docs_epilogs`` (``from audit.cli import app`` is the Typer application, never the module
``audit.cli.app``).
"""

from __future__ import annotations

import importlib
import sys
import types

# the command modules, in the order `actaudit --help` lists the commands
COMMANDS = (
    "sweep", "diff", "engines", "consistency", "clip", "suggest", "fit",
    "selftest", "lut", "golden", "report", "gate", "listing",
)  # fmt: skip


# then the command modules that register on the app given them (``register(app)``)
REGISTERED = ("model", "identify")
_loaded: list[bool] = []


def _load() -> types.ModuleType:
    """audit.cli.app, with every command registered on its app (once)."""
    app_module = importlib.import_module("audit.cli.app")
    if not _loaded:
        for name in COMMANDS:
            importlib.import_module(f"audit.cli.{name}")
        for name in REGISTERED:
            importlib.import_module(f"audit.cli.{name}").register(app_module.app)
        _loaded.append(True)
    return app_module


def console_main() -> None:
    """The console script ``actaudit``."""
    if sys.argv[1:] == ["--version"]:
        from audit._version import __version__

        sys.stdout.write(f"actaudit {__version__}\n")
        sys.exit(0)
    # OpenBLAS (numpy's and scipy's each) starts a thread per core at import, and they
    # spin: 0.2 s of CPU in the first command, which makes no BLAS call worth a thread;
    # one thread unless the user says otherwise (before numpy is imported; OpenBLAS also
    # reads GOTO_NUM_THREADS and OMP_NUM_THREADS, below OPENBLAS_NUM_THREADS)
    import os

    if not any(v in os.environ for v in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")):
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
    # a command makes and frees objects by the hundred thousand (imports, per-result
    # records): with the default threshold (700) the collector ran 130 times, 0.04-0.05 s
    # of the first command; as mypy does, it runs far less often here (memory: a few MB)
    import gc

    gc.set_threshold(100_000, 50, 100)
    _load().console_main()


class _Package(types.ModuleType):
    """This package, whose ``app`` is the Typer application: the import system's binding of
    the submodule ``audit.cli.app`` to the package's attribute is ignored."""

    @property
    def app(self):
        return _load().app

    @app.setter
    def app(self, module) -> None:
        pass

    def __getattr__(self, name: str):
        if name in ("DOCS_PAGES", "_docs_epilogs", "main"):
            return getattr(_load(), name)
        raise AttributeError(f"module 'audit.cli' has no attribute {name!r}")


sys.modules[__name__].__class__ = _Package

__all__ = ["DOCS_PAGES", "_docs_epilogs", "app", "console_main", "main"]
