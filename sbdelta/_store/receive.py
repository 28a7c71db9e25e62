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
from datetime import datetime
from typing import Callable, Dict, List, Optional, Sequence, Union

from ..exceptions import MessageNotFoundError

from . import rs, sessions
from .apply import SOURCE_COLUMNS, apply_clauses, apply_rows, source_relation
from .delta import LITERAL_ROWS, materialize, merge, retry
from .inbox import UNCOUNTED, LaterRows, cut_positions, scan_inbox
from .layout import (CANCELLED, COLUMN_NAMES, DEADLETTERING, DEFERRED, FRONTIER, MSG, frontier_at,
                     frontier_change, start_version)
from .locks import Policy, conditions, expired_sql, free_sql, grant, lock_token_prefix
from .reads import by_seq, query, spark_query
from .receive_plan import (Choice, Grant, carries_rejects, frontier_of, plan_sql, source,
                           taken_rows, uncounted)
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
    if only is not None:  # a session receive counts its session's messages only
        claimable = f"({claimable}) AND {only}"
    fast = (rs.partition_stats(store.messages_path, claimable, action, FRONTIER, MSG,
                               CANCELLED) if store.engine.reads(store.messages_path)
            else None)
    if fast is not None:
        return fast
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
    possibly none, and the partitions whose frontier it moved (it registered new inbox rows
    there: none handed out means the caller may read on). The rows are a DataFrame (checkpointed: it
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
    if not _fast(store, n, as_rows):
        # Start Spark (the session may be lazy) before the clock is first read: a JVM's
        # start-up is no part of the time a lock is held. (``version``: any session has it,
        # a Spark Connect one too.)
        store.spark.version  # noqa: B018
    return retry(lambda: _acquire_once(store, n, policy, clock, delete, as_rows, session),
                 what=f"receive from {store.messages_path}")


def _acquire_once(store, n: int, policy: Policy, clock: Callable[[], datetime], delete: bool,
                  as_rows: bool, session: Optional[SessionHold] = None):
    now = clock()
    guard = only = None
    if session is not None:
        guard = sessions.guard_rows(sessions.check_held(store, session, now, "receive"))
        only = session.only_sql()
    stats = partition_stats(store, policy, now, only)
    frontiers = {p: (stats[p].frontier if p in stats and stats[p].frontier is not None
                     else -1) for p in range(store.partitions)}
    claimable = {p: (stats[p].claimable if p in stats else 0) for p in range(store.partitions)}
    actions = {p: (stats[p].actions if p in stats else 0) for p in range(store.partitions)}
    revs = {p: stats[p].frontier_rev for p in stats if stats[p].frontier_rev is not None}
    tombstones = {p for p in stats if stats[p].tombstones}
    if session is not None:  # the held sessions' partitions (one per session)
        frontiers = {p: frontiers[p] for p in session.pids}
    fast = _fast(store, n, as_rows)
    # A topic with duplicate detection: each subscription's history holds every message id
    # the topic took (its rules' or not), so a duplicate is dropped by all alike. The receive
    # reads the messages its rules refuse as SEEN rows and registers every row it reads.
    history = store.admit is not None and policy.duplicate_detection is not None
    new_rows, hi, new_counts, own, by_version = None, -1, {}, {}, None
    if not store.dead_letter and n > sum(claimable.values()):
        latest = (rs.version(store.inbox_path) if fast
                  else store.latest_version(store.inbox_path))
        have = sum(claimable.values())
        new_rows, hi, new_counts, own, by_version = scan_inbox(
            store, frontiers, max(0, n - have), latest, as_rows=fast,
            mine=None if session is None else session.session_ids, history=history,
            receive=True)

    # Choose partitions: a random rotation, until the chosen ones can fill the batch.
    start = random.randrange(store.partitions)
    chosen: List[int] = []
    take_old: Dict[int, int] = {}
    take_new: Dict[int, int] = {}
    remaining = n
    for i in range(store.partitions if session is None else 0):
        p = (start + i) % store.partitions
        old, new = claimable[p], new_counts.get(p, 0)
        if new is UNCOUNTED:  # as many as the batch has left: the plan takes what there is
            new = max(0, remaining - old)
        if old + new + actions[p] == 0:
            continue
        if remaining <= 0 and n == 0 and actions[p]:
            pass  # a sweep (n == 0) visits every partition that needs action
        elif remaining <= 0 and old + new > 0:
            break
        take_old[p] = min(old, remaining)
        if history:  # every row read: the first own ones handed out
            take_new[p] = new
            remaining -= take_old[p] + own.get(p, 0)
        else:
            take_new[p] = min(new, remaining - take_old[p])
            remaining -= take_old[p] + take_new[p]
        chosen.append(p)
    if session is not None:
        # Its sessions' partitions only: registered messages of the sessions, and every new
        # row read (registered whole: the frontier passes them all; the plan hands out the
        # sessions' own, up to what is left of the batch).
        for p in session.pids:
            if claimable[p] + new_counts.get(p, 0) + actions[p]:
                take_old[p] = min(claimable[p], remaining)
                take_new[p] = new_counts.get(p, 0)
                remaining -= take_old[p]
                chosen.append(p)
    if isinstance(new_rows, LaterRows):  # a list receive reads what the partitions take
        new_rows = new_rows.read(take_new)
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

    # A lock runs from the time it is granted, read again after the reads that planned it (on
    # a busy Spark they take seconds): the receiver gets the whole lock duration.
    lock = (Grant(lock_token_prefix(), max(now, clock()) + policy.lock_duration,
                  new_limit=n - sum(take_old.values()), every_row=history)
            if session is None
            else Grant(session.grant_prefix, session.locked_until,
                       tuple(session.session_ids), n - sum(take_old.values()), every_row=True))
    # A list receive of a few messages registers more of the new rows it read (not a session
    # receive, nor one registering every row read).
    ahead = (REGISTER_AHEAD if as_rows and n <= LITERAL_ROWS and session is None
             and not history else 0)
    # Where a Spark plan takes part of a partition's new rows, the last one it takes, from
    # the counts per version (the plan then numbers no rows: no shuffle).
    cuts = (cut_positions(by_version, frontiers, take_new, new_counts)
            if by_version is not None and not fast and not ahead and session is None
            and not history else {})
    choice = Choice(chosen, take_old, take_new, revs, hi, new_counts,
                    any(actions[p] for p in chosen), tombstones.intersection(chosen), ahead,
                    cuts)
    if fast:
        out, marked = _commit_with_delta_rs(store, choice, new_rows, policy, now, delete, lock,
                                            guard)
    else:
        out, marked = _commit_with_spark(store, choice, new_rows, policy, now, delete, lock,
                                         as_rows, n, guard)
    rejects = getattr(store.admit, "dead_letters", False)  # filter errors (TOPIC-5)
    # Partitions needing action may hold DEADLETTERING rows a crash left: always moved. New
    # rows may have been marked (expired on arrival, refused by a rule): moved when the plan
    # marked some, or when the plan's rows were not seen (``marked`` None).
    if any(actions[p] for p in chosen) or (
            (policy.dead_letter_on_expiration or rejects) and any(take_new.values())
            and marked is not False):
        store.move_dead_letters(chosen, now)
    # The partitions whose frontier moved: when nothing was handed out (the rows read were
    # duplicates, scheduled, cancelled, expired, refused by a subscription's rules or, in a
    # session receive, other sessions'), reading on may find more.
    return out, [p for p in chosen if take_new.get(p)]


#: How many new rows a list receive of fewer registers in a partition it hands out new rows
#: from, of the inbox version of the last one handed out (:attr:`.receive_plan.Choice.ahead`):
#: read anyway, they cost the MERGE a few inserted rows, and spare the next receives (single
#: messages, from SDK programs) a read of the inbox each (issue 16).
REGISTER_AHEAD = 32


#: The apply operations a receive plan writes (:mod:`.receive_plan`): its MERGE has only their
#: clauses and the guards.
PLAN_OPS = ("update", "insert", "delete")


def _fast(store, n: int, as_rows: bool) -> bool:
    """Whether this receive plans and commits through delta-rs, without Spark: a list
    receive (of a queue, a subscription, a session of either, a dead-letter queue) on tables
    the store's engine settles with delta-rs (a local namespace). A subscription's rules then
    run in Python over the rows read (:func:`.inbox.inbox_rows`)."""
    return (as_rows and n <= LITERAL_ROWS
            and store.engine.settles(store.messages_path)
            and (store.dead_letter or store.engine.reads(store.inbox_path)))


def _plan(store, choice: Choice, new_rows, policy: Policy, now: datetime, delete: bool,
          lock: Grant, rejects: bool = False) -> Optional[str]:
    return plan_sql(choice, policy, now, delete=delete, lock=lock,
                    dead_letter=store.dead_letter,
                    duplicate_detection=policy.duplicate_detection,
                    new_rows=new_rows is not None, rejects=rejects)


def guard_frame(store, rows: List[dict]):
    """The session guard rows (:func:`.sessions.guard_rows`) as a plan part."""
    from pyspark.sql import functions as F

    return source_relation(store.spark, rows).withColumn("_out", F.lit(False))


def _commit_with_spark(store, choice: Choice, new_rows, policy: Policy, now: datetime,
                       delete: bool, lock: Grant, as_rows: bool, n: int, guard):
    """Run the plan in Spark (over the messages table and the change-feed rows read) and
    commit it: a collected literal MERGE for a list receive, else a MERGE of the checkpointed
    plan. Returns the handed-out rows (a list, or a DataFrame) and whether the plan marked
    rows DEADLETTERING (None: not known, the plan's rows were not collected)."""
    rejects = new_rows is not None and "dead_letter_reason" in new_rows.columns
    sql = _plan(store, choice, new_rows, policy, now, delete, lock, rejects)
    if sql is None:
        plan = store.spark.createDataFrame([], ddl(SOURCE_COLUMNS + (("_out", "BOOLEAN"),)))
    else:
        plan = spark_query(store, sql, new_rows)
    # Partitions whose new rows were not counted before the plan: the plan's rows carry
    # their frontier (``_fr``), written with them.
    late = [] if sql is None else uncounted(choice, lock)
    if guard is not None:  # commits only while the session row is as read
        plan = plan.unionByName(guard_frame(store, guard))
    if as_rows and n <= LITERAL_ROWS:
        rows = plan.collect()
        changes = [r.asDict() for r in rows if r._op is not None]
        for p in late:
            found = [r._fr for r in rows if r._fr is not None and r.pid == p]
            changes.append(frontier_of(choice, max(found) if found else None, p))
        apply_rows(store, changes, choice.chosen, now)
        return sorted((r for r in rows if r._out), key=lambda r: r.seq), marks_dead_letters(changes)
    # a batch too large to pass through the driver twice
    plan = plan.transform(materialize)
    source = plan.where("_op IS NOT NULL").drop("_out")
    if late:  # one small job over the checkpoint
        from pyspark.sql import functions as F

        found = dict(plan.where("_fr IS NOT NULL").groupBy("pid").agg(F.max("_fr")).collect())
        source = source.drop("_fr").unionByName(source_relation(
            store.spark, [frontier_of(choice, found.get(p), p) for p in late]))
        plan = plan.drop("_fr")
    merge(store.spark, store.messages_path, source,
          apply_clauses(choice.chosen, now, store.dead_letter, PLAN_OPS))
    out = plan.where("_out")
    if as_rows:
        return sorted(out.collect(), key=lambda r: r.seq), None  # no sort job: rows are few
    return out, None


def _commit_with_delta_rs(store, choice: Choice, new_rows, policy: Policy, now: datetime,
                          delete: bool, lock: Grant, guard: Optional[dict] = None):
    """Run the plan in DataFusion (the messages table, and the new rows it can take as a
    literal relation) and commit it with delta-rs's MERGE: no Spark. ``guard``: a session's
    row at the revision read, committed with the plan (the receive lands only while the
    session is held). Returns the handed-out rows, as Rows sorted by sequence number, and
    whether the plan marked rows DEADLETTERING."""
    # Rows a subscription's rules bound for the dead-letter queue carry their reason.
    rejects = carries_rejects(new_rows)
    sql = _plan(store, choice, new_rows, policy, now, delete, lock, rejects)
    rows = [] if sql is None else query(store, sql, taken_rows(new_rows or [], choice),
                                        fast=True)
    changes = [r.asDict() for r in rows if r._op is not None]
    if guard is not None:
        changes.extend(guard)
    if changes:
        apply_rows(store, changes, choice.chosen, now)
    return sorted((r for r in rows if r._out), key=lambda r: r.seq), marks_dead_letters(changes)


def marks_dead_letters(changes: List[dict]) -> bool:
    """Whether plan rows mark a message DEADLETTERING (for the dead-letter move)."""
    return any(c.get("_op") is not None and c.get("state") == DEADLETTERING for c in changes)


def advance_frontiers(store, pids: List[int], hi: int, now: datetime) -> None:
    """Move idle partitions' frontiers past versions that held nothing for them."""
    def step():
        where = f"pid IN ({', '.join(map(str, pids))}) AND kind = '{FRONTIER}'"
        found = (rs.select(store.messages_path, where, len(pids))
                 if store.engine.reads(store.messages_path) else None)
        if found is None:
            found = [r.asDict() for r in store.messages().where(where)
                     .select("pid", "seq", "rev").collect()]
        current = {r["pid"]: (r["seq"], r["rev"]) for r in found}
        rows = []
        for p in pids:
            seq, rev = current.get(p, (-1, None))
            target = frontier_at(p, hi)
            if seq >= target:
                continue
            rows.append(frontier_change(p, target, rev))
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
    free = f"kind = '{MSG}' AND state = '{DEFERRED}' AND {free_sql(now - policy.lock_grace)}"
    if session is not None:
        free = f"{free} AND {session.only_sql()}"
    expired = expired_sql(policy, now, dead_letter=store.dead_letter)

    def step():
        guard = None
        if session is not None:
            guard = sessions.guard_rows(sessions.check_held(store, session, now, what))
        where, pids = by_seq(store, seqs, f"{free} AND NOT ({expired})")
        if delete:
            values = {"_op": "'delete'"}
        else:
            prefix, until = ((session.grant_prefix, session.locked_until) if session is not None
                             else (lock_token_prefix(), now + policy.lock_duration))
            values = {**grant(prefix, until, state=None), "_op": "'update'"}
        values = {**{c: c for c in COLUMN_NAMES}, "_rev": "rev", **values}
        # The plan once: what is committed is what is returned.
        rows = query(store, f"SELECT {source(values, out=True)} FROM {{M}} WHERE {where}")
        found = sorted(rows, key=lambda r: r.seq)  # no sort job
        missing = sorted(set(seqs) - {r.seq for r in found})
        if missing:
            raise _unavailable(store, missing, f"{free} AND {expired}", what)
        changes = [r.asDict() for r in rows]
        if guard is not None:  # commits only while the session rows are as read
            changes.extend(guard)
            pids = sorted(set(pids) | set(session.pids))
        apply_rows(store, changes, pids, now)
        return found

    return retry(step, what=what)


def _unavailable(store, missing: List[int], expired_where: str, what: str):
    """The error for deferred messages ``missing`` from a receive: which of them expired
    (``expired_where``), and which are not available at all."""
    where, _ = by_seq(store, missing, expired_where)
    gone = sorted(r.seq for r in query(store, f"SELECT seq FROM {{M}} WHERE {where}"))
    others = [s for s in missing if s not in gone]
    parts = [f"deferred message(s) {gone} expired (their time to live is over)"] if gone else []
    if others:
        parts.append(f"no deferred message with sequence number(s) {others} is available (not "
                     "deferred, already settled, or locked by another receiver)")
    return MessageNotFoundError(f"{what}: {'; '.join(parts)}; nothing was received")
