"""delta-rs (``deltalake``) on local tables: answers that need no Spark job, the inbox append
of ``send_messages``, and (with ``engine="delta-rs"``) settlements and the MERGEs the driver
builds (the delta-rs engine, issue 16). Which of these run is the caller's engine's choice
(:mod:`.engines`); the functions here only do them.

Spark answers the reads too, at the cost of a snapshot rebuild and a job or two each; on a
local namespace delta-rs reads the same log in milliseconds. Every read returns None when it
cannot answer (a remote table, ``deltalake`` not installed on Python < 3.10, or any error),
and the caller then asks Spark: the answers only decide whether Spark work is needed.

:func:`append` commits a send's inbox rows in about 10 ms where a Spark append takes 0.3-1.5
s; :func:`delete` and :func:`update` settle one message in about 36 ms where Spark's DELETE or
UPDATE takes 1-2 s. Conflicts are Delta's
either way: a delta-rs DELETE whose file a Spark MERGE rewrote meanwhile fails with
CommitFailedError (retried), and the other way round. Both engines commit a local table's log
entries with the same atomic create-if-absent (a hard link; sbdelta's Spark log store does the
same, :mod:`sbdelta._java`), so Spark and delta-rs writers in different processes do not
overwrite each other's commits (``tests/multiprocess``: the stress test's sender appends
through delta-rs while Spark receivers, sweeps and compactions commit).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
import os
import threading
import uuid
from collections import OrderedDict
from contextlib import contextmanager
from typing import Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from .datafusion import translate
from .literals import local_path
from .layout import LOG_FILE

log = logging.getLogger("sbdelta")


def local_table(path: Optional[str]) -> Optional[str]:
    """The local path of ``path`` when delta-rs can work on it (a ``file:`` table, ``deltalake``
    importable), else None. Whether it should is the caller's engine's to say
    (:class:`~sbdelta._store.engines.Engine`)."""
    local = None if path is None else local_path(path)
    if local is None or not _installed():
        return None
    return local


@functools.lru_cache(maxsize=None)
def _installed() -> bool:
    return importlib.util.find_spec("deltalake") is not None


#: Tables a thread keeps open (least recently used dropped first).
OPEN_TABLES = 32
#: An open table that has moved on this many versions since it was opened is opened afresh.
#: delta-rs (1.6) keeps the files an open table gains by each commit and each update as one
#: more Arrow batch of its state, and every later operation walks all of them: a one-row
#: append through one open table took 6 ms at first and 118 ms 1,250 commits later, where a
#: fresh open of that table took 9 ms and an append through it 21 ms (docs/benchmarks.md).
REOPEN_AFTER = 20


class _OpenTables(threading.local):
    """Each thread's open DeltaTables by local path, with the version each was opened at:
    opening one replays its log from the last checkpoint (15-25 ms for a busy queue's inbox),
    bringing an open one up to date reads only the commits since (1-5 ms), and a receive
    reads each of its tables several times."""

    def __init__(self) -> None:
        self.tables: "OrderedDict[str, object]" = OrderedDict()
        self.opened: Dict[str, int] = {}


_open_tables = _OpenTables()


def _latest(local: str):
    """The table at ``local`` at its latest version, as a fresh open would give it. An open
    one is reused only while its log still holds what a fresh open reads (:func:`_log_state`):
    a table removed outside sbdelta, or a commit file of it lost, is opened afresh and raises
    as a fresh open does. An open table whose log has no commit after its version is returned
    as it is: bringing it up to date would replay its log segment for nothing (about 5 ms on a
    queue's messages table, several times per receive). One that would then be
    :data:`REOPEN_AFTER` versions or more past the version it was opened at is opened afresh.
    Errors propagate."""
    from deltalake import DeltaTable

    table = _open_tables.tables.pop(local, None)
    if table is not None:
        try:
            whole, newest = _log_state(local, table.version())
            if not whole or newest - _open_tables.opened.get(local, newest) >= REOPEN_AFTER:
                table = None
            elif newest > table.version():
                table.update_incremental()
        except Exception:  # noqa: BLE001 - opened afresh below, which raises if it must
            table = None
    if table is None:
        table = DeltaTable(local)
        _open_tables.opened[local] = table.version()
    _open_tables.tables[local] = table
    while len(_open_tables.tables) > OPEN_TABLES:
        dropped, _ = _open_tables.tables.popitem(last=False)
        _open_tables.opened.pop(dropped, None)
    return table


def _log_state(local: str, version: int) -> Tuple[bool, int]:
    """Whether the log folder of the table at ``local`` still holds what a fresh open at
    ``version`` reads (the newest checkpoint at or below it and every commit file after that
    checkpoint up to it), and the newest commit version it holds.

    Asked of the files themselves, not of a listing: the checkpoint ``_last_checkpoint``
    names, the commits after it up to ``version`` (10 at most where checkpoints come every 10
    commits) and those after ``version`` until the first missing one. Listing a busy queue's
    log folder costs with its length (3.5 ms at 2,200 entries, several times per receive);
    these lookups do not. A checkpoint newer than ``version`` says the table is not whole (a
    fresh open from that checkpoint is cheaper than replaying up to it); a checkpoint of
    another form (multi-part, v2) or a missing hint is left to :func:`_listed_log_state`."""
    folder = os.path.join(local, "_delta_log")
    try:
        with open(os.path.join(folder, "_last_checkpoint"), encoding="utf-8") as hint:
            base = int(json.load(hint)["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return _listed_log_state(local, version)
    if base > version:
        return False, base
    if not os.path.exists(os.path.join(folder, f"{base:020d}.checkpoint.parquet")):
        return _listed_log_state(local, version)

    def committed(v: int) -> bool:
        return os.path.exists(os.path.join(folder, f"{v:020d}.json"))

    if not all(committed(v) for v in range(base + 1, version + 1)):
        return False, version
    newest = version
    while committed(newest + 1):
        newest += 1
    return True, newest


def _listed_log_state(local: str, version: int) -> Tuple[bool, int]:
    """:func:`_log_state` from one listing of the log folder (-1: no commit in it)."""
    commits, checkpoints = set(), set()
    for name in os.listdir(os.path.join(local, "_delta_log")):
        match = LOG_FILE.match(name)
        if match:
            (commits if match.group(2) == "json" else checkpoints).add(int(match.group(1)))
    base = max((c for c in checkpoints if c <= version), default=-1)
    whole = all(v in commits for v in range(base + 1, version + 1))
    return whole, max(commits, default=-1)


@contextmanager
def writing(path: str) -> Iterator[Tuple[str, object]]:
    """(local path, the table at its latest version) for one commit; the thread's open table
    is dropped when the commit fails (whatever state the failure left it in)."""
    local = local_table(path)
    table = _latest(local)
    try:
        yield local, table
    except BaseException:
        _open_tables.tables.pop(local, None)
        raise


def table_at(path: str):
    """The local table ``path`` at its latest version (this thread's open copy), None when
    ``path`` is not local."""
    local = local_table(path)
    if local is None:
        return None
    return _latest(local)


def table_ready(path: str, columns: Sequence[str], foreign: Sequence[str]) -> bool:
    """Whether the local table ``path`` exists, has every column of ``columns`` and none of
    the writer features ``foreign``; False when it lacks any, or delta-rs cannot say."""
    try:
        table = table_at(path)
        if table is None:
            return False
        features = table.protocol().writer_features or []
        have = {field.name.lower() for field in table.schema().fields}
        return (not any(f in features for f in foreign)
                and all(c.lower() in have for c in columns))
    except Exception as exc:  # noqa: BLE001 - Spark checks instead
        log.debug("delta-rs check of %s failed: %s", path, exc)
        return False


def rows(path: str) -> Optional[List[dict]]:
    """Every row of the table's latest version, or None."""
    try:
        table = table_at(path)
        return None if table is None else table.to_pyarrow_table().to_pylist()
    except Exception as exc:  # noqa: BLE001 - Spark reads it instead
        log.debug("delta-rs read of %s failed: %s", path, exc)
        return None


def select(path: str, where: str, limit: int) -> Optional[List[dict]]:
    """Up to ``limit`` rows of the table's latest version where ``where`` (Spark SQL as sbdelta
    writes it) holds, or None when delta-rs cannot answer."""
    try:
        table = table_at(path)
        if table is None:
            return None
        import pyarrow as pa
        from deltalake import QueryBuilder

        sql = f"SELECT * FROM m WHERE {translate(where)} LIMIT {int(limit)}"
        return pa.table(QueryBuilder().register("m", table).execute(sql).read_all()).to_pylist()
    except Exception as exc:  # noqa: BLE001 - Spark reads it instead
        log.debug("delta-rs read of %s failed: %s", path, exc)
        return None


class PartitionStats(NamedTuple):
    """One partition's line of a receive's statistics (:func:`partition_stats`)."""

    pid: int
    frontier: Optional[int]
    frontier_rev: Optional[int]
    claimable: int
    actions: int
    tombstones: int


def partition_stats(path: str, claimable: str, action: str, frontier_kind: str,
                    msg_kind: str, cancelled: str) -> Optional[Dict[int, PartitionStats]]:
    """Per partition of a local messages table: its frontier and the frontier row's revision,
    how many rows ``claimable`` and ``action`` (SQL both engines read, :mod:`.locks`) hold
    for, and how many cancellation tombstones it has. None when delta-rs cannot answer."""
    try:
        table = table_at(path)
        if table is None:
            return None
        import pyarrow as pa
        from deltalake import QueryBuilder

        sql = (f"SELECT pid, max(CASE WHEN kind = '{frontier_kind}' THEN seq END) AS frontier, "
               f"max(CASE WHEN kind = '{frontier_kind}' THEN rev END) AS frontier_rev, "
               f"sum(CASE WHEN {claimable} THEN 1 ELSE 0 END) AS claimable, "
               f"sum(CASE WHEN {action} THEN 1 ELSE 0 END) AS actions, "
               f"sum(CASE WHEN kind = '{msg_kind}' AND state = '{cancelled}' THEN 1 ELSE 0 END)"
               " AS tombstones FROM m GROUP BY pid")
        found = pa.table(QueryBuilder().register("m", table).execute(sql).read_all())
        return {r["pid"]: PartitionStats(**r) for r in found.to_pylist()}
    except Exception as exc:  # noqa: BLE001 - Spark counts instead
        log.debug("delta-rs statistics of %s failed: %s", path, exc)
        return None


def version(path: str) -> int:
    """The local table's latest version (delta-rs reads its log; errors propagate: only
    for tables the caller's engine gives to delta-rs)."""
    return int(_latest(local_table(path)).version())


def first_commit(path: str) -> int:
    """The first version whose commit file the local table's log still holds (compaction
    trims an inbox's log behind every frontier)."""
    import os

    names = os.listdir(os.path.join(local_table(path), "_delta_log"))
    return min(int(n[:20]) for n in names if n.endswith(".json") and n[:20].isdigit())


#: The name :func:`query` gives the table it reads.
QUERIED = "sbdelta_table"


def query(path: str, sql: str) -> List[dict]:
    """The rows of ``sql`` (Spark SQL as sbdelta writes it, :mod:`.datafusion` translates it)
    run by DataFusion with the local table ``path`` as :data:`QUERIED`. Errors propagate."""
    import pyarrow as pa
    from deltalake import QueryBuilder

    builder = QueryBuilder().register(QUERIED, _latest(local_table(path)))
    return pa.table(builder.execute(translate(sql)).read_all()).to_pylist()


def optimize(path: str) -> Tuple[int, int]:
    """Bin-pack the small files of the local table ``path`` (delta-rs's ``optimize.compact``:
    per partition, keeping the rows' order) in one commit that changes no data; returns (files
    removed, files added). Only for tables the engine lets delta-rs settle.

    Raises:
        deltalake.exceptions.CommitFailedError: a concurrent commit other than an append
            landed meanwhile (retry; delta-rs compacts only against appends).
    """
    with writing(path) as (_, table):
        before = table.version()
        metrics = table.optimize.compact(writer_properties=writer_properties(),
                                         post_commithook_properties=post_commit_properties())
    checkpoint_after(table, before)
    return int(metrics.get("numFilesRemoved", 0)), int(metrics.get("numFilesAdded", 0))


def append(path: str, names: Sequence[str], rows: Sequence[tuple]) -> int:
    """Append ``rows`` (tuples in ``names`` order) to the existing local table ``path`` in one
    commit; returns its version. Only for tables the engine lets delta-rs append to
    (:meth:`~sbdelta._store.engines.Engine.appends`).

    Raises:
        deltalake.exceptions.TableNotFoundError: no table there (it is never created here).
        deltalake.exceptions.CommitFailedError: lost to a concurrent commit (retry).
    """
    import pyarrow as pa
    from deltalake import CommitProperties, write_deltalake

    with writing(path) as (local, table):
        before = table.version()
        data = pa.Table.from_pylist([dict(zip(names, row)) for row in rows],
                                    schema=pa.schema(table.schema().to_arrow()))
        token = f"sbdelta:{uuid.uuid4().hex}"
        write_deltalake(table, data, mode="append", commit_properties=CommitProperties(
            custom_metadata={"userMetadata": token}), writer_properties=writer_properties(),
            post_commithook_properties=post_commit_properties())
        version = _version_of(local, token, before)
    checkpoint_after(table, before)
    return version


def txn_version(path: str, app_id: str) -> int:
    """The last idempotent-write version the local table ``path`` records for ``app_id``
    (-1: none), as Spark's ``txnAppId``/``txnVersion`` writes record it. Errors propagate."""
    found = _latest(local_table(path)).transaction_version(app_id)
    return -1 if found is None else int(found)


def append_once(path: str, names: Sequence[str], rows: Sequence[tuple], app_id: str,
                version: int) -> bool:
    """Append ``rows`` (as :func:`append`) to the local table ``path`` once per (``app_id``,
    ``version``), as Spark's ``txnAppId``/``txnVersion`` writes do: nothing is written when
    the table records that version or a later one for the app id. Returns whether it
    appended. delta-rs does not skip a recorded version itself: the check is made on the
    snapshot the commit is made against, and a commit after it that records the same app id
    (delta-rs's or Spark's) makes delta-rs refuse this one.

    Raises:
        deltalake.exceptions.CommitFailedError: lost to a concurrent commit (retry: the
            retry reads the version the winner recorded).
    """
    import pyarrow as pa
    from deltalake import CommitProperties, Transaction, write_deltalake

    with writing(path) as (_, table):
        done = table.transaction_version(app_id)
        if done is not None and int(done) >= version:
            return False
        before = table.version()
        data = pa.Table.from_pylist([dict(zip(names, row)) for row in rows],
                                    schema=pa.schema(table.schema().to_arrow()))
        write_deltalake(table, data, mode="append", commit_properties=CommitProperties(
            app_transactions=[Transaction(app_id, int(version))]),
            writer_properties=writer_properties(),
            post_commithook_properties=post_commit_properties())
    checkpoint_after(table, before)
    return True


def post_commit_properties():
    """What delta-rs itself does after every commit of sbdelta: nothing. Never a log cleanup
    (the inbox keeps every commit a frontier has not passed: compaction trims it,
    inbox.trim_log); the checkpoint is :func:`checkpoint_after`'s."""
    from deltalake import PostCommitHookProperties

    return PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)


def writer_properties():
    """How delta-rs writes sbdelta's Parquet files: Snappy, as Spark writes them. delta-rs's
    own default (ZSTD) costs 1.5-2 ms more per small file written, which a single
    settlement's rewrite of its message's file pays every time."""
    from deltalake import WriterProperties

    return WriterProperties(compression="SNAPPY")


#: The checkpoint interval of sbdelta's delta-rs commits to a table that sets none (tables
#: made by earlier versions; today's set 10): 10, Spark writers' default, where delta-rs's own
#: is 100 (:data:`REOPEN_AFTER` says why it matters). Compaction checkpoints every table at
#: its latest version besides.
_DEFAULT_CHECKPOINT_INTERVAL = 10


def checkpoint_after(table, before: int) -> None:
    """A checkpoint at the table's interval after the commit ``table`` (a DeltaTable that
    just committed) made, as Spark writers make, written after the commit and never failing
    it. delta-rs's own post-commit checkpoint raised its error from the operation that had
    committed (a full disk, issue 18): a send reported failed was in the queue, and its
    retry a duplicate. Like Spark's, a checkpoint that fails is logged: it is an
    optimisation, the next interval writes one."""
    try:
        version = table.version()
        if version == before:
            return  # nothing committed
        interval = int(table.metadata().configuration.get(
            "delta.checkpointInterval", _DEFAULT_CHECKPOINT_INTERVAL))
        if interval > 0 and version % interval == 0:
            table.create_checkpoint()
    except Exception as exc:  # noqa: BLE001 - the commit stands; see above
        log.warning("checkpoint of %s after its commit was not written (%s); the next "
                    "interval writes one", getattr(table, "table_uri", table), exc)


def delete(path: str, where: str) -> int:
    """``DELETE FROM path WHERE where`` in one delta-rs commit (none when no row matches);
    returns how many rows it deleted. ``where`` is Spark SQL as sbdelta writes it
    (:mod:`.datafusion` translates it). Only for tables the engine lets delta-rs settle
    (:meth:`~sbdelta._store.engines.Engine.settles`).

    Raises:
        deltalake.exceptions.CommitFailedError: lost to a concurrent commit (retry).
    """
    with writing(path) as (_, table):
        before = table.version()
        metrics = table.delete(translate(where), writer_properties=writer_properties(),
                               post_commithook_properties=post_commit_properties())
    checkpoint_after(table, before)
    return int(metrics.get("num_deleted_rows", 0))


def update(path: str, sets: Dict[str, str], where: str) -> int:
    """``UPDATE path SET column = expression, ... WHERE where`` in one delta-rs commit (none
    when no row matches); returns how many rows it updated. As :func:`delete`."""
    with writing(path) as (_, table):
        before = table.version()
        metrics = table.update(
            updates={name: translate(expr) for name, expr in sets.items()},
            predicate=translate(where), writer_properties=writer_properties(),
            post_commithook_properties=post_commit_properties())
    checkpoint_after(table, before)
    return int(metrics.get("num_updated_rows", 0))


def _version_of(local: str, token: str, before: int) -> int:
    """The version after ``before`` whose commitInfo carries ``token`` (read from the log's
    JSON files: the commit just made, whoever committed in between)."""
    version = before + 1
    while True:
        entry = os.path.join(local, "_delta_log", f"{version:020d}.json")
        try:
            with open(entry) as handle:
                lines = handle.read().splitlines()
        except FileNotFoundError:
            raise RuntimeError(f"delta-rs committed to {local} but no commit after version "
                               f"{before} carries its token {token}") from None
        for line in lines:
            if '"commitInfo"' in line:
                info = json.loads(line).get("commitInfo") or {}
                if info.get("userMetadata") == token:
                    return version
        version += 1
