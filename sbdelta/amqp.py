"""What sbdelta has of ``azure.servicebus.amqp``: the AMQP view of a message (issue 17).

A Service Bus message body is one of three AMQP forms. DATA (opaque bytes) is what
``ServiceBusMessage(str | bytes)`` sends, in the SDK too: ``message.body`` is those bytes, and
iterates as the SDK's DATA body does, section by section (one section: the whole body), so SDK
code such as ``b"".join(message.body)`` reads it unchanged.

:class:`AmqpAnnotatedMessage` is the SDK's low-level message: it can be sent (``send_messages``,
``schedule_messages``, batches) with any of the three bodies. A DATA body's sections are
stored as one body; a VALUE body (one AMQP value) and a SEQUENCE body (its sections: lists of
values) are stored as type-preserving JSON and come back with their form and types
(``body_type``, ``body``: the value, or an iterator over the sections; the stored form is in
:mod:`sbdelta._amqp_body`). Its header, properties and annotations map onto the message's
fields (the table in docs/from-azure-servicebus.md). A received message's
``raw_amqp_message`` is its AMQP view (a copy: changing it does not change the message).
"""

from __future__ import annotations

from datetime import datetime
from enum import Enum
from typing import Any, Dict, Iterator, List, Mapping, Optional, Union

from sbdelta.exceptions import InvalidMessageError, MessageTypeError

__all__ = ["AmqpAnnotatedMessage", "AmqpMessageBodyType", "AmqpMessageHeader",
           "AmqpMessageProperties", "DataBody"]


class AmqpMessageBodyType(str, Enum):
    """The AMQP body form of a message, as the SDK names them."""

    DATA = "data"
    SEQUENCE = "sequence"
    VALUE = "value"


class DataBody(bytes):
    """A message's body: its bytes, iterating as the SDK's DATA body does (its sections,
    here the one section that holds the whole body) instead of byte by byte. Everything
    else (``==``, ``len``, slicing, ``decode``, the buffer protocol) is that of ``bytes``."""

    __slots__ = ()

    def __iter__(self) -> Iterator[bytes]:
        yield bytes(self)

    def __next__(self) -> bytes:
        """``next(message.body)``, the SDK's idiom for the first data section: the whole
        body (sbdelta stores one section). Unlike the SDK's generator it never runs out."""
        return bytes(self)


class _Section:
    """A dict-like record of keyword fields, as the SDK's ``DictMixin`` sections behave:
    attributes, ``[key]``, ``keys()``, ``items()``, ``get()``, equality by fields."""

    _FIELDS: tuple = ()

    def __init__(self, **kwargs: Any) -> None:
        unknown = sorted(set(kwargs) - set(self._FIELDS))
        if unknown:
            raise MessageTypeError(f"{type(self).__name__} has no field(s) {', '.join(unknown)}; "
                            f"its fields: {', '.join(self._FIELDS)}")
        for name in self._FIELDS:
            setattr(self, name, kwargs.get(name))

    def __getitem__(self, key: str) -> Any:
        if key not in self._FIELDS:
            raise KeyError(key)
        return getattr(self, key)

    def __setitem__(self, key: str, value: Any) -> None:
        if key not in self._FIELDS:
            raise KeyError(key)
        setattr(self, key, value)

    def __contains__(self, key: object) -> bool:
        return key in self._FIELDS

    def __len__(self) -> int:
        return len(self._FIELDS)

    def keys(self) -> List[str]:
        return list(self._FIELDS)

    def values(self) -> List[Any]:
        return [getattr(self, name) for name in self._FIELDS]

    def items(self) -> List[tuple]:
        return [(name, getattr(self, name)) for name in self._FIELDS]

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key) if key in self._FIELDS else default

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self.items() == other.items()  # type: ignore

    def __repr__(self) -> str:
        return str({name: value for name, value in self.items()})


class AmqpMessageHeader(_Section):
    """The AMQP header: ``delivery_count``, ``time_to_live`` (milliseconds), ``durable``,
    ``first_acquirer``, ``priority``. On a send only ``time_to_live`` is kept (the message's
    time to live); the others are the broker's (received messages carry the delivery count)."""

    _FIELDS = ("delivery_count", "time_to_live", "durable", "first_acquirer", "priority")


class AmqpMessageProperties(_Section):
    """The AMQP properties: ``message_id``, ``user_id``, ``to``, ``subject``, ``reply_to``,
    ``correlation_id``, ``content_type``, ``content_encoding``, ``absolute_expiry_time``,
    ``creation_time``, ``group_id`` (the session id), ``group_sequence``,
    ``reply_to_group_id`` (the reply-to session id). Values may be str or UTF-8 bytes."""

    _FIELDS = ("message_id", "user_id", "to", "subject", "reply_to", "correlation_id",
               "content_type", "content_encoding", "absolute_expiry_time", "creation_time",
               "group_id", "group_sequence", "reply_to_group_id")


_BODY_KEYWORDS = ("data_body", "sequence_body", "value_body")


def sequence_sections(body: Any) -> List[list]:
    """A SEQUENCE body as its sections, as the SDK normalises it: a list of lists is its
    sections; any other list (or tuple) is one section."""
    if not isinstance(body, (list, tuple)):
        raise MessageTypeError(f"sequence_body has type {type(body).__name__}; allowed: a list "
                               "(one section) or a list of lists (its sections)")
    items = list(body)
    if items and all(isinstance(item, (list, tuple)) for item in items):
        return [list(item) for item in items]
    return [items]


class AmqpAnnotatedMessage:
    """A message by its AMQP sections, as ``azure.servicebus.amqp.AmqpAnnotatedMessage``.

    Exactly one of ``data_body`` (str, bytes, or a list of them: its sections),
    ``sequence_body`` (a list) or ``value_body`` (any value) is given (InvalidMessageError,
    a ValueError as in the SDK, otherwise; MessageTypeError, a TypeError, for unknown
    keywords and sections that are not mappings).
    ``header`` and ``properties`` are mappings (or AmqpMessageHeader / AmqpMessageProperties);
    ``application_properties``, ``annotations``, ``delivery_annotations`` and ``footer`` are
    dicts. A ``sequence_body`` that is a list of lists is its sections; any other list is one
    section (as the SDK normalises it)."""

    def __init__(self, *, header: Optional[Mapping[str, Any]] = None,
                 footer: Optional[Dict[Any, Any]] = None,
                 properties: Optional[Mapping[str, Any]] = None,
                 application_properties: Optional[Dict[Any, Any]] = None,
                 annotations: Optional[Dict[Any, Any]] = None,
                 delivery_annotations: Optional[Dict[Any, Any]] = None,
                 **body: Any) -> None:
        unknown = sorted(set(body) - set(_BODY_KEYWORDS))
        if unknown:
            raise MessageTypeError(f"AmqpAnnotatedMessage got unexpected keyword argument(s) "
                            f"{', '.join(unknown)}")
        if len(body) != 1:
            raise InvalidMessageError("There should be one and only one of either data_body, "
                             "sequence_body or value_body being set as the body of the "
                             "AmqpAnnotatedMessage.")
        (keyword, value), = body.items()
        if keyword == "data_body":
            sections = value if isinstance(value, list) else [value]
            self._body: Any = [s.encode("utf-8") if isinstance(s, str) else s
                               for s in sections]
            self._body_type = AmqpMessageBodyType.DATA
        elif keyword == "sequence_body":
            self._body = sequence_sections(value)
            self._body_type = AmqpMessageBodyType.SEQUENCE
        else:
            self._body = value
            self._body_type = AmqpMessageBodyType.VALUE
        self.header = _section(AmqpMessageHeader, header)
        self.properties = _section(AmqpMessageProperties, properties)
        self.application_properties = application_properties
        self.annotations = annotations
        self.delivery_annotations = delivery_annotations
        self.footer = footer

    @property
    def body(self) -> Any:
        """DATA: an iterator over the sections (bytes); SEQUENCE: over the sections (lists);
        VALUE: the value."""
        if self._body_type is AmqpMessageBodyType.VALUE:
            return self._body
        return iter(self._body)

    @property
    def body_type(self) -> AmqpMessageBodyType:
        """Which of the three body forms the message has."""
        return self._body_type

    def __str__(self) -> str:
        if self._body_type is AmqpMessageBodyType.DATA:
            return "".join(bytes(s).decode("utf-8") for s in self._body)
        return str(self._body)

    def __repr__(self) -> str:
        return (f"AmqpAnnotatedMessage(body={self}, body_type={self._body_type.value}, "
                f"header={self.header}, footer={self.footer}, properties={self.properties}, "
                f"application_properties={self.application_properties}, "
                f"delivery_annotations={self.delivery_annotations}, "
                f"annotations={self.annotations})")[:1024]


def _section(kind, value: Union[Mapping[str, Any], _Section, None]):
    if value is None or isinstance(value, kind):
        return value
    if not isinstance(value, Mapping):
        raise MessageTypeError(f"{kind.__name__[len('AmqpMessage'):].lower()} must be a mapping or "
                        f"{kind.__name__}, got {type(value).__name__}")
    return kind(**value)


#: Message annotations Service Bus reads and sets (the SDK's constants, as bytes keys).
PARTITION_KEY = b"x-opt-partition-key"
SCHEDULED_ENQUEUE_TIME = b"x-opt-scheduled-enqueue-time"
SEQUENCE_NUMBER = b"x-opt-sequence-number"
ENQUEUED_TIME = b"x-opt-enqueued-time"
LOCKED_UNTIL = b"x-opt-locked-until"
ENQUEUE_SEQUENCE_NUMBER = b"x-opt-enqueue-sequence-number"
DEAD_LETTER_SOURCE = b"x-opt-deadletter-source"


def epoch_ms(moment: datetime) -> int:
    """A UTC datetime as AMQP timestamps are written: milliseconds since the epoch."""
    return int(moment.timestamp() * 1000)
