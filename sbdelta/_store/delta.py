"""The seam between sbdelta and Delta: conflict retries, precondition guards, error mapping.

Every state change in sbdelta is ONE Delta operation whose condition carries its precondition.
When a precondition does not hold, the operation must write nothing; Delta's MERGE has no
"abort" clause, so a clause that hits a broken precondition evaluates ``raise_error`` with a
``SBDELTA_GUARD:<code>`` marker: the job fails, the transaction never commits, and
:func:`.guards.guard_code` recovers the code from the exception (:mod:`.guards`), and
:data:`GUARD_ERRORS` says which sbdelta error it raises.

Commit conflicts (Delta's optimistic concurrency) are not errors to the user: :func:`retry`
repeats the whole read-decide-write step with jittered backoff, and only after it keeps losing
raises :class:`~sbdelta.exceptions.CommitConflictError` (retryable).
"""

from __future__ import annotations

import logging
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Sequence, Tuple, TypeVar

from tenacity import (RetryError, Retrying, retry_if_exception, stop_after_attempt,
                      stop_after_delay, wait_fixed, wait_random_exponential)

from ..exceptions import (CommitConflictError, MessageLockLostError, MessageNotFoundError,
                          MessagingEntityAlreadyExistsError, MessagingEntityNotFoundError,
                          ServiceBusAuthorizationError,
                          ServiceBusError, ServiceBusQuotaExceededError)

from .._connect import is_connect
from . import history
from .faults import storage_fault, transient_error, transient_fault
from .guards import GuardTripped, guard_code
from .literals import sql_literal

log = logging.getLogger("sbdelta")
T = TypeVar("T")

# Delta's Python conflict classes share no usable base class; the Java names cover errors that
# arrive unconverted (for example wrapped in a Py4JJavaError from a JVM call).
_CONFLICT_NAMES = (
    "ConcurrentAppendException", "ConcurrentDeleteReadException",
    "ConcurrentDeleteDeleteException", "ConcurrentTransactionException",
    "ConcurrentWriteException", "MetadataChangedException", "ProtocolChangedException",
    "DeltaConcurrentModificationException",
)


def _conflict_classes() -> tuple:
    from delta import exceptions as dx

    return tuple(getattr(dx, name) for name in _CONFLICT_NAMES if hasattr(dx, name))


def _delta_rs_conflict() -> tuple:
    try:
        from deltalake.exceptions import CommitFailedError
    except ImportError:  # Python < 3.10: the package is not installed
        return ()
    return (CommitFailedError,)


#: The one table from guard codes to public errors. STALE never reaches a caller (it is retried).
GUARD_ERRORS = {
    "LOCK_LOST": MessageLockLostError,
    "EXISTS": MessagingEntityAlreadyExistsError,
    "NO_PARENT": MessagingEntityNotFoundError,
    "NOT_FOUND": MessagingEntityNotFoundError,
    "NOT_SCHEDULED": MessageNotFoundError,
}


def guard_error(tripped: GuardTripped, detail: str) -> ServiceBusError:
    """The public error for a tripped guard; ``detail`` says what failed and what to do."""
    return GUARD_ERRORS.get(tripped.code, ServiceBusError)(detail)


def is_conflict(exc: BaseException) -> bool:
    """True for Delta's optimistic-concurrency conflicts (retry the whole step)."""
    if isinstance(exc, _conflict_classes()):
        return True
    if isinstance(exc, _delta_rs_conflict()):  # delta-rs lost a race (its appends, rs.append)
        return True
    text = str(exc)
    return any(name in text for name in _CONFLICT_NAMES) and guard_code(exc) is None


@contextmanager
def storage_errors(what: str) -> Iterator[None]:
    """Raise a storage failure escaping the block as its sbdelta error (:func:`storage_fault`),
    the original as its cause; anything else as it is."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - re-raised unless the storage failed
        mapped = None if isinstance(exc, (GuardTripped, ValueError, TypeError)) \
            else storage_fault(exc, what)
        if mapped is None:
            raise
        raise mapped from exc


def run_guarded(action: Callable[[], T]) -> T:
    """Run one Delta operation, turning a tripped guard into :class:`GuardTripped`. A failure
    of the storage goes on as it is: :func:`retry` or the public call around it
    (:func:`storage_errors`) raises its sbdelta error, naming the operation."""
    try:
        return action()
    except Exception as exc:  # noqa: BLE001 - re-raised unless it is one of ours
        code = guard_code(exc)
        if code is not None and not is_conflict(exc):
            raise GuardTripped(code) from None
        raise


#: Process-local tallies of what :func:`retry` retried (read by the benchmarks; never reset).
retry_counts = {"conflict": 0, "stale": 0, "transient": 0}


def _should_retry(exc: BaseException) -> bool:
    """Conflicts, plans found stale by a ``STALE`` guard and transient storage failures
    (throttled, timed out, cut off: :func:`.faults.transient_fault`) are retried from scratch.
    A step re-reads what it decides on, and its commit is guarded, so repeating one whose
    commit landed unseen finds that commit: a receive re-plans, a settlement finds its lock
    gone (as the SDK's retried settlement does); a send appends again, as the SDK's retried
    send does (duplicate detection is the answer there, SEND-6)."""
    if is_conflict(exc):
        retry_counts["conflict"] += 1
        return True
    if isinstance(exc, GuardTripped) and exc.code == "STALE":
        retry_counts["stale"] += 1
        return True
    if not isinstance(exc, GuardTripped) and transient_fault(exc) is not None:
        retry_counts["transient"] += 1
        return True
    return False


@dataclass(frozen=True)
class RetryPolicy:
    """How :func:`retry` repeats a step that lost to a concurrent commit.

    Attributes:
        attempts: At most this many tries.
        max_seconds: And at most this long in total, once ``min_attempts`` tries were made (a
            single slow try, on a loaded machine, must not use up the whole budget).
        min_attempts: Tries made whatever the time.
        backoff: Seconds: the scale of the first wait (exponential: doubling, jittered).
        backoff_max: Seconds: no wait is longer.
        fixed: Wait ``backoff`` every time instead of doubling.
    """

    attempts: int = 40
    max_seconds: float = 120.0
    min_attempts: int = 5
    backoff: float = 0.05
    backoff_max: float = 2.0
    fixed: bool = False


#: Conflicts are normal under contention: many quick, jittered retries.
DEFAULT_RETRY = RetryPolicy()
_policy: ContextVar[RetryPolicy] = ContextVar("sbdelta_retry_policy", default=DEFAULT_RETRY)


@contextmanager
def retry_policy(policy: RetryPolicy) -> Iterator[None]:
    """Make ``policy`` the one :func:`retry` uses in this thread (or task) for the block: a
    client's ``retry_*`` options, set around each of its operations."""
    token = _policy.set(policy)
    try:
        yield
    finally:
        _policy.reset(token)


def retry(step: Callable[[], T], *, what: str) -> T:
    """Run ``step`` (read, decide, commit) until it commits without a Delta conflict or a
    transient storage failure, as often and as long as the current :class:`RetryPolicy`
    allows.

    Args:
        step: Re-reads whatever it decides on; it is called again from scratch after a conflict.
        what: Names the operation in logs and in the final error.

    Raises:
        CommitConflictError: Still conflicting after every try (retryable).
        ServiceBusServerBusyError, OperationTimeoutError, ServiceBusCommunicationError: The
            storage still throttled, timed out or cut off after every try
            (:func:`.faults.transient_error`).
        ServiceBusAuthorizationError, ServiceBusQuotaExceededError, ...: The storage failed
            (:func:`storage_fault`).
    """
    policy = _policy.get()
    wait = (wait_fixed(policy.backoff) if policy.fixed
            else wait_random_exponential(multiplier=policy.backoff, max=policy.backoff_max))
    retrying = Retrying(
        retry=retry_if_exception(_should_retry),
        stop=stop_after_attempt(policy.attempts) | (
            stop_after_delay(policy.max_seconds)
            & stop_after_attempt(min(policy.min_attempts, policy.attempts))),
        wait=wait,
        before_sleep=lambda state: log.debug("%s: commit conflict, retry %d", what,
                                             state.attempt_number),
        reraise=False,
    )
    try:
        return retrying(step)
    except RetryError as exc:
        tries, last = exc.last_attempt.attempt_number, exc.last_attempt.exception()
        if not isinstance(last, GuardTripped) and transient_fault(last) is not None:
            raise transient_error(last, what, tries) from last
        raise CommitConflictError(
            f"{what}: still losing to concurrent commits after {tries} "
            f"attempt{'' if tries == 1 else 's'}; try again") from exc.last_attempt.exception()
    except ServiceBusError:
        raise
    except Exception as exc:  # noqa: BLE001 - re-raised unless the storage failed
        mapped = None if isinstance(exc, GuardTripped) else storage_fault(exc, what)
        if mapped is not None:
            raise mapped from exc
        raise


def merge(spark, target: str, source, clauses: str):
    """``MERGE INTO delta.`target` AS t USING source AS s <clauses>``; returns the metrics row.

    ``source`` is a DataFrame, exposed under a unique temporary view name for this call.
    """
    import uuid

    view = f"sbdelta_src_{uuid.uuid4().hex}"
    source.createOrReplaceTempView(view)
    try:
        rows = run_guarded(lambda: spark.sql(
            f"MERGE INTO delta.`{target}` AS t USING {view} AS s {clauses}").collect())
    finally:
        spark.catalog.dropTempView(view)
    return rows[0] if rows else None


def delta_log(spark, path: str):
    """The table's DeltaLog (JVM object; Delta caches one per path). The calling thread's JVM
    thread gets ``spark`` as its active session first: Delta's snapshot reads need one where
    a prefetch of theirs failed (a checkpoint provider rebuilt in the caller's thread, after a
    concurrent log trim), and a Python thread other than the one that made the session (a
    maintenance loop's thread, a notebook's worker thread) has none, so compaction in such a
    thread failed with DELTA_SPARK_SESSION_NOT_SET."""
    jvm = spark.sparkContext._jvm
    jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
    return jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)


def find_commit(log, token: str, after: int) -> Optional[Tuple[int, int]]:
    """(version, rows written) of the commit after version ``after`` whose ``userMetadata`` is
    ``token``, read from the log's commit files (no Spark job); None when there is none (Delta
    records no commit for a write of no rows)."""
    from py4j.protocol import Py4JError

    try:
        changes = log.getChanges(after + 1, False)  # Delta 3.x and 4.0/4.1
    except Py4JError:  # later Delta: getChanges(startVersion, catalogTable, failOnDataLoss)
        changes = log.getChanges(after + 1, getattr(log, "getChanges$default$2")(), False)
    while changes.hasNext():
        entry = changes.next()
        actions = entry._2()
        for i in range(actions.size()):
            info = actions.apply(i)
            if info.getClass().getSimpleName() != "CommitInfo":
                continue
            meta = info.userMetadata()
            if meta.isDefined() and meta.get() == token:
                metrics = info.operationMetrics()
                rows = metrics.get().get("numOutputRows") if metrics.isDefined() else None
                if rows is None or not rows.isDefined():
                    raise RuntimeError(
                        f"commit {entry._1()} records no numOutputRows: sbdelta counts sent "
                        "messages from it; keep spark.databricks.delta.history.metricsEnabled on")
                return int(entry._1()), int(rows.get())
    return None


def latest_snapshot(spark, path: str):
    """(DeltaLog, its latest snapshot): a listing of the log, no Spark job."""
    log_ = delta_log(spark, path)
    none = spark.sparkContext._jvm.scala.Option.empty
    return log_, log_.update(False, none(), none())


def latest_version(spark, path: str) -> int:
    """A Delta table's latest committed version (-1: no table): a listing of its log, no Spark
    job (over Spark Connect, ``DESCRIBE HISTORY``: :mod:`.history`)."""
    if is_connect(spark):
        return history.latest_version(spark, path)
    return int(latest_snapshot(spark, path)[1].version())


def commit_of(spark, path: str, token: str, after: int) -> Optional[Tuple[int, int]]:
    """:func:`find_commit` of the table at ``path``, through SQL over Spark Connect."""
    if is_connect(spark):
        return history.commit_of(spark, path, token, after)
    return find_commit(delta_log(spark, path), token, after)


def table_exists(spark, path: str) -> bool:
    """Whether ``path`` holds a Delta table."""
    if is_connect(spark):
        return history.table_exists(spark, path)
    from delta.tables import DeltaTable

    return DeltaTable.isDeltaTable(spark, path)


def materialize(df):
    """``df`` computed once, as a DataFrame that does not change when the tables it read do:
    a local checkpoint (on Spark Connect, where there is none, :func:`.history.frozen`)."""
    if is_connect(df.sparkSession):
        return history.frozen(df)
    return df.localCheckpoint(eager=True)


#: Up to this many rows and characters of SQL, small source rows travel as a literal VALUES
#: relation: Delta's MERGE need not materialize it (it does a Python RDD: one more job).
LITERAL_ROWS, LITERAL_CHARS = 2000, 8 << 20


def values_relation(spark, data: Sequence[tuple], columns: Sequence[Tuple[str, str]]):
    """A DataFrame of the tuples ``data`` with ``columns`` ((name, SQL type) pairs): a literal
    VALUES relation when small, else one built by ``createDataFrame``."""
    if 0 < len(data) <= LITERAL_ROWS:
        rows, size = [], 0
        for row in data:
            text = "(" + ", ".join(f"CAST({sql_literal(v)} AS {kind})"
                                   for v, (_, kind) in zip(row, columns)) + ")"
            size += len(text)
            if size > LITERAL_CHARS:
                break
            rows.append(text)
        else:
            names = ", ".join(name for name, _ in columns)
            return spark.sql(f"SELECT * FROM VALUES {', '.join(rows)} AS v({names})")
    return spark.createDataFrame(list(data), ", ".join(f"{n} {k}" for n, k in columns))


def create_table(spark, path: str, columns: str, *, partitioned_by: str = "",
                 properties: str = "") -> None:
    """CREATE TABLE IF NOT EXISTS at ``path``; a concurrent creator winning is fine."""
    statement = f"CREATE TABLE IF NOT EXISTS delta.`{path}` ({columns}) USING delta"
    if partitioned_by:
        statement += f" PARTITIONED BY ({partitioned_by})"
    if properties:
        statement += f" TBLPROPERTIES ({properties})"

    def step():
        import time

        try:
            spark.sql(statement)
        except Exception as exc:  # noqa: BLE001 - another process may have created it first
            if isinstance(storage_fault(exc, statement), (ServiceBusAuthorizationError,
                                                          ServiceBusQuotaExceededError)):
                raise  # refused, read-only or full: no creator to wait for
            # A creator in another process may be between writing files and committing
            # version 0: give it a moment before calling the folder foreign.
            for _ in range(40):
                if table_exists(spark, path):
                    return
                time.sleep(0.25)
            raise

    retry(step, what=f"create table {path}")


# -- table maintenance ------------------------------------------------------------------------
def optimize(spark, path: str, engine=None) -> Tuple[int, int]:
    """OPTIMIZE (bin-packing compaction) of one table; returns (files removed, files added).

    Retried when a concurrent writer removed a file it was compacting. Where ``engine`` (an
    :class:`~sbdelta._store.engines.Engine`) lets delta-rs read the table, a table with at
    most one file per partition is left alone without a Spark job; where it lets delta-rs
    commit to it, delta-rs compacts it (no Spark job; retried when any commit but an append
    landed meanwhile), else Spark's OPTIMIZE.
    """
    from . import rs, rs_tables

    if (engine is not None and engine.reads(path)
            and rs_tables.most_files_in_a_partition(path) in (0, 1)):
        return 0, 0  # one file per partition at most: nothing to bin-pack, no Spark job
    if engine is not None and engine.settles(path):
        return retry(lambda: rs.optimize(path), what=f"optimize {path}")

    def step():
        rows = spark.sql(f"OPTIMIZE delta.`{path}`").collect()
        metrics = rows[0].metrics if rows else None
        if metrics is None:
            return 0, 0
        return int(metrics.numFilesRemoved or 0), int(metrics.numFilesAdded or 0)

    return retry(step, what=f"optimize {path}")


def last_checkpoint_version(spark, path: str) -> int:
    """The version of the table's latest checkpoint (-1 if none), from ``_last_checkpoint``."""
    last = delta_log(spark, path).readLastCheckpointFile()
    return int(last.get().version()) if last.isDefined() else -1


def checkpoint(spark, path: str, *, dry_run: bool = False, engine=None) -> Tuple[bool, int]:
    """Checkpoint the table at its latest version unless a checkpoint of that version exists.
    Where ``engine`` lets delta-rs commit to the table, delta-rs writes it
    (:func:`.rs_tables.checkpoint`, no Spark job).

    Returns (written, latest checkpoint version). Delta also writes one every
    ``delta.checkpointInterval`` commits from the committing process; this one makes log replay
    short right after maintenance. It goes through ``DeltaLog.checkpoint``, the call Delta's own
    post-commit hook makes, which logs and swallows a failed checkpoint (a checkpoint is an
    optimisation, never needed for correctness). Checkpointing a snapshot object twice makes
    Delta 3.3 log DELTA_CHECKPOINT_SNAPSHOT_MISMATCH (its file counter runs over a cached
    state) although the file it wrote is right, so a version already checkpointed, by Delta or
    by another copy of this job, is skipped. Two copies racing on one version each write a
    complete file of the same state; the last rename wins.
    """
    if engine is not None and engine.settles(path):
        from . import rs_tables

        done = rs_tables.checkpoint(path, dry_run=dry_run)
        if done is not None:
            return done
    if is_connect(spark):
        return False, -1  # no DeltaLog to call: Delta checkpoints at its interval (compact)
    log_, snapshot = latest_snapshot(spark, path)
    before = last_checkpoint_version(spark, path)
    if snapshot.version() < 0 or before >= snapshot.version():
        return False, before
    if dry_run:
        return True, before
    log_.checkpoint(snapshot, spark.sparkContext._jvm.scala.Option.empty())
    after = last_checkpoint_version(spark, path)
    if after < snapshot.version():
        log.warning("checkpoint of %s at version %d was not written (see Delta's log); "
                    "Delta will write one at its next interval", path, snapshot.version())
    return after >= snapshot.version(), after


def remove_files_quietly(spark, path: str, where: str, *,
                         select: Optional[Callable[[int], Callable[[str, dict], bool]]] = None,
                         dry_run: bool = False) -> Tuple[int, int]:
    """Remove the files of a table that match ``where`` in one commit marked
    ``dataChange=false``, so that change-data-feed readers do not see it.

    ``where`` is SQL over Delta's AddFile fields (``path``, ``partitionValues`` ...). With
    ``select``, ``select(snapshot version)`` returns a test ``(path, partition values) -> bool``
    that each matching file must also pass (for choices the snapshot alone cannot make, such as
    which commit added a file). Only for rows nobody may read again. Returns (files, rows)
    removed (or, with ``dry_run``, that would be). A concurrent removal of the same files makes
    it retry.
    """
    import time as _time

    jvm, log_ = spark.sparkContext._jvm, delta_log(spark, path)
    as_java = jvm.scala.collection.JavaConverters

    def step():
        txn = log_.startTransaction()
        snapshot = txn.snapshot()
        files = snapshot.allFiles().filter(
            jvm.org.apache.spark.sql.functions.expr(where)).collectAsList()
        wanted = select(int(snapshot.version())) if select is not None else None
        rows, removes = 0, jvm.java.util.ArrayList()
        now = int(_time.time() * 1000)
        for i in range(files.size()):
            add = files.get(i)
            if wanted is not None and not wanted(
                    str(add.path()), dict(as_java.mapAsJavaMap(add.partitionValues()))):
                continue
            records = add.numLogicalRecords()
            rows += int(records.get()) if records.isDefined() else 0
            removes.add(add.removeWithTimestamp(now, False))
        if removes.size() and not dry_run:
            operation = getattr(getattr(jvm.org.apache.spark.sql.delta,
                                        "DeltaOperations$ManualUpdate$"), "MODULE$")
            txn.commit(as_java.asScalaBufferConverter(removes).asScala().toSeq(), operation)
        return removes.size(), rows

    return retry(lambda: run_guarded(step), what=f"remove files of {path}")


_RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
#: From Delta 4.1 (delta-io/delta#5028) VACUUM ignores a ``RETAIN n HOURS`` other than 0 and
#: keeps the table's ``delta.deletedFileRetentionDuration`` (7 days) instead, unless this is
#: false: a user's ``retain_hours`` would not apply (a shorter one keeps files a week, a longer
#: one, kept for time travel, is cut to a week). Earlier Delta versions do not know the
#: setting and honour RETAIN anyway.
_RETENTION_WINDOW_IGNORE = "spark.databricks.delta.vacuum.retentionWindowIgnore.enabled"


#: Delta 4.2+ (and Databricks Runtime 18) refuses to read a table version older than its
#: ``delta.deletedFileRetentionDuration`` unless this is false. sbdelta's own sessions set it
#: (``sbdelta._spark``); a user's session may not, and a partition lagging longer than that
#: must still read the inbox's change feed from its frontier (compaction never vacuums what a
#: frontier still reads): :func:`inbox.inbox_range` reads with it off. Earlier Delta versions
#: do not know it.
TIME_TRAVEL_CHECK = ("spark.databricks.delta.vacuum."
                     "enforceTimeTravelWithinDeletedFileRetentionDuration")


@contextmanager
def session_settings(spark, settings) -> Iterator[None]:
    """Give the session ``settings`` (a mapping of Spark SQL settings) for the block, then put
    back what it had. Settings it has already are not touched (a concurrent user of the
    session never sees them change)."""
    current = {key: spark.conf.get(key, None) for key in settings}
    previous = {key: current[key] for key, value in settings.items() if current[key] != value}
    for key in previous:
        spark.conf.set(key, settings[key])
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def vacuum(spark, path: str, retain_hours: float, *, dry_run: bool = False,
           engine=None) -> int:
    """VACUUM one table, keeping files removed less than ``retain_hours`` ago; returns the
    number of files deleted (or, with ``dry_run``, that would be). A local table that delta-rs
    finds nothing to delete in is left alone (Spark's own dry run rebuilds the snapshot and
    lists every file: most of a compaction round's time when nothing is old enough); ``engine``
    says whether delta-rs may look (as for :func:`optimize`)."""
    from . import rs_tables

    if (engine is not None and engine.reads(path)
            and rs_tables.vacuum_candidates(path, retain_hours) == 0):
        return 0
    retain = f"RETAIN {retain_hours:g} HOURS"
    settings = {_RETENTION_WINDOW_IGNORE: "false"}
    if retain_hours < 168:
        # Delta refuses short retention unless told; the caller chose it knowingly.
        settings[_RETENTION_CHECK] = "false"
    with session_settings(spark, settings):
        found = spark.sql(f"VACUUM delta.`{path}` {retain} DRY RUN").count()
        if found and not dry_run:
            spark.sql(f"VACUUM delta.`{path}` {retain}").collect()
        return found
