"""Outputs dumped from devices, and input lists, read as untrusted files.

A dump is read from ``.npz`` (keys ``x`` and ``y``, or ``x_bits`` and ``y_bits``, or ``y``
alone), ``.npy`` (outputs alone, or an (N, 2) array of x and y), ``.csv`` (columns ``x``
and ``y``, or ``y`` alone; decimal values or ``0x`` hex bits) or raw binary (outputs
alone, little-endian, of ``raw_dtype``).  Outputs alone are taken in golden order.  Files
are never unpickled (``allow_pickle=False``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from audit.errors import BadFileError, BadOptionError
from audit.io import decimal_floats, load_npy, load_npz, read_bytes, read_csv
from audit.numbers.formats import Format, get_format

MAX_DUMP_BYTES = 1 << 30  # decoded bytes of a dump or an input list


@dataclass
class Dump:
    fmt: Format
    x: np.ndarray  # finite inputs, ascending
    y: np.ndarray  # outputs at x
    specials: list  # [(x, y)] for non-finite inputs
    path: str


def _values(fmt: Format, a: np.ndarray, what: str, path) -> np.ndarray:
    """An array of a dump as float64 values of fmt: bits (unsigned/void of the format's
    width) or floats that the format represents exactly."""
    a = np.asarray(a)
    if a.dtype == object:
        raise BadFileError(f"{path}: {what} is an object array (not read: files are never unpickled)")
    if a.ndim != 1:
        raise BadFileError(f"{path}: {what} must be one-dimensional, got shape {a.shape}")
    if a.dtype.kind in "uiV" and a.dtype.itemsize == fmt.uint.itemsize:
        return fmt.from_bits(a.view(fmt.uint))
    if a.dtype == fmt.dtype:
        with np.errstate(all="ignore"):
            return a.astype(np.float64)
    if a.dtype.kind != "f":
        raise BadFileError(
            f"{path}: {what} has dtype {a.dtype}, neither floats nor {fmt.bits}-bit patterns of {fmt.name}"
        )
    v = a.astype(np.float64)
    fin = np.isfinite(v)
    bad = fin & (fmt.round(v) != v)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise BadFileError(
            f"{path}: {what} holds {int(bad.sum())} values that are not {fmt.name} "
            f"values (first at index {i}: {float(v[i])!r})"
        )
    return v


def _parse_hex_or_float(cells: list[str], fmt: Format, what: str, path) -> np.ndarray:
    """A CSV column's text cells: all bit patterns ('0x...') or all decimal numbers."""
    if all(c.startswith("0x") for c in cells):
        try:
            bits = np.array([int(t, 16) for t in cells], dtype=np.uint64)
        except (ValueError, OverflowError):
            raise BadFileError(f"{path}: {what} has malformed hex bits") from None
        if bits.max(initial=0) >> np.uint64(fmt.bits):
            raise BadFileError(f"{path}: {what} has bit patterns wider than {fmt.bits} bits")
        return fmt.from_bits(bits.astype(fmt.uint))
    return _values(fmt, decimal_floats(cells, f"{path}: {what}"), what, path)


# the members a dump .npz may hold: inputs and outputs (bits, values or both) and what
# `actaudit golden` writes beside them
NPZ_MEMBERS = ("x_bits", "x", "inputs", "y_bits", "y", "outputs", "exact", "exact_lo", "format", "reference")


def _check_members(p, z, fmt: Format) -> dict:
    """Refuse a member the format does not know, a 'format' that is not ``fmt``, and bits
    and values of the same side that disagree (both are read; neither may be ignored).
    Returns the values of each side's first member where it held two or more (decoded once)."""
    unknown = sorted(set(z) - set(NPZ_MEMBERS))
    if unknown:
        raise BadFileError(f"{p}: unknown member(s) {unknown} (known: {', '.join(NPZ_MEMBERS)})")
    if "format" in z:
        named = z["format"]
        if named.dtype.kind != "U" or named.shape != () or str(named) != fmt.name:
            raise BadFileError(f"{p}: member 'format' says {str(named)[:40]!r}, not {fmt.name}")
    decoded = {}
    for side in (("x_bits", "x", "inputs"), ("y_bits", "y", "outputs")):
        held = [k for k in side if k in z]
        if len(held) < 2:
            continue
        a = decoded[held[0]] = _values(fmt, z[held[0]], f"'{held[0]}'", p)
        nan = np.isnan(a)  # (a NaN's payload is not compared)
        for k in held[1:]:
            v = _values(fmt, z[k], f"'{k}'", p)
            same = (
                v.shape == a.shape
                and bool(np.array_equal(np.isnan(v), nan))
                and bool(np.array_equal(fmt.to_bits(v[~nan]), fmt.to_bits(a[~nan])))
            )
            if not same:
                raise BadFileError(f"{p}: members '{held[0]}' and '{k}' disagree")
    return decoded


def dump_limit(fmt: Format) -> int:
    """Bytes a dump of ``fmt`` may hold (decoded): for a format of 16 bits or fewer, what
    every finite value as x and y in float64 or in CSV text can take; else MAX_DUMP_BYTES."""
    if fmt.enumerable:
        return min(MAX_DUMP_BYTES, 96 * len(fmt.finite_values()) + (1 << 20))
    return MAX_DUMP_BYTES


def _read_columns(
    p: Path, fmt: Format, raw_dtype: str | None, inputs_only: bool = False, regular: bool = False
):
    """(x or None, y) of a dump or input file, every read bounded by dump_limit(fmt) bytes
    of decoded data (a device such as /dev/zero, a zip bomb, a huge .npy header: refused);
    ``regular``: only from a regular file (a FIFO or device refused at once)."""

    limit = dump_limit(fmt)
    suffix = p.suffix.lower()
    x = None
    try:
        if suffix == ".npz":
            z = load_npz(p, limit, "dump", regular=regular)
            keys = set(z)
            decoded = _check_members(p, z, fmt)

            def member(k):
                return decoded[k] if k in decoded else _values(fmt, z[k], f"'{k}'", p)

            xk = next((k for k in ("x_bits", "x", "inputs") if k in keys), None)
            yk = next((k for k in ("y_bits", "y", "outputs") if k in keys), None)
            if inputs_only and xk is not None:  # golden --inputs: the x key alone will do
                return member(xk), None
            if yk is None:
                raise BadFileError(
                    f"{p}: no outputs: expected key 'y' (or 'y_bits', 'outputs'); found {sorted(keys)}"
                )
            y = member(yk)
            if xk is not None:
                x = member(xk)
        elif suffix == ".npy":
            a = load_npy(p, limit, "dump", regular)
            if a.ndim == 2 and a.shape[1] == 2:
                x, y = (
                    _values(fmt, a[:, 0].copy(), "column x", p),
                    _values(fmt, a[:, 1].copy(), "column y", p),
                )
            else:
                y = _values(fmt, a, "the array", p)
        elif suffix == ".csv":
            data = read_bytes(p, limit, "dump", regular)
            cols = read_csv(data, str(p))
            if inputs_only and "x" in cols:  # golden --inputs: the x column alone will do
                return _parse_hex_or_float(cols["x"], fmt, "column x", p), None
            if inputs_only and "y" not in cols and len(cols) == 1:  # one bare column
                cols = read_csv(data, str(p), header=False)
                return _parse_hex_or_float(cols["x"], fmt, "column x", p), None
            if "y" not in cols:
                raise BadFileError(f"{p}: no column 'y' (columns: {list(cols)})")
            y = _parse_hex_or_float(cols["y"], fmt, "column y", p)
            if "x" in cols:
                x = _parse_hex_or_float(cols["x"], fmt, "column x", p)
        else:
            dt = get_format(raw_dtype) if raw_dtype else fmt
            if dt != fmt:
                raise BadOptionError(f"raw dump dtype {dt.name} differs from --dtype {fmt.name}")
            raw = read_bytes(p, limit, "dump", regular)
            if len(raw) % fmt.uint.itemsize:
                raise BadFileError(f"{p}: {len(raw)} bytes is not a whole number of {fmt.name} values")
            y = fmt.from_bits(np.frombuffer(raw, dtype=fmt.uint.newbyteorder("<")).astype(fmt.uint))
    except (BadFileError, BadOptionError):
        raise
    except MemoryError:
        raise BadFileError(f"{p}: too large to read into memory") from None
    except Exception as e:  # zip, npy header, ...: an unreadable file, said so
        raise BadFileError(f"{p}: unreadable ({type(e).__name__}: {e})") from None
    return x, y


def read_inputs(path, fmt: Format) -> np.ndarray:
    """An input list for ``golden --inputs``: the inputs of a dump-like file (its x column
    or key where it has one, else its only array), in its own order; finite values of
    ``fmt``; any length, any format."""
    p = Path(path)
    x, y = _read_columns(p, fmt, None, inputs_only=True)
    xs = y if x is None else x
    bad = ~np.isfinite(xs)
    if bad.any():
        raise BadFileError(
            f"{p}: golden inputs must be finite; {int(bad.sum())} are not "
            f"(first: {float(xs[np.flatnonzero(bad)[0]])!r})"
        )
    if not len(xs):
        raise BadFileError(f"{p}: no inputs")
    return xs


def read_dump(path, fmt: Format, raw_dtype: str | None = None, regular: bool = False) -> Dump:
    p = Path(path)
    x, y = _read_columns(p, fmt, raw_dtype, regular=regular)
    if x is None:
        if not fmt.enumerable:
            raise BadFileError(
                f"{p}: outputs alone need golden order, which {fmt.name} has not: give the inputs too"
            )
        gold = fmt.finite_values()
        if len(y) != len(gold):
            raise BadFileError(
                f"{p}: {len(y)} outputs, but golden order for {fmt.name} has "
                f"{len(gold)} (every finite value, ascending): give the inputs too"
            )
        x = gold
    if len(x) != len(y):
        raise BadFileError(f"{p}: {len(x)} inputs but {len(y)} outputs")
    fin = np.isfinite(x)
    specials = [(float(a), float(b)) for a, b in zip(x[~fin], y[~fin])]
    seen = set()
    for a, _ in specials:  # each special input once: +inf, -inf, NaN (any payload)
        k = "nan" if np.isnan(a) else a
        if k in seen:
            raise BadFileError(f"{p}: special input {a!r} appears more than once")
        seen.add(k)
    x, y = x[fin], y[fin]
    if not len(x):  # zero inputs prove nothing: never an empty pass or "identical"
        raise BadFileError(
            f"{p}: no finite inputs"
            + (f" (only the non-finite {', '.join(repr(a) for a, _ in specials)})" if specials else "")
            + ": a dump must hold the outputs at the inputs it is audited over"
        )
    bits = fmt.to_bits(x)
    order = np.argsort(fmt.ordinal(x) * 2 + (~np.signbit(x)).astype(np.int64), kind="stable")
    x, y, bits = x[order], y[order], bits[order]
    dup = np.flatnonzero(np.diff(bits.astype(np.int64)) == 0) if len(bits) > 1 else np.zeros(0, np.int64)
    if len(dup):
        raise BadFileError(f"{p}: input {x[dup[0]]!r} appears more than once")
    return Dump(fmt, x, y, specials, str(p))
