"""OpenVINO CPU plugin float kernels on x86-64 with AVX-512 (oneDNN's JIT eltwise injector),
transcribed operation by operation (``FAMILY.onednn*``).

On x86-64 the CPU plugin runs Tanh and Gelu through oneDNN's ``jit_uni_eltwise_injector``
(OpenVINO's fork, ``src/cpu/x64/injectors/jit_uni_eltwise_injector.cpp``; Apache-2.0: the
table constants and the instruction sequence are facts of the kernel, no code is copied).
These candidates compute in fp32 what its AVX-512 path computes (``avx512_core`` and up:
``openvino.dispatch()`` names it), every ``vfmadd213ps`` one rounding (``m.fma``), table
lookups by ``vpermt2ps`` (the low five index bits select one of 32 entries):

* tanh: |x| split as ``s = bits(|x|) & 0xffc00000`` (sign, exponent, one mantissa bit) and
  ``r = |x| - s`` (exact); interval ``((bits(|x|) - 0x39800000) & 0xffc00000) >> 22``
  (mod 32) picks a degree-6 polynomial in r, Horner by FMA; |x| >= 0x41102cb3 (9.0109)
  gives 1, |x| < 0x39ddb3d7 (4.2e-4) gives |x|; the sign of x is xored back; NaN stays NaN
  (the plugin passes NaN through: measured).
* Gelu(erf): erf(|x|/sqrt 2) by a degree-5 minimax polynomial in |x| on quarter-binade
  intervals (index ``(bits(|x|) + 0xc21fffff) >> 21`` arithmetic, clamped to [1, 24], 23 above
  0x40b15cee = 5.5426), Horner by FMA, the sign of x xored in, then ``(x (1 + p)) 0.5``.
* Gelu(tanh): ``u = ((x^2 c + 1) by FMA, times x) times sqrt(2/pi)`` with c = 0x3d372713
  (0.044715), the tanh above, then ``((t + 1) 0.5) x``.

The AVX2 path (``avx2``) computes Gelu(erf) by Abramowitz-Stegun 7.1.26 with oneDNN's exp
instead: not modelled here (the fidelity tests detect the dispatch: on a CPU that takes
another path they are skipped, naming it, never compared with that path's kernel).
Proven bit-identical to openvino 2026.4 on this machine (avx512_core_amx) at every bf16 and
fp16 input of fp32 models, and at every input of bf16 models, where the kernel computes in
fp32 and converts its result with VCVTNEPS2BF16, which reads subnormal float32 values as zero:
the candidate under ``--semantics daz_out`` (tests/test_catalog_onednn.py).
"""

from __future__ import annotations

import numpy as np

from audit.targets.candidates import candidate

TANH_POL_BITS = (
    # degree 0
    (
        0x00000000,
        0x39BFFFFF,
        0x39FFFFFF,
        0x3A3FFFFE,
        0x3A7FFFFB,
        0x3ABFFFF7,
        0x3AFFFFEB,
        0x3B3FFFDC,
        0x3B7FFFAB,
        0x3BBFFF70,
        0x3BFFFEAB,
        0x3C3FFDC0,
        0x3C7FFAAB,
        0x3CBFF701,
        0x3CFFEAAD,
        0x3D3FDC08,
        0x3D7FAACD,
        0x3DBF7081,
        0x3DFEACC9,
        0x3E3DC7FD,
        0x3E7ACBF5,
        0x3EB77A9F,
        0x3EEC9A9F,
        0x3F22991F,
        0x3F42F7D6,
        0x3F67B7CC,
        0x3F76CA83,
        0x3F7EBBE9,
        0x3F7FD40C,
        0x3F7FFF32,
        0x3F7FFFFC,
        0x3F800000,
    ),
    # degree 1
    (
        0x3F800000,
        0x3F800018,
        0x3F7FFFE8,
        0x3F7FFFDA,
        0x3F7FFFDC,
        0x3F7FFFDC,
        0x3F7FFFAC,
        0x3F7FFF70,
        0x3F7FFEEC,
        0x3F7FFDC0,
        0x3F7FFBED,
        0x3F7FF704,
        0x3F7FEFF5,
        0x3F7FDBCA,
        0x3F7FBFFF,
        0x3F7F7041,
        0x3F7F009B,
        0x3F7DC36C,
        0x3F7C0AA8,
        0x3F7734B8,
        0x3F70A4DE,
        0x3F5F1FD8,
        0x3F495493,
        0x3F18B9EC,
        0x3ED706CB,
        0x3E390B06,
        0x3D90B11F,
        0x3C21A053,
        0x3AAF7FDB,
        0x37CCC1A3,
        0x355C6733,
        0x00000000,
    ),
    # degree 2
    (
        0x00000000,
        0xBE4E0FF1,
        0x3D25B1B1,
        0x3D6B6DAB,
        0x3C9FB1D5,
        0xBABFF06F,
        0x3C07B3F6,
        0xBB3FC1BC,
        0x3A9F5921,
        0xBBBF06F2,
        0xBBB0F402,
        0xBC47DB9E,
        0xBC73D5E7,
        0xBCA25BDA,
        0xBCFCA780,
        0xBD40E07C,
        0xBD7DAB03,
        0xBDBE4A0F,
        0xBDFB14A5,
        0xBE36CC8D,
        0xBE6BD102,
        0xBE9FE7C5,
        0xBEBA0F10,
        0xBEC206A8,
        0xBEA3C388,
        0xBE277D62,
        0xBD8B7960,
        0xBC209F49,
        0xBAAD44CA,
        0xB7C6EEAC,
        0xB663AA41,
        0x00000000,
    ),
    # degree 3
    (
        0x00000000,
        0x45B3AE96,
        0xC414EB20,
        0xC450E02E,
        0xC3152B4E,
        0xBEAD2F56,
        0xC2162E02,
        0xBEB4BD5A,
        0xC11A59A4,
        0xBED2F507,
        0xC020D32C,
        0x3DD0F506,
        0xBF2A75E2,
        0xBFF950E3,
        0xBED47334,
        0xBE809B8C,
        0xBEB64532,
        0xBE961A5B,
        0xBE9B63AC,
        0xBEA0D4B2,
        0xBE828A77,
        0xBE378612,
        0xBDC20908,
        0x3D2D3957,
        0x3DD46E89,
        0x3DB3F629,
        0x3D2C5E7B,
        0x3BD20403,
        0x3A59DFAE,
        0x3770AF45,
        0x372CC014,
        0x00000000,
    ),
    # degree 4
    (
        0x00000000,
        0xCC981A1B,
        0x4A7EDD3D,
        0x4AB1007C,
        0x48FEDD9C,
        0x41A557B5,
        0x477EE32A,
        0x422557F5,
        0x45FF3CE4,
        0x42A55641,
        0x446E0867,
        0xC33DC19A,
        0x42915214,
        0x43AF4FAD,
        0x4110FE88,
        0xC1099B75,
        0x3FC8A8DC,
        0xBFBEAEF5,
        0xBE365AAD,
        0x3F4D9652,
        0x3DDFA08F,
        0x3E34E9B8,
        0x3E2D07A6,
        0x3DC63567,
        0x3CDAEB78,
        0xBCD17537,
        0xBC92829C,
        0xBB43AB99,
        0xB9B471DD,
        0xB6BAAD5A,
        0xB78BAFC7,
        0x00000000,
    ),
    # degree 5
    (
        0x00000000,
        0x52F688D5,
        0xD0505C72,
        0xD08F98E3,
        0xCE505CC9,
        0xC7162B8A,
        0xCC5061D6,
        0xC7162BDF,
        0xCA50B37F,
        0xC7162A3A,
        0xC8422086,
        0x471A714E,
        0xC5ECE1F1,
        0xC70E3D90,
        0xC3EBA94A,
        0x43E0C424,
        0xC21F4552,
        0x42217CC8,
        0x405E7DC4,
        0xC10DD401,
        0x3E96B602,
        0xBD1A6D2F,
        0xBD393883,
        0xBD674682,
        0xBD310016,
        0xB961E269,
        0x3BA32495,
        0x3A7680D5,
        0x38B3173C,
        0x35A9DEEA,
        0x375C3F2A,
        0x00000000,
    ),
    # degree 6
    (
        0x00000000,
        0xD8995ED1,
        0x558285EA,
        0x55B2CD69,
        0x53028625,
        0x4BC9991F,
        0x5082898A,
        0x4B4999B3,
        0x4E02C07C,
        0x4AC99764,
        0x4B72C822,
        0xCA40C0E1,
        0x489413E4,
        0x49B12224,
        0x46134C4E,
        0xC60C2D57,
        0x43C83910,
        0xC3C872D1,
        0xC186BC9E,
        0x42325BC3,
        0xBF2FFA4A,
        0x3D9A203C,
        0xBC545A43,
        0xBAE08FEE,
        0x3C80225D,
        0x3B1FD1DF,
        0xBA36B9D1,
        0xB91DE544,
        0xB71F100F,
        0xB408E2ED,
        0xB685FEC8,
        0x00000000,
    ),
)

GELU_ERF_POL_BITS = (
    # degree 0
    (
        0xA6F2CB94,
        0x32827792,
        0x3381CC0C,
        0x34523D4A,
        0x351AC44D,
        0x35F36D88,
        0x36EE8229,
        0x37B8A3BB,
        0x3867A213,
        0x3940033B,
        0x3A2A5A1D,
        0x3AE35863,
        0x3B7828F2,
        0x3C08B14B,
        0x3C515ED3,
        0xBB503236,
        0xBD8D8E5E,
        0xBE8ABCD9,
        0xBF0C19A2,
        0xBECCB328,
        0x3E176CED,
        0x3F470D99,
        0x3F7ABB28,
        0x3F800000,
        0x00000000,
    ),
    # degree 1
    (
        0x3F4C422A,
        0x3F4C421F,
        0x3F4C4207,
        0x3F4C41CB,
        0x3F4C413B,
        0x3F4C3FAD,
        0x3F4C3A2F,
        0x3F4C2D40,
        0x3F4C146A,
        0x3F4BC341,
        0x3F4AD08C,
        0x3F48F8CF,
        0x3F45FAC7,
        0x3F404E07,
        0x3F3B980F,
        0x3F48DFF3,
        0x3F78B21B,
        0x3FBB0704,
        0x40019C32,
        0x3FE536D6,
        0x3F81331E,
        0x3E6C8684,
        0x3C98F936,
        0x00000000,
        0x3F800000,
    ),
    # degree 2
    (
        0xB62173F4,
        0x3735E4CF,
        0x37F2FF89,
        0x388C23BE,
        0x3917535C,
        0x39AB2AB0,
        0x3A60FADB,
        0x3AF9B960,
        0x3B6E5491,
        0x3C0A4EC5,
        0x3CA5AA8C,
        0x3D2138D9,
        0x3D8737D4,
        0x3DDFB660,
        0x3E0F27AB,
        0x3D94004B,
        0xBE0EFDEB,
        0xBF1D96C3,
        0xBF89DB58,
        0xBF6D9897,
        0xBEF69FB8,
        0xBDC4F8A8,
        0xBBDE6422,
        0x00000000,
        0x00000000,
    ),
    # degree 3
    (
        0xBE081A19,
        0xBE084570,
        0xBE08639B,
        0xBE089837,
        0xBE08F409,
        0xBE09AB95,
        0xBE0B66D0,
        0xBE0E400A,
        0xBE124DF8,
        0xBE1BDE02,
        0xBE2F19C9,
        0xBE4931BF,
        0xBE685FBC,
        0xBE89C95F,
        0xBE96CBCA,
        0xBE8044AA,
        0xBE0550F2,
        0x3DCFD6A1,
        0x3E94C826,
        0x3E79345F,
        0x3DECEC91,
        0x3CA46568,
        0x3AA1E00A,
        0x00000000,
        0x00000000,
    ),
    # degree 4
    (
        0xBA3D61DB,
        0x39F097A3,
        0x3A5845DC,
        0x3AB1FA35,
        0x3B0CEFB8,
        0x3B653AB6,
        0x3BCAE527,
        0x3C221712,
        0x3C6C5840,
        0x3CC0A703,
        0x3D1DCC19,
        0x3D63656D,
        0x3D955907,
        0x3DBF9910,
        0x3DD53F69,
        0x3DB7DCEF,
        0x3D639EBE,
        0xBA6EDE48,
        0xBD22BE69,
        0xBD041CF1,
        0xBC64F5AB,
        0xBB097A32,
        0xB8EBF380,
        0x00000000,
        0x00000000,
    ),
    # degree 5
    (
        0x3CB7D80C,
        0x3C9B6050,
        0x3C978D11,
        0x3C92E850,
        0x3C8D058B,
        0x3C848454,
        0x3C6CD623,
        0x3C4C824B,
        0x3C2A7935,
        0x3BE0B390,
        0x3B0651AC,
        0xBB232F53,
        0xBBD42FA0,
        0xBC2C5366,
        0xBC492C9E,
        0xBC2A7AA6,
        0xBBD55D04,
        0xBA823A76,
        0x3B102AA8,
        0x3AE25A7E,
        0x3A31F792,
        0x38B84375,
        0x3689BB5A,
        0x00000000,
        0x00000000,
    ),
)


def _f32(bits: int) -> float:
    return float(np.uint32(bits).view(np.float32))


def _table(bits) -> tuple:
    return tuple(np.array(row, dtype=np.uint32).view(np.float32) for row in bits)


TANH_POL = _table(TANH_POL_BITS)  # TANH_POL[degree][interval], 7 x 32
GELU_ERF_POL = _table(GELU_ERF_POL_BITS)  # 6 x 25
TANH_IDX_BIAS = np.uint32(0x39800000)
TANH_IDX_MASK = np.uint32(0xFFC00000)
TANH_LINEAR_UBOUND = _f32(0x39DDB3D7)
TANH_SATURATION_LBOUND = _f32(0x41102CB3)
GELU_ERF_IDX_BIAS = np.int32(np.uint32(0xC21FFFFF).view(np.int32))
GELU_ERF_RBOUND = _f32(0x40B15CEE)
GELU_TANH_FITTING = _f32(0x3D372713)
GELU_TANH_SQRT_2_OVER_PI = _f32(0x3F4C422A)


def _lookup(m, row: np.ndarray, idx: np.ndarray):
    """row[idx] as values of the compute format (vpermt2ps: exact float32 table entries)."""
    return m.const(row[idx].astype(np.float64))


def _bits(v) -> np.ndarray:
    return np.asarray(v.a, dtype=np.float32).view(np.uint32)


def _xor_sign(m, v, x):
    """v with the sign bit of x xored in (vxorps with x & 0x80000000)."""
    return m.where(np.signbit(np.asarray(x.a)), -v, v)


def tanh_onednn_avx512(x, m):
    ax = m.abs(x)
    b = _bits(ax)
    idx = (((b - TANH_IDX_BIAS) & TANH_IDX_MASK) >> np.uint32(22)) & np.uint32(31)
    s = (b & TANH_IDX_MASK).view(np.float32).astype(np.float64)
    r = ax - m.const(s)  # exact: s is |x| with its low mantissa bits cleared
    p = _lookup(m, TANH_POL[6], idx)
    for d in (5, 4, 3, 2, 1, 0):
        p = m.fma(p, r, _lookup(m, TANH_POL[d], idx))
    a = np.asarray(ax.a)
    dst = m.where(TANH_SATURATION_LBOUND > a, p, 1.0)
    dst = m.where(TANH_LINEAR_UBOUND > a, ax, dst)
    out = _xor_sign(m, dst, x)
    return m.where(np.isnan(np.asarray(x.a)), x, out)


@candidate(
    "tanh.onednn",
    reference="tanh",
    formula="|x| < 0x39ddb3d7: x; |x| >= 0x41102cb3: sign(x); else sign(x) P_i(|x| - s), s = |x| with "
    "22 low mantissa bits cleared, P_i of degree 6 from oneDNN's 32-interval table, Horner by FMA",
    source="OpenVINO CPU plugin Tanh on x86-64 AVX-512 (oneDNN jit_uni_eltwise_injector "
    "tanh_compute_vector_fwd): bit-identical to openvino 2026.4 here (tests/test_catalog_onednn.py)",
    compute="fp32",
)
def tanh_onednn(x, m):
    return tanh_onednn_avx512(x, m)


@candidate(
    "gelu.onednn_erf",
    reference="gelu",
    formula="(x (1 + sign(x) P_i(|x|))) 0.5, P_i a degree-5 minimax fit of erf(|x|/sqrt 2) from "
    "oneDNN's 24-interval table (i from the bits of |x|, 23 above 5.5426), Horner by FMA",
    source="OpenVINO CPU plugin Gelu(approximation_mode=erf) on x86-64 AVX-512 (oneDNN "
    "jit_uni_eltwise_injector gelu_erf_minimax_approx_compute_vector_fwd): bit-identical to "
    "openvino 2026.4 here (tests/test_catalog_onednn.py)",
    compute="fp32",
)
def gelu_onednn_erf(x, m):
    ax = m.abs(x)
    b = _bits(ax).view(np.int32)
    idx = (b + GELU_ERF_IDX_BIAS) >> np.int32(21)  # int32 wrap-around add, arithmetic shift
    idx = np.minimum(np.maximum(idx, 1), 24)
    idx = np.where(GELU_ERF_RBOUND < np.asarray(ax.a), 23, idx)
    p = _lookup(m, GELU_ERF_POL[5], idx)
    for d in (4, 3, 2, 1, 0):
        p = m.fma(p, ax, _lookup(m, GELU_ERF_POL[d], idx))
    p = _xor_sign(m, p, x)
    return (x * (p + 1.0)) * 0.5


@candidate(
    "gelu.onednn_tanh",
    reference="gelu",
    formula="((tanh_onednn(((x^2 c + 1) x) sqrt(2/pi)) + 1) 0.5) x, x^2 c + 1 by FMA, c = 0.044715 "
    "(0x3d372713), sqrt(2/pi) = 0x3f4c422a",
    source="OpenVINO CPU plugin Gelu(approximation_mode=tanh) on x86-64 AVX-512 (oneDNN "
    "jit_uni_eltwise_injector gelu_tanh_compute_vector_fwd around tanh.onednn): bit-identical "
    "to openvino 2026.4 here (tests/test_catalog_onednn.py)",
    compute="fp32",
)
def gelu_onednn_tanh(x, m):
    s = m.fma(x * x, GELU_TANH_FITTING, 1.0)
    u = (s * x) * GELU_TANH_SQRT_2_OVER_PI
    t = tanh_onednn_avx512(u, m)
    return ((t + 1.0) * 0.5) * x
