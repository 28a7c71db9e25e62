"""A probe (issue 16): single-message calls through one long-lived client, over time.

``python -m bench.endurance_probe loop [CYCLES]`` sends one message, receives one and
completes it, CYCLES times (default 1,000) on one queue of a new local namespace (engine
``delta-rs``, 1 KB bodies, 100 messages of backlog), and prints the median and mean seconds of
each call per fifth of the run. The harness's latency workload measures a few dozen calls on
fresh tables; this shows what a client that keeps running sees as the tables' files and logs
grow (compaction, which removes received inbox files, does not run here).

``python -m bench.endurance_probe raw [APPENDS] [REOPEN]`` is the raw delta-rs side: one-row
appends through one open ``DeltaTable`` (opened afresh every REOPEN appends when given),
medians per sixth of the run.
"""

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path


def _blocks(label: str, series, parts: int) -> None:
    size = max(1, len(next(iter(series.values()))) // parts)
    for start in range(0, size * parts, size):
        cells = " ".join(f"{name} {statistics.median(xs[start:start + size]):.4f}/"
                         f"{statistics.mean(xs[start:start + size]):.4f}"
                         for name, xs in series.items())
        print(f"{label} {start:>5}  {cells}  (median/mean s)", flush=True)


def loop(cycles: int) -> None:
    from sbdelta import ServiceBusClient, ServiceBusMessage
    from sbdelta.management import ServiceBusAdministrationClient

    root = Path(tempfile.mkdtemp(prefix="sbdelta-endurance-"))
    try:
        ServiceBusAdministrationClient(str(root), engine="delta-rs").create_queue("q")
        client = ServiceBusClient(str(root), engine="delta-rs")
        sender = client.get_queue_sender("q")
        receiver = client.get_queue_receiver("q", max_wait_time=0)
        sender.send_messages([ServiceBusMessage(b"x" * 1024) for _ in range(100)])
        series = {"send": [], "receive": [], "complete": []}
        for _ in range(cycles):
            t0 = time.perf_counter()
            sender.send_messages(ServiceBusMessage(b"y" * 1024))
            t1 = time.perf_counter()
            (message,) = receiver.receive_messages(max_message_count=1)
            t2 = time.perf_counter()
            receiver.complete_message(message)
            t3 = time.perf_counter()
            for name, seconds in zip(series, (t1 - t0, t2 - t1, t3 - t2)):
                series[name].append(seconds)
        client.close()
        _blocks("cycle", series, 5)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def raw(appends: int, reopen: int) -> None:
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    root = Path(tempfile.mkdtemp(prefix="sbdelta-endurance-raw-"))
    try:
        row = pa.table({"message_id": ["m"], "body": pa.array([b"y" * 1024], pa.binary())})
        write_deltalake(str(root), row)
        table, times = DeltaTable(str(root)), []
        for i in range(appends):
            t0 = time.perf_counter()
            if reopen and i % reopen == 0:
                table = DeltaTable(str(root))
            write_deltalake(table, row, mode="append")
            times.append(time.perf_counter() - t0)
        _blocks("append", {"append": times}, 6)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "loop"
    numbers = [int(a) for a in sys.argv[2:]]
    if what == "raw":
        raw(numbers[0] if numbers else 1500, numbers[1] if len(numbers) > 1 else 0)
    else:
        loop(numbers[0] if numbers else 1000)
