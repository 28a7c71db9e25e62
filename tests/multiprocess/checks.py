"""Checks over the JSON-lines logs of tests/workers/broker_worker.py (stress and load runs)."""

import json
import os
from collections import defaultdict
from typing import Iterable, List


def read_log(path) -> List[dict]:
    """The complete lines of a worker's log (a killed worker may leave half a line)."""
    if not os.path.exists(path):
        return []
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.endswith("\n")]


def check_every_message_once(records: Iterable[dict], queue: str, wanted: List[str]) -> None:
    """On ``queue``: every wanted message received and completed exactly once, no sequence
    number shared by two messages (SEND-3), none held by two valid locks at once (RECV-3)."""
    locks, completed, ids = defaultdict(list), defaultdict(list), {}
    for r in records:
        if r.get("queue") != queue:
            continue
        if r["event"] == "locked":
            locks[r["seq"]].append((r["start"], r["until"], r["token"]))
            ids[r["seq"]] = r["id"]
        elif r["event"] == "completed":
            completed[r["seq"]].append(r["token"])
    assert sorted(ids.values()) == sorted(wanted), queue
    assert len(ids) == len(wanted), queue
    assert all(len(tokens) == 1 for tokens in completed.values()), queue
    assert len(completed) == len(wanted), queue
    for seq, intervals in locks.items():
        intervals.sort()
        for (_, until, _), (start, _, _) in zip(intervals, intervals[1:]):
            assert start >= until, f"{queue}: message {seq} locked twice at once: {intervals}"
