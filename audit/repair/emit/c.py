"""C emission of an operation list: one statement per op, in order, branch-free.

The loop body has no branches, calls (fmaf is an instruction with FMA hardware) or table
lookups, so gcc/clang -O3 vectorize it for AVX2+FMA (-march=x86-64-v3) and AVX-512
(-march=x86-64-v4); the same source compiled for plain x86-64 (or any C99 target) is the
scalar fallback (fmaf from libm there).  Never compile it with -ffast-math or
-ffp-contract=fast: the verified results are these operations, each rounded.
"""

from __future__ import annotations

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


def source(prog: Program, header: str = "") -> str:
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
        "",
        "static inline uint32_t aa_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }",
        "static inline float aa_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }",
        "",
        f"void {prog.name}(const {io} *restrict xs, {oo} *restrict ys, size_t n) {{",
        "    for (size_t j = 0; j < n; j++) {",
        "        " + load,
        *["        " + statement(o, ty) for o in prog.ops],
        "        " + store,
        "    }",
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


def compile_source(src: str, name: str, build: str, tmpdir, cc: str = "gcc") -> Compiled:
    """Compile ``src`` with the flags its header names for ``build`` (avx2, avx512, scalar)
    into a shared library in tmpdir, load it, and say whether gcc vectorized the loop."""
    import ctypes
    import subprocess
    from pathlib import Path

    d = Path(tmpdir)
    c = d / f"{name}-{build}.c"
    c.write_text(src)
    so = d / f"{name}-{build}.so"
    flags = FLAGS[build]
    r = subprocess.run(
        [cc, *flags, "-fopt-info-vec-optimized", "-shared", "-fPIC", "-o", str(so), str(c), "-lm"],
        capture_output=True,
        text=True,
        check=False,
    )
    if r.returncode != 0:
        raise RuntimeError(f"{cc} failed on {c}: {r.stderr.strip()[:2000]}")
    vec = next((ln for ln in r.stderr.splitlines() if "loop vectorized" in ln), "")
    lib = ctypes.CDLL(str(so))
    fn = getattr(lib, name)
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    fn.restype = None
    return Compiled(fn, vec, flags, str(so))
