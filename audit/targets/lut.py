"""Lookup tables: ``lut:FILE`` candidates and the correctly rounded table writer.

A table holds one output per input code: 256 entries (int8, uint8 or an 8-bit float input
format, indexed by q - qmin or by bit pattern) or 65536 (int16, or fp16/bf16 by bit
pattern).  Files are untrusted: .npy, .npz (key ``table``) or .csv (a column ``code``,
``y`` or ``output``, or a single column) are read from regular files only (a FIFO or a
device is refused at once) through the bounded readers of :mod:`audit.io`, without pickles,
and checked for type (numbers), shape (one dimension, the input format's code count) and
values (finite integers within the output codes).

**What a table claims.**  The tables that ``actaudit lut`` writes carry a record of what
they are (format ``actaudit.lut/1``, a JSON object)::

    {"format": "actaudit.lut/1", "reference": "sigmoid", "params": {},
     "in": {"dtype": "int8", "scale": 0.0625, "zero": 0, "round": "even"},
     "out": {"dtype": "fp8_e4m3"}}

(a float format is ``{"dtype": NAME}``; a quantized one also has its scale, zero point
and rounding).  It is stored in .npz as member ``actaudit_lut`` (a string), in .npy as a
comment after the header's dict (``{'descr': ..., } # actaudit.lut/1 {...}``: numpy reads
the file as usual), in .csv as a first line ``# actaudit.lut/1 {...}``, in .h/.c as a
comment.  An audit that asks for anything else (another reference, input or output format,
scale, zero point, rounding or parameter) is refused with one line.  A record with an
unknown key or version is refused; a table without a record claims nothing (give
``--reference``).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np

from audit.errors import BadFileError, BadOptionError
from audit.io import (
    atomic_path,
    decimal_floats,
    load_npz,
    npy_from_bytes,
    npy_header_text,
    read_bytes,
    read_csv,
)
from audit.numbers.formats import Format, element_format
from audit.numbers.quant import QuantFormat, is_quant, parse_quant
from audit.oracle import oracle
from audit.oracle.codes import exact_codes
from audit.oracle.references import get_reference
from audit.targets.quantized import QuantCandidate

MAX_BYTES = 4 << 20  # on disk and decoded (a 65536-entry float64 table is 512 KiB)
META = ("reference", "in_dtype", "out_dtype")  # the members older .npz tables carry
RECORD = "actaudit.lut/1"
RECORD_MEMBER = "actaudit_lut"
RECORD_KEYS = {"format", "reference", "params", "in", "out"}


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


# --------------------------------------------------------------- the record
def format_record(f) -> dict:
    """A format as a table's record states it."""
    if isinstance(f, QuantFormat):
        return {"dtype": f.kind, "scale": float(f.scale), "zero": int(f.zero), "round": f.rounding}
    return {"dtype": f.name}


def make_record(reference: str, inq, out, params: dict | None = None) -> dict:
    """The record of a table of ``reference`` (with its parameters, defaults included)
    from ``inq`` to ``out``."""
    ref = get_reference(reference)
    full = ref.with_defaults(params)
    return {
        "format": RECORD,
        "reference": ref.name,
        "params": {k: float(v) for k, v in sorted(full.items())},
        "in": format_record(inq),
        "out": format_record(out),
    }


def _check_format(v, where: str, side: str) -> dict:
    if not isinstance(v, dict) or not isinstance(v.get("dtype"), str) or len(v["dtype"]) > 40:
        raise BadFileError(f"{where}: record '{side}' must be an object with a 'dtype' name")
    if set(v) == {"dtype"}:
        return v
    if set(v) != {"dtype", "scale", "zero", "round"}:
        raise BadFileError(
            f"{where}: record '{side}' has keys {sorted(v)}: expected dtype (and scale, zero, round)"
        )
    s, z = v["scale"], v["zero"]
    if isinstance(s, bool) or not isinstance(s, (int, float)) or not (math.isfinite(s) and s > 0):
        raise BadFileError(f"{where}: record '{side}' scale must be a positive finite number")
    if isinstance(z, bool) or not isinstance(z, int) or v["round"] not in ("even", "away"):
        raise BadFileError(f"{where}: record '{side}' zero must be an integer, round even or away")
    return {"dtype": v["dtype"], "scale": float(s), "zero": z, "round": v["round"]}


def parse_record(text: str, where: str) -> dict:
    """A table's record (JSON text), validated: exactly the known keys, of their types."""
    try:
        rec = json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    except (ValueError, RecursionError) as e:
        raise BadFileError(f"{where}: the table's record is not valid JSON ({e})") from None
    if not isinstance(rec, dict) or rec.get("format") != RECORD:
        got = rec.get("format") if isinstance(rec, dict) else type(rec).__name__
        raise BadFileError(f"{where}: the table's record has format {got!r}, expected '{RECORD}'")
    if set(rec) != RECORD_KEYS:
        extra = sorted(set(rec) - RECORD_KEYS) or sorted(RECORD_KEYS - set(rec))
        raise BadFileError(
            f"{where}: the table's record has unknown or missing keys {extra} "
            f"(known: {', '.join(sorted(RECORD_KEYS))})"
        )
    if not isinstance(rec["reference"], str) or len(rec["reference"]) > 64:
        raise BadFileError(f"{where}: the table's record 'reference' must be a short string")
    ps = rec["params"]
    if not isinstance(ps, dict) or any(
        not isinstance(k, str)
        or isinstance(v, bool)
        or not isinstance(v, (int, float))
        or not math.isfinite(v)
        for k, v in ps.items()
    ):
        raise BadFileError(f"{where}: the table's record 'params' must map names to finite numbers")
    return {
        "format": RECORD,
        "reference": rec["reference"],
        "params": {k: float(v) for k, v in sorted(ps.items())},
        "in": _check_format(rec["in"], where, "in"),
        "out": _check_format(rec["out"], where, "out"),
    }


def _legacy_format(name: str, where: str) -> dict:
    try:
        return format_record(parse_quant(name) if is_quant(name) else element_format(name))
    except BadOptionError:
        raise BadFileError(f"{where}: the table names an unknown format '{name}'") from None


def _describe_format(r: dict) -> str:
    if set(r) == {"dtype"}:
        return r["dtype"]
    return f"{r['dtype']}:scale={r['scale']!r},zero={r['zero']},round={r['round']}"


def _describe(claims: dict) -> str:
    parts = [claims.get("reference", "?")]
    if claims.get("params"):
        parts[0] += "(" + ", ".join(f"{k}={v!r}" for k, v in claims["params"].items()) + ")"
    if "in" in claims or "out" in claims:
        parts.append(f"{_describe_format(claims.get('in', {'dtype': '?'}))} -> ")
        parts[-1] += _describe_format(claims.get("out", {"dtype": "?"}))
    return " for ".join(parts)


def check_claims(target: str, meta: dict, reference: str, inq, out, params: dict | None) -> None:
    """Refuse (one line) an audit of a table as anything other than what its record says."""
    claims = meta.get("record")
    if claims is None:
        return
    want = make_record(reference, inq, out, params)
    got = dict(claims)
    with_ref = get_reference(got["reference"]) if "reference" in got else None
    if with_ref is not None:
        got["reference"] = with_ref.name
    differs = [k for k in ("reference", "params", "in", "out") if k in got and got[k] != want[k]]
    if differs:
        shown = {k: want[k] for k in got if k in want}
        raise BadOptionError(
            f"{target}: the table was written for {_describe(got)}; refusing to audit it for "
            f"{_describe(shown)} ({', '.join(differs)} differ)"
        )


# ------------------------------------------------------------------ reading
def read_table(path, entries: int) -> tuple[np.ndarray, dict]:
    """(table as float64, metadata) from an untrusted .npy, .npz or .csv file; the
    metadata's ``record`` is what the file claims to be (absent: nothing claimed).
    ``entries``: the number it must hold, one per input code of the caller's format."""
    p = Path(path)
    meta: dict = {}
    suffix = p.suffix.lower()
    where = str(p)
    if suffix not in (".npz", ".npy", ".csv"):
        raise BadFileError(f"{p}: tables are .npy, .npz or .csv")
    if suffix == ".npz":
        z = load_npz(p, MAX_BYTES, "table", regular=True)
        if len(z) > 16:
            raise BadFileError(f"{p}: {len(z)} members: too many for a table")
        if "table" not in z:
            raise BadFileError(f"{p}: no key 'table' (found {sorted(z)})")
        a = z["table"]
        legacy = {}
        for k in META + (RECORD_MEMBER,):
            if k in z:
                v = z[k]
                if v.dtype.kind != "U" or v.ndim != 0 or len(str(v)) > 4000:
                    raise BadFileError(f"{p}: '{k}' must be a short string")
                legacy[k] = str(v)
        if RECORD_MEMBER in legacy:
            meta["record"] = parse_record(legacy[RECORD_MEMBER], where)
        elif legacy:  # an older table: its three strings are its claims
            meta["record"] = {}
            if "reference" in legacy:
                meta["record"]["reference"] = legacy["reference"]
            for k, side in (("in_dtype", "in"), ("out_dtype", "out")):
                if k in legacy:
                    meta["record"][side] = _legacy_format(legacy[k], where)
        if "record" in meta:  # the older strings, where present, must say the same
            r = meta["record"]
            if (
                "reference" in legacy
                and get_reference(legacy["reference"]).name != get_reference(r["reference"]).name
            ):
                raise BadFileError(f"{p}: member 'reference' contradicts the table's record")
            for k, side in (("in_dtype", "in"), ("out_dtype", "out")):
                if k in legacy and _legacy_format(legacy[k], where) != r[side]:
                    raise BadFileError(f"{p}: member '{k}' contradicts the table's record")
    elif suffix == ".npy":
        data = read_bytes(p, MAX_BYTES, "table", regular=True)
        a = npy_from_bytes(data, MAX_BYTES, where)
        head = npy_header_text(data)
        mark = head.find("# " + RECORD + " ")
        if mark >= 0:
            meta["record"] = parse_record(head[mark + len(RECORD) + 3 :].strip(), where)
    else:
        data = read_bytes(p, MAX_BYTES, "table", regular=True)
        first, nl, rest = data.partition(b"\n")
        if first.startswith(b"# " + RECORD.encode() + b" "):
            meta["record"] = parse_record(first[len(RECORD) + 3 :].decode("utf-8", "replace"), where)
            data = rest
        cols = read_csv(data, str(p))
        if "y_hex" in cols and "code" not in cols:  # bit patterns of a float output
            cells = cols["y_hex"]
            if not all(re.fullmatch(r"0x[0-9a-fA-F]{1,8}", c) for c in cells):
                raise BadFileError(f"{p}: column 'y_hex' has entries that are not hexadecimal bit patterns")
            a = np.array([int(v, 16) for v in cells], dtype=np.int64)
        else:
            col: str | None = next((c for c in ("code", "y", "output") if c in cols), None)
            if col is None:
                if len(cols) != 1:
                    raise BadFileError(f"{p}: no column 'code', 'y' or 'output' (columns: {list(cols)})")
                (col,) = cols
            assert col is not None
            a = decimal_floats(cols[col], f"{p}: column '{col}'")
            if np.isnan(a).any():
                raise BadFileError(f"{p}: column '{col}' has entries that are not numbers")
    if a.dtype.kind not in "iuf":
        raise BadFileError(f"{p}: table has dtype {a.dtype}: expected integers or floats")
    meta["kind"] = "float" if a.dtype.kind == "f" else "int"
    if a.ndim != 1 or a.shape[0] != entries:
        raise BadFileError(f"{p}: table has shape {a.shape}: expected {entries} entries (one per input code)")
    if "record" in meta and "reference" in meta["record"]:
        meta["reference"] = meta["record"]["reference"]
    return a.astype(np.float64), meta


def _tabulated(target: str, meta: dict, reference: str | None, example: str):
    """The reference a table is audited against: --reference, else the one it records."""
    name = reference or meta.get("reference")
    if name is None:
        raise BadOptionError(f"{target}: give the function it tabulates with --reference (e.g. {example})")
    ref = get_reference(name)
    if ref.arity != 1:
        raise BadOptionError(f"{target}: tables are for functions of one input, not {name}")
    return ref


def lut_candidate(target: str, inq, outq: QuantFormat, params=None, reference: str | None = None):
    """(QuantCandidate, reference) of ``lut:FILE`` between quantized codes."""
    path = target[4:]
    if not path:
        raise BadOptionError("lut: needs a file, lut:FILE")
    n = n_codes(inq)
    table, meta = read_table(path, n)
    ref = _tabulated(target, meta, reference, "sigmoid")
    check_claims(target, meta, ref.name, inq, outq, None)  # (the audit is at the defaults)
    if not np.isfinite(table).all() or (table != np.round(table)).any():
        raise BadFileError(f"{path}: entries must be finite integer output codes")
    if table.min() < outq.qmin or table.max() > outq.qmax:
        raise BadFileError(f"{path}: entries outside the output codes [{outq.qmin}, {outq.qmax}]")

    def fn(x_codes, _x):
        return table[index(inq, x_codes)]

    return QuantCandidate(target, ref.name, f"table[{n}]", str(path), fn, "table"), ref


def float_candidate(target: str, in_fmt: Format, out: Format, reference: str | None = None):
    """A Candidate of ``lut:FILE`` between float formats: the entry at each input's bit
    pattern, given as bit patterns of the output format (an integer table) or as its values
    (a float table: each entry must be a value of the output format, NaN or +-inf only where
    it has them)."""
    from audit.targets.candidates import Candidate

    path = target[4:]
    if not path:
        raise BadOptionError("lut: needs a file, lut:FILE")
    n = n_codes(in_fmt)
    table, meta = read_table(path, n)  # (fp4 and fp6 tables too: 16 and 64 entries)
    ref = _tabulated(target, meta, reference, "gelu")
    check_claims(target, meta, ref.name, in_fmt, out, None)
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
        elif oracle.fast_path_applies(ref, out) and not isinstance(inq, QuantFormat) and inq.p <= 24:
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
    record = json.dumps(make_record(reference, inq, out, params), allow_nan=False)
    p.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(p) as tmp:
        if suffix == ".npy":
            tmp.write_bytes(_npy_with_record(stored, record))
        elif suffix == ".npz":
            with open(tmp, "wb") as fh:
                members: dict[str, object] = {
                    "table": stored,
                    "values": y,
                    "x": x,
                    "exact": exact,
                    "reference": np.str_(reference),
                    "in_dtype": np.str_(in_name),
                    "out_dtype": np.str_(out_name),
                    RECORD_MEMBER: np.str_(record),
                }
                np.savez(fh, **members)  # type: ignore[arg-type]
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
            with open(tmp, "w", encoding="utf-8", newline="") as fh:
                fh.write(f"# {RECORD} {record}\n")
                pd.DataFrame(cols).to_csv(fh, index=False)
        else:
            text = _c_array(reference, inq, out, stored)
            tmp.write_text(f"/* {RECORD} {record} */\n" + text, encoding="utf-8")
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


def _npy_with_record(a: np.ndarray, record: str) -> bytes:
    """A version 1.0 .npy file of ``a`` whose header line carries ``# actaudit.lut/1 RECORD``
    after the dict (a comment to numpy's reader, which loads the file as usual)."""
    from numpy.lib import format as npf

    descr = npf.dtype_to_descr(a.dtype)
    head = f"{{'descr': {descr!r}, 'fortran_order': False, 'shape': {a.shape!r}, }} # {RECORD} {record}"
    pad = -(10 + len(head) + 1) % 64
    head = head + " " * pad + "\n"
    if "\n" in head[:-1] or len(head) >= 1 << 16 or not head.isascii():
        raise ValueError("a table's record must be one short ASCII line")
    return b"\x93NUMPY\x01\x00" + len(head).to_bytes(2, "little") + head.encode() + a.tobytes(order="C")


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


def is_lut(target: str) -> bool:
    return str(target).startswith("lut:")
