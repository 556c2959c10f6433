"""Candidates of quantized outputs: a function from input codes (and their real values) to
output codes, for engine ops that read and write int8/uint8/int16 and for catalog formulas
evaluated in a float compute format and quantized."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from audit.numbers.formats import Format
from audit.numbers.quant import QuantFormat


@dataclass
class QuantCandidate:
    """Output codes per input: ``fn(x_codes, x_values) -> float64 codes``."""

    id: str
    reference: str
    formula: str
    source: str
    fn: Callable[..., Any]
    compute: str = ""
    identity: dict = field(default_factory=dict)  # an engine op's (audit/engines)

    def codes(self, x_codes, x) -> np.ndarray:
        return np.asarray(self.fn(x_codes, x), dtype=np.float64)


def float_candidate(cand, out: QuantFormat, compute: Format, params: dict) -> QuantCandidate:
    """A catalog candidate as a float kernel: dequantized input, the formula in the compute
    format, the result quantized with Q's rounding."""
    cf = cand.compute_format(compute)

    def fn(_codes, x):
        return out.quantize(cand.evaluate(x, cf, cf, params))

    return QuantCandidate(cand.id, cand.reference, cand.formula, cand.source, fn, cf.name)
