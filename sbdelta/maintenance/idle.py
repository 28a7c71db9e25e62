"""Deleting idle entities: queues, topics and subscriptions idle longer than their
``auto_delete_on_idle`` (``jobs/delete_idle_entities.py``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import List, Optional, Sequence

from .._activity import last_activity
from .._clock import Clock
from .._namespace import Namespace
from .._store import storage_errors
from .._properties import QueueProperties, SubscriptionProperties, TopicProperties
from ..exceptions import MessagingEntityNotFoundError
from .report import Visits

__all__ = ["IdleReport", "EntityIdleness", "delete_idle_entities"]


@dataclass
class EntityIdleness:
    """One entity the idle job looked at."""

    entity: str
    kind: str
    auto_delete_on_idle: Optional[timedelta]
    last_activity: datetime
    idle_for: timedelta
    deleted: bool = False
    kept_because: str = ""


@dataclass
class IdleReport(Visits):
    """The result of :func:`delete_idle_entities`."""

    _entity_type = EntityIdleness
    entities: List[EntityIdleness] = field(default_factory=list)

    @property
    def deleted(self) -> List[str]:
        """The names of the entities deleted."""
        return [e.entity for e in self.entities if e.deleted]

    def __str__(self) -> str:
        verb = "would delete" if self.dry_run else "deleted"
        lines = [f"{self.header('idle entities')}, {len(self.deleted)} {verb}"]
        for e in self.entities:
            what = verb if e.deleted else f"kept: {e.kept_because}"
            lines.append(f"  {e.kind:<12} {e.entity:<40} idle {e.idle_for}  {what}")
        return "\n".join(lines)


_IDLE_KINDS = ("topic", "queue", "subscription")  # topics first: they take their subscriptions


@storage_errors("idle-entity deletion")  # issue 18: a storage failure as its sbdelta error
def delete_idle_entities(namespace: str, *, entities: Optional[Sequence[str]] = None,
                         clock: Optional[Clock] = None, dry_run: bool = False,
                         spark=None) -> IdleReport:
    """Delete queues, topics and subscriptions idle for longer than ``auto_delete_on_idle``.

    Activity (IDLE-2) is the newest of: the entity's creation and updates in the registry, the
    creation and updates of everything below it (a topic's subscriptions and rules, a
    subscription's rules), and the times clients recorded under its folder and its children's
    folders when they sent, received, peeked, settled or scheduled (see ``sbdelta._activity``).
    An entity that forwards (``forward_to``) counts as received from, so it is kept (IDLE-3).
    Entities without ``auto_delete_on_idle`` are never deleted. ``entities`` limits the job to
    these paths (``queue``, ``topic`` or ``topic/Subscriptions/name``).
    """
    from ..management import ServiceBusAdministrationClient

    started = time.monotonic()
    ns = Namespace(namespace, spark=spark, clock=clock)
    admin = ServiceBusAdministrationClient(namespace, spark=ns.spark, clock=ns.clock)
    rows = ns.registry.all()
    by_key = {r.key: r for r in rows}
    classes = {"queue": QueueProperties, "topic": TopicProperties,
               "subscription": SubscriptionProperties}

    def path_of(row) -> str:
        if row.kind == "subscription":
            return f"{by_key[row.parent].name}/Subscriptions/{row.name}"
        return row.name

    wanted = None if entities is None else {name.lower() for name in entities}
    known = {path_of(r).lower() for r in rows if r.kind in _IDLE_KINDS}
    missing = [name for name in entities or () if name.lower() not in known]
    if missing:  # checked before anything is deleted, like the other jobs
        raise MessagingEntityNotFoundError(
            f"no queue, topic or subscription {', '.join(missing)} in namespace {ns.root}; "
            "subscriptions are named 'topic/Subscriptions/name'")
    report = IdleReport(dry_run=dry_run)
    gone: set = set()
    for kind in _IDLE_KINDS:
        for row in [r for r in rows if r.kind == kind]:
            path = path_of(row)
            if (wanted is not None and path.lower() not in wanted) or row.parent in gone:
                continue
            props = classes[kind].from_dict(row.properties)
            below = [r for r in rows if r.key.startswith(row.key + ":")]

            def newest() -> datetime:
                folders = [ns.path(r.location) for r in [row] + below if r.location]
                times = [row.created_at, row.updated_at] + [r.updated_at for r in below]
                recorded = last_activity(ns, folders)
                return max(times + ([recorded] if recorded else []))

            now = ns.clock.now()
            last = newest()
            seen = EntityIdleness(path, kind, props.auto_delete_on_idle, last, now - last)
            report.entities.append(seen)
            if props.auto_delete_on_idle is None:
                seen.kept_because = "auto_delete_on_idle not set"
            elif getattr(props, "forward_to", None):
                seen.kept_because = f"forwards to {props.forward_to} (IDLE-3)"
            elif seen.idle_for < props.auto_delete_on_idle:
                seen.kept_because = f"auto_delete_on_idle is {props.auto_delete_on_idle}"
            elif dry_run:
                seen.deleted = True
                gone.add(row.key)
            elif ns.clock.now() - newest() >= props.auto_delete_on_idle:  # still idle: delete
                try:
                    if kind == "queue":
                        admin.delete_queue(row.name)
                    elif kind == "topic":
                        admin.delete_topic(row.name)
                    else:
                        admin.delete_subscription(by_key[row.parent].name, row.name)
                    seen.deleted = True
                except MessagingEntityNotFoundError:
                    seen.kept_because = "deleted by someone else meanwhile"
                gone.add(row.key)
            else:
                seen.kept_because = "became active while the job ran"
    report.seconds = time.monotonic() - started
    return report
