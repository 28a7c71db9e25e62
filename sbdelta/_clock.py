"""Broker time comes from an injected clock, so tests move time instead of sleeping."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Optional, Protocol

from .exceptions import ServiceBusInvalidOperationError

__all__ = ["Clock", "SystemClock", "ManualClock", "SYSTEM_CLOCK", "utc"]


class Clock(Protocol):
    """Anything with ``now()`` returning an aware UTC datetime.

    Two optional attributes say how far it can be trusted when several hosts share a
    namespace (docs/ARCHITECTURE.md, "Whose clock decides"):

    - ``skew_tolerance`` (a timedelta, default 0): how far this clock may be from the
      storage's clock, as every host's clock may. A lock whose holder let it run out is taken
      by another receiver only ``2 * skew_tolerance`` after its end, so that no two hosts
      within the tolerance both believe they hold it (RECV-3).
    - ``wall_clock`` (default False): the clock tells real time, so sbdelta checks it against
      the storage's clock (a file's modification time) and refuses to grant locks
      (:class:`~sbdelta.exceptions.ClockSkewError`) while they differ by more than the
      tolerance.
    """

    def now(self) -> datetime:  # pragma: no cover - protocol
        """The broker time: an aware UTC datetime."""
        ...


#: How far a host's clock may be from the storage's by default (NTP keeps hosts far closer).
DEFAULT_SKEW_TOLERANCE = timedelta(seconds=1)


def tolerance_of(value) -> timedelta:
    """A clock's ``skew_tolerance``, checked: a timedelta from 0 up to 5 minutes (the longest
    lock); None means 0."""
    if value is None:
        return timedelta(0)
    if not isinstance(value, timedelta) or not timedelta(0) <= value <= timedelta(minutes=5):
        raise ServiceBusInvalidOperationError(
            f"skew_tolerance={value!r}; allowed: a timedelta from 0 to 5 minutes (how far a "
            "host's clock may be from the storage's; default 1 s for SystemClock)")
    return value



class SystemClock:
    """The wall clock, in UTC.

    Args:
        skew_tolerance: How far this host's clock may be from the storage's (default 1 s);
            give every host sharing a namespace the same value. sbdelta checks it (see
            :class:`Clock`).
    """

    wall_clock = True

    def __init__(self, skew_tolerance: timedelta = DEFAULT_SKEW_TOLERANCE) -> None:
        self.skew_tolerance = tolerance_of(skew_tolerance)

    def now(self) -> datetime:
        """This host's wall clock, in UTC."""
        return datetime.now(timezone.utc)


class ManualClock:
    """A clock that only moves when told to (for tests and simulations).

    Args:
        start: The initial time (aware; defaults to 2030-01-01T00:00Z).
        skew_tolerance: As :class:`Clock`'s (default 0: one simulated clock that every
            client shares); it is never checked against the storage's clock.
    """

    wall_clock = False

    def __init__(self, start: datetime = datetime(2030, 1, 1, tzinfo=timezone.utc), *,
                 skew_tolerance: timedelta = timedelta(0)) -> None:
        self._now = utc(start)
        self.skew_tolerance = tolerance_of(skew_tolerance)

    def now(self) -> datetime:
        """The time set or advanced to (it never moves by itself)."""
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


def lock_grace(clock) -> timedelta:
    """How long after a lock's end another receiver may take it: twice the clock's
    ``skew_tolerance`` (two hosts each within the tolerance of the storage's clock differ by
    at most twice it)."""
    return 2 * tolerance_of(getattr(clock, "skew_tolerance", None))


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
    tolerance_of(getattr(clock, "skew_tolerance", None))
    return clock


def utc(moment: datetime) -> datetime:
    """``moment`` as an aware UTC datetime; naive values are refused (their zone is unknown)."""
    if not isinstance(moment, datetime):
        raise TypeError(f"expected a datetime, got {type(moment).__name__}")
    if moment.tzinfo is None:
        raise ValueError(f"naive datetime {moment.isoformat()}: pass an aware UTC datetime")
    return moment.astimezone(timezone.utc)


def as_utc(moment: Optional[datetime]) -> Optional[datetime]:
    """An aware UTC ``datetime`` (a plain one, not a subclass); naive values are taken as UTC
    (delta-rs hands timestamps back naive, in UTC); None stays None."""
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    moment = utc(moment)
    if type(moment) is not datetime:  # e.g. pandas.Timestamp: keep only what datetime holds
        moment = datetime(moment.year, moment.month, moment.day, moment.hour, moment.minute,
                          moment.second, moment.microsecond, tzinfo=timezone.utc)
    return moment


def from_spark(moment):
    """A TIMESTAMP read from Spark (naive, in this process's local zone) as aware UTC."""
    return None if moment is None else moment.astimezone(timezone.utc)
