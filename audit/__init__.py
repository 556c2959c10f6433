"""actaudit: audit the accuracy and stability of activation functions.

The Python API, which the ``actaudit`` command line is a thin layer over::

    import audit
    results = audit.sweep("gelu", dtype="fp16")
    print(results[0].max_ulp, results[0].worst)
"""

from audit import signals as _signals  # noqa: E402

_signals.early()  # an actaudit process answers SIGINT / SIGTERM with one line from here on

from audit._version import __version__  # noqa: E402
from audit.errors import ActauditError  # noqa: E402

# The API's names, each imported from its module on first use (PEP 562): `import audit`, and
# so `actaudit --version`, `--help` and the error paths, load neither numpy nor scipy.
_LAZY = {
    "sweep_module": ("audit.measure.sweep", None),
    "SweepResult": ("audit.measure.sweep", "SweepResult"),
    "document": ("audit.measure.sweep", "document"),
    "sweep": ("audit.measure.sweep", "sweep"),
    "inputs": ("audit.numbers.inputs", None),
    "FORMATS": ("audit.numbers.formats", "FORMATS"),
    "Format": ("audit.numbers.formats", "Format"),
    "get_format": ("audit.numbers.formats", "get_format"),
    "REFERENCES": ("audit.oracle.references", "REFERENCES"),
    "get_reference": ("audit.oracle.references", "get_reference"),
    "Candidate": ("audit.targets.candidates", "Candidate"),
    "candidate": ("audit.targets.candidates", "candidate"),
    "catalog": ("audit.targets.candidates", "catalog"),
    "resolve": ("audit.targets.candidates", "resolve"),
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'audit' has no attribute {name!r}")
    import importlib

    module, attr = _LAZY[name]
    value = importlib.import_module(module)
    if attr is not None:
        value = getattr(value, attr)
    globals()[name] = value
    return value


def __dir__():
    return sorted({*globals(), *_LAZY})


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
