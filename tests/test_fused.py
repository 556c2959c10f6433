"""Fused forms: bias + GELU, GELU then scale, activation times gate with the cast moved."""

from fractions import Fraction

import ml_dtypes
import mpmath as mp
import numpy as np
import pytest
from helpers import is_nearest_even, to_fraction

import audit
from audit.numbers.formats import get_format
from audit.oracle import oracle
from audit.oracle.references import get_reference
from audit.targets.candidates import catalog


def gelu(t):
    return t * mp.ncdf(t)


def gelu_exact(t, scale=1):
    """scale * gelu(t) as an exact rational to ~800 bits, written t - t Q(t) for t > 0 so
    that 36 (1 - 1e-284) stays below 36 (a midpoint once scaled by 3 in E4M3)."""
    t = mp.mpf(t)
    s = Fraction(scale)
    if t > 0:
        return s * to_fraction(t) - s * to_fraction(t * mp.ncdf(-t))
    return s * to_fraction(t * mp.ncdf(t))


def silu(t):
    return t / (1 + mp.exp(-t))


def test_bias_storage_rounds_the_sum_first():
    # bf16, x = 1, b = 2^-8: x + b = 1 + 2^-8 is the midpoint between 1 and 1 + 2^-7 (the
    # spacing at 1), so an unfused add stores 1.0 (ties to even) and GELU sees 1; the fused
    # kernel keeps 1.00390625 in fp32.  gelu(1) = 0.84134 and gelu(1.0039) = 0.84557 round
    # to different bf16 values (spacing 2^-8 there: 215.4 and 216.5 steps).
    bf16, fp32 = get_format("bf16"), get_format("fp32")
    cat = catalog()
    x, b = np.array([1.0]), np.array([2.0**-8])
    st = cat["gelu_bias.storage"].evaluate(x, bf16, fp32, None, b)[0]
    co = cat["gelu_bias.compute"].evaluate(x, bf16, fp32, None, b)[0]
    with mp.workprec(200):
        assert is_nearest_even(bf16, gelu(mp.mpf(1)), st)
        assert is_nearest_even(bf16, gelu(1 + mp.mpf(2) ** -8), co)
    assert st == 215 / 256 and co == 216 / 256


@pytest.mark.parametrize("fmt_name", ["fp8_e4m3", "fp16", "bf16", "fp32"])
def test_bias_and_scale_oracles_against_mpmath(fmt_name):
    fmt = get_format(fmt_name)
    catalog()
    s = fmt.smallest_subnormal
    # cancelling sums (x = -b + tiny), odd subnormal sums (GELU's x/2 ties), wide exponent
    # gaps (the float64 sum inexact), the tails, and random pairs
    xs = [1.0, -1.0, 3 * s, -3 * s, 0.0, 2.0, -5.0, 1e-3, fmt.max_finite, -fmt.max_finite]
    bs = [-1.0 + 2 * s if fmt.p > 4 else -1.0, 1.0, 0.0, -2 * s, s, 2.0**-20, -4.0]
    x = fmt.round(np.repeat(xs, len(bs)))
    b = fmt.round(np.tile(bs, len(xs)))
    rng = np.random.default_rng(3)
    top = fmt.max_ordinal
    x = np.concatenate([x, fmt.from_ordinal(rng.integers(-top, top + 1, 60))])
    b = np.concatenate([b, fmt.from_ordinal(rng.integers(-top, top + 1, 60))])
    ov = oracle.evaluate(get_reference("gelu_bias"), fmt, x, None, b)
    with mp.workprec(800):
        for i in range(len(x)):
            ex = gelu_exact(mp.fadd(x[i], b[i], exact=True))
            r = ov.rounded[i]
            if np.isfinite(r):
                assert is_nearest_even(fmt, ex, r), (x[i], b[i], r)
    xv = fmt.finite_values() if fmt.enumerable else x
    for scale in (0.25, 3.0, 0.1):
        ov = oracle.evaluate(get_reference("gelu_scale"), fmt, xv, {"scale": scale})
        idx = np.random.default_rng(4).choice(len(xv), size=min(60, len(xv)), replace=False)
        with mp.workprec(800):
            for i in idx:
                ex = gelu_exact(xv[i], Fraction(repr(scale)))
                r = ov.rounded[i]
                if np.isfinite(r):
                    assert is_nearest_even(fmt, ex, r), (scale, xv[i], r)


def _rn_bf16(v: float) -> float:
    """bf16 nearest to a float64 value away from midpoints (ml_dtypes goes through float32)."""
    return float(np.array([v]).astype(ml_dtypes.bfloat16)[0])


def test_cast_gate_rounds_twice():
    # compute fp64 (intermediates exact to ~2^-50): swiglu_cast.silu_mul must give
    # RN(RN(silu(a)) * b) and swiglu.silu_mul RN(silu(a) * b); on this grid they differ
    # somewhere (the double rounding), and each matches its own expectation everywhere.
    bf16, fp64 = get_format("bf16"), get_format("fp64")
    a = np.repeat(np.linspace(-4, 4, 33), 9)
    b = np.tile([3.0, -5.0, 7.0, 0.375, 11.0, -13.0, 1.5, 1.0 + 2**-7, 19.0], 33)
    a, b = bf16.round(a), bf16.round(b)
    cat = catalog()
    two = cat["swiglu_cast.silu_mul"].evaluate(a, bf16, fp64, None, b)
    one = cat["swiglu.silu_mul"].evaluate(a, bf16, fp64, None, b)
    differ = 0
    with mp.workprec(200):
        for i in range(len(a)):
            s_exact = silu(mp.mpf(a[i]))
            s_r = _rn_bf16(float(s_exact))
            assert is_nearest_even(bf16, s_exact, s_r)
            assert is_nearest_even(bf16, Fraction(s_r) * Fraction(b[i]), two[i]), (a[i], b[i])
            assert is_nearest_even(bf16, s_exact * mp.mpf(b[i]), one[i]), (a[i], b[i])
            differ += two[i] != one[i]
    assert differ > 0


def test_scale_unfused_double_rounding():
    # fp8_e4m3 with scale 3, compute fp64: the unfused form is RN(RN(gelu(x)) * 3), the
    # fused one RN(3 gelu(x)) (of gelu's float64 value); both checked at every E4M3 value.
    e4m3, fp64 = get_format("fp8_e4m3"), get_format("fp64")
    x = e4m3.finite_values()
    cat = catalog()
    fused = cat["gelu_scale.fused"].evaluate(x, e4m3, fp64, {"scale": 3.0})
    unfused = cat["gelu_scale.unfused"].evaluate(x, e4m3, fp64, {"scale": 3.0})
    differ = 0
    with mp.workprec(200):
        for i in range(len(x)):
            g = gelu(mp.mpf(x[i]))
            if abs(3 * g) >= 464:  # beyond 448 + half its spacing: overflows E4M3 (NaN)
                continue
            # (the float64 value of gelu: at x = 9, 3 gelu(9) = 27 - 3e-18 lies below the
            # midpoint 27 between 26 and 28, but float64's gelu(9) is 9 and the tie goes to 28:
            # what a kernel computing in fp64 returns, and the oracle counts as an error)
            assert is_nearest_even(e4m3, Fraction(float(g)) * 3, fused[i]), x[i]
            r1 = float(e4m3.round([float(g)])[0])
            if abs(g) < 448:
                assert is_nearest_even(e4m3, g, r1)
                if abs(3 * r1) < 464:
                    assert is_nearest_even(e4m3, Fraction(r1) * 3, unfused[i]), x[i]
            differ += fused[i] != unfused[i]
    assert differ > 0


def test_fused_candidates_sweep():
    names = [r.candidate for r in audit.sweep("gelu_bias,gelu_scale", dtype="fp8_e4m3")]
    assert names == [
        "gelu_bias.storage",
        "gelu_bias.compute",
        "gelu_bias.megatron_tanh",
        "gelu_scale.fused",
        "gelu_scale.unfused",
    ]
