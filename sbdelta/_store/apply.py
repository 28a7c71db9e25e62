"""The apply MERGE: every change to a ``messages`` or ``deadletter`` table, as ONE guarded MERGE.

Each source row names the row it changes (``pid``, ``k``), an operation (``_op``) and what it
expects to find: a revision (``_rev``) or a lock token (``_token``). A row that is not as
expected trips a guard (``raise_error('SBDELTA_GUARD:<code>')``) and the whole MERGE writes
nothing: ``STALE`` makes :func:`~sbdelta._store.delta.retry` redo the plan from a fresh read,
``LOCK_LOST`` fails a settlement. The ON clause carries literal ``pid IN (...)`` so that Delta's
conflict check only sees the partitions the operation touched. Two shapes are committed
without a MERGE, to the same effect and with the same conflicts (:func:`apply_rows`): a lone
update or removal as one conditional UPDATE or DELETE, and under delta-rs rows that only
update, insert and remove as one write replacing the rows of their keys.

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

from dataclasses import dataclass
from datetime import datetime
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from . import rs, rs_merge
from .delta import merge, run_guarded, values_relation
from .guards import GuardTripped
from .literals import sql_literal
from .layout import (COLUMN_NAMES, COMPLETED, CONTROL_COLUMNS, DEADLETTERING, MAX_DELIVERY_REASON,
                     MESSAGES_COLUMNS, SCHEDULED, TTL_EXPIRED_DESCRIPTION, TTL_EXPIRED_REASON,
                     pid_list)
from .locks import Policy, lock_held_sql, over_limit_sql


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
#: The columns an ``update`` sets from its source row (its revision moves on as well).
UPDATED_COLUMNS = CONTROL_COLUMNS + (("application_properties", "STRING"),)


def max_delivery_description(count_sql: str) -> str:
    return f"concat('Message could not be consumed after ', {count_sql}, ' delivery attempts.')"


def expiry_marks(policy: Policy):
    """What becomes of a free message that expired or reached the delivery limit (TTL-6,
    RECV-5), in SQL over its row: (dead-letter it?, the columns a dead-lettering sets). The
    sweep (:func:`.expiry.expiry_ops`) and a receive's plan (:mod:`.receive_plan`) both use
    it."""
    over = over_limit_sql(policy)
    to_dlq = f"(({over}) OR {str(policy.dead_letter_on_expiration).upper()})"
    reason = f"CASE WHEN {over} THEN '{MAX_DELIVERY_REASON}' ELSE '{TTL_EXPIRED_REASON}' END"
    desc = (f"CASE WHEN {over} THEN {max_delivery_description('delivery_count')} "
            f"ELSE '{TTL_EXPIRED_DESCRIPTION}' END")
    return to_dlq, {"state": f"'{DEADLETTERING}'", "dead_letter_reason": reason,
                    "dead_letter_error_description": desc, "lock_token": "NULL",
                    "locked_until": "NULL"}


@dataclass(frozen=True)
class Clause:
    """One WHEN clause of a MERGE: on a matched or an unmatched source row, under ``condition``
    (SQL over ``s.`` and ``t.``; None: always), ``action`` ``delete``, ``update`` or ``insert``
    with ``assignments`` ((column, SQL) pairs), or ``guard``: abort with ``code``, or with the
    row's ``_guard`` when ``code`` is None.
    """

    matched: bool
    action: str
    condition: Optional[str] = None
    assignments: Tuple[Tuple[str, str], ...] = ()
    code: Optional[str] = None

    def guard_sql(self) -> str:
        """SQL for the code a guard clause aborts with."""
        return "s._guard" if self.code is None else sql_literal(self.code)


@dataclass(frozen=True)
class MergeSpec:
    """A MERGE written once (the ON condition and the clauses in order, first match wins) and
    rendered for each engine: :meth:`spark_clauses` for Spark SQL, :mod:`.rs` for delta-rs.
    ``key`` is a target column that is never NULL in a row (a guard assigns to it in Spark;
    delta-rs's guard check tells matched rows by it)."""

    on: str
    clauses: Tuple[Clause, ...]
    key: str = "k"

    def spark_clauses(self) -> str:
        """The text after ``USING source AS s`` of a Spark ``MERGE INTO``: guards abort with
        ``raise_error``."""
        lines = [f"ON {self.on}"]
        for c in self.clauses:
            when = ("WHEN MATCHED" if c.matched else "WHEN NOT MATCHED") + (
                f" AND {c.condition}" if c.condition else "")
            if c.action == "guard":
                raise_guard = (f"CAST(raise_error(concat('SBDELTA_GUARD:', {c.guard_sql()})) "
                               "AS STRING)")
                then = (f"UPDATE SET {self.key} = {raise_guard}" if c.matched
                        else f"INSERT ({self.key}) VALUES ({raise_guard})")
            elif c.action == "delete":
                then = "DELETE"
            elif c.action == "update":
                then = "UPDATE SET " + ", ".join(f"{n} = {e}" for n, e in c.assignments)
            else:
                then = (f"INSERT ({', '.join(n for n, _ in c.assignments)}) "
                        f"VALUES ({', '.join(e for _, e in c.assignments)})")
            lines.append(f"{when} THEN {then}")
        return "\n".join(lines)


#: The operations of the apply MERGE (the table above).
OPS = ("delete", "purge", "update", "settle_delete", "settle_update", "cancel", "cancel_all",
       "insert")


def apply_merge(pids: Iterable[int], now: datetime, tombstones: bool = False,
                ops: Optional[Iterable[str]] = None) -> MergeSpec:
    """The apply MERGE (``tombstones``: this is a dead-letter table). ``ops``: the operations
    its source rows may carry (default: all of :data:`OPS`); only their clauses are written,
    so a MERGE has less to plan and evaluate. A source row of another operation meets the
    guard clauses (STALE), as an unknown operation always did."""
    wanted = set(OPS if ops is None else ops)
    unknown = wanted - set(OPS)
    if unknown:
        raise ValueError(f"unknown apply operation(s) {sorted(unknown)}; known: {list(OPS)}")
    if tombstones:
        remove = Clause(True, "update", assignments=(
            ("state", f"'{COMPLETED}'"), ("lock_token", "NULL"),
            ("locked_until", "NULL"), ("body", "NULL"),
            ("rev", "t.rev + 1")))
    else:
        remove = Clause(True, "delete")
    now_sql = sql_literal(now)
    lock_ok = lock_held_sql(now)
    over_max = "(s._abandon AND t.delivery_count >= s._max_dc)"
    settle_update = (
        ("state", f"CASE WHEN {over_max} THEN '{DEADLETTERING}' "
                  "ELSE coalesce(s.state, t.state) END"),
        ("dead_letter_reason", f"CASE WHEN {over_max} THEN '{MAX_DELIVERY_REASON}' "
                               "ELSE coalesce(s.dead_letter_reason, t.dead_letter_reason) END"),
        ("dead_letter_error_description",
         f"CASE WHEN {over_max} THEN {max_delivery_description('t.delivery_count')} "
         "ELSE coalesce(s.dead_letter_error_description, t.dead_letter_error_description) END"),
        ("lock_token", "CASE WHEN s._keep_lock THEN t.lock_token END"),
        ("locked_until", "CASE WHEN s._keep_lock THEN s.locked_until END"),
        ("application_properties", "coalesce(s.application_properties, "
                                   "t.application_properties)"),
        ("rev", "t.rev + 1"))

    def listed(names) -> str:
        return ", ".join(f"'{op}'" for op in sorted(wanted & set(names)))

    cancels, inserts = listed(("cancel", "cancel_all")), listed(("insert", "cancel", "cancel_all"))
    clauses = tuple(clause for needed, clause in (
        ("delete" in wanted, Clause(True, remove.action, "s._op = 'delete' AND t.rev = s._rev",
                                    remove.assignments)),
        ("purge" in wanted, Clause(True, "delete", "s._op = 'purge' AND t.rev = s._rev")),
        ("update" in wanted, Clause(True, "update", "s._op = 'update' AND t.rev = s._rev",
                                    tuple((c, f"s.{c}") for c, _ in UPDATED_COLUMNS)
                                    + (("rev", "t.rev + 1"),))),
        ("settle_delete" in wanted, Clause(True, remove.action,
                                           f"s._op = 'settle_delete' AND {lock_ok}",
                                           remove.assignments)),
        ("settle_update" in wanted, Clause(True, "update",
                                           f"s._op = 'settle_update' AND {lock_ok}",
                                           settle_update)),
        (bool(cancels), Clause(True, "delete", f"s._op IN ({cancels}) AND t.state = "
                                               f"'{SCHEDULED}' AND t.visible_at > {now_sql}")),
        ("cancel_all" in wanted, Clause(True, "update", "s._op = 'cancel_all'",
                                        (("rev", "t.rev"),))),
        (True, Clause(True, "guard")),
        (bool(inserts), Clause(False, "insert", f"s._op IN ({inserts})",
                               tuple((c, f"s.{c}") for c in COLUMN_NAMES))),
        (True, Clause(False, "guard")),
    ) if needed)
    return MergeSpec(f"t.pid IN ({pid_list(pids)}) AND t.pid = s.pid AND t.k = s.k", clauses)


def apply_clauses(pids: Iterable[int], now: datetime, tombstones: bool = False,
                  ops: Optional[Iterable[str]] = None) -> str:
    """The apply MERGE's clauses in Spark SQL (``tombstones``: this is a dead-letter table;
    ``ops`` as for :func:`apply_merge`)."""
    return apply_merge(pids, now, tombstones, ops).spark_clauses()


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


def apply_df(store, df, pids: Iterable[int], now: datetime,
             ops: Optional[Iterable[str]] = None):
    """One apply MERGE with ``df`` (source-shaped, without ``_out``) on the store's table;
    returns Delta's metrics row (``num_affected_rows``...). ``ops``: the operations ``df``'s
    rows may carry (default: any)."""
    return merge(store.spark, store.messages_path, df,
                 apply_clauses(list(pids), now, store.dead_letter, ops))


def apply_rows(store, rows: List[dict], pids: Iterable[int], now: datetime) -> None:
    """One apply MERGE from small Python-built source rows (settlement, cancel, a list
    receive's collected plan); a lone ``update`` row, or on a table without tombstones a
    lone ``delete`` or ``purge`` row, as the one conditional UPDATE or DELETE it amounts to
    (:func:`change_row`); under delta-rs, rows that only update, insert and remove (a
    receive, a completion of many messages) as one replacing write (:func:`replace_rows`)."""
    pids = list(pids)
    ops = {row.get("_op") for row in rows}
    removing = frozenset() if store.dead_letter else REMOVING
    if len(rows) == 1 and ops <= {"update"} | removing:
        change_row(store, rows[0], pids)
        return
    spec = apply_merge(pids, now, store.dead_letter, ops if ops <= set(OPS) else None)
    settled = frozenset() if store.dead_letter else SETTLED_AWAY
    if ops <= REPLACING | removing | settled and store.engine.settles(store.messages_path):
        replace_rows(store, spec, rows, pids)
        return
    merge_rows(store, store.messages_path, spec, rows)


#: The operations whose apply MERGE delta-rs commits as a write that replaces the rows of
#: their keys (:func:`replace_rows`), and those that remove a row at its revision, which join
#: them on a table without tombstones (a dead-letter table's ``delete`` updates a row).
REPLACING = frozenset(("update", "insert"))
REMOVING = frozenset(("delete", "purge"))
#: A completion, which removes a row whose lock the guard query found held (on a table
#: without tombstones): a list of received messages completed in one commit.
SETTLED_AWAY = frozenset(("settle_delete",))


def replace_rows(store, spec: MergeSpec, rows: List[dict], pids: Iterable[int]) -> None:
    """What the apply MERGE ``spec`` does with source rows that only ``update``, ``insert``
    and (on a table without tombstones) ``delete``, ``purge`` or ``settle_delete`` (a
    receive registering new messages and moving its frontiers, or removing what it hands
    out; a completion of many messages, each lock found held by the guards), as ONE
    delta-rs write replacing the rows of their keys (:func:`.rs_merge.replace`): the guards
    checked on the snapshot it commits against; an updated row is the table's row with the
    source's :data:`UPDATED_COLUMNS` and its revision moved on (the MERGE's update clause),
    an inserted row the source's columns (its insert clause), a removed row is not written
    again (rows that are only removed: one DELETE of their keys). Same rows, same
    conflicts, less than half the time of delta-rs's MERGE (issue 16)."""
    matched = {(int(row["pid"]), row["k"]): row for row in rows if row["_op"] != "insert"}
    inserts = [row for row in rows if row["_op"] == "insert"]

    def build(current: List[dict]) -> List[dict]:
        built = []
        for target in current:  # the guards let only the matched keys be there
            source = matched[(int(target["pid"]), target["k"])]
            if source["_op"] == "update":
                built.append({**target, "rev": target["rev"] + 1,
                              **{name: source.get(name) for name, _ in UPDATED_COLUMNS}})
        return built + [{name: row.get(name) for name in COLUMN_NAMES} for row in inserts]

    by_pid: Dict[int, List[str]] = {}
    for row in rows:
        by_pid.setdefault(int(row["pid"]), []).append(row["k"])
    keys = " OR ".join(f"(pid = {pid} AND k IN ({', '.join(sql_literal(k) for k in ks)}))"
                       for pid, ks in sorted(by_pid.items()))
    removes_only = all(row["_op"] not in REPLACING for row in rows)
    run_guarded(lambda: rs_merge.replace(store.messages_path, spec, rows, SOURCE_COLUMNS,
                                         f"pid IN ({pid_list(pids)}) AND ({keys})",
                                         None if removes_only else build))


def change_row(store, row: dict, pids: Iterable[int]) -> None:
    """What the apply MERGE does with ONE ``update`` source row, as ONE conditional UPDATE
    (the row at ``pid``, ``k`` and revision ``_rev``, in ``pids``, takes the source's
    :data:`UPDATED_COLUMNS` and its revision moves on), or with ONE ``delete`` or ``purge``
    row of a table without tombstones, as ONE conditional DELETE of that row; when there is
    no such row, nothing is written and GuardTripped carries the row's guard code (STALE by
    default), as the MERGE's guard clauses would. Same result, same conflicts (the statement
    reads and rewrites the file of that one row), at a fraction of the cost: delta-rs plans a
    MERGE as a join over every column of source and target (a single receive locking a
    registered message spent most of its time there, issue 16); on Spark it is fewer jobs."""
    sets = None
    if row["_op"] == "update":
        sets = {name: typed_literal(row.get(name), kind) for name, kind in UPDATED_COLUMNS}
        sets["rev"] = "rev + 1"
    where = (f"pid IN ({pid_list(pids)}) AND pid = {int(row['pid'])} AND "
             f"k = {sql_literal(row['k'])} AND rev = {sql_literal(row.get('_rev'))}")
    if run_guarded(lambda: delete_or_update(store, where, sets)) != 1:
        raise GuardTripped(row.get("_guard") or "STALE")


def typed_literal(value, kind: str) -> str:
    """``value`` as a SQL literal of the column type ``kind`` (so that NULLs and integers
    have the column's type in both engines; a timestamp literal has it already)."""
    text = sql_literal(value)
    return text if kind == "TIMESTAMP" and value is not None else f"CAST({text} AS {kind})"


def delete_or_update(store, where: str, sets: Optional[Dict[str, str]] = None) -> int:
    """ONE ``DELETE`` (``sets`` None) or ``UPDATE ... SET sets`` of the store's messages
    table ``WHERE where`` (Spark SQL, as sbdelta writes it once): through delta-rs where the
    store's engine settles there (no Spark job), else Spark SQL. Returns how many rows it
    changed. For one row it is much cheaper than the apply MERGE, whose conditions the
    caller then writes into ``where``."""
    path = store.messages_path
    if store.engine.settles(path):
        return rs.delete(path, where) if sets is None else rs.update(path, sets, where)
    table = f"delta.`{path}`"
    if sets is None:
        statement = f"DELETE FROM {table} WHERE {where}"
    else:
        statement = (f"UPDATE {table} SET "
                     + ", ".join(f"{name} = {expr}" for name, expr in sets.items())
                     + f" WHERE {where}")
    result = store.spark.sql(statement).collect()
    return int(result[0][0]) if result else 0


def insert_missing(pids: Iterable[int]) -> MergeSpec:
    """A MERGE that inserts the source rows whose key the table does not have (and leaves
    every other row alone): a dead-letter copy, safe to repeat."""
    return MergeSpec(f"t.pid IN ({pid_list(pids)}) AND t.pid = s.pid AND t.k = s.k",
                     (Clause(False, "insert", None, tuple((c, f"s.{c}") for c in COLUMN_NAMES)),))


def merge_rows(store, path: str, spec: MergeSpec, rows: List[dict]) -> None:
    """The MERGE ``spec`` of source rows built in the driver into the table ``path`` (one of
    ``store``'s): through delta-rs where the store's engine settles there
    (:meth:`.engines.Engine.settles`: no Spark job), else Spark (a literal relation)."""
    merge_literal(store.spark, store.engine, path, spec, rows, SOURCE_COLUMNS)


def merge_literal(spark, engine, path: str, spec: MergeSpec, rows: List[dict],
                  columns: Sequence[Tuple[str, str]]) -> None:
    """The MERGE ``spec`` of ``rows`` (dicts over ``columns``, (name, SQL type) pairs; a
    missing value is NULL, a missing ``_guard`` STALE) into the table ``path``: through
    delta-rs where ``engine`` settles there, else Spark. A guard raises GuardTripped."""
    if engine.settles(path):
        run_guarded(lambda: rs_merge.merge(path, spec, rows, columns))
    else:
        merge(spark, path, source_relation(spark, rows, columns), spec.spark_clauses())


def source_relation(spark, rows: List[dict], columns: Sequence[Tuple[str, str]] = SOURCE_COLUMNS):
    """Python-built source rows (missing columns NULL, ``_guard`` STALE) as a DataFrame."""
    data = [tuple(row.get(n, "STALE" if n == "_guard" else None) for n, _ in columns)
            for row in rows]
    return values_relation(spark, data, columns)
