"""Golden data for devices: the correctly rounded outputs of every input, to compare on device.

``golden`` writes every finite input of a format (ascending, -0 before +0) -- or those of
an input file -- with the correctly rounded reference outputs and the exact values:

* ``.npz``: ``x_bits``, ``x``, ``y_bits``, ``y``, ``exact``, ``exact_lo`` (bits as unsigned
  integers of the format's width, values as float64), plus ``format`` and ``reference``;
* ``.npy``: a float64 array of shape (N, 3): columns x, y, exact;
* ``.csv``: columns x_hex, x, y_hex, y, exact.
Dumps of device outputs are read by :mod:`audit.targets.dumps`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from audit.errors import BadOptionError
from audit.io import atomic_path
from audit.numbers.formats import Format
from audit.oracle import oracle
from audit.oracle.references import get_reference


def write_golden(
    reference: str,
    fmt: Format,
    path,
    params: dict | None = None,
    inputs: np.ndarray | None = None,
    semantics=None,
) -> int:
    """semantics: conversion flags of the machine (daz_in, ftz_out, saturate_out, sat_nan):
    the correctly rounded value of f at the input the machine reads, as it stores it
    (audit.targets.semantics.golden_values)."""
    ref = get_reference(reference)
    if ref.arity != 1:
        raise BadOptionError(f"golden data is for univariate references, not {reference}")
    if inputs is None:
        if not fmt.enumerable:
            raise BadOptionError(f"{fmt.name} has too many values: give --inputs")
        x = fmt.finite_values()
    else:
        x = np.asarray(inputs, dtype=np.float64)
    ov = oracle.evaluate(ref, fmt, x, ref.with_defaults(params))
    if semantics is not None:
        from audit.targets import semantics as semantics_mod

        ov = semantics_mod.golden_values(ref, fmt, x, ref.with_defaults(params), semantics, ov)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    suffix = path.suffix.lower()
    with atomic_path(path) as tmp:
        if suffix == ".npz":
            with open(tmp, "wb") as fh:
                np.savez(
                    fh,
                    x_bits=fmt.to_bits(x),
                    x=x,
                    y_bits=_bits(fmt, ov.rounded),
                    y=ov.rounded,
                    exact=ov.hi,
                    exact_lo=ov.lo,
                    format=np.str_(fmt.name),
                    reference=np.str_(reference),
                )
        elif suffix == ".npy":
            with open(tmp, "wb") as fh:
                np.save(fh, np.stack([x, ov.rounded, ov.hi], axis=1))
        elif suffix == ".csv":
            import pandas as pd

            w = fmt.bits // 4
            pd.DataFrame(
                {
                    "x_hex": [f"0x{b:0{w}x}" for b in fmt.to_bits(x).tolist()],
                    "x": x,
                    "y_hex": [f"0x{b:0{w}x}" for b in _bits(fmt, ov.rounded).tolist()],
                    "y": ov.rounded,
                    "exact": ov.hi,
                }
            ).to_csv(tmp, index=False)
        else:
            raise BadOptionError(f"{path}: golden files are .npz, .npy or .csv")
    return len(x)


def _bits(fmt: Format, v: np.ndarray) -> np.ndarray:
    """The format's own bit patterns (as x_bits: a tf32 value is 19 bits, not fp32's 32)."""
    with np.errstate(all="ignore"):
        return fmt.to_bits(np.asarray(v, dtype=np.float64))


# ------------------------------------------------------------------- dumps
