"""An optional compiled helper for the pointwise passes of an exhaustive fp32 sweep.

Most of an exhaustive fp32 sweep's time outside the reference's own float64 value and the
candidate is numpy passes over arrays of a chunk's size: about twenty for the oracle's
rounding decision (``audit.oracle.oracle._compute``) and as many for the per-input errors
(``audit.measure.metrics.point_errors``), each reading and writing megabytes.  This module
compiles C loops that make each of those stages one pass:

* ``oracle_fp32``: the fast value's slack ``|v| rel + 2**-1000``, whether the two ends of
  ``v +- slack`` round alike in fp32, ``RN_fp32(v)``, whether the binade of ``|v| +-
  slack`` is certain, whether ``|v|`` lies within its slack of zero;
* ``errors_fp32``: whether each result is correctly rounded, its absolute error
  ``|(r - hi) - lo|``, ulp_F of the exact value ``hi + lo``, the ULP and relative errors,
  the ULP distance ``|ord(r) - ord(RN(f))|``;
* ``mask_counts_fp32``: the counts that ``audit.measure.findings.masks`` tests before it
  builds each finding's mask (non-finite results, results at or beyond the largest finite
  value, non-finite RN_F(f), zero results, results of the other sign bit);
* ``key_histogram``: the p99 histogram's counts of a chunk's ULP errors
  (``audit.measure.metrics.Summary._bin``), by their float64 bits.

Each element goes through the very operations, in the same order, that the numpy code
applies to it (IEEE double arithmetic, the hardware's double -> single conversion, no
contraction into fused multiply-adds: see FLAGS), so the
results are the numpy path's bit for bit; the rare cases that numpy handles on their inputs
alone (non-finite values, zero exact values, values to settle in mpmath) stay in numpy,
told by the counts each loop returns.  A test compares the two paths at every kind of input.

It is optional, and used only where it pays: a sweep of at least ``SWEEP_MIN`` fp32 inputs
calls :func:`prepare` (through ``audit.measure.native_check.prepare``), which builds the
source below with the system compiler (``$CC``, default ``gcc``; the C kernels' cache keeps
the object, bound to a key over the source, the flags, the compiler and the CPU, and its
verified bytes are loaded from a memory file: ``native_check.cached``), and keeps it only where its
caller's check passes (``native_check.agrees``: every loop against the numpy code it
replaces, at a fixed set of hard inputs: zeros of both signs, subnormals, ties, NaN,
infinities, values beyond fp32).  Without a compiler, on any failure, on a mismatch, or
with ``ACTAUDIT_NO_NATIVE=1`` in the environment, every stage takes its numpy path (the same
results).  Forked workers inherit the loaded helper.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

if TYPE_CHECKING:
    import ctypes

log = logging.getLogger(__name__)

SWEEP_MIN = 1 << 23  # fp32 inputs of a sweep from which the helper is used (about 0.05 s to load it from the
# cache and check it, against 0.1-0.2 s saved; its first build, once per compiler, 0.3-0.6 s)
CHUNK_MIN = 1 << 12  # a chunk this small takes the numpy path (the call's overhead)
# IEEE arithmetic as numpy's loops do it, whatever $CC adds: -fno-fast-math first (a $CC with
# -ffast-math would also link crtfastmath.o, whose constructor sets flush-to-zero for the whole
# process when the library loads), no value-changing optimization, no contraction into fused
# multiply-adds; then -fno-trapping-math (last: the -fno- forms of -ffast-math and
# -funsafe-math-optimizations turn trapping math back on), which lets gcc vectorize the
# selects and changes no value (no floating-point exception is looked at)
FLAGS = (
    "-O3",
    "-march=native",
    "-fno-fast-math",
    "-fno-unsafe-math-optimizations",
    "-fno-finite-math-only",
    "-fsigned-zeros",
    "-ffp-contract=off",
    "-fno-trapping-math",
    "-fPIC",
    "-shared",
    "-std=c99",
)

SOURCE = r"""
#include <math.h>
#include <stdint.h>
#include <string.h>

static inline int64_t bits64(double d) { int64_t b; memcpy(&b, &d, 8); return b; }
static inline double from64(uint64_t b) { double d; memcpy(&d, &b, 8); return d; }
static inline int32_t bits32(float f) { int32_t b; memcpy(&b, &f, 4); return b; }

/* np.sign: -1, 0 or 1, NaN for NaN */
static inline double sgn(double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : (x == 0 ? 0.0 : x)); }

/* Format.ulp: 2^e of |y| from its exponent field, at least 2^emin, times 2^(1-p); NaN for
   a non-finite y */
static inline double ulp1(double y, double smallest_normal, double scale) {
    double p2 = from64((uint64_t)bits64(y) & 0x7FF0000000000000ULL);
    double o = p2 > smallest_normal ? p2 : smallest_normal;
    o *= scale;
    return p2 == INFINITY ? NAN : o;
}

/* The fp32 ordinal of a float64 value of fp32 (NaN counted as +inf) */
static inline int64_t ord32(double v) {
    int32_t b = bits32((float)(v != v ? INFINITY : v));
    int32_t s = b >> 31;
    b &= 0x7FFFFFFF;
    b ^= s;
    b -= s;
    return (int64_t)b;
}

/* counts: [0] inputs with amb or a non-finite v, [1] tiny ones, [2] non-finite rel (the
   caller then takes the numpy path: with two NaN operands which NaN a product returns
   depends on the operand order, which the compiler may swap lane by lane) */
void aa_oracle_fp32(int64_t n, const double *restrict v, const double *restrict rel,
                    int64_t rel_step, double tol, int64_t emin_key, double *restrict rounded,
                    double *restrict slack, uint8_t *restrict amb, uint8_t *restrict unsure,
                    uint8_t *restrict tiny, int64_t *restrict counts) {
    int64_t n_odd = 0, n_tiny = 0, n_bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double vi = v[i], m = fabs(vi), ri = rel[i * rel_step];
        n_bad += !isfinite(ri);
        double s = m * ri;
        s += tol;
        slack[i] = s;
        float a = (float)(vi - s), b = (float)(vi + s);
        uint8_t am = a != b;
        amb[i] = am;
        rounded[i] = (double)(float)vi;
        int64_t k1 = bits64(m - s) >> 52, k2 = bits64(m + s) >> 52;
        k1 = k1 > emin_key ? k1 : emin_key;
        k2 = k2 > emin_key ? k2 : emin_key;
        unsure[i] = k1 != k2;
        uint8_t t = (m <= s) & (m < INFINITY);
        tiny[i] = t;
        n_odd += am; /* (a non-finite v has am: NaN ends, or inf - inf) */
        n_tiny += t;
    }
    counts[0] = n_odd;
    counts[1] = n_tiny;
    counts[2] = n_bad;
}

/* counts: [0] correct, [1] unsure and not correct, [2] non-finite absolute errors,
   [3] hi == 0, [4] non-finite rounded */
void aa_errors_fp32(int64_t n, const double *restrict got, const double *restrict rounded,
                    const double *restrict hi, const double *restrict lo,
                    const uint8_t *restrict unsure, double smallest_normal, double scale,
                    uint8_t *restrict correct, double *restrict abs_err, double *restrict ulp_err,
                    double *restrict rel_err, int64_t *restrict dist, int64_t *restrict counts) {
    int64_t n_ok = 0, n_settle = 0, n_nonfin = 0, n_zero = 0, n_over = 0, n_lo = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = got[i], r = rounded[i], h = hi[i], l = lo[i];
        uint8_t c = (g == r) | ((isnan(g) != 0) & (isnan(r) != 0));
        correct[i] = c;
        double a = (g - h) - l;
        a = fabs(a);
        abs_err[i] = a;
        double ue = a / ulp1(h, smallest_normal, scale);
        ulp_err[i] = (c & (ue > 0.5)) ? 0.5 : ue;
        rel_err[i] = a / fabs(h);
        int64_t d = ord32(g) - ord32(r);
        dist[i] = d < 0 ? -d : d;
        n_ok += c;
        n_nonfin += !isfinite(a);
        n_zero += h == 0;
        n_over += !isfinite(r);
        n_lo += l != 0;
    }
    if (unsure)
        for (int64_t i = 0; i < n; i++)
            n_settle += (unsure[i] != 0) & !correct[i];
    /* exact_ulp: hi a power of two and lo of the other sign, the exact value lies in the
       binade below (rare: lo is nonzero only where mpmath or a double-double decided) */
    for (int64_t i = 0; n_lo && i < n; i++) {
        double h = hi[i], l = lo[i];
        int e;
        if (l != 0 && sgn(l) != sgn(h) && frexp(h, &e) == copysign(0.5, h)) {
            double ue = abs_err[i] / ulp1(nextafter(h, 0.0), smallest_normal, scale);
            if (correct[i] && ue > 0.5)
                ue = 0.5;
            ulp_err[i] = ue;
        }
    }
    counts[0] = n_ok;
    counts[1] = n_settle;
    counts[2] = n_nonfin;
    counts[3] = n_zero;
    counts[4] = n_over;
}

/* counts: [0] non-finite results, [1] finite results of magnitude >= max_finite,
   [2] non-finite RN_F(f), [3] zero results, [4] results whose sign bit is not the exact
   value's */
void aa_mask_counts_fp32(int64_t n, const double *restrict got, const double *restrict rn,
                         const double *restrict exact, double max_finite, int64_t *restrict counts) {
    int64_t n_nonfin = 0, n_big = 0, n_rn = 0, n_zero = 0, n_sign = 0;
    const int64_t E = 0x7FF0000000000000LL; /* (on the bits, one integer width: it vectorizes) */
    for (int64_t i = 0; i < n; i++) {
        double g = got[i];
        int64_t b = bits64(g);
        int64_t fin = (b & E) != E;
        n_nonfin += !fin;
        n_big += fin & (fabs(g) >= max_finite);
        n_rn += (bits64(rn[i]) & E) == E;
        n_zero += g == 0;
        n_sign += (b ^ bits64(exact[i])) < 0;
    }
    counts[0] = n_nonfin;
    counts[1] = n_big;
    counts[2] = n_rn;
    counts[3] = n_zero;
    counts[4] = n_sign;
}

/* The p99 histogram's keys (the float64 bits of an error >> shift): out[0] the zero keys,
   out[1] and out[2] the smallest and largest nonzero key (out[1] > out[2]: none) */
void aa_key_range(int64_t n, const double *restrict u, int64_t shift, int64_t *restrict out) {
    int64_t nzero = 0, lo = INT64_MAX, hi = INT64_MIN;
    for (int64_t i = 0; i < n; i++) {
        int64_t k = bits64(u[i]) >> shift;
        nzero += k == 0;
        int64_t kl = k == 0 ? INT64_MAX : k, kh = k == 0 ? INT64_MIN : k;
        lo = kl < lo ? kl : lo;
        hi = kh > hi ? kh : hi;
    }
    out[0] = nzero;
    out[1] = lo;
    out[2] = hi;
}

/* counts[k - k0] += 1 for each nonzero key k (counts: hi - k0 + 1 zeros) */
void aa_key_counts(int64_t n, const double *restrict u, int64_t shift, int64_t k0,
                   int64_t *restrict counts) {
    for (int64_t i = 0; i < n; i++) {
        int64_t k = bits64(u[i]) >> shift;
        if (k != 0)
            counts[k - k0] += 1;
    }
}
"""

_LOCK = threading.Lock()
_LIB: ctypes.CDLL | None = None
_TRIED = False


def enabled() -> bool:
    """The helper is allowed: ``ACTAUDIT_NO_NATIVE`` is unset, empty or 0."""
    return os.environ.get("ACTAUDIT_NO_NATIVE", "") in ("", "0")


def lib() -> ctypes.CDLL | None:
    """The loaded helper, where :func:`prepare` built it in this process (or its parent);
    never builds it."""
    return _LIB if enabled() else None


def for_fp32(fmt_name: str, a: np.ndarray) -> ctypes.CDLL | None:
    """The loaded helper where it applies to a chunk ``a`` of results in format ``fmt_name``:
    fp32, a 1-D chunk of CHUNK_MIN inputs or more; else None (the numpy path)."""
    loaded = lib()
    if loaded is None or fmt_name != "fp32" or a.ndim != 1 or len(a) < CHUNK_MIN:
        return None
    return loaded


def prepare(
    check: Callable[[ctypes.CDLL], bool], build: Callable[[], ctypes.CDLL | None] | None = None
) -> bool:
    """Build and load the helper once per process (a no-op after the first call), by
    ``build()`` (default: compiled here, into a private directory), keeping it only where
    ``check(loaded)`` finds it agrees with the numpy paths; whether it is loaded.  Any
    failure leaves the numpy paths (logged, never raised)."""
    global _LIB, _TRIED
    if not enabled():
        return False
    with _LOCK:
        if not _TRIED:
            _TRIED = True
            try:
                loaded = (build or _build)()
                if loaded is not None and not check(loaded):
                    log.warning("actaudit's compiled helper disagrees with its numpy path: not used")
                    loaded = None
                _LIB = loaded
            except Exception as e:  # (optional: whatever went wrong, the numpy paths)
                log.debug("compiled helper not built: %s", e)
                _LIB = None
    return _LIB is not None


def compiler() -> list[str] | None:
    """The compiler's command ($CC split as a shell would, default gcc), if it is found."""
    import shlex
    import shutil

    cc = shlex.split(os.environ.get("CC", "") or "gcc")
    if not cc or shutil.which(cc[0]) is None:
        return None
    return cc


def compile_to(cc: list[str], so: Path) -> bool:
    """Compile SOURCE with ``cc`` and FLAGS into the shared object ``so`` (in a directory of
    the caller's own); whether it compiled."""
    import signal
    import subprocess

    src, err = so.with_name("native.c"), so.with_name("native.stderr")
    src.write_text(SOURCE)
    # the compiler's output to a file, not a pipe (a wrapper's background child holding a
    # pipe would stall us), in a process group of its own, killed whole on a timeout or an
    # interrupt (no cc1 or as left running)
    with open(err, "wb") as ef:
        proc = subprocess.Popen(
            [*cc, *FLAGS, "-o", str(so), str(src), "-lm"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=ef,
            start_new_session=True,
        )
        try:
            rc = proc.wait(timeout=120)
        except BaseException:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    if rc != 0:
        log.debug("compiled helper: %s", err.read_bytes().decode(errors="replace")[-500:])
    return rc == 0


def _build() -> ctypes.CDLL | None:
    """The helper compiled into a fresh private directory, loaded, the directory removed."""
    import shutil
    import tempfile

    cc = compiler()
    if cc is None:
        return None
    tmp = Path(tempfile.mkdtemp(prefix="actaudit-native-"))  # (mode 0700, this process's own)
    try:
        so = tmp / "native.so"
        return load(str(so)) if compile_to(cc, so) else None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # (the mapping outlives the file)


def load(path: str) -> ctypes.CDLL:
    """The helper's shared object at ``path`` (a file, or a memory file's /proc/self/fd
    path), its functions typed."""
    import ctypes

    loaded = ctypes.CDLL(path)
    ptr, i64, dbl = ctypes.c_void_p, ctypes.c_int64, ctypes.c_double
    loaded.aa_oracle_fp32.restype = None
    loaded.aa_oracle_fp32.argtypes = [i64, ptr, ptr, i64, dbl, i64, ptr, ptr, ptr, ptr, ptr, ptr]
    loaded.aa_errors_fp32.restype = None
    loaded.aa_errors_fp32.argtypes = [i64, ptr, ptr, ptr, ptr, ptr, dbl, dbl, ptr, ptr, ptr, ptr, ptr, ptr]
    loaded.aa_mask_counts_fp32.restype = None
    loaded.aa_mask_counts_fp32.argtypes = [i64, ptr, ptr, ptr, dbl, ptr]
    loaded.aa_key_range.restype = None
    loaded.aa_key_range.argtypes = [i64, ptr, i64, ptr]
    loaded.aa_key_counts.restype = None
    loaded.aa_key_counts.argtypes = [i64, ptr, i64, i64, ptr]
    return loaded


def _ptr(a: np.ndarray | None) -> int | None:
    return None if a is None else a.__array_interface__["data"][0]


def _c_ready(*arrays: np.ndarray, dtype=np.float64) -> bool:
    """Plain 1-D arrays of dtype (native byte order), contiguous and aligned, as the C reads them."""
    return all(
        isinstance(a, np.ndarray)
        and a.dtype == dtype
        and a.ndim == 1
        and a.flags.c_contiguous
        and a.flags.aligned
        for a in arrays
    )


class OracleFP32(NamedTuple):
    rounded: np.ndarray
    slack: np.ndarray
    amb: np.ndarray
    unsure: np.ndarray
    tiny: np.ndarray
    n_odd: int  # inputs with amb or a non-finite fast value
    n_tiny: int


def oracle_fp32(loaded, v: np.ndarray, rel, tol: float, emin: int) -> OracleFP32 | None:
    """The oracle's fp32 rounding decision for fast values v (oracle._compute's numpy
    passes, in one); None (the numpy path) where v or an array rel is not a plain 1-D
    float64 array of one length, or rel is not finite somewhere."""
    rel_a = np.asarray(rel, dtype=np.float64)
    if not _c_ready(v) or (rel_a.ndim and (rel_a.shape != v.shape or not _c_ready(rel_a))):
        return None
    rel_a = rel_a.reshape(-1) if rel_a.ndim else rel_a.reshape(1)
    n = len(v)
    rounded, slack = np.empty(n), np.empty(n)
    amb, unsure, tiny = np.empty(n, bool), np.empty(n, bool), np.empty(n, bool)
    counts = np.zeros(3, np.int64)
    loaded.aa_oracle_fp32(
        n,
        _ptr(v),
        _ptr(rel_a),
        1 if len(rel_a) == n and n != 1 else 0,
        float(tol),
        emin + 1023,
        _ptr(rounded),
        _ptr(slack),
        _ptr(amb),
        _ptr(unsure),
        _ptr(tiny),
        _ptr(counts),
    )
    if counts[2]:  # a non-finite relative error: the numpy path's NaNs (never in a sweep)
        return None
    return OracleFP32(rounded, slack, amb, unsure, tiny, int(counts[0]), int(counts[1]))


class ErrorsFP32(NamedTuple):
    correct: np.ndarray
    abs_err: np.ndarray
    ulp_err: np.ndarray
    rel_err: np.ndarray
    dist: np.ndarray
    n_correct: int
    n_settle: int  # unsure and not correctly rounded
    n_nonfinite: int  # non-finite absolute errors
    n_zero: int  # exact values whose hi is 0
    n_over: int  # non-finite RN_F(f)


def errors_fp32(
    loaded, got, rounded, hi, lo, unsure, smallest_normal: float, scale: float
) -> ErrorsFP32 | None:
    """point_errors' pointwise passes for fp32 results, in one; None (the numpy path) where
    got, rounded, hi and lo are not plain 1-D float64 arrays of one length, or unsure (where
    given) is not a plain bool array of that length."""
    if not _c_ready(got, rounded, hi, lo) or not (len(got) == len(rounded) == len(hi) == len(lo)):
        return None
    if unsure is not None and not (_c_ready(unsure, dtype=np.dtype(bool)) and len(unsure) == len(got)):
        return None
    n = len(got)
    correct = np.empty(n, bool)
    abs_err, ulp_err, rel_err = np.empty(n), np.empty(n), np.empty(n)
    dist = np.empty(n, np.int64)
    counts = np.zeros(5, np.int64)
    loaded.aa_errors_fp32(
        n,
        _ptr(got),
        _ptr(rounded),
        _ptr(hi),
        _ptr(lo),
        _ptr(unsure),
        float(smallest_normal),
        float(scale),
        _ptr(correct),
        _ptr(abs_err),
        _ptr(ulp_err),
        _ptr(rel_err),
        _ptr(dist),
        _ptr(counts),
    )
    c = counts.tolist()
    return ErrorsFP32(correct, abs_err, ulp_err, rel_err, dist, *c)


class MaskCounts(NamedTuple):
    n_nonfinite: int  # non-finite results
    n_big: int  # finite results of magnitude >= the largest finite value
    n_rn_nonfinite: int  # non-finite RN_F(f)
    n_zero: int  # zero results
    n_sign: int  # results whose sign bit differs from the exact value's hi


def mask_counts_fp32(loaded, got, rn, exact, max_finite: float) -> MaskCounts | None:
    """The reductions that findings.masks tests before it builds a mask, in one pass; None
    where the arrays are not plain float64 ones."""
    if not _c_ready(got, rn, exact) or not (len(got) == len(rn) == len(exact)):
        return None
    counts = np.zeros(5, np.int64)
    loaded.aa_mask_counts_fp32(len(got), _ptr(got), _ptr(rn), _ptr(exact), float(max_finite), _ptr(counts))
    return MaskCounts(*counts.tolist())


def key_histogram(loaded, u: np.ndarray, shift: int) -> list[tuple[int, int]] | None:
    """(key, count) of the keys ``u``'s float64 bits >> shift, ascending, zero keys first
    and only if any: what metrics.Summary._bin counts, in two passes; None where u is not a
    plain float64 array."""
    if not _c_ready(u):
        return None
    r = np.zeros(3, np.int64)
    loaded.aa_key_range(len(u), _ptr(u), shift, _ptr(r))
    nzero, lo, hi = r.tolist()
    items = [(0, nzero)] if nzero else []
    if lo > hi:
        return items
    counts = np.zeros(hi - lo + 1, np.int64)
    loaded.aa_key_counts(len(u), _ptr(u), shift, lo, _ptr(counts))
    nz = np.flatnonzero(counts)
    return items + list(zip((nz + lo).tolist(), counts[nz].tolist()))
