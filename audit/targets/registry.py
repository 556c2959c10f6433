"""The candidate registry: every candidate by id.  The catalog (the package ``approximations``,
one module per family) registers its candidates on import, which ``catalog()`` does on first
use; nothing else in actaudit imports the catalog.  The registry imports no evaluation code,
so the evaluation paths (``compute``, ``semantics``) can look a candidate up as a primitive."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from audit.targets.candidates import Candidate

REGISTRY: dict[str, Candidate] = {}


def catalog() -> dict[str, Candidate]:
    """All registered candidates (importing the catalog on first use)."""
    import approximations  # noqa: F401  (registers the catalog)

    return REGISTRY
