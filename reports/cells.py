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


_MD_SPECIAL = {"&": "&amp;", "<": "&lt;", ">": "&gt;", "\\": "&#92;", "|": "\\|"}


def md_text(s) -> str:
    """Any text as the content of a Markdown table cell that renders as that text and nothing
    else: control characters as \\xNN, a newline as a space, ``&``, ``<``, ``>`` and ``\\`` as
    character references (no raw HTML reaches a pull-request comment: a name such as
    ``x<img src=x onerror=...>`` is shown, never parsed), ``|`` escaped (no new cell)."""
    import re

    s = re.sub("[\x00-\x1f\x7f]", lambda m: f"\\x{ord(m.group()):02x}", str(s).replace("\n", " "))
    return "".join(_MD_SPECIAL.get(ch, ch) for ch in s)
