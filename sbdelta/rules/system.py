"""The ``sys.`` properties a filter or action may read, and the message columns behind them.

Rules are evaluated when a message is enqueued in a topic, over a DataFrame with the message
columns of :data:`sbdelta._store.layout.MESSAGE_FIELDS` (plus ``seq``, the sequence number,
when a rule reads ``sys.SequenceNumber``). Only the columns a rule reads are touched.

=========================  ==========================  ==========  ==================================
sys. name                  column                      kind        note
=========================  ==========================  ==========  ==================================
MessageId                  message_id                  string
CorrelationId              correlation_id              string
To                         to_address                  string
ReplyTo                    reply_to                    string
Label, Subject             subject                     string      Label is the older name
SessionId                  session_id                  string
ReplyToSessionId           reply_to_session_id         string
ContentType                content_type                string
PartitionKey               partition_key               string
TimeToLive                 time_to_live_ms             timespan    NULL when the message set none
ScheduledEnqueueTimeUtc    scheduled_enqueue_time      timestamp   NULL when not scheduled
EnqueuedTimeUtc            enqueued_time               timestamp
ExpiresAtUtc               expires_at                  timestamp   NULL when it never expires
SequenceNumber             seq                         integer
EnqueuedSequenceNumber     seq                         integer     this entity's number
Size                       size                        integer
DeliveryCount              (none)                      integer     0: a new message
LockToken                  (none)                      uuid        NULL: a new message has no lock
LockedUntilUtc             (none)                      timestamp   NULL: a new message has no lock
DeadLetterSource           (none)                      string      NULL: a new message
=========================  ==========================  ==========  ==================================

Names are case-insensitive (``sys.label`` works). Any other ``sys.`` name is an error when the
rule is created, as Service Bus refuses a non-existent system property.
"""

from __future__ import annotations

from typing import Dict, Optional

from .nodes import LONG, STRING, SystemProperty, TIMESPAN, TIMESTAMP, UUID


def _props() -> Dict[str, SystemProperty]:
    table = [
        SystemProperty("MessageId", "message_id", STRING),
        SystemProperty("CorrelationId", "correlation_id", STRING),
        SystemProperty("To", "to_address", STRING),
        SystemProperty("ReplyTo", "reply_to", STRING),
        SystemProperty("Label", "subject", STRING),
        SystemProperty("Subject", "subject", STRING),
        SystemProperty("SessionId", "session_id", STRING),
        SystemProperty("ReplyToSessionId", "reply_to_session_id", STRING),
        SystemProperty("ContentType", "content_type", STRING),
        SystemProperty("PartitionKey", "partition_key", STRING),
        SystemProperty("TimeToLive", "time_to_live_ms", TIMESPAN),
        SystemProperty("ScheduledEnqueueTimeUtc", "scheduled_enqueue_time", TIMESTAMP),
        SystemProperty("EnqueuedTimeUtc", "enqueued_time", TIMESTAMP),
        SystemProperty("ExpiresAtUtc", "expires_at", TIMESTAMP),
        SystemProperty("SequenceNumber", "seq", LONG),
        SystemProperty("EnqueuedSequenceNumber", "seq", LONG),
        SystemProperty("Size", "size", LONG),
        SystemProperty("DeliveryCount", None, LONG, 0),
        SystemProperty("LockToken", None, UUID),
        SystemProperty("LockedUntilUtc", None, TIMESTAMP),
        SystemProperty("DeadLetterSource", None, STRING),
    ]
    return {prop.name.lower(): prop for prop in table}


SYSTEM_PROPERTIES: Dict[str, SystemProperty] = _props()


def system_property(name: str) -> Optional[SystemProperty]:
    """The system property called ``name`` (any letter case), or None."""
    return SYSTEM_PROPERTIES.get(name.lower())


def system_property_names() -> str:
    """The allowed names, for error messages."""
    return ", ".join(prop.name for prop in SYSTEM_PROPERTIES.values())
