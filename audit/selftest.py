"""``actaudit selftest``: the oracle checked against mpmath alone.

For every reference and format, at seeded random inputs and at adversarial ones (the
subnormal edge, the largest values, the neighbourhood of the saturation thresholds, zero,
and the inputs where the fast path declined to decide), the production oracle (fast path,
ambiguity handling, near-power-of-two settling, disk cache) must give the same correctly
rounded value as mpmath alone, and an exact value on the same side of every power of two.
"""

from __future__ import annotations

from dataclasses import dataclass

import mpmath as mp
import numpy as np

from . import oracle
from .formats import FORMATS, Format
from .references import REFERENCES, Reference

FORMATS_CHECKED = ("fp8_e4m3", "fp8_e5m2", "fp16", "bf16", "fp32", "fp8_e4m3fnuz", "fp8_e5m2fnuz",
                   "fp6_e3m2", "fp6_e2m3", "fp4_e2m1", "tf32")


@dataclass
class Check:
    reference: str
    fmt: str
    points: int
    disagreements: int
    example: str = ""


def points(ref: Reference, fmt: Format, n: int, seed: int) -> tuple[np.ndarray, np.ndarray | None]:
    rng = np.random.default_rng(seed)
    top = fmt.max_ordinal
    ords = [rng.integers(-top, top + 1, n)]
    edge = np.array([0, 1, -1, 2, -2, top, -top, top - 1, -(top - 1)])
    step = 1 << fmt.mantissa_bits  # around the smallest normal, 1.0 and every binade edge
    ords.append(edge)
    ords.append(np.array([s * (k * step + d) for k in range(0, top // step + 1, max(1, top // step // 16))
                          for d in (-1, 0, 1) for s in (1, -1)]))
    o = np.unique(np.clip(np.concatenate(ords), -top, top))
    x = fmt.from_ordinal(o)
    if ref.arity == 2:
        return x, fmt.from_ordinal(np.clip(rng.integers(-top, top + 1, len(x)), -top, top))
    if fmt.enumerable:  # the inputs where the fast path declined, and the saturation edges
        full = fmt.finite_values()
        ov = oracle.evaluate(ref, fmt, full)
        rn = ov.rounded
        change = np.flatnonzero(rn[1:] != rn[:-1])
        near = np.unique(np.clip(np.concatenate([change[:8], change[-8:], change[-8:] + 1]), 0, len(full) - 1))
        x = np.unique(np.concatenate([x, full[near]]))
    return x, None


def _exact(ref: Reference, x, x2, params) -> np.ndarray:
    out = np.empty(len(x))
    with mp.workprec(120):
        for i in range(len(x)):
            args = (mp.mpf(x[i]),) if x2 is None else (mp.mpf(x[i]), mp.mpf(x2[i]))
            out[i] = float(ref.mp(*args, **params))
    return out


def check(ref: Reference, fmt: Format, n: int = 150, seed: int = 0) -> Check:
    x, x2 = points(ref, fmt, n, seed)
    params = ref.with_defaults({})
    got = oracle.evaluate(ref, fmt, x, params, x2)
    want = oracle.exact_points(ref, x, fmt, params, x2)
    bad = ~((got.rounded == want.rounded) | (np.isnan(got.rounded) & np.isnan(want.rounded)))
    # the exact value's side of a power of two, where it matters: above the smallest normal
    # (ulp_F is the same on both sides of 2^emin, where the oracle need not decide it; this
    # comes up in formats with emin = 0, fp6_e2m3 and fp4_e2m1, at f = +-1)
    p2 = (np.frexp(np.abs(want.hi))[0] == 0.5) & (np.abs(want.hi) > fmt.smallest_normal)
    known = ~got.unsure if got.unsure is not None else np.ones(len(x), bool)
    bad |= p2 & known & (np.sign(got.lo) != np.sign(want.lo))
    # and the exact value itself, to the fast path's stated bound, against 120-bit mpmath
    f = _exact(ref, x, x2, params)
    with np.errstate(all="ignore"):
        tol = np.abs(f) * max(ref.rel_err, oracle.MIN_REL_ERR) * 2 + oracle.FAST_ABS_TOL
        far = np.abs((got.hi - f) + got.lo) > tol
    bad |= far & np.isfinite(f) & np.isfinite(got.hi)
    ex = ""
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        arg = f"({x[i]!r}, {x2[i]!r})" if x2 is not None else f"{x[i]!r}"
        ex = (f"at x = {arg}: oracle {got.rounded[i]!r} (exact {got.hi[i]!r}), "
              f"mpmath {want.rounded[i]!r} (exact {want.hi[i]!r})")
    return Check(ref.name, fmt.name, len(x), int(bad.sum()), ex)


def run(references=None, formats=FORMATS_CHECKED, n: int = 150, seed: int = 0, progress=None):
    out = []
    for name in references or sorted(REFERENCES):
        ref = REFERENCES[name]
        for f in formats:
            out.append(check(ref, FORMATS[f], n, seed))
            if progress:
                progress(1)
    return out


__all__ = ["run", "check", "Check"]
