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


def leaky_ignores_alpha(x, alpha=0.01):
    """leaky_relu that ignores its parameter (the slope is always 0.01)."""
    return np.where(x >= 0, x, x * np.float32(0.01)).astype(x.dtype)


def leaky_honest(x, alpha=0.01):
    return np.where(x >= 0, x, x * np.float32(alpha)).astype(x.dtype)


def gelu_vector_tail(x):
    """A kernel with an 8-wide vector loop (tanh-GELU) and a scalar tail (erf GELU): its
    result at a value depends on the array's length."""
    from scipy.special import erfc

    flat = np.asarray(x, dtype=np.float64).reshape(-1)
    k = flat.size // 8 * 8
    out = np.empty(flat.size)
    v, t = flat[:k], flat[k:]
    with np.errstate(all="ignore"):
        out[:k] = 0.5 * v * (1 + np.tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))
        out[k:] = 0.5 * t * erfc(-t * 0.7071067811865476)
    return out.astype(x.dtype).reshape(np.shape(x))
