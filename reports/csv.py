"""CSV of a sweep's points, one row per input (`actaudit sweep --csv`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

import numpy as np

from audit.errors import BadOptionError
from audit.measure.metrics import CLASS_NAMES
from audit.measure.sweep import SweepResult
from audit.targets import semantics as semantics_mod

if TYPE_CHECKING:
    from audit.targets.semantics import Semantics

MAX_CSV_ROWS = 1 << 24


def _exact_column(r: SweepResult, e) -> np.ndarray:
    """The CSV's exact values: float64 (shortest repr) where float64 holds f(x) (to its
    double-double's rounding), and where f is nonzero but its float64 is 0 (below 2^-1075,
    or the oracle's +-5e-324 stand-in of a value lost to underflow) mpmath's decimal string
    (oracle.exact_text): never a signed zero for a nonzero exact value."""
    from audit.oracle.oracle import exact_text
    from audit.oracle.references import get_reference

    col = np.asarray(e.exact, dtype=np.float64).astype(object)
    lost = np.flatnonzero((np.asarray(e.exact) == 0) & (np.asarray(e.exact_lo) != 0))
    if len(lost):
        ref = get_reference(r.reference)
        rp = ref.with_defaults({k: v for k, v in (r.params or {}).items() if k in ref.params})
        for i in lost.tolist():
            x2 = None if e.x2 is None else float(e.x2[i])
            col[i] = exact_text(ref, float(e.x[i]), rp, x2)
    return col


def write_csv(results: list[SweepResult], path: Path) -> None:
    """One row per input of every result that kept its points, written atomically."""
    import pandas as pd

    from audit.io import atomic_path
    from audit.numbers.formats import get_format

    rows = sum(len(r.points) for r in results if r.points is not None)
    if rows > MAX_CSV_ROWS:
        raise BadOptionError(f"--csv would write {rows} rows (limit {MAX_CSV_ROWS}); narrow --range")
    frames = []
    show_sem = any(r.semantics is not None for r in results)  # a column only when asked for
    for r in results:
        e = r.points
        assert e is not None  # the sweep kept its points (keep_points)
        fmt = get_format(r.dtype)
        bits = fmt.to_bits(e.x).astype(np.uint64).tolist()
        width = fmt.bits // 4
        sem = {"semantics": semantics_mod.label(cast("Semantics | None", r.semantics))} if show_sem else {}
        frames.append(
            pd.DataFrame(
                {
                    "candidate": r.candidate,
                    "dtype": r.dtype,
                    "compute": r.compute,
                    **sem,
                    "x": e.x,
                    "x_hex": [f"0x{b:0{width}x}" for b in bits],
                    "got": e.got,
                    "exact": _exact_column(r, e),
                    "correctly_rounded": e.rounded,
                    "ulp_error": e.ulp_err,
                    "ulp_distance": e.ulp_dist,
                    "class": np.asarray(CLASS_NAMES)[e.cls],
                }
            )
        )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        pd.concat(frames, ignore_index=True).to_csv(tmp, index=False, float_format=None)
