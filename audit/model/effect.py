"""``actaudit model MODEL --effect``: what each site's error does to the model's outputs.

For each site with a catalog reference, the site's output is replaced by its correctly
rounded values and the rest of the graph is kept:

* the graph is **cut** at the site: the tensor the site writes becomes a graph input of
  the rest (the *suffix*), which is fed RN(f(x)) in that tensor's format (the oracle,
  audit/oracle, at the values x the engine's kernel read).  The cut is made in ORT's own
  optimized graph (audit/model/optimized.py) and the suffix runs with optimizations off,
  so it runs exactly the kernels the whole model runs at the chosen ``--opt-level``: fed
  the engine's own values it gives the model's outputs bit for bit;
* a site that ORT fused into its producer (``FusedGemm``, ``FusedConv`` with
  ``activation=...``) is cut at the fused op's output, and its input x, which lives inside
  that kernel, is computed by the same op without its activation (``Gemm``, ``Conv``: the
  fused kernels are those ops with the activation applied to their result), or where that
  is not possible (an NCHWc Conv) read from the graph without optimizations (said in
  ``notes``); BiasGelu's x is its two inputs added in their format, as the kernel does;
* a site whose last product by a power of two k (GELU's * 0.5) ORT folded into the MatMul
  after it (``FusedMatMul`` with alpha = k) is cut at that fused op's input, which is the
  site's output divided by k, and fed RN(f(x)) / k (exact), said in ``notes``;
* non-finite inputs keep the engine's value at that position (counted in ``notes``);
* per graph output (floating point): ``max_abs`` (the largest |change|), ``max_rel`` (the
  largest |change| / |output| over nonzero outputs), ``mean_abs`` and, for a
  classifier-shaped output (two or more dimensions, the last of at least 2 scores),
  ``argmax_changed``: the fraction of rows (every index but the last) whose argmax over
  the last axis changes; ``nonfinite_changed``: positions where one of the two values is
  NaN or infinite and they differ (left out of the other figures);
* the sites are ranked by effect: the largest ``argmax_changed`` over the outputs, then
  the largest ``max_abs`` relative to that output's largest magnitude, then the largest
  ``mean_abs`` relative to it (``score``);
* the **joint** effect: every site replaced at once.  A site downstream of another then
  reads the values computed from its upstream sites' correct roundings: the cuts are taken
  level by level down the graph (level 0: no cut above the site's input; level k: one of
  level k - 1 above it), the suffix of all the cuts run once per level, and after each run
  the sites of the next level fed RN(f(x)) at the x it gave (their x is then final): one run
  more than the deepest level, and one correct rounding per site and batch.

Cost: one pass of the whole model, one run of a suffix per site and batch, and the joint
runs; every suffix session is built once and reused for every batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from audit.errors import BadFileError
from audit.model import capture as capture_mod
from audit.model import optimized as opt_mod
from audit.numbers.formats import get_format


@dataclass
class Cut:
    """How one site is cut: the tensor replaced, where its input is read, its format."""

    site: str
    tensor: str  # the optimized graph's tensor the site writes (the suffix's input)
    reads: list  # the tensors x is read from (BiasGelu: two, added)
    unoptimized: bool = False  # x read from the graph without optimizations
    fmt: str | None = None  # the format of the cut tensor
    family: str = ""
    params: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    nonfinite: int = 0
    nodes: list = field(default_factory=list)  # nodes added to compute x (a fused op's input)
    scale: float = 1.0  # the cut tensor is scale * the site's output (a folded * 1/scale)


class Stats:
    """Running figures of the change of one graph output."""

    def __init__(self):
        self.max_abs = 0.0
        self.max_rel = 0.0
        self.sum_abs = 0.0
        self.n = 0
        self.rows = 0
        self.rows_changed = 0
        self.classifier = False
        self.nonfinite = 0
        self.scale = 0.0  # the largest finite |output| of the model as run

    def add(self, base: np.ndarray, new: np.ndarray) -> None:
        b = np.asarray(base, dtype=np.float64)
        v = np.asarray(new, dtype=np.float64)
        fin = np.isfinite(b) & np.isfinite(v)
        same = (b == v) | (np.isnan(b) & np.isnan(v))
        self.nonfinite += int(np.count_nonzero(~fin & ~same))
        d = np.abs(v[fin] - b[fin])
        if d.size:
            self.max_abs = max(self.max_abs, float(d.max()))
            self.sum_abs += float(d.sum())
            nz = b[fin] != 0
            if nz.any():
                self.max_rel = max(self.max_rel, float((d[nz] / np.abs(b[fin][nz])).max()))
        self.n += int(b.size)
        fb = b[np.isfinite(b)]
        if fb.size:
            self.scale = max(self.scale, float(np.abs(fb).max()))
        if b.ndim >= 2 and b.shape[-1] >= 2:
            self.classifier = True
            rb = b.reshape(-1, b.shape[-1])
            rv = v.reshape(-1, v.shape[-1])
            self.rows += rb.shape[0]
            self.rows_changed += int(np.count_nonzero(np.argmax(rb, -1) != np.argmax(rv, -1)))

    def result(self) -> dict:
        return {
            "max_abs": self.max_abs,
            "max_rel": self.max_rel,
            "mean_abs": self.sum_abs / self.n if self.n else 0.0,
            "argmax_changed": (self.rows_changed / self.rows if self.rows else 0.0)
            if self.classifier
            else None,
            "nonfinite_changed": self.nonfinite,
        }


def score(outputs: dict) -> tuple:
    """The ranking key of an effect: (largest argmax change, largest max_abs relative to its
    output's largest magnitude, largest mean_abs relative to it: low-precision outputs often
    tie on max_abs, one unit in their last place)."""
    arg = max((o["argmax_changed"] or 0.0 for o in outputs.values()), default=0.0)
    rel = mean = 0.0
    for o in outputs.values():
        s = o.get("scale") or 0.0
        r = o["max_abs"] / s if s > 0 else (math.inf if o["max_abs"] > 0 else 0.0)
        q = o["mean_abs"] / s if s > 0 else (math.inf if o["mean_abs"] > 0 else 0.0)
        if o.get("nonfinite_changed"):
            r = q = math.inf
        rel, mean = max(rel, r), max(mean, q)
    return (arg, rel, mean)


def _find(tensors: set, name: str) -> str | None:
    for p in opt_mod.PREFIXES:
        if p + name in tensors:
            return p + name
    return None


def plan(audits: list, opt) -> tuple[list, list]:
    """The cuts of the sites that can be replaced, and (site id, why) for those that cannot."""
    g = opt.graph
    producer = {o: n for n in g.node for o in n.output}
    tensors = set(producer) | {i.name for i in g.input}
    cuts, skipped = [], []
    for a in audits:
        s, e = a.site, a.engine
        ref = s.reference
        if s.near is not None or ref is None:
            skipped.append((s.id, "no catalog reference"))
            continue
        if s.internal:
            skipped.append((s.id, f"inside the {s.pattern.split('.')[0]} kernel: no tensor to cut"))
            continue
        y = _find(tensors, s.output)
        scale, note = 1.0, None
        if y is None and e.folded is not None:  # its last * k is inside the op after it
            y, k = e.folded["tensor"], e.folded["scale"]
            scale = 1 / k
            note = (
                f"ORT folded its last * {k!r} into {', '.join(e.folded['into'])}: cut at that"
                f" fused op's input ({y}), fed {scale!r} x RN(f(x))"
            )
        if y is None or y in {i.name for i in g.input}:
            skipped.append((s.id, e.why or "its output is not a tensor of ORT's optimized graph"))
            continue
        c = Cut(s.id, y, list(e.capture), family=ref["family"], params=dict(ref.get("params", {})))
        c.scale = scale
        if note:
            c.notes.append(note)
        if not e.capture:
            if e.why and e.why.startswith("fused into"):
                lin = _linear_part(producer, y, s.id)
                if lin is not None:  # x as the kernel computes it: the op without its activation
                    c.reads, c.nodes = [lin.output[0]], [lin]
                    c.notes.append(
                        f"{e.why.split(':')[0]}: cut at the fused op's output; its input computed"
                        f" by the same op without its activation ({lin.op_type})"
                    )
                else:
                    c.reads, c.unoptimized = [s.input], True
                    c.notes.append(
                        f"{e.why.split(':')[0]}: cut at the fused op's output; its input read from"
                        " the graph without optimizations"
                    )
            else:
                skipped.append((s.id, e.why or "its input is not in ORT's optimized graph"))
                continue
        cuts.append(c)
    return cuts, skipped


ACTIVATION_ATTRS = (
    "activation",
    "activation_params",
    "activation_alpha",
    "activation_beta",
    "activation_gamma",
)


def _linear_part(producer: dict, y: str, sid: str):
    """A node that computes what the fused op writing ``y`` (through ORT's casts) feeds its
    activation: a ``com.microsoft.FusedGemm`` as ``Gemm``, a ``FusedConv`` without a sum
    input as ``Conv``, with the same inputs and attributes (ORT's fused kernels are those
    ops with the activation applied to their result); None for any other op (an NCHWc
    Conv: its layout)."""
    from onnx import helper

    p = producer.get(y)
    while p is not None and p.op_type == "Cast" and p.input[0] in producer:
        p = producer[p.input[0]]
    if p is None or p.domain != opt_mod.MS:
        return None
    if p.op_type == "FusedGemm":
        op = "Gemm"
    elif p.op_type == "FusedConv" and len([i for i in p.input if i]) <= 3:
        op = "Conv"
    else:
        return None
    t = f"actaudit_preactivation_{sid}"
    n = helper.make_node(op, list(p.input), [t], name=t)
    n.attribute.extend(a for a in p.attribute if a.name not in ACTIVATION_ATTRS)
    return n


def _session(model, what: str):
    from audit.targets.engines.base import one_line

    ort = opt_mod._ort()
    try:
        return ort.InferenceSession(
            model.SerializeToString(), opt_mod.session_options("off"), providers=["CPUExecutionProvider"]
        )
    except Exception as e:
        raise BadFileError(f"onnxruntime refused the {what}: {one_line(e)}") from None


def suffix(opt, cut_types: dict, outputs: list):
    """The optimized graph cut at the tensors of ``cut_types`` (name -> elem type): each
    becomes a graph input, the nodes that wrote them and every node no output needs are
    removed, and graph inputs nothing reads are dropped.  ``outputs``: the graph outputs
    and any tensors to read back (all must still be computed)."""
    import onnx
    from onnx import helper

    g = opt.graph
    cut = set(cut_types)
    producer = {o: n for n in g.node for o in n.output}
    need, keep = list(outputs), set()
    seen: set = set()
    while need:
        t = need.pop()
        if t in seen or t in cut:
            continue
        seen.add(t)
        n = producer.get(t)
        if n is None or id(n) in keep:
            continue
        keep.add(id(n))
        need.extend(i for i in n.input if i)
        for sub in (a.g for a in n.attribute if a.type == onnx.AttributeProto.GRAPH):
            need.extend(_outer(sub))
    nodes = [n for n in g.node if id(n) in keep]
    read = {i for n in nodes for i in n.input} | set(outputs)
    for n in nodes:
        for sub in (a.g for a in n.attribute if a.type == onnx.AttributeProto.GRAPH):
            read |= set(_outer(sub))
    inputs = [i for i in g.input if i.name in read and i.name not in cut]
    inputs += [helper.make_tensor_value_info(t, cut_types[t], None) for t in sorted(cut)]
    out_vis = []
    have = {o.name: o for o in g.output}
    for t in outputs:
        if t in have:
            out_vis.append(have[t])
        else:
            vi = onnx.ValueInfoProto()
            vi.name = t
            out_vis.append(vi)
    inits = [t for t in g.initializer if t.name in read]
    graph = helper.make_graph(nodes, g.name + "_suffix", inputs, out_vis, inits)
    m = helper.make_model(graph, opset_imports=list(opt.opset_import), producer_name="actaudit")
    m.ir_version = opt.ir_version
    return m


def _outer(sub) -> list:
    """The names a subgraph (If/Loop/Scan body) reads from its enclosing graph."""
    own = {i.name for i in sub.input} | {t.name for t in sub.initializer}
    own |= {o for n in sub.node for o in n.output}
    return [i for n in sub.node for i in n.input if i and i not in own]


def correctly_rounded(c: Cut, x: np.ndarray, y_engine: np.ndarray, count: bool = True) -> np.ndarray:
    """RN_F(f(x)) in the cut tensor's format F, shaped like the engine's values; non-finite
    inputs keep the engine's value (counted in ``c.nonfinite``)."""
    from audit.oracle.oracle import _compute, evaluate, exact_points, fast_path_applies
    from audit.oracle.references import get_reference

    fmt = get_format(c.fmt)
    ref = get_reference(c.family)
    params = {k: v for k, v in c.params.items() if k in ref.params}  # selu: its own constants
    xname = _FORMAT_OF.get(np.asarray(x).dtype.name)
    xfmt = None if xname is None else get_format(xname)
    xs = np.asarray(x, dtype=np.float64).reshape(-1)
    out = np.asarray(y_engine, dtype=np.float64).reshape(-1).copy()
    fin = np.isfinite(xs)
    if count:
        c.nonfinite += int(np.count_nonzero(~fin))
    ub, inv = np.unique(xs[fin].view(np.uint64), return_inverse=True)  # by bits: -0 and +0 apart
    u = ub.view(np.float64)
    if u.size:
        with np.errstate(all="ignore"):
            representable = bool(np.all(fmt.round(u) == u))
        if representable:
            r = evaluate(ref, fmt, u, params).rounded
        elif fast_path_applies(ref, fmt) and xfmt is not None and xfmt.p <= 24:
            # x wider than the cut's format (a kernel that computes in fp32 and casts): the
            # fast path at those x, mpmath where it cannot decide (as sweep does for inputs
            # of another format)
            r = _compute(ref, fmt, u, ref.with_defaults(params)).rounded
        else:
            r = exact_points(ref, u, fmt, ref.with_defaults(params)).rounded
        out[fin] = r[inv] * c.scale  # a power of two: exact (to an overflow, as the engine's)
    return out.reshape(np.shape(y_engine)).astype(np.asarray(y_engine).dtype)


def levels(opt, cuts: list) -> dict:
    """cut tensor -> its level: 0 where no other cut tensor lies above the tensors its x is
    read from in the optimized graph, else one more than the highest level above (a site
    whose x is read from the graph without optimizations is level 0: its x is the engine's)."""
    g = opt.graph
    producer = {o: n for n in g.node for o in n.output}
    cut = {c.tensor for c in cuts}
    above: dict[str, set] = {}
    for c in cuts:
        ups = above.setdefault(c.tensor, set())
        if c.unoptimized:
            continue
        todo, seen = list(c.reads), set()
        while todo:
            t = todo.pop()
            if t in seen:
                continue
            seen.add(t)
            if t in cut and t != c.tensor:
                ups.add(t)
                continue
            n = producer.get(t)
            if n is not None:
                todo.extend(i for i in n.input if i)
    order = {o: k for k, n in enumerate(g.node) for o in n.output}  # topological
    out: dict[str, int] = {}
    for t in sorted(above, key=lambda t: order.get(t, -1)):  # a cut above comes first
        if any(u not in out for u in above[t]):
            raise BadFileError(f"the sites' cuts are not in graph order at {t}")
        out[t] = 1 + max((out[u] for u in above[t]), default=-1)
    return out


def _x_of(c: Cut, vals: dict) -> np.ndarray:
    if len(c.reads) == 1:
        return vals[c.reads[0]]
    a, b = vals[c.reads[0]], vals[c.reads[1]]
    with np.errstate(all="ignore"):
        return np.add(a, b, dtype=a.dtype)


def effects(model, opt, audits: list, b: capture_mod.Batches) -> dict:
    """The effect of each site (and of all at once) on the model's outputs, over every batch
    of ``b``: {"sites": {id: {...}}, "ranking": [ids], "joint": {...}, "skipped": {id: why}}."""
    import onnx

    cuts, skipped = plan(audits, opt)
    if not cuts:
        return {"sites": {}, "ranking": [], "joint": None, "skipped": dict(skipped)}
    outs = [o.name for o in opt.graph.output]
    extra = [n for a in audits for n in a.engine.capture_nodes if a.site.id in {c.site for c in cuts}]
    extra += [n for c in cuts for n in c.nodes]
    opt = capture_mod.with_outputs(opt, [], extra)  # the optimized graph with the nodes that read x
    opt_reads = sorted({t for c in cuts if not c.unoptimized for t in c.reads})
    cut_names = sorted({c.tensor for c in cuts})
    full = _session(capture_mod.with_outputs(opt, opt_reads + cut_names), "model with the sites as outputs")
    types = {o.name: o.type for o in full.get_outputs()}
    elem = {v: k for k, v in _ORT_ELEM.items()}
    for c in cuts:
        c.fmt = capture_mod.ORT_TYPES.get(types.get(c.tensor, ""))
    bad = [c for c in cuts if c.fmt is None]
    for c in bad:
        skipped.append((c.site, f"its output is {types.get(c.tensor)}, not a float format"))
    cuts = [c for c in cuts if c.fmt is not None]
    unopt_reads = sorted({t for c in cuts if c.unoptimized for t in c.reads})
    raw = None
    if unopt_reads:
        raw = _session(
            capture_mod.with_outputs(model, unopt_reads),
            "model (optimizations off) with the sites' inputs as outputs",
        )
    per_tensor: dict[str, list] = {}
    for c in cuts:
        per_tensor.setdefault(c.tensor, []).append(c)
    sessions = {t: _session(suffix(opt, {t: elem[types[t]]}, outs), f"graph cut at {t}") for t in per_tensor}
    joint_types = {t: elem[types[t]] for t in per_tensor}
    joint_reads = sorted({t for c in cuts if not c.unoptimized for t in c.reads})
    joint_model = suffix(opt, joint_types, outs + joint_reads)
    joint = _session(joint_model, "graph cut at every site")
    joint_inputs = {i.name for i in joint_model.graph.input}
    level = levels(opt, cuts)
    top = max(level.values(), default=0)
    stats = {c.site: {o: Stats() for o in outs} for c in cuts}
    jstats = {o: Stats() for o in outs}
    rounds_max = 0
    fed_inputs = {t: {i.name for i in s.get_inputs()} for t, s in sessions.items()}
    for label, feed in capture_mod.iterate(model, b):
        names = outs + opt_reads + cut_names
        got = dict(zip(names, _run(full, names, feed, label)))
        if raw is not None:
            got.update(zip(unopt_reads, _run(raw, unopt_reads, feed, label)))
        base = {o: got[o] for o in outs}
        crs = {}
        for c in cuts:
            crs[c.site] = correctly_rounded(c, _x_of(c, got), got[c.tensor])
            f = {k: v for k, v in feed.items() if k in fed_inputs[c.tensor]}
            f[c.tensor] = crs[c.site]
            for o, v in zip(outs, _run(sessions[c.tensor], outs, f, label)):
                stats[c.site][o].add(base[o], v)
        # joint: the cuts level by level down the graph; a cut's x is final once every cut
        # above it is fed its correct rounding at its final x (level 0: no cut above)
        jf = {k: v for k, v in feed.items() if k in joint_inputs}
        for c in cuts:
            jf[c.tensor] = crs[c.site]
        names = outs + joint_reads
        rounds = 0
        while True:
            rounds += 1
            res = dict(zip(names, _run(joint, names, jf, label)))
            res.update({t: got[t] for t in unopt_reads})  # fused sites: their x as run
            if rounds > top:
                break
            for c in cuts:
                if level[c.tensor] == rounds:
                    jf[c.tensor] = correctly_rounded(c, _x_of(c, res), got[c.tensor], False)
        rounds_max = max(rounds_max, rounds)
        for o in outs:
            jstats[o].add(base[o], res[o])
        del got
    sites = {}
    for c in cuts:
        o = {k: {**s.result(), "scale": s.scale} for k, s in stats[c.site].items()}
        notes = list(c.notes)
        if c.nonfinite:
            notes.append(f"{c.nonfinite} non-finite inputs keep the engine's value")
        sites[c.site] = {"tensor": c.tensor, "dtype": c.fmt, "outputs": o, "notes": notes}
    ranking = sorted(sites, key=lambda k: score(sites[k]["outputs"]), reverse=True)
    jo = {k: {**s.result(), "scale": s.scale} for k, s in jstats.items()}
    return {
        "sites": sites,
        "ranking": ranking,
        "joint": {"outputs": jo, "runs": rounds_max, "sites": [c.site for c in cuts]},
        "skipped": dict(skipped),
        "method": "cut in ORT's optimized graph, suffix run with optimizations off",
        "onnx": onnx.__version__,
    }


_FORMAT_OF = {"float16": "fp16", "bfloat16": "bf16", "float32": "fp32", "float64": "fp64"}
_ORT_ELEM = {1: "tensor(float)", 10: "tensor(float16)", 11: "tensor(double)", 16: "tensor(bfloat16)"}


def _run(sess, names, feed, label):
    from audit.targets.engines.base import one_line

    try:
        return sess.run(names, feed)
    except Exception as e:
        raise BadFileError(f"{label}: onnxruntime failed on the batch: {one_line(e)}") from None
