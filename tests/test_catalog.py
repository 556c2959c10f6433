"""The catalog: breadth, robustness, and per-family figures recomputed with mpmath."""

import math

import mpmath as mp
import numpy as np
import pytest

import audit
from audit.numbers.formats import get_format
from audit.targets.candidates import families

mp.mp.prec = 160


def test_catalog_breadth():
    cat = audit.catalog()
    fams = families()
    assert len(cat) >= 45 and len(fams) >= 15
    for c in cat.values():
        assert c.formula and c.source, c.id
        assert c.reference in audit.REFERENCES


@pytest.mark.slow  # the whole catalog in three formats: .ci/run's slow stage
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp8_e4m3"])
def test_every_candidate_sweeps(dtype):
    res = audit.sweep(list(audit.catalog()), dtype=dtype, grid=48)
    assert len(res) == len(audit.catalog())
    for r in res:
        s = r.summary
        assert s.count == r.domain.count > 0
        assert s.finite + s.overflow_ok + s.nan_count + s.inf_count + s.undefined == s.count
        assert not (s.finite and math.isnan(r.max_ulp)), r.candidate


SELU_A = mp.mpf("1.6732632423543772848170429916717")
SELU_S = mp.mpf("1.0507009873554804934193349852946")


def sig(x):
    return mp.exp(x) / (1 + mp.exp(x))


def sp(x):
    return mp.log(1 + mp.exp(x))


# Each reference written again here, independently of audit/oracle/references.py.
EXACT = {
    "gelu": lambda x: x * mp.ncdf(x),
    "sigmoid": sig,
    "tanh": lambda x: (mp.exp(2 * x) - 1) / (mp.exp(2 * x) + 1),
    "silu": lambda x: x * sig(x),
    "softplus": sp,
    "mish": lambda x: x * mp.tanh(sp(x)),
    "elu": lambda x: x if x > 0 else mp.exp(x) - 1,
    "selu": lambda x: SELU_S * (x if x > 0 else SELU_A * (mp.exp(x) - 1)),
    "celu": lambda x: max(x, 0) + min(0, mp.exp(x) - 1),
    "relu": lambda x: max(x, mp.mpf(0)),
    "leaky_relu": lambda x: x if x >= 0 else x / 100,
    "relu6": lambda x: min(max(x, mp.mpf(0)), 6),
    "hardtanh": lambda x: min(max(x, mp.mpf(-1)), 1),
    "hardsigmoid": lambda x: min(max(x / 6 + mp.mpf(1) / 2, mp.mpf(0)), 1),
    "hardswish": lambda x: x * min(max(x + 3, mp.mpf(0)), 6) / 6,
    "logsigmoid": lambda x: mp.log(sig(x)),
    "softsign": lambda x: x / (1 + abs(x)),
    "exp": mp.exp,
    "erf": lambda x: (
        2 / mp.sqrt(mp.pi) * mp.quad(lambda t: mp.exp(-t * t), [0, x])
        if abs(x) < 6
        else mp.sign(x) * (1 - mp.erfc(abs(x)))
    ),
    "swiglu": lambda a, b: a * sig(a) * b,
    "geglu": lambda a, b: a * mp.ncdf(a) * b,
    "reglu": lambda a, b: max(a, mp.mpf(0)) * b,
    "expm1": lambda x: mp.exp(x) - 1,  # 160 bits: the cancellation costs at most 24 of them
    "log1p": lambda x: mp.log(1 + x),  # 1 + x exact at 160 bits for 16-bit x
    "log": mp.log,
    "exp2": lambda x: mp.exp(x * mp.log(2)),
    "rsqrt": lambda x: 1 / mp.sqrt(x),
    "reciprocal": lambda x: 1 / x,
}
# derivatives by mpmath's numerical differentiation of the function itself
for _f in ("gelu", "sigmoid", "tanh", "silu", "softplus", "mish"):
    EXACT[f"{_f}_grad"] = (lambda g: lambda x: mp.diff(g, x))(EXACT[_f])
EXACT["elu_grad"] = lambda x: mp.mpf(1) if x > 0 else mp.exp(x)
# fused forms: gelu of the exact sum, and scale (the default 1) times gelu
EXACT["gelu_bias"] = lambda x, b: EXACT["gelu"](x + b)
EXACT["gelu_scale"] = lambda x: EXACT["gelu"](x)
# backward kernels: dy times the derivative
for _f in ("gelu", "sigmoid", "tanh", "silu", "softplus", "mish", "elu"):
    EXACT[f"{_f}_bwd"] = (lambda g: lambda x, dy: dy * g(x))(EXACT[f"{_f}_grad"])


PIECEWISE_EXACT = {
    "relu",
    "leaky_relu",
    "relu6",
    "hardtanh",
    "hardsigmoid",
    "hardswish",
    "elu_grad",
    "elu_bwd",
    "reglu",
}


def ulp_error(r, f, fmt):
    """|r - f| / ulp_F(f), with ulp from mpmath's exact frexp."""
    if f == 0:
        u = mp.mpf(fmt.smallest_subnormal)
    else:
        e = mp.frexp(f)[1] - 1
        u = mp.ldexp(1, max(e, fmt.emin) - fmt.p + 1)
    return abs(mp.mpf(r) - f) / u


def one_candidate_per_family():
    fams = families()
    return [fams[f][0].id for f in sorted(fams)]


@pytest.mark.parametrize("cid", one_candidate_per_family())
def test_family_errors_match_mpmath(cid):
    cand = audit.catalog()[cid]
    dtype = "fp8_e4m3" if cand.arity == 2 else "fp16"
    fmt = get_format(dtype)
    (r,) = audit.sweep(cid, dtype=dtype, keep_points=True, **({"grid": 64} if cand.arity == 2 else {}))
    e = r.points
    fin = np.flatnonzero(e.cls == 0)
    rng = np.random.default_rng(11)
    pick = rng.choice(fin, size=min(120, len(fin)), replace=False)
    worst = int(fin[np.argmax(e.ulp_err[fin])])
    exact = EXACT[cand.reference]
    checked = 0
    for i in list(pick) + [worst]:
        args = (mp.mpf(e.x[i]),) if e.x2 is None else (mp.mpf(e.x[i]), mp.mpf(e.x2[i]))
        f = exact(*args)
        if (
            f != 0
            and cand.reference not in PIECEWISE_EXACT
            and abs(abs(f) - mp.ldexp(1, mp.frexp(f)[1] - 1)) < abs(f) * 2.0**-140
        ):
            continue  # within 160 bits of a power of two: this test cannot tell the side
        want = float(ulp_error(e.got[i], f, fmt))
        assert e.ulp_err[i] == pytest.approx(want, rel=1e-6, abs=1e-9), (cid, args, e.got[i])
        if i == worst:
            assert r.max_ulp == pytest.approx(want, rel=1e-6)
        checked += 1
    assert checked >= min(60, len(pick))


def smallest_fp16_with(pred):
    vals = get_format("fp16").finite_values()
    return min(float(v) for v in vals if v > 0 and pred(mp.mpf(float(v))))


def test_sigmoid_naive_nan_threshold_in_fp16():
    # exp(x) overflows fp16 (rounds to inf) once exp(x) >= 65520: from there inf/inf = NaN
    thr = smallest_fp16_with(lambda x: mp.exp(x) >= 65520)
    assert thr == 11.09375
    (r,) = audit.sweep("sigmoid.naive", dtype="fp16", keep_points=True)
    nan_x = r.points.x[r.points.cls == 2]
    assert nan_x.min() == thr and nan_x.max() == 65504.0
    vals = get_format("fp16").finite_values()
    assert r.nan_count == int((vals >= thr).sum())


def test_softplus_naive_inf_threshold_in_fp16():
    thr = smallest_fp16_with(lambda x: mp.exp(x) >= 65520)
    (r,) = audit.sweep("softplus.naive", dtype="fp16", keep_points=True)
    inf_x = r.points.x[r.points.cls == 3]
    assert inf_x.min() == thr
    assert r.inf_count == int((get_format("fp16").finite_values() >= thr).sum())


def test_leaky_alpha_is_rounded_in_fp8():
    # 0.01 rounds to 5 * 2^-9 = 0.009765625 in E4M3 (subnormal spacing 2^-9)
    assert get_format("e4m3").round([0.01])[0] == 0.009765625
    (r,) = audit.sweep("leaky_relu.mul", dtype="fp8_e4m3", keep_points=True)
    i = int(np.flatnonzero(r.points.x == -448.0)[0])
    assert r.points.got[i] == get_format("e4m3").round([0.009765625 * -448.0])[0]


def test_fp16_coefficients_underflow_in_half_rational():
    from approximations.primitives import TANH_ALPHA

    h = get_format("fp16")
    rounded = h.round(np.array(TANH_ALPHA))
    assert rounded[0] == 0 and rounded[1] == 0 and rounded[2] == 0  # alpha_13, _11, _9
    (r,) = audit.sweep("tanh.rational_half", dtype="bf16")
    assert r.compute == "fp16"


def test_parameter_sweep_and_grad_mapping():
    res = audit.sweep("swish.beta", dtype="fp8_e4m3", params={"beta": [0.5, 2.0]})
    assert [r.params["beta"] for r in res] == [0.5, 2.0]
    # beta changes the reference too: x sigmoid(2x) at x = 1 in mpmath
    (r,) = audit.sweep("swish.beta", dtype="fp8_e4m3", params={"beta": 2.0}, range=(1, 1), keep_points=True)
    assert r.points.exact[0] == pytest.approx(float(1 / (1 + mp.exp(-2))), rel=1e-15)
    ids = [r.candidate for r in audit.sweep("gelu.tanh", dtype="fp8_e4m3", grad=True)]
    assert ids == ["gelu_grad.tanh"]
    ids = {r.candidate for r in audit.sweep("sigmoid", dtype="fp8_e4m3", grad=True)}
    assert ids == {"sigmoid_grad.s1ms"}


def test_gated_fp8_is_exhaustive_and_fp16_grid_has_edges():
    (r,) = audit.sweep("reglu.relu_mul", dtype="fp8_e4m3")
    assert r.domain.exhaustive and r.domain.count == 254 * 254
    assert r.max_ulp <= 0.5  # max(a, 0) * b rounded once is correctly rounded
    (r,) = audit.sweep("reglu.relu_mul", dtype="fp16", grid=100, keep_points=True)
    a = set(r.points.x.tolist())
    assert {65504.0, -65504.0, 2.0**-24, 0.0, 1.0} <= a and not r.domain.exhaustive


def test_side_of_a_power_of_two_far_beyond_any_precision():
    """erf(948) = 1 - erfc(948) with erfc(948) ~ 1e-390000 > 0: the exact value lies in the
    binade below 1, where the fp16 ulp is 2^-11, so a result of 1.041015625 is
    (0.041015625 + erfc(948)) / 2^-11 = 84 ulps off, not 42."""
    (r,) = audit.sweep("erf.rational", dtype="fp16", range=(948, 948), keep_points=True)
    assert r.points.got[0] == 1.041015625
    assert r.points.ulp_err[0] == 84.0
    (r,) = audit.sweep("erf.libm", dtype="fp16", range=(948, 948))
    assert r.max_ulp <= 0.5


def test_sources_cite_no_path_outside_the_project():
    """A source cites an article by its title, never a path of the machine it was written on
    (issue 35, item 15); ``list`` shows it within 80 terminal columns (wide characters count
    twice)."""
    import unicodedata

    from reports.listing import candidates_text

    for c in audit.catalog().values():
        for bad in ("shared/", "seeds", "/work", "/home", "/tmp"):
            assert bad not in c.source, (c.id, c.source)
    safe = audit.catalog()["gelu.safe_clip"]
    assert "深度学习激活函数优化与CANN算子库实践" in safe.source
    text = candidates_text([safe], width=80)
    for line in text.splitlines():
        cols = sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in line)
        assert cols <= 80, line
    assert "深度学习激活函数优化与CANN算子库实践" in text
