"""`actaudit report` with quantized and block-scaled outputs (reports/formats_html.py)."""

import json
import math
from fractions import Fraction

import mpmath as mp

from audit.cli import main


def _round_away(v: Fraction) -> int:
    """Half away from zero, for v >= 0."""
    return int(v + Fraction(1, 2))


def test_quant_report_page(tmp_path, capsys):
    out = tmp_path / "r"
    assert (
        main(
            [
                "report",
                "sigmoid.hard",
                "sigmoid.exp",
                "--dtype",
                "int8:scale=0.0625,zero=0",
                "--out-dtype",
                "uint8:scale=0.00390625,zero=0,round=away",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    page = (out / "index.html").read_text()
    # sigmoid.hard = relu6(x + 3) / 6 at x = q/16: (x + 3)/6 * 256 never lies within 2^-24 of
    # a tie (its denominator divides 96 * 256), so the fp32 kernel's code is that of the exact
    # rational; the correct code is that of sigmoid by mpmath
    ok = 0
    for q in range(-128, 128):
        h = min(max(Fraction(q, 16) + 3, Fraction(0)), Fraction(6)) / 6
        got = min(_round_away(h * 256), 255)
        want = min(int(mp.floor(mp.sigmoid(mp.mpf(q) / 16) * 256 + mp.mpf(0.5))), 255)
        ok += got == want
    assert f"<td>{math.floor(ok / 256 * 10000) / 100:.2f}</td>" in page and ok < 256
    assert "<h2 id='quant'>Quantized outputs</h2>" in page
    assert "Every row: in <code>int8:scale=0.0625,zero=0,round=even</code>" in page
    assert page.count("data:image/png;base64,") == 2 and len(list(out.glob("*.png"))) == 2
    assert "<b>pinned</b>" in page and "<b>saturated</b>" in page
    doc = json.loads((out / "run.json").read_text())
    assert [r["candidate"] for r in doc["quant"]] == ["sigmoid.hard", "sigmoid.exp"] and doc["blocks"] == []


def test_block_report_page(tmp_path, capsys):
    out = tmp_path / "r"
    assert (
        main(
            [
                "report",
                "silu.exp",
                "silu.hard",
                "--dtype",
                "bf16",
                "--out-dtype",
                "mxfp8_e4m3",
                "--elements",
                "1024",
                "--blocks",
                "uniform:lo=-8,hi=8",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    page = (out / "index.html").read_text()
    assert "<h2 id='blocks'>Block-scaled outputs</h2>" in page
    assert "inputs <code>uniform:lo=-8,hi=8</code>" in page and "scale rule <code>ocp</code>" in page
    assert page.count("<b>Worst block</b>") == 2 and "of 32</td>" in page
    doc = json.loads((out / "run.json").read_text())
    assert [r["elements"] for r in doc["blocks"]] == [1024, 1024]


def test_pages_run_clean_in_chromium(tmp_path, capsys):
    """Both pages in a headless browser: the page check of reports/html.py ran, no script
    error, every image decoded, no overlapping blocks."""
    import shutil
    import subprocess

    from tests.test_report_browser import ARGS, _body, require_chromium

    CHROMIUM = require_chromium()
    q, b = tmp_path / "q", tmp_path / "b"
    assert (
        main(
            [
                "report",
                "sigmoid.hard",
                "--dtype",
                "int8:scale=0.0625,zero=0",
                "--out-dtype",
                "uint8:scale=0.00390625,zero=0",
                "-o",
                str(q),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "report",
                "silu.hard",
                "--dtype",
                "bf16",
                "--out-dtype",
                "nvfp4",
                "--elements",
                "256",
                "-o",
                str(b),
            ]
        )
        == 0
    )
    for out, images in ((q, 1), (b, 0)):
        p = subprocess.run(
            [CHROMIUM, *ARGS, "--dump-dom", (out / "index.html").as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
        )
        body = _body(p.stdout)
        assert body.get("checked") == "1" and body["errors"] == ""
        assert body["images"] == str(images) and body["images-bad"] == "0" and body["overlaps"] == "0"
    assert shutil.which(CHROMIUM)
