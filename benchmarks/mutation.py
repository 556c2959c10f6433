"""Mutation check: does the test suite catch realistic bugs in the engine?

Each mutation below is a one-line change that a person could plausibly make (a rounding
rule, an ulp, the side of a tie, a finding kind, a clip bound, a gate rule, a metric's
edge case, checkpoint loading, an evaluation path).  For each, this script copies the
project to a temporary directory (the working tree is never touched), applies the change
there, and runs the test files that cover that code (``pytest -x``: the first failure
suffices).  A mutation is *caught* when those tests fail, *survives* when they pass.

    python benchmarks/mutation.py              # every mutation, 2 at a time
    python benchmarks/mutation.py -j 1 -k gate # only those whose name contains 'gate'
    python benchmarks/mutation.py --list

It first runs the same test files on the unmutated copy (they must pass, or the score
means nothing), prints one line per mutation and the score, and exits 1 unless every
mutation is caught.  The ten bugs that issue #20 found uncaught are marked [#20].
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# what the tests read: the docs pages too (tests/test_docs.py, test_claims and test_hostile_gate
# read their examples from docs/)
COPY = (
    "audit",
    "approximations",
    "reports",
    "tests",
    "data",
    "examples",
    "docs",
    "pyproject.toml",
    "README.md",
    "CONTRIBUTING.md",
    "mkdocs.yml",
    ".ci",
)
ORACLE_FILES = {"audit/numbers/formats.py", "audit/oracle/oracle.py", "audit/oracle/references.py"}

T_CLAIMS = "tests/test_claims.py"
T_FORMATS = "tests/test_formats.py"
T_ORACLE = "tests/test_oracle.py"
T_METRICS = "tests/test_metrics.py"
T_FINDINGS = "tests/test_findings.py"
T_GATE = "tests/test_gate.py"
T_SWEEP = "tests/test_sweep.py"
T_SCALE = "tests/test_scale.py"
T_CLI = "tests/test_cli.py"


@dataclass
class Mutation:
    name: str
    file: str
    old: str
    new: str
    tests: tuple


M = Mutation
TN = ("tests/test_native.py",)
MUTATIONS = [
    # ---- rounding and ulp (formats.py)
    M(
        "round: ties away from zero instead of to even",
        "audit/numbers/formats.py",
        "r = np.ldexp(np.rint(np.ldexp(v, -q)), q)",
        "r = np.ldexp(np.trunc(np.ldexp(v, -q) + np.copysign(0.5, v)), q)",
        (T_FORMATS,),
    ),
    M(
        "round: overflow decided before rounding (max, not max + half an ulp)",
        "audit/numbers/formats.py",
        "over = np.abs(r) > self.max_finite",
        "over = np.abs(v) > self.max_finite",
        (T_FORMATS, T_CLAIMS),
    ),
    M(
        "round: subnormals rounded with one extra bit",
        "audit/numbers/formats.py",
        "q = np.maximum(k - 1, self.emin) - (self.p - 1)",
        "q = np.maximum(k - 1, self.emin - 1) - (self.p - 1)",
        (T_FORMATS,),
    ),
    M(
        "round_mpf: ties rounded up instead of to even",
        "audit/numbers/formats.py",
        "if rem > half or (rem == half and n & 1):",
        "if rem >= half:",
        (T_FORMATS, T_ORACLE),
    ),
    M(
        "ulp: no floor at the smallest normal (subnormal ulp wrong)",
        "audit/numbers/formats.py",
        "out = np.maximum(pow2, self.smallest_normal)",
        "out = pow2.copy()",
        (T_FORMATS, T_CLAIMS),
    ),
    M(
        "ordinal: negative values off by one (-0 and +0 two points)",
        "audit/numbers/formats.py",
        "        b -= s  # (mag ^ s) - s",
        "        pass  # (mag ^ s) - s",
        (T_FORMATS, T_CLAIMS),
    ),
    # ---- oracle sides (oracle.py)
    M(
        "oracle: ambiguous fast-path inputs not sent to mpmath",
        "audit/oracle/oracle.py",
        "    idx = np.flatnonzero(amb)\n    if len(idx):",
        "    idx = np.flatnonzero(amb)\n    if False:",
        (T_ORACLE,),
    ),
    M(
        "oracle: fast-path error bound ignored",
        "audit/oracle/oracle.py",
        "slack = mag * rel",
        "slack = mag * 0.0",
        (T_ORACLE,),
    ),
    M(
        "oracle: double-double tie decided on the wrong side",
        "audit/oracle/oracle.py",
        "cross = sure & ((d > 0) == (m > r))",
        "cross = sure & ((d > 0) != (m > r))",
        (T_ORACLE,),
    ),
    M(
        "oracle: saturation side of a power of two flipped",
        "audit/oracle/oracle.py",
        "lo[sel] = -g[ok]",
        "lo[sel] = g[ok]",
        (T_ORACLE, T_METRICS),
    ),
    # ---- metrics edge cases (metrics.py)
    M(
        "[#20] metrics: 0.5 ULP cap for correctly rounded results removed",
        "audit/measure/metrics.py",
        "np.minimum(ulp_err, 0.5, out=ulp_err, where=correct)",
        "pass",
        (T_CLAIMS,),
    ),
    M(
        "[#20] metrics: relative error 0 (not inf) where f(x) = 0",
        "audit/measure/metrics.py",
        "rel_err[zero] = np.where(abs_err[zero] == 0, 0.0, np.inf)",
        "rel_err[zero] = np.where(abs_err[zero] == 0, 0.0, 0.0)",
        (T_CLAIMS,),
    ),
    M(
        "[#20] metrics: exact-p99 limit 2^20 instead of 2^24",
        "audit/measure/metrics.py",
        "EXACT_P99_LIMIT = 1 << 24",
        "EXACT_P99_LIMIT = 1 << 20",
        (T_CLAIMS,),
    ),
    M(
        "metrics: p99 one rank too high",
        "audit/measure/metrics.py",
        "k = math.ceil(0.99 * self.finite) - 1",
        "k = math.ceil(0.99 * self.finite)",
        (T_CLAIMS,),
    ),
    M(
        "metrics: error measured from RN(f(x)) instead of f(x)",
        "audit/measure/metrics.py",
        "abs_err = got - hi",
        "abs_err = got - rounded",
        (T_CLAIMS, T_SWEEP),
    ),
    M(
        "metrics: NaN results classed as inf and inf as NaN",
        "audit/measure/metrics.py",
        "np.where(np.isnan(g), NAN, INF)",
        "np.where(np.isnan(g), INF, NAN)",
        (T_CLAIMS, T_METRICS),
    ),
    M(
        "metrics: NaN errors of non-finite results enter the maxima",
        "audit/measure/metrics.py",
        "if nf == n:  # the common case",
        "if True:  # the common case",
        (T_CLAIMS, T_METRICS),
    ),
    M(
        "metrics: ulp of f just below a power of two not lowered",
        "audit/measure/metrics.py",
        "below = (np.sign(l) != np.sign(h))",
        "below = (np.sign(l) == np.sign(h))",
        (T_METRICS, T_ORACLE),
    ),
    M(
        "metrics: the last of equal maxima kept as the worst input",
        "audit/measure/metrics.py",
        "    return a > b or (a != a and b == b)",
        "    return a >= b or (a != a and b == b)",
        (T_CLAIMS,),
    ),
    # ---- findings kinds (findings.py)
    M(
        "[#20] findings: sign findings not detected",
        "audit/measure/findings.py",
        'out["sign"] = (sign, "")',
        'out["sign"] = (np.zeros(len(got), bool), "")',
        (T_CLAIMS,),
    ),
    M(
        "[#20] findings: range findings not detected",
        "audit/measure/findings.py",
        'out["range"] = (rng, "")',
        'out["range"] = (np.zeros(len(got), bool), "")',
        (T_CLAIMS,),
    ),
    M(
        "[#20] findings: overflow 'saturated to the largest finite value' removed",
        "audit/measure/findings.py",
        "over |= ~nonfinite & (np.abs(got) == m)",
        "over |= False & (np.abs(got) == m)",
        (T_CLAIMS,),
    ),
    M(
        "findings: overflow 'finite where f overflows' removed",
        "audit/measure/findings.py",
        "over[rn_over] |= np.isfinite(g) &",
        "over[rn_over] |= False &",
        (T_CLAIMS,),
    ),
    M(
        "findings: a zero exact rounding counted as a flush",
        "audit/measure/findings.py",
        "under &= (rn != 0) & ~np.isnan(rn)",
        "under &= ~np.isnan(rn)",
        (T_CLAIMS, T_FINDINGS),
    ),
    M(
        "findings: zero results counted as sign findings",
        "audit/measure/findings.py",
        "sign[idx] = (np.isfinite(g) & (g != 0) & (rn[idx] != 0)",
        "sign[idx] = (np.isfinite(g) & (rn[idx] != 0)",
        (T_CLAIMS,),
    ),
    M(
        "findings: monotonicity direction flipped",
        "audit/measure/findings.py",
        "bad[1:] = step < 0 if direction > 0 else step > 0",
        "bad[1:] = step > 0 if direction > 0 else step < 0",
        (T_CLAIMS, T_FINDINGS),
    ),
    M(
        "findings: intervals end one input late",
        "audit/measure/findings.py",
        "np.flatnonzero(d == -1) - 1",
        "np.flatnonzero(d == -1)",
        (T_CLAIMS,),
    ),
    # ---- clip bounds and saturation (clip.py)
    M(
        "[#20] clip: upper bound one input too low",
        "audit/measure/clip.py",
        "j = int(np.flatnonzero(feas)[-1])",
        "j = int(np.flatnonzero(feas)[-1]) - 1",
        (T_CLAIMS,),
    ),
    M(
        "clip: default tolerance once (not twice) the core's worst error",
        "audit/measure/clip.py",
        "max_ulp = max(2.0, 2 * float(np.max(e.ulp_err[core])))",
        "max_ulp = max(2.0, float(np.max(e.ulp_err[core])))",
        (T_CLAIMS,),
    ),
    M(
        "clip: failing inputs kept in the default tolerance's core",
        "audit/measure/clip.py",
        "core &= ~failing",
        "core &= True",
        (T_CLAIMS,),
    ),
    M(
        "clip: 'clamp' reported where the candidate does not give the constant",
        "audit/measure/clip.py",
        'e.got[idx][j] == s["value"]',
        'e.got[idx][j] != s["value"]',
        (T_CLAIMS,),
    ),
    M(
        "saturation: threshold one input early",
        "audit/measure/clip.py",
        "return 0 if not len(bad) else int(bad[-1]) + 1",
        "return 0 if not len(bad) else int(bad[-1])",
        (T_CLAIMS, T_FINDINGS),
    ),
    # ---- gate rules (gate.py)
    M(
        "[#20] gate: a shrunken clip range ignored",
        "audit/gate/check.py",
        "if bc and nc:",
        "if False:",
        (T_CLAIMS,),
    ),
    M(
        "[#20] gate: a result missing from the baseline ignored",
        "audit/gate/check.py",
        'fails.append("not in the baseline (run',
        'better.append("not in the baseline (run',
        (T_CLAIMS,),
    ),
    M(
        "[#20] gate: slack taken as absolute",
        "audit/gate/check.py",
        "n > b * (1 + spec.slack) + 1e-300:",
        "n > b + spec.slack + 1e-300:",
        (T_CLAIMS,),
    ),
    M(
        "gate: slack with the wrong sign",
        "audit/gate/check.py",
        "n > b * (1 + spec.slack) + 1e-300:",
        "n > b * (1 - spec.slack) + 1e-300:",
        (T_CLAIMS,),
    ),
    M(
        "gate: a NaN metric passes its tolerance",
        "audit/gate/check.py",
        "if m in tol and not _num(now[m]) <= tol[m]:",
        "if m in tol and _num(now[m]) > tol[m]:",
        (T_CLAIMS,),
    ),
    M(
        "gate: new finding intervals ignored",
        "audit/gate/check.py",
        'new = [iv for iv in ivs if not _covered(iv, base["findings"].get(kind, []))]',
        "new = []",
        (T_GATE,),
    ),
    # ---- checkpoint loading (sweep.py)
    M(
        "checkpoint: loading deleted (recomputes every chunk)",
        "audit/measure/sweep.py",
        "doc = ck.load(dom.chunk_counts(ranges))",
        "doc = None",
        (T_CLI,),
    ),
    M(
        "checkpoint: resumed run restarts at chunk 0",
        "audit/measure/sweep.py",
        "ranges[merged.done:]",
        "ranges",
        (T_SCALE,),
    ),
    M(
        "checkpoint: never saved during a run (only at its end)",
        "audit/measure/checkpoint.py",
        "return time.monotonic() - self.last_save >= SAVE_EVERY",
        "return False",
        (T_CLAIMS,),
    ),
    M(
        "checkpoint: the final state not saved",
        "audit/measure/sweep.py",
        "if ck is not None and (merged.done > saved or not ck.path.exists()):",
        "if False:",
        (T_CLAIMS, T_CLI),
    ),
    # ---- evaluation paths (compute.py, candidates.py, sweep.py)
    M(
        "compute: the fp32 path computed in float64",
        "audit/targets/compute.py",
        'self.native = {"fp32": np.float32, "fp64": np.float64}',
        'self.native = {"fp32": np.float64, "fp64": np.float64}',
        (T_SWEEP,),
    ),
    M(
        "compute: constants not rounded to the compute format",
        "audit/targets/compute.py",
        'return self.op("const", np.float64(c))',
        "return Val(np.float64(c), self)",
        (T_SWEEP,),
    ),
    M(
        "compute: the result not rounded to the storage format",
        "audit/targets/compute.py",
        "out = storage.round(np.broadcast_to(y, x.shape).astype(np.float64))",
        "out = np.broadcast_to(y, x.shape).astype(np.float64)",
        (T_SWEEP,),
    ),
    M(
        "candidates: bit-trick candidates not forced to fp32",
        "audit/targets/candidates.py",
        "return get_format(self.compute) if self.compute else requested",
        "return requested",
        (T_CLAIMS,),
    ),
    M(
        "specials: NaN never matches NaN",
        "audit/measure/sweep.py",
        "return (math.isnan(a) and math.isnan(b)) or a == b",
        "return a == b",
        (T_CLAIMS,),
    ),
    M(
        "golden: outputs written unrounded (the exact value's float64)",
        "audit/targets/golden.py",
        "y=ov.rounded,",
        "y=ov.hi,",
        (T_CLAIMS,),
    ),
    M("report: colour tier bounds exclusive", "reports/html.py", "if v <= lim:", "if v < lim:", (T_CLAIMS,)),
    # ---- resource refusals (inputs.py)
    M(
        "inputs: fp32 sample limit 2^25 instead of 2^24",
        "audit/numbers/inputs.py",
        'MAX_SAMPLES = {"fp32": 1 << 24',
        'MAX_SAMPLES = {"fp32": 1 << 25',
        (T_CLAIMS,),
    ),
    # ---- the compiled fp32 helper's glue (audit/numbers/native.py and its callers)
    M(
        "native: an array relative error read as one number",
        "audit/numbers/native.py",
        "1 if len(rel_a) == n and n != 1 else 0,",
        "0,",
        TN,
    ),
    M(
        "native: unsure results left unsettled on the helper's path",
        "audit/measure/metrics.py",
        "            if pw.n_settle:",
        "            if False:",
        TN,
    ),
    M(
        "metrics: zero exact values skipped (a shared line)",
        "audit/measure/metrics.py",
        "zero = np.flatnonzero(hi == 0) if pw.n_zero else _NONE",
        "zero = _NONE",
        (T_METRICS, "tests/test_mutants_metrics.py"),
    ),
    M(
        "metrics: overflowing exact values skipped (a shared line)",
        "audit/measure/metrics.py",
        "over = np.flatnonzero(~np.isfinite(rounded)) if pw.n_over else _NONE",
        "over = _NONE",
        (T_METRICS, "tests/test_mutants_metrics.py"),
    ),
    M(
        "oracle: the fast path's odd inputs skipped (a shared line)",
        "audit/oracle/oracle.py",
        "odd = np.flatnonzero(amb | ~np.isfinite(v)) if b.n_odd else _NONE",
        "odd = _NONE",
        (T_ORACLE,),
    ),
    M(
        "oracle: tiny fast values not signed (a shared line)",
        "audit/oracle/oracle.py",
        "any_tiny = b.n_tiny > 0",
        "any_tiny = False",
        (T_ORACLE, "tests/test_signs.py"),
    ),
    M(
        "findings: a result of the other sign bit not tested (a shared line)",
        "audit/measure/findings.py",
        "sign = np.signbit(got) != np.signbit(e.exact) if c is None or c.n_sign else np.zeros(len(got), bool)",
        "sign = np.zeros(len(got), bool)",
        (T_FINDINGS, "tests/test_mutants_findings.py"),
    ),
    M(
        "native: results at +-max not tested for overflow on the helper's path",
        "audit/measure/findings.py",
        "any_nonfinite, big, rn_all_finite = c.n_nonfinite > 0, c.n_big > 0, c.n_rn_nonfinite == 0",
        "any_nonfinite, big, rn_all_finite = c.n_nonfinite > 0, False, c.n_rn_nonfinite == 0",
        TN,
    ),
    M(
        "native: built for a sweep one input short of the threshold",
        "audit/measure/native_check.py",
        'if storage != "fp32" or count < native.SWEEP_MIN:',
        'if storage != "fp32" or count <= native.SWEEP_MIN - 2:',
        TN,
    ),
    M(
        "native: a cached object loaded without its record's check",
        "audit/measure/native_check.py",
        "data = ckernels._verified(dest, key)",
        "data = dest.read_bytes() if dest.exists() else None",
        TN,
    ),
]


def make_copy(dst: Path) -> None:
    for name in COPY:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dst / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif src.exists():
            shutil.copy2(src, dst / name)


def run_tests(root: Path, tests, cache: str | None, timeout: float) -> tuple[int, str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACTAUDIT_")}
    env["PYTHONPATH"] = str(root)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if cache:
        env["ACTAUDIT_CACHE_DIR"] = cache
    t0 = time.monotonic()
    try:
        p = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        code, out = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        code, out = -1, "timeout"
    return code, out, time.monotonic() - t0


def mutate(m: Mutation, work: Path, shared_cache: str, timeout: float) -> tuple[str, float, str]:
    d = Path(tempfile.mkdtemp(prefix="mut-", dir=work))
    try:
        make_copy(d)
        f = d / m.file
        text = f.read_text()
        n = text.count(m.old)
        if n != 1:
            return "stale", 0.0, f"the text to mutate occurs {n} times in {m.file}"
        f.write_text(text.replace(m.old, m.new))
        # a mutated oracle must not write into (or read from) the shared oracle cache
        cache = str(d / "cache") if m.file in ORACLE_FILES else shared_cache
        code, out, dt = run_tests(d, m.tests, cache, timeout)
        if code == 0:
            return "SURVIVED", dt, ""
        if code == -1:
            return "caught (timeout)", dt, ""
        failed = [ln for ln in out.splitlines() if ln.startswith(("FAILED", "ERROR"))]
        return "caught", dt, (failed[0] if failed else out.strip().splitlines()[-1])[:110]
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument(
        "-k", default="", help="only mutations whose name contains one of these comma-separated words"
    )
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--timeout", type=float, default=300.0, help="per mutation, seconds")
    args = ap.parse_args(argv)
    words = [w for w in args.k.split(",") if w] or [""]
    muts = [m for m in MUTATIONS if any(w in m.name for w in words)]
    if args.list:
        for m in muts:
            print(f"{m.name}  [{m.file}; {' '.join(m.tests)}]")
        return 0
    t0 = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="actaudit-mutation-"))
    try:
        shared = str(work / "cache")
        tests = sorted({t for m in muts for t in m.tests})
        base = work / "base"
        base.mkdir()
        make_copy(base)
        code, out, dt = run_tests(base, tests, shared, 1200)
        if code != 0:
            print(out[-3000:])
            print(f"the unmutated tests fail ({' '.join(tests)}): fix them first")
            return 2
        print(f"unmutated: {' '.join(tests)} pass ({dt:.0f} s)")
        caught = 0
        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            futs = [pool.submit(mutate, m, work, shared, args.timeout) for m in muts]
            for m, fut in zip(muts, futs):
                status, dt, why = fut.result()
                caught += status.startswith("caught")
                print(f"{status:17s} {dt:5.1f} s  {m.name}" + (f"\n{'':26s}{why}" if why else ""), flush=True)
        score = caught / len(muts) if muts else 1.0
        print(
            f"\nmutation score: {caught}/{len(muts)} caught = {100 * score:.0f}% "
            f"({time.monotonic() - t0:.0f} s wall, {args.jobs} jobs)"
        )
        return 0 if caught == len(muts) else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
