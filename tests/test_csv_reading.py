"""CSV dumps and tables are read by audit.io.read_csv / decimal_floats: every row as wide as
the header, decimal cells correctly rounded to float64 (checked against exact rationals
here), anything else one line and exit 2."""

from fractions import Fraction

import numpy as np
import pytest

from audit.cli import main
from audit.errors import BadFileError
from audit.io import decimal_floats, read_csv


def nearest_double(text: str) -> float:
    """The float64 nearest to the decimal ``text`` (ties to even), from exact rationals."""
    q = Fraction(text)
    f = float(q)  # a candidate, then checked exactly against its neighbours
    for g in (np.nextafter(f, -np.inf), np.nextafter(f, np.inf)):
        d, dg = abs(Fraction(f) - q), abs(Fraction(float(g)) - q)
        assert dg > d or (dg == d and (int(np.float64(f).view(np.int64)) & 1) == 0)
    return f


@pytest.mark.parametrize(
    "cell",
    [
        "0.1",
        "2.2250738585072011e-308",
        "1.00000000000000011102230246251565404236316680908203125",
        "1.000000000000000111022302462515654042363166809082031250000001",
        "-0",
        "4.9e-324",
        "123456789e-5",
    ],
)
def test_decimal_cells_are_correctly_rounded(cell):
    (got,) = decimal_floats([cell], "t")
    want = nearest_double(cell)
    assert got == want and np.signbit(got) == cell.startswith("-")


def test_specials_and_refusals():
    a = decimal_floats(["inf", "-Infinity", "nan", "+1.5", ".5", "5."], "t")
    assert np.isposinf(a[0]) and np.isneginf(a[1]) and np.isnan(a[2]) and list(a[3:]) == [1.5, 0.5, 5.0]
    # digits of other scripts, which float() reads ('\u0661' Arabic-Indic one, '\uff11' fullwidth)
    for bad in ["1_000", "0x1p3", "", "1,5", "one", "1e", "--1", "\u0661", "\uff11", "1e\u0661"]:
        with pytest.raises(BadFileError, match="not numbers"):
            decimal_floats(["1", bad], "t")


def test_rows_must_be_as_wide_as_the_header():
    assert read_csv(b"x,y\n1,2\n3,4\n", "t") == {"x": ["1", "3"], "y": ["2", "4"]}
    assert read_csv(b"1\n2\n", "t", header=False) == {"x": ["1", "2"]}
    for data, needle in [
        (b"x,y\n1,2,3\n", "row 2 has 3 cells"),
        (b"x,y\n1,2\n3\n", "row 3 has 1 cells"),
        (b"x,x\n1,2\n", "distinct"),
        (b"x,\n1,2\n", "distinct"),
        (b"", "empty"),
        (b"x,y\n", "no rows"),
        (b"x,y\n\xff,1\n", "unreadable"),
    ]:
        with pytest.raises(BadFileError, match=needle):
            read_csv(data, "t")


def test_a_dump_with_an_extra_cell_is_one_line(tmp_path, capsys):
    p = tmp_path / "d.csv"
    p.write_text("x,y\n0.5,0.25\n1.0,0.5,9\n")
    code = main(["sweep", f"dump:{p}", "--reference", "gelu", "--dtype", "fp16"])
    err = capsys.readouterr().err
    assert code == 2 and "row 3 has 3 cells" in err and err.count("\n") == 1, err
