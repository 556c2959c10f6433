"""audit/gate/check.py, the spec side: loading and validating a gate spec, its entries and targets, running them.

They kill mutants that mutmut found surviving the rest of the suite, each with an expectation
worked in the test (docs/design/mutation-testing.md)."""

import dataclasses
import shlex
from pathlib import Path
from types import SimpleNamespace

import pytest

from audit.errors import BadFileError, BadOptionError, UnknownNameError
from audit.gate import check as gate
from audit.gate import formats as gate_formats
from audit.measure import blocks as blocks_mod
from audit.measure.quant import QuantResult
from audit.targets import semantics

BASE = {"name": '"a"', "targets": '["gelu"]', "dtype": '"fp16"'}
ISSTR = "must be a string or a non-empty list of strings"
KNOWN_AUDIT = ", ".join(sorted(gate.AUDIT_KEYS))
KNOWN_TOL = ", ".join(sorted(gate.TOLERANCE_KEYS))
KNOWN_TOP = "audit, baseline, diff, model, require_certified, slack"


def table(**over) -> str:
    """One [[audit]] table: BASE with keys replaced (a TOML value), added, or dropped (None)."""
    keys = {**BASE, **over}
    return "[[audit]]\n" + "".join(f"{k} = {v}\n" for k, v in keys.items() if v is not None)


def write(tmp_path: Path, text: str, name: str = "actaudit.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def refusal(p: Path, **kw) -> str:
    with pytest.raises(BadFileError) as e:
        gate.load_spec(p, **kw)
    return str(e.value)


# (keys of the [[audit]] table, the key named, the rest of the line)
BAD_AUDITS = [
    ({"name": None}, "name", "is missing"),
    ({"targets": None}, "targets", "is missing"),
    ({"dtype": None}, "dtype", "is missing"),
    ({"name": None, "targets": None}, "name", "is missing"),  # the first missing one
    ({"name": None, "dump": '"d.npz"', "reference": '"gelu"'}, "name", "is missing"),
    ({"targets": None, "dtype": None, "dump": '"d.npz"'}, "dtype", "is missing"),  # dump: no targets needed
    ({"name": "1"}, "name", "must be a non-empty string"),
    ({"name": '""'}, "name", "must be a non-empty string"),
    ({"targets": "3"}, "targets", ISSTR),
    ({"targets": "[]"}, "targets", ISSTR),
    ({"targets": '["gelu", ""]'}, "targets", ISSTR),
    ({"targets": '["gelu", 1]'}, "targets", ISSTR),
    ({"targets": '""'}, "targets", ISSTR),
    ({"dtype": "[]"}, "dtype", ISSTR),
    ({"dtype": '["fp16", 2]'}, "dtype", ISSTR),
    ({"dtype": "true"}, "dtype", ISSTR),
    ({"compute": "[]"}, "compute", ISSTR),
    ({"compute": '""'}, "compute", ISSTR),
    ({"compute": "32"}, "compute", ISSTR),
    # range: [lo, hi], both finite numbers, lo < hi
    ({"range": "1.0"}, "range", "must be [lo, hi] with finite lo < hi"),
    ({"range": "[1.0]"}, "range", "must be [lo, hi] with finite lo < hi"),
    ({"range": "[1.0, 2.0, 3.0]"}, "range", "must be [lo, hi] with finite lo < hi"),
    ({"range": "[1.0, 1.0]"}, "range", "must be [lo, hi] with finite lo < hi"),
    ({"range": "[2.0, 1.0]"}, "range", "must be [lo, hi] with finite lo < hi"),
    ({"range": "[-inf, 1.0]"}, "range", "must be [lo, hi] with finite lo < hi"),
    ({"range": "[0.0, nan]"}, "range", "must be [lo, hi] with finite lo < hi"),
    ({"range": "[false, true]"}, "range", "must be [lo, hi] with finite lo < hi"),
    ({"range": '["0", "1"]'}, "range", "must be [lo, hi] with finite lo < hi"),
    # params: finite numbers or non-empty lists of them
    ({"params": "1.0"}, "params", "must be a table of finite numbers or non-empty lists of them"),
    (
        {"params": "{ limit = true }"},
        "params",
        "must be a table of finite numbers or non-empty lists of them",
    ),
    ({"params": "{ limit = inf }"}, "params", "must be a table of finite numbers or non-empty lists of them"),
    ({"params": "{ limit = [] }"}, "params", "must be a table of finite numbers or non-empty lists of them"),
    (
        {"params": "{ limit = [1.0, nan] }"},
        "params",
        "must be a table of finite numbers or non-empty lists of them",
    ),
    ({"params": '{ limit = "8" }'}, "params", "must be a table of finite numbers or non-empty lists of them"),
    (
        {"params": "{ a = 1.0, limit = { x = 1 } }"},
        "params",
        "must be a table of finite numbers or non-empty lists of them",
    ),
    # integers, with their least value; below 2**63
    ({"samples": "0"}, "samples", "must be an integer >= 1"),
    ({"samples": "1.0"}, "samples", "must be an integer >= 1"),
    ({"samples": "true"}, "samples", "must be an integer >= 1"),
    ({"samples": str(2**63)}, "samples", "must be an integer >= 1"),
    ({"seed": "-1"}, "seed", "must be an integer >= 0"),
    ({"seed": '"0"'}, "seed", "must be an integer >= 0"),
    ({"seed": "false"}, "seed", "must be an integer >= 0"),
    ({"seed": str(2**63)}, "seed", "must be an integer >= 0"),
    ({"grid": "1"}, "grid", "must be an integer >= 2"),
    ({"grid": "2.5"}, "grid", "must be an integer >= 2"),
    ({"grid": str(2**63)}, "grid", "must be an integer >= 2"),
    ({"grad": "1"}, "grad", "must be true or false"),
    ({"grad": '"true"'}, "grad", "must be true or false"),
    ({"backward": "1"}, "backward", "must be true or false"),
    ({"backward": '"yes"'}, "backward", "must be true or false"),
    # tolerances
    ({"tolerance": "1"}, "tolerance", "must be a table"),
    ({"tolerance": '"max_ulp=1"'}, "tolerance", "must be a table"),
    ({"tolerance": "{ nan = 0 }"}, "tolerance.nan", "must be true or false"),
    ({"tolerance": '{ inf = "no" }'}, "tolerance.inf", "must be true or false"),
    *[
        ({"tolerance": f"{{ {k} = {v} }}"}, f"tolerance.{k}", "must be a finite number >= 0")
        for k in (
            "max_ulp",
            "p99_ulp",
            "max_abs",
            "max_rel",
            "max_code_error",
            "max_elem_ulp",
            "scale_diff_blocks",
        )
        for v in ("-1e-300", "inf", "nan", "true", '"1"')
    ],
    (
        {"tolerance": "{ weighted_mean_ulp = -1 }"},
        "tolerance.weighted_mean_ulp",
        "must be a finite number >= 0",
    ),
    (
        {"tolerance": "{ weighted_p99_ulp = inf }"},
        "tolerance.weighted_p99_ulp",
        "must be a finite number >= 0",
    ),
    ({"tolerance": "{ weighted_nan = 1.5 }"}, "tolerance.weighted_nan", "must be a probability in [0, 1]"),
    (
        {"tolerance": "{ weighted_underflow = -0.5 }"},
        "tolerance.weighted_underflow",
        "must be a probability in [0, 1]",
    ),
    (
        {"tolerance": "{ correct_code_fraction = 1.0000001 }"},
        "tolerance.correct_code_fraction",
        "must be a fraction in [0, 1]",
    ),
    (
        {"tolerance": "{ correct_code_fraction = -1e-300 }"},
        "tolerance.correct_code_fraction",
        "must be a fraction in [0, 1]",
    ),
    (
        {"tolerance": "{ correct_code_fraction = nan }"},
        "tolerance.correct_code_fraction",
        "must be a fraction in [0, 1]",
    ),
    (
        {"tolerance": "{ correct_code_fraction = true }"},
        "tolerance.correct_code_fraction",
        "must be a fraction in [0, 1]",
    ),
    *[
        (
            {"tolerance": f"{{ safe_range = {v} }}"},
            "tolerance.safe_range",
            "must be [lo, hi], finite, with lo <= 0 <= hi",
        )
        for v in (
            "0",
            "[0]",
            "[-1, 0, 1]",
            "[0.5, 1]",
            "[-1, -0.5]",
            "[-inf, 1]",
            "[-1, nan]",
            "[false, true]",
            '["-1", "1"]',
        )
    ],
    # strings
    ({"out_dtype": "8"}, "out_dtype", "must be a string (one format)"),
    ({"out_dtype": '["mxfp8_e4m3"]'}, "out_dtype", "must be a string (one format)"),
    ({"blocks": '""'}, "blocks", "must be a non-empty string"),
    ({"blocks": "3"}, "blocks", "must be a non-empty string"),
    ({"scale_rule": '""'}, "scale_rule", "must be a non-empty string"),
    ({"scale_rule": '"floor"'}, "scale_rule", "must be one of ocp, ceil"),
    ({"scale_rule": '"OCP"'}, "scale_rule", "must be one of ocp, ceil"),
    (
        {"blocks": '"exhaustive"', "samples": "4"},
        "samples",
        'does not apply with blocks = "exhaustive" (every block is swept): drop one',
    ),
    (
        {"blocks": '" Exhaustive "', "samples": "4"},
        "samples",
        'does not apply with blocks = "exhaustive" (every block is swept): drop one',
    ),
    ({"dump": '"d.npz"'}, "dump", "needs 'reference' (the function the device computed)"),
    ({"dump": '""', "reference": '"gelu"'}, "dump", "must be a non-empty string"),
    ({"reference": '""'}, "reference", "must be a non-empty string"),
    ({"reference": "1"}, "reference", "must be a non-empty string"),
    ({"device": '""'}, "device", "must be a non-empty string"),
    ({"dump_dtype": "[]"}, "dump_dtype", "must be a non-empty string"),
    ({"semantics": "[]"}, "semantics", ISSTR),
    ({"semantics": "1"}, "semantics", ISSTR),
    # cflags: one string split as a shell does, or a list of flags
    ({"cflags": '"-DX=\'a"'}, "cflags", "cannot be split into flags (No closing quotation)"),
    ({"cflags": '"  "'}, "cflags", "holds no flag"),
    ({"cflags": '""'}, "cflags", "holds no flag"),
    ({"cflags": "[]"}, "cflags", "must be a string or a non-empty list of non-empty strings (one flag each)"),
    (
        {"cflags": '["-O2", ""]'},
        "cflags",
        "must be a string or a non-empty list of non-empty strings (one flag each)",
    ),
    (
        {"cflags": '["-O2", 2]'},
        "cflags",
        "must be a string or a non-empty list of non-empty strings (one flag each)",
    ),
    (
        {"cflags": '["-D\\u0000"]'},
        "cflags",
        "must be a string or a non-empty list of non-empty strings (one flag each)",
    ),
    ({"cflags": "2"}, "cflags", "must be a string or a non-empty list of non-empty strings (one flag each)"),
    # one unknown key, at each level
    ({"sample": "4"}, "sample", f"is unknown in [[audit]] (known: {KNOWN_AUDIT})"),
    (
        {"tolerance": "{ max_ulps = 4 }"},
        "tolerance.max_ulps",
        f"is unknown in a tolerance table (known: {KNOWN_TOL})",
    ),
]


@pytest.mark.parametrize("keys,key,msg", BAD_AUDITS)
def test_each_bad_audit_key_is_one_exact_line(tmp_path, keys, key, msg):
    p = write(tmp_path, table(**keys))
    assert refusal(p) == f"{p}: key 'audit[0].{key}' {msg}"


def test_a_bad_key_in_pyproject_is_named_under_tool_actaudit(tmp_path):
    body = table(samples="0").replace("[[audit]]", "[[tool.actaudit.audit]]")
    p = write(tmp_path, body, "pyproject.toml")
    assert refusal(p) == f"{p}: key 'tool.actaudit.audit[0].samples' must be an integer >= 1"
    p = write(tmp_path, table() + table(name='"b"') + table(name='"a"', dtype='"bf16"'))
    assert refusal(p) == f"{p}: key 'audit[2].name': duplicate name 'a'"
    p = write(tmp_path, table() + "[[audit]]\nname = 'b'\ntargets = 'x'\ndtype = 'fp16'\nrange = [1, 0]\n")
    assert refusal(p) == f"{p}: key 'audit[1].range' must be [lo, hi] with finite lo < hi"


def test_errors_of_the_parsers_a_key_delegates_to_are_named_by_the_key(tmp_path):
    """blocks, semantics and distribution are parsed elsewhere: their message, after the key."""
    cases = [
        ({"blocks": '"bogus"'}, "blocks", lambda: blocks_mod.parse_dist("bogus")),
        ({"semantics": '["ftz", "bogus"]'}, "semantics", lambda: semantics.parse("bogus")),
        ({"semantics": '"exp=table:"'}, "semantics", lambda: semantics.parse("exp=table:")),
        ({"distribution": '"bogus"'}, "distribution", lambda: gate.weighting_mod.parse("bogus")),
    ]
    for keys, key, parse in cases:
        with pytest.raises(BadOptionError) as e:
            parse()
        p = write(tmp_path, table(**keys))
        assert refusal(p) == f"{p}: key 'audit[0].{key}' {e.value}"


def test_a_semantics_table_path_is_checked_as_resolved_too(tmp_path):
    """A PRIM=table:FILE that is well-formed as written: resolved, it is still parsed."""
    sub = tmp_path / "sub"
    sub.mkdir()
    p = write(sub, table(semantics='"exp=table:t.npz,ftz"'))
    a = gate.load_spec(p).audits[0]
    assert a.semantics == ["exp=table:t.npz,ftz"]
    assert a.run_semantics == [f"exp=table:{sub}/t.npz,ftz"]


def test_semantics_are_checked_as_written_and_as_resolved(tmp_path):
    """As written first (the error names the token the spec holds); then resolved: a spec
    directory whose name holds a comma splits a PRIM=table:FILE flag in two."""
    sub = tmp_path / "sub"
    sub.mkdir()
    p = write(sub, table(semantics='"div=table:x.npz"'))
    with pytest.raises(BadOptionError) as e:
        semantics.parse("div=table:x.npz")
    assert "'div=table:x.npz'" in str(e.value)
    assert refusal(p) == f"{p}: key 'audit[0].semantics' {e.value}"
    odd = tmp_path / "a,b"
    odd.mkdir()
    p = write(odd, table(semantics='"exp=table:t.npz"'))
    with pytest.raises(BadOptionError) as e:
        semantics.parse(f"exp=table:{tmp_path}/a,b/t.npz")
    assert "'b/t.npz'" in str(e.value)
    assert refusal(p) == f"{p}: key 'audit[0].semantics' {e.value}"


def test_a_good_value_at_each_bound_is_accepted(tmp_path):
    """The least integers, zero tolerances, fraction 0 and 1, a safe range of one point,
    2**63 - 1, the other scale rule."""
    goods = [
        {"samples": "1", "seed": "0", "grid": "2"},
        {"samples": str(2**63 - 1), "seed": str(2**63 - 1), "grid": str(2**63 - 1)},
        {
            "tolerance": "{ max_ulp = 0, p99_ulp = 0, max_abs = 0.0, max_rel = 0, max_code_error = 0, "
            "max_elem_ulp = 0, scale_diff_blocks = 0, correct_code_fraction = 0, safe_range = [0, 0], "
            "nan = true, inf = false, weighted_nan = 1, weighted_underflow = 0, weighted_mean_ulp = 0 }"
        },
        {
            "tolerance": "{ correct_code_fraction = 1, safe_range = [-1e300, 1e300], weighted_p99_ulp = 1e300 }"
        },
        {"range": "[-1e-300, 1e-300]", "params": "{ limit = 1, xs = [0.5] }"},
        {"blocks": '"exhaustive"', "scale_rule": '"ceil"'},
        {"blocks": '"uniform:lo=-1,hi=1"', "samples": "3"},
        {"grad": "false", "backward": "false"},
    ]
    for keys in goods:
        p = write(tmp_path, table(**keys))
        (a,) = gate.load_spec(p).audits
        assert a.name == "a"


def _full(sub: Path) -> str:
    return (
        "baseline = 'out/b.json'\nslack = 0.25\nrequire_certified = true\n"
        "[[audit]]\n"
        'name = "full"\n'
        'targets = ["gelu.tanh", "c:k.c:relu", "lut:t.npz", "dump:d.npz", "c:/abs/k.c:f"]\n'
        'dtype = ["fp16", "bf16"]\n'
        'compute = "fp32"\n'
        "range = [-2, 3]\n"
        "params = { limit = 8, xs = [1, 2.5] }\n"
        "samples = 5\nseed = 7\ngrid = 3\n"
        "tolerance = { max_ulp = 4, nan = false, safe_range = [-1, 1] }\n"
        'reference = "gelu"\n'
        "grad = true\n"
        'device = "cuda"\n'
        'dump = "out.npz"\n'
        'dump_dtype = "float16"\n'
        'semantics = ["ftz", "exp=table:t.npz, daz"]\n'
        "backward = true\n"
        'out_dtype = "mxfp8_e4m3"\n'
        'blocks = "uniform:lo=-1,hi=1"\n'
        'scale_rule = "ceil"\n'
        'distribution = "npy:w.npy"\n'
        "cflags = \"-O2 -DX='a b'\"\n"
        "[[audit]]\n"
        'name = "min"\ntargets = "sigmoid"\ndtype = "fp8_e4m3"\n'
        "[[audit]]\n"
        'name = "own"\ntargets = ["x.y:f"]\ndtype = "fp16"\nreference = "tanh"\ncflags = ["-O1", "-DK=2 -DJ"]\n'
    )


def test_every_key_of_a_full_spec_lands_in_its_field(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    p = write(sub, _full(sub))
    spec = gate.load_spec(p, reference="sigmoid")
    assert spec.path == p and spec.baseline == sub / "out" / "b.json"
    assert spec.slack == 0.25 and type(spec.slack) is float and spec.require_certified is True
    assert spec.diffs == []
    full, least, own = spec.audits
    assert dataclasses.asdict(full) == {
        "name": "full",
        "targets": ["gelu.tanh", "c:k.c:relu", "lut:t.npz", "dump:d.npz", "c:/abs/k.c:f"],
        "dtype": ["fp16", "bf16"],
        "compute": ["fp32"],
        "range": (-2.0, 3.0),
        "params": {"limit": 8, "xs": [1, 2.5]},
        "samples": 5,
        "seed": 7,
        "grid": 3,
        "tolerance": {"max_ulp": 4, "nan": False, "safe_range": [-1, 1]},
        "reference": "gelu",
        "grad": True,
        "device": "cuda",
        "dump": f"{sub}/out.npz",
        "dump_dtype": "float16",
        "semantics": ["ftz", "exp=table:t.npz, daz"],
        "backward": True,
        "out_dtype": "mxfp8_e4m3",
        "blocks": "uniform:lo=-1,hi=1",
        "scale_rule": "ceil",
        "distribution": f"npy:{sub}/w.npy",
        "cflags": ["-O2", "-DX=a b"],
        "run_targets": [
            "gelu.tanh",
            f"c:{sub}/k.c:relu",
            f"lut:{sub}/t.npz",
            f"dump:{sub}/d.npz",
            "c:/abs/k.c:f",
        ],
        "run_semantics": ["ftz", f"exp=table:{sub}/t.npz, daz"],
    }
    assert all(type(x) is float for x in full.range)
    assert dataclasses.asdict(least) == {
        "name": "min",
        "targets": ["sigmoid"],
        "dtype": ["fp8_e4m3"],
        "compute": None,
        "range": None,
        "params": {},
        "samples": None,
        "seed": 0,
        "grid": None,
        "tolerance": {},
        "reference": "sigmoid",  # --reference, for the audits without one
        "grad": False,
        "device": "cpu",
        "dump": None,
        "dump_dtype": None,
        "semantics": None,
        "backward": False,
        "out_dtype": None,
        "blocks": "normal:std=1",
        "scale_rule": "ocp",
        "distribution": None,
        "cflags": None,
        "run_targets": ["sigmoid"],
        "run_semantics": None,
    }
    assert own.reference == "tanh" and own.cflags == ["-O1", "-DK=2 -DJ"]
    assert own.run_targets == ["x.y:f"]
    # no --reference: None stays None
    assert gate.load_spec(p).audits[1].reference is None


def test_a_dump_audit_needs_no_targets(tmp_path):
    p = write(
        tmp_path, table(targets=None, dump='"d.npz"', reference='"gelu"', distribution='"normal:std=2"')
    )
    (a,) = gate.load_spec(p).audits
    assert a.targets == [] and a.run_targets == [] and a.dump == f"{tmp_path}/d.npz"
    assert a.distribution == "normal:std=2.0"


def test_paths_beside_a_spec_read_from_the_working_directory_stay_as_written(tmp_path, monkeypatch):
    """actaudit.toml in '.': a path is kept exactly as written (not normalized)."""
    monkeypatch.chdir(tmp_path)
    write(tmp_path, table(dump='"./d//x.npz"', reference='"gelu"', targets='["lut:./t.npz", "c:./k.c:f"]'))
    (a,) = gate.load_spec("actaudit.toml").audits
    assert a.dump == "./d//x.npz" and a.run_targets == ["lut:./t.npz", "c:./k.c:f"]
    (a,) = gate.load_spec(tmp_path / "actaudit.toml").audits
    assert a.dump == f"{tmp_path}/d/x.npz"


@pytest.mark.parametrize(
    "target,resolved",
    [
        ("gelu", "gelu"),
        ("c:k.c:relu", "D/k.c:relu"),
        ("c:sub/k.c:f", "D/sub/k.c:f"),
        ("c:k.c", "c:k.c"),  # no function: as written (the candidate layer refuses it)
        ("c:/abs/k.c:f", "c:/abs/k.c:f"),
        ("c:a:b.c:f", "D/a:b.c:f"),  # the function is after the last colon
        ("c::f", "c::f"),  # no file: nothing to resolve
        ("c::x.c:f", "D/:x.c:f"),  # the file is ':x.c'
        ("c:a/:b.c:f", "D/a/:b.c:f"),
        ("lut:t.npz", "lut:D/t.npz"),
        ("dump:d.npz", "dump:D/d.npz"),
        ("dump:", "dump:"),
        ("lut:/abs/t.npz", "lut:/abs/t.npz"),
        ("torch:gelu", "torch:gelu"),
        ("pkg.mod:fn", "pkg.mod:fn"),
        ("xc:k.c:f", "xc:k.c:f"),
        ("xlut:t.npz", "xlut:t.npz"),
    ],
)
def test_resolve_target(target, resolved):
    d = Path("/spec/dir")
    want = resolved.replace("D/", "c:/spec/dir/" if target.startswith("c:") else "/spec/dir/")
    assert gate.resolve_target(d / "actaudit.toml", target) == want


@pytest.mark.parametrize(
    "text,resolved",
    [
        ("ftz", "ftz"),
        ("ftz,daz", "ftz,daz"),
        ("exp=table:t.npz", "exp=table:D/t.npz"),
        ("exp= TABLE:t.npz ,ftz", "exp=table:D/t.npz,ftz"),  # the file name after 'table:' as written
        ("ftz, exp=table:t.npz,log=table:/abs/u.npz", "ftz, exp=table:D/t.npz,log=table:/abs/u.npz"),
        ("exp=bound:1", "exp=bound:1"),
        ("exp=table:a=b.npz", "exp=table:D/a=b.npz"),  # the first '=' splits
        ("table:t.npz", "table:t.npz"),  # no PRIM=: not a table flag
        ("a b,c d", "a b,c d"),
        ("exp=table:", "exp=table:"),
    ],
)
def test_resolve_semantics(text, resolved):
    assert gate.resolve_semantics(Path("/spec/dir/actaudit.toml"), text) == resolved.replace(
        "D/", "/spec/dir/"
    )


def test_spec_path():
    assert gate._spec_path(Path("/s/actaudit.toml"), "") == ""
    assert gate._spec_path(Path("/s/actaudit.toml"), "/abs/x") == "/abs/x"
    assert gate._spec_path(Path("/s/actaudit.toml"), "x/y") == "/s/x/y"
    assert gate._spec_path(Path("actaudit.toml"), "./x//y") == "./x//y"
    assert gate._spec_path(Path("s/actaudit.toml"), "./x") == "s/x"


def test_parse_cflags_reports_through_bad():
    said = []

    def bad(msg):
        said.append(msg)
        raise ValueError(msg)

    assert gate.parse_cflags("-O2  -DX='a b' \"-DY=1 2\"", bad) == ["-O2", "-DX=a b", "-DY=1 2"]
    lst = ["-O2", "-DX=a b"]
    out = gate.parse_cflags(lst, bad)
    assert out == lst and out is not lst
    for v in ("", "\t", "'", ["a\0b"], [None], [], ("-O2",), None):
        with pytest.raises(ValueError):
            gate.parse_cflags(v, bad)
    assert said == [
        "holds no flag",
        "holds no flag",
        "cannot be split into flags (No closing quotation)",
        *["must be a string or a non-empty list of non-empty strings (one flag each)"] * 5,
    ]


# ------------------------------------------------------------- the spec's top level
def test_top_level_keys_each_one_exact_line(tmp_path):
    good = table()
    cases = [
        ("", "key 'audit' must be a non-empty array of tables ([[audit]])"),
        ("audit = []\n", "key 'audit' must be a non-empty array of tables ([[audit]])"),
        ("audit = 1\n", "key 'audit' must be a non-empty array of tables ([[audit]])"),
        ("[audit]\nname = 'a'\n", "key 'audit' must be a non-empty array of tables ([[audit]])"),
        ("audit = [1]\n", "key 'audit[0]' must be a table"),
        ("baseline = 1\n" + good, "key 'baseline' must be a path string"),
        ("baseline = ''\n" + good, "key 'baseline' must be a path string"),
        ("slack = 1\n" + good, "key 'slack' must be a number in [0, 1) (a relative slack)"),
        ("slack = 1.0\n" + good, "key 'slack' must be a number in [0, 1) (a relative slack)"),
        ("slack = -1e-300\n" + good, "key 'slack' must be a number in [0, 1) (a relative slack)"),
        ("slack = nan\n" + good, "key 'slack' must be a number in [0, 1) (a relative slack)"),
        ("slack = false\n" + good, "key 'slack' must be a number in [0, 1) (a relative slack)"),
        ("slack = '0.1'\n" + good, "key 'slack' must be a number in [0, 1) (a relative slack)"),
        ("require_certified = 1\n" + good, "key 'require_certified' must be true or false"),
        ("require_certified = 'yes'\n" + good, "key 'require_certified' must be true or false"),
        ("slacks = 0.1\n" + good, f"key 'slacks' is unknown in the spec's top level (known: {KNOWN_TOP})"),
        ("diff = 1\n" + good, "key 'diff' must be an array of tables ([[diff]])"),
    ]
    for text, msg in cases:
        p = write(tmp_path, text)
        assert refusal(p) == f"{p}: {msg}", text


def test_top_level_defaults_and_bounds(tmp_path):
    p = write(tmp_path, table())
    spec = gate.load_spec(p)
    assert spec.baseline == tmp_path / "data" / "baseline.json"
    assert spec.slack == 1e-9 and spec.require_certified is False and spec.diffs == []
    p = write(tmp_path, "slack = 0\nrequire_certified = false\n" + table())
    spec = gate.load_spec(p)
    assert spec.slack == 0.0 and type(spec.slack) is float and spec.require_certified is False
    p = write(tmp_path, "slack = 0.9999999999999999\n" + table())
    assert gate.load_spec(p).slack == 0.9999999999999999
    p = write(tmp_path, table() + '[[diff]]\nname = "d"\na = "relu.max"\nb = "lut:t.npz"\ndtype = "fp16"\n')
    (d,) = gate.load_spec(p).diffs
    assert d["name"] == "d" and d["run_b"] == f"lut:{tmp_path}/t.npz"


def test_pyproject_keys_are_named_under_tool_actaudit(tmp_path):
    def body(text):
        return text.replace("[[audit]]", "[[tool.actaudit.audit]]").replace(
            "[[diff]]", "[[tool.actaudit.diff]]"
        )

    good = body(table())
    cases = [
        ("[tool.actaudit]\n", "key 'tool.actaudit.audit' must be a non-empty array of tables ([[audit]])"),
        ("[tool.actaudit]\nbaseline = 1\n" + good, "key 'tool.actaudit.baseline' must be a path string"),
        (
            "[tool.actaudit]\nslack = 2\n" + good,
            "key 'tool.actaudit.slack' must be a number in [0, 1) (a relative slack)",
        ),
        (
            "[tool.actaudit]\nrequire_certified = 0\n" + good,
            "key 'tool.actaudit.require_certified' must be true or false",
        ),
        (
            "[tool.actaudit]\ndiff = 0\n" + good,
            "key 'tool.actaudit.diff' must be an array of tables ([[diff]])",
        ),
        (
            "[tool.actaudit]\nx = 0\n" + good,
            f"key 'tool.actaudit.x' is unknown in the spec's top level (known: {KNOWN_TOP})",
        ),
        (good + body(table()), "key 'tool.actaudit.audit[1].name': duplicate name 'a'"),
        ("[tool.other]\nx = 1\n", "no [tool.actaudit] section"),
        ("x = 1\n", "no [tool.actaudit] section"),
        ("[tool]\nactaudit = 1\n", "no [tool.actaudit] section"),
    ]
    for text, msg in cases:
        p = write(tmp_path, text, "pyproject.toml")
        assert refusal(p) == f"{p}: {msg}", text
    p = write(tmp_path, "[tool.actaudit]\nbaseline = 'b.json'\n" + good, "pyproject.toml")
    spec = gate.load_spec(p)
    assert spec.baseline == tmp_path / "b.json" and [a.name for a in spec.audits] == ["a"]
    # a file named otherwise is a spec of its own: its [tool] table is an unknown key
    p = write(tmp_path, "[tool.actaudit]\n" + good, "other.toml")
    assert refusal(p) == f"{p}: key 'tool' is unknown in the spec's top level (known: {KNOWN_TOP})"


# ------------------------------------------------------------- finding the spec
def test_find_spec(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    none = "no audit spec: write actaudit.toml or [tool.actaudit] in pyproject.toml"
    with pytest.raises(BadFileError) as e:
        gate.find_spec()
    assert str(e.value) == none
    with pytest.raises(BadFileError) as e:
        gate.find_spec("nope.toml")
    assert str(e.value) == "nope.toml: spec file not found"
    with pytest.raises(BadFileError) as e:
        gate.find_spec(tmp_path / "nope.toml")
    assert str(e.value) == f"{tmp_path}/nope.toml: spec file not found"
    # a pyproject.toml without the section, unreadable, malformed, or whose 'tool' is no table:
    # not a spec
    for text in ("[project]\nname = 'x'\n", "[tool.ruff]\nx = 1\n", "[[tool\n"):
        (tmp_path / "pyproject.toml").write_text(text)
        with pytest.raises(BadFileError) as e:
            gate.find_spec()
        assert str(e.value) == none, text
    (tmp_path / "pyproject.toml").write_bytes(b"\xff\xfe")
    with pytest.raises(BadFileError) as e:
        gate.find_spec()
    assert str(e.value) == none
    (tmp_path / "pyproject.toml").write_text("[tool.actaudit]\n")
    assert gate.find_spec() == Path("pyproject.toml")
    (tmp_path / "actaudit.toml").write_text("")  # two sources, whatever they hold: an error
    with pytest.raises(BadFileError) as e:
        gate.find_spec()
    assert str(e.value) == (
        "two audit specs: actaudit.toml and [tool.actaudit] in pyproject.toml; keep one, or name "
        "it with --spec"
    )
    assert gate.find_spec("pyproject.toml") == Path("pyproject.toml")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    assert gate.find_spec() == Path("actaudit.toml")


def test_has_tool_section(tmp_path):
    p = tmp_path / "pyproject.toml"
    for text, want in (
        ("[tool.actaudit]\n", True),
        ("[tool.actaudit.audit]\n", True),
        ("[tool]\nactauditx = 1\n", False),
        ("[tool]\n", False),
        ("", False),
        ("[[tool\n", False),
        ("[tool.ACTAUDIT]\n", False),
    ):
        p.write_text(text)
        assert gate._has_tool_section(p) is want, text
    assert gate._has_tool_section(tmp_path / "missing.toml") is False
    assert gate._has_tool_section(tmp_path) is False  # a directory


def test_toml_reading_errors(tmp_path):
    p = write(tmp_path, "[[audit\nname=")
    msg = refusal(p)
    assert msg.startswith(f"{p}: malformed TOML (") and msg.endswith(")") and "line 1" in msg
    p = write(tmp_path, "a = " + "[" * 100000 + "]" * 100000 + "\n")
    assert refusal(p) == f"{p}: malformed TOML (nested too deeply)"
    p = write(tmp_path, "")
    p.write_bytes(b"x = '\xff'\n")
    assert refusal(p) == f"{p}: not UTF-8 text (invalid start byte at byte 5)"
    d = tmp_path / "dir.toml"
    d.mkdir()
    assert refusal(d) == f"{d}: is a directory, not a audit spec"
    p = write(tmp_path, "")
    p.write_bytes(b"#" * (gate.MAX_FILE + 1))
    assert refusal(p) == f"{p}: over {2**24} bytes, more than a audit spec may hold (too large)"
    p.write_bytes(b"#" * gate.MAX_FILE)
    assert refusal(p) == f"{p}: key 'audit' must be a non-empty array of tables ([[audit]])"


def test_is_num():
    for v in (0, -3, 2.5, 1e308, 2**70):
        assert gate._is_num(v) is True, v
    for v in (True, False, float("inf"), float("-inf"), float("nan"), "1", None, [1]):
        assert gate._is_num(v) is False, v


# ------------------------------------------------------------- running the spec
class FakeSweep:
    """Records the arguments sweep gets; answers one result per target x dtype."""

    def __init__(self, count=3, semantics_of=None):
        self.calls = []
        self.count = count
        self.semantics_of = semantics_of

    def __call__(self, targets, dtype, compute, **kw):
        self.calls.append((targets, dtype, compute, kw))
        sems = kw.get("semantics") or [None]
        return [
            SimpleNamespace(
                candidate=t,
                dtype=d,
                semantics=None if s is None else semantics.parse(s),
                domain=SimpleNamespace(count=self.count),
            )
            for t in targets
            for d in dtype
            for s in sems
        ]


def test_run_spec_passes_every_key_to_sweep(tmp_path, monkeypatch):
    sub = tmp_path / "sub"
    sub.mkdir()
    text = _full(sub).replace('out_dtype = "mxfp8_e4m3"\n', "").replace('blocks = "uniform:lo=-1,hi=1"\n', "")
    text = text.replace('scale_rule = "ceil"\n', "").replace(
        "cflags = \"-O2 -DX='a b'\"\n", 'cflags = ["-O2", "-DX=a b"]\n'
    )
    spec = gate.load_spec(write(sub, text))
    fake = FakeSweep()
    monkeypatch.setattr(gate, "sweep", fake)
    prog = object()
    runs = gate.run_spec(spec, progress=prog, workers=3)
    assert [a.name for a, _ in runs] == ["full", "min", "own"]
    (t, d, c, kw), (t2, d2, c2, kw2), (t3, _, _, kw3) = fake.calls
    assert t == ["gelu.tanh", f"c:{sub}/k.c:relu", f"lut:{sub}/t.npz", f"dump:{sub}/d.npz", "c:/abs/k.c:f"]
    assert d == ["fp16", "bf16"] and c == ["fp32"]
    assert kw == {
        "range": (-2.0, 3.0),
        "samples": 5,
        "seed": 7,
        "params": {"limit": 8, "xs": [1, 2.5]},
        "grid": 3,
        "progress": prog,
        "reference": "gelu",
        "grad": True,
        "device": "cuda",
        "dump": f"{sub}/out.npz",
        "dump_dtype": "float16",
        "semantics": ["ftz", f"exp=table:{sub}/t.npz, daz"],
        "backward": True,
        "out_dtype": None,
        "cflags": "-O2 '-DX=a b'",
        "distribution": f"npy:{sub}/w.npy",
        "workers": 3,
    }
    assert t2 == ["sigmoid"] and d2 == ["fp8_e4m3"] and c2 is None
    assert kw2 == {
        "range": None,
        "samples": None,
        "seed": 0,
        "params": None,
        "grid": None,
        "progress": prog,
        "reference": None,
        "grad": False,
        "device": "cpu",
        "dump": None,
        "dump_dtype": None,
        "semantics": None,
        "backward": False,
        "out_dtype": None,
        "cflags": None,
        "workers": 3,
    }
    assert t3 == ["x.y:f"] and kw3["cflags"] == "-O1 '-DK=2 -DJ'" and kw3["reference"] == "tanh"
    # each result named as written, its semantics as written
    full = runs[0][1]
    assert [r.candidate for r in full[:3]] == ["gelu.tanh"] * 3
    assert [r.candidate for r in full[::4]] == [
        "gelu.tanh",
        "c:k.c:relu",
        "lut:t.npz",
        "dump:d.npz",
        "c:/abs/k.c:f",
    ]
    assert [r.semantics.canonical() for r in full[:3]] == [
        "ftz",
        semantics.parse("daz, exp=table:t.npz").canonical(),
        "ftz",
    ]
    assert full[1].semantics == semantics.parse("exp=table:t.npz, daz")
    # defaults: one worker per core (None), no progress
    fake.calls.clear()
    gate.run_spec(spec)
    assert [kw["workers"] for *_, kw in fake.calls] == [None] * 3
    assert [kw["progress"] for *_, kw in fake.calls] == [None] * 3


def test_run_spec_refuses_zero_inputs_and_names_the_audit(tmp_path, monkeypatch):
    p = write(tmp_path, table(name='"z"', targets='["relu.max"]'))
    spec = gate.load_spec(p)
    monkeypatch.setattr(gate, "sweep", FakeSweep(count=0))
    with pytest.raises(BadOptionError) as e:
        gate.run_spec(spec)
    assert (
        str(e.value)
        == f"{p}: audit 'z': relu.max [fp16] was audited over 0 inputs: zero inputs prove nothing"
    )
    monkeypatch.setattr(gate, "sweep", FakeSweep(count=1))
    ((a, (r,)),) = gate.run_spec(spec)
    assert a is spec.audits[0] and r.candidate == "relu.max"


def test_run_spec_keys_a_float_audit_does_not_take(tmp_path, monkeypatch):
    monkeypatch.setattr(gate, "sweep", FakeSweep())
    for keys, msg in (
        (
            {"blocks": '"uniform:lo=-1,hi=1"'},
            "key 'blocks' applies to block-scaled outputs (out_dtype = mxfp8_e4m3, ...), not to a float audit",
        ),
        (
            {"scale_rule": '"ceil"'},
            "key 'scale_rule' applies to block-scaled outputs (out_dtype = mxfp8_e4m3, ...), not to a float audit",
        ),
        (
            {"blocks": '"normal:std=1"', "scale_rule": '"ceil"'},
            "key 'scale_rule' applies to block-scaled outputs (out_dtype = mxfp8_e4m3, ...), not to a float audit",
        ),
        (
            {"out_dtype": '"mxfp8_e4m3"', "cflags": '"-O2"'},
            "key 'cflags' applies to C kernels (c:FILE.c:FUNCTION) of float audits",
        ),
        (
            {"dtype": '"int8"', "cflags": '["-O2"]'},
            "key 'cflags' applies to C kernels (c:FILE.c:FUNCTION) of float audits",
        ),
    ):
        p = write(tmp_path, table(name='"k"', **keys))
        with pytest.raises(BadOptionError) as e:
            gate.run_spec(gate.load_spec(p))
        assert str(e.value) == f"{p}: audit 'k': {msg}", keys
    # the defaults written out: a float audit
    p = write(tmp_path, table(blocks='"normal:std=1"', scale_rule='"ocp"'))
    ((_, res),) = gate.run_spec(gate.load_spec(p))
    assert len(res) == 1


def test_run_spec_keeps_the_error_type(tmp_path, monkeypatch):
    def unknown(*a, **k):
        raise UnknownNameError("unknown candidate 'x'")

    monkeypatch.setattr(gate, "sweep", unknown)
    p = write(tmp_path, table(name='"u"'))
    with pytest.raises(UnknownNameError) as e:
        gate.run_spec(gate.load_spec(p))
    assert str(e.value) == f"{p}: audit 'u': unknown candidate 'x'" and e.value.__cause__ is None
    assert e.value.__suppress_context__


def test_run_spec_routes_format_audits_to_gate_formats(tmp_path, monkeypatch):
    got = []

    def run(a):
        got.append(a)
        r = object.__new__(QuantResult)
        r.candidate, r.dtype, r.count = a.run_targets[0], "int8", 7
        return [r]

    monkeypatch.setattr(gate_formats, "run", run)
    monkeypatch.setattr(gate, "sweep", None)  # never reached
    p = write(tmp_path, table(name='"q"', dtype='"int8"', targets='["lut:t.npz"]'))
    ((a, (r,)),) = gate.run_spec(gate.load_spec(p))
    assert got == [a] and r.candidate == "lut:t.npz" and r.count == 7
    r.count = 0
    monkeypatch.setattr(gate_formats, "run", lambda a: [r])
    with pytest.raises(BadOptionError) as e:
        gate.run_spec(gate.load_spec(p))
    assert (
        str(e.value)
        == f"{p}: audit 'q': lut:t.npz [int8] was audited over 0 inputs: zero inputs prove nothing"
    )


def test_input_count():
    q = object.__new__(QuantResult)
    q.count = 5
    assert gate._input_count(q) == 5 and type(gate._input_count(q)) is int
    q.count = 0
    assert gate._input_count(q) == 0
    b = object.__new__(blocks_mod.BlockResult)
    b.elements = 96
    assert gate._input_count(b) == 96
    b.count = None
    assert gate._input_count(b) == 96
    b.elements = 0
    assert gate._input_count(b) == 0
    f = SimpleNamespace(domain=SimpleNamespace(count=256.0), count=9, elements=9)
    assert gate._input_count(f) == 256 and type(gate._input_count(f)) is int


def test_as_written():
    a = gate.Audit("a", ["c:k.c:f", "gelu"], ["fp16"])
    a.run_targets = ["c:/d/k.c:f", "gelu"]
    a.semantics = ["exp=table:t.npz", "ftz"]
    a.run_semantics = ["exp=table:/d/t.npz", "ftz"]
    rs = [
        SimpleNamespace(candidate="c:/d/k.c:f", semantics=semantics.parse("exp=table:/d/t.npz")),
        SimpleNamespace(candidate="gelu", semantics=semantics.parse("ftz")),
        SimpleNamespace(candidate="other", semantics=None),
        SimpleNamespace(candidate="c:/d/k.c:f", semantics=semantics.parse("daz")),
        SimpleNamespace(candidate="gelu"),
    ]
    gate._as_written(a, rs)
    assert [r.candidate for r in rs] == ["c:k.c:f", "gelu", "other", "c:k.c:f", "gelu"]
    assert rs[0].semantics == semantics.parse("exp=table:t.npz")
    assert rs[0].semantics.canonical() == "exp=table:t.npz"
    assert rs[1].semantics == semantics.parse("ftz") and rs[2].semantics is None
    assert rs[3].semantics.canonical() == "daz" and not hasattr(rs[4], "semantics")
    # no run semantics: nothing renamed by semantics
    b = gate.Audit("b", ["gelu"], ["fp16"], semantics=["exp=table:t.npz"], run_semantics=None)
    b.run_targets = ["gelu"]
    r = SimpleNamespace(candidate="gelu", semantics=semantics.parse("exp=table:/d/t.npz"))
    gate._as_written(b, [r])
    assert r.semantics.canonical() == "exp=table:/d/t.npz"


# ------------------------------------------------------------- entries of real results
@pytest.fixture(scope="module")
def results():
    from audit.measure.sweep import sweep

    # fp8_e4m3 over [0.5, 0.75]: 0.5, 0.5625, 0.625, 0.6875, 0.75
    plain = sweep(["relu.max"], ["fp8_e4m3"], range=(0.5, 0.75), workers=1)
    ftz = sweep(["relu.max"], ["fp8_e4m3"], range=(0.5, 0.75), workers=1, semantics=["ftz,daz"])
    par = sweep(
        ["celu.expm1", "gelu.safe_clip"],
        ["fp8_e4m3"],
        range=(0.5, 0.75),
        workers=1,
        params={"alpha": 2, "threshold": 0.1},
    )
    return plain[0], ftz[0], par


def test_entry_key(results):
    plain, ftz, par = results
    assert gate.entry_key("au", plain) == "au/relu.max/fp8_e4m3/fp8_e4m3"
    # the semantics by their canonical name (audit/targets/semantics.py's, whatever the order written)
    assert (
        gate.entry_key("au", ftz) == "au/relu.max/fp8_e4m3/fp8_e4m3@" + semantics.parse("daz,ftz").canonical()
    )
    assert "@" not in gate.entry_key("au", dataclasses.replace(ftz, semantics=None))
    assert [gate.entry_key("au", r) for r in par] == [
        "au/celu.expm1/fp8_e4m3/fp8_e4m3/alpha=2.0",
        "au/gelu.safe_clip/fp8_e4m3/fp8_e4m3/threshold=0.1",
    ]
    # cflags only for C kernels, each flag its own shell word
    assert gate.entry_key("au", plain, ["-O2", "-DX=a b"]) == "au/relu.max/fp8_e4m3/fp8_e4m3"
    c = dataclasses.replace(plain, candidate="c:k.c:relu", out_dtype="fp16")
    assert gate.entry_key("au", c) == "au/c:k.c:relu/fp8_e4m3->fp16/fp8_e4m3"
    assert (
        gate.entry_key("au", c, ["-O2", "-DX=a b"])
        == "au/c:k.c:relu/fp8_e4m3->fp16/fp8_e4m3 cflags=-O2 '-DX=a b'"
    )
    assert gate.entry_key("au", c, []) == "au/c:k.c:relu/fp8_e4m3->fp16/fp8_e4m3 cflags="
    assert shlex.split("-O2 '-DX=a b'") == ["-O2", "-DX=a b"]


def test_entry_key_of_a_format_result():
    q = object.__new__(QuantResult)
    q.candidate, q.dtype, q.out_dtype, q.compute, q.params = "gelu", "fp16", "int8", "fp32", {"a": 1}
    assert gate.entry_key("au", q, ["-O2"]) == "au/gelu/fp16->int8/fp32/a=1.0"


# ------------------------------------------------------------- two bugs the survivors showed
def test_fixed_a_tool_key_that_is_no_table_is_no_spec(tmp_path, monkeypatch):
    """`tool = 1` (valid TOML) in pyproject.toml was a traceback (TypeError, AttributeError)."""
    monkeypatch.chdir(tmp_path)
    for text in ("tool = 1\n", 'tool = "actaudit"\n', "tool = ['actaudit']\n"):
        (tmp_path / "pyproject.toml").write_text(text)
        assert gate._has_tool_section(tmp_path / "pyproject.toml") is False
        with pytest.raises(BadFileError) as e:
            gate.find_spec()
        assert str(e.value) == "no audit spec: write actaudit.toml or [tool.actaudit] in pyproject.toml"
        p = tmp_path / "pyproject.toml"
        assert refusal(p) == f"{p}: no [tool.actaudit] section"


@pytest.mark.parametrize("value", ['""', "2", "[]"])
def test_fixed_a_distribution_that_is_no_string_is_said_once(tmp_path, value):
    """It was caught as the distribution parser's error: the line said the file and key twice."""
    p = write(tmp_path, table(distribution=value))
    assert refusal(p) == f"{p}: key 'audit[0].distribution' must be a non-empty string"


def test_entry_of_a_float_result(results):
    from audit.gate import identity as gate_identity
    from audit.measure import weighting
    from audit.measure.sweep import sweep

    (r,) = sweep(["gelu.safe_clip"], ["fp8_e4m3"], workers=1, distribution="normal:std=1")
    d = r.to_dict()
    clip = d["clip"]
    assert clip is not None and d["findings"] and r.weighted is not None
    want = {
        "candidate": "gelu.safe_clip",
        "dtype": "fp8_e4m3",
        "compute": "fp8_e4m3",
        "params": r.params,
        **{k: d[k] for k in ("max_ulp", "p99_ulp", "mean_ulp", "max_abs", "max_rel")},
        **{k: d[k] for k in ("nan_count", "inf_count", "special_failures")},
        **weighting.baseline_entry(r.weighted),
        "findings": {f["kind"]: f["intervals"] for f in d["findings"]},
        "finding_counts": {f["kind"]: f["count"] for f in d["findings"]},
        "clip": {k: clip[k] for k in ("lo", "hi", "lo_action", "hi_action", "lo_safe", "hi_safe", "note")},
    }
    assert weighting.baseline_entry(r.weighted)  # the weighted section is there to be seen
    assert gate.entry(r) == want
    a = gate.Audit("a", ["gelu.safe_clip"], ["fp8_e4m3"], distribution="normal:std=1.0")
    assert gate.entry(r, a) == {**want, "identity": gate_identity.float_identity(r, a)}
    assert list(gate.entry(r, a))[:5] == ["candidate", "dtype", "compute", "params", "identity"]
    plain, ftz, _ = results
    e = gate.entry(ftz)
    assert e["semantics"] == semantics.parse("daz,ftz").canonical() and e["clip"] is None
    assert "semantics" not in gate.entry(plain) and "identity" not in gate.entry(plain)
    assert gate.entry(plain)["findings"] == {} and gate.entry(plain)["max_ulp"] == 0


def test_entry_of_a_format_result(monkeypatch):
    q = object.__new__(QuantResult)
    monkeypatch.setattr(gate_formats, "entry", lambda r, a=None: {"of": r, "audit": a})
    a = gate.Audit("a", ["x"], ["int8"])
    assert gate.entry(q, a) == {"of": q, "audit": a} and gate.entry(q) == {"of": q, "audit": None}


def test_a_float_audit_sweeps_into_its_out_dtype(tmp_path):
    """out_dtype of a float audit (no quantized or block-scaled format) reaches the sweep:
    relu of fp8_e4m3's 0.5, 0.5625, 0.625, 0.6875, 0.75 stored in fp8_e5m2 (spacing 0.125
    there) rounds 0.5625 and 0.6875 half an e5m2 ULP away, the other three exactly."""
    p = write(
        tmp_path,
        table(targets='["relu.max"]', dtype='"fp8_e4m3"', range="[0.5, 0.75]", out_dtype='"fp8_e5m2"'),
    )
    ((a, (r,)),) = gate.run_spec(gate.load_spec(p), workers=1)
    d = r.to_dict()
    assert (r.out_dtype, r.domain.count, d["max_ulp"], d["mean_ulp"], d["max_abs"]) == (
        "fp8_e5m2",
        5,
        0.5,
        (0.5 + 0.5) / 5,
        0.0625,
    )
    assert gate.entry_key(a.name, r) == "a/relu.max/fp8_e4m3->fp8_e5m2/fp8_e4m3"


def test_entry_key_writes_each_parameter_sorted_and_exactly(results):
    plain, _, _ = results
    two = dataclasses.replace(plain, params={"b": 2, "a": 0.1, "c": 1e-300})
    assert gate.entry_key("au", two) == "au/relu.max/fp8_e4m3/fp8_e4m3/a=0.1,b=2.0,c=1e-300"
