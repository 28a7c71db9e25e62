"""The contention workload's raw baseline: the Delta commits that single-message calls wrap,
made directly with delta-rs by 2 locker processes and 1 appender process on one plain table.

    python -m bench.raw_contention lock|append|delete <table> <log> <go file> <seconds> \
        <prefetch> <index> <prefilled rows>

This is the work a layer over per-message Delta commits has to do, whatever its protocol:
each locker locks ``prefetch`` rows (1: one) in one delta-rs UPDATE, rows of its own (the rows
are prefilled in files of 100, each file one locker's, as sbdelta's receive gathers the rows it
locks in files of their own: the two never want the same row or file, so there is no planning
and no stale read, only commits racing on one log), then deletes them one per commit (a
completion each), as sbdelta's receivers with ``prefetch_count`` do; the appender appends one
1 KB row per commit. Commits that lose a race are retried, and counted. Reported: rows deleted
per second over the window.

And the ceiling of any such layer: 2 processes that only delete one row per commit (each its
own files' rows; no appends, no locks), the least Delta work a single-message completion is;
and of any Delta writer at all: 2 processes that only append one row per commit (blind
appends, which never conflict), the cheapest commit there is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Dict

from .measure import KB, ROOT, body_bytes

#: Ids the appender writes start here, above any prefilled row.
APPENDED_FROM = 1 << 40


#: The raw table's properties: a checkpoint every 10 commits, as sbdelta's tables have
#: (delta-rs's default is 100).
TABLE_PROPERTIES = {"delta.checkpointInterval": "10"}

#: Rows per prefilled file; file ``b`` (ids ``b * BLOCK`` ..) is locker ``b % 2``'s.
BLOCK = 100


def prefill(path: str, rows: int) -> None:
    """``rows`` 1 KB rows (ids 0 ..), a file (a delta-rs append) per :data:`BLOCK`."""
    from deltalake import write_deltalake

    for first in range(0, rows, BLOCK):
        write_deltalake(path, _rows(range(first, min(rows, first + BLOCK))), mode="append",
                        configuration=TABLE_PROPERTIES if first == 0 else None)


def _own_ids(index: int, rows: int):
    """The ids worker ``index`` (0 or 1) takes, in order: its files' rows of the ``rows``
    prefilled."""
    for first in range(index * BLOCK, rows, 2 * BLOCK):
        yield from range(first, min(rows, first + BLOCK))


def _rows(ids) -> "object":
    import pyarrow as pa

    ids = list(ids)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "body": pa.array([body_bytes(i % 1000, KB) for i in ids], pa.binary()),
        "lock_token": pa.array([None] * len(ids), pa.string()),
        "locked_until": pa.array([None] * len(ids), pa.timestamp("us", tz="UTC")),
        "delivery_count": pa.array([0] * len(ids), pa.int32())})


#: Each worker opens its table afresh after this many commits, as sbdelta's delta-rs engine
#: does (``sbdelta._store.rs.REOPEN_AFTER``): an open table's operations slow down with every
#: commit it replays.
REOPEN_AFTER = 20


class _Table:
    """A worker's open table, reopened every :data:`REOPEN_AFTER` commits."""

    def __init__(self, path: str) -> None:
        self.path, self.commits = path, 0
        self.open()

    def open(self) -> None:
        from deltalake import DeltaTable

        self.table = DeltaTable(self.path)

    def run(self, action, counts: Dict[str, int]):
        """``action(table)`` until its commit lands; a lost race brings the table up to date
        first."""
        from deltalake.exceptions import CommitFailedError

        while True:
            try:
                got = action(self.table)
                break
            except CommitFailedError:
                counts["conflicts"] += 1
                self.table.update_incremental()
        self.commits += 1
        if self.commits % REOPEN_AFTER == 0:
            self.open()
        return got


#: The raw shapes: the workload (1 appender, 2 lockers) and the ceiling (2 deleters).
SHAPES = {"workload": [("append", 0), ("lock", 0), ("lock", 1)],
          "ceiling": [("delete", 0), ("delete", 1)],
          "appends": [("append", 0), ("append", 1)]}


def _deleted(table: "_Table", predicate: str, counts: Dict[str, int]) -> None:
    """One DELETE of one row (retried until it commits); a row not there is an error: the
    figure counts commits."""
    got = table.run(lambda t: t.delete(predicate), counts)
    if got.get("num_deleted_rows") != 1:
        raise RuntimeError(f"raw contention: DELETE WHERE {predicate} removed {got}")


def run(bench, shape: str, seconds: float, prefetch: int, rows: int) -> Dict[str, float]:
    """The raw ``shape`` (:data:`SHAPES`) for ``seconds`` on a table of ``rows`` prefilled
    rows: completed/s (rows deleted, over the window to the last deletion), commit conflicts."""
    folder = bench.work / f"raw-contention-{shape}"
    folder.mkdir(parents=True, exist_ok=True)
    table = str(bench.raw_path(f"raw-contention-{shape}"))
    prefill(table, rows)
    go = folder / "go"
    roles = SHAPES[shape]
    logs = [folder / f"{role}{index}.log" for role, index in roles]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = [subprocess.Popen([sys.executable, "-m", "bench.raw_contention", role, table,
                               str(log), str(go), str(seconds), str(max(1, prefetch)),
                               str(index), str(rows)], cwd=ROOT, env=env)
             for (role, index), log in zip(roles, logs)]
    try:
        deadline = time.monotonic() + 120
        while not all(log.exists() and "ready" in log.read_text() for log in logs):
            if any(p.poll() is not None for p in procs) or time.monotonic() > deadline:
                raise RuntimeError("a raw contention worker did not start")
            time.sleep(0.2)
        start = time.time() + 1
        go.write_text(repr(start))
        for p in procs:
            p.wait(timeout=seconds + 300)
        if any(p.returncode for p in procs):
            raise RuntimeError("a raw contention worker failed")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    done = conflicts = appended = 0
    last = start + seconds
    # What a shape completes: rows deleted; of the append-only shape, rows appended.
    completes = "appended" if shape == "appends" else "deleted"
    for log in logs:
        for line in log.read_text().splitlines():
            record = json.loads(line)
            if record["event"] == completes:
                done += 1
                last = max(last, record["at"])
            if record["event"] == "appended":
                appended += 1
            elif record["event"] == "done":
                conflicts += record["conflicts"]
    return {"shape": shape, "completed_per_second": done / (last - start), "completed": done,
            "appended": appended, "conflicts": conflicts, "seconds": seconds,
            "prefetch": max(1, prefetch), "prefill": rows}


def main(argv) -> None:
    from deltalake import write_deltalake

    role, table, log_path, go_file = argv[:4]
    seconds, prefetch, index, rows = float(argv[4]), int(argv[5]), int(argv[6]), int(argv[7])
    counts = {"conflicts": 0}
    dt = _Table(table)
    with open(log_path, "a") as log:
        def emit(**record):
            log.write(json.dumps(record) + "\n")
            log.flush()

        emit(event="ready")
        while not os.path.exists(go_file):
            time.sleep(0.02)
        time.sleep(0.05)
        start = float(Path(go_file).read_text())
        while time.time() < start:
            time.sleep(0.005)
        deadline = start + seconds
        next_id = APPENDED_FROM + (index << 32)
        own = _own_ids(index, rows)
        while time.time() < deadline:
            if role == "delete":
                i = next(own, None)
                if i is None:
                    break  # every row of its own deleted
                _deleted(dt, f"id = {i}", counts)
                emit(event="deleted", at=time.time())
                continue
            if role == "append":
                row = _rows([next_id])
                dt.run(lambda t: write_deltalake(t, row, mode="append"), counts)
                next_id += 1
                emit(event="appended", at=time.time())
                continue
            ids = [i for i in (next(own, None) for _ in range(prefetch)) if i is not None]
            if not ids:
                break  # every row of its own taken
            token = uuid.uuid4().hex
            listed = ", ".join(map(str, ids))
            dt.run(lambda t: t.update(
                {"lock_token": f"'{token}'", "locked_until": "now() + INTERVAL '5 minutes'",
                 "delivery_count": "delivery_count + 1"},
                predicate=f"id IN ({listed}) AND lock_token IS NULL"), counts)
            for i in ids:
                if time.time() >= deadline + 30:
                    break
                _deleted(dt, f"id = {i} AND lock_token = '{token}'", counts)
                emit(event="deleted", at=time.time())
        emit(event="done", **counts)


if __name__ == "__main__":
    main(sys.argv[1:])
