"""Summaries of quantized and block-scaled sweeps (reports/formats_table.py): plain text that
fits 80 columns without cutting a cell, --wide, --format markdown|csv|json."""

import csv
import io
import json
import math
from fractions import Fraction

import mpmath as mp

from audit.cli import main

QUANT = [
    "sweep",
    "sigmoid.hard",
    "sigmoid.exp",
    "--dtype",
    "int8:scale=0.0625,zero=0",
    "--out-dtype",
    "uint8:scale=0.00390625,zero=0,round=away",
]
BLOCK = [
    "sweep",
    "silu.hard",
    "silu.one_minus",
    "--dtype",
    "bf16",
    "--out-dtype",
    "nvfp4",
    "--elements",
    "1024",
]


def run(monkeypatch, capsys, args, columns=80):
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main(list(args)) in (0, None)
    return capsys.readouterr().out


def hard_sigmoid_correct_codes() -> int:
    """Codes of relu6(x + 3) / 6 (x = q/16, uint8 scale 1/256, half away) equal to the
    correctly quantized sigmoid (mpmath): the fp32 kernel's value is never within 2^-24 of
    a tie, whose rational has denominator 96 * 256."""
    ok = 0
    for q in range(-128, 128):
        h = min(max(Fraction(q, 16) + 3, Fraction(0)), Fraction(6)) / 6
        got = min(int(h * 256 + Fraction(1, 2)), 255)
        ok += got == min(int(mp.floor(mp.sigmoid(mp.mpf(q) / 16) * 256 + mp.mpf(0.5))), 255)
    return ok


def test_quant_summary_fits_80_columns(monkeypatch, capsys):
    out = run(monkeypatch, capsys, QUANT + ["--findings"])
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "all 256 input codes" in out
    ok = hard_sigmoid_correct_codes()
    row = next(line for line in lines if line.startswith("sigmoid.hard "))
    assert f"{math.floor(ok / 256 * 10000) / 100:.2f}" in row.split()
    exp = next(line for line in lines if line.startswith("sigmoid.exp "))
    assert "100.00" in exp.split()  # every code of the textbook kernel is correct (gate test)
    # the long format names are wrapped, never cut: joined back they are whole
    assert "uint8:scale=0.00390625,zero=0,round=away" in " ".join(x.strip() for x in lines[:2])
    assert "pinned 87" in out and "saturated" in out and "--findings" in out


def test_quant_formats(monkeypatch, capsys):
    rows = list(csv.DictReader(io.StringIO(run(monkeypatch, capsys, QUANT + ["--format", "csv"]))))
    assert [r["candidate"] for r in rows] == ["sigmoid.hard", "sigmoid.exp"]
    assert float(rows[0]["correct_code_fraction"]) == hard_sigmoid_correct_codes() / 256
    md = run(monkeypatch, capsys, QUANT + ["--format", "markdown"])
    assert md.splitlines()[2].startswith("| candidate | in | out |") and md.count("\n| sigmoid.") == 2
    wide = run(monkeypatch, capsys, QUANT + ["--wide"])
    assert max(len(line) for line in wide.splitlines()[:4]) > 80  # as wide as it needs
    doc = json.loads(run(monkeypatch, capsys, QUANT + ["--format", "json"]))
    assert doc["schema"] == "actaudit.quant/1" and len(doc["results"]) == 2


def test_block_summary_fits_80_columns(monkeypatch, capsys):
    for columns in (80, 60):
        out = run(monkeypatch, capsys, BLOCK, columns)
        lines = out.splitlines()
        assert max(len(line) for line in lines) <= columns
        assert "1,024 elements in 64 blocks" in " ".join(x.strip() for x in lines[:3])
        assert sum(line.startswith(("silu.hard", "silu.one_minus")) for line in lines) == 2
        assert out.count("    worst block ") == 2 and "/64" in out
    rows = list(csv.DictReader(io.StringIO(run(monkeypatch, capsys, BLOCK + ["--format", "csv"]))))
    assert [int(r["blocks"]) for r in rows] == [64, 64]
    md = run(monkeypatch, capsys, BLOCK + ["--format", "markdown"])
    assert "| blocks scale differs |" in md and md.count("\n| silu.") == 2


def test_float_inputs_are_named_as_values(monkeypatch, capsys):
    out = run(
        monkeypatch,
        capsys,
        ["sweep", "tanh.sigmoid", "--dtype", "bf16", "--out-dtype", "int8:scale=0.0078125,zero=0"],
    )
    # bf16: 65,536 patterns less 256 with the top exponent (inf, NaN) less -0
    assert "all 65,279 finite inputs (one zero)" in " ".join(x.strip() for x in out.splitlines()[:2])
    assert max(len(line) for line in out.splitlines()) <= 80
