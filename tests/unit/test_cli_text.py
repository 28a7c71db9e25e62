"""What the CLI makes of its text arguments and how it writes ages (no Spark)."""

from datetime import datetime, timedelta, timezone

import click
import pytest

from sbdelta.cli.messages import age_text, parse_property

NOW = datetime(2030, 1, 1, tzinfo=timezone.utc)


@pytest.mark.parametrize("ago, text", [
    (timedelta(seconds=7), "0m07s"), (timedelta(minutes=3, seconds=7), "3m07s"),
    (timedelta(hours=2, minutes=5, seconds=9), "2h05m"), (timedelta(days=4, hours=3), "4d03h"),
    (-timedelta(seconds=5), "0m00s"),  # a sender's clock ahead: not a negative age
])
def test_ages_are_written_in_their_two_largest_units(ago, text):
    assert age_text(NOW - ago, NOW) == text
    assert age_text(None, NOW) is None


@pytest.mark.parametrize("arg, pair", [
    ("n=5", ("n", 5)), ("x=2.5", ("x", 2.5)), ("ok=true", ("ok", True)),
    ("s=hello", ("s", "hello")), ("s=", ("s", "")), ("q=\"5\"", ("q", "5")),
    ("eq=a=b", ("eq", "a=b")), ("n=null", ("n", "null")), ("l=[1]", ("l", "[1]")),
])
def test_properties_are_typed_as_json_scalars_or_kept_as_text(arg, pair):
    assert parse_property(arg) == pair


@pytest.mark.parametrize("arg", ["novalue", "=5"])
def test_a_property_without_key_or_equals_sign_is_refused(arg):
    with pytest.raises(click.BadParameter, match="is not KEY=VALUE"):
        parse_property(arg)
