"""Receive: hand out up to N messages in ONE guarded MERGE, locking (PeekLock) or removing
(ReceiveAndDelete) them.

A receive plans from one read of the ``messages`` table (per-partition frontiers and counts) and
of the inbox change feed past each frontier, then commits one apply MERGE (:mod:`.apply`) that:
locks free registered messages; registers new inbox rows (locking the ones handed out, keeping
scheduled ones for later, dropping duplicates and cancelled ones); marks expired and
over-delivered messages for the dead-letter queue or drops them; and moves each partition's
frontier. Every clause carries its precondition (the revision read, the frontier unchanged), so
a concurrent receive makes the MERGE retry from a fresh plan instead of double-locking.
Receivers start at a random partition, so two of them rarely touch the same one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Callable, Dict, List, Optional, Sequence, Union

from ..exceptions import MessageNotFoundError

from . import rs, sessions
from .apply import (SOURCE_COLUMNS, apply_clauses, apply_rows, as_ops,
                    source_relation, to_source)
from .delta import LITERAL_ROWS, merge, retry, sql_literal
from .expiry import expiry_ops
from .inbox import scan_inbox
from .layout import (ACTIVE, CANCELLED, DEADLETTERING, DEDUP, DEFERRED, FRONTIER, MSG,
                     SCHEDULED, TTL_EXPIRED_DESCRIPTION, TTL_EXPIRED_REASON, case_by_pid,
                     frontier_at, key_sql, pid_list, start_version)
from .locks import Policy, conditions, expired_sql, free_sql, grant, lock_token_prefix
from .schema import ddl
from .sessions import SessionHold


def partition_stats(store, policy: Policy, now: datetime, only: Optional[str] = None):
    """Per partition: frontier (and its row's revision), claimable messages, messages needing
    action, cancellation tombstones. On a local table delta-rs answers (milliseconds, no
    Spark job); the answer only chooses what to plan: the plan reads the table again and its
    MERGE is guarded by the frontier revisions read here, so an answer that is stale by the
    time of the commit makes the receive retry, whichever engine gave it."""
    from pyspark.sql import functions as F

    claimable, action, _ = conditions(policy, now, dead_letter=store.dead_letter)
    if only is None:
        fast = (rs.partition_stats(store.messages_path, claimable, action, FRONTIER, MSG,
                                   CANCELLED) if store.engine.reads(store.messages_path)
                else None)
        if fast is not None:
            return fast
    else:  # a session receive counts its session's messages only
        claimable = f"({claimable}) AND {only}"
    rows = (store.messages().groupBy("pid").agg(
        F.max(F.when(F.col("kind") == FRONTIER, F.col("seq"))).alias("frontier"),
        F.max(F.when(F.col("kind") == FRONTIER, F.col("rev"))).alias("frontier_rev"),
        F.sum(F.when(F.expr(claimable), 1).otherwise(0)).alias("claimable"),
        F.sum(F.when(F.expr(action), 1).otherwise(0)).alias("actions"),
        F.sum(F.when(F.expr(f"kind = '{MSG}' AND state = '{CANCELLED}'"), 1).otherwise(0))
        .alias("tombstones"),
    ).collect())
    return {r.pid: r for r in rows}


def acquire(store, n: int, *, policy: Policy, now: Union[datetime, Callable[[], datetime]],
            delete: bool, as_rows: bool = False, session: Optional[SessionHold] = None):
    """Hand out up to ``n`` messages: lock them (PeekLock) or remove them (ReceiveAndDelete).

    ``now`` is the broker time, or a function giving it: then each attempt reads it again, so
    a receive that lost commit races for a while does not hand out locks that began (and may
    have nearly ended) when it started.

    One MERGE per call (retried from scratch on conflict). Returns the handed-out rows,
    possibly none, and the partitions it touched (a session receive: its partition if it
    registered new rows). The rows are a DataFrame (checkpointed: it
    does not change when the tables do) or, with ``as_rows`` (a list receive), a list of Rows
    sorted by sequence number: the plan is then collected once and the MERGE reads it as a
    literal relation, so neither a checkpoint nor a second collect runs.

    With ``session`` (SESS-2) only that session's messages are handed out, in sequence order,
    locked with the session's grant prefix until the session lock ends; every new inbox row of
    the session's partition that the receive reads is registered (other sessions' rows free),
    and the MERGE carries the session row at the revision read, so it commits only while the
    session is held (SessionLockLostError otherwise).
    """
    clock = now if callable(now) else (lambda: now)
    return retry(lambda: _acquire_once(store, n, policy, clock(), delete, as_rows, session),
                 what=f"receive from {store.messages_path}")


def _acquire_once(store, n: int, policy: Policy, now: datetime, delete: bool,
                  as_rows: bool, session: Optional[SessionHold] = None):
    guard = only = None
    if session is not None:
        guard = sessions.guard_row(sessions.check_held(store, session, now, "receive"))
        only = f"session_id = {sql_literal(session.session_id)}"
    stats = partition_stats(store, policy, now, only)
    frontiers = {p: (stats[p].frontier if p in stats and stats[p].frontier is not None
                     else -1) for p in range(store.partitions)}
    claimable = {p: (stats[p].claimable if p in stats else 0) for p in range(store.partitions)}
    actions = {p: (stats[p].actions if p in stats else 0) for p in range(store.partitions)}
    revs = {p: stats[p].frontier_rev for p in stats if stats[p].frontier_rev is not None}
    tombstones = {p for p in stats if stats[p].tombstones}
    if session is not None:  # one partition holds the session
        frontiers = {session.pid: frontiers[session.pid]}
    new_rows, hi, new_counts = None, -1, {}
    if not store.dead_letter and n > sum(claimable.values()):
        latest = store.latest_version(store.inbox_path)
        have = sum(claimable.values())
        new_rows, hi, new_counts = scan_inbox(store, frontiers, max(0, n - have), latest)

    # Choose partitions: a random rotation, until the chosen ones can fill the batch.
    start = random.randrange(store.partitions)
    chosen: List[int] = []
    take_old: Dict[int, int] = {}
    take_new: Dict[int, int] = {}
    remaining = n
    for i in range(store.partitions if session is None else 0):
        p = (start + i) % store.partitions
        old, new = claimable[p], new_counts.get(p, 0)
        if old + new + actions[p] == 0:
            continue
        if remaining <= 0 and n == 0 and actions[p]:
            pass  # a sweep (n == 0) visits every partition that needs action
        elif remaining <= 0 and old + new > 0:
            break
        take_old[p] = min(old, remaining)
        take_new[p] = min(new, remaining - take_old[p])
        remaining -= take_old[p] + take_new[p]
        chosen.append(p)
    if session is not None:
        # Its partition only: registered messages of the session, and every new row read
        # (registered whole: the frontier passes them all; the plan hands out the session's).
        p = session.pid
        if claimable[p] + new_counts.get(p, 0) + actions[p]:
            take_old[p], take_new[p] = min(claimable[p], n), new_counts.get(p, 0)
            chosen.append(p)
    # Partitions whose frontier lags although nothing of theirs was in the versions read.
    idle = [p for p in frontiers
            if new_rows is not None and p not in new_counts
            and start_version(frontiers[p]) <= hi]
    # Advance them when they lag far (or nothing else is to do), so that a partition no
    # sender uses does not make every receive re-read old commits.
    idle = [p for p in idle if not chosen or hi - start_version(frontiers[p]) >= 64]
    if idle:
        advance_frontiers(store, idle, hi, now)
    if not chosen:
        if as_rows:
            return [], []
        return store.spark.createDataFrame([], ddl(SOURCE_COLUMNS + (("_out", "BOOLEAN"),))), []

    lock = (Grant(lock_token_prefix(), now + policy.lock_duration) if session is None
            else Grant(session.grant_prefix, session.locked_until, session.session_id,
                       n - sum(take_old.values())))
    plan = _plan(store, chosen, take_old, take_new, revs, new_rows, hi, new_counts,
                 policy, now, delete, lock, any(actions[p] for p in chosen),
                 tombstones.intersection(chosen))
    if guard is not None:  # commits only while the session row is as read
        plan = plan.unionByName(guard_frame(store, guard))
    if as_rows and n <= LITERAL_ROWS:
        rows = plan.collect()
        apply_rows(store, [r.asDict() for r in rows if r._op is not None], chosen, now)
        out = sorted((r for r in rows if r._out), key=lambda r: r.seq)
    else:  # a batch too large to pass through the driver twice
        plan = plan.localCheckpoint(eager=True)
        source = plan.where("_op IS NOT NULL").drop("_out")
        merge(store.spark, store.messages_path, source,
              apply_clauses(chosen, now, store.dead_letter))
        out = plan.where("_out")
        if as_rows:
            out = sorted(out.collect(), key=lambda r: r.seq)  # no sort job: rows are few
    if session is not None:
        session.rev += 1  # the guard row rewrote the session row
    rejects = getattr(store.admit, "dead_letters", False)  # filter errors (TOPIC-5)
    if any(actions[p] for p in chosen) or (
            (policy.dead_letter_on_expiration or rejects) and any(take_new.values())):
        store.move_dead_letters(chosen, now)
    if session is not None:  # the partition, when its frontier moved: reading on may find more
        return out, [p for p in chosen if take_new.get(p)]
    return out, chosen


@dataclass(frozen=True)
class Grant:
    """How a receive locks what it hands out: the grant prefix of the lock tokens and when the
    locks end; for a session receive, the session id and how many new rows it may hand out."""

    prefix: str
    until: datetime
    session_id: Optional[str] = None
    new_limit: int = 0


def guard_frame(store, row: dict):
    """The session guard row (:func:`.sessions.guard_row`) as a plan part."""
    from pyspark.sql import functions as F

    return source_relation(store.spark, [row]).withColumn("_out", F.lit(False))


def _plan(store, chosen, take_old, take_new, revs, new_rows, hi, new_counts,
          policy: Policy, now: datetime, delete: bool, lock: Grant, act: bool, tombstones):
    """The apply-MERGE source of one receive, with ``_out`` marking what is handed out.

    Parts that the per-partition stats show to be empty are left out of the plan (``act``:
    some chosen partition has messages needing action; ``tombstones``: the chosen partitions
    holding cancellation tombstones). A change between the stats and the commit conflicts
    with the MERGE (it reads every chosen partition), so the plan is then redone.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    claimable, action, expired = conditions(policy, now, dead_letter=store.dead_letter)
    if lock.session_id is not None:
        claimable = f"({claimable}) AND session_id = {sql_literal(lock.session_id)}"
    prefix, lock_until = lock.prefix, lock.until
    m = store.messages().where(f"pid IN ({pid_list(chosen)})")
    parts = []

    by_pid = Window.partitionBy("pid").orderBy("seq")
    # 1. Registered messages that are free: lock them (or delete them: ReceiveAndDelete).
    if any(take_old.values()):
        old = (m.where(claimable).withColumn("_rn", F.row_number().over(by_pid))
               .where(f"_rn <= {case_by_pid(take_old)}").drop("_rn"))
        if delete:
            parts.append(as_ops(old, "delete", out=True))
        else:
            parts.append(as_ops(grant(old, prefix, lock_until), "update", out=True))

    # 2. Free messages that expired or reached the delivery limit: dead-letter or drop.
    if act and not store.dead_letter:
        parts.append(expiry_ops(policy, m.where(f"{action} AND state <> '{DEADLETTERING}'")
                                .limit(10000)))

    # 3. New inbox rows: register, lock, drop duplicates, honour cancellations.
    if new_rows is not None and any(take_new.get(p) for p in chosen):
        parts += _register(store, m, new_rows, chosen, take_new, policy, now, delete, lock,
                           tombstones)
    # 4. Frontiers of the chosen partitions that took new rows.
    frontier_rows = []
    for p in chosen:
        if not take_new.get(p):
            continue
        if take_new[p] == new_counts.get(p, 0):
            frontier_rows.append((p, frontier_at(p, hi)))
        else:
            frontier_rows.append((p, None))  # the last row taken, computed below
    if frontier_rows:
        parts.append(_frontier_rows(store, frontier_rows, revs, new_rows, take_new))
    if not parts:
        return store.spark.createDataFrame([], ddl(SOURCE_COLUMNS + (("_out", "BOOLEAN"),)))
    plan = parts[0]
    for part in parts[1:]:
        plan = plan.unionByName(part)
    return plan


def _register(store, m, new_rows, chosen, take_new, policy: Policy, now: datetime,
              delete: bool, lock: Grant, tombstones):
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    now_sql = sql_literal(now)
    prefix, lock_until = lock.prefix, lock.until
    rows = (_taken(new_rows.where(f"pid IN ({pid_list(chosen)})"), chosen, take_new, lock)
            .drop("_change_type", "_commit_timestamp", "_commit_version", "idx")
            .withColumns({"k": F.expr(key_sql("seq")), "_tk": F.expr(key_sql("pos")),
                          "visible_at": F.coalesce("scheduled_enqueue_time",
                                                   "enqueued_time")}))
    # Cancelled (or swept) before registration: a tombstone waits under the key of the
    # message's position (every copy a subscription makes of it is cancelled).
    if tombstones:
        tomb = m.where(f"pid IN ({pid_list(tombstones)}) AND kind = '{MSG}' "
                       f"AND state = '{CANCELLED}'").select(
            "pid", F.col("k").alias("_tk"), F.col("rev").alias("_trev"))
        rows = rows.join(tomb, ["pid", "_tk"], "left")
    else:
        rows = rows.withColumn("_trev", F.lit(None).cast("bigint"))
    dup = F.lit(False)
    dedup_parts = []
    if policy.duplicate_detection is not None:
        window_us = int(policy.duplicate_detection / timedelta(microseconds=1))
        hist = m.where(f"kind = '{DEDUP}'").select(
            "pid", "message_id", F.col("dedup_until").alias("_dedup_until"),
            F.col("rev").alias("_drev"))
        same_id = Window.partitionBy("pid", "message_id")
        rows = (rows.join(hist, ["pid", "message_id"], "left")
                # The first occurrence of an id: the lowest position (all its copies).
                .withColumns({"_first": F.col("pos") == F.min("pos").over(same_id),
                              "_one": F.row_number().over(same_id.orderBy("seq")) == 1}))
        dup = (F.col("message_id").isNotNull() & (
            ~F.col("_first") | (F.col("_dedup_until").isNotNull()
                                & (F.col("enqueued_time") < F.col("_dedup_until")))))
        rows = rows.withColumn("_dup", dup)
        # New history entries, one per id first seen.
        fresh = rows.where("message_id IS NOT NULL AND NOT _dup AND _trev IS NULL AND _one")
        dedup_rows = (fresh.select(
            "pid", F.concat(F.lit("d:"), F.col("message_id")).alias("k"),
            F.lit(DEDUP).alias("kind"), F.coalesce("_drev", F.lit(0)).alias("rev"),
            "seq", F.lit(None).cast("string").alias("state"),
            F.expr(f"timestamp_micros(unix_micros(enqueued_time) + {window_us})")
            .alias("dedup_until"), "message_id",
            F.when(F.col("_drev").isNull(), F.lit("insert")).otherwise(F.lit("update"))
            .alias("_op"), F.col("_drev").alias("_rev")))
        dedup_parts.append(to_source(dedup_rows))
    else:
        rows = rows.withColumn("_dup", F.lit(False))
    expired = expired_sql(policy, now, dead_letter=store.dead_letter)
    # A subscription's rows whose filter failed to evaluate arrive with their dead-letter
    # reason set (TOPIC-5): they go to the dead-letter queue, never to a receiver.
    failed = (F.col("dead_letter_reason").isNotNull() if "dead_letter_reason" in rows.columns
              else F.lit(False))
    rows = rows.withColumns({
        "_failed": failed, "_cancelled": F.col("_trev").isNotNull(),
        "_expired": F.expr(expired), "_visible": F.expr(f"visible_at <= {now_sql}"),
        "_live": ~F.col("_dup") & F.col("_trev").isNull() & (F.col("kind") == MSG)})
    parts = []
    if tombstones:  # tombstones of cancelled messages are consumed (once, whatever copies)
        parts.append(to_source(
            rows.where("_cancelled").select("pid", F.col("_tk").alias("k"),
                                            F.lit(MSG).alias("kind"),
                                            F.col("_trev").alias("_rev"),
                                            F.lit("delete").alias("_op")).dropDuplicates(["pid", "k"])))
    ready = F.col("_live") & ~F.col("_failed") & F.col("_visible") & ~F.col("_expired")
    handed = ready & F.col("_hand")
    base = rows.withColumn("rev", F.lit(0).cast("bigint"))
    # Handed out now.
    if delete:
        parts.append(to_source(base.where(handed), out=True))
    else:
        locked = grant(base.where(handed), prefix, lock_until, first=True).withColumn(
            "_op", F.lit("insert"))
        parts.append(to_source(locked, out=True))
    # Copies past the batch of a message whose first copies were handed out: registered
    # free, as active messages (a position is registered whole, TOPIC-5).
    waiting = base.where(ready & ~F.col("_hand")).withColumns(
        {"state": F.lit(ACTIVE), "delivery_count": F.lit(0), "_op": F.lit("insert")})
    parts.append(to_source(waiting))
    # Scheduled for later: registered, invisible until its time.
    later = base.where(F.col("_live") & ~F.col("_failed") & ~F.col("_visible")).withColumns(
        {"state": F.lit(SCHEDULED), "delivery_count": F.lit(0), "_op": F.lit("insert")})
    parts.append(to_source(later))
    # Expired on arrival: dead-lettered (when the entity says so) or dropped.
    if policy.dead_letter_on_expiration and not store.dead_letter:
        dead = base.where(F.col("_live") & ~F.col("_failed") & F.col("_visible")
                          & F.col("_expired")).withColumns({
            "state": F.lit(DEADLETTERING), "delivery_count": F.lit(0),
            "dead_letter_reason": F.lit(TTL_EXPIRED_REASON),
            "dead_letter_error_description": F.lit(TTL_EXPIRED_DESCRIPTION),
            "_op": F.lit("insert")})
        parts.append(to_source(dead))
    if "dead_letter_reason" in rows.columns:
        rejected = base.where(F.col("_live") & F.col("_failed")).withColumns(
            {"state": F.lit(DEADLETTERING), "delivery_count": F.lit(0),
             "_op": F.lit("insert")})
        parts.append(to_source(rejected))
    return parts + dedup_parts


def _taken(new_rows, pids, take_new, lock: Optional[Grant] = None):
    """The new rows a receive registers: per partition, the first ``take_new[p]`` in order of
    position and copy (``_hand``: handed out), and the other copies of the last position
    taken, so that a position is never registered in part (its frontier passes all its
    copies at once). A session receive registers every row read and hands out the first
    ``lock.new_limit`` of its session's."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if lock is not None and lock.session_id is not None:
        mine = F.coalesce(F.col("session_id") == F.lit(lock.session_id), F.lit(False))
        in_order = Window.partitionBy("pid", "_mine").orderBy("pos", "seq")
        return (new_rows.withColumn("_mine", mine)
                .withColumn("_hand", F.col("_mine")
                            & (F.row_number().over(in_order) <= F.lit(lock.new_limit)))
                .drop("_mine"))
    takes = case_by_pid({p: take_new.get(p, 0) for p in pids})
    order = Window.partitionBy("pid").orderBy("pos", "seq")
    return (new_rows.withColumn("_hand", F.row_number().over(order) <= F.expr(takes))
            .withColumn("_last", F.max(F.when(F.col("_hand"), F.col("pos")))
                        .over(Window.partitionBy("pid")))
            .where("pos <= _last").drop("_last"))


def _frontier_rows(store, frontier_rows, revs, new_rows, take_new):
    """Frontier rows: literal where a partition took all it read, else the last row taken
    (from the inbox rows read). ``_rev`` comes from the same read as the frontiers the plan
    started from, so a concurrent registration trips the guard."""
    from pyspark.sql import functions as F

    fixed = {p: v for p, v in frontier_rows if v is not None}
    partial = [p for p, v in frontier_rows if v is None]
    parts = []
    if fixed:
        values = ", ".join(f"({int(p)}, CAST({int(v)} AS BIGINT), "
                           f"CAST({sql_literal(revs.get(p))} AS BIGINT))"
                           for p, v in fixed.items())
        parts.append(store.spark.sql(f"SELECT * FROM VALUES {values} AS v(pid, seq, _rev)"))
    if partial:
        known = {p: revs[p] for p in partial if p in revs}
        revs_sql = case_by_pid(known, default="NULL") if known else "NULL"
        parts.append(
            _taken(new_rows.where(f"pid IN ({pid_list(partial)})"), partial, take_new)
            .groupBy("pid").agg(F.max("pos").alias("seq"))
            .withColumn("_rev", F.expr(f"CAST({revs_sql} AS BIGINT)")))
    rows = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    return to_source(rows.select(
        "pid", "seq", "_rev", F.lit("f").alias("k"), F.lit(FRONTIER).alias("kind"),
        F.coalesce(F.col("_rev"), F.lit(0)).alias("rev"),
        F.when(F.col("_rev").isNull(), F.lit("insert")).otherwise(F.lit("update"))
        .alias("_op")))


def advance_frontiers(store, pids: List[int], hi: int, now: datetime) -> None:
    """Move idle partitions' frontiers past versions that held nothing for them."""
    def step():
        m = store.messages().where(f"pid IN ({', '.join(map(str, pids))}) "
                                  f"AND kind = '{FRONTIER}'")
        current = {r.pid: (r.seq, r.rev) for r in m.select("pid", "seq", "rev").collect()}
        rows = []
        for p in pids:
            seq, rev = current.get(p, (-1, None))
            target = frontier_at(p, hi)
            if seq >= target:
                continue
            rows.append({"pid": p, "k": "f", "kind": FRONTIER, "seq": target,
                         "rev": rev or 0, "_rev": rev,
                         "_op": "insert" if rev is None else "update"})
        if rows:
            apply_rows(store, rows, pids, now)
    retry(step, what=f"advance frontiers in {store.messages_path}")



def receive_deferred(store, seqs: Sequence[int], *, policy: Policy, now: datetime, delete: bool,
                     what: str, session: Optional[SessionHold] = None):
    """SETTLE-4: lock (or, ``delete``, remove) deferred messages by sequence number, in ONE
    commit. Returns their rows sorted by sequence number. Raises MessageNotFoundError, changing
    nothing, when any of them is not a deferred message of this entity free to lock, or has
    expired (TTL-4: it waits for the sweep, which dead-letters or drops it).

    With ``session``, only that session's deferred messages are found; they are locked under
    the session (its grant prefix and end), and the commit carries the session row at the
    revision read, so it lands only while the session is held."""
    free = f"kind = '{MSG}' AND state = '{DEFERRED}' AND {free_sql(now)}"
    if session is not None:
        free = f"{free} AND session_id = {sql_literal(session.session_id)}"
    expired = expired_sql(policy, now, dead_letter=store.dead_letter)

    def step():
        guard = None
        if session is not None:
            guard = sessions.guard_row(sessions.check_held(store, session, now, what))
        rows, pids = store.rows_by_seq(seqs, f"{free} AND NOT ({expired})")
        if delete:
            plan = as_ops(rows, "delete", out=True)
        elif session is not None:
            plan = as_ops(grant(rows, session.grant_prefix, session.locked_until, state=None),
                          "update", out=True)
        else:
            plan = as_ops(grant(rows, lock_token_prefix(), now + policy.lock_duration,
                                state=None), "update", out=True)
        if guard is not None:
            plan = plan.unionByName(guard_frame(store, guard))
            pids = sorted(set(pids) | {session.pid})
        rows = plan.collect()  # the plan once: what is committed is what is returned
        found = sorted((r for r in rows if r._out), key=lambda r: r.seq)  # no sort job
        missing = sorted(set(seqs) - {r.seq for r in found})
        if missing:
            raise _unavailable(store, missing, f"{free} AND {expired}", what)
        apply_rows(store, [r.asDict() for r in rows], pids, now)
        if session is not None:
            session.rev += 1  # the guard row rewrote the session row
        return found

    return retry(step, what=what)


def _unavailable(store, missing: List[int], expired_where: str, what: str):
    """The error for deferred messages ``missing`` from a receive: which of them expired
    (``expired_where``), and which are not available at all."""
    gone = sorted(r.seq for r in store.rows_by_seq(missing, expired_where)[0]
                  .select("seq").collect())
    others = [s for s in missing if s not in gone]
    parts = [f"deferred message(s) {gone} expired (their time to live is over)"] if gone else []
    if others:
        parts.append(f"no deferred message with sequence number(s) {others} is available (not "
                     "deferred, already settled, or locked by another receiver)")
    return MessageNotFoundError(f"{what}: {'; '.join(parts)}; nothing was received")
