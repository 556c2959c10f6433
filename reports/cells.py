"""The cells of every text table: numbers in at most 10 characters, shares in percent."""

from __future__ import annotations

import math

from audit.io import special_number_text


def num(v) -> str:
    """A number in at most 10 characters, 3 significant digits: 2040, 15.2, 0.251, 1.92e-3,
    7.07e4; '-' for missing or NaN; integers below 10^5 in full."""
    special = special_number_text(v)
    if special is not None:
        return special
    v = float(v)
    a = abs(v)
    if v == int(v) and a < 1e5:
        return str(int(v))
    if 1e-3 <= a < 1e5:
        decimals = max(0, 2 - math.floor(math.log10(a)))
        s = f"{v:.{decimals}f}"
        if float(s) != 0 and abs(float(s)) >= 1e5:  # 99999.7 rounds up to 100000
            return _exp(v)
        return s
    return _exp(v)


def _exp(v: float) -> str:
    m, _, e = f"{v:.2e}".partition("e")
    m = m.rstrip("0").rstrip(".")
    return f"{m}e{int(e)}"


def percent(frac) -> str:
    """The correctly rounded share in percent, truncated (not rounded) to 2 decimals: 100.00
    only when every input is correctly rounded."""
    if frac is None or math.isnan(float(frac)):
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
