"""Block-scaled outputs: the reference quantization against an independent implementation on
exact rationals (mpmath values, Fractions), hand-worked blocks for both scale rules, NaN
blocks, scale differences, inputs and the CLI."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest

from audit.errors import BadFileError, BadOptionError
from audit.measure import blocks
from audit.numbers.formats import FORMATS
from audit.targets.candidates import Candidate, catalog

GELU = lambda x: x * (1 + mp.erf(x / mp.sqrt(2))) / 2  # noqa: E731


def exact(x: float) -> Fraction:
    with mp.workprec(200):
        v = GELU(mp.mpf(x))
        if v == 0:
            return Fraction(0)
        m, e = mp.frexp(v)
        return Fraction(int(mp.ldexp(m, 200))) * Fraction(2) ** (e - 200)


def floor_log2(a: Fraction) -> int:
    e = a.numerator.bit_length() - a.denominator.bit_length()
    return e if Fraction(2) ** e <= a else e - 1


def rn(a: Fraction, p: int, emin: int, vmax: float) -> Fraction:
    """Round to nearest, ties to even, p bits, exponent >= emin, saturating at vmax."""
    if a == 0:
        return Fraction(0)
    s, a = (-1 if a < 0 else 1), abs(a)
    q = max(floor_log2(a), emin) - (p - 1)
    w = a / Fraction(2) ** q
    n = math.floor(w)
    d = w - n
    if d > Fraction(1, 2) or (d == Fraction(1, 2) and n % 2):
        n += 1
    return s * min(n * Fraction(2) ** q, Fraction(vmax))


ELEM = {
    "mxfp8_e4m3": (4, -6, 448, 8),
    "mxfp8_e5m2": (3, -14, 57344, 15),
    "mxfp6_e3m2": (3, -2, 28, 4),
    "mxfp6_e2m3": (4, 0, 7.5, 2),
    "mxfp4_e2m1": (2, 0, 6, 2),
}


def mx_ref(fs: list[Fraction], name: str, rule: str) -> tuple[int, list[Fraction]]:
    p, emin, vmax, emax = ELEM[name]
    amax = max(abs(f) for f in fs)
    if amax == 0:
        k = -127
    elif rule == "ocp":
        k = floor_log2(amax) - emax
    else:
        k = -200
        while amax > Fraction(vmax) * Fraction(2) ** k:
            k += 1
    k = max(min(k, 127), -127)
    X = Fraction(2) ** k
    return k, [rn(f / X, p, emin, vmax) * X for f in fs]


@pytest.mark.parametrize("name", list(ELEM))
@pytest.mark.parametrize("rule", ["ocp", "ceil"])
def test_mx_reference_against_rationals(name, rule):
    bf = blocks.get_block_format(name, rule)
    x = blocks.inputs("normal:std=3", 4 * 32, 7, FORMATS["bf16"], 32)
    q, _, _ = blocks.reference(bf, catalog()["gelu.erf"].ref, x, {})
    for b in range(4):
        fs = [exact(float(v)) for v in x[32 * b : 32 * b + 32]]
        k, vals = mx_ref(fs, name, rule)
        assert q.scale[b] == 2.0**k
        assert q.values[b].tolist() == [float(v) for v in vals], (name, rule, b)


@pytest.mark.parametrize("rule", ["ocp", "ceil"])
def test_nvfp4_reference_against_rationals(rule):
    bf = blocks.get_block_format("nvfp4", rule)
    x = blocks.inputs("uniform:lo=-6,hi=3", 6 * 16, 11, FORMATS["bf16"], 16)
    q, _, _ = blocks.reference(bf, catalog()["gelu.erf"].ref, x, {})
    fs = [exact(float(v)) for v in x]
    amax_t = max(abs(f) for f in fs)
    T = rn(amax_t / 2688, 24, -126, 3.4e38)
    assert q.tensor_scale == float(T)
    for b in range(6):
        blk = fs[16 * b : 16 * b + 16]
        amax = max(abs(f) for f in blk)
        S = rn(amax / (6 * T), 4, -6, 448)
        if rule == "ceil" and S * 6 * T < amax:  # the next E4M3 value up (448 at most)
            e4 = FORMATS["fp8_e4m3"]
            S = Fraction(float(e4.from_ordinal(np.minimum(e4.ordinal([float(S)]) + 1, e4.max_ordinal))[0]))
        assert q.scale[b] == float(S)
        want = [float(rn(f / (S * T), 2, 0, 6) * S * T) for f in blk]
        assert q.values[b].tolist() == want, (rule, b)


def test_hand_worked_blocks():
    """mxfp4 (max 6, emax 2).  Block amax 7: OCP k = floor(log2 7) - 2 = 0, X = 1, so 7
    saturates to 6 and 2.5 is a tie between 2 and 3 -> 2 (even); round-up rule: the smallest
    k with 7 <= 6 * 2^k is 1, X = 2: 7/2 = 3.5 ties between 3 and 4 -> 4 (even), 8; 2.5/2 =
    1.25 ties between 1 and 1.5 -> 1, 2.  A NaN in a block makes its scale and all its
    elements NaN."""
    y = np.zeros((2, 32))
    y[0, :2] = [7.0, 2.5]
    y[1, 0] = np.nan
    ocp = blocks.quantize(blocks.get_block_format("mxfp4_e2m1", "ocp"), y)
    ceil = blocks.quantize(blocks.get_block_format("mxfp4_e2m1", "ceil"), y)
    assert ocp.scale[0] == 1.0 and ocp.values[0, :2].tolist() == [6.0, 2.0]
    assert ceil.scale[0] == 2.0 and ceil.values[0, :2].tolist() == [8.0, 2.0]
    assert np.isnan(ocp.scale[1]) and np.isnan(ocp.values[1]).all()
    # an all-zero block: scale 2^-127, zeros
    z = blocks.quantize(blocks.get_block_format("mxfp8_e4m3"), np.zeros((1, 32)))
    assert z.scale[0] == 2.0**-127 and not z.values.any()


def test_candidate_scale_from_its_own_outputs():
    """relu times 1.03 against relu, mxfp8_e4m3 (OCP rule): a block whose amax is in
    [2^j / 1.03, 2^j) gets the next scale from the candidate's outputs: those blocks are
    counted."""
    ref = catalog()["relu.max"]
    c = Candidate(
        "relu.scaled", "relu", "1.03 max(x, 0)", "test", lambda x, m: m.maximum(x, 0.0) * 1.03, {}, "", None
    )
    x = blocks.inputs("normal:std=4", 512 * 32, 3, FORMATS["bf16"], 32)
    r = blocks.audit(c, blocks.get_block_format("mxfp8_e4m3"), x, FORMATS["bf16"], FORMATS["fp32"])
    xb = x.reshape(-1, 32)
    amax = np.maximum(xb, 0).max(axis=1)
    frac = amax / 2.0 ** np.floor(np.log2(np.where(amax > 0, amax, 1)))
    expect = int(np.count_nonzero((amax > 0) & (frac * 1.03 >= 2)))  # the candidate crosses a power of 2
    assert r.scale_diff_blocks == expect > 0
    assert r.worst_block["max_elem_ulp"] == r.max_elem_ulp  # the worst block holds the worst element
    same = blocks.audit(ref, blocks.get_block_format("mxfp8_e4m3"), x, FORMATS["bf16"], FORMATS["fp32"])
    assert same.mismatches == 0 and same.scale_diff_blocks == 0 and same.max_added_ulp == 0


@pytest.mark.parametrize(
    "bad", ["normal:std=0", "uniform:lo=1,hi=0", "poisson:lam=1", "normal:std=x", "uniform:lo=1", "npy:"]
)
def test_bad_distributions(bad):
    with pytest.raises(BadOptionError):
        blocks.inputs(bad, 64, 0, FORMATS["bf16"], 32)


def test_npy_inputs_validated(tmp_path):
    p = tmp_path / "a.npy"
    np.save(p, np.linspace(-3, 3, 64))
    x = blocks.inputs(f"npy:{p}", 0, 0, FORMATS["bf16"], 32)
    assert len(x) == 64 and np.array_equal(x, FORMATS["bf16"].round(np.linspace(-3, 3, 64)))
    for arr in (np.linspace(-3, 3, 60), np.array([np.nan] * 32), np.array(["a"] * 32)):
        np.save(p, arr)
        with pytest.raises(BadFileError):
            blocks.inputs(f"npy:{p}", 0, 0, FORMATS["bf16"], 32)
    p.write_bytes(b"garbage")
    with pytest.raises(BadFileError):
        blocks.inputs(f"npy:{p}", 0, 0, FORMATS["bf16"], 32)


def test_cli_block_sweep(capsys):
    from audit.cli import main

    code = main(
        [
            "sweep",
            "gelu.tanh",
            "--dtype",
            "bf16",
            "--out-dtype",
            "nvfp4",
            "--blocks",
            "normal:std=2",
            "--elements",
            "4096",
            "--json",
            "-",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    d = json.loads(out)["results"][0]
    assert d["blocks"] == 256 and d["out_dtype"] == "nvfp4" and d["rule"] == "ocp"
    code = main(
        ["sweep", "gelu.tanh", "--dtype", "bf16", "--out-dtype", "mxfp8_e4m3", "--scale-rule", "nope"]
    )
    _, err = capsys.readouterr()
    assert code == 2 and err.startswith("actaudit: error:")


@pytest.mark.parametrize("rule", ["ocp", "ceil"])
@pytest.mark.slow  # every pair of inputs against brute force: .ci/run's slow stage
def test_exhaustive_pairs_equal_brute_force(rule):
    """The class reduction of the exhaustive mode against every pair built as a real block:
    [x, m, 0, ..., 0] for all 253^2 pairs of fp8_e4m3 inputs (one zero), quantized by the
    sampled-block code; element 0 of each block is x's."""
    bf = blocks.get_block_format("mxfp8_e4m3", rule)
    c = catalog()["gelu.tanh"]
    e4 = FORMATS["fp8_e4m3"]
    r = blocks.exhaustive(c, bf, e4, FORMATS["fp32"])
    xs = e4.finite_values()
    xs = xs[~((xs == 0) & np.signbit(xs))]
    n = len(xs)
    blk = np.zeros((n * n, 32))
    blk[:, 0] = np.repeat(xs, n)
    blk[:, 1] = np.tile(xs, n)
    flat = blk.ravel()
    y = c.evaluate(flat, FORMATS["fp32"], FORMATS["fp32"], {}).reshape(-1, 32)
    cq = blocks.quantize(bf, y)
    rq, exact, _ = blocks.reference(bf, c.ref, flat, {})
    f = exact.reshape(-1, 32)[:, 0]
    u = rq.scale * e4.ulp(f / rq.scale)
    err = np.abs(cq.values[:, 0] - f) / u
    assert r.elements == n * n
    assert r.mismatches == int(np.count_nonzero(cq.elems[:, 0] != rq.elems[:, 0]))
    assert r.scale_diff_blocks == int(np.count_nonzero(cq.scale != rq.scale))
    assert r.max_elem_ulp == float(err.max())


@pytest.mark.parametrize("rule", ["ocp", "ceil"])
def test_nvfp4_exhaustive_pairs_equal_brute_force(rule):
    """NVFP4's exhaustive mode against every pair built as a real 16-element block
    [x, m, 0, ..., 0], all 253^2 blocks of fp8_e4m3 inputs in one tensor (its tensor scale
    is then that of every input), quantized by the sampled-block code.  gelu at large
    negative x is below E4M3's least scale: blocks with S = 0, whose element ULP is taken at
    the smallest nonzero decode scale 2^-9 T."""
    bf = blocks.get_block_format("nvfp4", rule)
    c = catalog()["gelu.tanh"]
    e4, e2 = FORMATS["fp8_e4m3"], FORMATS["fp4_e2m1"]
    r = blocks.exhaustive(c, bf, e4, FORMATS["fp32"])
    xs = e4.finite_values()
    xs = xs[~((xs == 0) & np.signbit(xs))]
    n = len(xs)
    blk = np.zeros((n * n, 16))
    blk[:, 0] = np.repeat(xs, n)
    blk[:, 1] = np.tile(xs, n)
    flat = blk.ravel()
    y = c.evaluate(flat, FORMATS["fp32"], FORMATS["fp32"], {}).reshape(-1, 16)
    cq = blocks.quantize(bf, y)
    rq, exact, _ = blocks.reference(bf, c.ref, flat, {})
    f = exact.reshape(-1, 16)[:, 0]
    d = rq.scale * rq.tensor_scale
    assert (d == 0).any() and (d > 0).any()
    d = np.where(d > 0, d, 2.0**-9 * rq.tensor_scale)
    err = np.abs(cq.values[:, 0] - f) / (d * e2.ulp(f / d))
    assert r.elements == n * n
    assert r.tensor_scale == {"reference": rq.tensor_scale, "candidate": cq.tensor_scale}
    assert r.mismatches == int(np.count_nonzero(cq.elems[:, 0] != rq.elems[:, 0]))
    assert r.scale_diff_blocks == int(
        np.count_nonzero(~((cq.scale == rq.scale) & (cq.tensor_scale == rq.tensor_scale)))
    )
    assert r.max_elem_ulp == float(err.max())
    assert r.mean_elem_ulp == pytest.approx(float(err.mean()), rel=1e-12)


def test_nvfp4_zero_scale_block_with_undecided_elements(tmp_path, capsys):
    """A block of gelu(-448) (|f| < 1e-40000: below every E4M3 scale, S = 0) beside a block
    of 448s: the reference's elements there are zeros, never divided by the zero scale
    (this crashed with ZeroDivisionError in mpmath)."""
    from audit.cli import main

    p = tmp_path / "x.npy"
    np.save(p, np.array([448.0] * 16 + [-448.0] * 16))
    code = main(
        [
            "sweep",
            "gelu.tanh",
            "--dtype",
            "fp8_e4m3",
            "--out-dtype",
            "nvfp4",
            "--blocks",
            f"npy:{p}",
            "--json",
            "-",
        ]
    )
    d = json.loads(capsys.readouterr().out)["results"][0]
    assert code in (0, None) and d["mismatches"] == 0 and d["nan_elements"] == 0
    assert d["scale_diff_blocks"] == 0 and d["max_elem_ulp"] < 1e-6
