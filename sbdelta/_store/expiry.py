"""The expiry sweep of one entity: what receives would do to expired and exhausted messages,
done in bounded batches for the whole entity, without a receive.

Two kinds of messages need it:

* registered messages (in ``messages``) that are free and expired (TTL-4/5/6), at their
  delivery limit (RECV-5), or left half-way through a dead-letter move. Each batch is one
  guarded apply MERGE (drop, or mark DEADLETTERING at the revision read) followed by the
  crash-safe move of :mod:`.deadletter`; batches repeat until none is left, so every partition
  is visited whatever the batch size.
* messages never received (still only in the inbox, past their partition's frontier) that
  expired, or that a subscription refuses (its admission gave them a dead-letter reason: a
  filter that failed to evaluate where the subscription dead-letters on filter evaluation
  exceptions, or a topic message without a session id on a session subscription, SESS-1).
  Registration happens in order, so they cannot simply be registered; instead each gets a
  ``CANCELLED`` tombstone under its key, which registration honours (the row is never
  delivered) and counts leave out. A refused message, and an expired one where the entity
  dead-letters on expiration, is first copied into the dead-letter table with its reason
  (insert-if-absent by key, so a repeated sweep copies it once), then tombstoned. Only the
  sweep reaches a refused message in a partition of a session subscription no session of
  which is ever received from (receives read only their sessions' partitions). On entities
  with duplicate detection these rows are left to the receive path, which checks the
  duplicate history as it registers them (TTL-4 lets expired messages linger until then).

Counts come from the rows each batch committed, so a report says what was done.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .apply import apply_df, as_ops, expiry_marks, to_source
from .delta import materialize, merge, retry
from .inbox import inbox_range
from .layout import (ACTIVE, CANCELLED, COLUMN_NAMES, DEADLETTERING, MESSAGES_COLUMNS, MSG,
                     TTL_EXPIRED_DESCRIPTION, TTL_EXPIRED_REASON, key_sql, pid_list,
                     start_version)
from .locks import Policy, conditions, expired_sql, over_limit_sql
from .reads import query

#: Rows one sweep batch handles at most.
DEFAULT_BATCH = 10000


@dataclass
class SweepCounts:
    """What a sweep handled (or, in a dry run, found)."""

    expired_dead_lettered: int = 0
    expired_dropped: int = 0
    max_delivery_dead_lettered: int = 0
    unfinished_moves: int = 0
    #: Never-received messages a subscription refused (see the module), dead-lettered.
    refused_dead_lettered: int = 0

    def add(self, other: "SweepCounts") -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


def expiry_ops(policy: Policy, action_rows):
    """Apply-MERGE source rows for free messages that expired or reached the delivery limit:
    dead-letter them (mark DEADLETTERING) or drop them (TTL-6, RECV-5)."""
    from pyspark.sql import functions as F

    to_dlq, marks = expiry_marks(policy)
    kinds = dict(MESSAGES_COLUMNS)
    drop = as_ops(action_rows.where(f"NOT {to_dlq}"), "delete")
    mark = action_rows.where(to_dlq).withColumns(
        {name: F.expr(sql).cast(kinds[name].lower()) for name, sql in marks.items()})
    return drop.unionByName(as_ops(mark, "update"))


def sweep(store, policy: Policy, now: datetime, *, batch: int = DEFAULT_BATCH,
          dry_run: bool = False) -> SweepCounts:
    """Handle every expired, exhausted or half-moved message of the entity; see the module."""
    total = SweepCounts()
    while True:
        done, more = retry(lambda: _registered_batch(store, policy, now, batch, dry_run),
                           what=f"expiry sweep of {store.messages_path}")
        total.add(done)
        if dry_run or not more:
            break
    if not store.dead_letter:
        while True:
            done, more = retry(lambda: _inbox_batch(store, policy, now, batch, dry_run),
                               what=f"expiry sweep of {store.inbox_path}")
            total.add(done)
            if dry_run or not more:
                break
    return total


def _registered_batch(store, policy: Policy, now: datetime, batch: int, dry_run: bool):
    """One batch of registered messages. One read of ``messages`` tallies, per partition,
    the messages due (free and expired, or at the delivery limit) and the half-done
    dead-letter moves: when nothing is due (most sweeps) that is all the sweep reads, through
    DataFusion on a local table whose settlements go through delta-rs (no Spark job), else
    one Spark job. Otherwise up to ``batch`` of them are checkpointed, tallied (the report
    counts what the MERGE was given) and handled in one apply MERGE."""
    from pyspark.sql import functions as F

    _, action, expired = conditions(policy, now, dead_letter=store.dead_letter)
    over = over_limit_sql(policy, dead_letter=store.dead_letter)
    due = f"({action}) AND state <> '{DEADLETTERING}'"
    moving = f"kind = '{MSG}' AND state = '{DEADLETTERING}'"

    def sums(where: str):
        """Per partition: rows due, over the limit, expired (not over), half-moved (SQL)."""
        return [f"sum(CASE WHEN {cond} THEN 1 ELSE 0 END) AS {name}" for name, cond in (
            ("n", f"({where})"), ("o", f"({where}) AND ({over})"),
            ("e", f"({where}) AND NOT ({over}) AND {expired}"), ("moving", moving))]

    def tally(rows):
        return {r.pid: r for r in rows.groupBy("pid").agg(
            *(F.expr(s) for s in sums("TRUE"))).collect()}

    found = {r.pid: r for r in query(store, f"SELECT pid, {', '.join(sums(due))} FROM {{M}} "
                                            f"WHERE ({due}) OR ({moving}) GROUP BY pid")}
    pending = {p for p, r in found.items() if r.moving}
    unfinished = sum(r.moving for r in found.values())
    done = found
    if not dry_run and any(r.n for r in found.values()):
        act = (store.messages().where(due).orderBy("pid", "seq").limit(batch)
               .transform(materialize))
        done = tally(act)
        apply_df(store, expiry_ops(policy, act).drop("_out"), set(done) | pending, now)
    n = sum(r.n for r in done.values())
    o = sum(r.o for r in done.values())
    e = sum(r.e for r in done.values())
    counts = SweepCounts(max_delivery_dead_lettered=o, unfinished_moves=unfinished)
    if policy.dead_letter_on_expiration:
        counts.expired_dead_lettered = e
    else:
        counts.expired_dropped = e
    if dry_run:
        return counts, False
    pids = set(done if n else ()) | pending
    if pids and not store.dead_letter:
        store.move_dead_letters(pids, now)
    return counts, n >= batch


def _inbox_batch(store, policy: Policy, now: datetime, batch: int, dry_run: bool):
    """Never-received messages that expired or that a subscription refuses: copy to the
    dead-letter table (refused ones always, expired ones if the entity says so), then
    tombstone them so that registration skips them."""
    from pyspark.sql import functions as F

    if policy.duplicate_detection is not None:
        return SweepCounts(), False  # left to registration, which checks the history
    frontiers = store.frontiers()
    latest = store.latest_version(store.inbox_path)
    lagging = {p: f for p, f in frontiers.items() if start_version(f) <= latest}
    if not lagging:
        return SweepCounts(), False
    lo = min(start_version(f) for f in lagging.values())
    known = store.messages().where(f"pid IN ({pid_list(lagging)}) AND kind = '{MSG}'") \
        .select("pid", "k")
    rows = inbox_range(store, lagging, frontiers, lo, latest)
    # A subscription's admission names the messages it refuses (as registration reads them:
    # a refusal wins over expiry and over a schedule).
    refused = ("dead_letter_reason IS NOT NULL" if "dead_letter_reason" in rows.columns
               else "FALSE")
    rows = (rows.where(f"kind = '{MSG}' AND (({refused}) OR "
                       f"{expired_sql(policy, now, dead_letter=False)})")
            .withColumn("_refused", F.expr(refused))
            .withColumn("k", F.expr(key_sql("seq")))
            .join(known, ["pid", "k"], "left_anti"))
    if not dry_run:
        rows = (rows.orderBy("pid", "seq").limit(batch)
                .withColumn("visible_at", F.coalesce("scheduled_enqueue_time", "enqueued_time"))
                .withColumn("rev", F.lit(0).cast("bigint"))
                .transform(materialize))
    tally = rows.agg(F.count(F.lit(1)).alias("n"),
                     F.count(F.when(F.col("_refused"), 1)).alias("refused")).collect()[0]
    dead = policy.dead_letter_on_expiration
    expired = tally.n - tally.refused
    counts = SweepCounts(expired_dead_lettered=expired if dead else 0,
                         expired_dropped=0 if dead else expired,
                         refused_dead_lettered=tally.refused)
    if dry_run or tally.n == 0:
        return counts, False
    pids = [r.pid for r in rows.select("pid").distinct().collect()]
    if dead or tally.refused:
        reason, description = ((F.col(c) for c in ("dead_letter_reason",
                                                   "dead_letter_error_description"))
                               if tally.refused else (F.lit(None), F.lit(None)))
        copy = to_source(
            rows.where(F.col("_refused") | F.lit(dead))
            .withColumn("state", F.lit(ACTIVE))
            .withColumn("delivery_count", F.lit(0))
            .withColumn("dead_letter_reason",
                        F.when(F.col("_refused"), reason).otherwise(F.lit(TTL_EXPIRED_REASON)))
            .withColumn("dead_letter_error_description",
                        F.when(F.col("_refused"), description)
                        .otherwise(F.lit(TTL_EXPIRED_DESCRIPTION)))).drop("_out")
        merge(store.spark, store.dead_letter_store().messages_path, copy,
              f"ON t.pid IN ({pid_list(pids)}) AND t.pid = s.pid AND t.k = s.k "
              f"WHEN NOT MATCHED THEN INSERT ({', '.join(COLUMN_NAMES)}) "
              f"VALUES ({', '.join('s.' + c for c in COLUMN_NAMES)})")
    tombstones = to_source(rows.select("pid", "k", "seq", "rev")
                           .withColumn("kind", F.lit(MSG))
                           .withColumn("state", F.lit(CANCELLED))
                           .withColumn("_op", F.lit("insert"))).drop("_out")
    apply_df(store, tombstones, pids, now)
    return counts, tally.n >= batch
