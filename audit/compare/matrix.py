"""The cross-engine view (``actaudit engines REFERENCE``): every installed engine's ops that
compute REFERENCE, swept on the same inputs, next to the catalog's best candidate.

Engines come from the registry (:data:`audit.targets.engines.ENGINE_MODULES`: ONNX Runtime, and
whatever is registered there), plus PyTorch's and JAX's ops (``torch:``, ``jax:``).  An op is
run once per value of its string attributes that selects a kernel (Gelu's approximate);
numeric attributes keep their defaults.  An engine that is not installed, or an op that does
not take the dtype, is listed with the reason instead of numbers; nothing is skipped silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from audit.errors import ActauditError
from audit.numbers.formats import get_format
from audit.oracle.references import get_reference

if TYPE_CHECKING:
    from audit.measure.sweep import SweepResult


@dataclass
class Row:
    engine: str  # 'onnxruntime', 'torch', 'jax', 'catalog'
    target: str  # 'ort:Gelu[approximate=tanh]', 'gelu.erfc'
    result: SweepResult | None = None  # None with `note`
    note: str = ""  # why there is no result (not installed, dtype not taken, refused)
    identity: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        r = self.result
        return {
            "engine": self.engine,
            "target": self.target,
            "note": self.note,
            "identity": self.identity,
            "result": None if r is None else r.to_dict(),
        }


@dataclass
class Matrix:
    reference: str
    dtype: str
    rows: list
    versions: dict  # engine -> 'version (dispatch)' or 'not installed: ...'

    def to_dict(self) -> dict:
        return {
            "reference": self.reference,
            "dtype": self.dtype,
            "versions": self.versions,
            "rows": [r.to_dict() for r in self.rows],
        }


def _variants(op) -> list[dict]:
    """The attribute sets an op is run with: each choice of a string attribute (a kernel
    choice such as approximate=none|tanh), numeric attributes at their defaults."""
    sets: list[dict] = [{}]
    for a in op.attrs:
        if a.kind is str and len(a.choices) > 1:
            sets = [{**s, a.name: c} for s in sets for c in a.choices]
    return sets


def targets(reference: str) -> list[tuple[str, str, str]]:
    """(engine name, target, note) of every engine op computing ``reference``."""
    from audit.targets.engines import ENGINE_MODULES, JAX_OPS, TORCH_OPS, get_engine

    out = []
    for prefix in ENGINE_MODULES:
        eng = get_engine(prefix)
        for op in eng.ops.values():
            if op.reference != reference or op.quantized:
                continue
            for attrs in _variants(op):
                shown = ",".join(f"{k}={v}" for k, v in attrs.items())
                out.append((eng.name, f"{prefix}:{op.name}" + (f"[{shown}]" if shown else ""), ""))
    for name, (ref, _) in TORCH_OPS.items():
        if ref == reference:
            out.append(("torch", f"torch:{name}", ""))
    for name, (ref, _) in JAX_OPS.items():
        if ref == reference:
            out.append(("jax", f"jax:{name}", ""))
    return out


def versions() -> dict:
    """engine name -> 'VERSION, dispatch D' (or why it is not available)."""
    from audit.targets.engines import ENGINE_MODULES, get_engine

    out = {}
    for prefix in ENGINE_MODULES:
        eng = get_engine(prefix)
        try:
            eng.load()
            out[eng.name] = f"{eng.version()}, dispatch {eng.dispatch()}"
        except ActauditError as e:
            out[eng.name] = str(e)
    from audit.io import import_held

    for mod in ("torch", "jax"):
        try:
            out[mod] = import_held(mod).__version__
        except ImportError:
            from audit._version import install_hint

            out[mod] = f"not installed: {install_hint(mod)}"
    return out


def run(
    reference: str,
    dtype: str = "fp16",
    *,
    samples: int | None = None,
    seed: int = 0,
    exhaustive: bool = False,
    range=None,
    keep_points: bool = False,
    progress=None,
) -> Matrix:
    """Sweep every engine op computing ``reference`` and the catalog's best candidate on
    ``dtype``'s inputs (all of them for 16 bits and fewer; sampled or ``exhaustive`` fp32)."""
    from audit.measure.sweep import sweep as run_sweep
    from audit.targets.candidates import catalog

    ref = get_reference(reference)
    fmt = get_format(dtype)
    kw = dict(
        samples=samples if not fmt.enumerable else None,
        seed=seed,
        exhaustive=exhaustive,
        range=range,
        keep_points=keep_points,
        progress=progress,
        workers=1,
    )
    vers = versions()
    rows = []
    for engine, target, _ in targets(ref.name):
        try:
            (res,) = run_sweep(target, fmt.name, **kw)
        except ActauditError as e:
            rows.append(Row(engine, target, note=str(e)))
            continue
        rows.append(Row(engine, target, res, identity=dict(res.identity)))
    cands = [c.id for c in catalog().values() if c.reference == ref.name]
    if cands:
        results = run_sweep(cands, fmt.name, **kw)
        best = min(results, key=lambda r: (_key(r.max_ulp), _key(r.p99_ulp), r.candidate))
        rows.append(Row("catalog", best.candidate, best, note="best of the catalog (lowest max ULP)"))
    return Matrix(ref.name, fmt.name, rows, vers)


def _key(v) -> float:
    import math

    return math.inf if v is None or v != v else float(v)


SCHEMA = "actaudit.engines/1"


def document(m: Matrix, **meta) -> dict:
    from audit._version import __version__

    return {"schema": SCHEMA, "actaudit": __version__, **meta, **m.to_dict()}
