"""actaudit: audit the accuracy and stability of activation functions.

The Python API, which the ``actaudit`` command line is a thin layer over::

    import audit
    results = audit.sweep("gelu", dtype="fp16")
    print(results[0].max_ulp, results[0].worst)
"""

from audit import signals as _signals  # noqa: E402
from audit._version import __version__

_signals.early()  # an actaudit process answers SIGINT / SIGTERM with one line from here on

from audit.errors import ActauditError  # noqa: E402
from audit.measure import sweep as sweep_module  # noqa: E402
from audit.measure.sweep import SweepResult, document, sweep  # noqa: E402
from audit.numbers import inputs  # noqa: E402
from audit.numbers.formats import FORMATS, Format, get_format  # noqa: E402
from audit.oracle.references import REFERENCES, get_reference  # noqa: E402
from audit.targets.candidates import Candidate, candidate, catalog, resolve  # noqa: E402

__all__ = [
    "inputs",
    "sweep_module",
    "sweep",
    "SweepResult",
    "document",
    "Candidate",
    "candidate",
    "catalog",
    "resolve",
    "Format",
    "FORMATS",
    "get_format",
    "REFERENCES",
    "get_reference",
    "ActauditError",
    "__version__",
]
