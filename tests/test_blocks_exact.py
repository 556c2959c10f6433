"""Block scales decided from the exact block maximum, not its float64 rounding.

Blocks [m, 1 x 31] whose maximum is f of a power of two m, where f(m) lies within 2^-53 of
a power of two (GELU(16) = 16 (1 - 6.4e-58), SiLU(64) = 64 (1 - 1.6e-28), tanh(20) = 1 -
8.5e-18, softplus(64) = 64 + 1.6e-28): the expected OCP scale, element codes, element
differences and the format's cost are computed here from mpmath at high precision, turned
into exact rationals, and rounded with this file's own integer rounding."""

from __future__ import annotations

from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest

from audit import blocks
from audit.candidates import catalog
from audit.formats import FORMATS

FUNCS = {
    "gelu": lambda x: x / 2 * mp.erfc(-x / mp.sqrt(2)),
    "silu": lambda x: x / (1 + mp.exp(-x)),
    "softplus": lambda x: mp.log1p(mp.exp(x)) if x < 0 else x + mp.log1p(mp.exp(-x)),
    "tanh": mp.tanh,
}


def exact(name: str, x: float) -> Fraction:
    """f(x) as an exact rational, from mpmath at 200 + x^2 bits (GELU's tail e^-x^2/2 and
    the others' e^-|x| are then resolved with more than 100 bits to spare)."""
    with mp.workprec(300 + int(x * x)):
        v = FUNCS[name](mp.mpf(x))
        sign, man, exp, _ = v._mpf_
        q = Fraction(int(man)) * Fraction(2) ** int(exp)
        return -q if sign else q


def floor_log2(q: Fraction) -> int:
    """floor(log2 q) of a positive rational, by integer comparisons."""
    e = q.numerator.bit_length() - q.denominator.bit_length()
    while Fraction(2) ** e > q:
        e -= 1
    while Fraction(2) ** (e + 1) <= q:
        e += 1
    return e


def rn_e4m3(q: Fraction) -> Fraction:
    """RN_E4M3(q), ties to even, saturating at +-448 (3 fraction bits, emin -6)."""
    if q == 0:
        return Fraction(0)
    a = abs(q)
    step = Fraction(2) ** (max(floor_log2(a), -6) - 3)
    n, r = divmod(a, step)  # n an integer, 0 <= r < step
    n = int(n)
    if r * 2 > step or (r * 2 == step and n % 2):
        n += 1
    v = min(n * step, Fraction(448))
    return v if q > 0 else -v


def ulp_e4m3(q: Fraction) -> Fraction:
    return Fraction(2) ** (max(floor_log2(abs(q)), -6) - 3) if q else Fraction(2) ** -9


def ocp_exponent(amax: Fraction) -> int:
    return floor_log2(amax) - 8 if amax else -127  # E4M3's emax is 8


CASES = [
    # (candidate, function, block maximum's input, the exact maximum's side of 2^j)
    ("gelu.erf", "gelu", 16.0),
    ("gelu.erf", "gelu", 8.0),
    ("gelu.tanh", "gelu", 128.0),
    ("gelu.erf", "gelu", 64.0),  # 64 (1 - e^-2048): past 300 bits, the near form decides
    ("silu.exp", "silu", 64.0),
    ("silu.sigmoid", "silu", 128.0),
    ("tanh.exp", "tanh", 20.0),
    ("tanh.sigmoid", "tanh", 64.0),
    ("softplus.log1p", "softplus", 64.0),
]


@pytest.mark.parametrize("cid,fname,m", CASES)
def test_block_scale_from_the_exact_maximum(cid, fname, m):
    bf = blocks.get_block_format("mxfp8_e4m3")
    x = np.array([m] + [1.0] * 31 + [1.0] * 31 + [m])  # two blocks, the maximum first and last
    c = catalog()[cid]
    r = blocks.audit(c, bf, x, FORMATS["bf16"], FORMATS["fp32"])
    rq, _, _ = blocks.reference(bf, c.ref, x, c.ref.with_defaults(c.reference_params(c.resolve_params(None))))
    f = [exact(fname, float(v)) for v in x]
    y = c.evaluate(x, FORMATS["fp32"], FORMATS["fp32"], {})
    want_diff = elems_diff = 0
    cost = Fraction(0)
    for b in range(2):
        fb = f[32 * b : 32 * b + 32]
        yb = [Fraction(float(v)) for v in y[32 * b : 32 * b + 32]]
        k = ocp_exponent(max(abs(v) for v in fb))
        kc = ocp_exponent(max(abs(v) for v in yb))
        X, Xc = Fraction(2) ** k, Fraction(2) ** kc
        assert rq.scale[b] == float(X), (b, rq.scale[b], float(X))
        want_diff += k != kc
        ref_el = [rn_e4m3(v / X) for v in fb]
        cand_el = [rn_e4m3(v / Xc) for v in yb]
        assert rq.elems[b].tolist() == [float(e) for e in ref_el]
        elems_diff += sum(a != b_ for a, b_ in zip(ref_el, cand_el))
        for e, v in zip(ref_el, fb):
            cost = max(cost, abs(e * X - v) / (X * ulp_e4m3(v / X)))
    assert r.scale_diff_blocks == want_diff
    assert r.mismatches == elems_diff
    # (a float64 figure from the float64 exact values: good to the fast path's 2^-36)
    assert r.ref_max_elem_ulp == pytest.approx(float(cost), rel=2.0**-36, abs=2.0**-36)


def test_gelu16_case_of_the_issue():
    """[16, 1 x 31] in bf16, gelu.erf, mxfp8_e4m3: the exact maximum 16 (1 - 6.4e-58) is in
    [8, 16), so the scale is 2^-5 (not 2^-4); 16 / 2^-5 = 512 saturates at 448: cost 2 ULP
    (|14 - 16| in units of 2^-5 * 32), and every element differs from the fp32 candidate's,
    whose maximum is 16.0 exactly (scale 2^-4)."""
    assert exact("gelu", 16.0) < 16
    bf = blocks.get_block_format("mxfp8_e4m3")
    x = np.array([16.0] + [1.0] * 31)
    r = blocks.audit(catalog()["gelu.erf"], bf, x, FORMATS["bf16"], FORMATS["fp32"])
    assert (r.scale_diff_blocks, r.mismatches, r.ref_max_elem_ulp) == (1, 32, 2.0)
    assert r.worst_block["scale_ref"] == 2.0**-5 and r.worst_block["scale_candidate"] == 2.0**-4


def test_enclosure_steps_outward():
    """_enclose's bounds hold the real v -+ slack even where rounding lands on a boundary:
    16 - 2^-50 rounds to 16 in float64 (half an ulp below 16 is 2^-50), the lower bound is
    below 16."""
    lo, hi = blocks._enclose(np.array([16.0]), np.array([2.0**-50]))
    assert float(16 - 2.0**-50) == 16.0 and lo[0] < 16.0 < hi[0]
    assert Fraction(lo[0]) <= 16 - Fraction(2) ** -50 and Fraction(hi[0]) >= 16 + Fraction(2) ** -50


@pytest.mark.parametrize("out", ["mxfp8_e4m3", "nvfp4"])
def test_exhaustive_chunks_agree(monkeypatch, out):
    """The exhaustive pair mode gives the same figures in chunks of 16 input rows as in one
    chunk (state carried across chunks: the exact values' error bounds)."""
    bf = blocks.get_block_format(out)
    c = catalog()["gelu.erf"]
    one = blocks.exhaustive(c, bf, FORMATS["fp8_e4m3"], FORMATS["fp32"]).to_dict()
    monkeypatch.setattr(blocks, "EXHAUSTIVE_ROWS", 16)
    many = blocks.exhaustive(c, bf, FORMATS["fp8_e4m3"], FORMATS["fp32"]).to_dict()
    for d in (one, many):
        d.pop("seconds")
    # (the mean is a float64 sum: its order changes with the chunks)
    assert one.pop("mean_elem_ulp") == pytest.approx(many.pop("mean_elem_ulp"), rel=1e-14)
    assert one == many
