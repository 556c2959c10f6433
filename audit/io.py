"""File output: atomic writes and JSON that keeps NaN and infinities legal."""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from pathlib import Path


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path beside ``path``; rename it onto ``path`` on success.

    On any exception (KeyboardInterrupt included) the temporary file is removed
    and ``path`` is left as it was.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text(path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def json_number(v):
    """A float for JSON: NaN and infinities become the strings 'nan', 'inf', '-inf'."""
    if v is None:
        return None
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def dumps(doc) -> str:
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"


def format_number(v, digits: int = 3) -> str:
    """A number for people: 3 significant digits, '-' for missing or NaN, 'inf'."""
    if v is None:
        return "-"
    v = float(v)
    if math.isnan(v):
        return "-"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == 0:
        return "0"
    if 1e-3 <= abs(v) < 1e5:
        return f"{v:.{digits}g}"
    return f"{v:.{digits - 1}e}"
