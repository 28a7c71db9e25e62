"""Moves into the dead-letter table, crash-safe although Delta has no multi-table commit.

A message is dead-lettered in three steps, each safe to repeat:

1. its row is marked ``DEADLETTERING`` (under the lock guard of a settlement, or by a planner
   for expired and over-delivered messages);
2. :func:`move_dead_letters` copies DEADLETTERING rows into the dead-letter table with a MERGE
   that inserts only keys the table does not have;
3. it removes the source rows at the revision it copied.

A crash after any step leaves DEADLETTERING rows that the next receive or sweep on the
partition moves again. Completing a message in the dead-letter queue leaves a ``COMPLETED``
tombstone there (the dead-letter table's apply clauses), so a repeated step 2 cannot bring a
completed message back; maintenance purges tombstones whose source row is gone.
"""

from __future__ import annotations

from datetime import datetime
from typing import Iterable

from . import rs
from .apply import apply_df, apply_rows, as_ops, insert_missing, merge_rows, to_source
from .delta import LITERAL_ROWS, materialize, merge, retry
from .layout import ACTIVE, COMPLETED, DEADLETTERING, MSG, pid_list


def move_dead_letters(store, pids: Iterable[int], now: datetime, *,
                      copy_only: bool = False) -> int:
    """Copy the DEADLETTERING rows of ``pids`` into the dead-letter table, then remove them.

    ``copy_only`` stops after step 2, as a crash between the two commits would (tests).
    Returns how many rows were moved. A move of up to LITERAL_ROWS rows is a read and two
    MERGEs of literal rows: through delta-rs where settlements go there
    (:meth:`.engines.Engine.settles`, no Spark job), else one Spark job reads them and the
    MERGEs take them as a literal relation. A larger move reads them into a checkpoint.
    """
    pids = sorted(set(pids))
    dlq = store.dead_letter_store()
    where = f"pid IN ({pid_list(pids)}) AND kind = '{MSG}' AND state = '{DEADLETTERING}'"

    def small_step(rows):
        copies = [dict(r, state=ACTIVE, lock_token=None, locked_until=None,
                       visible_at=r["enqueued_time"], rev=0, _op="insert") for r in rows]
        merge_rows(store, dlq.messages_path, insert_missing(pids), copies)
        if not copy_only:
            apply_rows(store, [dict(r, _op="delete", _rev=r["rev"]) for r in rows], pids, now)
        return len(rows)

    def step():
        from pyspark.sql import functions as F

        # Most moves are a few rows: one read (delta-rs, or one Spark job) and literal MERGEs.
        if store.engine.settles(store.messages_path):
            found = rs.select(store.messages_path, where, LITERAL_ROWS + 1)
        else:
            found = [r.asDict() for r in
                     store.messages().where(where).limit(LITERAL_ROWS + 1).collect()]
        if len(found) <= LITERAL_ROWS:
            return small_step(found) if found else 0
        rows = store.messages().where(where).limit(100000).transform(materialize)
        moved = rows.count()
        if not moved:  # moved by someone else since the read above
            return 0
        copy = (rows.withColumn("state", F.lit(ACTIVE))
                .withColumn("lock_token", F.lit(None).cast("string"))
                .withColumn("locked_until", F.lit(None).cast("timestamp"))
                .withColumn("visible_at", F.col("enqueued_time"))
                .withColumn("rev", F.lit(0).cast("bigint"))
                .withColumn("_op", F.lit("insert")))
        copy = to_source(copy).drop("_out")
        merge(store.spark, dlq.messages_path, copy, insert_missing(pids).spark_clauses())
        if not copy_only:
            apply_df(store, as_ops(rows, "delete").drop("_out"), pids, now)
        return moved

    return retry(step, what=f"dead-letter move in {store.messages_path}")


def finish_moves(store, now: datetime) -> int:
    """Finish the moves a crash left half done, in every partition of ``store``.

    A dead-letter queue's receive calls this first: a message whose dead-letter settlement
    committed (step 1) belongs to the dead-letter queue even when the process that made it died
    before steps 2 and 3, and its receivers must not wait for a receive of the source's
    partition or the expiry sweep to move it. Costs one filtered read of the messages table.
    """
    where = f"kind = '{MSG}' AND state = '{DEADLETTERING}'"
    found = (rs.select(store.messages_path, where, LITERAL_ROWS + 1)
             if store.engine.settles(store.messages_path) else None)
    if found is not None:
        pids = {r["pid"] for r in found}
    else:
        pids = {r.pid for r in store.messages().where(where).select("pid").distinct().collect()}
    return move_dead_letters(store, pids, now) if pids else 0


def completed_tombstones(dlq, live_sources=None):
    """Dead-letter ``COMPLETED`` tombstones nobody needs: their source row is gone
    (``live_sources``: keys still DEADLETTERING in the source, which may be copied again)."""
    dead = dlq.messages().where(f"kind = '{MSG}' AND state = '{COMPLETED}'")
    if live_sources is not None:
        dead = dead.join(live_sources, ["pid", "k"], "left_anti")
    return dead
