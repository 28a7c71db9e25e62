"""A Spark peek's cost: ``python -m bench.spark_peek`` (the figures of docs/benchmarks.md,
"Where a small Spark receive's time goes").

One local session, a queue on ``engine="spark"`` with 15 unregistered messages (three sends of
5), ``peek_messages(10, sequence_number=0)`` six times: the median time of the last five and
the Spark jobs of each (the status tracker).

Then a partitioned queue (16 partitions) whose messages sit in partition 12 only:
``peek_messages(10, sequence_number=0)`` reads partition 0, then partitions 1-15 at once; beside
it, the same answer read as the receiver read it before (one partition after the other, two
Spark queries each, until partition 12 gave messages), and the ratio.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from datetime import datetime, timezone

from .jobs import count_jobs


def main() -> None:
    from sbdelta import ManualClock, ServiceBusClient, ServiceBusMessage
    from sbdelta._spark import get_spark
    from sbdelta.management import ServiceBusAdministrationClient

    spark = get_spark()
    clock = ManualClock(datetime(2030, 1, 1, tzinfo=timezone.utc))
    ns = tempfile.mkdtemp() + "/ns"
    ServiceBusAdministrationClient(ns, spark=spark, clock=clock, engine="spark").create_queue(
        "q", dead_lettering_on_message_expiration=True)
    with ServiceBusClient(ns, spark=spark, clock=clock, engine="spark") as client:
        sender = client.get_queue_sender("q")
        for batch in range(3):
            sender.send_messages([ServiceBusMessage(f"m{batch}{i}") for i in range(5)])
        receiver = client.get_queue_receiver("q", max_wait_time=0)
        seconds, jobs, got = [], [], []
        for _ in range(6):
            started = time.perf_counter()
            jobs.append(count_jobs(spark, lambda: got.append(
                receiver.peek_messages(10, sequence_number=0))))
            seconds.append(time.perf_counter() - started)
    print(f"spark peek of {len(got[-1])}: median {statistics.median(seconds[1:]):.2f} s, "
          f"Spark jobs per peek {jobs}")
    _partitioned(spark, clock)


def _partitioned(spark, clock) -> None:
    from sbdelta import ServiceBusClient, ServiceBusMessage
    from sbdelta._store import PID_SHIFT
    from sbdelta._store.layout import key_partition
    from sbdelta.management import ServiceBusAdministrationClient

    ns = tempfile.mkdtemp() + "/ns"
    ServiceBusAdministrationClient(ns, spark=spark, clock=clock, engine="spark").create_queue(
        "p", enable_partitioning=True)
    key = next(f"k{i}" for i in range(1000) if key_partition(f"k{i}", 16) == 12)
    with ServiceBusClient(ns, spark=spark, clock=clock, engine="spark") as client:
        client.get_queue_sender("p").send_messages(
            [ServiceBusMessage(f"m{i}", partition_key=key) for i in range(15)])
        receiver = client.get_queue_receiver("p", max_wait_time=0)
        store = client._entities.queue("p").store
        now = clock.now()

        def one_by_one():  # the receiver's loop before the batched peek
            for p in range(16):
                rows, _ = store.peek(10, p << PID_SHIFT, now)
                if rows:
                    return rows
            return []

        figures = {}
        for name, peek in (("batched", lambda: receiver.peek_messages(10, sequence_number=0)),
                           ("one by one", one_by_one)) * 3:
            started = time.perf_counter()
            jobs = count_jobs(spark, lambda: figures.setdefault(name + " rows", len(peek())))
            figures.setdefault(name, []).append((time.perf_counter() - started, jobs))
    batched, single = (statistics.median(s for s, _ in figures[k][1:])
                       for k in ("batched", "one by one"))
    print(f"spark peek of {figures['batched rows']} in partition 12 of 16: batched "
          f"{batched:.2f} s ({figures['batched'][-1][1]} jobs), one partition at a time "
          f"{single:.2f} s ({figures['one by one'][-1][1]} jobs), ratio {single / batched:.1f}x")


if __name__ == "__main__":
    main()
