"""A small Spark receive's cost: ``python -m bench.spark_receive`` (the figures of
docs/benchmarks.md, "Where a small Spark receive's time goes").

One local session, a queue on ``engine="spark"`` with duplicate detection and dead-lettering on
expiration; eight rounds of: send 5 messages, ``receive_messages(4)`` (one message stays
registered for the next round), complete what came. Prints the median receive time of the
last seven rounds and the Spark jobs of each receive (the status tracker).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from datetime import datetime, timedelta, timezone

from .jobs import count_jobs


def main() -> None:
    from sbdelta import ManualClock, ServiceBusClient, ServiceBusMessage
    from sbdelta._spark import get_spark
    from sbdelta.management import ServiceBusAdministrationClient

    spark = get_spark()
    clock = ManualClock(datetime(2030, 1, 1, tzinfo=timezone.utc))
    ns = tempfile.mkdtemp() + "/ns"
    ServiceBusAdministrationClient(ns, spark=spark, clock=clock, engine="spark").create_queue(
        "q", dead_lettering_on_message_expiration=True, requires_duplicate_detection=True,
        duplicate_detection_history_time_window=timedelta(minutes=10))
    with ServiceBusClient(ns, spark=spark, clock=clock, engine="spark") as client:
        sender = client.get_queue_sender("q")
        receiver = client.get_queue_receiver("q", max_wait_time=0)
        seconds, jobs, got = [], [], []
        for batch in range(8):
            sender.send_messages([ServiceBusMessage(f"m{batch}{i}", message_id=f"{batch}{i}")
                                  for i in range(5)])
            started = time.perf_counter()
            jobs.append(count_jobs(spark, lambda: got.append(receiver.receive_messages(4))))
            seconds.append(time.perf_counter() - started)
            receiver.complete_messages(got[-1])
            clock.advance(timedelta(seconds=1))
    print(f"spark receive of {[len(g) for g in got]}: median "
          f"{statistics.median(seconds[1:]):.2f} s, Spark jobs per receive {jobs}")


if __name__ == "__main__":
    main()
