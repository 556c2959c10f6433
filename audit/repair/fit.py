"""Fit: synthesize a correctly rounded kernel for a reference in an enumerable format.

RLIBM's idea (Lim & Nagarakatte, "RLIBM", POPL 2021), applied to activations: a kernel
is correctly rounded for output format F when, for every input x, the value r it computes
in the compute format C lies in the **rounding interval** of x, the C values that round
to RN_F(f(x)).  The oracle gives RN_F(f(x)) exactly; the interval follows from F alone
(the midpoints to F's neighbours, included when the tie goes to RN_F(f(x)), i.e. when it
is even).  Fitting the intervals, not f, is a linear program.

The kernel (compute fp32; the same operation order in Python and C):

* ``x <= LO``: the low saturation constant; ``x >= HI``: the high constant or x itself
  (the thresholds of :func:`audit.measure.clip.saturation`); +-inf land there;
* ``|x| <= T``: ``x * A1 + BIAS`` (``x`` itself at +-0), A1 = f'(0) in fp32 and BIAS 0 or
  +-2^-149, the smallest fp32 subnormal, which breaks the ties that x * A1 meets in F's
  subnormals (GELU(x) = x/2 + x^2/sqrt(2 pi) + ... lies just above the tie x/2);
* otherwise a table of K pieces of width w (a power of two) over [A0, A0 + K w]:
  ``i = floor((clamp(x, LO, HI) - A0) * (1/w))``, ``t = x - CTR[i]`` and the polynomial
  ``(((c_d t + c_{d-1}) t + ...) t + c_1) t - NC0[i]`` (Horner; NC0 = -c_0, subtracted so
  that a piece through zero, c_0 = 0, keeps the sign of -0; no fused operation).

Each piece's coefficients come from ``scipy.optimize.linprog`` (HiGHS): maximize the
margin delta with |p(t_j) - mid_j| <= half_j (k_j - delta) over the piece's inputs (scaled
to [-1, 1]), round them to fp32, evaluate the kernel with exact fp32 operations
(:mod:`audit.targets.compute`), and for every input whose result does not round to RN_F(f(x))
halve its k_j and solve again.  Degrees 1..D are tried in turn, the first that makes
every piece pass wins; the fit fails with the pieces that no degree up to D fixed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from audit.errors import BadOptionError
from audit.measure import clip as clip_mod
from audit.numbers.formats import Format, get_format
from audit.oracle import oracle
from audit.oracle.references import get_reference
from audit.targets.candidates import Candidate
from audit.targets.compute import evaluate

FP32_TINY = 2.0**-149
F32 = get_format("fp32")
SEMANTICS_FLAGS = ("contract", "ftz", "daz")  # what fit verifies under; contract implies --fma
TIGHTEN_ROUNDS = 12


@dataclass
class Kernel:
    """A fitted kernel: everything the Python formula and the C function need."""

    reference: str
    dtype: str
    params: dict
    lo: float | None  # x <= lo -> lo_value
    lo_value: float | None
    hi: float | None  # x >= hi -> hi_value (None: identity)
    hi_value: float | None
    hi_identity: bool
    tiny: float  # |x| <= tiny -> x * a1 + bias (x at 0); -1: no tiny region
    a1: float
    c2: float  # tie-break term (x*x)*C2 of the tiny region (0: none)
    bias: float
    a0: float
    inv_w: float
    clamp_lo: float
    clamp_hi: float
    degree: int
    ctr: list  # K piece centres
    coef: list  # K rows: c_d, ..., c_1
    nc0: list  # K: -c_0
    fma: bool = False  # Horner steps (and the tiny form) as fused multiply-adds
    semantics: str = "ieee"  # the machine it was verified on (audit/targets/semantics.py)
    symmetry: str = "none"  # "odd" / "even": fitted on x >= 0, f(-x) = -f(x) / f(x) in F

    @property
    def pieces(self) -> int:
        return len(self.ctr)

    @property
    def name(self) -> str:
        flags = [f for f in self.semantics.split(",") if f not in ("ieee", "contract")]
        return "_".join([f"fit_{self.reference}_{self.dtype}", *(["fma"] if self.fma else []), *flags])

    def ops(self) -> dict:
        """Operations per element by kind (the formula below, counted by hand and checked
        by the cost model in the tests)."""
        if self.fma:  # xc - A0, x - CTR; * INV_W; Horner: d fma (the last one subtracts NC0)
            add, mul, fma = 2, 1, self.degree
        else:  # xc - A0, x - CTR, Horner, - NC0; * INV_W, Horner
            add, mul, fma = 1 + 1 + (self.degree - 1) + 1, 1 + self.degree, 0
        sel = 2 + (self.lo is not None) + (self.hi is not None)  # clamps, saturation
        sel += self.symmetry == "odd"  # the sign put back (|x| and -y are free)
        if self.tiny >= 0:
            sel += 1
            if self.fma and (self.c2 or self.bias):  # fma(x, A1, (x*x)*C2 or BIAS)
                fma += 1
                mul += 2 if self.c2 else 0
            else:
                mul += 1
                if self.c2:
                    mul, add = mul + 2, add + 1
                if self.bias:
                    add += 1
            if self.c2 or self.bias:
                sel += 1
        out = {"add": add, "mul": mul, "select": sel}
        if fma:
            out["fma"] = fma
        return dict(sorted(out.items()))


# ------------------------------------------------------------------ the formula
def _hex(v: float) -> str:
    return "float.fromhex('" + float(v).hex() + "')" if math.isfinite(v) else f"float('{v}')"


def python_source(k: Kernel) -> str:
    """The candidate module: data, formula and CANDIDATE (catalog style)."""
    coef = ",\n    ".join("[" + ", ".join(_hex(c) for c in row) + "]" for row in k.coef)
    lines = [
        f'"""{k.reference} in {k.dtype}, correctly rounded at every input: fitted by actaudit fit.',
        "",
        "Load it as any candidate: actaudit sweep " + k.name + ":CANDIDATE --dtype " + k.dtype,
        "(with this file's directory on PYTHONPATH or current).  C version: " + k.name + '.c."""',
        "",
        "import numpy as np",
        "",
        "from audit.targets.candidates import Candidate",
        "from audit.targets.compute import Val",
        "from audit.targets.semantics import parse as _semantics",
        "",
        f"PARAMS = {k.params!r}",
        f"FMA, SEMANTICS = {k.fma}, {k.semantics!r}  # fused Horner steps; the machine it was verified on",
        f"SYMMETRY = {k.symmetry!r}  # odd / even: fitted on x >= 0, f(-x) = -f(x) / f(x) in the format",
        f"LO, LO_VALUE = {_hex(k.lo) if k.lo is not None else None}, "
        f"{_hex(k.lo_value) if k.lo_value is not None else None}",
        f"HI, HI_VALUE, HI_IDENTITY = {_hex(k.hi) if k.hi is not None else None}, "
        f"{_hex(k.hi_value) if k.hi_value is not None else None}, {k.hi_identity}",
        f"TINY, A1, C2, BIAS = {_hex(k.tiny)}, {_hex(k.a1)}, {_hex(k.c2)}, {_hex(k.bias)}",
        f"A0, INV_W, CLAMP_LO, CLAMP_HI = {_hex(k.a0)}, {_hex(k.inv_w)}, {_hex(k.clamp_lo)}, "
        f"{_hex(k.clamp_hi)}",
        f"DEGREE, PIECES = {k.degree}, {k.pieces}",
        "CTR = np.array([" + ", ".join(_hex(c) for c in k.ctr) + "], dtype=np.float32)",
        "NC0 = np.array([" + ", ".join(_hex(c) for c in k.nc0) + "], dtype=np.float32)",
        "COEF = np.array([\n    " + coef + "], dtype=np.float32)  # per piece: c_d, ..., c_1",
        "",
        "",
        "def fn(x, m, **params):  # (params: the reference's, fixed at fit time)",
        "    if SYMMETRY != 'none':",
        "        s, x = x, abs(x)  # exact",
        "    xc = m.where(x < CLAMP_LO, CLAMP_LO, x)  # NaN stays NaN",
        "    xc = m.where(xc > CLAMP_HI, CLAMP_HI, xc)",
        "    fi = np.asarray(m.floor((xc - A0) * INV_W).a, dtype=np.float64)",
        "    i = np.where((fi >= 0) & (fi <= PIECES - 1), fi, np.where(fi > PIECES - 1, PIECES - 1, 0))",
        "    i = i.astype(np.int64)  # the table index (NaN: piece 0)",
        "    t = xc - Val(CTR[i], m)",
        "    q = Val(COEF[i, 0], m)",
        "    for j in range(1, DEGREE):",
        "        q = m.fma(q, t, Val(COEF[i, j], m)) if FMA else q * t + Val(COEF[i, j], m)",
        "    y = m.fma(q, t, Val(-NC0[i], m)) if FMA else q * t - Val(NC0[i], m)",
        "    if TINY >= 0:",
        "        if FMA and (C2 != 0 or BIAS != 0):  # one rounding: x*A1 + (x*x)*C2 or + BIAS",
        "            small = m.fma(x, A1, (x * x) * C2 if C2 != 0 else BIAS)",
        "        else:",
        "            small = x * A1",
        "            if C2 != 0:",
        "                small = small + (x * x) * C2  # breaks the ties of x * A1",
        "            if BIAS != 0:",
        "                small = small + BIAS",
        "        if C2 != 0 or BIAS != 0:",
        "            small = m.where(x.a == 0, x, small)  # +-0 keep their sign",
        "        y = m.where(abs(x) <= TINY, small, y)",
        "    if HI is not None:",
        "        y = m.where(x >= HI, x if HI_IDENTITY else HI_VALUE, y)",
        "    if LO is not None:",
        "        y = m.where(x <= LO, LO_VALUE, y)",
        "    if SYMMETRY == 'odd':",
        "        y = m.where(np.signbit(s.a), -y, y)  # -0 and -x: the sign back (exact)",
        "    return y",
        "",
        "",
        f'CANDIDATE = Candidate("fit.{k.name[4:]}", "{k.reference}",',
        f'                      "piecewise degree-{k.degree} polynomial, {k.pieces} pieces, '
        f'fp32 Horner{" with FMA" if k.fma else ""} (actaudit fit)",',
        '                      "actaudit fit (RLIBM-style rounding-interval LP)", fn, PARAMS, '
        'compute="fp32").with_semantics(_semantics(SEMANTICS))',
        "",
    ]
    return "\n".join(lines)


def load_source(src: str, name: str = "fitted") -> dict:
    """Execute a candidate module's source; its namespace."""
    ns: dict = {"__name__": name}
    exec(compile(src, f"<{name}>", "exec"), ns)  # noqa: S102 (our own generated text)
    return ns


def _c_float(v: float) -> str:
    if math.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    if v == 0:
        return "-0.0f" if math.copysign(1, v) < 0 else "0.0f"
    return float(v).hex() + "f"


def c_source(k: Kernel) -> str:
    """The C function with the formula's operation order: void NAME(const float *x,
    float *y, size_t n).  Compile without fused operations (-ffp-contract=off)."""
    rows = ",\n    ".join("{" + ", ".join(_c_float(c) for c in row) + "}" for row in k.coef)
    step = "        q = fmaf(q, t, c[{j}]);" if k.fma else "        q = q * t + c[{j}];"
    horner = "\n".join(step.format(j=j) for j in range(1, k.degree))
    how = (
        "every multiply-add is one fmaf (one rounding), so any -ffp-contract setting gives the same results"
        if k.fma
        else "compile with -ffp-contract=off (no FMA)"
    )
    flush = (
        ""
        if k.semantics in ("ieee", "contract")
        else f"\n   Verified under semantics {k.semantics}: run it with those flush modes (MXCSR FTZ/DAZ)."
    )
    lines = [
        f"/* {k.reference} in {k.dtype}, correctly rounded at every input (fitted by actaudit fit).",
        f"   fp32 arithmetic in this exact order; {how}.",
        f"   Round the float results to {k.dtype}, to nearest even.{flush} */",
        "#include <math.h>",
        "#include <stddef.h>",
        "",
        f"static const float CTR[{k.pieces}] = {{" + ", ".join(_c_float(c) for c in k.ctr) + "};",
        f"static const float NC0[{k.pieces}] = {{" + ", ".join(_c_float(c) for c in k.nc0) + "};",
        f"static const float COEF[{k.pieces}][{k.degree}] = {{\n    {rows}}};",
        "",
        f"void {k.name}(const float *x, float *y, size_t n) {{",
        "    for (size_t j = 0; j < n; j++) {",
        "        float v = x[j];"
        if k.symmetry == "none"
        else "        float v0 = x[j], v = fabsf(v0);  /* fitted on x >= 0 (" + k.symmetry + " function) */",
        f"        float xc = v < {_c_float(k.clamp_lo)} ? {_c_float(k.clamp_lo)} : v;  /* NaN stays NaN */",
        f"        xc = xc > {_c_float(k.clamp_hi)} ? {_c_float(k.clamp_hi)} : xc;",
        f"        float fi = (xc - ({_c_float(k.a0)})) * {_c_float(k.inv_w)};  /* >= 0 or NaN */",
        f"        int i = (fi >= 0.0f && fi < {k.pieces}.0f) ? (int)fi : (fi >= {k.pieces}.0f ? {k.pieces - 1} : 0);",
        "        /* (int) truncates: floor for fi >= 0, as the Python formula's floor */",
        "        float t = xc - CTR[i];",
        "        const float *c = COEF[i];",
        "        float q = c[0];",
        horner,
        "        float r = fmaf(q, t, -NC0[i]);" if k.fma else "        float r = q * t - NC0[i];",
    ]
    if k.tiny >= 0:
        small = f"v * {_c_float(k.a1)}"
        if k.fma and (k.c2 != 0 or k.bias != 0):
            small = f"fmaf(v, {_c_float(k.a1)}, " + (
                f"(v * v) * {_c_float(k.c2)})" if k.c2 != 0 else f"{_c_float(k.bias)})"
            )
        else:
            if k.c2 != 0:
                small = f"{small} + (v * v) * {_c_float(k.c2)}"
            if k.bias != 0:
                small = f"({small}) + {_c_float(k.bias)}"
        if k.c2 != 0 or k.bias != 0:
            small = f"(v == 0.0f ? v : {small})"
        lines.append(f"        if (fabsf(v) <= {_c_float(k.tiny)}) r = {small};")
    if k.hi is not None:
        lines.append(
            f"        if (v >= {_c_float(k.hi)}) r = {'v' if k.hi_identity else _c_float(k.hi_value)};"
        )
    if k.lo is not None:
        lines.append(f"        if (v <= {_c_float(k.lo)}) r = {_c_float(k.lo_value)};")
    lines += [
        "        y[j] = signbit(v0) ? -r : r;" if k.symmetry == "odd" else "        y[j] = r;",
        "    }",
        "}",
        "",
    ]
    return "\n".join(x for x in lines if x != "")


def gate_entry(k: Kernel, module_dir: str = ".") -> str:
    """A [[tool.actaudit.audit]] entry that holds the kernel to correct rounding."""
    return (
        f"[[tool.actaudit.audit]]  # needs {module_dir} on PYTHONPATH\n"
        f'name = "{k.name}"\n'
        f'targets = ["{k.name}:CANDIDATE"]\n'
        f'dtype = ["{k.dtype}"]\n'
        + (f'semantics = ["{k.semantics}"]\n' if k.semantics != "ieee" else "")
        + "tolerance = { max_ulp = 0.5, nan = false, inf = false }\n"
    )


# ------------------------------------------------------------------ fitting
def rounding_intervals(fmt: Format, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[L, H]: the fp32 values that round to y in fmt (to nearest, ties to even), for
    finite nonzero y of fmt."""
    o = fmt.ordinal(y).astype(np.int64)
    below = fmt.from_ordinal(o - 1).astype(np.float64)
    above = fmt.from_ordinal(np.minimum(o + 1, fmt.max_ordinal)).astype(np.float64)
    top = o >= fmt.max_ordinal
    lo = (y + below) / 2  # exact in float64: F has at most 16 bits
    hi = np.where(top, fmt.overflow_value if hasattr(fmt, "overflow_value") else y, (y + above) / 2)
    even = (fmt.to_bits(y).astype(np.int64) & 1) == 0
    lo32 = lo.astype(np.float32)
    hi32 = hi.astype(np.float32)
    lo32 = np.where(even, lo32, np.nextafter(lo32, np.float32(np.inf)))
    hi32 = np.where(even, hi32, np.nextafter(hi32, np.float32(-np.inf)))
    return lo32.astype(np.float64), hi32.astype(np.float64)


def _same(fmt: Format, r: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Bit-for-bit equality in fmt (so +0 and -0 differ), NaN equal to NaN."""
    a, b = fmt.round(np.asarray(r, dtype=np.float64)), np.asarray(y, dtype=np.float64)
    same = fmt.to_bits(a) == fmt.to_bits(b)
    return same | (np.isnan(a) & np.isnan(b))


def _symmetry(fmt: Format, x: np.ndarray, y: np.ndarray) -> str:
    """'odd' when RN_F(f(-x)) = -RN_F(f(x)) bit for bit at every finite x > 0 of F (so also
    f(-0) = -0 from f(+0) = +0, by the kernel's sign), 'even' when RN_F(f(-x)) = RN_F(f(x)),
    else 'none'.  Formats without -0 or without symmetric values: 'none'."""
    pos = np.flatnonzero(x > 0)
    if not len(pos):
        return "none"
    j = np.searchsorted(x, -x[pos])
    j = np.minimum(j, len(x) - 1)
    if not np.array_equal(x[j], -x[pos]) or not np.any(np.signbit(x[x == 0])):
        return "none"
    yp, yn = y[pos], y[j]
    if np.all(_same(fmt, -yp, yn)):
        return "odd"
    if np.all(_same(fmt, yp, yn)):
        return "even"
    return "none"


def _lp(u: np.ndarray, mid: np.ndarray, half: np.ndarray, degree: int, c0_zero: bool):
    """Coefficients a_0..a_d of p(u) maximizing the margin over |p(u) - mid| <= half (1 - d);
    (None, margin) when the best margin is negative."""
    from scipy.optimize import linprog

    n = degree + 1
    V = np.vander(u, n, increasing=True) / half[:, None]
    b = mid / half
    # p - mid + delta*1 <= 1 ;  -(p - mid) + delta <= 1   (rows scaled by half)
    A = np.vstack([np.hstack([V, np.ones((len(u), 1))]), np.hstack([-V, np.ones((len(u), 1))])])
    rhs = np.concatenate([1 + b, 1 - b])
    bounds = [(None, None)] * n + [(None, 1.0)]
    if c0_zero:
        bounds[0] = (0.0, 0.0)
    cvec = np.zeros(n + 1)
    cvec[-1] = -1.0
    res = linprog(cvec, A_ub=A, b_ub=rhs, bounds=bounds, method="highs")
    if res.status != 0:
        return None, -math.inf
    return res.x[:n], float(res.x[-1])


@dataclass
class FitReport:
    kernel: Kernel | None
    ok: bool
    message: str
    tried: list = field(default_factory=list)  # (pieces, degree, failing pieces, failing inputs)
    seconds: float = 0.0


def _taylor0(ref, params) -> tuple[float, float]:
    """f'(0) and f''(0)/2 (float64), from the oracle's double-double values near 0."""
    f64 = get_format("fp64")
    x1, x2 = 2.0**-60, 2.0**-20
    v = oracle.evaluate(ref, f64, np.array([x1, x2]), params)
    a1 = float(v.hi[0] + v.lo[0]) / x1
    a2 = float((v.hi[1] - a1 * x2) + v.lo[1]) / (x2 * x2)
    return a1, a2


def _tiny_region(x, y, fmt, a1, a2, f0_zero, fma=False):
    """(T, C2, bias): the widest |x| <= T where the tiny form x*A1 [+ (x*x)*C2] [+ bias]
    (x itself at +-0; with ``fma``, fma(x, A1, (x*x)*C2 or bias)) is correctly rounded;
    T = -1: none."""
    from audit.targets.compute import fused_multiply_add

    if not f0_zero:
        return -1.0, 0.0, 0.0
    order = np.argsort(np.abs(x), kind="stable")
    ax = np.abs(x[order])
    best = (-1.0, 0.0, 0.0)
    x32 = x.astype(np.float32)
    c2s = [0.0] + [float(np.float32(c)) for c in (a2, 1.0, 2.0, 4.0, -1.0, -2.0, -4.0)]
    forms = [(c, 0.0) for c in c2s] + [(0.0, FP32_TINY), (0.0, -FP32_TINY)]
    for c2, bias in forms:
        with np.errstate(all="ignore"):
            if fma and (c2 or bias):
                add = (x32 * x32) * np.float32(c2) if c2 else np.full_like(x32, bias)
                r = fused_multiply_add(F32, x32, np.full_like(x32, a1), add).astype(np.float32)
            else:
                r = x32 * np.float32(a1)
                if c2:
                    r = r + (x32 * x32) * np.float32(c2)
                if bias:
                    r = r + np.float32(bias)
            if c2 or bias:
                r = np.where(x32 == 0, x32, r)
        ok = _same(fmt, r.astype(np.float64), y)[order]
        bad = np.flatnonzero(~ok)
        stop = ax[bad[0]] if len(bad) else math.inf
        good = ax[ax < stop]
        if len(good) and float(good[-1]) > best[0]:
            best = (float(good[-1]), c2, bias)
    return best


def _fit_semantics(semantics):
    """(Semantics or None, canonical text) of the machine a fit is verified on: only the
    flags of the operations (contract, ftz, daz); the rest (conversions, saturation,
    primitives) is refused: the fit targets round-to-nearest outputs and uses no primitive."""
    from audit.targets import semantics as semantics_mod

    if semantics is None:
        return None, "ieee"
    sem = semantics_mod.parse(semantics) if isinstance(semantics, str) else semantics
    if sem.is_default:
        return None, "ieee"
    flags = [f for f in sem.canonical().split(",") if f]
    other = [f for f in flags if f not in SEMANTICS_FLAGS]
    if other:
        raise BadOptionError(
            f"fit verifies kernels under the operation flags "
            f"{', '.join(SEMANTICS_FLAGS)} only; not {', '.join(other)}"
        )
    return sem, sem.canonical()


def fit(
    reference: str,
    dtype: str = "bf16",
    compute: str = "fp32",
    *,
    max_degree: int = 6,
    pieces: int | None = None,
    params: dict | None = None,
    time_limit: float = 300.0,
    fma: bool = False,
    semantics=None,
    symmetry: bool = True,
    progress=None,
) -> FitReport:
    """Fit a correctly rounded kernel (see the module docstring); ``pieces``: the number
    of table pieces (default: try 16, 32, 64, 128, 256 and keep the first that passes at
    the smallest degree).  ``fma``: Horner steps as fused multiply-adds (one rounding each;
    fmaf in C).  ``semantics`` (text or Semantics; flags contract, ftz, daz): the machine
    the kernel is verified on; ``contract`` implies ``fma`` (a contracting compiler would
    fuse the Horner steps anyway, so the kernel spells them out).  ``symmetry``: where
    RN_F(f(-x)) is -RN_F(f(x)) (odd) or RN_F(f(x)) (even) bit for bit at every finite input,
    fit x >= 0 only and put the sign back (half the table)."""
    t0 = time.perf_counter()
    sem, sem_text = _fit_semantics(semantics)
    fma = bool(fma or (sem is not None and sem.contract))
    ref = get_reference(reference)
    if ref.arity != 1:
        raise BadOptionError(f"fit synthesizes functions of one input; {reference} takes two")
    fmt = get_format(dtype)
    if not fmt.enumerable:
        raise BadOptionError(
            f"fit needs every value of the output format; {fmt.name} has too many (fp8, fp16, bf16)"
        )
    if compute != "fp32":
        raise BadOptionError("fit emits fp32 kernels: --compute fp32")
    if not 1 <= max_degree <= 12:
        raise BadOptionError(f"--max-degree must be in [1, 12], got {max_degree}")
    if pieces is not None and not 1 <= pieces <= 4096:
        raise BadOptionError(f"--pieces must be in [1, 4096], got {pieces}")
    for name, v in (params or {}).items():
        if name not in ref.params:
            raise BadOptionError(
                f"{reference} has no parameter '{name}' (parameters: {', '.join(ref.params) or 'none'})"
            )
        if isinstance(v, (list, tuple)):
            raise BadOptionError(f"fit takes one value per parameter ('{name}')")
    rp = ref.with_defaults(dict(params or {}))
    x = fmt.finite_values()
    y = oracle.evaluate(ref, fmt, x, rp).rounded
    sat = clip_mod.saturation(ref, fmt, rp)
    sym = _symmetry(fmt, x, y) if symmetry else "none"
    if sym != "none":
        sat = {"low": None, "high": sat["high"]}  # x < 0 maps to |x|
    lo = hi = lo_v = hi_v = None
    hi_id = False
    if sat["low"] is not None:
        lo, lo_v = sat["low"]["x"], float(sat["low"]["value"])
    if sat["high"] is not None:
        hi = sat["high"]["x"]
        hi_id = sat["high"]["value"] == "identity"
        hi_v = None if hi_id else float(sat["high"]["value"])
    f0 = float(oracle.evaluate(ref, fmt, np.array([0.0]), rp).rounded[0])
    a1e, a2 = _taylor0(ref, rp) if f0 == 0 else (0.0, 0.0)
    a1 = float(np.float32(a1e))
    half = x >= 0 if sym != "none" else np.ones(len(x), bool)
    tiny, c2, bias = _tiny_region(x[half], y[half], fmt, a1, a2, f0 == 0, fma)
    core = half.copy()
    if lo is not None:
        core &= x > lo
    if hi is not None:
        core &= x < hi
    core &= np.abs(x) > tiny
    xs = x[core]
    if not len(xs):
        raise BadOptionError(f"{reference} in {fmt.name}: nothing to fit between the saturation thresholds")
    c_lo, c_hi = float(xs.min()), float(xs.max())
    if max(abs(c_lo), abs(c_hi)) > 2.0**24:
        raise BadOptionError(
            f"{reference} in {fmt.name} does not saturate (to a constant, or to x "
            f"above) within |x| <= 2^24: the core [{c_lo:g}, {c_hi:g}] is too wide "
            "for a table of pieces"
        )
    setup = _TableSetup(
        reference=reference,
        fmt=fmt,
        rp=rp,
        x=x,
        y=y,
        core=core,
        lo=lo,
        lo_v=lo_v,
        hi=hi,
        hi_v=hi_v,
        hi_id=hi_id,
        tiny=tiny,
        a1=a1,
        c2=c2,
        bias=bias,
        c_lo=c_lo,
        c_hi=c_hi,
        f0_zero=f0 == 0,
        progress=progress,
        fma=fma,
        sem=sem,
        sem_text=sem_text,
        sym=sym,
    )
    tried = []
    plist = [pieces] if pieces else [16, 32, 64, 128, 256, 512]
    for degree in range(1, max_degree + 1):
        for K in plist:
            if time.perf_counter() - t0 > time_limit:
                return FitReport(
                    None, False, f"time limit of {time_limit:g} s reached", tried, time.perf_counter() - t0
                )
            with np.errstate(all="ignore"):
                k, bad_pieces, bad_inputs = _fit_table(setup, degree, K)
            tried.append(
                {
                    "pieces": k.pieces,
                    "degree": degree,
                    "failing_pieces": bad_pieces,
                    "failing_inputs": bad_inputs,
                }
            )
            if bad_inputs == 0:
                return FitReport(
                    k,
                    True,
                    f"correctly rounded at all {len(x)} finite inputs (degree {degree}, {k.pieces} pieces)",
                    tried,
                    time.perf_counter() - t0,
                )
    last = tried[-1]
    return FitReport(
        None,
        False,
        f"no fit up to degree {max_degree} with "
        f"{', '.join(str(p) for p in plist)} pieces; the best left "
        f"{min(t['failing_inputs'] for t in tried)} inputs wrong "
        f"(degree {last['degree']}, {last['pieces']} pieces: "
        f"{last['failing_pieces']} pieces failing)",
        tried,
        time.perf_counter() - t0,
    )


@dataclass
class _TableSetup:
    """What every table that :func:`fit` tries (one degree, one number of pieces) shares: the
    targets, the core inputs, the saturation, the tiny region, the core's range."""

    reference: str
    fmt: Format
    rp: dict  # the reference's parameters
    x: np.ndarray  # every finite input of fmt
    y: np.ndarray  # RN_fmt(f(x))
    core: np.ndarray  # the inputs the table covers
    lo: float | None
    lo_v: float | None
    hi: float | None
    hi_v: float | None
    hi_id: bool
    tiny: float
    a1: float
    c2: float
    bias: float
    c_lo: float  # the core's smallest and largest input
    c_hi: float
    f0_zero: bool  # f(0) = 0: a piece through zero has c_0 = 0
    progress: Callable | None
    fma: bool
    sem: object  # Semantics | None: the machine the kernel is verified on
    sem_text: str
    sym: str  # "none", "odd", "even"


def _fit_table(setup: _TableSetup, degree: int, K: int):
    """The table of about K pieces of degree ``degree``: (kernel, failing pieces, failing inputs)."""
    span = max(setup.c_hi - min(setup.c_lo, 0.0), setup.c_hi - setup.c_lo, 2.0**-20)
    w = 2.0 ** math.ceil(math.log2(max(setup.c_hi - setup.c_lo, 2.0**-20) / K))
    a0 = math.floor(setup.c_lo / w) * w
    n = int(math.floor((setup.c_hi - a0) / w)) + 1
    del span
    ctr = []
    for i in range(n):
        left, right = a0 + i * w, a0 + (i + 1) * w
        ctr.append(0.0 if (left == 0 or right == 0 or left < 0 < right) else left + w / 2)
    k = Kernel(
        setup.reference,
        setup.fmt.name,
        dict(setup.rp),
        setup.lo,
        setup.lo_v,
        setup.hi,
        setup.hi_v,
        setup.hi_id,
        setup.tiny,
        setup.a1,
        setup.c2,
        setup.bias,
        float(np.float32(a0)),
        float(np.float32(1 / w)),
        float(np.float32(setup.c_lo)),
        float(np.float32(setup.c_hi)),
        degree,
        ctr,
        [[0.0] * degree for _ in range(n)],
        [0.0] * n,
        setup.fma,
        setup.sem_text,
        setup.sym,
    )
    # the piece of each core input, and t, as the kernel computes them
    ns = load_source(python_source(k))
    f32 = get_format("fp32")
    xi = setup.x[setup.core]
    yi = setup.y[setup.core]
    x32 = xi.astype(np.float32)
    with np.errstate(all="ignore"):
        xc = np.minimum(np.maximum(x32, np.float32(setup.c_lo)), np.float32(setup.c_hi))
        idx = np.clip(np.floor((xc - np.float32(a0)) * np.float32(1 / w)).astype(np.int64), 0, n - 1)
        t = (xc - np.asarray(ctr, dtype=np.float32)[idx]).astype(np.float64)
    L, H = rounding_intervals(setup.fmt, yi)
    # the last operation rounds to fp32: a real value within (just under) half an fp32 ulp
    # outside [L, H] still lands in it; the verification below has the last word
    L = L - 0.49 * np.spacing(np.abs(L).astype(np.float32)).astype(np.float64)
    H = H + 0.49 * np.spacing(np.abs(H).astype(np.float32)).astype(np.float64)
    mid, half = (L + H) / 2, (H - L) / 2
    weight = np.ones(len(xi))
    bad_pieces = set(range(n))
    for _round in range(TIGHTEN_ROUNDS):
        infeasible = set()
        for i in sorted(bad_pieces):
            sel = idx == i
            if not sel.any():
                continue
            zero_piece = ctr[i] == 0.0 and setup.f0_zero
            s = max(float(np.max(np.abs(t[sel]))), 2.0**-140)
            s = 2.0 ** math.ceil(math.log2(s))
            sig = max(float(np.max(np.abs(mid[sel]))), 2.0**-149)
            sig = 2.0 ** math.ceil(math.log2(sig))
            a, margin = _lp(t[sel] / s, mid[sel] / sig, half[sel] * weight[sel] / sig, degree, zero_piece)
            if a is None or margin < 0:
                infeasible.add(i)  # this degree cannot hold the piece: no tightening helps
                continue
            c = [a[j] * sig / s**j for j in range(degree + 1)]
            if not all(math.isfinite(v) and abs(v) < 3e38 for v in c):
                infeasible.add(i)  # coefficients beyond fp32
                continue
            k.coef[i] = [float(np.float32(c[j])) for j in range(degree, 0, -1)]
            c0 = float(np.float32(c[0]))
            k.nc0[i] = 0.0 - c0 if c0 != 0 else 0.0
        ns = load_source(python_source(k))
        r = evaluate(ns["fn"], xi, f32, f32, {}, semantics=setup.sem)
        ok = _same(setup.fmt, r, yi)
        if setup.progress:
            setup.progress(f"degree {degree}, {n} pieces, round {_round + 1}", int(ok.sum()), len(ok))
        bad_pieces = set(np.unique(idx[~ok]).tolist())
        if not bad_pieces or infeasible:
            break
        weight[~ok] *= 0.5
    # the whole format through the kernel (saturation, tiny region, specials included)
    full = evaluate(ns["fn"], setup.x, setup.fmt, f32, {}, semantics=setup.sem)
    wrong = int(np.sum(~_same(setup.fmt, full, setup.y)))
    return k, len(bad_pieces), wrong


def candidate(k: Kernel) -> Candidate:
    """The fitted kernel as a candidate (from its own module source)."""
    return load_source(python_source(k), k.name)["CANDIDATE"]


def check_out_dir(out_dir):
    """The directory ``fit -o`` writes into, checked before any fitting
    (audit.io.check_out_dir)."""
    from audit.io import check_out_dir as check

    return check(out_dir, "fit writes NAME.py, NAME.c and NAME.toml into one")


def write(k: Kernel, out_dir) -> dict:
    """Write NAME.py (the candidate module), NAME.c (the C function) and NAME.toml (the
    gate entry) into out_dir as one set (audit.io.write_files: all three are made in a
    temporary directory there, then moved in with SIGINT and SIGTERM held: an interrupted
    fit leaves either all three or none); their paths."""
    from audit.io import write_files

    d = check_out_dir(out_dir)
    names = {"python": f"{k.name}.py", "c": f"{k.name}.c", "gate": f"{k.name}.toml"}
    files = [
        (names["python"], python_source(k)),
        (names["c"], c_source(k)),
        (names["gate"], gate_entry(k, str(d))),
    ]
    write_files(d, files)
    return {key: str(d / n) for key, n in names.items()}


def to_dict(rep: FitReport) -> dict:
    k = rep.kernel
    out = {
        "schema": "actaudit.fit/1",
        "ok": rep.ok,
        "message": rep.message,
        "seconds": round(rep.seconds, 3),
        "tried": rep.tried,
    }
    if k is not None:
        from audit.io import json_number as jn

        out["kernel"] = {
            "name": k.name,
            "reference": k.reference,
            "dtype": k.dtype,
            "params": k.params,
            "compute": "fp32",
            "degree": k.degree,
            "fma": k.fma,
            "semantics": k.semantics,
            "symmetry": k.symmetry,
            "pieces": k.pieces,
            "piece_width": 1 / k.inv_w,
            "ops": k.ops(),
            "low": None if k.lo is None else {"x": jn(k.lo), "value": jn(k.lo_value)},
            "high": None
            if k.hi is None
            else {"x": jn(k.hi), "value": "identity" if k.hi_identity else jn(k.hi_value)},
            "tiny": None if k.tiny < 0 else {"x": k.tiny, "a1": k.a1, "c2": k.c2, "bias": k.bias},
        }
    return out


def fit_and_verify(reference: str, dtype: str, compute: str, out_dir, progress, **options):
    """`actaudit fit` (the table shape): :func:`fit`, and for the kernel found its sweep over
    every input, then its files in OUT_DIR (verified first, then written as one set).
    PROGRESS is a sweep's progress (``start(label, total)``, ``progress(n)``); OPTIONS go
    to :func:`fit`.  Returns the report, the sweep's results, the paths written and the
    JSON document."""
    from audit.measure.sweep import document, run_candidate
    from audit.numbers.inputs import domain
    from audit.repair import cost as cost_mod
    from audit.signals import ready

    state = {}

    def step(label, done, total):
        if state.get("label") != label:
            progress.start(f"fit {reference} {dtype}: {label}", total)
            state["label"] = label
        progress(done)

    rep = fit(reference, dtype, compute, progress=step, **options)
    results: list = []
    paths: dict = {}
    if rep.kernel is not None:  # verified first, then written as one set
        ready("verify")
        cand = candidate(rep.kernel)
        st = get_format(dtype)
        results = [run_candidate(cand, st, get_format(compute), domain(st), progress=progress)]
        paths = write(rep.kernel, out_dir)
    doc = to_dict(rep)
    if rep.kernel is not None and rep.ok and _verified(results) and not options.get("semantics"):
        _remember(rep.kernel, options.get("params"), paths)
    if rep.kernel is not None:
        doc["files"] = paths
        doc["ops_traced"] = cost_mod.counts(cand, get_format(compute))
        doc["audit"] = document(results)["results"]
    return rep, results, paths, doc


def _verified(results) -> bool:
    """The kernel's sweep found it correctly rounded at every input, with no NaN."""
    return bool(results) and results[0].correctly_rounded_fraction == 1.0 and results[0].nan_count == 0


def _remember(k: Kernel, params: dict | None, paths: dict) -> None:
    """Record the verified kernel in the fit cache (its operations, its C version's measured
    time per element on this machine) for `suggest` to quote."""
    from pathlib import Path

    from audit.repair import fit_cache
    from audit.repair.suggest import time_c_file

    c = next((Path(p) for p in paths.values() if str(p).endswith(".c")), None)
    ns = None if c is None else time_c_file(c, k.name, get_format(k.dtype))
    fit_cache.record(k.reference, k.dtype, params, k.ops(), None if ns is None else float(ns))
