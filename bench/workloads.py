"""The eight workloads of issue 5, each returning table rows (sbdelta next to its baseline).

All Spark work runs on the harness's one session; tables live under the work folder. Broker
time is the system clock (locks of 5 minutes, so a slow batch never loses its locks).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Callable, Dict, List, Optional

from .measure import (DELTA_APPEND, KB, LOCK, PeakRss, Row, Sizes, Timer, body_bytes, body_sql,
                      median, throughput_row)


class Bench:
    def __init__(self, spark, work: Path, sizes: Sizes, rabbit, echo: Callable) -> None:
        from sbdelta import ServiceBusClient
        from sbdelta.management import ServiceBusAdministrationClient

        self.spark = spark
        self.work = work
        self.sizes = sizes
        self.rabbit = rabbit
        self.echo = echo
        self.ns = str(work / "ns")
        self.admin = ServiceBusAdministrationClient(self.ns, spark=spark)
        self.client = ServiceBusClient(self.ns, spark=spark)
        self._names = itertools.count()
        self._drain: Optional[dict] = None

    # -- helpers -------------------------------------------------------------------------------
    def run(self, name: str) -> List[Row]:
        return getattr(self, f"w_{name}")()

    def queue(self, prefix: str, **props) -> str:
        name = f"{prefix}{next(self._names)}"
        self.admin.create_queue(name, lock_duration=LOCK, **props)
        return name

    def raw_path(self, name: str) -> str:
        return str(self.work / "raw" / f"{name}{next(self._names)}")

    def source(self, n: int, size: int = KB, start: int = 0):
        """``n`` message rows (message_id, body) as a lazy DataFrame, ids from ``start``."""
        from pyspark.sql import functions as F

        return self.spark.range(start, start + n).select(
            F.concat(F.lit("m"), F.col("id").cast("string")).alias("message_id"),
            F.expr(body_sql(size)).alias("body"))

    def fill(self, queue: str, n: int, chunk: int, start: int = 0) -> None:
        """Send ``n`` messages to ``queue``, ``chunk`` per commit (send_dataframe)."""
        sender = self.client.get_queue_sender(queue)
        for at in range(0, n, chunk):
            sender.send_dataframe(self.source(min(chunk, n - at), start=start + at))

    def raw_fill(self, path: str, n: int, chunk: int, start: int = 0, extra: bool = True):
        """The comparable plain table: the same rows plus the columns a lock would change."""
        for at in range(0, n, chunk):
            df = self.source(min(chunk, n - at), start=start + at)
            if extra:
                df = df.selectExpr("cast(substring(message_id, 2) as bigint) AS id", "*",
                                   "CAST(NULL AS STRING) AS lock_token",
                                   "CAST(NULL AS TIMESTAMP) AS locked_until",
                                   "0 AS delivery_count", "'ACTIVE' AS state")
            df.write.format("delta").mode("append").save(path)

    def pair(self, rep: int, first: Callable[[], None], second: Callable[[], None]):
        """Time two actions, alternating which goes first per repetition."""
        order = [(0, first), (1, second)] if rep % 2 == 0 else [(1, second), (0, first)]
        out = [0.0, 0.0]
        for slot, action in order:
            with Timer() as t:
                action()
            out[slot] = t.seconds
        return out

    # -- 1. send -------------------------------------------------------------------------------
    def w_send(self) -> List[Row]:
        s = self.sizes
        rows = []
        for size, counts in ((KB, s.send), (64 * KB, s.send_64k)):
            for n in counts:
                queue, raw = self.queue("send"), self.raw_path("send")
                sender = self.client.get_queue_sender(queue)
                sb, base = [], []
                for rep in range(s.reps):
                    df = self.source(n, size, start=rep * n)
                    a, b = self.pair(rep, lambda: sender.send_dataframe(df),
                                     lambda: df.write.format("delta").mode("append").save(raw))
                    sb.append(a)
                    base.append(b)
                rows.append(throughput_row(
                    "send", f"send_dataframe {n:,} x {size // KB} KB", n, sb, base,
                    f"{DELTA_APPEND} (1 commit)", batch=n, body_bytes=size,
                    series=f"send_dataframe {size // KB} KB"))
                self.echo(f"  send_dataframe {n} x {size} B: {rows[-1].sbdelta:,.0f} msgs/s "
                          f"vs {rows[-1].baseline:,.0f}")
        rows += self._send_messages()
        return rows

    def _send_messages(self) -> List[Row]:
        from sbdelta import ServiceBusMessage

        s = self.sizes
        rows = []
        for n, batch in s.send_messages:
            queue, raw = self.queue("sendm"), self.raw_path("sendm")
            sender = self.client.get_queue_sender(queue)
            payload = [(f"m{i}", body_bytes(i, KB)) for i in range(n)]
            batches = [payload[i:i + batch] for i in range(0, n, batch)]

            def sbdelta_send():
                for part in batches:
                    sender.send_messages([ServiceBusMessage(b, message_id=m) for m, b in part])

            def raw_send():
                for part in batches:
                    (self.spark.createDataFrame(part, "message_id STRING, body BINARY")
                     .write.format("delta").mode("append").save(raw))

            sb, base = [], []
            for rep in range(s.reps):
                a, b = self.pair(rep, sbdelta_send, raw_send)
                sb.append(a)
                base.append(b)
            rows.append(throughput_row(
                "send", f"send_messages {n:,} in lists of {batch:,}", n, sb, base,
                f"{DELTA_APPEND} of Python rows, same batches", batch=batch,
                series="send_messages 1 KB"))
            self.echo(f"  send_messages {n} by {batch}: {rows[-1].sbdelta:,.0f} msgs/s "
                      f"vs {rows[-1].baseline:,.0f}")
        return rows

    # -- 2 + 3. lock acquisition and settlement --------------------------------------------------
    def _receive_complete(self) -> Dict[str, List[Row]]:
        if getattr(self, "_rc", None) is not None:
            return self._rc
        s = self.sizes
        receive, complete = [], []
        now_sql = "TIMESTAMP '2030-01-01 00:00:00'"
        for n in s.receive:
            total = n * s.reps
            queue, raw = self.queue("recv"), self.raw_path("recv")
            self.fill(queue, total, n)
            self.raw_fill(raw, total, n)
            receiver = self.client.get_queue_receiver(queue, max_wait_time=0)
            r_sb, r_base, c_sb, c_base = [], [], [], []
            for rep in range(s.reps):
                lo, hi = rep * n, (rep + 1) * n
                box = {}

                def sb_receive():
                    box["df"] = receiver.receive_dataframe(n)
                    box["got"] = box["df"].count()

                def raw_merge():
                    self.spark.sql(
                        f"MERGE INTO delta.`{raw}` AS t USING (SELECT id FROM range({lo}, {hi})) "
                        f"AS s ON t.id = s.id WHEN MATCHED THEN UPDATE SET "
                        f"lock_token = uuid(), locked_until = {now_sql}, "
                        f"delivery_count = t.delivery_count + 1").collect()

                a, b = self.pair(rep, sb_receive, raw_merge)
                if box["got"] != n:
                    raise RuntimeError(f"receive_dataframe({n}) returned {box['got']} messages")
                r_sb.append(a)
                r_base.append(b)

                def sb_complete():
                    done = receiver.complete_messages(box["df"])
                    if done != n:
                        raise RuntimeError(f"complete_messages settled {done} of {n}")

                def raw_delete():
                    self.spark.sql(f"DELETE FROM delta.`{raw}` WHERE id >= {lo} AND id < {hi}")

                a, b = self.pair(rep, sb_complete, raw_delete)
                c_sb.append(a)
                c_base.append(b)
            receive.append(throughput_row(
                "receive", f"receive_dataframe {n:,} (PeekLock)", n, r_sb, r_base,
                "raw Delta MERGE updating n rows", batch=n, queue_depth=total,
                series="receive_dataframe"))
            complete.append(throughput_row(
                "complete", f"complete_messages {n:,} tokens", n, c_sb, c_base,
                "raw Delta DELETE of n rows", batch=n, series="complete_messages"))
            self.echo(f"  receive {n}: {receive[-1].sbdelta:,.0f} vs {receive[-1].baseline:,.0f}"
                      f"; complete: {complete[-1].sbdelta:,.0f} vs {complete[-1].baseline:,.0f}")
        self._rc = {"receive": receive, "complete": complete}
        return self._rc

    def w_receive(self) -> List[Row]:
        return self._receive_complete()["receive"]

    def w_complete(self) -> List[Row]:
        return self._receive_complete()["complete"]

    # -- 4. backlog independence -----------------------------------------------------------------
    def w_backlog(self) -> List[Row]:
        s = self.sizes
        k = s.backlog_receive
        results = []
        for depth in s.backlog:
            queue = self.queue("backlog")
            self.fill(queue, depth, s.backlog_chunk)
            receiver = self.client.get_queue_receiver(queue, max_wait_time=0)
            seconds = []
            for _ in range(s.reps):
                with Timer() as t:
                    df = receiver.receive_dataframe(k)
                    got = df.count()
                if got != k:
                    raise RuntimeError(f"backlog {depth}: received {got} of {k}")
                seconds.append(t.seconds)
                receiver.complete_messages(df)  # untimed: keep the queue like a live one
            # Issue 16: a single receive on a warm client (delta-rs on a local namespace).
            singles = []
            for rep in range(s.latency_reps + 1):
                with Timer() as t:
                    one = receiver.receive_messages(1)
                if len(one) != 1:
                    raise RuntimeError(f"backlog {depth}: receive_messages(1) gave nothing")
                receiver.complete_message(one[0])
                if rep:  # the first warms the client's tables
                    singles.append(t.seconds)
            results.append((depth, seconds, singles))
            self.echo(f"  backlog {depth}: receive {k} in {median(seconds):.2f} s, "
                      f"receive_messages(1) in {median(singles):.3f} s")
        smallest, base, single_base = results[0]
        rows = []
        for depth, seconds, singles in results:
            rows.append(Row("backlog", f"receive {k:,} from a queue of {depth:,}", "s", False,
                            median(seconds), median(base),
                            f"the same receive at a backlog of {smallest:,}",
                            samples={"sbdelta_seconds": seconds, "baseline_seconds": base},
                            params={"backlog": depth, "receive": k,
                                    "send_chunk": s.backlog_chunk}))
        for depth, _, singles in results:
            rows.append(Row("backlog", f"receive_messages(1) median from a queue of {depth:,}",
                            "s", False, median(singles), median(single_base),
                            f"the same at a backlog of {smallest:,}",
                            samples={"sbdelta_seconds": singles,
                                     "baseline_seconds": single_base},
                            params={"backlog": depth, "repetitions": s.latency_reps,
                                    "send_chunk": s.backlog_chunk}))
        return rows

    # -- 5. single-message latency ---------------------------------------------------------------
    def w_maintenance(self) -> List[Row]:
        """Issue 4: receive latency on a queue worn by N rounds of send/complete, before and
        after the compact job, against a fresh queue. The two queues are sampled in turn
        (fresh, worn, fresh, worn...) so that both see the same machine load."""
        from sbdelta import ServiceBusMessage
        from sbdelta.maintenance import MIN_RETAIN_HOURS, compact

        s = self.sizes

        def receive_latency(queues: List[str]) -> Dict[str, List[float]]:
            times: Dict[str, List[float]] = {q: [] for q in queues}
            for q in queues:
                self.client.get_queue_sender(q).send_messages(
                    [ServiceBusMessage(body_bytes(i, KB)) for i in range(s.latency_reps + 1)])
            for i in range(s.latency_reps + 1):
                for q in queues:
                    receiver = self.client.get_queue_receiver(q, max_wait_time=0)
                    with Timer() as t:
                        got = receiver.receive_messages(1, max_wait_time=30)
                    if len(got) != 1:
                        raise RuntimeError("maintenance: a message sent was not received")
                    receiver.complete_messages(got)
                    if i:  # the first round warms the caches
                        times[q].append(t.seconds)
            return times

        fresh, worn = self.queue("fresh"), self.queue("worn")
        receiver = self.client.get_queue_receiver(worn, max_wait_time=0)
        for round_ in range(s.maintenance_rounds):
            self.fill(worn, s.maintenance_batch, s.maintenance_batch,
                      start=round_ * s.maintenance_batch)
            left = s.maintenance_batch
            while left:
                got = receiver.receive_messages(left, max_wait_time=30)
                receiver.complete_messages(got)
                left -= len(got)
        before = receive_latency([fresh, worn])
        with Timer() as job:
            report = compact(self.ns, entities=[worn], retain_hours=MIN_RETAIN_HOURS,
                             spark=self.spark)
        after = receive_latency([fresh, worn])
        params = {"rounds": s.maintenance_rounds, "messages_per_round": s.maintenance_batch,
                  "repetitions": s.latency_reps, "compact_seconds": round(job.seconds, 1),
                  "compact_report": report.totals()}
        label = f"receive_messages(1) median after {s.maintenance_rounds} rounds"
        baseline = "receive_messages(1) median on a fresh queue, sampled in turn"
        rows = [Row("maintenance", f"{label}, {when}", "s", False, median(got[worn]),
                    median(got[fresh]), baseline, params=params,
                    samples={"sbdelta_seconds": got[worn], "baseline_seconds": got[fresh]})
                for when, got in (("before compact", before), ("after compact", after))]
        self.echo(f"  maintenance: before compact worn {median(before[worn]):.2f} s vs fresh "
                  f"{median(before[fresh]):.2f} s; compact {job.seconds:.0f} s; after: worn "
                  f"{median(after[worn]):.2f} s vs fresh {median(after[fresh]):.2f} s")
        return rows

    def w_latency(self) -> List[Row]:
        from .latency import run_latency

        return run_latency(self)

    # -- 6 + 8. end-to-end drain and memory -------------------------------------------------------
    def _run_drain(self) -> dict:
        if self._drain is not None:
            return self._drain
        s = self.sizes
        d = s.drain
        res = {"sbdelta": {"send": [], "drain": [], "total": [], "rss": []},
               "stream": {"send": [], "drain": [], "total": [], "rss": [], "batches": []},
               "rabbit": {"send": [], "drain": [], "total": [], "rss": [], "broker_rss": []}}
        for rep in range(s.drain_reps):
            self.echo(f"  drain repetition {rep + 1}/{s.drain_reps}")
            self._drain_sbdelta(res["sbdelta"], d)
            self._drain_stream(res["stream"], d)
            if self.rabbit.available:
                self.rabbit.drain(res["rabbit"], d, [body_bytes(i, KB) for i in range(d)],
                                  s.rabbit_prefetch)
        self._drain = res
        return res

    def _drain_sbdelta(self, out: dict, d: int) -> None:
        s = self.sizes
        queue = self.queue("drain")
        receiver = self.client.get_queue_receiver(queue, max_wait_time=0)
        with PeakRss() as rss:
            with Timer() as send:
                self.fill(queue, d, s.drain_chunk)
            done = 0
            with Timer() as drain:
                while done < d:  # like the other consumers: stop at the last message
                    df = receiver.receive_dataframe(s.drain_batch)
                    if df.count() == 0:
                        break
                    done += receiver.complete_messages(df)
        if done != d:
            raise RuntimeError(f"drain: completed {done} of {d} messages")
        out["send"].append(send.seconds)
        out["drain"].append(drain.seconds)
        out["total"].append(send.seconds + drain.seconds)
        out["rss"].append(rss.mb)

    def _drain_stream(self, out: dict, d: int) -> None:
        s = self.sizes
        raw = self.raw_path("stream")
        checkpoint = self.raw_path("checkpoint")
        seen: List[int] = []
        with PeakRss() as rss:
            with Timer() as send:
                self.raw_fill(raw, d, s.drain_chunk, extra=False)
            with Timer() as drain:
                query = (self.spark.readStream.format("delta").load(raw).writeStream
                         .foreachBatch(lambda batch, _id: seen.append(batch.count()))
                         .option("checkpointLocation", checkpoint)
                         .trigger(availableNow=True).start())
                query.awaitTermination()
        if sum(seen) != d:
            raise RuntimeError(f"streaming drain consumed {sum(seen)} of {d} rows")
        out["send"].append(send.seconds)
        out["drain"].append(drain.seconds)
        out["total"].append(send.seconds + drain.seconds)
        out["rss"].append(rss.mb)
        out["batches"].append(len(seen))

    def w_drain(self) -> List[Row]:
        s = self.sizes
        res = self._run_drain()
        d = s.drain
        rows = []
        params = {"messages": d, "send_chunk": s.drain_chunk, "batch": s.drain_batch,
                  "repetitions": s.drain_reps, "stream_micro_batches": res["stream"]["batches"]}
        for phase, label in (("send", "send phase"), ("drain", "receive + complete phase"),
                             ("total", "end to end")):
            sb = res["sbdelta"][phase]
            rows.append(throughput_row("drain", f"{d:,} msgs, {label}", d, sb,
                                       res["stream"][phase],
                                       "Delta append + Structured Streaming (availableNow)",
                                       **params))
            rabbit = res["rabbit"][phase]
            row = throughput_row("drain", f"{d:,} msgs, {label}", d, sb, rabbit or None,
                                 "RabbitMQ (durable, async confirms, manual acks)", **params)
            if not rabbit:
                row.baseline_note = self.rabbit.reason
            rows.append(row)
        return rows

    def w_memory(self) -> List[Row]:
        res = self._run_drain()
        d = self.sizes.drain
        sb = res["sbdelta"]["rss"]
        rows = [Row("memory", f"driver peak RSS, drain of {d:,}", "MB", False, median(sb),
                    median(res["stream"]["rss"]),
                    "driver peak RSS, Delta append + streaming drain",
                    samples={"sbdelta": sb, "baseline": res["stream"]["rss"]},
                    params={"includes": "Python driver + its JVM (RSS of the process tree)"})]
        rabbit = Row("memory", f"driver peak RSS, drain of {d:,}", "MB", False, median(sb),
                     None, "RabbitMQ broker (beam.smp) peak RSS",
                     samples={"sbdelta": sb, "baseline": res["rabbit"]["broker_rss"]})
        if res["rabbit"]["broker_rss"]:
            rabbit.baseline = median(res["rabbit"]["broker_rss"])
        else:
            rabbit.baseline_note = self.rabbit.reason
        rows.append(rabbit)
        return rows

    # -- 7. contention -------------------------------------------------------------------------
    def w_jobs(self) -> List[Row]:
        from .jobs import run_jobs

        return run_jobs(self)

    def w_topics(self) -> List[Row]:
        from .topics import run_topics

        return run_topics(self)

    def w_paired(self) -> List[Row]:
        from .paired import run_paired

        return run_paired(self)

    def w_sessions(self) -> List[Row]:
        from .sessions import run_sessions

        return run_sessions(self)

    def w_contention(self) -> List[Row]:
        from .contention import run_contention

        return run_contention(self)
