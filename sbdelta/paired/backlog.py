"""What a message looks like in a backlog queue (PAIR-4), and how the syphon restores it (PAIR-7).

Messages for many entities share one backlog queue, so the destination travels in the message:
the entity path as application property ``x-ms-path``; the session id, time to live and
scheduled enqueue time are cleared (a backlog queue has no sessions, keeps messages without
limit and delivers them at once) and carried as ``x-ms-sessionid``, ``x-ms-timetolive``
(milliseconds) and ``x-ms-scheduledenqueuetimeutc``. The source documents' table gives
``x-ms-path`` for the scheduled time too, which would overwrite the destination; sbdelta uses
its own alias for it, and says so in docs/paired.md.

Restoring counts the time to live from the original enqueue (the backlog message's enqueue
time), or from the scheduled time when there was one, so a message expires when it would have
expired had it been sent to the primary directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Dict, Optional

from .._message import ServiceBusMessage
from ..exceptions import InvalidMessageError

__all__ = ["PATH", "SESSION_ID", "TIME_TO_LIVE", "SCHEDULED", "RESERVED", "to_backlog",
           "Restored", "restore"]

PATH = "x-ms-path"
SESSION_ID = "x-ms-sessionid"
TIME_TO_LIVE = "x-ms-timetolive"
SCHEDULED = "x-ms-scheduledenqueuetimeutc"
RESERVED = (PATH, SESSION_ID, TIME_TO_LIVE, SCHEDULED)

#: Fields copied as they are between a message and its backlog form.
_KEPT = ("message_id", "partition_key", "content_type", "correlation_id", "subject", "to",
         "reply_to", "reply_to_session_id")


def to_backlog(message: ServiceBusMessage, destination: str) -> ServiceBusMessage:
    """The backlog form of ``message`` bound for entity path ``destination`` (PAIR-4).

    Raises:
        InvalidMessageError: The message already has one of the reserved application
            properties (:data:`RESERVED`): they would be lost or misread on the way back.
    """
    props: Dict[str, Any] = dict(message.application_properties or {})
    taken = sorted(key for key in props if key in RESERVED)
    if taken:
        raise InvalidMessageError(
            f"application propert{'y' if len(taken) == 1 else 'ies'} {taken} "
            f"{'is' if len(taken) == 1 else 'are'} reserved for paired namespaces (they carry "
            "a message through a backlog queue): rename them")
    props[PATH] = destination
    if message.session_id is not None:
        props[SESSION_ID] = message.session_id
    if message.time_to_live is not None:
        props[TIME_TO_LIVE] = int(message.time_to_live / timedelta(milliseconds=1))
    if message.scheduled_enqueue_time_utc is not None:
        props[SCHEDULED] = message.scheduled_enqueue_time_utc
    partition_key = message.partition_key
    fields = {name: getattr(message, name) for name in _KEPT}
    if partition_key is None and message.session_id is not None:
        fields["partition_key"] = message.session_id  # keeps one session in one partition
    return ServiceBusMessage(message.body, application_properties=props, **fields)


@dataclass(frozen=True)
class Restored:
    """A backlog message as the syphon sends it on: its destination and the message, or
    ``expired`` when its time to live ended while it waited (``message`` is then None)."""

    destination: str
    message: Optional[ServiceBusMessage]
    expired: bool = False


def restore(fields: Dict[str, Any], enqueued: datetime, now: datetime) -> Restored:
    """The message a backlog row stands for (PAIR-7).

    Args:
        fields: The backlog message's fields by ServiceBusMessage name (``body``,
            ``application_properties``, ``message_id``, ...).
        enqueued: When the message was sent (its enqueue time in the backlog queue).
        now: The syphon's broker time.

    Raises:
        InvalidMessageError: The row has no ``x-ms-path`` (it was not put there by a paired
            sender), or a reserved property of the wrong type.
    """
    props = dict(fields.get("application_properties") or {})
    destination = props.pop(PATH, None)
    if not isinstance(destination, str) or not destination:
        raise InvalidMessageError(
            f"a backlog message needs the application property {PATH!r} naming its "
            f"destination entity, got {destination!r}")
    session_id = props.pop(SESSION_ID, None)
    ttl_ms = props.pop(TIME_TO_LIVE, None)
    scheduled = props.pop(SCHEDULED, None)
    if session_id is not None and not isinstance(session_id, str):
        raise InvalidMessageError(f"{SESSION_ID} must be a str, got {session_id!r}")
    if ttl_ms is not None and (isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int)):
        raise InvalidMessageError(f"{TIME_TO_LIVE} must be milliseconds (int), got {ttl_ms!r}")
    if scheduled is not None and not isinstance(scheduled, datetime):
        raise InvalidMessageError(f"{SCHEDULED} must be a datetime, got {scheduled!r}")
    ttl = None if ttl_ms is None else timedelta(milliseconds=ttl_ms)
    if scheduled is not None and scheduled > now:
        keep_schedule = scheduled  # still ahead: the primary schedules it; TTL counts from it
    else:
        keep_schedule = None
        if ttl is not None:  # counted from when it became (or would have become) visible
            ttl = (scheduled or enqueued) + ttl - now
            if ttl <= timedelta(0):
                return Restored(destination, None, expired=True)
    kept = {name: fields.get(name) for name in _KEPT}
    if session_id is not None and kept.get("partition_key") == session_id:
        kept["partition_key"] = None  # set by to_backlog; the session id decides again
    return Restored(destination, ServiceBusMessage(
        fields.get("body"), application_properties=props or None, session_id=session_id,
        time_to_live=ttl, scheduled_enqueue_time_utc=keep_schedule, **kept))
