"""delta-rs (``deltalake``) on local tables: answers that need no Spark job, and the inbox
append of ``send_messages`` (the first piece of the delta-rs engine, issue 16).

Spark answers the reads too, at the cost of a snapshot rebuild and a job or two each; on a
local namespace delta-rs reads the same log in milliseconds. Every read returns None when it
cannot answer (a remote table, ``deltalake`` not installed on Python < 3.10, or any error),
and the caller then asks Spark: the answers only decide whether Spark work is needed.

:func:`append` commits a send's inbox rows in about 10 ms where a Spark append takes 0.3-1.5
s. Both engines commit a local table's log entries with the same atomic create-if-absent (a
hard link; sbdelta's Spark log store does the same, :mod:`sbdelta._java`), so Spark and
delta-rs writers in different processes do not overwrite each other's commits
(``tests/multiprocess``: the stress test's sender appends through delta-rs while Spark
receivers, sweeps and compactions commit). ``SBDELTA_ENGINE=spark`` turns every function here
off: Spark reads and writes everything.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import os
import uuid
from collections import Counter
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence

from .delta import local_path

log = logging.getLogger("sbdelta")


def spark_only() -> bool:
    """``SBDELTA_ENGINE=spark``: every read and write goes through Spark."""
    return os.environ.get("SBDELTA_ENGINE", "auto").strip().lower() == "spark"


def _local(path: str) -> Optional[str]:
    """The local path of ``path`` when delta-rs may work on it: a local table, ``deltalake``
    importable, and ``SBDELTA_ENGINE`` not ``spark``; else None."""
    local = local_path(path)
    if local is None or spark_only():
        return None
    if importlib.util.find_spec("deltalake") is None:  # Python < 3.10: not installed
        return None
    return local


def _table(path: str):
    local = _local(path)
    if local is None:
        return None
    from deltalake import DeltaTable

    return DeltaTable(local)


def rows(path: str) -> Optional[List[dict]]:
    """Every row of the table's latest version, or None."""
    try:
        table = _table(path)
        return None if table is None else table.to_pyarrow_table().to_pylist()
    except Exception as exc:  # noqa: BLE001 - Spark reads it instead
        log.debug("delta-rs read of %s failed: %s", path, exc)
        return None


class PartitionStats(NamedTuple):
    """One partition's line of a receive's statistics (:func:`partition_stats`)."""

    pid: int
    frontier: Optional[int]
    frontier_rev: Optional[int]
    claimable: int
    actions: int
    tombstones: int


def partition_stats(path: str, claimable: str, action: str, frontier_kind: str,
                    msg_kind: str, cancelled: str) -> Optional[Dict[int, PartitionStats]]:
    """Per partition of a local messages table: its frontier and the frontier row's revision,
    how many rows ``claimable`` and ``action`` (SQL both engines read, :mod:`.locks`) hold
    for, and how many cancellation tombstones it has. None when delta-rs cannot answer."""
    try:
        table = _table(path)
        if table is None:
            return None
        import pyarrow as pa
        from deltalake import QueryBuilder

        sql = (f"SELECT pid, max(CASE WHEN kind = '{frontier_kind}' THEN seq END) AS frontier, "
               f"max(CASE WHEN kind = '{frontier_kind}' THEN rev END) AS frontier_rev, "
               f"sum(CASE WHEN {claimable} THEN 1 ELSE 0 END) AS claimable, "
               f"sum(CASE WHEN {action} THEN 1 ELSE 0 END) AS actions, "
               f"sum(CASE WHEN kind = '{msg_kind}' AND state = '{cancelled}' THEN 1 ELSE 0 END)"
               " AS tombstones FROM m GROUP BY pid")
        found = pa.table(QueryBuilder().register("m", table).execute(sql).read_all())
        return {r["pid"]: PartitionStats(**r) for r in found.to_pylist()}
    except Exception as exc:  # noqa: BLE001 - Spark counts instead
        log.debug("delta-rs statistics of %s failed: %s", path, exc)
        return None


def inbox_counts(path: str, frontiers: Dict[int, int], lo: int, hi: int,
                 seq_of: Callable[[int, int, int], int]) -> Optional[Dict[int, int]]:
    """Rows per partition of ``frontiers`` that the local inbox's versions ``lo``..``hi``
    inserted past the partition's frontier (numbered by ``seq_of(pid, version, idx)``, SEND-3).
    None when delta-rs cannot answer."""
    try:
        table = _table(path)
        if table is None:
            return None
        import pyarrow as pa

        changes = pa.table(table.load_cdf(starting_version=lo, ending_version=hi,
                                          columns=["pid", "idx", "_change_type",
                                                   "_commit_version"]).read_all())
        counts: Dict[int, int] = {}
        for row in changes.to_pylist():
            pid = row["pid"]
            if (row["_change_type"] == "insert" and pid in frontiers
                    and seq_of(pid, row["_commit_version"], row["idx"]) > frontiers[pid]):
                counts[pid] = counts.get(pid, 0) + 1
        return counts
    except Exception as exc:  # noqa: BLE001 - Spark counts instead
        log.debug("delta-rs change feed of %s failed: %s", path, exc)
        return None


def vacuum_candidates(path: str, retain_hours: float) -> Optional[int]:
    """How many files a VACUUM keeping ``retain_hours`` could delete: files the table no longer
    references, or never did, older than that (whole hours, rounded down, so never fewer than
    Spark would find). None when delta-rs cannot say."""
    try:
        table = _table(path)
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
        table = _table(path)
        if table is None:
            return None
        adds = table.get_add_actions(flatten=True).to_pylist()
        columns = [c for c in (adds[0] if adds else {}) if c.startswith("partition.")]
        per_partition = Counter(tuple(a[c] for c in columns) for a in adds)
        return max(per_partition.values(), default=0)
    except Exception as exc:  # noqa: BLE001 - Spark decides instead
        log.debug("delta-rs file count of %s failed: %s", path, exc)
        return None


def writes_locally(path: str) -> bool:
    """Whether :func:`append` commits to ``path`` itself: a local table, ``deltalake``
    importable, and ``SBDELTA_ENGINE`` not ``spark``."""
    return _local(path) is not None


def append(path: str, names: Sequence[str], rows: Sequence[tuple]) -> int:
    """Append ``rows`` (tuples in ``names`` order) to the existing local table ``path`` in one
    commit; returns its version. Only for tables :func:`writes_locally` accepts.

    Raises:
        deltalake.exceptions.TableNotFoundError: no table there (it is never created here).
        deltalake.exceptions.CommitFailedError: lost to a concurrent commit (retry).
    """
    import pyarrow as pa
    from deltalake import (CommitProperties, DeltaTable, PostCommitHookProperties,
                           write_deltalake)

    local = _local(path)
    table = DeltaTable(local)
    before = table.version()
    data = pa.Table.from_pylist([dict(zip(names, row)) for row in rows],
                                schema=pa.schema(table.schema().to_arrow()))
    token = f"sbdelta:{uuid.uuid4().hex}"
    # Checkpoints at the table's interval, as Spark writers do; never a log cleanup (the inbox
    # keeps every commit a frontier has not passed: compaction trims it, inbox.trim_log).
    write_deltalake(table, data, mode="append",
                    commit_properties=CommitProperties(custom_metadata={"userMetadata": token}),
                    post_commithook_properties=PostCommitHookProperties(
                        create_checkpoint=True, cleanup_expired_logs=False))
    return _version_of(local, token, before)


def _version_of(local: str, token: str, before: int) -> int:
    """The version after ``before`` whose commitInfo carries ``token`` (read from the log's
    JSON files: the commit just made, whoever committed in between)."""
    version = before + 1
    while True:
        entry = os.path.join(local, "_delta_log", f"{version:020d}.json")
        try:
            with open(entry) as handle:
                lines = handle.read().splitlines()
        except FileNotFoundError:
            raise RuntimeError(f"delta-rs committed to {local} but no commit after version "
                               f"{before} carries its token {token}") from None
        for line in lines:
            if '"commitInfo"' in line:
                info = json.loads(line).get("commitInfo") or {}
                if info.get("userMetadata") == token:
                    return version
        version += 1
