"""ISO-8601 durations: parse_duration and format_duration."""

from datetime import timedelta

import pytest

from sbdelta._durations import TIMESPAN_MAX, format_duration, parse_duration
from sbdelta.exceptions import InvalidPropertyError


@pytest.mark.parametrize("text, expected", [
    ("PT30S", timedelta(seconds=30)),
    ("P1D", timedelta(days=1)),
    ("PT1M30.5S", timedelta(minutes=1, seconds=30.5)),
    ("P1DT2H", timedelta(days=1, hours=2)),
    ("PT0.000001S", timedelta(microseconds=1)),
    ("P1W", timedelta(days=7)),
    ("P0Y0M1D", timedelta(days=1)),  # zero years and months are not ambiguous
    (" PT5M ", timedelta(minutes=5)),  # surrounding blanks are ignored
])
def test_parse_iso_strings(text, expected):
    assert parse_duration(text, field="f") == expected


def test_parse_timedelta_passes_through():
    assert parse_duration(timedelta(seconds=7), field="f") == timedelta(seconds=7)


@pytest.mark.parametrize("value", [
    None,
    TIMESPAN_MAX,
    "P10675199DT2H48M5.4775807S",
    "P99999999999999D",  # longer than any timedelta
    timedelta.max,
    timedelta.max / 2,
    timedelta(days=10675199, hours=3),
])
def test_unlimited_is_none(value):
    assert parse_duration(value, field="f") is None


def test_just_below_timespan_max_is_finite():
    td = timedelta(days=10675199)
    assert parse_duration(td, field="f") == td


@pytest.mark.parametrize("value, why", [
    (30, "int"),
    (30.0, "float"),
    (True, "bool"),
    ([], "list"),
    ("30", "starts with 'P'"),
    ("thirty seconds", "starts with 'P'"),
    ("", "starts with 'P'"),
    ("P", "cannot be parsed"),
    ("PT5X", "cannot be parsed"),
    ("pt5s", "starts with 'P'"),
    ("P1Y", "years and months"),
    ("P1M", "years and months"),
    ("P1Y2M3D", "years and months"),
    ("PT0S", "longer than zero"),
    ("PT", "longer than zero"),
    ("-PT5S", "starts with 'P'"),
    (timedelta(0), "longer than zero"),
    (timedelta(seconds=-1), "longer than zero"),
])
def test_parse_rejects(value, why):
    with pytest.raises(InvalidPropertyError, match=why) as info:
        parse_duration(value, field="lock_duration")
    message = str(info.value)
    assert "lock_duration" in message and repr(value) in message
    assert "ISO-8601" in message  # says what is accepted


def test_invalid_property_error_is_value_error():
    with pytest.raises(ValueError):
        parse_duration("nope", field="f")


@pytest.mark.parametrize("td, text", [
    (timedelta(seconds=30), "PT30S"),
    (timedelta(days=1, hours=2), "P1DT2H"),
    (timedelta(days=1), "P1D"),
    (timedelta(minutes=1, seconds=30.5), "PT1M30.5S"),
    (timedelta(hours=1), "PT1H"),
    (timedelta(minutes=5), "PT5M"),
    (timedelta(microseconds=1), "PT0.000001S"),
    (timedelta(days=2, hours=3, minutes=4, seconds=5, microseconds=600), "P2DT3H4M5.0006S"),
    (timedelta(0), "PT0S"),
])
def test_format(td, text):
    assert format_duration(td) == text


def test_format_none():
    assert format_duration(None) is None


@pytest.mark.parametrize("td", [
    timedelta(seconds=1), timedelta(seconds=59, microseconds=999999), timedelta(minutes=5),
    timedelta(days=14), timedelta(days=10675199), timedelta(hours=25, microseconds=10),
    timedelta(days=3, seconds=7, microseconds=123456),
])
def test_round_trip(td):
    assert parse_duration(format_duration(td), field="f") == td


@pytest.mark.parametrize("bad", [timedelta(seconds=-1), "PT5S", 5])
def test_format_rejects(bad):
    with pytest.raises(InvalidPropertyError, match="duration"):
        format_duration(bad)


# -- where a time to live ends (issue 18: durations near the limits) -----------------------------
def test_expiry_past_the_last_representable_instant_is_never():
    from datetime import datetime, timezone

    from sbdelta._durations import MAX_INSTANT_MICROS, expiry

    start = datetime(2030, 1, 1, tzinfo=timezone.utc)
    assert expiry(start, None) is None
    assert expiry(start, timedelta(days=1)) == datetime(2030, 1, 2, tzinfo=timezone.utc)
    assert expiry(start, timedelta(days=2_000_000)) is not None  # year 7505
    assert expiry(start, timedelta(days=3_000_000)) is None  # past 9999-12-31: never
    last = datetime.max.replace(tzinfo=timezone.utc)
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    assert (last - epoch) // timedelta(microseconds=1) == MAX_INSTANT_MICROS
