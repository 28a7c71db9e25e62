"""Compaction: settled rows purged, small files compacted, VACUUM, checkpoints and the logs
trimmed, per queue, subscription and topic (``jobs/compact.py``)."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Dict, List, Optional, Sequence

from .._clock import Clock
from .._entity import EntityResolver
from .._namespace import Namespace
from .._connect import is_connect
from .._store import (DEADLETTERING, MSG, OPERATION_BOUND, checkpoint, optimize,
                      storage_errors, vacuum)
from ..exceptions import ServiceBusInvalidOperationError
from .report import Visits, message_entities

log = logging.getLogger("sbdelta")

__all__ = ["CompactReport", "EntityCompaction", "compact", "DEFAULT_RETAIN_HOURS",
           "MIN_RETAIN_HOURS"]

# Delta's own default for delta.deletedFileRetentionDuration (7 days).
DEFAULT_RETAIN_HOURS = 168.0
#: The safe floor of ``retain_hours``: the operation bound (the longest an sbdelta operation
#: reads an older snapshot). Vacuum never deletes a file that a receive past its frontier reads,
#: whatever the retention (those files stay in the snapshot); below this floor it could delete
#: one that a receive still running on an older snapshot reads.
MIN_RETAIN_HOURS = OPERATION_BOUND / timedelta(hours=1)


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
    #: Messages and dead-letter table log files of versions older than the retention.
    messages_log_files_trimmed: int = 0
    #: Tables checkpointed by this run (with ``dry_run``: that would be).
    checkpoints_written: int = 0
    #: Per table (inbox, messages, deadletter): its latest checkpoint version after the run.
    checkpoint_versions: Dict[str, int] = field(default_factory=dict)


@dataclass
class CompactReport(Visits):
    """The result of :func:`compact`."""

    _entity_type = EntityCompaction
    entities: List[EntityCompaction] = field(default_factory=list)
    retain_hours: float = DEFAULT_RETAIN_HOURS
    #: Run over Spark Connect: no inbox purge, no log trim, checkpoints only by delta-rs.
    connect: bool = False

    def __str__(self) -> str:
        lines = [self.header("compaction", f", vacuum retaining {self.retain_hours:g} h")]
        if self.connect:
            lines.append("  over Spark Connect: inbox rows not purged, inbox logs not trimmed, "
                         "checkpoints only where delta-rs writes them (run it on a classic "
                         "session now and then)")
        rows = [(e.entity, vars(e)) for e in self.entities] + [("total", self.totals())]
        for name, v in rows:
            lines.append(
                f"  {name:<30} inbox rows purged {v['inbox_rows_purged']}, tombstones "
                f"{v['tombstones_purged']}, DLQ tombstones {v['dead_letter_tombstones_purged']}, "
                f"files compacted {v['files_compacted']} -> {v['files_written']}, vacuumed "
                f"{v['files_vacuumed']}, inbox log files trimmed {v['log_files_trimmed']}, "
                f"messages log files trimmed {v['messages_log_files_trimmed']}, "
                f"checkpoints {v['checkpoints_written']}")
        return "\n".join(lines)


@storage_errors("compaction")  # issue 18: a storage failure as its sbdelta error
def compact(namespace: str, *, entities: Optional[Sequence[str]] = None,
            clock: Optional[Clock] = None, dry_run: bool = False,
            retain_hours: float = DEFAULT_RETAIN_HOURS, spark=None) -> CompactReport:
    """Physically remove settled rows, compact small files and vacuum.

    Per queue and subscription (all of them, or only ``entities``; a topic name stands for
    the topic and its subscriptions):

    1. inbox rows every partition frontier has passed (registered, hence copied to the
       messages table or settled) are deleted, whole send commits at a time;
    2. cancellation tombstones behind the frontier, duplicate-detection history no message can
       still be checked against (past its window by the operation bound, and no unregistered
       inbox row with its id inside the window), session rows without state whose lock ended
       the operation bound ago (SESS-5: a state keeps its row), and dead-letter COMPLETED
       tombstones whose source row is gone are deleted, by revision (the receivers' guarded MERGE, so a
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
       commit past their frontier, however old);
    7. the messages and dead-letter tables' logs are trimmed before their newest checkpoint
       older than ``retain_hours`` (Delta keeps 30 days; nothing reads a version of them older
       than an operation's snapshot, and step 4 took those versions' files): a busy queue's
       commits and delta-rs reads list a log folder of days, not of a month.

    A subscription has no inbox of its own: steps 1 and 6 run on its topic, behind the lowest
    frontier of all its subscriptions, and never on versions committed less than the
    operation bound ago (a subscription being created meanwhile starts at the latest version
    it saw, which is no older than that).

    ``dry_run`` counts what steps 1, 2, 4, 5, 6 and 7 would remove or write and changes nothing.

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
    report = CompactReport(dry_run=dry_run, retain_hours=retain_hours)
    if is_connect(ns.spark):
        report.connect = True
        log.warning("compaction over Spark Connect skips steps 1, 5 and 6 (they need the "
                    "JVM's Delta log or file deletion, %s); run it on a classic session now "
                    "and then", "delta-rs checkpoints local tables")
    for entity in message_entities(ns, resolver, entities, topics=True):
        if entity.kind == "topic":
            subscriptions = [sub.store for sub in resolver.subscriptions(entity.ref)]
            report.entities.append(_compact_topic(ns, entity, subscriptions, dry_run,
                                                  retain_hours))
        else:
            report.entities.append(_compact_entity(ns, entity, dry_run, retain_hours))
    report.seconds = time.monotonic() - started
    return report


def _compact_entity(ns: Namespace, entity, dry_run: bool, retain_hours: float):
    store, dlq = entity.store, entity.store.dead_letter_store()
    result = EntityCompaction(entity.name)
    now = ns.clock.now()
    connect = is_connect(ns.spark)
    if store.owns_inbox and not connect:
        result.inbox_rows_purged = store.purge_inbox(store.kept_frontiers(), dry_run=dry_run)

    def live_sources():
        return store.messages().where(f"kind = '{MSG}' AND state = '{DEADLETTERING}'").select(
            "pid", "k")

    def dead_here():
        return store.dead_rows(store.kept_frontiers(), ns.clock.now())

    def dead_in_dlq():
        return dlq.dead_rows({}, ns.clock.now(), live_sources())

    # On a local namespace the keys are read without Spark (DataFusion), where they can be.
    def dead_keys_here():
        return store.dead_keys(store.kept_frontiers(), ns.clock.now())

    def dead_keys_in_dlq():
        live = store.deadlettering_keys()
        return None if live is None else dlq.dead_keys({}, ns.clock.now(), live)

    if dry_run:
        here, there = dead_keys_here(), dead_keys_in_dlq()
        result.tombstones_purged = len(here) if here is not None else dead_here().count()
        result.dead_letter_tombstones_purged = (len(there) if there is not None
                                                else dead_in_dlq().count())
    else:
        result.tombstones_purged = store.purge_rows(dead_here, now, dead_keys_here)
        result.dead_letter_tombstones_purged = dlq.purge_rows(dead_in_dlq, now,
                                                              dead_keys_in_dlq)
        for path in (store.messages_path, dlq.messages_path):
            removed, added = optimize(ns.spark, path, ns.engine)
            result.files_compacted += removed
            result.files_written += added
    own = [store.inbox_path] if store.owns_inbox else []
    _vacuum_and_checkpoint(ns, result, own + [store.messages_path, dlq.messages_path],
                           retain_hours, dry_run)
    if store.owns_inbox and not connect:
        result.log_files_trimmed = store.trim_inbox_log(timedelta(hours=retain_hours),
                                                        dry_run=dry_run)
    if not connect:  # after the inbox's trim, which reads the frontiers of ``retain`` ago
        result.messages_log_files_trimmed = sum(
            s.trim_messages_log(timedelta(hours=retain_hours), dry_run=dry_run)
            for s in (store, dlq))
    return result


def _vacuum_and_checkpoint(ns: Namespace, result: EntityCompaction, paths: List[str],
                           retain_hours: float, dry_run: bool) -> None:
    for path in paths:
        result.files_vacuumed += vacuum(ns.spark, path, retain_hours,
                                         dry_run=dry_run, engine=ns.engine)
        written, version = checkpoint(ns.spark, path, dry_run=dry_run, engine=ns.engine)
        result.checkpoints_written += written
        result.checkpoint_versions[path.rsplit("/", 1)[-1]] = version


def _compact_topic(ns: Namespace, entity, subscriptions: List, dry_run: bool,
                   retain_hours: float) -> EntityCompaction:
    """A topic's inbox: rows behind every subscription's frontier (and older than the
    operation bound) purged, vacuumed, checkpointed, its log trimmed the same way."""
    store = entity.store
    result = EntityCompaction(entity.name)
    connect = is_connect(ns.spark)
    if not connect:
        frontiers = store.topic_frontiers(subscriptions, ns.clock.now())
        result.inbox_rows_purged = store.purge_inbox(frontiers, dry_run=dry_run)
    _vacuum_and_checkpoint(ns, result, [store.inbox_path, store.messages_path], retain_hours,
                           dry_run)
    if not connect:
        result.log_files_trimmed = store.trim_inbox_log(timedelta(hours=retain_hours),
                                                        dry_run=dry_run, readers=subscriptions)
        result.messages_log_files_trimmed = store.trim_messages_log(
            timedelta(hours=retain_hours), dry_run=dry_run)
    return result
