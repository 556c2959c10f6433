"""Untrusted files: input lists, dumps, devices, bombs, checkpoints (issue 18 A5-A7, B2)."""

import json
import os
from pathlib import Path

import mpmath as mp
import numpy as np
import pytest

from audit.cli import main

HOSTILE = Path(__file__).parent / "fixtures" / "hostile"


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _gelu(x: float) -> mp.mpf:
    with mp.workprec(200):
        return mp.mpf(x) / 2 * mp.erfc(-mp.mpf(x) / mp.sqrt(2))


def test_golden_inputs_read_the_x_column(tmp_path, capsys):
    out = tmp_path / "g.npz"
    code, _, err = run(
        capsys,
        "golden",
        "gelu",
        "--dtype",
        "fp16",
        "--inputs",
        str(HOSTILE / "inputs_two_columns.npy"),
        "-o",
        str(out),
    )
    assert code == 0, err
    with np.load(out) as z:
        assert z["x"].tolist() == [1.0, 2.0, -3.5]  # not the zeros of column y
        # GELU(1) = 0.8413447..., in fp16 0.84130859375 (nearest of the 2^-11 grid)
        assert z["y"][0] == float(np.float16(float(_gelu(1.0))))


def test_golden_takes_a_plain_fp32_list(tmp_path, capsys):
    xs = np.array([0.5, -1.25, 3.0, 1e-30], np.float32)
    np.save(tmp_path / "in.npy", xs)
    code, _, err = run(
        capsys,
        "golden",
        "gelu",
        "--dtype",
        "fp32",
        "--inputs",
        str(tmp_path / "in.npy"),
        "-o",
        str(tmp_path / "g.npz"),
    )
    assert code == 0, err
    with np.load(tmp_path / "g.npz") as z:
        assert z["x"].tolist() == xs.astype(np.float64).tolist()
        for x, y in zip(z["x"], z["y"]):
            assert y == float(np.float32(float(_gelu(float(x)))))  # 200-bit GELU, rounded once


def test_a_dump_with_duplicate_special_inputs_is_refused(capsys):
    code, _, err = run(
        capsys,
        "sweep",
        "--dump",
        str(HOSTILE / "dump_duplicate_specials.npz"),
        "--reference",
        "gelu",
        "--dtype",
        "fp16",
    )
    assert code == 2 and "appears more than once" in err and err.count("\n") == 1


def test_a_device_that_never_ends_is_refused(capsys):
    # every fp16 value as x and y in float64 is 1 MB: the read stops a little beyond that
    code, _, err = run(
        capsys,
        "sweep",
        "--dump",
        "/dev/zero",
        "--dump-dtype",
        "fp16",
        "--reference",
        "gelu",
        "--dtype",
        "fp16",
    )
    assert code == 2 and "/dev/zero" in err and "too large" in err


def test_a_zip_bomb_dump_is_refused(tmp_path, capsys):
    from tests.test_hostile_cache import _bomb

    _bomb(tmp_path / "d.npz", member="y.npy")
    code, _, err = run(capsys, "sweep", "--dump", str(tmp_path / "d.npz"), "--reference", "gelu")
    assert code == 2 and "d.npz" in err and "limit" in err


def _checkpointed(tmp_path, monkeypatch):
    import audit
    from audit.numbers import inputs

    monkeypatch.setattr(inputs, "CHUNK", 1 << 17)
    rng = (1.0, 1.01)  # 83,887 fp32 inputs (ordinals of 1.0 to 1.01: 0.01 * 2^23 + 1)
    r = audit.sweep("gelu.tanh", dtype="fp32", range=rng, exhaustive=True, checkpoint=tmp_path)[0]
    assert r.domain.count == 83887
    (state,) = tmp_path.glob("*.json")
    return rng, state


@pytest.mark.parametrize(
    "edit,needle",
    [
        (lambda d: d.update(done=-1), "'done'"),
        (lambda d: d.update(done=7), "'done'"),
        (lambda d: d.pop("summary"), "'summary'"),
        (lambda d: d["summary"].update(count=d["summary"]["count"] + 1), "counts do not add up"),
        (
            lambda d: d["summary"].update(count=d["summary"]["count"] + 1, finite=d["summary"]["finite"] + 1),
            "chunks hold 83887",
        ),
        (lambda d: d["summary"].update(max_ulp="big"), "max_ulp"),
        (lambda d: d["summary"].update(sums=[float("nan")]), "sums"),
        (lambda d: d.update(findings=[{"kind": "nan", "count": -5}]), "finding"),
        (lambda d: d.update(arrays="../../etc/passwd"), "arrays"),
        (lambda d: d.update(zzz=1), "key 'zzz' is unknown in a checkpoint"),
        (lambda d: d["summary"].update(zzz=1), "key 'summary.zzz' is unknown"),
        (lambda d: d.update(mono_last=[[float("nan"), 0.5, 0.5]]), "'mono_last' entries"),
        (lambda d: d.update(mono_last=[[1.0, 0.5]]), "'mono_last' entries"),
        (lambda d: d.update(mono_last=["x"]), "'mono_last' entries"),
        (lambda d: d.update(mono_last=[[10**400, 0.5, 0.5]]), "invalid"),
        (lambda d: d["summary"].update(max_abs=10**400), "invalid"),
        (lambda d: d["summary"].update(sums=[1.7e308, 1.7e308]), "'summary.sums' exceed"),
        (lambda d: d["summary"].update(hist=[[0, 5]]), "do not add up"),
        (lambda d: d["summary"].update(exact_p99=False), "'summary.exact_p99' does not match"),
    ],
)
def test_a_tampered_checkpoint_is_refused(tmp_path, monkeypatch, edit, needle):
    import audit
    from audit.errors import BadFileError

    rng, state = _checkpointed(tmp_path, monkeypatch)
    doc = json.loads(state.read_text())
    edit(doc)
    state.write_text(json.dumps(doc))
    with pytest.raises(BadFileError, match=needle):
        audit.sweep("gelu.tanh", dtype="fp32", range=rng, exhaustive=True, checkpoint=tmp_path)


def test_a_checkpoint_with_fewer_kept_errors_than_results_is_refused(tmp_path, monkeypatch):
    # the error arrays rewritten shorter: the exact p99 would read past them (a traceback)
    import audit
    from audit.errors import BadFileError

    rng, state = _checkpointed(tmp_path, monkeypatch)
    doc = json.loads(state.read_text())
    np.savez(tmp_path / doc["arrays"], e0=np.zeros(3))
    with pytest.raises(BadFileError, match="do not add up"):
        audit.sweep("gelu.tanh", dtype="fp32", range=rng, exhaustive=True, checkpoint=tmp_path)


def test_a_mean_of_errors_whose_sum_is_beyond_float64():
    from audit.measure.metrics import Summary

    s = Summary(finite=4)
    s._sums = [1.5e308, 1.7e308, 1.1e308, 0.5]  # sum 4.3e308 (+ 0.5): beyond float64
    with mp.workprec(2000):  # the exact sum, rounded once
        want = float((mp.mpf(1.5e308) + mp.mpf(1.7e308) + mp.mpf(1.1e308) + mp.mpf(0.5)) / 4)
    assert s.mean_ulp == want


@pytest.mark.parametrize(
    "members,needle",
    [
        ({"extra": np.zeros(3)}, "unknown member(s) ['extra']"),
        ({"format": np.str_("bf16")}, "member 'format' says 'bf16', not fp16"),
        # bits and values of the same side both read: a disagreement is refused, not resolved
        ({"y": np.array([0.25, 0.5, 1.0], np.float16)}, "members 'y_bits' and 'y' disagree"),
        ({"x": np.array([0.5, 1.0, 2.0], np.float16)}, "members 'x_bits' and 'x' disagree"),
    ],
    ids=["unknown", "format", "y-pair", "x-pair"],
)
def test_a_dump_npz_is_bound_to_what_it_holds(tmp_path, capsys, members, needle):
    x = np.array([0.5, 1.0, 1.5], np.float16)
    y = np.array([0.25, 0.75, 1.25], np.float16)  # (not GELU: the members are what is tested)
    doc = {"x_bits": x.view(np.uint16), "y_bits": y.view(np.uint16), **members}
    np.savez(tmp_path / "d.npz", **doc)
    code, _, err = run(
        capsys, "sweep", f"dump:{tmp_path / 'd.npz'}", "--reference", "gelu", "--dtype", "fp16"
    )
    assert code == 2 and needle in err and err.count("\n") == 1, err


def test_a_dump_npz_whose_pairs_agree_is_read(tmp_path, capsys):
    x = np.array([0.5, 1.0, np.nan], np.float16)
    y = np.array([0.25, 0.75, np.nan], np.float16)
    doc = {"x_bits": x.view(np.uint16), "x": x, "y_bits": y.view(np.uint16), "y": y.astype(np.float64)}
    np.savez(tmp_path / "d.npz", **doc, format=np.str_("fp16"), reference=np.str_("gelu"))
    code, out, err = run(
        capsys, "sweep", f"dump:{tmp_path / 'd.npz'}", "--reference", "gelu", "--dtype", "fp16"
    )
    assert code == 0, err


def test_write_errors_name_the_users_path_not_a_temporary_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "link.json").symlink_to(tmp_path / "missing" / "out.json")
    (tmp_path / "d").mkdir()
    cases = [
        ("link.json", f"{tmp_path / 'missing' / 'out.json'}: No such file or directory"),
        ("d", "d: is a directory, not a file to write"),
    ]
    if os.path.exists("/dev/full"):
        cases.append(("/dev/full", "/dev/full: No space left on device"))
    for target, needle in cases:
        code, _, err = run(capsys, "sweep", "relu", "--dtype", "fp8_e4m3", "--json", target)
        assert code == 2 and needle in err and ".tmp" not in err and err.count("\n") == 1, err
