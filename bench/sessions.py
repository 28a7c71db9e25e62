"""Sessions (issue 14): a session receive against a queue receive at the same backlog, a sessions
receiver's bulk form, and a next-available loop in two processes.

Rows:

- ``receive_dataframe R from one session at backlog B over S sessions`` against
  ``receive_dataframe R`` from a queue holding the same rows (target <= 1.3x). Both entities are
  partitioned; each repetition opens another session holding R messages.
- ``sessions receiver: K sessions, one DataFrame`` (lock K sessions in one commit, receive
  their messages as one DataFrame, complete them in one commit) against the same receive and
  completion from a queue.
- ``next-available loop, 2 processes``: two worker processes (``bench.session_worker``, the
  default engine: delta-rs on a local namespace) take the next available session, receive and
  complete its messages, close it, until none is left: messages per second against the same
  two processes receiving and completing batches of the same size from a queue. Every hold is
  logged; two holds of one session that overlap in time are counted (must be 0).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import List

from .measure import KB, ROOT, Row, Timer, throughput_row


def _rows(bench, n: int, sessions: int, prefix: str, start: int = 0):
    """``n`` message rows whose session id is ``<prefix><id % sessions>``."""
    from pyspark.sql import functions as F

    return bench.source(n, KB, start=start).withColumn(
        "session_id", F.concat(F.lit(prefix), (F.col("message_id").substr(2, 20)
                                               .cast("bigint") % sessions).cast("string")))


def _fill_both(bench, session_queue: str, queue: str, df) -> None:
    bench.client.get_queue_sender(session_queue).send_dataframe(df)
    bench.client.get_queue_sender(queue).send_dataframe(df)


def run_sessions(bench) -> List[Row]:
    s = bench.sizes
    rows: List[Row] = []
    r, backlog, count = s.session_receive, s.session_backlog, s.session_count
    sq = bench.queue("sq", enable_partitioning=True, requires_session=True)
    q = bench.queue("qq", enable_partitioning=True)
    for at in range(0, backlog, s.backlog_chunk):
        _fill_both(bench, sq, q, _rows(bench, min(s.backlog_chunk, backlog - at), count, "s",
                                       start=at))
    # One session of R messages per repetition, sent after the backlog.
    for rep in range(s.reps):
        _fill_both(bench, sq, q, _rows(bench, r, 1, f"hot{rep}-", start=backlog + rep * r))
    queue_receiver = bench.client.get_queue_receiver(q, max_wait_time=0)
    sb, base = [], []
    for rep in range(s.reps):
        box = {}

        def session_receive():
            with bench.client.get_queue_receiver(sq, session_id=f"hot{rep}-0",
                                                 max_wait_time=0) as receiver:
                box["got"] = receiver.receive_dataframe(r).count()

        def queue_receive():
            box["q"] = queue_receiver.receive_dataframe(r).count()

        a, b = bench.pair(rep, session_receive, queue_receive)
        if box["got"] != r or box["q"] != r:
            raise RuntimeError(f"session receive got {box['got']}, queue {box['q']} of {r}")
        sb.append(a)
        base.append(b)
    rows.append(throughput_row(
        "sessions", f"receive_dataframe {r:,} from one session at backlog {backlog:,} over "
        f"{count:,} sessions", r, sb, base, "receive_dataframe of as many from a queue",
        batch=r, backlog=backlog, sessions=count))
    bench.echo(f"  session receive {r}: {rows[-1].sbdelta:,.0f} vs {rows[-1].baseline:,.0f}")
    rows.append(_group_row(bench))
    rows.append(_loop_row(bench))
    return rows


def _group_row(bench) -> Row:
    """A sessions receiver: K sessions locked in one commit, one DataFrame, one settle."""
    s = bench.sizes
    k, per = s.session_group, s.session_loop_messages
    n = k * per
    sb, base = [], []
    for rep in range(s.reps):
        sq = bench.queue("gq", enable_partitioning=True, requires_session=True)
        q = bench.queue("gqq", enable_partitioning=True)
        _fill_both(bench, sq, q, _rows(bench, n, k, "g"))
        box = {}

        def group():
            with bench.client.get_queue_sessions_receiver(sq, max_session_count=k,
                                                          max_wait_time=0) as receiver:
                df = receiver.receive_dataframe(n)
                box["got"] = receiver.complete_messages(df)

        def queue():
            receiver = bench.client.get_queue_receiver(q, max_wait_time=0)
            box["q"] = receiver.complete_messages(receiver.receive_dataframe(n))

        a, b = bench.pair(rep, group, queue)
        if box["got"] != n or box["q"] != n:
            raise RuntimeError(f"sessions receiver settled {box['got']}, queue {box['q']} of {n}")
        sb.append(a)
        base.append(b)
    row = throughput_row("sessions", f"sessions receiver: {k:,} sessions x {per} messages, "
                         "lock + receive_dataframe + complete", n, sb, base,
                         "receive_dataframe + complete_messages of as many from a queue",
                         batch=n, sessions=k)
    bench.echo(f"  sessions receiver {k}x{per}: {row.sbdelta:,.0f} vs {row.baseline:,.0f}")
    return row


def _loop_row(bench) -> Row:
    """Two processes taking next-available sessions until none is left, against two processes
    receiving batches of the same size from a queue."""
    s = bench.sizes
    sessions, per = s.session_loop_sessions, s.session_loop_messages
    n = sessions * per
    sq = bench.queue("lq", enable_partitioning=True, requires_session=True)
    q = bench.queue("lqq", enable_partitioning=True)
    _fill_both(bench, sq, q, _rows(bench, n, sessions, "l"))
    folder = bench.work / f"session-loop{next(bench._names)}"
    folder.mkdir(parents=True, exist_ok=True)
    seconds, holds = {}, []
    for kind, entity in (("sessions", sq), ("queue", q)):
        logs = [folder / f"{kind}{i}.log" for i in range(2)]
        seconds[kind] = _run_workers(bench, kind, entity, logs, per, folder / f"{kind}.go")
        records = [json.loads(line) for log in logs for line in log.read_text().splitlines()]
        done = sum(len(h["messages"]) for h in records)
        if done != n:
            raise RuntimeError(f"the {kind} loop settled {done} of {n} messages")
        if kind == "sessions":
            holds = records
    overlaps = _overlaps(holds)
    row = throughput_row("sessions", f"next-available loop over {sessions:,} sessions x {per} "
                         "messages, 2 processes", n, [seconds["sessions"]], [seconds["queue"]],
                         f"2 processes receiving batches of {per} from a queue",
                         sessions=sessions, holds=len(holds), overlapping_holds=overlaps,
                         sessions_per_second=sessions / seconds["sessions"])
    bench.echo(f"  next-available loop: {sessions / seconds['sessions']:,.1f} sessions/s, "
               f"{row.sbdelta:,.0f} msgs/s vs {row.baseline:,.0f}; overlapping holds: {overlaps}")
    if overlaps:
        raise RuntimeError(f"{overlaps} session holds overlapped: a session had two holders")
    return row


def _run_workers(bench, kind: str, entity: str, logs, per: int, go: Path) -> float:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = []
    for log in logs:
        out = open(str(log) + ".out", "w")
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "bench.session_worker", kind, bench.ns, entity, str(log),
             str(go), str(per)], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT))
        out.close()
    try:
        deadline = time.monotonic() + 600
        while not all(Path(str(log) + ".ready").exists() for log in logs):
            if any(p.poll() is not None for p in procs) or time.monotonic() > deadline:
                raise RuntimeError(f"a {kind} loop worker did not start: " + _tail(logs))
            time.sleep(0.1)
        with Timer() as t:
            go.write_text("go")
            for p in procs:
                p.wait(timeout=3600)
        if any(p.returncode for p in procs):
            raise RuntimeError(f"a {kind} loop worker failed: " + _tail(logs))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return t.seconds


def _overlaps(holds) -> int:
    """Pairs of consecutive holds of one session that overlap in time."""
    by_session = {}
    for h in holds:
        by_session.setdefault(h["session"], []).append(h)
    count = 0
    for hs in by_session.values():
        hs.sort(key=lambda h: h["start"])
        count += sum(1 for a, b in zip(hs, hs[1:]) if b["start"] < a["end"])
    return count


def _tail(logs) -> str:
    parts = []
    for log in logs:
        out = Path(str(log) + ".out")
        parts.append(f"{log.name}: {out.read_text()[-1500:] if out.exists() else ''}")
    return "\n".join(parts)

