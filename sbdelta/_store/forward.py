"""Auto-forwarding (FWD-2, FWD-3, PART-8): a source's messages moved into its destination's
inbox, each exactly once, keeping body, message id, properties and partition key; the
destination numbers them anew (its own inbox commit).

Two movers, both crash-safe and safe to run in several processes at once:

``forward_new``
    What senders appended to the source's inbox (a queue's own; a subscription's topic's,
    through the subscription's rules) past the source's frontiers. ONE append to the
    destination's inbox with Delta's idempotent-write options (``txnAppId`` = the source's
    forwarding id, ``txnVersion`` = the last source inbox version it covers), then ONE apply
    MERGE on the source moving the frontiers past it (and registering, as dead letters, what
    may not be forwarded: a fifth hop, a filter that failed to evaluate). A crash between the
    two leaves the destination's transaction version ahead of the frontiers: the next mover
    sees it and only moves the frontiers. Of two movers racing, Delta lets one append per
    version (the other gets ``ConcurrentTransactionException``, retries, and finds it done).
``forward_registered``
    Rows the source registered before it forwarded (received and abandoned, deferred,
    scheduled), and dead-letter rows (``forward_dead_lettered_messages_to``): marked
    ``FORWARDING`` under a batch id in one MERGE, appended to the destination with
    ``txnAppId`` = forwarding id + batch id, then deleted. A batch whose append landed is
    deleted by whoever finds it; a batch whose append never landed is returned to the source
    when its mark (held for the operation bound) runs out.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from .._durations import expiry_sql
from .._connect import is_connect
from . import forward_rows, history, rs
from .apply import apply_df, apply_rows, as_ops, source_relation, to_source
from .delta import LITERAL_ROWS, latest_snapshot, materialize, retry
from .literals import sql_literal
from .inbox import inbox_range
from .layout import (ACTIVE, CANCELLED, DEADLETTERING, DEFERRED, FORWARDING, FRONTIER,
                     HOP_LIMIT_DESCRIPTION, HOP_LIMIT_REASON, INBOX_NAMES, MAX_HOPS,
                     MAX_ROWS_PER_PARTITION_PER_COMMIT, MSG, OPERATION_BOUND, SCHEDULED,
                     TTL_EXPIRED_DESCRIPTION, TTL_EXPIRED_REASON,
                     key_sql, marked_from, start_version, version_of)
from .locks import Policy, expired_sql, free_sql, lock_token, lock_token_prefix, lock_token_sql
from .reads import query

#: Source inbox versions one ``forward_new`` step covers at most.
VERSION_WINDOW = 256
#: Registered rows one ``forward_registered`` step moves at most.
REGISTERED_BATCH = 10000


@dataclass(frozen=True)
class Destination:
    """Where a source forwards: the destination's store and how it takes messages."""

    store: object  # MessageStore of a queue or topic
    ttl_cap: Optional[timedelta]  # TTL-3 of the destination
    key_by_message_id: bool  # PART-2: the destination detects duplicates


def writer_ids(store, kind: str) -> Tuple[str, ...]:
    """The idempotent-write app ids of a mover of ``store``'s rows (``kind``: ``fwd``,
    ``fwd-dlq`` or ``syphon``): the one it writes with, a digest of the store's location
    below the namespace root (its entity path and incarnation: unique per incarnation, and
    the same whichever URI a process gives the namespace by, so two movers naming it
    ``abfss://...`` and ``/mnt/...``, or a copied namespace, append a range once); then the
    one sbdelta wrote before, a digest of the absolute folder, read so that what it recorded
    is not appended again (one id when the store was not given a location)."""
    return tuple(f"sbdelta-{kind}:{hashlib.sha1(text.encode('utf-8')).hexdigest()[:20]}"
                 for text in dict.fromkeys((store.location, store.folder)))


def txn_version(store, app_id: str) -> int:
    """The last idempotent-write version of ``app_id`` in the store's inbox (-1: none).
    A read of the snapshot's state, no Spark job once the snapshot is loaded (over Spark
    Connect, a read of the log's files: :func:`.history.txn_version`)."""
    if is_connect(store.spark):
        return history.txn_version(store.spark, store.inbox_path, app_id)
    found = latest_snapshot(store.spark, store.inbox_path)[1].transactions().get(app_id)
    return int(found.get()) if found.isDefined() else -1


def done_version(store, ids: Tuple[str, ...]) -> int:
    """The last version the store's inbox records for any of ``ids`` (:func:`writer_ids`)."""
    return max(txn_version(store, app_id) for app_id in ids)


def destination_rows(rows, dest: Union[Destination, Sequence[Destination]], now: datetime, *,
                     dead_letters: bool = False, hop: bool = True, numbered: bool = True,
                     choice=None):
    """Inbox rows of ``dest`` for message rows ``rows`` (ordered by ``seq``): partition by
    PART-2 (PART-8: the partition key travels), enqueued now (a scheduled message keeps its
    time), one more hop, the destination's TTL cap applied. Dead letters start a new life:
    their time to live ended with the dead-letter queue (TTL-8), so only the destination's
    default applies to them. ``hop=False``: the rows' ``hops`` are kept as they are (the
    syphon's moves are not forwarding hops). ``numbered=False``: without ``idx``, with
    ``seq`` (the rows' order), for a writer that numbers the rows itself
    (:func:`.staged.append_staged`). ``dest`` may be several destinations with ``choice``,
    the column giving each row's (its index in ``dest``, kept in the result): one pass for
    all of them."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    dests = [dest] if choice is None else list(dest)

    def per(make):
        """The column ``make(d)`` of each row's destination ``d``."""
        columns = [make(d) for d in dests]
        if len(columns) == 1:
            return columns[0]
        out = F.when(choice == 0, columns[0])
        for i, column in enumerate(columns[1:], 1):
            out = out.when(choice == i, column)
        return out

    def partition(d: Destination):
        partitions = d.store.partitions
        if partitions == 1:
            return F.lit(0)
        key = F.coalesce("session_id", "partition_key")
        if d.key_by_message_id:
            key = F.coalesce(key, F.col("message_id"))
        return F.when(key.isNull(), F.pmod(F.xxhash64("seq"), F.lit(partitions))).otherwise(
            F.pmod(F.crc32(key.cast("binary")), F.lit(partitions)))

    def cap_ms(d: Destination) -> Optional[int]:
        return None if d.ttl_cap is None else int(d.ttl_cap / timedelta(milliseconds=1))

    if dead_letters:
        rows = (rows.withColumn("time_to_live_ms", F.lit(None).cast("bigint"))
                .withColumn("expires_at", F.lit(None).cast("timestamp")))
    now_sql = sql_literal(now)
    scheduled = F.when(F.col("scheduled_enqueue_time") > F.expr(now_sql),
                       F.col("scheduled_enqueue_time"))
    out = (rows.withColumn("pid", per(partition).cast("int"))
           .withColumn("kind", F.lit(MSG))
           .withColumn("scheduled_enqueue_time", scheduled)
           .withColumn("enqueued_time", F.coalesce(scheduled, F.expr(now_sql)))
           .withColumn("hops", (F.coalesce("hops", F.lit(0)) + 1).cast("int") if hop
                       else F.col("hops").cast("int")))
    if any(cap_ms(d) is not None for d in dests):
        # As a send does (TTL-3): a message's own TTL is cut to the cap; one without keeps
        # none, and the destination's default applies when it is received (TTL-7).
        own = F.col("time_to_live_ms").isNotNull()
        out = (out.withColumn("expires_at", per(
                   lambda d: F.col("expires_at") if cap_ms(d) is None else F.when(own, F.least(
                       "expires_at", F.expr(expiry_sql("enqueued_time", str(cap_ms(d) * 1000)))))))
               .withColumn("time_to_live_ms", per(
                   lambda d: F.col("time_to_live_ms") if cap_ms(d) is None
                   else F.when(own, F.least("time_to_live_ms", F.lit(cap_ms(d)))))))
    kept = [] if choice is None else [choice.alias("_t")]
    if not numbered:
        return out.select(*[name for name in INBOX_NAMES if name != "idx"], "seq", *kept)
    out = out.withColumn("idx", (F.row_number().over(
        Window.partitionBy("pid").orderBy("seq")) - 1).cast("int"))
    return out.select(*INBOX_NAMES, *kept)


def append_once(store, rows, app_id: str, version: int) -> None:
    """Append ``rows`` to ``store``'s inbox once per (app id, version): Delta skips the write
    when the inbox records that version (or a later one) for the app id already."""
    (rows.writeTo(f"delta.`{store.inbox_path}`")
     .option("txnAppId", app_id).option("txnVersion", version).append())


def _hop_limited():
    from pyspark.sql import functions as F

    return F.coalesce(F.col("hops"), F.lit(0)) >= MAX_HOPS


# -- new inbox rows ------------------------------------------------------------------------------

def forward_new(source, dest: Destination, policy: Policy, now: datetime) -> int:
    """Move everything past the source's frontiers; returns the messages forwarded. Messages
    that expired before they moved are dead-lettered or dropped as a receive would (by the
    source's ``policy``), so the forwarder and the expiry sweep agree on them."""
    total = 0
    while True:
        moved, more = retry(lambda: _new_step(source, dest, policy, now),
                            what=f"forward from {source.folder}")
        total += moved
        if not more:
            return total


def _classified(source, frontiers, hi: int, tombstone_keys, policy: Policy, now: datetime):
    """The source's inbox rows past ``frontiers`` up to version ``hi`` with ``_fwd`` (to
    forward) and ``_dead`` (to dead-letter here: a filter failed, a fifth hop, expired under
    dead-lettering on expiration), cancelled ones, pings and dropped expired ones left out;
    checkpointed, with the count per (``_fwd``, pid). The same arguments give the same rows
    (a recovery classifies a range with the time it was marked at)."""
    from pyspark.sql import functions as F

    lo = min(start_version(f) for f in frontiers.values())
    rows = (inbox_range(source, list(frontiers), frontiers, lo, hi)
            .drop("_change_type", "_commit_timestamp", "_commit_version", "idx")
            .withColumn("k", F.expr(key_sql("seq"))))
    if tombstone_keys:  # cancelled before forwarding (schedule.cancel_scheduled)
        keys = ", ".join(sql_literal(k) for k in sorted(tombstone_keys))
        live = F.expr(f"{key_sql('pos')} NOT IN ({keys})")
    else:
        live = F.lit(True)
    live = live & (F.col("kind") == MSG)
    if "dead_letter_reason" not in rows.columns:
        rows = (rows.withColumn("dead_letter_reason", F.lit(None).cast("string"))
                .withColumn("dead_letter_error_description", F.lit(None).cast("string")))
    expired = F.expr(expired_sql(policy, now, dead_letter=False))
    failed = F.col("dead_letter_reason").isNotNull()
    if policy.dead_letter_on_expiration:
        rows = (rows.withColumn("dead_letter_error_description", F.when(
                    ~failed & expired, F.lit(TTL_EXPIRED_DESCRIPTION))
                    .otherwise(F.col("dead_letter_error_description")))
                .withColumn("dead_letter_reason", F.when(~failed & expired,
                                                         F.lit(TTL_EXPIRED_REASON))
                            .otherwise(F.col("dead_letter_reason"))))
        dead = F.col("dead_letter_reason").isNotNull() | _hop_limited()
        keep = F.lit(True)
    else:
        dead = failed | (_hop_limited() & ~expired)
        keep = failed | ~expired
    rows = (rows.withColumn("_dead", live & keep & dead)
            .withColumn("_fwd", live & keep & ~dead)
            .where("_fwd OR _dead").transform(materialize))
    counts = {(r._fwd, r.pid): r.n for r in rows.groupBy("_fwd", "pid")
              .agg(F.count(F.lit(1)).alias("n")).collect()}
    return rows, counts


class Mark(NamedTuple):
    """A frontier row, or a cancelled message's tombstone, of a mover's source (a forwarding
    source, a backlog queue): what :func:`read_marks` reads."""

    pid: int
    k: str
    kind: str
    seq: int
    rev: int
    lock_token: Optional[str]
    application_properties: Optional[str]
    marked_at: Optional[int]  # locked_until in epoch microseconds (a mark's time)


_MARKS = f"kind = '{FRONTIER}' OR (kind = '{MSG}' AND state = '{CANCELLED}')"


def _micros(moment: Optional[datetime]) -> Optional[int]:
    if moment is None:
        return None
    if moment.tzinfo is None:  # a TIMESTAMP read back without its zone is UTC
        moment = moment.replace(tzinfo=timezone.utc)
    return (moment - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1)


def read_marks(source) -> Tuple[Dict[int, Mark], List[str]]:
    """A mover's source's frontier rows by partition (with the mark a mover left on them),
    and the keys of its cancelled messages: through delta-rs where it reads the table (no
    Spark job), else one Spark query."""
    from pyspark.sql import functions as F

    found = None
    if source.engine.reads(source.messages_path):
        rows = rs.select(source.messages_path, _MARKS, LITERAL_ROWS + 1)
        if rows is not None and len(rows) <= LITERAL_ROWS:
            found = [Mark(r["pid"], r["k"], r["kind"], r["seq"], r["rev"], r["lock_token"],
                           r["application_properties"], _micros(r["locked_until"]))
                     for r in rows]
    if found is None:
        found = [Mark(*r) for r in source.messages().where(_MARKS).select(
            "pid", "k", "kind", "seq", "rev", "lock_token", "application_properties",
            F.expr("unix_micros(locked_until)").alias("marked_at")).collect()]
    current = {r.pid: r for r in found if r.kind == FRONTIER}
    tombstones = [r.k for r in found if r.kind == MSG]
    return current, tombstones


def _new_step(source, dest: Destination, policy: Policy, now: datetime):
    """One range of versions: (messages forwarded, whether versions are left)."""
    ids = writer_ids(source, "fwd")
    app_id = ids[0]
    if forward_rows.usable(source, dest):  # a local namespace: delta-rs, no Spark job
        step = forward_rows.new_step(source, dest, policy, now, ids, VERSION_WINDOW)
        if step is not None:
            return step
    current, tombstones = read_marks(source)
    # 1. A range marked by a mover that stopped before its append landed: append it now, as
    #    that mover would have (the same rows, the same transaction version). (The
    #    destination's transactions are read only when a frontier holds a mark: reading them
    #    builds the inbox's snapshot state, a few Spark jobs.)
    marked = {p: r for p, r in current.items() if marked_from(r.lock_token) is not None}
    if marked:
        done = done_version(dest.store, ids)
        marked = {p: r for p, r in marked.items() if version_of(r.seq) > done}
    if marked:
        hi = max(version_of(r.seq) for r in marked.values())
        olds = {p: marked_from(r.lock_token) for p, r in marked.items()
                if version_of(r.seq) == hi}
        then = datetime.fromtimestamp(
            max(r.marked_at for r in marked.values()) / 1e6, timezone.utc)
        rows, counts = _classified(source, olds, hi, tombstones, policy, then)
        forwarded = sum(n for (fwd, _), n in counts.items() if fwd)
        if not forwarded:  # cannot be: a range is marked only when it has rows to append
            raise RuntimeError(f"forwarding mark of {source.messages_path} at version {hi} "
                               "covers no message to forward")
        append_once(dest.store, destination_rows(rows.where("_fwd"), dest, then), app_id, hi)
        return forwarded, True

    # 2. The next range: mark it (frontiers moved, the old ones kept in the mark, dead letters
    #    registered) in ONE guarded commit, then append it.
    frontiers = {p: current[p].seq if p in current else -1 for p in range(source.partitions)}
    latest = source.latest_version(source.inbox_path)
    lagging = {p: start_version(f) for p, f in frontiers.items() if start_version(f) <= latest}
    if not lagging:
        return 0, False
    lo = min(lagging.values())
    hi = min(latest, lo + VERSION_WINDOW - 1)
    while True:
        pids = sorted(p for p, s in lagging.items() if s <= hi)
        rows, counts = _classified(source, {p: frontiers[p] for p in pids}, hi, tombstones,
                                   policy, now)
        per_pid = {}
        for (fwd, p), n in counts.items():
            if fwd:
                per_pid[p] = per_pid.get(p, 0) + n
        # One destination commit numbers at most 2^20 rows per partition; a partition of a
        # smaller destination may take several source partitions: read fewer versions.
        if sum(per_pid.values()) <= MAX_ROWS_PER_PARTITION_PER_COMMIT or hi == lo:
            break
        hi = lo + (hi - lo) // 2
    forwarded = sum(per_pid.values())
    # Marked (with the time it was marked at, which a recovery classifies with) only when
    # something is to be appended: else there is nothing to recover.
    dead = sum(n for (fwd, _), n in counts.items() if not fwd)
    fronts = [forward_rows.frontier_row(p, hi, current[p].rev if p in current else None,
                                        frontiers[p], now if forwarded else None)
              for p in pids]
    if not dead:  # frontier rows only: through delta-rs where it settles (no Spark job)
        apply_rows(source, fronts, pids, now)
    else:
        _commit_with_dead_letters(source, fronts, rows.where("_dead"), pids, now)
    if forwarded:
        append_once(dest.store, destination_rows(rows.where("_fwd"), dest, now), app_id, hi)
    return forwarded, hi < latest


def _commit_with_dead_letters(source, fronts, dead, pids, now: datetime) -> None:
    """ONE guarded Spark MERGE of the frontier rows ``fronts`` and the ``dead`` rows
    registered as dead letters (a fifth hop: HOP_LIMIT_REASON), then their move to the
    dead-letter table."""
    from pyspark.sql import functions as F

    hop = F.col("dead_letter_reason").isNull()
    plan = source_relation(source.spark, fronts).unionByName(to_source(
        dead.withColumn("dead_letter_error_description",
                        F.when(hop, F.lit(HOP_LIMIT_DESCRIPTION))
                        .otherwise(F.col("dead_letter_error_description")))
        .withColumn("dead_letter_reason", F.coalesce("dead_letter_reason",
                                                     F.lit(HOP_LIMIT_REASON)))
        .withColumn("rev", F.lit(0)).withColumn("state", F.lit(DEADLETTERING))
        .withColumn("delivery_count", F.lit(0))
        .withColumn("visible_at", F.coalesce("scheduled_enqueue_time", "enqueued_time"))
        .withColumn("_op", F.lit("insert"))).drop("_out"))
    apply_df(source, plan, pids, now)
    source.move_dead_letters(pids, now)


# -- registered rows -------------------------------------------------------------------------------

def forward_registered(source, dest: Destination, policy: Policy, now: datetime, *,
                       dead_letters: bool = False, batch: int = REGISTERED_BATCH) -> int:
    """Move the source table's registered messages (``source`` is a dead-letter store when
    ``dead_letters``); returns the messages forwarded. Rows locked by a receiver wait;
    expired ones are left to the expiry sweep (by the source's ``policy``)."""
    total = 0
    while True:
        moved = retry(lambda: _registered_step(source, dest, policy, now, dead_letters, batch),
                      what=f"forward registered messages of {source.messages_path}")
        if moved is None:
            return total
        total += moved


def _batch_id(token_col: str = "lock_token") -> str:
    return f"substr({token_col}, 1, 18)"


def _registered_step(source, dest: Destination, policy: Policy, now: datetime,
                     dead_letters: bool, batch: int) -> Optional[int]:
    """One batch: finish one found in flight, or mark, append and delete a new one. None when
    nothing is left to do."""
    from pyspark.sql import functions as F

    ids = writer_ids(source, "fwd-dlq" if dead_letters else "fwd")
    app_id = ids[0]
    states = f"'{ACTIVE}', '{DEFERRED}', '{SCHEDULED}'"
    expired = expired_sql(policy, now, dead_letter=dead_letters)
    movable = (f"kind = '{MSG}' AND state IN ({states}) "
               f"AND {free_sql(now - policy.lock_grace)} AND NOT ({expired})")
    if dead_letters:  # a dead letter at its hop limit stays here
        movable += f" AND coalesce(hops, 0) < {MAX_HOPS}"
    if source.engine.settles(source.messages_path) and not query(
            source, f"SELECT pid FROM {{M}} WHERE (kind = '{MSG}' AND state = '{FORWARDING}') "
                    f"OR ({movable}) LIMIT 1"):
        return None  # a local table with nothing to move or finish: no Spark job (DataFusion)
    m = source.messages()
    marked = m.where(f"kind = '{MSG}' AND state = '{FORWARDING}'")
    for found in (marked.groupBy(F.expr(_batch_id()).alias("b"))
                  .agg(F.min(F.expr(f"locked_until <= {sql_literal(now - policy.lock_grace)}"))
                       .alias("gone"))
                  .collect()):
        rows = marked.where(f"{_batch_id()} = {sql_literal(found.b)}")
        pids = [r.pid for r in rows.select("pid").distinct().collect()]
        if done_version(dest.store, tuple(f"{i}:{found.b}" for i in ids)) >= 0:  # appended
            apply_df(source, as_ops(rows, "delete").drop("_out"), pids, now)
            return 0
        if found.gone:  # its mover stopped without appending: give the rows back
            back = (rows.withColumn("state", F.lit(ACTIVE))
                    .withColumn("lock_token", F.lit(None).cast("string"))
                    .withColumn("locked_until", F.lit(None).cast("timestamp")))
            apply_df(source, as_ops(back, "update").drop("_out"), pids, now)
            return 0
    free = m.where(movable)
    prefix = lock_token_prefix()
    plan = (free.limit(batch)
            .withColumn("_dead", _hop_limited())
            .withColumn("state", F.when(F.col("_dead"), F.lit(DEADLETTERING))
                        .otherwise(F.lit(FORWARDING)))
            .withColumn("dead_letter_reason", F.when(F.col("_dead"), F.lit(HOP_LIMIT_REASON))
                        .otherwise(F.col("dead_letter_reason")))
            .withColumn("dead_letter_error_description",
                        F.when(F.col("_dead"), F.lit(HOP_LIMIT_DESCRIPTION))
                        .otherwise(F.col("dead_letter_error_description")))
            .withColumn("lock_token", F.when(F.col("_dead"), F.lit(None))
                        .otherwise(F.expr(lock_token_sql(prefix))))
            .withColumn("locked_until", F.when(F.col("_dead"), F.lit(None)).otherwise(
                F.expr(sql_literal(now + OPERATION_BOUND))))
            .transform(materialize))
    found = plan.groupBy("_dead", "pid").agg(F.count(F.lit(1)).alias("n")).collect()
    if not found:
        return None
    counts = {dead: sum(r.n for r in found if r._dead == dead) for dead in (True, False)}
    pids = sorted({r.pid for r in found})
    apply_df(source, as_ops(plan.drop("_dead"), "update").drop("_out"), pids, now)
    if counts[True]:
        source.move_dead_letters(pids, now)
    if not counts[False]:
        return 0
    moving = plan.where("NOT _dead").drop("_dead")
    batch_id = lock_token(prefix, 0)[:18]  # what _batch_id() reads back from the tokens
    append_once(dest.store, destination_rows(moving, dest, now, dead_letters=dead_letters),
            f"{app_id}:{batch_id}", 0)
    # Marked at rev + 1 by the update above.
    apply_df(source, as_ops(moving.withColumn("rev", F.col("rev") + 1), "delete").drop("_out"),
             pids, now)
    return counts[False]

