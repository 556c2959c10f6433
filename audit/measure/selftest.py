"""``actaudit selftest``: the oracle checked against mpmath alone.

For every reference and format, at seeded random inputs and at adversarial ones (the
subnormal edge, the largest values, the neighbourhood of the saturation thresholds, zero,
and the inputs where the fast path declined to decide), the production oracle (fast path,
ambiguity handling, near-power-of-two settling, disk cache) must give the same correctly
rounded value as mpmath alone, and an exact value on the same side of every power of two.

Signed zeros: the inputs include -0 and +0 and the tails where f underflows every format
(and float64); a zero result must carry the sign of mpmath's value (at 120 + 2 log2|x|
bits), and fp64 (mpmath at every point) must give the sign that fp16's fast path gives at
the same inputs (``zeros`` checks).  Values beyond float64: where f exceeds float64's range
(exp(65504)), the ULP and relative errors of the format's largest value as a result, as
the sweep's metrics compute them, must equal those computed here from the definition with
mpmath (``beyond`` checks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mpmath as mp
import numpy as np

from audit.measure import metrics
from audit.numbers.formats import FORMATS, Format
from audit.oracle import (
    oracle,  # noqa: F401  (backward, fused: their references are checked too)
)
from audit.oracle.references import REFERENCES, Reference

FORMATS_CHECKED = (
    "fp8_e4m3",
    "fp8_e5m2",
    "fp16",
    "bf16",
    "fp32",
    "fp8_e4m3fnuz",
    "fp8_e5m2fnuz",
    "fp6_e3m2",
    "fp6_e2m3",
    "fp4_e2m1",
    "tf32",
)


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
    ords.append(
        np.array(
            [
                s * (k * step + d)
                for k in range(0, top // step + 1, max(1, top // step // 16))
                for d in (-1, 0, 1)
                for s in (1, -1)
            ]
        )
    )
    o = np.unique(np.clip(np.concatenate(ords), -top, top))
    x = np.concatenate([[-0.0], fmt.from_ordinal(o)])  # -0 as well as +0
    if ref.arity == 2:
        return x, fmt.from_ordinal(np.clip(rng.integers(-top, top + 1, len(x)), -top, top))
    if fmt.enumerable:  # the inputs where the fast path declined, and the saturation edges
        full = fmt.finite_values()
        ov = oracle.evaluate(ref, fmt, full)
        rn = ov.rounded
        change = np.flatnonzero(rn[1:] != rn[:-1])
        near = np.unique(
            np.clip(np.concatenate([change[:8], change[-8:], change[-8:] + 1]), 0, len(full) - 1)
        )
        x = np.concatenate([x, full[near]])
        x = x[np.unique(x.view(np.uint64), return_index=True)[1]]  # keeps -0 and +0 apart
    return x, None


def _mp_value(ref: Reference, args, params, bits: int = 120):
    """f at ``bits`` plus 2 log2|x| bits (exp(-x^2/2) at x = 1e38 needs x^2 exactly)."""
    extra = 2 * max([0] + [math.frexp(a)[1] for a in args])
    with mp.workprec(bits + extra):
        return ref.mp(*(mp.mpf(a) for a in args), **params)


def _exact(ref: Reference, x, x2, params) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """float(f), whether f < 0 and whether f = 0 exactly (mpmath's sign and zero: kept
    where f underflows float64)."""
    out, neg, nil = np.empty(len(x)), np.zeros(len(x), bool), np.zeros(len(x), bool)
    for i in range(len(x)):
        args = (float(x[i]),) if x2 is None else (float(x[i]), float(x2[i]))
        v = _mp_value(ref, args, params)
        out[i], neg[i], nil[i] = float(v), bool(v < 0), bool(v == 0)
    return out, neg, nil


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
    f, neg, nil = _exact(ref, x, x2, params)
    # the sign of every result: mpmath's where f != 0 (also where f underflows F, or
    # float64: 0 + -0 = +0 in a fast path); exact zeros are checked by the fp64 checks
    # (mpmath sees -0 as 0: its infinity at a pole 1/-0 has no sign; checked below)
    # (formats without -0, the fnuz types, give +0 for a negative value that rounds to 0)
    bad |= (
        ~nil
        & ~np.isnan(got.rounded)
        & (np.signbit(got.rounded) != neg)
        & ~(np.isinf(f) & (x == 0))
        & ~((got.rounded == 0) & (not fmt.neg_zero))
    )
    with np.errstate(all="ignore"):
        tol = np.abs(f) * max(ref.rel_err, oracle.MIN_REL_ERR) * 2 + oracle.FAST_ABS_TOL
        far = np.abs((got.hi - f) + got.lo) > tol
    bad |= far & np.isfinite(f) & np.isfinite(got.hi)
    ex = ""
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        arg = f"({x[i]!r}, {x2[i]!r})" if x2 is not None else f"{x[i]!r}"
        ex = (
            f"at x = {arg}: oracle {got.rounded[i]!r} (exact {got.hi[i]!r}), "
            f"mpmath {want.rounded[i]!r} (exact {want.hi[i]!r})"
        )
    return Check(ref.name, fmt.name, len(x), int(bad.sum()), ex)


def check_zeros_fp64(ref: Reference, n: int = 64) -> Check:
    """fp64 (mpmath at every point) against fp16 (fast path and declared signs): the same
    sign bit at -0, +0 and the fp16 inputs whose result is a zero (underflow tails, exact
    zeros such as hardswish(-4) = -0); and at -0 and +0 both give the sign of f's limit
    there where f(0) is 0 or a pole (tanh(-0) = -0 and 1/-0 = -inf: f(-2**-300) < 0)."""
    h = FORMATS["fp16"]
    full = h.finite_values()
    params = ref.with_defaults({})
    rh = oracle.evaluate(ref, h, full, params).rounded
    zeros = np.flatnonzero(rh == 0)
    pick = zeros[np.linspace(0, len(zeros) - 1, min(n, len(zeros))).astype(int)] if len(zeros) else zeros
    x = np.concatenate([[-0.0, 0.0], full[pick]])
    want = np.concatenate([oracle.evaluate(ref, h, x[:2], params).rounded, rh[pick]])
    got = oracle.evaluate(ref, FORMATS["fp64"], x, params).rounded
    bad = ~np.isnan(want) & (np.signbit(got) != np.signbit(want))
    # at -0 and +0, where f(0) = 0 and f(-+2**-300) != 0, the sign of that limit
    for i in (0, 1):
        at0, side = _mp_value(ref, (0.0,), params), _mp_value(ref, (math.copysign(2.0**-300, x[i]),), params)
        if (at0 == 0 or mp.isinf(at0)) and side != 0 and not mp.isnan(side):
            bad[i] |= (np.signbit(got[i]) != (side < 0)) | (np.signbit(want[i]) != (side < 0))
    ex = ""
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        ex = f"at x = {x[i]!r}: fp64 {got[i]!r}, fp16 {want[i]!r}"
    return Check(ref.name, "fp64 zeros", len(x), int(bad.sum()), ex)


def check_beyond(ref: Reference, fmt: Format, n: int = 150, seed: int = 0) -> Check | None:
    """Where f exceeds float64's range, a result of F's largest value (of f's sign): the
    sweep's ULP and relative errors against the definition, in mpmath."""
    if fmt.saturate:  # +-max is the correct rounding there (overflow_ok): no error figures
        return None
    x, x2 = points(ref, fmt, n, seed)
    params = ref.with_defaults({})
    f, neg, _ = _exact(ref, x, x2, params)
    sel = np.flatnonzero(np.isinf(f))
    if not len(sel):
        return None
    x = x[sel]
    x2 = None if x2 is None else x2[sel]
    r = np.where(neg[sel], -fmt.max_finite, fmt.max_finite)
    ov = oracle.evaluate(ref, fmt, x, params, x2)
    e = metrics.point_errors(
        x,
        r,
        ov,
        fmt,
        x2,
        beyond=lambda idx, g: oracle.beyond_errors(
            ref, fmt, x[idx], g, params, None if x2 is None else x2[idx]
        ),
    )
    bad = np.zeros(len(x), bool)
    for i in range(len(x)):
        args = (float(x[i]),) if x2 is None else (float(x[i]), float(x2[i]))
        v = _mp_value(ref, args, params, bits=200)
        if not mp.isfinite(v):  # a pole (1/0): infinitely many ulps, relative error 1
            bad[i] = not (
                math.isinf(e.ulp_err[i]) and e.rel_err[i] == 1.0 and e.cls[i] == metrics.OVERFLOW_MISS
            )
            continue
        with mp.workprec(264 + 2 * max([0] + [math.frexp(a)[1] for a in args])):
            d = abs(mp.mpf(float(r[i])) - v)
            ulp = mp.ldexp(1, max(int(mp.floor(mp.log(abs(v), 2))), fmt.emin) - fmt.p + 1)
            u, rel = float(d / ulp), float(d / abs(v))
        bad[i] = not (
            abs(e.ulp_err[i] - u) <= 1e-9 * u and e.rel_err[i] == rel and e.cls[i] == metrics.OVERFLOW_MISS
        )
    ex = ""
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        ex = f"at x = {x[i]!r}: ULP error {e.ulp_err[i]!r}, relative {e.rel_err[i]!r}"
    return Check(ref.name, f"{fmt.name} beyond float64", len(x), int(bad.sum()), ex)


def run(references=None, formats=FORMATS_CHECKED, n: int = 150, seed: int = 0, progress=None):
    from audit.errors import BadOptionError

    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise BadOptionError(f"--seed must be an integer in [0, 2^63), got {seed!r}")
    out = []
    for name in references or sorted(REFERENCES):
        ref = REFERENCES[name]
        for f in formats:
            out.append(check(ref, FORMATS[f], n, seed))
            b = check_beyond(ref, FORMATS[f], n, seed)
            if b is not None:
                out.append(b)
            if progress:
                progress(1)
        if ref.arity == 1:
            out.append(check_zeros_fp64(ref))
    return out


__all__ = ["run", "check", "Check"]
