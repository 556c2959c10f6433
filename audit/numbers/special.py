"""scipy.special's ufuncs, loaded without scipy.special's package (0.3-0.5 s of start-up).

The references and the compute model use three of scipy.special's ufuncs: erf, erfc and
expit (the references' float64 fast values, the compute model's float64 primitives).
scipy.special's ``__init__`` costs far more than they do: scipy 1.17 builds an array-API
layer on import (``_support_alternative_backends``, ``scipy._lib._array_api``), reading
every name of ``dir(numpy)`` and so importing numpy's lazily loaded ``f2py``, ``testing``,
``ma``, ``random``, ``ctypeslib`` and ``polynomial``.  The ufuncs themselves live in the
compiled module ``scipy.special._ufuncs``; ``sc.<name>`` is read from it, loaded alone:

* ``_ufuncs`` is imported under a bare stand-in for its package (``scipy.special`` with
  scipy's own ``__path__``, so Python finds the same files and runs no ``__init__``); the
  stand-in is removed at once, so a later ``import scipy.special`` runs the real package,
  which finds ``_ufuncs`` already loaded and exports the very same objects; meanwhile it is
  marked as being initialized and the import system's lock of ``scipy.special`` is held, so
  another thread importing scipy.special then waits and gets the real package;
* only the names of ``_LEAN`` are read there, each only when it is a numpy ufunc of that
  name (scipy.special exports those very objects; where a scipy version wraps one for
  other array libraries, the wrapper calls the same ufunc on numpy arrays; a test checks
  the installed scipy); any other name, or any failure of the lean load, imports the whole
  scipy.special, with numpy's heavy submodules hidden while it loads (``_full``).  The
  functions are scipy's own in every path: the same values, bit for bit.

``sc`` is a stand-in that loads on its first attribute read, so that the modules that name
it load without scipy: a command that evaluates no erf or expit, ``--help`` and
``--version`` never touch it.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.machinery
import os
import sys
import threading
import types

import numpy as np

HEAVY = ("f2py", "testing", "ma", "random", "ctypeslib", "polynomial")
# names that scipy.special exports as the ufunc of the same name in _ufuncs
_LEAN = ("erf", "erfc", "expit")
_LOCK = threading.Lock()  # one first load at a time in this process


def _module_lock(name: str):
    """The import system's own lock of module NAME (what another thread importing it waits
    on while a module of that name is being initialized); none where Python lacks it."""
    try:
        from importlib._bootstrap import _ModuleLockManager  # type: ignore[attr-defined]
    except ImportError:
        return contextlib.nullcontext()
    return _ModuleLockManager(name)


def _full():
    """scipy.special, imported whole, numpy's unused heavy submodules left out meanwhile."""
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


def _lean():
    """scipy.special._ufuncs, imported under a stand-in package (None where that fails).

    While the stand-in is in sys.modules it is marked as being initialized and this thread
    holds the import system's lock of ``scipy.special``: another thread that imports
    scipy.special meanwhile waits, and then finds no stand-in and imports the real package
    (the stand-in is removed before the lock is released)."""
    if "scipy.special._ufuncs" in sys.modules:
        return sys.modules["scipy.special._ufuncs"]
    if "scipy.special" in sys.modules:
        return None
    try:
        import scipy

        where = os.path.join(os.path.dirname(scipy.__file__), "special")
        stub = types.ModuleType("scipy.special")
        stub.__path__ = [where]
        stub.__package__ = "scipy.special"
        spec = importlib.machinery.ModuleSpec("scipy.special", None, is_package=True)
        spec.submodule_search_locations = [where]
        spec._initializing = True
        stub.__spec__ = spec
        with _module_lock("scipy.special"):
            if "scipy.special" in sys.modules:  # another thread imported it meanwhile
                return None
            sys.modules["scipy.special"] = stub
            try:
                mod = importlib.import_module("scipy.special._ufuncs")
            finally:
                if sys.modules.get("scipy.special") is stub:
                    del sys.modules["scipy.special"]
    except Exception:  # any scipy whose layout differs: the whole package instead
        for name in [m for m in sys.modules if m.startswith("scipy.special.")]:
            del sys.modules[name]
        return None
    return mod


def _load(name: str):
    with _LOCK:
        if "scipy.special" not in sys.modules and name in _LEAN:
            f = getattr(_lean(), name, None)
            if isinstance(f, np.ufunc) and f.__name__ == name:
                return f
        return getattr(_full(), name)


class _Lazy:
    """scipy.special's functions, loaded on the first read of each (then kept)."""

    def __getattr__(self, name: str):
        f = _load(name)
        setattr(self, name, f)
        return f


sc = _Lazy()
