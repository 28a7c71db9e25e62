"""Between an :class:`~sbdelta.amqp.AmqpAnnotatedMessage` and a message's fields (issue 17).

Pure Python. :func:`send_fields` maps an AMQP message to the keyword arguments of a
``ServiceBusMessage`` (the mapping the Service Bus service applies to a message sent over AMQP);
:func:`amqp_view` builds the AMQP view of a message from its public attributes (its
``raw_amqp_message``). The table of both is in docs/from-azure-servicebus.md.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any, Dict, Optional

from sbdelta._amqp_body import body_of
from sbdelta.amqp import (DEAD_LETTER_SOURCE, ENQUEUED_TIME, LOCKED_UNTIL, PARTITION_KEY,
                          SCHEDULED_ENQUEUE_TIME, SEQUENCE_NUMBER, AmqpAnnotatedMessage,
                          AmqpMessageBodyType, epoch_ms)
from sbdelta.exceptions import MessageTypeError

#: AMQP properties and the message fields they are (the rest are not stored: see the docs).
PROPERTY_FIELDS = {"message_id": "message_id", "to": "to", "subject": "subject",
                   "reply_to": "reply_to", "correlation_id": "correlation_id",
                   "content_type": "content_type", "group_id": "session_id",
                   "reply_to_group_id": "reply_to_session_id"}


def _text(where: str, value: Any) -> Optional[str]:
    """An AMQP string field as a str: str, UTF-8 bytes, or an id (UUID, int) as text."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise MessageTypeError(f"{where} is bytes that are not UTF-8 text") from None
    if isinstance(value, (uuid.UUID, int)) and not isinstance(value, bool):
        return str(value)
    raise MessageTypeError(f"{where} has type {type(value).__name__}; allowed: str, UTF-8 "
                           "bytes (a message id also UUID or int)")


def _annotation(annotations: Optional[dict], key: bytes) -> Any:
    if not annotations:
        return None
    return annotations.get(key, annotations.get(key.decode("ascii")))


def send_fields(message: AmqpAnnotatedMessage) -> Dict[str, Any]:
    """The ``ServiceBusMessage`` keyword arguments of ``message`` (``body``: a DATA body's
    sections joined; None for a VALUE or SEQUENCE body, which ``sbdelta._message.from_amqp``
    sets); MessageTypeError when a field has a type sbdelta cannot store."""
    fields: Dict[str, Any] = {"body": None}
    if message.body_type is AmqpMessageBodyType.DATA:
        sections = list(message.body)
        for index, section in enumerate(sections):
            if not isinstance(section, (bytes, bytearray, memoryview)):
                raise MessageTypeError(
                    f"data_body section {index} has type {type(section).__name__}; allowed: "
                    "str (sent as UTF-8) or bytes")
        fields["body"] = b"".join(bytes(s) for s in sections)
    properties = message.properties
    if properties is not None:
        for amqp_name, field in PROPERTY_FIELDS.items():
            value = _text(f"properties.{amqp_name}", properties.get(amqp_name))
            if value is not None:
                fields[field] = value
    header = message.header
    if header is not None and header.time_to_live is not None:
        ttl = header.time_to_live
        if isinstance(ttl, bool) or not isinstance(ttl, (int, float)):
            raise MessageTypeError(f"header.time_to_live has type {type(ttl).__name__}; "
                                   "allowed: milliseconds (int)")
        fields["time_to_live"] = ttl / 1000
    key = _annotation(message.annotations, PARTITION_KEY)
    if key is not None:
        fields["partition_key"] = _text("annotations['x-opt-partition-key']", key)
    when = _annotation(message.annotations, SCHEDULED_ENQUEUE_TIME)
    if when is not None:
        if isinstance(when, (int, float)) and not isinstance(when, bool):
            when = datetime.fromtimestamp(when / 1000, tz=timezone.utc)
        fields["scheduled_enqueue_time_utc"] = when  # checked as the message field is
    if message.application_properties:
        fields["application_properties"] = {
            _text("an application_properties key", k): v
            for k, v in message.application_properties.items()}
    return fields


def amqp_view(message: Any) -> AmqpAnnotatedMessage:
    """The AMQP view of a message (its public attributes; broker properties when it was
    received): its body (one DATA section, or its VALUE or SEQUENCE body), the header's
    delivery count and time to live, the properties, and the annotations Service Bus sets."""
    properties = {amqp_name: getattr(message, field)
                  for amqp_name, field in PROPERTY_FIELDS.items()}
    ttl = message.time_to_live
    header = {"time_to_live": None if ttl is None else int(ttl.total_seconds() * 1000),
              "delivery_count": getattr(message, "delivery_count", None)}
    annotations: Dict[bytes, Any] = {}
    for key, value in ((PARTITION_KEY, message.partition_key),
                       (SCHEDULED_ENQUEUE_TIME, message.scheduled_enqueue_time_utc),
                       (SEQUENCE_NUMBER, getattr(message, "sequence_number", None)),
                       (ENQUEUED_TIME, getattr(message, "enqueued_time_utc", None)),
                       (LOCKED_UNTIL, getattr(message, "locked_until_utc", None)),
                       (DEAD_LETTER_SOURCE, getattr(message, "dead_letter_source", None))):
        if value is not None:
            annotations[key] = epoch_ms(value) if isinstance(value, datetime) else value
    expires = getattr(message, "expires_at_utc", None)
    if expires is not None:
        properties["absolute_expiry_time"] = epoch_ms(expires)
    enqueued = getattr(message, "enqueued_time_utc", None)
    if enqueued is not None:
        properties["creation_time"] = epoch_ms(enqueued)
    form, body = body_of(message)
    keyword = {AmqpMessageBodyType.DATA: "data_body", AmqpMessageBodyType.VALUE: "value_body",
               AmqpMessageBodyType.SEQUENCE: "sequence_body"}[form]
    return AmqpAnnotatedMessage(
        **{keyword: [bytes(body)] if form is AmqpMessageBodyType.DATA else body},
        header=header, properties=properties,
        application_properties=(None if message.application_properties is None
                                else dict(message.application_properties)),
        annotations=annotations or None)
