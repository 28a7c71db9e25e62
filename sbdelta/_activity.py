"""Entity activity for auto-delete on idle (IDLE-1..3), without a commit per operation.

Every client marks the entities it uses by (over)writing one tiny file of its own,
``<entity folder>/_activity/<client id>``, holding the broker-clock time of the operation. A
client rewrites its file at most once per :data:`RESOLUTION` of broker time per entity, so a busy
receiver costs one small file write a minute, never a Delta commit, and no two clients write the
same file. ``AutoDeleteOnIdle`` is at least 5 minutes, so a minute's resolution cannot make a
used entity look idle. The idle job reads the newest time among the files (plus the registry's
own update times) and deletes only entities idle for longer than their ``auto_delete_on_idle``.
"""

from __future__ import annotations

import logging
import os
import uuid
from datetime import datetime, timedelta
from typing import Dict, Iterable, Optional

from ._clock import utc
from ._connect import is_connect
from ._store import local_path

log = logging.getLogger(__name__)

RESOLUTION = timedelta(minutes=1)
FOLDER = "_activity"


class ActivityTracker:
    """Marks entity folders as used, for one client (one file per client and entity)."""

    def __init__(self, ns) -> None:
        self._ns = ns
        self._id = uuid.uuid4().hex
        self._written: Dict[str, datetime] = {}
        self._slot: Dict[str, int] = {}

    def touch(self, folder: str) -> None:
        """Record an operation on the entity at ``folder`` now (by the client's clock)."""
        now = self._ns.clock.now()
        last = self._written.get(folder)
        if last is not None and last <= now < last + RESOLUTION:
            return
        try:
            if is_connect(self._ns.spark) and local_path(folder) is None:
                # Spark Connect writes a folder (overwritten: deleted, then written), so two
                # slots take turns: the other one holds the previous time meanwhile.
                slot = self._slot[folder] = 1 - self._slot.get(folder, 1)
                _write_with_spark(self._ns, f"{folder}/{FOLDER}/{self._id}.{slot}",
                                  now.isoformat())
            else:
                _write_text(self._ns, f"{folder}/{FOLDER}/{self._id}", now.isoformat())
        except Exception as exc:  # noqa: BLE001 - activity is advisory; the operation goes on
            log.warning("could not record activity on %s: %s", folder, exc)
            return
        self._written[folder] = now


def last_activity(ns, folders: Iterable[str]) -> Optional[datetime]:
    """The newest activity time recorded under any of ``folders`` (None if none): files, and
    the folders Spark Connect clients write (:meth:`ActivityTracker.touch`)."""
    if is_connect(ns.spark):
        return _last_activity_with_spark(ns, folders)
    jvm = ns.spark.sparkContext._jvm
    fs = ns.hadoop_fs()
    newest: Optional[datetime] = None
    for folder in folders:
        path = jvm.org.apache.hadoop.fs.Path(f"{folder}/{FOLDER}")
        if not fs.exists(path):
            continue
        for status in fs.listStatus(path):
            files = ([f.getPath() for f in fs.listStatus(status.getPath())
                      if not str(f.getPath().getName()).startswith(("_", "."))]
                     if status.isDirectory() else [status.getPath()])
            for file in files:
                try:
                    stamp = utc(datetime.fromisoformat(_read_text(ns, file)))
                except Exception:  # noqa: BLE001 - a file being rewritten now, or foreign
                    continue
                newest = stamp if newest is None or stamp > newest else newest
    return newest


def _last_activity_with_spark(ns, folders: Iterable[str]) -> Optional[datetime]:
    """:func:`last_activity` read by Spark (a Spark Connect session: no file system here)."""
    newest: Optional[datetime] = None
    for folder in folders:
        try:
            rows = (ns.spark.read.option("recursiveFileLookup", "true")
                    .text(f"{folder}/{FOLDER}").collect())
        except Exception:  # noqa: BLE001 - no activity recorded under this folder
            continue
        for row in rows:
            try:
                stamp = utc(datetime.fromisoformat(row.value.strip()))
            except (TypeError, ValueError):  # foreign content
                continue
            newest = stamp if newest is None or stamp > newest else newest
    return newest


def _write_with_spark(ns, uri: str, text: str) -> None:
    """Write ``text`` as the one file of the folder ``uri`` (replacing what it held)."""
    (ns.spark.createDataFrame([(text,)], "value STRING").coalesce(1)
     .write.mode("overwrite").text(uri))


def _write_text(ns, uri: str, text: str) -> None:
    local = local_path(uri)
    if local is not None:  # a local namespace: no JVM needed (rename: readers see whole files)
        os.makedirs(os.path.dirname(local), exist_ok=True)
        scratch = f"{local}.{uuid.uuid4().hex}.tmp"
        try:
            with open(scratch, "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(scratch, local)
        except OSError:  # a full or read-only disk: leave no scratch file behind
            try:
                os.remove(scratch)
            except OSError:
                pass
            raise
        return
    jvm = ns.spark.sparkContext._jvm
    out = ns.hadoop_fs().create(jvm.org.apache.hadoop.fs.Path(uri), True)
    try:
        out.write(bytearray(text.encode("utf-8")))
    finally:
        out.close()


def _read_text(ns, path) -> str:
    jvm = ns.spark.sparkContext._jvm
    stream = ns.hadoop_fs().open(path)
    try:
        return jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8").strip()
    finally:
        stream.close()
