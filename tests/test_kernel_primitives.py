"""The kernel primitives (expm1, log1p, log, exp2, rsqrt, reciprocal): references against
mpmath, and the bit-trick candidates against their C sources compiled with gcc."""

import math
import shutil
import subprocess

import mpmath as mp
import numpy as np
import pytest

import audit
from audit.numbers.formats import get_format
from audit.oracle import oracle
from audit.oracle.references import REFERENCES

C_SOURCE = r"""
#include <stdio.h>
#include <stdint.h>
#include <string.h>
static float fb(uint32_t i) { float f; memcpy(&f, &i, 4); return f; }
static uint32_t bf(float f) { uint32_t i; memcpy(&i, &f, 4); return i; }
/* Quake III Q_rsqrt, Lomont's constant */
static float q_rsqrt(float x, uint32_t magic) {
    float x2 = x * 0.5f, y = fb(magic - (bf(x) >> 1));
    return y * (1.5f - (x2 * y * y));
}
/* fastapprox (P. Mineiro) */
static float fastlog2(float x) {
    union { float f; uint32_t i; } vx = { x };
    union { uint32_t i; float f; } mx = { (vx.i & 0x007FFFFF) | 0x3f000000 };
    float y = vx.i;
    y *= 1.1920928955078125e-7f;
    return y - 124.22551499f - 1.498030302f * mx.f - 1.72587999f / (0.3520887068f + mx.f);
}
static float fastlog(float x) { return 0.69314718f * fastlog2(x); }
static float fasterlog(float x) {
    union { float f; uint32_t i; } vx = { x };
    float y = vx.i;
    y *= 8.2629582881927490e-8f;
    return y - 87.989971088f;
}
static float fastpow2(float p) {
    float offset = (p < 0) ? 1.0f : 0.0f;
    float clipp = (p < -126) ? -126.0f : p;
    int w = clipp;
    float z = clipp - w + offset;
    union { uint32_t i; float f; } v = { (uint32_t)((1 << 23) * (clipp + 121.2740575f
        + 27.7280233f / (4.84252568f - z) - 1.49012907f * z)) };
    return v.f;
}
static float fasterpow2(float p) {
    float clipp = (p < -126) ? -126.0f : p;
    union { uint32_t i; float f; } v = { (uint32_t)((1 << 23) * (clipp + 126.94269504f)) };
    return v.f;
}
/* qLibs qFFMath_Recip */
static float recip(float x) { float z = fb(0x7EF311C7u - bf(x)); return z * (2.0f - (x * z)); }
int main(void) {
    char name[32]; float x;
    while (scanf("%31s %a", name, &x) == 2) {
        float y = 0;
        if (!strcmp(name, "quake")) y = q_rsqrt(x, 0x5F3759DFu);
        else if (!strcmp(name, "lomont")) y = q_rsqrt(x, 0x5F375A86u);
        else if (!strcmp(name, "fastlog")) y = fastlog(x);
        else if (!strcmp(name, "fasterlog")) y = fasterlog(x);
        else if (!strcmp(name, "fastpow2")) y = fastpow2(x);
        else if (!strcmp(name, "fasterpow2")) y = fasterpow2(x);
        else if (!strcmp(name, "recip")) y = recip(x);
        printf("%08x\n", bf(y));
    }
    return 0;
}
"""

CASES = {  # candidate -> (C name, inputs where the C code is defined behaviour)
    "rsqrt.quake": ("quake", lambda v: v > 0),
    "rsqrt.lomont": ("lomont", lambda v: v > 0),
    "log.fastlog": ("fastlog", lambda v: v > 0),
    "log.fasterlog": ("fasterlog", lambda v: v > 0),
    "exp2.fastpow2": ("fastpow2", lambda v: (v > -200) & (v < 128)),  # uint32 conversion in range
    "exp2.fasterpow2": ("fasterpow2", lambda v: (v > -200) & (v < 128)),
    "reciprocal.magic": ("recip", lambda v: v != 0),
}


@pytest.fixture(scope="module")
def c_kernels(tmp_path_factory):
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp("ck")
    (d / "k.c").write_text(C_SOURCE)
    # -ffp-contract=off: no fused multiply-adds the source does not write
    subprocess.run([gcc, "-O0", "-ffp-contract=off", "-o", str(d / "k"), str(d / "k.c")], check=True)
    return d / "k"


@pytest.mark.parametrize("cid", sorted(CASES))
def test_bit_trick_candidates_match_their_c_source(cid, c_kernels):
    """Every fp16 value (as a float32 input) where the C code is defined: identical bits."""
    cname, where = CASES[cid]
    x = get_format("fp16").finite_values()
    x = x[where(x)]
    text = "".join(f"{cname} {float(v).hex()}\n" for v in x)
    out = subprocess.run([str(c_kernels)], input=text, capture_output=True, text=True, check=True)
    want = np.array([int(s, 16) for s in out.stdout.split()], dtype=np.uint32)
    f32 = get_format("fp32")
    got = audit.catalog()[cid].evaluate(x, f32, f32).astype(np.float32).view(np.uint32)
    assert len(want) == len(x)
    bad = np.flatnonzero(got != want)
    assert not len(bad), (cid, x[bad[:3]], got[bad[:3]], want[bad[:3]])


@pytest.mark.parametrize(
    "name,x,want",
    [
        # mpmath values written from the definitions, independently of audit/oracle/references.py
        ("expm1", -0.0, "-0"),
        ("expm1", 1e-5, None),
        ("expm1", -40.0, None),
        ("log1p", -1.0, "-inf"),
        ("log1p", -2.0, "nan"),
        ("log1p", 1e-5, None),
        ("log", 0.0, "-inf"),
        ("log", -0.0, "-inf"),
        ("log", -1.0, "nan"),
        ("log", 1.0, "+0"),
        ("exp2", -1074.5, None),
        ("exp2", 1023.75, None),
        ("exp2", 1024.0, "inf"),
        ("rsqrt", -0.0, "-inf"),
        ("rsqrt", 0.0, "inf"),
        ("rsqrt", -1.0, "nan"),
        ("rsqrt", 3.0, None),
        ("reciprocal", -0.0, "-inf"),
        ("reciprocal", 3.0, None),
        ("reciprocal", 2.0**-1074, "inf"),
    ],
)
def test_primitive_references_in_fp64(name, x, want):
    """fp64 (mpmath at every point) and fp32 (fast path) against values written here."""
    indep = {
        "expm1": lambda t: mp.exp(t) - 1,
        "log1p": lambda t: mp.log(1 + t),
        "log": mp.log,
        "exp2": lambda t: mp.power(2, t),
        "rsqrt": lambda t: 1 / mp.sqrt(t),
        "reciprocal": lambda t: 1 / t,
    }[name]
    for fmt in ("fp64", "fp32"):
        if fmt == "fp32" and abs(x) > 3e38 or (x != 0 and abs(x) < 1e-45 and fmt == "fp32"):
            continue
        r = float(oracle.evaluate(REFERENCES[name], get_format(fmt), np.array([x])).rounded[0])
        if want is None:
            with mp.workprec(300):
                e = indep(mp.mpf(x))
            # float() of a 300-bit value rounds once, to nearest; fp32: its exact rounding
            with np.errstate(over="ignore"):  # 2^1023.75 overflows fp32: inf
                want_r = float(e) if fmt == "fp64" else float(np.float32(mp.nstr(e, 40)))
            assert r == want_r, (name, fmt, x, r)
        elif want == "nan":
            assert math.isnan(r)
        else:
            assert r == float(want) and math.copysign(1.0, r) == math.copysign(1.0, float(want))


def test_naive_forms_cancel_and_repairs_do_not():
    """exp(x) - 1 and log(1 + x) lose everything near 0 (fp16: 1 + 2^-12 rounds to 1, so
    log(1 + 2^-12) becomes 0, an underflow finding); Kahan's and Goldberg's forms keep
    bf16 results within a few ulps there (in fp16 their products of small numbers go
    subnormal: log(u) x at x = -3e-4 is 1.5e-7, two significant bits)."""
    (naive,) = audit.sweep("log1p.naive", dtype="fp16", range=(2.0**-12, 2.0**-12), keep_points=True)
    assert naive.points.got[0] == 0.0 and any(f.kind == "underflow" for f in naive.findings)
    (naive,) = audit.sweep("expm1.naive", dtype="bf16", range=(-0.25, 0.25))
    assert naive.max_ulp >= 128
    for cid in ("log1p.goldberg", "expm1.kahan"):
        (good,) = audit.sweep(cid, dtype="bf16", range=(-0.25, 0.25))
        assert good.max_ulp < 4, cid
    (r,) = audit.sweep("log.libm", dtype="fp16", keep_points=True)
    # every negative input (and -0? no: log(-0) = -inf) is outside log's domain
    neg = r.points.x < 0
    assert r.summary.undefined == int(neg.sum()) and r.max_ulp <= 0.5
