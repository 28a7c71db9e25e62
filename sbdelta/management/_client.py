"""ServiceBusAdministrationClient: queues, topics, subscriptions and rules of a namespace."""

from __future__ import annotations

import dataclasses
import json
import uuid
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Union

from .._clock import Clock
from .._names import EntityRef, storage_key
from .._handler import under_retry_policy
from .._namespace import Namespace
from .._options import parse_connection_string, retry_policy_from
from .._store.guards import GuardTripped
from .._store.registry import RegistryRow
from .._store import MessageStore
from .._entity import PARTITION_COUNT, EntityResolver
from .._subscription import RULE_HISTORY, RuleWindow
from ..rules import validate_rule
from ._forwarding import FORWARD_PROPERTIES, check_forwarding
from ._namespace_properties import (MessagingSku, NamespaceProperties, NamespaceType,
                                    namespace_name)
from ..exceptions import (InvalidPropertyError, MessagingEntityAlreadyExistsError,
                          MessagingEntityNotFoundError, ServiceBusInvalidOperationError)
from .._properties import (QueueProperties, RuleProperties, SubscriptionProperties,
                          TopicProperties, TrueRuleFilter, check_update)

__all__ = ["ServiceBusAdministrationClient", "QueueRuntimeProperties", "TopicRuntimeProperties",
           "SubscriptionRuntimeProperties"]

_TIMESTAMPS = ("created_at_utc", "updated_at_utc", "accessed_at_utc")
_IDENTITY = ("name", "topic_name", "subscription_name")

DEFAULT_RULE = "$Default"


def _without_timestamps(data: Dict[str, Any]) -> Dict[str, Any]:
    """An entity's properties (``to_dict``) without the times the registry keeps."""
    return {key: value for key, value in data.items() if key not in _TIMESTAMPS}


@dataclass(frozen=True)
class TopicRuntimeProperties:
    """A topic's counts (as ``azure.servicebus.management.TopicRuntimeProperties``).

    ``scheduled_message_count``: messages sent to the topic whose scheduled time has not come
    (TOPIC-6); ``size_in_bytes``: what its inbox holds (each message once, TOPIC-1).
    """

    name: str
    subscription_count: int
    scheduled_message_count: int
    size_in_bytes: int
    created_at_utc: Any
    updated_at_utc: Any
    accessed_at_utc: Any


@dataclass(frozen=True)
class SubscriptionRuntimeProperties:
    """A subscription's counts (as ``azure.servicebus.management.SubscriptionRuntimeProperties``).

    Counted as for a queue (:class:`QueueRuntimeProperties`): the messages its rules admitted
    (TOPIC-2), locked ones included in ``active_message_count``.
    """

    name: str
    topic_name: str
    active_message_count: int
    dead_letter_message_count: int
    scheduled_message_count: int
    deferred_message_count: int
    transfer_message_count: int
    transfer_dead_letter_message_count: int
    total_message_count: int
    size_in_bytes: int
    created_at_utc: Any
    updated_at_utc: Any
    accessed_at_utc: Any
    oldest_message_enqueued_time_utc: Any = None


@dataclass(frozen=True)
class QueueRuntimeProperties:
    """Counts of a queue's messages (as ``azure.servicebus.management.QueueRuntimeProperties``).

    ``active_message_count`` includes locked messages; ``deferred_message_count`` is extra to
    the SDK's fields; ``total_message_count`` is active + scheduled + deferred + dead-lettered.
    ``oldest_message_enqueued_time_utc`` (extra too): when the oldest active message was
    enqueued, None when there is none (``sbdelta stats`` shows its age).
    """

    name: str
    active_message_count: int
    dead_letter_message_count: int
    scheduled_message_count: int
    deferred_message_count: int
    transfer_message_count: int
    transfer_dead_letter_message_count: int
    total_message_count: int
    size_in_bytes: int
    created_at_utc: Any
    updated_at_utc: Any
    accessed_at_utc: Any
    oldest_message_enqueued_time_utc: Any = None


def _check_rule(rule: RuleProperties) -> None:
    """Parse the rule's SQL filter and action: RuleSyntaxError with the position, before
    anything is written."""
    validate_rule(rule)


def _build(cls, args: tuple, kwargs: Dict[str, Any]):
    """Construct a *Properties, turning unknown keywords into a clear sbdelta error."""
    allowed = {f.name for f in dataclasses.fields(cls)} - set(_TIMESTAMPS) - set(_IDENTITY)
    unknown = sorted(set(kwargs) - allowed)
    if unknown:
        raise InvalidPropertyError(
            f"unknown {cls.__name__} propert{'y' if len(unknown) == 1 else 'ies'} "
            f"{', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")
    return cls(*args, **kwargs)


@under_retry_policy
class ServiceBusAdministrationClient:
    """Create, read, update, delete and list the entities of a namespace.

    Names and behaviour follow ``azure.servicebus.management.ServiceBusAdministrationClient``.
    The registry is a Delta table under the namespace root; every change is one atomic commit
    whose condition carries its precondition, so concurrent admin clients in different
    processes cannot create the same entity twice or update a deleted one.

    Args:
        fully_qualified_namespace: A folder path (the embedded default) or any Hadoop file
            system URI (``abfss://...``, ``s3a://...``, ``dbfs:/...``); or make the client with
            :meth:`from_connection_string`.
        credential: Accepted as in the SDK and unused (access control is the storage's).
        spark: The Spark session to use; by default the active one, or a new local one.
        clock: Broker time (``now() -> aware UTC datetime``); defaults to the system clock.
        engine: ``"auto"`` (default), ``"spark"`` or ``"delta-rs"``: which engine runs what
            on a local namespace's tables (docs/engines.md); given none, ``$SBDELTA_ENGINE``,
            else ``"auto"``. Another value raises ConfigurationError.
        **kwargs: ``retry_*`` options and the SDK's transport options, as
            :class:`~sbdelta.ServiceBusClient` takes them (``api_version`` too: no effect).

    Raises:
        ServiceBusConnectionError: The namespace URI is invalid or cannot be reached.
    """

    def __init__(self, fully_qualified_namespace: str, credential: Any = None, *, spark=None,
                 clock: Optional[Clock] = None, engine: Optional[str] = None,
                 **kwargs: Any) -> None:
        self._retry = retry_policy_from(kwargs, "ServiceBusAdministrationClient")
        self._ns = Namespace(fully_qualified_namespace, spark=spark, clock=clock, engine=engine)

    @classmethod
    def from_connection_string(cls, conn_str: str,
                               **kwargs: Any) -> "ServiceBusAdministrationClient":
        """An administration client from ``Endpoint=<namespace folder or URI>;...`` (see
        :meth:`sbdelta.ServiceBusClient.from_connection_string`; ``EntityPath`` is ignored,
        as the SDK's administration client ignores it)."""
        return cls(parse_connection_string(conn_str).namespace, **kwargs)

    def _retry_policy(self):
        return self._retry

    @property
    def namespace(self) -> str:
        """The namespace root URI."""
        return self._ns.root

    def __enter__(self) -> "ServiceBusAdministrationClient":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        """Release nothing: the Spark session belongs to the caller or to the process."""

    def get_namespace_properties(self) -> NamespaceProperties:
        """The namespace's name, creation and last-change times and tier (see
        :class:`NamespaceProperties` for what each means here)."""
        created, modified = self._ns.registry.lifetime()
        return NamespaceProperties(
            name=namespace_name(self._ns.root), alias=None, created_at_utc=created,
            modified_at_utc=modified, messaging_sku=MessagingSku.PREMIUM, messaging_units=None,
            namespace_type=NamespaceType.MESSAGING)

    # -- queues -------------------------------------------------------------------------------
    def create_queue(self, queue_name: str, **kwargs: Any) -> QueueProperties:
        """Create a queue; keyword arguments are :class:`QueueProperties` fields.

        Raises:
            MessagingEntityAlreadyExistsError: A queue of that name exists (names are
                case-insensitive).
            InvalidEntityNameError, InvalidPropertyError: Bad name or property; nothing written.
        """
        ref = EntityRef.queue(queue_name)
        props = _build(QueueProperties, (queue_name,), kwargs)
        self._check_forwarding(ref, props)
        created = self._create(ref, props, f"queues/{storage_key(props.name)}")
        # Create the message tables now, so that the first senders and receivers (often
        # several processes at once) find them; they would create them if this step died.
        EntityResolver(self._ns).queue(queue_name)
        return created

    def get_queue(self, queue_name: str) -> QueueProperties:
        """Raises: MessagingEntityNotFoundError."""
        return self._get(EntityRef.queue(queue_name), QueueProperties)

    def update_queue(self, queue: Union[QueueProperties, Mapping[str, Any]], **kwargs: Any) -> None:
        """Update a queue from its properties, changed with ``kwargs``. The locks held on its
        messages are lost (SETTLE-7); an update that changes nothing writes nothing and keeps
        them.

        Raises:
            MessagingEntityNotFoundError: The queue does not exist.
            ImmutablePropertyError: enable_partitioning or requires_session would change.
        """
        self._update(QueueProperties, queue, kwargs, lambda p: EntityRef.queue(p.name))

    def delete_queue(self, queue_name: str) -> None:
        """Delete a queue and its messages. Raises: MessagingEntityNotFoundError."""
        self._delete(EntityRef.queue(queue_name))

    def list_queues(self) -> List[QueueProperties]:
        """Every queue of the namespace, sorted by name."""
        return [self._decode(row, QueueProperties) for row in self._ns.registry.list("queue")]

    def get_queue_runtime_properties(self, queue_name: str) -> QueueRuntimeProperties:
        """Message counts and size of a queue, summed over its partitions (PART-6).

        Counts are taken at the broker time of the client's clock. Messages still waiting in
        the inbox are counted as they were sent (a duplicate that registration will drop is
        counted until then); expired messages count until a receive or the sweep removes them
        (TTL-4).
        """
        entity = EntityResolver(self._ns).queue(queue_name)
        return QueueRuntimeProperties(name=entity.properties.name,
                                      **self._message_counts(entity))

    def list_sessions(self, queue_name: str) -> List[str]:
        """The ids of the queue's sessions that have messages (active, deferred or scheduled,
        locked or not) or a session state, sorted (SESS-6): what a worker looks through to
        find work, or to clear states. The queue must require sessions. (azure-servicebus 7
        has no such call; this is the listing of Service Bus's older clients.)"""
        return self._sessions(EntityResolver(self._ns).queue(queue_name))

    def list_subscription_sessions(self, topic_name: str, subscription_name: str) -> List[str]:
        """The sessions of a subscription, as :meth:`list_sessions` lists a queue's."""
        return self._sessions(EntityResolver(self._ns).resolve(
            EntityRef.subscription(topic_name, subscription_name)))

    def _sessions(self, entity) -> List[str]:
        if not entity.requires_session:
            raise ServiceBusInvalidOperationError(
                f"{entity.label} was not created with requires_session=True: it has no "
                "sessions to list")
        return entity.store.list_sessions()

    def list_queues_runtime_properties(self) -> List[QueueRuntimeProperties]:
        """:meth:`get_queue_runtime_properties` of every queue."""
        return [self.get_queue_runtime_properties(q.name) for q in self.list_queues()]

    def _message_counts(self, entity) -> Dict[str, Any]:
        """Counts of a queue or subscription and its dead-letter queue, at the clock's now."""
        now = self._ns.clock.now()
        counts = entity.store.counts(now)
        dead = entity.store.dead_letter_store().counts(now)
        total = counts.active + counts.scheduled + counts.deferred + dead.active
        row = self._row(entity.ref)
        return dict(active_message_count=counts.active,
                    dead_letter_message_count=dead.active,
                    scheduled_message_count=counts.scheduled,
                    deferred_message_count=counts.deferred, transfer_message_count=0,
                    transfer_dead_letter_message_count=0, total_message_count=total,
                    size_in_bytes=counts.size_in_bytes + dead.size_in_bytes,
                    created_at_utc=row.created_at, updated_at_utc=row.updated_at,
                    accessed_at_utc=row.updated_at,
                    oldest_message_enqueued_time_utc=counts.oldest)

    # -- topics -------------------------------------------------------------------------------
    def create_topic(self, topic_name: str, **kwargs: Any) -> TopicProperties:
        """Create a topic; keyword arguments are :class:`TopicProperties` fields."""
        ref = EntityRef.topic_of(topic_name)
        props = _build(TopicProperties, (topic_name,), kwargs)
        return self._create(ref, props, f"topics/{storage_key(props.name)}")

    def get_topic(self, topic_name: str) -> TopicProperties:
        """Raises: MessagingEntityNotFoundError."""
        return self._get(EntityRef.topic_of(topic_name), TopicProperties)

    def update_topic(self, topic: Union[TopicProperties, Mapping[str, Any]], **kwargs: Any) -> None:
        """Change a topic: ``topic`` (its properties, or a mapping with its ``name``) and
        keyword arguments override what is stored; immutable properties raise
        ImmutablePropertyError (as :meth:`update_queue`)."""
        self._update(TopicProperties, topic, kwargs, lambda p: EntityRef.topic_of(p.name))

    def delete_topic(self, topic_name: str) -> None:
        """Delete a topic with its subscriptions and rules."""
        self._delete(EntityRef.topic_of(topic_name))

    def list_topics(self) -> List[TopicProperties]:
        """Every topic of the namespace, sorted by name."""
        return [self._decode(row, TopicProperties) for row in self._ns.registry.list("topic")]

    def get_topic_runtime_properties(self, topic_name: str) -> TopicRuntimeProperties:
        """A topic's subscription count, scheduled messages and size."""
        ref = EntityRef.topic_of(topic_name)
        entity = EntityResolver(self._ns).resolve(ref)
        row = self._row(ref)
        counts = entity.store.inbox_counts(self._ns.clock.now())
        subs = self._ns.registry.list("subscription", parent=ref.key)
        return TopicRuntimeProperties(
            name=entity.properties.name, subscription_count=len(subs),
            scheduled_message_count=counts.scheduled, size_in_bytes=counts.size_in_bytes,
            created_at_utc=row.created_at, updated_at_utc=row.updated_at,
            accessed_at_utc=row.updated_at)

    def list_topics_runtime_properties(self) -> List[TopicRuntimeProperties]:
        """:meth:`get_topic_runtime_properties` of every topic."""
        return [self.get_topic_runtime_properties(t.name) for t in self.list_topics()]

    # -- subscriptions ------------------------------------------------------------------------
    def create_subscription(self, topic_name: str, subscription_name: str,
                            **kwargs: Any) -> SubscriptionProperties:
        """Create a subscription with the ``$Default`` rule (true filter), in one commit.

        Raises:
            MessagingEntityNotFoundError: The topic does not exist.
            MessagingEntityAlreadyExistsError: The subscription exists.
        """
        ref = EntityRef.subscription(topic_name, subscription_name)
        rule = kwargs.pop("default_rule", None)
        props = _build(SubscriptionProperties, (topic_name, subscription_name), kwargs)
        if rule is None:
            rule = RuleProperties(topic_name, subscription_name, DEFAULT_RULE,
                                  filter=TrueRuleFilter())
        elif not isinstance(rule, RuleProperties):
            raise InvalidPropertyError(
                f"default_rule must be a RuleProperties (or None for '{DEFAULT_RULE}' with a "
                f"true filter), got {type(rule).__name__}")
        else:
            rule = dataclasses.replace(rule, topic_name=props.topic_name,
                                       subscription_name=props.name)
            _check_rule(rule)
        topic_ref = EntityRef.topic_of(topic_name)
        topic = self._row(topic_ref)
        self._check_forwarding(ref, props)
        location = f"{topic.location}/subscriptions/{storage_key(props.name)}"
        return self._create(ref, props, location,
                            extra=[(EntityRef.rule(topic_name, subscription_name, rule.name),
                                    rule)],
                            prepare=lambda folder: self._start_subscription(topic, folder))

    def get_subscription(self, topic_name: str, subscription_name: str) -> SubscriptionProperties:
        """Raises: MessagingEntityNotFoundError (the topic or the subscription)."""
        return self._get(EntityRef.subscription(topic_name, subscription_name), SubscriptionProperties)

    def update_subscription(self, topic_name: str,
                            subscription: Union[SubscriptionProperties, Mapping[str, Any]],
                            **kwargs: Any) -> None:
        """Change a subscription of ``topic_name`` (as :meth:`update_queue` changes a queue)."""
        self._update(SubscriptionProperties, subscription, kwargs,
                     lambda p: EntityRef.subscription(topic_name, p.name), topic_name=topic_name)

    def delete_subscription(self, topic_name: str, subscription_name: str) -> None:
        """Delete a subscription with its rules, messages and dead letters."""
        self._delete(EntityRef.subscription(topic_name, subscription_name))

    def list_subscriptions(self, topic_name: str) -> List[SubscriptionProperties]:
        """The subscriptions of ``topic_name``, sorted by name."""
        topic = self._row(EntityRef.topic_of(topic_name))
        return [self._decode(row, SubscriptionProperties)
                for row in self._ns.registry.list("subscription", parent=topic.key)]

    def get_subscription_runtime_properties(
            self, topic_name: str, subscription_name: str) -> SubscriptionRuntimeProperties:
        """Message counts of a subscription, summed over its partitions (PART-6), counted as
        for a queue (see :meth:`get_queue_runtime_properties`)."""
        entity = EntityResolver(self._ns).resolve(
            EntityRef.subscription(topic_name, subscription_name))
        return SubscriptionRuntimeProperties(
            name=entity.properties.name, topic_name=entity.properties.topic_name,
            **self._message_counts(entity))

    def list_subscriptions_runtime_properties(
            self, topic_name: str) -> List[SubscriptionRuntimeProperties]:
        """:meth:`get_subscription_runtime_properties` of every subscription of the topic."""
        return [self.get_subscription_runtime_properties(topic_name, s.name)
                for s in self.list_subscriptions(topic_name)]

    # -- rules --------------------------------------------------------------------------------
    def create_rule(self, topic_name: str, subscription_name: str, rule_name: str,
                    **kwargs: Any) -> RuleProperties:
        """Create a rule (``filter=``, ``action=``) on a subscription."""
        ref = EntityRef.rule(topic_name, subscription_name, rule_name)
        props = _build(RuleProperties, (topic_name, subscription_name, rule_name), kwargs)
        _check_rule(props)
        return self._create(ref, props, None)

    def get_rule(self, topic_name: str, subscription_name: str, rule_name: str) -> RuleProperties:
        """Raises: MessagingEntityNotFoundError (the topic, subscription or rule)."""
        return self._get(EntityRef.rule(topic_name, subscription_name, rule_name), RuleProperties)

    def update_rule(self, topic_name: str, subscription_name: str,
                    rule: Union[RuleProperties, Mapping[str, Any]], **kwargs: Any) -> None:
        """Change a rule's filter or action; messages enqueued before keep being judged by
        the old version (TOPIC-2)."""
        if isinstance(rule, Mapping):
            rule = RuleProperties.from_dict({"topic_name": topic_name,
                                             "subscription_name": subscription_name, **rule})
        elif not isinstance(rule, RuleProperties):
            raise InvalidPropertyError(
                f"expected RuleProperties or a mapping, got {type(rule).__name__}")
        if kwargs:
            unknown = set(kwargs) - {"filter", "action"}
            if unknown:
                raise InvalidPropertyError(
                    f"cannot set {', '.join(sorted(unknown))} on RuleProperties; "
                    "allowed: action, filter")
            rule = dataclasses.replace(rule, **kwargs)
        rule = dataclasses.replace(rule, topic_name=topic_name,
                                   subscription_name=subscription_name)
        _check_rule(rule)
        self._retire_rule(EntityRef.rule(topic_name, subscription_name, rule.name), rule)

    def delete_rule(self, topic_name: str, subscription_name: str, rule_name: str) -> None:
        """Delete a rule; messages enqueued before keep being judged by it (TOPIC-2)."""
        self._retire_rule(EntityRef.rule(topic_name, subscription_name, rule_name), None)

    def list_rules(self, topic_name: str, subscription_name: str) -> List[RuleProperties]:
        """The current rules of a subscription, sorted by name."""
        sub = self._row(EntityRef.subscription(topic_name, subscription_name))
        return [self._decode(row, RuleProperties)
                for row in self._ns.registry.list("rule", parent=sub.key)]

    # -- configuration ------------------------------------------------------------------------
    def apply_config(self, config, *, namespace_name: Optional[str] = None):
        """Make the namespace match a config (a path, a dict or a NamespaceConfig).

        Missing entities are created, changed ones updated, the rest reported; running it again
        changes nothing. Every entity is validated before anything is written.

        Returns:
            An :class:`ApplyReport`: what was created, updated, left alone or removed.
        """
        from ._apply import apply_config

        return apply_config(self, config, namespace_name=namespace_name)

    # -- internals ----------------------------------------------------------------------------
    def _row(self, ref: EntityRef) -> RegistryRow:
        row = self._ns.registry.get(ref.key)
        if row is None or row.kind != ref.kind:
            raise MessagingEntityNotFoundError(
                f"{ref.label} does not exist in namespace {self._ns.root}")
        return row

    def _get(self, ref: EntityRef, cls):
        return self._decode(self._row(ref), cls)

    @staticmethod
    def _decode(row: RegistryRow, cls):
        props = cls.from_dict(row.properties)
        return dataclasses.replace(props, created_at_utc=row.created_at,
                                   updated_at_utc=row.updated_at,
                                   accessed_at_utc=row.updated_at) \
            if hasattr(props, "accessed_at_utc") else \
            dataclasses.replace(props, created_at_utc=row.created_at)

    def _create(self, ref: EntityRef, props, location_prefix: Optional[str], extra=(),
                prepare=None):
        """Register an entity (and ``extra`` children) in one commit.

        ``prepare(folder)`` readies the entity's tables first, so the registry never names an
        entity whose tables are not ready; if the registration then fails, the folder goes.
        """
        self._ns.ensure_root()
        location = f"{location_prefix}/{uuid.uuid4().hex[:12]}" if location_prefix else None
        if prepare is not None:
            prepare(self._ns.path(location))
        now = self._ns.clock.now()  # after prepare: see _start_subscription
        rows = [self._encode(ref, props, location, now)]
        rows += [self._encode(r, p, None, now) for r, p in extra]
        try:
            self._ns.registry.insert(rows, parent_kind=ref.parent_kind)
        except GuardTripped as tripped:
            if location is not None:
                self._ns.remove_tree(self._ns.path(location))
            if tripped.code == "EXISTS":
                raise MessagingEntityAlreadyExistsError(
                    f"{ref.label} already exists in namespace {self._ns.root}") from None
            raise MessagingEntityNotFoundError(
                f"cannot create {ref.label}: its {ref.parent_kind} does not exist") from None
        return self._decode(rows[0], type(props))

    def _start_subscription(self, topic: RegistryRow, folder: str) -> None:
        """Create a new subscription's tables with every partition's frontier at the topic
        inbox's latest version: it reads only what the topic gets from now on.

        That version is read before the subscription's creation time is taken, so every
        message stamped at or after that time (the start of the ``$Default`` rule's window,
        TOPIC-2) commits after it and is read; earlier ones fall outside every rule window.
        """
        topic_props = TopicProperties.from_dict(topic.properties)
        partitions = PARTITION_COUNT if topic_props.enable_partitioning else 1
        inbox = MessageStore(self._ns.spark, self._ns.path(topic.location), partitions,
                             engine=self._ns.engine)
        inbox.ensure_topic_tables(f"topic '{topic_props.name}'")
        store = MessageStore(self._ns.spark, folder, partitions, inbox=inbox.inbox_path,
                             engine=self._ns.engine)
        store.ensure_tables(what=folder)
        store.start_at_latest(self._ns.clock.now())

    def _retire_rule(self, ref: EntityRef, replacement: Optional[RuleProperties]) -> None:
        """Update (``replacement``) or delete a rule, keeping the version it replaces as a
        ``rule_history`` row: messages enqueued while it applied are still judged by it when
        the subscription reads them later (TOPIC-2)."""
        now = self._ns.clock.now()

        def change(row: RegistryRow):
            if replacement is not None and json.loads(json.dumps(
                    _without_timestamps(replacement.to_dict()), sort_keys=True)) == row.properties:
                return None  # the same filter and action: no new version (TOPIC-2 unchanged)
            window = RuleWindow(RuleProperties.from_dict(row.properties), row.updated_at, now)
            history = RegistryRow(ref.history_key(uuid.uuid4().hex[:12]), RULE_HISTORY,
                                  ref.name, ref.parent, None, window.to_history(), now, now)
            new = None
            if replacement is not None:
                new = _without_timestamps(replacement.to_dict())
            return new, history

        try:
            self._ns.registry.retire(ref.key, ref.kind, change, now)
        except GuardTripped:
            raise MessagingEntityNotFoundError(
                f"{ref.label} does not exist in namespace {self._ns.root}") from None

    def _check_forwarding(self, ref: EntityRef, props) -> None:
        """FWD-1/FWD-3, before anything is written (one registry read, only when forwarding)."""
        if any(getattr(props, p, None) for p in FORWARD_PROPERTIES):
            check_forwarding(self._ns.registry.all(), ref, props, self._ns.root)

    def _encode(self, ref: EntityRef, props, location: Optional[str], now) -> RegistryRow:
        data = _without_timestamps(props.to_dict())
        return RegistryRow(ref.key, ref.kind, props.name, ref.parent, location, data, now, now)

    def _update(self, cls, entity, changes: Dict[str, Any], ref_of, **identity: str) -> None:
        if isinstance(entity, Mapping):
            entity = cls.from_dict({**identity, **entity})
        elif not isinstance(entity, cls):
            raise InvalidPropertyError(
                f"expected {cls.__name__} or a mapping, got {type(entity).__name__}")
        if changes:
            unknown = set(changes) - {f.name for f in dataclasses.fields(cls)} | (
                set(changes) & set(_IDENTITY))
            if unknown:
                raise InvalidPropertyError(
                    f"cannot set {', '.join(sorted(unknown))} on {cls.__name__}")
            entity = dataclasses.replace(entity, **changes)
        ref = ref_of(entity)
        current = self._get(ref, cls)
        check_update(current, entity)
        if any(getattr(entity, p, None) != getattr(current, p, None)
               for p in FORWARD_PROPERTIES):
            self._check_forwarding(ref, entity)
        data, was = (_without_timestamps(p.to_dict()) for p in (entity, current))
        if data == was:
            return  # nothing changes: no commit, no lock lost, updated_at_utc stays
        now = self._ns.clock.now()
        if ref.kind in ("queue", "subscription"):
            # SETTLE-7: the locks held now are lost, whatever form settles them later. Ended
            # before the registry commit: if that fails, the update is not made and locks
            # ended early are all it did (a lock "can be lost", SETTLE-7); the other way
            # round a failed release would leave an update whose token settlements still hold.
            EntityResolver(self._ns).resolve(ref).store.void_locks(now)
        try:
            self._ns.registry.update(ref.key, ref.kind, data, now)
        except GuardTripped:
            raise MessagingEntityNotFoundError(f"{ref.label} was deleted") from None

    def _delete(self, ref: EntityRef) -> None:
        row = self._row(ref)
        if not self._ns.registry.delete(ref.key, ref.kind):
            raise MessagingEntityNotFoundError(f"{ref.label} does not exist")
        if row.location:
            self._ns.remove_tree(self._ns.path(row.location))
