"""Broker time comes from an injected clock, so tests move time instead of sleeping."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Optional, Protocol

from .exceptions import ServiceBusInvalidOperationError

__all__ = ["Clock", "SystemClock", "ManualClock", "SYSTEM_CLOCK", "utc"]


class Clock(Protocol):
    """Anything with ``now()`` returning an aware UTC datetime."""

    def now(self) -> datetime:  # pragma: no cover - protocol
        ...


class SystemClock:
    """The wall clock, in UTC."""

    def now(self) -> datetime:
        return datetime.now(timezone.utc)


class ManualClock:
    """A clock that only moves when told to (for tests and simulations).

    Args:
        start: The initial time (aware; defaults to 2030-01-01T00:00Z).
    """

    def __init__(self, start: datetime = datetime(2030, 1, 1, tzinfo=timezone.utc)) -> None:
        self._now = utc(start)

    def now(self) -> datetime:
        return self._now

    def advance(self, delta: timedelta) -> datetime:
        """Move time forward by ``delta`` and return the new time."""
        if delta < timedelta(0):
            raise ValueError(f"a clock only moves forward, got {delta}")
        self._now += delta
        return self._now

    def set(self, moment: datetime) -> None:
        """Jump to ``moment`` (aware)."""
        self._now = utc(moment)


SYSTEM_CLOCK = SystemClock()


def checked_clock(clock: Optional[Clock]) -> Clock:
    """``clock``, or the system clock for None; refused at once
    (:class:`~sbdelta.exceptions.ServiceBusInvalidOperationError`) when it cannot tell the time:
    it needs a ``now()`` that returns an aware datetime."""

    if clock is None:
        return SYSTEM_CLOCK
    now = getattr(clock, "now", None)
    if not callable(now):
        raise ServiceBusInvalidOperationError(f"clock has type {type(clock).__name__}, which has no now() method; "
                        "allowed: an object whose now() returns an aware datetime (for example "
                        "sbdelta.SystemClock() or sbdelta.ManualClock(start)), or None")
    try:
        moment = now()
    except Exception as exc:  # noqa: BLE001 - reported as what is wrong with the argument
        raise ServiceBusInvalidOperationError(
            f"clock.now() failed: {type(exc).__name__}: {exc}; allowed: an object whose now() "
            "returns an aware datetime (an instance such as sbdelta.SystemClock(), not the "
            "class)") from None
    if not isinstance(moment, datetime) or moment.tzinfo is None:
        raise ServiceBusInvalidOperationError(f"clock.now() returned {moment!r}; allowed: an aware datetime "
                        "(with a tzinfo, for example datetime.now(timezone.utc))")
    return clock


def utc(moment: datetime) -> datetime:
    """``moment`` as an aware UTC datetime; naive values are refused (their zone is unknown)."""
    if not isinstance(moment, datetime):
        raise TypeError(f"expected a datetime, got {type(moment).__name__}")
    if moment.tzinfo is None:
        raise ValueError(f"naive datetime {moment.isoformat()}: pass an aware UTC datetime")
    return moment.astimezone(timezone.utc)


def from_spark(moment):
    """A TIMESTAMP read from Spark (naive, in this process's local zone) as aware UTC."""
    return None if moment is None else moment.astimezone(timezone.utc)
