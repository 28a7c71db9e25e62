"""The messaging core over Spark Connect (issue 16), in a process that has no JVM.

``python -m tests.workers.connect_scenario URL NS [SCENARIOS]`` connects to the Spark Connect
server at ``URL`` (``SparkSession.builder.remote``) and runs, on namespace ``NS`` (a
``viewfs://`` URI: storage that is not local, so sbdelta reads and writes it through Spark
alone), a queue's whole life with every send, receive and settle form; ``SCENARIOS`` (comma
separated, or ``all``) adds the session and topic scenarios of the engine tests
(``session_scenario``, ``subscription_scenario``), forwarding, the syphon and the
maintenance jobs.
DataFrame results are checked here with chispa; the rest is printed as one JSON line
for the test to compare, with ``jvm``: whether this process ever started a JVM.

A Spark Connect client must have a process of its own: creating a remote session switches
pyspark's functions to Spark Connect for the whole process (``SPARK_CONNECT_MODE_ENABLED``).
"""

import json
import sys
import time
from datetime import timedelta

from chispa import assert_df_equality

from sbdelta import (ManualClock, ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode,
                     ServiceBusSubQueue)
from sbdelta._namespace import Namespace
from sbdelta.management import ServiceBusAdministrationClient

from ..conftest import START


def queue_core(spark, ns: str) -> dict:
    """A queue's life over Spark Connect: SEND-1/3 (a list, a DataFrame, a schedule and its
    cancel), RECV-2 (receive_dataframe under PeekLock), SETTLE-1 (complete a DataFrame of
    tokens), SETTLE-2/3/4/5 (abandon, dead-letter, defer, renew), the dead-letter queue as a
    DataFrame, peek, the runtime properties, RECV-1 (ReceiveAndDelete), delete_queue."""
    from pyspark.sql import functions as F

    clock = ManualClock(START)
    out = {}
    # No session given: the active one (Spark Connect's) is used, as in a serverless notebook.
    admin = ServiceBusAdministrationClient(ns, clock=clock)
    admin.create_queue("q", max_delivery_count=5, lock_duration=timedelta(seconds=60))
    with ServiceBusClient(ns, spark=spark, clock=clock) as client:
        sender = client.get_queue_sender("q")
        sender.send_messages([ServiceBusMessage(f"m{i}", application_properties={"i": i})
                              for i in range(3)])
        sender.send_dataframe(spark.createDataFrame([(f"d{i}", f"id-d{i}") for i in range(4)],
                                                    "body STRING, message_id STRING"))
        later = sender.schedule_messages(ServiceBusMessage("later"),
                                         START + timedelta(hours=1))
        sender.cancel_scheduled_messages(later)

        receiver = client.get_queue_receiver("q", max_wait_time=0)
        got = receiver.receive_dataframe(max_message_count=5)
        expected = spark.createDataFrame(
            [("m0", 1), ("m1", 1), ("m2", 1), ("d0", 1), ("d1", 1)],
            "body STRING, delivery_count INT")
        assert_df_equality(got.select(F.col("body").cast("string").alias("body"),
                                      "delivery_count"),
                           expected, ignore_row_order=True, ignore_nullable=True)
        out["sequence_numbers"] = int(got.select("sequence_number").distinct().count())
        two = got.where("body IN (CAST('m0' AS BINARY), CAST('m1' AS BINARY))")
        # Each of the two tokens twice: Delta's MERGE refuses two source rows for one message
        # (an error that reaches this client through Spark Connect), and the settlement is
        # redone with the tokens made unique; the count is of messages.
        out["completed"] = receiver.complete_messages(two.union(two))
        rest = receiver.receive_messages(max_message_count=5)
        out["rest"] = sorted(str(m) for m in rest)  # d2, d3: the others are locked
        by_body = {str(m): m for m in rest}
        receiver.renew_message_lock(by_body["d2"])
        receiver.dead_letter_message(by_body["d2"], reason="bad", error_description="why")
        receiver.defer_message(by_body["d3"])
        deferred = receiver.receive_deferred_messages([by_body["d3"].sequence_number])
        out["deferred"] = [str(m) for m in deferred]
        receiver.abandon_message(deferred[0])

        dlq = client.get_queue_receiver("q", sub_queue=ServiceBusSubQueue.DEAD_LETTER,
                                        max_wait_time=0)
        dead = dlq.receive_dataframe(max_message_count=10)
        assert_df_equality(
            dead.select(F.col("body").cast("string").alias("body"), "dead_letter_reason",
                        "dead_letter_error_description", "message_id"),
            spark.createDataFrame([("d2", "bad", "why", "id-d2")],
                                  "body STRING, dead_letter_reason STRING, "
                                  "dead_letter_error_description STRING, message_id STRING"),
            ignore_nullable=True)
        dlq.complete_messages(dead)

        out["peek"] = sorted(str(m) for m in receiver.peek_messages(10))
        props = admin.get_queue_runtime_properties("q")
        out["counts"] = [props.active_message_count, props.dead_letter_message_count,
                         props.scheduled_message_count]
        clock.advance(timedelta(minutes=2))  # every lock of the first receive ran out
        drain = client.get_queue_receiver(
            "q", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE, max_wait_time=0)
        out["drained"] = sorted(r.body.decode() for r in
                                drain.receive_dataframe(max_message_count=10).collect())
        out["left"] = admin.get_queue_runtime_properties("q").active_message_count
    # the clock check's reference over Spark Connect: the server's clock
    out["skew_below_5s"] = abs(Namespace(ns, spark=spark).clock_skew()) < timedelta(seconds=5)
    admin.delete_queue("q")
    out["queues"] = [q.name for q in admin.list_queues()]
    return out


def forwarding(spark, ns: str) -> dict:
    """FWD-1/2 over Spark Connect: messages held before ``forward_to`` was set moved by the
    forwarding job (its idempotent appends: the last version recorded read from the log's
    files), a later send forwarded by the send itself, a second pass moving nothing."""
    from sbdelta.maintenance import forward_messages

    admin = ServiceBusAdministrationClient(ns, spark=spark)
    admin.create_queue("dst")
    admin.create_queue("src")
    with ServiceBusClient(ns, spark=spark) as client:
        client.get_queue_sender("src").send_messages([ServiceBusMessage(f"old{i}")
                                                      for i in range(3)])
        source = admin.get_queue("src")
        source.forward_to = "dst"
        admin.update_queue(source)
        first = forward_messages(ns, spark=spark)
        client.get_queue_sender("src").send_messages(ServiceBusMessage("new"))
        second = forward_messages(ns, spark=spark)
        got = client.get_queue_receiver("dst", max_wait_time=0).receive_messages(10)
    return {"job": [first.totals()["forwarded"], second.totals()["forwarded"]],
            "got": sorted(str(m) for m in got)}


def syphon(spark, ns: str) -> dict:
    """PAIR-7 over Spark Connect: backlog messages moved home, one to a missing queue
    dead-lettered with its reason, a second drain moving nothing."""
    from sbdelta._namespace import normalize_root
    from sbdelta.paired import (BACKLOG_QUEUE_PROPERTIES, backlog_queue_name,
                                primary_identity, to_backlog)
    from sbdelta.paired.syphon import Syphon

    primary, secondary = f"{ns}/primary", f"{ns}/secondary"
    backlog = backlog_queue_name(primary_identity(normalize_root(primary)), 0)
    ServiceBusAdministrationClient(secondary, spark=spark).create_queue(
        backlog, **BACKLOG_QUEUE_PROPERTIES)
    for name in ("orders", "refunds"):  # two targets: their appends run side by side
        ServiceBusAdministrationClient(primary, spark=spark).create_queue(name)
    with ServiceBusClient(secondary, spark=spark) as away:
        away.get_queue_sender(backlog).send_messages(
            [to_backlog(ServiceBusMessage(f"o{i}"), "orders") for i in range(3)]
            + [to_backlog(ServiceBusMessage("r0"), "refunds")]
            + [to_backlog(ServiceBusMessage("x"), "missing")])
    spark.addTag("sbdelta-syphon-test")  # carried into the side-by-side appends' threads
    try:
        first = Syphon(primary, secondary, spark=spark).drain()
    finally:
        spark.removeTag("sbdelta-syphon-test")
    second = Syphon(primary, secondary, spark=spark).drain()
    with ServiceBusClient(primary, spark=spark) as client:
        got = [m for name in ("orders", "refunds") for m in
               client.get_queue_receiver(name, max_wait_time=0).receive_messages(10)]
    return {"moved": [first.moved, second.moved], "dead": first.dead_lettered,
            "got": sorted(str(m) for m in got)}


def jobs(spark, ns: str) -> dict:
    """The maintenance jobs over Spark Connect: the expiry sweep dead-letters (TTL-6),
    compaction runs its steps a Spark Connect session allows, the idle job deletes an idle
    queue (IDLE-1) from the activity recorded (IDLE-2)."""
    from sbdelta.maintenance import compact, delete_idle_entities, expire_messages

    clock = ManualClock(START)
    admin = ServiceBusAdministrationClient(ns, spark=spark, clock=clock)
    admin.create_queue("q", default_message_time_to_live=timedelta(minutes=1),
                       dead_lettering_on_message_expiration=True,
                       auto_delete_on_idle=timedelta(minutes=5))
    with ServiceBusClient(ns, spark=spark, clock=clock) as client:
        client.get_queue_sender("q").send_messages([ServiceBusMessage(f"m{i}")
                                                    for i in range(3)])
    clock.advance(timedelta(minutes=3))
    expired = expire_messages(ns, spark=spark, clock=clock).totals()
    compacted = compact(ns, spark=spark, clock=clock)
    clock.advance(timedelta(minutes=10))
    idle = delete_idle_entities(ns, spark=spark, clock=clock)
    return {"expired": expired["expired_dead_lettered"], "connect": compacted.connect,
            "compacted": len(compacted.entities), "idle": idle.deleted}


#: The scenarios ``main`` runs: the queue's by default (the suite's), the rest on request.
SCENARIOS = ("queue", "session", "topic", "forward", "syphon", "jobs")


def main() -> None:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from . import session_scenario, subscription_scenario

    url, ns = sys.argv[1], sys.argv[2]
    wanted = sys.argv[3].split(",") if len(sys.argv) > 3 else ["queue"]
    spark = SparkSession.builder.remote(url).getOrCreate()
    report, seconds = {}, {}
    for name in SCENARIOS:
        if name not in wanted and "all" not in wanted:
            continue
        started = time.monotonic()
        where = f"{ns}/{name}"
        if name == "queue":
            report[name] = queue_core(spark, where)
        elif name == "session":
            session_scenario.prepare(ServiceBusAdministrationClient(where, spark=spark))
            report[name] = session_scenario.run(where, "spark", spark)
        elif name == "topic":
            admin = ServiceBusAdministrationClient(where, spark=spark)
            subscription_scenario.prepare(admin)
            report[name] = subscription_scenario.run(where, "spark", spark)
            topic = admin.get_topic_runtime_properties("t")  # its log read without a JVM
            report["topic_counts"] = [topic.scheduled_message_count, topic.size_in_bytes > 0]
        else:
            report[name] = {"forward": forwarding, "syphon": syphon, "jobs": jobs}[name](
                spark, where)
        seconds[name] = round(time.monotonic() - started, 1)
    report["seconds"] = seconds
    report["jvm"] = SparkContext._gateway is not None
    print(json.dumps(report, default=str))


if __name__ == "__main__":
    main()
