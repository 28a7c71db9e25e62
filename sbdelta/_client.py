"""ServiceBusClient: the entry point for sending and receiving on one namespace, as in
azure-servicebus."""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from ._clock import Clock
from ._handler import Connection, wait_seconds
from ._message import NEXT_AVAILABLE_SESSION, ServiceBusReceiveMode, ServiceBusSubQueue
from ._message_fields import check_string
from ._names import EntityRef
from ._namespace import Namespace
from ._options import parse_connection_string, retry_policy_from
from .paired.options import PairedNamespaceOptions
from .paired.sender import PairedSender, Pairing
from ._receiver import ServiceBusReceiver
from ._sender import ServiceBusSender
from ._spark import session_of
from ._store import storage_errors
from .exceptions import ConfigurationError, ServiceBusInvalidOperationError

__all__ = ["ServiceBusClient"]


class ServiceBusClient:
    """Entry point for sending and receiving on one namespace, as azure-servicebus's.

    Args:
        fully_qualified_namespace: The namespace location: a folder path or Hadoop URI
            (``file:/``, ``abfss://``, ``s3a://``, ``gs://``, ``dbfs:/``). Or make the client
            with :meth:`from_connection_string`.
        credential: Accepted as in the SDK and unused: access control is the storage's (file
            permissions, cloud IAM, Unity Catalog grants); a refusal raises
            ServiceBusAuthorizationError.
        spark: The SparkSession to use; default: the active one with Delta, else a local one.
        clock: Broker time, any object with ``now() -> aware UTC datetime``.
        engine: ``"auto"`` (default), ``"spark"`` or ``"delta-rs"``: which engine runs what
            on a local namespace's tables (docs/engines.md); given none, ``$SBDELTA_ENGINE``,
            else ``"auto"``. Another value raises ConfigurationError.
        paired_namespace: A :class:`~sbdelta.paired.PairedNamespaceOptions`: pair the client
            with a secondary namespace (PAIR-1..6). Its backlog queues are created there now
            when missing, and its senders fail over to them (docs/paired.md).
        retry_total, retry_backoff_factor, retry_backoff_max, retry_mode: How commits that
            lost to concurrent writers are retried (given ones replace sbdelta's defaults; see
            ``sbdelta._options``).
        **kwargs: The SDK's transport options (``logging_enable``, ``transport_type``,
            ``http_proxy``, ``user_agent``, ``custom_endpoint_address``, ``connection_verify``,
            ``ssl_context``, ``uamqp_transport``, ``socket_timeout``) are accepted and have no
            effect: no network connection is made. Any other keyword raises TypeError.
    """

    def __init__(self, fully_qualified_namespace: str, credential: Any = None, *, spark=None,
                 clock: Optional[Clock] = None,
                 paired_namespace: Optional[PairedNamespaceOptions] = None,
                 engine: Optional[str] = None, **kwargs: Any) -> None:
        retry = retry_policy_from(kwargs, "ServiceBusClient")
        if paired_namespace is not None and not isinstance(paired_namespace,
                                                           PairedNamespaceOptions):
            raise ConfigurationError(
                f"paired_namespace must be a sbdelta.paired.PairedNamespaceOptions, got "
                f"{type(paired_namespace).__name__}")
        self._conn = Connection(Namespace(fully_qualified_namespace, spark=spark, clock=clock,
                                          engine=engine), retry)
        self._ns = self._conn.ns
        self._entities = self._conn.entities
        self._entity_path: Optional[str] = None
        self._pairing: Optional[Pairing] = None
        if paired_namespace is not None:
            self._pairing = self._pair(paired_namespace, kwargs)

    def _pair(self, options: PairedNamespaceOptions, kwargs: Dict[str, Any]) -> Pairing:
        from .management import ServiceBusAdministrationClient

        spark, clock, engine = self._ns.spark, self._ns.clock, self._ns.engine.name
        secondary = ServiceBusClient(options.secondary, spark=spark, clock=clock, engine=engine,
                                     **kwargs)
        admin = ServiceBusAdministrationClient(options.secondary, spark=spark, clock=clock,
                                               engine=engine, **kwargs)
        if secondary.namespace == self.namespace:
            raise ConfigurationError(
                f"the secondary namespace {options.secondary!r} is the primary itself: pair "
                "with another storage location")

        def start_syphon():
            from .paired.syphon import Syphon, SyphonThread

            return SyphonThread(Syphon(self.namespace, options.secondary, spark=spark,
                                       clock=clock, engine=engine,
                                       disabled=options.syphon_disabled))

        return Pairing(options, self.namespace, clock.now, secondary, admin, start_syphon)

    @classmethod
    def from_connection_string(cls, conn_str: str, **kwargs: Any) -> "ServiceBusClient":
        """A client from ``Endpoint=<namespace folder or URI>[;EntityPath=<entity>]`` (the SAS
        parts of an Azure connection string are accepted and unused). With ``EntityPath`` the
        client only makes senders and receivers for that queue or topic, as in the SDK.
        Keyword arguments as for the constructor."""
        parsed = parse_connection_string(conn_str)
        client = cls(parsed.namespace, **kwargs)
        client._entity_path = parsed.entity_path
        return client

    @property
    def namespace(self) -> str:
        """The namespace root as a URI (``file:/...`` for a local folder)."""
        return self._ns.root

    @property
    def spark(self):
        """The client's Spark session (started now if nothing has needed it yet)."""
        return session_of(self._ns.spark)

    def __enter__(self) -> "ServiceBusClient":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        """Release the client (the Spark session is left running: it is not the client's)."""
        self._conn.closed = True
        if self._pairing is not None:
            self._pairing.close()

    def get_queue_sender(self, queue_name: str, **kwargs: Any) -> "ServiceBusSender":
        """A sender for ``queue_name`` (raises MessagingEntityNotFoundError if it is missing).
        ``client_identifier`` names it; ``socket_timeout`` is accepted with no effect."""
        return self._sender(EntityRef.queue(queue_name), kwargs)

    def get_topic_sender(self, topic_name: str, **kwargs: Any) -> "ServiceBusSender":
        """A sender for ``topic_name`` (raises MessagingEntityNotFoundError if it is missing).

        A topic stores each message once (TOPIC-1); each subscription receives the messages
        its rules match as they stood when the message was sent (TOPIC-2).
        """
        return self._sender(EntityRef.topic_of(topic_name), kwargs)

    def get_queue_receiver(self, queue_name: str, *,
                           session_id: Optional[str] = None,
                           receive_mode: ServiceBusReceiveMode = ServiceBusReceiveMode.PEEK_LOCK,
                           sub_queue: Optional[ServiceBusSubQueue] = None,
                           max_wait_time: Optional[float] = None,
                           auto_lock_renewer: Any = None,
                           prefetch_count: int = 0, **kwargs: Any) -> "ServiceBusReceiver":
        """A receiver for ``queue_name`` or, with ``sub_queue=DEAD_LETTER``, its dead-letter queue.

        ``session_id`` opens a session receiver on a queue created with ``requires_session``
        (SESS-2): it locks that session when entered (``with``) or on its first operation, and
        receives only its messages, in sequence order; ``receiver.session`` has its state and
        lock. ``session_id=NEXT_AVAILABLE_SESSION`` locks the free session with the oldest
        deliverable message instead (SESS-3), waiting up to ``max_wait_time`` for one, then
        raising OperationTimeoutError (without ``max_wait_time``: it looks once).
        ``max_wait_time`` (seconds) is how long a receive waits for the first message, and
        how long the receiver's iterator waits for the next; None (the default) waits until
        one arrives, as in the SDK; 0 looks once and returns. ``auto_lock_renewer`` (an
        AutoLockRenewer, PeekLock only) registers every message received, or a session
        receiver's session, as in the SDK. ``prefetch_count`` (PeekLock, no session): a
        receive that finds the receiver's buffer empty locks up to that many messages in its
        one commit and keeps those not asked for, locked, for the next receives (their locks
        run from that commit; one that ran out in the buffer is dropped; ``close`` abandons
        the rest). 0, the default, locks only what each receive asks for. Accepted without
        effect by ReceiveAndDelete and session receivers.
        ``client_identifier`` names the receiver;
        ``socket_timeout`` is accepted with no effect.
        """
        return self._receiver(EntityRef.queue(queue_name), receive_mode, sub_queue,
                              max_wait_time, prefetch_count, session_id, auto_lock_renewer,
                              kwargs)

    def get_subscription_receiver(
            self, topic_name: str, subscription_name: str, *,
            session_id: Optional[str] = None,
            receive_mode: ServiceBusReceiveMode = ServiceBusReceiveMode.PEEK_LOCK,
            sub_queue: Optional[ServiceBusSubQueue] = None,
            max_wait_time: Optional[float] = None,
            auto_lock_renewer: Any = None,
            prefetch_count: int = 0, **kwargs: Any) -> "ServiceBusReceiver":
        """A receiver for a subscription or, with ``sub_queue=DEAD_LETTER``, its dead-letter
        queue (``<topic>/Subscriptions/<subscription>/$DeadLetterQueue``).

        The subscription behaves as a queue of its own (TOPIC-1): its own locks, delivery
        counts, deferral and dead-letter queue; settling here never touches another
        subscription. Arguments as in :meth:`get_queue_receiver`.
        """
        return self._receiver(EntityRef.subscription(topic_name, subscription_name),
                              receive_mode, sub_queue, max_wait_time, prefetch_count, session_id,
                              auto_lock_renewer, kwargs)

    def get_queue_sessions_receiver(
            self, queue_name: str, *, max_session_count: int = 10,
            session_ids: Optional[Sequence[str]] = None,
            receive_mode: ServiceBusReceiveMode = ServiceBusReceiveMode.PEEK_LOCK,
            max_wait_time: Optional[float] = None, auto_lock_renewer: Any = None,
            **kwargs: Any) -> "ServiceBusReceiver":
        """A receiver holding several sessions of a session queue at once: the bulk form for
        jobs that process many sessions (not in azure-servicebus, whose session receivers
        hold one).

        When entered (``with``) or on its first operation it locks, in ONE commit under one
        lock, the named ``session_ids`` (all or none: SessionCannotBeLockedError names those
        another receiver holds) or else up to ``max_session_count`` free sessions with
        deliverable messages, the session of the oldest message first (SESS-3; waiting up to
        ``max_wait_time`` for one, then OperationTimeoutError). Every receive form then hands
        out messages of those sessions only, each session's in sequence order:
        ``receive_dataframe(n)`` returns them as one DataFrame with a ``session_id`` column,
        in one commit, and ``complete_messages(df)`` (or abandon, defer, dead-letter) settles
        any of them in one commit. ``receiver.session`` is a
        :class:`~sbdelta.ServiceBusSessionGroup`: ``session_ids``, ``locked_until_utc``,
        ``renew_lock()`` (all sessions and their messages, one commit),
        ``get_state(session_id)`` and ``set_state(session_id, state)``; ``close()`` releases
        them all. Other arguments as in :meth:`get_queue_receiver`.
        """
        return self._receiver(EntityRef.queue(queue_name), receive_mode, None, max_wait_time,
                              0, None, auto_lock_renewer, kwargs,
                              group=_session_group(max_session_count, session_ids))

    def get_subscription_sessions_receiver(
            self, topic_name: str, subscription_name: str, *, max_session_count: int = 10,
            session_ids: Optional[Sequence[str]] = None,
            receive_mode: ServiceBusReceiveMode = ServiceBusReceiveMode.PEEK_LOCK,
            max_wait_time: Optional[float] = None, auto_lock_renewer: Any = None,
            **kwargs: Any) -> "ServiceBusReceiver":
        """:meth:`get_queue_sessions_receiver` for a session subscription."""
        return self._receiver(EntityRef.subscription(topic_name, subscription_name),
                              receive_mode, None, max_wait_time, 0, None, auto_lock_renewer,
                              kwargs, group=_session_group(max_session_count, session_ids))

    def _check_entity_path(self, ref: EntityRef) -> None:
        """From a connection string with EntityPath: only that entity (as the SDK checks)."""
        if self._entity_path is None:
            return
        name = ref.topic if ref.topic is not None else ref.path
        if name.casefold() != self._entity_path.strip("/").casefold():
            raise ServiceBusInvalidOperationError(
                f"{ref.label} does not match the EntityPath ({self._entity_path!r}) of the "
                "connection string this client was made from: use that entity, or a "
                "connection string without EntityPath")

    def _sender(self, ref: EntityRef, kwargs: Dict[str, Any]) -> "ServiceBusSender":
        identifier = _handler_options(kwargs, "get_..._sender")
        self._conn.check_open()
        self._check_entity_path(ref)
        with storage_errors(f"open {ref.label}"):  # issue 18: a storage failure said so
            self._entities.resolve(ref)
        sender = ServiceBusSender(self._conn, ref, identifier)
        return sender if self._pairing is None else PairedSender(sender, self._pairing)

    def _receiver(self, ref: EntityRef, receive_mode, sub_queue, max_wait_time,
                  prefetch_count, session_id: Optional[str] = None, auto_lock_renewer=None,
                  kwargs: Optional[Dict[str, Any]] = None,
                  group: Optional[Tuple[Optional[List[str]], int]] = None
                  ) -> "ServiceBusReceiver":
        identifier = _handler_options(kwargs or {}, "get_..._receiver")
        self._conn.check_open()
        self._check_entity_path(ref)
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
        if auto_lock_renewer is not None:
            if not callable(getattr(auto_lock_renewer, "register", None)):
                raise ServiceBusInvalidOperationError(
                    f"auto_lock_renewer must be an AutoLockRenewer, got "
                    f"{type(auto_lock_renewer).__name__}")
            if mode is ServiceBusReceiveMode.RECEIVE_AND_DELETE:
                raise ServiceBusInvalidOperationError(
                    "auto_lock_renewer is not supported in RECEIVE_AND_DELETE mode: its "
                    "messages hold no lock to renew")
        with storage_errors(f"open {ref.label}"):  # issue 18: a storage failure said so
            self._entities.resolve(ref)
        return ServiceBusReceiver(self._conn, ref, mode, sub_queue,
                                  wait_seconds(max_wait_time, "max_wait_time"),
                                  session_id=session_id, auto_lock_renewer=auto_lock_renewer,
                                  client_identifier=identifier, session_group=group,
                                  prefetch_count=prefetch_count)


def _session_group(max_session_count: Any, session_ids: Any) -> Tuple[Optional[List[str]], int]:
    """A sessions receiver's request, checked: the named sessions (or None: the next
    available ones) and how many at most."""
    if isinstance(max_session_count, bool) or not isinstance(max_session_count, int) \
            or not 1 <= max_session_count <= MAX_SESSION_COUNT:
        raise ServiceBusInvalidOperationError(
            f"max_session_count must be an integer from 1 to {MAX_SESSION_COUNT}, got "
            f"{max_session_count!r}")
    if session_ids is None:
        return None, max_session_count
    if isinstance(session_ids, (str, bytes)) or not isinstance(session_ids, Iterable):
        raise ServiceBusInvalidOperationError(
            f"session_ids must be a list of session ids (str), got {session_ids!r}")
    ids = [check_string("session_id", s) for s in session_ids]
    if not ids or None in ids or len(set(ids)) != len(ids) or len(ids) > MAX_SESSION_COUNT:
        raise ServiceBusInvalidOperationError(
            f"session_ids must name 1 to {MAX_SESSION_COUNT} different sessions, got {ids!r}")
    return sorted(ids), len(ids)


#: The most sessions one sessions receiver holds (each is a row of its one lock commit).
MAX_SESSION_COUNT = 10_000


def _handler_options(kwargs: Dict[str, Any], who: str) -> Optional[str]:
    """The ``client_identifier`` of a sender's or receiver's SDK keyword options (the others
    they take, ``socket_timeout``, have no effect); TypeError for any other keyword."""
    unknown = sorted(set(kwargs) - {"client_identifier", "socket_timeout"})
    if unknown:
        raise TypeError(f"{who} got unexpected keyword argument(s) {unknown}")
    identifier = kwargs.get("client_identifier")
    if identifier is not None and not isinstance(identifier, str):
        raise ServiceBusInvalidOperationError(
            f"client_identifier must be a str, got {type(identifier).__name__}")
    return identifier
