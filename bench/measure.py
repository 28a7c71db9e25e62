"""What every workload measures with: sizes per mode, timers, peak memory, medians, table rows,
and the deterministic message bodies both sides of a comparison send."""

from __future__ import annotations

import hashlib
import os
import statistics
import threading
import time
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[1]
KB = 1024
#: How the rows of the raw Delta append baseline are named.
DELTA_APPEND = "raw Delta append"
#: Lock duration of the benchmarks' queues and subscriptions: a slow batch never loses its locks.
LOCK = timedelta(minutes=5)


@dataclass
class Sizes:
    """Every size a mode uses (messages unless said otherwise)."""

    reps: int
    send: Sequence[int]                       # send_dataframe / raw append, one commit each
    send_64k: Sequence[int]                   # the same with 64 KB bodies
    send_messages: Sequence[Tuple[int, int]]  # (messages, per send_messages call)
    receive: Sequence[int]                    # receive_dataframe and complete_messages sizes
    backlog: Sequence[int]                    # queue depths for workload 4
    backlog_receive: int                      # messages per receive in workload 4
    backlog_chunk: int                        # messages per send commit when filling
    latency_reps: int
    drain: int
    drain_chunk: int                          # messages per send commit in the drain
    drain_batch: int                          # messages per receive/complete in the drain
    drain_reps: int
    contention_seconds: float
    contention_prefill: int
    contention_batch: int
    #: the contention receivers' prefetch_count (0: none; --contention-prefetch)
    contention_prefetch: int = 0
    rabbit_prefetch: int = 1000
    maintenance_rounds: int = 20              # send/complete rounds before the compact job
    maintenance_batch: int = 200              # messages per round
    topic_send: int = 100                     # messages per topic send (workload topics)
    topic_subscriptions: Sequence[int] = (1, 2)  # subscription counts of the send rows
    topic_backlog: int = 200                  # topic backlog of the filtered receive (its
                                              # 10% per subscription >= topic_receive)
    topic_receive: int = 10                   # messages per filtered subscription receive
    topic_filtered_subscriptions: int = 2     # subscriptions, each a 10% SQL filter
    topic_fanout: int = 0                     # messages of the fan-out drain's topic (0: not
                                              # run; tiny mode leaves it to quick and full)
    topic_fanout_subscriptions: int = 2       # subscriptions it drains (every message each)
    topic_fanout_batch: int = 100             # messages per receive_dataframe/complete
    syphon: int = 0                           # backlog messages one syphon drain moves (0: not
                                              # run; tiny mode leaves it to quick and full)
    syphon_destinations: int = 2              # destination queues they are spread over
    session_backlog: int = 200                # session queue depth of the session receive
    session_count: int = 10                   # sessions the backlog is spread over
    session_receive: int = 20                 # messages per session receive (one session)
    session_group: int = 5                    # sessions one sessions receiver holds
    session_loop_sessions: int = 10           # sessions of the next-available loop
    session_loop_messages: int = 3            # messages per session in the loop (its batch)
    skip: Sequence[str] = ()                  # workloads left out unless named in --only


MODES: Dict[str, Sizes] = {
    # tiny: a smoke run (tests/jobs/test_bench_smoke.py); one repetition, figures mean nothing,
    # every size the least that still runs each code path (it is part of the test suite's time).
    "tiny": Sizes(reps=1, send=[100], send_64k=[], send_messages=[(100, 100)],
                  receive=[50], backlog=[100, 200], backlog_receive=20, backlog_chunk=100,
                  latency_reps=1, drain=100, drain_chunk=100, drain_batch=100, drain_reps=1,
                  contention_seconds=3, contention_prefill=100, contention_batch=10,
                  maintenance_rounds=1, maintenance_batch=10, topic_subscriptions=(2,),
                  topic_backlog=100),
    "quick": Sizes(reps=3, send=[1000, 10000], send_64k=[1000],
                   send_messages=[(2000, 1000), (10000, 5000)],
                   receive=[100, 1000], backlog=[10000, 50000], backlog_receive=1000,
                   backlog_chunk=10000, latency_reps=5, drain=10000, drain_chunk=10000,
                   drain_batch=5000, drain_reps=3, contention_seconds=15,
                   contention_prefill=3000, contention_batch=200, maintenance_batch=50,
                   topic_send=10000, topic_subscriptions=(1, 10), topic_backlog=20000,
                   topic_receive=1000, topic_filtered_subscriptions=10, topic_fanout=10000,
                   topic_fanout_subscriptions=10, topic_fanout_batch=5000,
                   syphon=100000, syphon_destinations=10,
                   session_backlog=10000, session_count=100, session_receive=1000,
                   session_group=100, session_loop_sessions=200, session_loop_messages=10,
                   # issue 4's 20-round maintenance benchmark alone takes ~8.5 minutes here:
                   # quick mode runs it only when asked (--only maintenance).
                   skip=("maintenance",)),
    "full": Sizes(reps=3, send=[10000, 100000, 1000000], send_64k=[10000],
                  send_messages=[(10000, 1000), (100000, 10000), (1000000, 10000)],
                  receive=[1000, 10000, 100000], backlog=[10000, 100000, 1000000],
                  backlog_receive=1000, backlog_chunk=10000, latency_reps=30, drain=1000000,
                  drain_chunk=100000, drain_batch=100000, drain_reps=3,
                  contention_seconds=120, contention_prefill=20000, contention_batch=500,
                  topic_send=10000, topic_subscriptions=(1, 10, 100), topic_backlog=100000,
                  topic_receive=10000, topic_filtered_subscriptions=10, topic_fanout=100000,
                  topic_fanout_subscriptions=10, topic_fanout_batch=100000,
                  syphon=1000000, syphon_destinations=10,
                  session_backlog=100000, session_count=1000, session_receive=1000,
                  session_group=1000, session_loop_sessions=1000, session_loop_messages=10),
}


# -- figures ------------------------------------------------------------------------------------
def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def p95(values: Sequence[float]) -> float:
    """Nearest-rank 95th percentile."""
    ordered = sorted(values)
    return float(ordered[max(0, -(-95 * len(ordered) // 100) - 1)])


@dataclass
class Row:
    """One line of the table: an sbdelta figure next to its baseline."""

    workload: str
    case: str
    unit: str                       # "msgs/s", "s", "MB", "conflicts/receive", ...
    higher_is_better: bool
    sbdelta: Optional[float]
    baseline: Optional[float] = None
    baseline_name: str = ""
    baseline_note: str = ""         # "not available: ..." when the baseline could not run
    samples: Dict[str, List[float]] = field(default_factory=dict)
    params: Dict[str, object] = field(default_factory=dict)

    @property
    def ratio(self) -> Optional[float]:
        if self.sbdelta is None or not self.baseline:
            return None
        return self.sbdelta / self.baseline

    @property
    def slower(self) -> Optional[float]:
        r = self.ratio
        if r is None or r == 0:
            return None
        return 1 / r if self.higher_is_better else r

    def to_json(self) -> dict:
        out = asdict(self)
        out["ratio"] = self.ratio
        out["slower"] = self.slower
        return out


def throughput_row(workload: str, case: str, n: int, sb_seconds: Sequence[float],
                   base_seconds: Optional[Sequence[float]], baseline_name: str,
                   **params) -> Row:
    """msgs/s from per-repetition durations: n / median duration."""
    row = Row(workload, case, "msgs/s", True, n / median(sb_seconds),
              baseline_name=baseline_name, params=dict(params, messages=n),
              samples={"sbdelta_seconds": list(sb_seconds)})
    if base_seconds:
        row.baseline = n / median(base_seconds)
        row.samples["baseline_seconds"] = list(base_seconds)
    return row


class Timer:
    def __enter__(self):
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.start


class PeakRss:
    """Samples the resident memory of this process and its children (the driver JVM)."""

    def __init__(self, pid: Optional[int] = None, interval: float = 0.2) -> None:
        self.pid = pid or os.getpid()
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_rss(self.pid))
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, tree_rss(self.pid))

    @property
    def mb(self) -> float:
        return self.peak / (1 << 20)


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _children(pid: int) -> List[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            return [int(c) for c in handle.read().split()]
    except OSError:
        return []


def tree_rss(pid: int) -> int:
    """RSS in bytes of ``pid`` and all its descendants (Linux /proc)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += _rss(p)
        todo += _children(p)
    return total


# -- machine -----------------------------------------------------------------------------------


def body_sql(size: int) -> str:
    """SQL for a deterministic body of ``size`` bytes: the row's SHA-512 hex, repeated."""
    return (f"cast(substring(repeat(sha2(cast(id as string), 512), {-(-size // 128)}), 1, "
            f"{size}) as binary)")


def body_bytes(i: int, size: int) -> bytes:
    """The same body as :func:`body_sql` for row ``i``, built in Python."""
    digest = hashlib.sha512(str(i).encode()).hexdigest()
    return (digest * -(-size // 128))[:size].encode()
