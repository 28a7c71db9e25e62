"""Reads that change nothing: peek (browse), lookups by sequence number, counts, frontiers."""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Dict, List, Optional, Sequence, Tuple

from .._clock import as_utc, from_spark
from .._connect import is_connect
from . import deltalog, rs, rs_feed
from .literals import sql_literal
from .inbox import inbox_range, inbox_rows, scan_inbox
from .layout import (ACTIVE, CANCELLED, COMPLETED, COPY_SHIFT, DEADLETTERING, DEFERRED,
                     FRONTIER, MESSAGE_FIELDS, MSG, PID_SHIFT, SCHEDULED, kept_frontier_sql,
                     case_by_pid, key_sql, msg_key, partition_of, pid_list,
                     position_of, sequence_number, start_version)
from .receive_plan import DECIDING, values_cte


@dataclass
class Counts:
    active: int = 0
    scheduled: int = 0
    deferred: int = 0
    locked: int = 0
    size_in_bytes: int = 0
    #: The enqueued time of the oldest active message (aware UTC), or None when none is.
    oldest: Optional[datetime] = None

    def add(self, other: "Counts") -> None:
        """Add ``other``'s active and scheduled messages and bytes (the inbox rows past the
        frontiers, to the registered ones)."""
        self.active += other.active
        self.scheduled += other.scheduled
        self.size_in_bytes += other.size_in_bytes
        if other.oldest is not None and (self.oldest is None or other.oldest < self.oldest):
            self.oldest = other.oldest


def peek(store, n: int, from_seq: int, now: datetime, where: str = "TRUE"):
    """Up to ``n`` messages of ONE partition with sequence number >= ``from_seq``.

    Returns (rows, partition) where rows are Spark Rows sorted by sequence number, without
    changing anything. The partition is the one ``from_seq`` belongs to. A subscription's
    action copies (TOPIC-5) sort after the partition's other messages, copy 1 first: once a
    layer is exhausted the next one is read.
    """
    p = partition_of(from_seq) if store.partitions > 1 else 0
    return peek_partitions(store, n, {p: from_seq}, now, where)[p], p


def peek_partitions(store, n: int, starts: Dict[int, int], now: datetime, where: str = "TRUE",
                    *, first: bool = False) -> Dict[int, list]:
    """:func:`peek` of several partitions: up to ``n`` messages of each partition ``p`` of
    ``starts`` with sequence number >= ``starts[p]`` (every copy layer of a partition before
    the next). Through Spark every partition is read at once (one query of the messages
    table, one of the inbox per window of commits; one such pass per copy layer), however many
    there are; through delta-rs (milliseconds a read) one partition after the other, and with
    ``first`` only until one has messages (the later ones are then not in the answer)."""
    layers = len(getattr(store.admit, "copy_numbers", None) or ())
    if store.engine.settles(store.messages_path):
        found: Dict[int, list] = {}
        for p in sorted(starts):
            todo: Optional[int] = starts[p]
            while todo is not None:
                found[p] = _peek_layer(store, n, {p: todo}, where, True)[p]
                todo = None if found[p] else _next_layer(p, todo, layers)
            if first and found[p]:
                break
        return found
    found, pending = {}, dict(starts)
    while pending:
        got = _peek_layer(store, n, pending, where, False)
        pending = {p: layer for p in got if not got[p]
                   for layer in [_next_layer(p, pending[p], layers)] if layer is not None}
        found.update((p, rows) for p, rows in got.items() if p not in pending)
    return found


def _next_layer(p: int, start: int, layers: int) -> Optional[int]:
    """Where the copy layer after ``start``'s begins in partition ``p``, or None after the
    last (a subscription's action copies, TOPIC-5)."""
    layer = start >> COPY_SHIFT
    return ((layer + 1) << COPY_SHIFT) | (p << PID_SHIFT) if layer < layers else None


def _peek_layer(store, n: int, starts: Dict[int, int], where: str, fast: bool
                ) -> Dict[int, list]:
    # Under the delta-rs engine a peek reads through delta-rs and DataFusion (no Spark); a
    # subscription's sees its topic's inbox through its rules, run in Python there.
    pids = sorted(starts)
    # One read for both the registered messages and the partitions' frontier rows (sorted
    # first), instead of two queries of the same snapshot.
    wanted = (f"(kind = '{FRONTIER}' OR (kind = '{MSG}' AND state IN ('{ACTIVE}', "
              f"'{DEFERRED}', '{SCHEDULED}') AND seq >= {_by_pid(starts)} AND ({where})))")
    order = f"CASE WHEN kind = '{FRONTIER}' THEN 0 ELSE 1 END, seq"
    limit = min(n + 1, 2**31 - 1)
    if len(pids) == 1:
        first = query(store, f"SELECT * FROM {{M}} WHERE pid = {pids[0]} AND {wanted} "
                             f"ORDER BY {order} LIMIT {limit}", fast=fast)
    else:  # Spark: the first n + 1 of each partition
        first = spark_query(store, (
            f"SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY pid ORDER BY {order}) "
            f"AS _rn FROM {{M}} WHERE pid IN ({pid_list(pids)}) AND {wanted}) "
            f"WHERE _rn <= {limit}")).drop("_rn").collect()
    frontiers = {r.pid: r.seq for r in first if r.kind == FRONTIER}
    rows: Dict[int, list] = {p: [] for p in pids}
    for r in sorted((r for r in first if r.kind != FRONTIER), key=lambda r: r.seq):
        rows[r.pid].append(r)
    if store.inbox_path:
        latest = (rs.version(store.inbox_path) if fast
                  else store.latest_version(store.inbox_path))
        # Past the frontier, and at or after the start (in its partition's range). Copies
        # follow every position: for a copy layer, read them all.
        copies = any(position_of(s) != s for s in starts.values())
        inbox_starts = {}
        for p, from_seq in starts.items():
            f = frontiers.get(p, -1)
            inbox_starts[p] = (f if from_seq <= (p << PID_SHIFT) or position_of(from_seq)
                               != from_seq else max(f, from_seq - 1))
        for r in _peek_inbox(store, n, starts, inbox_starts, latest, where, copies, fast):
            rows[r.pid].append(r)
    return {p: sorted(found, key=lambda r: r.seq)[:n] for p, found in rows.items()}


def _by_pid(starts: Dict[int, int]) -> str:
    """SQL for each partition's value in ``starts`` (a literal when there is one)."""
    if len(starts) == 1:
        return str(int(next(iter(starts.values()))))
    return case_by_pid(starts)


def _unregistered_sql(n: int, starts: Dict[int, int], where: str, rejected: str) -> str:
    """Up to ``n`` inbox rows ({N}) of each partition ``p`` of ``starts`` at or after
    ``starts[p]`` where ``where`` holds, less those a tombstone under their position's key
    cancelled before registration (TOPIC-6 / schedule.cancel_scheduled: it hides the message
    and its copies)."""
    pids = pid_list(starts)
    ctes = (f"WITH t AS (SELECT pid AS _tpid, k AS _tkey FROM {{M}} WHERE pid IN ({pids}) "
            f"AND kind = '{MSG}' AND state = '{CANCELLED}'), n AS (SELECT *, "
            f"{key_sql('seq')} AS k, {key_sql('pos')} AS _tk, coalesce(scheduled_enqueue_time, "
            f"enqueued_time) AS visible_at FROM {{N}} WHERE seq >= {_by_pid(starts)}{rejected}) ")
    unseen = (f"FROM n LEFT JOIN t ON n.pid = t._tpid AND n._tk = t._tkey WHERE t._tkey IS NULL "
              f"AND kind = '{MSG}' AND ({where})")
    limit = min(n, 2**31 - 1)
    if len(starts) == 1:
        return f"{ctes}SELECT n.* {unseen} ORDER BY seq LIMIT {limit}"
    return (f"{ctes}, u AS (SELECT n.*, row_number() OVER (PARTITION BY n.pid ORDER BY n.seq) "
            f"AS _rn {unseen}) SELECT * FROM u WHERE _rn <= {limit}")


def _peek_inbox(store, n: int, starts: Dict[int, int], inbox_starts: Dict[int, int],
                latest: int, where: str, copies: bool, fast: bool) -> list:
    """Up to ``n`` inbox rows of each partition past ``inbox_starts`` (not registered yet) and
    at or after ``starts``, as :func:`_unregistered_sql` selects them, reading as few commits
    as it can."""
    pids = sorted(starts)
    if fast:  # delta-rs reads the rows (counting them is free), DataFusion runs the SQL
        new = scan_inbox(store, inbox_starts, 2**31 - 1 if copies else n * len(pids), latest,
                         as_rows=True).rows
        # Bound for the dead-letter queue (a subscription's filter errors): not peeked.
        new = [row for row in new or () if row["seq"] >= starts[row["pid"]]
               and row.get("dead_letter_reason") is None]
        return query(store, _unregistered_sql(n, starts, where, ""), new,
                     fast=True) if new else []
    # Spark: one query per window of commits, no separate count: the window widens (x8)
    # only while the query found fewer than n rows of some partition and newer commits
    # exist, so the cost follows the batch, not the backlog. A copy layer reads every commit
    # at once.
    lo = min(start_version(s) for s in inbox_starts.values())
    if lo > latest:
        return []
    window = latest - lo + 1 if copies else 16
    while True:
        hi = min(latest, lo + window - 1)
        new = inbox_range(store, pids, inbox_starts, lo, hi)
        rejected = (" AND dead_letter_reason IS NULL" if "dead_letter_reason" in new.columns
                    else "")
        rows = spark_query(store, _unregistered_sql(n, starts, where, rejected),
                           new).drop("_rn").collect()
        short = [p for p in pids if sum(1 for r in rows if r.pid == p) < n]
        if not short or hi >= latest:
            return rows
        window *= 8


def by_seq(store, seqs: Sequence[int], where: str = "TRUE") -> Tuple[str, List[int]]:
    """SQL over messages rows: the messages numbered ``seqs`` where ``where`` holds (literal
    partitions and keys, so both engines prune); and those partitions."""
    pids = sorted({partition_of(s) if store.partitions > 1 else 0 for s in seqs})
    keys = ", ".join(sql_literal(msg_key(s)) for s in seqs)
    return f"pid IN ({', '.join(map(str, pids))}) AND k IN ({keys}) AND ({where})", pids


def rows_by_seq(store, seqs: Sequence[int], where: str = "TRUE"):
    condition, pids = by_seq(store, seqs, where)
    return store.messages().where(condition), pids


def spark_query(store, sql: str, new=None):
    """``sql``, a SELECT in Spark SQL over ``{M}`` (the store's messages table) and ``{N}``
    (``new``: a DataFrame of new inbox rows, :func:`.inbox.inbox_range`), as a Spark
    DataFrame."""
    if is_connect(store.spark):
        # Spark Connect analyses the query when it runs, not now: the view must outlive this
        # call. One name per thread: the thread's next query (after this one has run) replaces it.
        name = f"sbdelta_new_rows_{threading.get_ident()}"
    else:
        name = f"sbdelta_new_rows_{uuid.uuid4().hex}"
    sql = sql.replace("{M}", f"delta.`{store.messages_path}`").replace("{N}", name)
    if new is None:
        return store.spark.sql(sql)
    new.createOrReplaceTempView(name)
    if is_connect(store.spark):
        return store.spark.sql(sql)
    try:
        return store.spark.sql(sql)  # analysed now: the view is not needed after
    finally:
        store.spark.catalog.dropTempView(name)


def query(store, sql: str, new=None, *, fast: Optional[bool] = None) -> list:
    """The rows (``Row`` objects) of ``sql`` (as :func:`spark_query`). ``fast`` (default: the
    store's engine settles its tables with delta-rs): DataFusion runs it, ``new`` being a
    list of new inbox rows (dicts, :func:`.rs_feed.inbox_rows`) passed as a literal relation,
    and the operation needs no Spark; the columns such a relation leaves out (they only pass
    through, :data:`.receive_plan.DECIDING`) are filled in from ``new`` by sequence number.
    Else Spark, ``new`` being a DataFrame."""
    from pyspark.sql import Row  # a plain Python class: no JVM

    if fast is None:
        fast = store.engine.settles(store.messages_path)
    if not fast:
        return spark_query(store, sql, new).collect()
    if "{N}" in sql:
        sql = sql.replace("{N}", values_cte(new or []))
    rows = rs.query(store.messages_path, sql.replace("{M}", rs.QUERIED))
    by_seq = {row["seq"]: row for row in new or ()}
    for row in rows:
        read = by_seq.get(row.get("seq")) if row.get("kind") == MSG else None
        if read is not None and row.get("k") == msg_key(row["seq"]):
            row.update({name: read[name] for name, _ in MESSAGE_FIELDS
                        if name not in DECIDING})
    return [Row(**row) for row in rows]


def counts(store, now: datetime) -> Counts:
    """The entity's message counts at ``now`` (PART-6: summed over its partitions): the
    registered messages, and the inbox rows past the frontiers (not yet registered) less the
    ones a tombstone cancelled. A queue's counts on a local table need no Spark (the same SQL
    in DataFusion, the inbox rows read by delta-rs; a subscription's through its rules, in
    Python), else Spark."""
    fast = store.engine.settles(store.messages_path)
    now_sql = sql_literal(now)
    counted = f"kind = '{MSG}' AND state <> '{CANCELLED}'"
    live = f"{counted} AND state NOT IN ('{DEADLETTERING}', '{COMPLETED}')"
    active = (f"{counted} AND (state = '{ACTIVE}' OR (state = '{SCHEDULED}' "
              f"AND visible_at <= {now_sql}))")
    sums = (
        f"SELECT sum(CASE WHEN {active} THEN 1 ELSE 0 END) AS active, "
        f"min(CASE WHEN {active} THEN enqueued_time END) AS oldest, sum(CASE WHEN {counted} "
        f"AND state = '{SCHEDULED}' AND visible_at > {now_sql} THEN 1 ELSE 0 END) AS scheduled, "
        f"sum(CASE WHEN {counted} AND state = '{DEFERRED}' THEN 1 ELSE 0 END) AS deferred, "
        f"sum(CASE WHEN {live} AND locked_until > {now_sql} THEN 1 ELSE 0 END) AS locked, "
        f"sum(CASE WHEN {live} THEN size ELSE 0 END) AS size")
    # Over Spark each query is a snapshot read and a plan: the frontiers come with the sums,
    # in one scan (the change feed's count reads the tombstones itself). DataFusion answers
    # in milliseconds: there the tombstones are read with the frontiers, as rows.
    with_frontiers = bool(store.inbox_path) and not fast
    (agg,) = query(store, sums + (
        f", collect_list(CASE WHEN kind = '{FRONTIER}' THEN named_struct('pid', pid, 'seq', "
        f"seq) END) AS frontiers FROM {{M}} WHERE ({counted}) OR kind = '{FRONTIER}'"
        if with_frontiers else f" FROM {{M}} WHERE {counted}"), fast=fast)
    result = Counts(agg.active or 0, agg.scheduled or 0, agg.deferred or 0, agg.locked or 0,
                    agg.size or 0, from_spark(agg.oldest))
    if not store.inbox_path:
        return result
    if with_frontiers:
        marks, found = [], {r.pid: r.seq for r in agg.frontiers}
    else:
        marks = query(store, (
            f"SELECT kind, pid, seq, k FROM {{M}} WHERE kind = '{FRONTIER}' "
            f"OR (kind = '{MSG}' AND state = '{CANCELLED}')"), fast=fast)
        found = {r.pid: r.seq for r in marks if r.kind == FRONTIER}
    frontiers_ = {p: found.get(p, -1) for p in range(store.partitions)}
    latest = (rs.version(store.inbox_path) if fast
              else store.latest_version(store.inbox_path))
    lagging = {p: f for p, f in frontiers_.items() if start_version(f) <= latest}
    if not lagging:
        return result
    lo = min(start_version(f) for f in lagging.values())
    # Rows cancelled or swept before registration carry a CANCELLED tombstone under the key
    # of their position: they will never be delivered, so they are not counted.
    if fast:
        unseen = _unregistered_counts(store, lagging, lo, latest, now,
                                      {(r.pid, r.k) for r in marks if r.kind == MSG})
    else:
        unseen = _unregistered_counts_spark(store, lagging, frontiers_, lo, latest, now_sql)
    result.add(unseen)
    return result


def _unregistered_counts(store, lagging: Dict[int, int], lo: int, hi: int, now: datetime,
                         tombstones) -> Counts:
    """The inbox rows past the frontiers, counted in Python from what delta-rs read of the
    change feed (a queue's: only the columns counted, no bodies; a subscription's: those its
    rules admit, less those bound for its dead-letter queue)."""
    out = Counts()
    for row in inbox_rows(store, lagging, lo, hi,
                          columns=["kind", "scheduled_enqueue_time", "enqueued_time", "size"]):
        if (row["kind"] != MSG or (row["pid"], msg_key(row["pos"])) in tombstones
                or row.get("dead_letter_reason") is not None):
            continue
        scheduled = as_utc(row["scheduled_enqueue_time"])
        if scheduled is not None and scheduled > now:
            out.scheduled += 1
        else:  # only a schedule hides a message (not a sender's clock ahead of ours)
            out.active += 1
            enqueued = as_utc(row["enqueued_time"])
            if enqueued is not None and (out.oldest is None or enqueued < out.oldest):
                out.oldest = enqueued
        out.size_in_bytes += row["size"] or 0
    return out


def _unregistered_counts_spark(store, lagging: Dict[int, int], frontiers_: Dict[int, int],
                               lo: int, hi: int, now_sql: str) -> Counts:
    """The inbox rows past the frontiers (through a subscription's rules), counted by Spark."""
    from pyspark.sql import functions as F

    tombstones = store.messages().where(f"kind = '{MSG}' AND state = '{CANCELLED}'") \
        .select("pid", "k")
    inbox = inbox_range(store, lagging, frontiers_, lo, hi)
    if "dead_letter_reason" in inbox.columns:  # bound for the dead-letter queue
        inbox = inbox.where("dead_letter_reason IS NULL")
    inbox = (inbox.where(f"kind = '{MSG}'")
             .withColumn("k", F.expr(key_sql("pos")))  # every copy's position
             .join(tombstones, ["pid", "k"], "left_anti"))
    agg = inbox.agg(
        F.sum(F.expr(f"CASE WHEN scheduled_enqueue_time > {now_sql} THEN 0 ELSE 1 END"))
        .alias("active"),
        F.min(F.expr(f"CASE WHEN scheduled_enqueue_time > {now_sql} THEN NULL "
                     "ELSE enqueued_time END")).alias("oldest"),
        F.sum(F.expr(f"CASE WHEN scheduled_enqueue_time > {now_sql} "
                     f"THEN 1 ELSE 0 END")).alias("scheduled"),
        F.sum("size").alias("size")).collect()[0]
    return Counts(active=agg.active or 0, scheduled=agg.scheduled or 0,
                  size_in_bytes=agg.size or 0, oldest=from_spark(agg.oldest))


def frontiers(store) -> Dict[int, int]:
    """Each partition's frontier (-1 where nothing was registered yet); read by delta-rs when
    the store's engine gives it the table."""
    found = {r.pid: r.seq for r in query(
        store, f"SELECT pid, seq FROM {{M}} WHERE kind = '{FRONTIER}'")}
    return {p: found.get(p, -1) for p in range(store.partitions)}


def kept_frontiers(store) -> Dict[int, int]:
    """Each partition's frontier as maintenance must see it: a forwarding source's frontier
    before the forwarder's last range (that range may still be on its way to the destination,
    :mod:`.forward`); -1 where nothing was registered yet. Read by delta-rs when the
    store's engine gives it the table (as :func:`frontiers`)."""
    found = {r.pid: r.f for r in query(
        store, f"SELECT pid, {kept_frontier_sql()} AS f FROM {{M}} WHERE kind = '{FRONTIER}'")}
    return {p: found.get(p, -1) for p in range(store.partitions)}


def inbox_counts(store, now: datetime) -> Counts:
    """A topic's own counts, from its inbox: messages scheduled for later and not cancelled
    (TOPIC-6), and the size of everything it holds (its subscriptions keep their own counts).
    On local tables delta-rs reads them (no JVM), else Spark."""
    from pyspark.sql import functions as F

    # Commits compaction trimmed from the log are behind every frontier: their rows were
    # purged, the topic holds them no more. The change feed is read from the first one left.
    if store.engine.reads(store.inbox_path) and store.engine.settles(store.messages_path):
        latest = rs.version(store.inbox_path)
        if latest < 1:
            return Counts()
        cancelled = {(r.pid, r.seq) for r in query(
            store, f"SELECT pid, seq FROM {{M}} WHERE kind = '{MSG}' AND state = '{CANCELLED}'")}
        rows = [r for r in rs_feed.inbox_rows(
            store.inbox_path, {p: -1 for p in range(store.partitions)},
            max(1, rs.first_commit(store.inbox_path)), latest,
            sequence_number, columns=["kind", "scheduled_enqueue_time", "size"])
            if r["kind"] == MSG and (r["pid"], r["seq"]) not in cancelled]
        return Counts(scheduled=sum(1 for r in rows if r["scheduled_enqueue_time"] is not None
                                    and as_utc(r["scheduled_enqueue_time"]) > now),
                      size_in_bytes=sum(r["size"] or 0 for r in rows))
    latest = store.latest_version(store.inbox_path)
    if latest < 1:
        return Counts()
    now_sql = sql_literal(now)
    cancelled = store.messages().where(f"kind = '{MSG}' AND state = '{CANCELLED}'") \
        .select("pid", "seq")
    first = deltalog.first_commit_file(store.spark, store.inbox_path, 1, latest)
    if first > latest:
        return Counts()
    agg = (inbox_range(store, range(store.partitions), {}, first, latest)
           .where(f"kind = '{MSG}'").join(cancelled, ["pid", "seq"], "left_anti")
           .agg(F.sum(F.expr(f"CASE WHEN scheduled_enqueue_time > {now_sql} THEN 1 ELSE 0 END"))
                .alias("scheduled"), F.sum("size").alias("size")).collect()[0])
    return Counts(scheduled=agg.scheduled or 0, size_in_bytes=agg.size or 0)
