"""C kernels as candidates (audit/targets/ckernels.py), and the emulation checked against this CPU.

The bit-for-bit tests compile C versions of catalog formulas (only + - * / fmaf fminf fmaxf,
floorf and ldexpf) with gcc and compare, at every finite fp16 input and at 2^20 fp32 inputs,
the compiled kernel with the emulated evaluation path: -ffp-contract=off against the
default semantics, explicit fmaf placed where `contract` fuses against `contract`, and
FTZ/DAZ set in MXCSR against `ftz,daz`.  The compiler and the CPU are the independent side.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

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
from audit.cli import main
from audit.errors import ActauditError
from audit.numbers.formats import FORMATS
from audit.targets import semantics as S
from audit.targets.ckernels import KernelError, c_candidate, compile_kernel

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
    from audit.targets.compute import evaluate

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


# ------------------------------------------------- isolation, cache and checks (issue 23)
ROOT = Path(__file__).parents[1]


def _cli(args, cwd):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "audit.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _one_error_line(code, err, msg):
    assert code == 2 and err.startswith("actaudit: error:") and err.count("\n") == 1, err
    assert "Traceback" not in err and msg in err, err


def test_a_kernel_printing_to_stdout_does_not_corrupt_json(tmp_path):
    (tmp_path / "p.c").write_text(
        "#include <stdio.h>\n#include <stddef.h>\n#include <unistd.h>\n"
        "void k(const float *x, float *y, size_t n) {\n"
        '    printf("{garbage from printf\\n"); fflush(stdout);\n'
        '    write(1, "raw write\\n", 10); fprintf(stderr, "on stderr\\n");\n'
        "    for (size_t i = 0; i < n; i++) y[i] = x[i];\n}\n"
    )
    r = _cli(["sweep", "c:p.c:k", "--dtype", "fp8_e4m3", "--reference", "relu", "--json", "-"], tmp_path)
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads(r.stdout)  # the whole of stdout is the JSON document
    assert doc["results"][0]["candidate"] == "c:p.c:k"
    assert "garbage" not in r.stdout + r.stderr and "raw write" not in r.stdout


EXITS = r"""#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>
#include <signal.h>
void half(const float *x, float *y, size_t n) { for (size_t i = 0; i < n / 2; i++) y[i] = x[i]; _exit(0); }
void quits(const float *x, float *y, size_t n) { (void)x; (void)y; (void)n; exit(0); }
void fails(const float *x, float *y, size_t n) { (void)x; (void)y; (void)n; exit(7); }
void killed(const float *x, float *y, size_t n) { (void)x; (void)y; (void)n; raise(SIGKILL); }
void spin(const float *x, float *y, size_t n) { (void)x; (void)y; if (n) for (;;) {} }
"""


@pytest.mark.parametrize(
    "func,extra,msg",
    [
        ("half", [], "exited (status 0) before returning"),
        ("quits", [], "exited (status 0) before returning"),
        ("fails", [], "exited before returning (exit status 7"),
        ("killed", [], "crashed (SIGKILL)"),
        ("spin", ["--timeout", "0.5"], "did not return within 0.5 s"),
    ],
)
def test_a_kernel_must_return(tmp_path, capsys, func, extra, msg):
    # issue 23: a kernel that _exit(0)s halfway was read as zeros, exit 0; --timeout was
    # ignored for c: (600 s hard-coded)
    (tmp_path / "e.c").write_text(EXITS)
    code = main(["sweep", f"c:{tmp_path}/e.c:{func}", "--dtype", "fp8_e4m3", "--reference", "relu", *extra])
    _one_error_line(code, capsys.readouterr().err, msg)


@pytest.mark.parametrize(
    "sig",
    [
        "void k(const float *x, double *y, size_t n)",
        "void k(const double *x, float *y, size_t n)",
        "void k(const float *x, float *y, int n)",
        "int k(const float *x, float *y, size_t n)",
        "void k(const float *x, float *y, size_t n, int extra)",
        "void k(const float *x, const float *y, size_t n)",
        "void k(const float *x, float *y)",
    ],
)
def test_every_parameter_of_the_signature_is_checked(tmp_path, capsys, sig):
    ret = "return 0;" if sig.startswith("int") else ""
    (tmp_path / "s.c").write_text(f"#include <stddef.h>\n{sig} {{ (void)x; (void)y; {ret} }}\n")
    code = main(["sweep", f"c:{tmp_path}/s.c:k", "--dtype", "fp8_e4m3", "--reference", "relu"])
    err = capsys.readouterr().err
    if "const double" in sig:  # the element type is read first: no float/_Float16 definition
        _one_error_line(code, err, "no definition")
    else:
        _one_error_line(code, err, "k is not void k(const float *x, float *y, size_t n)")


def test_the_right_signature_passes_the_check(tmp_path):
    # size_t spelled as its type, const on the by-value parameter: the same function type
    (tmp_path / "s.c").write_text(
        "void k(const float *x, float *y, const unsigned long n) { for (unsigned long i = 0; i < n; i++) "
        "y[i] = -x[i]; }\n"
    )
    c = c_candidate(f"c:{tmp_path}/s.c:k", "relu", FORMATS["fp8_e4m3"])
    x = FORMATS["fp8_e4m3"].finite_values()
    assert np.array_equal(c.evaluate(x, FORMATS["fp8_e4m3"], FORMATS["fp8_e4m3"]), -x)


HDR_KERNEL = '#include <stddef.h>\n#include "coef.h"\nvoid k(const float *x, float *y, size_t n) { for (size_t i = 0; i < n; i++) y[i] = x[i] * COEF; }\n'


def test_the_cache_follows_included_headers(tmp_path, monkeypatch):
    # issue 23: editing coef.h kept the old object (and results)
    monkeypatch.setenv("ACTAUDIT_CACHE_DIR", str(tmp_path / "cache"))
    d = tmp_path / "k dir"  # dependency paths with a space, as gcc -M escapes them
    d.mkdir()
    (d / "k.c").write_text(HDR_KERNEL)
    fmt = FORMATS["fp8_e4m3"]
    x = fmt.finite_values()
    (d / "coef.h").write_text("#define COEF 2.0f\n")
    c2 = c_candidate(f"c:{d}/k.c:k", "relu", fmt)
    y2 = c2.evaluate(x, fmt, fmt)
    (d / "coef.h").write_text("#define COEF 0.5f\n")
    c3 = c_candidate(f"c:{d}/k.c:k", "relu", fmt)
    y3 = c3.evaluate(x, fmt, fmt)
    assert np.array_equal(y2, fmt.round(x * 2.0), equal_nan=True)
    assert np.array_equal(y3, fmt.round(x * 0.5), equal_nan=True)
    assert c2.identity["kernel_digest"] != c3.identity["kernel_digest"]
    assert (
        c2.identity["cflags"] == ["-O2"] and os.path.realpath(shutil.which("gcc")) in c2.identity["compiler"]
    )


FLAG_KERNEL = """#include <stddef.h>
#define DJ 0.5f
void k(const float *x, float *y, size_t n) {
    for (size_t i = 0; i < n; i++)
#ifdef J
        y[i] = x[i] * K;
#else
        y[i] = x[i] * K + 100.0f;
#endif
}
"""


def test_each_flag_is_its_own_string_in_the_key(tmp_path, monkeypatch):
    # issue 23: '-O2 -DK=2 -DJ' and "-O2 '-DK=2 -DJ'" shared a key (flags joined by spaces)
    monkeypatch.setenv("ACTAUDIT_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "k.c").write_text(FLAG_KERNEL)
    fmt = FORMATS["fp8_e4m3"]
    x = fmt.finite_values()
    x32 = x.astype(np.float32)
    a = c_candidate(f"c:{tmp_path}/k.c:k", "relu", fmt, "-O2 -DK=2 -DJ")
    b = c_candidate(f"c:{tmp_path}/k.c:k", "relu", fmt, "-O2 '-DK=2 -DJ'")
    assert a.identity["cflags"] == ["-O2", "-DK=2", "-DJ"] and b.identity["cflags"] == ["-O2", "-DK=2 -DJ"]
    with np.errstate(all="ignore"):
        want_a = (x32 * np.float32(2)).astype(np.float64)  # J defined: x K
        want_b = (x32 * np.float32(2) - np.float32(0.5) + np.float32(100)).astype(np.float64)  # K = 2 -DJ
    assert np.array_equal(a.evaluate(x, fmt, fmt), fmt.round(want_a), equal_nan=True)
    assert np.array_equal(b.evaluate(x, fmt, fmt), fmt.round(want_b), equal_nan=True)


def test_an_object_copied_under_another_key_is_refused(tmp_path, monkeypatch):
    # issue 23: a .so copied under another key (with its digest file) was trusted
    monkeypatch.setenv("ACTAUDIT_CACHE_DIR", str(tmp_path / "cache"))
    neg = "#include <stddef.h>\nvoid k(const float *x, float *y, size_t n) { for (size_t i = 0; i < n; i++) y[i] = -x[i]; }\n"
    same = neg.replace("-x[i]", "x[i]")
    (tmp_path / "neg.c").write_text(neg)
    (tmp_path / "same.c").write_text(same)
    a = compile_kernel(tmp_path / "neg.c", None, "k")
    b = compile_kernel(tmp_path / "same.c", None, "k")
    assert a.key != b.key and a.sha256 != b.sha256
    fmt = FORMATS["fp8_e4m3"]
    x = fmt.finite_values()
    for copy_record in (True, False):
        shutil.copyfile(a.so, b.so)  # neg's object under same's key
        if copy_record:
            shutil.copyfile(a.so.with_suffix(".json"), b.so.with_suffix(".json"))
        c = c_candidate(f"c:{tmp_path}/same.c:k", "relu", fmt)
        assert np.array_equal(c.evaluate(x, fmt, fmt), x)  # compiled again: not neg's results
        assert compile_kernel(tmp_path / "same.c", None, "k").sha256 == b.sha256


def test_cflags_that_do_not_parse_are_one_line(tmp_path, capsys):
    (tmp_path / "hs.c").write_text(HS)
    code = main(
        ["sweep", f"c:{tmp_path}/hs.c:hs", "--dtype", "fp8_e4m3", "--reference", "relu", "--cflags", '-O2 "x']
    )
    _one_error_line(code, capsys.readouterr().err, "No closing quotation")


def test_a_latin1_compiler_message_is_one_line(tmp_path, capsys):
    (tmp_path / "l.c").write_bytes(
        b"#include <stddef.h>\n#error caf\xe9 cr\xe8me\nvoid k(const float *x, float *y, size_t n) {}\n"
    )
    code = main(["sweep", f"c:{tmp_path}/l.c:k", "--dtype", "fp8_e4m3", "--reference", "relu"])
    _one_error_line(code, capsys.readouterr().err, "does not compile")


def test_a_fifo_as_kernel_source_is_refused_at_once(tmp_path, capsys):
    os.mkfifo(tmp_path / "f.c")
    code = main(["sweep", f"c:{tmp_path}/f.c:k", "--dtype", "fp8_e4m3", "--reference", "relu"])
    _one_error_line(code, capsys.readouterr().err, "not a regular file")


HELD_AT_EXIT = r"""#include <pthread.h>
#include <stdlib.h>
/* a library of the parent's (as OpenBLAS, torch...): its atexit handler takes a lock that
   the parent holds while the kernel runs */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void at_exit(void) { pthread_mutex_lock(&lock); pthread_mutex_unlock(&lock); }
__attribute__((constructor)) static void init(void) { atexit(at_exit); }
void hold(void) { pthread_mutex_lock(&lock); }
void release(void) { pthread_mutex_unlock(&lock); }
"""


def test_a_kernel_that_exits_runs_none_of_the_parents_exit_handlers(tmp_path, capsys):
    # a kernel calling exit() in a fork of this process ran the atexit handlers of every
    # library loaded here, and hung (until the 600 s timeout) on a lock held by the parent:
    # the kernel runs in a fresh process, which has loaded none of them
    import ctypes

    (tmp_path / "held.c").write_text(HELD_AT_EXIT)
    so = tmp_path / "libheld.so"
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-o", str(so), str(tmp_path / "held.c"), "-pthread"], check=True
    )
    lib = ctypes.CDLL(str(so))
    (tmp_path / "e.c").write_text(EXITS)
    lib.hold()
    try:
        code = main(
            ["sweep", f"c:{tmp_path}/e.c:quits", "--dtype", "fp8_e4m3", "--reference", "relu"]
            + ["--timeout", "60"]  # the hang, were it back, is this line's failure
        )
    finally:
        lib.release()
    _one_error_line(code, capsys.readouterr().err, "exited (status 0) before returning")


FDS = r"""#include <dirent.h>
#include <stddef.h>
#include <stdlib.h>
/* y = the descriptors open in the kernel's process, in order, then -1 */
void fds(const float *x, float *y, size_t n) {
    (void)x;
    size_t k = 0;
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        int fd = atoi(e->d_name);
        if (fd != dirfd(d) && k < n) y[k++] = (float)fd;
    }
    if (d) closedir(d);
    while (k < n) y[k++] = -1.0f;
}
"""


def test_the_kernel_sees_only_its_own_descriptors(tmp_path):
    from audit.targets.ckernels import object_fd

    (tmp_path / "fds.c").write_text(FDS)
    c = c_candidate(f"c:{tmp_path}/fds.c:fds", "relu", F32)
    comp = compile_kernel(tmp_path / "fds.c", None, "fds")
    leak = os.open(os.devnull, os.O_RDONLY)
    os.set_inheritable(leak, True)  # a descriptor of the parent's that a child would inherit
    try:
        y = c.evaluate(np.zeros(64), F32, F32)
    finally:
        os.close(leak)
    seen = sorted(int(v) for v in y if v >= 0)
    # stdin, stdout, stderr, the object (dlopen'ed from /proc/self/fd) and the report pipe
    assert seen[:3] == [0, 1, 2] and len(seen) == 5 and object_fd(comp) in seen, seen
    assert leak not in seen


def test_the_runner_is_verified_before_it_is_run(tmp_path, monkeypatch):
    from audit.targets import ckernels

    monkeypatch.setenv("ACTAUDIT_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(ckernels, "_RUNNER", {})
    (tmp_path / "hs.c").write_text(HS)
    fmt = FORMATS["fp8_e4m3"]
    x = fmt.finite_values()
    c = c_candidate(f"c:{tmp_path}/hs.c:hs16", "relu", fmt)
    assert np.array_equal(c.evaluate(x, fmt, fmt), -x)
    (runner,) = (tmp_path / "cache" / "ckernels").glob("runner-*[0-9a-f]")
    good = runner.read_bytes()
    assert good[:4] == b"\x7fELF"
    # a runner replaced in the cache (with its record left as it was) is built again
    runner.write_bytes(b"#!/bin/sh\nexit 0\n")
    monkeypatch.setattr(ckernels, "_RUNNER", {})
    assert np.array_equal(c.evaluate(x, fmt, fmt), -x)
    assert runner.read_bytes() == good


def test_an_object_that_does_not_load_is_one_line(tmp_path, capsys):
    # it links (a shared object may leave symbols undefined) but does not load (RTLD_NOW)
    (tmp_path / "u.c").write_text(
        "#include <stddef.h>\nvoid nowhere_to_be_found(void);\n"
        "void k(const float *x, float *y, size_t n) { (void)x; (void)y; (void)n; nowhere_to_be_found(); }\n"
    )
    code = main(["sweep", f"c:{tmp_path}/u.c:k", "--dtype", "fp8_e4m3", "--reference", "relu"])
    _one_error_line(code, capsys.readouterr().err, "undefined symbol: nowhere_to_be_found)")


def test_a_kernel_that_exits_after_onnxruntime_ran_here(tmp_path, capsys):
    # the case seen: once an onnxruntime session had run in this process (another test), a
    # kernel's exit() in a fork of it never ended (onnxruntime's exit-time teardown waits, in
    # a sleep loop, for threads that the fork does not have): 600 s, then the timeout
    import onnxruntime as ort
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = sess.run(None, {"x": np.array([-1, 0, 1, 2], dtype=np.float32)})
    assert got.tolist() == [0, 0, 1, 2]
    (tmp_path / "e.c").write_text(EXITS)
    code = main(
        ["sweep", f"c:{tmp_path}/e.c:quits", "--dtype", "fp8_e4m3", "--reference", "relu", "--timeout", "60"]
    )
    _one_error_line(code, capsys.readouterr().err, "exited (status 0) before returning")


def test_a_reaped_kernel_is_never_signalled_again(monkeypatch):
    # a pid, once reaped, may be given to another process: _kill must not signal it (the
    # timeout path killed the kernel, then killed the same pid again on the way out)
    from audit.targets import ckernels

    p = subprocess.Popen(["true"])
    p.wait()  # reaped
    sent = []
    monkeypatch.setattr(ckernels.os, "kill", lambda pid, s: sent.append(("kill", pid, s)))
    monkeypatch.setattr(ckernels.os, "killpg", lambda pid, s: sent.append(("killpg", pid, s)))
    ckernels._kill(p.pid)
    assert sent == []
    q = subprocess.Popen(["sleep", "60"], process_group=0)
    q.returncode = 0  # reaped by _kill, not by Popen
    monkeypatch.undo()
    ckernels._kill(q.pid)  # alive: killed and reaped
    with pytest.raises(ChildProcessError):
        os.waitpid(q.pid, os.WNOHANG)
