"""Which backward candidates a ``--backward`` sweep runs (family NAME_bwd)."""

from __future__ import annotations

from audit.errors import BadOptionError
from audit.targets.candidates import Candidate, catalog, families


def backward_candidates(cands: list[Candidate]) -> list[Candidate]:
    """The backward candidates (family NAME_bwd) of the given candidates: the same variant
    where it exists (gelu.tanh -> gelu_bwd.tanh), else every backward of the family; a
    derivative candidate NAME_grad.V maps like NAME.V."""
    cat = catalog()
    fams = families()
    out: list[Candidate] = []
    for c in cands:
        fam = c.family.removesuffix("_grad")
        if c.family.endswith("_bwd"):
            b = [c]
        elif f"{fam}_bwd.{c.variant}" in cat:
            b = [cat[f"{fam}_bwd.{c.variant}"]]
        else:
            b = fams.get(f"{fam}_bwd", [])
        out.extend(x for x in b if x not in out)
    if not out:
        names = ", ".join(c.id for c in cands)
        have = sorted({c.family.removesuffix("_bwd") for c in cat.values() if c.family.endswith("_bwd")})
        raise BadOptionError(
            f"no backward candidate for {names} (backward kernels exist for: {', '.join(have)})"
        )
    return out
