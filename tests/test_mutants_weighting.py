"""Mutation tests of audit/measure/weighting.py (issue 40, item 1): what mutmut's survivors
showed the other tests leave open, each expectation worked here (exact rationals, mpmath,
hand-worked specs, texts written out).

* the weighted quantile and the exact sums against a quantile and sums in Fraction, on
  hand-made near-ties where float sums decide wrongly and on random masses of every
  magnitude;
* the gate's and the baseline's hooks: every refusal with its key and text, every boundary;
* parsing: each refusal of a parameter list, the bound 1e300, empty parts;
* the overflow destination, the spec's npy: path, the active region and density of the
  report, the ranking keys.
"""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import mpmath as mp
import numpy as np
import pytest

from audit.errors import BadOptionError
from audit.measure import weighting as w
from audit.numbers.formats import get_format


# ------------------------------------------------------------- quantiles, exactly
def exact_quantile(m, u, num, den):
    """Smallest e with (mass of errors <= e) >= num/den (mass of all): Fractions, m > 0."""
    pairs = sorted((float(e), Fraction(float(x))) for x, e in zip(m, u) if x > 0)
    total = sum(x for _, x in pairs)
    cum = Fraction(0)
    for i, (e, x) in enumerate(pairs):
        cum += x
        if (i + 1 == len(pairs) or pairs[i + 1][0] != e) and den * cum >= num * total:
            return e
    raise AssertionError


QS = [(99, 100), (999, 1000), (1, 2), (1, 100)]


def near_ties():
    """Masses whose float sums decide the crossing wrongly (worked by hand): 99 masses of 1
    with errors 0..98, a mass 2^-60 with error 99.5, a mass 1 with error 100.  Total
    100 + 2^-60 exactly, 100 in float64; the 99 smallest reach 99 < 0.99 (100 + 2^-60), the
    100 smallest 99 + 2^-60 >= 0.99 (100 + 2^-60): p99 = 99.5 (float sums say 98)."""
    m = np.array([1.0] * 99 + [2.0**-60, 1.0])
    u = np.array([float(i) for i in range(99)] + [99.5, 100.0])
    yield m, u
    # the same with the tiny mass before the crossing: p99 = 98 exactly at equality
    yield np.array([2.0**-60] + [1.0] * 100), np.array([-0.0 + 0.25] + [float(i + 1) for i in range(100)])
    # exact equality 99/100 of the total, all integers: the crossing input itself
    yield np.array([1.0] * 100), np.arange(100.0)
    # the smallest mass after the crossing (worked: T = 2 + 2^-60, half of it 1 + 2^-61; 1 < it,
    # 2 >= it: p50 = 2.0): the exact prefix sums must be taken on the total's base
    yield np.array([1.0, 1.0, 2.0**-60]), np.array([1.0, 2.0, 3.0])
    # a prefix whose float sum rounds down (1 + 2^-53 + 2^-53 is 1 in float64) reaches half the
    # total exactly (2 (1 + 2^-52) >= 2 + 2^-52 + 2^-60) where the float sums tie: p50 = 3.0
    yield np.array([1.0, 2.0**-53, 2.0**-53, 1.0, 2.0**-60]), np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    # a total mass of one subnormal: q T underflows to 0 for q = 1/100 (no bin crosses it)
    yield np.array([5e-324]), np.array([3.0])
    # ties in the errors: the quantile is a value, not an input
    yield np.array([0.25, 0.25, 0.25, 0.25]), np.array([3.0, 1.0, 3.0, 1.0])


def random_cases():
    g = np.random.default_rng(40)
    for n in (1, 2, 3, 17, 200, 3000):
        e = g.integers(-1074, 1000, n) if n < 50 else g.integers(-80, 10, n)
        m = np.ldexp(g.random(n) + 0.5, e)
        u = np.round(g.exponential(2.0, n), 1)  # many ties
        u[g.random(n) < 0.05] = 0.0
        yield m, u


@pytest.mark.parametrize("case", list(near_ties()) + list(random_cases()), ids=lambda c: f"n{len(c[0])}")
def test_every_quantile_path_is_the_exact_one(case):
    m, u = case
    want = [exact_quantile(m, u, a, b) for a, b in QS]
    assert w._quantiles(m, u, QS) == want
    assert w._quantiles_sorted(m, u, QS) == want
    fast = w._quantiles_binned(m, u, QS)
    assert len(fast) == len(QS) and all(f is None or f == x for f, x in zip(fast, want)), (fast, want)
    assert [w.weighted_quantile(m.tolist(), u.tolist(), a, b) for a, b in QS] == want  # lists too


def test_the_fast_path_decides_what_its_bound_decides():
    """1,001 unit masses, errors 0..1000: q T = 990.99 (p99) and 999.999 (p999) fall 0.01 and
    0.001 from the nearest integer sums, far outside the float bound (about 2^-42 here): the
    binned path decides both, 990 and 999, without the exact sums."""
    m, u = np.ones(1001), np.arange(1001.0)
    assert w._quantiles_binned(m, u, [(99, 100), (999, 1000)]) == [990.0, 999.0]
    # errors in several bins (16 per binade): the crossing bin's lower mass counts
    u2 = np.concatenate([np.full(500, 0.25), np.arange(501.0) + 1.0])
    assert w._quantiles_binned(m, u2, [(99, 100), (1, 2), (1, 1000)]) == [491.0, 1.0, 0.25]
    assert w._quantiles_binned(m, u2, [(1, 1001)]) == [None]  # 1 of 1,001: an exact tie at the first
    # a single input, and the last bin (NaN errors sort after every number)
    assert w._quantiles_binned(np.array([2.0]), np.array([3.5]), [(99, 100)]) == [3.5]
    assert w._quantiles_binned(np.array([1.0, 1.0]), np.array([1.0, np.nan]), [(1, 3)]) == [1.0]


def test_a_nan_error_sorts_last_and_holds_its_mass():
    # a finite result with a NaN error (a defect upstream) keeps its mass in the total: with
    # masses 1 and 1, 3/4 of the total is reached only with the NaN (worked by hand)
    m, u = np.array([1.0, 1.0]), np.array([1.0, np.nan])
    assert math.isnan(w._quantiles(m, u, [(3, 4)])[0]) and w._quantiles(m, u, [(1, 4)]) == [1.0]
    fast = w._quantiles_binned(m, u, [(3, 4)])
    assert fast == [None] or math.isnan(fast[0])


def test_the_near_tie_goes_to_the_exact_sums():
    m, u = next(near_ties())
    assert w.weighted_quantile(m, u, 99, 100) == 99.5
    assert w._quantiles_binned(m, u, [(99, 100)]) == [None]  # the float bound cannot tell
    # zero masses never decide, and no mass at all gives NaN
    z = np.array([0.0, 0.0, 1.0])
    assert w.weighted_quantile(z, np.array([0.0, 1.0, 7.0]), 1, 100) == 7.0
    assert math.isnan(w.weighted_quantile(np.zeros(3), np.arange(3.0), 99, 100))


@pytest.mark.parametrize(
    "c,t,num,den,g,want",
    [
        (99.0, 100.0, 99, 100, 0.0, None),  # equal: undecided
        (99.0 + 2.0**-40, 100.0, 99, 100, 2.0**-53, True),
        (99.0 - 2.0**-40, 100.0, 99, 100, 2.0**-53, False),
        (99.0 + 2.0**-40, 100.0, 99, 100, 2.0**-30, None),  # the bound is wider than the gap
        (99.0 - 2.0**-40, 100.0, 99, 100, 2.0**-30, None),
        (1.0, 2.0, 1, 2, 0.0, None),
        (1.5, 2.0, 1, 2, 0.01, True),
        (0.5, 2.0, 1, 2, 0.01, False),
    ],
)
def test_decide_is_true_false_or_undecided_by_its_bound(c, t, num, den, g, want):
    # den * c against num * t with relative errors g on both and 4 ulp of rounding: decided
    # only when the gap exceeds them (worked: 100 * (99 + 2^-40) - 99 * 100 = 100 * 2^-40)
    assert w._decide(c, t, num, den, g) is want


def test_decide_bounds_are_relative_and_four_ulp_wide():
    # g = 0: decided only beyond a relative 4 * 2^-53 = 2^-51 (worked in binary: 1 + 2^-51 is
    # exact; (1 - 2^-51)(1 + 2^-51) rounds to 1, (1 - 2^-50)(1 + 2^-51) to 1 - 2^-51)
    assert w._decide(1 + 2.0**-51, 1.0, 1, 1, 0.0) is None
    assert w._decide(1 + 2.0**-50, 1.0, 1, 1, 0.0) is True
    assert w._decide(1 - 2.0**-51, 1.0, 1, 1, 0.0) is None
    assert w._decide(1 - 2.0**-50, 1.0, 1, 1, 0.0) is False
    assert w._decide(3 * (1 + 2.0**-50), 1.0, 3, 1, 0.0) is True  # num scales t, den c
    assert w._decide(1 + 2.0**-50, 3.0, 1, 3, 0.0) is True
    assert w._decide(1 + 2.0**-50, 3.0, 3, 1, 0.0) is False
    # g scales both sides: at g = 0.01 a 1 % gap is not enough, a 3 % one is
    assert w._decide(1.01, 1.0, 1, 1, 0.01) is None and w._decide(1.03, 1.0, 1, 1, 0.01) is True
    assert w._decide(0.99, 1.0, 1, 1, 0.01) is None and w._decide(0.97, 1.0, 1, 1, 0.01) is False


@pytest.mark.parametrize("seed", range(4))
def test_exact_sums_are_the_rational_sums(seed):
    g = np.random.default_rng(seed)
    n = [1, 5, 300, 5000][seed]
    m = np.ldexp(g.random(n) + 0.5, g.integers(-1074, 1023, n) if seed < 2 else g.integers(-60, 60, n))
    m[g.random(n) < 0.1] = 0.0
    m = np.concatenate([m, [5e-324, 2.0**1023 * 1.9999999999999998, 1.0 + 2.0**-52]])
    want = sum((Fraction(float(x)) for x in m), Fraction(0))
    n_, b = w._exact(m)
    assert Fraction(n_) * Fraction(2) ** b == want
    assert b == min(math.frexp(float(x))[1] - 53 for x in m if x > 0)
    assert w.exact_sum(m) == float(want)
    # with a given base (a prefix against the total's): the same sum, on that base
    n2, b2 = w._exact(m[: n // 2 + 1], b)
    assert b2 == b and Fraction(n2) * Fraction(2) ** b == sum(
        (Fraction(float(x)) for x in m[: n // 2 + 1]), Fraction(0)
    )


def test_exact_sums_of_nothing_and_of_negatives():
    assert w._exact(np.array([])) == (0, 0) and w._exact(np.array([]), 7) == (0, 7)
    assert w._exact(np.array([0.0, -0.0])) == (0, 0) and w.exact_sum(np.array([0.0])) == 0.0
    # 0.5 = 2^52 * 2^-53 and 0.25 = 2^52 * 2^-54: on the base -54, 2^53 + 2^52 (lists too)
    assert w._exact([0.5, 0.25]) == (3 * 2**52, -54)
    # limbs: a significand with every bit set in each 18-bit limb
    x = float.fromhex("0x1.fffffffffffffp+0")
    n_, b = w._exact(np.array([x, x, x]))
    assert Fraction(n_) * Fraction(2) ** b == 3 * Fraction(x)
    assert w._exact(np.array([1.0, 1.0])) == (2 * 2**52, -52)


# ------------------------------------------------------------------ the gate hooks
class Bad(Exception):
    pass


def bad(path, msg):
    raise Bad(path, msg)


GOOD = {
    "distribution": "normal:std=1.0",
    "mean_ulp": 1.5,
    "p99_ulp": 8.0,
    "p999_ulp": 100.0,
    "nan": 0.0,
    "inf": 0.0,
    "underflow": 0.001,
    "correctly_rounded": 0.6,
}
KEYS = "correctly_rounded, distribution, inf, mean_ulp, nan, p999_ulp, p99_ulp, underflow"
NUMBER = "must be a number >= 0 (a probability in [0, 1]), 'inf' or 'nan'"


def test_check_entry_accepts_what_a_baseline_records():
    w.check_entry(dict(GOOD), bad)
    for k in ("mean_ulp", "p99_ulp", "p999_ulp"):  # errors may be inf or nan, and above 1
        w.check_entry({**GOOD, k: "inf"}, bad)
        w.check_entry({**GOOD, k: "nan"}, bad)
        w.check_entry({**GOOD, k: 1e9}, bad)
        w.check_entry({**GOOD, k: 0}, bad)
    for k in ("nan", "inf", "underflow", "correctly_rounded"):  # probabilities: [0, 1], 'nan'
        w.check_entry({**GOOD, k: 1}, bad)
        w.check_entry({**GOOD, k: 1.0}, bad)
        w.check_entry({**GOOD, k: 0}, bad)
        w.check_entry({**GOOD, k: "nan"}, bad)


@pytest.mark.parametrize(
    "entry,path,msg",
    [
        ([], "weighted", "must be an object"),
        ({**GOOD, "extra": 1}, "weighted.extra", f"is unknown or missing (keys: {KEYS})"),
        (
            {k: v for k, v in GOOD.items() if k != "p99_ulp"},
            "weighted.p99_ulp",
            f"is unknown or missing (keys: {KEYS})",
        ),
        ({**GOOD, "distribution": ""}, "weighted.distribution", "must be a non-empty string"),
        ({**GOOD, "distribution": 3}, "weighted.distribution", "must be a non-empty string"),
        ({**GOOD, "mean_ulp": -1}, "weighted.mean_ulp", NUMBER),
        ({**GOOD, "mean_ulp": True}, "weighted.mean_ulp", NUMBER),
        ({**GOOD, "mean_ulp": math.inf}, "weighted.mean_ulp", NUMBER),
        ({**GOOD, "mean_ulp": "big"}, "weighted.mean_ulp", NUMBER),
        ({**GOOD, "mean_ulp": None}, "weighted.mean_ulp", NUMBER),
        ({**GOOD, "nan": "inf"}, "weighted.nan", NUMBER),
        ({**GOOD, "inf": "inf"}, "weighted.inf", NUMBER),
        ({**GOOD, "underflow": "inf"}, "weighted.underflow", NUMBER),
        ({**GOOD, "correctly_rounded": "inf"}, "weighted.correctly_rounded", NUMBER),
        ({**GOOD, "nan": 1.0000001}, "weighted.nan", NUMBER),
        ({**GOOD, "inf": 2}, "weighted.inf", NUMBER),
        ({**GOOD, "underflow": 1.5}, "weighted.underflow", NUMBER),
        ({**GOOD, "correctly_rounded": 1.01}, "weighted.correctly_rounded", NUMBER),
        ({**GOOD, "p999_ulp": "NAN"}, "weighted.p999_ulp", NUMBER),
    ],
)
def test_check_entry_refuses_with_its_key_and_text(entry, path, msg):
    with pytest.raises(Bad) as e:
        w.check_entry(entry, bad)
    assert e.value.args == (path, msg)


@pytest.mark.parametrize(
    "k,v,want",
    [
        ("weighted_nan", 0, None),
        ("weighted_nan", 1, None),
        ("weighted_nan", 1.5, "must be a probability in [0, 1]"),
        ("weighted_underflow", 1, None),
        ("weighted_underflow", 1.0001, "must be a probability in [0, 1]"),
        ("weighted_underflow", -0.1, "must be a probability in [0, 1]"),
        ("weighted_underflow", True, "must be a probability in [0, 1]"),
        ("weighted_p99_ulp", 0, None),
        ("weighted_p99_ulp", 7.5, None),
        ("weighted_p99_ulp", 1e12, None),
        ("weighted_mean_ulp", -1, "must be a finite number >= 0"),
        ("weighted_mean_ulp", math.inf, "must be a finite number >= 0"),
        ("weighted_mean_ulp", math.nan, "must be a finite number >= 0"),
        ("weighted_mean_ulp", "4", "must be a finite number >= 0"),
        ("weighted_mean_ulp", False, "must be a finite number >= 0"),
    ],
)
def test_check_tolerance(k, v, want):
    assert w.check_tolerance(k, v) == want


def test_tolerance_failures_each_and_every_text():
    show = lambda v: f"<{v}>"  # noqa: E731
    tol = {"weighted_mean_ulp": 1.0, "weighted_p99_ulp": 2.0, "weighted_nan": 0.0, "weighted_underflow": 0.5}
    weighted = {"mean_ulp": 1.5, "p99_ulp": 2.0, "nan": math.nan, "underflow": 0.75}
    assert w.tolerance_failures(tol, weighted, show) == [
        "weighted mean_ulp = <1.5> exceeds the tolerance <1.0>",
        "tolerance 'weighted_nan' cannot be computed: weighted nan is NaN (no finite result)",
        "weighted underflow = <0.75> exceeds the tolerance <0.5>",
    ]  # p99 = its tolerance passes
    assert w.tolerance_failures(tol, None, show) == [
        f"tolerance '{k}' cannot be computed: the audit has no 'distribution'" for k in w.GATE_TOLERANCES
    ]
    assert w.tolerance_failures({}, None, show) == []


def test_against_baseline_texts():
    show = lambda *a: "|".join(map(repr, a))  # noqa: E731
    base = {"distribution": "normal:std=1.0", **{k: 1.0 for k in w.BASELINE_FIGURES}}
    assert w.against_baseline(0.1, None, None, show) == ([], [])
    assert w.against_baseline(0.1, base, None, show) == (
        [
            "the baseline entry was recorded without and this result under normal:std=1.0; record the baseline again"
        ],
        [],
    )
    assert w.against_baseline(0.1, None, base, show) == (
        [
            "the baseline entry was recorded under distribution normal:std=1.0 and this result has none; "
            "record the baseline again"
        ],
        [],
    )
    other = {**base, "distribution": "uniform:lo=0.0,hi=1.0"}
    assert w.against_baseline(0.1, other, base, show) == (
        ["distribution changed: normal:std=1.0 -> uniform:lo=0.0,hi=1.0; record the baseline again"],
        [],
    )
    now = {
        **base,
        "mean_ulp": 1.1,  # at the slack: passes
        "p99_ulp": 1.2,  # worse
        "p999_ulp": 0.85,  # better
        "nan": math.nan,  # NaN against a number
        "inf": 0.9,  # at the slack: no change
        "correctly_rounded": 0.5,  # falls: worse
        "underflow": 1.0,
    }
    nan_base = {**base, "underflow": math.nan}
    fails, better = w.against_baseline(0.1, now, nan_base, show)
    assert fails == [
        "weighted p99_ulp got worse: 1.0|1.2",
        "weighted nan: 1.0|nan (NaN: cannot be compared)",
        "weighted underflow: nan|1.0 (NaN: cannot be compared)",
        "weighted correctly_rounded got worse: 1.0|0.5",
    ]
    assert better == ["weighted p999_ulp improved: 1.0|0.85"]
    both_nan = {**base, "mean_ulp": math.nan}
    assert w.against_baseline(0.0, both_nan, dict(both_nan), show) == ([], [])  # NaN and NaN: the same
    # and the figures after a NaN pair are still compared
    assert w.against_baseline(0.0, {**both_nan, "p99_ulp": 2.0}, dict(both_nan), show)[0] == [
        "weighted p99_ulp got worse: 1.0|2.0"
    ]
    # 0 against 0 with no slack is no change; a rise from 0 fails
    zero = {**base, "nan": 0.0}
    assert w.against_baseline(0.0, zero, dict(zero), show) == ([], [])
    assert w.against_baseline(0.0, {**zero, "nan": 1e-30}, zero, show)[0] == [
        "weighted nan got worse: 0.0|1e-30"
    ]
    # correctly_rounded rising is an improvement
    assert w.against_baseline(
        0.0, {**base, "correctly_rounded": 1.0}, {**base, "correctly_rounded": 0.5}, show
    ) == (
        [],
        ["weighted correctly_rounded improved: 0.5|1.0"],
    )


def test_baseline_entry_records_the_figures():
    assert w.baseline_entry(None) == {}
    doc = {"distribution": "normal:std=1.0", **{k: 0.5 for k in w.BASELINE_FIGURES}, "mean_abs": 3.0}
    doc["p99_ulp"] = math.inf
    doc["mean_ulp"] = math.nan
    got = w.baseline_entry(doc)
    assert got == {
        "weighted": {
            "distribution": "normal:std=1.0",
            "mean_ulp": "nan",
            "p99_ulp": "inf",
            "p999_ulp": 0.5,
            "nan": 0.5,
            "inf": 0.5,
            "underflow": 0.5,
            "correctly_rounded": 0.5,
        }
    }
    w.check_entry(got["weighted"], bad)


# ------------------------------------------------------------------ parsing, specs
@pytest.mark.parametrize(
    "spec,label",
    [
        ("normal:,std=2", "normal:std=2.0"),  # an empty part is skipped, the next one read
        ("normal:std=2,", "normal:std=2.0"),
        ("normal: STD = 2 , mean = 1e300", "normal:std=2.0,mean=1e+300"),  # the bound itself is allowed
        ("laplace:scale=0.5,mean=-0.0", "laplace:scale=0.5"),
        ("uniform:hi=2,lo=-1", "uniform:lo=-1.0,hi=2.0"),
    ],
)
def test_parse_spellings(spec, label):
    assert w.parse(spec).label == label


@pytest.mark.parametrize(
    "spec,text",
    [
        ("normal:std=1,std=2", "'std=2' is not NAME=NUMBER (finite, given once)"),
        ("normal:std", "'std' is not NAME=NUMBER"),
        ("normal:std=x", "'std=x' is not NAME=NUMBER"),
        ("normal:std=1=2", "'std=1=2' is not NAME=NUMBER"),
        ("normal:std=inf", "'std=inf' is not NAME=NUMBER"),
        ("normal:std=1,mean=1.0000001e300", "'mean=1.0000001e300' is not NAME=NUMBER"),
        ("normal:std=1,mean=-2e300", "'mean=-2e300' is not NAME=NUMBER"),
    ],
)
def test_parse_refuses_each_part(spec, text):
    with pytest.raises(BadOptionError) as e:
        w.parse(spec)
    assert str(e.value) == f"--distribution '{spec}': {text}" + (
        "" if "finite, given once" in text else " (finite, given once)"
    )


def test_overflow_destinations():
    assert w.overflow_to(get_format("fp4_e2m1")) == "max (saturates: in the outermost inputs' mass)"
    assert w.overflow_to(get_format("fp6_e3m2")) == "max (saturates: in the outermost inputs' mass)"
    assert w.overflow_to(get_format("fp16")) == "inf"
    assert w.overflow_to(get_format("fp8_e5m2")) == "inf"
    assert w.overflow_to(get_format("fp8_e4m3")) == "nan"
    assert w.overflow_to(get_format("fp8_e4m3fnuz")) == "nan"


def test_spec_distribution_paths(tmp_path):
    assert w.spec_distribution(tmp_path, "normal:std=2") == "normal:std=2.0"
    assert w.spec_distribution(tmp_path, "npy:acts.npy") == f"npy:{tmp_path / 'acts.npy'}"
    assert w.spec_distribution("specs", "npy:sub/a.npy") == f"npy:{Path('specs') / 'sub' / 'a.npy'}"
    assert w.spec_distribution(tmp_path, "npy:/abs/a.npy") == "npy:/abs/a.npy"


# ------------------------------------------------------------ report and ranking
def test_active_region_of_each_distribution():
    f16 = get_format("fp16")
    t = float(-mp.sqrt(2) * mp.erfinv(2 * mp.mpf("0.0005") - 1))  # Phi^-1(0.9995), mpmath
    lo, hi = w.active_region(w.parse("normal:std=2,mean=1"), f16, None, None)
    assert lo == pytest.approx(1 - 2 * t, rel=1e-12) and hi == pytest.approx(1 + 2 * t, rel=1e-12)
    t = math.log(1000)  # P(X > m + t s) = exp(-t) / 2 = 0.0005
    lo, hi = w.active_region(w.parse("laplace:scale=0.5,mean=-1"), f16, None, None)
    assert lo == pytest.approx(-1 - 0.5 * t, rel=1e-12) and hi == pytest.approx(-1 + 0.5 * t, rel=1e-12)
    assert w.active_region(w.parse("uniform:lo=-1,hi=3"), f16, None, None) == pytest.approx((-1.2, 3.2))
    assert w.active_region(None, f16, -3.0, 5.0) == (-3.0, 5.0)
    assert w.active_region(None, f16, None, 5.0) == (-8.0, 5.0)
    assert w.active_region(None, f16, -3.0, None) == (-3.0, 8.0)
    assert w.active_region(None, f16, 9.0, None) == (-8.0, 8.0)  # lo >= hi: the default
    assert w.active_region(None, f16, 2.0, 2.0) == (-8.0, 8.0)


def npy(tmp_path, values, fmt="fp16"):
    np.save(tmp_path / "s.npy", np.asarray(values, np.float64))
    return w.bind(w.parse(f"npy:{tmp_path / 's.npy'}"), get_format(fmt))


def test_active_region_and_density_of_a_sample(tmp_path):
    # 2000 samples: 1 at -7, 1998 at the integers 0..1997 mod 10 (each 1), 1 at 9 -- the
    # 0.05 % and 99.95 % points of the cumulative counts are the first and last values
    vals = [-7.0] + [float(i % 10) for i in range(1998)] + [9.0]
    d = npy(tmp_path, vals)
    assert w.active_region(d, get_format("fp16"), None, None) == (-7.0, 9.0)
    vals = [-7.0] * 2 + [1.0] * 1996 + [9.0] * 2  # 2 of 2000 = 0.1 % at each end
    lo, hi = w.active_region(npy(tmp_path, vals), get_format("fp16"), None, None)
    assert (lo, hi) == (-7.0, 9.0)
    vals = [-7.0] + [1.0] * 3998 + [9.0]  # 1 of 4000 = 0.025 %: inside the 0.05 % tail
    assert w.active_region(npy(tmp_path, vals), get_format("fp16"), None, None) == (1.0, 1.0)
    # density: a histogram of 160 bins over xs, counts over (total * bin width)
    d = npy(tmp_path, [0.5] * 3 + [1.5] + [np.nan])  # 5 samples, one not finite
    xs = np.linspace(0.0, 16.0, 161)  # bins of width 0.1
    dens = w.density(d, get_format("fp16"), xs)
    want = np.zeros(161)
    want[5] = 3 / (5 * 0.1)  # [0.5, 0.6)
    want[15] = 1 / (5 * 0.1)
    want[160] = 0.0  # xs[-1] = 16: the last bin [15.9, 16], empty
    assert dens == pytest.approx(want, rel=1e-12)


def test_density_bins_at_both_ends(tmp_path):
    # xs from 1 to 17 (bins of 0.1 from 1): mass in the first bin [1, 1.1) and the last
    # [16.9, 17]; the last xs, 17, is in the last bin (numpy's histogram closes it)
    d = npy(tmp_path, [1.0, 1.0, 17.0, 5.0])
    xs = np.linspace(1.0, 17.0, 161)
    dens = w.density(d, get_format("fp16"), xs)
    assert dens[0] == pytest.approx(2 / (4 * 0.1), rel=1e-9) and dens[1] == 0.0
    # xs[-2] = 16.9 and xs[-1] = 17 are both in the last bin, xs[-3] = 16.8 in the one below
    assert dens[-1] == dens[-2] == pytest.approx(1 / (4 * 0.1), rel=1e-9) and dens[-3] == 0.0
    assert dens[40] == pytest.approx(1 / (4 * 0.1), rel=1e-9)  # 5.0: [5.0, 5.1)


def test_edges_raise_no_floating_point_warning():
    import warnings

    for name in ("fp16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1", "fp8_e4m3fnuz"):
        f = get_format(name)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            lo, hi = w.edges(f, f.finite_values())
        assert np.all(lo <= hi)


def test_weighted_quantile_of_python_ints():
    # masses and errors given as Python ints: the same quantile as of floats
    assert w.weighted_quantile([1, 1, 1, 1], [4, 1, 3, 2], 1, 2) == 2.0
    assert w.weighted_quantile([3, 1], [1, 2], 3, 4) == 1.0
    assert w.weighted_quantile([1, 3], [1, 2], 1, 2) == 2.0


def test_density_of_each_continuous_distribution():
    f16 = get_format("fp16")
    xs = np.array([-3.0, -1.0, 0.0, 0.5, 2.0, 5.0])
    got = w.density(w.parse("normal:std=2,mean=0.5"), f16, xs)
    want = [float(mp.npdf(x, 0.5, 2)) for x in xs]
    assert got == pytest.approx(want, rel=1e-13)
    got = w.density(w.parse("laplace:scale=1.5,mean=-1"), f16, xs)
    want = [float(mp.exp(-abs(mp.mpf(x) + 1) / 1.5) / 3) for x in xs]
    assert got == pytest.approx(want, rel=1e-13)
    got = w.density(w.parse("uniform:lo=-1,hi=2"), f16, xs)
    assert got.tolist() == [0.0, 1 / 3, 1 / 3, 1 / 3, 1 / 3, 0.0]  # both ends in the support


def test_order_key_puts_minus_zero_before_plus_zero():
    # 2 * ordinal + 1, less 1 at -0: ordinals of fp16 by bit pattern (1.0 is 0x3c00 = 15360)
    f = get_format("fp16")
    v = np.array([-1.0, -(2.0**-24), -0.0, 0.0, 2.0**-24, 1.0])
    assert w._order_key(f, v).tolist() == [-30719, -1, 0, 1, 3, 30721]


def test_rankings():
    with pytest.raises(
        BadOptionError, match="^--rank must be one of max_ulp, weighted_p99, weighted_mean, got 'p99'$"
    ):
        w.for_ranking("normal:std=1", "p99")
    with pytest.raises(
        BadOptionError, match=r"^--rank weighted_p99 needs --distribution \(the inputs it weights by\)$"
    ):
        w.for_ranking(None, "weighted_p99")
    with pytest.raises(BadOptionError, match="weighted_mean needs"):
        w.for_ranking(None, "weighted_mean")
    assert w.for_ranking(None, "max_ulp") is None
    assert w.for_ranking("normal:std=2", "max_ulp").label == "normal:std=2.0"
    assert w.for_ranking("normal:std=2", "weighted_mean").label == "normal:std=2.0"
    doc = {"p99_ulp": 3.0, "mean_ulp": math.nan}
    assert w.rank_key(doc, "max_ulp") == ()
    assert w.rank_key(None, "max_ulp") == ()
    assert w.rank_key(doc, "weighted_p99") == (3.0, math.inf)
    assert w.rank_key(doc, "weighted_mean") == (math.inf, 3.0)


def test_class_sums_of_no_input():
    assert w._sums(np.array([]), np.array([], np.intp), 6).tolist() == [0.0] * 6
    assert w._sums(np.array([0.5, 0.25, 1.0]), np.array([5, 0, 5]), 6).tolist() == [0.25, 0, 0, 0, 0, 1.5]
