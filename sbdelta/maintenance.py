"""Batch maintenance over a namespace: the expiry sweep, table compaction, idle-entity deletion.

Each function takes the namespace plus keyword options, including ``clock=`` like the clients,
and returns a report object that prints as a short table. They are safe to run while senders,
receivers and other copies of the same job are active: every change is the same guarded MERGE
the receivers use, so a concurrent change makes the sweep redo its plan, never double-apply it.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Dict, List, Optional, Sequence

from ._clock import Clock
from ._entity import EntityResolver
from ._namespace import Namespace
from ._store import DEADLETTERING, DEFAULT_SWEEP_BATCH, MSG, OPERATION_BOUND
from .exceptions import MessagingEntityNotFoundError, ServiceBusInvalidOperationError

__all__ = ["ExpiryReport", "EntityExpiry", "expire_messages", "DEFAULT_SWEEP_BATCH",
           "CompactReport", "EntityCompaction", "compact", "DEFAULT_RETAIN_HOURS",
           "MIN_RETAIN_HOURS", "IdleReport", "EntityIdleness", "delete_idle_entities"]

# Delta's own default for delta.deletedFileRetentionDuration (7 days).
DEFAULT_RETAIN_HOURS = 168.0
#: The safe floor of ``retain_hours``: the operation bound (the longest an sbdelta operation
#: reads an older snapshot). Vacuum never deletes a file that a receive past its frontier reads,
#: whatever the retention (those files stay in the snapshot); below this floor it could delete
#: one that a receive still running on an older snapshot reads.
MIN_RETAIN_HOURS = OPERATION_BOUND / timedelta(hours=1)


class _Visits:
    """What every report shares: the entities visited and the sums of their counters."""

    entities: list

    @property
    def entities_visited(self) -> int:
        return len(self.entities)

    def totals(self) -> Dict[str, int]:
        """Each counter of the per-entity records (its int fields), summed over entities."""
        kind = self._entity_type  # type: ignore[attr-defined]
        keys = [f.name for f in dataclasses.fields(kind) if f.type in (int, "int")]
        return {k: sum(getattr(e, k) for e in self.entities) for k in keys}


@dataclass
class EntityExpiry:
    """What the sweep found (and, unless a dry run, handled) on one entity."""

    entity: str
    expired_dead_lettered: int = 0
    expired_dropped: int = 0
    max_delivery_dead_lettered: int = 0
    unfinished_moves: int = 0

    @property
    def total(self) -> int:
        return (self.expired_dead_lettered + self.expired_dropped
                + self.max_delivery_dead_lettered + self.unfinished_moves)


@dataclass
class ExpiryReport(_Visits):
    """The result of :func:`expire_messages`."""

    _entity_type = EntityExpiry
    dry_run: bool
    entities: List[EntityExpiry] = field(default_factory=list)
    seconds: float = 0.0

    def __str__(self) -> str:
        verb = "would handle" if self.dry_run else "handled"
        lines = [f"expiry sweep ({'dry run' if self.dry_run else 'applied'}): "
                 f"{self.entities_visited} entities visited in {self.seconds:.1f}s"]
        for e in self.entities:
            lines.append(
                f"  {e.entity:<30} {verb}: expired->DLQ {e.expired_dead_lettered}, "
                f"expired dropped {e.expired_dropped}, max-delivery->DLQ "
                f"{e.max_delivery_dead_lettered}, unfinished DLQ moves {e.unfinished_moves}")
        t = self.totals()
        lines.append(f"  {'total':<30} expired->DLQ {t['expired_dead_lettered']}, expired "
                     f"dropped {t['expired_dropped']}, max-delivery->DLQ "
                     f"{t['max_delivery_dead_lettered']}, unfinished DLQ moves "
                     f"{t['unfinished_moves']}")
        return "\n".join(lines)


def expire_messages(namespace: str, *, entities: Optional[Sequence[str]] = None,
                    clock: Optional[Clock] = None, dry_run: bool = False,
                    batch_size: int = DEFAULT_SWEEP_BATCH, spark=None) -> ExpiryReport:
    """Dead-letter or drop expired messages and messages past their delivery limit.

    Visits every queue (or only ``entities``), every partition, in batches of at most
    ``batch_size`` messages until nothing is left. Expired messages move to the dead-letter
    queue with ``TTLExpiredException`` when the queue dead-letters on expiration, else they are
    dropped (TTL-6), whether or not they were ever received; ones at ``max_delivery_count``
    move with ``MaxDeliveryCountExceeded`` (RECV-5); dead-letter moves a crash left half done
    are finished. Messages still locked are left alone (TTL-5). The report counts what was
    committed (a dry run: what was found).
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ServiceBusInvalidOperationError(
            f"batch_size must be an integer >= 1, got {batch_size!r}")
    started = time.monotonic()
    ns = Namespace(namespace, spark=spark, clock=clock)
    resolver = EntityResolver(ns)
    names = list(entities) if entities else [r.name for r in ns.registry.list("queue")]
    report = ExpiryReport(dry_run=dry_run)
    # Resolve every name first: an unknown one fails the job before anything is changed.
    for entity in [resolver.queue(name) for name in names]:
        counts = entity.store.sweep(entity.policy, ns.clock.now(), batch=batch_size,
                                    dry_run=dry_run)
        report.entities.append(EntityExpiry(entity.name, **dataclasses.asdict(counts)))
    report.seconds = time.monotonic() - started
    return report


@dataclass
class EntityCompaction:
    """What :func:`compact` removed, rewrote and vacuumed on one entity."""

    entity: str
    inbox_rows_purged: int = 0
    tombstones_purged: int = 0
    dead_letter_tombstones_purged: int = 0
    files_compacted: int = 0
    files_written: int = 0
    files_vacuumed: int = 0
    #: Inbox log files (commits, checksums, checkpoints) of versions no receive reads again.
    log_files_trimmed: int = 0
    #: Tables checkpointed by this run (with ``dry_run``: that would be).
    checkpoints_written: int = 0
    #: Per table (inbox, messages, deadletter): its latest checkpoint version after the run.
    checkpoint_versions: Dict[str, int] = field(default_factory=dict)


@dataclass
class CompactReport(_Visits):
    """The result of :func:`compact`."""

    _entity_type = EntityCompaction
    dry_run: bool
    retain_hours: float
    entities: List[EntityCompaction] = field(default_factory=list)
    seconds: float = 0.0

    def __str__(self) -> str:
        lines = [f"compaction ({'dry run' if self.dry_run else 'applied'}, vacuum retaining "
                 f"{self.retain_hours:g} h): {self.entities_visited} entities visited in "
                 f"{self.seconds:.1f}s"]
        rows = [(e.entity, vars(e)) for e in self.entities] + [("total", self.totals())]
        for name, v in rows:
            lines.append(
                f"  {name:<30} inbox rows purged {v['inbox_rows_purged']}, tombstones "
                f"{v['tombstones_purged']}, DLQ tombstones {v['dead_letter_tombstones_purged']}, "
                f"files compacted {v['files_compacted']} -> {v['files_written']}, vacuumed "
                f"{v['files_vacuumed']}, inbox log files trimmed {v['log_files_trimmed']}, "
                f"checkpoints {v['checkpoints_written']}")
        return "\n".join(lines)


def compact(namespace: str, *, entities: Optional[Sequence[str]] = None,
            clock: Optional[Clock] = None, dry_run: bool = False,
            retain_hours: float = DEFAULT_RETAIN_HOURS, spark=None) -> CompactReport:
    """Physically remove settled rows, compact small files and vacuum.

    Per queue (all of them, or only ``entities``):

    1. inbox rows every partition frontier has passed (registered, hence copied to the
       messages table or settled) are deleted, whole send commits at a time;
    2. cancellation tombstones behind the frontier, duplicate-detection history no message can
       still be checked against (past its window by the operation bound, and no unregistered
       inbox row with its id inside the window), and dead-letter COMPLETED tombstones whose
       source row is gone are deleted, by revision (the receivers' guarded MERGE, so a
       concurrent change makes this step re-plan);
    3. the messages and dead-letter tables are OPTIMIZEd (the inbox is not: change-data reads
       of unregistered commits need its original files);
    4. every table is VACUUMed with ``retain_hours`` (Delta's 7-day default; at least
       :data:`MIN_RETAIN_HOURS`, the safe floor). Files of inbox rows not registered yet stay
       in the snapshot, so no retention removes them, however far a partition lags;
    5. every table is checkpointed at its latest version, unless a checkpoint of that version
       exists (Delta also writes one every 10 commits), so the next reader replays no JSON;
    6. the inbox log is trimmed before the lowest frontier of ``retain_hours`` ago (Delta's
       own age-based log cleanup is off on the inbox: receivers read the change feed of every
       commit past their frontier, however old).

    ``dry_run`` counts what steps 1, 2, 4, 5 and 6 would remove or write and changes nothing.

    Raises:
        ServiceBusInvalidOperationError: ``retain_hours`` is not a number, or below the floor
            (before anything runs).
    """
    started = time.monotonic()
    if (isinstance(retain_hours, bool) or not isinstance(retain_hours, (int, float))
            or not retain_hours >= MIN_RETAIN_HOURS):
        raise ServiceBusInvalidOperationError(
            f"retain_hours must be a number of hours >= {MIN_RETAIN_HOURS:g}, the safe floor "
            "(the longest an sbdelta operation reads an older snapshot: vacuum with less could "
            "delete files a running receive still reads); Delta's default is "
            f"{DEFAULT_RETAIN_HOURS:g}. Got {retain_hours!r}")
    ns = Namespace(namespace, spark=spark, clock=clock)
    resolver = EntityResolver(ns)
    names = list(entities) if entities else [r.name for r in ns.registry.list("queue")]
    report = CompactReport(dry_run=dry_run, retain_hours=retain_hours)
    for entity in [resolver.queue(name) for name in names]:
        report.entities.append(_compact_entity(ns, entity, dry_run, retain_hours))
    report.seconds = time.monotonic() - started
    return report


def _compact_entity(ns: Namespace, entity, dry_run: bool, retain_hours: float):
    from ._store.delta import checkpoint, optimize, vacuum

    store, dlq = entity.store, entity.store.dead_letter_store()
    result = EntityCompaction(entity.name)
    now = ns.clock.now()
    frontiers = store.frontiers()
    result.inbox_rows_purged = store.purge_inbox(frontiers, dry_run=dry_run)

    def live_sources():
        return store.messages().where(f"kind = '{MSG}' AND state = '{DEADLETTERING}'").select(
            "pid", "k")

    def dead_here():
        return store.dead_rows(store.frontiers(), ns.clock.now())

    def dead_in_dlq():
        return dlq.dead_rows({}, ns.clock.now(), live_sources())

    if dry_run:
        result.tombstones_purged = dead_here().count()
        result.dead_letter_tombstones_purged = dead_in_dlq().count()
    else:
        result.tombstones_purged = store.purge_rows(dead_here, now)
        result.dead_letter_tombstones_purged = dlq.purge_rows(dead_in_dlq, now)
        for path in (store.messages_path, dlq.messages_path):
            removed, added = optimize(ns.spark, path)
            result.files_compacted += removed
            result.files_written += added
    for path in (store.inbox_path, store.messages_path, dlq.messages_path):
        result.files_vacuumed += vacuum(ns.spark, path, retain_hours, dry_run=dry_run)
        written, version = checkpoint(ns.spark, path, dry_run=dry_run)
        result.checkpoints_written += written
        result.checkpoint_versions[path.rsplit("/", 1)[-1]] = version
    result.log_files_trimmed = store.trim_inbox_log(timedelta(hours=retain_hours),
                                                    dry_run=dry_run)
    return result


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
class IdleReport(_Visits):
    """The result of :func:`delete_idle_entities`."""

    _entity_type = EntityIdleness
    dry_run: bool
    entities: List[EntityIdleness] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def deleted(self) -> List[str]:
        return [e.entity for e in self.entities if e.deleted]

    def __str__(self) -> str:
        verb = "would delete" if self.dry_run else "deleted"
        lines = [f"idle entities ({'dry run' if self.dry_run else 'applied'}): "
                 f"{self.entities_visited} entities visited in {self.seconds:.1f}s, "
                 f"{len(self.deleted)} {verb}"]
        for e in self.entities:
            what = verb if e.deleted else f"kept: {e.kept_because}"
            lines.append(f"  {e.kind:<12} {e.entity:<40} idle {e.idle_for}  {what}")
        return "\n".join(lines)


_IDLE_KINDS = ("topic", "queue", "subscription")  # topics first: they take their subscriptions


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
    from ._activity import last_activity
    from .management import ServiceBusAdministrationClient
    from ._properties import (QueueProperties, SubscriptionProperties,
                                         TopicProperties)

    started = time.monotonic()
    ns = Namespace(namespace, spark=spark, clock=clock)
    admin = ServiceBusAdministrationClient(namespace, spark=ns.spark, clock=ns.clock)
    rows = ns.registry._read("TRUE")
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
