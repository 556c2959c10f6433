"""The user-facing exception hierarchy.

Every error a user can cause (an unknown name, a bad range, a malformed file, a
function of theirs that raises) is an :class:`ActauditError`.  The CLI turns it
into one line on stderr and exit code 2; the Python API lets it propagate.
"""

from __future__ import annotations


class ActauditError(Exception):
    """Base class of every error caused by the user's input. Exit code 2."""

    exit_code = 2


class UnknownNameError(ActauditError):
    """An unknown candidate, family, reference or format name."""


class BadRangeError(ActauditError):
    """An input range that is malformed, empty, reversed or has NaN bounds."""


class BadParameterError(ActauditError):
    """A candidate parameter that is unknown or not a number."""


class BadOptionError(ActauditError):
    """Options that conflict or make no sense together."""


class BadFileError(ActauditError):
    """A file (cache, spec, baseline, dump) that cannot be read or is malformed."""


class ExecutorError(ActauditError):
    """A distributed executor that cannot be reached, or a checkpoint that does not fit."""
