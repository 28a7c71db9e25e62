"""Deferred messages honour their time to live (issue 12, item 8), on real Spark and Delta
with a ManualClock: an expired deferred message is not received by number, and the expiry
sweep dead-letters or drops it once nobody holds its lock.

Each test names the rule of ../shared/SEMANTICS.md it proves.
"""

from datetime import timedelta

import pytest

from sbdelta import ServiceBusMessage, ServiceBusSubQueue
from sbdelta.exceptions import MessageNotFoundError
from sbdelta.maintenance import expire_messages


@pytest.fixture(scope="module")
def ns(spark, tmp_path_factory):
    return str(tmp_path_factory.mktemp("deferred-expiry") / "ns")


def counts(admin, name):
    c = admin.get_queue_runtime_properties(name)
    return {"active": c.active_message_count, "scheduled": c.scheduled_message_count,
            "deferred": c.deferred_message_count, "dead": c.dead_letter_message_count}


def dead_letters(client, name):
    dlq = client.get_queue_receiver(name, sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=0)
    return {str(m): m.application_properties.get("DeadLetterReason")
            for m in dlq.peek_messages(10, sequence_number=0)}


def sweep(ns, name, clock, spark):
    return expire_messages(ns, entities=[name], clock=clock, spark=spark).totals()


def test_ttl_4_settle_4_expired_deferred_message_is_not_received_by_number(client, queue,
                                                                           admin, clock):
    name = queue()
    client.get_queue_sender(name).send_messages(
        [ServiceBusMessage("short", time_to_live=timedelta(seconds=30)),
         ServiceBusMessage("long", time_to_live=timedelta(minutes=5))])
    receiver = client.get_queue_receiver(name, max_wait_time=0)
    short, long_ = receiver.receive_messages(5)
    receiver.defer_message(short)
    receiver.defer_message(long_)
    clock.advance(timedelta(seconds=30))
    for numbers in ([short.sequence_number], [long_.sequence_number, short.sequence_number]):
        with pytest.raises(MessageNotFoundError,
                           match=rf"message\(s\) \[{short.sequence_number}\] expired"):
            receiver.receive_deferred_messages(numbers)
    assert counts(admin, name)["deferred"] == 2  # TTL-4: counted until swept
    (got,) = receiver.receive_deferred_messages(long_.sequence_number)
    assert str(got) == "long"


def test_ttl_5_ttl_6_sweep_dead_letters_expired_deferred_messages_once_unlocked(
        spark, ns, client, queue, admin, clock):
    name = queue(dead_lettering_on_message_expiration=True, lock_duration=timedelta(minutes=1))
    client.get_queue_sender(name).send_messages(
        [ServiceBusMessage(b, time_to_live=timedelta(seconds=30))
         for b in ("free", "done", "held")])
    receiver = client.get_queue_receiver(name, max_wait_time=0)
    got = receiver.receive_messages(5)
    for m in got:
        receiver.defer_message(m)
    done, held = receiver.receive_deferred_messages([m.sequence_number for m in got[1:]])
    clock.advance(timedelta(seconds=40))  # all expired; "done" and "held" still locked
    assert sweep(ns, name, clock, spark)["expired_dead_lettered"] == 1
    assert dead_letters(client, name) == {"free": "TTLExpiredException"}
    receiver.complete_message(done)  # TTL-5: the holder may still settle it
    clock.advance(timedelta(seconds=30))  # the lock on "held" ended: expiry applies now
    assert sweep(ns, name, clock, spark) == {
        "expired_dead_lettered": 1, "expired_dropped": 0, "max_delivery_dead_lettered": 0,
        "unfinished_moves": 0, "refused_dead_lettered": 0}
    assert dead_letters(client, name) == {"free": "TTLExpiredException",
                                          "held": "TTLExpiredException"}
    assert counts(admin, name) == {"active": 0, "scheduled": 0, "deferred": 0, "dead": 2}


def test_ttl_6_sweep_drops_expired_deferred_messages_without_dead_lettering(
        spark, ns, client, queue, admin, clock):
    # Delivered once with max_delivery_count=1: expiry, not the delivery limit, applies.
    name = queue(max_delivery_count=1)
    client.get_queue_sender(name).send_messages(
        ServiceBusMessage("gone", time_to_live=timedelta(seconds=30)))
    receiver = client.get_queue_receiver(name, max_wait_time=0)
    (m,) = receiver.receive_messages(5)
    receiver.defer_message(m)
    clock.advance(timedelta(seconds=30))
    assert sweep(ns, name, clock, spark) == {
        "expired_dead_lettered": 0, "expired_dropped": 1, "max_delivery_dead_lettered": 0,
        "unfinished_moves": 0, "refused_dead_lettered": 0}
    assert dead_letters(client, name) == {}
    assert counts(admin, name) == {"active": 0, "scheduled": 0, "deferred": 0, "dead": 0}
    with pytest.raises(MessageNotFoundError):
        receiver.receive_deferred_messages(m.sequence_number)
