"""The cells of every text table: numbers in at most 10 characters, shares in percent."""

from __future__ import annotations

import math

from audit.io import format_number

num = format_number  # the one number format of every text table (audit/io.py)


def percent(frac) -> str:
    """The correctly rounded share in percent, truncated (not rounded) to 2 decimals: 100.00
    only when every input is correctly rounded."""
    if frac is None or not math.isfinite(float(frac)):
        return "-"
    return f"{math.floor(float(frac) * 10000) / 100:.2f}"
