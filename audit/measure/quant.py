"""Quantized integer formats (int8, uint8, int16 with a scale and a zero point) and the
audit of activations that read and write them.

A quantized format Q = (code range qmin..qmax, scale s, zero point z, rounding R) holds
the real values (q - z) s of its codes q.  A real y is quantized as frameworks do:

    Q(y) = clamp(R(y / s) + z, qmin, qmax)

with R half to even (PyTorch ``quantize_per_tensor``, ONNX ``QuantizeLinear``) or half
away from zero (TFLite and ExecuTorch, ``std::round``), applied to y / s before the zero
point is added.  The scale is stored as a float32, as TFLite, ONNX and PyTorch store it
(a decimal written is rounded to the nearest float32): every code's value (q - z) s is then
exact in float64, and so is every rounding boundary (k + 1/2) s, which is how ``quantize``
decides ties exactly.

The oracle code of input x is Q(f(x)) for the exact f(x): decided from the reference's
fast value where its error bound cannot move f(x) across a boundary, else by mpmath at
increasing precision (the oracle's ``exact_point``, with Q as the rounding).  Errors:

* code error |q - clamp(f(x) / s + z, qmin, qmax)|, the integer analogue of the ULP error:
  a correctly quantized code has code error <= 1/2 (where q equals the oracle code the
  float64 figure is capped at 1/2, as ULP errors are).  Where f(x) / s + z lies beyond the
  code range the clamped target is the limit: clamping is the format's cost, reported as
  the ``saturated`` finding, not the kernel's error;
* real error: the code error times s, |(q - z) s - clamp(f(x), (qmin - z) s, (qmax - z) s)|;
* the share of inputs whose code equals the oracle code.

Findings: ``pinned`` (a code at qmin or qmax where the oracle code is not) and
``monotonicity`` (the code moves against the reference's direction between consecutive
inputs of one monotone piece).  Every input code is swept: the audit is exhaustive.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import mpmath as mp
import numpy as np

from audit.errors import BadOptionError
from audit.io import json_number
from audit.measure.findings import runs
from audit.numbers.formats import element_format
from audit.numbers.quant import (  # noqa: F401  (the formats, for the audit's callers)
    RANGES,
    ROUNDINGS,
    QuantFormat,
    is_quant,
    parse_quant,
)
from audit.oracle import oracle
from audit.oracle.codes import exact_codes
from audit.targets.quantized import QuantCandidate, float_candidate  # noqa: F401

SCHEMA = "actaudit.quant/1"


class _Beyond:
    """What oracle.exact_point needs of a format, the rounding being the side of f against
    the two bounds of the code range, (qmin - z - 1/2) s and (qmax - z + 1/2) s (exact in
    float64): -1 below, 1 above, 0 inside."""

    def __init__(self, q: QuantFormat):
        self.p, self.smallest_normal = 24, math.inf
        self.lo = (q.qmin - q.zero - 0.5) * q.scale
        self.hi = (q.qmax - q.zero + 0.5) * q.scale

    def round_mpf(self, v) -> float:
        if mp.isnan(v):
            return math.nan
        return -1.0 if v < self.lo else (1.0 if v > self.hi else 0.0)


def _beyond_range(ref, x, exact, t_raw, q: QuantFormat, params) -> np.ndarray:
    """Inputs whose exact f(x) / s + z lies beyond the code range by more than half a code
    (the ``saturated`` finding): from the float64 value, and by mpmath (exact_point with
    _Beyond as the rounding) where it lies within 2^-30 relative of a bound (the float64
    value's error is at most the fast path's 2^-36)."""
    with np.errstate(all="ignore"):
        out = (t_raw < q.qmin - 0.5) | (t_raw > q.qmax + 0.5)
        b = _Beyond(q)
        near = (np.abs(exact - b.lo) <= np.abs(b.lo) * 2.0**-30 + 2.0**-1000) | (
            np.abs(exact - b.hi) <= np.abs(b.hi) * 2.0**-30 + 2.0**-1000
        )
    idx = np.flatnonzero(near & np.isfinite(exact))
    if len(idx) and ref.exact:  # f itself, compared with the exact bounds (not f / s + z)
        out[idx] = (exact[idx] < b.lo) | (exact[idx] > b.hi)
    elif len(idx):
        side = oracle.exact_points(ref, x[idx], b, params).rounded
        out[idx] = side != 0
    return out


# --------------------------------------------------------------------- results
@dataclass
class QuantResult:
    candidate: str
    reference: str
    dtype: str
    out_dtype: str
    compute: str
    params: dict
    count: int
    x: np.ndarray = field(repr=False)
    x_codes: np.ndarray = field(repr=False)
    got: np.ndarray = field(repr=False)
    want: np.ndarray = field(repr=False)
    exact: np.ndarray = field(repr=False)
    code_err: np.ndarray = field(repr=False)
    real_err: np.ndarray = field(repr=False)
    findings: list = field(default_factory=list)
    n_mpmath: int = 0
    seconds: float = 0.0
    in_hex: object = field(default=None, repr=False)
    identity: dict = field(default_factory=dict)  # an engine op's (audit/engines)

    @property
    def valid(self) -> np.ndarray:
        return ~np.isnan(self.got)

    @property
    def max_code_err(self) -> float:
        v = self.code_err[self.valid]
        return float(v.max()) if len(v) else math.nan

    @property
    def mean_code_err(self) -> float:
        v = self.code_err[self.valid]
        return math.fsum(v.tolist()) / len(v) if len(v) else math.nan

    @property
    def max_real_err(self) -> float:
        v = self.real_err[self.valid]
        return float(v.max()) if len(v) else math.nan

    @property
    def max_code_distance(self) -> int:
        d = np.abs(self.got - self.want)[self.valid]
        return int(d.max()) if len(d) else 0

    @property
    def correct_fraction(self) -> float:
        return float(np.count_nonzero(self.got == self.want)) / self.count

    @property
    def nan_count(self) -> int:
        return int(np.count_nonzero(~self.valid))

    @property
    def worst(self) -> dict | None:
        if not self.valid.any():
            return None
        e = np.where(self.valid, self.code_err, -1.0)
        i = int(np.argmax(e))
        return {
            "x": float(self.x[i]),
            "x_code": self.in_hex(self.x_codes[i]) if self.in_hex else int(self.x_codes[i]),
            "got": int(self.got[i]),
            "want": int(self.want[i]),
            "exact": float(self.exact[i]),
        }

    def to_dict(self) -> dict:
        return {
            "candidate": self.candidate,
            "reference": self.reference,
            "dtype": self.dtype,
            "out_dtype": self.out_dtype,
            "compute": self.compute,
            "params": self.params,
            "inputs": {"count": self.count, "exhaustive": True},
            "max_code_error": json_number(self.max_code_err),
            "mean_code_error": json_number(self.mean_code_err),
            "max_code_distance": self.max_code_distance,
            "max_real_error": json_number(self.max_real_err),
            "correct_code_fraction": json_number(self.correct_fraction),
            "nan_count": self.nan_count,
            "worst": self.worst,
            "oracle_mpmath_count": self.n_mpmath,
            "findings": self.findings,
            **({"identity": self.identity} if self.identity else {}),
        }


def audit_codes(
    ref,
    inputs,
    out: QuantFormat,
    cand: QuantCandidate,
    params: dict | None = None,
    dtype_name: str | None = None,
) -> QuantResult:
    """Every input code (or every finite value of a float input format) through the candidate,
    against the oracle codes."""
    t0 = time.perf_counter()
    params = ref.with_defaults(params)
    if isinstance(inputs, QuantFormat):
        x_codes = inputs.codes()
        x = inputs.values(x_codes)
        in_hex = None
    else:
        x = inputs.finite_values()
        x = x[~((x == 0) & np.signbit(x))]  # -0 and +0 quantize alike: +0 only
        x_codes = inputs.to_bits(x)
        w = (inputs.bits + 3) // 4
        in_hex = lambda b: f"0x{int(b):0{w}x}"  # noqa: E731
    want, exact, n_mp = exact_codes(ref, x, out, params)
    got = cand.codes(x_codes, x)
    if got.shape != x.shape:
        raise BadOptionError(f"{cand.id}: {got.shape} output codes for {x.shape} inputs")
    with np.errstate(all="ignore"):
        # the exact code, clamped to the code range (clamping is the format's, not the kernel's)
        t_raw = exact / out.scale + out.zero
        t = np.clip(t_raw, out.qmin, out.qmax)
        code_err = np.abs(got - t)
        code_err = np.where(got == want, np.minimum(code_err, 0.5), code_err)
        real_err = code_err * out.scale
    res = QuantResult(
        cand.id,
        ref.name,
        dtype_name or inputs.name,
        out.name,
        cand.compute,
        params,
        len(x),
        x,
        x_codes,
        got,
        want,
        exact,
        code_err,
        real_err,
        n_mpmath=n_mp,
        in_hex=in_hex,
    )
    res.findings = _findings(res, ref, out, _beyond_range(ref, x, exact, t_raw, out, params))
    res.identity = dict(getattr(cand, "identity", None) or {})  # (audit/gate/identity.py)
    res.seconds = time.perf_counter() - t0
    return res


def _finding(kind, x, mask, note) -> dict | None:
    n = int(np.count_nonzero(mask))
    if not n:
        return None
    first, _, total = runs(x, mask)
    return {
        "kind": kind,
        "count": n,
        "intervals": [[json_number(a), json_number(b)] for a, b in first],
        "intervals_total": total,
        "note": note,
    }


def _findings(r: QuantResult, ref, out: QuantFormat, clamped: np.ndarray) -> list[dict]:
    found = []
    lim = (r.got == out.qmin) | (r.got == out.qmax)
    found.append(
        _finding(
            "pinned",
            r.x,
            lim & (r.got != r.want),
            f"code pinned at a range limit ({out.qmin} or {out.qmax}) where the "
            "correctly quantized code is inside the range",
        )
    )
    found.append(
        _finding(
            "saturated",
            r.x,
            clamped,
            "f(x) / s + z is beyond the code range by more than 1/2: the "
            "correct code is the clamped limit (the format's cost; informational)",
        )
    )
    found.append(_finding("nan", r.x, ~r.valid, "no code: the kernel produced NaN"))
    back = np.zeros(len(r.x), bool)
    for a, b, direction in ref.pieces(getattr(r, "params", None)):
        idx = np.flatnonzero((r.x >= a) & (r.x <= b) & r.valid)
        if len(idx) > 1:
            step = np.diff(r.got[idx])
            bad = step < 0 if direction > 0 else step > 0
            back[idx[1:][bad]] = True
    found.append(
        _finding(
            "monotonicity",
            r.x,
            back,
            "the output code moves against the function's direction between consecutive input codes",
        )
    )
    return [f for f in found if f is not None]


def sweep(
    targets, dtype, out_dtype=None, compute="fp32", params: dict | None = None, reference: str | None = None
) -> list[QuantResult]:
    """Audit catalog candidates (as float kernels between quantized codes) and ``lut:FILE``
    tables: inputs every code of ``dtype`` (a quantized format, or a float format of at
    most 16 bits), outputs in the quantized ``out_dtype`` (default: ``dtype``).
    reference: the function a ``lut:FILE`` tabulates (default: the file's own record)."""
    from audit.targets.candidates import resolve

    inq = parse_quant(dtype) if is_quant(dtype) else element_format(dtype)
    if not isinstance(inq, QuantFormat) and not inq.enumerable:
        raise BadOptionError(f"quantized outputs need enumerable inputs (16 bits or fewer), not {inq.name}")
    if out_dtype is None:
        if not isinstance(inq, QuantFormat):
            raise BadOptionError("give --out-dtype: a quantized output format")
        outq = inq
    elif not is_quant(out_dtype):
        raise BadOptionError(
            f"--out-dtype {out_dtype}: quantized inputs need a quantized output "
            "format (int8:..., uint8:..., int16:...)"
        )
    else:
        outq = parse_quant(out_dtype)
    cf = element_format(compute or "fp32")
    names = [targets] if isinstance(targets, str) else list(targets or [])
    names = [
        n.strip() for t in names for n in (t.split(",") if not t.startswith("lut:") else [t]) if n.strip()
    ]
    if params and names and all(n.startswith("lut:") for n in names):
        # a table is audited at its reference's defaults (its record says which): a parameter
        # would be dropped without a word
        raise BadOptionError(f"no selected candidate has a parameter '{sorted(params)[0]}'")
    out = []
    from audit.targets import engines

    for n in names:
        if engines.is_engine(n):  # a quantized engine op (ort:QLinearSigmoid)
            qc, ref, rp = engines.quant_candidate(n, inq, outq, params)
            res = audit_codes(ref, inq, outq, qc, rp)
            res.identity = qc.identity
            out.append(res)
            continue
        if n.startswith("tflite16:"):
            from audit.targets import lut as lut_mod

            qc, ref = lut_mod.tflite16_candidate(n, inq, outq, params)
            out.append(audit_codes(ref, inq, outq, qc, params))
            continue
        if n.startswith("lut:"):
            from audit.targets import lut as lut_mod

            qc, ref = lut_mod.lut_candidate(n, inq, outq, params, reference)
            out.append(audit_codes(ref, inq, outq, qc, None))
            continue
        for c in resolve([n]):
            if c.arity != 1:
                raise BadOptionError(f"{c.id}: quantized audits are for functions of one input")
            p = c.resolve_params(params)
            out.append(audit_codes(c.ref, inq, outq, float_candidate(c, outq, cf, p), c.reference_params(p)))
    return out


def document(results: list[QuantResult], **meta) -> dict:
    from audit._version import __version__

    return {"schema": SCHEMA, "actaudit": __version__, **meta, "results": [r.to_dict() for r in results]}
