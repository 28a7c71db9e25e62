"""Paired namespaces, the parts that need no storage (issue 15): options, backlog queue names and
properties (PAIR-1), the failover error table, timer and rotation (PAIR-3), pings (PAIR-5), the
backlog form of a message (PAIR-4), how the syphon finds backlog queues and reports (PAIR-7).
Restoration runs on Spark: tests/messaging/test_syphon.py. Time is a ManualClock."""

import random
import re
from datetime import datetime, timedelta, timezone

import pytest

from sbdelta import ManualClock, ServiceBusMessage
from sbdelta._names import validate_entity_path
from sbdelta._properties import QueueProperties
from sbdelta.exceptions import (ConfigurationError, InvalidMessageError,
                                MessageSizeExceededError, MessagingEntityDisabledError,
                                OperationTimeoutError, ServiceBusAuthorizationError,
                                ServiceBusInvalidOperationError)
from sbdelta.paired import (BACKLOG_QUEUE_PROPERTIES, BacklogRotation, EntityHealth, ErrorKind,
                            PairedNamespaceOptions, backlog_queue_name, classify,
                            primary_identity, to_backlog)
from sbdelta.paired.backlog import PATH, SCHEDULED, SESSION_ID, TIME_TO_LIVE
from sbdelta.paired.options import backlog_queues_of, is_backlog_queue
from sbdelta.paired.syphon import SyphonReport

T0 = datetime(2030, 1, 1, tzinfo=timezone.utc)
MINUTE = timedelta(minutes=1)


# -- PAIR-1 ----------------------------------------------------------------------------------
@pytest.mark.parametrize("root", [
    "file:/data/sbdelta/prod", "abfss://sb@lake.dfs.core.windows.net/prod/",
    "s3a://bucket", "dbfs:/", "file:/", "gs://b/a%20b/ünïcode/" + "x" * 300,
])
def test_pair_1_backlog_queue_names_are_valid_stable_and_distinct(root):
    identity = primary_identity(root)
    assert re.fullmatch(r"[a-z0-9][a-z0-9-]*-[0-9a-f]{10}", identity)
    assert primary_identity(root) == identity  # stable
    assert primary_identity(root + "x") != identity  # distinct primaries, distinct names
    for i in (0, 99):
        name = backlog_queue_name(identity, i)
        assert validate_entity_path(name, kind="queue") == name
        assert name == f"{identity}/x-servicebus-transfer/{i}"


def test_pair_1_backlog_queues_have_exactly_the_listed_properties():
    props = QueueProperties("b", **BACKLOG_QUEUE_PROPERTIES)
    assert (props.max_size_in_megabytes, props.max_delivery_count) == (5120, 2 ** 31 - 1)
    assert props.default_message_time_to_live is None  # unlimited
    assert props.auto_delete_on_idle is None
    assert props.lock_duration == MINUTE
    assert props.dead_lettering_on_message_expiration and props.enable_batched_operations


def test_pairing_options_have_the_sdk_defaults_and_refuse_bad_values():
    options = PairedNamespaceOptions("/data/secondary")
    assert (options.backlog_queue_count, options.failover_interval,
            options.ping_primary_interval, options.enable_syphon, options.syphon_disabled) == \
        (10, MINUTE, MINUTE, False, "wait")
    assert PairedNamespaceOptions("/s", failover_interval=30).failover_interval == \
        timedelta(seconds=30)
    for kwargs, error in [
        (dict(secondary=""), "secondary must be"),
        (dict(secondary="/s", backlog_queue_count=0), "from 1 to 100"),
        (dict(secondary="/s", backlog_queue_count=True), "from 1 to 100"),
        (dict(secondary="/s", failover_interval=timedelta(0)), "more than 0"),
        (dict(secondary="/s", ping_primary_interval="1m"), "timedelta or a number"),
        (dict(secondary="/s", enable_syphon="yes"), "True or False"),
        (dict(secondary="/s", syphon_disabled="drop"),
         r"syphon_disabled must be one of \['wait', 'dead_letter'\].*'drop'"),
    ]:
        with pytest.raises(ConfigurationError, match=error):
            PairedNamespaceOptions(**kwargs)


# -- PAIR-3, PAIR-5 --------------------------------------------------------------------------
@pytest.mark.parametrize("error, kind", [
    (MessageSizeExceededError("too big"), ErrorKind.CALLER),
    (InvalidMessageError("bad"), ErrorKind.CALLER),
    (ServiceBusInvalidOperationError("no session id"), ErrorKind.CALLER),
    (ValueError("a bug"), ErrorKind.CALLER),
    (OperationTimeoutError("slow"), ErrorKind.TIMEOUT),
    (ServiceBusAuthorizationError("refused"), ErrorKind.FAULT),
    (MessagingEntityDisabledError("send disabled"), ErrorKind.FAULT),
    (OSError("disk gone"), ErrorKind.FAULT),
])
def test_pair_3_the_error_table_says_what_starts_the_timer(error, kind):
    assert classify(error) is kind


def test_pair_3_failover_engages_after_the_interval_without_a_success_and_pair_5_pings():
    clock = ManualClock(T0)
    health = EntityHealth(failover_interval=MINUTE, ping_interval=timedelta(seconds=20))
    fault = ServiceBusAuthorizationError("refused")
    health.record_error(fault, clock.now())  # the timer starts
    clock.advance(timedelta(seconds=59))
    health.record_error(MessageSizeExceededError("x"), clock.now())  # the caller's: no effect
    health.record_error(fault, clock.now())
    assert not health.use_backlog(clock.now())
    health.record_success()  # a send landed: the timer is reset
    health.record_error(fault, clock.now())
    clock.advance(MINUTE)
    assert not health.ping_due(clock.now())
    health.record_error(fault, clock.now())  # a minute of failures: failover engages
    assert health.use_backlog(clock.now())
    assert not health.ping_due(clock.now())
    clock.advance(timedelta(seconds=20))
    assert health.ping_due(clock.now())  # one sender pings ...
    assert not health.ping_due(clock.now())  # ... the others do not
    clock.advance(timedelta(seconds=20))
    assert health.ping_due(clock.now())
    health.record_success()  # the ping landed: sends go to the primary again
    assert not health.use_backlog(clock.now()) and not health.ping_due(clock.now())


def test_pair_3_a_failing_backlog_queue_leaves_the_rotation():
    rotation = BacklogRotation(3, random.Random(7))
    assert {rotation.choose() for _ in range(50)} == {0, 1, 2}
    rotation.drop(1)
    assert {rotation.choose() for _ in range(50)} == {0, 2}
    rotation.drop(0)
    rotation.drop(2)
    assert rotation.choose() is None  # none left: the caller gets the error ...
    assert rotation.healthy == {0, 1, 2}  # ... and the next send tries them all again


# -- PAIR-4, PAIR-7 --------------------------------------------------------------------------
def test_pair_4_the_backlog_form_carries_the_destination_and_the_cleared_properties():
    message = ServiceBusMessage(b"\x00body", session_id="s-1", time_to_live=timedelta(hours=1),
                                scheduled_enqueue_time_utc=T0 + MINUTE, message_id="m-1",
                                subject="orders", application_properties={"region": "eu"})
    backlog = to_backlog(message, "orders/eu")
    assert (backlog.session_id, backlog.time_to_live, backlog.scheduled_enqueue_time_utc) == \
        (None, None, None)
    assert backlog.application_properties == {
        "region": "eu", PATH: "orders/eu", SESSION_ID: "s-1", TIME_TO_LIVE: 3_600_000,
        SCHEDULED: T0 + MINUTE}
    assert (backlog.body, backlog.message_id, backlog.subject, backlog.partition_key) == \
        (b"\x00body", "m-1", "orders", "s-1")  # one session stays in one backlog partition
    with pytest.raises(InvalidMessageError, match=r"\['x-ms-path'\] is reserved"):
        to_backlog(ServiceBusMessage("x", application_properties={PATH: "elsewhere"}), "q")


# -- the syphon's parts that need no storage --------------------------------------------------
def test_pair_7_backlog_queues_are_found_by_name_for_their_primary_only():
    names = ["orders", "p-1/x-servicebus-transfer/10", "P-1/X-ServiceBus-Transfer/2",
             "p-1/x-servicebus-transfer/x", "other/x-servicebus-transfer/0",
             "p-1/x-servicebus-transfer/0"]
    assert backlog_queues_of("p-1", names) == [
        "p-1/x-servicebus-transfer/0", "P-1/X-ServiceBus-Transfer/2",
        "p-1/x-servicebus-transfer/10"]
    assert [is_backlog_queue(n) for n in names] == [False, True, True, False, True, True]


def test_pair_7_the_syphon_report_says_what_moved_and_what_was_dead_lettered():
    report = SyphonReport(backlog_queues=["b/x-servicebus-transfer/0"],
                          moved={"orders": 3, "events": 1},
                          dead_lettered={"MessagingEntityNotFound": 2}, seconds=1.25)
    assert str(report).splitlines() == [
        "syphon: 1 backlog queue(s), 4 message(s) moved, 2 dead-lettered in 1.2 s",
        "          1 -> events", "          3 -> orders",
        "          2 dead-lettered: MessagingEntityNotFound"]
