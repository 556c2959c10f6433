"""Backward sweeps: dx = dy * f'(x) over pairs (x, dy), checked against mpmath and by hand."""

import json
import math

import mpmath as mp
import numpy as np
import pytest
from helpers import is_nearest_even

import audit
from audit.cli import main
from audit.numbers.formats import get_format
from audit.oracle import oracle
from audit.oracle.references import get_reference
from audit.targets.candidates import catalog


# independent derivatives, written here from the textbook formulas (not the tool's)
def _s(t):
    return 1 / (1 + mp.exp(-t))


DERIVS = {
    "gelu_bwd": lambda x, **_: mp.ncdf(x) + x * mp.npdf(x),
    "tanh_bwd": lambda x, **_: 1 / mp.cosh(x) ** 2,
    "sigmoid_bwd": lambda x, **_: _s(x) * _s(-x),
    "silu_bwd": lambda x, beta=1.0, **_: _s(beta * x) + beta * x * _s(beta * x) * _s(-beta * x),
    "softplus_bwd": lambda x, beta=1.0, **_: _s(beta * x),
    "mish_bwd": lambda x, **_: mp.diff(lambda t: t * mp.tanh(mp.log(1 + mp.exp(t))), x),
    "elu_bwd": lambda x, alpha=1.0, **_: mp.mpf(1) if x > 0 else mp.mpf(repr(alpha)) * mp.exp(x),
}
ROOTS = {"gelu_bwd": -0.7517916243684, "silu_bwd": -1.2784645427610738, "mish_bwd": -1.1919805}


def adversarial_pairs(fmt, name, n=40, seed=1):
    """x: the derivative's root neighbourhood, tiny x (f'(0) a power of two: dy f'(0) is a
    tie at odd subnormal dy), saturation (f' -> 1, dy a power of two: just below a binade
    edge), deep tails (f' underflows), zeros; dy: odd subnormals, powers of two, +-max, 0."""
    rng = np.random.default_rng(seed)
    sub = fmt.smallest_subnormal
    xs = [
        0.0,
        -0.0,
        sub,
        -sub,
        fmt.smallest_normal,
        2.0**-20,
        -(2.0**-20),
        2.0**-40,
        1.0,
        -1.0,
        6.0,
        12.0,
        30.0,
        -30.0,
        100.0,
        -100.0,
        fmt.max_finite,
        -fmt.max_finite,
    ]
    if name in ROOTS:
        r = float(fmt.round([ROOTS[name]])[0])
        o = int(fmt.ordinal([r])[0])
        xs += fmt.from_ordinal(np.arange(o - 3, o + 4)).tolist()
    dys = [
        sub,
        -sub,
        3 * sub,
        5 * sub,
        1.0,
        -2.0,
        0.5,
        fmt.max_finite,
        -fmt.max_finite,
        0.0,
        fmt.smallest_normal,
        3.0,
    ]
    top = fmt.max_ordinal
    xs = np.array([float(v) for v in fmt.round(xs) if math.isfinite(v)])
    dys = np.array([float(v) for v in fmt.round(dys) if math.isfinite(v)])
    a, b = np.meshgrid(xs, dys, indexing="ij")
    ra = fmt.from_ordinal(rng.integers(-top, top + 1, n))
    rb = fmt.from_ordinal(rng.integers(-top, top + 1, n))
    return np.concatenate([a.ravel(), ra]), np.concatenate([b.ravel(), rb])


@pytest.mark.parametrize("fmt_name", ["fp8_e4m3", "fp8_e5m2", "fp16", "bf16", "fp32"])
@pytest.mark.parametrize("name", sorted(DERIVS))
def test_backward_oracle_against_mpmath(name, fmt_name):
    fmt = get_format(fmt_name)
    catalog()
    ref = get_reference(name)
    x, dy = adversarial_pairs(fmt, name)
    ov = oracle.evaluate(ref, fmt, x, None, dy)
    d = DERIVS[name]
    with mp.workprec(700):
        for i in range(len(x)):
            exact = mp.mpf(dy[i]) * d(mp.mpf(x[i]))
            r = ov.rounded[i]
            if exact == 0:
                assert r == 0, (x[i], dy[i], r)
                continue
            big = fmt.round_mpf(exact)  # only to tell overflow apart; nearness checked below
            if not math.isfinite(big):
                assert not math.isfinite(r), (x[i], dy[i], r)
                continue
            assert is_nearest_even(fmt, exact, r), (name, fmt_name, x[i], dy[i], r, exact)
            # the exact value hi + lo within a few float64 ulps (relative)
            if abs(exact) > mp.mpf(2) ** -1000:
                err = abs(mp.mpf(ov.hi[i]) + mp.mpf(ov.lo[i]) - exact) / abs(exact)
                assert err < 2.0**-30, (name, fmt_name, x[i], dy[i], float(err))


def test_tie_at_odd_subnormal_dy_decided_by_the_taylor_value():
    # bf16: dy = 3 * 2^-133 (odd), x = 2^-60: dy gelu'(x) = dy/2 + dy sqrt(2/pi) x + ...,
    # exactly above the midpoint 1.5 * 2^-133, so it rounds up to 2 * 2^-133; x = -2^-60
    # puts it below: 1 * 2^-133.  Decided without mpmath (n_mpmath == 0).
    fmt = get_format("bf16")
    catalog()
    s = fmt.smallest_subnormal
    ov = oracle.evaluate(
        get_reference("gelu_bwd"), fmt, np.array([2.0**-60, -(2.0**-60)]), None, np.array([3 * s, 3 * s])
    )
    assert ov.rounded.tolist() == [2 * s, s]
    assert ov.n_mpmath == 0


def test_backward_maps_catalog_names():
    r = audit.sweep("gelu.tanh", dtype="fp8_e4m3", backward=True)
    assert [x.candidate for x in r] == ["gelu_bwd.tanh"]
    assert r[0].domain.exhaustive and r[0].domain.count == 254**2  # every E4M3 pair, +-0 both
    names = [x.candidate for x in audit.sweep("tanh", dtype="fp8_e4m3", backward=True)]
    assert names == ["tanh_bwd.from_output"]


def test_tanh_backward_dead_gradient_interval():
    # tanh_backward reads y = tanh(x) stored in bf16.  y rounds to 1 (so 1 - y*y = 0 and
    # dx = 0) once tanh(x) > 1 - 2^-9, the midpoint below 1 in bf16 (spacing 2^-8 there):
    # x > atanh(1 - 2^-9).  Every bf16 value in [3, 4] (spacing 2^-6) is on the grid of
    # side 65 (64 values and 4), dy too; every dy there gives a representable exact dy sech^2(x) >= 3e-3.
    x0 = float(mp.atanh(1 - mp.mpf(2) ** -9))
    first = math.ceil(x0 * 64) / 64
    n_dead = round((4 - first) * 64) + 1
    r = audit.sweep("tanh_bwd.from_output", dtype="bf16", compute="fp32", range=(3, 4), grid=65)[0]
    assert r.domain.exhaustive and r.domain.count == 65**2
    f = {x.kind: x for x in r.findings}
    assert f["underflow"].intervals == [[first, 4.0]]
    assert f["underflow"].count == n_dead * 65
    assert "dead gradient" in f["underflow"].note
    assert set(f) == {"underflow"}


def test_gelu_tanh_backward_nan_in_fp16():
    # PyTorch's tanh-GELU backward in fp16: x_sq = x*x overflows to inf for |x| >= 256
    # (256^2 = 65536 > 65504), inner_derivative = inf, and tanh_derivative is 0 (tanh of
    # the overflowed x^3 is 1): 0 * inf = NaN, where dy gelu'(x) = dy.  At x = 255.875,
    # x_sq = 65472 is finite: x^3 overflows, tanh = 1, dx = dy * (0.5 * 2 + 0) = dy.
    c = catalog()["gelu_bwd.tanh"]
    fp16 = get_format("fp16")
    got = c.evaluate(np.array([256.0, -256.0, 255.875]), fp16, fp16, None, np.array([1.0, 1.0, 2.0]))
    assert math.isnan(got[0]) and math.isnan(got[1]) and got[2] == 2.0


def test_chunked_exhaustive_pairs_equal_in_memory():
    # every bf16 pair in [0.5, 8] (513^2 = 263,169 pairs: two chunks of 2^18) through the
    # chunked machinery, against the same pairs held in memory (a grid covering every value)
    a = audit.sweep(
        "tanh_bwd.from_output", dtype="bf16", compute="fp32", range=(0.5, 8), exhaustive=True, workers=1
    )[0]
    b = audit.sweep("tanh_bwd.from_output", dtype="bf16", compute="fp32", range=(0.5, 8), grid=513)[0]
    assert a.domain.count == b.domain.count == 513**2
    da, db = a.to_dict(), b.to_dict()
    for k in (
        "max_ulp",
        "worst",
        "nan_count",
        "finite_count",
        "correctly_rounded_fraction",
        "findings",
        "max_ulp_distance",
    ):
        assert da[k] == db[k], k
    assert da["findings"][0]["intervals"] == [[3.46875, 8.0]]


def test_cli_backward(capsys):
    code = main(
        ["sweep", "sigmoid", "--backward", "--dtype", "fp8_e5m2", "--compute", "fp8_e5m2", "--json", "-"]
    )
    out, _ = capsys.readouterr()
    assert code == 0
    doc = json.loads(out)
    assert [r["candidate"] for r in doc["results"]] == ["sigmoid_bwd.from_output"]
    assert doc["results"][0]["reference"] == "sigmoid_bwd"
    assert main(["sweep", "gelu", "--backward", "--grad"]) == 2
    assert main(["sweep", "relu", "--backward"]) == 2
    _, err = capsys.readouterr()
    assert err.startswith("actaudit: error:")


def test_gate_spec_backward_entry(tmp_path, monkeypatch, capsys):
    # PyTorch's tanh-GELU backward in fp16 compute gives NaN for |x| >= 256 (x * x
    # overflows; test_gelu_tanh_backward_nan_in_fp16), which a 64-value grid reaches: a
    # "no NaN" tolerance fails there, and only there (sigmoid's backward has none).
    monkeypatch.chdir(tmp_path)
    (tmp_path / "actaudit.toml").write_text(
        'baseline = "base.json"\n\n[[audit]]\nname = "bwd"\ntargets = ["gelu.tanh", "sigmoid"]\n'
        'dtype = "fp16"\ngrid = 64\nbackward = true\ntolerance = { nan = false }\n'
    )
    assert main(["baseline"]) == 1  # refused: gelu_bwd.tanh already breaks its tolerance
    assert main(["baseline", "--force"]) == 0  # recorded anyway, with a warning
    base = json.loads((tmp_path / "base.json").read_text())
    assert "bwd/gelu_bwd.tanh/fp16/fp16" in json.dumps(base)
    capsys.readouterr()
    assert main(["check"]) == 1
    out, _ = capsys.readouterr()
    fails = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert fails and all("gelu_bwd.tanh" in line for line in fails)
    (tmp_path / "actaudit.toml").write_text(
        '[[audit]]\nname = "x"\ntargets = ["gelu"]\ndtype = "fp16"\nbackward = "yes"\n'
    )
    assert main(["check"]) == 2
    assert "backward" in capsys.readouterr()[1]


@pytest.mark.parametrize(
    "op, cand",
    [
        ("gelu_tanh", "gelu_bwd.tanh"),
        ("tanh", "tanh_bwd.from_output"),
        ("sigmoid", "sigmoid_bwd.from_output"),
        ("silu", "silu_bwd.torch"),
    ],
)
def test_catalog_backward_is_pytorchs_kernel(op, cand):
    # the catalog's transcription of PyTorch's backward kernels, run in fp32 compute on bf16
    # tensors, gives the bits of PyTorch 2.13's own kernel (autograd on CPU) at every pair
    # of a 128 x 128 grid: an independent check of the formulas (and of torch-bwd:)
    pytest.importorskip("torch")
    from audit.compare.diff import diff

    r = diff(f"torch-bwd:{op}", cand, "bf16", "fp32", grid=128)
    assert r.count > 128**2 - 1 and r.verdict == "identical", r.intervals[:3]


def test_underflowing_backward_products_keep_their_sign_without_mpmath():
    """dy * gelu'(x) at x = -40: gelu'(-40) = Phi(-40) - 40 phi(40) ~ -5.9e-347 (mpmath, in
    the test) is below float64's range, so the product's zero takes the sign of dy times
    that negative value: -0 for dy > 0, +0 for dy < 0; the reference's declared sign
    decides it, with no mpmath call (such pairs once sent whole chunks to mpmath)."""
    import mpmath as mp

    from audit.numbers.formats import get_format
    from audit.oracle import (
        oracle,  # noqa: F401  (backward registers NAME_bwd)
    )
    from audit.oracle.references import REFERENCES

    with mp.workprec(200):
        g = mp.ncdf(-40) - 40 * mp.npdf(40)
    assert g < 0 and abs(g) < mp.mpf(2) ** -1100
    bf16 = get_format("bf16")
    x = np.full(4, -40.0)
    dy = np.array([1.5, -1.5, 3.0e38, -(2.0**-126)])
    ov = oracle.evaluate(REFERENCES["gelu_bwd"], bf16, x, {}, dy)
    assert ov.rounded.tolist() == [0.0] * 4
    assert np.signbit(ov.rounded).tolist() == [True, False, True, False]
    assert ov.n_mpmath == 0


def test_relative_error_of_a_zero_result_below_float64s_range():
    """README: relative error |r - f| / |f|. A zero result where f is nonzero but below
    float64's range (dy * sech^2(x) at x = -57344: e^-114688) is off by exactly 1 (100%);
    where dy = 0 the product is exactly 0 and the error is 0."""
    from audit.measure.metrics import point_errors
    from audit.numbers.formats import get_format
    from audit.oracle import oracle
    from audit.oracle.references import REFERENCES

    f = get_format("fp8_e5m2")
    x = np.array([-57344.0, -57344.0, 3.0])
    dy = np.array([1.5, 0.0, 0.0])
    ov = oracle.evaluate(REFERENCES["tanh_bwd"], f, x, {}, dy)
    e = point_errors(x, np.zeros(3), ov, f, dy)
    assert e.rel_err.tolist() == [1.0, 0.0, 0.0]
    assert np.signbit(ov.rounded).tolist() == [False, False, False]  # +: dy sech^2 >= 0
