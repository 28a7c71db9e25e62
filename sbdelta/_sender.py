"""ServiceBusSender: sends to one queue or topic. Every send is one Delta commit (SEND-1/2)."""

from __future__ import annotations

import itertools
import random
from datetime import datetime, timezone
from typing import List, Optional, Sequence, Tuple, Union

from ._clock import utc
from ._entity import Entity
from ._forwarding import continues, forward_after_send, route
from ._handler import Connection, Handler, positive_int, under_retry_policy
from ._names import EntityRef
from ._handler import sequence_numbers as to_sequence_numbers
from ._batch import ServiceBusMessageBatch, to_message_list
from ._message import ServiceBusMessage
from ._store import PING_CONTENT_TYPE, inbox_rows, key_partition, sequence_number
from .exceptions import (MessagingEntityNotFoundError, ServiceBusCommunicationError,
                         ServiceBusError, ServiceBusInvalidOperationError)

__all__ = ["ServiceBusSender"]


@under_retry_policy
class ServiceBusSender(Handler):
    """Sends to one queue or topic. Every send is one Delta commit: all of it or nothing
    (SEND-1/2). A topic stores each message once, whatever its subscriptions (TOPIC-1)."""

    def __init__(self, connection: Connection, ref: EntityRef,
                 client_identifier: Optional[str] = None) -> None:
        super().__init__(connection, ref, client_identifier)
        self._round_robin = itertools.count(random.randrange(1 << 16))

    @property
    def entity_name(self) -> str:
        """The queue or topic this sender sends to."""
        return self._name

    def _entity(self) -> Entity:
        entity = self._lookup()
        entity.check_send()
        return entity

    def create_message_batch(self, max_size_in_bytes: Optional[int] = None) -> ServiceBusMessageBatch:
        """An empty batch; at most the entity's max message size unless a smaller one is given."""
        limit = self._entity().max_message_size
        if max_size_in_bytes is not None:
            size = positive_int(max_size_in_bytes, "max_size_in_bytes")
            if size > limit:
                raise ValueError(
                    f"max_size_in_bytes {size} is larger than {self._ref.label} allows ({limit} bytes)")
            limit = size
        return ServiceBusMessageBatch(limit)

    # -- rows ----------------------------------------------------------------------------------
    def _partition(self, message: ServiceBusMessage, entity: Entity) -> int:
        partitions = entity.store.partitions
        if partitions == 1:
            return 0
        # PART-2: SessionId, then PartitionKey, then MessageId under duplicate detection.
        key = message.session_id or message.partition_key
        if key is None and entity.requires_duplicate_detection:
            key = message.message_id
        if key is None:
            return next(self._round_robin) % partitions
        return key_partition(key, partitions)

    def _write(self, messages: List[ServiceBusMessage], *, schedule: Optional[datetime] = None,
               need_seqs: bool = False) -> List[int]:
        entity = self._entity()
        if not messages:
            return []
        way = route(self._conn.entities, entity)  # FWD-2: a forwarding queue's chain end
        target = way.target
        if way.requires_session:
            _check_session_ids(messages, way.label)
        rows = inbox_rows(messages, now=self._now(), schedule=schedule,
                          ttl_cap=way.ttl_cap, limit=way.max_message_size,
                          entity=entity.label,
                          partition=lambda message: self._partition(message, target),
                          hops=way.hops or None)
        version, _ = self._append(target, rows)
        self._forward(target)
        if not need_seqs:
            return []
        return [sequence_number(r[0], version, r[1]) for r in rows]

    def _append(self, entity: Entity, rows) -> Optional[Tuple[int, int]]:
        """Append ``rows`` (a list of inbox row tuples, or a DataFrame) to the entity's inbox
        in one commit: (version, rows), None if empty.

        The queue or topic may be deleted while the send runs (its registry row first, then its
        folder).
        A send that then fails, or commits to a folder the registry no longer points at, raises
        MessagingEntityNotFoundError instead of reporting a message no entity holds (SEND-1).
        Row checks of ``send_dataframe`` that fail the write become their sbdelta error.
        """
        write = entity.store.append_rows if isinstance(rows, list) else entity.store.append
        try:
            appended = write(rows, limit=entity.max_message_size, entity=entity.label)
        except (MessagingEntityNotFoundError, ServiceBusCommunicationError):
            # A table or file gone (sbdelta._store.storage_fault): a deletion in flight says so
            self._raise_if_deleted(entity)
            raise
        except ServiceBusError:
            raise
        except Exception:  # noqa: BLE001 - re-raised unless the entity is gone
            self._raise_if_deleted(entity)
            raise
        self._raise_if_deleted(entity)
        return appended

    def _forward(self, target: Entity) -> None:
        """FWD-2: where the messages just written move on (a topic whose subscriptions
        forward; a queue at the hop limit, whose forwarder dead-letters them), they move
        before the send returns."""
        if continues(self._conn.entities, target):
            forward_after_send(self._conn.entities, target, self._now())

    def _raise_if_deleted(self, entity: Entity) -> None:
        current = self._conn.entities.refresh(entity.ref)  # no job unless the registry moved
        if current is not None and current.store.folder == entity.store.folder:
            return
        # Incarnation folders are never reused, so whatever this send left there is garbage.
        self._conn.ns.remove_tree(entity.store.folder)
        raise MessagingEntityNotFoundError(
            f"{entity.label} was deleted while the send was in flight: nothing holds "
            f"its messages. Create the {entity.kind} again and resend")

    # -- API -----------------------------------------------------------------------------------
    def send_messages(self, message: Union[ServiceBusMessage, Sequence[ServiceBusMessage],
                                           ServiceBusMessageBatch], *,
                      timeout: Optional[float] = None) -> None:
        """Send one message, a list, or a batch, in ONE commit (all or nothing). A message is
        a ServiceBusMessage or an :class:`sbdelta.amqp.AmqpAnnotatedMessage` with a DATA body.

        Raises:
            MessageSizeExceededError: a message is larger than the entity allows.
            MessagingEntityDisabledError: the queue or topic is Disabled or SendDisabled.
            MessageTypeError / InvalidMessageError: not messages, or invalid fields.
        """
        self._write(to_message_list(message))

    def schedule_messages(self, messages: Union[ServiceBusMessage, Sequence[ServiceBusMessage]],
                          schedule_time_utc: datetime, *,
                          timeout: Optional[float] = None) -> List[int]:
        """Send messages that become visible at ``schedule_time_utc``; returns their sequence
        numbers (for :meth:`cancel_scheduled_messages`)."""
        if not isinstance(schedule_time_utc, datetime):
            raise ServiceBusInvalidOperationError(
                f"schedule_time_utc must be a datetime, got {type(schedule_time_utc).__name__}")
        if schedule_time_utc.tzinfo is None:
            schedule_time_utc = schedule_time_utc.replace(tzinfo=timezone.utc)
        return self._write(to_message_list(messages), schedule=utc(schedule_time_utc),
                           need_seqs=True)

    def cancel_scheduled_messages(self, sequence_numbers: Union[int, Sequence[int]], *,
                                  timeout: Optional[float] = None) -> None:
        """Cancel scheduled messages that have not become visible yet (one commit, all or none).

        Raises:
            MessageNotFoundError: a number is not a scheduled message of this entity still
                waiting for its time (unknown, already enqueued or delivered, or an ordinary
                message); nothing is cancelled.
            ServiceBusInvalidOperationError: a number is not an integer in [0, 2**63).
        """
        seqs = to_sequence_numbers(sequence_numbers)
        entity = route(self._conn.entities, self._entity()).target  # where they were written
        if not seqs:
            return
        if entity.kind == "topic":  # TOPIC-6: removed from every subscription
            subscriptions = self._conn.entities.subscriptions(entity.ref)
            entity.store.cancel_scheduled_everywhere(
                [sub.store for sub in subscriptions], seqs, self._now(),
                what=f"cancel scheduled messages on {entity.label}")
            return
        entity.store.cancel_scheduled(seqs, self._now(),
                                      what=f"cancel scheduled messages on {entity.label}")

    def send_dataframe(self, df) -> int:
        """Send every row of a DataFrame in ONE commit; returns the number of messages sent.

        Columns: ``body`` (string or binary, required) and any of ``message_id``,
        ``session_id``, ``partition_key``, ``content_type``, ``correlation_id``, ``subject``,
        ``to``, ``reply_to``, ``reply_to_session_id`` (strings), ``application_properties``
        (a map or struct, or a JSON object string), ``time_to_live`` (seconds, a number) and
        ``scheduled_enqueue_time_utc`` (timestamp). Rows are checked before anything is
        written: one bad row and nothing is sent.
        """
        from ._dataframe import inbox_frame

        entity = self._entity()
        way = route(self._conn.entities, entity)
        appended = self._append(way.target, inbox_frame(way, df, self._now(), way.hops or None))
        if appended:
            self._forward(way.target)
        return appended[1] if appended else 0


def _check_session_ids(messages: List[ServiceBusMessage], label: str) -> None:
    """SESS-1: every message sent to a session entity carries a session id (pings of a paired
    sender, PAIR-6, need none: registration drops them)."""
    missing = [i for i, m in enumerate(messages)
               if m.session_id is None and m.content_type != PING_CONTENT_TYPE]
    if missing:
        raise ServiceBusInvalidOperationError(
            f"{label} requires sessions (requires_session=True): every message needs a "
            f"session_id, and message {missing[0]} of this send has none (SESS-1); nothing "
            "was sent")

