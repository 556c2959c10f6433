"""What ONNX Runtime really runs for each site: its own optimized graph.

The model is loaded by ORT with the session option ``optimized_model_filepath`` at the
chosen graph optimization level (``--opt-level``: off, basic, extended, all; default all,
ORT's own default), and the graph ORT saved is read back.  For each site of the original
graph, the node of the optimized graph that writes the site's output tensor (through a
trailing Cast that ORT inserted) is the op the engine runs:

* one op of :mod:`audit.targets.engines.ort` (``com.microsoft.Gelu`` after GeluFusion,
  ``QuickGelu`` after the x*Sigmoid(x) fusion, ``Sigmoid``...) whose input is the site's
  input: the site's engine op is that ``ort:`` target, with its attributes, which ``sweep``
  audits alone (``BiasGelu``: its two inputs are captured and added in fp32, as the kernel
  does, and the audit runs ``ort:BiasGelu`` with a zero bias);
* anything else (a pattern ORT left decomposed, a function ORT inlined such as HardSwish
  into HardSigmoid and Mul, a fp16 site that ORT's precision-free casts moved to fp32):
  the nodes of the optimized graph between the site's input and output form a subgraph,
  audited as one kernel (a model of those nodes and their constants, run by ORT with
  optimizations off: the graph is already optimized).

* a site whose last node, a product by a power of two (GELU's ``* 0.5``), ORT folded into
  the MatMul after it (MatMulScaleFusion: ``FusedMatMul`` with that alpha), so that its
  output tensor is gone: the nodes ORT kept, then that product, as a subgraph
  (``EngineSite.folded`` says where; audit/model/effect.py cuts at the fused op's input);
  any other site whose output ORT removed is reported with the ops that read the last of
  its tensors ORT kept.

Tensors keep their names through ORT's optimizations, except where it inserted casts
(``InsertedPrecisionFreeCast_NAME``): both names are looked up.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from typing import Any

from audit.errors import BadFileError, BadOptionError
from audit.model.scan import MS, Site

LEVELS = ("off", "basic", "extended", "all")
DEFAULT_LEVEL = "all"  # ORT's default: ORT_ENABLE_ALL
PREFIXES = ("", "InsertedPrecisionFreeCast_")


@dataclass
class EngineSite:
    """The op the engine runs for a site."""

    op: str  # the ort: op name, or 'graph' for a subgraph
    target: str | None  # 'ort:OP[attr=...]' where the op is an ort: target
    attributes: dict
    capture: list  # tensors of the optimized graph the site reads (x; BiasGelu: x, bias)
    nodes: list = field(default_factory=list)  # op types of the optimized nodes of the site
    node_names: list = field(default_factory=list)
    subgraph: object = None  # ModelProto of a decomposed site (input 'x', output 'y')
    why: str | None = None  # why it cannot be audited alone
    dtype: str | None = None  # the format the engine computes it in (set by capture)
    notes: list = field(default_factory=list)
    capture_nodes: list = field(default_factory=list)  # nodes added to read the capture (reorders)
    folded: dict | None = None  # the site's last * k folded into the op after it (FusedMatMul)


def _ort():
    from audit.targets.engines.callables import _need

    return _need("onnxruntime", "engines")


def session_options(level: str):
    """The adapter's session options (audit.targets.engines.ort), at ``level`` (--opt-level)."""
    from audit.targets.engines.ort import session_options as options

    if level not in LEVELS:
        raise BadOptionError(f"--opt-level '{level}': one of {', '.join(LEVELS)}")
    return options(_ort(), level)


def optimize(model, level: str = DEFAULT_LEVEL, where: str = "model", path=None):
    """ORT's optimized graph of ``model`` (ModelProto; ORT reads ``path`` where given, the
    same model's file) at ``level``; a model ORT refuses is a one-line error."""
    import onnx

    from audit.targets.engines.base import one_line

    ort = _ort()
    so = session_options(level)
    with tempfile.TemporaryDirectory(prefix="actaudit-model-") as tmp:
        so.optimized_model_filepath = os.path.join(tmp, "optimized.onnx")
        try:
            src = str(path) if path is not None else model.SerializeToString()
            ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
        except Exception as e:
            raise BadFileError(
                f"{where}: onnxruntime {ort.__version__} refused the model: {one_line(e)}"
            ) from None
        return onnx.load(so.optimized_model_filepath)


def _op_key(n) -> str | None:
    """The ort: op name of an optimized node, where it is one."""
    from audit.targets.engines.ort import OPS

    if n.domain == MS:
        name = "com.microsoft.Gelu" if n.op_type == "Gelu" else n.op_type
    elif n.domain in ("", "ai.onnx"):
        name = n.op_type
    else:
        return None
    op = OPS.get(name)
    if op is None or op.quantized or (n.domain == MS) != (op.domain == MS):
        return None
    return name


def _fmt(v) -> str:
    if isinstance(v, float):
        return repr(v)
    return str(v)


def engine_sites(sites: list[Site], opt, model=None) -> dict[str, EngineSite]:
    """site id -> EngineSite, read from the optimized graph ``opt`` (``model``: the original
    graph, to follow a site whose last node ORT folded into the op after it)."""
    from onnx import helper

    from audit.targets.engines.ort import OPS

    g = opt.graph
    producer = {o: n for n in g.node for o in n.output}
    inits = {t.name: t for t in g.initializer}
    tensors = set(producer) | {i.name for i in g.input} | set(inits)

    def find(name):
        for p in PREFIXES:
            if p + name in tensors:
                return p + name
        return None

    out = {}
    for s in sites:
        if s.internal:
            out[s.id] = EngineSite(
                s.pattern.split(".")[0], None, {}, [], why=f"inside the {s.pattern.split('.')[0]} kernel"
            )
            continue
        y = find(s.output)
        x = find(s.input)
        if y is None:
            es = _folded(s, model, opt, producer, inits, tensors, find)
            if es is None:
                es = EngineSite("?", None, {}, [], why=_missing(s, model, opt, find))
            out[s.id] = es
            continue
        y_run, ro = y, None  # the activation's own output, the layout reorder after it
        p = producer.get(y)
        while p is not None and p.op_type in ("Cast", "ReorderOutput") and p.input[0] in producer:
            if p.op_type == "ReorderOutput":
                ro = p
            y_run = p.input[0]
            p = producer[y_run]
        act = None if p is None else _attr_of(p, "activation")
        if act is not None and p is not None:  # fused into the producer (FusedConv, NCHWc Conv)
            name = f"{p.domain + '.' if p.domain else ''}{p.op_type}"
            out[s.id] = EngineSite(
                name,
                None,
                {"activation": act},
                [],
                [p.op_type],
                [p.name],
                why=f"fused into {name} (activation={act}): its input is inside that kernel",
            )
            continue
        key = None if p is None else _op_key(p)
        if key is not None and p is not None:
            op = OPS[key]
            a_in = p.input[0]
            while a_in != x and a_in in producer and producer[a_in].op_type == "Cast":
                a_in = producer[a_in].input[0]
            attrs = {}
            for a in p.attribute:
                if op.attr(a.name) is not None:
                    v = helper.get_attribute_value(a)
                    attrs[a.name] = v.decode() if isinstance(v, bytes) else v
            target = f"ort:{key}" + (
                "[" + ",".join(f"{k}={_fmt(v)}" for k, v in sorted(attrs.items())) + "]" if attrs else ""
            )
            es = EngineSite(key, target, attrs, [], [p.op_type], [p.name])
            src = producer.get(p.input[0])
            if a_in == x:  # the tensor before ORT's inserted casts: ort:OP in that dtype inserts the same
                es.capture = [a_in]
            elif src is not None and src.domain == "com.microsoft.nchwc":
                if ro is None:
                    es.why = "its input is in ORT's NCHWc layout, with no reorder to read it back"
                else:  # read back through a reorder like the one after the site (its channels)
                    t = f"actaudit_nchw_{len(out)}_{p.input[0]}"
                    r = helper.make_node(
                        "ReorderOutput", [p.input[0]], [t], domain="com.microsoft.nchwc", name=f"actaudit_{t}"
                    )
                    r.attribute.extend(ro.attribute)
                    es.capture, es.capture_nodes = [t], [r]
                    es.notes.append(
                        "ORT runs it in its NCHWc layout (inputs read back through ReorderOutput)"
                    )
            else:
                es.capture = [p.input[0]]
            if key == "BiasGelu":
                es.capture = [p.input[0], p.input[1]]
            out[s.id] = es
            continue
        if x is None:
            out[s.id] = EngineSite("?", None, {}, [], why="its input is not in ORT's optimized graph")
            continue
        es = _subgraph(s, opt, producer, inits, x, y_run)
        if y_run != y:
            es.notes.append(f"ORT casts the result to {_cast_to(producer[y])} after the site's nodes")
        out[s.id] = es
    return out


def _const_of(model, t: str):
    """The value of tensor ``t`` of the original graph where it is a constant (an
    initializer or a Constant node), else None."""
    from onnx import numpy_helper

    for i in model.graph.initializer:
        if i.name == t:
            return numpy_helper.to_array(i)
    for n in model.graph.node:
        if n.op_type == "Constant" and n.output and n.output[0] == t:
            for a in n.attribute:
                if a.name == "value":
                    return numpy_helper.to_array(a.t)
    return None


def _elem_type(opt, t: str, producer: dict, inits: dict, seen=None) -> int | None:
    """The ONNX element type of tensor ``t`` of the optimized graph: from its initializer,
    graph input, value_info or Cast; else that of its producer's first typed input (the
    elementwise and MatMul nodes of a site keep their inputs' type)."""
    if t in inits:
        return inits[t].data_type
    for vi in list(opt.graph.input) + list(opt.graph.value_info) + list(opt.graph.output):
        if vi.name == t and vi.type.tensor_type.elem_type:
            return vi.type.tensor_type.elem_type
    n = producer.get(t)
    seen = set() if seen is None else seen
    if n is None or t in seen:
        return None
    seen.add(t)
    if n.op_type == "Cast":
        return next((a.i for a in n.attribute if a.name == "to"), None)
    for i in n.input:
        if i:
            e = _elem_type(opt, i, producer, inits, seen)
            if e is not None:
                return e
    return None


def _folded(s: Site, model, opt, producer, inits, tensors, find) -> EngineSite | None:
    """A site whose last node, a product by a power of two k (GELU's * 0.5 or / 2), ORT
    folded into the MatMul after it (MatMulScaleFusion: ``FusedMatMul`` with alpha = k):
    the site's nodes ORT kept, then * k, as a subgraph (exact: a power of two); with
    ``folded`` {tensor (the input of the fused op, k^-1 times the site's output), scale k,
    into (the fused ops)}.  None where that is not what happened."""
    import math

    import numpy as np
    from onnx import helper, numpy_helper

    if model is None or s.internal:
        return None
    orig = {o: n for n in model.graph.node for o in n.output}
    root = orig.get(s.output)
    if root is None or root.op_type not in ("Mul", "Div") or root.domain not in ("", "ai.onnx"):
        return None
    if len(root.input) != 2:
        return None
    c = _const_of(model, root.input[1])
    a = root.input[0]
    if c is None and root.op_type == "Mul":
        c, a = _const_of(model, root.input[0]), root.input[1]
    if c is None or c.size != 1:
        return None
    v = float(c.reshape(-1)[0])
    if not math.isfinite(v) or v == 0:
        return None
    k = 1 / v if root.op_type == "Div" else v
    if math.frexp(abs(k))[0] != 0.5:  # not a power of two: scaling would round
        return None
    a_opt, x = find(a), find(s.input)
    if a_opt is None or x is None or a_opt == x:
        return None
    readers = [n for n in opt.graph.node if a_opt in n.input]
    if not readers or any(
        n.domain != MS or n.op_type != "FusedMatMul" or list(n.input).index(a_opt) != 0 for n in readers
    ):
        return None
    for n in readers:
        alpha = next((helper.get_attribute_value(t) for t in n.attribute if t.name == "alpha"), 1.0)
        if float(np.float32(alpha)) != float(np.float32(k)):
            return None
    es = _subgraph(s, opt, producer, inits, x, a_opt)
    if es.why is not None or es.subgraph is None:
        return None
    elem = _elem_type(opt, a_opt, producer, inits)
    if elem is None:
        return None
    m: Any = es.subgraph
    y = f"actaudit_folded_{s.id}"
    k_t = numpy_helper.from_array(np.array(k, dtype=helper.tensor_dtype_to_np_dtype(elem)), y + "_k")
    m.graph.initializer.append(k_t)
    m.graph.node.append(helper.make_node("Mul", [a_opt, k_t.name], [y], name=y))
    m.graph.output[0].name = y
    es.nodes.append("Mul")
    es.node_names.append(y)
    into = [n.name or n.op_type for n in readers]
    es.folded = {"tensor": a_opt, "scale": k, "into": into}
    es.notes.append(
        f"ORT folded the site's last * {k!r} into {', '.join(into)} (FusedMatMul, alpha={k!r}): "
        f"audited as the nodes it kept, then * {k!r} (exact, a power of two)"
    )
    return es


def _missing(s: Site, model, opt, find) -> str:
    """Why a site's output tensor is not in the optimized graph, as precisely as it can be
    said: the last of the site's tensors ORT kept and the ops that read it."""
    if model is None:
        return "its output is not in ORT's optimized graph"
    own, kept = set(s.nodes), None
    for i, n in enumerate(model.graph.node):  # graph order: the last kept tensor wins
        if (n.name or f"{n.op_type}#{i}") in own:
            for o in n.output:
                kept = find(o) or kept
    if kept is None:
        return f"its output {s.output} is not in ORT's optimized graph (nor any tensor of its nodes)"
    readers = []
    for n in opt.graph.node:
        if kept in n.input:
            what = f"{n.domain + '.' if n.domain else ''}{n.op_type}"
            alpha = _attr_of(n, "alpha") if n.op_type == "FusedMatMul" else None
            if alpha is not None:  # MatMulScaleFusion: the site's last product is its alpha
                what += f" {n.name} (alpha={alpha!r}, not a power of two: no tensor holds the site's output)"
            readers.append(what)
    readers = sorted(set(readers))
    return (
        f"its output {s.output} is not in ORT's optimized graph: ORT fused its last nodes into "
        f"{', '.join(readers) or 'nothing that reads ' + kept} (after {kept})"
    )


def _attr_of(n, name):
    from onnx import helper

    for a in n.attribute:
        if a.name == name:
            v = helper.get_attribute_value(a)
            return v.decode() if isinstance(v, bytes) else v
    return None


def _cast_to(n) -> str:
    from audit.targets.engines.ort import _CAST_TO

    to = next((a.i for a in n.attribute if a.name == "to"), None)
    return str(_CAST_TO.get(to, to))


def _subgraph(s: Site, opt, producer, inits, x: str, y: str) -> EngineSite:
    """The nodes between x and y, as a model of their own (input 'x', output 'y')."""
    from onnx import helper

    nodes, seen, leaves = [], set(), set()
    todo = [y]
    while todo:
        t = todo.pop()
        if t in seen or t == x or t in inits:
            if t in inits:
                leaves.add(t)
            continue
        seen.add(t)
        n = producer.get(t)
        if n is None:
            return EngineSite(
                "graph", None, {}, [x], why=f"the subgraph reads {t}, not only the site's input"
            )
        if n.op_type == "Constant":
            nodes.append(n)
            continue
        nodes.append(n)
        if len(nodes) > 64:
            return EngineSite(
                "graph", None, {}, [x], why="more than 64 optimized nodes between input and output"
            )
        todo.extend(i for i in n.input if i)
    order = {id(n): i for i, n in enumerate(opt.graph.node)}
    nodes = sorted({id(n): n for n in nodes}.values(), key=lambda n: order[id(n)])
    vi_x = helper.make_empty_tensor_value_info(x)
    vi_y = helper.make_empty_tensor_value_info(y)
    graph = helper.make_graph(
        list(nodes), "actaudit_site", [vi_x], [vi_y], [inits[t] for t in sorted(leaves)]
    )
    model = helper.make_model(graph, opset_imports=list(opt.opset_import), producer_name="actaudit")
    model.ir_version = opt.ir_version
    ops = [n.op_type for n in nodes if n.op_type != "Constant"]
    return EngineSite("graph", None, {}, [x], ops, [n.name for n in nodes], subgraph=model)


def structure(model) -> tuple:
    """A subgraph's structure, its tensor names replaced by their order of appearance: two
    sites whose subgraphs compute the same function of their input (same ops, attributes,
    wiring and constants' bytes) share one sweep."""
    if model is None:
        return ("graph", None)
    g = model.graph
    names: dict[str, int] = {g.input[0].name: 0}
    from onnx import numpy_helper

    def value(t):
        a = numpy_helper.to_array(t)
        return (a.dtype.str, a.shape, a.tobytes())

    inits = {t.name: value(t) for t in g.initializer}
    out: list = ["graph"]
    for n in g.node:
        ins: list = []
        for i in n.input:
            if i in inits:
                ins.append(("const", inits[i]))
            else:
                ins.append(names.setdefault(i, len(names)))
        outs = [names.setdefault(o, len(names)) for o in n.output]
        attrs = tuple(sorted((a.name, a.SerializeToString(deterministic=True)) for a in n.attribute))
        out.append((n.op_type, n.domain, tuple(ins), tuple(outs), attrs))
    out.append(names.get(g.output[0].name))
    return tuple(out)
