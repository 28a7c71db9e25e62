"""A lone ``update`` row of the apply MERGE runs as ONE conditional UPDATE (issue 16: delta-rs
plans a MERGE as a join over every column; the UPDATE cost a single receive a third of its
time). It must do exactly what the MERGE does with that row: the same table afterwards, and
where the MERGE's guard clauses would trip (revision moved on, row gone), the same guard code
and nothing written. Real delta-rs tables of the messages schema; no Spark."""

from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest
from deltalake import DeltaTable

from sbdelta._store import rs, rs_tables
from sbdelta._store.apply import apply_merge, apply_rows, merge_rows
from sbdelta._store.engines import Engine
from sbdelta._store.guards import GuardTripped
from sbdelta._store.layout import MESSAGES_COLUMNS, MESSAGES_PROPERTIES, MSG

NOW = datetime(2030, 1, 1, tzinfo=timezone.utc)
NAMES = [name for name, _ in MESSAGES_COLUMNS]


def _store(path):
    """A store as the apply functions see it: its messages table, settled by delta-rs."""
    assert rs_tables.create(path, MESSAGES_COLUMNS, MESSAGES_PROPERTIES, partitioned_by="pid")
    rs.append(path, NAMES, [
        tuple({"pid": 1, "k": key, "kind": MSG, "rev": 3, "seq": seq, "state": "ACTIVE",
               "delivery_count": 0, "visible_at": NOW, "message_id": key,
               "body": b"payload", "application_properties": '{"a": 1}',
               "enqueued_time": NOW, "size": 7}.get(name) for name in NAMES)
        for key, seq in (("m1", 11), ("m2", 12))])
    return SimpleNamespace(messages_path=path, engine=Engine(), spark=None, dead_letter=False)


def _lock(key, rev=3, **extra):
    """The source row a receive's plan writes to lock message ``key`` read at ``rev``."""
    return {"pid": 1, "k": key, "kind": MSG, "rev": rev, "_rev": rev, "_op": "update",
            "seq": 11 if key == "m1" else 12, "state": "ACTIVE", "lock_token": "tok-1",
            "locked_until": NOW + timedelta(seconds=30), "delivery_count": 1,
            "visible_at": NOW, "application_properties": '{"a": 1}', **extra}


def _rows(path):
    table = DeltaTable(path).to_pyarrow_table().to_pylist()
    return sorted(table, key=lambda row: row["k"])


def test_a_lone_update_row_is_one_update_commit_with_the_merge_s_result(tmp_path):
    by_update, by_merge = _store(str(tmp_path / "u")), _store(str(tmp_path / "m"))
    apply_rows(by_update, [_lock("m1")], [1], NOW)
    merge_rows(by_merge, by_merge.messages_path, apply_merge([1], NOW, ops=["update"]),
               [_lock("m1")])
    assert _rows(by_update.messages_path) == _rows(by_merge.messages_path)
    locked = _rows(by_update.messages_path)[0]
    assert (locked["lock_token"], locked["delivery_count"], locked["rev"]) == ("tok-1", 1, 4)
    assert locked["body"] == b"payload" and locked["message_id"] == "m1"  # content kept
    assert DeltaTable(by_update.messages_path).history(1)[0]["operation"] == "UPDATE"


@pytest.mark.parametrize("row, code", [
    (_lock("m1", rev=2), "STALE"),                       # read before another receive moved it
    (_lock("gone"), "STALE"),                            # completed since it was read
    (_lock("m1", rev=2, _guard="LOCK_LOST"), "LOCK_LOST"),  # the row's own guard code
])
def test_where_the_merge_s_guards_trip_the_update_trips_the_same_and_writes_nothing(
        tmp_path, row, code):
    store = _store(str(tmp_path / "t"))
    before = DeltaTable(store.messages_path).version()
    with pytest.raises(GuardTripped) as tripped:
        apply_rows(store, [row], [1], NOW)
    assert tripped.value.code == code
    merged = _store(str(tmp_path / "m"))
    with pytest.raises(GuardTripped) as by_merge:
        merge_rows(merged, merged.messages_path, apply_merge([1], NOW, ops=["update"]), [row])
    assert by_merge.value.code == code
    assert DeltaTable(store.messages_path).version() == before


def test_a_row_outside_the_partitions_named_trips_a_guard(tmp_path):
    store = _store(str(tmp_path / "t"))
    with pytest.raises(GuardTripped):
        apply_rows(store, [_lock("m1")], [0], NOW)  # the MERGE's ON names pid 0 only
    assert _rows(store.messages_path)[0]["lock_token"] is None
