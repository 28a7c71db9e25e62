"""Batch maintenance over a namespace: the expiry sweep, table compaction, idle-entity deletion,
forwarding catch-up.

Each function takes the namespace plus keyword options, including ``clock=`` like the clients,
and returns a report object that prints as a short table. They are safe to run while senders,
receivers and other copies of the same job are active: every change is the same guarded MERGE
the receivers use, so a concurrent change makes the sweep redo its plan, never double-apply it.
"""

from .compaction import (DEFAULT_RETAIN_HOURS, MIN_RETAIN_HOURS, CompactReport,
                         EntityCompaction, compact)
from .expiry import DEFAULT_SWEEP_BATCH, EntityExpiry, ExpiryReport, expire_messages
from .forwarding import ForwardReport, Moved, forward_messages
from .idle import EntityIdleness, IdleReport, delete_idle_entities

__all__ = ["ExpiryReport", "EntityExpiry", "expire_messages", "DEFAULT_SWEEP_BATCH",
           "CompactReport", "EntityCompaction", "compact", "DEFAULT_RETAIN_HOURS",
           "MIN_RETAIN_HOURS", "IdleReport", "EntityIdleness", "delete_idle_entities",
           "ForwardReport", "Moved", "forward_messages"]
