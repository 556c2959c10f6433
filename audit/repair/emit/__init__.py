"""Emitters of fitted kernels: one operation list (:mod:`audit.repair.emit.ir`), printed for C,
CUDA, Triton and numpy by :func:`emit` (one statement printer for all four,
:mod:`audit.repair.emit.printer`; each target gives its spellings)."""

from __future__ import annotations

from audit.repair.emit import c, cuda, numpy, triton
from audit.repair.emit.ir import Program

TARGETS = {
    "c": (c, ".c"),
    "cuda": (cuda, ".cu"),
    "triton": (triton, "_triton.py"),
    "numpy": (numpy, "_numpy.py"),
}


def emit(prog: Program, target: str, header: str = "") -> str:
    """The source of ``prog`` for ``target`` (c, cuda, triton, numpy)."""
    if target not in TARGETS:
        from audit.errors import BadOptionError

        raise BadOptionError(f"--emit: one of {', '.join(TARGETS)}; not {target}")
    return TARGETS[target][0].source(prog, header)


def suffix(target: str) -> str:
    return TARGETS[target][1]
