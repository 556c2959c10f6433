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

from audit.errors import BadOptionError
from audit.measure import blocks
from audit.numbers.formats import FORMATS
from audit.targets.candidates import catalog

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


# ------------------------------------------------- exact values that are not finite numbers
def test_a_block_holding_an_infinite_or_nan_exact_value_is_a_nan_block():
    """log(0) = -inf and log(-1) (NaN) have no finite maximum: their blocks' reference scale
    is NaN and every element NaN (block-scaled.md), as the candidate's own quantization of
    -inf and NaN gives; the block [5 x 32] next to them keeps its exact scale and codes:
    amax = log 5 in [1, 2), k = 0 - 8, each element RN_E4M3(256 log 5).  No scale or element
    differs, and no NaN element is the candidate's fault."""
    bf = blocks.get_block_format("mxfp8_e4m3")
    x = np.array([0.0, 1.0, 2.0] + [3.0] * 29 + [-1.0] + [2.0] * 31 + [5.0] * 32)
    q, f, n = blocks.reference(bf, catalog()["log.libm"].ref, x, {})
    with mp.workprec(200):
        l5 = mp.log(5)
        want = rn_e4m3(Fraction(int(mp.floor(l5 * 2**150 * 256)), 2**150))  # (256 log 5 is no tie)
    assert floor_log2(Fraction(int(mp.floor(l5 * 2**60)), 2**60)) == 0
    assert np.isnan(q.scale[:2]).all() and q.scale[2] == 2.0**-8
    assert np.isnan(q.elems[:2]).all() and (q.elems[2] == float(want)).all() and float(want) == 416.0
    assert np.isnan(q.values[:2]).all()
    assert f[0] == -np.inf and np.isnan(f[32]) and f[64] == float(l5)
    assert n == 2  # the two inputs the fast path left unbounded, evaluated by mpmath
    r = blocks.audit(catalog()["log.libm"], bf, x, FORMATS["bf16"], FORMATS["fp32"])
    assert (r.scale_diff_blocks, r.mismatches, r.nan_elements) == (0, 0, 0)
    for out in ("nvfp4", "mxfp4_e2m1"):
        bf = blocks.get_block_format(out)
        xx = x if out != "nvfp4" else np.array([0.0] + [2.0] * 15 + [-1.0] + [2.0] * 15 + [5.0] * 16)
        q, _, n = blocks.reference(bf, catalog()["log.libm"].ref, xx, {})
        assert n == 2  # (the two; nothing else is near a boundary)
        assert np.isnan(q.scale[:2]).all() and np.isfinite(q.scale[2:]).all() and np.isnan(q.values[:2]).all()
        assert np.isfinite(q.values[2:]).all()
        if out == "nvfp4":  # T from the finite blocks' maximum, log 5: RN_fp32(log 5 / 2688)
            with mp.workprec(200):
                assert q.tensor_scale == float(np.float32(float(l5 / 2688)))


def test_an_exact_value_beyond_float64_decides_its_block():
    """exp(800) = 2.7e347 overflows float64 (the fast path says inf), yet its block's exact
    maximum is that finite number: k = floor(log2 exp(800)) - 8 = 1146, clamped to 127, so
    X = 2^127, exp(800) / 2^127 saturates to 448 and exp(1) / 2^127 rounds to 0."""
    bf = blocks.get_block_format("mxfp8_e4m3")
    x = np.array([800.0] + [1.0] * 31)
    with mp.workprec(100):
        assert mp.floor(mp.log(mp.exp(800), 2)) - 8 > 127 and mp.e / mp.mpf(2) ** 127 < mp.mpf(2) ** -10
    q, f, n = blocks.reference(bf, catalog()["exp.libm"].ref, x, {})
    assert q.scale.tolist() == [2.0**127] and q.elems[0].tolist() == [448.0] + [0.0] * 31 and n >= 1
    assert f[0] == np.inf  # (the float64 figure of a value beyond float64)


def test_a_reference_without_a_fast_path():
    """Every value by mpmath (no fast path): the same quantized blocks as through the fast
    path, every element counted as mpmath's."""
    import dataclasses

    ref = catalog()["gelu.erf"].ref
    bare = dataclasses.replace(ref, fast=None)
    x = np.array([16.0] + [1.0] * 31 + [-3.0, 0.5] * 16)
    for out in ("mxfp8_e4m3", "nvfp4"):
        bf = blocks.get_block_format(out)
        a, fa, _ = blocks.reference(bf, ref, x, {})
        b, fb, n = blocks.reference(bf, bare, x, {})
        assert b.scale.tolist() == a.scale.tolist() and b.elems.tolist() == a.elems.tolist()
        assert b.tensor_scale == a.tensor_scale and n == len(x)
        # every figure mpmath's (the fast path's within its bound)
        assert fb.tolist() == [float(exact("gelu", float(v))) for v in x]
        assert np.all(np.abs(fa - fb) <= np.abs(fb) * 2.0**-40)


@pytest.mark.parametrize("out", ["mxfp8_e4m3", "nvfp4"])
def test_exhaustive_pairs_with_nan_exact_values(out):
    """log over every fp4_e2m1 input: 0 and the seven negative inputs have no finite exact
    value, so every pair holding one is a NaN block, for the reference as for the candidate
    (no scale difference, no NaN element counted, no traceback); the 49 pairs of positive
    inputs are those of the sampled audit of the blocks {x, m, 1, ..., 1} (log 1 = 0 is
    exact: the 1s change no maximum and no figure), whose element differences count both x
    and m: twice the pairs'."""
    bf = blocks.get_block_format(out)
    c = catalog()["log.libm"]
    r = blocks.exhaustive(c, bf, FORMATS["fp4_e2m1"], FORMATS["fp32"])
    pos = [v for v in FORMATS["fp4_e2m1"].finite_values().tolist() if v > 0]
    assert len(pos) == 7 and r.elements == 15 * 15 and r.nan_elements == 0
    B = bf.block
    x = np.array([v for a in pos for m in pos for v in [a, m] + [1.0] * (B - 2)])
    s = blocks.audit(c, bf, x, FORMATS["fp4_e2m1"], FORMATS["fp32"])
    assert s.blocks == 49 and s.nan_elements == 0
    assert r.scale_diff_blocks == s.scale_diff_blocks and r.mismatches * 2 == s.mismatches
    assert r.max_elem_ulp == s.max_elem_ulp and r.max_added_ulp == s.max_added_ulp


@pytest.mark.parametrize("out", ["mxfp8_e4m3", "nvfp4"])
def test_nan_reference_blocks_add_no_figure(out):
    """A candidate finite where the exact value is not (1.0 at log's 0 and -3): those blocks
    are NaN for the reference, so their elements have no error (no fallback decode scale, no
    warning), the worst block is the finite one, and the reference's tensor scale is that of
    the finite block alone (NaN blocks take no part in it, as in the candidate's own
    quantization): every figure but the counts equals the finite block's own audit."""
    import warnings

    from tests.test_mutants_blocks import Fake

    bf = blocks.get_block_format(out)
    B = bf.block
    good = np.linspace(0.5, 50, B).astype(np.float32).astype(np.float64)
    x = np.concatenate([[0.0] + [2.0] * (B - 1), [-3.0] + [2.0] * (B - 1), good])
    y = [1.0 if v <= 0 else float(np.log(v)) for v in x]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = blocks.audit(Fake("log", y), bf, x, FORMATS["fp32"], FORMATS["fp32"])
        one = blocks.audit(Fake("log", y[2 * B :]), bf, good, FORMATS["fp32"], FORMATS["fp32"])
    assert r.max_elem_ulp == one.max_elem_ulp and r.mean_elem_ulp == one.mean_elem_ulp
    assert r.max_added_ulp == one.max_added_ulp and r.ref_max_elem_ulp == one.ref_max_elem_ulp
    assert r.worst_block["index"] == 2 and r.worst_block["max_elem_ulp"] == one.worst_block["max_elem_ulp"]
    assert (r.nan_elements, r.scale_diff_blocks - one.scale_diff_blocks) == (0, 2)
    assert r.mismatches == one.mismatches + 2 * B  # (numbers against NaN)
    if out == "nvfp4":
        q, _, _ = blocks.reference(bf, catalog()["log.libm"].ref, x, {})
        with mp.workprec(24):
            assert q.tensor_scale == float(mp.log(float(good.max())) / 2688)
        assert r.tensor_scale == one.tensor_scale


def test_a_negative_seed_is_refused():
    with pytest.raises(BadOptionError) as e:
        blocks.inputs("normal:std=1", 64, -1, FORMATS["bf16"], 32)
    assert str(e.value) == "seed must be at least 0, got -1"
