"""What each speed idea for the fitted vector kernels can save at most (issue 36, item 2):
the kernel `actaudit fit REF --dtype FMT` writes, timed beside copies of it with one step
taken out.  A copy's results are wrong (timing only); its time is a floor for any kernel
that does that step more cheaply, so the saving shown bounds what the idea can give:

* no final rounding to 16 bits: the round-to-nearest-even of the fp32 value to the 16-bit
  format (integer ops on its bits, and the subnormal rounding) removed -- the bound on
  folding the rounding into the polynomial's last step;
* no subnormal handling: the tiny-input correction (|x| < 2^-12) and the output's subnormal
  rounding (|y| < 2^-14, fp16) made constant-false -- the bound on running them only on
  the lanes that need them;
* exp of degree 3: the exp polynomial's two highest terms removed -- the bound on a
  smaller exp (table plus a degree-3 polynomial: the table lookup not counted);
* no division: the kernel's division replaced by a multiply -- the bound on any
  reciprocal (Newton steps, rcp14);
* the first two together;
* piecewise coefficients (GELU fp16, whose polynomial is in t = 1 / (1 + |x|/2)): the
  division and the degree-7 polynomial in t replaced by a degree-3 polynomial in |x| (three
  fused multiply-adds) whose four coefficients come from 16-entry tables indexed by
  16 |x| / x_sat -- once with constant coefficients (no index, no lookup: the floor of any
  such kernel), once with the lookups as the emitted C would write them (gcc 12 emits no
  VPERMPS for them and leaves the whole loop scalar: its partial-redundancy pass splits the
  loads on the saturation select, and the masked gather left after if-conversion is one it
  cannot emulate), and once by AVX-512 `_mm512_permutexvar_ps` (VPERMPS) in a pass over
  each block of 512 before the vector loop, into four buffers the loop reads (a two-pass
  form: not a floor for VPERMPS inside the loop, which would need the kernel in
  intrinsics).  Whether 16 pieces of degree 3 can be fitted to correct rounding is not
  asked.

Each kernel is compiled with the AVX-512 flags its header names (gcc -O3 -march=x86-64-v4
-mprefer-vector-width=512 -ffp-contract=off -fno-math-errno -fno-trapping-math; on a CPU
without AVX-512 the AVX2 build's, -march=x86-64-v3 and no vector width) into a
timing program: 2^22 inputs uniform in [-8, 8] rounded to fp16 (the kernels take fp32
values), 41 runs, the fastest; the programs run interleaved --repeat times and the table
shows the median of those minima (the machine's other load shows in the spread).

Usage: python benchmarks/bench_fit_ablation.py [--targets gelu:fp16,silu:fp16,...] [--repeat 9]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def _flags() -> str:
    """The flags of the widest build this CPU runs (AVX-512; AVX2+FMA on a CPU without it)."""
    from audit.repair.emit.c import FLAGS as BUILD_FLAGS
    from audit.repair.fit_shapes import runnable_builds

    return " ".join(BUILD_FLAGS[runnable_builds()[0]])


FLAGS = _flags()
HARNESS = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
void KERNEL(const float *restrict xs, float *restrict ys, size_t n);
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(void) {
    size_t n = (size_t)1 << 22;
    float *x = aligned_alloc(64, n * 4), *y = aligned_alloc(64, n * 4);
    uint64_t s = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        x[i] = (float)(_Float16)((float)((s >> 11) * (1.0 / 9007199254740992.0)) * 16.0f - 8.0f);
    }
    double best = 1e30, check = 0;
    for (int r = 0; r < 41; r++) {
        double a = now(); KERNEL(x, y, n); double t = (now() - a) / n * 1e9;
        if (t < best) best = t;
    }
    for (size_t i = 0; i < n; i += 4096) check += y[i];
    printf("%.4f %g\n", best, check);
    return 0;
}
"""


def _unrounded(code: str) -> str | None:
    """The kernel without its final rounding to 16 bits (None: no rounding found).  One loop
    (bf16): its result is the value before the rounding's first op.  The fp16 forms with the
    rounding in a function of its own (audit/repair/emit/c.py): the F16C conversions of each
    block and every call of the function taken out."""
    fn = re.search(r"static inline float (\w+)_round\(float v\d+\)", code)
    if fn:
        name = fn.group(1)
        out = re.sub(r"\n\s*for \(; j \+ 8 <= e; j \+= 8\)\n\s*_mm256_storeu_ps\([^\n]*", "", code)
        out = out.replace(f"ys[j] = {name}_round(ys[j]);", "(void)0;")
        out = re.sub(rf"{name}_round\(({name}_value\(xs\[j\]\))\)", r"\1", out)
        return out if out.count(f"{name}_round(") == 1 else None  # (its definition alone)
    m = re.search(r"const uint32_t (v\d+) = aa_bits\((v\d+)\);\n\s*const uint32_t v\d+ = \1 >> 0x", code)
    last = re.findall(r"ys\[j\] = (v\d+);", code)
    return code.replace(f"ys[j] = {last[0]};", f"ys[j] = {m.group(2)};") if m and last else None


def _piecewise(code: str) -> dict[str, str]:
    """The piecewise-coefficient copies of a kernel whose polynomial p (p_6 ... p) runs on
    1 / (...) and that rounds blocks of 512 by F16C (GELU fp16); {} for any other form."""
    div = re.search(r"const float (v\d+) = 0x1\.0000000000000p\+0f / (v\d+);", code)
    fn = re.search(r"static inline float (\w+)_value\(float x\)", code)
    block = "for (size_t i = b; i < e; i++) ys[i] = "
    if not (div and fn and block in code and "const float p_6 = " in code):
        return {}
    name, t = fn.group(1), div.group(1)
    clamp = re.search(r"const float (v\d+) = v\d+ \? (0x[0-9a-fp.+-]+f) : (v\d+);", code)
    if clamp is None:
        return {}
    a, xsat = clamp.group(1), clamp.group(2)
    body = code.replace(div.group(0), f"const float {t} = {a};")
    for k in (6, 5, 4):
        body = re.sub(rf"\n\s*const float p_{k} = fmaf\([^;]*;", "", body)
    p3 = r"const float p_3 = fmaf\(p_4, [^;]*;"  # the leading coefficient itself: degree 3
    floor = re.sub(p3, "const float p_3 = 0x1.0p-4f;", body)
    tables = "".join(
        f"static const float aa_c{k}[16] = {{"
        + ", ".join(f"{0.1 * k + 0.01 * i:.2f}f" for i in range(16))
        + "};\n"
        for k in range(4)
    )
    index = f"(uint32_t)({a} * (16.0f / {xsat})) & 15u"
    plain = re.sub(p3, f"const uint32_t aa_i = {index};\n    const float p_3 = aa_c3[aa_i];", body)
    for k, nxt in ((2, 3), (1, 2), (0, 1)):
        tgt = "p" if k == 0 else f"p_{k}"
        plain = re.sub(rf"(const float {tgt} = fmaf\(p_{nxt}, {t}, )[^)]*\);", rf"\1aa_c{k}[aa_i]);", plain)
    plain = plain.replace(
        f"static inline float {name}_value(float x)", tables + f"static inline float {name}_value(float x)"
    )
    # VPERMPS: the coefficients of each block's lanes gathered from zmm registers first.
    perm = re.sub(p3, "const float p_3 = c3;", body)
    for k, nxt in ((2, 3), (1, 2), (0, 1)):
        tgt = "p" if k == 0 else f"p_{k}"
        perm = re.sub(rf"(const float {tgt} = fmaf\(p_{nxt}, {t}, )[^)]*\);", rf"\1c{k});", perm)
    perm = perm.replace(
        f"static inline float {name}_value(float x)",
        "#include <immintrin.h>\n"
        + tables
        + f"static inline float {name}_value(float x, float c0, float c1, float c2, float c3)",
    )
    pre = (
        "float aa_b[4][512] __attribute__((aligned(64)));\n"
        "        { __m512 t0 = _mm512_loadu_ps(aa_c0), t1 = _mm512_loadu_ps(aa_c1), "
        "t2 = _mm512_loadu_ps(aa_c2), t3 = _mm512_loadu_ps(aa_c3);\n"
        "          size_t i = b; for (; i + 16 <= e; i += 16) {\n"
        "            __m512 v = _mm512_min_ps(_mm512_andnot_ps(_mm512_set1_ps(-0.0f), _mm512_loadu_ps(xs + i)), "
        f"_mm512_set1_ps({xsat}));\n"
        f"            __m512i q = _mm512_and_si512(_mm512_cvttps_epi32(_mm512_mul_ps(v, _mm512_set1_ps(16.0f / {xsat}))), "
        "_mm512_set1_epi32(15));\n"
        "            _mm512_store_ps(aa_b[0] + i - b, _mm512_permutexvar_ps(q, t0));\n"
        "            _mm512_store_ps(aa_b[1] + i - b, _mm512_permutexvar_ps(q, t1));\n"
        "            _mm512_store_ps(aa_b[2] + i - b, _mm512_permutexvar_ps(q, t2));\n"
        "            _mm512_store_ps(aa_b[3] + i - b, _mm512_permutexvar_ps(q, t3)); }\n"
        "          for (; i < e; i++) aa_b[0][i - b] = aa_b[1][i - b] = aa_b[2][i - b] = aa_b[3][i - b] = 0.5f; }\n"
        "        "
    )
    perm = perm.replace(
        block + f"{name}_value(xs[i]);",
        pre + block + f"{name}_value(xs[i], aa_b[0][i - b], aa_b[1][i - b], aa_b[2][i - b], aa_b[3][i - b]);",
    )
    perm = re.sub(rf"{name}_value\(xs\[j\]\)", f"{name}_value(xs[j], 0.5f, 0.5f, 0.5f, 0.5f)", perm)
    out = {"piecewise deg 3, lookups not counted": floor, "piecewise deg 3, C lookups": plain}
    if "-march=x86-64-v4" in FLAGS:
        out["piecewise deg 3, VPERMPS lookups"] = perm
    return out


def variants(code: str) -> dict[str, str]:
    """The kernel and its copies with one step taken out (see the module's text)."""
    out = {"as fitted": code}
    plain = _unrounded(code)
    if plain is not None:
        out["no final rounding to 16 bits"] = plain
    sub = re.sub(r"const int (v\d+) = (v\d+) < 0x1\.0000000000000p-1[246]f;", r"const int \1 = 0;", code)
    if sub != code:
        out["no subnormal handling"] = sub
    names = ["pexp_5", "pexp_4"] if "pexp_5" in code else ["p_4", "p_3"]
    e = re.sub(rf"const float {names[0]} = fmaf\([^;]*;", f"const float {names[0]} = 0.0f;", code)
    e = re.sub(
        rf"const float {names[1]} = fmaf\({names[0]}, (v\d+), ([^)]*)\);", rf"const float {names[1]} = \2;", e
    )
    if e != code:
        out["exp of degree 3 (two terms fewer)"] = e
    d = re.sub(r"= (0x[0-9a-fp.+-]+f|v\d+) / (v\d+);", r"= \1 * \2;", code)
    if d != code:
        out["no division (a multiply)"] = d
    both = _unrounded(sub)
    if plain is not None and sub != code and both is not None:  # the two largest together
        out["no subnormal handling, no rounding"] = both
    out.update(_piecewise(code))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--targets", default="gelu:fp16,gelu:bf16,silu:fp16,silu:bf16")
    ap.add_argument("--repeat", type=int, default=9)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        progs: dict[tuple[str, str], Path] = {}
        for t in a.targets.split(","):
            ref, fmt = t.split(":")
            kdir = Path(tmp, f"{ref}_{fmt}")
            kdir.mkdir()
            cmd = [sys.executable, "-c", "from audit.cli import console_main; console_main()"]
            subprocess.run(
                [*cmd, "fit", ref, "--dtype", fmt, "--out", str(kdir)], check=True, stdout=subprocess.DEVNULL
            )
            name = f"fitv_{ref}_{fmt}"
            code = (kdir / f"{name}.c").read_text()
            for i, (tag, src) in enumerate(variants(code).items()):
                k, h, exe = kdir / f"k{i}.c", kdir / f"h{i}.c", kdir / f"a{i}"
                k.write_text(src)
                h.write_text(HARNESS.replace("KERNEL", name))
                subprocess.run(["gcc", *FLAGS.split(), "-o", str(exe), str(k), str(h), "-lm"], check=True)
                progs[(t, tag)] = exe
        times: dict[tuple[str, str], list[float]] = {k: [] for k in progs}
        for _ in range(a.repeat):  # interleaved: every program once per round
            for key, exe in progs.items():
                times[key].append(
                    float(
                        subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()[
                            0
                        ]
                    )
                )
    print(f"flags: gcc {FLAGS}; medians of {a.repeat} interleaved minima of 41 runs, 2^22 inputs")
    print(f"{'target':10s} {'kernel':40s} {'ns/el':>7s} {'saving':>7s}")
    for t in a.targets.split(","):
        base = statistics.median(times[(t, "as fitted")])
        for (tt, tag), v in times.items():
            if tt == t:
                m = statistics.median(v)
                print(f"{t:10s} {tag:40s} {m:7.3f} {100 * (1 - m / base):6.1f}%")


if __name__ == "__main__":
    main()
