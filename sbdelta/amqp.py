"""What sbdelta has of ``azure.servicebus.amqp``: the body type of a message, and the body as
the SDK's messages hand it out (issue 17).

A Service Bus message body is one of three AMQP forms; sbdelta stores one: opaque bytes, the
DATA form (what ``ServiceBusMessage(str | bytes)`` sends in the SDK too). ``message.body`` is
those bytes, and iterates as the SDK's DATA body does, section by section (one section: the
whole body), so SDK code such as ``b"".join(message.body)`` reads it unchanged.
``AmqpAnnotatedMessage`` (SEQUENCE and VALUE bodies, header, annotations) is not provided.
"""

from __future__ import annotations

from enum import Enum
from typing import Iterator

__all__ = ["AmqpMessageBodyType", "DataBody"]


class AmqpMessageBodyType(str, Enum):
    """The AMQP body form of a message, as the SDK names them (sbdelta's are all DATA)."""

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
