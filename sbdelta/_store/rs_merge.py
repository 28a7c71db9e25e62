"""The delta-rs writes shaped as a MERGE: :func:`merge` (delta-rs's MERGE, its guard clauses
checked first on the snapshot it commits against) and :func:`replace` (a MERGE that only
updates matched rows and inserts unmatched ones, as one write replacing its keys' rows). The
table handling, the other writes and the log reads are :mod:`.rs`'s."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Callable, List, Optional, Sequence, Tuple

from . import rs
from .datafusion import translate
from .guards import GuardTripped
from .literals import sql_literal
from .schema import arrow_type


_SOURCE_COLUMN = re.compile(r"\bs\.(\w+)")


def merge(path: str, spec, rows: Sequence[dict], columns: Sequence[Tuple[str, str]]) -> None:
    """One MERGE of ``rows`` (source rows: ``columns``, (name, SQL type) pairs; a missing
    value is NULL, a missing ``_guard`` STALE) into the local table ``path`` as delta-rs
    commits it, ``spec`` being the MERGE as sbdelta writes it once
    (:class:`~sbdelta._store.apply.MergeSpec`). Only for tables the engine lets delta-rs
    settle.

    delta-rs's MERGE has no ``raise_error``: the guard clauses are checked first, on the very
    snapshot the MERGE then reads and commits against. A source row that no clause before a
    guard takes raises GuardTripped with the row's guard code, and nothing is written; a
    commit made by anyone after that snapshot to a file the MERGE read makes delta-rs refuse
    the commit (CommitFailedError: retried from a fresh plan, as Spark's conflicts are).

    Raises:
        GuardTripped: a guard clause took a source row.
        deltalake.exceptions.CommitFailedError: lost to a concurrent commit (retry).
    """
    import pyarrow as pa

    if not rows:
        return  # nothing to change: no commit
    with rs.writing(path) as (_, table):
        target = pa.schema(table.schema().to_arrow())
        fields = [target.field(name) if name in target.names
                  else pa.field(name, arrow_type(kind)) for name, kind in columns]
        source = pa.Table.from_pylist(
            [{name: _arrow_value(row.get(name, "STALE" if name == "_guard" else None))
              for name, _ in columns} for row in rows], schema=pa.schema(fields))
        tripped = _tripped_guard(table, spec, rows, columns)
        if tripped is not None:
            raise GuardTripped(tripped)
        builder = table.merge(source=source, predicate=translate(spec.on), source_alias="s",
                              target_alias="t", streamed_exec=False,
                              writer_properties=rs.writer_properties(),
                              post_commithook_properties=rs.post_commit_properties())
        for clause in spec.clauses:
            if clause.action == "guard":
                continue
            condition = translate(clause.condition) if clause.condition else None
            assignments = {name: translate(expr) for name, expr in clause.assignments}
            if not clause.matched:
                builder = builder.when_not_matched_insert(updates=assignments, predicate=condition)
            elif clause.action == "delete":
                builder = builder.when_matched_delete(predicate=condition)
            else:
                builder = builder.when_matched_update(updates=assignments, predicate=condition)
        before = table.version()
        builder.execute()
    rs.checkpoint_after(table, before)


def replace(path: str, spec, rows: Sequence[dict], columns: Sequence[Tuple[str, str]],
            keys: str, build: Optional[Callable[[List[dict]], List[dict]]]) -> None:
    """ONE delta-rs commit to the local table ``path``: the rows ``keys`` selects (SQL over
    the table's columns, as sbdelta writes it) replaced by ``build(current)``, ``current``
    being those rows (dicts) on the snapshot the commit is made against, after ``spec``'s
    guard clauses were checked for the source ``rows`` (as :func:`merge` checks them) on that
    same snapshot. For a MERGE whose source rows only update matched rows and insert
    unmatched ones, it is the same change (:func:`~sbdelta._store.apply.replace_rows`) at
    less than half the cost: delta-rs plans a MERGE as a join over every column of source
    and target, and this is a write with a predicate (``replaceWhere``: the selected rows
    deleted, the built ones appended, in one commit). Its conflicts are the MERGE's: a
    commit after the snapshot that removes a file holding a selected row, or adds one
    matching ``keys``, makes delta-rs refuse it; a built row outside ``keys`` is refused
    before anything is written. ``build`` None: the selected rows are only removed, by ONE
    delta-rs DELETE on that snapshot (no read of them, no write of an empty replacement).

    Raises:
        GuardTripped: a guard clause took a source row (nothing written).
        deltalake.exceptions.CommitFailedError: lost to a concurrent commit (retry).
    """
    import pyarrow as pa
    from deltalake import QueryBuilder, write_deltalake

    where = translate(keys)
    with rs.writing(path) as (_, table):
        tripped = _tripped_guard(table, spec, rows, columns)
        if tripped is not None:
            raise GuardTripped(tripped)
        before = table.version()
        if build is None:
            table.delete(where, writer_properties=rs.writer_properties(),
                         post_commithook_properties=rs.post_commit_properties())
            rs.checkpoint_after(table, before)
            return
        current = pa.table(QueryBuilder().register("t", table).execute(
            f"SELECT * FROM t WHERE {where}").read_all()).to_pylist()
        schema = pa.schema(table.schema().to_arrow())
        data = pa.Table.from_pylist(
            [{name: _arrow_value(row.get(name)) for name in schema.names}
             for row in build(current)], schema=schema)
        write_deltalake(table, data, mode="overwrite", predicate=where,
                        writer_properties=rs.writer_properties(),
                        post_commithook_properties=rs.post_commit_properties())
    rs.checkpoint_after(table, before)


def _arrow_value(value):
    """A source value as Arrow takes it: naive datetimes (as PySpark returns timestamps, in
    local time) made aware, so that Arrow does not read them as UTC."""
    if isinstance(value, datetime) and value.tzinfo is None:
        return value.astimezone(timezone.utc)
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def _tripped_guard(table, spec, rows: Sequence[dict],
                   columns: Sequence[Tuple[str, str]]) -> Optional[str]:
    """The guard code of a source row that a guard clause of ``spec`` would take on
    ``table``'s snapshot, or None: one DataFusion query joining the source rows (the columns
    the clauses read, as literals) to the table and asking, for each row, which clause it
    takes first (MERGE semantics: the first clause whose condition holds)."""
    import pyarrow as pa
    from deltalake import QueryBuilder

    kinds = dict(columns)
    guards = [c for c in spec.clauses if c.action == "guard"]
    if not guards:
        return None
    texts = [c.condition for c in spec.clauses if c.condition] + [spec.on] + [
        c.guard_sql() for c in guards]
    used = sorted({name for text in texts for name in _SOURCE_COLUMN.findall(text)})
    values = ", ".join(
        "(" + ", ".join(_typed(row.get(name, "STALE" if name == "_guard" else None),
                               kinds[name]) for name in used) + ")" for row in rows)

    def first_taken(matched: bool) -> str:
        """SQL: the guard code of the first clause that takes the row, NULL if that clause
        is not a guard (or none takes it)."""
        whens = []
        for clause in spec.clauses:
            if clause.matched != matched:
                continue
            code = translate(clause.guard_sql()) if clause.action == "guard" else "NULL"
            if clause.condition is None:
                whens.append(f"WHEN TRUE THEN {code}")
                break
            whens.append(f"WHEN coalesce({translate(clause.condition)}, FALSE) THEN {code}")
        return f"CASE {' '.join(whens)} END" if whens else "NULL"

    code = (f"CASE WHEN t.{spec.key} IS NULL THEN {first_taken(False)} "
            f"ELSE {first_taken(True)} END")
    sql = (f"SELECT code FROM (SELECT {code} AS code FROM (VALUES {values}) "
           f"AS s({', '.join(used)}) LEFT JOIN t ON {translate(spec.on)}) AS c "
           "WHERE code IS NOT NULL LIMIT 1")
    found = pa.table(QueryBuilder().register("t", table).execute(sql).read_all())
    return found.column("code")[0].as_py() if found.num_rows else None


def _typed(value, kind: str) -> str:
    """A DataFusion literal of the SQL type ``kind``."""
    if kind == "TIMESTAMP":
        if value is None:
            return "arrow_cast(NULL, 'Timestamp(Microsecond, Some(\"UTC\"))')"
        return translate(sql_literal(_arrow_value(value)))
    return f"CAST({translate(sql_literal(value))} AS {kind})"
