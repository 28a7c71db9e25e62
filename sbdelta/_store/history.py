"""A Delta table's commits read through SQL, for Spark Connect sessions.

A Spark Connect client (Databricks serverless and shared clusters, ``SparkSession.builder
.remote(...)``) has no JVM in its process: Delta's ``DeltaLog`` and Hadoop's file system
cannot be called. What a queue operation asks of the log it asks here, of the server, in SQL:
``DESCRIBE HISTORY`` names every commit with its version, its ``userMetadata`` (a send's
token) and its operation metrics (the rows it wrote). A classic session reads the same
answers from its JVM (:mod:`.delta`); :func:`.delta.latest_version` and
:func:`.delta.commit_of` choose.
"""

from __future__ import annotations

from datetime import datetime
from typing import List, Optional, Tuple

__all__ = ["latest_commit", "latest_version", "commit_of", "table_exists", "table_features",
           "column_names", "txn_version", "readable", "frozen"]

#: Words of the errors Delta raises for a path that holds no Delta table.
_NOT_A_TABLE = ("is not a Delta table", "DELTA_MISSING_DELTA_TABLE", "PATH_NOT_FOUND",
                "DELTA_TABLE_NOT_FOUND", "doesn't exist", "does not exist")


def _history(spark, path: str, limit: int) -> List:
    """The newest ``limit`` commits of the table at ``path``, newest first."""
    return (spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT {int(limit)}")
            .select("version", "userMetadata", "operationMetrics").collect())


def _missing(exc: BaseException) -> bool:
    text = str(exc)
    return any(words in text for words in _NOT_A_TABLE)


def latest_commit(spark, path: str) -> Tuple[int, Optional[datetime]]:
    """(version, commit time) of the table's latest commit; (-1, None) when ``path`` holds no
    Delta table."""
    try:
        rows = (spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1")
                .select("version", "timestamp").collect())
    except Exception as exc:  # noqa: BLE001 - re-raised unless the table is not there
        if _missing(exc):
            return -1, None
        raise
    return (int(rows[0].version), rows[0].timestamp) if rows else (-1, None)


def latest_version(spark, path: str) -> int:
    """The table's latest version; -1 when ``path`` holds no Delta table."""
    return latest_commit(spark, path)[0]


def table_exists(spark, path: str) -> bool:
    """Whether ``path`` holds a Delta table (one with at least its first commit)."""
    return latest_version(spark, path) >= 0


def commit_of(spark, path: str, token: str, after: int) -> Optional[Tuple[int, int]]:
    """(version, rows written) of the commit after version ``after`` whose ``userMetadata``
    is ``token``, None when there is none. Reads the newest commits, more while the oldest
    read is still after ``after + 1`` (other writers committed in between)."""
    limit = 8
    while True:
        rows = _history(spark, path, limit)
        for row in rows:
            if row.version > after and row.userMetadata == token:
                written = (row.operationMetrics or {}).get("numOutputRows")
                if written is None:
                    raise RuntimeError(
                        f"commit {row.version} records no numOutputRows: sbdelta counts sent "
                        "messages from it; keep spark.databricks.delta.history.metricsEnabled "
                        "on")
                return int(row.version), int(written)
        if len(rows) < limit or min(r.version for r in rows) <= after + 1:
            return None
        limit *= 4


def table_features(spark, path: str) -> List[str]:
    """The table features the table's protocol names (``DESCRIBE DETAIL``; none for legacy
    protocols)."""
    rows = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").select("tableFeatures").collect()
    return list(rows[0].tableFeatures or []) if rows else []


def column_names(spark, path: str) -> List[str]:
    """The names of the table's columns, as its latest version has them."""
    return list(spark.read.format("delta").load(path).columns)


def txn_version(spark, path: str, app_id: str) -> int:
    """The last version the table records for the idempotent-write app id ``app_id`` (-1:
    none), as Delta's snapshot has it: the ``txn`` actions of its latest checkpoint and of
    the commits after it, read as data (a Delta log is JSON and Parquet files)."""
    from pyspark.sql import functions as F

    latest = latest_version(spark, path)
    if latest < 0:
        return -1
    log = f"{path.rstrip('/')}/_delta_log"
    try:
        mark = spark.read.json(f"{log}/_last_checkpoint").select("version").first()
    except Exception:  # noqa: BLE001 - no checkpoint yet: every commit file is still there
        mark = None
    start = int(mark.version) if mark is not None and mark.version is not None else -1
    found = []
    if start >= 0:
        found += (spark.read.parquet(f"{log}/{start:020d}.checkpoint*.parquet")
                  .where(F.col("txn.appId") == app_id).select("txn.version").collect())
    commits = [f"{log}/{v:020d}.json" for v in range(start + 1, latest + 1)]
    if commits:
        found += (spark.read.schema("txn STRUCT<appId: STRING, version: BIGINT>")
                  .json(commits).where(F.col("txn.appId") == app_id)
                  .select("txn.version").collect())
    return max((int(r.version) for r in found), default=-1)


def readable(spark, path: str) -> bool:
    """Whether the file ``path`` exists (the server resolves a read of it: no Spark job)."""
    try:
        spark.read.text(path).schema  # noqa: B018 - analysed by the server now
    except Exception as exc:  # noqa: BLE001 - re-raised unless the file is not there
        if _missing(exc):
            return False
        raise
    return True


def frozen(df):
    """``df``'s rows as they are now, as a DataFrame that does not change when the tables it
    read do. Spark Connect 3.5 has no ``localCheckpoint``: the rows travel to the client and
    back as a local relation (receives hand out batches a driver holds anyway)."""
    return df.sparkSession.createDataFrame(df.collect(), df.schema)
