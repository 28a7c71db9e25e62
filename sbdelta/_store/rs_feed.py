"""The inbox's change feed read by delta-rs (no Spark): the rows a receive registers and
the counts that tell it how many versions to read (:func:`.inbox.scan_inbox`)."""

from __future__ import annotations

import logging
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from . import rs

log = logging.getLogger("sbdelta")

__all__ = ["inbox_version_counts", "inbox_rows"]


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
    try:
        table = rs.table_at(path)
        if table is None or not frontiers:
            return None
        import pyarrow as pa
        import pyarrow.compute as pc

        extra = ["session_id"] if session_ids is not None else []
        changes = pa.table(table.load_cdf(starting_version=lo, ending_version=hi,
                                          columns=["pid", "idx", "_change_type",
                                                   "_commit_version", *extra]).read_all())
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

    changes = pa.table(rs.table_at(path).load_cdf(
        starting_version=lo, ending_version=hi, columns=columns).read_all())
    if not frontiers or changes.num_rows == 0:
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
