"""Auditing real kernels: framework ops, Python callables, golden data and device dumps."""

import csv
import math
import sys

import mpmath as mp
import numpy as np
import pytest
from helpers import optional

import audit
from audit.cli import main
from audit.numbers.formats import get_format


def ulp_err(r, f, fmt):
    e = mp.frexp(f)[1] - 1 if f != 0 else None
    u = mp.mpf(fmt.smallest_subnormal) if f == 0 else mp.ldexp(1, max(e, fmt.emin) - fmt.p + 1)
    return float(abs(mp.mpf(r) - f) / u)


EXACT = {"gelu": lambda x: x * mp.ncdf(x), "silu": lambda x: x / (1 + mp.exp(-x))}


@pytest.mark.parametrize("op,ref", [("gelu", "gelu"), ("gelu_tanh", "gelu"), ("silu", "silu")])
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
def test_torch_ops_on_cpu(op, ref, dtype):
    torch = optional("torch")  # CI: a failure when missing
    F = torch.nn.functional
    fmt = get_format(dtype)
    kw = {"samples": 3000} if dtype == "fp32" else {}
    (r,) = audit.sweep(f"torch:{op}", dtype=dtype, keep_points=True, **kw)
    assert r.reference == ref
    p = r.points
    # the outputs are torch's own, computed here independently
    tdt = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
    t = torch.tensor(p.x, dtype=torch.float64).to(tdt)
    y = (F.gelu(t, approximate="tanh") if op == "gelu_tanh" else getattr(F, op)(t)).to(torch.float64).numpy()
    assert np.array_equal(p.got, y, equal_nan=True)
    # and their errors, recomputed with mpmath at the worst input and at random ones
    mp.mp.prec = 120
    fin = np.flatnonzero(p.cls == 0)
    worst = int(fin[np.argmax(p.ulp_err[fin])])
    pick = np.random.default_rng(1).choice(fin, 150, replace=False)
    for i in list(pick) + [worst]:
        f = EXACT[ref](mp.mpf(p.x[i]))
        if abs(f) > 1e-300:
            # f(x) is carried to float64 or better: ULP errors are good to ~2^(p-53) ULP
            assert p.ulp_err[i] == pytest.approx(ulp_err(p.got[i], f, fmt), rel=1e-6, abs=1e-6)
    assert r.max_ulp == pytest.approx(ulp_err(p.got[worst], EXACT[ref](mp.mpf(p.x[worst])), fmt), rel=1e-6)


def test_jax_ops_or_skip():
    optional("jax")  # skips (saying why) even in CI: the README's test command does not install jax
    (r,) = audit.sweep("jax:gelu", dtype="fp16")
    assert r.reference == "gelu" and r.domain.count == 63488


@pytest.fixture
def usermod(tmp_path, monkeypatch):
    (tmp_path / "mykernels.py").write_text(
        "import numpy as np\n"
        "def gelu(x):\n"
        "    y = 0.5 * x.astype(np.float32) * (1 + np.tanh(0.7978845608 * (x.astype(np.float32) + 0.044715 * x.astype(np.float32) ** 3)))\n"
        "    return y.astype(x.dtype)\n"
        "def boom(x):\n    raise ValueError('bad kernel')\n"
        "def short(x):\n    return x[:3]\n"
        "def wide(x):\n    return x.astype(np.float64)\n"
        "def mutate(x):\n    x[0] = 1\n    return x.copy()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    sys.modules.pop("mykernels", None)


def test_python_callable(usermod, capsys):
    (r,) = audit.sweep("mykernels:gelu", reference="gelu", dtype="bf16")
    assert r.candidate == "mykernels:gelu" and r.domain.count == 65280 and r.max_ulp > 0
    assert main(["sweep", "mykernels:gelu", "--reference", "gelu", "--dtype", "bf16", "-q"]) == 0


@pytest.mark.parametrize(
    "target,needle",
    [
        ("nomodule_xyz:f", "cannot import module 'nomodule_xyz'"),
        ("mykernels:nothere", "has no attribute 'nothere'"),
        ("mykernels:boom", "mykernels:boom raised ValueError: bad kernel"),
        ("mykernels:short", "returned shape (3,)"),
        ("mykernels:wide", "returned dtype float64"),
        ("mykernels:mutate", "modified its input array"),
    ],
)
def test_callable_errors_are_one_line(usermod, capsys, target, needle):
    assert main(["sweep", target, "--reference", "gelu", "--dtype", "fp16"]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_callable_needs_reference(usermod, capsys):
    assert main(["sweep", "mykernels:gelu", "--dtype", "fp16"]) == 2
    assert "--reference" in capsys.readouterr().err


def same_numbers(a, b):
    for k in (
        "max_ulp",
        "mean_ulp",
        "p99_ulp",
        "max_abs",
        "max_rel",
        "max_ulp_distance",
        "correctly_rounded_fraction",
        "nan_count",
        "inf_count",
    ):
        assert getattr(a, k) == getattr(b, k) or (math.isnan(getattr(a, k)) and math.isnan(getattr(b, k))), k
    assert a.worst == b.worst
    assert [(f.kind, f.count, f.intervals) for f in a.findings if f.kind != "special"] == [
        (f.kind, f.count, f.intervals) for f in b.findings if f.kind != "special"
    ]


@pytest.mark.parametrize("form", ["npz", "npy", "csv", "bin"])
def test_golden_dump_round_trip(tmp_path, capsys, form):
    fmt = get_format("fp16")
    g = tmp_path / "golden.npz"
    assert main(["golden", "gelu", "--dtype", "fp16", "-o", str(g)]) == 0
    z = np.load(g, allow_pickle=False)
    x = z["x"]
    assert np.array_equal(x, fmt.finite_values()) and z["y_bits"].dtype == np.uint16
    # the "device": gelu.tanh evaluated on the golden inputs
    cand = audit.catalog()["gelu.tanh"]
    y = cand.evaluate(x, fmt, fmt)
    y16 = y.astype(np.float16)
    d = tmp_path / f"out.{form}"
    if form == "npz":
        np.savez(d, x=x.astype(np.float16), y=y16)
    elif form == "npy":
        np.save(d, y16)  # outputs alone, in golden order
    elif form == "csv":
        with open(d, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["x", "y"])
            for a, b in zip(x.astype(np.float16).view(np.uint16), y16.view(np.uint16)):
                w.writerow([f"0x{a:04x}", f"0x{b:04x}"])
    else:
        d.write_bytes(y16.astype("<f2").tobytes())
    (via_dump,) = audit.sweep([], dtype="fp16", dump=str(d), reference="gelu")
    (direct,) = audit.sweep("gelu.tanh", dtype="fp16")
    assert via_dump.domain.count == direct.domain.count and via_dump.domain.exhaustive
    same_numbers(via_dump, direct)
    assert main(["sweep", "--dump", str(d), "--reference", "gelu", "--dtype", "fp16", "-q"]) == 0


def test_golden_formats(tmp_path):
    assert main(["golden", "sigmoid", "--dtype", "fp8_e4m3", "-o", str(tmp_path / "g.csv")]) == 0
    rows = list(csv.DictReader(open(tmp_path / "g.csv")))
    assert len(rows) == 254 and rows[0]["x_hex"] == "0xfe"  # -448
    # y is the correctly rounded sigmoid: check one by hand with mpmath
    r = rows[200]
    xv = float(r["x"])
    s = 1 / (1 + mp.exp(-mp.mpf(xv)))
    assert float(r["y"]) == get_format("e4m3").round_mpf(s)
    assert main(["golden", "gelu", "--dtype", "fp16", "-o", str(tmp_path / "g.npy")]) == 0
    a = np.load(tmp_path / "g.npy")
    assert a.shape == (63488, 3)


def test_dump_problems_are_reported(tmp_path, capsys):
    bad_x = tmp_path / "a.npz"
    np.savez(bad_x, x=np.array([0.1, 1.0]), y=np.array([0.0, 0.5]))
    assert main(["sweep", "--dump", str(bad_x), "--reference", "gelu", "--dtype", "fp16"]) == 2
    assert "not fp16 values (first at index 0: 0.1)" in capsys.readouterr().err
    lens = tmp_path / "b.npz"
    np.savez(lens, x=np.array([1.0, 2.0], np.float16), y=np.array([0.5], np.float16))
    assert main(["sweep", "--dump", str(lens), "--reference", "gelu", "--dtype", "fp16"]) == 2
    assert "2 inputs but 1 outputs" in capsys.readouterr().err
    short = tmp_path / "c.npy"
    np.save(short, np.zeros(10, np.float16))
    assert main(["sweep", "--dump", str(short), "--reference", "gelu", "--dtype", "fp16"]) == 2
    assert "golden order" in capsys.readouterr().err
    obj = tmp_path / "d.npy"
    np.save(obj, np.array([1, "a"], dtype=object), allow_pickle=True)
    assert main(["sweep", "--dump", str(obj), "--reference", "gelu", "--dtype", "fp16"]) == 2
    assert "d.npy" in capsys.readouterr().err
    junk = tmp_path / "e.npz"
    junk.write_bytes(b"PK\x03\x04garbage")
    assert main(["sweep", "--dump", str(junk), "--reference", "gelu", "--dtype", "fp16"]) == 2
    assert "e.npz" in capsys.readouterr().err
    nan_in = tmp_path / "f.npz"
    np.savez(
        nan_in, x=np.array([np.nan, 1.0, -np.inf], np.float16), y=np.array([np.nan, 0.8413, 0.0], np.float16)
    )
    (r,) = audit.sweep([], dtype="fp16", dump=str(nan_in), reference="gelu")
    assert r.domain.count == 1 and len(r.specials) == 2
    assert [s["ok"] for s in r.specials] == [True, True]


@pytest.mark.parametrize("engine", ["torch", "jax"])
def test_a_baseline_of_another_torch_or_jax_version_does_not_pass_check(
    tmp_path, monkeypatch, capsys, engine
):
    """A torch: or jax: target's baseline entry is bound to the framework's version and
    device (backend): after an upgrade, check fails (re-record), it never compares the figures
    of another framework as if they were the same run."""
    import importlib
    import json

    mod = importlib.import_module(engine)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "actaudit.toml").write_text(
        f'baseline = "base.json"\n[[audit]]\nname = "e"\ntargets = ["{engine}:gelu"]\ndtype = "fp16"\n'
    )
    assert main(["baseline"]) == 0
    assert main(["check"]) == 0
    base = json.loads((tmp_path / "base.json").read_text())
    ((_, ent),) = base["entries"].items()
    ident = ent["identity"]["candidate_identity"]
    assert ident["engine"] == engine and ident["version"] == str(mod.__version__)
    assert ident["options"] == ({"device": "cpu"} if engine == "torch" else {"backend": "cpu"})
    capsys.readouterr()
    monkeypatch.setattr(mod, "__version__", "99.0.0")  # the installed version is another one
    assert main(["check"]) == 1
    out = capsys.readouterr().out
    assert "re-record with actaudit baseline" in out and "99.0.0" in out
