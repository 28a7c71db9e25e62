"""Appends to several inboxes at once, written by ONE Spark job and committed by delta-rs.

A mover that delivers one range to many destinations (the syphon, PAIR-7) appended to each
destination with Spark and Delta's idempotent-write options. Each such append cost its
destination a rebuild of its snapshot's state (Delta 3.3.2 reads ``txnVersion`` from the
snapshot's computed state: three Spark jobs) and a shuffle of its own to number its rows:
about five jobs per destination, most of a syphon step's time (docs/benchmarks.md).

Here, when every destination's inbox is a local table delta-rs appends to
(:meth:`~sbdelta._store.engines.Engine.appends`) and a local staging folder is given:

1. ONE Spark job numbers every destination's rows (one window over destination and
   partition; the rows come as one DataFrame, each with its destination's index) and writes
   them as Parquet files below ``<staging>/<uuid>/_t=<i>/pid=<p>/``;
2. per destination, ONE delta-rs commit (side by side) adds its files, moved into the
   inbox's ``pid=<p>`` folders, with the idempotent-write record (``app_id``, ``version``)
   Spark's ``txnAppId``/``txnVersion`` writes make. The check that the version is not
   recorded yet is made on the snapshot the commit is made against, and a commit after it
   recording the same app id (delta-rs's or Spark's) makes delta-rs refuse this one
   (``CommitFailedError``): the commit is tried again (:func:`.delta.retry`) on the new
   snapshot, which then says the version is recorded, and nothing is added
   (:func:`.rs.append_once` does the same for rows built in Python).

Each file's statistics (row count, lowest and highest ``idx``: what :mod:`.rs_feed` counts
new rows by) come from its Parquet footer. Files staged for a destination that records the
version already are deleted; files moved into an inbox whose commit then lost to the same
version are left for VACUUM (never referenced by the log: nothing reads them). A run killed
part way leaves staged folders; a later staged append removes those older than
:data:`STALE_AFTER`.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from typing import List, Optional, Sequence, Tuple

from .._connect import is_connect
from . import rs
from .delta import retry
from .layout import INBOX_COLUMNS, INBOX_NAMES
from .literals import local_path

__all__ = ["staging_folder", "append_staged", "STALE_AFTER"]

#: Staged folders older than this (seconds) belong to a run that was killed: removed.
STALE_AFTER = 6 * 3600


def staging_folder(spark, staging: Optional[str], stores: Sequence[object]) -> Optional[str]:
    """The local folder of ``staging`` when the staged form can deliver to ``stores``: a
    classic Spark session (not Spark Connect: its files would land on the server's disk) and
    every store's inbox a local table delta-rs appends to. None: append with Spark."""
    if staging is None or not stores or is_connect(spark):
        return None
    if not all(store.engine.appends(store.inbox_path) for store in stores):
        return None
    return local_path(staging)


def append_staged(spark, folder: str, stores: Sequence[object], rows, app_id: str,
                  version: int, workers: int = 4) -> List[bool]:
    """Append ``rows`` to the inboxes of ``stores`` once per (``app_id``, ``version``),
    through ``folder`` (:func:`staging_folder`). ``rows`` are inbox rows without ``idx``,
    with ``seq`` (their order) and ``_t`` (the index of each row's store in ``stores``;
    a row whose ``_t`` is NULL is written to the stage's default partition and goes with it:
    a filter would make Spark compute the rows' columns again inside it).
    Returns per store whether it appended (False: its inbox recorded the version already)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from .._threads import run_side_by_side

    _remove_stale(folder)
    stage = os.path.join(folder, uuid.uuid4().hex)
    kinds = dict(INBOX_COLUMNS)
    numbered = rows.withColumn("idx", F.row_number().over(
        Window.partitionBy("_t", "pid").orderBy("seq")) - 1)
    try:  # the staged files go whatever happens: a failed or cancelled write's too
        (numbered.select("_t", *[F.col(n).cast(kinds[n]).alias(n) for n in INBOX_NAMES])
         .write.partitionBy("_t", "pid").parquet("file://" + stage))
        return run_side_by_side(None, [
            (lambda i=i, store=store: _commit(store, os.path.join(stage, f"_t={i}"), app_id,
                                              version))
            for i, store in enumerate(stores)], workers=workers)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _staged_files(where: str) -> List[Tuple[int, str]]:
    """(partition, file) of the Parquet files staged below ``where`` (``pid=<p>/...``)."""
    found = []
    if not os.path.isdir(where):
        return found  # the destination got no rows
    for entry in sorted(os.listdir(where)):
        if not entry.startswith("pid="):
            continue
        for name in sorted(os.listdir(os.path.join(where, entry))):
            if name.endswith(".parquet"):
                found.append((int(entry[4:]), os.path.join(where, entry, name)))
    return found


def _add_action(pid: int, name: str, path: str):
    """The add action of a staged file, ``pid=<p>/<name>`` in the inbox, with the statistics
    readers count rows by, read from its Parquet footer."""
    import pyarrow.parquet as pq
    from deltalake.transaction import AddAction

    meta = pq.read_metadata(path)
    column = next(j for j in range(meta.num_columns)
                  if meta.schema.column(j).path == "idx")
    low = high = None
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(column).statistics
        if stats is None or not stats.has_min_max:
            low = high = None
            break
        low = stats.min if low is None else min(low, stats.min)
        high = stats.max if high is None else max(high, stats.max)
    stats = {"numRecords": meta.num_rows}
    if low is not None:
        stats.update(minValues={"idx": low}, maxValues={"idx": high}, nullCount={"idx": 0})
    return AddAction(f"pid={pid}/{name}", os.path.getsize(path), {"pid": str(pid)},
                     int(os.path.getmtime(path) * 1000), True, json.dumps(stats))


def _commit(store, where: str, app_id: str, version: int) -> bool:
    """Add the files staged below ``where`` to ``store``'s inbox in one delta-rs commit that
    records (``app_id``, ``version``), unless the inbox records it already."""
    from deltalake import CommitProperties, Transaction

    staged = _staged_files(where)
    if not staged:
        return False
    actions: list = []  # the files' add actions, once they are moved into the inbox

    def attempt() -> bool:
        with rs.writing(store.inbox_path) as (local, table):
            done = table.transaction_version(app_id)
            if done is not None and int(done) >= version:
                if not actions:  # nothing moved in yet
                    shutil.rmtree(where, ignore_errors=True)
                return False
            if not actions:
                actions.extend(_move_in(local, pid, path) for pid, path in staged)
            before = table.version()
            table.create_write_transaction(
                actions, "append", table.schema(), ["pid"],
                commit_properties=CommitProperties(
                    app_transactions=[Transaction(app_id, int(version))]),
                post_commithook_properties=rs.post_commit_properties())
        rs.checkpoint_after(table, before)
        return True

    # A concurrent commit won (CommitFailedError): look again, its app ids too.
    return retry(attempt, what=f"staged append to {store.inbox_path}")


def _move_in(local: str, pid: int, path: str):
    """Move a staged file into the inbox at ``local`` (``pid=<p>/``); its add action. Only
    a partition folder is ever made: an inbox whose folder is gone raises, as a write to a
    deleted table does."""
    if not os.path.isdir(os.path.join(local, "_delta_log")):
        raise FileNotFoundError(f"the inbox table {local} is gone")
    folder = os.path.join(local, f"pid={pid}")
    try:
        os.mkdir(folder)
    except FileExistsError:
        pass
    name = f"part-staged-{uuid.uuid4().hex}.snappy.parquet"
    target = os.path.join(folder, name)
    action = _add_action(pid, name, path)
    shutil.move(path, target)
    return action


def _remove_stale(folder: str) -> None:
    """Remove staged folders a killed run left (older than :data:`STALE_AFTER`)."""
    try:
        entries = os.listdir(folder)
    except FileNotFoundError:
        return
    cutoff = time.time() - STALE_AFTER
    for entry in entries:
        path = os.path.join(folder, entry)
        try:
            if os.path.getmtime(path) < cutoff:
                shutil.rmtree(path, ignore_errors=True)
        except OSError:
            pass
