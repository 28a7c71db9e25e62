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


# -- gaps found by the bad-input catalogue (docs/reliability.md) --------------------------------
def test_a_manual_clock_only_moves_forward():
    from datetime import timedelta

    clock = ManualClock()
    with pytest.raises(ValueError, match="a clock only moves forward, got -1 day"):
        clock.advance(timedelta(days=-1))


@pytest.mark.parametrize("value, why", [
    (42, "a namespace is a folder path or a Hadoop file system URI .*got int"),
    (None, "got NoneType"),
    ("ns`; DROP", "no backticks or line breaks"),
    ("ns\nother", "no backticks or line breaks"),
    ("   ", "give a folder path or a Hadoop file system URI"),
])
def test_a_namespace_is_a_folder_path_or_uri(value, why):
    from sbdelta._namespace import normalize_root
    from sbdelta.exceptions import ServiceBusConnectionError

    with pytest.raises(ServiceBusConnectionError, match=why):
        normalize_root(value)


@pytest.mark.parametrize("kwargs, why", [
    (dict(poll_interval=0), "poll_interval must be a positive number of seconds"),
    (dict(poll_interval=-1), "poll_interval must be a positive number of seconds"),
    (dict(max_lock_renewal_duration="5m"), "max_lock_renewal_duration must be a positive"),
    (dict(max_workers=0), "max_workers must be None or an integer >= 1"),
    (dict(on_lock_renew_failure="print"), "on_lock_renew_failure"),
])
def test_an_auto_lock_renewer_refuses_bad_settings(kwargs, why):
    from sbdelta import AutoLockRenewer

    with pytest.raises(ServiceBusInvalidOperationError, match=why):
        AutoLockRenewer(**kwargs)


def test_a_closed_auto_lock_renewer_takes_nothing_more():
    from sbdelta import AutoLockRenewer

    renewer = AutoLockRenewer()
    renewer.close()
    with pytest.raises(ServiceBusInvalidOperationError, match="this AutoLockRenewer is closed"):
        renewer.register(object(), object())


def test_config_files_must_be_utf8_and_not_nested_too_deeply(tmp_path):
    from sbdelta.config import load_config, loads_config
    from sbdelta.exceptions import ConfigurationError

    latin = tmp_path / "config.json"
    latin.write_bytes('{"UserConfig": {"Namespaces": [{"Name": "caf\xe9"}]}}'.encode("latin-1"))
    with pytest.raises(ConfigurationError, match="config.json: cannot read the configuration "
                                                 "file: 'utf-8' codec can't decode"):
        load_config(latin)
    with pytest.raises(ConfigurationError, match="malformed JSON: nested too deeply"):
        loads_config("[" * 100_000 + "]" * 100_000)
