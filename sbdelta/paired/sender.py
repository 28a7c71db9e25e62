"""The failover sender of a paired client (PAIR-2..6) and what the client keeps for pairing.

A :class:`PairedSender` sends to the primary entity as an ordinary sender does (PAIR-2). When
sends keep failing (:mod:`.failover`) it sends the backlog form of each message (:mod:`.backlog`)
to a backlog queue of the secondary namespace instead, and pings the primary every
``ping_primary_interval`` until a ping lands (PAIR-5). A ping is an empty message of content
type ``application/vnd.ms-servicebus-ping`` with a time to live of 1 second (PAIR-6); the
primary's registration drops it, so no receiver, peek or count sees it (RECV-7).

Only ``send_messages`` fails over. ``schedule_messages`` (whose sequence numbers name messages
in the primary, for cancelling), ``cancel_scheduled_messages`` and ``send_dataframe`` go to the
primary and raise as an ordinary sender's do; a message with ``scheduled_enqueue_time_utc``
sent by ``send_messages`` fails over with its schedule (PAIR-4).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Callable, List, Optional, Sequence, Union

from .._batch import ServiceBusMessageBatch, to_message_list
from .._message import ServiceBusMessage
from .._store import PING_CONTENT_TYPE
from ..exceptions import (MessagingEntityAlreadyExistsError,
                          ServiceBusCommunicationError)
from .backlog import to_backlog
from .failover import BacklogRotation, ErrorKind, classify, health_registry
from .options import (BACKLOG_QUEUE_PROPERTIES, PairedNamespaceOptions, backlog_queue_name,
                      primary_identity)

__all__ = ["Pairing", "PairedSender", "PING_TIME_TO_LIVE"]

PING_TIME_TO_LIVE = timedelta(seconds=1)


class Pairing:
    """What a paired client keeps: the secondary's client, the backlog queues (PAIR-1), each
    entity's failover state and the backlog rotation, shared by all the client's senders.

    Args:
        options: The pairing options.
        primary_root: The primary namespace's root URI (names the backlog queues).
        now: The client's broker time.
        secondary_client: A ServiceBusClient on ``options.secondary``.
        secondary_admin: A ServiceBusAdministrationClient on it.
        start_syphon: Starts the client's syphon (used when ``options.enable_syphon``).
    """

    def __init__(self, options: PairedNamespaceOptions, primary_root: str,
                 now: Callable[[], Any], secondary_client, secondary_admin,
                 start_syphon: Optional[Callable[[], Any]] = None) -> None:
        self.options = options
        self.identity = primary_identity(primary_root)
        self.now = now
        self.secondary = secondary_client
        self._admin = secondary_admin
        self.health = health_registry(options.failover_interval, options.ping_primary_interval)
        self.rotation = BacklogRotation(options.backlog_queue_count)
        self.backlog_queues = [backlog_queue_name(self.identity, i)
                               for i in range(options.backlog_queue_count)]
        self._ensure_backlog_queues()
        # enable_syphon: the client's own syphon (a SyphonThread), stopped by close (PAIR-8).
        self.syphon = start_syphon() if options.enable_syphon and start_syphon else None

    def _ensure_backlog_queues(self) -> None:
        """PAIR-1: create the missing backlog queues with exactly the listed properties; use
        existing ones as they are; leave extra ones alone."""
        existing = {q.name.casefold() for q in self._admin.list_queues()}
        for name in self.backlog_queues:
            if name.casefold() in existing:
                continue
            try:
                self._admin.create_queue(name, **BACKLOG_QUEUE_PROPERTIES)
            except MessagingEntityAlreadyExistsError:
                pass  # another process of the same pairing made it meanwhile

    def send_to_backlog(self, messages: List[ServiceBusMessage], destination: str) -> None:
        """Send the backlog form of ``messages`` (one commit) to a backlog queue chosen at
        random; a queue whose send fails leaves the rotation and another is tried."""
        backlog = [to_backlog(m, destination) for m in messages]
        last: Optional[BaseException] = None
        while True:
            index = self.rotation.choose()
            if index is None:
                raise ServiceBusCommunicationError(
                    f"the primary entity {destination!r} is failed over and every backlog "
                    f"queue of the secondary namespace failed too (last: {last}); nothing was "
                    "sent") from last
            try:
                self.secondary.get_queue_sender(self.backlog_queues[index]).send_messages(
                    backlog)
                return
            except Exception as exc:  # noqa: BLE001 - classified below
                if classify(exc) is ErrorKind.CALLER:
                    raise  # the message's fault (for example too large with the properties)
                self.rotation.drop(index)
                last = exc

    def close(self) -> None:
        """Stop the client's syphon (within 5 seconds, PAIR-8) and close the secondary."""
        if self.syphon is not None:
            self.syphon.stop()
        self.secondary.close()


class PairedSender:
    """A sender of a paired client: azure's sender API, failing over to the backlog queues."""

    def __init__(self, primary, pairing: Pairing) -> None:
        self._primary = primary
        self._pairing = pairing
        self._health = pairing.health(primary.entity_name.casefold())

    # The ordinary sender's surface.
    @property
    def entity_name(self) -> str:
        return self._primary.entity_name

    @property
    def client_identifier(self) -> str:
        return self._primary.client_identifier

    def __enter__(self) -> "PairedSender":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        self._primary.close()

    def create_message_batch(self, max_size_in_bytes: Optional[int] = None
                             ) -> ServiceBusMessageBatch:
        return self._primary.create_message_batch(max_size_in_bytes)

    def schedule_messages(self, messages, schedule_time_utc, *,
                          timeout: Optional[float] = None) -> List[int]:
        return self._primary.schedule_messages(messages, schedule_time_utc, timeout=timeout)

    def cancel_scheduled_messages(self, sequence_numbers, *,
                                  timeout: Optional[float] = None) -> None:
        self._primary.cancel_scheduled_messages(sequence_numbers, timeout=timeout)

    def send_dataframe(self, df) -> int:
        return self._primary.send_dataframe(df)

    @property
    def failed_over(self) -> bool:
        """Whether this entity's sends go to the backlog queues now (PAIR-3)."""
        return self._health.use_backlog(self._pairing.now())

    def send_messages(self, message: Union[ServiceBusMessage, Sequence[ServiceBusMessage],
                                           ServiceBusMessageBatch], *,
                      timeout: Optional[float] = None) -> None:
        """Send as an ordinary sender does (one commit, all or nothing); while the entity is
        failed over, to a backlog queue, after pinging the primary when a ping is due."""
        messages = to_message_list(message)
        if not messages:
            return
        pairing, health = self._pairing, self._health
        if health.use_backlog(pairing.now()):
            if not (health.ping_due(pairing.now()) and self._ping()):
                pairing.send_to_backlog(messages, self.entity_name)
                return
            health.record_success()  # the ping landed: back to the primary (PAIR-5)
        try:
            self._primary.send_messages(messages, timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - classified by the failover table
            kind = health.record_error(exc, pairing.now())
            if kind is ErrorKind.CALLER or not health.use_backlog(pairing.now()):
                raise
            pairing.send_to_backlog(messages, self.entity_name)  # failover engaged now
            return
        health.record_success()

    def _ping(self) -> bool:
        """PAIR-6: one ping of the primary; True when it landed."""
        ping = ServiceBusMessage(b"", content_type=PING_CONTENT_TYPE,
                                 time_to_live=PING_TIME_TO_LIVE)
        try:
            self._primary.send_messages(ping)
        except Exception as exc:  # noqa: BLE001 - classified by the failover table
            if classify(exc) is ErrorKind.CALLER:
                raise
            return False
        return True
