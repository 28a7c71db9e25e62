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


@pytest.mark.parametrize("engine", ["spark", "delta-rs"])
def test_messages_and_dead_letter_files_carry_statistics_for_the_key_columns_only(
        spark, tmp_path, clock, engine):
    """Both engines write statistics for ``k``, ``kind``, ``rev`` and ``seq`` alone into the
    messages and dead-letter tables' files (``delta.dataSkippingNumIndexedCols``): lookups by
    key and sequence number still skip files, and a settlement's rewrite of a small file does
    not compute statistics for the other 28 columns (docs/benchmarks.md)."""
    ns = str(tmp_path / "ns")
    admin = ServiceBusAdministrationClient(ns, spark=spark, clock=clock, engine=engine)
    admin.create_queue("q", enable_partitioning=True)
    with ServiceBusClient(ns, spark=spark, clock=clock, engine=engine) as client:
        client.get_queue_sender("q").send_messages(
            [ServiceBusMessage(str(n), application_properties={"n": n}) for n in range(6)])
        receiver = client.get_queue_receiver("q", max_wait_time=0)
        got = receiver.receive_messages(6)
        assert len(got) == 6
        receiver.dead_letter_message(got[0], reason="bad")
        receiver.complete_message(got[1])
    store = EntityResolver(Namespace(ns, spark=spark)).queue("q").store
    for path in (store.messages_path, store.dead_letter_store().messages_path):
        adds = pa.table(deltalake.DeltaTable(_local(path)).get_add_actions(flatten=True))
        assert adds.num_rows > 0, path
        assert {c[len("min."):] for c in adds.column_names if c.startswith("min.")} == \
            {"k", "kind", "rev", "seq"}, path
        assert set(adds.column("max.k").to_pylist()) != {None}, path


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


#: An administration client in a process of its own makes a namespace's entities, then says
#: whether this process started a JVM.
_MAKE_WITHOUT_SPARK = """
import json, sys
from pyspark import SparkContext
from sbdelta.management import ServiceBusAdministrationClient, SqlRuleFilter
admin = ServiceBusAdministrationClient(sys.argv[1])
admin.create_queue("q", enable_partitioning=True, requires_duplicate_detection=True)
admin.create_topic("t")
admin.create_subscription("t", "s")
admin.create_rule("t", "s", "odd", filter=SqlRuleFilter("n % 2 = 1"))
print(json.dumps({"jvm": SparkContext._gateway is not None}))
"""


def _tables(spark, ns):
    """(kind, table) -> path of the registry and every table of queue q, topic t and its
    subscription s."""
    from sbdelta._names import EntityRef

    resolver = EntityResolver(Namespace(ns, spark=spark))
    queue = resolver.queue("q").store
    topic = resolver.resolve(EntityRef.topic_of("t")).store
    sub = resolver.resolve(EntityRef.subscription("t", "s")).store
    return {"registry": Namespace(ns, spark=spark).registry.path,
            "queue inbox": queue.inbox_path, "queue messages": queue.messages_path,
            "queue deadletter": queue.dead_letter_store().messages_path,
            "topic inbox": sub.inbox_path, "topic messages": topic.messages_path,
            "subscription messages": sub.messages_path,
            "subscription deadletter": sub.dead_letter_store().messages_path}


def test_send_3_entities_made_by_delta_rs_without_a_jvm_are_the_tables_spark_makes(
        spark, tmp_path, clock):
    """Issue 16: on a local namespace the administration client makes the namespace folder,
    the registry and every entity table through delta-rs: a process that creates a queue, a
    topic, a subscription and a rule starts no JVM. Each table has the schema, partition
    column and properties Spark's CREATE TABLE gives the same entity (row tracking left out of
    the properties: delta-rs never turns it on), no feature delta-rs cannot write, and Spark
    sends, receives and settles on them as on its own (the change feed of the inbox too)."""
    import json

    from ..conftest import run_python

    made = str(tmp_path / "rs")
    proc = run_python("-c", _MAKE_WITHOUT_SPARK, made)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    assert json.loads(out.strip().splitlines()[-1]) == {"jvm": False}

    reference = str(tmp_path / "spark")
    admin = ServiceBusAdministrationClient(reference, spark=spark, clock=clock, engine="spark")
    admin.create_queue("q", enable_partitioning=True, requires_duplicate_detection=True)
    admin.create_topic("t")
    admin.create_subscription("t", "s")
    ours, theirs = _tables(spark, made), _tables(spark, reference)
    for name in ours:
        # Both tables' logs, read by delta-rs (what Spark's DESCRIBE DETAIL reports too).
        mine = deltalake.DeltaTable(_local(ours[name]))
        spark_made = deltalake.DeltaTable(_local(theirs[name]))
        assert json.loads(mine.schema().to_json()) == \
            json.loads(spark_made.schema().to_json()), name
        assert mine.metadata().partition_columns == spark_made.metadata().partition_columns, \
            name
        expected = {k: v for k, v in spark_made.metadata().configuration.items()
                    if k != "delta.enableRowTracking"}
        assert mine.metadata().configuration == expected, name
        features = set(mine.protocol().writer_features or ())
        assert not features & {"rowTracking", "domainMetadata", "deletionVectors"}, name

    with ServiceBusClient(made, spark=spark, clock=clock, engine="spark") as client:
        client.get_queue_sender("q").send_messages(
            [ServiceBusMessage("a", message_id="x"), ServiceBusMessage("b", message_id="x")])
        client.get_topic_sender("t").send_messages(
            [ServiceBusMessage(str(n), application_properties={"n": n}) for n in range(4)])
        receiver = client.get_queue_receiver("q", max_wait_time=0)
        got = receiver.receive_messages(10)
        assert [str(m) for m in got] == ["a"]  # the duplicate dropped (SEND-6)
        receiver.complete_messages(got)
        sub = client.get_subscription_receiver("t", "s", max_wait_time=0)
        got = sub.receive_messages(10)
        assert sorted(str(m) for m in got) == ["0", "1", "2", "3"]  # $Default and "odd"
        sub.complete_messages(got)
        assert receiver.peek_messages(10) == [] and sub.peek_messages(10) == []


_OLDER_LAYOUT = """
import glob, json, sys
from datetime import datetime, timezone
from deltalake import DeltaTable, write_deltalake
import pyarrow as pa
from pyspark import SparkContext
from sbdelta import ServiceBusClient, ServiceBusMessage
from sbdelta.amqp import AmqpAnnotatedMessage, AmqpMessageBodyType
from sbdelta.management import ServiceBusAdministrationClient
from sbdelta._store.codec import inbox_rows
from sbdelta._store.layout import INBOX_COLUMNS
from sbdelta._store.rs_tables import arrow_schema

ns = sys.argv[1]
ServiceBusAdministrationClient(ns).create_queue("q")
# Every table of the namespace as the layout before the body_type column made it.
older = []
for log in sorted(glob.glob(ns + "/**/_delta_log", recursive=True)):
    path = log[: -len("/_delta_log")]
    table = DeltaTable(path)
    if "body_type" in [f.name for f in table.schema().fields]:
        write_deltalake(path, table.to_pyarrow_table().drop_columns(["body_type"]),
                        mode="overwrite", schema_mode="overwrite",
                        partition_by=table.metadata().partition_columns or None)
        older.append(path)
inbox = [p for p in older if p.endswith("/inbox")][0]
old_columns = [c for c in INBOX_COLUMNS if c[0] != "body_type"]
[row] = inbox_rows([ServiceBusMessage("before")], now=datetime.now(timezone.utc), schedule=None,
                   ttl_cap=None, limit=262144, entity="q", partition=lambda m: 0)
write_deltalake(inbox, pa.Table.from_pylist([dict(zip([n for n, _ in old_columns], row[:-1]))],
                                            schema=arrow_schema(old_columns)), mode="append")
with ServiceBusClient(ns) as client:
    client.get_queue_sender("q").send_messages(AmqpAnnotatedMessage(value_body={"n": 1}))
    receiver = client.get_queue_receiver("q", max_wait_time=0)
    got = receiver.receive_messages(5)
    receiver.complete_messages(got)
print(json.dumps({"jvm": SparkContext._gateway is not None, "older": len(older),
                  "got": [[m.body_type.value, str(m)] for m in got],
                  "body_type everywhere": sorted({"body_type" in [f.name for f in DeltaTable(p).schema().fields] for p in older})}))
"""


def test_issue17_tables_made_before_the_body_type_column_get_it_when_opened_without_a_jvm(
        tmp_path):
    """A namespace made by the layout before issue 17's ``body_type`` column (each table of a
    queue without it, an inbox row written by that layout) is opened by a client that starts
    no JVM: delta-rs adds the column to each table the client opens, the old row reads as a
    DATA body, and a VALUE body sent after it comes back as one."""
    import json

    from ..conftest import run_python

    proc = run_python("-c", _OLDER_LAYOUT, str(tmp_path / "ns"))
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    assert json.loads(out.strip().splitlines()[-1]) == {
        "jvm": False, "older": 3, "got": [["data", "before"], ["value", "{'n': 1}"]],
        "body_type everywhere": [True]}
