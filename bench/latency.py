"""Workload 5, latency (issues 5 and 16): single-message calls on a warm client against a
one-row Spark append and the one-row delta-rs append, DELETE and MERGE; a completion of ten
messages against a ten-row delta-rs DELETE; single receives at a backlog of 10,000; a new
process that imports sbdelta and sends one message."""

from __future__ import annotations

import itertools
import uuid
from typing import Callable, Dict, List

from .measure import DELTA_APPEND, KB, ROOT, Row, Timer, body_bytes, median, p95


def _delta_rs_appender(path: str, body: bytes) -> Callable[[], None]:
    """A one-row append to a new delta-rs table at ``path`` (the raw operation a local
    ``send_messages`` wraps, issue 16)."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    row = pa.table({"message_id": ["lat"], "body": pa.array([body], pa.binary())})
    write_deltalake(path, row)
    table = DeltaTable(path)
    return lambda: write_deltalake(table, row, mode="append")


def _delta_rs_deleter(path: str, body: bytes, rows: int = 1) -> Callable[[], Callable[[], None]]:
    """Per call: append ``rows`` rows with new ids to a delta-rs table at ``path`` (one
    commit) and return the delta-rs DELETE of them (the raw operation a local
    ``complete_message``, or a ``complete_messages`` of ``rows`` messages, wraps)."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    ids = itertools.count()

    def prepare() -> Callable[[], None]:
        keys = [f"lat{next(ids)}" for _ in range(rows)]
        write_deltalake(path, pa.table({"message_id": keys,
                                        "body": pa.array([body] * rows, pa.binary())}),
                        mode="append")
        table = DeltaTable(path)
        listed = ", ".join(f"'{key}'" for key in keys)
        return lambda: table.delete(f"message_id IN ({listed})")

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


def run_latency(bench) -> List[Row]:
    """The latency rows: a send, receive and completion of one message against a one-row
    Spark append and the one-row delta-rs operations, then the backlog and new-process rows."""
    from sbdelta import ServiceBusMessage

    s = bench.sizes
    queue, raw = bench.queue("latency"), bench.raw_path("latency")
    sender = bench.client.get_queue_sender(queue)
    receiver = bench.client.get_queue_receiver(queue, max_wait_time=0)
    body = body_bytes(0, KB)
    ops: Dict[str, List[float]] = {"send": [], "receive": [], "complete": [], "total": []}
    base: List[float] = []
    rs_base: List[float] = []
    rs_raw = bench.raw_path("latency-rs")  # issue 16's baseline: a one-row delta-rs append
    rs_append = _delta_rs_appender(rs_raw, body)
    rs_deletes = _delta_rs_deleter(bench.raw_path("latency-rs-delete"), body)
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
            (bench.spark.createDataFrame([("lat", bytearray(body))],
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
    rows.append(_complete_ten(bench, sender, receiver, body))
    rows += _receive_at_backlog(bench, body)
    rows.append(_new_process_send(bench, queue))
    bench.echo(f"  latency: send {median(ops['send']):.3f} s, receive "
              f"{median(ops['receive']):.2f} s, complete {median(ops['complete']):.3f} s, "
              f"one-row append {median(base):.2f} s, delta-rs {median(rs_base):.3f} s, "
              f"delta-rs DELETE {median(rs_delete_base):.3f} s")
    return rows


#: Messages per call of the batch-completion row.
BATCH = 10


def _complete_ten(bench, sender, receiver, body: bytes) -> Row:
    """``complete_messages`` of ten received messages (one commit) against a delta-rs DELETE
    of ten rows appended in one commit (as the ten were sent)."""
    from sbdelta import ServiceBusMessage

    rs_deletes = _delta_rs_deleter(bench.raw_path("latency-rs-delete-10"), body, BATCH)
    ours: List[float] = []
    raw: List[float] = []
    for rep in range(bench.sizes.latency_reps + 1):
        sender.send_messages([ServiceBusMessage(body) for _ in range(BATCH)])
        got: list = []
        while len(got) < BATCH:
            got += receiver.receive_messages(BATCH - len(got), max_wait_time=30)
        with Timer() as t:
            receiver.complete_messages(got)
        delete = rs_deletes()
        with Timer() as r:
            delete()
        if rep:  # the first warms both
            ours.append(t.seconds)
            raw.append(r.seconds)
    bench.echo(f"  complete_messages({BATCH}): {median(ours):.3f} s, delta-rs DELETE of "
               f"{BATCH} rows {median(raw):.3f} s")
    return Row("latency", f"complete_messages({BATCH} messages) median vs delta-rs", "s", False,
               median(ours), median(raw), f"{BATCH}-row delta-rs DELETE (median)",
               samples={"sbdelta_seconds": ours, "baseline_seconds": raw},
               params={"repetitions": bench.sizes.latency_reps, "body_bytes": KB,
                       "batch": BATCH})


def _receive_at_backlog(bench, body: bytes) -> List[Row]:
    """Issue 16: ``receive_messages(1)`` + ``complete_message`` on a warm client at a
    backlog of 10,000 (ten sends of 1,000), on a queue and on a 16-partition queue, each
    receive against a one-row delta-rs MERGE locking a row of a 10,000-row table."""
    from sbdelta import ServiceBusMessage

    s = bench.sizes
    backlog, rows = 10_000, []
    merge_one = _delta_rs_merger(bench.raw_path("latency-rs-merge"), body, backlog)
    for label, props in (("queue", {}), ("partitioned queue",
                                         {"enable_partitioning": True})):
        queue = bench.queue("latency-backlog", **props)
        sender = bench.client.get_queue_sender(queue)
        for _ in range(backlog // 1000):
            sender.send_messages([ServiceBusMessage(body) for _ in range(1000)])
        receiver = bench.client.get_queue_receiver(queue, max_wait_time=0)
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
        bench.echo(f"  latency at a 10k backlog ({label}): receive {median(took):.3f} s, "
                  f"complete {median(settled):.3f} s, delta-rs MERGE "
                  f"{median(base):.3f} s")
    return rows

def _new_process_send(bench, queue: str) -> Row:
    """Issue 16: a new Python process that imports sbdelta, creates a client and sends one
    message (a script written for the SDK, run once), against a new process that imports
    deltalake and appends one row to a table. Wall time of the whole process, both
    started the same way."""
    import subprocess
    import sys

    s = bench.sizes
    sbdelta_script = (
        "from sbdelta import ServiceBusClient, ServiceBusMessage\n"
        f"with ServiceBusClient({bench.ns!r}) as client:\n"
        f"    client.get_queue_sender({queue!r}).send_messages(ServiceBusMessage(b'x'))\n")
    raw = bench.raw_path("new-process-rs")
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
    bench.echo(f"  new process, import + client + send: {median(took):.2f} s, "
              f"import deltalake + append: {median(base):.2f} s")
    return Row("latency", "new process: import sbdelta, create client, send one message "
               "(median)", "s", False, median(took), median(base),
               "new process: import deltalake, one-row append (median)",
               samples={"sbdelta_seconds": took, "baseline_seconds": base},
               params={"repetitions": s.latency_reps, "target_seconds": 2})
