"""Parameter effect inside a sweep: a parameter swept over values (``--param NAME=V1,V2``)
whose outputs do not change anywhere is a finding, ``no_effect`` ("limit has no effect").

The check reuses the outputs the sweep computes anyway: each chunk's results, as bit
patterns (every NaN counted as one pattern, -0 apart from +0: the comparison of
:func:`audit.compare.diff._same_bits`), are kept per result when a parameter takes several
values.  Domains held in memory keep the bits (64 bits per input, as much as the domain's
own values), so the inputs that change are
counted; chunked domains (``--exhaustive`` fp32 inputs or 16-bit pairs) keep a digest per
chunk (BLAKE2b of the bits), which decides "no change anywhere" exactly up to a hash
collision (2^-128) but gives no count.  Results of one candidate, format pair, compute
format and machine semantics whose other parameters are equal form a group; when every
value of the parameter gives the same bits at every input of the group, each of its
results gets the finding.  Otherwise each result records ``param_effect``: the values and
how many inputs changed (``changed``: null for chunked domains).  Stochastic rounding
(results of different draws) and resumed checkpoints (chunks not seen) are left out.

External targets (``torch:NAME``, ``jax:NAME``, ``pkg.module:function``) take the
parameter as a keyword of the op (``negative_slope``, ``alpha``, ``beta``) and pass it to
their reference under the reference's name (:data:`ALIASES`); a parameter without a
counterpart in the reference is refused (the audit would compare against another
function): check it with ``actaudit consistency --param``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from audit.errors import BadOptionError
from audit.measure.findings import Finding
from audit.numbers.formats import Format
from audit.targets import engines as adapters
from audit.targets.candidates import Candidate

# the reference's name of an op's keyword, where they differ
ALIASES = {
    ("torch", "leaky_relu", "negative_slope"): "alpha",
    ("jax", "leaky_relu", "negative_slope"): "alpha",
}


def output_bits(got, fmt: Format | None) -> np.ndarray:
    """The bits of results (float64 values of ``fmt``) as unsigned integers of float64:
    NaN as one pattern, zeros by sign (the same equality as diff._same_bits)."""
    g = np.array(got, dtype=np.float64, copy=True)
    g[np.isnan(g)] = np.nan
    return g.view(np.uint64)


def chunk_outputs(got: np.ndarray, fmt: Format, in_memory: bool):
    """What a chunk keeps for the check: the bits (in-memory domains) or their digest."""
    bits = output_bits(got, fmt)
    return bits if in_memory else hashlib.blake2b(bits.tobytes(), digest_size=16).digest()


def merged_outputs(parts: list, chunks: int):
    """The kept outputs of a whole result (None when some chunk was not seen)."""
    if len(parts) != chunks or not parts:
        return None
    if isinstance(parts[0], bytes):
        return list(parts)
    return np.concatenate(parts) if len(parts) > 1 else parts[0]


def varied(params: dict | None) -> list[str]:
    """Names of the parameters given several distinct values."""
    return [
        k
        for k, v in (params or {}).items()
        if isinstance(v, (list, tuple)) and len({float(x) for x in v}) > 1
    ]


def attach(results: list, names: list[str], analyze: bool = True) -> None:
    """Compare the kept outputs of results that differ in one parameter of ``names`` only;
    add the ``no_effect`` finding or the ``param_effect`` record."""
    for name in names:
        groups: dict = {}
        for r in results:
            outs = getattr(r, "_outputs", None)
            if name not in r.params or outs is None or r.stochastic is not None:
                continue
            sem = "" if r.semantics is None else repr(r.semantics)
            rest = tuple(sorted((k, float(v)) for k, v in r.params.items() if k != name))
            groups.setdefault((r.candidate, r.formats_label, r.compute, sem, rest), []).append(r)
        for group in groups.values():
            values = sorted({float(r.params[name]) for r in group})
            if len(values) < 2:
                continue
            _judge(group, name, values, analyze)
    for r in results:
        r.__dict__.pop("_outputs", None)


def _judge(group: list, name: str, values: list, analyze: bool) -> None:
    outs = []
    for r in group:  # the swept inputs, then the non-finite inputs of the specials check
        sp = output_bits([s["got"] for s in r.specials], None)
        outs.append(
            r._outputs + [sp.tobytes()] if isinstance(r._outputs, list) else np.concatenate([r._outputs, sp])
        )
    n = group[0].domain.count + len(group[0].specials)
    where = "all" if group[0].domain.exhaustive else "all sampled"
    if isinstance(outs[0], list):  # digests of chunks: same or not, no count
        changed = None if all(o == outs[0] for o in outs) else -1
    else:
        mask = np.zeros(len(outs[0]), bool)
        for o in outs[1:]:
            mask |= o != outs[0]
        changed = int(np.count_nonzero(mask))
    vals = ", ".join(f"{v:g}" for v in values)
    for r in group:
        if changed is None or changed == 0:
            if analyze:
                r.findings.append(
                    Finding(
                        "no_effect",
                        n,
                        [],
                        {},
                        note=f"{name} has no effect: {name} = {vals} give the "
                        f"same bits at {where} {n} inputs",
                    )
                )
            rec = {"values": values, "changed": 0, "inputs": n}
        else:
            rec = {"values": values, "changed": None if changed < 0 else changed, "inputs": n}
        r.param_effect = {**(r.param_effect or {}), name: rec}


# ------------------------------------------------------- external targets with parameters
def external_candidate(
    target: str, names: list[str], reference: str | None, fmt: Format, timeout: float | None = None
) -> Candidate:
    """``torch:NAME``, ``jax:NAME`` or ``pkg.module:function`` as a candidate that takes the
    parameters ``names`` as keywords, audited against its reference with the same values."""
    from audit.oracle.references import get_reference
    from audit.targets.engines import external_function

    kind, _, op = target.partition(":")
    if kind in ("c", "lut", "torch-compile", "torch-bwd", "dump"):
        raise BadOptionError(
            f"{target}: --param applies to catalog candidates, torch:NAME, jax:NAME and pkg.module:function"
        )
    fn_kw, ref_name = external_function(target, fmt)
    ref_name = reference or ref_name
    if ref_name is None:
        raise BadOptionError(f"{target}: give the function's reference with --reference (e.g. gelu)")
    ref = get_reference(ref_name)
    alias = {k: ALIASES.get((kind, op, k), k) for k in names}
    for k, a in alias.items():
        if a not in ref.params:
            raise BadOptionError(
                f"{target}: parameter '{k}' has no counterpart in its reference "
                f"{ref_name} (parameters: {', '.join(ref.params) or 'none'}); check "
                f"its effect with: actaudit consistency {target} --param {k}=V1,V2"
            )
    base = adapters.wrap_callable(lambda a: a, ref_name, fmt, target, timeout=timeout)

    def fn(x, m, **p):
        inner = adapters.wrap_callable(lambda arr: fn_kw(arr, **p), ref_name, fmt, target, timeout=timeout)
        return inner.fn(x, m)

    return _Keyword(
        target,
        ref_name,
        f"{target}(x, {', '.join(names)})",
        f"{target} with keyword parameters",
        fn,
        {k: ref.params[a] for k, a in alias.items()},
        compute=base.compute,
        native=True,
        aliases=alias,
    )


@dataclass(frozen=True)
class _Keyword(Candidate):
    aliases: dict = field(default_factory=dict)  # op keyword -> the reference's parameter

    def reference_params(self, params: dict) -> dict:
        return {
            self.aliases.get(k, k): v for k, v in params.items() if self.aliases.get(k, k) in self.ref.params
        }
