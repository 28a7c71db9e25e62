"""The apply MERGE's source rows committed without a MERGE (issue 16: delta-rs plans a MERGE as
a join over every column of source and target, which cost single receives half their time):

- a lone ``update`` row as ONE conditional UPDATE;
- rows that only ``update`` and ``insert`` (a receive registering new messages and moving its
  frontier), with the rows a ReceiveAndDelete receive or a completion of many messages
  removes, as ONE write replacing the rows of their keys.

Each must do exactly what the MERGE does: the same table afterwards; where the MERGE's guard
clauses would trip (revision moved on, row gone, key taken), the same guard code and nothing
written; and a commit landing between the snapshot checked and the write makes the write a
conflict (retried from a fresh plan), where a commit touching none of its rows does not. Real
delta-rs tables of the messages schema; no Spark."""

from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError

from sbdelta._store import rs, rs_merge, rs_tables
from sbdelta._store.apply import SOURCE_COLUMNS, apply_merge, apply_rows, merge_rows
from sbdelta._store.engines import Engine
from sbdelta._store.guards import GuardTripped
from sbdelta._store.layout import FRONTIER, MESSAGES_COLUMNS, MESSAGES_PROPERTIES, MSG

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


def _registration(frontier_rev=0, new_key="m3", **extra):
    """What a receive of one new inbox message commits: the message locked, the partition's
    frontier moved on (at the revision read)."""
    return [
        {"pid": 1, "k": "f", "kind": FRONTIER, "rev": frontier_rev, "seq": 13,
         "state": "ACTIVE", "_op": "update", "_rev": frontier_rev},
        {"pid": 1, "k": new_key, "kind": MSG, "rev": 0, "seq": 13, "state": "ACTIVE",
         "lock_token": "tok-3", "locked_until": NOW + timedelta(seconds=30),
         "delivery_count": 1, "visible_at": NOW, "message_id": new_key, "body": b"new",
         "application_properties": '{"b": 2}', "enqueued_time": NOW, "size": 3,
         "_op": "insert", **extra},
    ]


def _with_frontier(path):
    """The store with its partition's frontier row (as a receive's first registration inserts
    it: an insert-only source, itself written as a replacing write)."""
    store = _store(path)
    apply_rows(store, [{"pid": 1, "k": "f", "kind": FRONTIER, "rev": 0, "seq": 5,
                        "state": "ACTIVE", "_op": "insert"}], [1], NOW)
    return store


def test_update_and_insert_rows_are_one_write_with_the_merge_s_result(tmp_path):
    by_write = _with_frontier(str(tmp_path / "w"))
    by_merge = _with_frontier(str(tmp_path / "m"))
    apply_rows(by_write, _registration(), [1], NOW)
    merge_rows(by_merge, by_merge.messages_path, apply_merge([1], NOW, ops=["update", "insert"]),
               _registration())
    assert _rows(by_write.messages_path) == _rows(by_merge.messages_path)
    by_key = {row["k"]: row for row in _rows(by_write.messages_path)}
    assert (by_key["f"]["seq"], by_key["f"]["rev"]) == (13, 1)
    assert (by_key["m3"]["lock_token"], by_key["m3"]["body"]) == ("tok-3", b"new")
    assert by_key["m1"]["body"] == b"payload" and by_key["m2"]["rev"] == 3  # others kept
    last = DeltaTable(by_write.messages_path).history(1)[0]
    assert (last["operation"], last["operationParameters"]["mode"]) == ("WRITE", "Overwrite")


def test_rows_removed_at_their_revision_join_the_write_with_the_merge_s_result(tmp_path):
    """A ReceiveAndDelete receive: the message handed out removed in the same commit."""
    rows = _registration() + [{"pid": 1, "k": "m1", "_op": "delete", "_rev": 3},
                              {"pid": 1, "k": "m2", "_op": "purge", "_rev": 3}]
    by_write = _with_frontier(str(tmp_path / "w"))
    by_merge = _with_frontier(str(tmp_path / "m"))
    apply_rows(by_write, rows, [1], NOW)
    merge_rows(by_merge, by_merge.messages_path,
               apply_merge([1], NOW, ops=["update", "insert", "delete", "purge"]), rows)
    assert _rows(by_write.messages_path) == _rows(by_merge.messages_path)
    assert [row["k"] for row in _rows(by_write.messages_path)] == ["f", "m3"]
    assert DeltaTable(by_write.messages_path).history(1)[0]["operation"] == "WRITE"


def test_a_lone_removed_row_is_one_conditional_delete(tmp_path):
    """A ReceiveAndDelete receive of one registered message."""
    store = _with_frontier(str(tmp_path / "t"))
    apply_rows(store, [{"pid": 1, "k": "m1", "_op": "delete", "_rev": 3}], [1], NOW)
    assert [row["k"] for row in _rows(store.messages_path)] == ["f", "m2"]
    assert DeltaTable(store.messages_path).history(1)[0]["operation"] == "DELETE"
    version = DeltaTable(store.messages_path).version()
    with pytest.raises(GuardTripped) as tripped:  # at a revision it no longer has
        apply_rows(store, [{"pid": 1, "k": "m2", "_op": "purge", "_rev": 2}], [1], NOW)
    assert tripped.value.code == "STALE"
    assert DeltaTable(store.messages_path).version() == version


@pytest.mark.parametrize("rows, code", [
    (_registration(frontier_rev=7), "STALE"),              # the frontier moved on since read
    (_registration(new_key="m1"), "STALE"),                # the key is registered already
    (_registration(new_key="m2", _guard="LOCK_LOST"), "LOCK_LOST"),  # the row's own code
])
def test_where_the_merge_s_guards_trip_the_write_trips_the_same_and_writes_nothing(
        tmp_path, rows, code):
    store = _with_frontier(str(tmp_path / "t"))
    before = _rows(store.messages_path)
    version = DeltaTable(store.messages_path).version()
    with pytest.raises(GuardTripped) as tripped:
        apply_rows(store, rows, [1], NOW)
    assert tripped.value.code == code
    merged = _with_frontier(str(tmp_path / "m"))
    with pytest.raises(GuardTripped) as by_merge:
        merge_rows(merged, merged.messages_path, apply_merge([1], NOW, ops=["update", "insert"]),
                   rows)
    assert by_merge.value.code == code
    assert DeltaTable(store.messages_path).version() == version
    assert _rows(store.messages_path) == before


def _register_racing(store, concurrent, rows):
    """rs_merge.replace of the registration ``rows``, with ``concurrent`` (a function of a
    DeltaTable) committed by another writer after the snapshot was checked and before the
    write."""
    keys = ", ".join(f"'{row['k']}'" for row in rows)

    def build(current):
        concurrent(DeltaTable(store.messages_path))
        return [{**current[0], "seq": 13, "rev": current[0]["rev"] + 1}] + [
            {name: row.get(name) for name in NAMES} for row in rows[1:]]

    rs_merge.replace(store.messages_path, apply_merge([1], NOW, ops=["update", "insert"]), rows,
               SOURCE_COLUMNS, f"pid IN (1) AND (pid = 1 AND k IN ({keys}))", build)


def _another_registration(table):
    """Another receive registering message m5 and moving the frontier (a replacing write)."""
    current = {row["k"]: row for row in table.to_pyarrow_table().to_pylist()}
    write_deltalake(table, pa.Table.from_pylist(
        [{**current["f"], "rev": current["f"]["rev"] + 1},
         {**current["m3"], "k": "m5", "seq": 14}],
        schema=pa.schema(table.schema().to_arrow())),
        mode="overwrite", predicate="pid = 1 AND k IN ('f', 'm5')")


@pytest.mark.parametrize("concurrent", [
    pytest.param(lambda t: t.update(predicate="pid = 1 AND k = 'f'", updates={"rev": "rev + 1"}),
                 id="the frontier moved by an UPDATE"),
    pytest.param(_another_registration, id="another receive registering"),
    pytest.param(lambda t: t.delete("pid = 1 AND k = 'm3'"),
                 id="a message in the frontier's file completed"),
])
def test_a_commit_between_its_snapshot_and_its_write_makes_the_write_a_conflict(
        tmp_path, concurrent):
    store = _with_frontier(str(tmp_path / "t"))
    apply_rows(store, _registration(), [1], NOW)  # m3 now shares the frontier's file
    with pytest.raises(CommitFailedError):
        _register_racing(store, concurrent, _registration(frontier_rev=1, new_key="m4"))
    rows = _rows(store.messages_path)
    assert [row["k"] for row in rows if row["kind"] == FRONTIER] == ["f"]  # one frontier
    assert "m4" not in {row["k"] for row in rows}  # nothing of the lost write


def test_an_append_of_other_rows_meanwhile_is_no_conflict(tmp_path):
    store = _with_frontier(str(tmp_path / "t"))
    other = {name: None for name in NAMES}
    other.update({"pid": 1, "k": "z9", "kind": MSG, "rev": 0, "seq": 99, "state": "ACTIVE"})

    def append_other(table):
        write_deltalake(table, pa.Table.from_pylist(
            [other], schema=pa.schema(table.schema().to_arrow())), mode="append")

    _register_racing(store, append_other, _registration())
    assert {row["k"] for row in _rows(store.messages_path)} == {"f", "m1", "m2", "m3", "z9"}


def _locked_store(path):
    """The store with m1 and m2 locked by token ``tok-1`` until 30 s after NOW."""
    store = _with_frontier(path)
    apply_rows(store, [_lock("m1"), _lock("m2")], [1], NOW)
    return store


def _completion(*keys, token="tok-1"):
    """What completing ``keys`` in one call commits (SETTLE-1): rows removed if the lock is
    held, LOCK_LOST otherwise."""
    return [{"pid": 1, "k": key, "_op": "settle_delete", "_token": token, "_guard": "LOCK_LOST"}
            for key in keys]


def test_settle_1_a_completion_of_many_messages_is_one_write_with_the_merge_s_result(tmp_path):
    by_write = _locked_store(str(tmp_path / "w"))
    by_merge = _locked_store(str(tmp_path / "m"))
    apply_rows(by_write, _completion("m1", "m2"), [1], NOW)
    merge_rows(by_merge, by_merge.messages_path, apply_merge([1], NOW, ops=["settle_delete"]),
               _completion("m1", "m2"))
    assert _rows(by_write.messages_path) == _rows(by_merge.messages_path)
    assert [row["k"] for row in _rows(by_write.messages_path)] == ["f"]
    assert DeltaTable(by_write.messages_path).history(1)[0]["operation"] == "DELETE"


@pytest.mark.parametrize("concurrent", [
    pytest.param(lambda t: t.update(predicate="pid = 1 AND k = 'm2'",
                                    updates={"lock_token": "'tok-2'"}),
                 id="a lock of another holder after the old one expired"),
    pytest.param(lambda t: t.delete("pid = 1 AND k = 'm2'"), id="a message settled meanwhile"),
])
def test_settle_5_a_commit_between_the_guard_query_and_a_completion_makes_it_a_conflict(
        tmp_path, monkeypatch, concurrent):
    """The removal is committed against the snapshot the guard query found every lock held
    on: a commit to those rows after it makes delta-rs refuse the DELETE (retried from a
    fresh check, which then finds the lock lost)."""
    store = _locked_store(str(tmp_path / "t"))
    checked = rs_merge._tripped_guard

    def check_then_commit(table, *args):
        code = checked(table, *args)
        concurrent(DeltaTable(store.messages_path))
        return code

    monkeypatch.setattr(rs_merge, "_tripped_guard", check_then_commit)
    with pytest.raises(CommitFailedError):
        apply_rows(store, _completion("m1", "m2"), [1], NOW)
    assert "m1" in {row["k"] for row in _rows(store.messages_path)}  # nothing of the lost one


@pytest.mark.parametrize("rows, now", [
    (_completion("m1", "m2", token="tok-other"), NOW),       # not the lock's token
    (_completion("m1", "gone"), NOW),                        # one message settled already
    (_completion("m1", "m2"), NOW + timedelta(seconds=30)),  # the locks expired
])
def test_settle_5_a_completion_with_a_lock_not_held_trips_lock_lost_and_writes_nothing(
        tmp_path, rows, now):
    store = _locked_store(str(tmp_path / "t"))
    before, version = _rows(store.messages_path), DeltaTable(store.messages_path).version()
    with pytest.raises(GuardTripped) as tripped:
        apply_rows(store, rows, [1], now)
    assert tripped.value.code == "LOCK_LOST"
    assert DeltaTable(store.messages_path).version() == version
    assert _rows(store.messages_path) == before


def test_a_dead_letter_table_s_completion_stays_a_merge_keeping_its_tombstones(tmp_path):
    store = _locked_store(str(tmp_path / "t"))
    store.dead_letter = True
    apply_rows(store, _completion("m1", "m2"), [1], NOW)
    assert {row["k"]: row["state"] for row in _rows(store.messages_path)
            if row["kind"] == MSG} == {"m1": "COMPLETED", "m2": "COMPLETED"}
    assert DeltaTable(store.messages_path).history(1)[0]["operation"] == "MERGE"
