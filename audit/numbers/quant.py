"""Quantized integer formats: int8, uint8 and int16 codes with a float32 scale, a zero point and
a rounding (half to even or half away from zero), as frameworks quantize.  The audit of
activations that read and write them is :mod:`audit.measure.quant`, whose docstring gives the
definitions."""

from __future__ import annotations

import math
from dataclasses import dataclass

import mpmath as mp
import numpy as np

from audit.errors import BadOptionError

RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767)}
ROUNDINGS = {
    "even": "half to even (PyTorch quantize_per_tensor, ONNX QuantizeLinear)",
    "away": "half away from zero (TFLite, ExecuTorch: std::round)",
}


@dataclass(frozen=True)
class QuantFormat:
    kind: str  # int8, uint8, int16
    scale: float  # a float32 value
    zero: int
    rounding: str = "even"

    @property
    def qmin(self) -> int:
        return RANGES[self.kind][0]

    @property
    def qmax(self) -> int:
        return RANGES[self.kind][1]

    @property
    def name(self) -> str:
        return f"{self.kind}:scale={self.scale!r},zero={self.zero},round={self.rounding}"

    @property
    def bits(self) -> int:
        return 16 if self.kind == "int16" else 8

    def codes(self) -> np.ndarray:
        return np.arange(self.qmin, self.qmax + 1, dtype=np.int64)

    def values(self, codes=None) -> np.ndarray:
        """(q - z) s, exact in float64 (17-bit integer times a float32)."""
        q = self.codes() if codes is None else np.asarray(codes, dtype=np.int64)
        return (q - self.zero).astype(np.float64) * self.scale

    def quantize(self, y) -> np.ndarray:
        """Q(y) for float64 y, exactly (float64 codes; NaN stays NaN, +-inf clamp)."""
        y = np.asarray(y, dtype=np.float64)
        s, z = self.scale, self.zero
        with np.errstate(all="ignore"):
            w = np.clip(y / s, self.qmin - z - 2, self.qmax - z + 2)
            k = np.floor(w)
            b = (k + 0.5) * s  # the boundary between k and k + 1: exact in float64
            n = np.where(y > b, k + 1, k)
            tie = y == b
            if tie.any():
                if self.rounding == "even":
                    n = np.where(tie, np.where(k % 2 == 0, k, k + 1), n)
                else:  # away from zero: up for positive ties, down for negative ones
                    n = np.where(tie, np.where(k + 0.5 > 0, k + 1, k), n)
            return np.clip(n + z, self.qmin, self.qmax)

    def quantize_mpf(self, v) -> float:
        """Q(v) for an mpmath number v, exactly (ties compared exactly)."""
        if mp.isnan(v):
            return math.nan
        if mp.isinf(v):
            return float(self.qmax if v > 0 else self.qmin)
        with mp.workprec(max(mp.mp.prec, 64) + 64):
            s = mp.mpf(self.scale)
            k = int(mp.floor(v / s))
            k = min(max(k, self.qmin - self.zero - 2), self.qmax - self.zero + 2)
            b = (mp.mpf(k) + mp.mpf(0.5)) * s  # exact: 19 bits times 24
            if v > b:
                n = k + 1
            elif v < b:
                n = k
            elif self.rounding == "even":
                n = k if k % 2 == 0 else k + 1
            else:
                n = k + 1 if k + 0.5 > 0 else k
        return float(min(max(n + self.zero, self.qmin), self.qmax))

    def hex(self, code) -> str:
        return f"{int(code)}"

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "scale": self.scale,
            "zero": self.zero,
            "rounding": self.rounding,
            "rounding_rule": ROUNDINGS[self.rounding],
            "qmin": self.qmin,
            "qmax": self.qmax,
        }


def is_quant(spec) -> bool:
    return isinstance(spec, QuantFormat) or (
        spec is not None and str(spec).split(":", 1)[0].strip().lower() in RANGES
    )


def parse_quant(spec) -> QuantFormat:
    """'int8:scale=0.0625,zero=0[,round=even|away]' -> QuantFormat (BadOptionError if bad)."""
    if isinstance(spec, QuantFormat):
        return spec
    text = str(spec).strip()
    kind, _, rest = text.partition(":")
    kind = kind.strip().lower()
    if kind not in RANGES:
        raise BadOptionError(f"unknown quantized format '{kind}' (known: {', '.join(RANGES)})")
    kv = {}
    for part in rest.split(","):
        if not part.strip():
            continue
        k, eq, v = part.partition("=")
        k = k.strip().lower()
        if not eq or k not in ("scale", "zero", "round"):
            raise BadOptionError(f"'{text}': expected scale=S,zero=Z[,round=even|away], got '{part.strip()}'")
        if k in kv:
            raise BadOptionError(f"'{text}': {k} given twice")
        kv[k] = v.strip()
    if "scale" not in kv:
        raise BadOptionError(f"'{text}': a quantized format needs scale=S (and zero=Z)")
    try:
        s64 = float(kv["scale"])
    except ValueError:
        raise BadOptionError(f"'{text}': scale '{kv['scale']}' is not a number") from None
    with np.errstate(over="ignore"):  # beyond float32: inf, refused below (one line, no warning)
        s = float(np.float32(s64)) if math.isfinite(s64) else s64
    if not (math.isfinite(s) and s > 0) or s < 2.0**-126:
        raise BadOptionError(f"'{text}': scale must be a positive normal float32, got {kv['scale']}")
    try:
        z = int(kv.get("zero", "0"))
    except ValueError:
        raise BadOptionError(f"'{text}': zero point '{kv.get('zero')}' is not an integer") from None
    lo, hi = RANGES[kind]
    if not lo <= z <= hi:
        raise BadOptionError(f"'{text}': zero point {z} is outside {kind}'s codes [{lo}, {hi}]")
    r = kv.get("round", "even").lower()
    if r not in ROUNDINGS:
        raise BadOptionError(f"'{text}': round must be even or away, got '{r}'")
    return QuantFormat(kind, s, z, r)
