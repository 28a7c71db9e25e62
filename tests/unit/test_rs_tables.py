"""Tables made by delta-rs (``sbdelta/_store/rs_tables.py``): no Spark here; that Spark reads
and writes them as its own is tests/store/test_table_features.py's."""

import os

import deltalake
import pyarrow as pa
import pytest

from sbdelta._store import rs_tables
from sbdelta._store.layout import INBOX_COLUMNS, INBOX_PROPERTIES


def test_row_tracking_off_is_left_out_and_everything_else_kept():
    assert rs_tables.configuration(INBOX_PROPERTIES) == {
        k: v for k, v in INBOX_PROPERTIES.items() if k != "delta.enableRowTracking"}
    # Only the "off" form is dropped: anything else reaches delta-rs, which refuses it.
    on = {"delta.enableRowTracking": "true"}
    assert rs_tables.configuration(on) == on


def test_arrow_schema_holds_every_column_nullable_with_utc_timestamps():
    schema = rs_tables.arrow_schema(INBOX_COLUMNS)
    assert schema.names == [name for name, _ in INBOX_COLUMNS]
    assert all(field.nullable for field in schema)
    assert schema.field("enqueued_time").type == pa.timestamp("us", tz="UTC")
    assert schema.field("body").type == pa.binary() and schema.field("pid").type == pa.int32()


def test_a_missing_table_is_made_once_and_a_remote_one_is_left_to_spark(tmp_path):
    path = str(tmp_path / "inbox")
    assert rs_tables.create(path, INBOX_COLUMNS, INBOX_PROPERTIES, partitioned_by="pid")
    table = deltalake.DeltaTable(path)
    assert (table.version(), table.metadata().partition_columns) == (0, ["pid"])
    assert table.metadata().configuration["delta.enableChangeDataFeed"] == "true"
    # Made again (a second creator): the table is there, nothing is committed.
    assert rs_tables.create(path, INBOX_COLUMNS, INBOX_PROPERTIES, partitioned_by="pid")
    assert deltalake.DeltaTable(path).version() == 0
    assert not rs_tables.create("abfss://c@a.dfs.core.windows.net/ns/inbox", INBOX_COLUMNS,
                                INBOX_PROPERTIES, partitioned_by="pid")


def test_a_local_table_is_compacted_by_delta_rs_without_spark_and_keeps_every_row(tmp_path):
    """Compaction's OPTIMIZE of a local table (``delta.optimize``) under an engine that lets
    delta-rs commit: delta-rs bin-packs each partition's files in one commit that changes no
    data (no Spark session is given: none may be needed); a table with one file per
    partition is left alone."""
    from sbdelta._store import resolve_engine
    from sbdelta._store.delta import optimize
    from sbdelta._store.layout import MESSAGES_COLUMNS, MESSAGES_PROPERTIES

    path = str(tmp_path / "messages")
    assert rs_tables.create(path, MESSAGES_COLUMNS, MESSAGES_PROPERTIES, partitioned_by="pid")
    schema = rs_tables.arrow_schema(MESSAGES_COLUMNS)
    for i in range(6):  # three files in each of two partitions
        row = {name: None for name in schema.names}
        row.update(pid=i % 2, k=f"m{i}", kind="MSG", rev=0, seq=i, body=b"x" * i)
        deltalake.write_deltalake(path, pa.Table.from_pylist([row], schema=schema),
                                  mode="append")
    before = sorted(deltalake.DeltaTable(path).to_pyarrow_table().to_pylist(),
                    key=lambda r: r["k"])
    engine = resolve_engine("delta-rs")
    assert optimize(None, path, engine) == (6, 2)
    table = deltalake.DeltaTable(path)
    assert sorted(table.to_pyarrow_table().to_pylist(), key=lambda r: r["k"]) == before
    assert rs_tables.most_files_in_a_partition(path) == 1
    last = table.history(1)[0]
    assert last["operation"] == "OPTIMIZE" and "delta-rs" in last["clientVersion"]
    assert optimize(None, path, engine) == (0, 0)  # nothing left to bin-pack
    assert deltalake.DeltaTable(path).version() == table.version()


def test_a_local_table_is_checkpointed_by_delta_rs_once_per_version(tmp_path):
    """Compaction's checkpoint of a local table (``delta.checkpoint``) under an engine that
    lets delta-rs commit: delta-rs writes it at the latest version (no Spark session given),
    a version already checkpointed is left alone, and a dry run says what it would do and
    writes nothing."""
    from sbdelta._store import resolve_engine
    from sbdelta._store.delta import checkpoint
    from sbdelta._store.layout import MESSAGES_COLUMNS, MESSAGES_PROPERTIES

    path = str(tmp_path / "messages")
    assert rs_tables.create(path, MESSAGES_COLUMNS, MESSAGES_PROPERTIES, partitioned_by="pid")
    schema = rs_tables.arrow_schema(MESSAGES_COLUMNS)

    def append(i):
        row = {name: None for name in schema.names}
        row.update(pid=0, k=f"m{i}", kind="MSG", rev=0, seq=i)
        deltalake.write_deltalake(path, pa.Table.from_pylist([row], schema=schema),
                                  mode="append")

    append(0), append(1)
    engine = resolve_engine("delta-rs")
    assert rs_tables.last_checkpoint_version(path) == -1
    assert checkpoint(None, path, dry_run=True, engine=engine) == (True, -1)
    assert rs_tables.last_checkpoint_version(path) == -1
    assert checkpoint(None, path, engine=engine) == (True, 2)
    assert (tmp_path / "messages" / "_delta_log"
            / "00000000000000000002.checkpoint.parquet").exists()
    assert checkpoint(None, path, engine=engine) == (False, 2)  # that version has one
    append(2)
    assert checkpoint(None, path, engine=engine) == (True, 3)
    # The table reads the same from its checkpoint.
    assert sorted(r["k"] for r in deltalake.DeltaTable(path).to_pyarrow_table().to_pylist()) == [
        "m0", "m1", "m2"]


@pytest.mark.parametrize("made_by", ["today", "an earlier version"])
def test_messages_tables_are_checkpointed_every_ten_delta_rs_commits(tmp_path, made_by):
    """Every single receive and settlement commits to a messages table, and the next reader
    replays its log from the last checkpoint: delta-rs checkpoints it every 10 commits, as
    Spark does by default (delta-rs's own default is 100), also a table made by an earlier
    version of sbdelta, which sets no interval."""
    from sbdelta._store import rs
    from sbdelta._store.layout import MESSAGES_COLUMNS, MESSAGES_PROPERTIES

    path = str(tmp_path / "messages")
    properties = dict(MESSAGES_PROPERTIES)
    if made_by != "today":
        del properties["delta.checkpointInterval"]
    assert rs_tables.create(path, MESSAGES_COLUMNS, properties, partitioned_by="pid")
    assert ("delta.checkpointInterval" in deltalake.DeltaTable(path).metadata().configuration
            ) == (made_by == "today")
    names = ["pid", "k", "kind", "rev"]
    for i in range(1, 21):  # versions 1..20: appends and deletes, as receives and settlements
        if i % 2:
            rs.append(path, names, [(0, f"m{i}", "MSG", 0)])
        else:
            assert rs.delete(path, f"pid = 0 AND k = 'm{i - 1}'") == 1
    log = sorted(os.listdir(os.path.join(path, "_delta_log")))
    assert [name for name in log if ".checkpoint." in name] == [
        f"{v:020d}.checkpoint.parquet" for v in (10, 20)]
    assert deltalake.DeltaTable(path).to_pyarrow_table().num_rows == 0
