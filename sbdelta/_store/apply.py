"""The apply MERGE: every change to a ``messages`` or ``deadletter`` table, as ONE guarded MERGE.

Each source row names the row it changes (``pid``, ``k``), an operation (``_op``) and what it
expects to find: a revision (``_rev``) or a lock token (``_token``). A row that is not as
expected trips a guard (``raise_error('SBDELTA_GUARD:<code>')``) and the whole MERGE writes
nothing: ``STALE`` makes :func:`~sbdelta._store.delta.retry` redo the plan from a fresh read,
``LOCK_LOST`` fails a settlement. The ON clause carries literal ``pid IN (...)`` so that Delta's
conflict check only sees the partitions the operation touched.

Operations:

==============  ==========================================================================
delete          remove the row at revision ``_rev`` (dead-letter table: leave a COMPLETED
                tombstone, so a repeated dead-letter copy cannot bring it back)
purge           remove the row at revision ``_rev``, tombstone or not (maintenance)
update          set the control columns from the source row (planner decisions)
insert          insert a new row (registration, frontiers, duplicate history)
settle_delete   complete: remove the row if the caller holds its lock
settle_update   abandon, defer, dead-letter, renew: if the caller holds the lock
cancel          remove a registered scheduled row not yet visible (any other row: guard), or
                insert a cancellation tombstone for one still only in the inbox
cancel_all      as cancel, but any other row is left alone: a topic's cancel in each of its
                subscriptions (TOPIC-6), where the message may be cancelled already or have
                been left out by the subscription's rules
==============  ==========================================================================
"""

from __future__ import annotations

from datetime import datetime
from typing import Iterable, List

from .delta import merge, sql_literal, values_relation
from .layout import (COLUMN_NAMES, COMPLETED, CONTROL_COLUMNS, DEADLETTERING, MAX_DELIVERY_REASON,
                     MESSAGES_COLUMNS, SCHEDULED, pid_list)
from .locks import lock_held_sql


# Extra source columns of the apply MERGE.
APPLY_COLUMNS = (
    ("_op", "STRING"),          # see the table above
    ("_rev", "BIGINT"),         # expected revision (delete, purge, update)
    ("_token", "STRING"),       # expected lock token (settle_*)
    ("_guard", "STRING"),       # guard code raised when the row is not as expected
    ("_keep_lock", "BOOLEAN"),  # settle_update: keep the lock (renew) or release it
    ("_abandon", "BOOLEAN"),    # settle_update: an abandon (may hit max delivery count)
    ("_max_dc", "INT"),         # the entity's max delivery count, for abandon
)
SOURCE_COLUMNS = MESSAGES_COLUMNS + APPLY_COLUMNS
SOURCE_NAMES = [name for name, _ in SOURCE_COLUMNS]


def max_delivery_description(count_sql: str) -> str:
    return f"concat('Message could not be consumed after ', {count_sql}, ' delivery attempts.')"


def apply_clauses(pids: Iterable[int], now: datetime, tombstones: bool = False) -> str:
    """The MERGE clauses (``tombstones``: this is a dead-letter table)."""
    remove = (f"UPDATE SET state = '{COMPLETED}', lock_token = NULL, locked_until = NULL, "
              f"body = NULL, rev = t.rev + 1") if tombstones else "DELETE"
    now_sql = sql_literal(now)
    lock_ok = lock_held_sql(now)
    update_all = ", ".join(f"{c} = s.{c}" for c, _ in CONTROL_COLUMNS)
    over_max = "(s._abandon AND t.delivery_count >= s._max_dc)"
    insert_cols = ", ".join(COLUMN_NAMES)
    insert_vals = ", ".join(f"s.{c}" for c in COLUMN_NAMES)
    raise_guard = "CAST(raise_error(concat('SBDELTA_GUARD:', s._guard)) AS STRING)"
    return f"""
    ON t.pid IN ({pid_list(pids)}) AND t.pid = s.pid AND t.k = s.k
    WHEN MATCHED AND s._op = 'delete' AND t.rev = s._rev THEN {remove}
    WHEN MATCHED AND s._op = 'purge' AND t.rev = s._rev THEN DELETE
    WHEN MATCHED AND s._op = 'update' AND t.rev = s._rev THEN
      UPDATE SET {update_all}, application_properties = s.application_properties,
                 rev = t.rev + 1
    WHEN MATCHED AND s._op = 'settle_delete' AND {lock_ok} THEN {remove}
    WHEN MATCHED AND s._op = 'settle_update' AND {lock_ok} THEN UPDATE SET
      state = CASE WHEN {over_max} THEN '{DEADLETTERING}' ELSE coalesce(s.state, t.state) END,
      dead_letter_reason = CASE WHEN {over_max} THEN '{MAX_DELIVERY_REASON}'
                                ELSE coalesce(s.dead_letter_reason, t.dead_letter_reason) END,
      dead_letter_error_description = CASE WHEN {over_max}
          THEN {max_delivery_description('t.delivery_count')}
          ELSE coalesce(s.dead_letter_error_description, t.dead_letter_error_description) END,
      lock_token = CASE WHEN s._keep_lock THEN t.lock_token END,
      locked_until = CASE WHEN s._keep_lock THEN s.locked_until END,
      application_properties = coalesce(s.application_properties, t.application_properties),
      rev = t.rev + 1
    WHEN MATCHED AND s._op IN ('cancel', 'cancel_all') AND t.state = '{SCHEDULED}'
      AND t.visible_at > {now_sql} THEN DELETE
    WHEN MATCHED AND s._op = 'cancel_all' THEN UPDATE SET rev = t.rev
    WHEN MATCHED THEN UPDATE SET k = {raise_guard}
    WHEN NOT MATCHED AND s._op IN ('insert', 'cancel', 'cancel_all') THEN INSERT ({insert_cols})
      VALUES ({insert_vals})
    WHEN NOT MATCHED THEN INSERT (k) VALUES ({raise_guard})
    """


def to_source(df, *, out: bool = False):
    """Complete ``df`` to the apply-MERGE source shape (missing columns become NULL).

    ``_out`` marks rows that are handed to the caller (a receive's result).
    """
    from pyspark.sql import functions as F

    present = set(df.columns)
    cols = []
    for name, kind in SOURCE_COLUMNS:
        if name in present:
            cols.append(F.col(name).cast(kind.lower()).alias(name))
        elif name == "_guard":
            cols.append(F.lit("STALE").alias(name))
        else:
            cols.append(F.lit(None).cast(kind.lower()).alias(name))
    cols.append(F.lit(out).alias("_out"))
    return df.select(*cols)


def as_ops(df, op: str, *, out: bool = False):
    """Rows read from ``messages`` as source rows of ``op`` at the revision read."""
    from pyspark.sql import functions as F

    return to_source(df.withColumns({"_op": F.lit(op), "_rev": F.col("rev")}), out=out)


def apply_df(store, df, pids: Iterable[int], now: datetime):
    """One apply MERGE with ``df`` (source-shaped, without ``_out``) on the store's table;
    returns Delta's metrics row (``num_affected_rows``...)."""
    return merge(store.spark, store.messages_path, df,
                 apply_clauses(list(pids), now, store.dead_letter))


def apply_rows(store, rows: List[dict], pids: Iterable[int], now: datetime) -> None:
    """One apply MERGE from small Python-built source rows (settlement, cancel, a list
    receive's collected plan)."""
    apply_df(store, source_relation(store.spark, rows), pids, now)


def source_relation(spark, rows: List[dict]):
    """Python-built source rows (missing columns NULL, ``_guard`` STALE) as a DataFrame."""
    data = [tuple(row.get(n, "STALE" if n == "_guard" else None) for n in SOURCE_NAMES)
            for row in rows]
    return values_relation(spark, data, SOURCE_COLUMNS)
