"""The inbox's change feed read by delta-rs (no Spark): the rows a receive registers and
the counts that tell it how many versions to read (:func:`.inbox.scan_inbox`)."""

from __future__ import annotations

import logging
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from . import rs

log = logging.getLogger("sbdelta")

__all__ = ["inbox_version_counts", "inbox_rows", "log_version_counts"]


def _in_partitions(pids) -> str:
    """The change-feed predicate of partitions ``pids``: the inbox is partitioned by ``pid``,
    so delta-rs reads only those partitions' files (a version writes one per partition)."""
    return f"pid IN ({', '.join(str(int(p)) for p in sorted(pids))})"


def _viewless(table):
    """``table`` with its view columns (string_view, binary_view: what delta-rs's change feed
    may give) as plain ones, which Arrow's filters take."""
    import pyarrow as pa

    fields = []
    for field in table.schema:
        kind = field.type
        if pa.types.is_string_view(kind):
            kind = pa.large_string()
        elif pa.types.is_binary_view(kind):
            kind = pa.large_binary()
        fields.append(field.with_type(kind))
    schema = pa.schema(fields)
    return table if schema.equals(table.schema) else table.cast(schema)


def inbox_version_counts(path: str, frontiers: Dict[int, int], lo: int, hi: int,
                         seq_of: Callable[[int, int, int], int],
                         session_ids: Optional[Sequence[str]] = None
                         ) -> Optional[Dict[Tuple[int, int], int]]:
    """Rows per (partition, commit version) that the local inbox's versions ``lo``..``hi``
    inserted past each partition's frontier (SEND-3 numbering, ``seq_of(pid, version, idx)``),
    only those of ``session_ids`` when given, or None when delta-rs cannot answer. A receive
    needing fewer rows than the versions read hold reads only the versions it needs
    (:func:`.inbox.scan_inbox`). Counted in Arrow, not per row in Python."""
    if session_ids is None and frontiers:
        counted = log_version_counts(path, frontiers, lo, hi, seq_of)
        if counted is not None:
            return counted
    try:
        table = rs.table_at(path)
        if table is None or not frontiers:
            return None
        import pyarrow as pa
        import pyarrow.compute as pc

        extra = ["session_id"] if session_ids is not None else []
        changes = pa.table(table.load_cdf(starting_version=lo, ending_version=hi,
                                          columns=["pid", "idx", "_change_type",
                                                   "_commit_version", *extra],
                                          predicate=_in_partitions(frontiers)).read_all())
        pids = sorted(frontiers)
        inserted = pc.and_(  # (the change type may come as a string view: compared as text)
            pc.equal(pc.cast(changes["_change_type"], pa.string()), "insert"),
            pc.is_in(changes["pid"], value_set=pa.array(pids, changes["pid"].type)))
        if session_ids is not None:
            inserted = pc.and_(inserted, pc.fill_null(pc.is_in(
                pc.cast(changes["session_id"], pa.string()),
                value_set=pa.array(sorted(session_ids), pa.string())), False))
            changes = changes.drop_columns(["session_id"])
        changes = changes.drop_columns(["_change_type"]).filter(inserted)
        if changes.num_rows == 0:
            return {}
        past = changes.filter(_past_frontiers(changes, frontiers, seq_of))
        grouped = past.group_by(["pid", "_commit_version"]).aggregate([("idx", "count")])
        return {(int(p), int(v)): int(n) for p, v, n in zip(
            grouped["pid"].to_pylist(), grouped["_commit_version"].to_pylist(),
            grouped["idx_count"].to_pylist())}
    except Exception as exc:  # noqa: BLE001 - Spark counts instead
        log.debug("delta-rs change feed of %s failed: %s", path, exc)
        return None


def log_version_counts(path: str, frontiers: Dict[int, int], lo: int, hi: int,
                       seq_of: Callable[[int, int, int], int]
                       ) -> Optional[Dict[Tuple[int, int], int]]:
    """:func:`inbox_version_counts` from the local inbox's commit files alone (no data file
    read): each send commit adds files of one partition each whose statistics hold their row
    count and lowest and highest ``idx``. A file wholly past its partition's frontier counts
    whole; one the frontier cuts (the version a partial receive stopped in) counts the rows
    past it when its ``idx`` values are dense, as every sender writes them (0, 1, ... per
    partition and commit). None, for the change feed to answer, whenever the log cannot
    say for sure: a commit file missing or another engine's layout, a file without
    statistics, a deletion vector, a commit that removes or changes data."""
    import json
    import os

    from .literals import local_path

    local = local_path(path)
    if local is None:
        return None
    counts: Dict[Tuple[int, int], int] = {}
    for version in range(lo, hi + 1):
        try:
            with open(os.path.join(local, "_delta_log", f"{version:020d}.json"),
                      encoding="utf-8") as commit:
                lines = commit.read().splitlines()
        except OSError:
            return None
        for line in lines:
            action = json.loads(line) if line.strip() else {}
            if "cdc" in action or (action.get("remove") or {}).get("dataChange", False):
                return None
            add = action.get("add")
            if not add or not add.get("dataChange", True):
                continue  # compaction's rewrites change no data (the change feed skips them)
            try:
                pid = int(add["partitionValues"]["pid"])
                stats = json.loads(add["stats"])
                rows = int(stats["numRecords"])
                low, high = int(stats["minValues"]["idx"]), int(stats["maxValues"]["idx"])
            except (KeyError, TypeError, ValueError):
                return None
            if add.get("deletionVector") or pid not in frontiers or rows == 0:
                continue
            frontier = frontiers[pid]
            if seq_of(pid, version, low) > frontier:
                past = rows
            elif seq_of(pid, version, high) <= frontier:
                past = 0
            elif high - low + 1 == rows:  # dense: the rows past are the idx values past
                past = seq_of(pid, version, high) - frontier
            else:
                return None
            if past:
                counts[(pid, version)] = counts.get((pid, version), 0) + past
    return counts


def _past_frontiers(changes, frontiers: Dict[int, int], seq_of: Callable[[int, int, int], int]):
    """The mask of the inserted rows of ``changes`` (in ``frontiers``' partitions) whose
    sequence number is past their partition's frontier, computed in Arrow."""
    import pyarrow as pa
    import pyarrow.compute as pc

    pids = sorted(frontiers)
    pid = pc.cast(changes["pid"], pa.int64())
    # seq_of(pid, version, idx) - seq_of(pid, 0, 0) orders a partition's rows as their
    # sequence numbers do (SEND-3: disjoint bit fields), for any pid.
    base = {p: seq_of(p, 0, 0) for p in pids}
    per_version, per_idx = seq_of(0, 1, 0) - seq_of(0, 0, 0), seq_of(0, 0, 1) - seq_of(0, 0, 0)
    rank = pc.add(pc.multiply(pc.cast(changes["_commit_version"], pa.int64()), per_version),
                  pc.multiply(pc.cast(changes["idx"], pa.int64()), per_idx))
    limit = pc.take(pa.array([frontiers[p] - base[p] for p in pids], pa.int64()),
                    pc.index_in(pid, value_set=pa.array(pids, pa.int64())))
    return pc.greater(rank, limit)


def inbox_rows(path: str, frontiers: Dict[int, int], lo: int, hi: int,
               seq_of: Callable[[int, int, int], int],
               columns: Optional[Sequence[str]] = None) -> List[dict]:
    """The rows the local inbox's versions ``lo``..``hi`` inserted in the partitions of
    ``frontiers`` past each one's frontier, as dicts of the inbox's columns (only
    ``columns`` when given) with ``seq`` (``seq_of(pid, version, idx)``, SEND-3) and ``pos``
    (a queue's position: its ``seq``). Errors propagate, as for :func:`version`."""
    import pyarrow as pa

    if columns is not None:
        columns = sorted({*columns, "pid", "idx", "_change_type", "_commit_version"})
    import pyarrow.compute as pc

    if not frontiers:
        return []
    changes = pa.table(rs.table_at(path).load_cdf(
        starting_version=lo, ending_version=hi, columns=columns,
        predicate=_in_partitions(frontiers)).read_all())
    if changes.num_rows == 0:
        return []
    # Only the rows past the frontiers become Python objects (a version can hold thousands).
    wanted = pc.fill_null(pc.and_(
        pc.and_(pc.equal(pc.cast(changes["_change_type"], pa.string()), "insert"),
                pc.is_in(changes["pid"], value_set=pa.array(sorted(frontiers),
                                                            changes["pid"].type))),
        _past_frontiers(changes, frontiers, seq_of)), False)
    if not pc.all(wanted).as_py():  # (filtering copies: only when it leaves rows out)
        changes = _viewless(changes).filter(wanted)
    found = []
    for row in changes.to_pylist():
        row["seq"] = row["pos"] = seq_of(row["pid"], row["_commit_version"], row["idx"])
        for name in ("_change_type", "_commit_version", "_commit_timestamp"):
            row.pop(name, None)
        found.append(row)
    return found
