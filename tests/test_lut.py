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

from audit import lut, quant
from audit.cli import main
from audit.errors import BadFileError
from audit.formats import get_format

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
    """clamp(RNE(y / scale) + zero): written on rationals, independent of audit.quant."""
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
        table, meta = lut.read_table(tmp_path / name)
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
    from audit.candidates import catalog
    from audit.formats import FORMATS

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
