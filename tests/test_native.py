"""The compiled helper of the exhaustive fp32 sweep (audit/numbers/native.py): optional, and
the numpy path's results bit for bit.

* its loops against the numpy code they replace, at hard inputs (four seeds, 200,000
  values each), and the check's own power: each of a list of plausible slips in the C
  source (a comparison turned, an operation reordered, a case dropped) makes it fail;
* whole fp32 sweeps (documents, field for field) with the helper and without it, over
  ranges that reach every rare case: both zeros and the subnormals, the overflow of exp
  and NaN results, the largest finite values and beyond;
* it stays optional: no compiler, a compiler that fails, a check that fails, or
  ACTAUDIT_NO_NATIVE=1 leave the numpy path (the same results), and only a large fp32
  sweep builds it.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

import audit
from audit.io import dumps
from audit.measure import native_check
from audit.measure.sweep import document
from audit.numbers import native

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="no C compiler")


@pytest.fixture
def fresh(monkeypatch):
    """The helper's per-process state, reset (and restored after the test)."""
    monkeypatch.setattr(native, "_LIB", None)
    monkeypatch.setattr(native, "_TRIED", False)
    monkeypatch.delenv("ACTAUDIT_NO_NATIVE", raising=False)
    return monkeypatch


@pytest.fixture(scope="module")
def built():
    lib = native._build()
    assert lib is not None
    return lib


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_loops_agree_with_numpy(built, seed):
    assert native_check.agrees(built, seed=seed, n=200_000)


# plausible slips, each of which some hard input tells apart from the numpy path
MUTANTS = [
    ("s += tol;", "s += tol * 2;"),
    ("uint8_t am = a != b;", "uint8_t am = a < b;"),
    ("rounded[i] = (double)(float)vi;", "rounded[i] = vi;"),
    ("k1 = k1 > emin_key ? k1 : emin_key;", ""),
    ("uint8_t t = (m <= s) & (m < INFINITY);", "uint8_t t = (m < s) & (m < INFINITY);"),
    ("uint8_t t = (m <= s) & (m < INFINITY);", "uint8_t t = m <= s;"),
    ("uint8_t c = (g == r) | ((isnan(g) != 0) & (isnan(r) != 0));", "uint8_t c = g == r;"),
    ("double a = (g - h) - l;", "double a = g - (h + l);"),
    ("ulp_err[i] = (c & (ue > 0.5)) ? 0.5 : ue;", "ulp_err[i] = (ue > 0.5) ? 0.5 : ue;"),
    ("ulp_err[i] = (c & (ue > 0.5)) ? 0.5 : ue;", "ulp_err[i] = (c & (ue >= 0.5)) ? 0.49 : ue;"),
    ("rel_err[i] = a / fabs(h);", "rel_err[i] = a / h;"),
    ("return p2 == INFINITY ? NAN : o;", "return o;"),
    ("double o = p2 > smallest_normal ? p2 : smallest_normal;", "double o = p2;"),
    ("int32_t b = bits32((float)(v != v ? INFINITY : v));", "int32_t b = bits32((float)v);"),
    ("b ^= s;", ""),
    ("if (l != 0 && sgn(l) != sgn(h) &&", "if (l != 0 && sgn(l) == sgn(h) &&"),
    ("ulp1(nextafter(h, 0.0), smallest_normal, scale)", "ulp1(h, smallest_normal, scale)"),
    ("n_settle += (unsure[i] != 0) & !correct[i];", "n_settle += unsure[i] != 0;"),
    ("n_bad += !isfinite(ri);", "n_bad += 0;"),
    ("n_nonfin += !fin;", "n_nonfin += isnan(g);"),
    ("n_big += fin & (fabs(g) >= max_finite);", "n_big += fin & (fabs(g) > max_finite);"),
    ("n_big += fin & (fabs(g) >= max_finite);", "n_big += fabs(g) >= max_finite;"),
    ("n_rn += (bits64(rn[i]) & E) == E;", "n_rn += isnan(rn[i]);"),
    ("n_zero += g == 0;", "n_zero += g == 0 && !signbit(g);"),
    ("n_sign += (b ^ bits64(exact[i])) < 0;", "n_sign += (g < 0) != (exact[i] < 0);"),
    ("nzero += k == 0;", "nzero += u[i] == 0;"),
    ("counts[k - k0] += 1;", "counts[k - k0] = 1;"),
    ("out[0] = nzero;", "out[0] = 0;"),
]


def _build_from(src: str, monkeypatch):
    monkeypatch.setattr(native, "SOURCE", src)
    return native._build()


@pytest.mark.parametrize("old,new", MUTANTS, ids=[f"m{i}" for i in range(len(MUTANTS))])
def test_check_catches_slips(old, new, monkeypatch):
    src = native.SOURCE
    assert src.count(old) == 1, old
    lib = _build_from(src.replace(old, new), monkeypatch)
    assert lib is not None
    assert not native_check.agrees(lib, seed=0, n=200_000)


def _doc(cid: str, rng) -> dict:
    (res,) = audit.sweep(cid, dtype="fp32", range=rng, exhaustive=True)
    doc = json.loads(dumps(document([res], command="x")))
    for r in doc["results"]:
        r.pop("seconds", None)
    return doc


RANGES = [
    (1.0, 1.0078125),  # 2^16 inputs: the common case
    (-2e-40, 2e-40),  # both zeros, subnormals of both signs
    (88.5, 88.8),  # exp's overflow: inf results
    (3.3e38, 3.4028234663852886e38),  # the largest finite values
]
CANDIDATES = [
    "gelu.tanh",
    "silu.fast_exp",
    "exp.schraudolph",
    "exp.libm",
    "tanh.rational",
    "log.fastlog",
    "rsqrt.quake",
    "sigmoid.clamped",
]


@pytest.mark.parametrize("cid", CANDIDATES)
def test_sweeps_identical_with_and_without(cid, fresh):
    from audit.targets.candidates import resolve

    try:
        resolve([cid])
    except Exception:
        pytest.skip(f"no candidate {cid}")
    assert native.prepare(native_check.agrees)
    calls = []
    for name in ("oracle_fp32", "errors_fp32", "mask_counts_fp32"):
        real = getattr(native, name)
        fresh.setattr(native, name, lambda *a, real=real, name=name: calls.append(name) or real(*a))
    with_helper = [_doc(cid, r) for r in RANGES]
    assert {"oracle_fp32", "errors_fp32", "mask_counts_fp32"} <= set(calls)  # (the helper really ran)
    fresh.setenv("ACTAUDIT_NO_NATIVE", "1")
    assert native.lib() is None
    without = [_doc(cid, r) for r in RANGES]
    assert with_helper == without


def test_optional_without_compiler(fresh):
    fresh.setenv("CC", "/nonexistent/cc")
    assert not native.prepare(native_check.agrees)
    assert native.lib() is None
    assert _doc("gelu.tanh", RANGES[0])["results"][0]["finite_count"] == 65537


def test_optional_when_compiler_fails(fresh, tmp_path):
    cc = tmp_path / "cc"
    cc.write_text("#!/bin/sh\nexit 1\n")
    cc.chmod(0o755)
    fresh.setenv("CC", str(cc))
    assert not native.prepare(native_check.agrees)
    assert native.lib() is None


def test_refused_when_check_fails(fresh):
    assert not native.prepare(lambda lib: False)
    assert native.lib() is None


def test_disabled_by_environment(fresh):
    fresh.setenv("ACTAUDIT_NO_NATIVE", "1")
    assert not native.prepare(native_check.agrees)
    assert native._TRIED is False  # nothing built


def test_built_once(fresh):
    calls = []
    assert native.prepare(lambda lib: calls.append(lib) or True)
    assert native.prepare(lambda lib: calls.append(lib) or True)
    assert len(calls) == 1


def test_only_large_fp32_sweeps_build_it(fresh):
    assert not native_check.prepare("fp16", 1 << 30)
    assert not native_check.prepare("fp32", native.SWEEP_MIN - 1)
    assert native._TRIED is False
    assert native_check.prepare("fp32", native.SWEEP_MIN)
    assert native.lib() is not None


def test_hard_values_reach_every_case():
    v = native_check.hard_values()
    assert np.isnan(v).any() and np.isinf(v).any()
    assert (v == 0).any() and np.signbit(v[v == 0]).any() and (~np.signbit(v[v == 0])).any()
    a = np.abs(v[np.isfinite(v)])
    assert ((a > 0) & (a < 2.0**-126)).any()  # fp32 subnormals
    assert ((a > 0) & (a < 2.0**-1022)).any()  # float64 subnormals
    assert (a > 3.4028234663852886e38).any()  # beyond fp32


def test_refused_when_check_raises(fresh):
    def boom(lib):
        raise RuntimeError("a check that breaks")

    assert not native.prepare(boom)
    assert native.lib() is None


def test_compiler_child_holding_stderr_does_not_stall(fresh, tmp_path):
    """A compiler wrapper that leaves a child holding its stderr (a daemonizing cache) does
    not keep prepare waiting: the compiler's output goes to a file, not a pipe."""
    import threading

    gate = tmp_path / "gate"
    os.mkfifo(gate)
    cc = tmp_path / "cc"
    cc.write_text(f'#!/bin/sh\ngcc "$@" || exit 1\n(read x < {gate}) &\nexit 0\n')
    cc.chmod(0o755)
    fresh.setenv("CC", str(cc))
    out = []
    t = threading.Thread(target=lambda: out.append(native.prepare(native_check.agrees)))
    t.start()
    t.join(120)  # (a deadline, not a pause: prepare returns as soon as the compiler exits)
    done = not t.is_alive()
    try:  # let the wrapper's child go (ENXIO: it never started, gcc failed)
        fd = os.open(gate, os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, b"x\n")
        os.close(fd)
    except OSError:
        pass
    t.join()
    assert done and out == [True]


def test_declines_arrays_the_loops_cannot_read(built):
    """Arrays that are not plain 1-D ones of the right type, or a non-finite relative error,
    take the numpy path (None), never a read out of bounds."""
    from audit.numbers.formats import get_format

    fmt = get_format("fp32")
    n = 5000
    ones, twos, zeros = np.ones(n), np.full(n, 2.0), np.zeros(n)
    sn, sc = fmt.smallest_normal, 2.0 ** (1 - fmt.p)
    for unsure in (
        np.zeros((n, 0), bool),
        np.zeros((n, 3), bool),
        np.zeros(n, np.uint8),
        np.zeros(n + 1, bool),
    ):
        assert native.errors_fp32(built, ones, twos, ones, zeros, unsure, sn, sc) is None
    for bad in (ones.astype(np.float32), ones[::2], ones.reshape(50, 100), ones.astype(">f8")):
        assert native.errors_fp32(built, bad, bad, bad, bad, None, sn, sc) is None
        assert native.oracle_fp32(built, bad, 2.0**-45, 2.0**-1000, fmt.emin) is None
    misaligned = np.frombuffer(bytearray(8 * n + 1), np.uint8)[1:].view(np.float64)
    assert not misaligned.flags.aligned
    assert native.oracle_fp32(built, misaligned, 2.0**-45, 2.0**-1000, fmt.emin) is None
    for rel in (np.nan, np.inf, np.full(n, np.nan)):
        assert native.oracle_fp32(built, ones, rel, 2.0**-1000, fmt.emin) is None
    # a bool mask whose bytes are not 0 or 1 still counts as a mask (logical, not bitwise)
    unsure = np.full(n, 2, np.uint8).view(bool)
    assert native.errors_fp32(built, ones, twos, ones, zeros, unsure, sn, sc).n_settle == n


def test_histogram_identical_with_and_without(fresh):
    """A sweep past EXACT_P99_LIMIT counts its errors in a histogram: the same counts by the
    helper's two passes as by numpy's (errors tiny to huge, zeros, inf and NaN)."""
    from audit.measure.metrics import Summary

    assert native.prepare(native_check.agrees)
    rng = np.random.default_rng(7)
    u = np.abs(rng.standard_normal(1 << 16)) * np.exp2(rng.integers(-1074, 1000, 1 << 16))
    u[rng.random(len(u)) < 0.3] = 0.0
    u[:3] = (np.inf, np.nan, 5e-324)
    calls = []
    real = native.key_histogram
    fresh.setattr(native, "key_histogram", lambda *a: calls.append(1) or real(*a))
    s1 = Summary(exact_p99=False)
    s1._bin(u.copy())
    assert calls
    fresh.setenv("ACTAUDIT_NO_NATIVE", "1")
    s2 = Summary(exact_p99=False)
    s2._bin(u.copy())
    assert s1._hist == s2._hist and sum(s1._hist.values()) == len(u)


def test_cached_helper_is_verified_and_rebuilt(fresh, tmp_path):
    """Large sweeps load the helper from the C kernels' cache: a second load compiles
    nothing; an altered object, or one recorded under another key, is compiled again and
    never loaded."""
    fresh.setenv("ACTAUDIT_CACHE_DIR", str(tmp_path))
    fresh.delenv("ACTAUDIT_NO_CACHE", raising=False)
    real = native.compile_to
    calls = []
    fresh.setattr(native, "compile_to", lambda *a: calls.append(1) or real(*a))
    assert native_check.agrees(native_check.cached())
    (so,) = (tmp_path / "ckernels" / "native").glob("*.so")
    assert len(calls) == 1
    assert native_check.agrees(native_check.cached())
    assert len(calls) == 1  # (loaded from the cache)
    data = so.read_bytes()
    so.write_bytes(data[: len(data) // 2])  # truncated
    assert native_check.agrees(native_check.cached())
    assert len(calls) == 2
    rec = so.with_suffix(".json")
    doc = json.loads(rec.read_text())
    rec.write_text(json.dumps({**doc, "key": "0" * 64}))  # another key
    assert native_check.agrees(native_check.cached())
    assert len(calls) == 3
    assert so.read_bytes() == data  # (the same source, flags and compiler: the same object)


def test_large_sweep_uses_the_cache(fresh, tmp_path):
    fresh.setenv("ACTAUDIT_CACHE_DIR", str(tmp_path))
    fresh.delenv("ACTAUDIT_NO_CACHE", raising=False)
    assert native_check.prepare("fp32", native.SWEEP_MIN)
    assert list((tmp_path / "ckernels" / "native").glob("*.so"))


CHUNK_CANDIDATES = [
    "gelu.tanh",
    "exp.libm",
    "log.libm",
    "rsqrt.div_sqrt",
    "sigmoid.exp",
    "erf.libm",
    "log1p.naive",
    "tanh.exp",
]


def _fp32_inputs() -> np.ndarray:
    """Finite fp32 inputs of every kind: both zeros, subnormals, ties' neighbours, huge."""
    from audit.numbers.formats import get_format

    v = get_format("fp32").round(native_check.hard_values(seed=5, n=20_000))
    v = v[np.isfinite(v)]
    return np.concatenate([[0.0, -0.0, 88.72283935546875, 88.72284698486328, -103.97207641601562], v])


def _stages(cid: str, x: np.ndarray, variant: int):
    """The oracle, the per-input errors, the masks and a histogram Summary of one chunk."""
    from audit.measure import findings
    from audit.measure.metrics import Summary, point_errors
    from audit.numbers.formats import get_format
    from audit.oracle import oracle
    from audit.targets.candidates import resolve

    (c,) = resolve([cid])
    fmt = get_format("fp32")
    p = c.ref.with_defaults({})
    ov = oracle._compute(c.ref, fmt, x, p)
    got = np.asarray(c.evaluate(x, fmt, fmt, p), dtype=np.float64)
    with np.errstate(all="ignore"):
        if variant == 1:  # one step off, every other input
            got[::2] = fmt.round(
                np.nextafter(got[::2].astype(np.float32), np.float32(np.inf)).astype(np.float64)
            )
        elif variant == 2:  # NaN, +-inf, zeros, +-max and sign flips sprinkled in
            rng = np.random.default_rng(3)
            for val in (np.nan, np.inf, -np.inf, 0.0, -0.0, fmt.max_finite, -fmt.max_finite):
                got[rng.random(len(got)) < 0.02] = val
            flip = rng.random(len(got)) < 0.05
            got[flip] = -got[flip]
    e = point_errors(
        x,
        got,
        ov,
        fmt,
        settle=lambda idx: oracle.settle(c.ref, fmt, ov, idx, x, p),
        beyond=lambda idx, g: oracle.beyond_errors(c.ref, fmt, x[idx], g, p),
    )
    m = findings.masks(e, c, fmt, p)
    s = Summary(exact_p99=False)
    s.add(e, fmt)
    return ov, e, m, s


def _bits(a) -> bytes:
    return np.ascontiguousarray(a).tobytes()


@pytest.mark.parametrize("cid", CHUNK_CANDIDATES)
@pytest.mark.parametrize("variant", [0, 1, 2])
def test_chunk_stages_identical_with_and_without(cid, variant, fresh):
    """Each stage of a chunk (oracle values, per-input errors, finding masks, the p99
    histogram) bit for bit the same with the helper and without it, at inputs and results
    that reach every rare case: zeros of both signs, subnormals, overflow, poles, undefined
    values, NaN and infinite results, +-max, sign flips, results one step off."""
    x = _fp32_inputs()
    assert native.prepare(native_check.agrees)
    calls = []
    for name in ("oracle_fp32", "errors_fp32", "mask_counts_fp32", "key_histogram"):
        real = getattr(native, name)
        fresh.setattr(native, name, lambda *a, real=real, name=name: calls.append(name) or real(*a))
    a = _stages(cid, x, variant)
    assert {"errors_fp32", "mask_counts_fp32", "key_histogram"} <= set(calls)  # (the helper ran)
    assert "oracle_fp32" in calls or cid in ("exp.libm", "log.libm", "rsqrt.div_sqrt", "log1p.naive")
    fresh.setenv("ACTAUDIT_NO_NATIVE", "1")
    b = _stages(cid, x, variant)
    (ova, ea, ma, sa), (ovb, eb, mb, sb) = a, b
    for f in ("rounded", "hi", "lo", "unsure"):
        assert _bits(getattr(ova, f)) == _bits(getattr(ovb, f)), f
    assert ova.n_mpmath == ovb.n_mpmath
    for f in (
        "got",
        "exact",
        "exact_lo",
        "rounded",
        "ulp_err",
        "ulp_dist",
        "abs_err",
        "rel_err",
        "cls",
        "correct",
    ):
        assert _bits(getattr(ea, f)) == _bits(getattr(eb, f)), f
    assert ma.keys() == mb.keys()
    for k in ma:
        assert _bits(ma[k][0]) == _bits(mb[k][0]) and ma[k][1] == mb[k][1], k
    (da, ra), (db, rb) = sa.state(), sb.state()
    assert (
        json.dumps(da, sort_keys=True) == json.dumps(db, sort_keys=True) and da["hist"] and not ra and not rb
    )


def test_a_fast_math_compiler_changes_nothing_of_the_process(tmp_path):
    """A $CC with -ffast-math (or -Ofast) would link crtfastmath.o, whose constructor sets
    flush-to-zero for the whole process when the library loads: the helper's flags keep it
    out (run in a child process: a failure would flush this one)."""
    import subprocess
    import sys

    code = (
        "import numpy as np\n"
        "from audit.numbers import native\n"
        "from audit.measure import native_check\n"
        "ok = native.prepare(native_check.agrees, native_check.cached)\n"
        "print(ok, (np.array([5e-324]) * 1.0)[0] == 5e-324, (np.array([1e-45], np.float32) * 1)[0] > 0)\n"
    )
    for cc in ("gcc -ffast-math", "gcc -Ofast"):
        env = {**os.environ, "CC": cc, "ACTAUDIT_CACHE_DIR": str(tmp_path / cc.split()[1])}
        env.pop("ACTAUDIT_NO_NATIVE", None)
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert out.stdout.split() == ["True", "True", "True"], (cc, out.stdout, out.stderr)


def test_cached_helper_is_bound_to_the_cpu(fresh, tmp_path):
    """-march=native: an object built for one CPU is never loaded on another (a shared cache)."""
    fresh.setenv("ACTAUDIT_CACHE_DIR", str(tmp_path))
    fresh.delenv("ACTAUDIT_NO_CACHE", raising=False)
    assert native_check.agrees(native_check.cached())
    fresh.setattr(native_check, "_cpu_identity", lambda: "another cpu")
    assert native_check.agrees(native_check.cached())
    assert len(list((tmp_path / "ckernels" / "native").glob("*.so"))) == 2
    fresh.setattr(native_check, "_cpu_identity", lambda: None)  # unknown: built privately
    assert native_check.agrees(native_check.cached())
    assert len(list((tmp_path / "ckernels" / "native").glob("*.so"))) == 2
