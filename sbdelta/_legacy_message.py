"""The SDK's deprecated ``message`` property of a message: a uamqp-shaped view of it.

azure-servicebus 7.x still answers ``message.message`` (with a DeprecationWarning) by a
``LegacyMessage``, the shape uamqp's ``Message`` had: the AMQP sections as attributes
(``properties``, ``application_properties``, ``annotations``, ``header``, ``footer``,
``delivery_annotations``), ``get_data()``, a ``state`` and ``settled``, and the AMQP outcomes
``accept``, ``reject``, ``release`` and ``modify``. sbdelta builds the same view from
:attr:`raw_amqp_message`; the outcomes settle through the receiver that handed the message out,
as the SDK's own settlement maps them: accept completes, reject dead-letters (its condition is
the reason, its description the error description), release and a deliverable ``modify``
abandon, an undeliverable ``modify`` defers. Written only for programs that still use it: new
code settles with the receiver and reads :attr:`raw_amqp_message`.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Callable, Dict, List, Optional, Union

from sbdelta.amqp import AmqpAnnotatedMessage
from sbdelta.exceptions import ServiceBusInvalidOperationError

__all__ = ["LegacyMessage", "MessageState", "DEPRECATION"]

#: The SDK's warning text, word for word.
DEPRECATION = "The `message` property is deprecated and will be removed in future versions."

class MessageState(Enum):
    """uamqp's message states (the SDK's ``LegacyMessage.state``)."""

    WaitingToBeSent = 0
    WaitingForSendAck = 1
    SendComplete = 2
    SendFailed = 3
    ReceivedUnsettled = 4
    ReceivedSettled = 5


def _text(value: Union[str, bytes, None]) -> Optional[str]:
    return value.decode("utf-8") if isinstance(value, bytes) else value


class LegacyMessage:
    """A uamqp-shaped view of one message (see the module): ``message`` its AMQP sections.
    ``received``: the message was handed out by a receiver; ``receiver`` and ``source``: the
    receiver holding its lock and the message to settle with it (None when there is no lock
    to settle: a peeked message, one received in RECEIVE_AND_DELETE mode); ``settled``: whether
    that receiver settled it already."""

    def __init__(self, message: AmqpAnnotatedMessage, *, received: bool = False,
                 receiver: Any = None, source: Any = None,
                 settled: Callable[[], bool] = lambda: False) -> None:
        self._message = message
        self._received = received
        self._receiver, self._source = receiver, source
        self._settled = settled
        self.properties = message.properties
        self.application_properties: Optional[Dict[Any, Any]] = (
            message.application_properties or None)
        self.annotations: Optional[Dict[Any, Any]] = message.annotations or None
        self.header = message.header
        self.footer = message.footer
        self.delivery_annotations = message.delivery_annotations

    def __str__(self) -> str:
        return str(self._message)

    @property
    def state(self) -> MessageState:
        if not self._received:
            return MessageState.SendComplete  # what the SDK reports for a message to send
        if self._receiver is not None and not self._settled():
            return MessageState.ReceivedUnsettled
        return MessageState.ReceivedSettled

    @property
    def settled(self) -> bool:
        return self.state is not MessageState.ReceivedUnsettled

    def get_data(self) -> Any:
        """The body, as the SDK's view gives it."""
        return self._message.body

    def gather(self) -> List["LegacyMessage"]:
        if self._received:
            raise TypeError("Only new messages can be gathered.")
        return [self]

    def accept(self) -> bool:
        """Complete the message; False when it has no lock or was settled already."""
        return self._settle("complete")

    def reject(self, condition: Union[bytes, str, None] = None,
               description: Optional[str] = None, info: Optional[Dict[Any, Any]] = None
               ) -> bool:
        """Dead-letter the message (``condition`` is the reason, ``description`` the error
        description; ``info`` is not kept)."""
        return self._settle("dead_letter", reason=_text(condition),
                            error_description=description)

    def release(self) -> bool:
        """Abandon the message (its lock ends, its delivery count stays raised)."""
        return self._settle("abandon")

    def modify(self, failed: bool, deliverable: bool,
               annotations: Optional[Dict[Union[str, bytes], Any]] = None) -> bool:
        """The AMQP modified outcome as Service Bus reads it: ``deliverable`` (the SDK's
        "undeliverable here") defers the message, else it is abandoned; ``annotations`` are
        the properties to modify. ``failed`` is what the delivery count shows anyway."""
        properties = {_text(k): v for k, v in (annotations or {}).items()} or None
        if not deliverable:
            return self._settle("abandon", properties_to_modify=properties)
        if properties:
            raise ServiceBusInvalidOperationError(
                "modify(deliverable=True) defers the message, and a deferral cannot change "
                "its properties (defer_message takes none): pass no annotations, or modify "
                "with deliverable=False to abandon it with them")
        return self._settle("defer")

    def _settle(self, outcome: str, **options: Any) -> bool:
        if not self._received:
            raise TypeError("Only received messages can be settled.")
        if self.settled:
            return False
        getattr(self._receiver, f"{outcome}_message")(self._source, **options)
        return True
