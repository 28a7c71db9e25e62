"""Paired namespaces (issue 15): what failing over costs a send, and the syphon's throughput.

Rows:

- ``send_messages(1) failed over to a backlog queue`` (median and p95) against
  ``send_messages(1)`` of the same client to a healthy queue: a failed-over send writes the
  backlog form of the message to a backlog queue of the secondary namespace (one commit, as a
  normal send) after the client looked at the entity's failover state.
- ``syphon N backlog messages to D destinations``: ``Syphon.drain()`` of one backlog queue whose
  N messages name D destination queues evenly, against the raw Delta operations it stands for
  on plain tables holding the same rows: one read of the rows (checkpointed), one append per
  destination, one DELETE of the rows (target <= 1.5x). The backlog is filled untimed before
  each repetition.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import List

from .measure import KB, Row, median, p95, throughput_row


def run_paired(bench) -> List[Row]:
    return _failover_send(bench) + ([_syphon(bench)] if bench.sizes.syphon else [])


def _failover_send(bench) -> List[Row]:
    from sbdelta import ManualClock, ServiceBusClient, ServiceBusMessage
    from sbdelta.exceptions import MessagingEntityDisabledError
    from sbdelta.management import EntityStatus, ServiceBusAdministrationClient
    from sbdelta.paired import PairedNamespaceOptions

    from .measure import body_bytes

    s = bench.sizes
    n = next(bench._names)
    primary, secondary = str(bench.work / f"primary{n}"), str(bench.work / f"secondary{n}")
    clock = ManualClock(datetime.now(timezone.utc))
    admin = ServiceBusAdministrationClient(primary, spark=bench.spark, clock=clock)
    for name in ("down", "up"):
        admin.create_queue(name)
    options = PairedNamespaceOptions(secondary, backlog_queue_count=1,
                                     failover_interval=timedelta(seconds=1),
                                     ping_primary_interval=timedelta(days=1))
    client = ServiceBusClient(primary, spark=bench.spark, clock=clock, paired_namespace=options)
    down, up = client.get_queue_sender("down"), client.get_queue_sender("up")
    admin.update_queue(admin.get_queue("down"), status=EntityStatus.SEND_DISABLED)
    body = body_bytes(0, KB)
    try:
        down.send_messages(ServiceBusMessage(body))  # the first fault starts the timer
    except MessagingEntityDisabledError:
        pass
    clock.advance(timedelta(seconds=2))
    down.send_messages(ServiceBusMessage(body))  # fails over (and pings once): untimed
    up.send_messages(ServiceBusMessage(body))
    if not down.failed_over:
        raise RuntimeError("paired: the sender did not fail over")
    failed, healthy = [], []
    for rep in range(s.latency_reps):
        a, b = bench.pair(rep, lambda: down.send_messages(ServiceBusMessage(body)),
                          lambda: up.send_messages(ServiceBusMessage(body)))
        failed.append(a)
        healthy.append(b)
    client.close()
    bench.echo(f"  failover send: {median(failed):.2f} s vs healthy {median(healthy):.2f} s")
    return [Row("paired", f"send_messages(1) failed over to a backlog queue ({stat})", "s",
                False, fn(failed), fn(healthy), f"send_messages(1) to a healthy queue ({stat})",
                samples={"sbdelta_seconds": failed, "baseline_seconds": healthy},
                params={"repetitions": s.latency_reps, "body_bytes": KB})
            for stat, fn in (("median", median), ("p95", p95))]


def _syphon(bench) -> Row:
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from sbdelta import ManualClock, ServiceBusClient
    from sbdelta._namespace import normalize_root
    from sbdelta.management import ServiceBusAdministrationClient
    from sbdelta.paired import BACKLOG_QUEUE_PROPERTIES, backlog_queue_name, primary_identity
    from sbdelta.paired.syphon import Syphon

    s = bench.sizes
    total, dests = s.syphon, s.syphon_destinations
    k = next(bench._names)
    primary, secondary = str(bench.work / f"sprimary{k}"), str(bench.work / f"ssecondary{k}")
    clock = ManualClock(datetime.now(timezone.utc))
    admin = ServiceBusAdministrationClient(primary, spark=bench.spark, clock=clock)
    names = [f"d{i}" for i in range(dests)]
    for name in names:
        admin.create_queue(name)
    backlog = backlog_queue_name(primary_identity(normalize_root(primary)), 0)
    ServiceBusAdministrationClient(secondary, spark=bench.spark, clock=clock).create_queue(
        backlog, **BACKLOG_QUEUE_PROPERTIES)
    away = ServiceBusClient(secondary, spark=bench.spark, clock=clock)
    sender = away.get_queue_sender(backlog)
    syphon = Syphon(primary, secondary, spark=bench.spark, clock=clock)

    def rows(n: int, start: int):
        dest = (F.col("id") % dests).cast("string")
        return bench.source(n, KB, start=start).withColumn("id", F.expr(
            "CAST(substring(message_id, 2) AS BIGINT)")).select(
            "message_id", "body",
            F.to_json(F.struct(F.concat(F.lit("d"), dest).alias("x-ms-path")))
            .alias("application_properties"))

    sb, base = [], []
    for rep in range(s.reps):
        start = rep * total
        for at in range(0, total, s.backlog_chunk):  # untimed
            sender.send_dataframe(rows(min(s.backlog_chunk, total - at), start + at))
        raw_src = bench.raw_path("syphon-src")
        raw_dests = {name: bench.raw_path(f"syphon-{name}") for name in names}
        for at in range(0, total, s.backlog_chunk):
            (rows(min(s.backlog_chunk, total - at), start + at)
             .withColumn("dest", F.get_json_object("application_properties", "$['x-ms-path']"))
             .write.format("delta").mode("append").save(raw_src))
        for path in raw_dests.values():  # the destinations exist, as queues do
            (bench.source(1, KB).limit(0).withColumn("application_properties", F.lit(None)
                                                     .cast("string"))
             .write.format("delta").mode("append").save(path))

        def run_syphon():
            report = syphon.drain()
            if report.total_moved != total:
                raise RuntimeError(f"paired: the syphon moved {report.total_moved} of {total}")

        def run_raw():
            got = bench.spark.read.format("delta").load(raw_src).localCheckpoint(eager=True)
            for name, path in raw_dests.items():
                (got.where(F.col("dest") == name).drop("dest")
                 .write.format("delta").mode("append").save(path))
            DeltaTable.forPath(bench.spark, raw_src).delete()

        a, b = bench.pair(rep, run_syphon, run_raw)
        sb.append(a)
        base.append(b)
    away.close()
    row = throughput_row("paired", f"syphon {total:,} backlog messages to {dests} destinations",
                         total, sb, base, "raw Delta read + append per destination + delete",
                         destinations=dests)
    bench.echo(f"  syphon {total}: {row.sbdelta:,.0f} msgs/s vs raw {row.baseline:,.0f}")
    return row
