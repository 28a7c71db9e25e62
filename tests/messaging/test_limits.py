"""Values at the edges of what is allowed, on real Spark and Delta (issue 18).

Times to live of millions of days (Service Bus accepts up to TimeSpan.MaxValue) end past the
last instant a timestamp holds: such a message never expires, and neither a send nor a receive
overflows, wraps or fails after its lock was taken (TTL-1, TTL-3, TTL-7). Counts beyond what a
Spark limit takes, and clocks that cannot tell the time, are refused before anything runs.
"""

from datetime import timedelta

import pytest
from chispa import assert_df_equality

from sbdelta import ServiceBusClient, ServiceBusMessage
from sbdelta.exceptions import ServiceBusInvalidOperationError

from ..conftest import START


@pytest.fixture(scope="module")
def ns(spark, tmp_path_factory):
    return str(tmp_path_factory.mktemp("limits") / "ns")


MILLION_DAYS_3 = timedelta(days=3_000_000)  # from 2030: past 9999-12-31


def test_ttl_1_a_time_to_live_past_the_last_timestamp_never_expires_in_both_send_forms(
        spark, client, queue, clock):
    name = queue()
    sender = client.get_queue_sender(name)
    sender.send_messages(ServiceBusMessage("own", message_id="own",
                                           time_to_live=MILLION_DAYS_3))
    seconds = MILLION_DAYS_3.total_seconds()
    sender.send_dataframe(spark.createDataFrame(
        [("frame", "frame", seconds), ("huge", "huge", 1e300)],
        "body STRING, message_id STRING, time_to_live DOUBLE"))
    clock.advance(timedelta(days=365))
    got = {m.message_id: m for m in client.get_queue_receiver(name,
                                                              max_wait_time=0).receive_messages(10)}
    assert sorted(got) == ["frame", "huge", "own"]
    assert got["own"].expires_at_utc is None and got["frame"].expires_at_utc is None
    assert got["own"].time_to_live == MILLION_DAYS_3 == got["frame"].time_to_live
    assert got["huge"].time_to_live is None  # TimeSpan.MaxValue or longer: no TTL at all
    with pytest.raises(ServiceBusInvalidOperationError, match="not a positive number"):
        sender.send_dataframe(spark.createDataFrame(
            [("nan", float("nan"))], "body STRING, time_to_live DOUBLE"))


def test_ttl_3_ttl_7_an_entity_default_of_millions_of_days_receives_in_both_forms(
        spark, admin, client, queue, clock):
    name = queue(default_message_time_to_live=timedelta(days=5_000_000))
    sender = client.get_queue_sender(name)
    sender.send_messages([ServiceBusMessage(f"m{i}", message_id=f"m{i}") for i in range(2)])
    receiver = client.get_queue_receiver(name, max_wait_time=0)
    [first] = receiver.receive_messages(1)
    assert first.expires_at_utc is None  # the default would end past year 9999
    assert first.time_to_live == timedelta(days=5_000_000)
    frame = receiver.receive_dataframe(5).select("message_id", "expires_at_utc")
    expected = spark.createDataFrame([("m1", None)], "message_id STRING, expires_at_utc TIMESTAMP")
    assert_df_equality(frame, expected, ignore_nullable=True)
    receiver.complete_messages([first])


def test_counts_beyond_a_spark_limit_are_refused_before_anything_runs(client, queue):
    name = queue()
    receiver = client.get_queue_receiver(name, max_wait_time=0)
    for call in (lambda: receiver.peek_messages(2 ** 31),
                 lambda: receiver.receive_messages(2 ** 31),
                 lambda: receiver.receive_dataframe(2 ** 40)):
        with pytest.raises(ServiceBusInvalidOperationError, match="from 1 to 2147483647"):
            call()


def test_a_clock_without_now_is_refused_when_the_client_is_made(spark, ns):
    with pytest.raises(ServiceBusInvalidOperationError, match="has no now\\(\\) method"):
        ServiceBusClient(ns, spark=spark, clock="2030-01-01")
    # A datetime has a now() (the class method): it returns a naive local time.
    with pytest.raises(ServiceBusInvalidOperationError, match="allowed: an aware datetime"):
        ServiceBusClient(ns, spark=spark, clock=START)
