"""The common interface of inference-engine targets (``ort:OP``, ``openvino:OP``, ...).

An :class:`Engine` declares, as data, the ops it audits (:class:`Op`: the op's name, the
actaudit reference it computes, the dtypes it takes, its attributes as :class:`Attr` with
types and defaults) and its own options (``-p PREFIX.NAME=VALUE``, e.g. ``ort.optimize``).
It implements three things: :meth:`Engine.version`, :meth:`Engine.dispatch` (the CPU code
path its kernels take here) and :meth:`Engine.build`, which turns a :class:`SessionKey`
into a :class:`Session` (a compiled single-op model and the function that runs it).

:meth:`Engine.build` receives nothing but the key, and the session cache is keyed by the
whole key -- engine, op, every attribute (defaults included), dtype, every option
(optimization level, precision, resolver) -- so a session built for one attribute value,
dtype or level can never answer for another.

:func:`engine_candidates` turns a target and the ``-p`` values into candidates (one per
combination of listed values); each candidate's ``identity`` (:class:`EngineInfo`) names
engine, version, op, attributes, dtype, options, the precision or resolver the engine
reports and the dispatch, and is recorded with every result (JSON, gate baseline).
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import SupportsInt, cast

import numpy as np

from audit.errors import ActauditError, BadOptionError, BadParameterError, UnknownNameError
from audit.numbers.formats import Format
from audit.targets.candidates import Candidate
from audit.targets.engines.callables import UserFunctionError, _need, wrap_callable


class EngineError(ActauditError):
    """An engine refused a model, crashed in a call, or broke its contract (one line)."""


def one_line(e: BaseException, limit: int = 300) -> str:
    """An engine's exception as one line (engines throw pages of C++ context)."""
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:limit]}{'...' if len(text) > limit else ''}"


# ------------------------------------------------------------------- declarations
@dataclass(frozen=True)
class Attr:
    """An attribute of an op (or an option of an engine): its type, default, allowed values
    and the parameter of the reference it sets (Elu's alpha is elu's alpha)."""

    name: str
    kind: type  # float, int or str
    default: object
    choices: tuple = ()
    ref_param: str | None = None
    doc: str = ""

    def coerce(self, value, where: str):
        """A value given on the command line or in Python, checked and of self.kind."""
        v: str | int | float
        if self.kind is str:
            if not isinstance(value, str):
                raise BadParameterError(f"{where}: '{self.name}' takes a string, got {value!r:.40}")
            v = value
        elif isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise BadParameterError(f"{where}: '{self.name}' takes a number, got {value!r:.40}")
        elif not math.isfinite(float(value)):
            raise BadParameterError(f"{where}: '{self.name}' must be finite, got {value!r}")
        elif self.kind is int:
            n = int(
                cast(SupportsInt, value)
            )  # int() takes every numbers.Real; typeshed's Real has no __int__
            if float(value) != n:
                raise BadParameterError(f"{where}: '{self.name}' takes an integer, got {value!r}")
            v = n
        else:
            v = float(value)
        if self.choices and v not in self.choices:
            raise BadParameterError(
                f"{where}: '{self.name}' is one of {', '.join(map(str, self.choices))}, got {v!r}"
            )
        return v


@dataclass(frozen=True)
class Op:
    """One op an engine audits."""

    name: str  # its name in targets, unique in the engine: 'Gelu', 'com.microsoft.Gelu'
    reference: str  # the actaudit reference it computes: 'gelu'
    dtypes: tuple  # format names it takes ('fp32', 'fp16', ...; 'int8'/'uint8' for codes)
    attrs: tuple = ()  # Attr
    domain: str = ""  # the engine's namespace of the op (ONNX: '' or 'com.microsoft')
    quantized: bool = False  # takes quantized codes (--dtype int8:scale=S,zero=Z)
    qdtypes: tuple = ()  # quantized code types a float op also takes (LiteRT's int8 LOGISTIC)
    ref_params: dict = field(default_factory=dict)  # fixed reference parameters
    note: str = ""
    node: str = ""  # the engine's node type when it differs from name ('Gelu')

    @property
    def node_type(self) -> str:
        return self.node or self.name

    def attr(self, name: str) -> Attr | None:
        return next((a for a in self.attrs if a.name == name), None)


@dataclass(frozen=True)
class SessionKey:
    """Everything a session depends on; the session cache's key and build's only input."""

    engine: str
    op: str
    attributes: tuple  # ((name, value), ...) sorted, every attribute of the op
    dtype: str
    options: tuple  # ((name, value), ...) sorted, every option of the engine

    @property
    def attrs(self) -> dict:
        return dict(self.attributes)

    @property
    def opts(self) -> dict:
        return dict(self.options)


@dataclass
class Session:
    """A built model: ``run(array of the storage dtype) -> array of the same shape and dtype``."""

    run: Callable[[np.ndarray], np.ndarray]
    precision: str  # the precision (or resolver) the engine reports it computes in
    detail: dict = field(default_factory=dict)  # anything else the engine reports


@dataclass(frozen=True)
class EngineInfo:
    """What an engine result is bound to (the candidate's ``identity``)."""

    engine: str
    version: str
    op: str
    attributes: dict
    dtype: str
    options: dict
    precision: str
    dispatch: str
    # the environment variables that change this engine's kernels, as set (XLA_FLAGS, the
    # oneDNN / MKL ISA caps, ...: audit/targets/identity.py); None: read now
    environment: dict | None = None

    def __post_init__(self) -> None:
        if self.environment is None:
            from audit.targets.identity import environment

            object.__setattr__(self, "environment", environment(self.engine))

    def to_dict(self) -> dict:
        return {
            "engine": self.engine,
            "version": self.version,
            "op": self.op,
            "attributes": dict(self.attributes),
            "dtype": self.dtype,
            "options": dict(self.options),
            "precision": self.precision,
            "dispatch": self.dispatch,
            "environment": dict(self.environment or {}),
        }


class Engine:
    """Subclass per engine; register an instance with :func:`audit.targets.engines.register`."""

    prefix: str = ""  # the target prefix: 'ort'
    name: str = ""  # the engine's name in results: 'onnxruntime'
    module: str = ""  # the Python module that must import
    extra: str = "engines"  # the pip extra that installs it
    ops: dict = {}  # op name -> Op
    options: tuple = ()  # Attr, given as -p PREFIX.NAME=VALUE
    # quantization parameters are part of the model (LiteRT): the session key's dtype is then
    # the full 'IN->OUT' quantized format names, so a session never serves other scales
    quant_in_model: bool = False

    def load(self):
        """The engine's Python module (one line, exit 2, when it is not installed)."""
        return _need(self.module, self.extra)

    def version(self) -> str:
        raise NotImplementedError

    def dispatch(self) -> str:
        """The CPU code path the engine's kernels take on this machine ('avx512f', ...)."""
        raise NotImplementedError

    def build(self, key: SessionKey) -> Session:
        """A session for exactly ``key`` (raise EngineError when the engine refuses it)."""
        raise NotImplementedError

    def option(self, name: str) -> Attr | None:
        return next((a for a in self.options if a.name == name), None)

    def op(self, name: str) -> Op:
        if name not in self.ops:
            import difflib

            close = difflib.get_close_matches(name, list(self.ops), n=2, cutoff=0.6)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise UnknownNameError(
                f"unknown {self.name} op '{name}'{hint}; known: {', '.join(sorted(self.ops))}"
            )
        return self.ops[name]


# ------------------------------------------------------------------ session cache
class SessionCache:
    """Sessions by their full :class:`SessionKey`; ``builds`` counts sessions built."""

    def __init__(self) -> None:
        self.sessions: dict[SessionKey, Session] = {}
        self.builds = 0

    def get(self, engine: Engine, key: SessionKey) -> Session:
        s = self.sessions.get(key)
        if s is None:
            try:
                s = engine.build(key)
            except ActauditError:
                raise
            except Exception as e:
                raise EngineError(
                    f"{engine.prefix}:{key.op}: {engine.name} refused the model: {one_line(e)}"
                ) from None
            self.sessions[key] = s
            self.builds += 1
        return s

    def clear(self) -> None:
        self.sessions.clear()


SESSIONS = SessionCache()


# ------------------------------------------------------------------------ targets
def split_target(target: str) -> tuple[str, str, dict]:
    """'ort:Gelu[approximate=tanh,ort.optimize=all]' -> ('ort', 'Gelu', {...}) (values as
    given: numbers parsed, other text kept as strings)."""
    prefix, _, rest = target.partition(":")
    op, br, tail = rest.partition("[")
    given: dict = {}
    if br:
        if not tail.endswith("]"):
            raise UnknownNameError(f"'{target}': attributes go in brackets, OP[NAME=VALUE,...]")
        from audit.targets.candidates import parse_param

        for part in tail[:-1].split(","):
            if not part.strip():
                continue
            k, v = parse_param(part)
            if k in given:
                raise BadParameterError(f"'{target}': '{k}' given twice")
            given[k] = v
    return prefix.strip(), op.strip(), given


def engine_params(engine: Engine, op: Op, params: dict) -> dict:
    """The entries of ``params`` (the -p values of every target) that this op takes: its
    attributes and the engine's options (PREFIX.NAME)."""
    out = {}
    for k, v in (params or {}).items():
        if op.attr(k) is not None or (
            k.startswith(engine.prefix + ".") and engine.option(k.split(".", 1)[1])
        ):
            out[k] = v
    return out


def takes(engine: Engine, op_name: str, key: str) -> bool:
    op = engine.ops.get(op_name)
    if op is None:
        return False
    return op.attr(key) is not None or (
        key.startswith(engine.prefix + ".") and engine.option(key[len(engine.prefix) + 1 :]) is not None
    )


def engine_candidates(
    engine: Engine,
    target: str,
    fmt: Format,
    params: dict | None = None,
    reference: str | None = None,
    cache: SessionCache | None = None,
) -> list[Candidate]:
    """Candidates of ``target`` in storage format ``fmt``: one per combination of the values
    listed (``-p alpha=0.1,0.2``) among ``params`` (shared -p values: those the op does not
    take are left to other targets) and the target's own bracketed attributes (all of which
    it must take)."""
    prefix, op_name, own = split_target(target)
    op = engine.op(op_name)
    for k in own:
        if not takes(engine, op_name, k):
            known = [a.name for a in op.attrs] + [f"{engine.prefix}.{o.name}" for o in engine.options]
            raise BadParameterError(
                f"{target}: {op_name} has no attribute '{k}' (attributes: {', '.join(known) or 'none'})"
            )
    given = {**engine_params(engine, op, params or {}), **own}
    names = list(given)
    lists = [v if isinstance(v, (list, tuple)) else [v] for v in given.values()]
    out = []
    for combo in itertools.product(*lists):
        out.append(engine_candidate(engine, op, fmt, dict(zip(names, combo)), reference, cache))
    return out


def resolve_key(engine: Engine, op: Op, fmt_name: str, given: dict) -> tuple[SessionKey, dict]:
    """(the full session key, the attributes/options given explicitly) of an op."""
    where = f"{engine.prefix}:{op.name}"
    attrs = {a.name: a.default for a in op.attrs}
    opts = {o.name: o.default for o in engine.options}
    for k, v in given.items():
        if k.startswith(engine.prefix + "."):
            o = engine.option(k[len(engine.prefix) + 1 :])
            if o is None:
                raise BadParameterError(
                    f"{where}: unknown {engine.name} option '{k}' "
                    f"(options: {', '.join(engine.prefix + '.' + x.name for x in engine.options) or 'none'})"
                )
            opts[o.name] = o.coerce(v, where)
        else:
            a = op.attr(k)
            if a is None:
                raise BadParameterError(
                    f"{where} has no attribute '{k}' (attributes: {', '.join(x.name for x in op.attrs) or 'none'})"
                )
            attrs[k] = a.coerce(v, where)
    key = SessionKey(
        engine.prefix, op.name, tuple(sorted(attrs.items())), fmt_name, tuple(sorted(opts.items()))
    )
    return key, given


def _label(engine: Engine, op: Op, key: SessionKey, given: dict) -> str:
    shown = [f"{k}={_show(v)}" for k, v in sorted(given.items())]
    return f"{engine.prefix}:{op.name}" + (f"[{','.join(shown)}]" if shown else "")


def _show(v) -> str:
    """A value written exactly: a string as it is, an integer in full, a float as its
    shortest repr (which reads back to the same float; '1' for 1.0), never rounded, so
    that two values never share a label (alpha=1.0000001 is not alpha=1.0000002)."""
    if isinstance(v, str):
        return v
    if isinstance(v, numbers.Integral):
        return str(int(v))
    r = repr(float(v))
    return r[:-2] if r.endswith(".0") else r


def check_dtype(engine: Engine, op: Op, fmt_name: str) -> None:
    if fmt_name not in op.dtypes:
        raise BadOptionError(
            f"{engine.prefix}:{op.name} takes {', '.join(op.dtypes)}, not {fmt_name}"
            + (" (quantized codes: --dtype int8:scale=S,zero=Z)" if op.quantized or op.qdtypes else "")
        )


def engine_candidate(
    engine: Engine,
    op: Op,
    fmt: Format,
    given: dict,
    reference: str | None = None,
    cache: SessionCache | None = None,
) -> Candidate:
    """One candidate: the op with attributes/options ``given`` in storage format ``fmt``."""
    cache = SESSIONS if cache is None else cache
    if op.quantized:
        raise BadOptionError(
            f"{engine.prefix}:{op.name} reads and writes quantized codes: --dtype int8:scale=S,zero=Z "
            f"(it takes {', '.join(op.dtypes)})"
        )
    check_dtype(engine, op, fmt.name)
    if reference is not None and reference != op.reference:
        raise BadOptionError(
            f"{engine.prefix}:{op.name} computes {op.reference}, not --reference {reference}"
        )
    engine.load()
    key, given = resolve_key(engine, op, fmt.name, given)
    session = cache.get(engine, key)
    info = EngineInfo(
        engine.name,
        engine.version(),
        op.name,
        key.attrs,
        fmt.name,
        key.opts,
        session.precision,
        engine.dispatch(),
    )
    label = _label(engine, op, key, given)

    def call(arr: np.ndarray) -> np.ndarray:
        try:
            out = session.run(arr)
        except ActauditError:
            raise
        except Exception as e:
            raise EngineError(f"{label}: {engine.name} failed on {arr.size} inputs: {one_line(e)}") from None
        out = np.asarray(out)
        if out.shape != arr.shape:
            raise EngineError(f"{label}: {engine.name} returned shape {out.shape}, expected {arr.shape}")
        return out

    attrs_text = ", ".join(f"{k}={_show(v)}" for k, v in key.attributes)
    opts_text = ", ".join(f"{k}={_show(v)}" for k, v in key.options)
    source = (
        f"{engine.name} {info.version} {op.domain + '.' if op.domain else ''}{op.name}"
        f"({attrs_text}) [{opts_text}] precision {info.precision}, dispatch {info.dispatch}"
    )
    base = wrap_callable(call, op.reference, fmt, label, source)
    ref_params = dict(op.ref_params)
    for a in op.attrs:
        if a.ref_param is not None:
            ref_params[a.ref_param] = key.attrs[a.name]
    return EngineCandidate(
        **{f.name: getattr(base, f.name) for f in fields(Candidate) if f.name != "identity"},
        identity=info.to_dict(),
        bound_ref_params=ref_params,
        session_key=key,
    )


@dataclass(frozen=True)
class EngineCandidate(Candidate):
    """An engine op as a candidate: its attributes are bound (not swept parameters); the
    reference parameters they set go to the oracle."""

    bound_ref_params: dict = field(default_factory=dict)
    session_key: SessionKey | None = None

    def reference_params(self, params: dict) -> dict:
        return {**self.bound_ref_params, **{k: params[k] for k in self.ref.params if k in params}}


__all__ = [
    "Attr",
    "Op",
    "Engine",
    "EngineError",
    "EngineInfo",
    "EngineCandidate",
    "Session",
    "SessionKey",
    "SessionCache",
    "SESSIONS",
    "engine_candidates",
    "engine_candidate",
    "split_target",
    "takes",
    "check_dtype",
    "one_line",
    "UserFunctionError",
]
