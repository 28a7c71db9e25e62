"""Staged appends (:mod:`sbdelta._store.staged`): several inboxes filled by one Spark job and
a delta-rs commit each, once per (app id, version), as the syphon delivers a range (PAIR-7)."""

from __future__ import annotations

import os

import deltalake
import pytest
from chispa import assert_df_equality

from sbdelta._store import resolve_engine, rs_feed
from sbdelta._store.layout import INBOX_NAMES, MSG, sequence_number
from sbdelta._store.messages import MessageStore
from sbdelta._store.staged import append_staged, staging_folder

APP = "sbdelta-syphon:test"


def _stores(spark, tmp_path, engine="auto"):
    stores = []
    for name, partitions in (("one", 1), ("four", 4)):
        store = MessageStore(spark, str(tmp_path / name), partitions,
                             engine=resolve_engine(engine))
        store.ensure_tables()
        stores.append(store)
    return stores


def _rows(spark, n: int, partitions: int, first: int):
    """Inbox rows without ``idx`` (with ``seq``, their order), spread over ``partitions``."""
    from pyspark.sql import functions as F

    names = [c for c in INBOX_NAMES if c not in ("idx", "pid", "kind", "message_id", "body")]
    return (spark.range(first, first + n)
            .select((F.col("id") % partitions).cast("int").alias("pid"),
                    (F.col("id") * 10).alias("seq"), F.lit(MSG).alias("kind"),
                    F.concat(F.lit("m"), F.col("id").cast("string")).alias("message_id"),
                    F.lit(b"x").alias("body"),
                    *[F.lit(None).alias(c) for c in names]))


def _parts(*frames):
    """The rows of several destinations as one DataFrame, each row with its index ``_t``."""
    from pyspark.sql import functions as F

    out = None
    for i, frame in enumerate(frames):
        frame = frame.withColumn("_t", F.lit(i))
        out = frame if out is None else out.unionByName(frame)
    return out


def _numbered(spark, store):
    """(pid, idx, message_id) of the store's inbox, as Spark reads it."""
    return (spark.read.format("delta").load(store.inbox_path)
            .select("pid", "idx", "message_id").orderBy("pid", "idx"))


def _expected(spark, n: int, partitions: int, first: int):
    rows = []
    for p in range(partitions):
        ids = [i for i in range(first, first + n) if i % partitions == p]
        rows += [(p, idx, f"m{i}") for idx, i in enumerate(ids)]
    return spark.createDataFrame(rows, "pid INT, idx INT, message_id STRING")


def test_pair_7_a_staged_append_numbers_each_destination_and_takes_a_version_once(
        spark, tmp_path):
    one, four = _stores(spark, tmp_path)
    folder = staging_folder(spark, str(tmp_path / "staging"), [one, four])
    assert folder == str(tmp_path / "staging")
    parts = _parts(_rows(spark, 5, 1, 0), _rows(spark, 10, 4, 100))
    assert append_staged(spark, folder, [one, four], parts, APP, 7) == [True, True]
    assert_df_equality(_numbered(spark, one), _expected(spark, 5, 1, 0),
                       ignore_nullable=True)
    assert_df_equality(_numbered(spark, four), _expected(spark, 10, 4, 100),
                       ignore_nullable=True)
    for store in (one, four):
        table = deltalake.DeltaTable(store.inbox_path)
        assert table.transaction_version(APP) == 7
        # The files' statistics say what the log alone counts new rows by (no data read).
        version = table.version()
        counts = rs_feed.log_version_counts(store.inbox_path, {
            p: -1 for p in range(store.partitions)}, version, version, sequence_number)
        assert counts == ({(0, version): 5} if store is one
                          else {(p, version): (3 if p < 2 else 2) for p in range(4)})
    assert os.listdir(folder) == []  # nothing staged is left
    # The same version again (a recovery, another syphon): nothing is added.
    assert append_staged(spark, folder, [one, four], parts, APP, 7) == [False, False]
    assert append_staged(spark, folder, [one, four], parts, APP, 6) == [False, False]
    assert _numbered(spark, four).count() == 10
    assert os.listdir(folder) == []


def test_pair_7_a_staged_append_losing_to_a_spark_append_of_its_version_adds_nothing(
        spark, tmp_path, monkeypatch):
    """The race of two movers finishing one range: between this commit's check (version 8
    not recorded) and its commit, Spark appends the range with ``txnAppId``/``txnVersion``
    8. delta-rs refuses the staged commit, which looks again, finds 8 and adds nothing: the
    inbox holds the range once."""
    one, _ = _stores(spark, tmp_path)
    folder = staging_folder(spark, str(tmp_path / "staging"), [one])
    real = deltalake.DeltaTable.create_write_transaction
    raced = []

    def racing(self, *args, **kwargs):
        if not raced:
            raced.append(True)
            (_rows(spark, 3, 1, 50).selectExpr("*", "CAST(seq / 10 - 50 AS INT) AS idx")
             .select(*INBOX_NAMES).writeTo(f"delta.`{one.inbox_path}`")
             .option("txnAppId", APP).option("txnVersion", 8).append())
        return real(self, *args, **kwargs)

    monkeypatch.setattr(deltalake.DeltaTable, "create_write_transaction", racing)
    assert append_staged(spark, folder, [one], _parts(_rows(spark, 3, 1, 50)), APP, 8) == [False]
    assert raced
    assert _numbered(spark, one).count() == 3
    assert deltalake.DeltaTable(one.inbox_path).transaction_version(APP) == 8


@pytest.mark.parametrize("engine, staging", [("spark", "yes"), ("auto", None)])
def test_pair_7_staged_appends_only_where_delta_rs_appends_and_a_folder_is_given(
        spark, tmp_path, engine, staging):
    stores = _stores(spark, tmp_path, engine)
    given = None if staging is None else str(tmp_path / "staging")
    assert staging_folder(spark, given, stores) is None
