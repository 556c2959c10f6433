"""Number formats: their parameters, values, exact rounding and ulp.

A :class:`Format` is a binary floating-point format with precision ``p``
(significand bits, the implicit bit included), exponent range ``emin..emax``
and an overflow behaviour.  Rounding is implemented here, exactly, rather than
through a library's casts: which float64 value a real number rounds to is decided here
(ml_dtypes before 0.5 converted float64 to bfloat16 and to the fp8 formats through float32,
which rounds twice: 1 + 2**-8 + 2**-30 became 1.0 in bfloat16 instead of 1.0078125; later
versions round once, and nothing here depends on which).  The bit layouts of bf16 and of the
OCP fp8 formats are numpy integer views too (bf16 is the top half of a float32, E5M2 the top
byte of a float16, E4M3FN its fields): ``ml_dtypes`` (0.6 s to import) is imported only where
an array of its types is really made, by :attr:`Format.dtype` (an engine's input, a user
function's, a dump's).
"""

from __future__ import annotations

import difflib
import functools
import math
from dataclasses import dataclass, field

import numpy as np

from audit.errors import UnknownNameError


@dataclass(frozen=True)
class Format:
    name: str
    bits: int
    p: int  # precision: significand bits including the implicit one
    emin: int  # exponent of the smallest normal number
    emax: int  # exponent of the largest finite number
    has_inf: bool
    # the storage dtype, by name: a numpy type ("float16") or one of ml_dtypes'
    # ("ml_dtypes.bfloat16"), resolved by the property ``dtype`` on first use
    dtype_name: str = field(repr=False)
    max_finite: float = field(repr=False)
    aliases: tuple[str, ...] = ()
    description: str = ""
    # Formats beyond IEEE-like fp8/16/32/64 (issue 15): their encodings are decoded and
    # encoded on the value here (``coded``), ml_dtypes only giving the array dtype.
    has_nan: bool = True
    neg_zero: bool = True  # False (fnuz): a negative value that rounds to zero gives +0
    saturate: bool = False  # overflow clamps to +-max_finite (OCP MX FP6/FP4, E8M0)
    kind: str = "float"  # "float" (element format) or "scale" (E8M0: block scales only)
    coded: bool = False
    source: str = ""

    # ------------------------------------------------------------------ facts
    @property
    def smallest_subnormal(self) -> float:
        return math.ldexp(1.0, self.emin - self.p + 1)

    @property
    def smallest_normal(self) -> float:
        return math.ldexp(1.0, self.emin)

    @functools.cached_property
    def dtype(self) -> np.dtype:
        """The numpy dtype of the storage (ml_dtypes' for bf16, fp8, fp6, fp4, E8M0: imported
        here, on first use)."""
        module, _, name = self.dtype_name.rpartition(".")
        if module == "ml_dtypes":
            import ml_dtypes

            return np.dtype(getattr(ml_dtypes, name))
        return np.dtype(name)

    @property
    def uint(self) -> np.dtype:
        """The unsigned integer dtype of the storage container (uint8 for fp4/fp6, uint32 for tf32)."""
        return np.dtype(f"uint{8 * _STORAGE_BYTES.get(self.dtype_name, 1)}")

    @property
    def overflow_threshold(self) -> float:
        """The smallest magnitude that overflows: max_finite + half an ulp of it (the tie
        rounds away from max_finite, whose significand is odd)."""
        return self.max_finite + 0.5 * float(self.ulp([self.max_finite])[0])

    @property
    def mantissa_bits(self) -> int:
        return self.p - 1

    @property
    def enumerable(self) -> bool:
        """Whether every value can be enumerated in memory (16 bits or fewer)."""
        return self.bits <= 16

    @property
    def overflow_value(self) -> float:
        """What a positive value too large for the format rounds to: +inf, NaN in formats
        without infinities (E4M3FN, the fnuz types), max_finite in saturating ones."""
        if self.saturate:
            return self.max_finite
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
            return self._round(v)

    def _round(self, v: np.ndarray) -> np.ndarray:
        """round() on the value: q = max(e, emin) - p + 1, the multiple of 2^q nearest v,
        ties to even (by Veltkamp's splitting where p <= 24, else rint of v / 2^q)."""
        with np.errstate(all="ignore"):
            if 2 <= self.p <= 24 and self.kind == "float":
                r = self._split_round(v)
            else:
                _, k = np.frexp(v)
                q = np.maximum(k - 1, self.emin) - (self.p - 1)
                r = np.ldexp(np.rint(np.ldexp(v, -q)), q)
            over = np.abs(r) > self.max_finite
            if over.any():
                if self.saturate:  # +-inf inputs too (NaN stays NaN: it has no encoding)
                    r = np.where(over, np.copysign(self.max_finite, v), r)
                else:
                    r = np.where(over, np.copysign(self.overflow_value, v) if self.has_inf else np.nan, r)
            if self.kind == "scale":  # E8M0: no zero, no sign
                r = np.where(v > 0, np.maximum(r, self.smallest_subnormal), np.nan)
            elif not self.neg_zero:
                r += 0.0  # -0 + +0 = +0: no negative zero (fnuz)
            return r

    def _split_round(self, v: np.ndarray) -> np.ndarray:
        """v rounded to p significant bits, ties to even, and to a multiple of the smallest
        subnormal below 2^emin; beyond the format's range, a value above max_finite (+-inf
        inputs: +-2^(emax+2)), NaN kept.  Seven cheap passes where numpy's frexp/ldexp/rint
        take four slower ones (1.35 against 2.0 ns a value in fp16; numpy's own float16 cast,
        without a vector loop on the two x86 CPUs measured, 3.1 ns there and back).

        Veltkamp's splitting (Dekker 1971): with t = RN(v (2^(53-p) + 1)) in float64,
        t - (t - v) is v rounded to nearest on p bits, for float64 v of any exponent
        that neither overflows (v is clipped to +-2^(emax+2) first, where it overflows
        the format either way) nor underflows (below 2^emin the fixed quantum is taken
        instead: (v + m) - m with m = 1.5 2^(emin - p + 53), whose binade's ulp is the
        smallest subnormal; the sign put back, (v + m) - m being +0 for a negative v
        that rounds to zero).  The ties go to even: tests check every midpoint of every
        format this path rounds to, and values one float64 ulp either side, against a
        rounding written in the test (frexp and rint)."""
        top = math.ldexp(1.0, self.emax + 2)
        w = np.clip(v, -top, top)  # (NaN stays NaN)
        t = w * float((1 << (53 - self.p)) + 1)
        r = np.subtract(t, w, out=np.empty_like(w))  # (an array also where v is 0-d)
        np.subtract(t, r, out=r)
        tiny = np.abs(r) < self.smallest_normal  # (v just below 2^emin rounds to 2^emin both ways)
        k = int(np.count_nonzero(tiny))
        if k:
            m = math.ldexp(1.5, self.emin - self.p + 53)
            if r.ndim != 1 or k > len(r) // 4:
                r = np.where(tiny, np.copysign((w + m) - m, w), r)
            else:
                i = np.flatnonzero(tiny)
                wi = w[i]
                r[i] = np.copysign((wi + m) - m, wi)
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
        if self.kind == "scale":
            return float(self.round([float(v)])[0]) if float(v) == v else math.nan
        if not man:
            if bc == 0 and exp == 0:  # zero
                return 0.0
            if exp in (-456, -789):  # +inf: (0, 0, -456, -2); -inf: (1, 0, -789, -3)
                return -self.overflow_value if sign else self.overflow_value
            return math.nan
        man = int(man)
        e = exp + bc - 1  # floor(log2 |v|)
        if e < self.emin - self.p:  # below half the smallest subnormal: rounds to zero
            return -0.0 if sign and self.neg_zero else 0.0
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
        if r == 0 and not self.neg_zero:
            return 0.0
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
        if pow2.max(initial=0.0) == math.inf:  # (a reduction first: most arrays have none)
            out[pow2 == math.inf] = math.nan
        return out

    # ------------------------------------------------------------ bit views
    def to_bits(self, values) -> np.ndarray:
        """Bit patterns of values that this format represents exactly."""
        if self.coded:
            return self._encode(values)
        v = np.asarray(values, dtype=np.float64)
        with np.errstate(all="ignore"):
            if self.name in _HALF_OF:  # bf16: the top half of a float32; E5M2: of a float16
                wide, shift = _HALF_OF[self.name]
                nan = np.isnan(v)
                if nan.any():  # the quiet NaN of its sign (a payload would reach the bits)
                    v = np.where(nan, np.copysign(math.nan, v), v)
                return (v.astype(wide).view(f"uint{2 * self.bits}") >> shift).astype(self.uint)
            if self.name == "fp8_e4m3":  # E4M3FN: the IEEE fields; NaN is S.1111.111
                a = np.abs(v)
                fin = np.isfinite(a) & (a <= self.max_finite)
                idx = np.where(fin, self._index(np.where(fin, a, 0.0)), 0x7F)
                return (idx | (np.signbit(v).astype(np.int64) << 7)).astype(self.uint)
            return v.astype(self.dtype).view(self.uint)

    def from_bits(self, bits) -> np.ndarray:
        if self.coded:
            return self._decode(bits)
        with np.errstate(all="ignore"):
            b = np.asarray(bits, dtype=self.uint)
            if self.name in _HALF_OF:
                wide, shift = _HALF_OF[self.name]
                u = np.dtype(f"uint{2 * self.bits}")
                return (b.astype(u) << u.type(shift)).view(wide).astype(np.float64)
            if self.name == "fp8_e4m3":
                mag = (b & 0x7F).astype(np.int64)
                v = np.where(mag == 0x7F, np.nan, self._from_index(np.minimum(mag, 0x7E)))
                return np.where(b & 0x80, -v, v)
            return b.view(self.dtype).astype(np.float64)

    # The value codec of the coded formats: sign bit on top (none in E8M0), then the
    # magnitude's position on the number line, which is the exponent and fraction fields
    # of every IEEE-like layout (subnormals first).  Special encodings: fnuz's NaN is
    # 0x80 (the pattern of -0); tf32's inf and NaN are IEEE's; E8M0's NaN is 0xff.
    def _index(self, a: np.ndarray) -> np.ndarray:
        """Position of finite magnitudes a >= 0 of the format (0 for zero)."""
        _, k = np.frexp(a)
        eb = np.maximum(np.where(a == 0, self.emin, k - 1), self.emin)
        m = np.ldexp(a, (self.p - 1) - eb).astype(np.int64)
        return ((eb - self.emin).astype(np.int64) << (self.p - 1)) + m

    def _from_index(self, idx: np.ndarray) -> np.ndarray:
        idx = np.asarray(idx, dtype=np.int64)
        half = 1 << (self.p - 1)
        eb = np.maximum(idx >> (self.p - 1), 1) - 1 + self.emin
        m = np.where(idx >= half, (idx & (half - 1)) | half, idx)
        return np.ldexp(m.astype(np.float64), (eb - (self.p - 1)).astype(np.int64))

    def _encode(self, values) -> np.ndarray:
        v = np.asarray(values, dtype=np.float64)
        with np.errstate(all="ignore"):
            if self.kind == "scale":
                code = np.where(np.isnan(v) | (v <= 0), 0xFF, self._index(np.where(v > 0, v, 1.0)) - 1)
                return code.astype(self.uint)
            fin = np.isfinite(v)
            a = np.where(fin, np.abs(v), 0.0)
            idx = self._index(a)
            top = self.max_ordinal_int
            idx = np.where(np.isinf(v), top + 1, idx)
            sign = np.signbit(v) & ~(np.isnan(v))
            if not self.neg_zero:
                sign &= v != 0
            out = idx | (sign.astype(np.int64) << (self.bits - 1))
            nan = np.isnan(v)
            if nan.any():
                out = np.where(nan, self._nan_bits, out)
        return out.astype(self.uint)

    def _decode(self, bits) -> np.ndarray:
        b = np.asarray(bits).astype(np.int64)
        with np.errstate(all="ignore"):
            if self.kind == "scale":
                return np.where(b == 0xFF, np.nan, np.ldexp(1.0, (b - 127)))
            mag = b & ((1 << (self.bits - 1)) - 1)
            neg = (b >> (self.bits - 1)) & 1
            top = self.max_ordinal_int
            v = self._from_index(np.minimum(mag, top))
            if self.has_inf:
                v = np.where(mag == top + 1, np.inf, np.where(mag > top + 1, np.nan, v))
            v = np.where(neg == 1, -v, v)
            if not self.neg_zero:
                v = np.where((neg == 1) & (mag == 0), np.nan, v)
        return v

    @property
    def _nan_bits(self) -> int:
        if not self.has_nan:
            raise ValueError(f"{self.name} has no NaN encoding")
        if self.kind == "scale":
            return 0xFF
        if not self.neg_zero:
            return 1 << (self.bits - 1)  # fnuz: the pattern of -0
        return ((self.max_ordinal_int + 1) | (1 << (self.p - 2))) if self.has_inf else (1 << self.bits) - 1

    @functools.cached_property
    def max_ordinal_int(self) -> int:
        return int(self._index(np.array([self.max_finite]))[0]) if self.coded else self.max_ordinal

    @property
    def _int(self) -> np.dtype:
        return np.dtype(f"int{self.bits}")

    def ordinal(self, values) -> np.ndarray:
        """Position of each value on the format's number line (+0 and -0 are both 0).
        In the coded formats +-inf (and NaN, counted as +inf) are one step past +-max."""
        if self.coded:
            v = np.asarray(values, dtype=np.float64)
            with np.errstate(all="ignore"):
                a = np.abs(v)
                idx = np.where(
                    np.isfinite(a), self._index(np.where(np.isfinite(a), a, 0.0)), self.max_ordinal_int + 1
                )
                return np.where(np.signbit(v) & ~np.isnan(v), -idx, idx)
        b = self.to_bits(values).view(self._int)
        s = b >> (self.bits - 1)  # -1 where the sign bit is set, else 0
        b &= self._int.type((1 << (self.bits - 1)) - 1)
        b ^= s
        b -= s  # (mag ^ s) - s: -mag where negative (two's complement), branch-free
        return b.astype(np.int64)

    def from_ordinal(self, ordinals) -> np.ndarray:
        o = np.asarray(ordinals, dtype=np.int64)
        if self.coded:
            a = np.abs(o)
            v = self._from_index(np.minimum(a, self.max_ordinal_int))
            v = np.where(a > self.max_ordinal_int, self.overflow_value if not self.saturate else np.nan, v)
            return np.where(o < 0, -v, v)
        bits = np.abs(o).astype(self.uint)
        bits[o < 0] |= self.uint.type(1 << (self.bits - 1))
        return self.from_bits(bits)

    def hex(self, value: float) -> str:
        if math.isnan(value):
            if self.coded and not self.has_nan:
                return "nan"  # no encoding (OCP MX FP6/FP4)
            b = self._nan_bits if self.coded else int(self.to_bits([math.nan])[0])
        else:
            b = int(self.to_bits([value])[0])
        return f"0x{b:0{(self.bits + 3) // 4}x}"

    @property
    def max_ordinal(self) -> int:
        if self.coded:
            return self.max_ordinal_int
        return int(self.ordinal([self.max_finite])[0])

    # ---------------------------------------------------------- enumeration
    def finite_values(self) -> np.ndarray:
        """Every finite value of the format (-0 and +0 both), ascending. 16 bits or fewer."""
        return _finite_values(self.name).copy()

    def finite_values_shared(self) -> np.ndarray:
        """finite_values() itself, read-only and shared (no copy): for comparisons."""
        return _finite_values(self.name)

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
            "has_nan": self.has_nan,
            "negative_zero": self.neg_zero,
            "overflow": ("saturates to max" if self.saturate else "inf" if self.has_inf else "NaN"),
            "kind": self.kind,
            "description": self.description,
            "source": self.source,
        }


# bytes of the storage container of each dtype (1 for the others: ml_dtypes' 8-, 6- and 4-bit types)
_STORAGE_BYTES = {"float16": 2, "float32": 4, "float64": 8, "ml_dtypes.bfloat16": 2}
# the formats whose bit pattern is the top half of a wider numpy float's (values exact in it)
_HALF_OF = {"bf16": (np.float32, 16), "fp8_e5m2": (np.float16, 8)}


def _fmt(name, bits, p, emin, emax, has_inf, dtype, aliases, description, max_finite=None, **kw):
    if max_finite is None:
        max_finite = math.ldexp(2.0 - math.ldexp(1.0, 1 - p), emax)
    return Format(
        name,
        bits,
        p,
        emin,
        emax,
        has_inf,
        dtype if isinstance(dtype, str) else np.dtype(dtype).name,
        float(max_finite),
        tuple(aliases),
        description,
        **kw,
    )


OCP_MX = (
    "OCP Microscaling Formats (MX) v1.0, https://www.opencompute.org/documents/"
    "ocp-microscaling-formats-mx-v1-0-spec-final-pdf"
)
FNUZ = (
    "AMD CDNA3 ISA (MI300) FP8/BF8; Graphcore/AMD 8-bit formats (arXiv:2206.02915); "
    "ml_dtypes float8_e4m3fnuz/float8_e5m2fnuz"
)


FORMATS: dict[str, Format] = {
    f.name: f
    for f in [
        _fmt(
            "fp8_e4m3",
            8,
            4,
            -6,
            8,
            False,
            "ml_dtypes.float8_e4m3fn",
            ("e4m3", "fp8_e4m3fn", "float8_e4m3fn", "fp8"),
            "OCP FP8 E4M3FN: no infinities, max 448, overflow gives NaN",
            max_finite=448.0,
        ),
        _fmt(
            "fp8_e5m2",
            8,
            3,
            -14,
            15,
            True,
            "ml_dtypes.float8_e5m2",
            ("e5m2", "float8_e5m2"),
            "OCP FP8 E5M2 (IEEE-like, with infinities)",
        ),
        _fmt("bf16", 16, 8, -126, 127, True, "ml_dtypes.bfloat16", ("bfloat16", "brain_float16"), "bfloat16"),
        _fmt(
            "fp16",
            16,
            11,
            -14,
            15,
            True,
            np.float16,
            ("half", "float16", "f16", "binary16"),
            "IEEE 754 binary16",
        ),
        _fmt(
            "fp32",
            32,
            24,
            -126,
            127,
            True,
            np.float32,
            ("float", "float32", "single", "f32", "binary32"),
            "IEEE 754 binary32",
        ),
        _fmt(
            "fp64",
            64,
            53,
            -1022,
            1023,
            True,
            np.float64,
            ("double", "float64", "f64", "binary64"),
            "IEEE 754 binary64",
        ),
        # --- accelerator formats (issue 15): encoded and decoded on the value (coded)
        _fmt(
            "fp8_e4m3fnuz",
            8,
            4,
            -7,
            7,
            False,
            "ml_dtypes.float8_e4m3fnuz",
            ("e4m3fnuz", "float8_e4m3fnuz"),
            "AMD FP8 E4M3 fnuz: bias 8, max 240, one NaN (0x80), no -0, no inf; overflow gives NaN",
            coded=True,
            neg_zero=False,
            source=FNUZ,
        ),
        _fmt(
            "fp8_e5m2fnuz",
            8,
            3,
            -15,
            15,
            False,
            "ml_dtypes.float8_e5m2fnuz",
            ("e5m2fnuz", "float8_e5m2fnuz"),
            "AMD BF8 E5M2 fnuz: bias 16, max 57344, one NaN (0x80), no -0, no inf; overflow gives NaN",
            coded=True,
            neg_zero=False,
            source=FNUZ,
        ),
        _fmt(
            "fp6_e3m2",
            6,
            3,
            -2,
            4,
            False,
            "ml_dtypes.float6_e3m2fn",
            ("e3m2", "float6_e3m2fn", "fp6_e3m2fn"),
            "OCP MX FP6 E3M2: bias 3, max 28, no inf or NaN; conversion saturates",
            coded=True,
            has_nan=False,
            saturate=True,
            source=OCP_MX + ", sections 5.3.2, 6.3",
        ),
        _fmt(
            "fp6_e2m3",
            6,
            4,
            0,
            2,
            False,
            "ml_dtypes.float6_e2m3fn",
            ("e2m3", "float6_e2m3fn", "fp6_e2m3fn"),
            "OCP MX FP6 E2M3: bias 1, max 7.5, no inf or NaN; conversion saturates",
            coded=True,
            has_nan=False,
            saturate=True,
            source=OCP_MX + ", sections 5.3.2, 6.3",
        ),
        _fmt(
            "fp4_e2m1",
            4,
            2,
            0,
            2,
            False,
            "ml_dtypes.float4_e2m1fn",
            ("e2m1", "float4_e2m1fn", "fp4_e2m1fn", "fp4"),
            "OCP MX FP4 E2M1: bias 1, max 6, no inf or NaN; conversion saturates",
            coded=True,
            has_nan=False,
            saturate=True,
            source=OCP_MX + ", sections 5.3.3, 6.3",
        ),
        _fmt(
            "e8m0",
            8,
            1,
            -127,
            127,
            False,
            "ml_dtypes.float8_e8m0fnu",
            ("fp8_e8m0", "float8_e8m0fnu", "e8m0fnu"),
            "OCP MX E8M0 block scale: 2^(k-127), k = 0..254, NaN 0xff; no zero, no sign (scales only)",
            coded=True,
            neg_zero=False,
            saturate=True,
            kind="scale",
            source=OCP_MX + ", section 5.4",
        ),
        _fmt(
            "tf32",
            19,
            11,
            -126,
            127,
            True,
            np.float32,
            ("tensorfloat32", "tensorfloat-32"),
            "NVIDIA TensorFloat-32: fp32's exponent range, p = 11 (19 bits, held in a float32)",
            coded=True,
            source="NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020), TF32",
        ),
    ]
}

# (keys as get_format normalizes names: lower case, "-" read as "_")
_ALIASES = {a.lower().replace("-", "_"): f.name for f in FORMATS.values() for a in (f.name, *f.aliases)}


def get_format(name) -> Format:
    """Look a format up by name or alias (case-insensitive)."""
    if isinstance(name, Format):
        return name
    key = str(name).strip().lower().replace("-", "_")
    if key in _ALIASES:
        return FORMATS[_ALIASES[key]]
    close = difflib.get_close_matches(key, list(_ALIASES), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise UnknownNameError(f"unknown format '{name}'{hint} (known: {', '.join(FORMATS)})")


def element_format(name) -> Format:
    """get_format, refusing scale-only formats (E8M0) where values are audited."""
    f = get_format(name)
    if f.kind != "float":
        raise UnknownNameError(
            f"{f.name} holds block scales only (powers of two, no zero): "
            "it is not an element format to audit in"
        )
    return f


def parse_formats(spec: str) -> list[Format]:
    """'fp16,bf16' -> [Format, Format] (duplicates removed, order kept)."""
    out: list[Format] = []
    for part in str(spec).split(","):
        if part.strip():
            f = element_format(part)
            if f not in out:
                out.append(f)
    if not out:
        raise UnknownNameError(f"no format given in '{spec}'")
    return out


@functools.cache
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
