"""What senders and receivers share: their client, entity name, context manager, clock and
argument checks. Time: every broker decision (lock expiry, TTL, schedules, duplicate windows)
uses the client's ``clock``; only waiting for messages (``max_wait_time``) uses real time.
"""

from __future__ import annotations

import functools
import uuid
from datetime import datetime, timedelta
from typing import Any, Callable, List, Optional, Sequence, Union

from ._activity import ActivityTracker
from ._entity import Entity, EntityResolver
from ._names import EntityRef
from ._namespace import Namespace
from ._store import DEFAULT_RETRY, RetryPolicy, retry_policy, storage_errors
from .exceptions import ServiceBusInvalidOperationError


#: The largest count an operation takes (a Spark row limit is a 32-bit int).
MAX_COUNT = 2 ** 31 - 1


def positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_COUNT:
        raise ServiceBusInvalidOperationError(
            f"{name} must be an integer from 1 to {MAX_COUNT}, got {value!r}")
    return value


def wait_seconds(value: Any, name: str) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ServiceBusInvalidOperationError(
            f"{name} must be None or a number of seconds >= 0, got {value!r}")
    return float(value)


def sequence_numbers(value: Union[int, Sequence[int]]) -> List[int]:
    """One sequence number or many, each an integer in [0, 2**63), duplicates dropped."""
    seqs = [value] if isinstance(value, int) else list(value)
    for s in seqs:
        if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s < 2 ** 63:
            raise ServiceBusInvalidOperationError(
                f"sequence numbers are integers in [0, 2**63), got {s!r}")
    return list(dict.fromkeys(seqs))


class Connection:
    """What a client shares with its senders and receivers: the namespace, the entity resolver
    (cached per registry version), the activity tracker, and whether the client is open."""

    def __init__(self, ns: Namespace, retry: RetryPolicy = DEFAULT_RETRY) -> None:
        self.ns = ns
        self.entities = EntityResolver(ns)
        self.activity = ActivityTracker(ns)
        self.retry = retry  # the client's retry_* options (sbdelta._options)
        self.closed = False

    @property
    def spark(self):
        return self.ns.spark

    def check_open(self) -> None:
        if self.closed:
            raise ServiceBusInvalidOperationError("this ServiceBusClient is closed")


def under_retry_policy(cls):
    """Class decorator: each public method of ``cls`` runs under the retry policy of its
    client (``self._retry_policy()``), so the ``retry_*`` options a client was made with
    govern every commit retry its senders, receivers and sessions make; and a failure of the
    storage escaping it is raised as its sbdelta error (:func:`sbdelta._store.storage_errors`,
    issue 18: a read-only or full file system, a removed table or file)."""
    for name, member in list(vars(cls).items()):
        if not name.startswith("_") and callable(member) \
                and not isinstance(member, (type, staticmethod, classmethod)):
            setattr(cls, name, _with_policy(member))
    return cls


def _with_policy(method: Callable) -> Callable:
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        with retry_policy(self._retry_policy()), storage_errors(_what(self, method)):
            return method(self, *args, **kwargs)
    return run


def _what(handler, method: Callable) -> str:
    """How a storage failure's error names the call: ``complete_message on queue 'q'``."""
    ref = getattr(handler, "_ref", None)
    return f"{method.__name__} on {ref.label}" if ref is not None else method.__name__


class Handler:
    """A sender or receiver bound to one entity of a client's namespace."""

    def __init__(self, connection: Connection, ref: EntityRef,
                 client_identifier: Optional[str] = None) -> None:
        self._conn = connection
        self._ref = ref
        self._name = ref.path
        self._client_identifier = client_identifier or \
            f"{type(self).__name__.replace('ServiceBus', 'SB')}-{uuid.uuid4()}"

    @property
    def client_identifier(self) -> str:
        """The name this sender or receiver was given (``client_identifier=``), or a generated
        one, as in azure-servicebus; sbdelta writes it nowhere."""
        return self._client_identifier

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        """Nothing to release: every operation is its own commit."""

    def _now(self) -> datetime:
        return self._conn.ns.clock.now()

    def _retry_policy(self) -> RetryPolicy:
        return self._conn.retry

    def _lookup(self) -> Entity:
        """The entity as it is now (SETTLE-7: properties may change at any time); a lookup is
        activity (IDLE-2: sends, receives, peeks and settlements; one small file a minute)."""
        self._conn.check_open()
        entity = self._conn.entities.resolve(self._ref)
        self._conn.activity.touch(entity.store.folder)
        return entity
