"""The inbox: senders' blind appends, and how receivers find what they have not registered yet.

Receivers read the inbox's change feed only for versions after a partition's frontier, so the
cost of a receive follows its batch and the commits it passes, not the backlog.
"""

from __future__ import annotations

import uuid
from typing import Dict, Iterable, Optional, Tuple

from .delta import find_commit, remove_files_quietly
from .layout import case_by_pid, pid_list, seq_sql, start_version


def append(store, df) -> Optional[Tuple[int, int]]:
    """Append inbox rows in one commit; returns its (version, rows written), read from the
    Delta log, or None when ``df`` had no rows (then nothing was committed).

    Appends only to the existing inbox: DataFrameWriterV2's ``append`` refuses a missing
    table, where ``df.write.mode("append")`` would create one in a deleted queue's folder.
    """
    token = f"sbdelta:{uuid.uuid4().hex}"
    before = store.latest_version(store.inbox_path)
    df.writeTo(f"delta.`{store.inbox_path}`").option("userMetadata", token).append()
    return find_commit(store.delta_log(store.inbox_path), token, before)


def inbox_range(store, pids: Iterable[int], frontiers: Dict[int, int], lo: int, hi: int):
    """Inbox rows of versions lo..hi in ``pids`` past each partition's frontier, with ``seq``."""
    from pyspark.sql import functions as F

    pids = sorted(set(pids))
    frontier_case = case_by_pid({p: frontiers.get(p, -1) for p in pids}, default="-1")
    return (store.spark.read.format("delta").option("readChangeFeed", "true")
            .option("startingVersion", lo).option("endingVersion", hi)
            .load(store.inbox_path)
            .where(f"_change_type = 'insert' AND pid IN ({pid_list(pids)})")
            .withColumn("seq", F.expr(seq_sql()))
            .where(f"seq > {frontier_case}"))


def scan_inbox(store, frontiers: Dict[int, int], need: int, latest: int):
    """Find unregistered inbox rows, reading as few commits as it can.

    Returns (rows DataFrame or None, last version read, available count per partition).
    Reads versions [lo, lo+window) and widens the window (x8) while fewer than ``need``
    rows turned up and newer versions exist, so the cost follows the batch, not the
    backlog.
    """
    lagging = {p: start_version(f) for p, f in frontiers.items()
               if start_version(f) <= latest}
    if not lagging:
        return None, latest, {}
    lo = min(lagging.values())
    window = 16
    while True:
        hi = min(latest, lo + window - 1)
        pids = [p for p, start in lagging.items() if start <= hi]
        df = inbox_range(store, pids, frontiers, lo, hi)
        counts = {r.pid: r.n for r in df.groupBy("pid").count()
                  .withColumnRenamed("count", "n").collect()}
        if sum(counts.values()) >= need or hi >= latest or window >= 4096:
            return df, hi, counts
        window *= 8


def purge_inbox(store, frontiers: Dict[int, int], *, dry_run: bool = False) -> int:
    """Remove the inbox files every partition frontier has passed; returns their rows.

    A send commit writes one file per partition, so a file holds the rows of one commit
    (its ``defaultRowCommitVersion``, kept by row tracking) in one partition. Files whose
    commit is wholly behind their partition's frontier are registered (copied into the
    messages table, or settled) and nobody reads them again. They are removed in one
    commit marked ``dataChange=false``: the change feed that receivers read past the
    frontier shows nothing for it, and senders (blind appends) never conflict with it.
    """
    # Versions <= done[p] are wholly behind the frontier of p (version 0 is the CREATE).
    done = {p: start_version(f) - 1 for p, f in frontiers.items()}
    where = " OR ".join(f"(partitionValues['pid'] = '{p}' AND defaultRowCommitVersion <= {v})"
                        for p, v in done.items() if v >= 1)
    if not where:
        return 0
    return remove_files_quietly(store.spark, store.inbox_path, where, dry_run=dry_run)[1]
