"""AutoLockRenewer: keeps message locks alive in a background thread (SETTLE-6)."""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta
from typing import Any, Callable, List, Optional

from .exceptions import ServiceBusError, ServiceBusInvalidOperationError

log = logging.getLogger("sbdelta")

__all__ = ["AutoLockRenewer"]


class _Task:
    def __init__(self, receiver, message, until: datetime) -> None:
        self.receiver = receiver
        self.message = message
        self.until = until
        self.done = False


class AutoLockRenewer:
    """Renews the locks of registered messages until a total duration has passed.

    A lock is renewed when less than ``renew_before`` (default: half the lock's remaining span
    at registration, at most 10 s) is left on it, by broker time (the receiver's clock). The
    renewer checks every ``poll_interval`` seconds of real time. Renewal stops for a message
    when it is settled, when its ``max_lock_renewal_duration`` is over, or when a renewal
    fails; ``on_lock_renew_failure(message, error)`` is then called with the error.

    Args:
        max_lock_renewal_duration: Default total renewal time per message, seconds (300).
        on_lock_renew_failure: Optional callback for failed renewals.
        poll_interval: Seconds between checks (real time).
    """

    def __init__(self, max_lock_renewal_duration: float = 300, *,
                 on_lock_renew_failure: Optional[Callable[[Any, Exception], None]] = None,
                 poll_interval: float = 0.2) -> None:
        self._default = _seconds(max_lock_renewal_duration, "max_lock_renewal_duration")
        self._on_failure = on_lock_renew_failure
        self._poll = _seconds(poll_interval, "poll_interval")
        self._tasks: List[_Task] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.renewals = 0

    def __enter__(self) -> "AutoLockRenewer":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def register(self, receiver, renewable, max_lock_renewal_duration: Optional[float] = None,
                 on_lock_renew_failure=None) -> None:
        """Keep ``renewable`` (a received, locked message) locked for the given total time."""
        if self._stop.is_set():
            raise ServiceBusInvalidOperationError("this AutoLockRenewer is closed")
        if getattr(renewable, "lock_token", None) is None or getattr(renewable, "_peeked", True):
            raise ServiceBusInvalidOperationError(
                "only messages received in PEEK_LOCK mode hold a lock to renew")
        total = self._default if max_lock_renewal_duration is None else _seconds(
            max_lock_renewal_duration, "max_lock_renewal_duration")
        until = receiver._now() + timedelta(seconds=total)
        with self._lock:
            self._tasks.append(_Task(receiver, renewable, until))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="sbdelta-lock-renewer",
                                                daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._poll):
            with self._lock:
                tasks = [t for t in self._tasks if not t.done]
                self._tasks = tasks
            for task in tasks:
                self._visit(task)

    def _visit(self, task: _Task) -> None:
        message = task.message
        if message._settled:
            task.done = True
            return
        now = task.receiver._now()
        if now >= task.until:
            task.done = True
            return
        remaining = message.locked_until_utc - now
        lock_duration = task.receiver._client._entities.queue(task.receiver._name) \
            .properties.lock_duration
        if remaining > min(timedelta(seconds=10), lock_duration / 2):
            return
        try:
            task.receiver.renew_message_lock(message)
            self.renewals += 1
        except ServiceBusError as exc:
            task.done = True
            log.warning("lock renewal of message %s failed: %s", message.sequence_number, exc)
            if self._on_failure is not None:
                self._on_failure(message, exc)

    def close(self) -> None:
        """Stop renewing (locks then run out normally)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)


def _seconds(value: Any, name: str) -> float:
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ServiceBusInvalidOperationError(f"{name} must be a positive number of seconds, "
                                              f"got {value!r}")
    return float(value)
