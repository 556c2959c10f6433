"""C emission of an operation list: one statement per op, in order, branch-free.

The loop body has no branches, calls (fmaf is an instruction with FMA hardware) or table
lookups, so gcc/clang -O3 vectorize it for AVX2+FMA (-march=x86-64-v3) and AVX-512
(-march=x86-64-v4); the same source compiled for plain x86-64 (or any C99 target) is the
scalar fallback (fmaf from libm there).  Never compile it with -ffast-math or
-ffp-contract=fast: the verified results are these operations, each rounded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from audit.repair.emit.ir import Program
from audit.repair.emit.printer import C_FAMILY, c_finite, c_io, c_statement, c_uint, float_text, operand_text

_COMMON = ["-ffp-contract=off", "-fno-math-errno", "-fno-trapping-math"]  # no FP traps: selects if-convert
FLAGS = {
    "avx2": ["-O3", "-march=x86-64-v3", *_COMMON],
    "avx512": ["-O3", "-march=x86-64-v4", "-mprefer-vector-width=512", *_COMMON],
    "scalar": ["-O2", "-fno-tree-vectorize", "-ffp-contract=off"],
}


def c_float(v: float) -> str:
    return float_text(v, "NAN", "INFINITY", "-INFINITY", c_finite)


def operand(a) -> str:
    return operand_text(a, c_uint, c_float)


CTYPE = {"f": "float", "u": "uint32_t", "m": "int"}


SPELL = {
    **C_FAMILY,
    "fma": lambda a, b, c: f"fmaf({a}, {b}, {c})",
    "bits": lambda a: f"aa_bits({a})",
    "float": lambda a: f"aa_float({a})",
}


def statement(o, ty: dict) -> str:
    """The C statement of one op (the test parses these back)."""
    return c_statement(o, ty, operand, CTYPE, SPELL)


BLOCK = 512  # elements per block of the F16C form: its three passes stay in the L1 cache


_RNE = "_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC"  # VCVTPS2PH's rounding: nearest even, not MXCSR's


def _f16c_span(prog: Program) -> tuple | None:
    """(start, end, input, output) of the fp16 rounding that F16C can compute, where it
    applies: the span reads one value, and after it only x and its result are read."""
    if prog.round16 is None or prog.in_type != "f32" or prog.out_type != "f32":
        return None
    start, end = prog.round16
    span, post = prog.ops[start:end], prog.ops[end:]
    if not span:
        return None
    y, q = _reads(span), span[-1].dest
    if len(y) != 1 or not _reads(post) <= {"x", q} or prog.out != (post[-1].dest if post else q):
        return None
    return start, end, next(iter(y)), q


def _function(ty: dict, signature: str, ops, result: str) -> list:
    """An inline C function: its signature, one statement per op, the result returned."""
    return [
        f"static inline {signature} {{",
        *["    " + statement(o, ty) for o in ops],
        f"    return {result};",
        "}",
        "",
    ]


def _reads(ops) -> set:
    """The values that ops read and do not compute themselves."""
    made = {o.dest for o in ops}
    return {a for o in ops for a in o.args if isinstance(a, str) and a not in made}


def _f16c_native(prog: Program) -> tuple | None:
    """The five parts of a 16-bit fp16 kernel whose load, rounding and store F16C can compute
    (load, value, rounding, after, store: op lists) with the values passed between them
    (xv, y, q, qq), where the marked spans are exactly that; None otherwise."""
    ld, rd, st = prog.load16, prog.round16, prog.store16
    if ld is None or rd is None or st is None or prog.in_type != "u16" or prog.out_type != "u16":
        return None
    (l0, l1), (r0, r1), (s0, s1) = ld, rd, st
    ops = prog.ops
    if not (l0 == 0 < l1 < r0 < r1 <= s0 < s1 == len(ops)) or prog.out != ops[-1].dest:
        return None
    load, value, rnd, after, store = ops[:l1], ops[l1:r0], ops[r0:r1], ops[r1:s0], ops[s0:]
    xv, q = load[-1].dest, rnd[-1].dest
    qq = after[-1].dest if after else q
    y = _reads(rnd)
    if len(y) != 1 or not y <= {o.dest for o in value}:
        return None
    ok = (
        _reads(load) <= {"x"} and _reads(value) <= {xv} and _reads(after) <= {xv, q} and _reads(store) == {qq}
    )
    return (load, value, rnd, after, store, xv, next(iter(y)), q, qq) if ok else None


def _source_native_f16c(prog: Program, parts: tuple, lines: list) -> str:
    """The 16-bit fp16 kernel with F16C: codes to values by VCVTPH2PS, results to codes by
    VCVTPS2PH (rounding and store in one where no op follows the rounding), in blocks of
    BLOCK through two scratch arrays; without F16C, and for a block's last values, the ops."""
    load, value, rnd, after, store, xv, y, q, qq = parts
    ty = prog.types()
    name = prog.name
    lines = [
        *lines,
        *_function(ty, f"float {name}_load(uint32_t x)", load, xv),
        *_function(ty, f"float {name}_value(float {xv})", value, y),
        *_function(ty, f"float {name}_round(float {y})", rnd, q),
    ]
    if after:
        lines += _function(ty, f"float {name}_after(float {xv}, float {q})", after, qq)
    lines += [
        *_function(ty, f"uint32_t {name}_store(float {qq})", store, prog.out),
        f"/* With F16C (the vector builds) blocks of {BLOCK} codes are read by VCVTPH2PS and the",
        "   results rounded to fp16 and written by VCVTPS2PH (nearest, ties to even, subnormals",
        f"   kept): the values of {name}_load, _round and _store. */",
        f"void {name}(const uint16_t *restrict xs, uint16_t *restrict ys, size_t n) {{",
        "#if defined(__F16C__) && defined(__AVX__)",
        f"    float xb[{BLOCK}], yb[{BLOCK}];",
        f"    for (size_t b = 0; b < n; b += {BLOCK}) {{",
        f"        size_t m = n - b < {BLOCK} ? n - b : {BLOCK}, j = 0;",
        "        for (; j + 8 <= m; j += 8)",
        "            _mm256_storeu_ps(xb + j, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(xs + b + j))));",
        f"        for (; j < m; j++) xb[j] = {name}_load(xs[b + j]);",
        f"        for (size_t i = 0; i < m; i++) yb[i] = {name}_value(xb[i]);",
        "        j = 0;",
    ]
    put = f"_mm_storeu_si128((__m128i *)(ys + b + j), _mm256_cvtps_ph(_mm256_loadu_ps(yb + j), {_RNE}))"
    if after:
        lines += [
            "        for (; j + 8 <= m; j += 8)",
            f"            _mm256_storeu_ps(yb + j, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(yb + j), {_RNE})));",
            f"        for (; j < m; j++) yb[j] = {name}_round(yb[j]);",
            f"        for (size_t i = 0; i < m; i++) yb[i] = {name}_after(xb[i], yb[i]);",
            f"        for (j = 0; j + 8 <= m; j += 8) {put};",
            f"        for (; j < m; j++) ys[b + j] = (uint16_t){name}_store(yb[j]);",
        ]
        whole = (
            f"{name}_store({name}_after({name}_load(xs[j]), {name}_round({name}_value({name}_load(xs[j])))))"
        )
    else:
        lines += [
            f"        for (; j + 8 <= m; j += 8) {put};",
            f"        for (; j < m; j++) ys[b + j] = (uint16_t){name}_store({name}_round(yb[j]));",
        ]
        whole = f"{name}_store({name}_round({name}_value({name}_load(xs[j]))))"
    lines += [
        "    }",
        "#else",
        "    for (size_t j = 0; j < n; j++)",
        f"        ys[j] = (uint16_t){whole};",
        "#endif",
        "}",
        "",
    ]
    return "\n".join(lines)


def source(prog: Program, header: str = "") -> str:
    """C source of a kernel: one loop, every op a statement.  Where ``prog.round16`` marks
    the final rounding to fp16, the ops come in up to three inline functions (before, the
    rounding, after) and a build with F16C (``__F16C__``: -march=x86-64-v3 and v4) rounds
    blocks of BLOCK results by VCVTPS2PH (nearest, ties to even, subnormals kept) and
    VCVTPH2PS, 8 at a time, where gcc vectorizes no float-to-_Float16 conversion; other
    builds, and the last elements of a block, run the rounding's own ops.  Both give the same
    bits at every input the kernel takes (the format's values; results at most 65504 in
    magnitude), in the default environment (no FTZ/DAZ, round to nearest: the conversions
    ignore MXCSR, the ops do not); every build is checked at every input
    (audit/repair/fit_shapes.py)."""
    ty = prog.types()
    io, oo, load, store = c_io(prog, CTYPE, "uint16_t")
    lines = [
        "/* " + header.replace("*/", "* /").strip().replace("\n", "\n   ") + "",
        "   Build: vectorized  gcc " + " ".join(FLAGS["avx2"]) + "   (AVX2+FMA)",
        "                     gcc " + " ".join(FLAGS["avx512"]) + "   (AVX-512)",
        "          scalar      gcc " + " ".join(FLAGS["scalar"]) + "   (any C99 target)",
        "   Never -ffast-math / -ffp-contract=fast; no FTZ/DAZ. */",
        "#include <math.h>",
        "#include <stddef.h>",
        "#include <stdint.h>",
        "#include <string.h>",
    ]
    span = _f16c_span(prog)
    parts = _f16c_native(prog)
    if span is not None or parts is not None:
        lines += ["#if defined(__F16C__) && defined(__AVX__)", "#include <immintrin.h>", "#endif"]
    lines += [
        "",
        "static inline uint32_t aa_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }",
        "static inline float aa_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }",
        "",
    ]
    if parts is not None:
        return _source_native_f16c(prog, parts, lines)
    if span is None:
        return "\n".join(
            [
                *lines,
                f"void {prog.name}(const {io} *restrict xs, {oo} *restrict ys, size_t n) {{",
                "    for (size_t j = 0; j < n; j++) {",
                "        " + load,
                *["        " + statement(o, ty) for o in prog.ops],
                "        " + store,
                "    }",
                "}",
                "",
            ]
        )
    start, end, y, q = span
    name = prog.name
    post = prog.ops[end:]
    lines += _function(ty, f"float {name}_value(float x)", prog.ops[:start], y)
    lines += _function(ty, f"float {name}_round(float {y})", prog.ops[start:end], q)
    if post:
        lines += _function(ty, f"float {name}_after(float x, float {q})", post, prog.out)
    lines += [
        f"/* With F16C (the vector builds) blocks of {BLOCK} values are rounded to fp16 by VCVTPS2PH",
        f"   (nearest, ties to even, subnormals kept) and VCVTPH2PS: the value of {name}_round.",
        "   xs and ys must not overlap (restrict): the rounding runs on ys, and the ops after it",
        "   read xs again. */",
        f"void {name}(const float *restrict xs, float *restrict ys, size_t n) {{",
        "#if defined(__F16C__) && defined(__AVX__)",
        f"    for (size_t b = 0; b < n; b += {BLOCK}) {{",
        f"        size_t e = n - b < {BLOCK} ? n : b + {BLOCK}, j = b;",
        f"        for (size_t i = b; i < e; i++) ys[i] = {name}_value(xs[i]);",
        "        for (; j + 8 <= e; j += 8)",
        f"            _mm256_storeu_ps(ys + j, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(ys + j), {_RNE})));",
        f"        for (; j < e; j++) ys[j] = {name}_round(ys[j]);",
        *([f"        for (j = b; j < e; j++) ys[j] = {name}_after(xs[j], ys[j]);"] if post else []),
        "    }",
        "#else",
        "    for (size_t j = 0; j < n; j++)",
        "        ys[j] = "
        + (
            f"{name}_after(xs[j], {name}_round({name}_value(xs[j])))"
            if post
            else f"{name}_round({name}_value(xs[j]))"
        )
        + ";",
        "#endif",
        "}",
        "",
    ]
    return "\n".join(lines)


@dataclass
class Compiled:
    fn: Callable[..., object]  # ctypes function (const T *x, T *y, size_t n)
    vectorized: str  # gcc's -fopt-info-vec line for the kernel's loop ("" when not vectorized)
    flags: list
    path: str

    def __call__(self, x: np.ndarray) -> np.ndarray:
        xa = np.ascontiguousarray(x)
        y = np.empty_like(xa)
        self.fn(xa.ctypes.data, y.ctypes.data, xa.size)
        return y


def _kernel_loop_report(stderr: str, src: str, filename: str) -> str:
    """gcc's "loop vectorized" line for the loop that runs the kernel's ops ("" when that
    loop was not vectorized): the loop of the value function in the F16C forms, else the
    loop over j < n.  The other loops (the rounding's and the exceptions' tails, the
    loads and stores of a block) are reported too, and prove nothing of the kernel's."""
    loops = {
        i
        for i, ln in enumerate(src.splitlines(), 1)
        if ln.lstrip().startswith("for (") and ("_value(" in ln or "for (size_t j = 0; j < n; j++)" in ln)
    }
    for ln in stderr.splitlines():
        where, _, what = ln.partition(": optimized: ")
        parts = where.rsplit(":", 2)
        if "loop vectorized" in what and len(parts) == 3 and parts[0].endswith(filename):
            if parts[1].isdigit() and int(parts[1]) in loops:
                return ln
    return ""


def compile_source(src: str, name: str, build: str, tmpdir, cc: str = "gcc") -> Compiled:
    """Compile ``src`` with the flags its header names for ``build`` (avx2, avx512, scalar)
    into a shared library in tmpdir, load it, and say whether gcc vectorized the loop."""
    import ctypes
    import subprocess
    from pathlib import Path

    d = Path(tmpdir)
    flags = FLAGS[build]
    # the library's name is bound to what it is built from: dlopen returns the library
    # already loaded from a path, so another source under the same name must get another path
    tag = hashlib.sha256("\0".join([src, cc, *flags]).encode()).hexdigest()[:16]
    c = d / f"{name}-{build}-{tag}.c"
    c.write_text(src)
    so = d / f"{name}-{build}-{tag}.so"
    r = subprocess.run(
        [cc, *flags, "-fopt-info-vec-optimized", "-shared", "-fPIC", "-o", str(so), str(c), "-lm"],
        capture_output=True,
        text=True,
        check=False,
    )
    if r.returncode != 0:
        raise RuntimeError(f"{cc} failed on {c}: {r.stderr.strip()[:2000]}")
    vec = _kernel_loop_report(r.stderr, src, c.name)
    lib = ctypes.CDLL(str(so))
    fn = getattr(lib, name)
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    fn.restype = None
    return Compiled(fn, vec, flags, str(so))
