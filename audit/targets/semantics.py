"""Semantics: the machine a kernel runs on, as composable flags.

Today's evaluation paths model an ideal IEEE machine (every operation correctly rounded,
subnormals kept, infinities and NaN propagated, primitives correctly rounded, results
converted to the storage format by round-to-nearest-even).  A :class:`Semantics` value
changes that, flag by flag; :mod:`audit.targets.compute` applies it.  ``ieee`` (no flag) is the
default and takes exactly today's code path.

A semantics is written as comma-separated flags, e.g. ``ftz,daz,contract`` or
``saturate,round=rtz`` or ``exp=exp.u20,div=rcp``, or a named profile (see PROFILES).
Several semantics are compared side by side by giving several (``--semantics ieee
--semantics saturate``; in Python a list).

Flags (the README's "Semantics" section is the reference):

* ``ftz``: a subnormal result of an operation of the compute format (after rounding, as
  x86 with MXCSR.FTZ: tininess after rounding) becomes a zero of its sign.  ``daz``: a
  subnormal operand of an operation is read as a zero of its sign.  ``ftz_in`` /
  ``daz_in``: the same for the conversion of the inputs (storage -> compute),
  ``ftz_out`` / ``daz_out``: for the conversion of the result (compute -> storage).
* ``contract``: a product whose only use is one addition or subtraction is fused with it
  into one FMA (``a*b + c``, ``c + a*b``, ``a*b - c``, ``c - a*b``, ``-(a*b) + c``); where
  both operands of the addition are such products, the one computed first is fused.
* ``saturate``: an infinite result of an operation, or of the conversion to the storage
  format, becomes the largest finite value of its sign and a NaN result becomes +0 (the
  CANN saturation mode); ``saturate_ops`` / ``saturate_out`` limit it to the operations or
  to the conversion; ``sat_nan=keep`` keeps NaN (the rule of the TensorFlow adapter's
  wording, which only speaks of overflow).
* ``round=rne|rtz|rna|rtp|rtn|stochastic``: the rounding of the conversion compute ->
  storage (``seed=S``, ``draws=N`` for stochastic); ``round_in=rne|rtz|rna|rtp|rtn``: of the
  conversion storage -> compute (where the compute format is the narrower).
* ``PRIM=IMPL`` for PRIM in exp, expm1, log, log1p, tanh, erf, erfc, sqrt, rcp and div:
  ``cr`` (the default: numpy/scipy's float64 value rounded once, correctly rounded but
  within about 2^-52 of a rounding boundary), a catalog candidate of that reference
  (``exp=exp.u20``), ``bound:K`` (an envelope: the primitive's correctly rounded value
  moved K units in the last place down and up), ``table:FILE`` (the outputs a device gave at
  every value of a compute format of 16 bits or fewer, in a dump format ``golden`` reads),
  and ``div=rcp`` (a / b as a * rcp(b)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from audit.errors import BadOptionError
from audit.numbers.formats import Format

ROUNDINGS = ("rne", "rtz", "rna", "rtp", "rtn", "stochastic")
_MODE_TEXT = {
    "rtz": "toward zero (truncation)",
    "rna": "to nearest, ties away from zero",
    "rtp": "toward +inf",
    "rtn": "toward -inf",
}
PRIMITIVES = (
    "exp",
    "exp2",
    "expm1",
    "log",
    "log1p",
    "tanh",
    "erf",
    "erfc",
    "sigmoid",
    "sqrt",
    "rsqrt",
    "rcp",
    "div",
)
FLAGS = ("ftz", "daz", "ftz_in", "daz_in", "ftz_out", "daz_out", "contract")
MAX_BOUND = 1 << 20
MAX_DRAWS = 64

# name -> (flags, description with its sources; the README lists them in full)
PROFILES = {
    "ieee": (
        "",
        "IEEE 754: every operation and conversion correctly rounded to nearest even, "
        "subnormals kept, inf and NaN propagated (the default)",
    ),
    "ascend_sat": (
        "saturate",
        "Ascend saturation mode (aclrtFloatOverflowMode "
        "ACL_RT_OVERFLOW_MODE_SATURATION: an inf result becomes the largest "
        "value, a NaN result 0; the only mode of Atlas training products)",
    ),
    "cuda_fast": (
        "ftz,daz,contract,div=rcp,rcp=bound:1,exp=bound:106,tanh=bound:8192",
        "nvcc --use_fast_math in fp32 compute: FTZ/DAZ (-ftz=true), FMA contraction "
        "(-fmad=true), division through an approximate reciprocal (-prec-div=false), "
        "__expf as an envelope of 106 ulp (the documented 2 + floor(|1.173 x|) ulp at its "
        "largest, |x| = 88.7) and tanh.approx.f32 as one of 8192 ulp (relative error "
        "2^-10.987); sqrt is not modelled (bounds are in fp32 ulp)",
    ),
    "tf32": (
        "round_in=rna",
        "fp32 values converted to TF32 (p = 11) with round to nearest, ties "
        "away from zero, as PTX cvt.rna.tf32.f32 does (use with --dtype fp32 "
        "--compute tf32); operations are then rounded to TF32, an upper "
        "bound on the rounding of tensor cores, which multiply TF32 inputs "
        "exactly and accumulate in fp32",
    ),
    "bf16_trunc": (
        "round=rtz",
        "conversion to the storage format by truncation (round toward "
        "zero), as hardware that converts fp32 to bf16 by dropping bits",
    ),
}


@dataclass(frozen=True)
class Semantics:
    ftz: bool = False
    daz: bool = False
    ftz_in: bool = False
    daz_in: bool = False
    ftz_out: bool = False
    daz_out: bool = False
    contract: bool = False
    saturate_ops: bool = False
    saturate_out: bool = False
    sat_nan: str = "zero"  # saturation of NaN: "zero" (CANN) or "keep"
    rounding: str = "rne"  # conversion compute -> storage
    rounding_in: str = "rne"  # conversion storage -> compute (rne, rtz, rna, rtp, rtn)
    seed: int = 0  # stochastic rounding
    draws: int = 8
    draw: int = 0  # which draw this evaluation is (set by the sweep)
    prims: tuple = ()  # ((primitive, implementation), ...), sorted
    profile: str = ""  # the profile's name, when given by name

    # ---------------------------------------------------------------- facts
    @property
    def is_default(self) -> bool:
        return self.canonical() == ""

    @property
    def envelope(self) -> bool:
        """Whether a primitive is given as bound:K (the results are an envelope)."""
        return any(impl.startswith("bound:") for _, impl in self.prims)

    @property
    def stochastic(self) -> bool:
        return self.rounding == "stochastic"

    @property
    def op_flags(self) -> list[str]:
        """The flags that act on a formula's operations (not on the conversions)."""
        out = [f for f in ("ftz", "daz", "contract", "saturate_ops") if getattr(self, f)]
        return out + [f"{k}={v}" for k, v in self.prims]

    def prim(self, name: str) -> str:
        for k, v in self.prims:
            if k == name:
                return v
        return "cr"

    def bound(self, name: str) -> int:
        impl = self.prim(name)
        return int(impl.split(":", 1)[1]) if impl.startswith("bound:") else 0

    def canonical(self) -> str:
        """The flags, in a fixed order: equal for equal semantics."""
        out = [f for f in FLAGS if getattr(self, f)]
        if self.saturate_ops and self.saturate_out:
            out.append("saturate")
        elif self.saturate_ops:
            out.append("saturate_ops")
        elif self.saturate_out:
            out.append("saturate_out")
        if (self.saturate_ops or self.saturate_out) and self.sat_nan != "zero":
            out.append(f"sat_nan={self.sat_nan}")
        if self.rounding != "rne":
            out.append(f"round={self.rounding}")
        if self.rounding_in != "rne":
            out.append(f"round_in={self.rounding_in}")
        if self.stochastic:
            out += [f"seed={self.seed}", f"draws={self.draws}"]
        out += [f"{k}={v}" for k, v in self.prims]
        return ",".join(out)

    @property
    def name(self) -> str:
        """What tables and JSON show: the profile's name, else the flags ('ieee' for none)."""
        return self.profile or self.canonical() or "ieee"

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "flags": self.canonical() or "ieee",
            "envelope": self.envelope,
            "stochastic": self.stochastic,
        }


IEEE = Semantics()


def _int(tok: str, text: str, lo: int, hi: int) -> int:
    try:
        v = int(text)
    except ValueError:
        raise BadOptionError(f"semantics flag '{tok}': '{text}' is not an integer") from None
    if not lo <= v <= hi:
        raise BadOptionError(f"semantics flag '{tok}': {v} is not in [{lo}, {hi}]")
    return v


def _prim_impl(name: str, impl: str, tok: str) -> str:
    if impl == "cr":
        return impl
    if impl.startswith("bound:"):
        k = _int(tok, impl[6:], 0, MAX_BOUND)
        return f"bound:{k}" if k else "cr"  # bound:0 is the correctly rounded primitive
    if impl == "rcp":
        if name != "div":
            raise BadOptionError(f"semantics flag '{tok}': 'rcp' applies to div (div=rcp)")
        return impl
    if impl.startswith("table:"):
        if name in ("div",):
            raise BadOptionError(f"semantics flag '{tok}': div takes cr, bound:K or rcp")
        if not impl[6:]:
            raise BadOptionError(f"semantics flag '{tok}': table:FILE needs a file")
        return impl
    if name in ("div", "rcp") and "." not in impl:
        raise BadOptionError(
            f"semantics flag '{tok}': {name} takes cr, bound:K" + (" or rcp" if name == "div" else "")
        )
    from audit.targets.registry import catalog

    cat = catalog()
    if impl not in cat:
        raise BadOptionError(
            f"semantics flag '{tok}': unknown candidate '{impl}' (give cr, "
            "bound:K or a catalog candidate such as exp=exp.u20)"
        )
    c = cat[impl]
    if c.reference != name or c.arity != 1:
        raise BadOptionError(f"semantics flag '{tok}': {impl} approximates {c.reference}, not {name}")
    return impl


def parse(text) -> Semantics:
    """One semantics from its flags ('ftz,daz', 'saturate,round=rtz', a profile name)."""
    if isinstance(text, Semantics):
        return text
    if text is None:
        return IEEE
    raw = [t.strip() for t in str(text).split(",") if t.strip()]
    # flag names and values are case-insensitive; a table's file name is kept as written
    toks = [t if t.split("=", 1)[-1].lower().startswith("table:") and "=" in t else t.lower() for t in raw]
    if not toks:
        raise BadOptionError(f"no semantics flag in '{text}'")
    if len(toks) == 1 and toks[0] in PROFILES:
        sem = parse(PROFILES[toks[0]][0]) if PROFILES[toks[0]][0] else IEEE
        return replace(sem, profile="" if toks[0] == "ieee" else toks[0])
    kw: dict = {}
    prims: dict = {}
    for tok in toks:
        if tok in PROFILES:
            raise BadOptionError(
                f"'{tok}' is a profile and takes no other flag in '{text}'; to compare "
                f"semantics side by side give each one (--semantics ieee --semantics saturate)"
            )
        if tok in FLAGS:
            kw[tok] = True
        elif tok == "saturate":
            kw["saturate_ops"] = kw["saturate_out"] = True
        elif tok in ("saturate_ops", "saturate_out"):
            kw[tok] = True
        elif tok in ROUNDINGS:
            kw["rounding"] = tok
        elif "=" in tok:
            k, v = (s.strip() for s in tok.split("=", 1))
            k = k.lower()
            if v.lower().startswith("table:"):
                v = "table:" + v[6:]
            if k == "round":
                if v not in ROUNDINGS:
                    raise BadOptionError(
                        f"semantics flag '{tok}': rounding must be one of {', '.join(ROUNDINGS)}"
                    )
                kw["rounding"] = v
            elif k == "round_in":
                if v not in ROUNDINGS or v == "stochastic":
                    raise BadOptionError(
                        f"semantics flag '{tok}': round_in must be one of "
                        f"{', '.join(r for r in ROUNDINGS if r != 'stochastic')}"
                    )
                kw["rounding_in"] = v
            elif k == "sat_nan":
                if v not in ("zero", "keep"):
                    raise BadOptionError(f"semantics flag '{tok}': sat_nan is zero or keep")
                kw["sat_nan"] = v
            elif k == "seed":
                kw["seed"] = _int(tok, v, 0, 2**63 - 1)
            elif k == "draws":
                kw["draws"] = _int(tok, v, 1, MAX_DRAWS)
            elif k in PRIMITIVES:
                prims[k] = _prim_impl(k, v, tok)
            else:
                raise BadOptionError(f"unknown semantics flag '{tok}' (primitives: {', '.join(PRIMITIVES)})")
        else:
            import difflib

            known = list(FLAGS) + ["saturate", "saturate_ops", "saturate_out", *ROUNDINGS, *PROFILES]
            close = difflib.get_close_matches(tok, known, n=2, cutoff=0.6)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise BadOptionError(
                f"unknown semantics flag '{tok}'{hint} (flags: {', '.join(known)}, round=MODE, PRIM=IMPL)"
            )
    if ("seed" in kw or "draws" in kw) and kw.get("rounding") != "stochastic":
        raise BadOptionError("seed= and draws= apply to round=stochastic")
    if "sat_nan" in kw and not (kw.get("saturate_ops") or kw.get("saturate_out")):
        raise BadOptionError("sat_nan= applies with saturate")
    prims = {k: v for k, v in prims.items() if v != "cr"}
    return Semantics(**kw, prims=tuple(sorted(prims.items())))


def parse_list(spec) -> list[Semantics]:
    """Semantics to compare: None -> [ieee]; a string or Semantics -> one; a list -> each."""
    if spec is None:
        return [IEEE]
    items = [spec] if isinstance(spec, (str, Semantics)) else list(spec)
    out: list[Semantics] = []
    for s in items:
        sem = parse(s)
        if all(sem.canonical() != o.canonical() for o in out):
            out.append(sem)
    return out or [IEEE]


# ------------------------------------------------------------ value operations
def flush(fmt: Format, a):
    """Subnormal values of fmt become zeros of their sign (dtype kept)."""
    a = np.asarray(a)
    tiny = (np.abs(a) < fmt.smallest_normal) & (a != 0)
    if not tiny.any():
        return a
    return np.where(tiny, np.copysign(np.zeros((), a.dtype), a), a)


def saturate(fmt: Format, r, exact, sat_nan: str = "zero"):
    """The saturation rule on results r (rounded from ``exact``): an infinite result, or a
    NaN that is an overflow of a format without infinities, becomes the largest finite
    value of its sign; any other NaN becomes +0 (sat_nan='zero') or stays NaN."""
    r = np.asarray(r)
    if np.isfinite(r).all():
        return r
    with np.errstate(all="ignore"):
        exact = np.asarray(exact, dtype=np.float64)
        over = np.isinf(r) | (np.isnan(r) & ~np.isnan(exact))
        nan = np.isnan(r) & np.isnan(exact)
        if not (over.any() or (nan.any() and sat_nan == "zero")):
            return r
        mx = np.asarray(fmt.max_finite, dtype=r.dtype)
        out = np.where(over, np.copysign(mx, np.where(np.isnan(exact), r, exact).astype(r.dtype)), r)
        if sat_nan == "zero":
            out = np.where(nan, np.zeros((), r.dtype), out)
        return out


def step(fmt: Format, y, k: int):
    """y moved k steps along fmt's number line (finite values; +-max is the end)."""
    y = np.asarray(y)
    if k == 0:
        return y
    flat = y.reshape(-1)
    fin = np.isfinite(flat)
    y64 = np.where(fin, flat, 0.0).astype(np.float64)
    o = fmt.ordinal(y64) + k
    lim = fmt.max_ordinal
    moved = fmt.from_ordinal(np.clip(o, -lim, lim))
    return np.where(fin, moved, flat).astype(y.dtype).reshape(y.shape)


def _splitmix(z: np.ndarray) -> np.ndarray:
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def uniforms(x, y, seed: int, draw: int) -> np.ndarray:
    """Uniform [0, 1) numbers, a function of (input x, value y, seed, draw) only: the same
    input rounds the same way in a draw whatever the chunking or order of the inputs."""
    with np.errstate(all="ignore"):
        xb = np.asarray(x, dtype=np.float64).view(np.uint64)
        yb = np.asarray(y, dtype=np.float64).view(np.uint64)
        k = _splitmix(np.uint64(seed) ^ (np.uint64(draw) * np.uint64(0xD1B54A32D192ED03)))
        z = _splitmix(_splitmix(xb ^ k) ^ yb)
    return (z >> np.uint64(11)).astype(np.float64) * 2.0**-53


def round_to(fmt: Format, v, mode: str = "rne", u=None) -> np.ndarray:
    """float64 values v rounded into fmt with rounding ``mode`` (float64 values of fmt).

    rne: fmt.round.  rtz, rtp, rtn: directed; an overflow gives the largest finite value
    where the direction points back to zero (rtz always; rtp for negatives, rtn for
    positives), else +-inf (NaN in E4M3FN).  rna: to nearest, ties away from zero.
    stochastic: up with probability (v - down) / (up - down), ``u`` the uniforms.
    """
    v = np.asarray(v, dtype=np.float64)
    if mode == "rne" or fmt.p >= 53:
        return fmt.round(v)
    with np.errstate(all="ignore"):
        fin = np.isfinite(v)
        w = np.where(fin, v, 0.0)
        _, k = np.frexp(w)
        q = np.maximum(k - 1, fmt.emin) - (fmt.p - 1)
        t = np.ldexp(w, -q)  # exact: the significand in units of the quantum
        if mode == "rtz":
            n = np.trunc(t)
        elif mode == "rtp":
            n = np.ceil(t)
        elif mode == "rtn":
            n = np.floor(t)
        elif mode == "rna":
            n = np.copysign(np.floor(np.abs(t) + 0.5), t)  # |t| < 2^25: + 0.5 is exact
        elif mode == "stochastic":
            lo = np.floor(t)
            n = lo + (np.asarray(u, dtype=np.float64) < (t - lo))
        else:
            raise ValueError(mode)
        r = np.ldexp(n, q)
        r = np.where(r == 0, np.copysign(0.0, w), r)  # a zero keeps the sign of v
        over = np.abs(r) > fmt.max_finite
        if over.any():
            to_max = {"rtz": np.ones_like(over), "rtp": r < 0, "rtn": r > 0}.get(mode, np.zeros_like(over))
            inf = fmt.overflow_value
            r = np.where(
                over,
                np.where(
                    to_max, np.copysign(fmt.max_finite, r), np.copysign(inf, r) if fmt.has_inf else np.nan
                ),
                r,
            )
        return np.where(fin, r, fmt.round(v))


def convert_out(y, x, storage: Format, compute: Format, sem: Semantics) -> np.ndarray:
    """The result y (values of the compute format) converted to the storage format."""
    y = np.asarray(y, dtype=np.float64)
    if sem.daz_out:
        y = flush(compute, y)
    u = uniforms(x, y, sem.seed, sem.draw) if sem.stochastic else None
    out = round_to(storage, y, sem.rounding, u)
    if sem.saturate_out:
        out = saturate(storage, out, y, sem.sat_nan)
    if sem.ftz_out:
        out = flush(storage, out)
    return out


def convert_in(x, storage: Format, compute: Format, sem: Semantics) -> np.ndarray:
    """Inputs (values of the storage format) converted to the compute format."""
    x = np.asarray(x, dtype=np.float64)
    if sem.daz_in:
        x = flush(storage, x)
    out = round_to(compute, x, sem.rounding_in)
    if sem.ftz_in:
        out = flush(compute, out)
    return out


def describe(sem: Semantics) -> str:
    """One line for tables and reports."""
    if sem.profile:
        return f"{sem.profile} ({sem.canonical() or 'ieee'})"
    return sem.name


def stochastic_summary(results: list) -> dict:
    """Worst case and mean over the draws of a stochastic rounding (each a SweepResult)."""
    out = {"draws": len(results)}
    for m in ("max_ulp", "mean_ulp", "p99_ulp", "correctly_rounded_fraction"):
        vals = [float(getattr(r, m)) for r in results]
        worst = min(vals) if m == "correctly_rounded_fraction" else max(vals)
        finite = [v for v in vals if not math.isnan(v)]
        out[m] = {"worst": worst, "mean": sum(finite) / len(finite) if finite else math.nan}
    return out


def result_json(sem: Semantics | None, stochastic: dict | None = None, changed: dict | None = None) -> dict:
    """The "semantics" member of a result in the JSON document."""
    d = (sem or IEEE).to_dict()
    d["changed_vs_ieee"] = (
        None
        if changed is None
        else {
            "count": changed["count"],
            "first": None if changed["first"] is None else {k: _num(v) for k, v in changed["first"].items()},
        }
    )
    if stochastic is not None:
        d["stochastic"] = {
            k: v if not isinstance(v, dict) else {kk: _num(vv) for kk, vv in v.items()}
            for k, v in stochastic.items()
        }
    else:
        d["stochastic"] = None
    return d


def _num(v: float):
    from audit.io import json_number

    return json_number(v)


def run_with(
    sem: Semantics,
    cand,
    run,
    storage: Format | None = None,
    compute: Format | None = None,
    params: dict | None = None,
    dom=None,
):
    """run(candidate) under semantics sem: the result, labelled with it.  A stochastic
    rounding runs each draw and returns the worst draw's result (largest max ULP, the first
    of equal ones), with the worst case and mean over the draws in ``result.stochastic``.
    With the domain (held in memory), a flagged result also counts the inputs whose result
    differs from the ieee run's (``result.changed``)."""
    if not sem.stochastic:
        res = run(cand.with_semantics(sem))
        res.semantics = None if sem.is_default else sem
    else:
        results = [run(cand.with_semantics(replace(sem, draw=k))) for k in range(sem.draws)]
        worst = max(range(len(results)), key=lambda k: (_key(results[k].max_ulp), -k))
        res = results[worst]
        res.semantics = replace(sem, draw=worst)
        res.stochastic = {**stochastic_summary(results), "worst_draw": worst, "seed": sem.seed}
    if res.semantics is not None and dom is not None and dom.values is not None:
        res.changed = changed_inputs(
            cand, res.semantics, storage, compute, params, dom, res.__dict__.pop("_sem_got", None)
        )
    res.__dict__.pop("_sem_got", None)
    return res


def changed_inputs(cand, sem: Semantics, storage: Format, compute: Format, params, dom, got=None) -> dict:
    """How many inputs of the domain give another result (other bits) than under ieee, and
    the first of them (``got``: the flagged results at the domain's inputs, if known)."""
    x, x2 = dom.values, dom.values2
    a = cand.with_semantics(None).evaluate(x, storage, compute, params, x2)
    b = got if got is not None else cand.with_semantics(sem).evaluate(x, storage, compute, params, x2)
    same = (a == b) & (np.signbit(a) == np.signbit(b)) | (np.isnan(a) & np.isnan(b))
    idx = np.flatnonzero(~same)
    first = None
    if idx.size:
        i = int(idx[0])
        first = {"x": float(x[i]), "ieee": float(a[i]), "got": float(b[i])}
        if x2 is not None:
            first["b"] = float(x2[i])
    return {"count": int(idx.size), "first": first}


def _key(v: float) -> float:
    return math.inf if math.isnan(v) else v


def label(sem: Semantics | None, stochastic: dict | None = None) -> str:
    """A table cell: the semantics' name, '(envelope)' for bound:K primitives and the
    draws of a stochastic rounding."""
    if sem is None:
        return "ieee"
    out = sem.name
    if sem.envelope:
        out += " (envelope)"
    if stochastic:
        out += f" (worst of {stochastic['draws']} draws)"
    return out


def table_notes(results) -> list[str]:
    notes = []
    if any(r.semantics is not None and r.semantics.envelope for r in results):
        notes.append(
            "envelope: bound:K primitives moved K ulp down and up, per input the result "
            "farthest from the correctly rounded primitives' (not an emulation)"
        )
    for r in results:
        ch = getattr(r, "changed", None)
        if ch is not None:
            notes.append(
                f"{r.candidate} {r.dtype}/{r.compute} [{r.semantics.name}]: {ch['count']} inputs give "
                "another result than under ieee"
            )
        if r.stochastic:
            st = r.stochastic
            notes.append(
                f"{r.candidate} stochastic rounding: worst draw {st['worst_draw']} of "
                f"{st['draws']}; max ULP worst {st['max_ulp']['worst']:.4g}, mean "
                f"{st['max_ulp']['mean']:.4g}; mean ULP worst {st['mean_ulp']['worst']:.4g}, "
                f"mean {st['mean_ulp']['mean']:.4g}"
            )
    return notes


def explain(sem: Semantics | None, stochastic: dict | None = None, changed: dict | None = None) -> list[str]:
    """Sentences describing a semantics, one per flag (the report's "semantics" section)."""
    sem = sem or IEEE
    if sem.is_default:
        return ["ieee: " + PROFILES["ieee"][1]]
    out = []
    if sem.profile:
        out.append(f"profile {sem.profile}: {PROFILES[sem.profile][1]}")
    text = {
        "ftz": "ftz: subnormal results of every operation become zeros of their sign",
        "daz": "daz: subnormal operands of every operation are read as zeros of their sign",
        "ftz_in": "ftz_in: the conversion of the inputs to the compute format flushes subnormals",
        "daz_in": "daz_in: subnormal inputs are read as zeros",
        "ftz_out": "ftz_out: subnormal results of the conversion to the storage format become zeros",
        "daz_out": "daz_out: subnormal values of the compute format are read as zeros by the "
        "conversion to the storage format",
        "contract": "contract: a product whose only use is one addition or subtraction is fused "
        "into an FMA (one rounding)",
    }
    out += [text[f] for f in FLAGS if getattr(sem, f)]
    if sem.saturate_ops or sem.saturate_out:
        scope = (
            "operations and the conversion to the storage format"
            if sem.saturate_ops and sem.saturate_out
            else "operations"
            if sem.saturate_ops
            else "the conversion to the storage format"
        )
        nan = "NaN becomes +0" if sem.sat_nan == "zero" else "NaN stays NaN"
        out.append(
            f"saturate ({scope}): an infinite result becomes the largest finite value of its sign; {nan}"
        )
    if sem.rounding_in != "rne":
        out.append(
            f"round_in={sem.rounding_in}: the conversion of the inputs to the compute "
            f"format rounds {_MODE_TEXT[sem.rounding_in]}"
        )
    if sem.rounding != "rne":
        out.append(
            f"round={sem.rounding}: the conversion to the storage format rounds "
            + {
                "rtz": "toward zero (truncation)",
                "rna": "to nearest, ties away from zero",
                "rtp": "toward +inf",
                "rtn": "toward -inf",
                "stochastic": f"stochastically (seed {sem.seed}, {sem.draws} draws)",
            }[sem.rounding]
        )
    for k, v in sem.prims:
        if v.startswith("bound:"):
            out.append(
                f"{k}={v}: an ENVELOPE, not an emulation: {k} taken at its correctly "
                f"rounded value moved {v[6:]} ulp down and up; per input the result "
                "farthest from the one with correctly rounded primitives"
            )
        elif v == "rcp":
            out.append("div=rcp: a / b computed as a * rcp(b), two roundings")
        elif v.startswith("table:"):
            out.append(
                f"{k}={v}: {k} looked up in a table measured on a device (every value of "
                "the compute format; non-finite inputs missing from it: correctly rounded)"
            )
        else:
            out.append(f"{k}={v}: {k} computed by the catalog candidate {v}")
    if changed is not None:
        f = changed["first"]
        out.append(
            f"{changed['count']} inputs give another result than under ieee"
            + (f", the first x = {f['x']!r}: {f['got']!r} instead of {f['ieee']!r}" if f else "")
        )
    if stochastic:
        out.append(
            f"stochastic rounding over {stochastic['draws']} draws: the result shown is "
            f"draw {stochastic['worst_draw']}, the worst; max ULP worst "
            f"{stochastic['max_ulp']['worst']:.6g}, mean {stochastic['max_ulp']['mean']:.6g}; "
            f"mean ULP worst {stochastic['mean_ulp']['worst']:.6g}, mean "
            f"{stochastic['mean_ulp']['mean']:.6g}"
        )
    return out


_TABLES: dict = {}


def table_file(path: str):
    """os.stat of a table:FILE, which must be a regular file (a FIFO or a device is refused,
    never waited on); BadOptionError in one line else."""
    import os
    import stat

    try:
        st = os.stat(path)
    except OSError as e:
        raise BadOptionError(f"table:{path}: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        raise BadOptionError(f"table:{path}: not a regular file (tables are read from regular files only)")
    return st


def table_lookup(path: str, fmt: Format):
    """The table of FILE for compute format fmt: a function from values of fmt to the
    device's outputs.  The file must hold every finite value of fmt (16 bits or fewer)."""

    from audit.targets.dumps import read_dump

    if not fmt.enumerable:
        raise BadOptionError(
            f"table:{path}: tables are for compute formats of 16 bits or fewer, not {fmt.name}"
        )
    st = table_file(path)
    key = (path, fmt.name, st.st_size, st.st_mtime_ns)
    if key not in _TABLES:
        d = read_dump(path, fmt, regular=True)
        if len(d.x) != len(fmt.finite_values()):
            raise BadOptionError(
                f"table:{path}: {len(d.x)} inputs; a table needs every finite "
                f"{fmt.name} value ({len(fmt.finite_values())})"
            )
        keys = fmt.to_bits(d.x).astype(np.int64)
        order = np.argsort(keys)
        _TABLES.clear()  # one table at a time is enough: keep memory flat
        _TABLES[key] = (keys[order], d.y[order], dict(d.specials))
    keys, ys, specials = _TABLES[key]

    def look(a, fallback):
        a = np.asarray(a, dtype=np.float64)
        out = np.asarray(fallback, dtype=np.float64).copy()
        fin = np.isfinite(a)
        i = np.searchsorted(keys, fmt.to_bits(a[fin]).astype(np.int64))
        out[fin] = ys[i]
        for j in np.flatnonzero(~fin):
            for xx, yy in specials.items():
                if xx == a.flat[j] or (math.isnan(xx) and math.isnan(a.flat[j])):
                    out.flat[j] = yy
        return out

    return look


GOLDEN_FLAGS = ("daz_in", "ftz_out", "saturate_out", "sat_nan")


def golden_values(ref, fmt: Format, x, ref_params: dict, sem, ov):
    """Golden data under a semantics: f at the input as the machine reads it (daz_in: a
    subnormal input is a zero of its sign), correctly rounded, then stored as the machine
    stores it (saturate_out: inf -> the largest finite value of its sign, NaN -> +0 unless
    sat_nan=keep; ftz_out: a subnormal result -> a zero of its sign).  The other flags are
    properties of a kernel's operations, or need more than the correctly rounded value
    (directed and stochastic roundings), and are refused.  Returns an oracle result whose
    ``rounded`` is the stored value (``hi``/``lo`` stay the exact value at the input read)."""
    from dataclasses import replace as dc_replace

    from audit.oracle import oracle

    sem = parse(sem)
    extra = [
        t for t in sem.canonical().split(",") if t and t.split("=")[0] not in GOLDEN_FLAGS + ("saturate",)
    ]
    if sem.saturate_ops and not sem.saturate_out:
        extra.append("saturate_ops")
    if extra:
        raise BadOptionError(
            f"golden applies the flags {', '.join(GOLDEN_FLAGS)} (and "
            f"saturate as saturate_out); not {', '.join(extra)}: those describe "
            "a kernel's operations, sweep a candidate for them"
        )
    if sem.daz_in:
        xr = flush(fmt, x)
        if not np.array_equal(xr, x) or np.any(np.signbit(xr) != np.signbit(x)):
            ov = oracle.evaluate(ref, fmt, xr, ref_params)
    y = np.asarray(ov.rounded, dtype=np.float64)
    if sem.saturate_out:
        y = saturate(fmt, y, ov.hi, sem.sat_nan)
    if sem.ftz_out:
        y = flush(fmt, y)
    return dc_replace(ov, rounded=y)
