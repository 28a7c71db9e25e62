"""AutoLockRenewer: keeps message locks and session locks alive in a background thread
(SETTLE-6, SESS-4).

Each round renews every due lock of one receiver in ONE commit (a renew settlement of the whole
list), so ten registered messages cost one MERGE, not ten. A lock is due when less than
``max(lock_duration / 2, 3 x the slowest renewal seen)`` of it is left by broker time, so a
renewal starts early enough to land before the lock ends even when commits are slow. A
failure is never silent: the message leaves the renewer and ``on_lock_renew_failure(message,
error)`` is called, with :class:`~sbdelta.exceptions.AutoLockRenewFailed` when its lock was
lost or had already ended, or the renewal's own error.

A registered session (``register(receiver, receiver.session)``) is renewed the same way, by
:meth:`ServiceBusSession.renew_lock` (one commit, which also renews the locks of the session's
messages the receiver holds); it leaves the renewer quietly when its receiver is closed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any, Callable, Dict, List, Optional

from ._message import holds_lock, is_settled
from ._receiver import broker_now, lock_duration, renew_locks
from ._session import ServiceBusSession, ServiceBusSessionGroup, session_released
from .exceptions import (AutoLockRenewFailed, AutoLockRenewTimeout, ServiceBusError,
                         ServiceBusInvalidOperationError)

log = logging.getLogger("sbdelta")

__all__ = ["AutoLockRenewer"]

FailureCallback = Callable[[Any, Optional[Exception]], None]


class _Task:
    def __init__(self, receiver, message, until: datetime, seconds: float,
                 on_failure: Optional[FailureCallback]) -> None:
        self.receiver = receiver
        self.message = message
        self.until = until
        self.seconds = seconds
        self.on_failure = on_failure
        self.done = False


class AutoLockRenewer:
    """Renews the locks of registered messages until a total duration has passed.

    Args:
        max_lock_renewal_duration: Default total renewal time per message, seconds (300).
        on_lock_renew_failure: Called as ``callback(message, error)`` when a lock could not be
            kept.
        executor: Accepted for azure-servicebus compatibility; renewals run on the renewer's
            own thread, one commit per receiver and round.
        max_workers: Accepted for compatibility (positive integer); see ``executor``.
        poll_interval: Seconds of real time between rounds.
    """

    def __init__(self, max_lock_renewal_duration: float = 300,
                 on_lock_renew_failure: Optional[FailureCallback] = None,
                 executor: Any = None, max_workers: Optional[int] = None, *,
                 poll_interval: float = 0.2) -> None:
        self._default = _seconds(max_lock_renewal_duration, "max_lock_renewal_duration")
        self._on_failure = _callback(on_lock_renew_failure)
        if max_workers is not None and (isinstance(max_workers, bool)
                                        or not isinstance(max_workers, int) or max_workers < 1):
            raise ServiceBusInvalidOperationError(
                f"max_workers must be None or an integer >= 1, got {max_workers!r}")
        self._poll = _seconds(poll_interval, "poll_interval")
        self._tasks: List[_Task] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._slowest = 0.0  # seconds of the slowest renewal commit seen
        self.renewals = 0    # locks renewed
        self.rounds = 0      # renewal commits

    def __enter__(self) -> "AutoLockRenewer":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def register(self, receiver, renewable, max_lock_renewal_duration: Optional[float] = None,
                 on_lock_renew_failure: Optional[FailureCallback] = None) -> None:
        """Keep ``renewable`` (a received, locked message, or ``receiver.session`` of a session
        receiver) locked for the given total time."""
        if self._stop.is_set():
            raise ServiceBusInvalidOperationError("this AutoLockRenewer is closed")
        if isinstance(renewable, ServiceBusSession):
            if renewable.locked_until_utc is None or session_released(renewable):
                raise ServiceBusInvalidOperationError(
                    "this session is not locked by its receiver (yet, or any more): register "
                    "receiver.session after the receiver has locked it (in `with receiver:`, "
                    "or after its first receive) and before it is closed")
        elif not holds_lock(renewable):
            raise ServiceBusInvalidOperationError(
                "only messages received in PEEK_LOCK mode hold a lock to renew")
        total = self._default if max_lock_renewal_duration is None else _seconds(
            max_lock_renewal_duration, "max_lock_renewal_duration")
        until = broker_now(receiver) + timedelta(seconds=total)
        task = _Task(receiver, renewable, until, total, _callback(on_lock_renew_failure))
        with self._lock:
            self._tasks.append(task)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="sbdelta-lock-renewer",
                                                daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._poll):
            with self._lock:
                self._tasks = [t for t in self._tasks if not t.done]
                tasks = list(self._tasks)
            by_receiver: Dict[int, List[_Task]] = defaultdict(list)
            for task in tasks:
                by_receiver[id(task.receiver)].append(task)
            for group in by_receiver.values():
                try:
                    self._round(group)
                except Exception as exc:  # noqa: BLE001 - the thread must not die silently
                    for task in group:
                        self._fail(task, exc)

    def _round(self, tasks: List[_Task]) -> None:
        receiver = tasks[0].receiver
        now = broker_now(receiver)
        duration = lock_duration(receiver)
        margin = max(duration / 2, timedelta(seconds=3 * self._slowest))
        due = []
        for task in tasks:
            message = task.message
            if _finished(message):
                task.done = True
            elif now >= task.until:  # the lock is left to run out, as in azure-servicebus
                task.done = True
                message.auto_renew_error = AutoLockRenewTimeout(
                    f"Auto-renew period ({task.seconds:g} seconds) elapsed.")
            elif message.locked_until_utc <= now:
                self._fail(task, AutoLockRenewFailed(
                    f"the lock on {_name(message)} ended at "
                    f"{message.locked_until_utc.isoformat()} before it could be renewed"))
            elif message.locked_until_utc - now <= margin:
                due.append(task)
        for task in [t for t in due if isinstance(t.message, ServiceBusSession)]:
            due.remove(task)
            self._renew_session(task)
        if not due:
            return
        started = time.monotonic()
        try:
            renew_locks(receiver, [t.message for t in due])  # ONE commit for all of them
        except ServiceBusError:
            for task in due:  # find which locks were lost; keep the others
                try:
                    renew_locks(receiver, [task.message])
                    self.renewals += 1
                except ServiceBusError as exc:
                    self._fail(task, AutoLockRenewFailed(str(exc)))
            return
        finally:
            self._slowest = max(self._slowest, time.monotonic() - started)
            self.rounds += 1
        self.renewals += len(due)

    def _renew_session(self, task: _Task) -> None:
        started = time.monotonic()
        try:
            task.message.renew_lock()  # ONE commit: the session and its held messages
            self.renewals += 1
        except ServiceBusError as exc:
            if session_released(task.message):  # closed while renewing: let go, no failure
                task.done = True
            else:
                self._fail(task, AutoLockRenewFailed(str(exc)))
        finally:
            self._slowest = max(self._slowest, time.monotonic() - started)
            self.rounds += 1

    def _fail(self, task: _Task, error: Exception) -> None:
        task.done = True
        task.message.auto_renew_error = error
        log.warning("lock renewal of %s failed: %s", _name(task.message), error)
        callback = task.on_failure or self._on_failure
        if callback is not None:
            callback(task.message, error)

    def close(self, wait: bool = True) -> None:
        """Stop renewing (locks then run out normally). ``wait`` (as in the SDK): block until
        the renewing thread has finished its current renewal and stopped (at most 30 s)."""
        self._stop.set()
        if wait and self._thread is not None:
            self._thread.join(timeout=30)


def _finished(renewable) -> bool:
    """Nothing left to renew: the message was settled, or the session's receiver closed."""
    if isinstance(renewable, ServiceBusSession):
        return session_released(renewable)
    return is_settled(renewable)


def _name(renewable) -> str:
    if isinstance(renewable, ServiceBusSessionGroup):
        return f"sessions {', '.join(map(repr, renewable.session_ids))}"
    if isinstance(renewable, ServiceBusSession):
        return f"session {renewable.session_id!r}"
    return f"message {renewable.sequence_number}"


def _seconds(value: Any, name: str) -> float:
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ServiceBusInvalidOperationError(f"{name} must be a positive number of seconds, "
                                              f"got {value!r}")
    return float(value)


def _callback(value: Any) -> Optional[FailureCallback]:
    if value is not None and not callable(value):
        raise ServiceBusInvalidOperationError(
            f"on_lock_renew_failure must be a callable (message, error) or None, got {value!r}")
    return value
