"""ServiceBusClient: the entry point for sending and receiving on one namespace, as in
azure-servicebus."""

from __future__ import annotations

from typing import Optional

from ._clock import Clock
from ._handler import Connection, wait_seconds
from ._message import NEXT_AVAILABLE_SESSION, ServiceBusReceiveMode, ServiceBusSubQueue
from ._message_fields import check_string
from ._names import EntityRef
from ._namespace import Namespace
from ._receiver import ServiceBusReceiver
from ._sender import ServiceBusSender
from .exceptions import ServiceBusInvalidOperationError

__all__ = ["ServiceBusClient"]


class ServiceBusClient:
    """Entry point for sending and receiving on one namespace.

    Args:
        namespace: The namespace root (local folder or Hadoop URI).
        spark: The SparkSession to use; default: the active one with Delta, else a local one.
        clock: Broker time, any object with ``now() -> aware UTC datetime``.
    """

    def __init__(self, namespace: str, *, spark=None, clock: Optional[Clock] = None) -> None:
        self._conn = Connection(Namespace(namespace, spark=spark, clock=clock))
        self._ns = self._conn.ns
        self._entities = self._conn.entities

    @property
    def namespace(self) -> str:
        return self._ns.root

    @property
    def spark(self):
        return self._ns.spark

    def __enter__(self) -> "ServiceBusClient":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        """Release the client (the Spark session is left running: it is not the client's)."""
        self._conn.closed = True

    def get_queue_sender(self, queue_name: str) -> "ServiceBusSender":
        """A sender for ``queue_name`` (raises MessagingEntityNotFoundError if it is missing)."""
        return self._sender(EntityRef.queue(queue_name))

    def get_topic_sender(self, topic_name: str) -> "ServiceBusSender":
        """A sender for ``topic_name`` (raises MessagingEntityNotFoundError if it is missing).

        A topic stores each message once (TOPIC-1); each subscription receives the messages
        its rules match as they stood when the message was sent (TOPIC-2).
        """
        return self._sender(EntityRef.topic_of(topic_name))

    def get_queue_receiver(self, queue_name: str, *,
                           session_id: Optional[str] = None,
                           receive_mode: ServiceBusReceiveMode = ServiceBusReceiveMode.PEEK_LOCK,
                           sub_queue: Optional[ServiceBusSubQueue] = None,
                           max_wait_time: Optional[float] = None,
                           prefetch_count: int = 0) -> "ServiceBusReceiver":
        """A receiver for ``queue_name`` or, with ``sub_queue=DEAD_LETTER``, its dead-letter queue.

        ``session_id`` opens a session receiver on a queue created with ``requires_session``
        (SESS-2): it locks that session when entered (``with``) or on its first operation, and
        receives only its messages, in sequence order; ``receiver.session`` has its state and
        lock. ``session_id=NEXT_AVAILABLE_SESSION`` locks the free session with the oldest
        deliverable message instead (SESS-3), waiting up to ``max_wait_time`` for one, then
        raising OperationTimeoutError. ``max_wait_time``
        (seconds) is how long a receive waits for the first message; None means one look and
        return. ``prefetch_count`` is accepted for compatibility: receives are batch reads
        already, so there is nothing to prefetch.
        """
        return self._receiver(EntityRef.queue(queue_name), receive_mode, sub_queue,
                              max_wait_time, prefetch_count, session_id)

    def get_subscription_receiver(
            self, topic_name: str, subscription_name: str, *,
            session_id: Optional[str] = None,
            receive_mode: ServiceBusReceiveMode = ServiceBusReceiveMode.PEEK_LOCK,
            sub_queue: Optional[ServiceBusSubQueue] = None,
            max_wait_time: Optional[float] = None,
            prefetch_count: int = 0) -> "ServiceBusReceiver":
        """A receiver for a subscription or, with ``sub_queue=DEAD_LETTER``, its dead-letter
        queue (``<topic>/Subscriptions/<subscription>/$DeadLetterQueue``).

        The subscription behaves as a queue of its own (TOPIC-1): its own locks, delivery
        counts, deferral and dead-letter queue; settling here never touches another
        subscription. Arguments as in :meth:`get_queue_receiver`.
        """
        return self._receiver(EntityRef.subscription(topic_name, subscription_name),
                              receive_mode, sub_queue, max_wait_time, prefetch_count, session_id)

    def _sender(self, ref: EntityRef) -> "ServiceBusSender":
        self._conn.check_open()
        self._entities.resolve(ref)
        return ServiceBusSender(self._conn, ref)

    def _receiver(self, ref: EntityRef, receive_mode, sub_queue, max_wait_time,
                  prefetch_count, session_id: Optional[str] = None) -> "ServiceBusReceiver":
        self._conn.check_open()
        if session_id is not None:
            if session_id is not NEXT_AVAILABLE_SESSION:
                session_id = check_string("session_id", session_id)
            if sub_queue is not None:
                raise ServiceBusInvalidOperationError(
                    "a dead-letter queue has no sessions: read it without session_id")
        try:
            mode = ServiceBusReceiveMode(receive_mode)
        except ValueError:
            raise ServiceBusInvalidOperationError(
                f"receive_mode must be ServiceBusReceiveMode.PEEK_LOCK or RECEIVE_AND_DELETE, "
                f"got {receive_mode!r}") from None
        if sub_queue is not None:
            try:
                sub_queue = ServiceBusSubQueue(sub_queue)
            except ValueError:
                raise ServiceBusInvalidOperationError(
                    f"sub_queue must be None or ServiceBusSubQueue.DEAD_LETTER, got {sub_queue!r}"
                ) from None
            if sub_queue is not ServiceBusSubQueue.DEAD_LETTER:
                raise ServiceBusInvalidOperationError(
                    "only ServiceBusSubQueue.DEAD_LETTER exists here: sbdelta has no transfer "
                    "dead-letter queue (forwarding failures are dead-lettered normally)")
        if isinstance(prefetch_count, bool) or not isinstance(prefetch_count, int) \
                or prefetch_count < 0:
            raise ServiceBusInvalidOperationError(
                f"prefetch_count must be an integer >= 0, got {prefetch_count!r}")
        self._entities.resolve(ref)
        return ServiceBusReceiver(self._conn, ref, mode, sub_queue,
                                  wait_seconds(max_wait_time, "max_wait_time"),
                                  session_id=session_id)
