"""Consistency checks: the same function asked the same question in different ways.

* **parameter effect** (:func:`param_effect`): a candidate run with each value of one of
  its parameters; where no output changes anywhere, the parameter has no effect (a
  backend that ignores a SwiGLU clamp limit).  For catalog candidates, ``torch:NAME`` and
  ``jax:NAME`` ops (the parameter passed as a keyword: ``negative_slope``, ``beta``,
  ``alpha``, ...) and ``pkg.module:function`` callables (``func(x, NAME=value)``).
* **layout and length** (:func:`layout_check`): an op called on the same values in
  different tensor shapes must give the same bits: 0-d tensors, 1-D tensors of every
  length 1..``max_length`` (a vector width plus one and beyond: the scalar tail of a
  vectorized loop), and non-contiguous views (every second element, a transposed 2-D
  view, an offset view).  The reference is one contiguous call over all the values (a
  length that is a multiple of every vector width).  Any difference is a finding naming
  the shape.
* **compiled against eager**: ``torch-compile:NAME`` is ``torch.compile`` of the op (CPU:
  Inductor's C++ code), a candidate like any other, for ``actaudit diff
  torch-compile:NAME torch:NAME --expect-identical``.  It is called on blocks of a fixed
  length (``COMPILE_BLOCK``, padded), so that it compiles once.
* **PyTorch's backward kernels**: ``torch-bwd:NAME`` runs autograd on the op (x.grad after
  op(x).backward(dy)), a candidate of the exact backward ``NAME_bwd`` (audit/oracle/backward.py),
  to diff against the catalog's transcriptions of those kernels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from audit.compare.diff import _same_bits
from audit.errors import ActauditError, BadOptionError
from audit.io import json_number
from audit.numbers.formats import Format, get_format
from audit.numbers.inputs import domain, pair_domain, special_inputs
from audit.targets import engines as adapters
from audit.targets.candidates import Candidate, resolve
from audit.targets.engines import external_function

SCHEMA = "actaudit.consistency/1"
DEFAULT_VALUES = 4096  # values of the layout check (a seeded sample, plus the specials)


@dataclass
class ConsistencyFinding:
    kind: str  # "no_effect", "param_effect", "layout"
    target: str
    dtype: str
    text: str
    count: int = 0  # inputs concerned
    example: dict | None = None
    shape: str | None = None
    failed: bool = True  # a finding (False: the check passed; kept for the record)

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "target": self.target,
            "dtype": self.dtype,
            "text": self.text,
            "count": self.count,
            "shape": self.shape,
            "failed": self.failed,
            "example": None
            if self.example is None
            else {k: json_number(v) if isinstance(v, float) else v for k, v in self.example.items()},
        }


def _run(fn, arr, label, **kw):
    try:
        out = fn(arr, **kw)
    except TypeError as e:
        raise BadOptionError(f"{label} does not take {', '.join(kw) or 'these arguments'}: {e}") from None
    except ActauditError:
        raise
    except Exception as e:
        raise adapters.UserFunctionError(f"{label} raised {type(e).__name__}: {e}") from None
    out = np.asarray(out)
    if out.shape != np.shape(arr):
        raise adapters.UserFunctionError(f"{label} returned shape {out.shape}, expected {np.shape(arr)}")
    return out.astype(np.float64)


# ------------------------------------------------------------ parameter effect
def param_effect(
    target: str,
    name: str,
    values,
    dtype="fp16",
    compute=None,
    *,
    range=None,
    seed: int = 0,
    grid: int | None = None,
) -> ConsistencyFinding:
    """Run ``target`` with parameter ``name`` at each of ``values`` on the same inputs;
    a ``no_effect`` finding when every value gives the same bits everywhere, otherwise a
    passed ``param_effect`` record with how many inputs changed."""
    fmt = get_format(dtype)
    values = [float(v) for v in values]
    if len(values) < 2:
        raise BadOptionError(f"parameter '{name}': give at least two values (NAME=V1,V2)")
    if adapters.is_external(target):
        fn, _ = external_function(target, fmt)
        if fmt.enumerable:
            x = fmt.finite_values()
        else:
            x = domain(fmt, range, seed=seed).values
        if range is not None and fmt.enumerable:
            x = x[(x >= range[0]) & (x <= range[1])]
        x = np.concatenate([x, special_inputs(fmt)])
        arr = x.astype(fmt.dtype)
        outs = [_run(fn, arr, target, **{name: v}) for v in values]
        x2 = None
    else:
        (cand,) = _one(target)
        if name not in cand.params:
            raise BadOptionError(
                f"{cand.id} has no parameter '{name}' (parameters: {', '.join(cand.params) or 'none'})"
            )
        cf = get_format(compute) if compute is not None else fmt
        if cand.arity == 2:
            dom = pair_domain(fmt, range, side=grid, seed=seed)
            x, x2 = dom.values, dom.values2
        else:
            x, x2 = domain(fmt, range, seed=seed).values, None
            x = np.concatenate([x, special_inputs(fmt)])
        outs = [cand.evaluate(x, fmt, cf, {name: v}, x2) for v in values]
    changed = np.zeros(len(x), bool)
    for o in outs[1:]:
        same, _ = _same_bits(fmt, outs[0], o)
        changed |= ~same
    n = int(np.count_nonzero(changed))
    vals = ", ".join(f"{v:g}" for v in values)
    if n == 0:
        return ConsistencyFinding(
            "no_effect",
            target,
            fmt.name,
            f"{name} has no effect: {name} = {vals} give the same bits at all {len(x)} inputs",
            len(x),
        )
    i = int(np.flatnonzero(changed)[0])
    ex = {
        "x": float(x[i]),
        **({"b": float(x2[i])} if x2 is not None else {}),
        **{f"{name}={v:g}": float(o[i]) for v, o in zip(values, outs)},
    }
    return ConsistencyFinding(
        "param_effect",
        target,
        fmt.name,
        f"{name} = {vals} change the output at {n} of {len(x)} inputs",
        n,
        ex,
        failed=False,
    )


def _one(target: str) -> list[Candidate]:
    found = resolve([target])
    if len(found) != 1:
        raise BadOptionError(f"'{target}' names {len(found)} candidates; give one (e.g. {found[0].id})")
    return found


# ---------------------------------------------------------------- layout
@dataclass
class LayoutReport:
    target: str
    dtype: str
    values: int
    shapes: list = field(default_factory=list)  # every shape checked
    findings: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "target": self.target,
            "dtype": self.dtype,
            "values": self.values,
            "shapes_checked": self.shapes,
            "findings": [f.to_dict() for f in self.findings],
        }


def _values(fmt: Format, n: int, seed: int) -> np.ndarray:
    """A seeded sample of n finite values (all of them when the format has fewer), in a
    length that is a multiple of 64 (so the reference call has no scalar tail), plus the
    specials."""
    if fmt.enumerable and len(fmt.finite_values()) <= n:
        v = fmt.finite_values()
    else:
        top = fmt.max_ordinal
        rng = np.random.default_rng(seed)
        v = fmt.from_ordinal(rng.integers(-top, top + 1, n))
    v = np.concatenate([v, special_inputs(fmt), [0.0, -0.0, 1.0, -1.0]])
    k = (-len(v)) % 64
    return np.concatenate([v, np.ones(k)])  # (padding values repeat one: harmless)


def layout_check(
    target: str, dtype="fp32", *, max_length: int = 65, values: int = DEFAULT_VALUES, seed: int = 0
) -> LayoutReport:
    """Call a torch:/jax: op or a callable on the same values in different shapes."""
    if not adapters.is_external(target):
        raise BadOptionError(
            "the layout check applies to engine ops (ort:OP), torch:NAME, jax:NAME and pkg.module:function "
            "(catalog formulas have no tensor layout)"
        )
    if not 1 <= max_length <= 4096:
        raise BadOptionError(f"--max-length must be in [1, 4096], got {max_length}")
    if not 64 <= values <= 1 << 20:
        raise BadOptionError(f"--values must be in [64, 1048576], got {values}")
    fmt = get_format(dtype)
    fn, _ = external_function(target, fmt)
    x = _values(fmt, values, seed)
    arr = x.astype(fmt.dtype)
    n = len(x)
    ref = _run(fn, arr, target)
    rep = LayoutReport(target, fmt.name, n)

    def compare(shape: str, got: np.ndarray) -> None:
        rep.shapes.append(shape)
        same, _ = _same_bits(fmt, ref, got)
        bad = np.flatnonzero(~same)
        if len(bad):
            i = int(bad[0])
            rep.findings.append(
                ConsistencyFinding(
                    "layout",
                    target,
                    fmt.name,
                    f"{shape}: {len(bad)} of {n} values give other bits than one contiguous call",
                    len(bad),
                    {
                        "x": float(x[i]),
                        "x_hex": fmt.hex(float(x[i])),
                        "got": float(got[i]),
                        "contiguous": float(ref[i]),
                    },
                    shape,
                )
            )

    # 0-d: one call per value (a strided sample of 256 values keeps it quick)
    idx = np.unique(np.linspace(0, n - 1, min(n, 256)).astype(int))
    got = ref.copy()
    for i in idx:
        got[i] = float(_run(fn, arr[i : i + 1].reshape(()), target))
    compare("0-d", got)
    for length in range(1, max_length + 1):
        got = np.empty(n)
        for s in range(0, n, length):
            got[s : s + length] = _run(fn, arr[s : s + length], target)
        compare(f"length {length}", got)
    for label, run in _views(fn, arr, target):
        compare(label, run())
    return rep


def _views(fn, arr, target):
    """Non-contiguous (or misaligned) views holding the values in order: (label, run),
    run() -> the outputs in the values' order.  numpy views for callables; torch's own
    views for torch: ops."""
    tv = getattr(fn, "torch_view", None)
    if tv is not None:
        to_t, to_np, op, kw0, torch = tv

        def on(make):
            def run():
                with torch.no_grad():
                    y = op(make(to_t(arr)), **kw0)
                return to_np(y.reshape(-1)).astype(np.float64)

            return run

        yield "stride 2 (every second element)", on(lambda t: torch.stack([t, t], 1).reshape(-1)[::2])
        yield "column-major 2-D view (n/64 x 64)", on(lambda t: t.reshape(-1, 64).t().contiguous().t())
        yield "offset view (storage offset 1)", on(lambda t: torch.cat([t[:1], t])[1:])
        return
    yield (
        "stride 2 (every second element)",
        lambda: _run(fn, np.stack([arr, arr], 1).reshape(-1)[::2], target),
    )
    yield (
        "column-major 2-D view (n/64 x 64)",
        lambda: _run(fn, np.asfortranarray(arr.reshape(-1, 64)), target).reshape(-1),
    )
    yield ("offset view (offset 1)", lambda: _run(fn, np.concatenate([arr[:1], arr])[1:], target))


def document(items: list, **meta) -> dict:
    from audit._version import __version__

    return {"schema": SCHEMA, "actaudit": __version__, **meta, "results": [i.to_dict() for i in items]}


def parse_values(text: str) -> list[float]:
    out = []
    for p in text.split(","):
        try:
            v = float(p)
        except ValueError:
            raise BadOptionError(f"'{p}' is not a number") from None
        if not math.isfinite(v):
            raise BadOptionError(f"parameter values must be finite, got '{p}'")
        out.append(v)
    return out


def run(
    target: str,
    dtype: str,
    compute: str | None,
    params: list[str],
    layout: bool,
    range=None,
    max_length: int = 65,
    values: int = 4096,
) -> list:
    """`actaudit consistency`: in each format of DTYPE, the effect of each parameter given as
    NAME=V1,V2,... and then, with LAYOUT, the layout check."""
    from audit.numbers.formats import parse_formats

    checks: list = []
    for f in parse_formats(dtype):
        for text in params:
            if "=" not in text:
                raise BadOptionError(f"--param '{text}' is not NAME=V1,V2")
            name, vals = text.split("=", 1)
            checks.append(param_effect(target, name.strip(), parse_values(vals), f, compute, range=range))
        if layout:
            checks.append(layout_check(target, f, max_length=max_length, values=values))
    return checks
