"""Messages as azure-servicebus models them: what is sent, what is received, and batches.

Everything here is pure Python; nothing touches Spark. A :class:`ServiceBusMessage` checks its
fields (:mod:`sbdelta._message_fields`) when built and whenever a field is set, so a message that
exists can be stored. Application properties are stored as type-preserving JSON
(:mod:`sbdelta._app_properties`).
"""

from __future__ import annotations

import uuid
import warnings
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from typing import Any, Dict, List, Mapping, Optional, Union

from sbdelta._app_properties import decode_properties, encode_properties
from sbdelta._clock import utc
from sbdelta._message_fields import (SYSTEM_STRING_FIELDS, check_body, check_moment,
                                     check_part_2, check_properties, check_string,
                                     check_ttl)
from sbdelta._size import byte_length, message_size
from sbdelta._amqp_body import body_of, decode_body, encode_body, stored_body
from sbdelta._amqp_fields import amqp_view, send_fields
from sbdelta._legacy_message import DEPRECATION, LegacyMessage
from sbdelta.amqp import AmqpAnnotatedMessage, AmqpMessageBodyType
from sbdelta.exceptions import InvalidMessageError, MessageTypeError

__all__ = [
    "ServiceBusReceiveMode",
    "ServiceBusSubQueue",
    "ServiceBusSessionFilter",
    "NEXT_AVAILABLE_SESSION",
    "ServiceBusMessageState",
    "MessageTypeError",
    "InvalidMessageError",
    "ServiceBusMessage",
    "ServiceBusReceivedMessage",
    "from_amqp",
    "with_body",
]


_REPR_LIMIT = 1024


class ServiceBusReceiveMode(str, Enum):
    """How a receiver takes messages: locked until settled, or deleted on receipt."""

    PEEK_LOCK = "peeklock"
    RECEIVE_AND_DELETE = "receiveanddelete"


class ServiceBusSubQueue(str, Enum):
    """The sub-queues of a queue or subscription."""

    DEAD_LETTER = "deadletter"
    TRANSFER_DEAD_LETTER = "transferdeadletter"


class ServiceBusSessionFilter(int, Enum):
    """Which session a session receiver opens when it is not given a session id."""

    NEXT_AVAILABLE = 0


#: ``session_id=NEXT_AVAILABLE_SESSION``: a session receiver that locks the free session with
#: the oldest deliverable message (SESS-3), as in azure-servicebus.
NEXT_AVAILABLE_SESSION = ServiceBusSessionFilter.NEXT_AVAILABLE


class ServiceBusMessageState(int, Enum):
    """Where a stored message stands: receivable, set aside by defer, or not yet enqueued."""

    ACTIVE = 0
    DEFERRED = 1
    SCHEDULED = 2


def _string_property(field: str, doc: str) -> property:
    attr = "_" + field

    def fget(self: ServiceBusMessage) -> Optional[str]:
        return getattr(self, attr)

    def fset(self: ServiceBusMessage, value: Optional[str]) -> None:
        value = check_string(field, value)
        if field == "session_id":
            check_part_2(value, self._partition_key)
        elif field == "partition_key":
            check_part_2(self._session_id, value)
        setattr(self, attr, value)

    return property(fget, fset, doc=doc)


# --- messages -------------------------------------------------------------------------------


class ServiceBusMessage:
    """A message to send: a body, application properties and system properties.

    Every field is checked here and again whenever it is set, as in azure-servicebus.

    Args:
        body: ``str`` (stored as UTF-8), ``bytes``, ``bytearray``, ``memoryview`` or ``None``
            (an empty body).
        application_properties: A dict with ``str`` keys and values of type str, int (64-bit),
            float, bool, bytes, datetime (naive taken as UTC), uuid.UUID or None.
        session_id: 1 to 128 characters; must equal ``partition_key`` when both are set (PART-2).
        message_id: 1 to 128 characters.
        partition_key: 1 to 128 characters.
        time_to_live: A timedelta, an ISO-8601 duration string or seconds; longer than zero.
        scheduled_enqueue_time_utc: When the message becomes visible (naive taken as UTC).
        content_type, correlation_id, subject, to, reply_to, reply_to_session_id: Any str.

    Raises:
        MessageTypeError: A field has a type that is not allowed.
        InvalidMessageError: A field's value is out of range (empty or too long id, TTL <= 0,
            integer property beyond 64 bits).
        ServiceBusInvalidOperationError: session_id and partition_key differ (PART-2).
    """

    def __init__(
        self,
        body: Union[str, bytes, bytearray, memoryview, None],
        *,
        application_properties: Optional[Mapping[str, Any]] = None,
        session_id: Optional[str] = None,
        message_id: Optional[str] = None,
        partition_key: Optional[str] = None,
        time_to_live: Union[timedelta, str, int, float, None] = None,
        scheduled_enqueue_time_utc: Optional[datetime] = None,
        content_type: Optional[str] = None,
        correlation_id: Optional[str] = None,
        subject: Optional[str] = None,
        to: Optional[str] = None,
        reply_to: Optional[str] = None,
        reply_to_session_id: Optional[str] = None,
    ) -> None:
        self._body = check_body(body)
        for field in SYSTEM_STRING_FIELDS:
            setattr(self, "_" + field, None)
        self.application_properties = application_properties
        self.session_id = session_id
        self.message_id = message_id
        self.partition_key = partition_key
        self.time_to_live = time_to_live
        self.scheduled_enqueue_time_utc = scheduled_enqueue_time_utc
        self.content_type = content_type
        self.correlation_id = correlation_id
        self.subject = subject
        self.to = to
        self.reply_to = reply_to
        self.reply_to_session_id = reply_to_session_id

    #: The AMQP body form; only a message sent as an AmqpAnnotatedMessage (:func:`from_amqp`)
    #: or received as one has another than DATA.
    _body_type = AmqpMessageBodyType.DATA

    @property
    def body(self) -> Any:
        """A DATA body as bytes (a ``str`` body is its UTF-8 encoding); as in the SDK,
        iterating it gives its data sections (one: the whole body), so ``b"".join(
        message.body)`` is the body too. A VALUE body: the value; a SEQUENCE body: an iterator
        over its sections (lists), as the SDK gives them (see :attr:`body_type`)."""
        if self._body_type is AmqpMessageBodyType.SEQUENCE:
            return iter(self._body)
        return self._body

    @property
    def body_type(self) -> AmqpMessageBodyType:
        """The AMQP body form: DATA (bytes), unless the message was sent as an
        ``AmqpAnnotatedMessage`` with a VALUE or SEQUENCE body."""
        return self._body_type

    @property
    def raw_amqp_message(self) -> AmqpAnnotatedMessage:
        """The message as AMQP sections (:class:`sbdelta.amqp.AmqpAnnotatedMessage`): one DATA
        section, the header's time to live and delivery count, the properties, and the
        annotations Service Bus sets (sequence number, enqueued time, lock end, partition key,
        schedule). A copy: changing it does not change the message."""
        return amqp_view(self)

    @property
    def message(self) -> LegacyMessage:
        """Deprecated, as in azure-servicebus (it warns so): a uamqp-shaped view of the
        message (:mod:`sbdelta._legacy_message`). Read :attr:`raw_amqp_message` instead."""
        warnings.warn(DEPRECATION, DeprecationWarning, stacklevel=2)
        return self._legacy()

    def _legacy(self) -> LegacyMessage:
        return LegacyMessage(self.raw_amqp_message)

    @property
    def application_properties(self) -> Optional[Dict[str, Any]]:
        """User properties (a checked copy of what was set; datetimes as aware UTC), or None."""
        return self._application_properties

    @application_properties.setter
    def application_properties(self, value: Optional[Mapping[str, Any]]) -> None:
        self._application_properties = check_properties(value)

    session_id = _string_property(
        "session_id", "The session this message belongs to (1 to 128 characters), or None.")
    message_id = _string_property(
        "message_id", "The id used by duplicate detection (1 to 128 characters), or None.")
    partition_key = _string_property(
        "partition_key", "Chooses the partition (1 to 128 characters; equal to session_id "
        "when both are set, PART-2), or None.")
    content_type = _string_property("content_type", "The body's content type, or None.")
    correlation_id = _string_property("correlation_id", "The correlation id, or None.")
    subject = _string_property("subject", "An application-specific label, or None.")
    to = _string_property("to", "The address the message is meant for, or None.")
    reply_to = _string_property("reply_to", "The entity to reply to, or None.")
    reply_to_session_id = _string_property(
        "reply_to_session_id", "The session to reply to, or None.")

    @property
    def time_to_live(self) -> Optional[timedelta]:
        """How long the message lives after enqueueing; None uses the entity's default."""
        return self._time_to_live

    @time_to_live.setter
    def time_to_live(self, value: Union[timedelta, str, int, float, None]) -> None:
        self._time_to_live = check_ttl(value)

    @property
    def scheduled_enqueue_time_utc(self) -> Optional[datetime]:
        """When the message becomes visible (aware UTC), or None for "at once"."""
        return self._scheduled_enqueue_time_utc

    @scheduled_enqueue_time_utc.setter
    def scheduled_enqueue_time_utc(self, value: Optional[datetime]) -> None:
        self._scheduled_enqueue_time_utc = check_moment("scheduled_enqueue_time_utc", value)

    @property
    def size_in_bytes(self) -> int:
        """The size checked against the entity's ``max_message_size_in_kilobytes`` (SEND-5).

        Body + application properties (their stored JSON text) + every set system string
        property + a fixed header allowance: the one rule of :mod:`sbdelta._size`, which
        ``send_messages``, ``send_dataframe`` and batches all apply.
        """
        return message_size(byte_length, stored_body(self),
                            encode_properties(self.application_properties),
                            [getattr(self, name) for name in SYSTEM_STRING_FIELDS])

    def __str__(self) -> str:
        if self._body_type is not AmqpMessageBodyType.DATA:
            return str(self._body)
        try:
            return self._body.decode("utf-8")
        except UnicodeDecodeError:
            return str(self._body)

    def _repr_fields(self) -> List[str]:
        return [
            f"body={self}",
            f"application_properties={self.application_properties}",
            f"session_id={self.session_id}",
            f"message_id={self.message_id}",
            f"content_type={self.content_type}",
            f"correlation_id={self.correlation_id}",
            f"to={self.to}",
            f"reply_to={self.reply_to}",
            f"reply_to_session_id={self.reply_to_session_id}",
            f"subject={self.subject}",
            f"time_to_live={self.time_to_live}",
            f"partition_key={self.partition_key}",
            f"scheduled_enqueue_time_utc={self.scheduled_enqueue_time_utc}",
        ]

    def __repr__(self) -> str:
        text = f"{type(self).__name__}({', '.join(self._repr_fields())})"
        return text[:_REPR_LIMIT]


class ServiceBusReceivedMessage(ServiceBusMessage):
    """A message handed out by a receiver (or a peek), with its broker-assigned properties.

    Built only by :meth:`_from_fields`. Its message fields can still be set (to send it on), as
    in azure-servicebus; the broker properties are read-only.
    """

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise TypeError("ServiceBusReceivedMessage is built by receivers only "
                        "(ServiceBusReceivedMessage._from_fields); send a ServiceBusMessage")

    @classmethod
    def _from_fields(
        cls,
        *,
        sequence_number: int,
        body: Union[str, bytes, bytearray, memoryview, None] = None,
        body_type: Optional[str] = None,
        application_properties: Union[Mapping[str, Any], str, None] = None,
        session_id: Optional[str] = None,
        message_id: Optional[str] = None,
        partition_key: Optional[str] = None,
        time_to_live: Optional[timedelta] = None,
        scheduled_enqueue_time_utc: Optional[datetime] = None,
        content_type: Optional[str] = None,
        correlation_id: Optional[str] = None,
        subject: Optional[str] = None,
        to: Optional[str] = None,
        reply_to: Optional[str] = None,
        reply_to_session_id: Optional[str] = None,
        enqueued_time_utc: Optional[datetime] = None,
        expires_at_utc: Optional[datetime] = None,
        locked_until_utc: Optional[datetime] = None,
        lock_token: Union[str, uuid.UUID, None] = None,
        delivery_count: int = 0,
        dead_letter_reason: Optional[str] = None,
        dead_letter_error_description: Optional[str] = None,
        dead_letter_source: Optional[str] = None,
        state: Union[ServiceBusMessageState, int] = ServiceBusMessageState.ACTIVE,
        receive_mode: Union[ServiceBusReceiveMode, str] = ServiceBusReceiveMode.PEEK_LOCK,
        receiver: object = None,
        peeked: bool = False,
    ) -> ServiceBusReceivedMessage:
        """Build a received message from stored fields, without the send-side checks.

        ``application_properties`` may be the stored JSON text (see :func:`decode_properties`);
        ``body_type`` is the stored body form (:func:`sbdelta._amqp_body.decode_body`).
        Datetimes must be aware (convert Spark TIMESTAMPs with ``_clock.from_spark``).
        ``expires_at_utc`` defaults to ``enqueued_time_utc + time_to_live``.
        """
        msg = object.__new__(cls)
        form, body = decode_body(body_type, check_body(body))
        if form is not AmqpMessageBodyType.DATA:
            msg._body_type = form
        msg._body = body
        if isinstance(application_properties, str):
            application_properties = decode_properties(application_properties)
        msg._application_properties = (None if application_properties is None
                                       else dict(application_properties))
        msg._session_id = session_id
        msg._message_id = message_id
        msg._partition_key = partition_key
        msg._content_type = content_type
        msg._correlation_id = correlation_id
        msg._subject = subject
        msg._to = to
        msg._reply_to = reply_to
        msg._reply_to_session_id = reply_to_session_id
        msg._time_to_live = time_to_live
        msg._scheduled_enqueue_time_utc = _opt_utc(scheduled_enqueue_time_utc)
        msg._sequence_number = int(sequence_number)
        msg._enqueued_time_utc = _opt_utc(enqueued_time_utc)
        if expires_at_utc is None and enqueued_time_utc is not None and time_to_live is not None:
            try:
                expires_at_utc = enqueued_time_utc + time_to_live
            except OverflowError:
                expires_at_utc = None
        msg._expires_at_utc = _opt_utc(expires_at_utc)
        msg._lock_token = None
        msg._locked_until_utc = None
        msg._set_lock(lock_token, locked_until_utc)
        msg._delivery_count = int(delivery_count)
        msg._dead_letter_reason = dead_letter_reason
        msg._dead_letter_error_description = dead_letter_error_description
        msg._dead_letter_source = dead_letter_source
        msg._state = ServiceBusMessageState(state)
        msg._receive_mode = ServiceBusReceiveMode(receive_mode)
        msg._receiver = receiver
        msg._peeked = bool(peeked)
        msg._settled = False
        # Why an AutoLockRenewer stopped renewing this message (AutoLockRenewTimeout or
        # AutoLockRenewFailed), as azure-servicebus's attribute; None while nothing happened.
        msg.auto_renew_error = None
        return msg

    def _set_lock(self, lock_token: Union[str, uuid.UUID, None],
                  locked_until: Optional[datetime]) -> None:
        """Record the lock this receiver holds (or ``None, None`` when there is none)."""
        self._lock_token = None if lock_token is None else str(lock_token)
        self._locked_until_utc = _opt_utc(locked_until)

    def _legacy(self) -> LegacyMessage:
        locked = holds_lock(self) and self._receiver is not None
        return LegacyMessage(self.raw_amqp_message, received=True,
                             receiver=self._receiver if locked else None, source=self,
                             settled=lambda: self._settled)

    @property
    def sequence_number(self) -> int:
        """The unique, increasing number the broker gave the message."""
        return self._sequence_number

    @property
    def enqueued_sequence_number(self) -> int:
        """The same as :attr:`sequence_number`. A forwarded message is numbered anew by each
        entity it reaches; the number it had in the source is not kept."""
        return self._sequence_number

    @property
    def enqueued_time_utc(self) -> Optional[datetime]:
        """When the message was enqueued (aware UTC)."""
        return self._enqueued_time_utc

    @property
    def expires_at_utc(self) -> Optional[datetime]:
        """When the message expires (aware UTC), or None if it never does."""
        return self._expires_at_utc

    @property
    def locked_until_utc(self) -> Optional[datetime]:
        """When this receiver's lock ends (aware UTC); None when peeked or received-and-deleted."""
        return self._locked_until_utc

    @property
    def lock_token(self) -> Optional[str]:
        """The lock's token; None when peeked or received-and-deleted."""
        return self._lock_token

    @property
    def delivery_count(self) -> int:
        """How many times the message was handed out under a lock."""
        return self._delivery_count

    @property
    def dead_letter_reason(self) -> Optional[str]:
        """Why the message was dead-lettered, or None."""
        return self._dead_letter_reason

    @property
    def dead_letter_error_description(self) -> Optional[str]:
        """The dead-lettering description, or None."""
        return self._dead_letter_error_description

    @property
    def dead_letter_source(self) -> Optional[str]:
        """The entity the message was dead-lettered from, or None."""
        return self._dead_letter_source

    @property
    def state(self) -> ServiceBusMessageState:
        """ACTIVE, DEFERRED or SCHEDULED."""
        return self._state

    def _repr_fields(self) -> List[str]:
        return super()._repr_fields() + [
            f"dead_letter_error_description={self.dead_letter_error_description}",
            f"dead_letter_reason={self.dead_letter_reason}",
            f"dead_letter_source={self.dead_letter_source}",
            f"delivery_count={self.delivery_count}",
            f"enqueued_sequence_number={self.enqueued_sequence_number}",
            f"enqueued_time_utc={self.enqueued_time_utc}",
            f"expires_at_utc={self.expires_at_utc}",
            f"sequence_number={self.sequence_number}",
            f"lock_token={self.lock_token}",
            f"locked_until_utc={self.locked_until_utc}",
            f"state={self.state.name}",
        ]


def _opt_utc(moment: Optional[datetime]) -> Optional[datetime]:
    return None if moment is None else utc(moment)


def from_amqp(message: AmqpAnnotatedMessage) -> ServiceBusMessage:
    """The ServiceBusMessage an AmqpAnnotatedMessage is sent as (its sections mapped onto the
    message's fields, its body in its form); refused (MessageTypeError, InvalidMessageError)
    when a field or the body cannot be stored."""
    sent = ServiceBusMessage(**send_fields(message))
    return sent if message.body_type is AmqpMessageBodyType.DATA else with_body(
        sent, *body_of(message))


def with_body(message: ServiceBusMessage, form: AmqpMessageBodyType,
              body: Any) -> ServiceBusMessage:
    """``message`` with the body ``body`` of form ``form`` (as :func:`body_of` gives them
    from another message). A DATA body is checked as ``ServiceBusMessage(body)`` checks it;
    a VALUE or SEQUENCE body must be storable."""
    if form is AmqpMessageBodyType.DATA:
        message._body = check_body(body)
    else:
        encode_body(form, body)  # refused now, before any send, if it cannot be stored
        message._body = body
    message._body_type = form
    return message


# -- what a receiver records on the messages it hands out (sbdelta/_receiver.py) ---------------
def received_message(*, receiver: object, peeked: bool,
                     receive_mode: Union[ServiceBusReceiveMode, str],
                     lock_acquired_at: datetime, **fields: Any) -> ServiceBusReceivedMessage:
    """A message as ``receiver`` hands it out: stored ``fields`` (see
    ``ServiceBusReceivedMessage._from_fields``), who received it, how, and when its lock was
    taken (SETTLE-7 compares that with the entity's last update)."""
    message = ServiceBusReceivedMessage._from_fields(
        receiver=receiver, peeked=peeked, receive_mode=receive_mode, **fields)
    message._lock_acquired_at = lock_acquired_at
    return message


@dataclass(frozen=True)
class Delivery:
    """How a received message was handed out, and whether it was settled since."""

    receiver: object
    peeked: bool
    settled: bool
    lock_acquired_at: Optional[datetime]


def delivery(message: ServiceBusReceivedMessage) -> Delivery:
    return Delivery(message._receiver, message._peeked, message._settled,
                    getattr(message, "_lock_acquired_at", None))


def mark_settled(message: ServiceBusReceivedMessage) -> None:
    """Its receiver settled it: nothing more may be done with its lock."""
    message._settled = True


def mark_renewed(message: ServiceBusReceivedMessage, locked_until: datetime,
                 at: datetime) -> None:
    """Its lock was renewed at ``at`` until ``locked_until``."""
    message._set_lock(message.lock_token, locked_until)
    message._lock_acquired_at = at


def is_settled(message: ServiceBusReceivedMessage) -> bool:
    """Whether the receiver that holds ``message`` settled it (its lock needs no renewal)."""
    return bool(message._settled)


def holds_lock(message: object) -> bool:
    """Whether ``message`` is a message received in PEEK_LOCK mode (it has a lock to renew)."""
    return (isinstance(message, ServiceBusReceivedMessage) and message.lock_token is not None
            and not message._peeked)
