"""`actaudit fit --shape vector`: the operation list, its four emissions, and the compiled C
checked at every input against the oracle (and a sample against mpmath), vectorized and
scalar builds; a broken kernel is caught."""

import math
import re
import subprocess

import ml_dtypes
import mpmath as mp
import numpy as np
import pytest

from audit.cli import main
from audit.numbers.formats import get_format
from audit.repair import fit_shapes as fs
from audit.repair.emit import c as emit_c
from audit.repair.emit import emit, ir
from tests.helpers import is_nearest_even


@pytest.fixture(scope="module")
def sigmoid_bf16():
    r = fs.fit_vector("sigmoid", "bf16")
    assert r.ok, r.message
    return r


@pytest.fixture(scope="module")
def tanh_fp16():
    r = fs.fit_vector("tanh", "fp16")
    assert r.ok, r.message
    return r


# ------------------------------------------------------------------ the emissions, parsed back
_BIN = {"+": "add", "-": "sub", "*": "mul", "/": "div", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}
_BIN.update({"==": "eq", "!=": "ne", "&": "and", "|": "or", "<<": "shl", ">>": "shr"})
_FN = {
    "c": {"fmaf": "fma", "fabsf": "abs", "aa_bits": "bits", "aa_float": "float"},
    "cuda": {
        "__fadd_rn": "add",
        "__fsub_rn": "sub",
        "__fmul_rn": "mul",
        "__fdiv_rn": "div",
        "__fmaf_rn": "fma",
        "fabsf": "abs",
        "__float_as_uint": "bits",
        "__uint_as_float": "float",
    },
    "triton": {"tl.fma": "fma", "tl.abs": "abs", "tl.math.div_rn": "div", "tl.where": "select"},
    "numpy": {"_fma": "fma", "np.abs": "abs", "np.where": "select"},
}


def _const(tok: str):
    tok = tok.strip()
    m = re.fullmatch(r"(?:U\(|tl\.full\(\(\), )?(0x[0-9a-f]+)u?(?:, tl\.uint32)?\)?", tok)
    if m:
        return int(m.group(1), 16)
    m = re.fullmatch(r"F\(float\.fromhex\('([^']+)'\)\)", tok) or re.fullmatch(r"F\((-?[0-9.]+)\)", tok)
    if m:
        return float.fromhex(m.group(1)) if "x" in m.group(1) else float(m.group(1))
    if re.fullmatch(r"-?0x[0-9a-f.]+p[+-]\d+f", tok):
        return float.fromhex(tok[:-1])
    if re.fullmatch(r"-?0\.0f", tok):
        return float(tok[:-1])
    if re.fullmatch(r"-?[0-9.]+(e[+-]?\d+)?", tok):
        return float(tok)
    return tok  # a value's name


def _split_args(s: str) -> list:
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
            continue
        depth += ch in "(["
        depth -= ch in ")]"
        cur += ch
    return [a.strip() for a in [*out, cur]]


def parse(text: str, target: str) -> list:
    """(dest, op, args) of every op statement of an emitted source, in order."""
    pat = r"\s*const [\w ]+? (\w+) = (.*);" if target in ("c", "cuda") else r"\s+(\w+) = (.*)"
    ops = []
    if target in ("triton", "numpy"):
        text = text[text.rindex("\ndef ") :]  # the kernel (numpy: after its _fma helper)
    for line in text.splitlines():
        m = re.fullmatch(pat, line)
        if not m or m.group(1) in ("x", "offs", "mask", "j"):
            continue
        dest, e = m.groups()
        bc = re.fullmatch(
            r"(?:np\.asarray\()?(\w+)(?:, dtype=(F|U)\)\.view\((U|F)\)|\.to\(tl\.(uint32|float32), bitcast=True\))",
            e,
        )
        if bc:
            kind = "bits" if (bc.group(2) == "F" or bc.group(4) == "uint32") else "float"
            ops.append((dest, kind, (bc.group(1),)))
            continue
        fn = re.fullmatch(r"([\w.]+)\((.*)\)", e)
        if fn and fn.group(1) in _FN[target]:
            ops.append((dest, _FN[target][fn.group(1)], tuple(_const(a) for a in _split_args(fn.group(2)))))
            continue
        sel = re.fullmatch(r"(\w+) \? (\S+) : (\S+)", e)
        if sel:
            ops.append((dest, "select", tuple(_const(a) for a in sel.groups())))
            continue
        bi = re.fullmatch(r"(\S+(?:\(.*?\))?) (\+|-|\*|/|<=|>=|<<|>>|<|>|==|!=|&|\|) (\S+.*)", e)
        if bi:
            ops.append((dest, _BIN[bi.group(2)], (_const(bi.group(1)), _const(bi.group(3)))))
            continue
        ng = re.fullmatch(r"-(\w+)", e)
        assert ng, (target, line)
        ops.append((dest, "neg", (ng.group(1),)))
    return ops


def _normal(op: str) -> str:
    return {"iadd": "add", "ieq": "eq"}.get(op, op)


@pytest.mark.parametrize("target", ["c", "cuda", "triton", "numpy"])
def test_each_emission_is_the_operation_list(sigmoid_bf16, tanh_fp16, target):
    for r in (sigmoid_bf16, tanh_fp16):
        for prog in (r.program, fs.native(r.program, r.shape)):
            got = parse(emit(prog, target, fs.header(r)), target)
            want = [(o.dest, _normal(o.op), o.args) for o in prog.ops]
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert g[0] == w[0] and g[1] == w[1], (target, g, w)
                for a, b in zip(g[2], w[2]):
                    if isinstance(b, float):
                        assert isinstance(a, float) and a == b and math.copysign(1, a) == math.copysign(1, b)
                    else:
                        assert a == b, (target, g, w)
    text = emit(sigmoid_bf16.program, "cuda", "")
    assert "No GPU" in text and "fmaf_rn" in text and "fast_math" in text


def test_numpy_emission_runs_and_equals_the_emulator(tanh_fp16):
    tg = fs.targets("tanh", "fp16")
    ns: dict = {}
    exec(compile(emit(tanh_fp16.program, "numpy", ""), "<numpy emission>", "exec"), ns)
    out = ns[tanh_fp16.program.name](tg.x32)
    assert np.array_equal(out.view(np.uint32), ir.run(tanh_fp16.program, tg.x32).view(np.uint32))
    # and it is RN_fp16(tanh(x)) at every input, NaN included
    y = out.astype(np.float64)
    same = (y == tg.y) & (np.signbit(y) == np.signbit(tg.y)) | (np.isnan(y) & np.isnan(tg.y))
    assert same.all()


# ------------------------------------------------------------------ compiled as shipped
def _header_flags(src: str) -> dict:
    """The gcc flags the C header names, by build."""
    out = {}
    for build, pat in (
        ("avx2", r"vectorized\s+gcc (.*?)\s+\(AVX2"),
        ("avx512", r"gcc (.*?)\s+\(AVX-512"),
        ("scalar", r"scalar\s+gcc (.*?)\s+\(any"),
    ):
        out[build] = re.search(pat, src).group(1).split()
    return out


def _cpu_runs(build: str) -> bool:
    return build in fs.runnable_builds()


def _compile(src: str, name: str, flags: list, tmp_path, tag: str):
    import ctypes

    c = tmp_path / f"{name}-{tag}.c"
    c.write_text(src)
    so = tmp_path / f"{name}-{tag}.so"
    r = subprocess.run(
        ["gcc", *flags, "-fopt-info-vec-optimized", "-shared", "-fPIC", "-o", str(so), str(c), "-lm"],
        capture_output=True,
        text=True,
        check=True,
    )
    fn = getattr(ctypes.CDLL(str(so)), name)
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    fn.restype = None

    def run(x):
        xa = np.ascontiguousarray(x)
        y = np.empty_like(xa)
        fn(xa.ctypes.data, y.ctypes.data, xa.size)
        return y

    return run, "loop vectorized" in r.stderr


def _mp_sigmoid(x):
    with mp.workprec(200):
        return 1 / (1 + mp.exp(-mp.mpf(x)))


def test_compiled_c_correctly_rounded_at_every_input_in_every_build(sigmoid_bf16, tanh_fp16, tmp_path):
    assert _cpu_runs("scalar") and (_cpu_runs("avx2") or not fs.runnable_builds()[:-1])
    for r, np16 in ((sigmoid_bf16, ml_dtypes.bfloat16), (tanh_fp16, np.float16)):
        tg = fs.targets(r.shape.reference, r.shape.dtype)
        src = emit_c.source(r.program, fs.header(r))
        src16 = emit_c.source(fs.native(r.program, r.shape), fs.header(r))
        flags = _header_flags(src)
        codes = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
        with np.errstate(invalid="ignore"):
            xv = codes.view(np16).astype(np.float32)
        for build in ("avx512", "avx2", "scalar"):
            if not _cpu_runs(build):
                continue
            run, vec = _compile(src, r.program.name, flags[build], tmp_path, build)
            assert vec == (build != "scalar"), build
            y = run(tg.x32).astype(np.float64)
            same = ((y == tg.y) & (np.signbit(y) == np.signbit(tg.y))) | (np.isnan(y) & np.isnan(tg.y))
            assert same.all(), (build, tg.x[~same][:5])
            # the emulator of the op list gives the same bits as the compiled code
            assert np.array_equal(run(tg.x32).view(np.uint32), ir.run(r.program, tg.x32).view(np.uint32))
            run16, vec16 = _compile(src16, r.program.name + "_u16", flags[build], tmp_path, build)
            assert vec16 == (build != "scalar")
            got = run16(codes)
            fin = np.isfinite(xv)
            want = run(xv[fin]).astype(np16).view(np.uint16)  # the f32 kernel's values, checked above
            assert np.array_equal(got[fin], want)
            assert np.isnan(got[np.isnan(xv)].view(np16).astype(np.float32)).all()
    # independent of the oracle: 300 seeded bf16 inputs of the compiled sigmoid against mpmath
    fmt = get_format("bf16")
    run, _ = _compile(
        emit_c.source(sigmoid_bf16.program, ""), sigmoid_bf16.program.name, flags["scalar"], tmp_path, "mp"
    )
    xs = np.random.default_rng(3).choice(fmt.finite_values(), 300)
    xs = np.concatenate([xs, [-92.5, -88.0, -1e-30, 1e-30, 0.0, 2.0**-126, -(2.0**-133), 6.0]])
    for xi, yi in zip(xs.tolist(), run(xs.astype(np.float32)).astype(np.float64).tolist()):
        assert is_nearest_even(fmt, _mp_sigmoid(xi), yi), (xi, yi)


def test_a_broken_coefficient_is_caught(sigmoid_bf16, tmp_path):
    prog = fs.build(sigmoid_bf16.shape, {"p": ir.coefficients(sigmoid_bf16.program, "p")})
    c = ir.coefficients(prog, "p")
    c[1] = float(np.float32(c[1] * (1 + 2.0**-10)))
    ir.set_coefficients(prog, "p", c)
    tg = fs.targets("sigmoid", "bf16")
    assert fs.verify(prog, tg) > 0
    broken = fs.VectorFit(sigmoid_bf16.shape, prog, True, "", verified=len(tg.x))
    rows = fs.verify_c(broken, tmp_path, builds=["scalar"])
    assert rows[0]["f32"]["wrong"] > 0 and rows[0]["u16"]["wrong"] > 0


def test_cli_refuses_bad_options(tmp_path, capsys):
    assert (
        main(
            ["fit", "gelu", "--dtype", "bf16", "--shape", "vector", "--emit", "rust", "--out", str(tmp_path)]
        )
        == 2
    )
    assert main(["fit", "mish", "--dtype", "bf16", "--shape", "vector", "--out", str(tmp_path)]) == 2
    assert main(["fit", "gelu", "--dtype", "fp8_e4m3", "--shape", "vector", "--out", str(tmp_path)]) == 2
    assert (
        main(["fit", "gelu", "--dtype", "bf16", "--shape", "table", "--emit", "c", "--out", str(tmp_path)])
        == 2
    )
    assert main(["fit", "gelu", "--dtype", "bf16", "--fma", "--emit", "c", "--out", str(tmp_path)]) == 2
    assert main(["fit", "gelu", "--dtype", "bf16", "--shape", "round", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "rust" in err and "do not go together" in err and "Traceback" not in err
    assert "auto, table or vector" in err


def _mp_gelu(x):
    with mp.workprec(200):
        x = mp.mpf(x)
        return x / 2 * mp.erfc(-x / mp.sqrt(2))


def test_fit_gelu_fp16_without_flags_writes_the_vector_kernel(tmp_path, capsys):
    """Issue 36: no --shape, no --max-degree: the vector kernel (its polynomial needs degree 7,
    above the table's default cap of 6), compiled from the written file here with the flags
    its header names and correctly rounded at every input."""
    assert main(["fit", "gelu", "--dtype", "fp16", "--out", str(tmp_path), "--json", "-"]) == 0
    doc = __import__("json").loads(capsys.readouterr().out)
    assert doc["shape"]["chosen"] == "vector" and "vector shape" in doc["shape"]["why"]
    assert doc["kernel"]["degrees"]["p"] > 6
    src = (tmp_path / "fitv_gelu_fp16.c").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fitv_gelu_fp16.c", "fitv_gelu_fp16_u16.c"]
    build = fs.runnable_builds()[0]
    run, vec = _compile(src, "fitv_gelu_fp16", _header_flags(src)[build], tmp_path, build)
    assert vec == (build != "scalar")
    fmt = get_format("fp16")
    x = fmt.finite_values()
    y = run(x.astype(np.float32)).astype(np.float64)
    # every finite input against the correctly rounded value (the oracle's, itself checked by
    # selftest), then a seeded sample and the edges against mpmath directly
    tg = fs.targets("gelu", "fp16")
    want = tg.y[: len(x)]
    assert (((y == want) & (np.signbit(y) == np.signbit(want))) | (np.isnan(y) & np.isnan(want))).all()
    pick = np.random.default_rng(36).choice(len(x), 200, replace=False)
    edge = np.flatnonzero(np.isin(x, [-65504.0, -5.72656, -(2.0**-24), 0.0, 2.0**-24, 1.0, 65504.0]))
    for i in np.concatenate([pick, edge]).tolist():
        assert is_nearest_even(fmt, _mp_gelu(x[i]), y[i]), (x[i], y[i])
    spec = run(np.array([np.inf, -np.inf, np.nan], dtype=np.float32))
    assert spec[0] == np.inf and spec[1] == 0 and np.signbit(spec[1]) and np.isnan(spec[2])


def test_the_shape_chosen_without_flags():
    assert fs.choose_shape("gelu", "bf16", "fp32")[0] == "vector"
    assert fs.choose_shape("silu", "fp16", "fp32")[0] == "vector"
    # no vector shape: the table kernel, and why
    shape, why = fs.choose_shape("mish", "bf16", "fp32")
    assert shape == "table" and "mish bf16 has no vector shape" in why
    assert fs.choose_shape("gelu", "fp8_e4m3", "fp32")[0] == "table"
    assert fs.choose_shape("gelu", "bf16", "fp16")[0] == "table"
    assert fs.choose_shape("gelu", "bf16", "fp32", ["--fma"]) == (
        "table",
        "--fma is an option of the table kernel",
    )
    assert fs.choose_shape("mish", "bf16", "fp32", [], ["--emit"])[0] == "vector"


def test_variants_default_first():
    assert fs._variants("gelu", "fp16") == [(None, fs.MAX_EXCEPTIONS, "bias"), (None, 0, "bias")]
    assert [a for a, _, _ in fs._variants("tanh", "fp16")][:2] == [0.5, 0.5]
    assert sorted({a for a, _, _ in fs._variants("erf", "bf16")}) == [0.75, 1.0, 1.25]
    assert [t for _, _, t in fs._variants("silu", "fp16")] == ["scale", "scale", "bias", "bias"]
    assert {t for _, _, t in fs._variants("silu", "bf16")} == {"bias"}


# ------------------------------------------------------------------ fp16 rounding by F16C
def _disassembly(so: str) -> str:
    return subprocess.run(["objdump", "-d", so], capture_output=True, text=True, check=True).stdout


def _exact_bits(prog: ir.Program, x: np.ndarray) -> np.ndarray:
    return ir.run(prog, x).view(np.uint32)


def test_fp16_rounding_by_f16c_gives_the_ops_bits_at_every_input(tanh_fp16, tmp_path):
    # the C source rounds to fp16 by VCVTPS2PH where the build has F16C (the vector builds)
    # and by the rounding's own ops elsewhere (scalar): every build runnable here gives the
    # emulator's bits at every input, and only the vector builds contain the conversion
    prog = tanh_fp16.program
    assert prog.round16 is not None
    src = emit_c.source(prog, "")
    assert "_mm256_cvtps_ph" in src and f"{prog.name}_round(" in src
    tg = fs.targets("tanh", "fp16")
    want = tg.y_bits  # RN_fp16(tanh(x)) from the oracle at every input (NaN: any NaN)
    for build in fs.runnable_builds():
        k = emit_c.compile_source(src, prog.name, build, tmp_path)
        # every length's tail: a block's last elements (and short arrays) take the ops
        for n in (len(tg.x32), 1, 7, 8, 9, emit_c.BLOCK + 13):
            assert fs._same_bits(k(tg.x32[:n]).view(np.uint32), want[:n]).all(), (build, n)
        assert ("vcvtps2ph" in _disassembly(k.path)) == (build != "scalar"), build


def test_f16c_rounding_keeps_the_ops_after_it(tanh_fp16, tmp_path):
    # ops after the rounding (an exception list: x == xe -> ye) run after the conversion,
    # reading x again; at every input the compiled kernel is the emulator's
    s = fs.Shape(**{**tanh_fp16.shape.__dict__, "exceptions": ((0.5, 0.25), (-3.0, 2.0))})
    prog = fs.build(s, {g: ir.coefficients(tanh_fp16.program, g) for g in tanh_fp16.program.polys})
    src = emit_c.source(prog, "")
    assert f"{prog.name}_after(" in src
    tg = fs.targets("tanh", "fp16")
    want = _exact_bits(prog, tg.x32)
    assert want[tg.x32 == np.float32(-3.0)].view(np.float32).tolist() == [2.0]
    for build in fs.runnable_builds():
        k = emit_c.compile_source(src, prog.name, build, tmp_path)
        assert fs._same_bits(k(tg.x32).view(np.uint32), want).all(), build


def test_a_rounding_span_that_leaks_is_emitted_as_ops(tanh_fp16):
    # the marked span is replaced only when only its result leaves it and the ops after it
    # read nothing computed before it but x
    prog = tanh_fp16.program
    start, end = prog.round16
    assert "_mm256_cvtps_ph" in emit_c.source(
        ir.Program(prog.name, prog.ops, prog.out, round16=(start, end)), ""
    )
    inner = prog.ops[start].dest
    before = prog.ops[start - 1].dest
    for read in (inner, before):
        ops = [*prog.ops, ir.Op("y2", "add", (prog.out, 0.0)), ir.Op("y3", "select", ("y2", read, "y2"))]
        other = ir.Program(prog.name, ops, "y3", round16=prog.round16)
        assert "_mm256_cvtps_ph" not in emit_c.source(other, ""), read
    # the 16-bit variant: its own three spans (load, rounding, store), one left unmarked -> ops
    native = fs.native(prog, tanh_fp16.shape)
    assert "_mm256_cvtph_ps(_mm_loadu_si128" in emit_c.source(native, "")
    for field in ("load16", "round16", "store16"):
        plain = ir.Program(native.name, native.ops, native.out, native.in_type, native.out_type)
        for other in {"load16", "round16", "store16"} - {field}:
            setattr(plain, other, getattr(native, other))
        assert "_mm256_cvtps_ph" not in emit_c.source(plain, ""), field


def test_the_16_bit_fp16_variant_by_f16c_gives_the_ops_codes_at_every_code(tanh_fp16, tmp_path):
    # codes in by VCVTPH2PS, codes out by VCVTPS2PH (after the exception list, if any): every
    # build runnable here gives RN_fp16(f(x)) at all 65,536 codes (NaN codes: any NaN), with
    # and without an exception list, and every tail length the emulator's codes
    tg = fs.targets("tanh", "fp16")
    coefs = {g: ir.coefficients(tanh_fp16.program, g) for g in tanh_fp16.program.polys}
    codes = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    for exceptions in ((), ((0.5, 0.25), (-3.0, 2.0))):
        s = fs.Shape(**{**tanh_fp16.shape.__dict__, "native": True, "exceptions": exceptions})
        prog = fs.build(s, coefs)
        src = emit_c.source(prog, "")
        assert (f"{prog.name}_after(" in src) == bool(exceptions)
        want = ir.run(prog, codes.astype(np.uint32)).astype(np.uint16)
        for build in fs.runnable_builds():
            k = emit_c.compile_source(src, prog.name, build, tmp_path)
            if not exceptions:
                assert fs._codes_check(k, tg) == 0, build
            for n in (1 << 16, 1, 7, 8, 9, emit_c.BLOCK + 13):
                got = k(codes[:n])
                nan = np.isnan(want[:n].view(np.float16))
                assert np.array_equal(got[~nan], want[:n][~nan]), (build, n, exceptions)
                assert np.isnan(got[nan].view(np.float16)).all(), (build, n, exceptions)
            dis = _disassembly(k.path)
            assert ("vcvtph2ps" in dis and "vcvtps2ph" in dis) == (build != "scalar"), build
            if build != "scalar":  # the loop reported vectorized is the value's, not a tail's
                line = int(k.vectorized.split(".c:", 1)[1].split(":")[0])
                assert f"{prog.name}_value(" in src.splitlines()[line - 1], k.vectorized


def _const_kernel(c: str, extra: str = "") -> str:
    return (
        "#include <stddef.h>\n" + extra + "void k(const float *restrict xs, float *restrict ys, size_t n) {\n"
        f"    for (size_t j = 0; j < n; j++) ys[j] = {c};\n}}\n"
    )


def test_two_sources_of_one_name_in_one_directory_are_two_libraries(tmp_path):
    # dlopen returns the library already loaded from a path: each source is its own
    x = np.arange(5, dtype=np.float32)
    for build in fs.runnable_builds():
        one = emit_c.compile_source(_const_kernel("xs[j] + 1.0f"), "k", build, tmp_path)
        two = emit_c.compile_source(_const_kernel("xs[j] * 3.0f"), "k", build, tmp_path)
        assert one.path != two.path
        assert np.array_equal(one(x), x + 1) and np.array_equal(two(x), x * 3), build


def test_vectorized_names_the_kernels_loop_not_another(tmp_path):
    # the loop over j < n carries a dependency (no vectorization); another loop in the file
    # vectorizes: the kernel is not vectorized
    other = (
        "void fill(float *restrict a, size_t n) {\n"
        "    for (size_t i = 0; i < n; i++) a[i] = a[i] * 2.0f + 1.0f;\n}\n"
    )
    build = fs.runnable_builds()[0]  # the widest: a vector build on any x86-64-v3 CPU
    serial = emit_c.compile_source(
        _const_kernel("(j ? ys[j - 1] : 0.0f) * 0.5f + xs[j]", other), "k", build, tmp_path
    )
    x = np.ones(4, dtype=np.float32)
    assert np.array_equal(serial(x), np.array([1, 1.5, 1.75, 1.875], dtype=np.float32))
    assert serial.vectorized == ""
    plain = emit_c.compile_source(_const_kernel("xs[j] * 2.0f", other), "k", build, tmp_path)
    assert plain.vectorized.startswith(plain.path[: -len(".so")] + ".c:6:") == (build != "scalar")


def test_silu_fp16_moves_its_ties_by_a_scale_and_is_right_at_every_input(tmp_path):
    # the default SiLU fp16 kernel: x (g k), k = 1 +- 2^-22 by x's sign, no bias, no select
    # for x = 0; every build runnable here right at every input (signed zeros included), and
    # independently of the oracle: every input below 2^-10 in magnitude (the subnormals,
    # whose x/2 are fp16's ties) against mpmath, both signs
    r = fs.fit_best("silu", "fp16")
    assert r.ok and r.shape.tie == "scale", r.message
    assert "ties off by x (g (1 +- 2^-22))" in fs.describe(r)
    ops = [o.op for o in r.program.ops]
    assert "fma" in ops and not any(o.op == "eq" and 0.0 in o.args for o in r.program.ops)
    tg = fs.targets("silu", "fp16")
    fmt = get_format("fp16")
    small = np.array([v for v in fmt.finite_values() if abs(v) < 2.0**-10])
    for build in fs.runnable_builds():
        k = emit_c.compile_source(emit_c.source(r.program, fs.header(r)), r.program.name, build, tmp_path)
        y = k(tg.x32).astype(np.float64)
        same = ((y == tg.y) & (np.signbit(y) == np.signbit(tg.y))) | (np.isnan(y) & np.isnan(tg.y))
        assert same.all(), (build, tg.x[~same][:5])
        ys = k(small.astype(np.float32)).astype(np.float64)
        with mp.workprec(200):
            for xi, yi in zip(small.tolist(), ys.tolist()):
                exact = mp.mpf(xi) / (1 + mp.exp(-mp.mpf(xi)))
                # (x sigmoid(x) has x's sign: a result rounded to zero keeps it)
                assert is_nearest_even(fmt, exact, yi) and math.copysign(1, yi) == math.copysign(1, xi), (
                    xi,
                    yi,
                )
