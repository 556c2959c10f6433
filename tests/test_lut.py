"""Lookup tables: the writer against mpmath at every code, read-back in every file type
(the C array through gcc), untrusted files refused, and the interpolated family."""

from __future__ import annotations

import math
import shutil
import subprocess
import zipfile
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest

from audit.cli import main
from audit.errors import BadFileError
from audit.measure import quant
from audit.numbers.formats import get_format
from audit.targets import lut

MPF = {
    "gelu": lambda x: x * (1 + mp.erf(x / mp.sqrt(2))) / 2,
    "silu": lambda x: x / (1 + mp.exp(-x)),
    "sigmoid": lambda x: 1 / (1 + mp.exp(-x)),
    "tanh": mp.tanh,
}


def exact(ref: str, x: float) -> Fraction:
    """f(x) at 200 bits as a Fraction (far from every boundary that matters here)."""
    with mp.workprec(200):
        m, e = mp.frexp(MPF[ref](mp.mpf(x)))
        return Fraction(int(mp.ldexp(m, 200))) * Fraction(2) ** (e - 200)


def q_code(y: Fraction, scale: float, zero: int, lo: int, hi: int) -> int:
    """clamp(RNE(y / scale) + zero): written on rationals, independent of audit.measure.quant."""
    w = y / Fraction(scale)
    k = math.floor(w)
    d = w - k
    n = k + 1 if d > Fraction(1, 2) or (d == Fraction(1, 2) and k % 2) else k
    return min(max(n + zero, lo), hi)


FP4 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]


def fp4_round(y: Fraction) -> float:
    """Nearest fp4_e2m1 value, ties to the even code (its index in FP4), saturating at 6."""
    a = abs(y)
    if a >= 7:
        r = 6.0
    else:
        best = min(range(8), key=lambda i: (abs(a - Fraction(FP4[i])), i % 2))
        r = FP4[best]
    return -r if y < 0 else r


@pytest.mark.parametrize("ref", ["gelu", "silu", "sigmoid", "tanh"])
def test_writer_against_mpmath_every_code(ref, tmp_path):
    inq = quant.parse_quant("int8:scale=0.0625,zero=-5")
    outq = quant.parse_quant("int8:scale=0.03125,zero=3")
    w = lut.write_table(tmp_path / "t.npy", ref, inq, outq)
    table = np.load(tmp_path / "t.npy")
    assert table.dtype == np.int8 and len(table) == 256
    for q in range(-128, 128):
        x = (q + 5) * 0.0625
        assert int(table[q + 128]) == q_code(exact(ref, x), 0.03125, 3, -128, 127), (ref, q)
    # a float table: fp8_e4m3 inputs (by bit pattern), fp4_e2m1 outputs
    w = lut.write_table(tmp_path / "f.npz", ref, get_format("fp8_e4m3"), get_format("fp4_e2m1"))
    with np.load(tmp_path / "f.npz") as z:
        vals, x = z["values"], z["x"]
        assert str(z["reference"]) == ref and str(z["out_dtype"]) == "fp4_e2m1"
    for b in range(256):
        if np.isfinite(x[b]):
            assert vals[b] == fp4_round(exact(ref, float(x[b]))), (ref, b)
    assert w["entries"] == 256


def test_read_back_every_file_type_and_the_c_array(tmp_path):
    inq = quant.parse_quant("uint8:scale=0.05,zero=128")
    outq = quant.parse_quant("uint8:scale=0.00390625,zero=0,round=away")
    ref_codes = None
    for name in ("t.npy", "t.npz", "t.csv"):
        lut.write_table(tmp_path / name, "sigmoid", inq, outq)
        table, meta = lut.read_table(tmp_path / name, 256)
        ref_codes = table if ref_codes is None else ref_codes
        assert np.array_equal(table, ref_codes)
        r = quant.sweep(f"lut:{tmp_path / name}", inq, outq, reference="sigmoid")[0]
        assert r.correct_fraction == 1.0 and r.max_code_err <= 0.5
    lut.write_table(tmp_path / "t.h", "sigmoid", inq, outq)
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("no C compiler")
    (tmp_path / "main.c").write_text(
        '#include <stdio.h>\n#include "t.h"\nint main(void){'
        'for(int i=0;i<256;i++) printf("%d\\n", actaudit_sigmoid_256[i]);}\n'
    )
    subprocess.run(
        [gcc, "-std=c99", "-Wall", "-Werror", "-o", str(tmp_path / "m"), str(tmp_path / "main.c")],
        check=True,
        cwd=tmp_path,
    )
    out = subprocess.run([str(tmp_path / "m")], capture_output=True, text=True, check=True).stdout
    assert [int(v) for v in out.split()] == ref_codes.astype(int).tolist()


def test_a_wrong_table_is_audited(tmp_path):
    inq = quant.parse_quant("int8:scale=0.0625,zero=0")
    lut.write_table(tmp_path / "t.npy", "tanh", inq, inq)
    t = np.load(tmp_path / "t.npy")
    t[200] = 127  # one entry pinned at the top: x = 72/16 = 4.5, tanh = 0.99975 -> code 16
    np.save(tmp_path / "bad.npy", t)
    r = quant.sweep(f"lut:{tmp_path / 'bad.npy'}", inq, reference="tanh")[0]
    assert r.correct_fraction == 255 / 256
    kinds = {f["kind"]: f for f in r.findings}
    assert kinds["pinned"]["intervals"] == [[4.5, 4.5]] and kinds["monotonicity"]["count"] == 1


@pytest.mark.parametrize(
    "case",
    [
        "size",
        "object",
        "nan",
        "range",
        "fraction",
        "garbage",
        "2d",
        "strings",
        "csv_text",
        "bomb",
        "nokey",
        "dir",
        "missing",
        "suffix",
    ],
)
def test_untrusted_tables_are_refused(tmp_path, case, capsys):
    inq = quant.parse_quant("int8:scale=0.0625,zero=0")
    p = tmp_path / "t.npy"
    if case == "size":
        np.save(p, np.zeros(100))
    elif case == "object":
        np.save(p, np.array([None] * 256, dtype=object), allow_pickle=True)
    elif case == "nan":
        np.save(p, np.full(256, np.nan))
    elif case == "range":
        np.save(p, np.full(256, 300))
    elif case == "fraction":
        np.save(p, np.full(256, 0.5))
    elif case == "garbage":
        p.write_bytes(b"\x93NUMPY garbage" * 10)
    elif case == "2d":
        np.save(p, np.zeros((16, 16)))
    elif case == "strings":
        np.save(p, np.array(["1"] * 256))
    elif case == "csv_text":
        p = tmp_path / "t.csv"
        p.write_text("code\n" + "\n".join(["x"] * 256))
    elif case == "bomb":  # a small file that inflates past the bound
        p = tmp_path / "t.npz"
        with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("table.npy", b"\0" * (lut.MAX_BYTES + 1))
    elif case == "nokey":
        p = tmp_path / "t.npz"
        np.savez(p, other=np.zeros(256))
    elif case == "dir":
        p = tmp_path / "d.npy"
        p.mkdir()
    elif case == "missing":
        p = tmp_path / "nope.npy"
    elif case == "suffix":
        p = tmp_path / "t.txt"
        p.write_text("1\n")
    with pytest.raises(BadFileError):
        quant.sweep(f"lut:{p}", inq, reference="tanh")
    code = main(["sweep", f"lut:{p}", "--dtype", "int8:scale=0.0625,zero=0", "--reference", "tanh"])
    _, err = capsys.readouterr()
    assert code == 2 and err.startswith("actaudit: error:") and "Traceback" not in err


def test_lut_command(tmp_path, capsys):
    code = main(
        [
            "lut",
            "sigmoid",
            "--dtype",
            "int8:scale=0.0625,zero=0",
            "--out-dtype",
            "uint8:scale=0.00390625,zero=0",
            "-o",
            str(tmp_path / "s.csv"),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "100.00% correct" in out
    code = main(["lut", "sigmoid", "--dtype", "fp32", "-o", str(tmp_path / "s.npy")])
    _, err = capsys.readouterr()
    assert code == 2 and err.startswith("actaudit: error:")


def test_interpolated_family_hand_worked():
    """lut.sigmoid_interp with n = 2 over [-1, 1] in fp64: breakpoints -1, 0, 1; at x = 0.5,
    u = 1.5, i = 1, t = 0.5: y = s(0) + 0.5 (s(1) - s(0)); beyond hi the end value s(1)."""
    import audit
    from audit.numbers.formats import FORMATS
    from audit.targets.candidates import catalog

    c = catalog()["lut.sigmoid_interp"]
    s = lambda v: 1 / (1 + math.exp(-v))  # noqa: E731
    y = c.evaluate(
        np.array([0.5, 5.0, -1.0]), FORMATS["fp64"], FORMATS["fp64"], {"n": 2, "lo": -1.0, "hi": 1.0}
    )
    assert y[0] == s(0) + 0.5 * (s(1) - s(0)) and y[1] == s(1) and y[2] == s(-1)
    r = audit.sweep("lut.tanh_interp", dtype="fp8_e4m3", compute="fp32", params={"n": [8, 256]})
    assert len(r) == 2 and r[1].max_ulp <= r[0].max_ulp


def test_float_tables_in_float_sweeps(tmp_path):
    """A written fp8_e4m3 table of gelu, swept as a candidate: every entry correctly rounded;
    one entry moved up by one step (x = 1: gelu(1) = 0.8413 rounds to 0.8125 in E4M3, whose
    ulp there is 1/16; the next value 0.875 is (0.875 - 0.8413) 16 = 0.54 ULP away): that
    input alone is wrong."""
    import audit

    e4 = get_format("fp8_e4m3")
    lut.write_table(tmp_path / "g.npy", "gelu", e4, e4)
    r = audit.sweep(f"lut:{tmp_path / 'g.npy'}", dtype="fp8_e4m3", reference="gelu")[0]
    assert r.correctly_rounded_fraction == 1.0 and r.special_failures == 0
    t = np.load(tmp_path / "g.npy")
    b1 = int(e4.to_bits([1.0])[0])
    assert e4.from_bits([t[b1]])[0] == 0.8125
    t[b1] += 1
    np.save(tmp_path / "bad.npy", t)
    r = audit.sweep(f"lut:{tmp_path / 'bad.npy'}", dtype="fp8_e4m3", reference="gelu")[0]
    g1 = float(MPF["gelu"](mp.mpf(1)))
    assert r.summary.correct == r.summary.count - 1 and r.worst["x"] == 1.0
    assert abs(r.max_ulp - (0.875 - g1) * 16) < 1e-9
    # values that are not E4M3 values, and bit patterns wider than 8 bits, are refused
    np.save(tmp_path / "v.npy", np.full(256, 0.3))
    np.save(tmp_path / "w.npy", np.full(256, 300, dtype=np.int64))
    for name in ("v.npy", "w.npy"):
        with pytest.raises(BadFileError):
            audit.sweep(f"lut:{tmp_path / name}", dtype="fp8_e4m3", reference="gelu")
    # bf16 inputs, fp8 outputs, through --out-dtype
    lut.write_table(tmp_path / "b.npz", "silu", get_format("bf16"), e4)
    r = audit.sweep(f"lut:{tmp_path / 'b.npz'}", dtype="bf16", out_dtype="fp8_e4m3")[0]
    assert r.correctly_rounded_fraction == 1.0 and r.domain.count == 65280


# ------------------------------------------------ tables bound to what they claim (issue 23)
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).parents[1]
E4, E5, F16, BF16 = (get_format(n) for n in ("fp8_e4m3", "fp8_e5m2", "fp16", "bf16"))


def _one_line(code, err, *words):
    assert code == 2 and err.startswith("actaudit: error:") and err.count("\n") == 1, err
    assert "Traceback" not in err and all(w in err for w in words), err


@pytest.fixture(scope="module")
def fp16_e4m3(tmp_path_factory):
    """A tanh table from fp16 inputs to fp8_e4m3 outputs, as .npy, .npz and .csv."""
    d = tmp_path_factory.mktemp("tables")
    lut.write_table(d / "t.npz", "tanh", F16, E4)
    with np.load(d / "t.npz") as z:
        table = z["table"]
    lut.write_table(d / "t.npy", "tanh", F16, E4)
    lut.write_table(d / "t.csv", "tanh", F16, E4)
    return d, table


@pytest.mark.parametrize("name", ["t.npy", "t.npz", "t.csv"])
def test_every_table_file_records_what_it_is(fp16_e4m3, name):
    d, table = fp16_e4m3
    got, meta = lut.read_table(d / name, 65536)
    assert meta["record"] == {
        "format": "actaudit.lut/1",
        "reference": "tanh",
        "params": {},
        "in": {"dtype": "fp16"},
        "out": {"dtype": "fp8_e4m3"},
    }
    if name != "t.csv":  # (the csv holds the values, the binary files the bit patterns)
        assert np.array_equal(got, table)
    if name == "t.npy":  # numpy reads the file as usual
        assert np.array_equal(np.load(d / name), table)


@pytest.mark.parametrize(
    "args,differ",
    [
        (["--dtype", "bf16", "--out-dtype", "fp8_e4m3", "--reference", "tanh"], "in differ"),
        (["--dtype", "fp16", "--out-dtype", "fp8_e5m2", "--reference", "tanh"], "out differ"),
        (["--dtype", "fp16", "--out-dtype", "fp8_e4m3", "--reference", "sigmoid"], "reference differ"),
    ],
)
@pytest.mark.parametrize("name", ["t.npy", "t.npz", "t.csv"])
def test_a_float_table_audited_as_something_else_is_refused(fp16_e4m3, capsys, args, differ, name):
    # issue 23: a table for fp16 -> fp8_e4m3 was audited as bf16, as fp8_e5m2 output, or as
    # tanh, with exit 0
    d, _ = fp16_e4m3
    code = main(["sweep", f"lut:{d / name}", *args, "--quiet"])
    _one_line(code, capsys.readouterr().err, "the table was written for tanh for fp16 -> fp8_e4m3", differ)


def test_the_table_as_recorded_is_audited(fp16_e4m3):
    import audit

    d, _ = fp16_e4m3
    (r,) = audit.sweep(f"lut:{d / 't.npz'}", dtype="fp16", out_dtype="fp8_e4m3")
    assert r.reference == "tanh" and r.correctly_rounded_fraction == 1.0


@pytest.mark.parametrize("name", ["q.npy", "q.npz", "q.csv"])
@pytest.mark.parametrize(
    "dtype,out,differ",
    [
        ("int8:scale=0.125,zero=0", None, "in, out differ"),
        ("int8:scale=0.0625,zero=1", "int8:scale=0.0625,zero=0", "in differ"),
        ("int8:scale=0.0625,zero=0,round=away", "int8:scale=0.0625,zero=0", "in differ"),
        ("int8:scale=0.0625,zero=0", "int8:scale=0.125,zero=0", "out differ"),
    ],
)
def test_a_quantized_table_audited_with_another_scale_is_refused(tmp_path, capsys, name, dtype, out, differ):
    # issue 23: an int8 table made with scale 0.0625 was audited as 0.125
    q = quant.parse_quant("int8:scale=0.0625,zero=0")
    lut.write_table(tmp_path / name, "sigmoid", q, q)
    extra = ["--out-dtype", out] if out else []
    code = main(["sweep", f"lut:{tmp_path / name}", "--dtype", dtype, *extra, "--reference", "sigmoid"])
    _one_line(code, capsys.readouterr().err, "int8:scale=0.0625,zero=0,round=even", differ)
    # as written, it passes (and the check can fail: the codes are Q(sigmoid(x)) computed here)
    r = quant.sweep(f"lut:{tmp_path / name}", q, q)[0]
    assert r.correct_fraction == 1.0
    codes, _ = lut.read_table(tmp_path / name, 256)
    for c in (-128, -7, 0, 5, 127):
        assert int(codes[c + 128]) == q_code(exact("sigmoid", c * 0.0625), 0.0625, 0, -128, 127)


def test_a_table_with_other_parameters_is_refused(tmp_path, capsys):
    # a silu table for beta = 2 is not audited as silu at its default beta = 1
    q = quant.parse_quant("int8:scale=0.0625,zero=0")
    lut.write_table(tmp_path / "s.npz", "silu", q, q, {"beta": 2.0})
    code = main(["sweep", f"lut:{tmp_path / 's.npz'}", "--dtype", "int8:scale=0.0625,zero=0"])
    _one_line(code, capsys.readouterr().err, "params differ")


@pytest.mark.parametrize(
    "edit,msg",
    [
        (lambda r: {**r, "extra": 1}, "unknown or missing keys ['extra']"),
        (lambda r: {k: v for k, v in r.items() if k != "out"}, "unknown or missing keys ['out']"),
        (lambda r: {**r, "format": "actaudit.lut/9"}, "expected 'actaudit.lut/1'"),
        (lambda r: {**r, "in": {**r["in"], "scale": -1}}, "scale must be a positive"),
        (lambda r: {**r, "in": {**r["in"], "colour": 1}}, "record 'in' has keys"),
        (lambda r: {**r, "params": {"beta": "x"}}, "'params' must map names"),
    ],
)
def test_a_tampered_record_is_refused(tmp_path, capsys, edit, msg):
    q = quant.parse_quant("int8:scale=0.0625,zero=0")
    lut.write_table(tmp_path / "t.npz", "sigmoid", q, q)
    with np.load(tmp_path / "t.npz") as z:
        members = {k: z[k] for k in z.files}
    members["actaudit_lut"] = np.str_(json.dumps(edit(json.loads(str(members["actaudit_lut"])))))
    np.savez(tmp_path / "bad.npz", **members)
    code = main(["sweep", f"lut:{tmp_path / 'bad.npz'}", "--dtype", "int8:scale=0.0625,zero=0"])
    _one_line(code, capsys.readouterr().err, str(tmp_path / "bad.npz"), msg)


def test_an_older_npz_whose_strings_contradict_its_record_is_refused(tmp_path, capsys):
    q = quant.parse_quant("int8:scale=0.0625,zero=0")
    lut.write_table(tmp_path / "t.npz", "sigmoid", q, q)
    with np.load(tmp_path / "t.npz") as z:
        members = {k: z[k] for k in z.files}
    members["reference"] = np.str_("tanh")
    np.savez(tmp_path / "bad.npz", **members)
    code = main(["sweep", f"lut:{tmp_path / 'bad.npz'}", "--dtype", "int8:scale=0.0625,zero=0"])
    _one_line(code, capsys.readouterr().err, "contradicts the table's record")
    del members["actaudit_lut"]  # an older table: its strings are its claims
    np.savez(tmp_path / "old.npz", **members)
    code = main(
        [
            "sweep",
            f"lut:{tmp_path / 'old.npz'}",
            "--dtype",
            "int8:scale=0.0625,zero=0",
            "--reference",
            "sigmoid",
        ]
    )
    _one_line(code, capsys.readouterr().err, "the table was written for tanh", "reference differ")


def test_a_npy_header_claiming_2_40_entries_names_the_file(tmp_path, capsys):
    # issue 23: np.load said "out of memory" without the file name
    p = tmp_path / "huge.npy"
    head = "{'descr': '<i1', 'fortran_order': False, 'shape': (1099511627776,), }"
    head += " " * (-(10 + len(head) + 1) % 64) + "\n"
    p.write_bytes(b"\x93NUMPY\x01\x00" + len(head).to_bytes(2, "little") + head.encode() + b"\0" * 256)
    code = main(["sweep", f"lut:{p}", "--dtype", "int8:scale=0.0625,zero=0", "--reference", "tanh"])
    _one_line(code, capsys.readouterr().err, str(p), "1099511627776 bytes")
    code = main(["sweep", f"lut:{p}", "--dtype", "fp8_e4m3", "--reference", "tanh"])
    _one_line(code, capsys.readouterr().err, str(p), "1099511627776 bytes")


def _cli(args, cwd):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "audit.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )  # a read that blocked on the FIFO would run into the timeout: an error, not a hang


@pytest.mark.parametrize(
    "args",
    [
        ["sweep", "lut:t.npy", "--dtype", "int8:scale=0.0625,zero=0", "--reference", "tanh"],
        ["sweep", "lut:t.npz", "--dtype", "fp8_e4m3", "--reference", "tanh"],
        ["sweep", "lut:t.csv", "--dtype", "fp8_e4m3", "--reference", "tanh"],
        ["sweep", "sigmoid.exp", "--dtype", "fp16", "--semantics", "exp=table:t.npz", "--quiet"],
    ],
)
def test_a_fifo_as_a_table_is_refused_never_waited_on(tmp_path, args):
    # issue 23: a FIFO as table:FILE blocked forever
    name = next(a.split(":", 1)[1].split("=table:")[-1] for a in args if "lut:" in a or "table:" in a)
    name = name.split("table:")[-1]
    os.mkfifo(tmp_path / name)
    r = _cli(args, tmp_path)
    _one_line(r.returncode, r.stderr, "not a regular file")


@pytest.mark.parametrize("dtype", ["int8:scale=0.0625,zero=0", "fp8_e4m3"])
def test_a_parameter_with_only_a_table_is_refused(tmp_path, capsys, dtype):
    # a table is audited at its reference's defaults: a --param was dropped without a word
    # on the quantized path (the float path refused it)
    inq = quant.parse_quant("int8:scale=0.0625,zero=0") if dtype.startswith("int8") else get_format(dtype)
    lut.write_table(tmp_path / "t.npy", "elu", inq, inq)
    code = main(
        ["sweep", f"lut:{tmp_path / 't.npy'}", "--dtype", dtype, "--reference", "elu", "--param", "alpha=2"]
    )
    err = capsys.readouterr().err
    assert code == 2 and err == "actaudit: error: no selected candidate has a parameter 'alpha'\n", err


def test_tables_of_fp4_are_written_read_back_and_swept(tmp_path, capsys):
    # fp4_e2m1 (OCP MX): bit patterns 0..7 are 0, 0.5, 1, 1.5, 2, 3, 4, 6, and 8..15 their
    # negatives; each entry is the pattern of gelu(x) rounded to the nearest of them (no
    # ties here: checked), a negative value nearest 0 to -0 (pattern 8).  The read-back
    # expected 256 or 65536 entries and refused the 16 it had just written.
    mags = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    want = []
    for b in range(16):
        x = mp.mpf(mags[b & 7]) * (-1 if b & 8 else 1)
        g = x / 2 * mp.erfc(-x / mp.sqrt(2))
        d = sorted((abs(abs(g) - m), i) for i, m in enumerate(mags))
        assert d[0][0] < d[1][0]  # no tie
        want.append(d[0][1] | (8 if g < 0 or (g == 0 and b & 8) else 0))
    for ext in ("npy", "npz", "csv"):
        p = tmp_path / f"g.{ext}"
        code = main(["lut", "gelu", "--dtype", "fp4_e2m1", "-o", str(p)])
        out = capsys.readouterr().out
        assert code in (0, None) and "16 of 16 finite inputs correctly rounded" in out, out
    assert np.load(tmp_path / "g.npy").tolist() == want
    import audit

    r = audit.sweep(f"lut:{tmp_path / 'g.csv'}", dtype="fp4_e2m1", reference="gelu")[0]
    assert r.domain.count == 16 and r.correctly_rounded_fraction == 1.0
    # a table of another size for this format is refused in one line
    code = main(["sweep", f"lut:{tmp_path / 'g.npy'}", "--dtype", "fp8_e4m3", "--reference", "gelu"])
    err = capsys.readouterr().err
    assert code == 2 and "expected 256 entries" in err and err.count("\n") == 1, err
