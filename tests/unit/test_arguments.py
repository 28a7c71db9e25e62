"""Arguments refused when given, with what is allowed (issue 18's bad-input catalogue)."""

from datetime import datetime

import pytest

from sbdelta import ManualClock, SystemClock
from sbdelta._clock import SYSTEM_CLOCK, checked_clock
from sbdelta._handler import MAX_COUNT, positive_int
from sbdelta.exceptions import ServiceBusInvalidOperationError


@pytest.mark.parametrize("value", [0, -1, MAX_COUNT + 1, 2 ** 63, True, 1.0, "3", None])
def test_counts_are_integers_from_1_to_the_largest_a_spark_limit_takes(value):
    with pytest.raises(ServiceBusInvalidOperationError,
                       match=f"max_message_count must be an integer from 1 to {MAX_COUNT}"):
        positive_int(value, "max_message_count")


def test_counts_at_the_bounds_are_accepted():
    assert positive_int(1, "n") == 1
    assert positive_int(MAX_COUNT, "n") == MAX_COUNT == 2 ** 31 - 1


class NoNow:
    pass


class NaiveNow:
    def now(self):
        return datetime(2030, 1, 1)


class NowNotCallable:
    now = "2030-01-01"


@pytest.mark.parametrize("clock, why", [
    (NoNow(), "has no now\\(\\) method"), (NowNotCallable(), "has no now\\(\\) method"),
    (NaiveNow(), "returned datetime.datetime\\(2030, 1, 1, 0, 0\\); allowed: an aware datetime"),
    (SystemClock, "clock.now\\(\\) failed: TypeError: .*not the class"),  # the class itself
])
def test_a_clock_that_cannot_tell_the_time_is_refused_when_given(clock, why):
    with pytest.raises(ServiceBusInvalidOperationError, match=why):
        checked_clock(clock)


def test_good_clocks_and_none_pass():
    manual = ManualClock()
    assert checked_clock(manual) is manual
    assert checked_clock(None) is SYSTEM_CLOCK
