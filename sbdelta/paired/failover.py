"""When a paired sender fails over (PAIR-3, PAIR-5): the error table and each entity's health.

The table below is the one place that says how a send error counts. A *fault* (the primary's
storage refuses, cannot be reached, the entity is disabled or gone) and a *timeout* (the send
did not finish, or kept losing to concurrent commits) start the entity's failover timer; the
caller still gets the error until failover engages. A *caller* error (a bad message: its size,
type or fields; a misuse) is the caller's to fix: it neither starts nor resets the timer.

Health is per entity and shared by every sender of one client (a lock guards it): after
``failover_interval`` with no successful send since the first fault, sends go to the backlog
queues; every ``ping_primary_interval`` one ping tries the primary, and the first that lands
sends go to the primary again. Time comes from the client's clock.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from typing import Dict, Optional, Set

from ..exceptions import (InvalidMessageError, MessageSizeExceededError, MessageTypeError,
                          MessagingEntityDisabledError, MessagingEntityNotFoundError,
                          OperationTimeoutError, ServiceBusAuthenticationError,
                          ServiceBusAuthorizationError, ServiceBusCommunicationError,
                          ServiceBusConnectionError, ServiceBusError,
                          ServiceBusInvalidOperationError, ServiceBusQuotaExceededError,
                          ServiceBusServerBusyError)

__all__ = ["ErrorKind", "ERROR_TABLE", "classify", "EntityHealth", "BacklogRotation",
           "health_registry"]


class ErrorKind(str, Enum):
    FAULT = "fault"      # non-transient: starts the failover timer
    TIMEOUT = "timeout"  # starts the failover timer
    CALLER = "caller"    # the caller's to fix: the timer is left as it is


#: PAIR-3, in the order checked (the first class that matches decides). docs/paired.md shows it.
ERROR_TABLE = (
    (MessageSizeExceededError, ErrorKind.CALLER),
    (InvalidMessageError, ErrorKind.CALLER),
    (MessageTypeError, ErrorKind.CALLER),
    (ServiceBusInvalidOperationError, ErrorKind.CALLER),
    (OperationTimeoutError, ErrorKind.TIMEOUT),
    (ServiceBusServerBusyError, ErrorKind.TIMEOUT),
    (ServiceBusConnectionError, ErrorKind.FAULT),
    (ServiceBusCommunicationError, ErrorKind.FAULT),
    (ServiceBusAuthorizationError, ErrorKind.FAULT),
    (ServiceBusAuthenticationError, ErrorKind.FAULT),
    (MessagingEntityDisabledError, ErrorKind.FAULT),
    # The primary's folder removed reads as "no such entity": storage lost, not a typo (a
    # sender for a missing entity is refused when it is made, before any send).
    (MessagingEntityNotFoundError, ErrorKind.FAULT),
    (ServiceBusQuotaExceededError, ErrorKind.FAULT),
    (ServiceBusError, ErrorKind.FAULT),
    (OSError, ErrorKind.FAULT),
)


def classify(exc: BaseException) -> ErrorKind:
    """How a send error counts for failover (see :data:`ERROR_TABLE`). Errors of the JVM side
    (Py4J) are faults of the storage; any other Python error (a bug, a bad argument) is the
    caller's."""
    for cls, kind in ERROR_TABLE:
        if isinstance(exc, cls):
            return kind
    if type(exc).__module__.startswith("py4j"):
        return ErrorKind.FAULT
    return ErrorKind.CALLER


@dataclass
class EntityHealth:
    """One entity's failover state (PAIR-3, PAIR-5), by the client's clock."""

    failover_interval: timedelta
    ping_interval: timedelta
    first_fault: Optional[datetime] = None
    failed_over: bool = False
    next_ping: Optional[datetime] = None

    def __post_init__(self) -> None:
        self._lock = threading.Lock()

    def use_backlog(self, now: datetime) -> bool:
        """Whether sends to this entity go to the backlog queues now."""
        with self._lock:
            return self.failed_over

    def record_success(self) -> None:
        """A send (or a ping) reached the primary: it is healthy again."""
        with self._lock:
            self.first_fault, self.failed_over, self.next_ping = None, False, None

    def record_error(self, exc: BaseException, now: datetime) -> ErrorKind:
        """Count a failed send to the primary; engages failover when the timer has run for
        ``failover_interval``. Returns how the error counted."""
        kind = classify(exc)
        if kind is ErrorKind.CALLER:
            return kind
        with self._lock:
            if self.first_fault is None:
                self.first_fault = now
            if not self.failed_over and now - self.first_fault >= self.failover_interval:
                self.failed_over = True
                self.next_ping = now + self.ping_interval
        return kind

    def ping_due(self, now: datetime) -> bool:
        """Whether a ping of the primary is due (PAIR-5); claims it, so of several senders
        asking at once one pings."""
        with self._lock:
            if not self.failed_over or self.next_ping is None or now < self.next_ping:
                return False
            self.next_ping = now + self.ping_interval
            return True


class BacklogRotation:
    """PAIR-3: the backlog queues a failed-over send chooses from at random; a queue whose send
    failed leaves the rotation. When none is left, all come back (the next send tries them
    again) and the caller gets the last error."""

    def __init__(self, count: int, rng: Optional[random.Random] = None) -> None:
        self._count = count
        self._healthy: Set[int] = set(range(count))
        self._rng = rng or random.Random()
        self._lock = threading.Lock()

    @property
    def healthy(self) -> Set[int]:
        """The indexes of the backlog queues still in the rotation."""
        with self._lock:
            return set(self._healthy)

    def choose(self) -> Optional[int]:
        """A backlog queue index, or None when every queue has left the rotation (which then
        starts over)."""
        with self._lock:
            if not self._healthy:
                self._healthy = set(range(self._count))
                return None
            return self._rng.choice(sorted(self._healthy))

    def drop(self, index: int) -> None:
        """Take backlog queue ``index`` out of the rotation (it failed: PAIR-3)."""
        with self._lock:
            self._healthy.discard(index)


def health_registry(failover_interval: timedelta, ping_interval: timedelta):
    """A client's entity -> :class:`EntityHealth` map (created on first use, thread-safe)."""
    lock = threading.Lock()
    table: Dict[str, EntityHealth] = {}

    def health(entity_key: str) -> EntityHealth:
        with lock:
            found = table.get(entity_key)
            if found is None:
                found = table[entity_key] = EntityHealth(failover_interval, ping_interval)
            return found
    return health
