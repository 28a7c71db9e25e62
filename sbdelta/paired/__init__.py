"""Paired namespaces (PAIR-1..8): a secondary namespace's backlog queues keep a sender going
while its primary fails, and the syphon moves their messages home.

The options, backlog queue names and properties (:mod:`.options`), the failover error table
and per-entity health (:mod:`.failover`), the backlog form of a message and its restoration
(:mod:`.backlog`), the failover sender (:mod:`.sender`) and the syphon (:mod:`.syphon`).
"""

from .backlog import to_backlog
from .failover import BacklogRotation, EntityHealth, ErrorKind, classify
from .options import (BACKLOG_QUEUE_PROPERTIES, PairedNamespaceOptions, backlog_queue_name,
                      primary_identity)

__all__ = ["PairedNamespaceOptions", "BACKLOG_QUEUE_PROPERTIES", "backlog_queue_name",
           "primary_identity", "ErrorKind", "classify", "EntityHealth", "BacklogRotation",
           "to_backlog"]
