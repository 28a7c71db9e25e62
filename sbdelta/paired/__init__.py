"""Paired namespaces (PAIR-1..8): a secondary namespace's backlog queues keep a sender going
while its primary fails, and the syphon moves their messages home.

Built so far: the options, backlog queue names and properties (:mod:`.options`), the failover
error table and per-entity health (:mod:`.failover`), and the backlog form of a message
(:mod:`.backlog`). The failover sender and the syphon job build on them (issue 15).
"""

from .backlog import restore, to_backlog
from .failover import BacklogRotation, EntityHealth, ErrorKind, classify
from .options import (BACKLOG_QUEUE_PROPERTIES, PairedNamespaceOptions, backlog_queue_name,
                      primary_identity)

__all__ = ["PairedNamespaceOptions", "BACKLOG_QUEUE_PROPERTIES", "backlog_queue_name",
           "primary_identity", "ErrorKind", "classify", "EntityHealth", "BacklogRotation",
           "to_backlog", "restore"]
