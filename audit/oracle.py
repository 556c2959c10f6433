"""The oracle: correctly rounded reference values, decided exactly.

For each input x the oracle gives RN_F(f(x)) (the reference rounded to nearest,
ties to even, in format F) and f(x) itself as a double-double ``hi + lo``.

Where the reference has a float64 fast path and F has at most 24 bits of
precision, the fast value v is used unless the interval v(1 +- rel_err) +-
2**-1000 straddles a rounding boundary of F; those ambiguous inputs, and every
input of wider formats, are evaluated in mpmath with the precision raised until
the rounding is unambiguous.  Tables for every value of a format of 16 bits or
fewer are cached on disk, keyed by reference, parameters, format and
ORACLE_VERSION; a cache file that fails its checksum is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path

import mpmath as mp
import numpy as np

from .formats import Format
from .io import atomic_path
from .references import Reference

log = logging.getLogger(__name__)

ORACLE_VERSION = 1
FAST_ABS_TOL = 2.0**-1000
MIN_REL_ERR = 2.0**-50
GUARD_BITS = 12  # precision margin trusted of an mpmath evaluation
MAX_PREC = 4096  # beyond this an ambiguity is taken as an exact tie


@dataclass
class OracleValues:
    rounded: np.ndarray  # RN_F(f(x)) as float64
    hi: np.ndarray  # f(x) = hi + lo
    lo: np.ndarray
    n_mpmath: int  # inputs decided by mpmath

    def take(self, idx) -> "OracleValues":
        return OracleValues(self.rounded[idx], self.hi[idx], self.lo[idx], self.n_mpmath)


# -------------------------------------------------------------------- mpmath
def exact_point(ref: Reference, x: float, fmt: Format, params: dict) -> tuple[float, float, float]:
    """(RN_F(f(x)), hi, lo) for one finite input, by mpmath alone."""
    prec = fmt.p + 40
    while True:
        with mp.workprec(prec):
            v = ref.mp(mp.mpf(x), **params)
        with mp.workprec(prec + 64):
            d = abs(v) * mp.ldexp(1, GUARD_BITS - prec)
            a, b = fmt.round_mpf(v - d), fmt.round_mpf(v + d)
        if a == b or (math.isnan(a) and math.isnan(b)) or prec >= MAX_PREC:
            break
        prec *= 2
    r = a if a == b else fmt.round_mpf(v)
    hi = float(v)
    with mp.workprec(prec + 64):
        lo = float(v - hi) if math.isfinite(hi) else 0.0
    return r, hi, lo


def exact_points(ref: Reference, x: np.ndarray, fmt: Format, params: dict) -> OracleValues:
    out = np.empty((3, len(x)))
    for i, xi in enumerate(np.asarray(x, dtype=np.float64).tolist()):
        out[:, i] = exact_point(ref, xi, fmt, params)
    return OracleValues(out[0], out[1], out[2], len(x))


# ------------------------------------------------------------------ fast path
def fast_path_applies(ref: Reference, fmt: Format) -> bool:
    return ref.fast is not None and fmt.p <= 24 and fmt.emin >= -126


def evaluate(ref: Reference, fmt: Format, x: np.ndarray, params: dict | None = None) -> OracleValues:
    """Oracle values at finite inputs x (float64 array of values of ``fmt``)."""
    params = ref.with_defaults(params)
    x = np.asarray(x, dtype=np.float64)
    if fmt.enumerable and _cache_enabled():
        return _table(ref, fmt, params).take(_positions(fmt, x))
    return _compute(ref, fmt, x, params)


def _compute(ref: Reference, fmt: Format, x: np.ndarray, params: dict) -> OracleValues:
    if not fast_path_applies(ref, fmt):
        return exact_points(ref, x, fmt, params)
    v = ref.fast(x, **params)
    with np.errstate(all="ignore"):
        # never trust a fast value to better than a few float64 ulps, so that a
        # value exactly on a rounding boundary (a tie) always goes to mpmath
        slack = np.abs(v) * max(ref.rel_err, MIN_REL_ERR) + FAST_ABS_TOL
        lo_r, hi_r = fmt.round(v - slack), fmt.round(v + slack)
        rounded = fmt.round(v)
        # near a power of two the binade of f (hence its ulp) is also uncertain
        binade_unsure = np.frexp(v - slack)[1] != np.frexp(v + slack)[1]
    amb = ~((lo_r == hi_r) | (np.isnan(lo_r) & np.isnan(hi_r))) | binade_unsure
    hi = v.copy()
    lo = np.zeros_like(v)
    idx = np.flatnonzero(amb)
    if len(idx):
        ex = exact_points(ref, x[idx], fmt, params)
        rounded[idx], hi[idx], lo[idx] = ex.rounded, ex.hi, ex.lo
    return OracleValues(rounded, hi, lo, len(idx))


# --------------------------------------------------------------------- cache
_MEMO: dict[str, OracleValues] = {}


def _cache_enabled() -> bool:
    return os.environ.get("ACTAUDIT_NO_CACHE", "") in ("", "0")


def cache_dir() -> Path:
    env = os.environ.get("ACTAUDIT_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "actaudit"


def cache_key(ref: Reference, fmt: Format, params: dict) -> str:
    p = json.dumps(params, sort_keys=True)
    h = hashlib.sha256(p.encode()).hexdigest()[:12]
    return f"{ref.name}-{fmt.name}-{h}-o{ORACLE_VERSION}"


def _digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def _positions(fmt: Format, x: np.ndarray) -> np.ndarray:
    """Index of each value of x in fmt.finite_values()."""
    table = _position_table(fmt.name)
    return table[fmt.to_bits(x).astype(np.int64)]


_POS: dict[str, np.ndarray] = {}


def _position_table(name: str) -> np.ndarray:
    if name not in _POS:
        from .formats import FORMATS

        fmt = FORMATS[name]
        vals = fmt.finite_values()
        t = np.full(1 << fmt.bits, -1, dtype=np.int64)
        t[fmt.to_bits(vals).astype(np.int64)] = np.arange(len(vals))
        _POS[name] = t
    return _POS[name]


def _table(ref: Reference, fmt: Format, params: dict) -> OracleValues:
    key = cache_key(ref, fmt, params)
    if key in _MEMO:
        return _MEMO[key]
    x = fmt.finite_values()
    path = cache_dir() / f"{key}.npz"
    got = _load(path, x)
    if got is None:
        got = _compute(ref, fmt, x, params)
        _store(path, x, got)
    _MEMO[key] = got
    return got


def _load(path: Path, x: np.ndarray) -> OracleValues | None:
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            arrs = {k: z[k] for k in ("x", "rounded", "hi", "lo", "n_mpmath", "digest")}
        ok = (arrs["x"].shape == x.shape and np.array_equal(arrs["x"].view(np.uint64), x.view(np.uint64))
              and all(arrs[k].shape == x.shape and arrs[k].dtype == np.float64 for k in ("rounded", "hi", "lo"))
              and str(arrs["digest"]) == _digest(arrs["x"], arrs["rounded"], arrs["hi"], arrs["lo"]))
    except Exception as exc:  # any unreadable file is a cache miss
        log.warning("oracle cache %s unreadable (%s); rebuilding", path, exc)
        return None
    if not ok:
        log.warning("oracle cache %s is corrupted; rebuilding", path)
        return None
    return OracleValues(arrs["rounded"], arrs["hi"], arrs["lo"], int(arrs["n_mpmath"]))


def _store(path: Path, x: np.ndarray, v: OracleValues) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            with open(tmp, "wb") as fh:
                np.savez(fh, x=x, rounded=v.rounded, hi=v.hi, lo=v.lo,
                         n_mpmath=np.int64(v.n_mpmath),
                         digest=np.str_(_digest(x, v.rounded, v.hi, v.lo)))
    except OSError as exc:  # a read-only cache directory must not stop a sweep
        log.warning("cannot write oracle cache %s (%s)", path, exc)
