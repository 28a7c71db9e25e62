"""Queues end to end on real Spark and Delta: what the behaviour suite (test_behaviour.py, run
per entity kind) does not cover: partition layout, sizes, status, misuse, cancel, the Spark
forms, crash recovery of dead-letter moves, time zones, AutoLockRenewer.

Each test names the rule of ../shared/SEMANTICS.md it proves. Time is a ManualClock: tests move
it instead of sleeping through lock durations or TTLs.
"""

import threading
import time
from datetime import timedelta

import pytest

from sbdelta import (AutoLockRenewer, ServiceBusMessage, ServiceBusReceiveMode,
                     ServiceBusSubQueue)
from sbdelta._message import InvalidMessageError, MessageTypeError
from sbdelta._store import PID_SHIFT
from sbdelta.exceptions import (MessageLockLostError, MessageNotFoundError,
                                MessageSizeExceededError, MessagingEntityDisabledError,
                                MessagingEntityNotFoundError, ServiceBusInvalidOperationError)
from sbdelta.management import EntityStatus

from ..conftest import START, receive_all, spark_jobs  # the clock, admin, client and queue fixtures are in conftest.py


@pytest.fixture(scope="module")
def ns(spark, tmp_path_factory):
    return str(tmp_path_factory.mktemp("messaging") / "ns")


def bodies(messages):
    return [str(m) for m in messages]


# -- send -----------------------------------------------------------------------------------
def test_send_3_sequence_numbers_unique_increasing_and_send_4_enqueued_time(client, queue, clock):
    name = queue()
    sender = client.get_queue_sender(name)
    sender.send_messages([ServiceBusMessage(f"a{i}") for i in range(3)])
    clock.advance(timedelta(seconds=5))
    sender.send_messages(ServiceBusMessage("b"))
    got = receive_all(client.get_queue_receiver(name, max_wait_time=0), 4)
    seqs = [m.sequence_number for m in got]
    assert bodies(got) == ["a0", "a1", "a2", "b"]
    assert seqs == sorted(seqs) and len(set(seqs)) == 4
    assert [m.enqueued_time_utc for m in got] == [START] * 3 + [START + timedelta(seconds=5)]


def test_send_3_part_2_partition_id_in_top_bits_and_same_key_same_partition(client, queue):
    # rule PART-3: messages with the same key (partition key or session id) land in the same
    # partition, of the 16 a partitioned entity has (PART-1).
    name = queue(enable_partitioning=True)
    sender = client.get_queue_sender(name)
    sender.send_messages([ServiceBusMessage(f"k{i}", partition_key="orders-7") for i in range(3)]
                         + [ServiceBusMessage("s", session_id="orders-7")])
    got = receive_all(client.get_queue_receiver(name, max_wait_time=0), 4)
    partitions = {m.sequence_number >> PID_SHIFT for m in got}
    assert len(got) == 4 and len(partitions) == 1
    import zlib
    assert partitions == {zlib.crc32(b"orders-7") % 16}


def test_part_2_message_id_is_the_key_under_duplicate_detection(client, queue):
    name = queue(enable_partitioning=True, requires_duplicate_detection=True)
    client.get_queue_sender(name).send_messages(
        [ServiceBusMessage(str(i), message_id="same-id") for i in range(1)]
        + [ServiceBusMessage("x", message_id="other")])
    got = receive_all(client.get_queue_receiver(name, max_wait_time=0), 2)
    import zlib
    by_id = {m.message_id: m.sequence_number >> PID_SHIFT for m in got}
    assert by_id == {"same-id": zlib.crc32(b"same-id") % 16, "other": zlib.crc32(b"other") % 16}


@pytest.mark.parametrize("ahead", ["duplicates", "scheduled"])
def test_recv_2_one_receive_call_finds_the_message_behind_rows_it_cannot_hand_out(
        client, queue, ahead):
    """RECV-2 (the next available message is handed out): a receive reads only as many new
    inbox rows as it was asked for. When those are duplicates (dropped under duplicate
    detection) or scheduled for later, one ``receive_messages(1)`` reads on past them instead
    of answering "nothing" while a message waits behind them."""
    name = queue(requires_duplicate_detection=True)
    sender, receiver = client.get_queue_sender(name), client.get_queue_receiver(name,
                                                                                max_wait_time=0)
    if ahead == "duplicates":
        sender.send_messages(ServiceBusMessage("first", message_id="x"))
        receiver.complete_message(receiver.receive_messages(1)[0])
        for _ in range(3):  # three commits, each a duplicate of "first"
            sender.send_messages(ServiceBusMessage("again", message_id="x"))
    else:
        for i in range(3):
            sender.schedule_messages(ServiceBusMessage(f"later{i}"),
                                     START + timedelta(hours=1))
    sender.send_messages(ServiceBusMessage("behind", message_id="y"))
    assert bodies(receiver.receive_messages(1)) == ["behind"]


@pytest.mark.parametrize("mode", list(ServiceBusReceiveMode), ids=["peek_lock", "delete"])
def test_recv_1_2_single_receives_register_rows_ahead_that_any_receiver_then_takes_in_order(
        client, queue, monkeypatch, mode):
    """A receive of a few messages registers up to ``REGISTER_AHEAD`` new rows of the inbox
    version it read (free, not locked): the next single receives lock them without reading
    the inbox, and any other receiver takes them, in sequence order (RECV-2), each once."""
    from sbdelta._store import receive

    name = queue()
    client.get_queue_sender(name).send_messages([ServiceBusMessage(f"m{i}") for i in range(40)])
    scans = []
    real = receive.scan_inbox
    monkeypatch.setattr(receive, "scan_inbox", lambda *a, **k: scans.append(1) or real(*a, **k))
    receiver = client.get_queue_receiver(name, max_wait_time=0,
                                         receive_mode=mode)
    got = [m for _ in range(receive.REGISTER_AHEAD) for m in receiver.receive_messages(1)]
    assert bodies(got) == [f"m{i}" for i in range(receive.REGISTER_AHEAD)]
    assert len(scans) == 1  # the first receive read the inbox, the next 31 did not
    other = client.get_queue_receiver(name, max_wait_time=0,
                                      receive_mode=mode)
    assert bodies(other.receive_messages(1) + other.receive_messages(20)) == [
        f"m{i}" for i in range(receive.REGISTER_AHEAD, 40)]
    assert len(scans) == 3  # the rest, read when the registered rows ran out
    if mode is ServiceBusReceiveMode.PEEK_LOCK:
        assert len({m.lock_token for m in got}) == len(got)
        receiver.complete_messages(got)
    assert receiver.receive_messages(1) == [] and other.receive_messages(5) == []


def test_part_2_unkeyed_messages_spread_and_part_4_receive_serves_all_partitions(client, queue):
    name = queue(enable_partitioning=True)
    client.get_queue_sender(name).send_messages([ServiceBusMessage(str(i)) for i in range(32)])
    receiver = client.get_queue_receiver(name, max_wait_time=0)
    got = receive_all(receiver, 32, batch=32)
    assert sorted(int(str(m)) for m in got) == list(range(32))
    assert len({m.sequence_number >> PID_SHIFT for m in got}) == 16
    receiver.complete_messages(got)
    # Completed messages are not handed out again when more arrive.
    client.get_queue_sender(name).send_messages(ServiceBusMessage("next"))
    assert bodies(receive_all(receiver, 2, batch=32, tries=3)) == ["next"]


def test_send_5_oversized_message_is_refused_and_nothing_is_stored(client, queue, admin):
    name = queue(max_message_size_in_kilobytes=1)
    sender = client.get_queue_sender(name)
    with pytest.raises(MessageSizeExceededError, match="1024 bytes"):
        sender.send_messages([ServiceBusMessage("ok"), ServiceBusMessage(b"x" * 1100)])
    assert client.get_queue_receiver(name,
                                     max_wait_time=0).peek_messages(5, sequence_number=0) == []
    assert admin.get_queue_runtime_properties(name).active_message_count == 0


def test_send_2_batch_is_all_or_nothing(client, queue):
    name = queue(max_message_size_in_kilobytes=1)
    sender = client.get_queue_sender(name)
    batch = sender.create_message_batch()
    batch.add_message(ServiceBusMessage("one"))
    room = 1024 - ServiceBusMessage(b"").size_in_bytes  # the header counts too (SEND-5)
    with pytest.raises(MessageSizeExceededError):
        batch.add_message(ServiceBusMessage(b"y" * room))  # fits alone, not with "one"
    batch.add_message(ServiceBusMessage("two"))
    sender.send_messages(batch)
    assert bodies(receive_all(client.get_queue_receiver(name,
                                                        max_wait_time=0), 2)) == ["one", "two"]


# -- peek-lock ---------------------------------------------------------------------------------


def test_settle_5_misuse_is_refused_before_anything_is_written(client, queue):
    name = queue()
    client.get_queue_sender(name).send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
    receiver = client.get_queue_receiver(name, max_wait_time=0)
    (peeked,) = receiver.peek_messages(1, sequence_number=0)
    with pytest.raises(ValueError, match="peeked"):
        receiver.complete_message(peeked)
    (mine,) = receiver.receive_messages()
    other = client.get_queue_receiver(name, max_wait_time=0)
    with pytest.raises(ValueError, match="another receiver"):
        other.complete_message(mine)
    with pytest.raises(ValueError):
        receiver.complete_message("not a message")
    with pytest.raises(ServiceBusInvalidOperationError, match="not a lock token"):
        receiver.complete_messages(["nonsense"])
    with pytest.raises(MessageLockLostError):  # well-formed but never handed out
        receiver.complete_messages([mine.lock_token[:-1] + ("0" if mine.lock_token[-1] != "0"
                                                            else "1")])
    receiver.complete_message(mine)  # still held: nothing above changed it
    rad = client.get_queue_receiver(name, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE,
                                    max_wait_time=0)
    (b,) = rad.receive_messages()
    with pytest.raises(ValueError, match="RECEIVE_AND_DELETE"):
        rad.complete_message(b)


def test_recv_2_a_receive_that_lost_a_commit_race_times_its_locks_from_its_last_attempt(
        client, queue, clock, monkeypatch):
    """RECV-2 with retries: a receive whose MERGE lost to another receiver's commit plans
    again, and the locks it hands out start when that attempt read the clock, not when the
    call began (else a receive that kept losing for a while would hand out locks that were
    already nearly over). The race is real: the other receiver commits between the first
    attempt's statistics and its MERGE, and the clock moves meanwhile."""
    from sbdelta._store import receive as receive_module

    q = queue(lock_duration=timedelta(seconds=30))
    client.get_queue_sender(q).send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
    first, other = (client.get_queue_receiver(q, max_wait_time=0),
                    client.get_queue_receiver(q, max_wait_time=0))
    original, attempts = receive_module.partition_stats, []

    def stats_then_race(store, policy, now, only=None):
        found = original(store, policy, now, only)
        attempts.append(now)
        if len(attempts) == 1:  # the first attempt of `first`: lose the race, time passes
            [won] = other.receive_messages(1)
            assert str(won) == "a"
            clock.advance(timedelta(seconds=20))
        return found

    monkeypatch.setattr(receive_module, "partition_stats", stats_then_race)
    [late] = first.receive_messages(1)
    assert str(late) == "b"
    assert attempts[0] == START and attempts[-1] == START + timedelta(seconds=20)
    assert len(attempts) >= 3  # the race, the winner's receive, the retry
    assert late.locked_until_utc == START + timedelta(seconds=50)


@pytest.mark.parametrize("form", ["list", "dataframe"])
def test_recv_2_a_lock_runs_its_whole_duration_from_when_it_is_granted(
        client, queue, clock, monkeypatch, form):
    """RECV-2: the reads that plan a receive can take seconds (on a busy or cold Spark: the
    notebook test once got its DataFrame with the locks over), so the lock's time is read
    again when it is granted, after them. The clock moves 20 s during the planning reads; the
    message is then still held 45 s after the receive began, and settles."""
    from sbdelta._store import receive as receive_module

    q = queue(lock_duration=timedelta(seconds=30))
    client.get_queue_sender(q).send_messages(ServiceBusMessage("a"))
    original, calls = receive_module.partition_stats, []

    def slow_stats(store, policy, now, only=None):
        calls.append(now)
        found = original(store, policy, now, only)
        if len(calls) == 1:
            clock.advance(timedelta(seconds=20))  # the planning reads took 20 s
        return found

    monkeypatch.setattr(receive_module, "partition_stats", slow_stats)
    receiver = client.get_queue_receiver(q, max_wait_time=0)
    if form == "list":
        [got] = receiver.receive_messages(1)
        assert got.locked_until_utc == START + timedelta(seconds=50)
    else:
        got = receiver.receive_dataframe(1)
    assert calls[0] == START
    clock.advance(timedelta(seconds=25))  # 45 s after the receive began: still held
    assert receiver.complete_messages(got if form == "dataframe" else [got]) == 1
    assert receiver.peek_messages(1, sequence_number=0) == []


def test_settle_1_5_a_lock_token_given_twice_settles_its_message_once(client, queue, clock):
    """SETTLE-1 and SETTLE-5 for repeated lock tokens: a DataFrame or a list that names a
    message twice completes it once and counts it once (Delta refuses a MERGE with two source
    rows for one message; the settlement then makes its tokens unique and commits once); a
    repeated token whose lock is lost still fails the whole settlement, writing nothing."""
    name = queue()
    client.get_queue_sender(name).send_messages([ServiceBusMessage(f"m{i}") for i in range(5)])
    receiver = client.get_queue_receiver(name, max_wait_time=0)
    df = receiver.receive_dataframe(3)
    assert receiver.complete_messages(df.unionByName(df)) == 3
    d, e = receiver.receive_messages(2)
    assert receiver.complete_messages([d.lock_token, d.lock_token, e.lock_token]) == 2
    assert receiver.peek_messages(5, sequence_number=0) == []

    client.get_queue_sender(name).send_messages([ServiceBusMessage("f"), ServiceBusMessage("g")])
    df = receiver.receive_dataframe(2)
    f, g = sorted(df.collect(), key=lambda row: row.sequence_number)
    receiver.complete_messages([f.lock_token])
    with pytest.raises(MessageLockLostError):  # f twice, settled already; g still held
        receiver.complete_messages(df.unionByName(df))
    assert [m.sequence_number for m in receiver.peek_messages(5, sequence_number=0)] == [
        g.sequence_number]
    assert receiver.complete_messages([g.lock_token]) == 1  # its lock untouched by the failure


def test_settle_6_renew_lock_and_auto_lock_renewer(client, queue, clock):
    name = queue(lock_duration=timedelta(seconds=20))
    client.get_queue_sender(name).send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
    receiver = client.get_queue_receiver(name, max_wait_time=0)
    a, b = receiver.receive_messages(2)
    clock.advance(timedelta(seconds=15))
    assert receiver.renew_message_lock(a) == START + timedelta(seconds=35)
    import time
    renewer = AutoLockRenewer(max_lock_renewal_duration=60, poll_interval=0.05)
    renewer.register(receiver, b)
    deadline = time.monotonic() + 60
    while renewer.renewals == 0 and time.monotonic() < deadline:
        time.sleep(0.05)  # waits for the renewer thread, not for a lock duration
    renewer.close()
    assert b.locked_until_utc == START + timedelta(seconds=35)
    clock.advance(timedelta(seconds=10))
    receiver.complete_messages([a, b])


def test_settle_7_queue_update_voids_locks(client, queue, admin, clock):
    name = queue()
    client.get_queue_sender(name).send_messages(ServiceBusMessage("m"))
    receiver = client.get_queue_receiver(name, max_wait_time=0)
    (m,) = receiver.receive_messages()
    clock.advance(timedelta(seconds=1))
    admin.update_queue(admin.get_queue(name), max_delivery_count=5)
    with pytest.raises(MessageLockLostError, match="was updated"):
        receiver.complete_message(m)


# -- duplicate detection, scheduling, TTL -----------------------------------------------------


def test_cancel_after_registration_also_works(client, queue, clock):
    name = queue()
    sender = client.get_queue_sender(name)
    (seq,) = sender.schedule_messages(ServiceBusMessage("x"), START + timedelta(minutes=1))
    receiver = client.get_queue_receiver(name, max_wait_time=0)
    assert receiver.receive_messages() == []  # registers it as scheduled
    sender.cancel_scheduled_messages(seq)
    clock.advance(timedelta(minutes=2))
    assert receiver.receive_messages() == []


@pytest.mark.parametrize("registered", [False, True], ids=["in-inbox", "registered"])
def test_cancel_counts_leave_the_cancelled_message_out(client, queue, admin, registered):
    """Issue 12 (2): after cancelling 1 of 3 scheduled messages, 2 are counted as scheduled,
    and peeked, whether the cancel met them in the inbox or registered."""
    name = queue()
    sender = client.get_queue_sender(name)
    seqs = sender.schedule_messages([ServiceBusMessage(str(i)) for i in range(3)],
                                    START + timedelta(minutes=5))
    sender.send_messages(ServiceBusMessage("now"))
    if registered:
        (now,) = client.get_queue_receiver(name, max_wait_time=0).receive_messages(5)
        client.get_queue_receiver(name, max_wait_time=0)  # the scheduled ones are registered too
    sender.cancel_scheduled_messages(seqs[1])
    counts = admin.get_queue_runtime_properties(name)
    assert (counts.scheduled_message_count, counts.active_message_count) == (2, 1)
    peeked = client.get_queue_receiver(name).peek_messages(10)
    assert [m.sequence_number for m in peeked if str(m) != "now"] == [seqs[0], seqs[2]]


def test_cancel_of_a_number_that_is_not_scheduled_here_raises_and_changes_nothing(
        client, queue, admin, clock):
    """Issue 12 (1): unknown, already enqueued, ordinary, negative and out-of-range numbers
    are refused; a batch with one bad number cancels none; the ordinary message survives."""
    name = queue()
    sender = client.get_queue_sender(name)
    (later,) = sender.schedule_messages(ServiceBusMessage("later"), START + timedelta(minutes=5))
    (soon,) = sender.schedule_messages(ServiceBusMessage("soon"), START + timedelta(minutes=1))
    sender.send_messages(ServiceBusMessage("ordinary"))
    ordinary = client.get_queue_receiver(name,
                                         max_wait_time=0).peek_messages(5, sequence_number=0)[-1]
    assert str(ordinary) == "ordinary"
    clock.advance(timedelta(minutes=2))  # "soon" is enqueued now
    for bad in (ordinary.sequence_number, soon, later + 1000, [later, ordinary.sequence_number]):
        with pytest.raises(MessageNotFoundError, match="Nothing was cancelled"):
            sender.cancel_scheduled_messages(bad)
    for bad in (-1, 2 ** 63, 2 ** 64, "1"):
        with pytest.raises(ServiceBusInvalidOperationError, match=r"\[0, 2\*\*63\)"):
            sender.cancel_scheduled_messages(bad)
    counts = admin.get_queue_runtime_properties(name)
    assert (counts.scheduled_message_count, counts.active_message_count) == (1, 2)
    receiver = client.get_queue_receiver(name, max_wait_time=0)
    got = receiver.receive_messages(5)
    assert sorted(bodies(got)) == ["ordinary", "soon"]
    receiver.complete_messages(got)
    sender.cancel_scheduled_messages(later)  # still a good cancel
    clock.advance(timedelta(minutes=5))
    assert receiver.receive_messages(5) == []


def test_ttl_3_default_caps_and_ttl_7_peek_shows_only_message_specific_expiry(client, queue):
    # Two hours: more microseconds than a 32-bit int holds (a regression once).
    name = queue(default_message_time_to_live=timedelta(hours=2))
    client.get_queue_sender(name).send_messages(
        [ServiceBusMessage("own", time_to_live=timedelta(hours=3)), ServiceBusMessage("none")])
    receiver = client.get_queue_receiver(name, max_wait_time=0)
    own, none = receiver.peek_messages(2, sequence_number=0)
    assert own.expires_at_utc == START + timedelta(hours=2)  # capped by the default
    assert none.expires_at_utc is None
    got = receiver.receive_messages(2)
    assert [m.expires_at_utc for m in got] == [START + timedelta(hours=2)] * 2


# -- peek, counts, status -----------------------------------------------------------------------
def test_part_5_peek_pages_one_partition_at_a_time_and_part_6_counts_sum(client, queue, admin):
    name = queue(enable_partitioning=True)
    client.get_queue_sender(name).send_messages([ServiceBusMessage(str(i)) for i in range(20)])
    receiver = client.get_queue_receiver(name, max_wait_time=0)
    seen = []
    for _ in range(40):
        page = receiver.peek_messages(20)
        if not page:
            break
        assert len({m.sequence_number >> PID_SHIFT for m in page}) == 1
        seen += page
    assert sorted(int(str(m)) for m in seen) == list(range(20))
    receiver.receive_messages(3)
    counts = admin.get_queue_runtime_properties(name)
    assert counts.active_message_count == 20 and counts.total_message_count == 20
    assert counts.size_in_bytes > 0


def test_part_5_a_spark_peek_reads_the_partitions_it_passes_at_once(spark, ns, clock, queue,
                                                                    client, monkeypatch):
    """A peek through Spark on a partitioned queue whose first partitions are empty reads the
    partition it starts in, then every later one in one query of the messages table and one
    of the inbox (it used to read them one by one: 2 Spark queries per empty partition), and
    still pages one partition at a time (PART-5): registered messages and messages still in
    the inbox alike, the second partition after the first, then nothing."""
    from sbdelta import ServiceBusClient
    from sbdelta._store import reads
    from sbdelta._store.layout import key_partition

    name = queue(enable_partitioning=True)
    keys = {}
    for i in range(200):  # one key of a late partition and one of a later one
        keys.setdefault(key_partition(f"k{i}", 16), f"k{i}")
    low, high = sorted(p for p in keys if p >= 9)[:2]
    queries = []
    real = reads.spark_query
    monkeypatch.setattr(reads, "spark_query",
                        lambda *args, **kw: queries.append(args[1]) or real(*args, **kw))
    client.get_queue_sender(name).send_messages(
        [ServiceBusMessage(f"{p}-{i}", partition_key=keys[p]) for p in (low, high)
         for i in range(3)])
    # One message registered (and back), the others still in the inbox.
    receiver = client.get_queue_receiver(name, max_wait_time=0)
    receiver.abandon_message(receiver.receive_messages(1)[0])
    with ServiceBusClient(ns, spark=spark, clock=clock, engine="spark") as on_spark:
        receiver = on_spark.get_queue_receiver(name, max_wait_time=0)
        queries.clear()
        first = receiver.peek_messages(10, sequence_number=0)
        assert len(queries) == 4, queries  # partition 0, then every later one at once
        second, third = receiver.peek_messages(10), receiver.peek_messages(10)
    assert [str(m) for m in first] == [f"{low}-{i}" for i in range(3)]
    assert [str(m) for m in second] == [f"{high}-{i}" for i in range(3)]
    assert sorted(m.delivery_count for m in first + second) == [0, 0, 0, 0, 0, 1]
    assert third == []


def test_status_disabled_states_refuse_matching_operations(client, queue, admin):
    name = queue()
    sender = client.get_queue_sender(name)
    receiver = client.get_queue_receiver(name, max_wait_time=0)
    admin.update_queue(admin.get_queue(name), status=EntityStatus.SEND_DISABLED)
    with pytest.raises(MessagingEntityDisabledError, match="SendDisabled"):
        sender.send_messages(ServiceBusMessage("x"))
    assert receiver.receive_messages() == []
    admin.update_queue(admin.get_queue(name), status=EntityStatus.RECEIVE_DISABLED)
    sender.send_messages(ServiceBusMessage("x"))
    with pytest.raises(MessagingEntityDisabledError, match="ReceiveDisabled"):
        receiver.receive_messages()
    admin.update_queue(admin.get_queue(name), status=EntityStatus.DISABLED)
    with pytest.raises(MessagingEntityDisabledError):
        sender.send_messages(ServiceBusMessage("x"))
    with pytest.raises(MessagingEntityDisabledError):
        receiver.receive_messages()


def test_bad_input_raises_specific_errors_and_writes_nothing(client, queue, admin):
    name = queue()
    with pytest.raises(MessagingEntityNotFoundError):
        client.get_queue_sender("no-such-queue")
    with pytest.raises(MessagingEntityNotFoundError):
        client.get_queue_receiver("no-such-queue", max_wait_time=0)
    sender = client.get_queue_sender(name)
    with pytest.raises(MessageTypeError):
        sender.send_messages(ServiceBusMessage(42))
    with pytest.raises(MessageTypeError):
        sender.send_messages([ServiceBusMessage("ok"), "not a message"])
    with pytest.raises(MessageTypeError):
        ServiceBusMessage("x", application_properties={"k": object()})
    with pytest.raises(InvalidMessageError):
        ServiceBusMessage("x", time_to_live=timedelta(seconds=-1))
    with pytest.raises(InvalidMessageError):
        ServiceBusMessage("x", message_id="m" * 129)
    with pytest.raises(ServiceBusInvalidOperationError):
        ServiceBusMessage("x", session_id="a", partition_key="b")
    receiver = client.get_queue_receiver(name, max_wait_time=0)
    with pytest.raises(ValueError, match="max_message_count"):
        receiver.receive_messages(0)
    with pytest.raises(ValueError):
        receiver.peek_messages(-1)
    assert admin.get_queue_runtime_properties(name).total_message_count == 0


def test_without_max_wait_time_receives_wait_for_messages_as_the_sdks_do(client, queue):
    """azure-servicebus semantics of ``max_wait_time=None`` (the default): a receive waits
    until a message arrives, the receiver's iterator waits for the next one, and closing the
    receiver ends the wait (the iterator stops)."""
    name = queue()
    sender = client.get_queue_sender(name)
    receiver = client.get_queue_receiver(name)
    got, seen = [], []

    def wait_for(condition):
        deadline = time.monotonic() + 120
        while not condition() and time.monotonic() < deadline:
            time.sleep(0.2)
        return condition()

    waiting = threading.Thread(target=lambda: got.extend(receiver.receive_messages(5)),
                               daemon=True)
    waiting.start()
    waiting.join(2.0)  # several looks at the empty queue
    assert waiting.is_alive() and got == []
    sender.send_messages(ServiceBusMessage("late"))
    waiting.join(120)
    assert not waiting.is_alive() and [str(m) for m in got] == ["late"]
    receiver.complete_messages(got)

    def iterate():
        for message in receiver:
            seen.append(str(message))
            receiver.complete_message(message)

    iterating = threading.Thread(target=iterate, daemon=True)
    iterating.start()
    for body in ("a", "b"):
        sender.send_messages(ServiceBusMessage(body))
        assert wait_for(lambda: body in seen)
    assert iterating.is_alive()  # waiting for the next message
    receiver.close()
    iterating.join(60)
    assert not iterating.is_alive() and seen == ["a", "b"]


def test_iteration_with_max_wait_time_0_stops_when_the_queue_is_empty(client, queue):
    name = queue()
    client.get_queue_sender(name).send_messages([ServiceBusMessage(str(i)) for i in range(3)])
    receiver = client.get_queue_receiver(name, max_wait_time=0)
    seen = []
    for message in receiver:
        seen.append(str(message))
        receiver.complete_message(message)
    assert seen == ["0", "1", "2"]


def test_next_on_a_receiver_gives_one_message_then_stops_as_the_sdk_does(client, queue):
    """``next(receiver)`` (the SDK's ``ServiceBusReceiver.__next__``): one message per call,
    locked in PeekLock; StopIteration once none arrives within ``max_wait_time``."""
    name = queue()
    client.get_queue_sender(name).send_messages([ServiceBusMessage(str(i)) for i in range(2)])
    receiver = client.get_queue_receiver(name, max_wait_time=0)
    first = next(receiver)
    assert str(first) == "0" and first.lock_token and first.delivery_count == 1
    receiver.complete_message(first)
    assert str(next(receiver)) == "1"
    with pytest.raises(StopIteration):
        next(receiver)
    assert [str(m) for m in receiver.peek_messages(5)] == ["1"]  # locked, not settled


# -- the Spark forms ------------------------------------------------------------------------
def _version(spark, path):
    return spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").collect()[0].version


def test_send_dataframe_receive_dataframe_and_settle_in_one_commit(spark, client, queue, admin):
    name = queue(enable_partitioning=True)
    df = spark.range(200).selectExpr("CAST(id AS STRING) AS body",
                                     "concat('id-', id) AS message_id",
                                     "map('n', CAST(id AS STRING)) AS application_properties")
    sender = client.get_queue_sender(name)
    assert sender.send_dataframe(df) == 200
    receiver = client.get_queue_receiver(name, max_wait_time=0)
    locked = receiver.receive_dataframe(150)
    rows = locked.collect()
    assert len(rows) == 150 and len({r.sequence_number for r in rows}) == 150
    store = client._entities.queue(name).store
    before = _version(spark, store.messages_path)
    assert receiver.complete_messages(locked) == 150
    assert _version(spark, store.messages_path) == before + 1  # ONE commit
    rest = receive_all(receiver, 50, batch=50)
    assert len(rest) == 50
    assert {m.application_properties["n"] for m in rest} == \
        {str(i) for i in range(200)} - {r.body.decode() for r in rows}
    receiver.complete_messages([m.lock_token for m in rest])
    assert admin.get_queue_runtime_properties(name).total_message_count == 0


@pytest.mark.parametrize("partitioned", [False, True], ids=["one-partition", "partitioned"])
def test_recv_2_receive_dataframe_plans_without_a_shuffle_whole_sends_or_part_of_one(
        spark, client, queue, partitioned):
    """A DataFrame receive plans in ONE Spark job, no window numbering the rows (so no
    shuffle of them): a batch that takes every new row it counted selects them as they are,
    and one that takes part of a send commit cuts it at the position the counts per commit
    give (rows are numbered 0, 1, ... per partition and commit), also where an earlier
    receive cut the same commit. Each receive hands out the number asked, the next receive
    gets the next messages (RECV-2), each message once; on one partition in sequence order."""
    from chispa import assert_df_equality

    name = queue(enable_partitioning=partitioned)
    sender = client.get_queue_sender(name)
    rows = spark.range(30).selectExpr("concat('m', id) AS message_id", "CAST(id AS STRING) AS body")
    for lo in (0, 10, 20):
        sender.send_dataframe(rows.where(f"id >= {lo} AND id < {lo + 10}"))
    receiver = client.get_queue_receiver(name, max_wait_time=0)
    first = receiver.receive_dataframe(10)  # (a process's first receive checks the tables)
    batches = [first]
    for n in (10, 4, 3, 100):
        got, jobs = spark_jobs(spark, lambda: receiver.receive_dataframe(n))
        assert len([site for site in jobs if site.startswith("localCheckpoint ")]) == 1, \
            (n, jobs)
        batches.append(got)
    assert [b.count() for b in batches] == [10, 10, 4, 3, 3]
    everything = batches[0].union(batches[1]).union(batches[2]).union(batches[3]) \
        .union(batches[4])
    assert_df_equality(everything.select("message_id"),
                       rows.select("message_id"), ignore_row_order=True, ignore_nullable=True)
    if not partitioned:
        seqs = [sorted(r.sequence_number for r in b.collect()) for b in batches]
        assert all(a[-1] < b[0] for a, b in zip(seqs, seqs[1:]))
        assert [sorted(int(r.body) for r in b.collect()) for b in batches[2:4]] == [
            [20, 21, 22, 23], [24, 25, 26]]
    assert receiver.complete_messages(everything) == 30


def test_send_dataframe_bad_rows_send_nothing(spark, client, queue, admin):
    name = queue(max_message_size_in_kilobytes=1)
    sender = client.get_queue_sender(name)
    big = spark.createDataFrame([("ok",), ("x" * 2000,)], "body STRING")
    with pytest.raises(MessageSizeExceededError, match="at most 1024 bytes"):
        sender.send_dataframe(big)
    mismatched = spark.createDataFrame([("b", "s1", "p1")], "body STRING, session_id STRING, "
                                                           "partition_key STRING")
    with pytest.raises(ServiceBusInvalidOperationError, match="PART-2"):
        sender.send_dataframe(mismatched)
    with pytest.raises(ServiceBusInvalidOperationError, match="unknown column"):
        sender.send_dataframe(spark.createDataFrame([("b", 1)], "body STRING, nope INT"))
    with pytest.raises(ServiceBusInvalidOperationError, match="body"):
        sender.send_dataframe(spark.createDataFrame([(1,)], "body INT"))
    assert admin.get_queue_runtime_properties(name).total_message_count == 0


def test_settle_3_dead_letter_move_recovers_after_a_crash_between_its_commits(client, queue):
    """Copy committed, source removal lost: the next receive finishes the move, and a copy
    already completed in the dead-letter queue does not come back."""
    name = queue()
    client.get_queue_sender(name).send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
    receiver = client.get_queue_receiver(name, max_wait_time=0)
    a, b = receiver.receive_messages(2)
    store = client._entities.queue(name).store
    moves = []
    original = store.move_dead_letters
    store.move_dead_letters = lambda pids, now: moves.append(
        original(pids, now, copy_only=True))
    try:
        receiver.dead_letter_messages([a, b], reason="crash-test")
    finally:
        store.move_dead_letters = original
    assert moves == [2]
    dlq = client.get_queue_receiver(name, sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=0)
    first = dlq.receive_messages(1)
    dlq.complete_message(first[0])           # completed while the source row still waits
    assert receiver.receive_messages(5) == []  # finishes the move (recovery)
    rest = receive_all(dlq, 1)
    assert [m.sequence_number for m in rest] == [
        m.sequence_number for m in (a, b) if m.sequence_number != first[0].sequence_number]
    dlq.complete_message(rest[0])
    assert dlq.receive_messages(5) == [] and dlq.peek_messages(5, sequence_number=0) == []
    assert store.messages().where("state = 'DEADLETTERING'").count() == 0


def test_settle_3_dlq_1_a_dead_letter_move_killed_after_its_first_commit_is_finished_by_the_dlq_receive(
        client, queue, admin):
    """The settlement committed (rows DEADLETTERING) and the process died before copying them:
    the messages are dead-lettered, so a receive of the dead-letter queue finishes the move and
    gets them, without waiting for a receive of the source or the expiry sweep (issue 18)."""
    name = queue()
    client.get_queue_sender(name).send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
    receiver = client.get_queue_receiver(name, max_wait_time=0)
    got = receiver.receive_messages(2)
    store = client._entities.queue(name).store
    original = store.move_dead_letters
    store.move_dead_letters = lambda pids, now: None  # killed before step 2
    try:
        receiver.dead_letter_messages(got, reason="crash-test")
    finally:
        store.move_dead_letters = original
    dlq = client.get_queue_receiver(name, sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=0)
    assert dlq.peek_messages(5) == []  # not moved yet: a peek does not write
    moved = receive_all(dlq, 2)
    assert sorted(str(m) for m in moved) == ["a", "b"]
    assert {m.dead_letter_reason for m in moved} == {"crash-test"}
    dlq.complete_messages(moved)
    assert receiver.receive_messages(5) == [] and dlq.receive_messages(5) == []
    assert admin.get_queue_runtime_properties(name).total_message_count == 0


@pytest.mark.parametrize("zone", ["America/Los_Angeles", "Asia/Kolkata"])
def test_ttl_1_recv_4_broker_times_are_utc_in_any_session_time_zone(spark, client, queue, clock,
                                                                    zone):
    """Issue 12 (11): the session time zone changes no broker decision or time shown."""
    saved = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        name = queue(lock_duration=timedelta(seconds=30))
        sender = client.get_queue_sender(name)
        sender.send_messages(ServiceBusMessage("ttl", time_to_live=timedelta(minutes=10)))
        sender.schedule_messages(ServiceBusMessage("later"), START + timedelta(minutes=2))
        receiver = client.get_queue_receiver(name, max_wait_time=0)
        (m,) = receiver.receive_messages(5)
        assert m.enqueued_time_utc == START
        assert m.expires_at_utc == START + timedelta(minutes=10)
        assert m.locked_until_utc == START + timedelta(seconds=30)
        clock.advance(timedelta(seconds=29))
        assert receiver.receive_messages(5) == []          # locked; "later" not due
        clock.advance(timedelta(seconds=2))                # lock over at exactly 30 s
        (again,) = receiver.receive_messages(5)
        assert again.sequence_number == m.sequence_number and again.delivery_count == 2
        receiver.complete_message(again)
        clock.set(START + timedelta(minutes=2) - timedelta(microseconds=1))
        assert receiver.receive_messages(5) == []          # due at exactly its time
        clock.set(START + timedelta(minutes=2))
        (due,) = receiver.receive_messages(5)
        assert str(due) == "later" and due.enqueued_time_utc == START + timedelta(minutes=2)
    finally:
        spark.conf.set("spark.sql.session.timeZone", saved)


def _wait_for(condition, seconds=180):
    import time
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)  # waits for the renewer thread, never for a lock duration
    return condition()


def test_settle_6_auto_lock_renewer_keeps_ten_locks_for_100_s_in_one_commit_per_round(
        client, queue, clock):
    """Issue 12 (12): ten locks of one receiver renewed together, one commit per round, over
    100 s of broker time with 30 s locks; SDK arguments accepted; nothing fails."""
    from sbdelta._store import latest_version

    name = queue(lock_duration=timedelta(seconds=30))
    client.get_queue_sender(name).send_messages([ServiceBusMessage(str(i)) for i in range(10)])
    receiver = client.get_queue_receiver(name, max_wait_time=0)
    messages = receive_all(receiver, 10)
    assert len(messages) == 10
    failures = []
    renewer = AutoLockRenewer(max_lock_renewal_duration=300, executor=None, max_workers=4,
                              on_lock_renew_failure=lambda m, e: failures.append((m, e)),
                              poll_interval=0.05)
    table = client._entities.queue(name).store.messages_path
    before = latest_version(client.spark, table)
    for m in messages:
        renewer.register(receiver, m)
    for _ in range(10):  # 100 s of broker time
        clock.advance(timedelta(seconds=10))
        assert _wait_for(lambda: all(m.locked_until_utc - clock.now() > timedelta(seconds=15)
                                     for m in messages))
    renewer.close()
    assert failures == []
    commits = latest_version(client.spark, table) - before
    assert renewer.rounds >= 3 and commits == renewer.rounds
    assert renewer.renewals == 10 * renewer.rounds
    assert receiver.complete_messages(messages) == 10


def test_settle_6_auto_lock_renewer_reports_a_lost_lock_and_keeps_the_others(client, queue,
                                                                              clock):
    from sbdelta import AutoLockRenewFailed

    name = queue(lock_duration=timedelta(seconds=30))
    client.get_queue_sender(name).send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
    receiver = client.get_queue_receiver(name, max_wait_time=0)
    a, b = receiver.receive_messages(2)
    clock.advance(timedelta(seconds=15))
    receiver.renew_message_lock(a)                 # a until +45, b until +30
    clock.advance(timedelta(seconds=16))           # b's lock is over, a has 14 s left
    failures = []
    with AutoLockRenewer(on_lock_renew_failure=lambda m, e: failures.append((m, e)),
                         poll_interval=0.05) as renewer:
        renewer.register(receiver, a)
        renewer.register(receiver, b)
        assert _wait_for(lambda: failures and renewer.renewals == 1)
    assert [(m.sequence_number, type(e)) for m, e in failures] == [
        (b.sequence_number, AutoLockRenewFailed)]
    assert a.locked_until_utc == START + timedelta(seconds=61)
    receiver.complete_message(a)
    for bad in ({"max_workers": 0}, {"on_lock_renew_failure": "log"},
                {"max_lock_renewal_duration": -1}):
        with pytest.raises(ServiceBusInvalidOperationError):
            AutoLockRenewer(**bad)
