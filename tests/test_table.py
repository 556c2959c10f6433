"""The sweep summary (reports/table.py): readable at 80 columns, nothing cut, every format."""

import csv
import io
import json
import os

import pytest

import audit
from audit.cli import main
from reports import table


def run(capsys, monkeypatch, columns, *args):
    monkeypatch.setenv("COLUMNS", str(columns))
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("columns", [80, 100, 120])
def test_compact_table_fits_and_cuts_nothing(capsys, monkeypatch, columns):
    code, out, _ = run(capsys, monkeypatch, columns, "sweep", "gelu", "sigmoid.naive", "--dtype", "fp16")
    assert code == 0
    assert "…" not in out and "..." not in out
    assert max(len(line) for line in out.splitlines()) <= columns
    res = audit.sweep(["gelu", "sigmoid.naive"], dtype="fp16", compute="auto")
    # 12 candidates x (fp16 compute, fp32 compute), plus the four engine models (gelu.mlas_tanh,
    # gelu.mlas_erf, gelu.onednn_erf, gelu.onednn_tanh), whose compute is pinned to fp32
    assert len(res) == 28
    for r in res:
        assert r.candidate in out
        # every finding's count is there in full, e.g. "unf 655"
        for f in r.findings:
            assert f"{table.SHORT[f.kind]} {f.count}" in out
    # both evaluation paths are named in words
    assert "fp16 storage, every operation rounded to fp16" in out
    assert "fp16 storage, fp32 compute" in out
    # 63,488 = 2^16 values - 2 x 1024 (inf and NaN patterns of both signs: exponent all ones)
    assert "all 63,488 finite inputs" in out
    # the legend explains the abbreviations that appear
    flat = " ".join(out.split())  # (the legend wraps at the width)
    assert (
        "unf flushed to 0" in flat and "mono monotonicity breaks" in flat and "CR % correctly rounded" in flat
    )


def test_long_names_go_on_their_own_line(capsys, monkeypatch, tmp_path):
    long = "a_very_long_kernel_function_name_for_gelu"
    (tmp_path / "mykernels_table.py").write_text(
        f"import numpy as np\ndef {long}(x):\n    return (x * 0.5).astype(x.dtype)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    code, out, _ = run(
        capsys,
        monkeypatch,
        60,
        "sweep",
        f"mykernels_table:{long}",
        "gelu.tanh",
        "--reference",
        "gelu",
        "--dtype",
        "fp16",
    )
    assert code == 0, out
    assert max(len(line) for line in out.splitlines()) <= 60
    assert f"mykernels_table:{long}" in out.splitlines()
    assert "native compute" in out


def test_num_hand_worked():
    # 3 significant digits, exponent without '+' and leading zeros; integers below 1e5 whole
    assert table.num(2043.0) == "2043"
    assert table.num(2043.4) == "2043"
    assert table.num(15.24) == "15.2"
    assert table.num(0.2514) == "0.251"
    assert table.num(0.00192) == "0.00192" and table.num(0.000192) == "1.92e-4"
    assert table.num(70739.6) == "70740"
    assert table.num(99999.7) == "1e5"
    assert table.num(2.25e10) == "2.25e10"
    assert table.num(-65504.0) == "-65504"
    assert table.num(float("nan")) == "-" and table.num(float("inf")) == "inf" and table.num(0.0) == "0"
    assert max(len(table.num(v)) for v in (-1.234e-300, 1e308, -9.99e-4)) <= 10
    # CR % is truncated: 100.00 only when all inputs are correctly rounded
    assert table.percent(0.99999) == "99.99" and table.percent(1.0) == "100.00"


def test_wide_markdown_csv_json(capsys, monkeypatch):
    args = ("sweep", "gelu.tanh", "--dtype", "fp8_e4m3", "--compute", "fp8_e4m3")
    code, wide, _ = run(capsys, monkeypatch, 80, *args, "--wide")
    assert code == 0
    heads = [h for h, _ in table.WIDE]
    assert all(h in wide for h in heads) and "(0x" in wide
    code, md, _ = run(capsys, monkeypatch, 80, *args, "--format", "markdown")
    rows = [line for line in md.splitlines() if line.startswith("|")]
    assert len(rows) == 3 and rows[0].count("|") == len(heads) + 1
    code, text, _ = run(capsys, monkeypatch, 80, *args, "--format", "csv")
    got = list(csv.DictReader(io.StringIO(text)))
    code, js, _ = run(capsys, monkeypatch, 80, *args, "--format", "json")
    doc = json.loads(js)
    assert len(got) == len(doc["results"]) == 1
    assert float(got[0]["max_ulp"]) == doc["results"][0]["max_ulp"]  # full precision, round trip
    assert got[0]["compute"] == "fp8_e4m3"
    # E4M3 has 2 x 127 finite values (0x7f and 0xff are NaN)
    assert got[0]["inputs"] == str(2 * 127)
    code, _, err = run(capsys, monkeypatch, 80, *args, "--format", "yaml")
    assert code == 2 and err.startswith("actaudit: error: --format")


def test_default_paths_equal_explicit_ones():
    """'auto' is the storage path then the fp32 path: the same results as asking for each."""
    auto = audit.sweep("gelu.erf", dtype="fp16", compute="auto")
    assert [(r.dtype, r.compute) for r in auto] == [("fp16", "fp16"), ("fp16", "fp32")]
    for r in auto:
        one = audit.sweep("gelu.erf", dtype="fp16", compute=r.compute)[0]
        assert one.to_dict() == r.to_dict()
    # fp32 and fp64 storage: only the storage path
    assert [r.compute for r in audit.sweep("gelu.erf", dtype="fp32", compute="auto", samples=500)] == ["fp32"]
    # a candidate with a fixed compute (an fp32 bit trick) runs once
    assert [r.compute for r in audit.sweep("exp.schraudolph", dtype="fp16", compute="auto")] == ["fp32"]


def test_framework_ops_compute_natively():
    pytest.importorskip("torch")
    res = audit.sweep("torch:gelu", dtype="fp16", compute="auto")
    assert [(r.dtype, r.compute) for r in res] == [("fp16", "native")]  # once, not per path


@pytest.mark.parametrize(
    "cmd",
    [
        [],
        ["sweep"],
        ["clip"],
        ["report"],
        ["check"],
        ["baseline"],
        ["list"],
        ["formats"],
        ["selftest"],
        ["golden"],
    ],
)
def test_help_has_no_bool_placeholders_and_fits_80_columns(capsys, monkeypatch, cmd):
    code, out, _ = run(capsys, monkeypatch, 80, *cmd, "--help")
    assert code == 0 and "Usage: actaudit" in out
    assert "<bool>" not in out
    assert max(len(line) for line in out.splitlines()) <= 80


def test_list_formats_and_clip_fit_80_columns_and_never_cut_a_name(capsys, monkeypatch):
    """Plain-text records (reports/listing.py): every candidate id and format name appears
    whole on its own line start, and no line is wider than the terminal."""
    import shutil

    from audit.cli import main
    from audit.numbers.formats import FORMATS
    from audit.targets.candidates import catalog

    monkeypatch.setattr(shutil, "get_terminal_size", lambda fallback=(80, 24): os.terminal_size((80, 24)))
    for args, names in (
        (["list"], list(catalog())),
        (["formats"], list(FORMATS)),
        (["clip", "sigmoid.naive", "gelu.tanh", "--dtype", "fp16"], ["sigmoid.naive", "gelu.tanh"]),
    ):
        assert main(args) == 0
        out = capsys.readouterr().out
        lines = out.splitlines()
        assert max(len(x) for x in lines) <= 80, args
        starts = {x.split()[0].rstrip(":") for x in lines if x and not x.startswith(" ")}
        assert set(names) <= starts, (args, set(names) - starts)
    # the clip record of sigmoid.naive in fp16: exp overflows fp16 above 11.0859375
    main(["clip", "sigmoid.naive", "--dtype", "fp16", "--compute", "fp16"])
    assert "high side: clamp x to <= 11.0859" in capsys.readouterr().out


def test_a_restricted_range_is_in_the_title(capsys):
    """--range -3:3 in fp16: the title names the extent actually swept, [-3, 3] (both are
    fp16 values), and counts its inputs: 2 x (the positive fp16 values <= 3) + both zeros."""
    import numpy as np

    from audit.cli import main

    assert main(["sweep", "gelu.tanh", "--dtype", "fp16", "--compute", "fp16", "--range", "-3:3"]) == 0
    title = " ".join(x.strip() for x in capsys.readouterr().out.splitlines()[:2])  # (wrapped)
    pos = np.arange(1, 0x7C00, dtype=np.uint16).view(np.float16).astype(float)
    n = 2 * int((pos <= 3).sum()) + 2
    assert f"all {n:,} finite inputs in [-3,3]" in title
