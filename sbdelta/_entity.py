"""Resolving an entity to its properties and tables, cheaply and freshly.

Clients look an entity up before every operation, because its status, lock duration, TTL or
rules may change at any time (SETTLE-7). A registry read is a Spark job, so the result is cached
and reused while the registry's Delta version is unchanged (checking the version lists the log;
no job runs). A subscription is read with its topic and rules in the same one read.

Entity kinds and their tables:

- queue: its own inbox, messages and dead-letter tables;
- topic: its inbox only (senders append there; TOPIC-1 stores each message once);
- subscription: its own messages and dead-letter tables over its topic's inbox, seen through
  its rules (:class:`~sbdelta._subscription.Admission`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Dict, List, Optional, Tuple, Union

from ._clock import lock_grace
from ._names import EntityRef
from ._namespace import Namespace
from ._properties import (EntityStatus, QueueProperties, RuleProperties, SubscriptionProperties,
                          TopicProperties)
from ._store import MessageStore, Policy
from ._subscription import RULE_HISTORY, Admission, RuleWindow
from .exceptions import MessagingEntityDisabledError, MessagingEntityNotFoundError

PARTITION_COUNT = 16

AnyEntityProperties = Union[QueueProperties, TopicProperties, SubscriptionProperties]


@dataclass
class Entity:
    """A queue, topic or subscription as a client sees it at one registry version."""

    ref: EntityRef
    properties: AnyEntityProperties
    updated_at: datetime
    store: MessageStore
    topic: Optional[TopicProperties] = None  # a subscription's topic
    lock_grace: timedelta = timedelta(0)  # from the client's clock (_clock.lock_grace)

    @property
    def name(self) -> str:
        return self.ref.path

    @property
    def label(self) -> str:
        """How errors name it: ``queue 'orders'``, ``subscription 'events/audit'``."""
        return self.ref.label

    @property
    def kind(self) -> str:
        return self.ref.kind

    @property
    def policy(self) -> Policy:
        p = self.properties
        dedup = self.topic if self.topic is not None else p
        return Policy(
            lock_duration=p.lock_duration,
            max_delivery_count=p.max_delivery_count,
            default_ttl=self.ttl_cap,
            dead_letter_on_expiration=p.dead_lettering_on_message_expiration,
            duplicate_detection=(dedup.duplicate_detection_history_time_window
                                 if dedup.requires_duplicate_detection else None),
            lock_grace=self.lock_grace,
        )

    @property
    def ttl_cap(self) -> Optional[timedelta]:
        """TTL-3, the one place it lives: the longest time-to-live a message keeps here.

        Messages without a TTL of their own get it; longer ones are cut to it. For a queue or
        topic it is its default_message_time_to_live (None: no cap); for a subscription the
        smaller of its topic's and its own.
        """
        own = self.properties.default_message_time_to_live
        if self.topic is None:
            return own
        caps = [c for c in (own, self.topic.default_message_time_to_live) if c is not None]
        return min(caps) if caps else None

    @property
    def max_message_size(self) -> int:
        sending = self.topic if self.topic is not None else self.properties
        return sending.max_message_size_in_kilobytes * 1024

    @property
    def requires_duplicate_detection(self) -> bool:
        sending = self.topic if self.topic is not None else self.properties
        return sending.requires_duplicate_detection

    @property
    def requires_session(self) -> bool:
        """SESS-1: only messages with a session id are accepted, only session receivers read."""
        return bool(getattr(self.properties, "requires_session", False))

    def check_send(self) -> None:
        status = self.properties.status
        if status in (EntityStatus.DISABLED, EntityStatus.SEND_DISABLED):
            raise MessagingEntityDisabledError(
                f"{self.label} is {status.value}: sending is refused. Set its status to "
                f"Active (or ReceiveDisabled) with update_{self.kind} to send again")

    def check_receive(self) -> None:
        status = self.properties.status
        if status in (EntityStatus.DISABLED, EntityStatus.RECEIVE_DISABLED):
            raise MessagingEntityDisabledError(
                f"{self.label} is {status.value}: receiving and settling are refused. "
                f"Set its status to Active (or SendDisabled) with update_{self.kind} to "
                "receive again")
        if self.topic is not None and self.topic.status is EntityStatus.DISABLED:
            raise MessagingEntityDisabledError(
                f"{self.label} belongs to topic '{self.topic.name}', which is Disabled: "
                "receiving is refused until the topic is Active again")


class EntityResolver:
    """Looks entities up in a namespace's registry, cached per registry version."""

    def __init__(self, ns: Namespace) -> None:
        self._ns = ns
        self._cache: Dict[str, Tuple[int, Entity]] = {}
        self._families: Dict[str, Tuple[int, List[Entity]]] = {}
        self._stores: Dict[str, MessageStore] = {}

    def _registry_version(self) -> int:
        return self._ns.registry.version()

    def queue(self, name: str) -> Entity:
        return self.resolve(EntityRef.queue(name))

    def resolve(self, ref: EntityRef) -> Entity:
        """The entity ``ref`` names as the registry has it now.

        Raises:
            MessagingEntityNotFoundError: There is no such entity (for a subscription: or no
                such topic).
        """
        version = self._registry_version()
        cached = self._cache.get(ref.key)
        if cached is not None and cached[0] == version and cached[1].kind == ref.kind:
            return cached[1]
        try:
            entity = self._load(ref, version)
        except MessagingEntityNotFoundError:
            self._cache.pop(ref.key, None)
            raise
        self._cache[ref.key] = (version, entity)
        return entity

    def refresh(self, ref: EntityRef) -> Optional[Entity]:
        try:
            return self.resolve(ref)
        except MessagingEntityNotFoundError:
            return None

    def _missing(self, ref: EntityRef) -> MessagingEntityNotFoundError:
        how = {"queue": "ServiceBusAdministrationClient.create_queue",
               "topic": "ServiceBusAdministrationClient.create_topic",
               "subscription": "ServiceBusAdministrationClient.create_subscription"}[ref.kind]
        return MessagingEntityNotFoundError(
            f"{ref.label} does not exist in namespace {self._ns.root}; create it with {how} "
            "or `sbdelta apply`")

    def _load(self, ref: EntityRef, version: int) -> Entity:
        if ref.kind == "subscription":
            return self._load_subscription(ref, version)
        row = self._ns.registry.get(ref.key) if version >= 0 else None
        if row is None or row.kind != ref.kind:
            raise self._missing(ref)
        cls = QueueProperties if ref.kind == "queue" else TopicProperties
        props = cls.from_dict(row.properties)
        store = self._store(row.location, props.enable_partitioning, f"{ref.kind} '{props.name}'",
                            topic=ref.kind == "topic")
        return Entity(ref, props, row.updated_at, store, lock_grace=lock_grace(self._ns.clock))

    def subscriptions(self, topic: EntityRef) -> List[Entity]:
        """Every subscription of ``topic``, with its rules, in ONE registry read (none while
        the registry has not moved since the last call)."""
        version = self._registry_version()
        cached = self._families.get(topic.key)
        if cached is not None and cached[0] == version:
            return cached[1]
        rows = self._ns.registry.family([topic.key], below=topic.key)
        found = [self._subscription(EntityRef.subscription(topic.name, row.name), rows)
                 for row in rows if row.kind == "subscription" and row.parent == topic.key]
        self._families[topic.key] = (version, found)
        return found

    def queue_or_topic(self, path: str) -> Entity:
        """The queue or topic named ``path`` (a forwarding destination).

        Raises:
            MessagingEntityNotFoundError: There is neither.
        """
        try:
            return self.resolve(EntityRef.queue(path))
        except MessagingEntityNotFoundError:
            pass
        try:
            return self.resolve(EntityRef.topic_of(path))
        except MessagingEntityNotFoundError:
            raise MessagingEntityNotFoundError(
                f"no queue or topic named {path!r} exists in namespace {self._ns.root}") from None

    def _load_subscription(self, ref: EntityRef, version: int) -> Entity:
        rows = self._ns.registry.family([ref.parent, ref.key], below=ref.key) \
            if version >= 0 else []
        return self._subscription(ref, rows)

    def _subscription(self, ref: EntityRef, rows) -> Entity:
        topic_key = ref.parent
        by_key = {r.key: r for r in rows}
        topic_row, sub_row = by_key.get(topic_key), by_key.get(ref.key)
        if topic_row is None or topic_row.kind != "topic":
            raise MessagingEntityNotFoundError(
                f"{ref.label}: topic '{ref.topic}' does not exist in namespace {self._ns.root}")
        if sub_row is None or sub_row.kind != "subscription":
            raise self._missing(ref)
        topic = TopicProperties.from_dict(topic_row.properties)
        props = SubscriptionProperties.from_dict(sub_row.properties)
        windows: List[RuleWindow] = []
        for row in rows:
            if row.kind == "rule" and row.parent == ref.key:
                windows.append(RuleWindow(RuleProperties.from_dict(row.properties),
                                          row.updated_at))
            elif row.kind == RULE_HISTORY and row.parent == ref.key:
                windows.append(RuleWindow.from_history(row.properties))
        inbox = self._store(topic_row.location, topic.enable_partitioning,
                            f"topic '{topic.name}'", topic=True)
        base = self._store(sub_row.location, topic.enable_partitioning, ref.label,
                           inbox=inbox.inbox_path)
        own = props.default_message_time_to_live
        topic_ttl = topic.default_message_time_to_live
        cap = own if own is not None and (topic_ttl is None or own < topic_ttl) else None
        admission = Admission(windows, cap, props.dead_lettering_on_filter_evaluation_exceptions,
                              bool(getattr(props, "requires_session", False)))
        return Entity(ref, props, sub_row.updated_at, base.reading(admission), topic,
                      lock_grace=lock_grace(self._ns.clock))

    def _store(self, location: str, partitioned: bool, what: str, *, topic: bool = False,
               inbox: Optional[str] = None) -> MessageStore:
        folder = self._ns.path(location)
        store = self._stores.get(folder)
        if store is None:
            store = MessageStore(self._ns.spark, folder,
                                 PARTITION_COUNT if partitioned else 1, inbox=inbox,
                                 engine=self._ns.engine, location=location)
            if topic:
                store.ensure_topic_tables(what)
            else:
                store.ensure_tables(what=what)
            self._stores[folder] = store
        return store
