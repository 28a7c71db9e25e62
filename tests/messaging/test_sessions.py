"""Sessions (issue 14): SESS-1, SESS-2, SESS-3 (named and next available), SESS-4, SESS-5.

A session receiver holds a lock on one session of a queue created with ``requires_session``;
it receives that session's messages in sequence order, settles them while the session lock
holds, renews the lock, keeps the session state, and frees the session when closed or when its
lock runs out. Time is a ManualClock.
"""

from datetime import timedelta

import pytest

from sbdelta import (NEXT_AVAILABLE_SESSION, AutoLockRenewer, MessageNotFoundError, MessageSizeExceededError,
                     OperationTimeoutError, ServiceBusClient, ServiceBusMessage,
                     ServiceBusMessageState, SessionCannotBeLockedError, SessionLockLostError)
from sbdelta.exceptions import (InvalidMessageError, MessageTypeError,
                                ServiceBusInvalidOperationError)


@pytest.fixture(scope="module")
def ns(spark, tmp_path_factory):
    return str(tmp_path_factory.mktemp("sessions") / "ns")


LOCK = timedelta(seconds=30)


def send(client, name, *ids):
    """One send per id ``<session>-<n>`` (so sequence numbers follow the order given)."""
    sender = client.get_queue_sender(name)
    for message_id in ids:
        sender.send_messages(ServiceBusMessage(message_id, message_id=message_id,
                                               session_id=message_id.split("-")[0]))


def test_sess_1_a_session_queue_takes_only_session_messages_and_session_receivers(
        spark, client, queue, admin):
    name = queue(requires_session=True)
    sender = client.get_queue_sender(name)
    with pytest.raises(ServiceBusInvalidOperationError, match="message 1 of this send has none"):
        sender.send_messages([ServiceBusMessage("a", session_id="s"), ServiceBusMessage("b")])
    with pytest.raises(ServiceBusInvalidOperationError, match="every row needs a session_id"):
        sender.send_dataframe(spark.createDataFrame(
            [("a", "s"), ("b", None)], "body STRING, session_id STRING"))
    assert admin.get_queue_runtime_properties(name).total_message_count == 0  # nothing sent
    plain = client.get_queue_receiver(name, max_wait_time=0)
    for call in (lambda: plain.receive_messages(1), lambda: plain.peek_messages(1),
                 lambda: plain.receive_dataframe(1)):
        with pytest.raises(ServiceBusInvalidOperationError, match="only through session rec"):
            call()
    ordinary = queue()
    with pytest.raises(ServiceBusInvalidOperationError, match="not created with requires_sess"):
        client.get_queue_receiver(ordinary, session_id="s", max_wait_time=0).receive_messages(1)
    with pytest.raises(ServiceBusInvalidOperationError, match="not a session receiver"):
        plain.session
    with pytest.raises(InvalidMessageError, match="session_id is empty"):
        client.get_queue_receiver(name, session_id="", max_wait_time=0)
    with pytest.raises(InvalidMessageError, match="at most 128"):
        client.get_queue_receiver(name, session_id="s" * 129, max_wait_time=0)
    with pytest.raises(MessageTypeError, match="session_id has type int"):
        client.get_queue_receiver(name, session_id=7, max_wait_time=0)


@pytest.mark.parametrize("partitioned", [False, True], ids=["queue", "partitioned"])
def test_sess_2_a_session_receiver_holds_its_session_and_gets_its_messages_in_order(
        spark, ns, clock, client, queue, partitioned):
    name = queue(requires_session=True, enable_partitioning=partitioned, lock_duration=LOCK)
    send(client, name, "a-1", "b-1", "a-2", "b-2", "a-3")
    ra = client.get_queue_receiver(name, session_id="a", max_wait_time=0)
    got = ra.receive_messages(10)
    assert [m.message_id for m in got] == ["a-1", "a-2", "a-3"]  # its own, in sequence order
    assert [m.sequence_number for m in got] == sorted(m.sequence_number for m in got)
    assert all(m.locked_until_utc == ra.session.locked_until_utc == clock.now() + LOCK
               for m in got)
    # Another client (another process would do the same) cannot take session "a" meanwhile.
    with ServiceBusClient(ns, spark=spark, clock=clock) as other:
        with pytest.raises(SessionCannotBeLockedError, match="session 'a' is locked"):
            other.get_queue_receiver(name, session_id="a", max_wait_time=0).receive_messages(1)
        rb = other.get_queue_receiver(name, session_id="b", max_wait_time=0)
        got_b = rb.receive_messages(10)
        assert [m.message_id for m in got_b] == ["b-1", "b-2"]
        rb.complete_messages(got_b)
    ra.complete_messages(got[:2])
    ra.abandon_message(got[2])
    [again] = ra.receive_messages(10)
    assert (again.message_id, again.delivery_count) == ("a-3", 2)
    send(client, name, "a-4")  # sent while the session is held: this holder gets it
    assert [m.message_id for m in ra.receive_messages(10)] == ["a-4"]
    ra.close()  # frees the session and the messages it held
    with client.get_queue_receiver(name, session_id="a", max_wait_time=0) as next_holder:
        got = next_holder.receive_messages(10)
        assert [(m.message_id, m.delivery_count) for m in got] == [("a-3", 3), ("a-4", 2)]
        next_holder.complete_messages(got)
        assert next_holder.receive_messages(10) == []


def test_sess_4_a_lost_session_lock_fails_every_call_and_renewal_keeps_it(
        client, queue, clock):
    name = queue(requires_session=True, lock_duration=LOCK)
    send(client, name, "a-1", "a-2")
    ra = client.get_queue_receiver(name, session_id="a", max_wait_time=0)
    [first, second] = ra.receive_messages(10)
    clock.advance(timedelta(seconds=20))
    until = ra.session.renew_lock()
    assert until == clock.now() + LOCK == ra.session.locked_until_utc
    clock.advance(timedelta(seconds=20))  # past the first lock's end: renewed, still held
    ra.complete_message(first)  # its message lock was renewed with the session
    with pytest.raises(ServiceBusInvalidOperationError, match="session.renew_lock"):
        ra.renew_message_lock(second)
    clock.advance(LOCK)  # unrenewed: the session lock is lost
    for call in (lambda: ra.complete_message(second), lambda: ra.receive_messages(1),
                 lambda: ra.session.get_state(), lambda: ra.session.renew_lock()):
        with pytest.raises(SessionLockLostError, match="session lock is lost"):
            call()
    rb = client.get_queue_receiver(name, session_id="a", max_wait_time=0)
    [back] = rb.receive_messages(10)  # the session and its message are free again
    assert (back.message_id, back.delivery_count) == ("a-2", 2)
    rb.complete_message(back)


def test_settle_7_sess_4_an_update_of_the_queue_ends_its_session_locks(
        client, queue, admin, clock):
    """SETTLE-7 on a session queue: an update of the queue ends the session locks held then
    (a session receiver's message locks are its session lock): settling by lock token,
    receiving and renewing raise SessionLockLostError; the session, its state and its
    messages go to the next session receiver."""
    name = queue(requires_session=True, lock_duration=LOCK)
    send(client, name, "a-1", "a-2", "a-3")
    ra = client.get_queue_receiver(name, session_id="a", max_wait_time=0)
    ra.session.set_state(b"kept")
    got = ra.receive_messages(2)
    clock.advance(timedelta(seconds=1))
    admin.update_queue(admin.get_queue(name), max_delivery_count=5)
    for call in (lambda: ra.complete_messages([got[0].lock_token]),
                 lambda: ra.receive_messages(1), lambda: ra.session.renew_lock()):
        with pytest.raises(SessionLockLostError, match="session lock is lost"):
            call()
    clock.advance(timedelta(seconds=10))  # past the lock grace of another host's clock
    rb = client.get_queue_receiver(name, session_id="a", max_wait_time=0)
    again = rb.receive_messages(10)
    assert [(m.message_id, m.delivery_count) for m in again] == [
        ("a-1", 2), ("a-2", 2), ("a-3", 1)]
    assert rb.session.get_state() == b"kept"
    assert rb.complete_messages(again) == 3


@pytest.mark.parametrize("form", ["one", "list", "dataframe"])
def test_sess_4_a_holder_whose_session_was_taken_before_its_commit_gets_session_lock_lost(
        spark, ns, client, queue, clock, form):
    """The session lock looked held by the holder's clock when it settled, but had run out
    and the session was taken before the commit (a slow call): SessionLockLostError, as the SDK
    raises on a session receiver, not MessageLockLostError; nothing of it is written."""
    from sbdelta import ManualClock

    name = queue(requires_session=True, lock_duration=LOCK)
    send(client, name, "a-1", "a-2")
    ra = client.get_queue_receiver(name, session_id="a", max_wait_time=0)
    got = ra.receive_messages(10)
    later = ManualClock(clock.now() + LOCK + timedelta(seconds=1))  # another process's "now"
    with ServiceBusClient(ns, spark=spark, clock=later) as other:
        rb = other.get_queue_receiver(name, session_id="a", max_wait_time=0)
        taken = rb.receive_messages(10)  # the lock ran out: the session is rb's now
        settle = {"one": lambda: ra.complete_message(got[0]),
                  "list": lambda: ra.complete_messages(got),
                  "dataframe": lambda: ra.complete_messages(spark.createDataFrame(
                      [(str(m.lock_token),) for m in got], "lock_token STRING"))}[form]
        with pytest.raises(SessionLockLostError, match="has another holder now"):
            settle()
        with pytest.raises(SessionLockLostError, match="session lock is lost"):
            ra.receive_messages(1)  # lost stays lost
        assert [(m.message_id, m.delivery_count) for m in taken] == [("a-1", 2), ("a-2", 2)]
        rb.complete_messages(taken)  # still rb's: ra wrote nothing


def test_sess_5_session_state_is_kept_without_messages_and_size_checked(client, queue, admin):
    name = queue(requires_session=True, max_message_size_in_kilobytes=1)
    ra = client.get_queue_receiver(name, session_id="s", max_wait_time=0)
    assert ra.session.get_state() is None  # the first call locks the session
    ra.session.set_state(b"\x00state")
    assert ra.session.get_state() == b"\x00state"
    ra.session.set_state("zustand ü")
    assert ra.session.get_state() == "zustand ü".encode("utf-8")
    with pytest.raises(MessageSizeExceededError, match="1025 bytes"):
        ra.session.set_state(b"x" * 1025)
    with pytest.raises(ServiceBusInvalidOperationError, match="bytes or str"):
        ra.session.set_state(42)
    assert ra.session.get_state() == "zustand ü".encode("utf-8")  # nothing written
    ra.close()
    send(client, name, "t-1")  # not registered by any receive yet
    assert admin.list_sessions(name) == ["s", "t"]  # SESS-6: with state, with messages
    with client.get_queue_receiver(name, session_id="s", max_wait_time=0) as rb:
        assert rb.session.get_state() == "zustand ü".encode("utf-8")  # SESS-5: kept
        rb.session.set_state(None)
        assert rb.session.get_state() is None
    assert admin.list_sessions(name) == ["t"]
    with pytest.raises(ServiceBusInvalidOperationError, match="no sessions to list"):
        admin.list_sessions(queue())


def test_sess_5_compaction_removes_session_rows_without_state_nobody_holds(
        spark, ns, client, queue, admin, clock):
    """A session row keeps a session's lock and state. Once its lock ended the operation
    bound ago and it holds no state, compaction deletes it (it would otherwise stay for every
    session id ever used); a row with state stays (SESS-5), and the session can be taken
    again (a new row)."""
    from chispa import assert_df_equality

    from sbdelta.maintenance import compact

    name = queue(requires_session=True, lock_duration=LOCK)
    send(client, name, "a-1")
    with client.get_queue_receiver(name, session_id="a", max_wait_time=0) as ra:
        ra.complete_messages(ra.receive_messages(5))
    with client.get_queue_receiver(name, session_id="s", max_wait_time=0) as rs:
        rs.session.set_state(b"kept")
    with client.get_queue_receiver(name, session_id="b", max_wait_time=0) as rb:
        rb.session.renew_lock()  # held, nothing more
    store = client._entities.queue(name).store

    def session_rows(*ids):
        got = store.messages().where("kind = 'SESSION'").select("session_id")
        assert_df_equality(got, spark.createDataFrame([(i,) for i in ids], got.schema),
                           ignore_row_order=True)

    session_rows("a", "b", "s")
    clock.advance(timedelta(minutes=50))  # the locks ended less than the bound ago
    compact(ns, entities=[name], clock=clock, spark=spark)
    session_rows("a", "b", "s")
    clock.advance(timedelta(minutes=20))
    report = compact(ns, entities=[name], clock=clock, spark=spark)
    assert report.entities[0].tombstones_purged == 2
    session_rows("s")
    assert admin.list_sessions(name) == ["s"]
    send(client, name, "a-2")
    with client.get_queue_receiver(name, session_id="a", max_wait_time=0) as again:
        assert [m.message_id for m in again.receive_messages(5)] == ["a-2"]
    with client.get_queue_receiver(name, session_id="s", max_wait_time=0) as rs:
        assert rs.session.get_state() == b"kept"


def test_sess_2_subscriptions_of_a_topic_have_sessions_too(admin, client):
    admin.create_topic("t-sessions", enable_partitioning=True)
    admin.create_subscription("t-sessions", "s", requires_session=True)
    client.get_topic_sender("t-sessions").send_messages(
        [ServiceBusMessage(i, message_id=i, session_id=i[0]) for i in ("x1", "y1", "x2")])
    with pytest.raises(ServiceBusInvalidOperationError, match="only through session rec"):
        client.get_subscription_receiver("t-sessions", "s", max_wait_time=0).receive_messages(1)
    with client.get_subscription_receiver("t-sessions", "s", session_id="x", max_wait_time=0) as rx:
        got = rx.receive_messages(10)
        assert [m.message_id for m in got] == ["x1", "x2"]
        rx.complete_messages(got)
    with client.get_subscription_receiver("t-sessions", "s", session_id="y", max_wait_time=0) as ry:
        assert [m.message_id for m in ry.receive_messages(10)] == ["y1"]


def test_sess_3_next_available_takes_the_free_session_with_the_oldest_message(
        client, queue, clock):
    # Partitioned: "oldest" compares messages across partitions (in commit order here, where
    # the manual clock gives every message the same enqueued time).
    name = queue(requires_session=True, enable_partitioning=True, lock_duration=LOCK)
    client.get_queue_sender(name).send_messages(ServiceBusMessage(
        "later", message_id="later", session_id="c",
        scheduled_enqueue_time_utc=clock.now() + LOCK))
    send(client, name, "b-1", "a-1", "b-2")
    # Nothing registered yet: the oldest message's session, found in the inbox.
    with client.get_queue_receiver(name, session_id=NEXT_AVAILABLE_SESSION,
                                   max_wait_time=0) as first:
        assert first.session.session_id == "b"  # locked on entering
        got = first.receive_messages(10)
        assert [m.message_id for m in got] == ["b-1", "b-2"]
        # b is held now; a is next (c has only a message scheduled for later).
        second = client.get_queue_receiver(name, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=0)
        assert second.session.session_id is None  # not locked before its first operation
        [a1] = second.receive_messages(10)
        assert (second.session.session_id, a1.message_id) == ("a", "a-1")
        with pytest.raises(OperationTimeoutError, match="no session of .* had a message"):
            with client.get_queue_receiver(name, session_id=NEXT_AVAILABLE_SESSION,
                                           max_wait_time=0):
                pass
        first.complete_messages(got[:1])
        # closing with b-2 unsettled frees b with it (its delivery count stays raised).
    clock.advance(LOCK)  # c's message is due; second's lock on a ran out, unrenewed
    taken = []
    for _ in range(3):
        with client.get_queue_receiver(name, session_id=NEXT_AVAILABLE_SESSION,
                                       max_wait_time=0) as r:
            got = r.receive_messages(10)
            taken.append((r.session.session_id, [(m.message_id, m.delivery_count)
                                                 for m in got]))
            r.complete_messages(got)
    assert sorted(taken) == [("a", [("a-1", 2)]), ("b", [("b-2", 2)]),
                             ("c", [("later", 1)])]
    with pytest.raises(OperationTimeoutError):
        client.get_queue_receiver(name, session_id=NEXT_AVAILABLE_SESSION,
                                  max_wait_time=0).receive_messages(1)


def test_sess_2_session_receivers_peek_and_receive_deferred_messages_of_their_session(
        client, queue):
    name = queue(requires_session=True, enable_partitioning=True, lock_duration=LOCK)
    send(client, name, "a-1", "b-1", "a-2", "b-2")
    ra = client.get_queue_receiver(name, session_id="a", max_wait_time=0)
    assert [m.message_id for m in ra.peek_messages(10)] == ["a-1", "a-2"]  # its session only
    [a1, a2] = ra.receive_messages(10)
    ra.defer_message(a1)
    peeked = ra.peek_messages(10, sequence_number=0)
    assert [(m.message_id, m.state) for m in peeked] == [
        ("a-1", ServiceBusMessageState.DEFERRED), ("a-2", ServiceBusMessageState.ACTIVE)]
    with client.get_queue_receiver(name, session_id="b", max_wait_time=0) as rb:
        with pytest.raises(MessageNotFoundError, match="no deferred message"):
            rb.receive_deferred_messages([a1.sequence_number])  # not b's
    [again] = ra.receive_deferred_messages([a1.sequence_number])
    # Locked under the session: its lock ends with the session's and moves with it.
    assert again.locked_until_utc == ra.session.locked_until_utc
    assert str(again.lock_token)[:19] == str(a2.lock_token)[:19]
    ra.complete_messages([again, a2])
    ra.close()
    with pytest.raises(SessionLockLostError):
        ra.peek_messages(1)


def test_sess_4_auto_lock_renewer_keeps_a_session_until_its_receiver_closes(client, queue, clock):
    import time

    name = queue(requires_session=True, lock_duration=LOCK)
    send(client, name, "a-1")
    failures = []
    renewer = AutoLockRenewer(max_lock_renewal_duration=300, poll_interval=0.05,
                              on_lock_renew_failure=lambda s, e: failures.append((s, e)))
    receiver = client.get_queue_receiver(name, session_id="a", max_wait_time=0)
    with pytest.raises(ServiceBusInvalidOperationError, match="not locked by its receiver"):
        renewer.register(receiver, receiver.session)  # nothing locked yet
    [message] = receiver.receive_messages(10)
    renewer.register(receiver, receiver.session)
    clock.advance(timedelta(seconds=20))  # under half the lock left: due
    deadline = time.monotonic() + 60
    while renewer.renewals == 0 and time.monotonic() < deadline:
        time.sleep(0.05)  # waits for the renewer thread, not for a lock duration
    assert receiver.session.locked_until_utc == clock.now() + LOCK
    clock.advance(timedelta(seconds=12))  # past the first lock: the message lock moved too
    receiver.complete_message(message)
    receiver.close()
    time.sleep(0.3)  # a few renewer rounds: the closed session leaves quietly
    renewer.close()
    assert (renewer.renewals, failures) == (1, [])
