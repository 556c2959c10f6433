"""Candidates: the implementations under audit, and the registry of them.

A candidate has an id ``family.variant``, the reference it approximates, its
formula as text, its public source, parameters with defaults, and a Python
formula ``fn(x, m, **params)`` over :class:`audit.targets.compute.Val` values and the
primitives of ``m`` (:class:`audit.targets.compute.Ops`).  The catalog lives in the
``approximations`` package, which registers candidates on import.
"""

from __future__ import annotations

import difflib
import inspect
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from audit.errors import BadOptionError, BadParameterError, UnknownNameError
from audit.numbers.formats import Format
from audit.numbers.inputs import Domain
from audit.oracle.references import Reference, get_reference
from audit.targets import compute
from audit.targets.registry import REGISTRY, catalog  # noqa: F401  (the registry's API, here too)


@dataclass(frozen=True)
class Candidate:
    id: str
    reference: str
    formula: str
    source: str
    fn: Callable = field(repr=False)
    params: dict = field(default_factory=dict)
    notes: str = ""
    compute: str | None = None  # a compute format the candidate always uses (bit tricks)
    special_inputs: tuple | None = None  # non-finite inputs to check (None: the format's)
    native: bool = False  # a callable or framework op: it computes in its own arithmetic
    semantics: object = None  # an audit.targets.semantics.Semantics other than ieee (None: ieee)
    # what else makes this candidate what it is (an engine's name, version and dispatch, a C
    # kernel's flags and source digest): recorded verbatim in baselines and compared by check
    identity: dict = field(default_factory=dict)

    def with_semantics(self, sem) -> Candidate:
        """This candidate evaluated under semantics ``sem`` (None or ieee: itself)."""
        if sem is None or sem.is_default:
            return self if self.semantics is None else replace(self, semantics=None)
        return replace(self, semantics=sem)

    @property
    def arity(self) -> int:
        return self.ref.arity

    def compute_format(self, requested: Format) -> Format:
        from audit.numbers.formats import get_format

        return get_format(self.compute) if self.compute else requested

    @property
    def family(self) -> str:
        return self.id.split(".", 1)[0]

    @property
    def variant(self) -> str:
        parts = self.id.split(".", 1)
        return parts[1] if len(parts) > 1 else ""

    @property
    def ref(self) -> Reference:
        return get_reference(self.reference)

    def resolve_params(self, overrides: dict | None) -> dict:
        """Candidate defaults updated with overrides; unknown names are an error."""
        out = dict(self.params)
        for k, v in (overrides or {}).items():
            if k not in out:
                known = ", ".join(out) or "none"
                raise BadParameterError(f"{self.id} has no parameter '{k}' (parameters: {known})")
            if any(isinstance(e, str) for e in (v if isinstance(v, (list, tuple)) else [v])):
                raise BadParameterError(f"{self.id}: parameter '{k}' takes a number, got {v!r:.40}")
            out[k] = v
        return out

    def reference_params(self, params: dict) -> dict:
        """The parameters of the reference that this candidate shares (swish's beta)."""
        ref = self.ref
        return {k: params[k] for k in ref.params if k in params}

    def evaluate(
        self,
        x: np.ndarray,
        storage: Format,
        compute_fmt: Format,
        params: dict | None = None,
        x2: np.ndarray | None = None,
        trace: list | None = None,
        watch: bool = False,
    ) -> np.ndarray:
        """Outputs (storage values) at inputs x (and x2 for a gated unit)."""
        return compute.evaluate(
            self.fn,
            np.asarray(x, dtype=np.float64),
            storage,
            self.compute_format(compute_fmt),
            self.resolve_params(params),
            None if x2 is None else np.asarray(x2, dtype=np.float64),
            trace,
            watch,
            self.semantics,
        )

    def source_line(self) -> int | None:
        try:
            return inspect.getsourcelines(self.fn)[1]
        except (OSError, TypeError):
            return None

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "family": self.family,
            "variant": self.variant,
            "reference": self.reference,
            "formula": self.formula,
            "source": self.source,
            "params": dict(self.params),
            "notes": self.notes,
            "compute": self.compute,
        }


def candidate(
    id: str,
    *,
    reference: str,
    formula: str,
    source: str,
    notes: str = "",
    compute: str | None = None,
    **params,
):
    """Decorator: register ``fn(x, m, **params)`` as candidate ``id`` (``fn(a, b, m)`` for a
    gated unit).  ``compute`` pins the compute format (for bit tricks made for fp32)."""
    if "." not in id:
        raise ValueError(f"candidate id '{id}' must be family.variant")

    def wrap(fn):
        if id in REGISTRY:
            raise ValueError(f"duplicate candidate id {id}")
        REGISTRY[id] = Candidate(id, reference, formula, source, fn, dict(params), notes, compute)
        return fn

    return wrap


def families() -> dict[str, list[Candidate]]:
    out: dict[str, list[Candidate]] = {}
    for c in catalog().values():
        out.setdefault(c.family, []).append(c)
    return out


def resolve(names) -> list[Candidate]:
    """Names to candidates: 'gelu.tanh' selects one, a bare family 'gelu' all of it."""
    cat = catalog()
    fams = families()
    out: list[Candidate] = []
    for name in names:
        name = name.strip()
        if name in cat:
            found = [cat[name]]
        elif name in fams:
            found = fams[name]
        else:
            close = difflib.get_close_matches(name, list(cat) + list(fams), n=3, cutoff=0.6)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise UnknownNameError(
                f"unknown candidate or family '{name}'{hint} (run 'actaudit list' to see them)"
            )
        out.extend(c for c in found if c not in out)
    if not out:
        raise UnknownNameError("no candidate given")
    return out


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*\Z")


def _number(k: str, v: str) -> float | str:
    """A number, or a word (an engine attribute's string: approximate=tanh); every use
    checks the type it takes."""
    try:
        val = float(v)
    except ValueError:
        if _WORD.match(v) and v.lower().lstrip("+-") not in ("nan", "inf", "infinity"):
            return v
        raise BadParameterError(f"parameter '{k}': '{v}' is not a number") from None
    if not math.isfinite(val):
        raise BadParameterError(f"parameter '{k}' must be finite, got '{v}'")
    return val


def parse_param(text: str) -> tuple[str, float | str | list]:
    """'limit=8' -> ('limit', 8.0); 'beta=0.5,1,2' -> ('beta', [0.5, 1.0, 2.0]);
    'approximate=tanh' -> ('approximate', 'tanh') (strings: engine attributes only)."""
    if "=" not in text:
        raise BadParameterError(f"parameter '{text}' is not NAME=VALUE")
    k, v = (s.strip() for s in text.split("=", 1))
    if not k:
        raise BadParameterError(f"parameter '{text}' has no name")
    vals = [_number(k, p) for p in v.split(",")]
    return k, vals[0] if len(vals) == 1 else vals


def parse_params(texts) -> dict:
    out: dict = {}
    for t in texts:
        k, v = parse_param(t)
        if k in out:
            raise BadParameterError(f"parameter '{k}' given twice (use {k}=V1,V2 to sweep values)")
        out[k] = v
    return out


def dump_candidate(d, reference: str) -> tuple[Candidate, Domain]:
    """A candidate that looks its outputs up in a device dump (audit.targets.dumps.Dump), and the domain of its inputs."""
    ref = get_reference(reference)
    if ref.arity != 1:
        raise BadOptionError("dumps are for univariate references")
    fmt = d.fmt
    keys = fmt.to_bits(d.x).astype(np.int64)
    order = np.argsort(keys)
    skeys, sy = keys[order], d.y[order]
    spec = dict(d.specials)

    def fn(x, m):
        a = np.asarray(x.a)
        out = np.full(a.shape, np.nan)
        fin = np.isfinite(a)
        k = fmt.to_bits(a[fin]).astype(np.int64)
        i = np.clip(np.searchsorted(skeys, k), 0, max(len(skeys) - 1, 0))
        found = skeys[i] == k if len(skeys) else np.zeros(len(k), bool)
        vals = np.where(found, sy[i] if len(sy) else np.nan, np.nan)
        out[fin] = vals
        for j in np.flatnonzero(~fin):
            v = float(a[j])
            out[j] = next(
                (y for xx, y in spec.items() if (xx == v) or (np.isnan(xx) and np.isnan(v))), np.nan
            )
        return out

    exhaustive = fmt.enumerable and len(d.x) == len(fmt.finite_values())
    dom = Domain(fmt, exhaustive, len(d.x), values=d.x)
    name = f"dump:{Path(d.path).name}"
    return Candidate(
        name,
        reference,
        f"outputs read from {d.path}",
        "device dump",
        fn,
        compute=fmt.name,
        special_inputs=tuple(x for x, _ in d.specials),
        native=True,
    ), dom  # the device's own arithmetic


def of_family(cands: list[Candidate], name: str) -> list[Candidate]:
    """The candidates of family NAME, or else those approximating reference NAME."""
    name = name.strip()
    found = [c for c in cands if c.family == name] or [c for c in cands if c.reference == name]
    if not found:
        known = sorted({c.family for c in cands} | {c.reference for c in cands})
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UnknownNameError(
            f"unknown family or reference '{name}'{hint} (run 'actaudit list' to see them)"
        )
    return found
