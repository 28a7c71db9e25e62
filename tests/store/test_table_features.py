"""Every table sbdelta creates stays writable by a second Delta engine, delta-rs (issue 12).

delta-rs (``deltalake``) refuses to write tables with the row tracking or domain metadata
features; sbdelta's first layout gave the inbox both. These tests open each table of an entity
and the registry with delta-rs, commit to it, and have Spark and the broker read on afterwards.
"""

import zlib
from datetime import timedelta
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest
from chispa import assert_df_equality

from sbdelta import (ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue,
                     StorageLayoutError)
from sbdelta._entity import EntityResolver
from sbdelta._namespace import Namespace
from sbdelta._store import sequence_number
from sbdelta._store.delta import latest_version
from sbdelta.maintenance import MIN_RETAIN_HOURS, compact
from sbdelta.management import ServiceBusAdministrationClient


def _local(uri):
    return str(Path(uri[len("file:"):] if uri.startswith("file:") else uri))


def _frozen(spark, path):
    df = spark.read.format("delta").load(path)
    return spark.createDataFrame(df.collect(), df.schema)


@pytest.mark.parametrize("partitioned", [False, True], ids=["queue", "partitioned"])
def test_send_3_every_table_is_writable_by_delta_rs_and_read_on_by_spark(spark, tmp_path, clock,
                                                                         partitioned):
    ns = str(tmp_path / "ns")
    admin = ServiceBusAdministrationClient(ns, spark=spark, clock=clock)
    admin.create_queue("orders", enable_partitioning=partitioned,
                       requires_duplicate_detection=True, lock_duration=timedelta(minutes=5))
    with ServiceBusClient(ns, spark=spark, clock=clock) as client:
        sender = client.get_queue_sender("orders")
        receiver = client.get_queue_receiver("orders", max_wait_time=0)
        sender.send_messages([ServiceBusMessage(text, message_id=text, partition_key="k")
                              for text in ("done", "dead", "back")])
        done, dead, back = sorted(receiver.receive_messages(3), key=lambda m: m.sequence_number)
        receiver.complete_message(done)
        receiver.dead_letter_message(dead, reason="bad")
        receiver.abandon_message(back)
        compact(ns, clock=clock, retain_hours=MIN_RETAIN_HOURS, spark=spark)  # checkpoints too

        store = EntityResolver(Namespace(ns, spark=spark)).queue("orders").store
        tables = {"inbox": store.inbox_path, "messages": store.messages_path,
                  "deadletter": store.dead_letter_store().messages_path,
                  "registry": Namespace(ns, spark=spark).registry.path}
        before = {name: _frozen(spark, path) for name, path in tables.items()}
        pid = zlib.crc32(b"k") % store.partitions  # the partition of key "k" (PART-2)
        for name, path in tables.items():
            table = deltalake.DeltaTable(_local(path))
            features = set(table.protocol().writer_features or ())
            assert not features & {"rowTracking", "domainMetadata", "deletionVectors"}, name
            version = table.version()
            if name == "inbox":
                # A message appended by delta-rs: a row of the inbox's own schema.
                row = {"pid": pid, "idx": 0, "kind": "MSG", "message_id": "rs",
                       "body": b"from rs", "partition_key": "k", "enqueued_time": clock.now(),
                       "size": 7}
                arrow = pa.Table.from_pylist([row], schema=pa.schema(table.schema().to_arrow()))
                deltalake.write_deltalake(_local(path), arrow, mode="append")
            else:
                # An UPDATE that rewrites every row with its own values: delta-rs writes the
                # table's data files anew, and Spark must read them exactly as before.
                column = "updated_at" if name == "registry" else "rev"
                table.update(updates={column: column})
            assert deltalake.DeltaTable(_local(path)).version() == version + 1, name
            assert latest_version(spark, path) == version + 1, name
            if name != "inbox":
                assert_df_equality(before[name], spark.read.format("delta").load(path),
                                   ignore_row_order=True)

        # The broker reads on: the delta-rs message has its sequence number from its commit
        # (SEND-3), the abandoned and the dead-lettered messages are where they were.
        inbox_version = latest_version(spark, store.inbox_path)
        got = sorted(receiver.receive_messages(10), key=lambda m: m.sequence_number)
        assert [str(m) for m in got] == ["back", "from rs"]
        assert got[1].sequence_number == sequence_number(pid, inbox_version, 0)
        assert got[1].sequence_number > back.sequence_number
        receiver.complete_messages(got)
        dlq = client.get_queue_receiver("orders", sub_queue=ServiceBusSubQueue.DEAD_LETTER,
                                        max_wait_time=0)
        (dead_again,) = dlq.receive_messages(10)
        assert (str(dead_again), dead_again.dead_letter_reason) == ("dead", "bad")
        dlq.complete_message(dead_again)
        assert admin.get_queue("orders").requires_duplicate_detection


def test_a_queue_of_the_previous_layout_is_refused_with_how_to_migrate(spark, tmp_path, clock):
    ns = str(tmp_path / "ns")
    admin = ServiceBusAdministrationClient(ns, spark=spark, clock=clock)
    admin.create_queue("old")
    with ServiceBusClient(ns, spark=spark, clock=clock) as client:
        client.get_queue_sender("old").send_messages(ServiceBusMessage("x"))
    store = EntityResolver(Namespace(ns, spark=spark)).queue("old").store
    # The first layout's inbox had row tracking (which brings domain metadata).
    spark.sql(f"ALTER TABLE delta.`{store.inbox_path}` "
              "SET TBLPROPERTIES ('delta.enableRowTracking' = 'true')")
    version = latest_version(spark, store.inbox_path)
    with ServiceBusClient(ns, spark=spark, clock=clock) as client:
        for call in (lambda: client.get_queue_sender("old").send_messages(ServiceBusMessage("y")),
                     lambda: client.get_queue_receiver("old", max_wait_time=0).receive_messages(1),
                     lambda: compact(ns, clock=clock, spark=spark)):
            with pytest.raises(StorageLayoutError) as raised:
                call()
            text = str(raised.value)
            assert "queue 'old'" in text and "rowTracking" in text and "domainMetadata" in text
            assert "delete the queue and create it again" in text
    assert latest_version(spark, store.inbox_path) == version  # nothing was written


def test_the_registry_reads_the_same_through_delta_rs_and_through_spark(spark, tmp_path,
                                                                       clock, monkeypatch):
    """A local registry is read with delta-rs (no Spark job); a remote one, or one on a
    Python without ``deltalake``, with Spark: both give the same entities."""
    import sbdelta._store.registry as registry_module

    admin = ServiceBusAdministrationClient(str(tmp_path / "ns"), spark=spark, clock=clock)
    admin.create_queue("q", max_delivery_count=3)
    admin.create_topic("t")
    admin.create_subscription("t", "s")
    registry = Namespace(str(tmp_path / "ns"), spark=spark).registry
    fast = (registry.all(), registry.list("subscription", "t"), registry.get("q"))
    monkeypatch.setattr(registry_module.rs, "rows", lambda path: None)
    assert (registry.all(), registry.list("subscription", "t"), registry.get("q")) == fast
    assert {row.kind for row in fast[0]} >= {"queue", "topic", "subscription"}
    assert [row.name for row in fast[1]] == ["s"]
    assert fast[2].properties["max_delivery_count"] == 3
    assert fast[2].created_at.tzinfo is not None
