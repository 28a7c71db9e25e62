"""A namespace: a root URI on any Hadoop file system, holding the registry and entity folders.

Layout under the root (docs/ARCHITECTURE.md has the full picture)::

    <root>/_sbdelta/registry                         entity registry (Delta)
    <root>/_sbdelta/clock/<id>                       a clock probe while it is measured
    <root>/queues/<key>/<incarnation>/...            a queue's tables
    <root>/topics/<key>/<incarnation>/...            a topic's tables
    <root>/topics/<key>/<incarnation>/subscriptions/<sub key>/<incarnation>/...

``<key>`` is :func:`sbdelta._names.storage_key` of the entity name: lower-cased, ``/`` mapped to
``~``, so names cannot collide with each other, with ``_sbdelta`` or escape the root. A new
incarnation folder per creation means a deleted-then-recreated entity never sees old data.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import time
import uuid
from datetime import datetime, timedelta, timezone
from typing import Optional

from ._clock import Clock, checked_clock, tolerance_of
from ._connect import is_connect, prepare_connect
from ._spark import LazySpark
from ._store import local_path
from .exceptions import ClockSkewError, ServiceBusAuthorizationError, ServiceBusConnectionError

log = logging.getLogger("sbdelta")

#: A wall clock is compared with the storage's again after this many seconds (real time).
CLOCK_CHECK_SECONDS = 60.0

__all__ = ["Namespace", "normalize_root"]

_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def normalize_root(namespace: str) -> str:
    """The canonical root URI of a namespace: a local path becomes an absolute ``file:`` URI.

    Raises:
        ServiceBusConnectionError: The value is empty or cannot name a folder.
    """
    if not isinstance(namespace, (str, os.PathLike)):
        raise ServiceBusConnectionError(
            f"a namespace is a folder path or a Hadoop file system URI (abfss://, s3a://, "
            f"dbfs:/, file:/), got {type(namespace).__name__}")
    text = os.fspath(namespace).strip()
    if not text or "`" in text or "\n" in text:
        raise ServiceBusConnectionError(
            f"invalid namespace {namespace!r}: give a folder path or a Hadoop file system URI "
            "(no backticks or line breaks)")
    if _SCHEME_RE.match(text) and not re.match(r"^[A-Za-z]:[\\/]", text):
        scheme = text.split(":", 1)[0].lower()
        if scheme == "file":
            return "file:" + os.path.abspath(re.sub(r"^file:(//)?", "", text))
        return text.rstrip("/")
    return "file:" + os.path.abspath(os.path.expanduser(text))


class Namespace:
    """The storage root shared by the admin client, senders, receivers and jobs.

    Args:
        namespace: A folder path or Hadoop URI.
        spark: The session to use (see :func:`sbdelta._spark.get_spark`).
        clock: Broker time.
        engine: ``"auto"``, ``"spark"`` or ``"delta-rs"``: what delta-rs does on the
            namespace's local tables (:mod:`sbdelta._store.engines`); default
            ``$SBDELTA_ENGINE``, else ``"auto"``.
    """

    def __init__(self, namespace: str, *, spark=None, clock: Optional[Clock] = None,
                 engine: Optional[str] = None) -> None:
        from ._store import resolve_engine
        from ._store.registry import Registry

        self.root = normalize_root(namespace)
        self.engine = resolve_engine(engine)  # before Spark starts: a bad value costs nothing
        self.engine.check(self.root)
        # Started when first used: a client that delta-rs serves whole starts no JVM.
        self.spark = spark if spark is not None else LazySpark()
        prepare_connect(self.spark)
        self.clock = checked_clock(clock)
        self._fs = None
        self._clock_checked: Optional[float] = None
        self.registry = Registry(self.spark, self.path("_sbdelta", "registry"), self.engine)

    def check_clock(self) -> None:
        """Refuse to grant locks while this host's clock is off (RECV-3 across hosts).

        For a wall clock (``clock.wall_clock``, :class:`~sbdelta.SystemClock`) compare it with
        the storage's clock, at most once a minute: write a probe file under
        ``_sbdelta/clock``, read its modification time (the storage's time of the write) and
        remove it. Simulated clocks (ManualClock) are not compared.

        Raises:
            ClockSkewError: they differ by more than the clock's ``skew_tolerance``.
        """
        if not getattr(self.clock, "wall_clock", False):
            return
        if (self._clock_checked is not None
                and time.monotonic() - self._clock_checked < CLOCK_CHECK_SECONDS):
            return
        tolerance = tolerance_of(getattr(self.clock, "skew_tolerance", None))
        skew = self.clock_skew()
        if skew is None:  # the storage gave no time: nothing to compare, locks as before
            return
        if abs(skew) > tolerance:
            side = "ahead of" if skew > timedelta(0) else "behind"
            raise ClockSkewError(
                f"this host's clock is {abs(skew.total_seconds()):.3f} s {side} the clock of "
                f"the storage of namespace {self.root}, more than the clock's skew_tolerance "
                f"of {tolerance.total_seconds():g} s: a lock granted now could be believed "
                "held by two hosts at once. Synchronise this host's clock (NTP), or give "
                "every host sharing the namespace a larger tolerance "
                "(SystemClock(skew_tolerance=timedelta(seconds=...)), up to 5 minutes; a "
                "lock that ran out is taken again twice that long after its end)")
        self._clock_checked = time.monotonic()

    def clock_skew(self) -> Optional[timedelta]:
        """This client's clock minus the storage's, measured by writing a probe file (None
        when the storage reports no modification time). Over Spark Connect, on storage that
        is not local, the server's clock is the reference (the client cannot reach files)."""
        uri = self.path("_sbdelta", "clock", uuid.uuid4().hex)
        local = re.sub(r"^file:(//)?", "", uri) if self.is_local else None
        before = self.clock.now()
        if local is not None:
            os.makedirs(os.path.dirname(local), exist_ok=True)
            with open(local, "w", encoding="utf-8") as probe:
                probe.write(before.isoformat())
            stamp = os.stat(local).st_mtime_ns / 1e9
            after = self.clock.now()
            os.remove(local)
        elif is_connect(self.spark):
            # No file system here: the Spark Connect server's clock stands for the storage's.
            stamp = self.spark.sql("SELECT unix_micros(current_timestamp()) AS t").first().t / 1e6
            after = self.clock.now()
        else:
            jvm = self.spark.sparkContext._jvm
            path = jvm.org.apache.hadoop.fs.Path(uri)
            out = self.hadoop_fs().create(path, True)
            try:
                out.write(bytearray(before.isoformat().encode("utf-8")))
            finally:
                out.close()
            stamp = self.hadoop_fs().getFileStatus(path).getModificationTime() / 1000.0
            after = self.clock.now()
            self.hadoop_fs().delete(path, False)
        if not stamp:
            return None
        storage = datetime.fromtimestamp(stamp, timezone.utc)
        skew = before + (after - before) / 2 - storage
        log.debug("clock of %s vs namespace %s: %+.3f s", type(self.clock).__name__, self.root,
                  skew.total_seconds())
        return skew

    @property
    def is_local(self) -> bool:
        return self.root.startswith("file:")

    def path(self, *parts: str) -> str:
        """A URI below the root; parts must already be safe storage keys."""
        return "/".join([self.root, *parts])

    def hadoop_fs(self):
        if self._fs is None:
            jvm = self.spark.sparkContext._jvm
            conf = self.spark.sparkContext._jsc.hadoopConfiguration()
            try:
                self._fs = jvm.org.apache.hadoop.fs.Path(self.root).getFileSystem(conf)
            except Exception as exc:  # noqa: BLE001 - any JVM failure means unreachable
                _raise_if_refused(exc, f"open namespace {self.root}")
                raise ServiceBusConnectionError(
                    f"cannot reach namespace {self.root}: {_java_message(exc)}. Check the URI, "
                    "the file system's jars and credentials") from None
        return self._fs

    def ensure_root(self) -> None:
        """Create the root folder if missing; raise if the file system refuses. A local
        folder is made without a JVM (a client that only sends and receives starts none)."""
        local = local_path(self.root)
        if local is not None:
            try:
                os.makedirs(local, exist_ok=True)
            except OSError as exc:
                _raise_if_refused(exc, f"create namespace {self.root}")
                raise ServiceBusConnectionError(
                    f"cannot write to namespace {self.root}: {exc}") from None
            return
        if is_connect(self.spark):
            return  # nothing to call over Spark Connect: each table's creation makes its folder
        jvm = self.spark.sparkContext._jvm
        try:
            self.hadoop_fs().mkdirs(jvm.org.apache.hadoop.fs.Path(self.root))
        except (ServiceBusConnectionError, ServiceBusAuthorizationError):
            raise
        except Exception as exc:  # noqa: BLE001
            _raise_if_refused(exc, f"create namespace {self.root}")
            raise ServiceBusConnectionError(
                f"cannot write to namespace {self.root}: {_java_message(exc)}") from None

    def exists(self, uri: str) -> bool:
        local = local_path(uri)
        if local is not None:
            return os.path.exists(local)
        jvm = self.spark.sparkContext._jvm
        return bool(self.hadoop_fs().exists(jvm.org.apache.hadoop.fs.Path(uri)))

    def remove_tree(self, uri: str) -> None:
        """Delete a folder recursively (best effort: its data is unreachable already). Over
        Spark Connect a folder that is not local is left in place: no Spark Connect call
        deletes files."""
        local = local_path(uri)
        if local is not None:
            shutil.rmtree(local, ignore_errors=True)
            return
        if is_connect(self.spark):
            log.info("%s is left in place: it holds no registered entity; delete it with the "
                     "storage's own tools (Spark Connect cannot delete files)", uri)
            return
        jvm = self.spark.sparkContext._jvm
        try:
            self.hadoop_fs().delete(jvm.org.apache.hadoop.fs.Path(uri), True)
        except Exception:  # noqa: BLE001 - data is already unreachable from the registry
            pass


def _raise_if_refused(exc: BaseException, what: str) -> None:
    from ._store import refused, storage_refusal

    reason = storage_refusal(exc)
    if reason is not None:
        raise refused(what, reason) from None


def _java_message(exc: BaseException) -> str:
    text = str(exc)
    for line in text.splitlines():
        if "Exception:" in line:
            return line.strip()[:300]
    return text.strip().splitlines()[0][:300] if text.strip() else type(exc).__name__
