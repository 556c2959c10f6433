"""scipy.special, imported without loading numpy's unused heavy submodules.

scipy 1.17's ``scipy.special`` builds an array-API copy of the ``numpy`` namespace on
import: it reads every name that ``dir(numpy)`` and ``numpy.__all__`` list, and so imports
numpy's lazily loaded ``f2py``, ``testing``, ``ma``, ``random`` (with hashlib),
``ctypeslib`` and ``polynomial`` (0.3 s here, half of the command line's start-up;
scipy.special's functions do not use them, and actaudit imports ``numpy.random`` where it
samples).  While scipy.special is imported, both leave out those of them that are not
loaded yet; both are restored at once, and the submodules still import on first use as
usual.  The functions are scipy's own: erf, erfc, expit, ... give the same values bit for
bit.

``sc`` is a stand-in that imports scipy.special on its first attribute read, so that the
modules that name it (the references, the compute model) load without scipy (0.3 s): a
command that evaluates no erf or expit, ``--help`` and ``--version`` never import it.
"""

from __future__ import annotations

import sys

import numpy as np

HEAVY = ("f2py", "testing", "ma", "random", "ctypeslib", "polynomial")


def _load():
    if "scipy.special" in sys.modules:
        return sys.modules["scipy.special"]
    skip = {n for n in HEAVY if f"numpy.{n}" not in sys.modules}
    orig_dir, orig_all = np.__dict__.get("__dir__"), np.__dict__.get("__all__")
    if orig_dir is None or orig_all is None or not skip:
        import scipy.special

        return scipy.special
    np.__dir__ = lambda: [n for n in orig_dir() if n not in skip]
    np.__all__ = [n for n in orig_all if n not in skip]
    try:
        import scipy.special
    finally:
        np.__dir__, np.__all__ = orig_dir, orig_all
    return scipy.special


class _Lazy:
    """scipy.special, imported on the first attribute read (then the module's own)."""

    def __getattr__(self, name: str):
        return getattr(_load(), name)


sc = _Lazy()
