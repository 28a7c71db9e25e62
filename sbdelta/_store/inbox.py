"""The inbox: senders' blind appends, and how receivers find what they have not registered yet.

Receivers read the inbox's change feed only for versions after a partition's frontier, so the
cost of a receive follows its batch and the commits it passes, not the backlog. Those commits
are never removed, however old: their files stay in the snapshot (VACUUM keeps them) and their
commit files stay in the log (Delta's age-based log cleanup is off on the inbox; compaction
trims the log only behind every frontier, :func:`trim_log`).
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from datetime import datetime, timedelta, timezone
from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

from . import deltalog, rs_feed
from .delta import (TIME_TRAVEL_CHECK, commit_of, latest_snapshot, materialize,
                    remove_files_quietly, session_settings)
from .layout import (COPY_SHIFT, FRONTIER, MSG, OPERATION_BOUND, SEEN, SEEN_COPY, case_by_pid,
                     IDX_MASK, frontier_at, kept_frontier_sql, pid_list, seq_sql,
                     sequence_number, start_version, version_of)


def append(store, df) -> Optional[Tuple[int, int]]:
    """Append inbox rows in one commit; returns its (version, rows written), read from the
    Delta log, or None when ``df`` had no rows (then nothing was committed).

    Appends only to the existing inbox: DataFrameWriterV2's ``append`` refuses a missing
    table, where ``df.write.mode("append")`` would create one in a deleted queue's folder.
    """
    token = f"sbdelta:{uuid.uuid4().hex}"
    before = store.latest_version(store.inbox_path)
    df.writeTo(f"delta.`{store.inbox_path}`").option("userMetadata", token).append()
    return commit_of(store.spark, store.inbox_path, token, before)


def inbox_range(store, pids: Iterable[int], frontiers: Dict[int, int], lo: int, hi: int, *,
                history: bool = False):
    """Inbox rows of versions lo..hi in ``pids`` past each partition's frontier, with ``seq``
    (a subscription's: only those its rules admit, as it sees them; with ``history``, also
    each topic message as a :data:`.layout.SEEN` row, :func:`seen_rows`)."""
    from pyspark.sql import functions as F

    pids = sorted(set(pids))
    frontier_case = case_by_pid({p: frontiers.get(p, -1) for p in pids}, default="-1")
    with session_settings(store.spark, {TIME_TRAVEL_CHECK: "false"}):  # analysed here
        feed = (store.spark.read.format("delta").option("readChangeFeed", "true")
                .option("startingVersion", lo).option("endingVersion", hi)
                .load(store.inbox_path))
    rows = (feed.where(f"_change_type = 'insert' AND pid IN ({pid_list(pids)})")
            .withColumn("seq", F.expr(seq_sql()))
            .where(f"seq > {frontier_case}")
            # The inbox position: a subscription's copies of one message share it (TOPIC-5).
            .withColumn("pos", F.col("seq")))
    # A subscription sees its topic's inbox through its rules (MessageStore.admit).
    if store.admit is None:
        return rows
    if history:
        return store.admit(rows).unionByName(seen_rows(rows), allowMissingColumns=True)
    return store.admit(rows)


def seen_rows(rows):
    """Every topic message read, as a :data:`.layout.SEEN` row (body left out): what a
    subscription's receive records in its duplicate history whether its rules take the
    message or not (a topic with duplicate detection; the plan registers no message for it).
    ``rows``: a DataFrame of inbox rows with ``pos``, or a list of such dicts."""
    copy = SEEN_COPY << COPY_SHIFT
    if isinstance(rows, list):
        return [dict(row, kind=SEEN, seq=row["pos"] | copy, body=None) for row in rows
                if row.get("kind") == MSG]
    from pyspark.sql import functions as F

    return (rows.where(F.col("kind") == MSG)
            .withColumn("kind", F.lit(SEEN))
            .withColumn("seq", F.col("pos").bitwiseOR(F.lit(copy)))
            .withColumn("body", F.lit(None).cast("binary")))


def inbox_rows(store, frontiers: Dict[int, int], lo: int, hi: int,
               columns: Optional[Sequence[str]] = None, *,
               history: bool = False) -> List[dict]:
    """:func:`inbox_range` read by delta-rs, without Spark: dicts (:func:`.rs_feed.inbox_rows`;
    only ``columns`` of a queue's rows when given). A subscription's rows go through its rules
    in Python (:meth:`sbdelta._subscription.Admission.admit_rows`: the same rows, copies,
    properties and dead-letter reasons as the Spark form), so they need every column."""
    if store.admit is None:
        return rs_feed.inbox_rows(store.inbox_path, frontiers, lo, hi, sequence_number,
                             columns=columns)
    read = rs_feed.inbox_rows(store.inbox_path, frontiers, lo, hi, sequence_number)
    return store.admit.admit_rows(read) + (seen_rows(read) if history else [])


#: An inbox's version 0 is its creation, which holds no rows (sbdelta makes every inbox empty):
#: a scan starts after it. Spark's change feed from version 0 would rebuild that version's
#: snapshot (it has no checksum file): two Spark jobs in a receive from any partition never
#: received from before.
FIRST_ROWS_VERSION = 1


class InboxScan(NamedTuple):
    """What :func:`scan_inbox` found: the rows, the last version read, the row count and own
    count per partition, and, when the counts came per (partition, version) from the log or
    delta-rs, those (:func:`cut_positions` places a partial take with them)."""

    rows: object
    hi: int
    counts: Dict[int, Optional[int]]
    own: Dict[int, Optional[int]]
    by_version: Optional[Dict[Tuple[int, int], int]] = None


def scan_inbox(store, frontiers: Dict[int, int], need: int, latest: int, *,
               as_rows: bool = False, mine: Optional[Sequence[str]] = None,
               history: bool = False, receive: bool = False):
    """Find unregistered inbox rows, reading as few commits as it can.

    Returns (rows, last version read, row count per partition, own count per partition; a
    count :data:`UNCOUNTED` when a subscription's receive does not need it): the
    rows a DataFrame (Spark reads the change feed) or None; with ``as_rows`` (a local inbox,
    the delta-rs engine) a list of dicts read by delta-rs (:func:`inbox_rows`), or for a
    queue's list receive over several partitions a :class:`LaterRows` that reads them once
    the receive knows what it takes from each.
    Reads versions [lo, lo+window) and widens the window (x8) while fewer than ``need``
    own rows turned up and newer versions exist, so the cost follows the batch, not the
    backlog. Own rows are messages (not the SEEN rows of ``history``, :func:`seen_rows`)
    and, with ``mine`` (a session receive: the ids of the sessions held), only those of
    these sessions; every row read is returned and counted per partition (a session receive,
    and one with ``history``, registers them all).
    """
    starts = {p: max(FIRST_ROWS_VERSION, start_version(f)) for p, f in frontiers.items()}
    lagging = {p: start for p, start in starts.items() if start <= latest}
    if not lagging:
        return InboxScan(None, latest, {}, {})
    lo = min(lagging.values())
    window = 16
    while True:
        hi = min(latest, lo + window - 1)
        pids = [p for p, start in lagging.items() if start <= hi]
        own = None  # own rows per partition (None: every row counts)
        counts = by_version = None
        # A queue's rows: counted by delta-rs on a local table, per version (two columns
        # read, no bodies), so that only the versions the batch needs are read whole. A list
        # receive (``receive``: not a peek or a session search, which filter the rows
        # further) reads them once it has chosen its partitions (:class:`LaterRows`): its
        # plan takes each partition's lowest sequence numbers, partition after partition, so
        # the versions it needs are known per partition, not from the window's total.
        if (store.admit is None and store.engine.reads(store.inbox_path)
                and (not as_rows or (receive and (mine is None or len(pids) == 1)))):
            by_version = rs_feed.inbox_version_counts(
                store.inbox_path, {p: frontiers.get(p, -1) for p in pids}, lo, hi,
                sequence_number)
            later = (by_version is not None and as_rows and mine is None and not history
                     and len(pids) > 1)
            if later:
                pass  # every partition's counts: the cut is per partition (LaterRows)
            elif by_version is not None and mine is not None:
                ours = rs_feed.inbox_version_counts(
                    store.inbox_path, {p: frontiers.get(p, -1) for p in pids}, lo, hi,
                    sequence_number, session_ids=list(mine))
                if ours is not None:
                    hi = enough_versions(ours, lo, hi, need)
                    own = _per_partition(ours, hi)
            elif by_version is not None:
                hi = enough_versions(by_version, lo, hi, need)
            if by_version is not None:
                pids = [p for p in pids if lagging[p] <= hi]
                counts = _per_partition(by_version, hi)
        else:
            later = False
        if later:
            df = LaterRows(store, {p: frontiers.get(p, -1) for p in pids}, by_version, lo, hi)
        elif as_rows:
            df = inbox_rows(store, {p: frontiers.get(p, -1) for p in pids}, lo, hi,
                            history=history)
            counts = dict(Counter(row["pid"] for row in df))
            if mine is not None or history:
                own = dict(Counter(row["pid"] for row in df if row["kind"] != SEEN and (
                    mine is None or row.get("session_id") in mine)))
        else:
            df = inbox_range(store, pids, frontiers, lo, hi, history=history)
            if (receive and counts is None and store.admit is not None
                    and store.partitions == 1 and mine is None and not history
                    and hi >= latest):
                # A subscription's one partition, read to the latest version: no window to
                # widen and no partition to choose, so its rows are not counted (nor
                # checkpointed for counting); the receive's plan reads them once and places
                # the frontier from what it takes (:data:`UNCOUNTED`).
                return InboxScan(df, hi, {pids[0]: UNCOUNTED}, {pids[0]: UNCOUNTED})
            if counts is None and getattr(store.admit, "evaluates_messages", False):
                # A subscription's rules that read messages run once here, not again in each
                # job of the receive (true/false filters only compare a timestamp: no job).
                df = df.transform(materialize)
            if counts is None or (own is None and (mine is not None or history)):
                counts, own = _spark_counts(df, mine, history)
        if own is None:
            own = counts
        if sum(own.values()) >= need or hi >= latest or window >= 4096:
            # Counts per version place a partial take only where every row read counts
            # (not a session's or a duplicate-history receive's own rows).
            exact = by_version if counts is not None and own is counts else None
            return InboxScan(df, hi, counts, own, exact)
        window *= 8


def cut_positions(by_version: Dict[Tuple[int, int], int], frontiers: Dict[int, int],
                  takes: Dict[int, int], counts: Dict[int, Optional[int]]) -> Dict[int, int]:
    """Per partition that takes part of the new rows counted (``takes`` below ``counts``), the
    position of the last one it takes, from the rows per (partition, version) past each
    frontier (``by_version``): the versions' rows are numbered 0, 1, ... per partition and
    commit (``idx``, as every sender writes them; a version the frontier cuts goes on after
    the frontier's), so the cut is known without reading a row. Where ``idx`` had gaps the
    cut would take fewer rows than asked, never a row twice: the frontier moves to the cut."""
    cuts = {}
    for p, take in takes.items():
        count = counts.get(p)
        if not take or count is None or take >= count:
            continue
        frontier, left = frontiers.get(p, -1), take
        for version in sorted(v for q, v in by_version if q == p):
            rows = by_version[(p, version)]
            if left <= rows:
                first = ((frontier & IDX_MASK) + 1
                         if frontier >= 0 and version_of(frontier) == version else 0)
                cuts[p] = sequence_number(p, version, first + left - 1)
                break
            left -= rows
    return cuts


#: A partition's count of new rows that :func:`scan_inbox` did not count: the receive takes
#: up to what its batch has left, and its plan moves the frontier past every row read when
#: it took them all, else to the last one taken (:func:`.receive_plan.uncounted`).
UNCOUNTED = None


class LaterRows:
    """New inbox rows of a list receive, read by delta-rs once its partitions are chosen
    (:func:`scan_inbox`): :meth:`read` reads, of the versions counted, only the chosen
    partitions' files up to the version by which each holds what it takes."""

    def __init__(self, store, frontiers: Dict[int, int],
                 by_version: Dict[Tuple[int, int], int], lo: int, hi: int):
        self.store, self.frontiers, self.by_version = store, frontiers, by_version
        self.lo, self.hi = lo, hi

    def read(self, take: Dict[int, int]) -> List[dict]:
        """The rows past the frontiers of the partitions in ``take``, in every version up
        to the one by which each partition holds its ``take`` rows (and maybe more)."""
        cuts = {p: enough_versions({k: c for k, c in self.by_version.items() if k[0] == p},
                                   self.lo, self.hi, n)
                for p, n in take.items() if n > 0}
        if not cuts:
            return []
        frontiers = {p: self.frontiers[p] for p in cuts}
        lo = min(start_version(f) for f in frontiers.values())
        return inbox_rows(self.store, frontiers, lo, max(cuts.values()))


def _per_partition(by_version: Dict[Tuple[int, int], int], hi: int) -> Dict[int, int]:
    counts = Counter()
    for (p, v), k in by_version.items():
        if v <= hi:
            counts[p] += k
    return dict(counts)


def _spark_counts(df, mine: Optional[Sequence[str]], history: bool):
    """Rows and own rows (:func:`scan_inbox`) per partition of ``df``, in one Spark job."""
    from pyspark.sql import functions as F

    own = F.col("kind") != F.lit(SEEN)
    if mine is not None:
        own = own & F.col("session_id").isin(list(mine))
    rows = df.groupBy("pid").agg(F.count(F.lit(1)).alias("n"),
                                 F.count(F.when(own, 1)).alias("own")).collect()
    counts = {r.pid: r.n for r in rows}
    return counts, ({r.pid: r.own for r in rows if r.own} if mine is not None or history
                    else counts)


def enough_versions(counts: Dict[Tuple[int, int], int], lo: int, hi: int, need: int) -> int:
    """The first version v in lo..hi by which the versions from ``lo`` hold ``need`` rows
    (``counts`` per (partition, version)); ``hi`` when they never do."""
    per_version = Counter()
    for (_, v), k in counts.items():
        per_version[v] += k
    total = 0
    for v in range(lo, hi + 1):
        total += per_version.get(v, 0)
        if total >= need:
            return v
    return hi


def purge_inbox(store, frontiers: Dict[int, int], *, dry_run: bool = False) -> int:
    """Remove the inbox files every partition frontier has passed; returns their rows.

    A send commit writes one file per partition, so a file holds the rows of one commit in one
    partition; the log's commit files say which commit added it (:func:`deltalog.files_added`,
    read from the first commit some frontier has not passed). Files whose commit is wholly
    behind their partition's frontier are registered (copied into the messages table, or
    settled) and nobody reads them again. A file added before the first commit file still in
    the log counts as added just before it. The files are removed in one commit marked
    ``dataChange=false``: the change feed that receivers read past the frontier shows nothing
    for it, and senders (blind appends) never conflict with it.
    """
    # Versions <= done[p] are wholly behind the frontier of p (version 0 is the CREATE).
    done = {p: start_version(f) - 1 for p, f in frontiers.items()}
    ready = sorted(p for p, v in done.items() if v >= 1)
    if not ready:
        return 0
    lo = min(done.values()) + 1  # every commit before lo is behind every frontier

    def select(version: int):
        first = deltalog.first_commit_file(store.spark, store.inbox_path, lo, version)
        added = deltalog.files_added(store.spark, store.inbox_path, first, version)
        return lambda path, partition: (added.get(path, first - 1)
                                        <= done.get(int(partition["pid"]), -1))

    where = f"partitionValues['pid'] IN ({', '.join(repr(str(p)) for p in ready)})"
    return remove_files_quietly(store.spark, store.inbox_path, where, select=select,
                                dry_run=dry_run)[1]


def topic_frontiers(store, subscriptions, now: datetime) -> Dict[int, int]:
    """Per partition of a topic, the frontier below which no subscription reads its inbox
    again: the lowest of its subscriptions' frontiers, and no later than the last commit older
    than the operation bound at broker time ``now``. A subscription created meanwhile (not in ``subscriptions``)
    starts at the latest version it saw when its creation began, less than the operation bound
    ago, so nothing it will read is behind the result. -1 where nothing is."""
    bound = deltalog.last_version_before(
        store.spark, store.inbox_path, int((now - OPERATION_BOUND).timestamp() * 1000))
    result = {p: frontier_at(p, bound) if bound >= 0 else -1 for p in range(store.partitions)}
    for sub in subscriptions:
        for p, f in sub.kept_frontiers().items():
            result[p] = min(result[p], f)
    return result


def pending_ids(store, frontiers: Dict[int, int]):
    """Message ids of inbox rows not registered yet (past their partition's frontier), with
    their partition and enqueued time (columns ``_pid``, ``_mid``, ``_enq``); None if there
    are none. Duplicate detection checks these when a receive registers them."""
    from pyspark.sql import functions as F

    latest = store.latest_version(store.inbox_path)
    lagging = {p: f for p, f in frontiers.items() if start_version(f) <= latest}
    if not lagging:
        return None
    lo = min(start_version(f) for f in lagging.values())
    return (inbox_range(store, lagging, frontiers, lo, latest)
            .where("message_id IS NOT NULL")
            .select(F.col("pid").alias("_pid"), F.col("message_id").alias("_mid"),
                    F.col("enqueued_time").alias("_enq")))


def frontiers_at(store, moment_ms: int) -> Optional[Dict[int, int]]:
    """Each partition's frontier in the messages table as it stood at wall-clock time
    ``moment_ms`` (-1 where none), or None when that state cannot be read any more (the
    table is younger, or that version's log or files are gone)."""
    from pyspark.sql import functions as F

    _, snapshot = latest_snapshot(store.spark, store.messages_path)
    version = int(snapshot.version())
    reader = store.spark.read.format("delta")
    if snapshot.timestamp() > moment_ms:
        moment = datetime.fromtimestamp(moment_ms / 1000, timezone.utc).isoformat()
        reader = reader.option("timestampAsOf", moment)
    else:
        reader = reader.option("versionAsOf", version)  # the latest commit is older
    try:
        with session_settings(store.spark, {TIME_TRAVEL_CHECK: "false"}):  # as inbox_range
            past = reader.load(store.messages_path)
        rows = (past.where(f"kind = '{FRONTIER}'")
                .select("pid", F.expr(kept_frontier_sql()).alias("seq")).collect())
    except Exception:  # noqa: BLE001 - an unreadable past only means: trim nothing
        return None
    found = {r.pid: r.seq for r in rows}
    return {p: found.get(p, -1) for p in range(store.partitions)}


def trim_log(store, retain: timedelta, *, dry_run: bool = False, readers=None) -> int:
    """Delete inbox commit files no receive can read again; returns how many files.

    A receive reads the change feed from its partition's frontier on. One that started within
    ``retain`` (at least the operation bound) may hold a frontier read then, so the log is kept
    from the lowest frontier of ``retain`` ago (:func:`frontiers_at`), back to a checkpoint
    that already existed then (:func:`deltalog.trim_log`). ``readers`` are the stores whose
    frontiers count (a topic's subscriptions; default: ``store`` itself); a topic without
    subscriptions keeps its log back to the operation bound (a subscription being created
    may start there).
    """
    before_ms = int((time.time() - retain.total_seconds()) * 1000)
    topic = readers is not None
    readers = list(readers) if topic else [store]

    def keep_from() -> Optional[int]:
        starts = []
        for reader in readers:
            then = frontiers_at(reader, before_ms)
            if then is None:
                return None
            starts += [start_version(f) for f in then.values()]
        if topic:
            starts.append(deltalog.last_version_before(
                store.spark, store.inbox_path,
                int((time.time() - OPERATION_BOUND.total_seconds()) * 1000)) + 1)
        return min(starts)

    return deltalog.trim_log(store.spark, store.inbox_path, before_ms, keep_from,
                             dry_run=dry_run)
