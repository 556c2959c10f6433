"""actaudit diff: two implementations on the same inputs, intervals derived by hand."""

import json

import pytest

from audit.cli import main
from audit.compare.diff import diff

# fp16 facts used below: ordinals (bit patterns of positives) 1.0 = 0x3c00 = 15360,
# 5.5 = 0x4580 = 17792, 6.0 = 0x4600 = 17920, 65504 = 0x7bff = 31743; the value after 5.5
# is 5.5 + 2^-8 (spacing 2^(2-10) in [4, 8)).


def test_mixed_in_hand_derived_intervals():
    # A (leaky bug) is wrong on [-1, -2^-24]: every negative fp16 value down to -1, 15360 of
    # them (ordinals 1..15360), where B (clamp at 5.5) is exact; B is wrong on
    # [5.5 + 2^-8, 65504], 31743 - 17792 = 13951 values, where A is exact.  Largest distance:
    # at x = -1, A = -1 and B = 0: 15360 steps.  At +inf A gives 6 (exact), B 5.5.
    r = diff("diff_funcs:relu6_leaky", "diff_funcs:relu6_low", "fp16", reference="relu6")
    assert [(iv["lo"], iv["hi"], iv["count"], iv["a_closer"], iv["b_closer"]) for iv in r.intervals] == [
        (-1.0, -(2.0**-24), 15360, 0, 15360),
        (5.5 + 2**-8, 65504.0, 13951, 13951, 0),
    ]
    assert r.max_distance == 15360 and r.worst["x"] == -1.0
    assert r.same == 63488 - 15360 - 13951
    assert r.verdict == "mixed"
    inf = [s for s in r.specials if s["x"] == float("inf")][0]
    assert (inf["a"], inf["b"], inf["closer"]) == (6.0, 5.5, "A")


def test_a_better_and_identical():
    r = diff("diff_funcs:relu6_exact", "diff_funcs:relu6_low", "fp16", reference="relu6")
    assert r.verdict == "A better"
    assert [(iv["lo"], iv["hi"]) for iv in r.intervals] == [(5.5 + 2**-8, 65504.0)]
    assert r.max_distance == 17920 - 17792  # 6 against 5.5
    r = diff("diff_funcs:relu6_low", "diff_funcs:relu6_exact", "fp16", reference="relu6")
    assert r.verdict == "B better"
    r = diff("relu6.clamp", "diff_funcs:relu6_exact", "bf16", reference="relu6", range=(0.5, 8))
    assert r.verdict == "identical" and r.same == r.count == 4 * 128 + 1  # 4 binades of bf16
    # over every bf16 value they differ at one input only: x = -0, one of them giving -0
    # and the other +0 (numpy's clip and maximum treat the sign of zero differently)
    r = diff("relu6.clamp", "diff_funcs:relu6_exact", "bf16", reference="relu6")
    assert r.count - r.same == 1 == r.zero_sign and r.intervals[0]["lo"] == 0
    assert r.verdict == "same error" and r.max_distance == 0


def test_cli_expect_identical_and_json(capsys):
    assert (
        main(
            [
                "diff",
                "relu6.clamp",
                "diff_funcs:relu6_exact",
                "--reference",
                "relu6",
                "--expect-identical",
                "--range",
                "0.5:8",
            ]
        )
        == 0
    )
    # over every value: the sign of the zero at x = -0 differs, and CI must hear of it
    assert (
        main(["diff", "relu6.clamp", "diff_funcs:relu6_exact", "--reference", "relu6", "--expect-identical"])
        == 1
    )
    capsys.readouterr()
    code = main(
        [
            "diff",
            "relu6.clamp",
            "diff_funcs:relu6_low",
            "--reference",
            "relu6",
            "--expect-identical",
            "--json",
            "-",
        ]
    )
    out, _ = capsys.readouterr()
    assert code == 1
    doc = json.loads(out)
    assert doc["schema"] == "actaudit.diff/1"
    (res,) = doc["results"]
    assert res["verdict"] == "A better" and res["differing"] == 13951 + 1  # and x = -0 (sign)
    assert res["intervals"][1]["lo"] == 5.50390625
    # without --expect-identical a difference is not a failure
    assert main(["diff", "relu6.clamp", "diff_funcs:relu6_low", "--reference", "relu6", "--json", "-"]) == 0


@pytest.mark.parametrize(
    "args",
    [
        ["diff", "gelu", "gelu.erf"],  # a family: more than one candidate
        ["diff", "gelu.erf", "sigmoid.exp"],  # different functions
        ["diff", "gelu.erf", "gelu.tanh", "--param", "limit=1,2"],
    ],
)
def test_bad_diff_is_one_line(capsys, args):
    assert main(args) == 2
    _, err = capsys.readouterr()
    assert err.startswith("actaudit: error:") and err.count("\n") == 1


def test_dump_against_catalog(tmp_path, capsys):
    # golden vectors are correctly rounded: against them a candidate is never closer, and
    # where it differs the dump is closer (gelu.tanh in E4M3 differs somewhere: 14 ULP off)
    g = tmp_path / "g.npz"
    assert main(["golden", "gelu", "--dtype", "fp8_e4m3", "-o", str(g)]) == 0
    r = diff(f"dump:{g}", "gelu.tanh", "fp8_e4m3", reference="gelu")
    assert r.count == 254 and r.b_closer == 0 and r.a_closer == r.count - r.same > 0
    assert r.verdict == "A better" and r.a_max_ulp <= 0.5
    assert main(["diff", f"dump:{g}", "gelu.tanh", "--dtype", "fp8_e4m3"]) == 2  # no --reference


def test_pairs_chunked_equal_in_memory():
    # every bf16 pair (x, dy) in [0.5, 8] (513^2: two chunks of 2^18) through the chunked
    # walk, against the same pairs held in memory: the same counts and the same x intervals
    # (runs joined across the chunk edge)
    kw = dict(dtype="bf16", compute="fp32", range=(0.5, 8))
    a = diff("gelu_bwd.tanh", "gelu_bwd.erf", exhaustive=True, **kw)
    b = diff("gelu_bwd.tanh", "gelu_bwd.erf", grid=513, **kw)
    assert a.count == b.count == 513**2
    da, db = a.to_dict(), b.to_dict()
    for k in (
        "identical",
        "max_distance",
        "a_closer",
        "b_closer",
        "ties",
        "intervals",
        "intervals_total",
        "verdict",
    ):
        assert da[k] == db[k], k
    assert a.intervals_total >= 1


def test_gate_diff_entries(tmp_path, monkeypatch, capsys):
    # relu6.clamp against the clamp at 5.5: A is exact wherever they differ (hand-derived
    # above), so "not-worse" holds and "identical" fails, naming the first interval (x = -0,
    # where only the sign of zero differs)
    monkeypatch.chdir(tmp_path)
    spec = (
        '[[audit]]\nname = "s"\ntargets = ["relu6.clamp"]\ndtype = "fp8_e4m3"\n\n'
        '[[diff]]\nname = "low"\na = "relu6.clamp"\nb = "diff_funcs:relu6_low"\n'
        'reference = "relu6"\ndtype = "fp16"\nexpect = "EXPECT"\n'
    )
    (tmp_path / "actaudit.toml").write_text(spec.replace("EXPECT", "not-worse"))
    assert main(["baseline"]) == 0
    assert main(["check"]) == 0
    capsys.readouterr()
    (tmp_path / "actaudit.toml").write_text(spec.replace("EXPECT", "identical"))
    assert main(["check"]) == 1
    out, _ = capsys.readouterr()
    (line,) = [x for x in out.splitlines() if x.startswith("FAIL")]
    assert "diff/low/fp16" in line and "expected identical, got A better" in line
    assert "13952 of 63488 inputs differ" in line
    (tmp_path / "actaudit.toml").write_text(spec.replace("EXPECT", "same"))
    assert main(["check"]) == 2
    assert "expect" in capsys.readouterr()[1]


def test_diff_report(tmp_path, capsys):
    out = tmp_path / "rep"
    assert (
        main(
            [
                "diff",
                "diff_funcs:relu6_leaky",
                "diff_funcs:relu6_low",
                "--reference",
                "relu6",
                "--report",
                str(out),
            ]
        )
        == 0
    )
    page = (out / "index.html").read_text()
    assert "diff_funcs:relu6_leaky vs diff_funcs:relu6_low" in page and "data:image/png;base64," in page
    assert "<b>mixed</b>" in page and (out / "000-diff.png").stat().st_size > 1000
    doc = json.loads((out / "run.json").read_text())
    assert doc["schema"] == "actaudit.diff/1" and doc["results"][0]["max_distance"] == 15360
