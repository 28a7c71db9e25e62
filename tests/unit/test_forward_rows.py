"""The Python form of forwarding's row choices (:mod:`sbdelta._store.forward_rows`) against
Spark's (:func:`sbdelta._store.forward.destination_rows`): PART-2/PART-8, a forwarded
message lands in the same destination partition whichever engine moves it, with the same
hop count, enqueued time, schedule and TTL cut (TTL-3)."""

from datetime import datetime, timedelta, timezone

import pytest

from sbdelta._store import forward, forward_rows
from sbdelta._store.layout import INBOX_COLUMNS, INBOX_NAMES, keyless_partition, spark_xxhash64
from sbdelta._store.schema import ddl

NOW = datetime(2026, 1, 1, 12, tzinfo=timezone.utc)


class _Store:
    def __init__(self, partitions):
        self.partitions = partitions


def test_part_2_keyless_partition_is_sparks_xxhash64(spark):
    from pyspark.sql import functions as F

    seqs = [0, 1, 7, 2 ** 40 + 3, (5 << 58) | (123 << 20) | 9, 2 ** 63 - 1]
    want = spark.createDataFrame([(s,) for s in seqs], "seq BIGINT").select(
        F.xxhash64("seq").alias("h"), F.pmod(F.xxhash64("seq"), F.lit(16)).alias("p")).collect()
    assert [spark_xxhash64(s) for s in seqs] == [r.h for r in want]
    assert [keyless_partition(s, 16) for s in seqs] == [r.p for r in want]
    assert keyless_partition(12345, 1) == 0


def _row(seq, **values):
    row = dict.fromkeys(INBOX_NAMES)
    row.update(pid=0, idx=0, kind="M", body=bytearray(b"b"), size=1,
               enqueued_time=NOW - timedelta(minutes=5), seq=seq, **values)
    return row


def test_part_8_ttl_3_fwd_3_destination_rows_are_sparks(spark):
    rows = [
        _row(1, message_id="a", session_id="s-1", partition_key="s-1"),
        _row(2, message_id="b", partition_key="orders"),
        _row(3, message_id="c"),  # no key: hashed by seq (or by message id, with dedup)
        _row(4, message_id="d", hops=2, time_to_live_ms=3_600_000,
             expires_at=NOW + timedelta(minutes=55)),
        _row(5, message_id="e", time_to_live_ms=60_000, expires_at=NOW + timedelta(seconds=30),
             scheduled_enqueue_time=NOW + timedelta(hours=2)),
        _row(6, message_id="f", scheduled_enqueue_time=NOW - timedelta(seconds=1)),
    ]
    frame = spark.createDataFrame(
        [tuple(r[n] for n in INBOX_NAMES) + (r["seq"],) for r in rows],
        ddl(INBOX_COLUMNS) + ", seq BIGINT")
    for partitions, cap, by_id in ((1, None, False), (16, None, False),
                                   (4, timedelta(minutes=10), True)):
        dest = forward.Destination(_Store(partitions), cap, by_id)
        want = sorted((tuple(r) for r in forward.destination_rows(frame, dest, NOW).collect()),
                      key=_place)
        got = sorted(forward_rows.destination_rows(rows, dest, NOW), key=_place)
        assert got == [tuple(_utc(v) for v in r) for r in want], (partitions, got, want)


def _place(row):
    return row[0], row[1]  # pid, idx


def _utc(value):
    """A value Spark collected as Python's engine holds it (timestamps: aware, in UTC)."""
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc)
    return value


def test_fwd_2_append_once_appends_a_version_once_and_a_racing_append_loses(tmp_path):
    """The idempotent append forwarding relies on (delta-rs's side of Spark's ``txnAppId``/
    ``txnVersion``): a version recorded for the app id (or a later one) is not appended again;
    and of two writers that both read "not recorded yet", the second to commit fails
    (``CommitFailedError``, retried by ``delta.retry``) instead of appending a duplicate."""
    import pyarrow as pa
    from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
    from deltalake.exceptions import CommitFailedError

    from sbdelta._store import rs

    path = str(tmp_path / "inbox")
    write_deltalake(path, pa.table({"n": pa.array([0], pa.int64())}))
    assert rs.txn_version(path, "fwd:a") == -1
    assert rs.append_once(path, ["n"], [(1,)], "fwd:a", 7) is True
    assert rs.append_once(path, ["n"], [(1,)], "fwd:a", 7) is False  # recorded: skipped
    assert rs.append_once(path, ["n"], [(1,)], "fwd:a", 5) is False  # older: skipped
    assert rs.append_once(path, ["n"], [(2,)], "fwd:b", 7) is True   # another app id
    assert rs.txn_version(path, "fwd:a") == 7
    # The race: both read the table before either recorded version 8.
    first, second = DeltaTable(path), DeltaTable(path)
    assert first.transaction_version("fwd:a") == second.transaction_version("fwd:a") == 7
    write_deltalake(first, pa.table({"n": pa.array([3], pa.int64())}), mode="append",
                    commit_properties=CommitProperties(app_transactions=[Transaction("fwd:a", 8)]))
    with pytest.raises(CommitFailedError):
        write_deltalake(second, pa.table({"n": pa.array([4], pa.int64())}), mode="append",
                        commit_properties=CommitProperties(
                            app_transactions=[Transaction("fwd:a", 8)]))
    assert rs.append_once(path, ["n"], [(4,)], "fwd:a", 8) is False  # the retry finds it done
    assert sorted(DeltaTable(path).to_pyarrow_table().column("n").to_pylist()) == [0, 1, 2, 3]
