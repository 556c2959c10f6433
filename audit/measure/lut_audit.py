"""The audit of a lookup table written by ``actaudit lut``, read back from its file."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from audit.measure.metrics import Summary, point_errors
from audit.measure.quant import audit_codes
from audit.numbers.quant import QuantFormat
from audit.oracle import oracle
from audit.oracle.references import get_reference
from audit.targets.lut import _correct_table, check_claims, lut_candidate, read_table


def audit_table(written: dict, reference: str, inq, out, params=None):
    """The audit of a written table read back from its file (.npy, .npz, .csv): a
    QuantResult for quantized outputs; for float outputs a dict (inputs, correctly rounded
    entries, max ULP error) over the finite inputs.  None for C arrays."""
    path = written["path"]
    if Path(path).suffix.lower() not in (".npy", ".npz", ".csv"):
        return None
    ref = get_reference(reference)
    if isinstance(out, QuantFormat):
        qc, _ = lut_candidate("lut:" + path, inq, out, None, reference)
        return audit_codes(ref, inq, out, qc, params)
    table, meta = read_table(path, len(written["x"]))  # (fp4, fp6: 16 or 64 entries)
    check_claims("lut:" + path, meta, ref.name, inq, out, params)
    vals = table if meta["kind"] == "float" else out.from_bits(table.astype(np.int64))
    # (the oracle's double-double, not hi + lo: lo tells on which side of a power of two
    # f lies, hence its ulp, and keeps a nonzero f below float64's range nonzero)
    x, want, _, (hi, lo) = _correct_table(reference, inq, out, params)
    fin = np.flatnonzero(np.isfinite(x))
    ov = oracle.OracleValues(want[fin], hi[fin], lo[fin], 0, None)
    e = point_errors(x[fin], vals[fin], ov, out)
    s = Summary()
    s.add(e, out)
    return {"inputs": len(fin), "correct": s.correct, "max_ulp": s.max_ulp}
