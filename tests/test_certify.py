"""``actaudit selftest --certify``: oracle tables proven with Arb ball arithmetic.

Expectations are computed here: exact rationals worked by hand, the format's values and
rounding from tests/helpers.py (written from the definitions, not the tool's rounding),
and mpmath at 300 bits for the entries of the fp8 slice.  The full run over every table
is a CLI command (docs/concepts/certification.md), not part of the suite."""

import json
import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest

from audit.cli import main
from audit.measure import certify
from audit.numbers.formats import FORMATS
from audit.oracle import oracle
from audit.oracle.references import REFERENCES
from tests.helpers import round_exact, to_fraction


def _ok(name, fmt, xs, rs):
    ref = REFERENCES[name]
    ok, exact, _ = certify.certify_values(
        ref, FORMATS[fmt], ref.with_defaults({}), np.array(xs, float), np.array(rs, float)
    )
    return ok.tolist(), exact.tolist()


# ------------------------------------------------------------- hand-worked cases
def test_a_tie_is_proven_exactly_and_goes_to_the_even_side():
    # hardsigmoid(-1.5) = (3 - 1.5) / 6 = 1/4, halfway between 0 and 0.5 in fp4_e2m1 (whose
    # smallest subnormal is 0.5): ties to even give +0; neither 0.5 nor -0 is right
    ok, exact = _ok("hardsigmoid", "fp4_e2m1", [-1.5, -1.5, -1.5], [0.0, 0.5, -0.0])
    assert ok == [True, False, False] and exact[0]
    # sigmoid'(0) = 1/4 as well: e / (1 + e)^2 at e = 1
    assert _ok("sigmoid_grad", "fp4_e2m1", [0.0, 0.0], [0.0, 0.5])[0] == [True, False]
    # hardsigmoid(-0.75) = 3/8 = 0.375: above the tie 1/4, so 0.5
    assert _ok("hardsigmoid", "fp4_e2m1", [-0.75, -0.75], [0.5, 0.0])[0] == [True, False]


def test_signed_zeros_follow_the_function():
    # exact zeros take the formula's IEEE sign: tanh(-0) = -0, relu(-1) = +0, hardswish(-4) = -4 * 0 = -0
    assert _ok("tanh", "fp16", [-0.0, -0.0, 0.0], [-0.0, 0.0, 0.0])[0] == [True, False, True]
    assert _ok("relu", "fp16", [-1.0, -1.0, -0.0], [0.0, -0.0, 0.0])[0] == [True, False, True]
    assert _ok("hardswish", "bf16", [-4.0, -4.0], [-0.0, 0.0])[0] == [True, False]
    # a nonzero value that rounds to zero takes its own sign: gelu(-10) = -7.6e-23 < 0
    assert _ok("gelu", "fp8_e4m3", [-10.0, -10.0], [-0.0, 0.0])[0] == [True, False]
    # fnuz formats have no -0: the zero is +0 whatever the sign
    assert _ok("gelu", "fp8_e4m3fnuz", [-10.0, -10.0], [0.0, -0.0])[0] == [True, False]
    assert _ok("tanh", "fp8_e4m3fnuz", [-0.0], [0.0])[0] == [True]


def test_a_ball_inside_one_rounding_interval():
    # gelu(1) = Phi(1) = 0.841344746...; fp8_e4m3 has ulp 1/16 on [0.5, 1): 0.8125 and
    # 0.875 around it, the midpoint 0.84375 above it: 0.8125
    phi1 = (1 + math.erf(1 / math.sqrt(2))) / 2
    assert 0.8125 < phi1 < 0.84375
    assert _ok("gelu", "fp8_e4m3", [1.0, 1.0, 1.0], [0.8125, 0.875, 0.75])[0] == [True, False, False]
    # exp(6) = 403.4 in fp8_e4m3 (ulp 32 on [256, 512)): 416 (384 + 32 ... 403.4 is nearer 416)
    assert abs(math.exp(6) - 416) < abs(math.exp(6) - 384)
    assert _ok("exp", "fp8_e4m3", [6.0, 6.0], [416.0, 384.0])[0] == [True, False]


def test_overflow_domain_and_poles():
    # exp(7) = 1096.6 > 464 = 448 + 16, the overflow threshold of E4M3FN (448 = 1.110b x 2^8 is
    # even, so 464 itself would still round to 448): NaN there, inf in E5M2 only beyond 61440
    assert _ok("exp", "fp8_e4m3", [7.0, 7.0], [math.nan, 448.0])[0] == [True, False]
    assert _ok("exp", "fp8_e5m2", [7.0, 12.0], [1024.0, math.inf])[0] == [True, True]
    # log: NaN below 0, -inf at +-0, +0 at 1; rsqrt(-0) = -inf; 1/x saturates in fp4
    assert _ok("log", "fp16", [-2.0, -0.0, 1.0, 1.0], [math.nan, -math.inf, 0.0, -0.0])[0] == [
        True,
        True,
        True,
        False,
    ]
    assert _ok("rsqrt", "fp16", [-0.0, 0.0, 4.0], [-math.inf, math.inf, 0.5])[0] == [True, True, True]
    assert _ok("reciprocal", "fp4_e2m1", [0.0, -0.0], [6.0, -6.0])[0] == [True, True]


# ------------------------------------------------------------------ a slice
SLICE_REFS = ["gelu", "tanh", "sigmoid", "softplus", "silu", "erf", "exp", "log1p", "hardswish", "mish_grad"]


@pytest.mark.parametrize("fmt", ["fp8_e4m3", "fp8_e5m2"])
def test_a_slice_is_certified_and_agrees_with_an_independent_rounding(fresh_cache, fmt):
    mpf = {
        "gelu": lambda x: x / 2 * mp.erfc(-x / mp.sqrt(2)),
        "tanh": mp.tanh,
        "sigmoid": lambda x: 1 / (1 + mp.exp(-x)),
        "softplus": lambda x: mp.log1p(mp.exp(x)),
        "silu": lambda x: x / (1 + mp.exp(-x)),
        "erf": mp.erf,
        "exp": mp.exp,
    }
    for res in certify.run(SLICE_REFS, [fmt]):
        assert (res.certified, res.n_uncertified) == (res.total, 0), res
        assert res.total == len(FORMATS[fmt].finite_values())
        assert res.digest and certify.is_certified(REFERENCES[res.reference], FORMATS[fmt])
    fm = FORMATS[fmt]
    for name, f in mpf.items():
        t = oracle.table(REFERENCES[name], fm)
        for x, r in zip(fm.finite_values()[::7], t.rounded[::7]):
            with mp.workprec(300):
                want = round_exact(fmt, to_fraction(f(mp.mpf(float(x)))))
            if want is None:  # overflow: NaN in E4M3FN, inf in E5M2
                assert math.isnan(r) if fmt == "fp8_e4m3" else math.isinf(r)
            else:
                assert Fraction(r) == want, (name, x, r, want)


@pytest.mark.slow  # every certified reference proven in three formats: .ci/run's slow stage
def test_small_formats_every_reference(fresh_cache):
    res = certify.run(None, ["fp4_e2m1", "fp6_e2m3", "fp8_e5m2fnuz"])
    assert len(res) == 3 * len(certify.certified_references())
    assert all(r.n_uncertified == 0 and r.certified == r.total for r in res)
    assert {r.total for r in res} == {16, 64, 255}  # 2^4, 2^6, 2^8 - 1 (fnuz: one NaN code)


def test_every_univariate_reference_has_a_formula():
    assert set(certify.certified_references()) <= set(certify.FORMULAS)
    assert set(certify.certified_formats()) == {
        "fp16",
        "bf16",
        "fp8_e4m3",
        "fp8_e5m2",
        "fp8_e4m3fnuz",
        "fp8_e5m2fnuz",
        "fp6_e3m2",
        "fp6_e2m3",
        "fp4_e2m1",
    }


# -------------------------------------------------------------- corruption
def _corrupt_cached(ref, fmt, i, value, keep_certificate=False):
    """Rewrite the cached table with entry i changed and a valid digest (what a wrong oracle,
    or anyone who can write the cache, produces): the digest cannot catch it."""
    params = ref.with_defaults({})
    t = oracle.table(ref, fmt)
    rounded = t.rounded.copy()
    rounded[i] = value
    cert = t.certificate if keep_certificate else None
    bad = oracle.OracleValues(rounded, t.hi, t.lo, t.n_mpmath, t.unsure, cert)
    path = oracle.cache_dir() / f"{oracle.cache_key(ref, fmt, params)}.npz"
    oracle._store(path, fmt.finite_values(), bad, oracle.cache_descriptor(ref, fmt, params))
    oracle._MEMO.clear()


def test_a_corrupted_entry_is_caught_and_named(fresh_cache, capsys):
    ref, fmt = REFERENCES["tanh"], FORMATS["fp8_e4m3"]
    x = fmt.finite_values()
    i = int(np.flatnonzero(x == 0.75)[0])  # tanh(0.75) = 0.635: 0.625 in E4M3 (ulp 1/16; midpoint 0.65625)
    good = oracle.table(ref, fmt).rounded[i]
    assert good == 0.625
    _corrupt_cached(ref, fmt, i, 0.6875)  # the neighbour above
    assert oracle.table(ref, fmt).rounded[i] == 0.6875  # the load accepted it (digest valid)
    res = certify.certify_table(ref, fmt)
    assert res.n_uncertified == 1 and res.uncertified == [(0.75, 0.6875)]
    assert not certify.is_certified(ref, fmt)
    oracle._MEMO.clear()
    assert main(["selftest", "--certify", "-r", "tanh", "-d", "fp8_e4m3"]) == 1
    out = capsys.readouterr().out
    assert "UNCERTIFIED tanh fp8_e4m3: x = 0.75, table value 0.6875" in out
    assert "253 " in out and "FAIL" in out


def test_a_certificate_is_bound_to_its_table(fresh_cache):
    # (fp16: a table large enough that the oracle's seeded spot checks of a loaded table miss
    # the changed entry, as they would a forger's)
    ref, fmt = REFERENCES["tanh"], FORMATS["fp16"]
    assert certify.certify_table(ref, fmt).n_uncertified == 0
    oracle._MEMO.clear()
    assert certify.is_certified(ref, fmt)  # read back from the cache file
    # one entry changed, the old certificate kept: it names another digest, so it is ignored
    t = oracle.table(ref, fmt)
    assert t.certificate["digest"]
    i = int(np.flatnonzero(fmt.finite_values() == 1.25)[0])
    # (the neighbour above, not a sign flip: the oracle's load rejects a table whose signs
    # contradict the reference's, and rebuilds it)
    vals = fmt.finite_values()
    up = float(vals[np.flatnonzero(vals > t.rounded[i])[0]])
    _corrupt_cached(ref, fmt, i, up, keep_certificate=True)
    assert oracle.table(ref, fmt).rounded[i] == up
    assert not certify.is_certified(ref, fmt)


# ------------------------------------------------------------------ the CLI
def test_json_shape(fresh_cache, capsys):
    assert main(["selftest", "--certify", "-r", "relu", "-r", "exp2", "-d", "fp4_e2m1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"certified", "uncertified"} and doc["uncertified"] == []
    assert doc["certified"] == [
        {"reference": "relu", "format": "fp4_e2m1", "certified": 16, "total": 16},
        {"reference": "exp2", "format": "fp4_e2m1", "certified": 16, "total": 16},
    ]


def test_table_fits_80_columns(fresh_cache, capsys):
    assert main(["selftest", "--certify", "-r", "mish_grad", "-d", "fp6_e2m3"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert "mish_grad" in out and " 64 " in out


@pytest.mark.parametrize(
    "args",
    [
        ["selftest", "--certify", "-r", "swiglu"],
        ["selftest", "--certify", "-d", "fp32"],
        ["selftest", "--certify", "-d", "e8m0"],
        ["selftest", "--json"],
    ],
)
def test_bad_options_are_one_line(capsys, args):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1


def test_check_can_require_certified_tables(fresh_cache, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "actaudit.toml").write_text(
        'baseline = "b.json"\nrequire_certified = true\n'
        '[[audit]]\nname = "a"\ntargets = ["gelu.tanh"]\ndtype = "fp6_e2m3"\n'
    )
    assert main(["baseline"]) == 0
    oracle._USED.clear()
    assert main(["check"]) == 1
    assert "oracle-table gelu fp6_e2m3: not certified" in capsys.readouterr().out
    assert main(["selftest", "--certify", "-r", "gelu", "-d", "fp6_e2m3"]) == 0
    oracle._MEMO.clear()
    assert main(["check"]) == 0
    (tmp_path / "actaudit.toml").write_text(
        'baseline = "b.json"\nrequire_certified = "yes"\n'
        '[[audit]]\nname = "a"\ntargets = ["gelu.tanh"]\ndtype = "fp6_e2m3"\n'
    )
    capsys.readouterr()
    assert main(["check"]) == 2
    assert "require_certified' must be true or false" in capsys.readouterr().err
