"""The broker's behaviour, once per entity kind: every test here runs on a queue, on a
partitioned queue (16 partitions) and on a subscription of a partitioned topic (sent to the
topic, received from the subscription: TOPIC-1, a subscription behaves as a queue of its own).

Each test names the rule of ../shared/SEMANTICS.md it proves. Time is a ManualClock. Nothing
here assumes an order across partitions (PART-4 orders messages within a partition only):
messages are told apart by body, and pages of peeks are read to the end.
"""

import itertools
from datetime import timedelta

import pytest

from sbdelta import (ServiceBusMessage, ServiceBusMessageState, ServiceBusReceiveMode,
                     ServiceBusSubQueue)
from sbdelta.exceptions import MessageAlreadySettled, MessageLockLostError, MessageNotFoundError

from ..conftest import START, receive_all

#: Entity kinds and the properties that make one, on top of each test's own.
KINDS = {"queue": {}, "partitioned-queue": {"enable_partitioning": True},
         "subscription": {"enable_partitioning": True}}
#: Properties a topic takes when the entity is a subscription (the rest go to the subscription).
TOPIC_PROPERTIES = {"enable_partitioning", "requires_duplicate_detection",
                    "duplicate_detection_history_time_window"}


class Target:
    """The entity under test, whatever its kind: where to send, where to receive, its counts."""

    def __init__(self, client, admin, queue=None, topic=None, subscription=None):
        self.client, self.admin = client, admin
        self.queue, self.topic, self.subscription = queue, topic, subscription

    def sender(self):
        if self.queue:
            return self.client.get_queue_sender(self.queue)
        return self.client.get_topic_sender(self.topic)

    def receiver(self, **kwargs):
        kwargs.setdefault("max_wait_time", 0)  # one look: these tests expect empty answers
        if self.queue:
            return self.client.get_queue_receiver(self.queue, **kwargs)
        return self.client.get_subscription_receiver(self.topic, self.subscription, **kwargs)

    def update(self, **changes):
        """Change the entity's properties through the admin client."""
        if self.queue:
            self.admin.update_queue(self.admin.get_queue(self.queue), **changes)
        else:
            self.admin.update_subscription(
                self.topic, self.admin.get_subscription(self.topic, self.subscription), **changes)

    def runtime(self):
        if self.queue:
            return self.admin.get_queue_runtime_properties(self.queue)
        return self.admin.get_subscription_runtime_properties(self.topic, self.subscription)


@pytest.fixture(scope="module")
def ns(spark, tmp_path_factory):
    return str(tmp_path_factory.mktemp("behaviour") / "ns")


_topics = itertools.count()


@pytest.fixture(params=list(KINDS))
def entity(request, queue, client, admin):
    """A fresh entity of the kind under test: entity(**properties) -> Target."""
    def make(**props):
        props = {**KINDS[request.param], **props}
        if request.param != "subscription":
            return Target(client, admin, queue=queue(**props))
        topic = f"t{next(_topics)}"
        admin.create_topic(topic, **{k: v for k, v in props.items() if k in TOPIC_PROPERTIES})
        admin.create_subscription(topic, "s", **{k: v for k, v in props.items()
                                                  if k not in TOPIC_PROPERTIES})
        return Target(client, admin, topic=topic, subscription="s")
    return make


def bodies(messages):
    return sorted(str(m) for m in messages)


def peek_all(receiver):
    """Every message, paging through partitions (PART-5: one partition per peek)."""
    seen, start = [], 0
    while True:
        page = receiver.peek_messages(50, sequence_number=start)
        if not page:
            return seen
        seen += page
        start = page[-1].sequence_number + 1


def counts(target):
    c = target.runtime()
    return {"active": c.active_message_count, "scheduled": c.scheduled_message_count,
            "deferred": c.deferred_message_count, "dead": c.dead_letter_message_count}


# -- peek-lock ---------------------------------------------------------------------------------
def test_recv_2_recv_3_locked_message_is_invisible_to_a_competing_receiver(client, entity):
    e = entity()
    e.sender().send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
    first, second = e.receiver(), e.receiver()
    a = first.receive_messages(1)
    b = receive_all(second, 1, batch=5)
    assert len(a) == 1 and len(b) == 1 and bodies(a + b) == ["a", "b"]
    assert second.receive_messages(5) == [] and first.receive_messages(5) == []
    assert a[0].lock_token != b[0].lock_token


def test_settle_6_lock_duration_from_queue_and_recv_4_expired_lock_frees_message(client, entity,
                                                                                clock):
    e = entity(lock_duration=timedelta(seconds=45))
    e.sender().send_messages(ServiceBusMessage("m"))
    receiver = e.receiver()
    (m,) = receiver.receive_messages()
    assert m.locked_until_utc == START + timedelta(seconds=45)
    assert m.delivery_count == 1
    clock.advance(timedelta(seconds=44))
    assert receiver.receive_messages() == []
    clock.advance(timedelta(seconds=1))
    (again,) = receiver.receive_messages()  # rule RECV-4
    assert again.sequence_number == m.sequence_number
    assert again.delivery_count == 2  # rule RECV-5
    with pytest.raises(MessageLockLostError):  # rule SETTLE-5: the old lock is gone
        receiver.complete_message(m)
    receiver.complete_message(again)
    assert receiver.receive_messages() == []


def test_settle_2_abandon_makes_message_available_at_once_with_new_properties(client, entity):
    e = entity()
    e.sender().send_messages(
        ServiceBusMessage("m", application_properties={"n": 1}))
    receiver = e.receiver()
    (m,) = receiver.receive_messages()
    receiver.abandon_message(m, properties_to_modify={"retried": True})
    (again,) = receiver.receive_messages()
    assert again.delivery_count == 2
    assert again.application_properties == {"n": 1, "retried": True}


def test_recv_5_max_delivery_count_moves_to_dead_letter_queue(client, entity, clock):
    e = entity(max_delivery_count=2)
    e.sender().send_messages(
        [ServiceBusMessage("abandoned", message_id="m1"), ServiceBusMessage("expired")])
    receiver = e.receiver()
    for _ in range(2):
        by_body = {str(m): m for m in receive_all(receiver, 2, batch=5)}
        receiver.abandon_message(by_body["abandoned"])
        clock.advance(timedelta(seconds=31))  # "expired" loses its lock
    assert receiver.receive_messages(5) == []
    dlq = e.receiver(sub_queue=ServiceBusSubQueue.DEAD_LETTER)
    dead = receive_all(dlq, 2)
    assert bodies(dead) == ["abandoned", "expired"]
    assert {m.dead_letter_reason for m in dead} == {"MaxDeliveryCountExceeded"}
    assert all(m.application_properties["DeadLetterReason"] == "MaxDeliveryCountExceeded"
               for m in dead)


def test_settle_1_complete_removes_and_settle_5_settling_twice_is_refused(client, entity):
    e = entity()
    e.sender().send_messages(ServiceBusMessage("m"))
    receiver = e.receiver()
    (m,) = receiver.receive_messages()
    receiver.complete_message(m)
    with pytest.raises(MessageAlreadySettled):
        receiver.complete_message(m)
    assert receiver.receive_messages() == []
    assert peek_all(receiver) == []


def test_recv_1_receive_and_delete_removes_in_the_same_operation(client, entity, admin):
    e = entity()
    e.sender().send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
    rad = e.receiver(receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE)
    got = rad.receive_messages(1)
    assert len(got) == 1 and got[0].lock_token is None
    left = peek_all(e.receiver())
    assert bodies(got + left) == ["a", "b"] and len(left) == 1
    assert e.runtime().active_message_count == 1


def test_settle_4_deferred_message_only_by_sequence_number(client, entity):
    e = entity()
    e.sender().send_messages(ServiceBusMessage("later"))
    receiver = e.receiver()
    (m,) = receiver.receive_messages()
    receiver.defer_message(m)
    assert receiver.receive_messages(5) == []
    (peeked,) = peek_all(receiver)
    assert peeked.state is ServiceBusMessageState.DEFERRED
    with pytest.raises(MessageNotFoundError):
        receiver.receive_deferred_messages([m.sequence_number + 1])
    (d,) = receiver.receive_deferred_messages([m.sequence_number])
    assert str(d) == "later" and d.lock_token is not None
    with pytest.raises(MessageNotFoundError):  # locked now
        e.receiver().receive_deferred_messages(m.sequence_number)
    receiver.complete_message(d)
    with pytest.raises(MessageNotFoundError):
        receiver.receive_deferred_messages([m.sequence_number])


def test_settle_3_dead_letter_with_reason_and_settle_8_ids_kept_and_ttl_8(client, entity, clock):
    e = entity(default_message_time_to_live=timedelta(minutes=1))
    e.sender().send_messages(ServiceBusMessage("poison", message_id="id-1"))
    receiver = e.receiver()
    (m,) = receiver.receive_messages()
    receiver.dead_letter_message(m, reason="bad-format", error_description="not JSON")
    assert receiver.receive_messages() == []
    clock.advance(timedelta(days=2))  # rule TTL-8: never expires in the dead-letter queue
    dlq = e.receiver(sub_queue=ServiceBusSubQueue.DEAD_LETTER)
    (dead,) = dlq.receive_messages()
    assert dead.sequence_number == m.sequence_number and dead.message_id == "id-1"
    assert (dead.dead_letter_reason, dead.dead_letter_error_description) == ("bad-format",
                                                                             "not JSON")
    assert dead.application_properties["DeadLetterReason"] == "bad-format"
    assert dead.application_properties["DeadLetterErrorDescription"] == "not JSON"
    dlq.abandon_message(dead)
    (dead,) = dlq.receive_messages()
    dlq.complete_message(dead)
    assert dlq.receive_messages() == []


def test_batch_settlement_is_all_or_nothing(client, entity, clock):
    e = entity(lock_duration=timedelta(seconds=30))
    sender = e.sender()
    sender.send_messages(ServiceBusMessage("early"))
    receiver = e.receiver()
    (early,) = receiver.receive_messages()
    clock.advance(timedelta(seconds=20))
    sender.send_messages(ServiceBusMessage("late"))
    (late,) = receiver.receive_messages()
    clock.advance(timedelta(seconds=15))  # early's lock expired, late's holds
    with pytest.raises(MessageLockLostError, match="Nothing was settled"):
        receiver.complete_messages([early.lock_token, late.lock_token])
    receiver.complete_message(late)  # untouched by the failed batch


def test_settle_7_an_entity_update_voids_every_lock_however_it_is_settled(client, entity,
                                                                         clock, spark):
    """SETTLE-7: a change of the entity's properties loses the locks held then, in the store,
    so that settling by lock tokens or by a DataFrame of them (which no received message
    object stands behind) is refused as settling the message is; the dead-letter queue's locks
    too. The messages come back to the next receive (delivered again), and locks taken after
    the update hold."""
    e = entity(lock_duration=timedelta(minutes=1))
    e.sender().send_messages([ServiceBusMessage(f"m{i}") for i in range(4)])
    receiver = e.receiver()
    dead = receive_all(receiver, 1, batch=1)
    receiver.dead_letter_message(dead[0], reason="checked")
    dlq = e.receiver(sub_queue=ServiceBusSubQueue.DEAD_LETTER)
    (in_dlq,) = dlq.receive_messages(5)
    got = receive_all(receiver, 3)
    clock.advance(timedelta(seconds=1))
    e.update(max_delivery_count=5)
    with pytest.raises(MessageLockLostError, match="Nothing was settled"):
        receiver.complete_messages([got[0].lock_token])
    tokens = spark.createDataFrame([(m.lock_token,) for m in got[1:]], "lock_token string")
    with pytest.raises(MessageLockLostError, match="Nothing was settled"):
        receiver.abandon_messages(tokens)
    with pytest.raises(MessageLockLostError, match="Nothing was settled"):
        dlq.complete_messages([in_dlq.lock_token])
    with pytest.raises(MessageLockLostError, match="was updated"):
        receiver.complete_message(got[0])
    again = receive_all(receiver, 3)
    assert bodies(again) == bodies(got) and {m.delivery_count for m in again} == {2}
    assert receiver.complete_messages([m.lock_token for m in again]) == 3
    (dead_again,) = dlq.receive_messages(5)
    assert str(dead_again) == str(dead[0])
    assert dlq.complete_messages([dead_again.lock_token]) == 1
    assert counts(e) == {"active": 0, "scheduled": 0, "deferred": 0, "dead": 0}


def test_settle_7_an_update_that_changes_nothing_writes_nothing_and_keeps_every_lock(
        client, entity, clock):
    """SETTLE-7 loses locks when the entity's properties change: an update to the values it
    already has (none given, or the same ones) changes nothing, so it commits nothing, keeps
    ``updated_at_utc`` and the locks held."""
    e = entity(lock_duration=timedelta(minutes=1))
    e.sender().send_messages(ServiceBusMessage("m"))
    receiver = e.receiver()
    (m,) = receive_all(receiver, 1)

    def described():
        return (e.admin.get_queue(e.queue) if e.queue
                else e.admin.get_subscription(e.topic, e.subscription))

    before = described()
    clock.advance(timedelta(seconds=1))
    e.update()
    e.update(lock_duration=timedelta(minutes=1), max_delivery_count=before.max_delivery_count)
    assert described() == before
    receiver.complete_message(m)
    assert counts(e) == {"active": 0, "scheduled": 0, "deferred": 0, "dead": 0}


# -- duplicate detection, scheduling, TTL -----------------------------------------------------
def test_dedup_duplicate_detection_drops_repeats_within_the_window(client, entity, clock):
    e = entity(requires_duplicate_detection=True,
                  duplicate_detection_history_time_window=timedelta(minutes=1))
    sender = e.sender()
    sender.send_messages([ServiceBusMessage("first", message_id="x"),
                          ServiceBusMessage("repeat-in-batch", message_id="x")])
    receiver = e.receiver()
    (first,) = receiver.receive_messages(5)
    assert str(first) == "first"
    receiver.complete_message(first)
    clock.advance(timedelta(seconds=30))
    sender.send_messages(ServiceBusMessage("repeat", message_id="x"))
    assert receiver.receive_messages(5) == []
    clock.advance(timedelta(seconds=31))
    sender.send_messages(ServiceBusMessage("after-window", message_id="x"))
    assert bodies(receiver.receive_messages(5)) == ["after-window"]


def test_send_3_scheduled_messages_invisible_until_due_cancellable_and_ttl_2(client, entity,
                                                                             admin, clock):
    e = entity()
    sender = e.sender()
    due = START + timedelta(minutes=5)
    keep, drop = sender.schedule_messages(
        [ServiceBusMessage("keep", time_to_live=timedelta(minutes=10)),
         ServiceBusMessage("drop")], due)
    assert keep != drop
    receiver = e.receiver()
    assert receiver.receive_messages(5) == []
    assert counts(e) == {"active": 0, "scheduled": 2, "deferred": 0, "dead": 0}
    assert [m.state for m in peek_all(receiver)] == [ServiceBusMessageState.SCHEDULED] * 2
    sender.cancel_scheduled_messages([drop])
    clock.advance(timedelta(minutes=5))
    (m,) = receive_all(receiver, 1, batch=5, tries=3)
    assert str(m) == "keep" and m.sequence_number == keep
    assert m.enqueued_time_utc == due
    assert m.expires_at_utc == START + timedelta(minutes=15)  # rule TTL-2
    receiver.complete_message(m)
    assert receiver.receive_messages(5) == []


def test_ttl_1_ttl_4_expired_never_received_but_peek_may_show(client, entity, clock):
    e = entity()
    e.sender().send_messages(
        [ServiceBusMessage("short", time_to_live=timedelta(seconds=10)), ServiceBusMessage("long")])
    receiver = e.receiver()
    expiry = {str(m): m.expires_at_utc for m in peek_all(receiver)}
    assert expiry == {"short": START + timedelta(seconds=10), "long": None}  # rule TTL-1
    clock.advance(timedelta(seconds=10))
    assert bodies(peek_all(receiver)) == ["long", "short"]  # TTL-4: peek may show it
    assert bodies(receive_all(receiver, 1, batch=5, tries=3)) == ["long"]  # rule RECV-6


def test_ttl_5_locked_message_does_not_expire_until_the_lock_ends(client, entity, clock):
    e = entity(dead_lettering_on_message_expiration=True, lock_duration=timedelta(minutes=1))
    e.sender().send_messages(
        [ServiceBusMessage("done", time_to_live=timedelta(seconds=30)),
         ServiceBusMessage("dropped", time_to_live=timedelta(seconds=30))])
    receiver = e.receiver()
    got = {str(m): m for m in receive_all(receiver, 2, batch=2)}
    clock.advance(timedelta(seconds=40))  # expired, but still locked
    receiver.complete_message(got["done"])       # completed: gone, not dead-lettered
    receiver.abandon_message(got["dropped"])     # abandoned after expiry: expiry applies at once
    assert receiver.receive_messages(5) == []
    dlq = e.receiver(sub_queue=ServiceBusSubQueue.DEAD_LETTER)
    (dead,) = receive_all(dlq, 1)
    assert str(dead) == "dropped" and dead.dead_letter_reason == "TTLExpiredException"  # TTL-6


def test_ttl_6_without_dead_lettering_expired_messages_are_dropped(client, entity, clock, admin):
    e = entity()
    e.sender().send_messages(
        ServiceBusMessage("gone", time_to_live=timedelta(seconds=1)))
    clock.advance(timedelta(seconds=2))
    receiver = e.receiver()
    assert receiver.receive_messages(5) == []
    assert peek_all(e.receiver(sub_queue=ServiceBusSubQueue.DEAD_LETTER)) \
        == []
    assert e.runtime().total_message_count == 0
