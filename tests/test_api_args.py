"""The Python API takes callables like assert_accuracy, and bad arguments are ActauditErrors."""

import math

import numpy as np
import pytest

import audit
from audit.errors import ActauditError


def gelu_fp32(x):
    """erf-GELU computed in float32 (math.erf per element), stored in x's dtype."""
    v = x.astype(np.float32)
    erf = np.vectorize(math.erf, otypes=[np.float64])
    return (
        np.float32(0.5) * v * (np.float32(1) + erf(v / np.float32(math.sqrt(2))).astype(np.float32))
    ).astype(x.dtype)


def test_callable_target_and_in_a_list():
    r = audit.sweep(gelu_fp32, reference="gelu", dtype="fp8_e4m3")
    assert [(x.candidate, x.compute) for x in r] == [("gelu_fp32", "native")]
    assert r[0].domain.count == 254  # every finite E4M3 value: 2 x 127
    # independently: the result at the worst input, recomputed here
    w = r[0].worst
    import ml_dtypes

    x = np.array([w["x"]]).astype(ml_dtypes.float8_e4m3fn)
    assert float(gelu_fp32(x)[0]) == w["got"]
    both = audit.sweep([gelu_fp32, "gelu.tanh"], reference="gelu", dtype="fp8_e4m3", compute="fp8_e4m3")
    assert sorted(x.candidate for x in both) == ["gelu.tanh", "gelu_fp32"]
    assert next(x for x in both if x.candidate == "gelu_fp32").to_dict() == r[0].to_dict()


def test_candidate_object_target():
    c = audit.catalog()["gelu.tanh"]
    assert audit.sweep(c, dtype="fp8_e5m2")[0].candidate == "gelu.tanh"


def bad(x):
    return 1 / 0


@pytest.mark.parametrize(
    "kw",
    [
        dict(targets=gelu_fp32),  # no reference
        dict(targets=3),
        dict(targets=[None]),
        dict(targets=["gelu.tanh", 4.5]),
        dict(targets={"gelu.tanh"}),
        dict(targets="gelu.tanh", range=(1,)),
        dict(targets="gelu.tanh", range=("a", 1)),
        dict(targets="gelu.tanh", range=5),
        dict(targets="gelu.tanh", range="1-2"),
        dict(targets="gelu.tanh", range=(2, 1)),
        dict(targets="gelu.tanh", range=(math.nan, 1)),
        dict(targets="gelu.tanh", dtype="fp32", samples="x"),
        dict(targets="gelu.tanh", dtype="fp32", samples=2.5),
        dict(targets="gelu.tanh", dtype="fp32", samples=0),
        dict(targets="gelu.tanh", dtype="fp32", seed="x"),
        dict(targets="gelu.tanh", dtype="fp32", seed=-1),
        dict(targets="sigmoid.clamped", params={"limit": "a"}),
        dict(targets="sigmoid.clamped", params={"limit": math.nan}),
        dict(targets="sigmoid.clamped", params={"limit": []}),
        dict(targets="sigmoid.clamped", params=[1]),
        dict(targets="swiglu.silu_mul", grid="x"),
        dict(targets="swiglu.silu_mul", grid=-3),
        dict(targets="gelu.tanh", max_ulp="x"),
        dict(targets="gelu.tanh", max_ulp=-1),
        dict(targets="gelu.tanh", atol=math.nan),
        dict(targets="gelu.tanh", workers="x"),
        dict(targets="gelu.tanh", workers=0),
        dict(targets="gelu.tanh", reference=3),
        dict(targets="gelu.tanh", device=3),
        dict(targets="gelu.tanh", dtype=16),
        dict(targets="gelu.tanh", dtype=None),
        dict(targets="gelu.tanh", compute=5),
        dict(targets=gelu_fp32, reference="nope"),
        dict(targets=gelu_fp32, reference=3),
        dict(targets=lambda x: x[:3], reference="gelu"),
        dict(targets=lambda x: "s", reference="gelu"),
        dict(targets=bad, reference="gelu"),
        dict(targets=gelu_fp32, reference="gelu", grad=True),
    ],
)
def test_bad_arguments_raise_actaudit_errors(kw):
    with pytest.raises(ActauditError):
        audit.sweep(**kw)
