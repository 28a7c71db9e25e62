"""The clock helpers every layer shares (sbdelta._clock), no Spark."""

from datetime import datetime, timedelta, timezone

import pytest

from sbdelta._clock import as_utc, utc


class _Stamp(datetime):
    """A datetime subclass, as pandas.Timestamp is."""


def test_as_utc_takes_naive_times_as_utc_and_returns_plain_aware_datetimes():
    assert as_utc(None) is None
    assert as_utc(datetime(2026, 1, 2, 3, 4, 5)) == datetime(2026, 1, 2, 3, 4, 5,
                                                             tzinfo=timezone.utc)
    plus_two = timezone(timedelta(hours=2))
    moved = as_utc(datetime(2026, 1, 2, 5, 4, 5, tzinfo=plus_two))
    assert moved == datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    assert moved.utcoffset() == timedelta(0)
    plain = as_utc(_Stamp(2026, 1, 2, 3, 4, 5, 6, tzinfo=timezone.utc))
    assert type(plain) is datetime and plain.microsecond == 6


def test_utc_refuses_naive_times():
    with pytest.raises(ValueError, match="naive"):
        utc(datetime(2026, 1, 2))
