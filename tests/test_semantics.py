"""Semantics flags (audit/targets/semantics.py) against hand-worked cases, exact rationals and mpmath.

Each expected value is derived here (comments) or computed independently (Fractions,
numpy's float16 arithmetic, mpmath), never copied from the tool's output."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

import audit
from audit.cli import main
from audit.errors import ActauditError, BadFileError
from audit.numbers.formats import FORMATS
from audit.targets import semantics as S
from audit.targets.compute import evaluate

F16, F32, BF16, E4M3 = FORMATS["fp16"], FORMATS["fp32"], FORMATS["bf16"], FORMATS["fp8_e4m3"]


def run_formula(fn, x, fmt, sem, storage=None, x2=None):
    return evaluate(
        fn,
        np.asarray(x, dtype=np.float64),
        storage or fmt,
        fmt,
        {},
        None if x2 is None else np.asarray(x2, dtype=np.float64),
        semantics=S.parse(sem),
    )


# ---------------------------------------------------------------- parsing
def test_parse_canonical_and_errors():
    assert S.parse("daz,ftz").canonical() == S.parse("ftz,daz").canonical() == "ftz,daz"
    assert S.parse("ieee").is_default and S.parse("exp=cr").is_default
    assert S.parse("saturate").saturate_ops and S.parse("saturate").saturate_out
    assert S.parse("cuda_fast").name == "cuda_fast" and S.parse("cuda_fast").envelope
    for bad in (
        "ieee,saturate",
        "fzt",
        "round=up",
        "div=table:x.npz",
        "exp=gelu.tanh",
        "seed=3",
        "draws=0,round=stochastic",
        "div=bound:x",
        "tanh=rcp",
        "",
    ):
        with pytest.raises(ActauditError):
            S.parse(bad)


def test_default_semantics_is_todays_path_bit_for_bit():
    cat = audit.catalog()
    x = F16.finite_values()
    for cid in ("gelu.tanh", "sigmoid.naive", "exp.u20", "elu.expm1", "tanh.rational"):
        c = cat[cid]
        a = c.evaluate(x, F16, F16)
        b = c.with_semantics(S.parse("ieee")).evaluate(x, F16, F16)
        assert np.array_equal(a.view(np.uint64), b.view(np.uint64)), cid


# ---------------------------------------------------------- ftz and daz
def test_ftz_flushes_subnormal_results_keeping_the_sign():
    # fp16: 2^-14 is the smallest normal; 2^-10 * -2^-6 = -2^-16 is subnormal -> -0 with ftz
    y = run_formula(lambda x, m: x * m.const(-(2.0**-6)), [2.0**-10, 1.0], F16, "ftz")
    assert y[0] == 0 and math.copysign(1, y[0]) == -1 and y[1] == -(2.0**-6)
    # without ftz the subnormal stays
    y = run_formula(lambda x, m: x * m.const(-(2.0**-6)), [2.0**-10], F16, "ieee")
    assert y[0] == -(2.0**-16)


def test_ftz_is_after_rounding():
    # fp32: p q = (1 - 2^-46) 2^-126, tiny before rounding, rounds to 2^-126: kept (as x86)
    p, q = float.fromhex("0x1.000002p-63"), float.fromhex("0x1.fffffcp-64")
    y = run_formula(lambda x, m: x * m.const(q), [p], F32, "ftz")
    assert y[0] == 2.0**-126


def test_daz_reads_subnormal_operands_as_zero():
    # fp16: 2^-24 (subnormal) * 2^10 = 2^-14 exactly under IEEE; 0 under daz
    def f(x, m):
        return x * m.const(2.0**10)

    assert run_formula(f, [2.0**-24], F16, "ieee")[0] == 2.0**-14
    assert run_formula(f, [2.0**-24], F16, "daz")[0] == 0

    # comparisons read through daz: -2^-24 < 0 is false once it is read as -0
    def g(x, m):
        return m.where(x < 0.0, m.const(1.0), m.const(2.0))

    assert run_formula(g, [-(2.0**-24)], F16, "ieee")[0] == 1.0
    assert run_formula(g, [-(2.0**-24)], F16, "daz")[0] == 2.0


def test_conversion_flags():
    # storage fp16, compute fp32: an fp16 subnormal input is normal in fp32, so only daz_in
    # flushes it; x/1 returns it unchanged otherwise
    def f(x, m):
        return x * 1.0

    x = [2.0**-20]
    assert run_formula(f, x, F32, "ftz,daz", storage=F16)[0] == 2.0**-20
    assert run_formula(f, x, F32, "daz_in", storage=F16)[0] == 0
    # compute fp32, storage fp16: the result 2^-20 is subnormal in fp16: ftz_out flushes it
    assert run_formula(f, x, F32, "ftz_out", storage=F16)[0] == 0


# ------------------------------------------------------------ saturation
def test_saturation_of_operations_and_nan():
    def f(x, m):
        return x + x  # 60000 + 60000 overflows fp16

    assert run_formula(f, [60000.0, -60000.0], F16, "ieee").tolist() == [math.inf, -math.inf]
    assert run_formula(f, [60000.0, -60000.0], F16, "saturate").tolist() == [65504.0, -65504.0]

    def g(x, m):
        return x - x  # inf - inf = NaN; saturation mode: 0 (CANN), or kept

    assert math.isnan(run_formula(g, [math.inf], F16, "ieee")[0])
    assert run_formula(g, [math.inf], F16, "saturate")[0] == 0
    assert math.isnan(run_formula(g, [math.inf], F16, "saturate,sat_nan=keep")[0])

    # E4M3FN has no inf: 400 * 2 = 800 rounds to NaN in IEEE-like rounding, 448 saturated
    def h(x, m):
        return x * 2.0

    assert math.isnan(run_formula(h, [384.0], E4M3, "ieee")[0])
    assert run_formula(h, [-384.0], E4M3, "saturate")[0] == -448.0


def test_saturation_scope_ops_vs_conversion():
    # compute fp32, storage fp16: 1e5 is finite in fp32, overflows only in the conversion
    def f(x, m):
        return x * 2.0

    x = [50000.0]
    assert run_formula(f, x, F32, "saturate_ops", storage=F16)[0] == math.inf
    assert run_formula(f, x, F32, "saturate_out", storage=F16)[0] == 65504.0


def test_sigmoid_naive_saturate_has_no_nan():
    ieee, sat = audit.sweep("sigmoid.naive", dtype="fp16", semantics=["ieee", "saturate"])
    assert ieee.semantics is None and sat.semantics.name == "saturate"
    assert ieee.nan_count > 0 and "nan" in {f.kind for f in ieee.findings}
    assert sat.nan_count == 0 and "nan" not in {f.kind for f in sat.findings}
    # exp(12) overflows fp16 (65504 < e^12 = 162755): saturated to 65504, then
    # 65504 / (1 + 65504) = 65504 / 65504 = 1 (1 + 65504 rounds to 65504), sigmoid(12) rounds to 1
    c = audit.catalog()["sigmoid.naive"].with_semantics(S.parse("saturate"))
    assert c.evaluate(np.array([12.0]), F16, F16)[0] == 1.0


# ----------------------------------------------------------- contraction
A32 = float(np.array([0x3F800B50], dtype=np.uint32).view(np.float32)[0])
B32 = float(np.array([0x337FE962], dtype=np.uint32).view(np.float32)[0])


def test_contract_fuses_a_single_use_product():
    # a b + 1 with a = 0x3f800b50, b = 0x337fe962: the exact value is just above the
    # midpoint 1 + 2^-24; one rounding gives 1 + 2^-23, rounding the product first gives 1
    def f(x, m):
        return x * m.const(B32) + 1.0

    assert run_formula(f, [A32], F32, "ieee")[0] == 1.0
    assert run_formula(f, [A32], F32, "contract")[0] == 1 + 2.0**-23

    # 1 - a (-b): c - a*b is fma(-a, b, c)
    def g(x, m):
        return 1.0 - x * m.const(-B32)

    assert run_formula(g, [A32], F32, "contract")[0] == 1 + 2.0**-23


def test_contract_looks_through_a_negation():
    # -(a (-b)) + 1 = a b + 1 exactly: fused, one rounding gives 1 + 2^-23 (as above)
    def f(x, m):
        return -(x * m.const(-B32)) + 1.0

    assert run_formula(f, [A32], F32, "ieee")[0] == 1.0
    assert run_formula(f, [A32], F32, "contract")[0] == 1 + 2.0**-23

    def g(x, m):  # the negated product is also used by a multiplication: two uses, no FMA
        n = -(x * m.const(-B32))
        return (n + 1.0) + n * 0.0

    assert run_formula(g, [A32], F32, "contract")[0] == 1.0


def test_contract_leaves_products_with_two_uses():
    def f(x, m):
        p = x * m.const(B32)
        return (p + 1.0) + p * 0.0  # p has two uses: not contracted

    assert run_formula(f, [A32], F32, "contract")[0] == 1.0

    def g(x, m):
        p = x * m.const(B32)
        return m.exp(p) + 0.0 * (p + 1.0)  # one use is not an addition

    assert run_formula(g, [A32], F32, "contract")[0] == run_formula(g, [A32], F32, "ieee")[0]


# ------------------------------------------------------ conversion rounding
def ref_round(v: float, fmt, mode: str) -> float:
    """Independent rounding of a float64 into fmt with Fractions."""
    if v == 0:
        return v
    f = Fraction(v)
    e = math.floor(math.log2(abs(v)))
    q = Fraction(2) ** (max(e, fmt.emin) - fmt.p + 1)
    t = f / q
    lo = math.floor(t)
    frac = t - lo
    if mode == "rtz":
        n = math.trunc(t)
    elif mode == "rtp":
        n = math.ceil(t)
    elif mode == "rtn":
        n = lo
    elif mode == "rna":
        n = lo + 1 if frac > Fraction(1, 2) or (frac == Fraction(1, 2) and t > 0) else lo
        if frac == Fraction(1, 2) and t < 0:
            n = lo
    r = float(n * q)
    if abs(r) > fmt.max_finite:
        to_max = mode == "rtz" or (mode == "rtp" and r < 0) or (mode == "rtn" and r > 0)
        r = math.copysign(fmt.max_finite if to_max else (math.inf if fmt.has_inf else math.nan), r)
    return r if r != 0 else math.copysign(0.0, v)


@pytest.mark.parametrize("fmt", [F16, BF16, E4M3, F32])
@pytest.mark.parametrize("mode", ["rtz", "rtp", "rtn", "rna"])
def test_directed_and_away_rounding_against_fractions(fmt, mode):
    rng = np.random.default_rng(3)
    v = np.ldexp(rng.random(400) + 0.5, rng.integers(fmt.emin - fmt.p - 1, fmt.emax + 2, 400))
    v = np.concatenate([v, -v])
    # ties: midpoints of the format (p + 1 bits)
    m = np.ldexp(rng.integers(1 << fmt.p, 1 << (fmt.p + 1), 100) | 1, -fmt.p)
    v = np.concatenate([v, m, -m, [fmt.max_finite * 1.5, -fmt.max_finite * 1.5]])
    got = S.round_to(fmt, v, mode)
    for a, g in zip(v.tolist(), got.tolist()):
        w = ref_round(a, fmt, mode)
        assert (math.isnan(w) and math.isnan(g)) or (g == w and math.copysign(1, g) == math.copysign(1, w)), (
            a,
            g,
            w,
        )


def test_stochastic_rounding_is_seeded_and_unbiased():
    # 1 + 2^-10 in bf16 (p = 8) lies 1/4 of the way from 1 to 1 + 2^-7: up with probability 1/4
    x = np.arange(20000, dtype=np.float64)  # distinct inputs: independent draws
    v = np.full(20000, 1 + 2.0**-9)
    u = S.uniforms(x, v, seed=5, draw=0)
    r = S.round_to(BF16, v, "stochastic", u)
    assert set(np.unique(r).tolist()) <= {1.0, 1 + 2.0**-7}
    assert abs(np.mean(r == 1 + 2.0**-7) - 0.25) < 0.02
    assert np.array_equal(r, S.round_to(BF16, v, "stochastic", S.uniforms(x, v, 5, 0)))
    assert not np.array_equal(r, S.round_to(BF16, v, "stochastic", S.uniforms(x, v, 5, 1)))


def test_stochastic_sweep_reports_worst_and_mean():
    (r,) = audit.sweep("gelu.tanh", dtype="bf16", compute="fp32", semantics="round=stochastic,draws=3,seed=1")
    st = r.stochastic
    assert st["draws"] == 3 and st["max_ulp"]["worst"] == r.max_ulp
    assert st["max_ulp"]["mean"] <= st["max_ulp"]["worst"]
    assert r.to_dict()["semantics"]["stochastic"]["draws"] == 3


# --------------------------------------------------------------- primitives
def test_bound_envelope_is_one_ulp_from_the_correctly_rounded_primitive():
    x = np.linspace(-8, 8, 513)
    x = F16.round(x)
    y = run_formula(lambda t, m: m.exp(t), x, F16, "exp=bound:1")
    mpmath.mp.prec = 80
    for xi, yi in zip(x.tolist(), y.tolist()):
        cr = float(F16.round([float(mpmath.exp(xi))])[0])
        steps = abs(int(F16.ordinal([yi])[0]) - int(F16.ordinal([cr])[0]))
        assert steps == 1, (xi, yi, cr)


def test_div_by_reciprocal():
    # a * RN(1/b) with two fp16 roundings, by numpy's float16 arithmetic (computed in float32,
    # 24 >= 2*11 + 2 bits, so each operation is correctly rounded)
    a = F16.finite_values()[::97]
    a = a[np.isfinite(a) & (a != 0)]
    b = np.full_like(a, 3.0)
    want = (a.astype(np.float16) * (np.float16(1) / np.float16(3))).astype(np.float64)
    got = run_formula(lambda p, q, m: p / q, a, F16, "div=rcp", x2=b)
    assert np.array_equal(got, want)
    assert not np.array_equal(got, run_formula(lambda p, q, m: p / q, a, F16, "ieee", x2=b))


def test_catalog_candidate_as_primitive():
    # exp=exp.u20 in fp32: m.exp(x) gives exactly exp.u20's own result
    x = F32.round(np.linspace(-80, 80, 1001))
    u20 = audit.catalog()["exp.u20"].evaluate(x, F32, F32)
    got = run_formula(lambda t, m: m.exp(t), x, F32, "exp=exp.u20")
    assert np.array_equal(got, u20)


# --------------------------------------------------------------- findings
def test_elu_ftz_underflow_finding_names_the_flushing_operation():
    (r,) = audit.sweep("elu.expm1", dtype="fp32", semantics="ftz", samples=20000)
    unf = [f for f in r.findings if f.kind == "underflow"]
    assert unf, [f.kind for f in r.findings]
    c = unf[0].cause
    assert c["op"] == "expm1" and c["file"].endswith("elu.py") and "ftz" in c["text"]
    # the flushed tail: negative subnormal inputs (expm1(x) = x(1 + x/2 + ...) is subnormal)
    lo, hi = unf[0].intervals[0]
    assert hi < 0 and lo >= -F32.smallest_normal
    (i,) = audit.sweep("elu.expm1", dtype="fp32", samples=20000)
    assert "underflow" not in {f.kind for f in i.findings}


# --------------------------------------------------------------- CLI and gate
def test_cli_semantics_side_by_side_json(capsys):
    code = main(
        [
            "sweep",
            "sigmoid.naive",
            "--dtype",
            "fp16",
            "--compute",
            "fp16",
            "--semantics",
            "ieee",
            "--semantics",
            "saturate",
            "--json",
            "-",
        ]
    )
    out, _ = capsys.readouterr()
    assert code == 0
    doc = json.loads(out)
    names = [r["semantics"]["name"] for r in doc["results"]]
    assert names == ["ieee", "saturate"]
    assert doc["results"][0]["nan_count"] > 0 == doc["results"][1]["nan_count"]


def test_cli_bad_semantics_is_one_line(capsys):
    for bad in ("ieee,saturate", "fzt"):
        code = main(["sweep", "relu.max", "--dtype", "fp8_e4m3", "--semantics", bad])
        _, err = capsys.readouterr()
        assert code == 2 and err.startswith("actaudit: error:") and err.count("\n") == 1


def test_gate_spec_semantics_and_baseline_keys(tmp_path):
    from audit.gate import check as gate

    spec = tmp_path / "actaudit.toml"
    spec.write_text(
        'baseline = "b.json"\n[[audit]]\nname = "s"\ntargets = ["sigmoid.naive"]\n'
        'dtype = "fp8_e4m3"\nsemantics = ["ieee", "saturate"]\n'
    )
    sp = gate.load_spec(spec)
    base = gate.make_baseline(sp, gate.run_spec(sp))
    keys = sorted(base["entries"])
    assert keys == ["s/sigmoid.naive/fp8_e4m3/fp8_e4m3", "s/sigmoid.naive/fp8_e4m3/fp8_e4m3@saturate"]
    assert base["entries"][keys[1]]["nan_count"] == 0 < base["entries"][keys[0]]["nan_count"]
    changes = gate.compare(sp, gate.run_spec(sp), base)  # the same run passes its baseline
    assert [c.status for c in changes] == ["ok", "ok"]
    del base["entries"][keys[1]]  # a semantics without a baseline entry fails
    changes = gate.compare(sp, gate.run_spec(sp), base)
    assert [(c.key, c.status) for c in changes if c.status == "fail"] == [(keys[1], "fail")]
    spec.write_text('[[audit]]\nname = "s"\ntargets = ["relu"]\ndtype = "fp16"\nsemantics = ["ftz,bogus"]\n')
    with pytest.raises(BadFileError, match="semantics"):
        gate.load_spec(spec)


# ----------------------------------------------------------------- profiles
def test_profiles_are_their_flags():
    assert S.parse("ascend_sat").canonical() == "saturate"
    assert S.parse("bf16_trunc").canonical() == "round=rtz"
    cf = S.parse("cuda_fast")
    assert cf.ftz and cf.daz and cf.contract and cf.prim("div") == "rcp"
    assert cf.bound("exp") == 106 and cf.bound("tanh") == 8192 and cf.envelope
    for name in S.PROFILES:
        assert S.parse(name).name == name


def test_bf16_trunc_is_bit_truncation_of_the_fp32_result():
    # the fp32 result's low 16 bits dropped (an integer mask on the float32 bit pattern) is
    # the bf16 value of a truncating conversion
    cand = audit.catalog()["gelu.tanh"]
    x = BF16.finite_values()
    y32 = cand.evaluate(x, F32, F32).astype(np.float32)
    want = (y32.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32).astype(np.float64)
    got = cand.with_semantics(S.parse("bf16_trunc")).evaluate(x, BF16, F32)
    fin = np.isfinite(want)
    assert np.array_equal(got[fin], want[fin])
    assert np.array_equal(np.signbit(got[fin]), np.signbit(want[fin]))
    assert not np.array_equal(got, cand.evaluate(x, BF16, F32))  # differs from RNE


def test_cuda_fast_is_labelled_an_envelope(capsys):
    code = main(
        [
            "sweep",
            "sigmoid.exp",
            "--dtype",
            "fp16",
            "--compute",
            "fp32",
            "--semantics",
            "cuda_fast",
            "--json",
            "-",
        ]
    )
    out, _ = capsys.readouterr()
    assert code == 0
    sem = json.loads(out)["results"][0]["semantics"]
    assert sem["name"] == "cuda_fast" and sem["envelope"] is True


def test_table_primitive(tmp_path):
    # a table of exp at every fp16 value: here exp(x) rounded to fp16 by mpmath, written as a
    # golden-format .npz (x, y), then one entry changed: the lookup must return the table's
    # values, the changed one included
    x = F16.finite_values()
    mpmath.mp.prec = 60
    y = np.array([float(mpmath.exp(v)) for v in x.tolist()])
    y = F16.round(y)
    i = int(np.flatnonzero(x == 1.0)[0])
    y[i] = 2.0  # "the device" gives exp(1) = 2
    path = tmp_path / "exp_table.npz"
    np.savez(path, x=x, y=y)
    got = run_formula(lambda t, m: m.exp(t), x, F16, f"exp=table:{path}")
    assert np.array_equal(got, y)
    # as a primitive inside a catalog formula, via the CLI
    code = main(
        [
            "sweep",
            "sigmoid.exp",
            "--dtype",
            "fp16",
            "--compute",
            "fp16",
            "--semantics",
            f"exp=table:{path}",
            "--quiet",
        ]
    )
    assert code == 0
    with pytest.raises(ActauditError, match="16 bits or fewer"):
        run_formula(lambda t, m: m.exp(t), [1.0], F32, f"exp=table:{path}")
    np.savez(tmp_path / "short.npz", x=x[:100], y=y[:100])
    with pytest.raises(ActauditError, match="every finite"):
        run_formula(lambda t, m: m.exp(t), [1.0], F16, f"exp=table:{tmp_path / 'short.npz'}")


def test_csv_has_a_semantics_column_when_asked(tmp_path, capsys):
    import csv

    out = tmp_path / "o.csv"
    assert (
        main(
            [
                "sweep",
                "relu.max",
                "--dtype",
                "fp8_e4m3",
                "-c",
                "fp8_e4m3",
                "--semantics",
                "ieee",
                "--semantics",
                "ftz",
                "--csv",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    rows = list(csv.DictReader(out.open()))
    assert {r["semantics"] for r in rows} == {"ieee", "ftz"} and len(rows) == 2 * 254


def test_changed_inputs_against_ieee():
    # sigmoid.naive in fp16: saturation changes exactly the inputs whose IEEE result is NaN
    # (x >= 11.09: exp overflows) or that involve inf (none among finite inputs otherwise)
    ieee, sat = audit.sweep("sigmoid.naive", dtype="fp16", semantics=["ieee", "saturate"])
    assert ieee.changed is None
    assert sat.changed["count"] == ieee.nan_count
    assert math.isnan(sat.changed["first"]["ieee"]) and sat.changed["first"]["got"] == 1.0


def test_every_flag_runs_through_the_whole_pipeline():
    # findings with causes, specials, hidden overflows and gated pairs, under each semantics
    # (a bound:K envelope once crashed on the one-input trace of a cause)
    sems = [
        "cuda_fast",
        "contract",
        "ftz,daz,ftz_in,daz_out",
        "saturate,sat_nan=keep",
        "div=rcp,exp=exp.u20,tanh=tanh.rational",
        "round=rna",
        "round=stochastic,draws=2",
    ]
    rs = audit.sweep(
        ["gelu", "sigmoid.naive", "swiglu.silu_mul", "elu.expm1"], dtype="fp8_e4m3", semantics=sems
    )
    assert len(rs) == 18 * len(sems)  # 15 gelu (incl. the mlas and onednn models), sigmoid.naive, swiglu, elu
    assert {r.semantics.name for r in rs} == {S.parse(s).name for s in sems}
    assert all(r.changed is not None for r in rs)


def test_golden_under_conversion_flags(tmp_path, capsys):
    # fp16 exp: e^x overflows fp16 for x > 11.09 (RN gives inf): saturated, 65504; e^x is
    # subnormal for x < -9.70 (2^-14 = e^-9.70): ftz_out flushes it to +0; daz_in reads a
    # subnormal x as 0, so its value is e^0 = 1 (RN of e^x at x = 2^-24 is also 1: kept)
    out = tmp_path / "g.npz"
    assert (
        main(["golden", "exp", "--dtype", "fp16", "-o", str(out), "--semantics", "saturate,ftz_out,daz_in"])
        == 0
    )
    capsys.readouterr()
    z = np.load(out)
    x, y = z["x"], z["y"]
    assert np.all(y[x >= 11.1] == 65504.0)
    mpmath.mp.prec = 60
    tiny = (x < -9.71) & (x > -17.0)
    assert np.all(y[tiny] == 0) and np.all(np.exp(x[tiny]) < 2.0**-14)
    sub = (np.abs(x) < 2.0**-14) & (x != 0)
    assert np.all(y[sub] == 1.0)
    # gelu(x) = x/2 + O(x^2) is a nonzero subnormal for most subnormal x; read as 0 it is 0
    for flags, nonzero in (("ieee", True), ("daz_in", False)):
        assert main(["golden", "gelu", "--dtype", "fp16", "-o", str(out), "--semantics", flags]) == 0
        z = np.load(out)
        sub = (np.abs(z["x"]) < 2.0**-14) & (z["x"] != 0)
        assert bool(np.any(z["y"][sub] != 0)) == nonzero
    code = main(["golden", "exp", "--dtype", "fp16", "-o", str(out), "--semantics", "ftz"])
    _, err = capsys.readouterr()
    assert code == 2 and "golden applies the flags" in err


def test_round_in_truncates_the_inputs():
    # storage fp32, compute bf16: 1 + 2^-8 + 2^-20 rounds up to 1 + 2^-7 in bf16 (above the
    # midpoint 1 + 2^-8), truncates to 1; 1 + 2^-8 exactly (a tie) goes away from zero to
    # 1 + 2^-7 with rna, to even (1) with rne
    def f(x, m):
        return x * 1.0

    x = [1 + 2.0**-8 + 2.0**-20, 1 + 2.0**-8]
    assert run_formula(f, x, BF16, "ieee", storage=F32).tolist() == [1 + 2.0**-7, 1.0]
    assert run_formula(f, x, BF16, "round_in=rtz", storage=F32).tolist() == [1.0, 1.0]
    assert run_formula(f, x, BF16, "round_in=rna", storage=F32).tolist() == [1 + 2.0**-7] * 2
    assert S.parse("round_in=rna").canonical() == "round_in=rna"
    with pytest.raises(ActauditError):
        S.parse("round_in=stochastic")


def test_new_primitives_exp2_rsqrt_sigmoid():
    # exp2(3) = 8, rsqrt(4) = 0.5, sigmoid(0) = 0.5 exactly: powers of two, whose fp16
    # neighbour above (8 + 2^-7, 0.5 + 2^-11) is twice as far as the one below, so the
    # envelope keeps the one above
    sem = "exp2=bound:1,rsqrt=bound:1,sigmoid=bound:1"
    for prim, x, want, moved in (
        ("exp2", 3.0, 8.0, 8.0 + 2.0**-7),
        ("rsqrt", 4.0, 0.5, 0.5 + 2.0**-11),
        ("sigmoid", 0.0, 0.5, 0.5 + 2.0**-11),
    ):

        def f(t, m, prim=prim):
            return getattr(m, prim)(t)

        assert run_formula(f, [x], F16, "ieee")[0] == want
        assert run_formula(f, [x], F16, sem)[0] == moved
    assert S.parse("sigmoid=sigmoid.rational").prim("sigmoid") == "sigmoid.rational"


def test_saturated_overflow_is_a_finding_with_its_cause():
    # e^x > 65520 (the fp16 overflow threshold) for x >= 11.09375: IEEE gives inf, the exact
    # rounding; saturation gives 65504, a finite result where the exact value overflows
    (r,) = audit.sweep("exp.libm", dtype="fp16", semantics="saturate")
    (ovf,) = [f for f in r.findings if f.kind == "overflow"]
    assert ovf.intervals[0][0] == 11.09375 and math.exp(11.09375) > 65520 > math.exp(11.0859375)
    assert ovf.cause["op"] == "exp" and "saturated" in ovf.cause["text"]


def test_assert_accuracy_under_a_semantics():
    from audit.testing import assert_accuracy

    assert_accuracy(
        "sigmoid.naive", dtype="fp16", max_ulp=2, semantics="saturate", specials=True
    )  # saturation turns the NaN input into 0
    with pytest.raises(AssertionError, match="NaN results"):
        assert_accuracy("sigmoid.naive", dtype="fp16", max_ulp=2)
    with pytest.raises(AssertionError, match="under ftz"):
        assert_accuracy("elu.expm1", dtype="fp32", samples=5000, max_ulp=1, semantics="ftz")


def test_tf32_profile_reads_fp32_ties_away_from_zero():
    """PTX cvt.rna.tf32.f32: TF32 keeps 11 significant bits; 1 + 2^-11 is halfway between 1
    and 1 + 2^-10 (ties away: 1 + 2^-10; ties to even: 1), 1 + 3 2^-11 halfway between
    1 + 2^-10 and 1 + 2^-9 (both rules: away from zero is the even one, 1 + 2^-9)."""
    from audit.numbers.formats import get_format
    from audit.targets.semantics import parse

    f32, t = get_format("fp32"), get_format("tf32")
    x = np.array([1 + 2**-11, -(1 + 3 * 2**-11), 1 + 2**-12])
    ident = lambda v, m: v * 1.0  # noqa: E731
    assert evaluate(ident, x, f32, t, {}, semantics=parse("ieee")).tolist() == [1.0, -(1 + 2**-9), 1.0]
    assert evaluate(ident, x, f32, t, {}, semantics=parse("tf32")).tolist() == [1 + 2**-10, -(1 + 2**-9), 1.0]
    ieee, tf = audit.sweep(
        "gelu.tanh", dtype="fp32", compute="tf32", semantics=["ieee", "tf32"], range=(1, 1.01)
    )
    # the fp32 inputs of [1, 1.01] that are TF32 ties (their low 12 fraction bits 0x800 exactly)
    xs = np.arange(np.float32(1).view(np.uint32), np.float32(1.01).view(np.uint32) + 1, dtype=np.uint32)
    ties = int(((xs & 0xFFF) == 0x800).sum())
    assert ties > 0 and 0 < tf.changed["count"] <= ties  # a changed input is a tie read otherwise
