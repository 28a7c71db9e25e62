"""ServiceBusReceiver: receives from one queue or subscription, or its dead-letter queue, and
settles."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from datetime import datetime, timedelta
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from ._clock import from_spark
from ._durations import expiry, expiry_sql
from ._entity import Entity
from ._handler import Connection, Handler, positive_int, under_retry_policy, wait_seconds
from ._handler import sequence_numbers as to_sequence_numbers
from ._names import EntityRef
from ._prefetch import PrefetchBuffer, abandon_held
from ._receive_checks import check_receivable, check_session_use
from ._message import (NEXT_AVAILABLE_SESSION, ServiceBusMessage, ServiceBusMessageState, ServiceBusReceivedMessage,
                       ServiceBusReceiveMode, ServiceBusSubQueue, decode_properties, delivery,
                       encode_properties, mark_renewed, mark_settled, received_message)
from ._session import (ServiceBusSession, ServiceBusSessionGroup, SessionHost, check_session,
                       hold_session, release_session, session_lock_lost)
from ._store import (ACTIVE, DEFERRED, DLQ_POLICY, PID_SHIFT, SCHEDULED, Disposition, Locked,
                     MessageStore, Settlement, seq_of_token)
from .exceptions import (MessageAlreadySettled, MessageLockLostError,
                         ServiceBusInvalidOperationError)

__all__ = ["ServiceBusReceiver"]

#: How many more receives one ``receive_messages`` call makes when a receive registered new
#: inbox rows but could hand out none of them (duplicates, scheduled, refused by rules...).
READ_ON = 64
#: How often a receive waiting for messages looks again (``max_wait_time``).
POLL_SECONDS = 0.5


@under_retry_policy
class ServiceBusReceiver(Handler):
    """Receives from one queue or subscription, or its dead-letter queue."""

    def __init__(self, connection: Connection, ref: EntityRef,
                 receive_mode: ServiceBusReceiveMode, sub_queue: Optional[ServiceBusSubQueue],
                 max_wait_time: Optional[float], *, session_id: Optional[str] = None,
                 auto_lock_renewer: Any = None,
                 client_identifier: Optional[str] = None,
                 session_group: Optional[Tuple[Optional[List[str]], int]] = None,
                 prefetch_count: int = 0) -> None:
        super().__init__(connection, ref, client_identifier)
        self._renewer = auto_lock_renewer
        self._mode = receive_mode
        self._sub_queue = sub_queue
        self._max_wait_time = max_wait_time
        self._closing = False  # close() ends a receive waiting for messages
        self._next_peek = 0
        self._session = None if session_id is None else ServiceBusSession(
            _Host(self), None if session_id is NEXT_AVAILABLE_SESSION else session_id)
        if session_group is not None:  # (named sessions or None, how many at most)
            self._session = ServiceBusSessionGroup(_Host(self), *session_group)
        self._prefetch = (PrefetchBuffer(prefetch_count)
                          if prefetch_count and self._session is None
                          and receive_mode is ServiceBusReceiveMode.PEEK_LOCK else None)

    def __enter__(self) -> "ServiceBusReceiver":
        """A session receiver locks its session here, as the SDK's does when it opens
        (SessionCannotBeLockedError, or OperationTimeoutError for NEXT_AVAILABLE_SESSION)."""
        self._closing = False
        if self._session is not None:
            hold_session(self._session, self._entity())
        return self

    @property
    def session(self) -> "ServiceBusSession":
        """The session this receiver holds (a receiver made with ``session_id``); for a
        sessions receiver, the :class:`ServiceBusSessionGroup` of the sessions it holds."""
        if self._session is None:
            raise ServiceBusInvalidOperationError(
                f"this receiver of {self._ref.label} is not a session receiver: it has no "
                "session. Get one with session_id=... on an entity that requires sessions")
        return self._session

    def close(self) -> None:
        """Release the session lock, if held: the session and its unsettled messages are
        free for the next session receiver at once. A receive waiting (in another thread)
        returns an empty list and the iterator stops; until the receiver is entered again
        (``with``) its receives look once and do not wait. Prefetched messages not handed
        out are abandoned: free for other receivers at once."""
        self._closing = True
        if self._prefetch is not None:
            abandon_held(self, self._prefetch.release(self._now()))
        if self._session is not None:
            release_session(self._session)

    @property
    def entity_path(self) -> str:
        """The queue, ``topic/Subscriptions/name``, or either with ``/$DeadLetterQueue``."""
        if self._sub_queue is ServiceBusSubQueue.DEAD_LETTER:
            return f"{self._name}/$DeadLetterQueue"
        return self._name

    @property
    def receive_mode(self) -> ServiceBusReceiveMode:
        """PEEK_LOCK (messages locked until settled) or RECEIVE_AND_DELETE."""
        return self._mode

    def __iter__(self) -> Iterator[ServiceBusReceivedMessage]:
        """Messages one by one, as the SDK's receiver iterates: until no message arrived for
        the receiver's ``max_wait_time`` seconds; without one (None, the default) it waits
        for messages for as long as the receiver is open."""
        while not self._closing:
            batch = self.receive_messages(max_message_count=10)
            if not batch:
                return
            yield from batch

    def __next__(self) -> ServiceBusReceivedMessage:
        """``next(receiver)`` as in the SDK: one message; StopIteration when none came."""
        for message in [] if self._closing else self.receive_messages(max_message_count=1):
            return message
        raise StopIteration

    # -- plumbing ------------------------------------------------------------------------------
    def _entity(self) -> Entity:
        entity = self._lookup()
        entity.check_receive()
        return entity

    def _store(self, entity: Entity) -> MessageStore:
        if self._sub_queue is ServiceBusSubQueue.DEAD_LETTER:
            return entity.store.dead_letter_store()
        return entity.store

    def _policy(self, entity: Entity):
        if self._sub_queue:
            return dataclasses.replace(DLQ_POLICY, lock_grace=entity.lock_grace)
        return entity.policy

    def _to_message(self, row, entity: Entity, *, peeked: bool = False) -> ServiceBusReceivedMessage:
        get = row.asDict()
        props = decode_properties(get.get("application_properties"))
        if get.get("dead_letter_reason") is not None:
            props["DeadLetterReason"] = get["dead_letter_reason"]
            if get.get("dead_letter_error_description") is not None:
                props["DeadLetterErrorDescription"] = get["dead_letter_error_description"]
        enqueued = from_spark(get.get("enqueued_time"))
        expires = from_spark(get.get("expires_at"))
        ttl_ms = get.get("time_to_live_ms")
        ttl = timedelta(milliseconds=ttl_ms) if ttl_ms is not None else None
        default_ttl = entity.ttl_cap  # TTL-3
        if not peeked and not self._sub_queue and expires is None and default_ttl is not None:
            expires = expiry(enqueued, default_ttl)  # TTL-7: computed on the receive path
            ttl = default_ttl
        state = get.get("state") or ACTIVE
        visible = from_spark(get.get("visible_at")) or enqueued
        if state == SCHEDULED and visible <= self._now():
            state = ACTIVE
        if state == ACTIVE and get.get("scheduled_enqueue_time") is not None \
                and visible > self._now():
            state = SCHEDULED
        return received_message(
            receiver=self, peeked=peeked, receive_mode=self._mode,
            lock_acquired_at=self._now(),
            body=bytes(get.get("body") or b""), body_type=get.get("body_type"),
            application_properties=props,
            session_id=get.get("session_id"),
            message_id=get.get("message_id"),
            partition_key=get.get("partition_key"),
            content_type=get.get("content_type"),
            correlation_id=get.get("correlation_id"),
            subject=get.get("subject"),
            to=get.get("to_address"),
            reply_to=get.get("reply_to"),
            reply_to_session_id=get.get("reply_to_session_id"),
            time_to_live=ttl,
            scheduled_enqueue_time_utc=from_spark(get.get("scheduled_enqueue_time")),
            sequence_number=get["seq"],
            enqueued_time_utc=enqueued,
            expires_at_utc=expires,
            locked_until_utc=None if peeked else from_spark(get.get("locked_until")),
            lock_token=None if peeked else get.get("lock_token"),
            delivery_count=get.get("delivery_count") or 0,
            dead_letter_reason=get.get("dead_letter_reason"),
            dead_letter_error_description=get.get("dead_letter_error_description"),
            dead_letter_source=get.get("dead_letter_source"),
            state=ServiceBusMessageState[{DEFERRED: "DEFERRED", SCHEDULED: "SCHEDULED"}
                                         .get(state, "ACTIVE")],
        )

    # -- receive -------------------------------------------------------------------------------
    def _registered(self, messages: List[ServiceBusReceivedMessage]
                    ) -> List[ServiceBusReceivedMessage]:
        """Register received messages with the receiver's ``auto_lock_renewer`` (PeekLock; a
        session receiver's renewer keeps the session instead, as in azure-servicebus)."""
        if self._renewer is not None and self._session is None \
                and self._mode is ServiceBusReceiveMode.PEEK_LOCK:
            for message in messages:
                self._renewer.register(self, message)
        return messages

    def _check_not_forwarding(self, entity: Entity) -> None:
        check_receivable(entity, self._sub_queue)

    def _check_sessions(self, entity: Entity, what: str) -> None:
        check_session_use(entity, self._sub_queue, self._session is not None)

    def _acquire(self, n: int, entity: Entity, *, as_rows: bool = False):
        self._check_not_forwarding(entity)
        self._check_sessions(entity, "receive")
        store = self._store(entity)
        if self._sub_queue is ServiceBusSubQueue.DEAD_LETTER:
            # A dead-letter move a crash left half done: its message is dead-lettered already.
            entity.store.finish_dead_letter_moves(self._now())
        hold = None if self._session is None else hold_session(self._session, entity)
        if self._mode is ServiceBusReceiveMode.PEEK_LOCK:
            self._conn.ns.check_clock()  # RECV-3 across hosts: before any lock is granted
        return store.acquire(n, policy=self._policy(entity), now=self._now,
                             delete=self._mode is ServiceBusReceiveMode.RECEIVE_AND_DELETE,
                             as_rows=as_rows, session=hold)

    def receive_messages(self, max_message_count: Optional[int] = 1,
                         max_wait_time: Optional[float] = None) -> List[ServiceBusReceivedMessage]:
        """Up to ``max_message_count`` messages, locked (PeekLock) or removed (ReceiveAndDelete).

        Waits up to ``max_wait_time`` seconds (real time; default: the receiver's) for the first
        message and returns an empty list if none came; when neither is given it waits until
        a message arrives, as the SDK's does (``max_wait_time=0``: one look, no wait). Expired,
        deferred, scheduled and locked messages are never returned.
        """
        n = positive_int(1 if max_message_count is None else max_message_count,
                          "max_message_count")
        wait = wait_seconds(max_wait_time, "max_wait_time")
        wait = self._max_wait_time if wait is None else wait
        deadline = None if wait is None else time.monotonic() + wait
        ask = n if self._prefetch is None else self._prefetch.to_lock(n)
        while True:
            held = [] if self._prefetch is None else self._prefetch.take(n, self._now())
            if held:  # locked by an earlier receive, their locks still held
                return self._registered(held)
            entity = self._entity()
            rows, touched = self._acquire(ask, entity, as_rows=True)
            for _ in range(READ_ON):
                if rows or not touched:
                    break
                # The receive registered new inbox rows and handed out none of them (they were
                # duplicates, scheduled, cancelled, expired, refused by the subscription's
                # rules or other sessions'): read on (the frontier moved) before answering
                # "nothing", or a run of such rows would hide the messages after it.
                rows, touched = self._acquire(ask, entity, as_rows=True)
            if (rows or (deadline is not None and time.monotonic() >= deadline)
                    or self._closing or self._conn.closed):
                messages = [self._to_message(r, entity) for r in rows]
                if self._prefetch is not None:
                    self._prefetch.keep(messages[n:])
                return self._registered(messages[:n])
            left = POLL_SECONDS if deadline is None else deadline - time.monotonic()
            time.sleep(min(POLL_SECONDS, max(0.0, left)))

    def receive_dataframe(self, max_message_count: int):
        """Up to ``max_message_count`` messages as a DataFrame, in one commit (the bulk form).

        Columns: sequence_number, lock_token, locked_until_utc, delivery_count, message_id,
        body (binary), application_properties (JSON string), session_id, partition_key,
        content_type, correlation_id, subject, to, reply_to, reply_to_session_id,
        enqueued_time_utc, expires_at_utc, dead_letter_reason, dead_letter_error_description,
        body_type ('data'; 'value' or 'sequence': body holds the AMQP body's JSON). Settle
        them in one commit with :meth:`complete_messages` (or abandon/defer/dead-letter)."""
        n = positive_int(max_message_count, "max_message_count")
        entity = self._entity()
        out, _ = self._acquire(n, entity)
        from pyspark.sql import functions as F

        default_ttl = entity.ttl_cap  # TTL-3
        expires = F.col("expires_at")
        if default_ttl is not None and not self._sub_queue:
            micros = int(default_ttl / timedelta(microseconds=1))
            expires = F.coalesce(expires, F.expr(expiry_sql("enqueued_time", str(micros))))
        return out.select(
            F.col("seq").alias("sequence_number"), "lock_token",
            F.col("locked_until").alias("locked_until_utc"), "delivery_count", "message_id",
            "body", "application_properties", "session_id", "partition_key", "content_type",
            "correlation_id", "subject", F.col("to_address").alias("to"), "reply_to",
            "reply_to_session_id", F.col("enqueued_time").alias("enqueued_time_utc"),
            expires.alias("expires_at_utc"), "dead_letter_reason",
            "dead_letter_error_description", F.coalesce("body_type", F.lit("data")).alias(
                "body_type"))

    def receive_deferred_messages(self, sequence_numbers: Union[int, Sequence[int]], *,
                                  timeout: Optional[float] = None) -> List[ServiceBusReceivedMessage]:
        """Lock (or, in ReceiveAndDelete, remove) deferred messages by sequence number.

        Raises MessageNotFoundError (and changes nothing) if any of them is not deferred here
        or is locked by another receiver.
        """
        seqs = to_sequence_numbers(sequence_numbers)
        if not seqs:
            return []
        entity = self._entity()
        self._check_not_forwarding(entity)
        self._check_sessions(entity, "receive deferred messages")
        hold = None if self._session is None else hold_session(self._session, entity)
        delete = self._mode is ServiceBusReceiveMode.RECEIVE_AND_DELETE
        if not delete:
            self._conn.ns.check_clock()  # RECV-3 across hosts: before any lock is granted
        found = self._store(entity).receive_deferred(
            seqs, policy=self._policy(entity), now=self._now(), delete=delete,
            what=f"receive deferred messages from {self.entity_path}", session=hold)
        return self._registered([self._to_message(r, entity) for r in found])

    def peek_messages(self, max_message_count: int = 1, *,
                      sequence_number: Optional[int] = None,
                      timeout: Optional[float] = None) -> List[ServiceBusReceivedMessage]:
        """Browse messages without locking or changing them.

        Starts at ``sequence_number`` or after the last message this receiver peeked. On a
        partitioned queue one call reads one partition (PART-5): it may return fewer messages
        than asked; call again to page on. Peek may show expired messages (TTL-4) and shows
        deferred and scheduled ones with their state.
        """
        n = positive_int(max_message_count, "max_message_count")
        if sequence_number is not None:
            if isinstance(sequence_number, bool) or not isinstance(sequence_number, int) \
                    or sequence_number < 0:
                raise ServiceBusInvalidOperationError(
                    f"sequence_number must be an integer >= 0, got {sequence_number!r}")
            self._next_peek = sequence_number
        entity = self._lookup()  # peek works on disabled queues
        self._check_sessions(entity, "peek")
        store = self._store(entity)
        where, pids = "TRUE", list(range(store.partitions))
        if self._session is not None:  # its sessions' messages, in their partitions
            hold = hold_session(self._session, entity)
            where = hold.only_sql()
            pids = hold.pids if store.partitions > 1 else [0]
            if store.partitions > 1:
                self._next_peek = max(self._next_peek, pids[0] << PID_SHIFT)
        now = self._now()
        rows, p = store.peek(n, self._next_peek, now, where)
        later = [q for q in pids if q > p] if store.partitions > 1 else []
        if not rows and later:  # the first later partition with messages, read at once
            found = store.peek_partitions(n, {q: q << PID_SHIFT for q in later}, now, where,
                                          first=True)
            p, rows = next(((q, found[q]) for q in later if found.get(q)), (later[-1], []))
            self._next_peek = p << PID_SHIFT
        if rows:
            self._next_peek = rows[-1].seq + 1
        return [self._to_message(r, entity, peeked=True) for r in rows]

    # -- settlement ----------------------------------------------------------------------------
    def _check_settleable(self, message: Any) -> ServiceBusReceivedMessage:
        if not isinstance(message, ServiceBusReceivedMessage):
            raise ServiceBusInvalidOperationError(
                f"expected a ServiceBusReceivedMessage from receive_messages, got "
                f"{type(message).__name__}")
        if self._mode is ServiceBusReceiveMode.RECEIVE_AND_DELETE:
            raise ServiceBusInvalidOperationError(
                "messages received in RECEIVE_AND_DELETE mode are already settled; settlement "
                "needs PEEK_LOCK")
        handed = delivery(message)
        if handed.peeked:
            raise ServiceBusInvalidOperationError(
                "a peeked message cannot be settled: it is not locked. Receive it in PEEK_LOCK "
                "mode first")
        if handed.receiver is not self:
            raise ServiceBusInvalidOperationError(
                "this message was received by another receiver; settle it with that receiver")
        if handed.settled:
            raise MessageAlreadySettled(
                f"message {message.sequence_number} was already settled by this receiver")
        if self._session is not None:
            check_session(self._session, "settle")
        return message

    def _settle(self, messages: List[ServiceBusReceivedMessage], action: str, *,
                properties: Optional[Dict[str, Any]] = None, reason: Optional[str] = None,
                description: Optional[str] = None) -> None:
        messages = [self._check_settleable(m) for m in messages]
        if not messages:
            return
        entity = self._entity()
        for m in messages:
            # SETTLE-7: a property change of the queue after the lock was taken voids the lock.
            if entity.updated_at > delivery(m).lock_acquired_at:
                raise MessageLockLostError(
                    f"the lock on message {m.sequence_number} was lost: {self._ref.label} "
                    f"was updated at {entity.updated_at.isoformat()} after the message was "
                    "locked. Receive it again")
        if action == "dead_letter" and self._sub_queue:
            raise ServiceBusInvalidOperationError(
                "a message in the dead-letter queue cannot be dead-lettered again; "
                "complete it to remove it")
        if action == "renew" and self._session is not None:
            raise ServiceBusInvalidOperationError(
                "the messages of a session receiver are locked by the session lock: renew it "
                "with receiver.session.renew_lock()")
        now = self._now()
        settlement = self._settlement(entity, action, now, reason, description)
        locked = []
        for m in messages:
            props = None
            if action == "abandon" and properties:
                merged = dict(m.application_properties or {})
                merged.update(properties)
                props = encode_properties(merged)
            locked.append(Locked(m.sequence_number, m.lock_token, props))
        with self._session_settles(action):
            self._store(entity).settle(locked, settlement, now,
                                       what=f"{action} on {self.entity_path}")
        for m in messages:
            if action == "renew":
                mark_renewed(m, settlement.locked_until, now)
            else:
                mark_settled(m)

    def _settlement(self, entity: Entity, action: str, now: datetime,
                    reason: Optional[str] = None,
                    description: Optional[str] = None) -> Settlement:
        """What ``action`` does on this receiver's entity (a dead-letter queue has no limit)."""
        return Settlement(
            Disposition(action),
            max_delivery_count=0 if self._sub_queue else entity.properties.max_delivery_count,
            locked_until=now + entity.policy.lock_duration if action == "renew" else None,
            reason=reason, description=description)

    def _renew_locks(self, messages: List[ServiceBusReceivedMessage]) -> None:
        """Renew many locks in ONE commit, all or none (the AutoLockRenewer's round)."""
        self._settle(list(messages), "renew")

    def _lock_duration(self) -> timedelta:
        return self._conn.entities.resolve(self._ref).properties.lock_duration

    def complete_message(self, message: ServiceBusReceivedMessage) -> None:
        """Remove the message (SETTLE-1). Needs a valid lock held by this receiver."""
        self._settle([message], "complete")

    def abandon_message(self, message: ServiceBusReceivedMessage, *,
                        properties_to_modify: Optional[Dict[str, Any]] = None) -> None:
        """Release the lock now (SETTLE-2); at the delivery limit the message is dead-lettered."""
        if properties_to_modify is not None:
            ServiceBusMessage(b"", application_properties=properties_to_modify)  # validates
        self._settle([message], "abandon", properties=properties_to_modify)

    def defer_message(self, message: ServiceBusReceivedMessage) -> None:
        """Set the message aside: only receive_deferred_messages returns it (SETTLE-4)."""
        self._settle([message], "defer")

    def dead_letter_message(self, message: ServiceBusReceivedMessage,
                            reason: Optional[str] = None,
                            error_description: Optional[str] = None) -> None:
        """Move the message to the dead-letter queue with a reason (SETTLE-3)."""
        for name, value in (("reason", reason), ("error_description", error_description)):
            if value is not None and not isinstance(value, str):
                raise ServiceBusInvalidOperationError(
                    f"{name} must be a string or None, got {type(value).__name__}")
        self._settle([message], "dead_letter", reason=reason, description=error_description)

    def renew_message_lock(self, message: ServiceBusReceivedMessage, *,
                           timeout: Optional[float] = None) -> datetime:
        """Extend the lock by the queue's lock duration from now; returns the new expiry."""
        self._settle([message], "renew")
        return message.locked_until_utc

    # -- batch settlement: the fast path -------------------------------------------------------
    def complete_messages(self, messages) -> int:
        """Complete many messages in ONE commit: a list of received messages, a list of lock
        tokens, or a DataFrame with a ``lock_token`` column. All or nothing: if any lock is
        lost, MessageLockLostError is raised and nothing is completed. Returns the count."""
        return self._settle_many(messages, "complete")

    def abandon_messages(self, messages) -> int:
        """Abandon many messages in ONE commit (see :meth:`complete_messages`)."""
        return self._settle_many(messages, "abandon")

    def defer_messages(self, messages) -> int:
        """Defer many messages in ONE commit (see :meth:`complete_messages`)."""
        return self._settle_many(messages, "defer")

    def dead_letter_messages(self, messages, reason: Optional[str] = None,
                             error_description: Optional[str] = None) -> int:
        """Dead-letter many messages in ONE commit (see :meth:`complete_messages`)."""
        return self._settle_many(messages, "dead_letter", reason=reason,
                                 description=error_description)

    def _settle_many(self, messages, action: str, *, reason: Optional[str] = None,
                     description: Optional[str] = None) -> int:
        from ._dataframe import is_dataframe

        if is_dataframe(messages):
            kind = dict(messages.dtypes).get("lock_token")
            if kind != "string":
                raise ServiceBusInvalidOperationError(
                    "the DataFrame needs a lock_token column of strings (as returned by "
                    f"receive_dataframe); it has {'none' if kind is None else kind}")
            return self._settle_tokens(
                messages.select(messages["lock_token"].cast("string").alias("_token")),
                action, reason, description)
        if isinstance(messages, (str, bytes)) or not isinstance(messages, Iterable):
            raise ServiceBusInvalidOperationError(
                "expected a list of received messages, a list of lock tokens, or a DataFrame "
                "with a lock_token column")
        items = list(messages)
        if items and all(isinstance(m, str) for m in items):
            bad = [t for t in items if seq_of_token(t) is None]
            if bad:
                raise ServiceBusInvalidOperationError(
                    f"not a lock token: {bad[0]!r}; lock tokens are UUID strings from received "
                    "messages")
            # The rows a list of messages settles (no DataFrame, so no JVM under delta-rs);
            # a token given twice settles its message once.
            locked = [Locked(seq_of_token(t), t) for t in dict.fromkeys(items)]
            return self._settle_tokens(locked, action, reason, description)
        self._settle(items, action, reason=reason, description=description)
        return len(items)

    def _settle_tokens(self, tokens: Union[List[Locked], Any], action: str,
                       reason: Optional[str], description: Optional[str]) -> int:
        """Settle lock tokens in ONE commit, all or nothing: a list of them (as :class:`Locked`,
        each once) as a list of messages is settled, a DataFrame of them (column ``_token``)
        through Spark. Returns how many messages were settled."""
        if self._mode is ServiceBusReceiveMode.RECEIVE_AND_DELETE:
            raise ServiceBusInvalidOperationError(
                "messages received in RECEIVE_AND_DELETE mode are already settled")
        if action == "dead_letter" and self._sub_queue:
            raise ServiceBusInvalidOperationError(
                "messages in the dead-letter queue cannot be dead-lettered again")
        if self._session is not None:
            check_session(self._session, "settle")
        entity = self._entity()
        now = self._now()
        settlement = self._settlement(entity, action, now, reason, description)
        what = f"{action} on {self.entity_path}"
        with self._session_settles(action):
            if isinstance(tokens, list):
                self._store(entity).settle(tokens, settlement, now, what=what)
                return len(tokens)
            return self._store(entity).settle_frame(tokens, settlement, now, what=what)

    @contextlib.contextmanager
    def _session_settles(self, action: str):
        """A session receiver's settlement: its message locks are the session lock, so a
        lock found gone at the commit is the session lock lost (SessionLockLostError)."""
        try:
            yield
        except MessageLockLostError:
            if self._session is None:
                raise
            raise session_lock_lost(self._session, action) from None


class _Host(SessionHost):
    """The receiver as its session sees it (:class:`sbdelta._session.SessionHost`)."""

    def __init__(self, receiver: ServiceBusReceiver) -> None:
        self._receiver = receiver
        self.entity_path = receiver.entity_path
        self.max_wait_time = receiver._max_wait_time

    def entity(self) -> Entity:
        return self._receiver._entity()

    def store(self, entity: Entity) -> MessageStore:
        return self._receiver._store(entity)

    def now(self) -> datetime:
        return self._receiver._now()

    def retry_policy(self):
        return self._receiver._retry_policy()

    def check_sessions(self, entity: Entity, what: str) -> None:
        self._receiver._check_sessions(entity, what)

    def check_clock(self) -> None:
        self._receiver._conn.ns.check_clock()

    def kept(self, session: ServiceBusSession) -> None:
        if self._receiver._renewer is not None:
            self._receiver._renewer.register(self._receiver, session)


# -- what AutoLockRenewer needs of a receiver (sbdelta/_autolock.py) ----------------------------
def broker_now(receiver: ServiceBusReceiver) -> datetime:
    """The receiver's broker time (its client's clock)."""
    return receiver._now()


def lock_duration(receiver: ServiceBusReceiver) -> timedelta:
    """The lock duration of the receiver's entity as it is now."""
    return receiver._lock_duration()


def renew_locks(receiver: ServiceBusReceiver, messages: List[ServiceBusReceivedMessage]) -> None:
    """Renew the locks of ``messages`` in ONE commit, all or none."""
    receiver._renew_locks(messages)

