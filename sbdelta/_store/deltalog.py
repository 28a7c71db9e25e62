"""A Delta table's log, read and trimmed directly: table features, the commit that added each
file, and removal of commit files no reader needs.

Without row tracking, nothing in a table's snapshot says which commit added a file; the log's
commit files do (one JSON file per version, one ``add`` action per file it added). Delta's own
age-based log cleanup knows nothing of sbdelta's frontiers, so the inbox turns it off and
compaction trims the inbox log here, never past a version a receive may still read.
"""

from __future__ import annotations

import re
from typing import Callable, Dict, List, Optional

from .._connect import is_connect
from ..exceptions import StorageLayoutError
from . import history
from .delta import latest_snapshot
from .schema import FOREIGN_FEATURES

# Files of one version in _delta_log: its commit, its checksum, its checkpoint (any kind).
_VERSION_FILE = re.compile(r"^(\d{20})\.(json|crc|checkpoint\..+)$")
_SINGLE_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint\.parquet$")


def _log_dir(path: str) -> str:
    return f"{path.rstrip('/')}/_delta_log"


def _fs(spark, path: str):
    jvm = spark.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    return hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration()), jvm


def writer_features(spark, path: str) -> List[str]:
    """The writer table features the table's protocol names (none for legacy protocols)."""
    if is_connect(spark):
        return history.table_features(spark, path)
    protocol = latest_snapshot(spark, path)[1].protocol()
    names = str(protocol.writerFeatureNames().mkString(","))
    return [name for name in names.split(",") if name]


def require_portable(spark, path: str, what: str) -> None:
    """Raise :class:`StorageLayoutError` when the table uses a feature delta-rs cannot write.

    Only tables of sbdelta's first layout do (its inbox had row tracking, which brings domain
    metadata); Delta 3.3 cannot drop either feature, so such a queue is drained and re-created.
    """
    found = [f for f in FOREIGN_FEATURES if f in writer_features(spark, path)]
    if found:
        raise StorageLayoutError(
            f"{what}: table {path} was made by an older sbdelta storage layout; it uses the Delta "
            f"table feature(s) {', '.join(found)}, which delta-rs cannot write and Delta 3.3 "
            "cannot drop, so this version does not open it. To migrate: with the sbdelta "
            "version that made it, receive and settle every message of the queue and of its "
            "dead-letter queue; then delete the queue and create it again with this version "
            "(delete_queue and create_queue, or `sbdelta apply` with your config): the new "
            f"tables use none of {', '.join(FOREIGN_FEATURES)}")


def add_missing_columns(spark, path: str, columns) -> List[str]:
    """Add the ``(name, type)`` columns the table lacks (tables made before a column existed);
    returns the names added. Columns are only ever added at the end, nullable, so older rows
    read them as NULL. A concurrent process adding them first is fine."""
    from .delta import retry

    def missing() -> List:
        names = (history.column_names(spark, path) if is_connect(spark)
                 else latest_snapshot(spark, path)[1].schema().fieldNames())
        have = set(str(n).lower() for n in names)
        return [(n, t) for n, t in columns if n.lower() not in have]

    todo = missing()
    if not todo:
        return []

    def step():
        left = missing()
        if left:
            spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS "
                      f"({', '.join(f'{n} {t}' for n, t in left)})")

    retry(step, what=f"add columns to {path}")
    return [n for n, _ in todo]


def first_commit_file(spark, path: str, lo: int, hi: int) -> int:
    """The first version in ``lo..hi`` whose commit file is still in the log (``hi + 1`` if
    none is). Log cleanup removes commit files from the start only, so a binary search finds
    it in a few existence checks."""
    log_dir = _log_dir(path)
    if is_connect(spark):  # no file system here: a commit file is there if Spark can read it
        def present(version: int) -> bool:
            return history.readable(spark, f"{log_dir}/{version:020d}.json")
    else:
        fs, jvm = _fs(spark, path)

        def present(version: int) -> bool:
            return bool(fs.exists(jvm.org.apache.hadoop.fs.Path(
                f"{log_dir}/{version:020d}.json")))

    if hi < lo or not present(hi):
        return hi + 1
    if present(lo):
        return lo
    missing, found = lo, hi
    while found - missing > 1:
        middle = (missing + found) // 2
        if present(middle):
            found = middle
        else:
            missing = middle
    return found


def last_version_before(spark, path: str, moment_ms: int) -> int:
    """The newest version whose commit file was written at or before ``moment_ms`` (wall-clock
    epoch milliseconds; a commit file's modification time is its commit time), -1 if none.
    One listing of the log, no Spark job."""
    fs, jvm = _fs(spark, path)
    newest = -1
    for status in fs.listStatus(jvm.org.apache.hadoop.fs.Path(_log_dir(path))):
        name = str(status.getPath().getName())
        if name.endswith(".json") and name[:20].isdigit() and len(name) == 25 \
                and status.getModificationTime() <= moment_ms:
            newest = max(newest, int(name[:20]))
    return newest


def files_added(spark, path: str, first: int, last: int) -> Dict[str, int]:
    """``{file path: version}`` for every file that commits ``first..last`` added (their commit
    files must exist). Paths are as the log and the snapshot's AddFile actions spell them."""
    if last < first:
        return {}
    from pyspark.sql import functions as F

    log_dir = _log_dir(path)
    commits = [f"{log_dir}/{version:020d}.json" for version in range(first, last + 1)]
    rows = (spark.read.schema("add STRUCT<path: STRING>").json(commits)
            .where("add IS NOT NULL")
            .select(F.col("add.path").alias("path"), F.col("_metadata.file_name").alias("f"))
            .collect())
    return {r.path: int(r.f[:20]) for r in rows}


def trim_log(spark, path: str, older_than_ms: int, keep_from: Callable[[], Optional[int]], *,
             dry_run: bool = False) -> int:
    """Delete the log files (commits, checksums, checkpoints) of every version before ``c``,
    the newest single-file checkpoint that is older than ``older_than_ms`` (wall-clock epoch
    milliseconds) and whose version is at most ``keep_from()``.

    What remains is a valid Delta log: checkpoint ``c`` and every commit after it, so the
    latest snapshot, a snapshot of any version from ``c`` on and the change feed of any version
    from ``keep_from()`` on can all be read. A reader that started before ``older_than_ms``
    saw checkpoint ``c`` or a newer one, so it reads nothing deleted here. ``keep_from`` (which
    may run a Spark job) is called only when there is something to trim; None keeps the log
    whole. Returns the number of files deleted (with ``dry_run``: that would be).
    """
    fs, jvm = _fs(spark, path)
    statuses = fs.listStatus(jvm.org.apache.hadoop.fs.Path(_log_dir(path)))
    files = []
    for status in statuses:
        name = str(status.getPath().getName())
        match = _VERSION_FILE.match(name)
        if match:
            files.append((int(match.group(1)), name, status))
    if not files:
        return 0
    oldest = min(version for version, _, _ in files)
    checkpoints = sorted((version for version, name, status in files
                          if _SINGLE_CHECKPOINT.match(name) and version > oldest
                          and status.getModificationTime() <= older_than_ms), reverse=True)
    if not checkpoints:
        return 0
    limit = keep_from()
    usable = [version for version in checkpoints if limit is not None and version <= limit]
    if not usable:
        return 0
    doomed = [status for version, _, status in files if version < usable[0]]
    if not dry_run:
        for status in doomed:
            fs.delete(status.getPath(), False)
    return len(doomed)
