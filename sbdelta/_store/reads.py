"""Reads that change nothing: peek (browse), lookups by sequence number, counts, frontiers."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Dict, Sequence

from .delta import sql_literal
from .inbox import inbox_range, scan_inbox
from .layout import (ACTIVE, CANCELLED, COMPLETED, COPY_SHIFT, DEADLETTERING, DEFERRED,
                     FRONTIER, MSG, PID_SHIFT, SCHEDULED, kept_frontier_sql, key_sql, msg_key,
                     partition_of, position_of, start_version)


@dataclass
class Counts:
    active: int = 0
    scheduled: int = 0
    deferred: int = 0
    locked: int = 0
    size_in_bytes: int = 0


def peek(store, n: int, from_seq: int, now: datetime, where: str = "TRUE"):
    """Up to ``n`` messages of ONE partition with sequence number >= ``from_seq``.

    Returns (rows, partition) where rows are Spark Rows sorted by sequence number, without
    changing anything. The partition is the one ``from_seq`` belongs to. A subscription's
    action copies (TOPIC-5) sort after the partition's other messages, copy 1 first: once a
    layer is exhausted the next one is read.
    """
    p = partition_of(from_seq) if store.partitions > 1 else 0
    layers = len(getattr(store.admit, "copy_numbers", None) or ())
    while True:
        rows = _peek_layer(store, n, from_seq, p, where)
        layer = from_seq >> COPY_SHIFT
        if rows or layer >= layers:
            return rows, p
        from_seq = ((layer + 1) << COPY_SHIFT) | (p << PID_SHIFT)


def _peek_layer(store, n: int, from_seq: int, p: int, where: str):
    from pyspark.sql import functions as F

    m = store.messages().where(f"pid = {p}")
    # One read for both the registered messages and the partition's frontier row (sorted
    # first), instead of two queries of the same snapshot.
    first = (m.where(f"kind = '{FRONTIER}' OR (kind = '{MSG}' AND state IN ('{ACTIVE}', "
                     f"'{DEFERRED}', '{SCHEDULED}') AND seq >= {from_seq} AND ({where}))")
             .orderBy(F.expr(f"kind <> '{FRONTIER}'"), "seq").limit(min(n + 1, 2**31 - 1))
             .collect())
    frontier = [r for r in first if r.kind == FRONTIER]
    rows = [r for r in first if r.kind != FRONTIER][:n]
    if store.inbox_path:
        f = frontier[0].seq if frontier else -1
        latest = store.latest_version(store.inbox_path)
        # Past the frontier, and at or after from_seq (in this partition's range). Copies
        # follow every position: for a copy layer, read them all.
        copies = position_of(from_seq) != from_seq
        start = f if from_seq <= (p << PID_SHIFT) or copies else max(f, from_seq - 1)
        df, _, counts = scan_inbox(store, {p: start}, 2**31 - 1 if copies else n, latest)
        if df is not None and counts:
            if "dead_letter_reason" in df.columns:  # bound for the dead-letter queue
                df = df.where("dead_letter_reason IS NULL")
            # Cancelled before registration (TOPIC-6 / schedule.cancel_scheduled): a
            # tombstone under the key of the message's position hides it (and its copies).
            tombstones = m.where(f"kind = '{MSG}' AND state = '{CANCELLED}'").select(
                F.col("k").alias("_tk"))
            new = (df.where(f"seq >= {from_seq}").withColumn("k", F.expr(key_sql("seq")))
                   .withColumn("_tk", F.expr(key_sql("pos")))
                   .join(tombstones, "_tk", "left_anti")
                   .withColumn("visible_at",
                               F.coalesce("scheduled_enqueue_time", "enqueued_time"))
                   .where(f"kind = '{MSG}' AND ({where})")
                   .orderBy("seq").limit(n).collect())
            rows += new
    rows.sort(key=lambda r: r.seq)
    return rows[:n]


def rows_by_seq(store, seqs: Sequence[int], where: str = "TRUE"):
    pids = sorted({partition_of(s) if store.partitions > 1 else 0 for s in seqs})
    keys = ", ".join(sql_literal(msg_key(s)) for s in seqs)
    return (store.messages().where(f"pid IN ({', '.join(map(str, pids))}) AND k IN ({keys}) "
                                  f"AND {where}"), pids)


def counts(store, now: datetime) -> Counts:
    from pyspark.sql import functions as F

    now_sql = sql_literal(now)
    result = Counts()
    m = store.messages()
    agg = m.where(f"kind = '{MSG}' AND state <> '{CANCELLED}'").agg(
        F.sum(F.expr(f"CASE WHEN state = '{ACTIVE}' OR (state = '{SCHEDULED}' "
                     f"AND visible_at <= {now_sql}) THEN 1 ELSE 0 END")).alias("active"),
        F.sum(F.expr(f"CASE WHEN state = '{SCHEDULED}' AND visible_at > {now_sql} "
                     f"THEN 1 ELSE 0 END")).alias("scheduled"),
        F.sum(F.expr(f"CASE WHEN state = '{DEFERRED}' THEN 1 ELSE 0 END")).alias("deferred"),
        F.sum(F.expr(f"CASE WHEN state NOT IN ('{DEADLETTERING}', '{COMPLETED}') "
                     f"AND locked_until > {now_sql} THEN 1 ELSE 0 END")).alias("locked"),
        F.sum(F.expr(f"CASE WHEN state NOT IN ('{DEADLETTERING}', '{COMPLETED}') "
                     f"THEN size ELSE 0 END"))
        .alias("size")).collect()[0]
    result.active = agg.active or 0
    result.scheduled = agg.scheduled or 0
    result.deferred = agg.deferred or 0
    result.locked = agg.locked or 0
    result.size_in_bytes = agg.size or 0
    if store.inbox_path:
        frontiers = {r.pid: r.seq for r in m.where(f"kind = '{FRONTIER}'")
                     .select("pid", "seq").collect()}
        frontiers = {p: frontiers.get(p, -1) for p in range(store.partitions)}
        latest = store.latest_version(store.inbox_path)
        lagging = {p: f for p, f in frontiers.items() if start_version(f) <= latest}
        if lagging:
            lo = min(start_version(f) for f in lagging.values())
            # Rows cancelled or swept before registration carry a CANCELLED tombstone under
            # their key: they will never be delivered, so they are not counted.
            tombstones = m.where(f"kind = '{MSG}' AND state = '{CANCELLED}'").select("pid", "k")
            inbox = inbox_range(store, lagging, frontiers, lo, latest)
            if "dead_letter_reason" in inbox.columns:  # bound for the dead-letter queue
                inbox = inbox.where("dead_letter_reason IS NULL")
            inbox = (inbox.where(f"kind = '{MSG}'")
                     .withColumn("k", F.expr(key_sql("pos")))  # every copy's position
                     .join(tombstones, ["pid", "k"], "left_anti"))
            agg = inbox.agg(
                F.sum(F.expr(f"CASE WHEN coalesce(scheduled_enqueue_time, enqueued_time) "
                             f"<= {now_sql} THEN 1 ELSE 0 END")).alias("active"),
                F.sum(F.expr(f"CASE WHEN scheduled_enqueue_time > {now_sql} "
                             f"THEN 1 ELSE 0 END")).alias("scheduled"),
                F.sum("size").alias("size")).collect()[0]
            result.active += agg.active or 0
            result.scheduled += agg.scheduled or 0
            result.size_in_bytes += agg.size or 0
    return result


def frontiers(store) -> Dict[int, int]:
    """Each partition's frontier (-1 where nothing was registered yet)."""
    found = {r.pid: r.seq for r in store.messages().where(f"kind = '{FRONTIER}'")
             .select("pid", "seq").collect()}
    return {p: found.get(p, -1) for p in range(store.partitions)}


def kept_frontiers(store) -> Dict[int, int]:
    """Each partition's frontier as maintenance must see it: a forwarding source's frontier
    before the forwarder's last range (that range may still be on its way to the destination,
    :mod:`.forward`); -1 where nothing was registered yet."""
    from pyspark.sql import functions as F

    found = {r.pid: r.f for r in store.messages().where(f"kind = '{FRONTIER}'")
             .select("pid", F.expr(kept_frontier_sql()).alias("f")).collect()}
    return {p: found.get(p, -1) for p in range(store.partitions)}


def inbox_counts(store, now: datetime) -> Counts:
    """A topic's own counts, from its inbox: messages scheduled for later and not cancelled
    (TOPIC-6), and the size of everything it holds (its subscriptions keep their own counts)."""
    from pyspark.sql import functions as F

    latest = store.latest_version(store.inbox_path)
    if latest < 1:
        return Counts()
    now_sql = sql_literal(now)
    cancelled = store.messages().where(f"kind = '{MSG}' AND state = '{CANCELLED}'") \
        .select("pid", "seq")
    agg = (inbox_range(store, range(store.partitions), {}, 1, latest)
           .where(f"kind = '{MSG}'").join(cancelled, ["pid", "seq"], "left_anti")
           .agg(F.sum(F.expr(f"CASE WHEN scheduled_enqueue_time > {now_sql} THEN 1 ELSE 0 END"))
                .alias("scheduled"), F.sum("size").alias("size")).collect()[0])
    return Counts(scheduled=agg.scheduled or 0, size_in_bytes=agg.size or 0)
