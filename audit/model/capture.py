"""The inputs each site really sees: one pass of the model in ORT, histograms, no tensors.

Inputs are batches: ``--data FILE.npz`` or a directory of them (one batch per file, in
name order, named arrays matching the graph's inputs), or ``--random`` with ``--shape
NAME=1x3x224x224`` and ``--seed`` (synthetic: float inputs N(0, 1), integer inputs
uniform in {0, 1}; named synthetic in every output).  Names, dtypes and the dimensions the
graph fixes are checked before the first run (one line, exit 2).

ORT's optimized graph (audit/model/optimized.py) runs with the tensors the engine's site
ops read added as graph outputs, optimizations off (it is already optimized): the values
captured are exactly those the kernels read.  Each batch's values are folded into a
histogram per tensor and dropped:

* 8- and 16-bit formats: exact counts per bit pattern (65,536 bins for fp16 and bf16);
* fp32: exact counts of the distinct values (sorted bit patterns and counts, merged per
  batch), at most DISTINCT_LIMIT of them; or, with ``bin=bf16|fp16``, counts per value of
  that declared format (each value rounded to it, ties to even: the audit then runs in fp32
  on that grid, each grid value standing for the values that round to it, said in every
  output).

Non-finite values are counted apart (nan, inf, -inf), never dropped.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from audit.errors import BadFileError, BadOptionError
from audit.numbers.formats import get_format

DISTINCT_LIMIT = 1 << 21  # distinct fp32 values kept per site (exact counts)
BATCH_LIMIT = 1 << 30  # bytes of one .npz batch
ORT_TYPES = {
    "tensor(float)": "fp32",
    "tensor(float16)": "fp16",
    "tensor(double)": "fp64",
    "tensor(bfloat16)": "bf16",
}
NP_OF = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
    "tensor(int8)": np.int8,
    "tensor(uint8)": np.uint8,
    "tensor(bool)": np.bool_,
}


@dataclass
class Histogram:
    """Counts per value of one tensor's format: sorted bit patterns (of ``fmt``) and counts."""

    fmt: str  # the format the counts are of (the values the audit runs on)
    binned: str | None = None  # the declared format fp32 values were rounded to, if any
    bits: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    counts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    dense: np.ndarray | None = None  # 16-bit formats: counts per bit pattern
    nonfinite: dict = field(default_factory=lambda: {"nan": 0, "inf": 0, "-inf": 0})
    total: int = 0
    lo: float = math.inf  # the observed range (finite values, before binning)
    hi: float = -math.inf

    def add(self, a: np.ndarray) -> None:
        a = np.asarray(a).ravel()
        self.total += a.size
        fin = np.isfinite(a)
        if not fin.all():
            self.nonfinite["nan"] += int(np.count_nonzero(np.isnan(a)))
            self.nonfinite["inf"] += int(np.count_nonzero(a == np.inf))
            self.nonfinite["-inf"] += int(np.count_nonzero(a == -np.inf))
            a = a[fin]
        if not a.size:
            return
        self.lo = min(self.lo, float(a.min()))
        self.hi = max(self.hi, float(a.max()))
        f = get_format(self.fmt)
        if self.binned is not None:  # counts per bit pattern of the declared format
            b = get_format(self.binned)
            r = b.round(a.astype(np.float64))
            ok = np.isfinite(r)
            if not ok.all():  # beyond the declared format: counted as its overflow
                self.nonfinite["inf"] += int(np.count_nonzero(r[~ok] > 0))
                self.nonfinite["-inf"] += int(np.count_nonzero(r[~ok] < 0))
                r = r[ok]
            if self.dense is None:
                self.dense = np.zeros(1 << b.bits, np.int64)
            self.dense += np.bincount(b.to_bits(r).astype(np.intp), minlength=1 << b.bits)
            return
        if f.bits <= 16:
            if self.dense is None:
                self.dense = np.zeros(1 << f.bits, np.int64)
            self.dense += np.bincount(a.view(f.uint).astype(np.intp), minlength=1 << f.bits)
            return
        bits, counts = np.unique(a.view(f.uint), return_counts=True)
        if self.bits.size:
            allb = np.concatenate([self.bits, bits.astype(np.uint64)])
            allc = np.concatenate([self.counts, counts.astype(np.int64)])
            ub, inv = np.unique(allb, return_inverse=True)
            uc = np.zeros(len(ub), np.int64)
            np.add.at(uc, inv, allc)
            self.bits, self.counts = ub, uc
        else:
            self.bits, self.counts = bits.astype(np.uint64), counts.astype(np.int64)
        if self.bits.size > DISTINCT_LIMIT:
            raise BadOptionError(
                f"more than {DISTINCT_LIMIT} distinct {self.fmt} values at one site: "
                "give --bin bf16 (or fp16) to count them per value of a declared format"
            )

    def finish(self) -> None:
        if self.dense is not None:
            nz = np.flatnonzero(self.dense)
            bits, counts = nz.astype(np.uint64), self.dense[nz]
            if self.binned is not None:  # the declared format's values as values of fmt
                b, f = get_format(self.binned), get_format(self.fmt)
                bits = f.to_bits(b.from_bits(nz.astype(b.uint))).astype(np.uint64)
                order = np.argsort(bits, kind="stable")
                bits, counts = bits[order], counts[order]
            self.bits, self.counts = bits, counts
            self.dense = None

    def values(self) -> np.ndarray:
        """The observed values (of ``fmt``), ascending on the number line."""
        f = get_format(self.fmt)
        v = f.from_bits(self.bits.astype(f.uint))
        return np.sort(v)

    @property
    def count(self) -> int:
        return int(self.counts.sum())

    @property
    def distinct(self) -> int:
        return int(self.bits.size)


# ------------------------------------------------------------------ batches
@dataclass
class Batches:
    source: str  # 'FILE.npz', 'DIR/' or 'random'
    synthetic: bool
    files: list
    shapes: dict
    seed: int
    n: int
    digest: str = ""


def _inputs(model) -> list:
    inits = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def data_batches(data: str | None, random: bool, shapes: dict | None, seed: int, batches: int = 1) -> Batches:
    if (data is None) == (not random):
        raise BadOptionError("give --data FILE.npz|DIR or --random (with --shape NAME=DIMS)")
    if random:
        if not shapes:
            raise BadOptionError("--random needs --shape NAME=DIMS for each graph input")
        if not (isinstance(batches, int) and 1 <= batches <= 10_000):
            raise BadOptionError(f"--batches must be in [1, 10000], got {batches!r}")
        return Batches("random", True, [], dict(shapes), int(seed), batches)
    if shapes:
        raise BadOptionError("--shape applies to --random (the data files carry their shapes)")
    p = Path(data)  # type: ignore[arg-type]
    if p.is_dir():
        files = sorted(q for q in p.iterdir() if q.suffix == ".npz")
        if not files:
            raise BadFileError(f"{data}: no .npz files in the directory")
    elif p.exists():
        files = [p]
    else:
        raise BadFileError(f"{data}: no such file or directory")
    return Batches(str(data), False, files, {}, 0, len(files))


def parse_shapes(items) -> dict:
    out: dict[str, tuple] = {}
    for it in items or []:
        name, eq, dims = str(it).partition("=")
        try:
            shape = tuple(int(d) for d in dims.lower().split("x"))
        except ValueError:
            shape = ()
        if not eq or not name or not shape or any(d < 1 or d > 1 << 20 for d in shape) or name in out:
            raise BadOptionError(f"--shape '{it}': NAME=DIMS, e.g. input=1x3x224x224 (each name once)")
        out[name] = shape
    return out


def _check_feed(model, feed: dict, where: str) -> None:
    from onnx import helper

    ins = _inputs(model)
    names = {i.name for i in ins}
    missing, extra = sorted(names - set(feed)), sorted(set(feed) - names)
    if missing or extra:
        raise BadFileError(
            f"{where}: arrays do not match the graph's inputs"
            + (f"; missing {', '.join(missing)}" if missing else "")
            + (f"; not inputs of the graph: {', '.join(extra)}" if extra else "")
        )
    for i in ins:
        a = feed[i.name]
        tt = i.type.tensor_type
        want = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if a.dtype != want:
            raise BadFileError(f"{where}: input {i.name} is {a.dtype}, the graph takes {np.dtype(want)}")
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        if tt.HasField("shape") and (
            len(dims) != a.ndim or any(d is not None and d != s for d, s in zip(dims, a.shape))
        ):
            shown = "x".join("?" if d is None else str(d) for d in dims)
            raise BadFileError(
                f"{where}: input {i.name} has shape {'x'.join(map(str, a.shape))}, the graph takes {shown}"
            )


def iterate(model, b: Batches):
    """(label, feed) per batch, checked against the graph's inputs; fills b.digest."""
    from onnx import helper

    from audit.io import load_npz

    h = hashlib.sha256()
    if b.synthetic:
        rng = np.random.default_rng(b.seed)
        ins = _inputs(model)
        missing = sorted({i.name for i in ins} - set(b.shapes))
        extra = sorted(set(b.shapes) - {i.name for i in ins})
        if missing or extra:
            raise BadOptionError(
                "--shape does not match the graph's inputs"
                + (f"; missing {', '.join(missing)}" if missing else "")
                + (f"; not inputs of the graph: {', '.join(extra)}" if extra else "")
            )
        h.update(f"random seed={b.seed}".encode())
        for k in range(b.n):
            feed = {}
            for i in ins:
                dt = np.dtype(helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type))
                shape = b.shapes[i.name]
                if dt.kind == "f":
                    feed[i.name] = rng.standard_normal(shape).astype(dt)
                elif dt.kind in "iub":
                    feed[i.name] = rng.integers(0, 2, shape).astype(dt)
                else:
                    raise BadOptionError(f"--random: input {i.name} of dtype {dt} cannot be drawn")
            _check_feed(model, feed, f"--random batch {k}")
            _digest(h, feed)
            yield f"random #{k}", feed
    else:
        for f in b.files:
            feed = load_npz(str(f), BATCH_LIMIT, "data batch")
            feed = {k: np.asarray(v) for k, v in feed.items()}
            _check_feed(model, feed, str(f))
            _digest(h, feed)
            yield str(f), feed
    b.digest = h.hexdigest()


def _digest(h, feed: dict) -> None:
    for k in sorted(feed):
        a = np.ascontiguousarray(feed[k])
        h.update(f"{k}:{a.dtype.str}:{a.shape}".encode())
        h.update(a.tobytes())


def capture(opt, wants: dict, model, b: Batches, bin: str | None = None, extra=()) -> tuple[dict, dict]:
    """Histogram per key of ``wants`` (key -> the tensors of the optimized graph ``opt``
    it reads: one, or two that the kernel adds, BiasGelu's input and bias), over every
    batch; and each key's format as ORT reports it.  ``model``: the original graph;
    ``extra``: nodes added to read a tensor back (ReorderOutput of an NCHWc tensor)."""

    from audit.model.optimized import _ort, session_options
    from audit.targets.engines.base import one_line

    ort = _ort()
    m = with_outputs(opt, sorted({t for ts in wants.values() for t in ts}), extra)
    so = session_options("off")
    try:
        sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    except Exception as e:
        raise BadFileError(
            f"onnxruntime refused the model with the site inputs as outputs: {one_line(e)}"
        ) from None
    types = {o.name: o.type for o in sess.get_outputs()}
    fmts = {k: ORT_TYPES.get(types.get(ts[0], ""), None) for k, ts in wants.items()}
    hists: dict = {}
    for k, f in fmts.items():
        if f is None:
            continue
        binned = bin if (bin not in (None, "exact") and f == "fp32") else None
        hists[k] = Histogram("fp32" if binned else f, binned)
    names = sorted({t for k in hists for t in wants[k]})
    for label, feed in iterate(model, b):
        try:
            outs = dict(zip(names, sess.run(names, feed)))
        except Exception as e:
            raise BadFileError(f"{label}: onnxruntime failed on the batch: {one_line(e)}") from None
        for k, hst in hists.items():
            ts = wants[k]
            if len(ts) == 1:
                hst.add(outs[ts[0]])
            else:  # the kernel's own addition, in its format (IEEE, round to nearest)
                a, c = outs[ts[0]], outs[ts[1]]
                with np.errstate(all="ignore"):
                    hst.add(np.add(a, c, dtype=a.dtype))
        del outs
    for hst in hists.values():
        hst.finish()
    return hists, fmts


def with_outputs(model, names, extra_nodes=()):
    """A copy of ``model`` with tensors ``names`` added as graph outputs."""
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.graph.node.extend(extra_nodes)
    have = {o.name for o in m.graph.output}
    for t in names:
        if t not in have:
            vi = onnx.ValueInfoProto()
            vi.name = t
            m.graph.output.append(vi)
            have.add(t)
    return m
