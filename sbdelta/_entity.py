"""Resolving an entity name to its properties and tables, cheaply and freshly.

Clients look an entity up before every operation, because its status, lock duration or TTL may
change at any time (SETTLE-7). A registry read is a Spark job, so the result is cached and
reused while the registry's Delta version is unchanged (checking the version lists the log; no
job runs).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Dict, Optional, Tuple

from ._names import entity_key, validate_entity_path
from ._namespace import Namespace
from ._store import latest_version
from ._store import MessageStore, Policy
from .exceptions import MessagingEntityDisabledError, MessagingEntityNotFoundError
from ._properties import EntityStatus, QueueProperties

PARTITION_COUNT = 16


@dataclass
class Entity:
    """A queue as a client sees it at one registry version."""

    name: str
    properties: QueueProperties
    updated_at: datetime
    store: MessageStore

    @property
    def policy(self) -> Policy:
        p = self.properties
        return Policy(
            lock_duration=p.lock_duration,
            max_delivery_count=p.max_delivery_count,
            default_ttl=self.ttl_cap,
            dead_letter_on_expiration=p.dead_lettering_on_message_expiration,
            duplicate_detection=(p.duplicate_detection_history_time_window
                                 if p.requires_duplicate_detection else None),
        )

    @property
    def ttl_cap(self) -> Optional[timedelta]:
        """TTL-3, the one place it lives: the longest time-to-live a message keeps here.

        Messages without a TTL of their own get it; longer ones are cut to it. For a queue it
        is the queue's default_message_time_to_live (None: no cap). A subscription will take
        the smaller of its topic's and its own default here, once topics carry messages.
        """
        return self.properties.default_message_time_to_live

    @property
    def max_message_size(self) -> int:
        return self.properties.max_message_size_in_kilobytes * 1024

    def check_send(self) -> None:
        status = self.properties.status
        if status in (EntityStatus.DISABLED, EntityStatus.SEND_DISABLED):
            raise MessagingEntityDisabledError(
                f"queue '{self.name}' is {status.value}: sending is refused. Set its status to "
                "Active (or ReceiveDisabled) with update_queue to send again")

    def check_receive(self) -> None:
        status = self.properties.status
        if status in (EntityStatus.DISABLED, EntityStatus.RECEIVE_DISABLED):
            raise MessagingEntityDisabledError(
                f"queue '{self.name}' is {status.value}: receiving and settling are refused. "
                "Set its status to Active (or SendDisabled) with update_queue to receive again")


class EntityResolver:
    """Looks queues up in a namespace's registry, cached per registry version."""

    def __init__(self, ns: Namespace) -> None:
        self._ns = ns
        self._cache: Dict[str, Tuple[int, Entity]] = {}
        self._stores: Dict[str, MessageStore] = {}

    def _registry_version(self) -> int:
        registry = self._ns.registry
        if not registry._exists():
            return -1
        return latest_version(self._ns.spark, registry.path)

    def queue(self, name: str) -> Entity:
        name = validate_entity_path(name, kind="queue")
        key = entity_key(name)
        version = self._registry_version()
        cached = self._cache.get(key)
        if cached is not None and cached[0] == version:
            return cached[1]
        row = self._ns.registry.get(key) if version >= 0 else None
        if row is None or row.kind != "queue":
            self._cache.pop(key, None)
            raise MessagingEntityNotFoundError(
                f"queue '{name}' does not exist in namespace {self._ns.root}; create it with "
                "ServiceBusAdministrationClient.create_queue or `sbdelta apply`")
        props = QueueProperties.from_dict(row.properties)
        folder = self._ns.path(row.location)
        store = self._stores.get(folder)
        if store is None:
            store = MessageStore(self._ns.spark, folder,
                                 PARTITION_COUNT if props.enable_partitioning else 1)
            store.ensure_tables(what=f"queue '{props.name}'")
            self._stores[folder] = store
        entity = Entity(props.name, props, row.updated_at, store)
        self._cache[key] = (version, entity)
        return entity

    def refresh(self, name: str) -> Optional[Entity]:
        try:
            return self.queue(name)
        except MessagingEntityNotFoundError:
            return None
