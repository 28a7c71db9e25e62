"""What a receiver checks before it reads an entity: that it can be received from at all
(FWD-2, PAIR-7) and that sessions are used as the entity requires (SESS-1)."""

from __future__ import annotations

from ._entity import Entity
from ._forwarding import forwards
from .exceptions import ServiceBusInvalidOperationError
from .paired.options import is_backlog_queue

__all__ = ["check_receivable", "check_session_use"]


def check_receivable(entity: Entity, sub_queue) -> None:
    """FWD-2: a queue or subscription that forwards cannot be received from; nor can a
    backlog queue of a paired namespace, whose messages only the syphon moves (a receive
    would move the frontiers under the syphon's mark, :mod:`sbdelta._store.syphon`)."""
    if sub_queue is None and entity.kind == "queue" and is_backlog_queue(entity.name):
        raise ServiceBusInvalidOperationError(
            f"{entity.label} is a backlog queue of a paired namespace: the syphon moves its "
            "messages to their destinations (jobs/syphon.py, or enable_syphon=True), so "
            "it cannot be received from (PAIR-7). Peek it, or receive from its "
            "dead-letter queue")
    if sub_queue is None and forwards(entity):
        raise ServiceBusInvalidOperationError(
            f"{entity.label} forwards its messages to '{entity.properties.forward_to}' "
            "(forward_to), so it cannot be received from (FWD-2): receive from the "
            "destination, or clear forward_to with update_"
            f"{entity.kind}. Its dead-letter queue can be received from")


def check_session_use(entity: Entity, sub_queue, session_receiver: bool) -> None:
    """SESS-1: a session entity is read only through session receivers (its dead-letter
    queue without sessions), and a session receiver only reads session entities."""
    if sub_queue is not None:
        return
    if entity.requires_session and not session_receiver:
        raise ServiceBusInvalidOperationError(
            f"{entity.label} requires sessions (requires_session=True), so it is read only "
            f"through session receivers (SESS-1): get_{entity.kind}_receiver(..., "
            "session_id=...). Its dead-letter queue is read without sessions")
    if session_receiver and not entity.requires_session:
        raise ServiceBusInvalidOperationError(
            f"{entity.label} was not created with requires_session=True: it has no "
            f"sessions to receive from; drop session_id")
