"""How a precondition guard aborts a Delta operation, and how its failure is recognised.

A guarded statement carries ``raise_error('SBDELTA_GUARD:<code>')`` (:func:`guard`) where a
precondition does not hold, in the SQL both Spark and DataFusion run: the operation fails and
writes nothing. :func:`guard_code` finds the code in the error either engine raises, and
:class:`GuardTripped` carries it to the caller. Which public error each code becomes is one
table, :data:`.delta.GUARD_ERRORS`.
"""

from __future__ import annotations

import re
from typing import Optional

__all__ = ["GUARD_PREFIX", "GuardTripped", "guard", "guard_code"]

GUARD_PREFIX = "SBDELTA_GUARD:"
# The marker as a failed job reports it ("RuntimeException: SBDELTA_GUARD:CODE"), not as the
# plan or SQL text of an analysis error quotes it ("raise_error(SBDELTA_GUARD:CODE, ...)"):
# a query that never ran tripped no guard.
_GUARD_RE = re.compile(r"(?<![('\"\w])" + GUARD_PREFIX + r"([A-Za-z_]+)")


class GuardTripped(Exception):
    """Internal: a precondition guard aborted a Delta operation; nothing was written."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


def guard(code: str) -> str:
    """A SQL expression that aborts the surrounding Delta operation with ``code``."""
    return f"raise_error('{GUARD_PREFIX}{code}')"


def guard_code(exc: BaseException) -> Optional[str]:
    """The guard code carried by an exception raised from a guarded operation, if any."""
    match = _GUARD_RE.search(str(exc))
    return match.group(1) if match else None
