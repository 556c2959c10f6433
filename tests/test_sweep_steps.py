"""The steps of audit.sweep (audit/measure/sweep.py), one by one.

Every expectation is worked out here: counts of format values by hand (E4M3 has 2 x 127
finite values, fp16 2 x (31 x 1024) = 63488, fp32 2^23 values in each binade), error
figures in mpmath, orders and messages from the rule each step implements."""

from __future__ import annotations

import inspect

import ml_dtypes
import mpmath as mp
import numpy as np
import pytest

import audit
from audit.errors import BadOptionError, BadParameterError, UnknownNameError
from audit.measure import sweep as S
from audit.measure import weighting
from audit.numbers.formats import get_format
from audit.targets import semantics

E4, F16, BF16, F32 = (get_format(n) for n in ("fp8_e4m3", "fp16", "bf16", "fp32"))
IEEE = semantics.IEEE


def cat(cid):
    return audit.catalog()[cid]


def targets(**kw) -> S._Targets:
    base = dict(cands=[], external=[], engines=[], funcs=[], params=None, eng_params={}, keyed=[], swept=[])
    return S._Targets(**{**base, **kw})


def paths(**kw) -> S._Paths:
    base = dict(storages=[E4], computes=None, auto=False, sems=[IEEE], out_fmt=None)
    return S._Paths(**{**base, **kw})


def plan(t=None, p=None, **kw) -> S._Plan:
    return S._Plan(t or targets(cands=[cat("gelu.tanh")]), p or paths(), **kw)


def e4m3_values() -> list[float]:
    """Every finite E4M3 value, by hand: (1 + m/8) 2^(e-7) for e = 1..15 (m = 7 too below
    e = 15, whose m = 7 is NaN), m/8 2^-6 for e = 0; both signs, both zeros (-0 first)."""
    pos = [m / 8 * 2.0**-6 for m in range(1, 8)]
    pos += [(1 + m / 8) * 2.0 ** (e - 7) for e in range(1, 16) for m in range(8) if (e, m) != (15, 7)]
    return sorted([-v for v in pos] + [-0.0, 0.0] + pos)  # (stable: -0 before +0)


def sigmoid_f64_in_e4m3(x):
    """A candidate: the float64 sigmoid rounded to E4M3."""
    y = 1 / (1 + np.exp(-np.asarray(x, dtype=np.float64)))
    return y.astype(ml_dtypes.float8_e4m3fn).astype(np.asarray(x).dtype)


def max_abs_mp(xs, ys) -> float:
    """max |y - sigmoid(x)| with the sigmoid in mpmath at 50 digits."""
    with mp.workdps(50):
        return float(max(abs(mp.mpf(float(y)) - 1 / (1 + mp.exp(-mp.mpf(float(x))))) for x, y in zip(xs, ys)))


def test_e4m3_values_by_hand():
    v = e4m3_values()
    assert len(v) == 254 and v[-1] == 448.0 and v[0] == -448.0 and len(set(v)) == 253  # -0 == 0
    assert np.signbit(v[126]) and not np.signbit(v[127])


# ---------------------------------------------------------------- the arguments
def test_check_texts_takes_strings_and_none_and_names_the_first_bad_one():
    S._check_texts(reference=None, device="cpu", scheduler="tcp://h:1")
    with pytest.raises(BadOptionError, match="^reference must be a string, got int$"):
        S._check_texts(reference=3, device=4.5)
    with pytest.raises(BadOptionError, match="^device must be a string, got float$"):
        S._check_texts(reference="gelu", device=4.5)


# ---------------------------------------------------------------- the targets
def test_resolve_targets_sorts_the_targets_by_kind():
    def f(x):
        return x

    t = S._resolve_targets(
        ["gelu.tanh", "torch:gelu", "ort:Tanh", "c:k.c:f"],
        [f],
        [cat("gelu.erf"), cat("gelu.tanh")],  # gelu.tanh named already: once
        None,
        "gelu",
        False,
        False,
        None,
    )
    assert [c.id for c in t.cands] == ["gelu.tanh", "gelu.erf"]
    assert t.external == ["torch:gelu", "c:k.c:f"] and t.engines == ["ort:Tanh"] and t.funcs == [f]
    assert t.params is None and t.eng_params == {} and t.keyed == [] and t.swept == []


def test_resolve_targets_splits_the_parameters():
    names = ["ort:Gelu", "leaky_relu.mul", "torch:leaky_relu", "c:k.c:f", "lut:t.npy"]
    params = {"approximate": ["none", "tanh"], "alpha": [0.1, 0.2, 0.1]}
    t = S._resolve_targets(names, [], [], params, None, False, False, None)
    # ONNX Gelu takes approximate (an attribute); the rest goes to the others
    assert t.eng_params == {"approximate": ["none", "tanh"]}
    assert t.params == {"alpha": [0.1, 0.2, 0.1]}
    assert t.keyed == ["torch:leaky_relu"]  # keyword targets: not C kernels, not tables
    assert t.swept == ["alpha"]  # two distinct values
    assert S._resolve_targets(names, [], [], {"alpha": [0.1, 0.1]}, None, False, False, None).swept == []
    assert S._resolve_targets(names, [], [], {"alpha": 0.3}, None, False, False, None).swept == []
    one = S._resolve_targets(["leaky_relu.mul", "torch:leaky_relu"], [], [], {}, None, False, False, None)
    assert one.keyed == [] and one.params == {}  # no -p values: no keyed target


def test_resolve_targets_refusals():
    with pytest.raises(BadOptionError, match=r"^a callable target needs reference= \("):
        S._resolve_targets([], [abs], [], None, None, False, False, None)
    with pytest.raises(
        BadParameterError, match=r"^parameter 'approximate': 'tanh' is not a number \(and no engine"
    ):
        S._resolve_targets(["gelu.tanh"], [], [], {"approximate": "tanh"}, None, False, False, None)
    with pytest.raises(BadOptionError, match="^gelu.tanh approximates gelu, not --reference silu$"):
        S._resolve_targets(["gelu.tanh"], [], [], None, "silu", False, False, None)
    with pytest.raises(UnknownNameError):
        S._resolve_targets(["no_such_thing"], [], [], None, None, False, False, None)


def test_derived_candidates():
    g = [cat("gelu.tanh")]
    assert S._derived_candidates(g, False, False, False, [], None) == g
    assert [c.id for c in S._derived_candidates(g, True, False, False, [], None)] == ["gelu_grad.tanh"]
    assert [c.id for c in S._derived_candidates(g, False, True, False, [], None)] == ["gelu_bwd.tanh"]
    # --backward refuses external targets and dumps, not callables
    assert [c.id for c in S._derived_candidates(g, False, True, False, [abs], None)] == ["gelu_bwd.tanh"]
    for external, funcs, dump in ((True, [], None), (False, [abs], None), (False, [], "d.npy")):
        with pytest.raises(BadOptionError, match="^--grad applies to catalog candidates$"):
            S._derived_candidates(g, True, False, external, funcs, dump)
    with pytest.raises(BadOptionError, match="^--grad and --backward exclude each other"):
        S._derived_candidates(g, True, True, False, [], None)
    for external, dump in ((True, None), (False, "d.npy")):
        with pytest.raises(BadOptionError, match="^--backward applies to catalog candidates$"):
            S._derived_candidates(g, False, True, external, [], dump)
    with pytest.raises(BadOptionError, match="^no derivative candidate for relu.max "):
        S._derived_candidates([cat("relu.max")], True, False, False, [], None)


# ---------------------------------------------------------------- the paths
def names(fmts):
    return None if fmts is None else [f.name for f in fmts]


def test_resolve_paths_formats_and_semantics():
    t = targets()
    p = S._resolve_paths("fp16,bf16", "auto", None, None, None, t, None)
    assert names(p.storages) == ["fp16", "bf16"] and p.computes is None and p.auto
    assert p.sems == [IEEE] and p.out_fmt is None
    assert S._resolve_paths("fp16", " AUTO ", None, None, None, t, None).auto
    p = S._resolve_paths(["fp16", "bf16"], "fp32,fp16", ["ieee", "ftz", "ftz"], None, None, t, None)
    assert names(p.storages) == ["fp16", "bf16"] and names(p.computes) == ["fp32", "fp16"]
    assert not p.auto and [s.ftz for s in p.sems] == [False, True]  # the repeated ftz once
    p = S._resolve_paths("fp16", None, None, None, None, t, None)
    assert p.computes is None and not p.auto


def test_resolve_paths_cflags_and_out_dtype():
    lut = targets(external=["lut:t.npy"])
    assert S._resolve_paths("bf16", None, None, None, "fp8_e4m3", lut, None).out_fmt.name == "fp8_e4m3"
    assert S._resolve_paths("bf16", None, None, None, "fp8_e4m3", targets(), None).out_fmt.name == "fp8_e4m3"
    S._resolve_paths("fp16", None, None, "-O3", None, targets(external=["c:k.c:f"]), None)
    with pytest.raises(BadOptionError, match=r"^--cflags applies to C kernels \(c:FILE.c:FUNCTION\)$"):
        S._resolve_paths("fp16", None, None, "-O3", "fp16,bf16", lut, None)  # before --out-dtype
    out_msg = "^--out-dtype applies to catalog candidates and lut: tables$"
    for t, dump in (
        (targets(external=["torch:gelu"]), None),
        (targets(funcs=[abs]), None),
        (targets(), "d.npy"),
    ):
        with pytest.raises(BadOptionError, match=out_msg):
            S._resolve_paths("bf16", None, None, None, "fp8_e4m3", t, dump)
    with pytest.raises(BadOptionError, match="^--out-dtype takes one format, got 'fp16,bf16'$"):
        S._resolve_paths("bf16", None, None, None, "fp16,bf16", targets(), None)


def test_compute_formats():
    assert names(S._compute_formats(paths(auto=True), BF16)) == ["bf16", "fp32"]
    assert names(S._compute_formats(paths(auto=True), F32)) == ["fp32"]  # not narrower than 32 bits
    assert names(S._compute_formats(paths(auto=True), get_format("fp64"))) == ["fp64"]
    assert names(S._compute_formats(paths(), BF16)) == ["bf16"]
    assert names(S._compute_formats(paths(computes=[F32, F16]), BF16)) == ["fp32", "fp16"]


# ---------------------------------------------------------------- the checks
def test_count_results_by_hand():
    two = [cat("gelu.tanh"), cat("sigmoid.clamped")]
    t = targets(cands=two, params={"limit": [1, 2, 3]})
    # per format: gelu.tanh once + sigmoid.clamped 3 limits = 4; x 2 storages x 3 computes
    assert S._count_results(plan(t, paths(storages=[F16, BF16], computes=[F16, BF16, F32]))) == 24
    assert S._count_results(plan(t, paths(storages=[F16, BF16]))) == 8  # no computes: 1 each
    keyed = targets(
        cands=[cat("sigmoid.clamped")], params={"limit": [1, 2, 3], "beta": 0.5}, keyed=["torch:a", "m:f"]
    )
    assert S._count_results(plan(keyed)) == 3 + 2 * 3 * 1


SELECTION_REFUSALS = [
    (
        dict(t=targets(cands=[cat("gelu.tanh")], params={"zzz": 1})),
        "no selected candidate has a parameter 'zzz'",
    ),
    (
        dict(p=paths(storages=[F16, BF16]), dump="d.npy", reference="gelu"),
        "a dump holds one format: give a single --dtype",
    ),
    (dict(dump="d.npy"), "--dump needs --reference (the function the device computed)"),
    (dict(t=targets()), "no candidate given"),
    (
        dict(p=paths(storages=[F16, BF16]), samples=10),
        "fp16, bf16 are swept exhaustively; --samples applies to fp32 and fp64",
    ),
    (
        dict(
            t=targets(external=["torch:leaky_relu"], keyed=["torch:leaky_relu"], params={"a": 1}),
            device="cuda",
        ),
        "--param on torch: ops runs them on the CPU; drop --device",
    ),
    (dict(device="cuda"), "--device applies to torch: candidates"),
    (dict(timeout=0), "--timeout must be a number of seconds in (0, 1e6), got 0"),
    (dict(timeout=1e6), "--timeout must be a number of seconds in (0, 1e6), got 1000000.0"),
    (dict(timeout="5"), "--timeout must be a number of seconds in (0, 1e6), got '5'"),
]


@pytest.mark.parametrize("kw, message", SELECTION_REFUSALS)
def test_check_selection_refusals(kw, message):
    with pytest.raises((BadOptionError, UnknownNameError)) as e:
        S._check_selection(plan(**kw))
    assert str(e.value) == message


def test_check_selection_accepts():
    S._check_selection(plan())
    S._check_selection(plan(targets(cands=[cat("sigmoid.clamped")], params={"limit": [4, 8]})))
    S._check_selection(plan(targets(external=["torch:x"], keyed=["torch:x"], params={"zzz": 1})))
    S._check_selection(plan(targets(), dump="d.npy", reference="gelu"))
    S._check_selection(plan(p=paths(storages=[F16, F32]), samples=10))  # fp32 takes them
    S._check_selection(plan(targets(external=["torch:gelu"]), device="cuda"))
    S._check_selection(plan(timeout=0.5))


EXECUTION_REFUSALS = [
    (
        dict(checkpoint="ck", keep_points=True),
        "--checkpoint keeps merged results, not per-input data: it cannot be combined with --csv or --report",
    ),
    (
        dict(t=targets(cands=[cat("sigmoid.clamped")], params={"limit": list(range(1, 4098))})),
        "4097 results (candidates x parameter values x formats) is more than 4096: sweep fewer at a time",
    ),
    (dict(executor="nope"), "unknown executor 'nope' (known: local, dask)"),
    (
        dict(executor="dask", exhaustive=True),
        "--executor dask needs --scheduler ADDRESS (e.g. tcp://host:8786)",
    ),
    (dict(scheduler="tcp://h:1", exhaustive=True), "--scheduler applies to --executor dask"),
    (dict(checkpoint="ck"), "--checkpoint and --executor apply to chunked sweeps: add --exhaustive"),
    (
        dict(executor="dask", scheduler="tcp://h:1"),
        "--checkpoint and --executor apply to chunked sweeps: add --exhaustive",
    ),
]


@pytest.mark.parametrize("kw, message", EXECUTION_REFUSALS)
def test_check_execution_refusals(kw, message):
    with pytest.raises(BadOptionError) as e:
        S._check_execution(plan(**kw))
    assert str(e.value) == message


def test_check_execution_accepts():
    S._check_execution(plan())
    S._check_execution(plan(targets(cands=[cat("sigmoid.clamped")], params={"limit": list(range(1, 4097))})))
    S._check_execution(plan(checkpoint="ck", exhaustive=True))
    S._check_execution(plan(executor="dask", scheduler="tcp://h:1", exhaustive=True))


def test_distribution():
    assert S._distribution(plan(), None) is None
    d = S._distribution(plan(), "normal:std=1")
    assert d.kind == "normal"
    with pytest.raises(BadOptionError, match="^--distribution weights every input of a range: fp32 needs"):
        S._distribution(plan(p=paths(storages=[F32])), "normal:std=1")
    S._distribution(plan(p=paths(storages=[F32]), exhaustive=True), "normal:std=1")
    with pytest.raises(BadOptionError, match="^--distribution and --checkpoint exclude each other"):
        S._distribution(plan(checkpoint="ck"), "normal:std=1")
    with pytest.raises(BadOptionError, match="^--distribution: unknown distribution 'nope'"):
        S._distribution(plan(), "nope")


def test_check_kept_inputs_counts_fp32_inputs_by_hand():
    fp32 = paths(storages=[F32])
    # [1, 2]: the 2^23 values of the binade and 2 itself; the limit is 2^24
    S._check_kept_inputs(plan(p=fp32, keep_points=True, exhaustive=True, range=(1.0, 2.0)))
    S._check_kept_inputs(plan(p=fp32, keep_points=True, exhaustive=True, range=(1.0, 2.0 - 2.0**-22)))
    msg = (
        "^per-input data \\(CSV, reports\\) of 16777217 fp32 inputs would not fit in memory "
        "\\(limit 16777216\\): narrow --range$"
    )
    with pytest.raises(BadOptionError, match=msg):  # [1, 4]: two binades and 4
        S._check_kept_inputs(plan(p=fp32, keep_points=True, exhaustive=True, range=(1.0, 4.0)))
    S._check_kept_inputs(plan(p=fp32, keep_points=False, exhaustive=True))  # nothing kept
    S._check_kept_inputs(plan(p=fp32, keep_points=True))  # sampled
    S._check_kept_inputs(plan(p=paths(storages=[F16]), keep_points=True, exhaustive=True))  # enumerable


# ---------------------------------------------------------------- per storage format
class Fake:
    """A candidate as _evaluation_paths sees it: its id, whether its compute is its own
    (native), and the compute it runs in (fixed, or the path's)."""

    def __init__(self, id, native=False, fixed=None):
        self.id, self.native, self.fixed = id, native, fixed

    def compute_format(self, cf):
        return self.fixed or cf

    def __repr__(self):
        return self.id


def test_evaluation_paths_run_each_compute_once():
    a, n, x = Fake("follows"), Fake("native", native=True), Fake("fixed32", fixed=F32)
    got = [(cf.name, c.id) for cf, c in S._evaluation_paths(paths(auto=True), F16, [a, n, x])]
    # auto: fp16 then fp32; native once; fixed32 already ran in fp32
    assert got == [("fp16", "follows"), ("fp16", "native"), ("fp16", "fixed32"), ("fp32", "follows")]
    got = [(cf.name, c.id) for cf, c in S._evaluation_paths(paths(computes=[F16, F32]), F16, [a, n, x])]
    # given computes: each path runs, the native candidate once
    assert got == [
        ("fp16", "follows"),
        ("fp16", "native"),
        ("fp16", "fixed32"),
        ("fp32", "follows"),
        ("fp32", "fixed32"),
    ]


def test_domain_of_makes_one_domain_per_arity():
    doms: dict = {}
    d1 = S._domain_of(plan(), E4, 1, doms)
    assert d1.count == 254 and sorted(d1.values.tolist()) == e4m3_values()
    assert S._domain_of(plan(), E4, 1, doms) is d1  # made once
    d2 = S._domain_of(plan(exhaustive=True), E4, 2, doms)
    assert d2.count == 254 * 254 and set(doms) == {1, 2}
    # fp16 in [1, 2]: the 1024 values of the binade and 2
    assert S._domain_of(plan(range=(1.0, 2.0)), F16, 1, {}).count == 1025


def test_domain_of_refuses_kept_data_beyond_the_limit():
    # every pair of finite fp16 values: 63488^2, chunked
    msg = "of 4030726144 fp16 inputs would not fit in memory \\(limit 16777216\\): narrow --range$"
    with pytest.raises(BadOptionError, match=msg):
        S._domain_of(plan(keep_points=True, exhaustive=True), F16, 2, {})
    assert S._domain_of(plan(keep_points=False, exhaustive=True), F16, 2, {}).count == 63488**2


def halve(x):
    return x / 2


def test_external_candidates_wrap_callables():
    """A callable is a native candidate named by its qualified name."""
    ext = S._external_candidates(plan(targets(funcs=[halve]), reference="relu"), E4)
    assert [(c.id, c.native, c.arity) for c in ext] == [("halve", True, 1)]


def test_external_candidates_one_per_engine_value():
    t = targets(engines=["ort:Gelu"], eng_params={"approximate": ["none", "tanh"]})
    ext = S._external_candidates(plan(t, paths(storages=[F16])), F16)
    assert [c.id for c in ext] == ["ort:Gelu[approximate=none]", "ort:Gelu[approximate=tanh]"]


def test_external_candidates_refuse_operation_flags(tmp_path):
    from audit.targets import lut

    lut.write_table(tmp_path / "g.npy", "gelu", E4, E4)
    name = f"lut:{tmp_path / 'g.npy'}"
    t = targets(external=[name])
    ok = S._external_candidates(plan(t, paths(sems=[IEEE, semantics.parse("ftz_out")]), reference="gelu"), E4)
    assert [c.id for c in ok] == [name]  # a conversion flag applies
    sems = [IEEE, semantics.parse("ftz"), semantics.parse("contract")]
    msg = f"^{name}: --semantics contract, ftz acts on a formula's operations, which an external kernel"
    with pytest.raises(BadOptionError, match=msg):
        S._external_candidates(plan(t, paths(sems=sems), reference="gelu"), E4)


def test_evaluate_one_result_against_mpmath():
    (c,) = S._external_candidates(plan(targets(funcs=[sigmoid_f64_in_e4m3]), reference="sigmoid"), E4)
    p = plan(analyze=False)
    dom = S._domain_of(p, E4, 1, {})
    r = S._evaluate(p, E4, E4, c, {}, IEEE, dom, None)
    xs = e4m3_values()
    ys = sigmoid_f64_in_e4m3(np.array(xs))
    assert (r.candidate, r.reference, r.dtype, r.compute) == (
        "sigmoid_f64_in_e4m3",
        "sigmoid",
        "fp8_e4m3",
        "native",
    )
    assert r.domain.count == 254 and r.semantics is None and "_outputs" not in r.__dict__
    assert r.max_abs == pytest.approx(max_abs_mp(xs, ys), rel=1e-12)
    # with a swept parameter the outputs are kept for the parameter-effect check
    r = S._evaluate(plan(targets(swept=["limit"]), analyze=False), E4, E4, c, {}, IEEE, dom, None)
    assert "_outputs" in r.__dict__


def test_evaluate_refuses_a_distribution_over_pairs():
    p = plan(exhaustive=True, analyze=False)
    dom = S._domain_of(p, E4, 2, {})
    wd = weighting.bind(weighting.parse("normal:std=1"), E4)
    msg = "^--distribution applies to functions of one input; swiglu.silu_mul takes two$"
    with pytest.raises(BadOptionError, match=msg):
        S._evaluate(p, E4, E4, cat("swiglu.silu_mul"), {}, IEEE, dom, wd)


def write_dump(path):
    """A device's E4M3 outputs of the float64 sigmoid, every finite input in golden order
    (ascending: -448 first)."""
    xs = e4m3_values()
    np.save(path, sigmoid_f64_in_e4m3(np.array(xs)))
    return xs


def test_sweep_dump_against_mpmath(tmp_path):
    xs = write_dump(tmp_path / "d.npy")
    r = S._sweep_dump(plan(targets(), dump=str(tmp_path / "d.npy"), reference="sigmoid", analyze=False), E4)
    assert (r.candidate, r.reference, r.compute) == ("dump:d.npy", "sigmoid", "native")
    assert r.domain.count == 254 and r.domain.exhaustive
    assert r.max_abs == pytest.approx(max_abs_mp(xs, sigmoid_f64_in_e4m3(np.array(xs))), rel=1e-12)


def test_sweep_storage_orders_the_results(tmp_path):
    write_dump(tmp_path / "d.npy")
    t = targets(cands=[cat("sigmoid.naive"), cat("sigmoid.clamped")], params={"limit": [4, 8]})
    p = plan(t, paths(computes=[E4, F32]), analyze=False, dump=str(tmp_path / "d.npy"), reference="sigmoid")
    got = [(r.candidate, r.compute, r.params.get("limit")) for r in S._sweep_storage(p, E4)]
    # compute formats outermost, then the candidates, then their parameter sets; the dump last
    assert got[:-1] == [
        ("sigmoid.naive", "fp8_e4m3", None),
        ("sigmoid.clamped", "fp8_e4m3", 4),
        ("sigmoid.clamped", "fp8_e4m3", 8),
        ("sigmoid.naive", "fp32", None),
        ("sigmoid.clamped", "fp32", 4),
        ("sigmoid.clamped", "fp32", 8),
    ]
    assert got[-1] == ("dump:d.npy", "native", None) and len(got) == 7


def test_sweep_storage_one_result_per_semantics():
    p = plan(p=paths(sems=[IEEE, semantics.parse("ftz_out")]), analyze=False)
    ieee, ftz = S._sweep_storage(p, E4)
    assert ieee.semantics is None and ftz.semantics.ftz_out


def test_public_signature_unchanged():
    """audit.sweep keeps its arguments, in order, with their defaults."""
    sig = inspect.signature(audit.sweep)
    assert list(sig.parameters) == [
        "targets", "dtype", "compute", "range", "samples", "seed", "exhaustive", "params", "grad",
        "backward", "grid", "default_grid", "keep_points", "analyze", "max_ulp", "atol", "reference", "device",
        "dump", "dump_dtype", "workers", "executor", "scheduler", "checkpoint", "progress",
        "timeout", "semantics", "cflags", "out_dtype", "distribution",
    ]  # fmt: skip
    assert sig.parameters["dtype"].default == "fp16" and sig.parameters["device"].default == "cpu"
    assert sig.parameters["executor"].default == "local" and sig.parameters["analyze"].default is True
