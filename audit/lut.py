"""Lookup tables: ``lut:FILE`` candidates and the correctly rounded table writer.

A table holds one output per input code: 256 entries (int8, uint8 or an 8-bit float input
format, indexed by q - qmin or by bit pattern) or 65536 (int16, or fp16/bf16 by bit
pattern).  Files are untrusted: .npy, .npz (key ``table``) or .csv (a column ``code``,
``y`` or ``output``, or a single column) are read without pickles, bounded in size on disk
and decoded, and checked for type (numbers), shape (one dimension, the input format's
code count) and values (finite integers within the output codes).
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from . import oracle
from .errors import BadFileError, BadOptionError
from .formats import Format, element_format
from .io import atomic_path
from .quant import QuantCandidate, QuantFormat, exact_codes, is_quant, parse_quant
from .references import get_reference

SIZES = (256, 65536)
MAX_BYTES = 4 << 20  # on disk and decoded (a 65536-entry float64 table is 512 KiB)
META = ("reference", "in_dtype", "out_dtype")


def n_codes(inq) -> int:
    if isinstance(inq, QuantFormat):
        return inq.qmax - inq.qmin + 1
    if inq.bits > 16:
        raise BadOptionError(
            f"a lookup table over {inq.name} would have 2^{inq.bits} entries: "
            "tables are for inputs of 16 bits or fewer"
        )
    return 1 << inq.bits


def index(inq, x_codes) -> np.ndarray:
    """Table index of input codes: q - qmin, or the bit pattern."""
    c = np.asarray(x_codes).astype(np.int64)
    return c - inq.qmin if isinstance(inq, QuantFormat) else c


def _regular(p: Path) -> None:
    if not p.exists():
        raise BadFileError(f"{p}: table not found")
    if not p.is_file():
        raise BadFileError(f"{p}: not a regular file")
    if p.stat().st_size > MAX_BYTES:
        raise BadFileError(f"{p}: {p.stat().st_size} bytes is more than a table of 65536 entries needs")


def read_table(path) -> tuple[np.ndarray, dict]:
    """(table as float64, metadata strings) from an untrusted .npy, .npz or .csv file."""
    p = Path(path)
    _regular(p)
    meta: dict = {}
    suffix = p.suffix.lower()
    try:
        if suffix == ".npz":
            with zipfile.ZipFile(p) as zf:  # bound the decoded size before numpy inflates it
                total = sum(i.file_size for i in zf.infolist())
                if total > MAX_BYTES or len(zf.infolist()) > 16:
                    raise BadFileError(
                        f"{p}: decodes to {total} bytes in {len(zf.infolist())} members: "
                        "too large for a table"
                    )
            with np.load(p, allow_pickle=False) as z:
                if "table" not in z.files:
                    raise BadFileError(f"{p}: no key 'table' (found {sorted(z.files)})")
                a = z["table"]
                for k in META:
                    if k in z.files:
                        v = z[k]
                        if v.dtype.kind != "U" or v.ndim != 0 or len(str(v)) > 200:
                            raise BadFileError(f"{p}: '{k}' must be a short string")
                        meta[k] = str(v)
        elif suffix == ".npy":
            a = np.load(p, allow_pickle=False)
        elif suffix == ".csv":
            import pandas as pd

            try:
                df = pd.read_csv(p)
            except Exception as e:
                raise BadFileError(f"{p}: unreadable CSV ({type(e).__name__}: {e})") from None
            col = next((c for c in ("code", "y", "output") if c in df.columns), None)
            if col is None:
                if len(df.columns) != 1:
                    raise BadFileError(
                        f"{p}: no column 'code', 'y' or 'output' (columns: {list(df.columns)})"
                    )
                col = df.columns[0]
            a = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=np.float64)
            if np.isnan(a).any():
                raise BadFileError(f"{p}: column '{col}' has entries that are not numbers")
        else:
            raise BadFileError(f"{p}: tables are .npy, .npz or .csv")
    except BadFileError:
        raise
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, KeyError) as e:
        raise BadFileError(f"{p}: not a readable table ({type(e).__name__}: {e})") from None
    if a.dtype.kind not in "iuf":
        raise BadFileError(f"{p}: table has dtype {a.dtype}: expected integers or floats")
    meta["kind"] = "float" if a.dtype.kind == "f" else "int"
    if a.ndim != 1 or a.shape[0] not in SIZES:
        raise BadFileError(f"{p}: table has shape {a.shape}: expected 256 or 65536 entries")
    return a.astype(np.float64), meta


def lut_candidate(target: str, inq, outq: QuantFormat, params=None, reference: str | None = None):
    """(QuantCandidate, reference) of ``lut:FILE`` between quantized codes."""
    path = target[4:]
    if not path:
        raise BadOptionError("lut: needs a file, lut:FILE")
    table, meta = read_table(path)
    n = n_codes(inq)
    if len(table) != n:
        raise BadFileError(f"{path}: {len(table)} entries, but {inq.name} has {n} input codes")
    if not np.isfinite(table).all() or (table != np.round(table)).any():
        raise BadFileError(f"{path}: entries must be finite integer output codes")
    if table.min() < outq.qmin or table.max() > outq.qmax:
        raise BadFileError(f"{path}: entries outside the output codes [{outq.qmin}, {outq.qmax}]")
    name = reference or meta.get("reference")
    if name is None:
        raise BadOptionError(f"{target}: give the function it tabulates with --reference (e.g. sigmoid)")
    ref = get_reference(name)
    if ref.arity != 1:
        raise BadOptionError(f"{target}: tables are for functions of one input, not {name}")

    def fn(x_codes, _x):
        return table[index(inq, x_codes)]

    return QuantCandidate(target, ref.name, f"table[{n}]", str(path), fn, "table"), ref


def float_candidate(target: str, in_fmt: Format, out: Format, reference: str | None = None):
    """A Candidate of ``lut:FILE`` between float formats: the entry at each input's bit
    pattern, given as bit patterns of the output format (an integer table) or as its values
    (a float table: each entry must be a value of the output format, NaN or +-inf only where
    it has them)."""
    from .candidates import Candidate

    path = target[4:]
    if not path:
        raise BadOptionError("lut: needs a file, lut:FILE")
    table, meta = read_table(path)
    n = n_codes(in_fmt)
    if len(table) != n:
        raise BadFileError(f"{path}: {len(table)} entries, but {in_fmt.name} has {n} bit patterns")
    if meta["kind"] == "int":
        if table.min() < 0 or table.max() >= 1 << out.bits:
            raise BadFileError(f"{path}: entries are not {out.bits}-bit patterns of {out.name}")
        vals = out.from_bits(table.astype(np.int64))
    else:
        vals = table
        with np.errstate(all="ignore"):
            fin = np.isfinite(vals)
            bad = (
                (fin & (out.round(vals) != vals))
                | (np.isnan(vals) & (not out.has_nan))
                | (np.isinf(vals) & (not out.has_inf))
            )
        if bad.any():
            raise BadFileError(f"{path}: {int(bad.sum())} entries are not values of {out.name}")
    name = reference or meta.get("reference")
    if name is None:
        raise BadOptionError(f"{target}: give the function it tabulates with --reference (e.g. gelu)")
    ref = get_reference(name)
    if ref.arity != 1:
        raise BadOptionError(f"{target}: tables are for functions of one input, not {name}")

    def fn(x, m):
        return vals[in_fmt.to_bits(np.asarray(x.a, dtype=np.float64)).astype(np.int64)]

    return Candidate(
        target, ref.name, f"table[{n}] by {in_fmt.name} bit pattern", str(path), fn, {}, "", in_fmt.name
    )


def tflite16_candidate(target: str, inq, outq: QuantFormat, params=None):
    """``tflite16:REFERENCE``: the int16 lookup-and-interpolate arithmetic of TFLite's int16
    activations (reference_ops ``generic_int16_table_lookup``): a table of 513 output codes
    at the input codes q_i = (i - 256) 128, i = 0..512 (the last one past the range,
    extrapolated), then for input code q, in integers,

        index = 256 + (q >> 7), offset = q & 127, slope = T[index + 1] - T[index],
        result = T[index] + ((slope * offset + 64) >> 7)   (>> an arithmetic shift).

    The table holds the correctly rounded codes Q(f(x_i)) (TFLite's gen_lut computes them in
    double and adjusts them to lower the interpolation error at segment midpoints: that
    adjustment is not modelled)."""
    name = target.split(":", 1)[1]
    if not isinstance(inq, QuantFormat) or inq.kind != "int16" or outq.kind != "int16":
        raise BadOptionError(f"{target}: the TFLite int16 scheme reads and writes int16 codes")
    ref = get_reference(name)
    if ref.arity != 1:
        raise BadOptionError(f"{target}: tables are for functions of one input, not {name}")
    qi = (np.arange(513) - 256) * 128
    xi = (qi - inq.zero).astype(np.float64) * inq.scale
    table, _, _ = exact_codes(ref, xi, outq, ref.with_defaults(params))
    T = table.astype(np.int64)

    def fn(x_codes, _x):
        q = np.asarray(x_codes, dtype=np.int64)
        idx = 256 + (q >> 7)
        off = q & 127
        slope = T[idx + 1] - T[idx]
        return (T[idx] + ((slope * off + 64) >> 7)).astype(np.float64)

    return (
        QuantCandidate(
            target,
            ref.name,
            "T[i] + ((T[i+1] - T[i]) (q & 127) + 64) >> 7, i = 256 + (q >> 7)",
            "TFLite reference_ops generic_int16_table_lookup (513-entry table)",
            fn,
            "int32",
        ),
        ref,
    )


# ---------------------------------------------------------------------- writer
def _in_values(inq) -> np.ndarray:
    """The input value of every table entry (NaN and inf for such bit patterns)."""
    if isinstance(inq, QuantFormat):
        return inq.values()
    return inq.from_bits(np.arange(1 << inq.bits))


def correct_table(reference: str, inq, out, params: dict | None = None):
    """(inputs, correctly rounded outputs, exact values as float64): see _correct_table."""
    x, y, exact, _ = _correct_table(reference, inq, out, params)
    return x, y, exact


def _correct_table(reference: str, inq, out, params: dict | None = None):
    """(inputs, correctly rounded outputs, exact values) for every input code: Q(f(x)) codes
    for a quantized output, RN_OUT(f(x)) for a float one; at +-inf inputs the reference's
    limit, rounded; at NaN inputs NaN, or where the output has no NaN the code of 0 (the
    zero point) or +0."""
    ref = get_reference(reference)
    if ref.arity != 1:
        raise BadOptionError(f"tables are for functions of one input, not {reference}")
    params = ref.with_defaults(params)
    x = _in_values(inq)
    fin = np.isfinite(x)
    y = np.empty(len(x))
    exact = np.full(len(x), np.nan)
    hi, lo = exact.copy(), np.zeros(len(x))  # float outputs: f = hi + lo (the double-double)
    xf = x[fin]
    if isinstance(out, QuantFormat):
        y[fin], exact[fin], _ = exact_codes(ref, xf, out, params)
        spec = [ref.special(v, params) for v in x[~fin]]
        y[~fin] = out.quantize(np.array(spec))
        y[np.isnan(y)] = out.zero  # NaN inputs: no code says NaN; the code of 0 (stated)
    else:
        if out == inq:
            ov = oracle.evaluate(ref, out, xf, params)
        elif oracle.fast_path_applies(ref, out) and inq.p <= 24:
            ov = oracle._compute(ref, out, xf, params)
        else:
            ov = oracle.exact_points(ref, xf, out, params)
        y[fin], exact[fin] = ov.rounded, ov.hi + ov.lo
        hi[fin], lo[fin] = ov.hi, ov.lo
        y[~fin] = out.round(np.array([ref.special(v, params) for v in x[~fin]]))
        if not out.has_nan:
            y[np.isnan(y)] = 0.0  # NaN inputs into a format without NaN (fp6, fp4): +0 (stated)
    if isinstance(out, QuantFormat):
        hi = exact
    return x, y, exact, (hi, lo)


def _int_dtype(q: QuantFormat) -> np.dtype:
    return np.dtype(q.kind)


def write_table(path, reference: str, inq, out, params: dict | None = None) -> dict:
    """Write the correctly rounded table (by suffix: .npy, .npz, .csv, .h or .c); return
    what was written.  Quantized outputs are written as codes, float outputs as bit patterns
    (and values, in .npz and .csv)."""
    p = Path(path)
    if p.exists() and not p.is_file():
        raise BadOptionError(f"{p}: not a regular file: refusing to write over it")
    suffix = p.suffix.lower()
    if suffix not in (".npy", ".npz", ".csv", ".h", ".c"):
        raise BadOptionError(f"{p}: tables are written as .npy, .npz, .csv, .h or .c")
    x, y, exact = correct_table(reference, inq, out, params)
    quant_out = isinstance(out, QuantFormat)
    if quant_out:
        stored = y.astype(_int_dtype(out))
    else:
        stored = out.to_bits(y)
    in_name, out_name = inq.name, out.name
    p.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(p) as tmp:
        if suffix == ".npy":
            with open(tmp, "wb") as fh:
                np.save(fh, stored)
        elif suffix == ".npz":
            with open(tmp, "wb") as fh:
                np.savez(
                    fh,
                    table=stored,
                    values=y,
                    x=x,
                    exact=exact,
                    reference=np.str_(reference),
                    in_dtype=np.str_(in_name),
                    out_dtype=np.str_(out_name),
                )
        elif suffix == ".csv":
            import pandas as pd

            cols = {"index": np.arange(len(x)), "x": x}
            if not isinstance(inq, QuantFormat):
                w = (inq.bits + 3) // 4
                cols["x_hex"] = [f"0x{b:0{w}x}" for b in range(len(x))]
            else:
                cols["x_code"] = inq.codes()
            if quant_out:
                cols["code"] = stored.astype(np.int64)
            else:
                w = (out.bits + 3) // 4
                cols["y_hex"] = [f"0x{int(b):0{w}x}" for b in stored.tolist()]
                cols["y"] = y
            cols["exact"] = exact
            pd.DataFrame(cols).to_csv(tmp, index=False)
        else:
            tmp.write_text(_c_array(reference, inq, out, stored), encoding="utf-8")
    return {
        "path": str(p),
        "entries": len(x),
        "reference": reference,
        "in_dtype": in_name,
        "out_dtype": out_name,
        "table": stored,
        "values": y,
        "x": x,
    }


def _c_array(reference: str, inq, out, stored: np.ndarray) -> str:
    ctype = {
        "int8": "int8_t",
        "uint8": "uint8_t",
        "int16": "int16_t",
        "uint16": "uint16_t",
        "uint32": "uint32_t",
    }[str(stored.dtype)]
    ident = "".join(ch if ch.isalnum() else "_" for ch in f"actaudit_{reference}_{len(stored)}")
    what = "output codes" if isinstance(out, QuantFormat) else f"bit patterns of {out.name}"
    idx = "q - (" + str(inq.qmin) + ")" if isinstance(inq, QuantFormat) else f"the {inq.name} bit pattern"
    lines = [
        f"/* {reference}: correctly rounded {what}, generated by actaudit lut. */",
        f"/* inputs: {inq.name}; index = {idx}. */",
        f"/* outputs: {out.name}. */",
        "#include <stdint.h>",
        f"static const {ctype} {ident}[{len(stored)}] = {{",
    ]
    vals = [str(int(v)) for v in stored.tolist()]
    for i in range(0, len(vals), 16):
        lines.append("    " + ", ".join(vals[i : i + 16]) + ",")
    lines.append("};")
    return "\n".join(lines) + "\n"


def formats_of(dtype, out_dtype):
    inq = parse_quant(dtype) if is_quant(dtype) else element_format(dtype)
    o = out_dtype if out_dtype is not None else dtype
    out = parse_quant(o) if is_quant(o) else element_format(o)
    n_codes(inq)
    return inq, out


def audit_table(written: dict, reference: str, inq, out, params=None):
    """The audit of a written table read back from its file (.npy, .npz, .csv): a
    QuantResult for quantized outputs; for float outputs a dict (inputs, correctly rounded
    entries, max ULP error) over the finite inputs.  None for C arrays."""
    from .quant import audit_codes

    path = written["path"]
    if Path(path).suffix.lower() not in (".npy", ".npz", ".csv"):
        return None
    ref = get_reference(reference)
    if isinstance(out, QuantFormat):
        qc, _ = lut_candidate("lut:" + path, inq, out, None, reference)
        return audit_codes(ref, inq, out, qc, params)
    from .metrics import Summary, point_errors

    if Path(path).suffix.lower() == ".csv":
        import pandas as pd

        vals = pd.read_csv(path)["y"].to_numpy(dtype=np.float64)
    else:
        table, _ = read_table(path)
        vals = out.from_bits(table.astype(np.int64))
    # (the oracle's double-double, not hi + lo: lo tells on which side of a power of two
    # f lies, hence its ulp, and keeps a nonzero f below float64's range nonzero)
    x, want, _, (hi, lo) = _correct_table(reference, inq, out, params)
    fin = np.flatnonzero(np.isfinite(x))
    ov = oracle.OracleValues(want[fin], hi[fin], lo[fin], 0, None)
    e = point_errors(x[fin], vals[fin], ov, out)
    s = Summary()
    s.add(e, out)
    return {"inputs": len(fin), "correct": s.correct, "max_ulp": s.max_ulp}


def is_lut(target: str) -> bool:
    return str(target).startswith("lut:")
