"""A namespace: a root URI on any Hadoop file system, holding the registry and entity folders.

Layout under the root (docs/ARCHITECTURE.md has the full picture)::

    <root>/_sbdelta/registry                         entity registry (Delta)
    <root>/queues/<key>/<incarnation>/...            a queue's tables
    <root>/topics/<key>/<incarnation>/...            a topic's tables
    <root>/topics/<key>/<incarnation>/subscriptions/<sub key>/<incarnation>/...

``<key>`` is :func:`sbdelta._names.storage_key` of the entity name: lower-cased, ``/`` mapped to
``~``, so names cannot collide with each other, with ``_sbdelta`` or escape the root. A new
incarnation folder per creation means a deleted-then-recreated entity never sees old data.
"""

from __future__ import annotations

import os
import re
from typing import Optional

from ._clock import Clock, checked_clock
from ._spark import LazySpark
from .exceptions import ServiceBusAuthorizationError, ServiceBusConnectionError

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
        self.clock = checked_clock(clock)
        self._fs = None
        self.registry = Registry(self.spark, self.path("_sbdelta", "registry"), self.engine)

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
        """Create the root folder if missing; raise if the file system refuses."""
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
        jvm = self.spark.sparkContext._jvm
        return bool(self.hadoop_fs().exists(jvm.org.apache.hadoop.fs.Path(uri)))

    def remove_tree(self, uri: str) -> None:
        """Delete a folder recursively (best effort: orphans are left to maintenance)."""
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
