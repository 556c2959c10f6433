"""Signed zeros: the sign bit of every oracle result is the sign of the exact value.

mpmath has no signed zero and float64 cannot hold values below 2**-1074, so a sign can
be lost twice: where f underflows float64 (a fast path's 0 + -0 = +0) and at exact zeros.
The expected signs here come from mpmath (where f != 0) and, at exact zeros, from the
IEEE sign conventions written out below, independently of audit/oracle/references.py.
"""

import math

import mpmath as mp
import numpy as np
import pytest

from audit.numbers.formats import FORMATS
from audit.oracle import oracle
from audit.oracle.references import REFERENCES
from audit.targets import golden

SMALL = ("fp8_e4m3", "fp8_e5m2", "fp16", "bf16")
UNIVARIATE = sorted(n for n, r in REFERENCES.items() if r.arity == 1)


def exact_zero_signbit(name: str, x: float) -> bool:
    """The sign of an exact zero, as IEEE arithmetic gives the formula (x * 0 = -0 for
    x < 0, -0 * c = -0; max(x, 0) = +0 for x <= 0, IEEE 754-2019 maximum).  An exact zero
    not listed here fails the test: every convention is written down."""
    neg = math.copysign(1.0, x) < 0
    if name in ("relu", "relu6", "hardsigmoid"):
        return False  # max(x, 0) = +0 (hardsigmoid: (x + 3) / 6 <= 0 clamped to +0)
    if name == "hardswish" and x <= -3:
        return neg  # x * relu6(x + 3) / 6 = x * (+0) = -0
    if x == 0 and name in (
        "gelu",
        "gelu_scale",
        "tanh",
        "silu",
        "mish",
        "elu",
        "selu",
        "celu",
        "leaky_relu",
        "hardtanh",
        "hardswish",
        "softsign",
        "erf",
        "swish",
    ):
        return neg  # f(+-0) = +-0: x * c, tanh(x), expm1(x), ... keep the sign of x
    if x == 0 and name in ("expm1", "log1p"):
        return neg
    if name == "log" and x == 1:
        return False  # log(1) = +0
    raise AssertionError(f"no sign convention for an exact zero of {name} at {x!r}")


def expected_signbits(name: str, x: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Where |hi| >= 2**-900 the oracle's value (within its tested relative bound) has the
    sign of f; below (f underflows float64, or is zero) mpmath decides, at 64 bits plus
    2 log2|x| (exp(-x^2/2) at x = 1e38 needs x^2 to about 300 bits)."""
    ref = REFERENCES[name]
    params = ref.with_defaults({})
    out = np.signbit(hi).copy()
    small = np.flatnonzero(~(np.abs(hi) >= 2.0**-900) | np.isinf(hi))
    for i in small.tolist():
        xi = float(x[i])
        with mp.workprec(64 + 2 * max(0, math.frexp(xi)[1])):
            v = ref.mp(mp.mpf(xi), **params)
        if not mp.isnan(v):  # (outside the domain, log of a negative number: no sign)
            out[i] = mp_signbit(name, xi, v)
    return out


def mp_signbit(name: str, x: float, v) -> bool:
    """The sign bit of f(x) from mpmath's value v, which has no signed zero or infinity."""
    if mp.isinf(v) and x == 0:  # a pole at 0: 1/-0 = -inf, rsqrt(-0) = -inf, log(+-0) = -inf
        return True if name == "log" else math.copysign(1.0, x) < 0
    return exact_zero_signbit(name, x) if v == 0 else bool(v < 0)


@pytest.mark.parametrize("name", UNIVARIATE)
def test_sign_of_every_small_format_value(name):
    """Every finite input of every format of <= 16 bits, the underflowing tails included."""
    ref = REFERENCES[name]
    xs = {f: FORMATS[f].finite_values() for f in SMALL}
    tables = {f: oracle.evaluate(ref, FORMATS[f], xs[f]) for f in SMALL}
    # one mpmath evaluation per distinct input across the formats
    allx = np.concatenate([xs[f] for f in SMALL])
    allhi = np.concatenate([tables[f].hi for f in SMALL])
    keys = allx.view(np.uint64)
    _, first, inv = np.unique(keys, return_index=True, return_inverse=True)
    want = expected_signbits(name, allx[first], allhi[first])[inv]
    start = 0
    for f in SMALL:
        n = len(xs[f])
        w, t = want[start : start + n], tables[f]
        start += n
        ok = np.isnan(t.rounded) | (np.signbit(t.rounded) == w)
        bad = np.flatnonzero(~ok)
        assert not len(bad), (
            f"{name} {f}: {len(bad)} wrong signs, e.g. x = {xs[f][bad[0]]!r} -> {t.rounded[bad[0]]!r}"
        )
        # the exact value carried (hi) has that sign too
        okh = np.isnan(t.hi) | (np.signbit(t.hi) == w)
        assert okh.all(), f"{name} {f}: hi sign wrong at x = {xs[f][np.flatnonzero(~okh)[0]]!r}"


@pytest.mark.parametrize("fmt", ["fp32", "fp64"])
@pytest.mark.parametrize("name", UNIVARIATE)
def test_sign_at_signed_zeros(name, fmt):
    ref = REFERENCES[name]
    x = np.array([-0.0, 0.0])
    ov = oracle.evaluate(ref, FORMATS[fmt], x)
    for xi, r in zip(x.tolist(), ov.rounded.tolist()):
        with mp.workprec(64):
            v = ref.mp(mp.mpf(xi), **ref.with_defaults({}))
        want = mp_signbit(name, xi, v)
        assert math.copysign(1.0, r) == (-1.0 if want else 1.0), (name, fmt, xi, r)


@pytest.mark.parametrize("name", ["swiglu", "geglu", "reglu"])
def test_sign_of_gated_units_on_every_e4m3_pair(name):
    """The bivariate references on every pair of finite fp8_e4m3 values: sign(f(a, b)) =
    sign(g(a)) sign(b); g(a) = silu, gelu (sign of a) or relu (+0 for a <= 0)."""
    ref = REFERENCES[name]
    f = FORMATS["fp8_e4m3"]
    v = f.finite_values()
    a, b = np.repeat(v, len(v)), np.tile(v, len(v))
    ov = oracle.evaluate(ref, f, a, {}, b)
    ga = np.where(a > 0, 1.0, 0.0) if name == "reglu" else np.copysign(1.0, a)
    # g(a) = 0 (relu at a <= 0) is +0: +0 * b has the sign of b
    want = np.signbit(np.where(ga == 0, 1.0, ga) * np.copysign(1.0, b))
    ok = np.isnan(ov.rounded) | (np.signbit(ov.rounded) == want)
    # sign(f) = sign(a) sign(b) for silu and gelu: check a few tail values with mpmath too
    for i in np.flatnonzero((np.abs(ov.hi) < 2.0**-900) & (ga != 0) & (a != 0) & (b != 0))[:20].tolist():
        with mp.workprec(64):
            m = ref.mp(mp.mpf(a[i]), mp.mpf(b[i]))
        assert m != 0 and bool(m < 0) == want[i]
    assert ok.all(), f"{name}: sign wrong at a = {a[~ok][0]!r}, b = {b[~ok][0]!r}"


@pytest.mark.parametrize(
    "name,fmt,xbits,ybits",
    [
        # gelu'(-40) = Phi(-40) - 40 phi(40) = -5.85e-347 < 0 (mpmath below): RN is -0
        ("gelu_grad", "fp16", 0xD100, 0x8000),
        ("gelu_grad", "fp16", 0xD0D3, 0x8000),  # x = -38.59375, already right before
        ("gelu_grad", "bf16", 0xC220, 0x8000),  # x = -40 in bf16
        ("mish_grad", "fp16", 0xE18C, 0x8000),  # x = -710: tanh(sp) + x sech^2(sp) s, sp ~ e^x
    ],
)
def test_golden_keeps_the_sign_of_underflowing_gradients(tmp_path, name, fmt, xbits, ybits):
    f = FORMATS[fmt]
    x = float(f.from_bits([xbits])[0])
    with mp.workprec(200):
        v = REFERENCES[name].mp(mp.mpf(x))
    assert v < 0 and abs(v) < f.smallest_subnormal / 2  # negative, rounds to a zero
    out = tmp_path / "g.npz"
    golden.write_golden(name, f, out)
    with np.load(out) as z:
        y = dict(zip(z["x_bits"].tolist(), z["y_bits"].tolist()))
    assert y[xbits] == ybits


@pytest.mark.parametrize("name", ["tanh", "gelu", "silu", "erf", "elu", "mish", "selu", "hardswish"])
def test_fp64_golden_at_minus_zero(tmp_path, name):
    """f(-0) = -0 for these (f(x) ~ c x with c > 0 at 0): 0x8000000000000000 in fp64."""
    out = tmp_path / "g.npz"
    golden.write_golden(name, FORMATS["fp64"], out, inputs=np.array([-0.0, 0.0]))
    with np.load(out) as z:
        assert z["y_bits"].tolist() == [0x8000000000000000, 0]


def test_hardswish_minus_four_is_minus_zero_everywhere():
    """hardswish(-4) = -4 * relu6(-1) / 6 = -4 * (+0) = -0 in fp16 and fp64 alike."""
    for fmt in ("fp16", "bf16", "fp32", "fp64"):
        ov = oracle.evaluate(REFERENCES["hardswish"], FORMATS[fmt], np.array([-4.0]))
        assert math.copysign(1.0, ov.rounded[0]) == -1.0, fmt


def test_selftest_catches_a_lost_sign(monkeypatch):
    """A reference whose declared sign is wrong (gelu_grad's tail as +0, the defect of the
    float64 fast path) and an fp64 path that drops mpmath's zero signs both fail."""
    import dataclasses

    from audit.measure import selftest
    from audit.oracle import references

    monkeypatch.setenv("ACTAUDIT_NO_CACHE", "1")
    oracle._MEMO.clear()
    assert all(c.disagreements == 0 for c in selftest.run(["gelu_grad", "tanh"], ("fp16", "bf16")))
    good = references.REFERENCES["gelu_grad"]
    broken = dataclasses.replace(good, sign=lambda x, **_: np.ones_like(x))
    monkeypatch.setitem(references.REFERENCES, "gelu_grad", broken)
    checks = selftest.run(["gelu_grad"], ("bf16",))
    assert "bf16" in [c.fmt for c in checks if c.disagreements]
    monkeypatch.setitem(references.REFERENCES, "gelu_grad", good)
    monkeypatch.setattr(oracle, "zero_signbit", lambda ref, x, params, x2=None: np.zeros(len(x), bool))
    checks = selftest.run(["tanh"], ("fp16",))
    assert [c.fmt for c in checks if c.disagreements] == ["fp64 zeros"]
    oracle._MEMO.clear()


@pytest.mark.parametrize(
    "name,x",
    [
        ("gelu_grad", -3.362946829335837e38),
        ("gelu_grad", -1e300),
        ("gelu", -1e300),
        ("mish_grad", -1e300),
        ("silu_grad", -1e300),
    ],
)
def test_fp64_mpmath_path_at_huge_arguments(name, x):
    """exp(-x^2/2) at x = -1e300 needs x^2 (and erfc's argument) to ~2000 bits before the
    result, 10^(-10^599), even has its exponent right: at 64 bits mpmath gives
    gelu_grad(-3.36e38) > 0, and at fp64's p + 40 = 93 bits gelu_grad(-1e300) came out with
    the wrong sign.  The oracle adds 2 log2|x| bits; the sign here is
    that of the exact value, negative (Phi(x) < |x| phi(x) for x < -1; x sigmoid(x) < 0)."""
    ov = oracle.evaluate(REFERENCES[name], FORMATS["fp64"], np.array([x]))
    assert ov.rounded[0] == 0 and math.copysign(1.0, ov.rounded[0]) == -1.0
    assert math.copysign(1.0, ov.hi[0]) == -1.0 and ov.lo[0] <= 0
