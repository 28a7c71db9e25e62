"""A Spark peek's cost: ``python -m bench.spark_peek`` (the figures of docs/benchmarks.md,
"Where a small Spark receive's time goes").

One local session, a queue on ``engine="spark"`` with 15 unregistered messages (three sends of
5), ``peek_messages(10, sequence_number=0)`` six times: the median time of the last five and
the Spark jobs of each (the status tracker).
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


if __name__ == "__main__":
    main()
