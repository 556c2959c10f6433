"""The compiled helper's check: its loops against the numpy paths they replace, bit for bit.

:func:`prepare` builds the helper (audit/numbers/native.py) for a large fp32 sweep, or loads
it from the C kernels' cache where an earlier run built it (:func:`cached`), and keeps it
only where its loops give, at a fixed set of hard inputs, the arrays and counts of the
numpy code they stand in for (``oracle.fast_bounds``; ``metrics.correct_results``,
``metrics.pointwise`` and ``metrics.ulp_distance``; the reductions of ``findings.masks``;
``metrics.key_histogram``): zeros of both signs, fp32 and float64
subnormals, powers of two, the midpoints between fp32 neighbours and their float64
neighbours, the largest finite value and what lies beyond it, infinities and NaN, and
seeded random values around them.  tests/test_native.py runs the same comparison on more
inputs.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

import numpy as np

from audit.measure import metrics
from audit.numbers import native
from audit.numbers.formats import get_format
from audit.oracle import oracle

_MEMORY: list = []  # the memory file that holds the loaded helper's bytes (kept open)


def prepare(storage: str, count: int) -> bool:
    """Build or load the helper where a sweep of ``count`` inputs in ``storage`` gains from it."""
    if storage != "fp32" or count < native.SWEEP_MIN:
        return False
    return native.prepare(agrees, cached)


def cached():
    """The helper from the C kernels' cache (audit/targets/ckernels.py; docs/concepts/
    kernel-isolation.md): its bytes bound by their record to a key over the source, the
    flags, the compiler's command and identity; compiled there where absent, altered,
    truncated or recorded under another key; loaded from a memory file holding the verified
    bytes, never from the cache path.  None without a compiler."""
    from audit.targets import ckernels

    cc = native.compiler()
    if cc is None:
        return None
    cpu = _cpu_identity()
    if cpu is None:  # (-march=native: an object is bound to the CPU it was built for)
        return native._build()
    what = {
        "what": "actaudit's compiled fp32 helper",
        "source": native.SOURCE,
        "flags": list(native.FLAGS),
        "cc": cc,
        "compiler": ckernels.compiler_identity(cc[0]),
        "cc_version": _cc_version(cc),  # (the whole command: "ccache gcc" is gcc's too)
        "cpu": cpu,
    }
    key = hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()
    dest = ckernels.cache_root() / "native" / f"helper-{key[:40]}.so"
    data = ckernels._verified(dest, key)
    if data is None:

        def compile_to(tmp):
            if not native.compile_to(cc, tmp):
                raise ckernels.KernelError("the compiled helper does not compile")

        data = ckernels._cache_put(dest, key, "native.so", "compiled helper", compile_to)
    fd = os.memfd_create("actaudit-native", os.MFD_CLOEXEC)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    _MEMORY.append(fd)
    return native.load(f"/proc/self/fd/{fd}")


def _cpu_identity() -> str | None:
    """The SHA-256 of the CPU's vendor, model and feature flags (/proc/cpuinfo's first
    processor), which -march=native resolves from; None where they cannot be read."""
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")[: 1 << 16]
    except OSError:
        return None
    first = text.split("\n\n", 1)[0]
    keep = [
        ln
        for ln in first.splitlines()
        if ln.split(":", 1)[0].strip()
        in ("vendor_id", "model name", "flags", "Features", "CPU implementer", "CPU part")
    ]
    return hashlib.sha256("\n".join(keep).encode()).hexdigest() if keep else None


def _cc_version(cc: list[str]) -> str:
    """The SHA-256 of what the whole compiler command prints for --version and
    -dumpfullversion."""
    import subprocess

    h = hashlib.sha256()
    for arg in ("--version", "-dumpfullversion"):
        p = subprocess.run([*cc, arg], stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
        h.update(p.stdout + b"\0" + p.stderr + b"\0")
    return h.hexdigest()


def hard_values(seed: int = 0, n: int = 4096) -> np.ndarray:
    """float64 values around every boundary fp32 has, both signs, and seeded random ones."""
    with np.errstate(all="ignore"):
        return _hard_values(seed, n)


def _hard_values(seed: int, n: int) -> np.ndarray:
    f32 = np.float32
    pts = [0.0, 1.0, 1.5, 2.0, 3.0, 0.1, 1e-30, 1e30, 1e-300, 1e300, 5e-324, 2.0**-1000, 2.0**-1074]
    pts += [float(np.finfo(f32).tiny), float(np.finfo(f32).max), math.ldexp(1.0, -149), math.ldexp(1.0, -150)]
    pts += [math.ldexp(1.0, 128), math.ldexp(2.0 - 2.0**-24, 127), math.ldexp(2.0 - 2.0**-23, 127)]
    pts += [math.ldexp(1.0 + 2.0**-24, e) for e in (-149, -127, -126, -1, 0, 1, 20, 127)]
    pts += [math.ldexp(1.0 + 3 * 2.0**-24, e) for e in (-126, 0, 127)]
    # |v| equal to its own slack |v| 2^-45 + 2^-1000 (the edge of "tiny"), and either side
    pts += [math.ldexp(1.0 + 2.0**-45, -1000), math.ldexp(1.0 + 2.0**-44, -1000)]
    base = np.array(pts)
    base = np.concatenate([base, np.nextafter(base, np.inf), np.nextafter(base, -np.inf)])
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    v32 = bits.view(np.float32).astype(np.float64)
    v32 = v32[np.isfinite(v32)]
    mid = (v32 + np.nextafter(v32.astype(np.float32), f32(np.inf)).astype(np.float64)) / 2
    wide = rng.standard_normal(n) * np.exp2(rng.integers(-1080, 1030, n))
    out = np.concatenate([base, v32, mid, np.nextafter(mid, 0), wide, [np.inf, np.nan]])
    return np.concatenate([out, -out])


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal arrays, bit for bit (NaNs by their bits too)."""
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def agrees(loaded, seed: int = 0, n: int = 4096) -> bool:
    """The loops of ``loaded`` give the numpy paths' arrays and counts at hard_values."""
    fmt = get_format("fp32")
    # the library's loading changed nothing of this process's arithmetic (a constructor
    # setting flush-to-zero would flush the numpy path too, where no comparison sees it)
    with np.errstate(all="ignore"):
        if not (np.array([5e-324]) * 1.0)[0] == 5e-324 or not (np.array([1e-45], np.float32) * 1)[0] > 0:
            return False
    v = hard_values(seed, n)
    rng = np.random.default_rng(seed + 1)
    with np.errstate(all="ignore"):
        # the oracle's decision: one relative error, then one per value (tiny to huge)
        for rel in (2.0**-45, np.abs(rng.standard_normal(len(v))) * np.exp2(rng.integers(-60, 0, len(v)))):
            a = oracle.fast_bounds(fmt, v, rel)
            b = native.oracle_fp32(loaded, v, rel, oracle.FAST_ABS_TOL, fmt.emin)
            if b is None or not all(_same(x, y) for x, y in zip(a[:5], b[:5])):
                return False
            if b.n_odd != int(np.count_nonzero(a.amb | ~np.isfinite(v))) or (b.n_tiny > 0) != (a.n_tiny > 0):
                return False
        # a non-finite relative error (never in a sweep) is declined: numpy's NaNs there
        if native.oracle_fp32(loaded, v, math.nan, oracle.FAST_ABS_TOL, fmt.emin) is not None:
            return False
        # the errors: results and exact values of fp32 around each other
        got = fmt.round(v)
        rounded = fmt.round(np.where(rng.random(len(v)) < 0.5, v, v[rng.permutation(len(v))]))
        rounded = np.where(rng.random(len(v)) < 0.4, got, rounded)  # (correctly rounded results too)
        hi = np.where(rng.random(len(v)) < 0.5, rounded, v)
        lo = np.where(
            rng.random(len(v)) < 0.7,
            0.0,
            hi * np.exp2(rng.integers(-80, -52, len(v))) * rng.choice([-1.0, 1.0], len(v)),
        )
        lo[rng.random(len(v)) < 0.01] = 5e-324
        lo[rng.random(len(v)) < 0.005] = np.nan
        unsure = rng.random(len(v)) < 0.1
        eb = native.errors_fp32(
            loaded, got, rounded, hi, lo, unsure, fmt.smallest_normal, math.ldexp(1.0, 1 - fmt.p)
        )
        correct = metrics.correct_results(got, rounded)
        e = metrics.pointwise(fmt, got, rounded, hi, lo, correct)
        dist = metrics.ulp_distance(fmt, got, rounded, correct)
        if eb is None or not all(
            _same(x, y) for x, y in zip((correct, e.abs_err, e.ulp_err, e.rel_err, dist), eb[:5])
        ):
            return False
        counts = (
            int(np.count_nonzero(correct)),
            int(np.count_nonzero(unsure & ~correct)),
            int(np.count_nonzero(~np.isfinite(e.abs_err))),
            int(np.count_nonzero(hi == 0)),
            int(np.count_nonzero(~np.isfinite(rounded))),
        )
        if tuple(eb[5:]) != counts:
            return False
        # the counts findings.masks tests: results against RN_F(f) and the exact value
        exact = np.where(rng.random(len(v)) < 0.5, hi, -hi)
        mc = native.mask_counts_fp32(loaded, got, rounded, exact, fmt.max_finite)
        fin = np.isfinite(got)
        want = (
            int(np.count_nonzero(~fin)),
            int(np.count_nonzero(fin & (np.abs(got) >= fmt.max_finite))),
            int(np.count_nonzero(~np.isfinite(rounded))),
            int(np.count_nonzero(got == 0)),
            int(np.count_nonzero(np.signbit(got) != np.signbit(exact))),
        )
        if mc is None or tuple(mc) != want:
            return False
        # the p99 histogram of ULP errors: zeros, tiny to huge, inf and NaN; all zeros; none
        u = np.abs(v)
        u[rng.random(len(u)) < 0.2] = 0.0
        for w in (u, np.zeros(len(u)), u[u != 0], np.full(len(u), 0.25)):
            if native.key_histogram(loaded, w, metrics.HIST_SHIFT) != metrics.key_histogram(w):
                return False
        return True
