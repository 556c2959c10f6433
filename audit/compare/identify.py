"""``actaudit identify TARGET``: which formula, in which evaluation path, a black box computes.

The target (any target ``sweep`` takes: an engine op, a dump, a Python callable, a C kernel;
or a Candidate built by the caller, such as a model site's engine op, audit/model) runs on
the inputs of a storage format, and so does every *path* of every catalog candidate of
the reference:

* each candidate in each **compute format**: the storage format and every wider one of
  fp16, bf16, fp32, fp64 (fp32 storage: also fp16 and bf16, a kernel that computes narrow);
* under each **semantics profile**: ieee, ``ftz`` (subnormal results flushed) and
  ``contract`` (a*b+c fused into one fma);
* **lookup tables** of every narrower width among fp8 (e4m3, e5m2: 256 entries), fp16 and
  bf16 (65,536 entries): the input rounded to the table's format (nearest, ties to even),
  the entry RN(f(x)) stored in the table's format or in the storage format;
* the correct rounding itself (``cr``).

They are ranked by **bitwise agreement** with the target: the fraction of inputs whose
outputs have the same bits (a NaN matches any NaN).  Inputs: every finite value of an 8-
or 16-bit format; for fp32, every value within WINDOW ordinals of each of BRANCH_POINTS
(the thresholds where kernels switch pieces or clamp) and SAMPLES stratified samples of
the whole range.  For the best match, where it first differs (the smallest differing
input by magnitude) and how many inputs differ.  Every path runs first on a subset of
about SUBSET inputs (every k-th); the KEEP paths that agree best there run on every input
(the ranking shown is over every input; ``paths`` counts every path tried).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from audit.errors import BadOptionError
from audit.numbers.formats import Format, get_format
from audit.numbers.inputs import domain
from audit.oracle import oracle

WINDOW = 2048  # fp32: ordinals on each side of a branch point, every one of them
SAMPLES = 1 << 16  # fp32: stratified samples of the whole range
# thresholds where kernels switch pieces or clamp (MLAS and XLA tanh clamps near 9 and
# 7.905, erf's switch near 0.84 and 2.5...): each with its negative, and the smallest normal
BRANCH_POINTS = (0.0, 0.25, 0.5, 0.84375, 1.0, 1.25, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0,
                 7.90531110763549805, 8.0, 9.0, 10.0, 12.0, 16.0, 20.0, 32.0, 64.0, 88.0)  # fmt: skip
COMPUTES = ("fp16", "bf16", "fp32", "fp64")
SEMANTICS = ("ieee", "ftz", "contract")
TABLES = ("fp8_e4m3", "fp8_e5m2", "fp16", "bf16")
TOP = 5
SUBSET = 4096  # every path runs first on about this many inputs (every k-th) ...
KEEP = 12  # ... and the best KEEP of them on every input


@dataclass
class Match:
    candidate: str
    path: str
    identical: int
    count: int
    first_difference: dict | None = None  # {x, target, candidate, differing}

    @property
    def identical_fraction(self) -> float:
        return self.identical / self.count if self.count else 0.0

    def to_dict(self) -> dict:
        from audit.io import json_number

        fd = self.first_difference
        return {
            "candidate": self.candidate,
            "path": self.path,
            "identical_fraction": self.identical_fraction,
            "identical": self.identical,
            "count": self.count,
            "first_difference": None
            if fd is None
            else {k: json_number(v) if isinstance(v, float) else v for k, v in fd.items()},
        }


@dataclass
class Identification:
    target: str
    reference: str
    dtype: str
    inputs: int
    exhaustive: bool
    matches: list  # every path, best first
    paths: int

    def to_dict(self, top: int = TOP) -> dict:
        return {
            "schema": "actaudit.identify/1",
            "target": self.target,
            "reference": self.reference,
            "dtype": self.dtype,
            "inputs": self.inputs,
            "exhaustive": self.exhaustive,
            "paths": self.paths,
            "ties": sum(1 for m in self.matches if self.matches and m.identical == self.matches[0].identical),
            "identify": [m.to_dict() for m in self.matches[:top]],
        }


def inputs(fmt: Format, window: int = WINDOW, samples: int = SAMPLES) -> tuple[np.ndarray, bool]:
    """The inputs compared (ascending) and whether they are every finite value."""
    if fmt.enumerable:
        vals = domain(fmt).values
        assert vals is not None
        return np.sort(vals), True
    if fmt.name != "fp32":
        raise BadOptionError(f"identify runs in fp32 or a format of at most 16 bits, not {fmt.name}")
    pts = [np.float32(p) for b in BRANCH_POINTS for p in (b, -b)] + [np.float32(2.0**-126)]
    ords = []
    for p in pts:
        i = int(np.array(p, np.float32).view(np.int32))
        i = i if i >= 0 else -(i & 0x7FFFFFFF)  # sign-magnitude -> ordinal
        ords.append(np.arange(i - window, i + window + 1, dtype=np.int64))
    o = np.unique(np.concatenate(ords))
    bits = np.where(o >= 0, o, (-o) | 0x80000000).astype(np.uint32)
    v = bits.view(np.float32).astype(np.float64)
    sampled = domain(fmt, samples=samples, seed=0).values
    v = np.concatenate([v[np.isfinite(v)], np.asarray(sampled, np.float64)])
    return np.unique(v), False


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        eq = (a == b) & (np.signbit(a) == np.signbit(b))
        return eq | (np.isnan(a) & np.isnan(b))


def _paths(ref_name: str, fmt: Format):
    """(candidate id, path label, outputs function of x) for every path of the reference."""
    from audit.targets.registry import catalog
    from audit.targets.semantics import parse

    ref = None
    cands = [c for c in catalog().values() if c.reference == ref_name and c.arity == 1]
    computes = [c for c in COMPUTES if get_format(c).p >= fmt.p or fmt.name == "fp32"]
    if fmt.name not in computes:
        computes.insert(0, fmt.name)
    for c in sorted(cands, key=lambda c: c.id):
        ref = c.ref
        seen = set()
        for cname in computes:
            cf = c.compute_format(get_format(cname))
            for sname in SEMANTICS:
                key = (cf.name, sname)
                if key in seen:
                    continue
                seen.add(key)
                cs = c.with_semantics(None if sname == "ieee" else parse(sname))
                label = f"compute {cf.name}" + ("" if sname == "ieee" else f", {sname}")

                def run(x, cs=cs, cf=cf):
                    with np.errstate(all="ignore"):
                        return cs.evaluate(x, fmt, cf, None)

                yield c.id, label, run
    if ref is None:
        from audit.oracle.references import get_reference

        ref = get_reference(ref_name)
    params = ref.with_defaults({})

    def cr(x, ref=ref):
        return _oracle(ref, fmt, x, params)

    yield "cr", f"RN_{fmt.name}(f(x))", cr
    for w in TABLES:
        wf = get_format(w)
        if wf.p >= fmt.p or wf.bits >= fmt.bits:
            continue
        for out in (wf, fmt):

            def table(x, wf=wf, out=out, ref=ref):
                with np.errstate(all="ignore"):
                    xw = wf.round(np.asarray(x, np.float64))
                y = np.full(len(xw), np.nan)
                ok = np.isfinite(xw)
                y[ok] = _oracle(ref, out, xw[ok], params)
                for inf in (np.inf, -np.inf):  # the entries at +-inf: the limits, rounded
                    y[xw == inf] = out.round(np.array([ref.special(inf, params)]))[0]
                return y

            n = 1 << wf.bits
            yield f"table {w}", f"{n:,} entries, x rounded to {w}, entries in {out.name}", table


def _oracle(ref, fmt: Format, x: np.ndarray, params: dict) -> np.ndarray:
    x = np.asarray(x, np.float64)
    y = np.full(len(x), np.nan)
    fin = np.isfinite(x)
    if fin.any():
        # unique by bits: -0 and +0 are equal numbers but two inputs
        ub, inv = np.unique(x[fin].view(np.uint64), return_inverse=True)
        y[fin] = oracle.evaluate(ref, fmt, ub.view(np.float64), params).rounded[inv]
    return y


def identify(
    target,
    reference: str | None = None,
    dtype: str = "fp32",
    params: dict | None = None,
    label: str | None = None,
    window: int = WINDOW,
    samples: int = SAMPLES,
) -> Identification:
    """Rank every path of every catalog candidate of the reference by bitwise agreement
        with ``target`` (a target string, or a Candidate) on the inputs of ``dtype`` (fp32:
    ``window`` ordinals around each branch point and ``samples`` samples)."""
    if not (isinstance(window, int) and 0 <= window <= 1 << 16):
        raise BadOptionError(f"--window must be in [0, 65536], got {window!r}")
    if not (isinstance(samples, int) and 1 <= samples <= 1 << 22):
        raise BadOptionError(f"--samples must be in [1, 4194304], got {samples!r}")
    from audit.compare.diff import load

    fmt = get_format(dtype)
    if isinstance(target, str):
        cand, dump = load(target, fmt, reference, "cpu", params)
        name = target
    else:
        cand, dump, name = target, None, label or target.id
    ref_name = reference or cand.reference
    if cand.reference != ref_name:
        raise BadOptionError(f"{name} computes {cand.reference}, not --reference {ref_name}")
    if cand.arity != 1:
        raise BadOptionError(f"identify compares functions of one argument ({ref_name} takes two)")
    if dump is not None:
        x, whole = np.sort(np.asarray(dump.values, np.float64)), False
    else:
        x, whole = inputs(fmt, window, samples)
    pa = cand.resolve_params({k: v for k, v in (params or {}).items() if k in cand.params})
    with np.errstate(all="ignore"):
        got = np.asarray(cand.evaluate(x, fmt, fmt, pa), np.float64)
    # every path on a subset first (every k-th input); the best KEEP of them on every input
    k = max(1, len(x) // SUBSET)
    sub = np.arange(0, len(x), k)
    trial = []
    for cid, path, run in _paths(ref_name, fmt):
        try:
            ys = np.asarray(run(x[sub]), np.float64)
        except Exception:  # a path a candidate cannot run (a format it refuses): not a match
            continue
        trial.append((int(_same(got[sub], ys).sum()), cid, path, run))
    trial.sort(key=lambda t: -t[0])
    matches = []
    for _, cid, path, run in trial[:KEEP]:
        y = np.asarray(run(x), np.float64)
        same = _same(got, y)
        m = Match(cid, path, int(same.sum()), len(x))
        matches.append(m)
        m._diff = ~same  # type: ignore[attr-defined]
        m._y = y  # type: ignore[attr-defined]
    matches.sort(key=lambda m: (-m.identical, _rank(m)))
    for m in matches[:TOP]:
        d = m._diff  # type: ignore[attr-defined]
        if d.any():
            idx = np.flatnonzero(d)
            i = int(idx[np.argmin(np.abs(x[idx]))])
            m.first_difference = {
                "x": float(x[i]),
                "target": float(got[i]),
                "candidate": float(m._y[i]),  # type: ignore[attr-defined]
                "differing": int(d.sum()),
            }
    for m in matches:
        del m._diff, m._y  # type: ignore[attr-defined]
    return Identification(name, ref_name, fmt.name, len(x), whole, matches, len(trial))


def _rank(m: Match) -> tuple:
    """Among equal agreement: the simplest path first (ieee before a profile, the storage
    format's own compute before another, a formula before a table)."""
    return (m.candidate.startswith("table") or m.candidate == "cr", "," in m.path, m.candidate, m.path)


def first_difference_text(m: Match) -> str:
    fd = m.first_difference
    if fd is None:
        return "identical on every input compared"
    return (
        f"first differs at x = {fd['x']!r}: target {fd['target']!r}, {m.candidate} "
        f"{fd['candidate']!r} ({fd['differing']:,} inputs differ)"
    )


__all__ = ["identify", "Identification", "Match", "inputs", "first_difference_text"]
