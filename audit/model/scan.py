"""The activation sites of an ONNX graph: standard ops, com.microsoft fused ops, the
decomposed patterns exporters emit, and the gate activations of LSTM/GRU nodes.

A *site* is one activation the graph computes: its nodes, its pattern, its reference (a
catalog family and its parameters), the tensor it reads (x) and the one it writes, and the
dtype the graph computes it in (from ONNX shape inference).

Decomposed patterns are matched structurally on products: a ``Mul`` (or a ``Div`` by a
constant) is flattened into its factors through the intermediate products that nothing
else reads, and the multiset of factors must be exactly the pattern's (any order and
association torch, TF and Paddle use: ``x * 0.5 * (1 + erf(x / sqrt2))``,
``0.5 * x * (...)``, ``(x * (...)) * 0.5``).  Every constant is checked **to the bit**
against the correct rounding of the exact value in the constant's own dtype (mpmath at
the format's precision): 1/sqrt(2) or sqrt(2), 0.5 (or a division by 2), 1, 3, 6 or 1/6,
sqrt(2/pi), 0.044715, 1.702.  Four patterns are not products and are matched from
their last node: a written-out softplus ``Log(Add(1, Exp(x)))`` (either operand order;
torch exports ``log(1 + exp(x))`` and ``log1p(exp(x))`` both so), and three sigmoids:
``0.5 + 0.5 * tanh(x / 2)`` (also ``0.5 * (1 + tanh(x / 2))``; "sigmoid-tanh"),
``1 / (1 + exp(-x))`` (``Reciprocal`` or ``Div(1, .)``, ``Neg`` or ``* -1``;
"sigmoid-exp") and ``exp(x) / (1 + exp(x))`` (one Exp read by both; "sigmoid-ratio").
A structure that matches with a constant that differs is a *near match*: reported as
such, with the constant found and the one expected, never taken for the pattern (no
reference, not audited); the standard ops inside it (its Erf, Tanh or
Sigmoid) stay sites of their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from audit.errors import BadFileError

MS = "com.microsoft"
STANDARD = {  # ai.onnx op -> reference family (None: decided from the attributes)
    "Sigmoid": "sigmoid",
    "Tanh": "tanh",
    "Erf": "erf",
    "Gelu": "gelu",
    "HardSigmoid": None,
    "HardSwish": "hardswish",
    "Softplus": "softplus",
    "Softsign": "softsign",
    "Elu": "elu",
    "Selu": None,
    "Celu": "celu",
    "LeakyRelu": "leaky_relu",
    "PRelu": None,
    "Mish": "mish",
    "Exp": "exp",
    "Log": "log",
    "Clip": None,  # a site only as ReLU6 (min 0, max 6)
}
FUSED = {"Gelu": "gelu", "FastGelu": "gelu", "BiasGelu": "gelu", "QuickGelu": "silu"}
RNN_DEFAULTS = {"LSTM": ("Sigmoid", "Tanh", "Tanh"), "GRU": ("Sigmoid", "Tanh"), "RNN": ("Tanh",)}
RNN_GATES = {"LSTM": ("f", "g", "h"), "GRU": ("f", "g"), "RNN": ("f",)}
ELEM = {1: "fp32", 10: "fp16", 16: "bf16", 11: "fp64"}
PRECISION = {"fp16": 11, "bf16": 8, "fp32": 24, "fp64": 53}
PATTERNS = (
    "erf-gelu",
    "tanh-gelu",
    "silu",
    "quick-gelu",
    "hardswish",
    "mish",
    "softplus",
    "sigmoid-tanh",
    "sigmoid-exp",
    "sigmoid-ratio",
)


@dataclass
class Site:
    """One activation site (see the module's text)."""

    id: str
    nodes: list
    pattern: str  # an op ('Sigmoid', 'com.microsoft.FastGelu', 'LSTM.f') or a decomposed pattern
    reference: dict | None  # {"family": ..., "params": {...}}; None for a near match
    input: str  # the tensor x the activation reads
    output: str  # the tensor it writes
    dtype: str | None  # the format the graph computes it in
    attributes: dict = field(default_factory=dict)
    near: str | None = None  # why a near match is not the pattern
    internal: bool = False  # an LSTM/GRU gate: its inputs live inside the kernel
    notes: list = field(default_factory=list)


@dataclass
class Graph:
    """The graph with its producers, consumers, constants and tensor dtypes."""

    model: object
    nodes: list
    producer: dict
    consumers: dict
    consts: dict
    dtypes: dict
    outputs: set

    def node_name(self, n) -> str:
        return n.name or f"{n.op_type}#{self.nodes.index(n)}"


def load(path):
    """The ModelProto of an .onnx file (a one-line error for anything else)."""
    from audit.targets.engines.callables import _need

    onnx = _need("onnx", "engines")  # (its C++ part loaded with signals held)
    try:
        model = onnx.load(str(path))
    except FileNotFoundError:
        raise BadFileError(f"{path}: no such file") from None
    except Exception as e:
        raise BadFileError(f"{path}: not an ONNX model ({type(e).__name__})") from None
    if not model.graph.node:
        raise BadFileError(f"{path}: not an ONNX model (no graph nodes)")
    return model


SMALL = 4096  # elements: initializers read as constants (larger ones are weights)


def _elements(t) -> int:
    n = 1
    for d in t.dims:
        n *= int(d)
    return n


def graph_of(model) -> Graph:
    import onnx
    from onnx import helper, numpy_helper

    g0 = model.graph
    # shape inference on the graph without its large weights (their types and shapes only)
    small = [t for t in g0.initializer if _elements(t) <= SMALL]
    have = {i.name for i in g0.input}
    weights = [
        helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
        for t in g0.initializer
        if _elements(t) > SMALL and t.name not in have
    ]
    light = helper.make_model(
        helper.make_graph(
            list(g0.node),
            g0.name,
            list(g0.input) + weights,
            list(g0.output),
            small,
            value_info=list(g0.value_info),
        ),
        opset_imports=list(model.opset_import),
    )
    light.ir_version = model.ir_version
    light.functions.extend(model.functions)
    try:
        inferred = onnx.shape_inference.infer_shapes(light)
    except Exception:
        inferred = light
    g = inferred.graph
    dtypes: dict[str, str | None] = {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        dtypes[vi.name] = ELEM.get(vi.type.tensor_type.elem_type)
    consts: dict[str, np.ndarray] = {}
    for t in g0.initializer:
        dtypes.setdefault(t.name, ELEM.get(t.data_type))
        if _elements(t) <= SMALL:  # the constants a pattern can check; weights are not
            consts[t.name] = numpy_helper.to_array(t)
    producer: dict = {}
    consumers: dict = {}
    for n in g.node:
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx"):
            for a in n.attribute:
                if a.name == "value":
                    consts[n.output[0]] = numpy_helper.to_array(a.t)
                    dtypes.setdefault(n.output[0], ELEM.get(a.t.data_type))
                elif a.name == "value_float":
                    consts[n.output[0]] = np.array(a.f, np.float32)
                elif a.name == "value_int":
                    consts[n.output[0]] = np.array(a.i, np.int64)
        for o in n.output:
            producer[o] = n
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    return Graph(inferred, list(g.node), producer, consumers, consts, dtypes, {o.name for o in g.output})


# ------------------------------------------------------------------ exact constants
def rounded(value: str, dtype: str) -> float:
    """RN_dtype of an exact constant given as an mpmath expression of 'sqrt', 'pi' and numbers."""
    import mpmath

    with mpmath.workprec(200):
        v = eval(value, {"__builtins__": {}}, {"sqrt": mpmath.sqrt, "pi": mpmath.pi, "mpf": mpmath.mpf})
        v = mpmath.mpf(v)
    with mpmath.workprec(PRECISION.get(dtype, 53)):
        return float(+v)


def _np_dtype(dtype: str):
    if dtype == "bf16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return {"fp16": np.float16, "fp32": np.float32, "fp64": np.float64}[dtype]


def _bits_equal(c: np.ndarray, want: float) -> bool:
    dt = ELEM_OF_NP.get(c.dtype.name)
    if dt is None:
        return bool(np.all(c == want))  # integer constants: the value itself
    w = np.asarray([want], dtype=_np_dtype(dt))
    return c.reshape(-1).tobytes() == w.tobytes()


ELEM_OF_NP = {"float16": "fp16", "float32": "fp32", "float64": "fp64", "bfloat16": "bf16"}


class Const:
    """A constant factor of a product: its value and how it entered (mul or div)."""

    def __init__(self, arr: np.ndarray, div: bool, tensor: str):
        self.arr, self.div, self.tensor = arr, div, tensor

    def scalar(self) -> bool:
        return self.arr.size == 1

    def check(self, mul: str, div: str) -> tuple[bool, str]:
        """Whether the constant is RN(mul) as a factor or RN(div) as a divisor, to the bit;
        and its description for a near match."""
        a = self.arr.reshape(-1)
        dt = ELEM_OF_NP.get(self.arr.dtype.name, "fp64")
        expr = div if self.div else mul
        want = rounded(expr, dt)
        ok = self.scalar() and _bits_equal(a[:1], want)
        got = float(a[0]) if a.size else float("nan")
        what = f"{'/' if self.div else '*'} {got!r} ({dt}), expected RN({expr}) = {want!r}"
        return ok, what


class Matcher:
    def __init__(self, g: Graph):
        self.g = g

    def const(self, t: str) -> np.ndarray | None:
        c = self.g.consts.get(t)
        if c is None:
            p = self.g.producer.get(t)
            if (
                p is not None
                and p.op_type in ("Cast", "Identity")
                and p.input
                and p.input[0] in self.g.consts
            ):
                return self.g.consts[p.input[0]]
        return c

    def node(self, t: str, op: str, domain: str = ""):
        n = self.g.producer.get(t)
        if n is not None and n.op_type == op and n.domain in (domain, "ai.onnx" if not domain else domain):
            return n
        return None

    def private(self, t: str) -> bool:
        """Only one node reads t and it is not a graph output."""
        return len(self.g.consumers.get(t, ())) == 1 and t not in self.g.outputs

    def factors(self, t: str, nodes: list, top: bool = True) -> list:
        """The factors of the product that writes t: tensors (str) and constants (Const),
        flattening through Mul and Div-by-constant nodes that nothing else reads."""
        n = self.g.producer.get(t)
        if n is None or (not top and not self.private(t)) or n.domain not in ("", "ai.onnx"):
            return [t]
        if n.op_type == "Mul" and len(n.input) == 2:
            nodes.append(n)
            out: list = []
            for i in n.input:
                c = self.const(i)
                out += self.factors(i, nodes, False) if c is None else [Const(c, False, i)]
            return out
        if n.op_type == "Div" and len(n.input) == 2 and self.const(n.input[1]) is not None:
            if self.const(n.input[0]) is not None:
                return [t]
            nodes.append(n)
            div = self.const(n.input[1])
            assert div is not None
            return self.factors(n.input[0], nodes, False) + [Const(div, True, n.input[1])]
        return [t]

    def add_const(self, t: str, want: str):
        """(x, constant check, node) where t = x + c (either order), else None."""
        n = self.node(t, "Add")
        if n is None or len(n.input) != 2:
            return None
        a, b = n.input
        ca, cb = self.const(a), self.const(b)
        if (ca is None) == (cb is None):
            return None
        c, x = (ca, b) if ca is not None else (cb, a)
        assert c is not None
        return x, Const(c, False, a if ca is not None else b).check(want, "0"), n


def _ref(family: str, **params) -> dict:
    return {"family": family, "params": {k: float(v) for k, v in params.items()}}


def _attr(n, name, default=None):
    from onnx import helper

    for a in n.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _decoded(v):
    return v.decode() if isinstance(v, bytes) else v


def scan(model) -> list[Site]:
    """Every activation site of ``model`` (a ModelProto), in graph order of its last node."""
    g = graph_of(model)
    m = Matcher(g)
    claimed: set[int] = set()
    found: list[tuple[int, Site]] = []  # (index of the root node, site)

    def emit(root, pattern, ref, x, nodes, near=None, **kw):
        idx = g.nodes.index(root)
        ordered = sorted({id(n): n for n in nodes}.values(), key=g.nodes.index)
        site = Site(
            "", [g.node_name(n) for n in ordered], pattern, ref, x, root.output[0], None, near=near, **kw
        )
        site.dtype = g.dtypes.get(x) or g.dtypes.get(root.output[0])
        found.append((idx, site))
        if near is None:
            claimed.update(id(n) for n in ordered)

    for root in g.nodes:
        if root.domain not in ("", "ai.onnx") or root.op_type not in ("Mul", "Div"):
            continue
        if root.op_type == "Div" and m.const(root.input[1]) is None:
            continue
        if any(id(root) == c for c in claimed):
            continue
        nodes: list = []
        fs = m.factors(root.output[0], nodes)
        res = _match_product(m, fs, nodes)
        if res is not None:
            pattern, ref, x, extra, near = res
            emit(root, pattern, ref, x, nodes + extra, near)

    for root in g.nodes:
        if id(root) in claimed:
            continue
        res = _match_tail(m, root)
        if res is not None:
            pattern, ref, x, nodes, near = res
            if not any(id(n) in claimed for n in nodes):
                emit(root, pattern, ref, x, nodes, near)

    for idx, n in enumerate(g.nodes):
        if id(n) in claimed:
            continue
        site = _single(g, m, n)
        if site is not None:
            site.dtype = g.dtypes.get(site.input) or g.dtypes.get(site.output)
            found.append((idx, site))
            if n.op_type in RNN_DEFAULTS:
                found.extend((idx, s) for s in _rnn_gates(g, n, site.dtype))
                found.remove((idx, site))
    found.sort(key=lambda p: p[0])
    out = [s for _, s in found]
    for i, s in enumerate(out, 1):
        s.id = f"s{i}"
    return out


def _match_product(m: Matcher, fs: list, nodes: list):
    """(pattern, reference, x, the nodes inside the non-product factor, near) or None."""
    tensors = [f for f in fs if isinstance(f, str)]
    consts = [f for f in fs if isinstance(f, Const)]
    g = m.g
    # ---- erf-GELU and tanh-GELU: {x, 1 + erf(..) | 1 + tanh(..), 0.5}
    if len(tensors) == 2 and len(consts) == 1:
        for inner, other in ((tensors[0], tensors[1]), (tensors[1], tensors[0])):
            add = m.add_const(inner, "1")
            if add is None or not m.private(inner):
                continue
            e, (one_ok, one_what), add_node = add
            half_ok, half_what = consts[0].check("mpf(1)/2", "2")
            erf = m.node(e, "Erf")
            tanh = m.node(e, "Tanh")
            if erf is not None and m.private(e):
                inner_nodes: list = []
                arg = m.factors(erf.input[0], inner_nodes, top=True)
                at = [f for f in arg if isinstance(f, str)]
                ac = [f for f in arg if isinstance(f, Const)]
                if len(at) == 1 and len(ac) == 1 and at[0] == other and m.private(erf.input[0]):
                    k_ok, k_what = ac[0].check("1/sqrt(2)", "sqrt(2)")
                    bad = [
                        w
                        for ok, w in ((k_ok, k_what), (one_ok, "+ " + one_what), (half_ok, half_what))
                        if not ok
                    ]
                    near = "erf-gelu constant " + "; ".join(bad) if bad else None
                    return (
                        "erf-gelu",
                        None if near else _ref("gelu"),
                        other,
                        [erf, add_node, *inner_nodes],
                        near,
                    )
            if tanh is not None and m.private(e):
                r = _tanh_gelu_arg(m, tanh.input[0], other)
                if r is not None:
                    inner_nodes, checks = r
                    bad = [
                        w for ok, w in [*checks, (one_ok, "+ " + one_what), (half_ok, half_what)] if not ok
                    ]
                    near = "tanh-gelu constant " + "; ".join(bad) if bad else None
                    return (
                        "tanh-gelu",
                        None if near else {**_ref("gelu"), "approximation": "gelu.tanh"},
                        other,
                        [tanh, add_node, *inner_nodes],
                        near,
                    )
    # ---- x * sigmoid(x), x * sigmoid(1.702 x), x * hardsigmoid(x), x * tanh(softplus(x))
    if len(tensors) == 2 and not consts:
        for act, x in ((tensors[0], tensors[1]), (tensors[1], tensors[0])):
            if not m.private(act):
                continue
            sig = m.node(act, "Sigmoid")
            if sig is not None:
                if sig.input[0] == x:
                    return "silu", _ref("silu", beta=1.0), x, [sig], None
                in_sig: list = []
                arg = m.factors(sig.input[0], in_sig)
                at = [f for f in arg if isinstance(f, str)]
                ac = [f for f in arg if isinstance(f, Const)]
                if at == [x] and len(ac) == 1 and m.private(sig.input[0]) and not ac[0].div:
                    ok, what = ac[0].check("mpf('1.702')", "1/mpf('1.702')")
                    return (
                        "quick-gelu",
                        _ref("silu", beta=float(ac[0].arr.reshape(-1)[0])) if ok else None,
                        x,
                        [sig, *in_sig],
                        None if ok else f"quick-gelu constant {what}",
                    )
            hs = m.node(act, "HardSigmoid")
            if hs is not None and hs.input[0] == x:
                alpha, beta = float(_attr(hs, "alpha", 0.2)), float(_attr(hs, "beta", 0.5))
                ok = alpha == rounded("mpf(1)/6", "fp32") and beta == 0.5
                return (
                    "hardswish",
                    _ref("hardswish") if ok else None,
                    x,
                    [hs],
                    None
                    if ok
                    else f"hardswish HardSigmoid alpha={alpha!r}, beta={beta!r}, expected alpha=RN(1/6), beta=0.5",
                )
            th = m.node(act, "Tanh")
            if th is not None and m.private(th.input[0]):
                sp = m.node(th.input[0], "Softplus")
                if sp is not None and sp.input[0] == x:
                    return "mish", _ref("mish"), x, [th, sp], None
    # ---- sigmoid as 0.5 * (1 + tanh(x / 2)) (or (1 + tanh(x / 2)) / 2)
    if len(tensors) == 1 and len(consts) == 1 and m.private(tensors[0]):
        add = m.add_const(tensors[0], "1")
        if add is not None:
            r = _half_tanh(m, add[0])
            if r is not None:
                x, inner, checks = r
                checks = [*checks, (add[1][0], "+ " + add[1][1]), consts[0].check("mpf(1)/2", "2")]
                bad = [w for ok, w in checks if not ok]
                return (
                    "sigmoid-tanh",
                    None if bad else _ref("sigmoid"),
                    x,
                    [add[2], *inner],
                    "sigmoid-tanh constant " + "; ".join(bad) if bad else None,
                )
    # ---- x * clip(x + 3, 0, 6) / 6 (or * RN(1/6))
    if len(tensors) == 2 and len(consts) == 1:
        for act, x in ((tensors[0], tensors[1]), (tensors[1], tensors[0])):
            clip = m.node(act, "Clip")
            if clip is None or not m.private(act):
                continue
            lo, hi = _clip_bounds(m, clip)
            add = m.add_const(clip.input[0], "3")
            if add is None or add[0] != x or not m.private(clip.input[0]):
                continue
            checks = [
                (lo is not None and lo == 0.0, f"Clip min {lo!r}, expected 0"),
                (hi is not None and hi == 6.0, f"Clip max {hi!r}, expected 6"),
                (add[1][0], "+ " + add[1][1]),
                consts[0].check("mpf(1)/6", "6"),
            ]
            bad = [w for ok, w in checks if not ok]
            return (
                "hardswish",
                None if bad else _ref("hardswish"),
                x,
                [clip, add[2]],
                "hardswish constant " + "; ".join(bad) if bad else None,
            )
    del g
    return None


def _half_tanh(m: Matcher, t: str):
    """(x, nodes, constant checks) where t = tanh(x / 2) or tanh(x * 0.5) (the halving one
    node: x itself may be a product), else None."""
    th = m.node(t, "Tanh")
    if th is None or not m.private(t) or not m.private(th.input[0]):
        return None
    n = m.g.producer.get(th.input[0])
    if n is None or n.domain not in ("", "ai.onnx") or len(n.input) != 2:
        return None
    a, b = n.input
    if n.op_type == "Div" and m.const(b) is not None and m.const(a) is None:
        c = m.const(b)
        assert c is not None
        return a, [th, n], [Const(c, True, b).check("mpf(1)/2", "2")]
    if n.op_type == "Mul" and (m.const(a) is None) != (m.const(b) is None):
        x, k = (a, b) if m.const(a) is None else (b, a)
        c = m.const(k)
        assert c is not None
        return x, [th, n], [Const(c, False, k).check("mpf(1)/2", "2")]
    return None


def _match_tail(m: Matcher, root):
    """The patterns matched from their last node (not products): (pattern, reference, x,
    nodes, near) or None.  ``Log(1 + Exp(x))``; ``0.5 + 0.5 * tanh(x / 2)``;
    ``1 / (1 + Exp(-x))``."""
    if root.domain not in ("", "ai.onnx") or not root.input:
        return None
    if root.op_type == "Log" and m.private(root.input[0]):  # softplus
        add = m.add_const(root.input[0], "1")
        if add is None or not m.private(add[0]):
            return None
        e, (ok, what), add_node = add
        exp = m.node(e, "Exp")
        if exp is None or not m.private(e):
            return None
        near = None if ok else f"softplus constant + {what}"
        return "softplus", None if near else _ref("softplus"), exp.input[0], [exp, add_node, root], near
    if root.op_type == "Add":  # 0.5 + 0.5 * tanh(x / 2)
        add = m.add_const(root.output[0], "mpf(1)/2")
        if add is None or not m.private(add[0]):
            return None
        t, (ok0, what0), _ = add
        nodes: list = []
        fs = m.factors(t, nodes)
        ts = [f for f in fs if isinstance(f, str)]
        cs = [f for f in fs if isinstance(f, Const)]
        if len(ts) != 1 or len(cs) != 1:
            return None
        r = _half_tanh(m, ts[0])
        if r is None:
            return None
        x, inner, checks = r
        checks = [*checks, cs[0].check("mpf(1)/2", "2"), (ok0, "+ " + what0)]
        bad = [w for ok, w in checks if not ok]
        return (
            "sigmoid-tanh",
            None if bad else _ref("sigmoid"),
            x,
            [root, *nodes, *inner],
            "sigmoid-tanh constant " + "; ".join(bad) if bad else None,
        )
    if root.op_type == "Div" and len(root.input) == 2:  # exp(x) / (1 + exp(x))
        exp = m.node(root.input[0], "Exp")
        add = m.add_const(root.input[1], "1") if m.private(root.input[1]) else None
        e = root.input[0]
        if exp is not None and add is not None and add[0] == e:
            readers = {id(n) for n in m.g.consumers.get(e, ())}
            if readers == {id(root), id(add[2])} and e not in m.g.outputs:
                ok, what = add[1]
                return (
                    "sigmoid-ratio",
                    _ref("sigmoid") if ok else None,
                    exp.input[0],
                    [exp, add[2], root],
                    None if ok else f"sigmoid-ratio constant + {what}",
                )
    one: tuple = (True, "")
    if root.op_type == "Reciprocal":
        den = root.input[0]
    elif root.op_type == "Div" and len(root.input) == 2 and m.const(root.input[0]) is not None:
        c = m.const(root.input[0])
        assert c is not None
        den = root.input[1]
        one = Const(c, False, root.input[0]).check("1", "1")
    else:
        return None
    if not m.private(den):  # 1 / (1 + exp(-x))
        return None
    add = m.add_const(den, "1")
    if add is None or not m.private(add[0]):
        return None
    e, (ok1, what1), add_node = add
    exp = m.node(e, "Exp")
    if exp is None or not m.private(e) or not m.private(exp.input[0]):
        return None
    neg = m.node(exp.input[0], "Neg")
    checks = [(one[0], "1 / " + one[1].lstrip("* ")), (ok1, "+ " + what1)]
    if neg is not None:
        x, inner = neg.input[0], [neg]
    else:
        inner = []
        fs = m.factors(exp.input[0], inner)
        ts = [f for f in fs if isinstance(f, str)]
        cs = [f for f in fs if isinstance(f, Const)]
        if len(ts) != 1 or len(cs) != 1 or cs[0].div:
            return None
        x = ts[0]
        checks.append(cs[0].check("-1", "-1"))
    bad = [w for ok, w in checks if not ok]
    return (
        "sigmoid-exp",
        None if bad else _ref("sigmoid"),
        x,
        [root, add_node, exp, *inner],
        "sigmoid-exp constant " + "; ".join(bad) if bad else None,
    )


def _tanh_gelu_arg(m: Matcher, t: str, x: str):
    """The argument sqrt(2/pi) * (x + 0.044715 x^3) of the tanh (x^3 as Pow(x, 3) or x*x*x;
    or Megatron's sqrt(2/pi) * x * (1 + 0.044715 x x)): (nodes, constant checks)."""
    nodes: list = []
    fs = m.factors(t, nodes)
    ts = [f for f in fs if isinstance(f, str)]
    cs = [f for f in fs if isinstance(f, Const)]
    if len(ts) == 2 and len(cs) == 1 and x in ts:  # Megatron's sqrt(2/pi) x (1 + 0.044715 x x)
        other = ts[1] if ts[0] == x else ts[0]
        add1 = m.add_const(other, "1") if m.private(other) else None
        if add1 is None or not m.private(add1[0]):
            return None
        qn: list = []
        q = m.factors(add1[0], qn)
        if [f for f in q if isinstance(f, str)] != [x, x] or len([f for f in q if isinstance(f, Const)]) != 1:
            return None
        k2 = next(f for f in q if isinstance(f, Const)).check("mpf('0.044715')", "1/mpf('0.044715')")
        k1 = cs[0].check("sqrt(2/pi)", "sqrt(pi/2)")
        return nodes + [add1[2]] + qn, [k1, k2, (add1[1][0], "+ " + add1[1][1])]
    if len(ts) != 1 or len(cs) != 1 or not m.private(ts[0]):
        return None
    k1 = cs[0].check("sqrt(2/pi)", "sqrt(pi/2)")
    add = m.node(ts[0], "Add")
    if add is None or len(add.input) != 2:
        return None
    for lin, cub in ((add.input[0], add.input[1]), (add.input[1], add.input[0])):
        if lin != x or not m.private(cub):
            continue
        cn: list = []
        cf = m.factors(cub, cn)
        cts = [f for f in cf if isinstance(f, str)]
        ccs = [f for f in cf if isinstance(f, Const)]
        if len(ccs) != 1:
            continue
        k2 = ccs[0].check("mpf('0.044715')", "1/mpf('0.044715')")
        cube: list = []
        if cts == [x, x, x]:
            cube = []
        elif len(cts) == 1 and m.private(cts[0]):
            pw = m.node(cts[0], "Pow")
            e = None if pw is None else m.const(pw.input[1])
            if pw is None or pw.input[0] != x or e is None or e.size != 1:
                continue
            ok = float(e.reshape(-1)[0]) == 3.0
            cube = [pw]
            if not ok:
                return nodes + cn + [add] + cube, [
                    k1,
                    k2,
                    (False, f"Pow exponent {float(e.reshape(-1)[0])!r}, expected 3"),
                ]
        else:
            continue
        return nodes + cn + [add] + cube, [k1, k2]
    return None


def _clip_bounds(m: Matcher, clip):
    lo = hi = None
    if len(clip.input) > 1 and clip.input[1]:
        c = m.const(clip.input[1])
        lo = None if c is None else float(c.reshape(-1)[0])
    else:
        lo = _attr(clip, "min")
    if len(clip.input) > 2 and clip.input[2]:
        c = m.const(clip.input[2])
        hi = None if c is None else float(c.reshape(-1)[0])
    else:
        hi = _attr(clip, "max")
    return lo, hi


def _single(g: Graph, m: Matcher, n) -> Site | None:
    """A site of one node: a standard op, a com.microsoft fused op, or an RNN node."""
    name = g.node_name(n)
    if n.domain == MS and n.op_type in FUSED:
        attrs: dict = {}
        if n.op_type == "QuickGelu":
            attrs["alpha"] = float(_attr(n, "alpha", 1.702))
            ref = _ref("silu", beta=attrs["alpha"])
        elif n.op_type == "FastGelu":
            ref = {**_ref("gelu"), "approximation": "gelu.tanh"}
        else:
            ref = _ref("gelu")
        s = Site("", [name], f"{MS}.{n.op_type}", ref, n.input[0], n.output[0], None, attrs)
        if n.op_type == "BiasGelu" or (n.op_type == "FastGelu" and len(n.input) > 1 and n.input[1]):
            s.notes.append("the activation reads input + bias")
        return s
    if n.domain not in ("", "ai.onnx"):
        return None
    if n.op_type in RNN_DEFAULTS:
        return Site("", [name], n.op_type, None, n.input[0], n.output[0], None)
    if n.op_type not in STANDARD:
        return None
    fam = STANDARD[n.op_type]
    attrs = {}
    near = None
    if n.op_type == "Clip":
        lo, hi = _clip_bounds(m, n)
        if lo != 0.0 or hi != 6.0:
            return None  # a clamp, not an activation
        fam, attrs = "relu6", {}
    elif n.op_type == "Gelu":
        approx = _decoded(_attr(n, "approximate", "none"))
        attrs["approximate"] = approx
        ref = _ref("gelu")
        if approx == "tanh":
            ref["approximation"] = "gelu.tanh"
        return Site("", [name], "Gelu", ref, n.input[0], n.output[0], None, attrs)
    elif n.op_type == "HardSigmoid":
        alpha, beta = float(_attr(n, "alpha", 0.2)), float(_attr(n, "beta", 0.5))
        attrs = {"alpha": alpha, "beta": beta}
        if alpha == rounded("mpf(1)/6", "fp32") and beta == 0.5:
            fam = "hardsigmoid"
        else:
            near = f"HardSigmoid alpha={alpha!r}, beta={beta!r}: the catalog's hardsigmoid is alpha=1/6, beta=0.5"
    elif n.op_type == "Selu":
        alpha = float(_attr(n, "alpha", 1.67326319217681884765625))
        gamma = float(_attr(n, "gamma", 1.05070102214813232421875))
        attrs = {"alpha": alpha, "gamma": gamma}
        if alpha == 1.67326319217681884765625 and gamma == 1.05070102214813232421875:
            fam = "selu"
        else:
            near = "Selu with other alpha/gamma than ONNX's defaults: no catalog reference"
    elif n.op_type == "PRelu":
        slope = m.const(n.input[1]) if len(n.input) > 1 else None
        if slope is not None and slope.size >= 1 and np.all(slope == slope.reshape(-1)[0]):
            attrs = {"alpha": float(slope.reshape(-1)[0])}
            fam = "leaky_relu"
        else:
            near = "PRelu with per-channel or non-constant slopes: no single reference"
    elif n.op_type in ("Elu", "Celu"):
        attrs = {"alpha": float(_attr(n, "alpha", 1.0))}
    elif n.op_type == "LeakyRelu":
        attrs = {"alpha": float(_attr(n, "alpha", 0.01))}
    ref_: dict | None = None if fam is None else _ref(fam, **attrs)
    pattern = "Clip(0,6)" if n.op_type == "Clip" else n.op_type
    site = Site("", [name], pattern, ref_, n.input[0], n.output[0], None, attrs)
    if near is not None:  # a standard op with parameters no catalog reference has
        site.notes.append(near)
    return site


_RNN_REF = {"Sigmoid": "sigmoid", "Tanh": "tanh", "Relu": "relu"}


def _rnn_gates(g: Graph, n, dtype) -> list[Site]:
    """One site per gate activation of an LSTM/GRU/RNN node (its ``activations`` attribute,
    else ONNX's defaults; both directions of a bidirectional node are one site each)."""
    acts = [_decoded(a) for a in (_attr(n, "activations") or [])]
    direction = _decoded(_attr(n, "direction", "forward"))
    per = RNN_DEFAULTS[n.op_type]
    dirs = ["forward", "reverse"] if direction == "bidirectional" else [direction]
    if not acts:
        acts = list(per) * len(dirs)
    out = []
    for d, dname in enumerate(dirs):
        for k, gate in enumerate(RNN_GATES[n.op_type]):
            a = acts[d * len(per) + k] if d * len(per) + k < len(acts) else per[k]
            fam = _RNN_REF.get(a)
            s = Site(
                "",
                [g.node_name(n)],
                f"{n.op_type}.{gate}" + (f".{dname}" if len(dirs) > 1 else ""),
                None if fam is None else _ref(fam),
                n.input[0],
                n.output[0],
                dtype,
                {"activation": a},
                internal=True,
            )
            s.notes.append(
                f"the {a} of gate {gate} runs inside the {n.op_type} kernel: its inputs are not captured"
            )
            out.append(s)
    return out
