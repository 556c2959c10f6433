"""One relative-error rule in every path: a zero result for a nonzero exact value below
float64's range has relative error exactly 1 (docs/concepts/exact-decisions.md); every
reference declares its exact zero set; the CSV never writes such a value as a signed zero."""

from __future__ import annotations

import csv

import mpmath as mp
import numpy as np
import pytest

from audit.cli import main
from audit.measure import blocks
from audit.measure.sweep import sweep
from audit.numbers.formats import FORMATS
from audit.oracle.references import REFERENCES
from audit.targets.candidates import catalog


def _mp_params(ref):
    return {k: mp.mpf(repr(float(v))) if isinstance(v, float) else v for k, v in ref.params.items()}


@pytest.mark.parametrize("name", sorted(n for n, r in REFERENCES.items() if r.arity == 1))
def test_exact_zero_sets(name):
    """zero_at against mpmath at every finite fp8_e4m3 value and a few more: f(x) == 0 in
    mpmath (at 200 bits: a nonzero value there is far from 0) exactly where zero_at says."""
    ref = REFERENCES[name]
    assert ref.zero_at is not None, f"{name} declares no exact zero set"
    xs = np.concatenate([FORMATS["fp8_e4m3"].finite_values(), [-3.0, 1.0, -800.0, 800.0, 1e-30]])
    z = np.asarray(ref.zero_at(xs, **ref.params), dtype=bool)
    with mp.workprec(200):
        for x, zx in zip(xs.tolist(), z.tolist()):
            try:
                v = ref.mp(mp.mpf(x), **ref.params)
            except ZeroDivisionError:
                continue
            if mp.isnan(v):
                continue
            assert (v == 0) == zx, (name, x, v, zx)


@pytest.mark.parametrize("name", sorted(n for n, r in REFERENCES.items() if r.arity == 2))
def test_exact_zero_sets_bivariate(name):
    ref = REFERENCES[name]
    assert ref.zero_at is not None, f"{name} declares no exact zero set"
    v8 = FORMATS["fp8_e5m2"].finite_values()[::7]
    a, b = np.repeat(v8, len(v8)), np.tile(v8, len(v8))
    z = np.asarray(ref.zero_at(a, b, **ref.params), dtype=bool)
    with mp.workprec(200):
        for x, y, zx in zip(a.tolist(), b.tolist(), z.tolist()):
            v = ref.mp(mp.mpf(x), mp.mpf(y), **ref.params)
            assert (v == 0) == zx, (name, x, y, v, zx)


def test_exp_below_float64_range_has_relative_error_one():
    """exp(x) < 2^-1075 for x <= -746 (checked here in mpmath); exp.libm's fp32 result 0 there
    has relative error exactly 1."""
    with mp.workprec(100):
        assert mp.exp(-746) < mp.ldexp(1, -1075)
    (r,) = sweep("exp.libm", "fp32", "fp32", range=(-800.0, -746.0), samples=2000, analyze=False)
    assert r.max_rel == 1.0


def test_gelu_bf16_tail_has_relative_error_one():
    """gelu(-38) = -1.1e-314 (a float64 subnormal) down to gelu(-50) = -5e-544: every bf16
    result is -0, relative error 1."""
    with mp.workprec(200):
        g = -38 / mp.mpf(2) * mp.erfc(38 / mp.sqrt(2))
        assert -1.2e-314 < g < -1.0e-314
    (r,) = sweep("gelu.erf", "bf16", "bf16", range=(-50.0, -38.0), analyze=False)
    assert r.max_rel == 1.0


def test_block_relative_error_follows_the_rule():
    """[1 x 31, -40] in mxfp8_e4m3: gelu(-40) = -1.5e-348 quantizes to 0: relative error 1 (not
    the 1's element error 0.0343)."""
    bf = blocks.get_block_format("mxfp8_e4m3")
    x = np.array([1.0] * 31 + [-40.0])
    r = blocks.audit(catalog()["gelu.erf"], bf, x, FORMATS["bf16"], FORMATS["fp32"])
    assert r.max_rel == 1.0
    # an exact zero quantized to 0 has relative error 0: relu at -1
    r0 = blocks.audit(
        catalog()["relu.max"], bf, np.array([1.0] * 31 + [-1.0]), FORMATS["bf16"], FORMATS["fp32"]
    )
    assert r0.max_rel == 0.0


def test_csv_exact_column_keeps_values_below_float64(tmp_path):
    out = tmp_path / "g.csv"
    code = main(
        [
            "sweep",
            "gelu.erf",
            "--dtype",
            "bf16",
            "--compute",
            "bf16",
            "--range",
            "-41:-37",
            "-q",
            "--csv",
            str(out),
        ]
    )
    assert code == 0
    rows = list(csv.DictReader(out.open()))
    assert rows
    for row in rows:
        x = float(row["x"])
        with mp.workprec(200):
            want = x / 2 * mp.erfc(-mp.mpf(x) / mp.sqrt(2))
        got = mp.mpf(row["exact"])
        # float64 values carry the fast path's error (gelu: 2^-36 relative at most); the
        # decimal strings of values below float64's range are mpmath's, to 17 digits
        tol = 1e-16 if abs(want) < mp.ldexp(1, -1075) else 2.0**-36
        assert got != 0 and abs(got - want) <= abs(want) * tol, (x, row["exact"], want)
    assert any(abs(float(mp.mpf(row["exact"]))) == 0 for row in rows)  # some are below float64
