"""`actaudit suggest`: operation counts, ranking, Pareto front, verified repairs."""

import json
import math

import mpmath as mp
import numpy as np
import pytest

from audit.cli import main
from audit.numbers.formats import get_format
from audit.repair import cost, suggest
from audit.targets.candidates import catalog


def test_counts_match_the_formula_read_by_hand():
    # gelu.tanh = 0.5 * x * (1 + tanh(SQRT_2_OVER_PI * (x + 0.044715 * (x * x * x)))):
    # products 0.5*x, (..)*(..), x*x, (x*x)*x, 0.044715*(..), SQRT_2_OVER_PI*(..) = 6;
    # sums x + .., 1 + .. = 2; one tanh
    c = cost.counts(catalog()["gelu.tanh"], get_format("fp16"))
    assert c == {"add": 2, "mul": 6, "tanh": 1}
    # sigmoid.stable: where(x >= 0, 1/(1+exp(-|x|)), e/(1+e)) with one exp: 1 select
    s = cost.counts(catalog()["sigmoid.stable"], get_format("fp16"))
    assert s["select"] == 1 and s["exp"] == 1
    # default weights: 2 + 6 + 20
    assert cost.cost(c) == 28.0
    assert cost.cost(c, cost.weights({"tanh": 5})) == 13.0


def test_weights_refuse_unknown_and_negative():
    with pytest.raises(Exception, match="unknown operation kind"):
        cost.weights({"frobnicate": 1})
    with pytest.raises(Exception, match=">= 0"):
        cost.weights({"mul": -1})


class _E:
    def __init__(self, acc, c):
        self.accuracy, self.cost, self.pareto = acc, c, None


def test_pareto_front_by_hand():
    # (accuracy, cost): a dominates d (better on both); b, c trade off against a
    a, b, c, d = _E(1.0, 10), _E(0.5, 20), _E(100.0, 2), _E(2.0, 11)
    suggest.pareto([a, b, c, d])
    assert [a.pareto, b.pareto, c.pareto, d.pareto] == [True, True, True, False]


def _exp_overflow_threshold_fp16():
    # the largest fp16 x with RN_fp16(exp(x)) finite: exp(x) below 65504 + 16 (half an ulp)
    f16 = get_format("fp16")
    vals = f16.finite_values()
    lim = float(mp.log(mp.mpf(65520)))
    return float(vals[vals < lim].max())


def test_suggest_sigmoid_fp16_repairs_the_naive_nan():
    s = suggest.suggest("sigmoid", "fp16")
    by_id = {e.cand.id: e for e in s.entries}
    naive = by_id["sigmoid.naive"]
    # exp(x)/(1+exp(x)) is inf/inf = NaN once exp overflows fp16 (x > log(65520) = 11.09...)
    n_nan = int(np.sum(get_format("fp16").finite_values() > _exp_overflow_threshold_fp16()))
    assert naive.result.nan_count == n_nan
    # ranked after every candidate without NaN
    assert all(e.rank < naive.rank for e in s.entries if e.clean)
    rec = [r for r in s.recommendations if r["candidate"] == "sigmoid.naive" and r["finding"] == "nan"]
    assert rec
    acts = {rep["action"]: rep for rep in rec[0]["repairs"]}
    assert acts["clip"]["verified"]["nan_count"] == 0
    assert acts["clip"]["ops_added"] == {"select": 1}
    assert acts["clip"]["clip"]["hi_action"] == "clamp"
    assert acts["clip"]["clip"]["hi"] <= _exp_overflow_threshold_fp16()
    assert acts["replace"]["verified"]["nan_count"] == 0


def test_repaired_naive_sigmoid_checked_independently():
    # re-derive the clip repair's claim with mpmath: clamp x to hi, evaluate
    # exp(x)/(1+exp(x)) with each operation rounded to fp16, compare with sigmoid
    s = suggest.suggest("sigmoid", "fp16")
    rec = next(r for r in s.recommendations if r["candidate"] == "sigmoid.naive" and r["finding"] == "nan")
    hi = next(rep for rep in rec["repairs"] if rep["action"] == "clip")["clip"]["hi"]
    f16 = np.float16
    for x in (hi, 100.0, 65504.0):
        xc = min(x, hi)
        e = f16(float(mp.exp(xc)))  # correctly rounded exp (mpmath), then fp16
        y = f16(float(e) / float(f16(1.0 + float(e))))
        assert math.isfinite(float(y))
        exact = 1 / (1 + mp.exp(-x))
        assert abs(float(y) - float(exact)) <= 2.0**-11  # within one fp16 ulp of 1


def test_special_guard_for_gelu_bf16():
    s = suggest.suggest("gelu", "bf16")
    rec = next(r for r in s.recommendations if r["candidate"] == "gelu.tanh" and r["finding"] == "special")
    g = next(rep for rep in rec["repairs"] if rep["action"] == "guard")
    # 0.5 x (1 + tanh(..)) at x = -inf is -inf * 0 = NaN; GELU(-inf) = -0: one select fixes it
    assert g["verified"]["special_failures"] == 0
    assert g["ops_added"] == {"select": 1}


def test_cli_json_and_errors(capsys):
    assert main(["suggest", "sigmoid", "--dtype", "fp8_e4m3", "--json", "-"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "actaudit.suggest/1"
    assert doc["inputs"]["exhaustive"] is True
    assert [r["rank"] for r in doc["ranking"]] == list(range(1, len(doc["ranking"]) + 1))
    assert set(doc["pareto"]) <= {r["candidate"] for r in doc["ranking"]}
    for args, needle in (
        (["suggest", "sigmoid", "--cost-weight", "foo=1"], "unknown operation kind"),
        (["suggest", "swiglu"], "takes two"),
        (["suggest", "nosuch"], "error"),
    ):
        assert main(args) == 2
        err = capsys.readouterr().err
        assert err.startswith("actaudit: error:") and needle in err


def test_html_section(tmp_path, capsys):
    page = tmp_path / "s.html"
    assert main(["suggest", "sigmoid", "--dtype", "fp8_e4m3", "--html", str(page)]) == 0
    capsys.readouterr()
    text = page.read_text()
    from audit.targets.candidates import catalog

    # the catalog's sigmoid candidates, less those pinned to fp32 (not ranked in fp8_e4m3)
    n = sum(c.reference == "sigmoid" and c.compute in (None, "fp8_e4m3") for c in catalog().values())
    assert "Not ranked here" in text and "sigmoid.mlas" in text
    assert text.startswith("<!doctype html>") and text.count("<tr") == 1 + n  # a header + each
    assert "sigmoid.naive" in text and 'class="pareto"' in text
    from reports.suggest import section

    doc = {
        "reference": "x<y",
        "dtype": "bf16",
        "compute": "fp32",
        "inputs": {"count": 1, "exhaustive": True},
        "ranking": [],
        "recommendations": [],
    }
    assert "x&lt;y" in section(doc) and "x<y" not in section(doc)


def test_fitted_extra_ranks_first_and_its_c_version_is_timed(tmp_path, monkeypatch):
    from audit.repair import fit

    rep = fit.fit("gelu", "fp8_e4m3", max_degree=4)
    fit.write(rep.kernel, tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    import sys

    sys.modules.pop("fit_gelu_fp8_e4m3", None)
    s = suggest.suggest(
        "gelu", "fp8_e4m3", "fp32", extra=["fit_gelu_fp8_e4m3:CANDIDATE"], repairs=False, time_c=True
    )
    ids = [e.cand.id for e in s.entries]
    k = ids.index("fit.gelu_fp8_e4m3")
    first = s.entries[k]
    # correctly rounded, no NaN, specials right: only candidates as correct can rank above it
    # (gelu.onednn_erf is correctly rounded in fp8_e4m3 too; the tie goes to the cost)
    assert first.result.max_ulp <= 0.5 and first.result.special_failures == 0
    assert all(e.result.max_ulp <= 0.5 and e.result.special_failures == 0 for e in s.entries[:k])
    assert first.ns_per_element is not None and first.ns_per_element > 0
    assert all(e.ns_per_element is None for e in s.entries if e is not first)  # catalog formulas: no C
    with pytest.raises(Exception, match="not a candidate"):
        suggest.suggest("gelu", "fp8_e4m3", extra=["fit_gelu_fp8_e4m3:fn"])


def test_counts_under_contract_by_hand():
    # gelu.tanh under contract: x + 0.044715 * (x*x*x) is the only product whose one use is
    # an addition, so it becomes one fma: 6 - 1 mul, 2 - 1 add, 1 fma (the other sums'
    # operands are not products: 1 + tanh(..), and 0.5*x*(..) multiplies)
    from audit.targets import semantics

    c = catalog()["gelu.tanh"].with_semantics(semantics.parse("contract"))
    assert cost.counts(c, get_format("fp32")) == {"add": 1, "fma": 1, "mul": 5, "tanh": 1}
    # ftz alone fuses nothing
    c = catalog()["gelu.tanh"].with_semantics(semantics.parse("ftz"))
    assert cost.counts(c, get_format("fp32")) == {"add": 2, "mul": 6, "tanh": 1}


def test_suggest_ranks_under_a_semantics(capsys):
    # ftz_out flushes a subnormal result of the conversion fp32 -> fp16 to zero.  x = 2^-15
    # (an fp16 subnormal): GELU(x) = x Phi(x) ~ 2^-16, an fp16 subnormal (below 2^-14), so
    # its right answer is 2^-16 (ulp 2^-24 there) and the flushed one is 0: an error of
    # 2^-16 / 2^-24 = 256 ULP at least, where gelu.erfc is within 0.5001 ULP under ieee
    s0 = suggest.suggest("gelu", "fp16", "fp32", repairs=False)
    s1 = suggest.suggest("gelu", "fp16", "fp32", repairs=False, semantics="ftz_out")
    assert s0.semantics is None and s1.semantics is not None
    e0 = next(e for e in s0.entries if e.cand.id == "gelu.erfc")
    e1 = next(e for e in s1.entries if e.cand.id == "gelu.erfc")
    assert e0.result.max_ulp < 0.51 and e1.result.max_ulp >= 256
    assert s1.to_dict()["semantics"] == "ftz_out"
    assert (
        main(
            [
                "suggest",
                "gelu",
                "--dtype",
                "fp8_e4m3",
                "--compute",
                "fp32",
                "--brief",
                "--semantics",
                "contract",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "semantics contract" in out and "fma" in out
    assert main(["suggest", "gelu", "--dtype", "fp8_e4m3", "--semantics", "round=stochastic"]) == 2
    assert capsys.readouterr().err.startswith("actaudit: error:")


def test_report_embeds_suggest_sections(tmp_path):
    import re
    import subprocess

    import audit
    from reports import html as html_report

    res = audit.sweep(
        ["gelu.tanh", "sigmoid.naive", "swiglu.silu_mul"], dtype="fp8_e4m3", keep_points=True, grid=8
    )
    docs = suggest.for_results(res)
    # one per one-input reference of the run (swiglu takes two inputs: left out)
    assert [(d.reference, d.dtype) for d in docs] == [("gelu", "fp8_e4m3"), ("sigmoid", "fp8_e4m3")]
    path = html_report.build(res, tmp_path, "test", suggestions=docs)
    page = path.read_text()
    # every catalog candidate of each reference that runs in fp8_e4m3 has a row in its
    # section; those pinned to fp32 compute are named as not ranked
    for ref in ("gelu", "sigmoid"):
        sec = page[page.index(f"id='suggest-{ref}-fp8_e4m3-fp8_e4m3'") :]
        sec = sec[: sec.index("</section>")]
        names = {c.id for c in catalog().values() if c.reference == ref and c.compute in (None, "fp8_e4m3")}
        assert set(re.findall(r'<td class="l">([\w.]+)</td>', sec)) == names
        pinned = {c.id for c in catalog().values() if c.reference == ref and c.compute == "fp32"}
        assert all(p in sec.split("Not ranked here")[1] for p in pinned)
        assert "Pareto front" in sec
    # the recommendation table links to the sections; the nav too
    for ref in ("gelu", "sigmoid"):
        assert f"href='#suggest-{ref}-fp8_e4m3-fp8_e4m3'" in page
    assert "href='#suggest'" in page and page.index("id='recommend'") < page.index("id='suggest'")
    # no suggestions: no section
    assert "id='suggest'" not in html_report.build(res, tmp_path / "b", "t").read_text()
    from tests.test_report_browser import require_chromium

    browser = require_chromium()
    p = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1400,1000",
            "--virtual-time-budget=10000",
            "--dump-dom",
            path.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    body = dict(re.findall(r'data-([\w-]+)="([^"]*)"', re.search(r"<body([^>]*)>", p.stdout).group(1)))
    assert body.get("checked") == "1" and body["errors"] == "" and body["overlaps"] == "0", body


def test_cli_report_suggest(tmp_path, capsys):
    assert main(["report", "sigmoid.naive", "--dtype", "fp8_e4m3", "--suggest", "-o", str(tmp_path)]) == 0
    page = (tmp_path / "index.html").read_text()
    n = sum(c.reference == "sigmoid" and c.compute in (None, "fp8_e4m3") for c in catalog().values())
    sec = page[page.index("id='suggest-sigmoid-fp8_e4m3-fp8_e4m3'") :]
    assert sec[: sec.index("</section>")].count("<tr") == 1 + n


def test_suggest_fits_80_columns_proposes_fit_and_leaves_out_pinned_candidates(tmp_path, monkeypatch):
    """Issue 35, item 5: the text fits 80 columns; a finding that no catalog candidate, clip or
    guard repairs gets the fitted kernel (the command to run; once fitted, its operations and
    time from the fit cache); candidates pinned to fp32 (engine models) are not ranked under
    compute fp16, and are under compute fp32."""
    from audit.repair import fit_cache
    from reports import suggest as suggest_report

    monkeypatch.setattr(fit_cache, "cache_dir", lambda: tmp_path)
    pinned = {c.id for c in catalog().values() if c.reference == "sigmoid" and c.compute == "fp32"}
    assert pinned  # sigmoid.mlas, sigmoid.fast_exp
    s = suggest.suggest("sigmoid", "fp16")
    ranked = {e.cand.id for e in s.entries}
    assert not ranked & pinned and s.left_out == dict.fromkeys(pinned, "fp32")
    doc = s.to_dict()
    text = suggest_report.text(doc, 80)
    assert max(len(line) for line in text.splitlines()) <= 80
    for c in pinned:
        assert c in text.split("Not ranked here")[1].split("\n\n")[0]
    # sigmoid.stable's monotonicity: no candidate has fewer such inputs, no clip: fit
    (rec,) = [r for r in doc["recommendations"] if r["candidate"] == "sigmoid.stable"]
    (rep,) = rec["repairs"]
    assert rep["action"] == "fit" and not rep["cached"] and rep["ops"] is None
    assert "run `actaudit fit sigmoid --dtype fp16`" in " ".join(text.split())
    # once fitted (as actaudit fit records it): its operations, cost and time are quoted
    fit_cache.record("sigmoid", "fp16", {}, {"add": 5, "mul": 4, "select": 6}, 1.9312)
    doc = suggest.suggest("sigmoid", "fp16").to_dict()
    (rec,) = [r for r in doc["recommendations"] if r["candidate"] == "sigmoid.stable"]
    (rep,) = rec["repairs"]
    assert rep["cached"] and rep["ops"] == {"add": 5, "mul": 4, "select": 6} and rep["cost"] == 15.0
    flat = " ".join(suggest_report.text(doc, 80).split())
    assert "5 add, 4 mul, 6 select (cost 15), 1.93 ns per element" in flat
    # a record that is not exactly a record of this kernel is a miss, never trusted in part
    p = fit_cache.path("sigmoid", "fp16")
    bad = json.loads(p.read_text())
    bad["ops"]["add"] = -1
    p.write_text(json.dumps(bad))
    assert fit_cache.lookup("sigmoid", "fp16") is None
    p.write_text("{")
    assert fit_cache.lookup("sigmoid", "fp16") is None
    # under compute fp32 the fp32 models are ranked
    s32 = suggest.suggest("sigmoid", "fp16", "fp32", repairs=False)
    assert pinned <= {e.cand.id for e in s32.entries} and not s32.left_out


def test_fit_records_its_kernel_for_suggest(tmp_path, monkeypatch):
    """A verified `actaudit fit` writes the fit cache: its kernel's operations and a measured
    time per element (gcc present) under the command that fits it."""
    import shutil

    from audit.repair import fit as fit_mod
    from audit.repair import fit_cache

    monkeypatch.setattr(fit_cache, "cache_dir", lambda: tmp_path / "cache")

    class Quiet:
        def start(self, *a):
            pass

        def __call__(self, *a):
            pass

    rep, results, _, _ = fit_mod.fit_and_verify("sigmoid", "fp8_e4m3", "fp32", tmp_path, Quiet())
    assert rep.ok and results[0].correctly_rounded_fraction == 1.0
    hit = fit_cache.lookup("sigmoid", "fp8_e4m3")
    assert hit is not None and hit["ops"] == rep.kernel.ops()
    assert hit["command"] == "actaudit fit sigmoid --dtype fp8_e4m3"
    if shutil.which("gcc"):
        assert 0 < hit["ns_per_element"] < 1e4


def test_one_number_format_for_every_table():
    """Issue 35, item 8: reports/cells.py num is audit/io.py format_number (3 significant
    digits, exponent without '+'); suggest, diff and the sweep table print the same cell for
    the same number; no table module formats a number with its own format spec."""
    import pathlib
    import re

    from audit.io import format_number
    from reports import cells

    assert cells.num is format_number
    assert format_number(255.2) == "255" and format_number(1.678e7) == "1.68e7"
    assert format_number(-11.09375, 6) == "-11.0938" and format_number(0.5, 6) == "0.5"
    assert format_number(-0.0, 6) == "-0" and format_number(3.9e-5, 6) == "3.9e-5"
    root = pathlib.Path(__file__).resolve().parents[1]
    files = [*root.glob("reports/*.py"), *root.glob("audit/cli/*.py"), root / "audit/repair/suggest.py"]
    spec = re.compile(r"\{[^{}]*:[<>^]?\d*(\.\d+)?[gef]\}")
    for f in files:
        if f.name in ("figures.py", "weighted.py", "progress.py", "cells.py"):  # axes, a rate
            continue
        for i, line in enumerate(f.read_text().splitlines(), 1):
            if re.search(r"<(rect|line|text|path|circle) ", line):  # an SVG element's coordinates
                continue
            if 'float(f"' not in line:  # (a value rounded for the explorer's data, not shown)
                assert not spec.search(line), f"{f.name}:{i}: {line.strip()}"
