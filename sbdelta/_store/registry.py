"""Registry verbs: the entity registry Delta table (schema in schema.py).

Each write is one Delta operation whose condition carries its precondition, so two processes
creating, updating or deleting the same entity at once cannot both succeed:

- insert: MERGE on ``key``; a match trips the ``EXISTS`` guard; an optional parent probe row
  trips ``NO_PARENT`` when the parent is missing in the same snapshot the insert commits on.
- update: MERGE on ``key``; no match trips ``NOT_FOUND``.
- delete: one DELETE of the entity and everything below it (a topic's subscriptions and rules).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable, Dict, List, Optional, Tuple

from .._clock import from_spark
from . import schema
from . import history, rs, rs_tables
from .engines import Engine, resolve_engine
from .apply import Clause, MergeSpec, merge_literal
from .._connect import is_connect
from .delta import (create_table, latest_snapshot, latest_version, retry, run_guarded,
                    table_exists)
from .guards import GuardTripped
from .literals import sql_literal


#: The rows Spark last read of each registry: path -> (table id, version, rows). The registry
#: changes rarely and is read by every entity open, count and topic send; a read at a version
#: already read costs a listing of its log and no Spark job.
_READ: Dict[str, Tuple[str, int, List[dict]]] = {}


@dataclass(frozen=True)
class RegistryRow:
    key: str
    kind: str
    name: str
    parent: Optional[str]
    location: Optional[str]
    properties: dict
    created_at: datetime
    updated_at: datetime


class Registry:
    """The registry table of one namespace."""

    def __init__(self, spark, path: str, engine: Optional[Engine] = None) -> None:
        self.spark = spark
        self.engine = engine if engine is not None else resolve_engine()
        self.path = path
        self._known_to_exist = False

    def ensure(self) -> None:
        if not self._known_to_exist:
            # delta-rs makes a local namespace's registry (no JVM); Spark any other
            if not (self.engine.appends(self.path) and rs_tables.create(
                    self.path, schema.REGISTRY_COLUMNS, schema.REGISTRY_PROPERTIES)):
                create_table(self.spark, self.path, schema.ddl(schema.REGISTRY_COLUMNS),
                             properties=schema.tblproperties(schema.REGISTRY_PROPERTIES))
            self._known_to_exist = True

    def exists(self) -> bool:
        if not self._known_to_exist:
            if self.engine.reads(self.path):
                self._known_to_exist = rs.table_ready(self.path, (), ())
            else:
                self._known_to_exist = table_exists(self.spark, self.path)
        return self._known_to_exist

    def version(self) -> int:
        """The registry's latest version, -1 when there is no registry yet (delta-rs reads
        a local one's log: no JVM)."""
        if not self.exists():
            return -1
        if self.engine.reads(self.path):
            return rs.version(self.path)
        return latest_version(self.spark, self.path)

    def _read(self, keep: Callable[[dict], bool]) -> List[RegistryRow]:
        """The rows ``keep`` accepts, by key. The registry is small: it is read whole and
        filtered here (sorting too: a Spark sort would add two jobs to every read)."""
        if not self.exists():
            return []
        rows = sorted((r for r in self._rows() if keep(r)), key=lambda r: r["key"])
        return [RegistryRow(r["key"], r["kind"], r["name"], r["parent"], r["location"],
                            json.loads(r["properties"]), from_spark(r["created_at"]),
                            from_spark(r["updated_at"])) for r in rows]

    def _rows(self) -> List[dict]:
        """Every row of the table's latest version. A local registry is read with delta-rs
        (``deltalake``: milliseconds, no Spark job); elsewhere, or without it, with Spark."""
        fast = rs.rows(self.path) if self.engine.reads(self.path) else None
        if fast is not None:
            return fast
        if is_connect(self.spark):  # no DeltaLog: the latest commit's time tells tables apart
            version, stamp = history.latest_commit(self.spark, self.path)
            table_id = str(stamp)
        else:
            snapshot = latest_snapshot(self.spark, self.path)[1]
            table_id, version = str(snapshot.metadata().id()), int(snapshot.version())
        read = _READ.get(self.path)
        if read is not None and read[:2] == (table_id, version):  # the same table, unchanged
            return read[2]
        rows = [r.asDict() for r in self.spark.read.format("delta")
                .option("versionAsOf", version).load(self.path).collect()]
        _READ[self.path] = (table_id, version, rows)
        return rows

    def lifetime(self) -> Tuple[Optional[datetime], Optional[datetime]]:
        """(created, last modified) of the registry table, aware UTC: when the namespace got
        its first entity and when an entity last changed; (None, None) before the first. Read
        from the table's metadata (``DESCRIBE DETAIL``), which log cleanup does not remove."""
        if not self.exists():
            return None, None
        row = self.spark.sql(f"DESCRIBE DETAIL delta.`{self.path}`").selectExpr(
            "unix_micros(createdAt) AS created", "unix_micros(lastModified) AS modified").first()
        return tuple(None if us is None else datetime.fromtimestamp(us / 1e6, tz=timezone.utc)
                     for us in (row["created"], row["modified"]))

    def get(self, key: str) -> Optional[RegistryRow]:
        rows = self._read(lambda r: r["key"] == key)
        return rows[0] if rows else None

    def all(self) -> List[RegistryRow]:
        """Every entity of the namespace (queues, topics, subscriptions, rules), by key."""
        return self._read(lambda r: True)

    def family(self, keys: List[str], below: str) -> List[RegistryRow]:
        """The rows of ``keys`` and every row below ``below`` (its children), in ONE read: a
        subscription with its topic, rules and retired rules."""
        wanted, prefix = set(keys), _child_prefix(below)
        return self._read(lambda r: r["key"] in wanted or r["key"].startswith(prefix))

    def list(self, kind: str, parent: Optional[str] = None) -> List[RegistryRow]:
        return self._read(lambda r: r["kind"] == kind
                          and (parent is None or r["parent"] == parent))

    def insert(self, rows: List[RegistryRow], *, parent_kind: Optional[str] = None) -> None:
        """Insert ``rows`` (an entity and its children, e.g. a subscription and ``$Default``).

        Raises GuardTripped('EXISTS') if any key exists, ('NO_PARENT') if the first row's parent
        is missing; then nothing is written.
        """
        self.ensure()
        row = rows[0]
        source_rows = [dict(_encoded(r), probe=False) for r in rows]
        if row.parent is not None:  # the parent must exist, as a parent_kind
            source_rows.append({"key": row.parent, "kind": parent_kind, "probe": True})
        spec = MergeSpec("t.key = s.key", (
            Clause(True, "guard", "s.probe AND t.kind <> s.kind", code="NO_PARENT"),
            Clause(True, "guard", "NOT s.probe", code="EXISTS"),
            Clause(False, "guard", "s.probe", code="NO_PARENT"),
            Clause(False, "insert", None, _ALL)), key="key")
        retry(lambda: self._merge(spec, source_rows, (("probe", "BOOLEAN"),)),
              what=f"create {row.kind} {row.name}")

    def update(self, key: str, kind: str, properties: dict, updated_at: datetime) -> None:
        """Replace the properties of ``key``; GuardTripped('NOT_FOUND') if it is gone."""
        self.ensure()
        spec = MergeSpec("t.key = s.key AND t.kind = s.kind", (
            Clause(True, "update", None, _REPLACE),
            Clause(False, "guard", code="NOT_FOUND")), key="key")
        source = {"key": key, "kind": kind, "properties": json.dumps(properties, sort_keys=True),
                  "updated_at": updated_at}
        retry(lambda: self._merge(spec, [source]), what=f"update {kind} {key}")

    def retire(self, key: str, kind: str,
               change: Callable[[RegistryRow], Optional[Tuple[Optional[dict], RegistryRow]]],
               now: datetime) -> None:
        """Replace or delete the row ``key`` and keep its old version, in ONE commit.

        ``change(row)`` gets the row as read and returns (new properties, or None to delete
        it; the history row to insert), or None when nothing changes (nothing is written).
        Raises GuardTripped('NOT_FOUND') if the row is gone. A row changed between the read
        and the commit trips STALE, and the read is redone.
        """
        self.ensure()
        spec = MergeSpec("t.key = s.key", (
            Clause(True, "guard", "s.op <> 'insert' AND t.updated_at <> s.expected",
                   code="STALE"),
            Clause(True, "delete", "s.op = 'retire'"),
            Clause(True, "update", "s.op = 'replace'", _REPLACE),
            Clause(True, "guard", code="EXISTS"),
            Clause(False, "insert", "s.op = 'insert'", _ALL),
            Clause(False, "guard", code="STALE")), key="key")
        extra = (("op", "STRING"), ("expected", "TIMESTAMP"))

        def step():
            row = self.get(key)
            if row is None or row.kind != kind:
                raise GuardTripped("NOT_FOUND")
            changed = change(row)
            if changed is None:
                return
            replacement, history = changed
            rows = [{"key": key, "kind": kind, "updated_at": now, "expected": row.updated_at,
                     "properties": (None if replacement is None
                                    else json.dumps(replacement, sort_keys=True)),
                     "op": "retire" if replacement is None else "replace"},
                    dict(_encoded(history), op="insert")]
            self._merge(spec, rows, extra)

        retry(step, what=f"retire {kind} {key}")

    def _merge(self, spec: MergeSpec, rows: List[dict], extra=()) -> None:
        """One MERGE of ``rows`` (registry columns and ``extra`` ones) into the registry, by
        the namespace's engine (:func:`.apply.merge_literal`)."""
        merge_literal(self.spark, self.engine, self.path, spec, rows,
                      schema.REGISTRY_COLUMNS + tuple(extra))

    def delete(self, key: str, kind: str) -> bool:
        """Delete ``key`` and every entity below it in one commit; False if it did not exist."""
        if not self.exists():
            return False
        condition = f"(key = {sql_literal(key)} AND kind = {sql_literal(kind)})"
        if kind in ("topic", "subscription"):  # children's keys are "<parent key>:..."
            condition += f" OR key LIKE {sql_literal(_like_prefix(key))}"

        def step():
            if self.engine.settles(self.path):
                return run_guarded(lambda: rs.delete(self.path, condition))
            rows = run_guarded(lambda: self.spark.sql(
                f"DELETE FROM delta.`{self.path}` WHERE {condition}").collect())
            return rows[0].num_affected_rows if rows else 0

        return retry(step, what=f"delete {kind} {key}") > 0


#: Every registry column from the source row (an insert), and a replacement's two.
_ALL = tuple((name, f"s.{name}") for name, _ in schema.REGISTRY_COLUMNS)
_REPLACE = (("properties", "s.properties"), ("updated_at", "s.updated_at"))


def _encoded(row: RegistryRow) -> dict:
    """A registry row as source columns (properties as sorted JSON text)."""
    return {"key": row.key, "kind": row.kind, "name": row.name, "parent": row.parent,
            "location": row.location, "properties": json.dumps(row.properties, sort_keys=True),
            "created_at": row.created_at, "updated_at": row.updated_at}


def _like_prefix(key: str) -> str:
    """A LIKE pattern matching the keys below ``key`` (``<key>:...``)."""
    return key.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + ":%"


def _child_prefix(key: str) -> str:
    """The start of every key below ``key`` (``<key>:...``)."""
    return key + ":"
