"""The ``actaudit`` command line: a thin layer over the Python API.

One module per command group, each registering its commands on the Typer app of
:mod:`audit.cli.app` (which also holds :func:`main`, the one place errors become exit codes);
the options several commands share are declared once, in :mod:`audit.cli.options`.  The
modules are imported here in the order ``actaudit --help`` lists the commands.

Errors the user can cause are :class:`audit.errors.ActauditError`; :func:`main`
prints them as one line (``actaudit: error: ...``) and exits 2.  Ctrl-C prints
one line and exits 130.
"""

from __future__ import annotations

from audit.cli.app import DOCS_PAGES, _docs_epilogs, app, console_main, main

# the commands register in the order `actaudit --help` lists them
# isort: off
from audit.cli import sweep, diff, engines, consistency, clip, suggest, fit  # noqa: F401
from audit.cli import selftest, lut, golden, report, gate, listing  # noqa: F401
from audit.cli import identify, model

model.register(app)
identify.register(app)

# isort: on

__all__ = ["DOCS_PAGES", "_docs_epilogs", "app", "console_main", "main"]
