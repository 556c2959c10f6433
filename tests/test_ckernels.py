"""C kernels as candidates (audit/ckernels.py), and the emulation checked against this CPU.

The bit-for-bit tests compile C versions of catalog formulas (only + - * / fmaf fminf fmaxf,
floorf and ldexpf) with gcc and compare, at every finite fp16 input and at 2^20 fp32 inputs,
the compiled kernel with the emulated evaluation path: -ffp-contract=off against the
default semantics, explicit fmaf placed where `contract` fuses against `contract`, and
FTZ/DAZ set in MXCSR against `ftz,daz`.  The compiler and the CPU are the independent side.
"""

from __future__ import annotations

import platform
import shutil

import numpy as np
import pytest

import audit
from approximations.primitives import (
    CEPHES_C1,
    CEPHES_C2,
    CEPHES_CLAMP,
    CEPHES_P,
    LOG2E,
    TANH_ALPHA,
    TANH_BETA,
    TANH_CLAMP,
)
from audit import semantics as S
from audit.ckernels import KernelError, c_candidate, compile_kernel
from audit.cli import main
from audit.errors import ActauditError
from audit.formats import FORMATS

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
X86 = platform.machine() in ("x86_64", "AMD64")
F16, F32 = FORMATS["fp16"], FORMATS["fp32"]


def K(v: float) -> str:
    """A constant as the emulation rounds it: the Python float (a double) rounded to float."""
    return f"((float){float(v)!r})"


def horner_c(var: str, coeffs, fused: bool) -> str:
    p = K(coeffs[0])
    for c in coeffs[1:]:
        p = f"fmaf({var}, {p}, {K(c)})" if fused else f"({var} * {p} + {K(c)})"
    return p


def tanh_c(fused: bool) -> str:
    # tanh_rational: x = clip(z, -c, c); x2 = x*x; x * P(x2) / Q(x2) (x2 has several uses:
    # never contracted; each x2 * p + c is)
    return f"""
        float x = fminf(fmaxf(z, -{K(TANH_CLAMP)}), {K(TANH_CLAMP)});
        float x2 = x * x;
        float p = {horner_c("x2", TANH_ALPHA, fused)};
        float q = {horner_c("x2", TANH_BETA, fused)};
        out = x * p / q;"""


def hardswish_c(fused: bool) -> str:
    # x * clip(x + 3, 0, 6) / 6: the product feeds a division, never contracted
    return """
        float c = fminf(fmaxf(z + 3.0f, 0.0f), 6.0f);
        out = z * c / 6.0f;"""


def cephes_c(fused: bool) -> str:
    # cephes_exp: n = floor(x log2e + 1/2); r = x - n C1; r = r - n C2; p = P(r) by p*r + c;
    # y = p (r r) + r + 1; ldexp(y, n)
    if fused:
        body = f"""
        float n = floorf(fmaf(x, {K(LOG2E)}, 0.5f));
        float r = fmaf(-n, {K(CEPHES_C1)}, x);
        r = fmaf(-n, {K(CEPHES_C2)}, r);
        float p = {K(CEPHES_P[0])};"""
        body += "".join(f"\n        p = fmaf(p, r, {K(c)});" for c in CEPHES_P[1:])
        body += "\n        float y = fmaf(p, r * r, r) + 1.0f;"
    else:
        body = f"""
        float n = floorf(x * {K(LOG2E)} + 0.5f);
        float r = x - n * {K(CEPHES_C1)};
        r = r - n * {K(CEPHES_C2)};
        float p = {K(CEPHES_P[0])};"""
        body += "".join(f"\n        p = p * r + {K(c)};" for c in CEPHES_P[1:])
        body += "\n        float y = p * (r * r) + r + 1.0f;"
    return f"""
        float x = fminf(fmaxf(z, -{K(CEPHES_CLAMP)}), {K(CEPHES_CLAMP)});{body}
        out = ldexpf(y, (int)n);"""


FORMULAS = {"tanh.rational": tanh_c, "hardswish.div6": hardswish_c, "exp.cephes": cephes_c}


def kernel_source(body: str, mxcsr: bool) -> str:
    pre = post = ""
    if mxcsr:  # FTZ (bit 15) and DAZ (bit 6) for the kernel's own operations
        pre = "unsigned int old = _mm_getcsr(); _mm_setcsr(old | 0x8040);"
        post = "_mm_setcsr(old);"
    return f"""#include <math.h>
#include <stddef.h>
{"#include <xmmintrin.h>" if mxcsr else ""}
void kernel(const float *xs, float *ys, size_t n) {{
    {pre}
    for (size_t i = 0; i < n; i++) {{
        float z = xs[i], out;{body}
        ys[i] = out;
    }}
    {post}
}}
"""


def fp32_inputs(n: int = 1 << 20) -> np.ndarray:
    """2^20 finite fp32 values: random bit patterns (every binade, subnormals included) and
    a dense run of subnormals and of the smallest normals."""
    rng = np.random.default_rng(20)
    bits = rng.integers(0, 1 << 32, n - 8192, dtype=np.uint64).astype(np.uint32)
    sub = np.arange(0x007FF000, 0x00801000, dtype=np.uint32)  # around 2^-126
    bits = np.concatenate([bits, sub, sub | np.uint32(0x80000000)])
    with np.errstate(invalid="ignore"):
        x = bits.view(np.float32).astype(np.float64)
    return x[np.isfinite(x)]


def compare(tmp_path, cid, storage, x, sem, fused, mxcsr, flags):
    src = tmp_path / f"{cid.replace('.', '_')}.c"
    src.write_text(kernel_source(FORMULAS[cid](fused), mxcsr))
    ck = c_candidate(f"c:{src}:kernel", audit.catalog()[cid].reference, storage, flags)
    want = ck.evaluate(x, storage, storage)
    cand = audit.catalog()[cid].with_semantics(S.parse(sem))
    got = cand.evaluate(x, storage, F32)
    same = (got == want) & (np.signbit(got) == np.signbit(want)) | (np.isnan(got) & np.isnan(want))
    bad = np.flatnonzero(~same)
    assert bad.size == 0, (cid, sem, bad.size, [(x[i], got[i], want[i]) for i in bad[:5]])


CASES = [
    (cid, sem, fused, mx, flags)
    for cid in FORMULAS
    for sem, fused, mx, flags in [
        ("ieee", False, False, "-O2 -ffp-contract=off"),
        ("contract", True, False, "-O2 -ffp-contract=off -mfma"),
        ("ftz,daz", False, True, "-O2 -ffp-contract=off"),
    ]
]


@pytest.mark.parametrize("cid,sem,fused,mxcsr,flags", CASES)
def test_emulation_matches_this_cpu_every_fp16_input(tmp_path, cid, sem, fused, mxcsr, flags):
    if mxcsr and not X86:
        pytest.skip("MXCSR is x86")
    compare(tmp_path, cid, F16, F16.finite_values(), sem, fused, mxcsr, flags)


@pytest.mark.parametrize("cid,sem,fused,mxcsr,flags", CASES)
def test_emulation_matches_this_cpu_2_20_fp32_inputs(tmp_path, cid, sem, fused, mxcsr, flags):
    if mxcsr and not X86:
        pytest.skip("MXCSR is x86")
    compare(tmp_path, cid, F32, fp32_inputs(), sem, fused, mxcsr, flags)


def _has_fma() -> bool:
    try:
        return " fma " in open("/proc/cpuinfo").read().replace("\n", " ")
    except OSError:
        return False


@pytest.mark.skipif(not (X86 and _has_fma()), reason="needs an x86 CPU with FMA")
@pytest.mark.parametrize("cid", list(FORMULAS))
def test_gcc_fp_contract_fast_fuses_where_contract_does(tmp_path, cid):
    # the plain C (no fmaf), compiled with -ffp-contract=fast: GCC's own contraction of these
    # formulas agrees with `contract` bit for bit (and not with ieee for tanh and exp)
    compare(tmp_path, cid, F32, fp32_inputs(), "contract", False, False, "-O2 -mfma -ffp-contract=fast")


def test_the_checks_can_fail(tmp_path):
    # the same kernels disagree with the emulation under the other semantics: contraction
    # and flushing change results that these inputs reach
    with pytest.raises(AssertionError):
        compare(
            tmp_path,
            "tanh.rational",
            F32,
            fp32_inputs(1 << 16),
            "ieee",
            True,
            False,
            "-O2 -ffp-contract=off -mfma",
        )
    if X86:
        with pytest.raises(AssertionError):
            compare(
                tmp_path,
                "hardswish.div6",
                F32,
                fp32_inputs(1 << 16),
                "ieee",
                False,
                True,
                "-O2 -ffp-contract=off",
            )


# ------------------------------------------------------------ the candidate
HS = """#include <math.h>
#include <stddef.h>
void hs(const float *x, float *y, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = x[i] * fminf(fmaxf(x[i] + 3.0f, 0.0f), 6.0f) / 6.0f;
}
void hs16(const _Float16 *x, _Float16 *y, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = -x[i];
}
static void hidden(const float *x, float *y, size_t n) { (void)x; (void)y; (void)n; }
void crash(const float *x, float *y, size_t n) { (void)x; (void)y; (void)n; *(volatile int *)0 = 1; }
void (*keep)(const float *, float *, size_t) = hidden;
"""


def test_float_and_float16_kernels(tmp_path):
    src = tmp_path / "hs.c"
    src.write_text(HS)
    (r,) = audit.sweep(f"c:{src}:hs", dtype="fp8_e4m3", reference="hardswish")
    assert r.domain.count == 254 and r.candidate == f"c:{src}:hs"
    assert r.compute == "native"  # the kernel's own float arithmetic, not the storage format
    (r2,) = audit.sweep(f"c:{src}:hs", dtype="fp8_e4m3", compute="auto", reference="hardswish")
    assert r2.compute == "native"  # one result: a fixed arithmetic is not run on two paths
    # the _Float16 kernel negates: exactly -x at every fp16 input
    c = c_candidate(f"c:{src}:hs16", "relu", F16)
    x = F16.finite_values()
    y = c.evaluate(x, F16, F16)
    assert np.array_equal(y, -x) and np.array_equal(np.signbit(y), ~np.signbit(x))


def test_compile_cache_by_source_and_flags(tmp_path, monkeypatch):
    monkeypatch.setenv("ACTAUDIT_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "hs.c"
    src.write_text(HS)
    a = compile_kernel(src, "-O2").so
    mtime = a.stat().st_mtime_ns
    b = compile_kernel(src, "-O2").so
    c = compile_kernel(src, "-O1").so
    assert a == b and b.stat().st_mtime_ns == mtime and c != a
    src.write_text(HS + "\n/* changed */\n")
    d = compile_kernel(src, "-O2").so
    assert d != a
    # a corrupted cached object is not used: it is compiled again
    src.write_text(HS)
    a.write_bytes(b"garbage")
    e = compile_kernel(src, "-O2").so
    assert e == a and a.read_bytes()[:4] == b"\x7fELF"
    (r,) = audit.sweep(f"c:{src}:hs", dtype="fp8_e4m3", reference="hardswish")
    assert r.domain.count == 254


@pytest.mark.parametrize(
    "target,msg",
    [
        ("c:{d}/hs.c:crash", "crashed (SIGSEGV)"),
        ("c:{d}/hs.c:hidden", "has no symbol 'hidden'"),
        ("c:{d}/bad.c:f", "does not compile"),
        ("c:{d}/none.c:f", "cannot read C kernel"),
        ("c:{d}/hs.c:nothere", "no definition"),
        ("c:{d}/hs.c", "is not c:FILE.c:FUNCTION"),
    ],
)
def test_kernel_errors_are_one_line(tmp_path, capsys, target, msg):
    (tmp_path / "hs.c").write_text(HS)
    (tmp_path / "bad.c").write_text("void f(const float *x, float *y, size_t n) { oops }\n")
    code = main(["sweep", target.format(d=tmp_path), "--dtype", "fp8_e5m2", "--reference", "relu"])
    _, err = capsys.readouterr()
    assert code == 2 and err.startswith("actaudit: error:") and err.count("\n") == 1, err
    assert msg in err


def test_formats_a_kernel_cannot_take(tmp_path):
    src = tmp_path / "hs.c"
    src.write_text(HS)
    with pytest.raises(ActauditError, match="do not all fit"):
        c_candidate(f"c:{src}:hs", "relu", FORMATS["fp64"])
    with pytest.raises(ActauditError, match="do not all fit"):
        c_candidate(f"c:{src}:hs16", "relu", FORMATS["bf16"])
    with pytest.raises(ActauditError, match="--reference"):
        c_candidate(f"c:{src}:hs", None, F16)
    with pytest.raises(ActauditError, match="--cflags applies"):
        audit.sweep("relu.max", dtype="fp16", cflags="-O3")
    assert issubclass(KernelError, ActauditError)


def test_operation_flags_do_not_apply_to_kernels(tmp_path):
    src = tmp_path / "hs.c"
    src.write_text(HS)
    with pytest.raises(ActauditError, match="acts on a formula's operations"):
        audit.sweep(f"c:{src}:hs", dtype="fp16", reference="hardswish", semantics="ftz")
    # conversion flags do: ftz_out flushes the kernel's subnormal results (hardswish(x) =
    # x (x + 3) / 6 is about x/2 for subnormal x: subnormal or zero)
    ieee, ftz = audit.sweep(f"c:{src}:hs", dtype="fp16", reference="hardswish", semantics=["ieee", "ftz_out"])
    assert ftz.semantics.name == "ftz_out" and ftz.changed["count"] > 0
    first = ftz.changed["first"]
    assert first["got"] == 0 and 0 < abs(first["ieee"]) < 2.0**-14


NEG = """#include <stddef.h>
void k(const float *x, float *y, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float p = x[i] * (float)0.7978845608;
        y[i] = -p + 1.0f;                      /* -(a*b) + c */
        y[i] = y[i] - (x[i] * x[i]) * 0.25f;   /* c - (a*b)*d: the outer product is fused */
    }
}
"""


@pytest.mark.skipif(not (X86 and _has_fma()), reason="needs an x86 CPU with FMA")
def test_gcc_contracts_through_negation_like_contract(tmp_path):
    from audit.compute import evaluate

    src = tmp_path / "neg.c"
    src.write_text(NEG)
    ck = c_candidate(f"c:{src}:k", "relu", F32, "-O2 -mfma -ffp-contract=fast")
    x = fp32_inputs(1 << 18)
    want = ck.evaluate(x, F32, F32)

    def f(t, m):
        p = t * float(np.float32(0.7978845608))
        y = -p + 1.0
        return y - (t * t) * 0.25

    got = evaluate(f, x, F32, F32, {}, semantics=S.parse("contract"))
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    assert same.all(), np.flatnonzero(~same)[:5]
    ieee = evaluate(f, x, F32, F32, {})
    assert not np.array_equal(ieee, want)
