"""ISO-8601 durations as Service Bus uses them for entity properties.

Service Bus writes durations as ISO-8601 strings (``PT30S``, ``P1D``) and spells "unlimited" as
``TimeSpan.MaxValue`` (``P10675199DT2H48M5.4775807S``). Here "unlimited" is ``None``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Optional, Union

import isodate

from sbdelta.exceptions import InvalidPropertyError

__all__ = ["TIMESPAN_MAX", "parse_duration", "format_duration", "expiry", "expiry_sql"]

#: .NET ``TimeSpan.MaxValue`` as Service Bus prints it: the spelling of "unlimited".
TIMESPAN_MAX = "P10675199DT2H48M5.4775807S"

# Anything this long or longer is "unlimited". TimeSpan.MaxValue truncated to whole seconds, so
# that rounding of its 7 fractional digits (isodate keeps microseconds) cannot matter.
UNLIMITED_FROM = timedelta(days=10675199, hours=2, minutes=48, seconds=5)

_ACCEPTED = (
    "accepted: a datetime.timedelta or an ISO-8601 duration string such as 'PT30S', "
    "'PT1M30.5S' or 'P1DT2H' (days, hours, minutes, seconds; no years or months)"
)


def _reject(field: str, value: object, why: str) -> InvalidPropertyError:
    return InvalidPropertyError(f"{field}={value!r} is not a valid duration: {why}; {_ACCEPTED}")


def parse_duration(value: Union[timedelta, str, None], *, field: str) -> Optional[timedelta]:
    """Turn a duration given as a timedelta or an ISO-8601 string into a timedelta.

    Args:
        value: A ``timedelta``, an ISO-8601 duration string (``PT30S``, ``P1D``,
            ``PT1M30.5S``), or ``None``.
        field: The property name, quoted in error messages.

    Returns:
        The positive duration, or ``None`` for "unlimited": ``None`` itself, ``TimeSpan.MaxValue``
        (``P10675199DT2H48M5.4775807S``) or anything at least that long.

    Raises:
        InvalidPropertyError: For numbers, booleans, unparsable strings, durations with years or
            months (their length is ambiguous), and zero or negative durations.
    """
    if value is None:
        return None
    if isinstance(value, timedelta):
        td = value
    elif isinstance(value, str):
        text = value.strip()
        if not text.startswith("P"):
            raise _reject(field, value, "an ISO-8601 duration starts with 'P'")
        try:
            parsed = isodate.parse_duration(text)
        except OverflowError:
            return None  # longer than any timedelta, hence longer than TimeSpan.MaxValue
        except (ValueError, TypeError, ArithmeticError) as exc:
            raise _reject(field, value, f"cannot be parsed ({exc})") from None
        if isinstance(parsed, isodate.Duration):
            raise _reject(field, value, "years and months have no fixed length")
        td = parsed
    else:
        raise _reject(field, value, f"got {type(value).__name__}, numbers are not accepted")
    if td >= UNLIMITED_FROM:
        return None
    if td <= timedelta(0):
        raise _reject(field, value, "it must be longer than zero")
    return td


def format_duration(td: Optional[timedelta]) -> Optional[str]:
    """Write a duration as an ISO-8601 string that :func:`parse_duration` reads back exactly.

    Args:
        td: The duration, or ``None`` (unlimited).

    Returns:
        For example ``PT30S``, ``PT1M30.5S``, ``P1DT2H``; ``PT0S`` for zero; ``None`` for ``None``.

    Raises:
        InvalidPropertyError: If ``td`` is negative or not a timedelta.
    """
    if td is None:
        return None
    if not isinstance(td, timedelta):
        raise InvalidPropertyError(f"duration={td!r}: expected a datetime.timedelta or None")
    if td < timedelta(0):
        raise InvalidPropertyError(f"duration={td!r}: negative durations cannot be formatted")
    seconds = td.seconds
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    out = "P"
    if td.days:
        out += f"{td.days}D"
    clock = ""
    if hours:
        clock += f"{hours}H"
    if minutes:
        clock += f"{minutes}M"
    if secs or td.microseconds:
        if td.microseconds:
            clock += f"{secs}.{td.microseconds:06d}".rstrip("0") + "S"
        else:
            clock += f"{secs}S"
    if clock:
        out += "T" + clock
    elif not td.days:
        out += "T0S"
    return out


# -- where a duration from a start ends -----------------------------------------------------------
#: The last instant a Python datetime (and a Spark TIMESTAMP) holds, in microseconds since the
#: epoch: a time to live that ends later never ends.
MAX_INSTANT_MICROS = 253402300799999999


def expiry(start: datetime, ttl: Optional[timedelta]) -> Optional[datetime]:
    """When something that lives ``ttl`` from ``start`` ends: None without a TTL, or when the end
    is past the last instant a timestamp can hold (it never ends; TTL-1 with TTLs of millions of
    days, which Service Bus accepts up to TimeSpan.MaxValue)."""
    if ttl is None:
        return None
    try:
        return start + ttl
    except OverflowError:
        return None


def expiry_sql(start: str, micros: str) -> str:
    """The Spark SQL of :func:`expiry`: ``start`` (a TIMESTAMP expression) plus ``micros`` (a
    BIGINT expression, NULL for no TTL), NULL past the last instant a timestamp holds. The
    comparison is made before the sum, so nothing overflows or wraps."""
    return (f"CASE WHEN ({micros}) IS NULL OR ({micros}) > {MAX_INSTANT_MICROS} - "
            f"unix_micros({start}) THEN NULL "
            f"ELSE timestamp_micros(unix_micros({start}) + ({micros})) END")

