"""End-to-end sweeps, checked against computations done independently in the test."""

import json
import math

import mpmath as mp
import numpy as np
import pytest

import audit
from audit.errors import BadOptionError, BadParameterError, BadRangeError, UnknownNameError
from audit.numbers.formats import get_format
from audit.numbers.inputs import domain, parse_range
from audit.targets.candidates import resolve


def test_correct_formula_in_fp64_rounds_correctly():
    """Done-when 1: a correct formula computed in fp64 rounds correctly in fp16 / bf16."""
    (r,) = audit.sweep("gelu.erf", dtype="fp16", compute="fp64")
    assert r.domain.exhaustive and r.domain.count == 63488
    assert r.max_ulp <= 0.5
    (r,) = audit.sweep("gelu.erfc", dtype="bf16", compute="fp64")
    assert r.max_ulp <= 0.5


def fp16_gelu_tanh_by_hand(x16):
    """tanh-GELU in fp16, step by step with numpy float16 arithmetic (+,*: exact rounding)
    and tanh taken in float64 then rounded: what the compute path claims to model."""
    h = np.float16
    with np.errstate(all="ignore"):
        x = x16.astype(h)
        cube = (x * x) * x
        inner = x + h(0.044715) * cube
        u = h(math.sqrt(2 / math.pi)) * inner
        t = np.tanh(u.astype(np.float64)).astype(h)
        return (h(0.5) * x * (h(1.0) + t)).astype(np.float64)


def ulp_error_mp(r, x, fmt):
    """|r - gelu(x)| / ulp(gelu(x)) computed in mpmath, gelu through ncdf."""
    with mp.workprec(100):
        f = mp.mpf(x) * mp.ncdf(mp.mpf(x))
        if f == 0:
            u = mp.mpf(fmt.smallest_subnormal)
        else:
            e = int(mp.floor(mp.log(abs(f), 2)))
            u = mp.ldexp(1, max(e, fmt.emin) - fmt.p + 1)
        return float(abs(mp.mpf(r) - f) / u)


def test_gelu_tanh_fp16_matches_independent_evaluation():
    fmt = get_format("fp16")
    (r,) = audit.sweep("gelu.tanh", dtype="fp16", keep_points=True)
    x = r.points.x
    expect = fp16_gelu_tanh_by_hand(x)
    assert np.array_equal(r.points.got, expect, equal_nan=True)
    # the worst input and its ULP error, recomputed in mpmath over the region where it lies
    fin = np.isfinite(expect)
    region = fin & (np.abs(x) < 12)  # beyond, results are 0 or x and errors tiny
    errs = [ulp_error_mp(g, xi, fmt) for g, xi in zip(expect[region].tolist(), x[region].tolist())]
    i = int(np.argmax(errs))
    assert r.worst["x"] == x[region][i]
    assert r.max_ulp == pytest.approx(errs[i], rel=1e-9)
    assert r.worst["x_hex"] == f"0x{int(np.float16(x[region][i]).view(np.uint16)):04x}"


def test_specials_by_limits():
    (r,) = audit.sweep("gelu.tanh", dtype="fp16")
    by_x = {str(s["x"]): s for s in r.specials}
    assert by_x["inf"]["ok"] and by_x["inf"]["got"] == math.inf
    # tanh-GELU gives -inf * 0 = NaN at -inf, where GELU(-inf) = -0
    assert math.isnan(by_x["-inf"]["got"]) and not by_x["-inf"]["ok"]
    # GELU(-inf) = -0: zero with the sign bit set (== alone would accept +0)
    assert by_x["-inf"]["expected"] == 0 and math.copysign(1.0, by_x["-inf"]["expected"]) == -1.0
    assert by_x["nan"]["ok"]
    (r,) = audit.sweep("gelu.tanh", dtype="fp8_e4m3")
    assert [s["x"] for s in r.specials] == [pytest.approx(float("nan"), nan_ok=True)]


def test_results_are_bit_identical_between_runs():
    a = audit.document(audit.sweep("gelu", dtype="fp16,bf16,fp32"))
    b = audit.document(audit.sweep("gelu", dtype="fp16,bf16,fp32"))
    assert json.dumps(a) == json.dumps(b)


def test_compute_wider_than_storage_and_multiple_paths():
    res = audit.sweep(["gelu.tanh"], dtype="fp16,bf16", compute="fp32,fp64")
    assert [(r.dtype, r.compute) for r in res] == [
        ("fp16", "fp32"),
        ("fp16", "fp64"),
        ("bf16", "fp32"),
        ("bf16", "fp64"),
    ]
    # the approximation error dominates: wider compute changes little in fp16
    assert all(r.max_ulp > 1 for r in res)
    # every result equals the formula evaluated independently in numpy float32 / float64
    # (tanh in float64, rounded to the compute type), then rounded to the storage format
    import ml_dtypes

    for r in res:
        c = np.float32 if r.compute == "fp32" else np.float64
        st = np.float16 if r.dtype == "fp16" else ml_dtypes.bfloat16
        (k,) = audit.sweep("gelu.tanh", dtype=r.dtype, compute=r.compute, keep_points=True)
        x = k.points.x.astype(c)
        with np.errstate(all="ignore"):
            inner = c(math.sqrt(2 / math.pi)) * (x + c(0.044715) * ((x * x) * x))
            t = np.tanh(inner.astype(np.float64)).astype(c)
            y = (c(0.5) * x) * (c(1) + t)
        if st is ml_dtypes.bfloat16 and c is np.float64:
            # ml_dtypes goes float64 -> float32 -> bfloat16: right unless the float32 value
            # is a bfloat16 midpoint that y itself is not (double rounding): none here
            y32 = y.astype(np.float32)
            assert not ((y32.view(np.uint32) & 0xFFFF == 0x8000) & (y32 != y)).any()
        expect = y.astype(st).astype(np.float64)
        assert np.array_equal(k.points.got, expect, equal_nan=True), (r.dtype, r.compute)
    # and fp32 differs from fp64 compute somewhere (the path is really float32)
    (a,), (b,) = (
        audit.sweep("gelu.tanh", dtype="fp16", compute=c, keep_points=True) for c in ("fp32", "fp64")
    )
    assert not np.array_equal(a.points.got, b.points.got, equal_nan=True)


def test_range_restricts_inputs():
    (r,) = audit.sweep("gelu.erf", dtype="fp16", range=(-1, 1), keep_points=True)
    assert r.points.x.min() == -1 and r.points.x.max() == 1
    f = get_format("fp16")
    vals = f.finite_values()
    assert r.domain.count == int(((vals >= -1) & (vals <= 1)).sum())


def test_fp32_sample_is_stratified_and_seeded():
    d1 = domain(get_format("fp32"), None, samples=5000, seed=7)
    d2 = domain(get_format("fp32"), None, samples=5000, seed=7)
    d3 = domain(get_format("fp32"), None, samples=5000, seed=8)
    assert np.array_equal(d1.values, d2.values) and not np.array_equal(d1.values, d3.values)
    assert not d1.exhaustive
    v = d1.values
    # every binade of both signs is represented, and the edges are there
    e = np.frexp(np.abs(v[v != 0]))[1]
    assert set(range(-125, 129)) <= set(e.tolist())
    assert get_format("fp32").max_finite in v and 2.0**-149 in v and -(2.0**-149) in v


def test_fp32_exhaustive_range():
    (r,) = audit.sweep("gelu.tanh", dtype="fp32", range=(1.0, 1.0 + 2**-13), exhaustive=True)
    assert r.domain.exhaustive and r.domain.count == 2**10 + 1
    d = domain(get_format("fp32"), (-(2.0**-148), 2.0**-148), exhaustive=True)
    assert d.all().tolist() == [-(2.0**-148), -(2.0**-149), -0.0, 0.0, 2.0**-149, 2.0**-148]


def test_fp32_sweep_checks_against_mpmath_at_worst_point():
    (r,) = audit.sweep("gelu.erf", dtype="fp32", samples=3000)
    w = r.worst
    assert r.max_ulp == pytest.approx(ulp_error_mp(w["got"], w["x"], get_format("fp32")), rel=1e-6)


@pytest.mark.parametrize(
    "text,err",
    [("3:1", BadRangeError), ("nan:1", BadRangeError), ("1", BadRangeError), ("a:b", BadRangeError)],
)
def test_bad_ranges(text, err):
    with pytest.raises(err):
        parse_range(text)


def test_bad_names_and_options():
    with pytest.raises(UnknownNameError, match="did you mean"):
        resolve(["gelu.tanhh"])
    with pytest.raises(UnknownNameError):
        audit.sweep("gelu", dtype="fp17")
    with pytest.raises(BadRangeError, match="holds no finite"):
        audit.sweep("gelu", dtype="fp16", range=(1e-9, 2e-9))
    with pytest.raises(BadOptionError):
        audit.sweep("gelu", dtype="fp16", samples=10)
    with pytest.raises(BadOptionError):
        audit.sweep("gelu", dtype="fp16", params={"nope": 1.0})
    with pytest.raises(BadParameterError):
        resolve(["gelu.tanh"])[0].resolve_params({"nope": 1.0})


def test_json_document_fields():
    doc = audit.document(audit.sweep("gelu.tanh", dtype="fp16"))
    assert doc["schema"].startswith("actaudit.sweep/")
    (res,) = doc["results"]
    for k in (
        "candidate",
        "reference",
        "dtype",
        "compute",
        "inputs",
        "max_ulp",
        "worst",
        "mean_ulp",
        "p99_ulp",
        "max_abs",
        "max_rel",
        "max_ulp_distance",
        "correctly_rounded_fraction",
        "nan_count",
        "inf_count",
    ):
        assert k in res
    assert set(res["inputs"]) >= {"count", "exhaustive"}
    assert set(res["worst"]) >= {"x", "x_hex", "got", "exact"}
    json.dumps(doc, allow_nan=False)


def test_chunked_and_parallel_runs_equal_a_direct_run(monkeypatch):
    from audit.numbers import inputs

    def doc(**kw):
        (r,) = audit.sweep("gelu.tanh", dtype="fp32", range=(1.0, 1.0 + 2**-5), exhaustive=True, **kw)
        d = r.to_dict()
        return json.dumps(d, sort_keys=True), r

    direct, r0 = doc(workers=1)  # one chunk of 2^18 + 1 inputs
    assert r0.domain.count == 2**18 + 1
    monkeypatch.setattr(inputs, "CHUNK", 1 << 16)  # the same inputs in 5 chunks
    chunked, r1 = doc(workers=1)
    parallel, r2 = doc(workers=2)
    assert len(r1.domain.chunk_ranges()) == 5
    assert chunked == parallel
    # exact p99 (all errors in memory) makes even the chunked result identical to the direct one
    assert chunked == direct
