"""Sessions receivers (issue 14, the bulk form for jobs): one receiver holds several sessions,
locked in one commit under one lock (SESS-2, SESS-3), hands out their messages as one
DataFrame with session ids in one commit, each session's in sequence order, settles any of
them in one commit, renews and releases them together (SESS-4) and keeps each one's state
(SESS-5). Time is a ManualClock.
"""

from datetime import timedelta

import deltalake
import pytest
from chispa import assert_df_equality

from sbdelta import (NEXT_AVAILABLE_SESSION, OperationTimeoutError, ServiceBusClient,
                     ServiceBusMessage, ServiceBusSessionGroup, SessionCannotBeLockedError,
                     SessionLockLostError)
from sbdelta._store.literals import local_path
from sbdelta.exceptions import InvalidMessageError, ServiceBusInvalidOperationError

LOCK = timedelta(seconds=30)


@pytest.fixture(scope="module")
def ns(spark, tmp_path_factory):
    return str(tmp_path_factory.mktemp("session_groups") / "ns")


def send(client, name, *ids):
    """One send per id ``<session>-<n>`` (sequence numbers follow the order given)."""
    sender = client.get_queue_sender(name)
    for message_id in ids:
        sender.send_messages(ServiceBusMessage(message_id, message_id=message_id,
                                               session_id=message_id.split("-")[0]))


def version(client, name) -> int:
    """The version of the queue's messages table (each commit adds one)."""
    store = client._entities.queue(name).store
    return deltalake.DeltaTable(local_path(store.messages_path)).version()


@pytest.mark.parametrize("partitioned", [False, True], ids=["queue", "partitioned"])
def test_sess_2_3_a_sessions_receiver_locks_the_oldest_free_sessions_and_hands_out_one_dataframe(
        spark, ns, clock, client, queue, partitioned):
    name = queue(requires_session=True, enable_partitioning=partitioned, lock_duration=LOCK)
    send(client, name, "a-1", "b-1", "c-1", "a-2", "d-1", "b-2", "e-1", "a-3", "d-2")
    # Session c is held by another receiver: the group passes it over.
    other = client.get_queue_receiver(name, session_id="c", max_wait_time=0)
    assert [m.message_id for m in other.receive_messages(5)] == ["c-1"]

    receiver = client.get_queue_sessions_receiver(name, max_session_count=3, max_wait_time=0)
    before = version(client, name)
    with receiver:
        group = receiver.session
        assert isinstance(group, ServiceBusSessionGroup)
        assert group.session_ids == ["a", "b", "d"]  # the oldest free ones (SESS-3)
        assert group.locked_until_utc == clock.now() + LOCK
        assert version(client, name) == before + 1  # all three in one commit
        df = receiver.receive_dataframe(100)
        assert version(client, name) == before + 2  # one receive commit
        expected = spark.createDataFrame(
            [("a", "a-1"), ("a", "a-2"), ("a", "a-3"), ("b", "b-1"), ("b", "b-2"),
             ("d", "d-1"), ("d", "d-2")], "session_id STRING, message_id STRING")
        assert_df_equality(df.select("session_id", "message_id"), expected,
                           ignore_row_order=True, ignore_nullable=True)
        # Each session's messages in sequence order, locked by the group's lock.
        rows = sorted(df.collect(), key=lambda r: r.sequence_number)
        for session in "abd":
            ids = [r.message_id for r in rows if r.session_id == session]
            assert ids == sorted(ids), ids
        assert {r.locked_until_utc for r in rows} == {clock.now().replace(tzinfo=None) + LOCK}
        # Held: nobody else takes them; the next available one for others is e.
        with ServiceBusClient(ns, spark=spark, clock=clock) as another:
            with pytest.raises(SessionCannotBeLockedError, match="session 'b' is locked"):
                another.get_queue_receiver(name, session_id="b",
                                           max_wait_time=0).receive_messages(1)
            with another.get_queue_receiver(name, session_id=NEXT_AVAILABLE_SESSION,
                                            max_wait_time=0) as r:
                assert r.session.session_id == "e"
        # Settled in one commit, messages of three sessions at once.
        settling = version(client, name)
        assert receiver.complete_messages(df) == 7
        assert version(client, name) == settling + 1
        assert receiver.receive_dataframe(10).count() == 0
    # Closed: the sessions are free at once.
    with client.get_queue_receiver(name, session_id="a", max_wait_time=0) as again:
        assert again.receive_messages(5) == []


def test_sess_2_named_sessions_are_locked_all_or_none(client, queue):
    name = queue(requires_session=True, enable_partitioning=True, lock_duration=LOCK)
    send(client, name, "x-1", "y-1", "z-1")
    holder = client.get_queue_receiver(name, session_id="y", max_wait_time=0)
    holder.receive_messages(1)
    with pytest.raises(SessionCannotBeLockedError, match="session 'y' is locked"):
        with client.get_queue_sessions_receiver(name, session_ids=["x", "y", "z"], max_wait_time=0):
            pass
    # Nothing was locked: x and z are free.
    with client.get_queue_sessions_receiver(name, session_ids=["z", "x"], max_wait_time=0) as group:
        assert group.session.session_ids == ["x", "z"]
        got = group.receive_messages(10)  # the list form (delta-rs on a local namespace)
        assert sorted(m.message_id for m in got) == ["x-1", "z-1"]
        peeked, page = [], group.peek_messages(10)  # a partition per call (PART-5)
        while page:
            peeked += page
            page = group.peek_messages(10)
        assert sorted(m.message_id for m in peeked) == ["x-1", "z-1"]  # theirs only
        group.complete_messages(got)


def test_sess_4_5_a_group_renews_releases_and_keeps_state_per_session(client, queue, clock):
    name = queue(requires_session=True, enable_partitioning=True, lock_duration=LOCK)
    send(client, name, "p-1", "q-1", "p-2")
    receiver = client.get_queue_sessions_receiver(name, max_session_count=5, max_wait_time=0)
    got = receiver.receive_messages(10)
    group = receiver.session
    assert group.session_ids == ["p", "q"] and len(got) == 3
    group.set_state("p", b"state of p")
    group.set_state("q", "state of q")
    assert (group.get_state("p"), group.get_state("q")) == (b"state of p", b"state of q")
    with pytest.raises(ServiceBusInvalidOperationError, match="one of the sessions"):
        group.get_state("r")
    clock.advance(LOCK / 2)
    until = group.renew_lock()  # every session and every message held under it
    assert until == clock.now() + LOCK
    clock.advance(LOCK * 3 / 4)  # past the first end: the renewal kept them
    receiver.complete_messages(got[:1])
    clock.advance(LOCK)  # unrenewed now: lost
    with pytest.raises(SessionLockLostError):
        receiver.complete_messages(got[1:])
    with pytest.raises(SessionLockLostError):
        receiver.receive_messages(1)
    # The sessions went back with their unsettled messages (delivery counts raised) and
    # their state.
    with client.get_queue_sessions_receiver(name, max_session_count=5, max_wait_time=0) as again:
        redelivered = again.receive_messages(10)
        assert sorted((m.message_id, m.delivery_count) for m in redelivered) == \
            sorted((m.message_id, 2) for m in got[1:])
        assert again.session.get_state("p") == b"state of p"
        again.complete_messages(redelivered)


def test_sess_3_a_sessions_receiver_waits_for_free_sessions_then_times_out(client, queue):
    name = queue(requires_session=True, lock_duration=LOCK)
    with pytest.raises(OperationTimeoutError, match="no session of"):
        client.get_queue_sessions_receiver(name, max_wait_time=0).receive_dataframe(10)
    send(client, name, "k-1")
    with client.get_queue_sessions_receiver(name, max_session_count=10,
                                            max_wait_time=0) as receiver:
        assert receiver.session.session_ids == ["k"]  # fewer than asked: what is free


def test_sess_2_subscriptions_have_sessions_receivers_too(admin, client):
    admin.create_topic("t-groups", enable_partitioning=True)
    admin.create_subscription("t-groups", "s", requires_session=True, lock_duration=LOCK)
    client.get_topic_sender("t-groups").send_messages(
        [ServiceBusMessage(i, message_id=i, session_id=i[0]) for i in ("m1", "n1", "m2", "o1")])
    with client.get_subscription_sessions_receiver("t-groups", "s",
                                                   max_session_count=2,
                                                   max_wait_time=0) as receiver:
        assert receiver.session.session_ids == ["m", "n"]
        df = receiver.receive_dataframe(10)
        assert sorted(r.message_id for r in df.collect()) == ["m1", "m2", "n1"]
        assert receiver.complete_messages(df) == 3


def test_sess_1_bad_sessions_receiver_arguments_are_refused_before_anything_is_locked(
        client, queue, admin):
    name = queue(requires_session=True)
    send(client, name, "s-1")
    for bad in (0, -1, True, "3", 10_001):
        with pytest.raises(ServiceBusInvalidOperationError, match="max_session_count must be"):
            client.get_queue_sessions_receiver(name, max_session_count=bad, max_wait_time=0)
    for bad in ("abc", 7):
        with pytest.raises(ServiceBusInvalidOperationError, match="session_ids must be a list"):
            client.get_queue_sessions_receiver(name, session_ids=bad, max_wait_time=0)
    for bad in ([], ["a", "a"], [None]):
        with pytest.raises(ServiceBusInvalidOperationError, match="different sessions"):
            client.get_queue_sessions_receiver(name, session_ids=bad, max_wait_time=0)
    with pytest.raises(InvalidMessageError, match="session_id is empty"):
        client.get_queue_sessions_receiver(name, session_ids=[""], max_wait_time=0)
    ordinary = queue()
    with pytest.raises(ServiceBusInvalidOperationError, match="not created with requires_sess"):
        client.get_queue_sessions_receiver(ordinary, max_wait_time=0).receive_dataframe(1)
    # Nothing was locked by any of it.
    with client.get_queue_receiver(name, session_id="s", max_wait_time=0) as r:
        assert [m.message_id for m in r.receive_messages(1)] == ["s-1"]


def test_sess_1_a_topic_message_without_session_id_goes_to_a_session_subscriptions_dlq(
        spark, admin, client):
    """SESS-1 on a topic: the topic takes the message (its other subscriptions get it); a
    subscription that requires sessions dead-letters it with Service Bus's reason."""
    from sbdelta import ServiceBusSubQueue

    admin.create_topic("t-sessionless")
    admin.create_subscription("t-sessionless", "plain")
    admin.create_subscription("t-sessionless", "ordered", requires_session=True)
    client.get_topic_sender("t-sessionless").send_messages(
        [ServiceBusMessage("a", message_id="with", session_id="s"),
         ServiceBusMessage("b", message_id="without")])
    plain = client.get_subscription_receiver("t-sessionless", "plain", max_wait_time=0)
    assert sorted(m.message_id for m in plain.receive_messages(10)) == ["with", "without"]
    with client.get_subscription_receiver("t-sessionless", "ordered",
                                          session_id=NEXT_AVAILABLE_SESSION,
                                          max_wait_time=0) as receiver:
        assert [m.message_id for m in receiver.receive_messages(10)] == ["with"]
    dead = client.get_subscription_receiver("t-sessionless", "ordered",
                                            sub_queue=ServiceBusSubQueue.DEAD_LETTER,
                                            max_wait_time=0)
    expected = spark.createDataFrame(
        [("without", None, "Session id is null.",
          "Session enabled entity doesn't allow a message whose session identifier is null.")],
        "message_id STRING, session_id STRING, dead_letter_reason STRING, "
        "dead_letter_error_description STRING")
    assert_df_equality(dead.receive_dataframe(10).select(*expected.columns), expected,
                       ignore_nullable=True)


def test_sess_4_auto_lock_renewer_keeps_a_sessions_receivers_group(client, queue, clock):
    """``AutoLockRenewer.register(receiver, receiver.session)`` with a sessions receiver: one
    renewal commit keeps every session of the group and the messages handed out under it, so
    they can be settled after their first lock would have ended; the closed group leaves the
    renewer quietly."""
    import time

    from sbdelta import AutoLockRenewer

    name = queue(requires_session=True, lock_duration=LOCK)
    send(client, name, "a-1", "b-1", "b-2")
    failures = []
    renewer = AutoLockRenewer(max_lock_renewal_duration=300, poll_interval=0.05,
                              on_lock_renew_failure=lambda s, e: failures.append((s, e)))
    with client.get_queue_sessions_receiver(name, max_session_count=2, max_wait_time=0) as receiver:
        df = receiver.receive_dataframe(10)
        renewer.register(receiver, receiver.session)
        clock.advance(timedelta(seconds=20))  # under half the lock left: due
        deadline = time.monotonic() + 60
        while renewer.renewals == 0 and time.monotonic() < deadline:
            time.sleep(0.05)  # waits for the renewer thread, not for a lock duration
        assert receiver.session.locked_until_utc == clock.now() + LOCK
        clock.advance(timedelta(seconds=12))  # past the first lock: the messages' moved too
        receiver.complete_messages(df)
        assert sorted(receiver.session.session_ids) == ["a", "b"]
    time.sleep(0.3)  # a few renewer rounds: the released group leaves quietly
    renewer.close()
    assert (renewer.renewals, failures) == (1, [])
    assert client.get_queue_receiver(name, session_id="b").peek_messages(10) == []


def test_sess_1_ttl_6_the_sweep_dead_letters_sessionless_messages_no_session_receive_reads(
        spark, ns, admin, client, clock):
    """SESS-1 on a partitioned topic: a message without a session id whose partition no
    session of the subscription lives in is never read by a session receive (they read their
    sessions' partitions only). The expiry sweep moves it to the subscription's dead-letter
    queue with Service Bus's reason, once; until then it is in neither count."""
    from sbdelta import ServiceBusSubQueue
    from sbdelta._store import key_partition
    from sbdelta.maintenance import expire_messages

    admin.create_topic("t-stranded", enable_partitioning=True)
    admin.create_subscription("t-stranded", "ordered", requires_session=True)
    home = key_partition("s", 16)
    stranded = next(f"m{i}" for i in range(100) if key_partition(f"m{i}", 16) != home)
    # Its partition key places it (without one, a topic without duplicate detection spreads
    # messages round-robin from a random partition: 1 run in 16 put it in the session's).
    client.get_topic_sender("t-stranded").send_messages(
        [ServiceBusMessage("a", message_id="with", session_id="s"),
         ServiceBusMessage("b", message_id=stranded, partition_key=stranded)])
    with client.get_subscription_receiver("t-stranded", "ordered",
                                          session_id=NEXT_AVAILABLE_SESSION,
                                          max_wait_time=0) as receiver:
        got = receiver.receive_messages(10)
        assert [m.message_id for m in got] == ["with"]
        receiver.complete_messages(got)
    runtime = admin.get_subscription_runtime_properties
    counts = runtime("t-stranded", "ordered")  # bound for the DLQ, still in the inbox
    assert (counts.active_message_count, counts.dead_letter_message_count) == (0, 0)
    path = "t-stranded/Subscriptions/ordered"
    report = expire_messages(ns, entities=[path], clock=clock, spark=spark)
    assert report.totals()["refused_dead_lettered"] == 1 and "refused->DLQ 1" in str(report)
    assert expire_messages(ns, entities=[path], clock=clock,
                           spark=spark).totals()["refused_dead_lettered"] == 0  # once
    counts = runtime("t-stranded", "ordered")
    assert (counts.active_message_count, counts.dead_letter_message_count) == (0, 1)
    dead = client.get_subscription_receiver("t-stranded", "ordered",
                                            sub_queue=ServiceBusSubQueue.DEAD_LETTER,
                                            max_wait_time=0)
    expected = spark.createDataFrame(
        [(stranded, None, "Session id is null.",
          "Session enabled entity doesn't allow a message whose session identifier is null.")],
        "message_id STRING, session_id STRING, dead_letter_reason STRING, "
        "dead_letter_error_description STRING")
    assert_df_equality(dead.receive_dataframe(10).select(*expected.columns), expected,
                       ignore_nullable=True)
    with pytest.raises(OperationTimeoutError):  # nothing left for any session
        with client.get_subscription_receiver("t-stranded", "ordered",
                                              session_id=NEXT_AVAILABLE_SESSION,
                                              max_wait_time=0) as receiver:
            receiver.receive_messages(10)


def test_sess_2_a_session_dataframe_receive_reads_past_other_sessions_commits(
        spark, client, queue):
    """A session receive reads the inbox until it has found the batch among its own
    sessions' rows (registering the other sessions' rows it passes), so a DataFrame receive,
    which does not read on as the list form does, is not left empty by other sessions' commits
    in front of its messages."""
    name = queue(requires_session=True, lock_duration=LOCK)
    send(client, name, *[f"other-{i}" for i in range(20)], "mine-1", "mine-2", "mine-3")
    with client.get_queue_receiver(name, session_id="mine", max_wait_time=0) as receiver:
        df = receiver.receive_dataframe(3)
        expected = spark.createDataFrame([("mine-1",), ("mine-2",), ("mine-3",)],
                                         "message_id STRING")
        assert_df_equality(df.select("message_id"), expected, ignore_row_order=True,
                           ignore_nullable=True)
        receiver.complete_messages(df)
    with client.get_queue_sessions_receiver(name, session_ids=["other"], max_wait_time=0) as group:
        assert group.receive_dataframe(20).count() == 20  # registered by the receive above
