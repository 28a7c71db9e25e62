"""A PeekLock receiver's ``prefetch_count`` (azure-servicebus's): one lock commit for several
receives, prefetched locks held exclusively (RECV-2/3), run from the commit that took them and
dropped when they run out (RECV-4/5), abandoned when the receiver closes; ReceiveAndDelete never
prefetches (RECV-1: a buffered message would be lost with the process)."""

from datetime import timedelta

import pytest

from sbdelta import ServiceBusMessage, ServiceBusReceiveMode
from sbdelta._store import rs
from sbdelta.exceptions import ServiceBusInvalidOperationError


@pytest.fixture(scope="module")
def ns(spark, tmp_path_factory):
    return str(tmp_path_factory.mktemp("prefetch") / "ns")


def send(client, name, count):
    client.get_queue_sender(name).send_messages(
        [ServiceBusMessage(f"m{i}") for i in range(count)])


def messages_version(client, name):
    """The queue's messages table version: every lock or settlement is a commit to it."""
    receiver = client.get_queue_receiver(name)
    return rs.version(receiver._store(receiver._entity()).messages_path)


def test_recv_2_3_one_commit_locks_the_prefetch_and_the_next_receives_take_from_it(
        client, queue):
    name = queue()
    send(client, name, 8)
    first = client.get_queue_receiver(name, max_wait_time=0, prefetch_count=5)
    got = first.receive_messages(1)
    assert [str(m) for m in got] == ["m0"]
    # The other four prefetched are locked: a competing receiver gets only the rest (RECV-2).
    other = client.get_queue_receiver(name, max_wait_time=0)
    assert [str(m) for m in other.receive_messages(10)] == ["m5", "m6", "m7"]
    before = messages_version(client, name)
    more = first.receive_messages(2) + first.receive_messages(5)
    assert [str(m) for m in more] == ["m1", "m2", "m3", "m4"]
    assert messages_version(client, name) == before  # handed out from the buffer: no commit
    assert len({m.lock_token for m in got + more}) == 5
    assert first.complete_messages(got + more) == 5
    assert first.receive_messages(1) == []


def test_recv_4_5_a_prefetched_message_whose_lock_ran_out_is_not_handed_out(
        client, queue, clock):
    name = queue(lock_duration=timedelta(seconds=30))
    send(client, name, 3)
    receiver = client.get_queue_receiver(name, max_wait_time=0, prefetch_count=3)
    first = receiver.receive_messages(1)
    assert [m.delivery_count for m in first] == [1]
    clock.advance(timedelta(seconds=31))  # every lock taken by that commit ran out
    again = receiver.receive_messages(3)
    # Not the stale buffered copies: the messages locked again, their delivery counted (RECV-5).
    assert [str(m) for m in again] == ["m0", "m1", "m2"]
    assert [m.delivery_count for m in again] == [2, 2, 2]
    assert all(m.locked_until_utc > clock.now() for m in again)
    assert receiver.complete_messages(again) == 3


def test_recv_4_closing_a_receiver_abandons_what_it_prefetched(client, queue):
    name = queue()
    send(client, name, 4)
    receiver = client.get_queue_receiver(name, max_wait_time=0, prefetch_count=4)
    with receiver:
        got = receiver.receive_messages(1)
    # No lock ran out, yet the three it held are free at once.
    other = client.get_queue_receiver(name, max_wait_time=0)
    rest = other.receive_messages(10)
    assert [str(m) for m in rest] == ["m1", "m2", "m3"]
    assert other.complete_messages(rest) == 3
    receiver.complete_message(got[0])  # its own handed-out message keeps its lock


def test_recv_1_receive_and_delete_never_prefetches(client, queue):
    name = queue()
    send(client, name, 3)
    receiver = client.get_queue_receiver(
        name, max_wait_time=0, prefetch_count=10,
        receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE)
    assert [str(m) for m in receiver.receive_messages(1)] == ["m0"]
    # The other two are still in the queue: nothing was taken (and deleted) ahead.
    assert [str(m) for m in client.get_queue_receiver(name).peek_messages(5)] == ["m1", "m2"]


def test_prefetch_count_must_be_a_non_negative_integer(client, queue):
    name = queue()
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(ServiceBusInvalidOperationError, match="prefetch_count must be"):
            client.get_queue_receiver(name, prefetch_count=bad)
