"""Which engine runs what on a table: the ``engine`` option of the clients and jobs.

``engine`` is ``"auto"`` (the default), ``"spark"`` or ``"delta-rs"``; a client given none
takes ``$SBDELTA_ENGINE``, else ``auto``. Any other value raises ConfigurationError when the
client (or job) starts, before anything is read or written.

- ``spark``: Spark reads and writes everything.
- ``auto``: on a local table (a ``file:`` namespace, ``deltalake`` installed) delta-rs answers
  the reads that only decide what to plan (a receive's statistics, inbox counts, the registry,
  "anything to VACUUM/OPTIMIZE"), commits ``send_messages`` appends, settles single messages,
  plans and commits a queue's list receives and runs the MERGEs the driver builds (list
  settlements, cancels, session locks, small dead-letter moves); Spark runs the DataFrame
  forms, the jobs, and what has no delta-rs path yet (docs/engines.md). On a table delta-rs
  cannot work on (a remote one, or ``deltalake`` missing on Python < 3.10) Spark runs it all.
- ``delta-rs``: as ``auto`` on a local namespace; a namespace delta-rs cannot work on is
  refused (ConfigurationError) instead of handed to Spark.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional, Union

from ..exceptions import ConfigurationError
from . import rs

__all__ = ["ENGINES", "Engine", "resolve_engine"]

#: The values the ``engine`` option and ``$SBDELTA_ENGINE`` accept.
ENGINES = ("auto", "spark", "delta-rs")


@dataclass(frozen=True)
class Engine:
    """A resolved ``engine`` setting; its methods say which engine works on a table path."""

    name: str = "auto"

    def local(self, path: Optional[str]) -> Optional[str]:
        """The local path of ``path`` when delta-rs may work on it at all, else None."""
        return None if self.name == "spark" else rs.local_table(path)

    def reads(self, path: Optional[str]) -> bool:
        """delta-rs answers planning reads of ``path`` (Spark when it cannot)."""
        return self.local(path) is not None

    def appends(self, path: Optional[str]) -> bool:
        """delta-rs commits blind appends (sends) to ``path``."""
        return self.local(path) is not None

    def settles(self, path: Optional[str]) -> bool:
        """delta-rs settles single messages and runs driver-built MERGEs on ``path``."""
        return self.local(path) is not None

    def check(self, root: str) -> None:
        """Refuse ``delta-rs`` on a namespace root delta-rs cannot work on.

        Raises:
            ConfigurationError: ``engine="delta-rs"`` and ``root`` is not a local folder, or
                ``deltalake`` is not installed.
        """
        if self.name != "delta-rs" or rs.local_table(root) is not None:
            return
        why = ("the deltalake package is not installed (pip install deltalake; it needs "
               "Python 3.10+)" if rs.local_table("file:/") is None else
               "delta-rs works only on local namespaces (file: paths) in this version")
        raise ConfigurationError(
            f"engine='delta-rs' cannot serve namespace {root}: {why}. Use engine='auto' "
            "(delta-rs where it can, Spark elsewhere) or engine='spark'")


def resolve_engine(value: Union[str, Engine, None] = None) -> Engine:
    """The engine setting ``value``, or ``$SBDELTA_ENGINE`` when it is None, else ``auto``.

    Raises:
        ConfigurationError: the value is not one of :data:`ENGINES`.
    """
    if isinstance(value, Engine):
        return value
    source = "engine"
    if value is None:
        value, source = os.environ.get("SBDELTA_ENGINE", ""), "SBDELTA_ENGINE"
        if not value.strip():
            return Engine("auto")
    if not isinstance(value, str):
        raise ConfigurationError(
            f"{source} must be a string, one of {', '.join(map(repr, ENGINES))}; got "
            f"{type(value).__name__}")
    name = value.strip().lower()
    if name not in ENGINES:
        raise ConfigurationError(
            f"{source}={value!r} is not an engine: use one of {', '.join(map(repr, ENGINES))} "
            "('auto': delta-rs for single-message and list operations on local tables, Spark "
            "for DataFrame forms, jobs and remote tables; 'spark': Spark for everything; "
            "'delta-rs': as auto, refusing a namespace delta-rs cannot serve)")
    return Engine(name)
