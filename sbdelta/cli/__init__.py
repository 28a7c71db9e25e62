"""The ``sbdelta`` command line (click; tables by rich, ``--json`` for scripts).

Commands by module: :mod:`.entities` (apply, list, show), :mod:`.messages` (stats, peek, send,
receive, purge, dlq resubmit), :mod:`.maintenance` (sweep, compact, syphon), :mod:`.runtime`
(setup, spark-submit-args). ``python -m sbdelta.cli`` is ``sbdelta``.
"""

from . import entities, maintenance, messages, runtime  # importing them registers commands
from .base import DEFAULT_NAMESPACE, main

__all__ = ["main", "DEFAULT_NAMESPACE", "entities", "maintenance", "messages", "runtime"]
