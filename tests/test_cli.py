import csv
import json

import pytest

from audit.cli import main


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_sweep_table(capsys):
    code, out, err = run(capsys, "sweep", "gelu", "--dtype", "fp16")
    assert code == 0
    for name in ("gelu.erf", "gelu.erfc", "gelu.tanh", "gelu.sigmoid"):
        assert name in out


def test_sweep_json_stdout(capsys):
    code, out, _ = run(capsys, "sweep", "gelu.tanh", "--dtype", "fp16,bf16", "--json", "-")
    assert code == 0
    doc = json.loads(out)
    # the default compute ('auto'): the storage format itself, then fp32, for each 16-bit format
    assert [(r["dtype"], r["compute"]) for r in doc["results"]] == [
        ("fp16", "fp16"),
        ("fp16", "fp32"),
        ("bf16", "bf16"),
        ("bf16", "fp32"),
    ]


def test_sweep_json_and_csv_files(capsys, tmp_path):
    j, c = tmp_path / "r.json", tmp_path / "sub" / "r.csv"
    code, out, _ = run(capsys, "sweep", "gelu.erf", "-d", "fp8_e4m3", "--json", str(j), "--csv", str(c))
    assert code == 0
    assert json.loads(j.read_text())["results"][0]["inputs"]["count"] == 254
    rows = list(csv.DictReader(c.open()))
    # two evaluation paths by default (fp8_e4m3 itself and fp32), 254 finite inputs each
    assert [sum(r["compute"] == c for r in rows) for c in ("fp8_e4m3", "fp32")] == [254, 254]
    assert set(rows[0]) >= {"x", "x_hex", "got", "exact", "ulp_error", "class"}
    assert not list(tmp_path.glob("**/*.tmp"))


@pytest.mark.parametrize(
    "args,needle",
    [
        (("sweep", "gelux"), "did you mean"),
        (("sweep", "gelu", "--dtype", "fp17"), "unknown format"),
        (("sweep", "gelu", "--range", "3:1"), "reversed"),
        (("sweep", "gelu", "--range", "nan:1"), "NaN"),
        (("sweep", "gelu", "--samples", "5"), "exhaustively"),
        (("sweep", "gelu.tanh", "--param", "x"), "NAME=VALUE"),
        (("sweep", "gelu.tanh", "--param", "limit=3"), "parameter"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, args, needle):
    code, out, err = run(capsys, *args)
    assert code == 2
    assert needle in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_list_and_formats(capsys):
    code, out, _ = run(capsys, "list", "--json")
    assert code == 0
    cands = json.loads(out)
    assert {"id", "reference", "formula", "source", "params"} <= set(cands[0])
    code, out, _ = run(capsys, "formats", "--json")
    assert {f["name"] for f in json.loads(out)} == {
        "fp8_e4m3",
        "fp8_e5m2",
        "bf16",
        "fp16",
        "fp32",
        "fp64",
        "fp8_e4m3fnuz",
        "fp8_e5m2fnuz",
        "fp6_e3m2",
        "fp6_e2m3",
        "fp4_e2m1",
        "e8m0",
        "tf32",
    }
    code, out, _ = run(capsys, "list")
    assert code == 0 and "gelu.tanh" in out


def test_console_script_exists():
    import shutil
    import subprocess

    exe = shutil.which("actaudit")
    assert exe, "pip install . must provide the actaudit console script"
    p = subprocess.run([exe, "sweep", "nope"], capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.startswith("actaudit: error:")


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--checkpoint", "ck"], "add --exhaustive"),
        (["--executor", "spark", "--exhaustive"], "unknown executor 'spark'"),
        (["--executor", "dask", "--exhaustive"], "needs --scheduler"),
        (["--scheduler", "tcp://h:1", "--exhaustive"], "--scheduler applies to --executor dask"),
    ],
)
def test_scale_options_misused_are_one_line(capsys, args, needle):
    code, out, err = run(capsys, "sweep", "gelu.tanh", "--dtype", "fp32", "--range", "1:1.001", *args)
    assert code == 2 and needle in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_checkpointed_sweep_reruns_from_its_checkpoint(capsys, tmp_path, monkeypatch):
    ck = tmp_path / "ck"
    plain = [
        "sweep",
        "gelu.tanh",
        "--dtype",
        "fp32",
        "--range",
        "1:1.01",
        "--exhaustive",
        "--json",
        "-",
        "--workers",
        "1",
    ]
    args = plain + ["--checkpoint", str(ck)]
    code, first, _ = run(capsys, *args)
    assert code == 0 and len(list(ck.glob("*.json"))) == 1
    # README: "A finished result is read back instantly": the rerun evaluates no chunk, so
    # it must not need the oracle at all (a rerun that recomputed would fail here)
    from audit.oracle import oracle

    def no_oracle(*a, **k):
        raise AssertionError("the rerun recomputed a chunk instead of reading the checkpoint")

    monkeypatch.setattr(oracle, "evaluate", no_oracle)
    code, second, err = run(capsys, *args)
    assert code == 0, err
    a, b = json.loads(first), json.loads(second)
    assert a["results"] == b["results"]
    # and without the checkpoint directory the same command does need the oracle
    with pytest.raises(AssertionError, match="recomputed"):
        main(plain)


def test_distribution_defaults_as_blocks_does_and_a_dump_target_is_a_dump(capsys, tmp_path, monkeypatch):
    """--distribution normal is normal:std=1, the --blocks default, and a refused spelling
    shows the syntax; 'sweep dump:FILE' is the dump FILE, as diff takes it: a missing file is
    'dump not found', never an import of a module 'dump' (issue 35, item 7)."""
    from audit.measure import blocks, weighting

    d = weighting.parse("normal")
    assert (d.kind, d.a, d.b) == ("normal", 0.0, 1.0) and d.label == "normal:std=1.0"
    assert blocks.parse_dist("normal") == ("normal", 0.0, 1.0)
    assert weighting.parse("laplace:mean=2").b == 1.0
    code, _, err = run(capsys, "sweep", "relu.max", "--dtype", "fp8_e4m3", "--distribution", "normal:std=0")
    assert code == 2 and "normal:std=S[,mean=M]" in err and len(err.strip().splitlines()) == 1
    code, _, err = run(capsys, "sweep", "relu.max", "--dtype", "fp8_e4m3", "--distribution", "uniform")
    assert code == 2 and "uniform:lo=A,hi=B" in err
    monkeypatch.chdir(tmp_path)
    for cmd in (["sweep", "dump:x.npz"], ["diff", "dump:x.npz", "gelu.erf"]):
        code, _, err = run(capsys, *cmd, "--dtype", "fp16", "--reference", "gelu")
        assert code == 2 and err.strip() == "actaudit: error: x.npz: dump not found", cmd
    code, _, err = run(capsys, "sweep", "dump:x.npz", "--dtype", "fp16")
    assert code == 2 and "module" not in err and "--reference" in err
