"""Workload "jobs": Spark jobs per operation, sbdelta next to the raw Delta operation it wraps.

A Spark job costs scheduling and driver-side planning however small its data, so the number of
jobs an operation runs is most of the cost of a small batch. Counted with the status tracker:
the job ids a call created. AQE's separate shuffle-stage jobs count too, as they do in time.
"""

from __future__ import annotations

from typing import Callable, List

from .measure import Row

SIZE = 1000  # messages per batch operation


def count_jobs(spark, action: Callable[[], object]) -> int:
    """How many Spark jobs ``action`` started."""
    tracker = spark.sparkContext.statusTracker()

    def newest() -> int:
        # The tracker is fed by the listener bus, behind the scheduler: drain it first.
        spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(60_000)
        return max([-1] + list(tracker.getJobIdsForGroup(None)))

    before = newest()
    action()
    return newest() - before


def run_jobs(bench) -> List[Row]:
    from sbdelta import ServiceBusMessage

    spark, n = bench.spark, SIZE
    queue, raw = bench.queue("jobs"), bench.raw_path("jobs")
    sender = bench.client.get_queue_sender(queue)
    receiver = bench.client.get_queue_receiver(queue, max_wait_time=0)
    source = bench.source(n).cache()
    source.count()
    bench.raw_fill(raw, n, n)
    box = {}
    rows = []

    def row(case: str, sb: int, base: int, base_name: str) -> None:
        rows.append(Row("jobs", case, "Spark jobs", False, float(sb), float(base),
                        base_name, params={"batch": n}))
        bench.echo(f"  {case}: {sb} jobs vs {base} ({base_name})")

    appended = bench.raw_path("jobs_append")
    source.write.format("delta").save(appended)
    # Warm-up, not counted: a process's first Spark call on an entity checks its tables once
    # (columns, features: 5 jobs on a send_dataframe, 2 on a receive_dataframe).
    sender.send_dataframe(source)
    receiver.complete_messages(receiver.receive_dataframe(n))
    sb = count_jobs(spark, lambda: sender.send_dataframe(source))
    base = count_jobs(spark, lambda: source.write.format("delta").mode("append").save(appended))
    row(f"send_dataframe {n:,}", sb, base, "raw Delta append")

    sb = count_jobs(spark, lambda: box.update(df=receiver.receive_dataframe(n)))
    base = count_jobs(spark, lambda: spark.sql(
        f"MERGE INTO delta.`{raw}` AS t USING (SELECT id FROM range(0, {n})) AS s "
        f"ON t.id = s.id WHEN MATCHED THEN UPDATE SET lock_token = uuid(), "
        f"delivery_count = t.delivery_count + 1").collect())
    row(f"receive_dataframe {n:,}", sb, base, "raw Delta MERGE updating n rows")

    sb = count_jobs(spark, lambda: receiver.complete_messages(box["df"]))
    base = count_jobs(spark, lambda: spark.sql(
        f"DELETE FROM delta.`{raw}` WHERE id >= 0 AND id < {n}").collect())
    row(f"complete_messages {n:,} tokens", sb, base, "raw Delta DELETE of n rows")

    bench.raw_fill(raw, 1, 1, start=n)
    sender.send_messages(ServiceBusMessage(b"one"))
    sb = count_jobs(spark, lambda: box.update(one=receiver.receive_messages(1)))
    base = count_jobs(spark, lambda: spark.sql(
        f"MERGE INTO delta.`{raw}` AS t USING (SELECT {n} AS id) AS s ON t.id = s.id "
        f"WHEN MATCHED THEN UPDATE SET lock_token = uuid()").collect())
    row("receive_messages(1)", sb, base, "raw Delta MERGE updating 1 row")

    sb = count_jobs(spark, lambda: receiver.complete_message(box["one"][0]))
    base = count_jobs(spark, lambda: spark.sql(
        f"DELETE FROM delta.`{raw}` WHERE id = {n}").collect())
    row("complete_message", sb, base, "raw Delta DELETE of 1 row")

    one = source.limit(1).cache()
    one.count()
    sb = count_jobs(spark, lambda: sender.send_messages(ServiceBusMessage(b"one")))
    base = count_jobs(spark, lambda: one.write.format("delta").mode("append").save(appended))
    row("send_messages(1)", sb, base, "raw Delta append of 1 row")
    one.unpersist()
    source.unpersist()
    return rows
