"""Functions for the diff and consistency tests (imported as diff_funcs:NAME)."""

import numpy as np


def relu6_exact(x):
    return np.clip(x, 0, 6).astype(x.dtype)


def relu6_leaky(x):
    """relu6 with a bug: x itself on [-1, 0)."""
    return np.where((x < 0) & (x >= -1), x, np.clip(x, 0, 6)).astype(x.dtype)


def relu6_low(x):
    """relu6 clamped at 5.5 instead of 6."""
    return np.clip(x, 0, 5.5).astype(x.dtype)
