"""Creating sbdelta's tables through delta-rs (``deltalake``), without a JVM: what Spark's
``CREATE TABLE IF NOT EXISTS`` makes of them (:func:`.delta.create_table`), on a local
namespace; what maintenance asks of a local table's files before it runs a Spark job
(:func:`vacuum_candidates`, :func:`most_files_in_a_partition`), and its checkpoints
(:func:`checkpoint`).

The schema is the same list of (name, SQL type) pairs Spark's DDL is written from, every
column nullable as Spark makes them; the partition column and the table properties (the
change feed on the inbox, deletion vectors and row tracking off: :mod:`.schema`) are the
same, so a table made here is the table Spark would have made, readable and writable by both
engines (``tests/store/test_table_features.py``). A concurrent creator (another process, of
either engine) winning version 0 is fine: both commit it with an atomic create-if-absent, and
the loser finds the winner's table.
"""

from __future__ import annotations

import logging
import math
import os
from collections import Counter
from typing import Dict, Optional, Sequence, Tuple

from . import rs
from .schema import arrow_type

log = logging.getLogger("sbdelta")


def arrow_schema(columns: Sequence[Tuple[str, str]]):
    """The Arrow schema of ``columns`` ((name, SQL type) pairs; :func:`.schema.arrow_type`)."""
    import pyarrow as pa

    return pa.schema([pa.field(name, arrow_type(kind)) for name, kind in columns])


def configuration(properties: Dict[str, str]) -> Dict[str, str]:
    """``properties`` as delta-rs takes them: ``delta.enableRowTracking=false`` left out
    (delta-rs 1.6 cannot parse that property, and never turns row tracking on: the table has
    none either way, as the property asks)."""
    return {k: v for k, v in properties.items()
            if not (k == "delta.enableRowTracking" and v.lower() == "false")}


def create(path: str, columns: Sequence[Tuple[str, str]], properties: Dict[str, str], *,
           partitioned_by: Optional[str] = None) -> bool:
    """Make the local table ``path`` with ``columns``, ``properties`` and ``partitioned_by``
    unless a table is there. True when a table with every column is there afterwards (made
    here or by a concurrent creator); False when delta-rs could not make it (a remote path,
    ``deltalake`` missing, a folder that is not a Delta table, any error): the caller then
    asks Spark, which raises what it must."""
    local = rs.local_table(path)
    if local is None:
        return False
    names = [name for name, _ in columns]
    try:
        from deltalake import DeltaTable

        DeltaTable.create(local, arrow_schema(columns), mode="ignore",
                          partition_by=[partitioned_by] if partitioned_by else None,
                          configuration=configuration(properties))
    except Exception as exc:  # noqa: BLE001 - a concurrent creator, or Spark decides
        log.debug("delta-rs create of %s failed: %s", path, exc)
    return rs.table_ready(path, names, ())


def add_missing_columns(path: str, columns: Sequence[Tuple[str, str]],
                        foreign: Sequence[str]) -> bool:
    """Add to the local table ``path`` the ``columns`` it lacks (a table made before a column
    existed: nullable, at the end, so its rows read them as NULL), in one delta-rs commit
    without a JVM. True when the table has every column afterwards (added here or by a
    concurrent opener); False when delta-rs cannot tell or do it (a remote path, a table with
    a ``foreign`` writer feature, any error): the caller then asks Spark."""
    local = rs.local_table(path)
    if local is None:
        return False
    names = [name for name, _ in columns]
    try:
        from deltalake import DeltaTable
        from deltalake.schema import Field

        table = DeltaTable(local)
        if any(f in (table.protocol().writer_features or []) for f in foreign):
            return False
        have = {field.name.lower() for field in table.schema().fields}
        missing = [(n, t) for n, t in columns if n.lower() not in have]
        if missing:
            table.alter.add_columns([Field.from_arrow(field)
                                     for field in arrow_schema(missing)])
    except Exception as exc:  # noqa: BLE001 - a concurrent opener, or Spark decides
        log.debug("delta-rs add_columns on %s failed: %s", path, exc)
    return rs.table_ready(path, names, foreign)


def vacuum_candidates(path: str, retain_hours: float) -> Optional[int]:
    """How many files a VACUUM keeping ``retain_hours`` could delete: files the table no longer
    references, or never did, older than that (whole hours, rounded down, so never fewer than
    Spark would find). None when delta-rs cannot say."""
    try:
        table = rs.table_at(path)
        if table is None:
            return None
        return len(table.vacuum(retention_hours=int(math.floor(retain_hours)), dry_run=True,
                                enforce_retention_duration=False, full=True))
    except Exception as exc:  # noqa: BLE001 - Spark decides instead
        log.debug("delta-rs vacuum dry run of %s failed: %s", path, exc)
        return None


def most_files_in_a_partition(path: str) -> Optional[int]:
    """The largest number of data files any partition of the table has (0 when empty): with
    at most one everywhere, OPTIMIZE has nothing to bin-pack. None when delta-rs cannot say."""
    try:
        table = rs.table_at(path)
        if table is None:
            return None
        import pyarrow as pa

        adds = pa.table(table.get_add_actions(flatten=True)).to_pylist()  # arro3 -> Arrow
        columns = [c for c in (adds[0] if adds else {}) if c.startswith("partition.")]
        per_partition = Counter(tuple(a[c] for c in columns) for a in adds)
        return max(per_partition.values(), default=0)
    except Exception as exc:  # noqa: BLE001 - Spark decides instead
        log.debug("delta-rs file count of %s failed: %s", path, exc)
        return None


def checkpoint(path: str, *, dry_run: bool = False) -> Optional[Tuple[bool, int]]:
    """Checkpoint the local table ``path`` at its latest version through delta-rs unless a
    checkpoint of that version exists (what :func:`.delta.checkpoint` does through Spark);
    returns (written, latest checkpoint version), or None when delta-rs cannot open the table
    (Spark decides). A checkpoint that fails is logged, not raised: it is an optimisation
    (the table's next interval writes one), as Spark's post-commit checkpoint is."""
    try:
        table = rs.table_at(path)
        if table is None:
            return None
        version = table.version()
        before = last_checkpoint_version(path)
    except Exception as exc:  # noqa: BLE001 - Spark decides instead
        log.debug("delta-rs checkpoint check of %s failed: %s", path, exc)
        return None
    if version < 0 or before >= version:
        return False, before
    if dry_run:
        return True, before
    try:
        table.create_checkpoint()
    except Exception as exc:  # noqa: BLE001 - see above
        log.warning("checkpoint of %s at version %d was not written (%s); the table's next "
                    "interval writes one", path, version, exc)
    after = last_checkpoint_version(path)
    return after >= version, after


def last_checkpoint_version(path: str) -> int:
    """The version in the local table's ``_delta_log/_last_checkpoint`` (-1 if none)."""
    import json

    try:
        with open(os.path.join(rs.local_table(path), "_delta_log", "_last_checkpoint")) as f:
            return int(json.load(f)["version"])
    except FileNotFoundError:
        return -1
