"""Workload 7: 2 receiver processes + 1 sender process on a 16-partition queue, for a fixed time.

Reports messages completed per second in total, Delta commit conflicts (and stale plans) per
successful receive, and checks from the workers' logs that no message was held by two valid
locks at once and none was completed twice. Baseline: the same shape on RabbitMQ.

With single-message calls (``--contention-batch 1``) it also runs the raw delta-rs shapes of
:mod:`.raw_contention` for the same time: the workload's commits made directly (1 appender, 2
lockers deleting one row per commit) and their ceiling (2 processes only deleting one row per
commit), each next to sbdelta's rate, and the ceiling next to RabbitMQ's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import List

from . import raw_contention
from .measure import KB, ROOT, Row, body_bytes


def _read(path: Path) -> List[dict]:
    if not path.exists():
        return []
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.endswith("\n")]


def run_contention(bench) -> List[Row]:
    s = bench.sizes
    queue = bench.queue("contention", enable_partitioning=True)
    # The workers warm up on this queue (each receiver receives and completes one batch, the
    # sender sends one) so that its tables, frontiers and plans are warm when the clock starts;
    # the prefill covers the warm-up batches.
    warm = queue
    bench.fill(queue, s.contention_prefill + 2 * s.contention_batch,
               s.contention_prefill + 2 * s.contention_batch)
    folder = bench.work / "contention"
    folder.mkdir(parents=True, exist_ok=True)
    go = folder / "go"
    roles = ["send", "receive", "receive"]
    logs = [folder / f"{role}{i}.log" for i, role in enumerate(roles)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    procs = []
    for role, log in zip(roles, logs):
        out = open(str(log) + ".out", "w")
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "bench.worker", role, bench.ns, queue, str(log), str(go),
             str(s.contention_seconds), str(s.contention_batch), warm,
             str(s.contention_prefetch)],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT))
        out.close()
    try:
        deadline = time.monotonic() + 600
        while not all(any(r["event"] == "ready" for r in _read(log)) for log in logs):
            dead = [p for p in procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise RuntimeError("a contention worker did not start: " + _tail(logs, procs))
            time.sleep(0.5)
        start = time.time() + 1
        go.write_text(repr(start))
        for p in procs:
            p.wait(timeout=s.contention_seconds + 900)
        if any(p.returncode for p in procs):
            raise RuntimeError("a contention worker failed: " + _tail(logs, procs))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    end = start + s.contention_seconds
    rows = _report(bench, logs, start, end)
    if s.contention_batch == 1:
        rows += _raw_rows(bench, rows[0])
    return rows


def _raw_rows(bench, rate: Row) -> List[Row]:
    """The raw delta-rs shapes (single-message commits) next to sbdelta's rate, and their
    ceiling next to RabbitMQ's: what any layer over per-message Delta commits could reach."""
    s = bench.sizes
    out = []
    for shape, name in (("workload", "1 appender + 2 lockers, a one-row DELETE per completion"),
                        ("ceiling", "2 processes only deleting, a one-row DELETE per commit")):
        got = raw_contention.run(bench, shape, s.contention_seconds, s.contention_prefetch,
                                 s.contention_prefill)
        bench.echo(f"  raw delta-rs {shape}: {got['completed_per_second']:.1f} completed/s "
                   f"({got['conflicts']} conflicts)")
        out.append(Row("contention", f"completed/s vs raw delta-rs {shape}", "msgs/s", True,
                       rate.sbdelta, got["completed_per_second"], f"raw delta-rs: {name}",
                       params={"raw": got}))
    ceiling = out[-1].baseline
    out.append(Row("contention", "raw delta-rs ceiling vs RabbitMQ (the most any layer over "
                   "per-message Delta commits reaches)", "msgs/s", True, ceiling, rate.baseline,
                   rate.baseline_name, rate.baseline_note, params={"raw": out[-1].params["raw"]}))
    return out


def _tail(logs, procs) -> str:
    parts = []
    for log, p in zip(logs, procs):
        out = Path(str(log) + ".out")
        text = out.read_text()[-1500:] if out.exists() else ""
        parts.append(f"{log.name} (exit {p.poll()}): {text}")
    return "\n".join(parts)


def _report(bench, logs, start: float, end: float) -> List[Row]:
    s = bench.sizes
    seconds = s.contention_seconds
    locks = defaultdict(list)
    completions = defaultdict(int)
    completed_in_window = completed = receives = conflicts = stale = lock_lost = sent = 0
    warm_up_lost = 0
    last = end
    for log in logs:
        for r in _read(log):
            event = r["event"]
            if event == "sent" and r["at"] <= end:
                sent += r["count"]
            elif event == "receive" and r["got"]:
                receives += 1
                conflicts += r["conflicts"]
                stale += r["stale"]
            elif event == "locked":
                locks[r["seq"]].append((r["start"], r["until"], r["token"]))
            elif event == "completed":
                for seq in r["seqs"]:
                    completions[seq] += 1
                completed += len(r["seqs"])
                last = max(last, r["at"])
                if r["at"] <= end:
                    completed_in_window += len(r["seqs"])
            elif event == "lock_lost":
                lock_lost += 1
            elif event == "warm_up_lock_lost":
                warm_up_lost += 1
    overlaps = 0
    for intervals in locks.values():
        intervals.sort()
        overlaps += sum(1 for (_, u1, _), (s2, _, _) in zip(intervals, intervals[1:])
                        if s2 < u1)
    twice = sum(1 for n in completions.values() if n > 1)
    proof = {"locks_checked": sum(len(v) for v in locks.values()),
             "messages_locked": len(locks), "double_locks": overlaps,
             "completed_twice": twice, "lock_lost_errors": lock_lost,
             "warm_up_locks_lost": warm_up_lost}
    if overlaps or twice:
        bench.echo(f"  CONTENTION VIOLATION: {proof}")
    # Workers start no operation after the window; one in flight then still finishes, so the
    # rate is every completion over the time from the start to the last completion.
    elapsed = last - start
    bench.echo(f"  contention: {completed} completed in {elapsed:.0f} s ({completed_in_window} "
               f"within the {seconds:.0f} s window), {receives} receives, {conflicts} "
               f"conflicts, {stale} stale plans; {proof}")
    params = {"seconds": seconds, "elapsed_to_last_completion": elapsed,
              "completed": completed, "completed_in_window": completed_in_window,
              "partitions": 16, "batch": s.contention_batch,
              "prefetch_count": s.contention_prefetch, "rabbitmq_prefetch": s.rabbit_prefetch,
              "prefill": s.contention_prefill, "sent_in_window": sent,
              "successful_receives": receives, "conflict_retries": conflicts,
              "stale_plan_retries": stale, **proof}
    rate = Row("contention", "completed/s, 2 receivers + 1 sender", "msgs/s", True,
               completed / elapsed,
               baseline_name="RabbitMQ, 2 consumers + 1 publisher", params=params)
    if bench.rabbit.available:
        got = bench.rabbit.contention(seconds, [body_bytes(i, KB)
                                                for i in range(s.contention_prefill)],
                                      s.contention_batch, s.rabbit_prefetch)
        rate.baseline = got["acked_per_second"]
        rate.params["rabbitmq"] = got
    else:
        rate.baseline_note = bench.rabbit.reason
    per_receive = Row("contention", "commit conflicts per successful receive",
                      "retries/receive", False,
                      (conflicts + stale) / receives if receives else 0.0,
                      baseline_name="(no baseline: RabbitMQ has no commit conflicts)",
                      baseline_note="n/a", params=params)
    double = Row("contention", "messages held by two valid locks", "messages", False,
                 float(overlaps), baseline_name=f"{proof['locks_checked']} locks checked",
                 baseline_note="must be 0", params=params)
    return [rate, per_receive, double]
