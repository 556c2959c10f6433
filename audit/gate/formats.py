"""The CI gate for quantized and block-scaled outputs: an ``[[audit]]`` whose ``dtype`` or
``out_dtype`` is a quantized format (``int8:scale=S,zero=Z``, ``uint8:...``, ``int16:...``)
or whose ``out_dtype`` is block-scaled (``mxfp8_e4m3`` ... ``mxfp4_e2m1``, ``nvfp4``).

Such audits are swept by audit/measure/quant.py or audit/measure/blocks.py instead of the float sweep, and
their baseline entries carry ``"kind": "quant"`` or ``"kind": "blocks"`` with these figures:

* quant (exhaustive: every input code): ``max_code_error``, ``mean_code_error``,
  ``max_real_error`` (worse when they rise), ``correct_code_fraction`` (worse when it
  falls), the counts ``nan_count`` and ``max_code_distance``, and the findings per kind
  (pinned, saturated, monotonicity, nan: counts and intervals, as the float gate's);
* blocks (seeded blocks from ``blocks`` = the distribution, ``samples`` elements, ``seed``;
  or ``blocks = "exhaustive"``): ``max_elem_ulp``, ``mean_elem_ulp``, ``max_rel``,
  ``max_added_ulp`` (worse when they rise), the counts ``scale_diff_blocks`` (blocks whose
  scale differs from the reference's), ``mismatches`` (elements differing) and
  ``nan_elements``; the worst block (index, its element ULP, both scales) is recorded and
  named when the gate fails.

Tolerances: quant audits take ``max_code_error``, ``correct_code_fraction`` (a minimum) and
``nan``; block audits take ``max_elem_ulp``, ``scale_diff_blocks`` (a maximum) and ``nan``.
A tolerance of the other kind (``max_ulp`` on a quantized audit, ...) cannot be decided
and fails.
"""

from __future__ import annotations

import math

from audit.errors import BadFileError, BadOptionError
from audit.gate.shared import compare_counts, compare_findings
from audit.measure import blocks as blocks_mod
from audit.measure import quant as quant_mod

QUANT_UP = ("max_code_error", "mean_code_error", "max_real_error")  # worse when they rise
QUANT_DOWN = ("correct_code_fraction",)  # worse when it falls
QUANT_COUNTS = ("nan_count", "max_code_distance")
QUANT_KINDS = ("pinned", "saturated", "monotonicity", "nan")
BLOCK_UP = ("max_elem_ulp", "mean_elem_ulp", "max_rel", "max_added_ulp")
BLOCK_COUNTS = ("scale_diff_blocks", "mismatches", "nan_elements")
TOLERANCES = {
    "quant": {"max_code_error", "correct_code_fraction", "nan"},
    "blocks": {"max_elem_ulp", "scale_diff_blocks", "nan"},
}
DEFAULT_ELEMENTS = 1 << 16
ENTRY_KEYS = {
    "quant": (
        "kind",
        "identity",
        "candidate",
        "dtype",
        "out_dtype",
        "compute",
        "params",
        "inputs",
        *QUANT_UP,
        *QUANT_DOWN,
        *QUANT_COUNTS,
        "findings",
        "finding_counts",
        "worst",
    ),
    "blocks": (
        "kind",
        "identity",
        "candidate",
        "dtype",
        "out_dtype",
        "rule",
        "compute",
        "params",
        "inputs",
        "elements",
        "blocks",
        *BLOCK_UP,
        *BLOCK_COUNTS,
        "worst_block",
    ),
}


def kind_of(a) -> str | None:
    """'blocks', 'quant' or None (a float audit) for an Audit of the spec."""
    if blocks_mod.is_block(a.out_dtype):
        return "blocks"
    if quant_mod.is_quant(a.out_dtype) or any(quant_mod.is_quant(d) for d in a.dtype):
        return "quant"
    return None


def _unused(a, kind) -> list[str]:
    """Keys of the audit that a quantized or block audit would ignore: refused, not dropped."""
    keys = {
        "range": a.range is not None,
        "grid": a.grid is not None,
        "grad": a.grad,
        "backward": a.backward,
        "dump": a.dump is not None,
        "semantics": a.semantics is not None,
        "device": a.device != "cpu",
    }
    if kind == "quant":
        keys.update(
            samples=a.samples is not None,
            seed=a.seed != 0,
            blocks=a.blocks != "normal:std=1",
            scale_rule=a.scale_rule != "ocp",
        )
    return [k for k, used in keys.items() if used]


def run(a) -> list:
    """The audit's results: one per (dtype, compute, target)."""
    kind = kind_of(a)
    bad = _unused(a, kind)
    if bad:
        raise BadOptionError(
            f"key '{bad[0]}' does not apply to a {'quantized' if kind == 'quant' else 'block-scaled'} "
            "audit ("
            + ("every input code is swept" if kind == "quant" else "inputs: blocks, samples, seed")
            + ")"
        )
    out = []
    for dt in a.dtype:
        for cp in a.compute or ["fp32"]:
            if kind == "quant":
                out += quant_mod.sweep(a.targets, dt, a.out_dtype, cp, a.params or None, a.reference)
            else:
                rs = blocks_mod.sweep(
                    a.targets,
                    dt,
                    a.out_dtype,
                    cp,
                    rule=a.scale_rule,
                    dist=a.blocks,
                    elements=a.samples or DEFAULT_ELEMENTS,
                    seed=a.seed,
                    params=a.params or None,
                )
                for r in rs:  # the seed belongs to the inputs: compared with the baseline's
                    if not r.inputs.startswith("exhaustive"):
                        r.inputs = f"{r.inputs} (seed {a.seed})"
                out += rs
    return out


def is_format_result(r) -> bool:
    return isinstance(r, (quant_mod.QuantResult, blocks_mod.BlockResult))


def entry_key(audit: str, r) -> str:
    p = ",".join(f"{k}={float(v)!r}" for k, v in sorted(r.params.items()))
    rule = f"@{r.rule}" if isinstance(r, blocks_mod.BlockResult) else ""
    return f"{audit}/{r.candidate}/{r.dtype}->{r.out_dtype}{rule}/{r.compute}" + (f"/{p}" if p else "")


def entry(r, a=None) -> dict:
    """The baseline entry of a quant or blocks result; with its audit ``a``, its identity."""
    from audit.gate import identity as gate_identity

    d = r.to_dict()
    if isinstance(r, quant_mod.QuantResult):
        return {
            "kind": "quant",
            **({} if a is None else {"identity": gate_identity.quant_identity(r)}),
            "candidate": r.candidate,
            "dtype": r.dtype,
            "out_dtype": r.out_dtype,
            "compute": r.compute,
            "params": r.params,
            "inputs": d["inputs"],
            **{m: d[m] for m in QUANT_UP + QUANT_DOWN + QUANT_COUNTS},
            "findings": {f["kind"]: f["intervals"] for f in d["findings"]},
            "finding_counts": {f["kind"]: f["count"] for f in d["findings"]},
            "worst": d["worst"],
        }
    return {
        "kind": "blocks",
        **({} if a is None else {"identity": gate_identity.blocks_identity(r, a)}),
        "candidate": r.candidate,
        "dtype": r.dtype,
        "out_dtype": r.out_dtype,
        "rule": r.rule,
        "compute": r.compute,
        "params": r.params,
        "inputs": r.inputs,
        "elements": r.elements,
        "blocks": r.blocks,
        **{m: d[m] for m in BLOCK_UP + BLOCK_COUNTS},
        "worst_block": d["worst_block"],
    }


# ------------------------------------------------------------------ validation
def _metric(v) -> bool:
    if isinstance(v, str):
        return v in ("inf", "nan")
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


def _count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**63


def check_entry(path, where: str, e: dict) -> None:
    """A quant or blocks entry of a baseline, every field validated."""

    def bad(k, msg):
        raise BadFileError(f"{path}: key '{where}.{k}' {msg}")

    from audit.gate import identity as gate_identity

    kind = e["kind"]
    up, down, counts = (
        (QUANT_UP, QUANT_DOWN, QUANT_COUNTS) if kind == "quant" else (BLOCK_UP, (), BLOCK_COUNTS)
    )
    known = ENTRY_KEYS[kind]
    for k in e:
        if k not in known:
            bad(k, f"is unknown in a {kind} entry (known: {', '.join(known)})")
    for k in known:
        if k not in e:
            bad(k, "is missing")
    gate_identity.check(path, where, e["identity"], kind)
    for m in up + down:
        if not _metric(e[m]):
            bad(m, "must be a number >= 0, 'inf' or 'nan'")
    for m in down:
        if not (isinstance(e[m], str) or e[m] <= 1):
            bad(m, "must be a fraction in [0, 1]")
    for c in counts:
        if not _count(e[c]):
            bad(c, "must be an integer >= 0")
    for k in ("candidate", "dtype", "out_dtype", "compute"):
        if not isinstance(e[k], str):
            bad(k, "must be a string")
    if not isinstance(e["params"], dict) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        for v in e["params"].values()
    ):
        bad("params", "must be an object of finite numbers")
    if kind == "quant":
        f, fc = e.get("findings"), e.get("finding_counts")
        if not isinstance(f, dict) or not isinstance(fc, dict) or set(f) != set(fc):
            bad("findings", "and 'finding_counts' must be objects with the same kinds")
        for k, ivs in f.items():
            if k not in QUANT_KINDS:
                bad(f"findings.{k}", f"is not a finding kind ({', '.join(QUANT_KINDS)})")
            if not isinstance(ivs, list) or not all(
                isinstance(iv, list)
                and len(iv) == 2
                and all(
                    isinstance(b, (int, float)) and not isinstance(b, bool) and math.isfinite(b) for b in iv
                )
                and iv[0] <= iv[1]
                for iv in ivs
            ):
                bad(f"findings.{k}", "must be a list of finite [lo, hi] intervals")
            if not _count(fc[k]):
                bad(f"finding_counts.{k}", "must be an integer >= 0")


# ------------------------------------------------------------------ comparison
def _num(v) -> float:
    return float(v) if isinstance(v, str) else (math.nan if v is None else float(v))


def tolerance_failures(a, r, show) -> list[str]:
    kind = "quant" if isinstance(r, quant_mod.QuantResult) else "blocks"
    now = entry(r)
    fails = [
        f"tolerance '{k}' cannot be checked on a {kind} audit (it takes "
        f"{', '.join(sorted(TOLERANCES[kind]))})"
        for k in sorted(set(a.tolerance) - TOLERANCES[kind])
    ]
    tol = a.tolerance
    for m in ("max_code_error", "max_elem_ulp"):
        if m in tol and m in now and not _num(now[m]) <= tol[m]:
            fails.append(f"{m} = {show(now[m])} exceeds the tolerance {show(tol[m])}")
    if (
        "correct_code_fraction" in tol
        and "correct_code_fraction" in now
        and not _num(now["correct_code_fraction"]) >= tol["correct_code_fraction"]
    ):
        fails.append(
            f"correct_code_fraction = {show(now['correct_code_fraction'])} is below the "
            f"tolerance {show(tol['correct_code_fraction'])}"
        )
    if (
        "scale_diff_blocks" in tol
        and "scale_diff_blocks" in now
        and now["scale_diff_blocks"] > tol["scale_diff_blocks"]
    ):
        fails.append(
            f"scale_diff_blocks = {now['scale_diff_blocks']} exceeds the tolerance "
            f"{show(tol['scale_diff_blocks'])}"
        )
    nans = now.get("nan_count", now.get("nan_elements", 0))
    if tol.get("nan") is False and nans:
        fails.append(f"{nans} NaN results where the tolerance allows none")
    return fails


def against_baseline(slack: float, now: dict, base: dict, show) -> tuple[list[str], list[str]]:
    fails, better = [], []
    if base.get("kind") != now["kind"]:
        return [
            f"the baseline entry is a {base.get('kind') or 'float'} audit, this is a "
            f"{now['kind']} audit; record the baseline again"
        ], []
    q = now["kind"] == "quant"
    if now["inputs"] != base.get("inputs") or now.get("elements") != base.get("elements"):
        return [
            f"the inputs changed ({base.get('inputs')} -> {now['inputs']}); the figures cannot "
            "be compared: record the baseline again"
        ], []
    up, down, counts = (QUANT_UP, QUANT_DOWN, QUANT_COUNTS) if q else (BLOCK_UP, (), BLOCK_COUNTS)
    for m in up + down:
        b, n = _num(base[m]), _num(now[m])
        if math.isnan(b) and math.isnan(n):
            continue
        sign = 1 if m in up else -1
        if math.isnan(b):
            fails.append(
                f"{m} = {show(n)} has no baseline value (NaN when recorded); record the baseline again"
            )
        elif math.isnan(n) or sign * (n - b) > slack * abs(b) + 1e-300:
            fails.append(f"{m} got worse: {show(b, n)}")
        elif sign * (b - n) > slack * abs(b):
            better.append(f"{m} improved: {show(b, n)}")
    f, b = compare_counts(counts, now, base)
    fails += f
    better += b
    if q:
        f, b = compare_findings(now, base)
        fails += f
        better += b
        w = now.get("worst")
        if fails and w:
            fails.append(
                f"worst input x = {w['x']} (code {w['x_code']}): code {w['got']}, correct {w['want']}"
            )
    else:
        w = now.get("worst_block")
        if fails and w:
            where = (
                f"block {w['index']}"
                if "index" in w
                else f"x = {w.get('x')} paired with {w.get('pair_input')}"
            )
            fails.append(
                f"worst block: {where}, {show(w['max_elem_ulp'])} element ULP, scale "
                f"{show(w['scale_candidate'])} (reference {show(w['scale_ref'])})"
            )
    return fails, better
