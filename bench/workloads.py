"""The eight workloads of issue 5, each returning table rows (sbdelta next to its baseline).

All Spark work runs on the harness's one session; tables live under the work folder. Broker
time is the system clock (locks of 5 minutes, so a slow batch never loses its locks).
"""

from __future__ import annotations

import itertools
import uuid
from pathlib import Path
from typing import Callable, Dict, List, Optional

from .measure import KB, LOCK, ROOT, PeakRss, Row, Sizes, Timer, body_bytes, body_sql, median, p95, throughput_row

DELTA_APPEND = "raw Delta append"


def _delta_rs_appender(path: str, body: bytes) -> Callable[[], None]:
    """A one-row append to a new delta-rs table at ``path`` (the raw operation a local
    ``send_messages`` wraps, issue 16)."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    row = pa.table({"message_id": ["lat"], "body": pa.array([body], pa.binary())})
    write_deltalake(path, row)
    table = DeltaTable(path)
    return lambda: write_deltalake(table, row, mode="append")


def _delta_rs_deleter(path: str, body: bytes) -> Callable[[], Callable[[], None]]:
    """Per call: append one row with a new id to a delta-rs table at ``path`` and return the
    one-row delta-rs DELETE of it (the raw operation a local ``complete_message`` wraps)."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    ids = itertools.count()

    def prepare() -> Callable[[], None]:
        key = f"lat{next(ids)}"
        write_deltalake(path, pa.table({"message_id": [key],
                                        "body": pa.array([body], pa.binary())}), mode="append")
        table = DeltaTable(path)
        return lambda: table.delete(f"message_id = '{key}'")

    return prepare


def _delta_rs_merger(path: str, body: bytes, rows: int) -> Callable[[], None]:
    """A table of ``rows`` messages at ``path`` (delta-rs, one commit) and per call the
    one-row delta-rs MERGE that locks the next one (lock token, lock end, delivery count):
    the raw operation a local PeekLock ``receive_messages(1)`` wraps (issue 16)."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    write_deltalake(path, pa.table({
        "id": pa.array(range(rows), pa.int64()),
        "body": pa.array([body] * rows, pa.binary()),
        "lock_token": pa.array([None] * rows, pa.string()),
        "locked_until": pa.array([None] * rows, pa.timestamp("us", tz="UTC")),
        "delivery_count": pa.array([0] * rows, pa.int32())}))
    table = DeltaTable(path)
    ids = itertools.count()

    def lock_one() -> None:
        source = pa.table({"id": pa.array([next(ids) % rows], pa.int64()),
                           "token": [uuid.uuid4().hex]})
        (table.merge(source, "t.id = s.id", source_alias="s", target_alias="t")
         .when_matched_update({"lock_token": "s.token",
                               "locked_until": "now() + INTERVAL '5 minutes'",
                               "delivery_count": "t.delivery_count + 1"})
         .execute())

    return lock_one


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
        from sbdelta import ServiceBusMessage

        s = self.sizes
        queue, raw = self.queue("latency"), self.raw_path("latency")
        sender = self.client.get_queue_sender(queue)
        receiver = self.client.get_queue_receiver(queue, max_wait_time=0)
        body = body_bytes(0, KB)
        ops: Dict[str, List[float]] = {"send": [], "receive": [], "complete": [], "total": []}
        base: List[float] = []
        rs_base: List[float] = []
        rs_raw = self.raw_path("latency-rs")  # issue 16's baseline: a one-row delta-rs append
        rs_append = _delta_rs_appender(rs_raw, body)
        rs_deletes = _delta_rs_deleter(self.raw_path("latency-rs-delete"), body)
        rs_delete_base: List[float] = []

        def cycle(record: bool) -> None:
            with Timer() as t1:
                sender.send_messages(ServiceBusMessage(body, message_id="lat"))
            with Timer() as t2:
                got = receiver.receive_messages(1, max_wait_time=30)
            if len(got) != 1:
                raise RuntimeError("latency: the message sent was not received")
            with Timer() as t3:
                receiver.complete_message(got[0])
            with Timer() as t4:
                (self.spark.createDataFrame([("lat", bytearray(body))],
                                            "message_id STRING, body BINARY")
                 .write.format("delta").mode("append").save(raw))
            with Timer() as t5:
                rs_append()
            rs_delete = rs_deletes()
            with Timer() as t6:
                rs_delete()
            if record:
                ops["send"].append(t1.seconds)
                ops["receive"].append(t2.seconds)
                ops["complete"].append(t3.seconds)
                ops["total"].append(t1.seconds + t2.seconds + t3.seconds)
                base.append(t4.seconds)
                rs_base.append(t5.seconds)
                rs_delete_base.append(t6.seconds)

        cycle(False)  # warm the session, the caches and both tables
        for _ in range(s.latency_reps):
            cycle(True)
        rows = []
        for op, label in (("send", "send_messages(1)"), ("receive", "receive_messages(1)"),
                          ("complete", "complete_message"),
                          ("total", "send + receive + complete")):
            for stat, fn in (("median", median), ("p95", p95)):
                rows.append(Row("latency", f"{label} {stat}", "s", False, fn(ops[op]), fn(base),
                                f"one-row {DELTA_APPEND} ({stat})",
                                samples={"sbdelta_seconds": ops[op], "baseline_seconds": base},
                                params={"repetitions": s.latency_reps, "body_bytes": KB}))
        rows.append(Row("latency", "send_messages(1) median vs delta-rs", "s", False,
                        median(ops["send"]), median(rs_base), "one-row delta-rs append (median)",
                        samples={"sbdelta_seconds": ops["send"], "baseline_seconds": rs_base},
                        params={"repetitions": s.latency_reps, "body_bytes": KB}))
        rows.append(Row("latency", "complete_message median vs delta-rs", "s", False,
                        median(ops["complete"]), median(rs_delete_base),
                        "one-row delta-rs DELETE (median)",
                        samples={"sbdelta_seconds": ops["complete"],
                                 "baseline_seconds": rs_delete_base},
                        params={"repetitions": s.latency_reps, "body_bytes": KB}))
        rows += self._receive_at_backlog(body)
        rows.append(self._new_process_send(queue))
        self.echo(f"  latency: send {median(ops['send']):.3f} s, receive "
                  f"{median(ops['receive']):.2f} s, complete {median(ops['complete']):.3f} s, "
                  f"one-row append {median(base):.2f} s, delta-rs {median(rs_base):.3f} s, "
                  f"delta-rs DELETE {median(rs_delete_base):.3f} s")
        return rows

    def _receive_at_backlog(self, body: bytes) -> List[Row]:
        """Issue 16: ``receive_messages(1)`` + ``complete_message`` on a warm client at a
        backlog of 10,000 (ten sends of 1,000), on a queue and on a 16-partition queue, each
        receive against a one-row delta-rs MERGE locking a row of a 10,000-row table."""
        from sbdelta import ServiceBusMessage

        s = self.sizes
        backlog, rows = 10_000, []
        merge_one = _delta_rs_merger(self.raw_path("latency-rs-merge"), body, backlog)
        for label, props in (("queue", {}), ("partitioned queue",
                                             {"enable_partitioning": True})):
            queue = self.queue("latency-backlog", **props)
            sender = self.client.get_queue_sender(queue)
            for _ in range(backlog // 1000):
                sender.send_messages([ServiceBusMessage(body) for _ in range(1000)])
            receiver = self.client.get_queue_receiver(queue, max_wait_time=0)
            took: List[float] = []
            settled: List[float] = []
            base: List[float] = []
            for rep in range(s.latency_reps + 1):
                with Timer() as t1:
                    got = receiver.receive_messages(1)
                if len(got) != 1:
                    raise RuntimeError(f"latency: the {label} at a backlog gave no message")
                with Timer() as t2:
                    receiver.complete_message(got[0])
                with Timer() as t3:
                    merge_one()
                if rep:  # the first warms the client and both tables
                    took.append(t1.seconds)
                    settled.append(t2.seconds)
                    base.append(t3.seconds)
            rows.append(Row("latency", f"receive_messages(1) median, {label}, 10k backlog",
                            "s", False, median(took), median(base),
                            "one-row delta-rs MERGE (median)",
                            samples={"sbdelta_seconds": took, "baseline_seconds": base,
                                     "complete_seconds": settled},
                            params={"repetitions": s.latency_reps, "body_bytes": KB,
                                    "backlog": backlog}))
            self.echo(f"  latency at a 10k backlog ({label}): receive {median(took):.3f} s, "
                      f"complete {median(settled):.3f} s, delta-rs MERGE "
                      f"{median(base):.3f} s")
        return rows

    def _new_process_send(self, queue: str) -> Row:
        """Issue 16: a new Python process that imports sbdelta, creates a client and sends one
        message (a script written for the SDK, run once), against a new process that imports
        deltalake and appends one row to a table. Wall time of the whole process, both
        started the same way."""
        import subprocess
        import sys

        s = self.sizes
        sbdelta_script = (
            "from sbdelta import ServiceBusClient, ServiceBusMessage\n"
            f"with ServiceBusClient({self.ns!r}) as client:\n"
            f"    client.get_queue_sender({queue!r}).send_messages(ServiceBusMessage(b'x'))\n")
        raw = self.raw_path("new-process-rs")
        _delta_rs_appender(raw, b"x")  # the table exists, as the queue does
        raw_script = (
            "import pyarrow as pa\nfrom deltalake import write_deltalake\n"
            f"write_deltalake({raw!r}, pa.table({{'message_id': ['lat'], "
            "'body': pa.array([b'x'], pa.binary())}), mode='append')\n")

        def run(script: str) -> float:
            with Timer() as t:
                subprocess.run([sys.executable, "-c", script], check=True, cwd=str(ROOT))
            return t.seconds

        took, base = [], []
        for rep in range(s.latency_reps + 1):
            a, b = run(sbdelta_script), run(raw_script)
            if rep:  # the first warms the file cache
                took.append(a)
                base.append(b)
        self.echo(f"  new process, import + client + send: {median(took):.2f} s, "
                  f"import deltalake + append: {median(base):.2f} s")
        return Row("latency", "new process: import sbdelta, create client, send one message "
                   "(median)", "s", False, median(took), median(base),
                   "new process: import deltalake, one-row append (median)",
                   samples={"sbdelta_seconds": took, "baseline_seconds": base},
                   params={"repetitions": s.latency_reps, "target_seconds": 2})

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
