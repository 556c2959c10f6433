"""Number formats: their parameters, values, exact rounding and ulp.

A :class:`Format` is a binary floating-point format with precision ``p``
(significand bits, the implicit bit included), exponent range ``emin..emax``
and an overflow behaviour.  Rounding is implemented here, exactly, rather than
through ``ml_dtypes`` casts: ml_dtypes converts float64 to bfloat16 and to the
fp8 formats through float32, which rounds twice (1 + 2**-8 + 2**-30 becomes
1.0 in bfloat16 instead of 1.0078125).  ml_dtypes provides the storage dtypes
and bit layouts; the value a real number rounds to is decided here.
"""

from __future__ import annotations

import difflib
import functools
import math
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from .errors import UnknownNameError


@dataclass(frozen=True)
class Format:
    name: str
    bits: int
    p: int  # precision: significand bits including the implicit one
    emin: int  # exponent of the smallest normal number
    emax: int  # exponent of the largest finite number
    has_inf: bool
    dtype: np.dtype = field(repr=False)
    max_finite: float = field(repr=False)
    aliases: tuple[str, ...] = ()
    description: str = ""

    # ------------------------------------------------------------------ facts
    @property
    def smallest_subnormal(self) -> float:
        return math.ldexp(1.0, self.emin - self.p + 1)

    @property
    def smallest_normal(self) -> float:
        return math.ldexp(1.0, self.emin)

    @property
    def uint(self) -> np.dtype:
        return np.dtype(f"uint{self.bits}")

    @property
    def mantissa_bits(self) -> int:
        return self.p - 1

    @property
    def enumerable(self) -> bool:
        """Whether every value can be enumerated in memory (16 bits or fewer)."""
        return self.bits <= 16

    @property
    def overflow_value(self) -> float:
        """What a positive value too large for the format rounds to."""
        return math.inf if self.has_inf else math.nan

    # -------------------------------------------------------------- rounding
    def round(self, v) -> np.ndarray:
        """Round float64 values to nearest, ties to even, into this format.

        Returns float64 values that the format represents exactly.  Values whose
        rounding exceeds the largest finite number overflow to +-inf, or to NaN
        in formats without infinities (OCP E4M3FN).
        """
        v = np.asarray(v, dtype=np.float64)
        with np.errstate(all="ignore"):
            if self.name == "fp64":
                return v.copy()
            if self.name == "fp32":
                # The hardware double->single conversion is correctly rounded
                # (tests check it against round_mpf at midpoints).
                return v.astype(np.float32).astype(np.float64)
            _, k = np.frexp(v)
            q = np.maximum(k - 1, self.emin) - (self.p - 1)
            r = np.ldexp(np.rint(np.ldexp(v, -q)), q)
            over = np.abs(r) > self.max_finite
            if over.any():
                r = np.where(over, np.copysign(self.overflow_value, v) if self.has_inf else np.nan, r)
            return r

    def round_key(self, v) -> np.ndarray:
        """An array equal where round(v) is equal (NaN where it is NaN), cheaper than round:
        for fp32 the float32 values themselves."""
        if self.name == "fp32":
            with np.errstate(all="ignore"):
                return np.asarray(v, dtype=np.float64).astype(np.float32)
        return self.round(v)

    def round_mpf(self, v) -> float:
        """Round an mpmath number (exact binary value) into this format, exactly."""
        sign, man, exp, bc = v._mpf_
        if not man:
            if bc == 0 and exp == 0:  # zero
                return 0.0
            if exp in (-456, -789):  # +inf: (0, 0, -456, -2); -inf: (1, 0, -789, -3)
                return -self.overflow_value if sign else self.overflow_value
            return math.nan
        man = int(man)
        e = exp + bc - 1  # floor(log2 |v|)
        if e < self.emin - self.p:  # below half the smallest subnormal: rounds to zero
            return -0.0 if sign else 0.0
        q = max(e, self.emin) - (self.p - 1)
        shift = q - exp
        if shift <= 0:
            n = man << -shift
        else:
            n = man >> shift
            rem = man & ((1 << shift) - 1)
            half = 1 << (shift - 1)
            if rem > half or (rem == half and n & 1):
                n += 1
        if q + n.bit_length() - 1 > self.emax or math.ldexp(float(n), q) > self.max_finite:
            r = self.overflow_value
        else:
            r = math.ldexp(float(n), q)
        return -r if sign else r

    # ------------------------------------------------------------------- ulp
    def ulp(self, y) -> np.ndarray:
        """ulp_F(y) = 2**(max(e, emin) - p + 1), e = floor(log2|y|); ulp_F(0) = smallest subnormal.

        On the float64 bits: keeping only the exponent field of |y| gives 2**e (0 for
        float64 subnormals, which are below every emin here but fp64's, where the clamp
        to 2**emin gives the same answer); NaN for non-finite y."""
        y = np.asarray(y, dtype=np.float64)
        pow2 = (y.view(np.uint64) & np.uint64(0x7FF0000000000000)).view(np.float64)
        out = np.maximum(pow2, self.smallest_normal)
        out *= math.ldexp(1.0, 1 - self.p)
        out[pow2 == math.inf] = math.nan
        return out

    # ------------------------------------------------------------ bit views
    def to_bits(self, values) -> np.ndarray:
        """Bit patterns of values that this format represents exactly."""
        return np.asarray(values, dtype=np.float64).astype(self.dtype).view(self.uint)

    def from_bits(self, bits) -> np.ndarray:
        with np.errstate(all="ignore"):
            return np.asarray(bits, dtype=self.uint).view(self.dtype).astype(np.float64)

    @property
    def _int(self) -> np.dtype:
        return np.dtype(f"int{self.bits}")

    def ordinal(self, values) -> np.ndarray:
        """Position of each value on the format's number line (+0 and -0 are both 0)."""
        b = self.to_bits(values).view(self._int)
        s = b >> (self.bits - 1)  # -1 where the sign bit is set, else 0
        b &= self._int.type((1 << (self.bits - 1)) - 1)
        b ^= s
        b -= s  # (mag ^ s) - s: -mag where negative (two's complement), branch-free
        return b.astype(np.int64)

    def from_ordinal(self, ordinals) -> np.ndarray:
        o = np.asarray(ordinals, dtype=np.int64)
        bits = np.abs(o).astype(self.uint)
        bits[o < 0] |= self.uint.type(1 << (self.bits - 1))
        return self.from_bits(bits)

    def hex(self, value: float) -> str:
        if math.isnan(value):
            b = int(np.array([np.nan]).astype(self.dtype).view(self.uint)[0])
        else:
            b = int(self.to_bits([value])[0])
        return f"0x{b:0{self.bits // 4}x}"

    @property
    def max_ordinal(self) -> int:
        return int(self.ordinal([self.max_finite])[0])

    # ---------------------------------------------------------- enumeration
    def finite_values(self) -> np.ndarray:
        """Every finite value of the format (-0 and +0 both), ascending. 16 bits or fewer."""
        return _finite_values(self.name).copy()

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "aliases": list(self.aliases),
            "bits": self.bits,
            "precision": self.p,
            "emin": self.emin,
            "emax": self.emax,
            "max_finite": self.max_finite,
            "smallest_normal": self.smallest_normal,
            "smallest_subnormal": self.smallest_subnormal,
            "has_inf": self.has_inf,
            "description": self.description,
        }


def _fmt(name, bits, p, emin, emax, has_inf, dtype, aliases, description, max_finite=None):
    if max_finite is None:
        max_finite = math.ldexp(2.0 - math.ldexp(1.0, 1 - p), emax)
    return Format(name, bits, p, emin, emax, has_inf, np.dtype(dtype), float(max_finite),
                  tuple(aliases), description)


FORMATS: dict[str, Format] = {
    f.name: f
    for f in [
        _fmt("fp8_e4m3", 8, 4, -6, 8, False, ml_dtypes.float8_e4m3fn,
             ("e4m3", "fp8_e4m3fn", "float8_e4m3fn", "fp8"),
             "OCP FP8 E4M3FN: no infinities, max 448, overflow gives NaN", max_finite=448.0),
        _fmt("fp8_e5m2", 8, 3, -14, 15, True, ml_dtypes.float8_e5m2,
             ("e5m2", "float8_e5m2"), "OCP FP8 E5M2 (IEEE-like, with infinities)"),
        _fmt("bf16", 16, 8, -126, 127, True, ml_dtypes.bfloat16,
             ("bfloat16", "brain_float16"), "bfloat16"),
        _fmt("fp16", 16, 11, -14, 15, True, np.float16,
             ("half", "float16", "f16", "binary16"), "IEEE 754 binary16"),
        _fmt("fp32", 32, 24, -126, 127, True, np.float32,
             ("float", "float32", "single", "f32", "binary32"), "IEEE 754 binary32"),
        _fmt("fp64", 64, 53, -1022, 1023, True, np.float64,
             ("double", "float64", "f64", "binary64"), "IEEE 754 binary64"),
    ]
}

_ALIASES = {a: f.name for f in FORMATS.values() for a in (f.name, *f.aliases)}


def get_format(name) -> Format:
    """Look a format up by name or alias (case-insensitive)."""
    if isinstance(name, Format):
        return name
    key = str(name).strip().lower().replace("-", "_")
    if key in _ALIASES:
        return FORMATS[_ALIASES[key]]
    close = difflib.get_close_matches(key, list(_ALIASES), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise UnknownNameError(
        f"unknown format '{name}'{hint} (known: {', '.join(FORMATS)})")


def parse_formats(spec: str) -> list[Format]:
    """'fp16,bf16' -> [Format, Format] (duplicates removed, order kept)."""
    out: list[Format] = []
    for part in str(spec).split(","):
        if part.strip():
            f = get_format(part)
            if f not in out:
                out.append(f)
    if not out:
        raise UnknownNameError(f"no format given in '{spec}'")
    return out


@functools.lru_cache(maxsize=None)
def _finite_values(name: str) -> np.ndarray:
    f = FORMATS[name]
    if not f.enumerable:
        raise ValueError(f"{name} has too many values to enumerate")
    bits = np.arange(1 << f.bits, dtype=np.uint32).astype(f.uint)
    vals = f.from_bits(bits)
    keep = np.isfinite(vals)
    vals, bits = vals[keep], bits[keep]
    # ascending by value, -0 before +0
    order = np.lexsort((~np.signbit(vals), vals))
    out = vals[order]
    out.flags.writeable = False
    return out
