"""Batches and message lists: what a sender is given to send (azure-servicebus's
``ServiceBusMessageBatch``, and the forms ``send_messages`` accepts). Pure Python."""

from __future__ import annotations

from typing import Iterable, List, Union

from sbdelta._message import ServiceBusMessage, from_amqp
from sbdelta._message_fields import type_name
from sbdelta.amqp import AmqpAnnotatedMessage
from sbdelta.exceptions import InvalidMessageError, MessageSizeExceededError, MessageTypeError

__all__ = ["ServiceBusMessageBatch", "to_message_list"]


class ServiceBusMessageBatch:
    """Messages sent together, all or nothing, whose sizes add up to at most a limit.

    Sizes are :attr:`ServiceBusMessage.size_in_bytes`, taken when each message is added.

    Args:
        max_size_in_bytes: The limit for the sum of the messages' sizes (a positive int).
    """

    def __init__(self, max_size_in_bytes: int) -> None:
        if isinstance(max_size_in_bytes, bool) or not isinstance(max_size_in_bytes, int):
            raise MessageTypeError(f"max_size_in_bytes has type {type_name(max_size_in_bytes)}; "
                                   f"allowed: a positive int")
        if max_size_in_bytes <= 0:
            raise InvalidMessageError(
                f"max_size_in_bytes={max_size_in_bytes}; allowed: a positive int")
        self._max_size_in_bytes = int(max_size_in_bytes)
        self._size_in_bytes = 0
        self._messages: List[ServiceBusMessage] = []

    @property
    def max_size_in_bytes(self) -> int:
        """The most the messages' sizes may add up to."""
        return self._max_size_in_bytes

    @property
    def size_in_bytes(self) -> int:
        """The sum of the added messages' sizes."""
        return self._size_in_bytes

    @property
    def messages(self) -> List[ServiceBusMessage]:
        """A copy of the list of added messages, in order."""
        return list(self._messages)

    def add_message(self, message: ServiceBusMessage) -> None:
        """Append ``message``.

        Raises:
            MessageTypeError: ``message`` is not a ServiceBusMessage.
            MessageSizeExceededError: The batch would exceed ``max_size_in_bytes``; the batch is
                unchanged (send it and start another).
        """
        if isinstance(message, AmqpAnnotatedMessage):
            message = from_amqp(message)
        if not isinstance(message, ServiceBusMessage):
            raise MessageTypeError(f"a batch holds ServiceBusMessage or AmqpAnnotatedMessage "
                                   f"objects, got {type_name(message)}")
        size = message.size_in_bytes
        if self._size_in_bytes + size > self._max_size_in_bytes:
            raise MessageSizeExceededError(
                f"a message of {size} bytes does not fit in the batch: it holds "
                f"{len(self._messages)} messages of {self._size_in_bytes} bytes and "
                f"max_size_in_bytes is {self._max_size_in_bytes} "
                f"({self._size_in_bytes} + {size} > {self._max_size_in_bytes}); send this batch "
                f"and add the message to a new one")
        self._messages.append(message)
        self._size_in_bytes += size

    def __len__(self) -> int:
        return len(self._messages)

    def __repr__(self) -> str:
        return (f"ServiceBusMessageBatch(max_size_in_bytes={self._max_size_in_bytes}, "
                f"message_count={len(self._messages)}, size_in_bytes={self._size_in_bytes})")


def to_message_list(
    messages: Union[ServiceBusMessage, Iterable[ServiceBusMessage], ServiceBusMessageBatch],
) -> List[ServiceBusMessage]:
    """The messages to send, from one message, a list or tuple of them, or a batch
    (an AmqpAnnotatedMessage as the ServiceBusMessage it maps to).

    Raises:
        MessageTypeError: For any other argument, or an element that is not a ServiceBusMessage
            (the error names its index). An empty list gives ``[]``.
    """
    if isinstance(messages, (ServiceBusMessage, AmqpAnnotatedMessage)):
        messages = [messages]
    if isinstance(messages, ServiceBusMessageBatch):
        return messages.messages
    if not isinstance(messages, (list, tuple)):
        raise MessageTypeError(
            f"messages has type {type_name(messages)}; allowed: a ServiceBusMessage or "
            f"AmqpAnnotatedMessage, a list or tuple of them, or a ServiceBusMessageBatch")
    out = []
    for index, item in enumerate(messages):
        if isinstance(item, AmqpAnnotatedMessage):
            item = from_amqp(item)
        if not isinstance(item, ServiceBusMessage):
            raise MessageTypeError(
                f"messages[{index}] has type {type_name(item)}; every element must be a "
                f"ServiceBusMessage or an AmqpAnnotatedMessage")
        out.append(item)
    return out
