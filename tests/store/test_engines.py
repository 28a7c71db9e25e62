"""Both engines on the same tables (issue 16): what delta-rs reads for the broker is what Spark
reads. A receive plans from per-partition statistics of the messages table and from counts of
the inbox rows past each frontier; on a local namespace delta-rs computes both, the statistics
with the same SQL conditions (:mod:`sbdelta._store.locks`, written once for both engines), and
they must equal Spark's: the counts for any frontier (SEND-3 numbering), the statistics at
every moment a lock, a time to live, a delivery limit or a schedule changes what is claimable
(RECV-2/4/5, TTL-4/7).
"""

import shutil
from collections import Counter
from datetime import timedelta
from pathlib import Path

import deltalake
import pytest
from chispa import assert_df_equality

from sbdelta import (ConfigurationError, MessageLockLostError, ServiceBusClient,
                     ServiceBusMessage, ServiceBusSubQueue)
from sbdelta._store import resolve_engine, rs, rs_feed
from sbdelta._store.apply import apply_rows
from sbdelta._store.guards import GuardTripped
from sbdelta._store.literals import local_path
from sbdelta._store.inbox import enough_versions, inbox_range, scan_inbox
from sbdelta._store.layout import (PID_SHIFT, frontier_at, key_partition, msg_key,
                                   sequence_number)
from sbdelta._store.locks import Policy
from sbdelta._store.messages import MessageStore
from sbdelta._store.receive import partition_stats
from sbdelta._store.settle import Disposition, Locked, Settlement, settle_messages
from sbdelta._namespace import Namespace
from sbdelta.management import ServiceBusAdministrationClient

from ..conftest import START, receive_all


@pytest.mark.parametrize("partitioned", [False, True], ids=["queue", "partitioned"])
def test_recv_4_ttl_7_delta_rs_and_spark_count_the_same_claimable_and_due_messages(
        spark, tmp_path, clock, monkeypatch, partitioned):
    ns = str(tmp_path / "ns")
    lock, ttl = timedelta(minutes=1), timedelta(hours=1)
    ServiceBusAdministrationClient(ns, spark=spark, clock=clock).create_queue(
        "q", enable_partitioning=partitioned, lock_duration=lock, max_delivery_count=2,
        default_message_time_to_live=ttl)
    policy = Policy(lock, 2, ttl, True, None)
    with ServiceBusClient(ns, spark=spark, clock=clock) as client:
        sender, receiver = client.get_queue_sender("q"), client.get_queue_receiver("q",
                                                                                   max_wait_time=0)
        sender.send_messages([ServiceBusMessage(f"m{i}", partition_key=f"k{i % 3}")
                              for i in range(8)]
                             + [ServiceBusMessage("short", partition_key="k0",
                                                  time_to_live=timedelta(minutes=5))])
        sender.schedule_messages(ServiceBusMessage("later", partition_key="k1"),
                                 START + timedelta(minutes=30))
        store = client._entities.queue("q").store
        # The rows a receive would register, counted per partition from the change feed.
        latest = store.latest_version(store.inbox_path)
        for frontiers in ({p: -1 for p in range(store.partitions)},
                          {p: frontier_at(p, latest - 1) for p in range(store.partitions)}):
            spark_counts = {r.pid: r["count"] for r in inbox_range(
                store, list(frontiers), frontiers, 0, latest).groupBy("pid").count().collect()}
            by_version = rs_feed.inbox_version_counts(store.inbox_path, frontiers, 0, latest,
                                                 sequence_number)
            rs_counts = {}
            for (pid, _), n in by_version.items():
                rs_counts[pid] = rs_counts.get(pid, 0) + n
            assert rs_counts == spark_counts
            assert sum(spark_counts.values()) == (10 if -1 in frontiers.values() else 1)
        got = []
        for _ in range(20):  # registers every row, locks the visible messages
            got += receiver.receive_messages(20)
            if len(got) >= 9:
                break
        assert len(got) == 9
        receiver.complete_message(got[0])
        receiver.defer_message(got[1])
        receiver.abandon_message(got[2])  # delivery 1 of 2
        # Cancelled before any receive registered it: a tombstone waits for its inbox row.
        cancelled = sender.schedule_messages(ServiceBusMessage("never", partition_key="k2"),
                                             START + timedelta(minutes=30))
        sender.cancel_scheduled_messages(cancelled)

        seen = set()
        for minutes in (0, 2, 10, 40, 120):
            now = START + timedelta(minutes=minutes)
            fast = partition_stats(store, policy, now)
            with monkeypatch.context() as patch:
                patch.setattr(rs, "partition_stats", lambda *args: None)  # Spark answers
                slow = partition_stats(store, policy, now)
            assert all(isinstance(row, rs.PartitionStats) for row in fast.values())
            assert {p: tuple(r)[1:] for p, r in fast.items()} == {
                p: (r.frontier, r.frontier_rev, r.claimable, r.actions, r.tombstones)
                for p, r in slow.items()}, minutes
            seen |= {(minutes, kind) for kind, n in (
                ("claimable", sum(r.claimable for r in fast.values())),
                ("actions", sum(r.actions for r in fast.values())),
                ("tombstones", sum(r.tombstones for r in fast.values()))) if n}
        # The moments compared cover every kind of count (not all zero).
        assert {(2, "claimable"), (10, "actions"), (120, "actions"),
                (0, "tombstones")} <= seen, seen


def test_recv_1_a_dataframe_receive_reads_only_the_inbox_versions_its_batch_needs(
        spark, tmp_path, clock):
    """Three send commits of 4 messages; a DataFrame receive of 4 reads the first commit only
    (delta-rs counts per version, Spark reads what the batch needs), the next one the rest.
    The per-version counts equal Spark's for any frontier."""
    ns = str(tmp_path / "ns")
    ServiceBusAdministrationClient(ns, spark=spark, clock=clock).create_queue(
        "q", enable_partitioning=True)
    with ServiceBusClient(ns, spark=spark, clock=clock) as client:
        sender, receiver = client.get_queue_sender("q"), client.get_queue_receiver("q",
                                                                                   max_wait_time=0)
        for batch in range(3):
            sender.send_messages([ServiceBusMessage(f"m{batch}-{i}", partition_key=f"k{i}")
                                  for i in range(4)])
        store = client._entities.queue("q").store
        latest = store.latest_version(store.inbox_path)
        first = latest - 2
        # A Spark send of several files per partition (one commit), then frontiers before
        # everything, past whole versions, and inside versions (a partial receive's).
        sender.send_dataframe(spark.createDataFrame(
            [(f"x{i}", f"k{i % 4}") for i in range(40)], "body STRING, partition_key STRING")
            .repartition(3))
        spread = store.latest_version(store.inbox_path)
        for frontiers in ({p: -1 for p in range(store.partitions)},
                          {p: frontier_at(p, first) for p in range(store.partitions)},
                          {p: sequence_number(p, first + 1, 0) for p in range(store.partitions)},
                          {p: sequence_number(p, spread, 4) for p in range(store.partitions)}):
            spark_counts = {(r.pid, r._commit_version): r["count"] for r in inbox_range(
                store, list(frontiers), frontiers, 0, spread)
                .groupBy("pid", "_commit_version").count().collect()}
            # From the commit files' statistics (no data file read), as the change feed says.
            assert rs_feed.log_version_counts(store.inbox_path, frontiers, 0, spread,
                                              sequence_number) == spark_counts
            assert rs_feed.inbox_version_counts(store.inbox_path, frontiers, 0, spread,
                                                sequence_number) == spark_counts
        assert sum(spark_counts.values()) == sum(  # the last frontiers: 5 rows of each partition
            max(0, n - 5) for n in Counter(key_partition(f"k{i % 4}", store.partitions)
                                           for i in range(40)).values())
        start = {p: -1 for p in range(store.partitions)}
        rows, hi, counts, _, _ = scan_inbox(store, start, 4, latest)
        assert hi == first and sum(counts.values()) == 4 == rows.count()
        assert enough_versions({(0, 5): 2, (1, 5): 2, (0, 7): 4}, 5, 7, 4) == 5
        assert enough_versions({(0, 5): 2, (0, 7): 4}, 5, 7, 3) == 7
        assert enough_versions({(0, 5): 2}, 5, 7, 3) == 7
        got = receiver.receive_dataframe(4)
        assert sorted(r.body for r in got.select("body").collect()) == [
            f"m0-{i}".encode() for i in range(4)]
        rest = receiver.receive_dataframe(60)
        assert rest.count() == 48
        assert receiver.complete_messages(got) + receiver.complete_messages(rest) == 52


def test_settle_5_recv_5_settlements_and_guards_write_the_same_rows_through_delta_rs_and_spark(
        spark, tmp_path, clock):
    """One settlement is one DELETE or UPDATE, a list of them one apply MERGE; on a local
    table under the engine ``delta-rs`` delta-rs runs both, else Spark, from one text
    (SETTLE-1..5, RECV-5 at the delivery limit, SETTLE-5 all or nothing when a lock is not
    held, the STALE guard of a plan whose revision moved). Both engines do the same on two copies of one namespace: every
    table must come out the same, with the same errors, and delta-rs made every commit of the
    first copy (settlements and dead-letter moves), Spark every commit of the second."""
    ns = tmp_path / "ns"
    ServiceBusAdministrationClient(str(ns), spark=spark, clock=clock).create_queue(
        "q", lock_duration=timedelta(minutes=1), max_delivery_count=5)
    with ServiceBusClient(str(ns), spark=spark, clock=clock) as client:
        client.get_queue_sender("q").send_messages(
            [ServiceBusMessage(f"m{i}", application_properties={"i": i}) for i in range(12)])
        locked = sorted(receive_all(client.get_queue_receiver("q", max_wait_time=0), 12, batch=12),
                        key=lambda m: m.sequence_number)
        folder = client._entities.queue("q").store.folder
    assert len(locked) == 12
    relative = Path(local_path(folder)).relative_to(ns)
    copies = {engine: tmp_path / engine for engine in ("delta-rs", "spark")}
    for copy in copies.values():
        shutil.copytree(ns, copy)
    now = START + timedelta(seconds=10)

    def held(i, properties=None):
        return Locked(locked[i].sequence_number, locked[i].lock_token, properties)

    stolen = Locked(locked[11].sequence_number, "0" * 8 + locked[11].lock_token[8:])
    settlements = [  # (messages, settlement): one message a DELETE/UPDATE, a list a MERGE
        ([held(0)], Settlement(Disposition.COMPLETE)),
        ([held(1, '{"i": 100}')], Settlement(Disposition.ABANDON, max_delivery_count=5)),
        ([held(2)], Settlement(Disposition.ABANDON, max_delivery_count=1)),  # at the limit
        ([held(3)], Settlement(Disposition.DEFER)),
        ([held(4)], Settlement(Disposition.DEAD_LETTER, reason="it's \\ odd",
                               description="quote ' and backslash \\")),
        ([held(5)], Settlement(Disposition.RENEW, locked_until=now + timedelta(minutes=2))),
        ([held(6, '{"i": 600}'), held(7)],
         Settlement(Disposition.ABANDON, max_delivery_count=5)),
        ([held(8), held(9)], Settlement(Disposition.DEAD_LETTER, reason="list")),
    ]
    lost = [([held(10), stolen], now), ([stolen], now), ([held(10)], START + timedelta(minutes=1))]
    stores = {}
    for engine, copy in copies.items():
        store = stores[engine] = MessageStore(spark, str(copy / relative), 1,
                                              engine=resolve_engine(engine))
        before = deltalake.DeltaTable(local_path(store.messages_path)).version()
        for messages, settlement in settlements:
            settle_messages(store, messages, settlement, now, what="settle")
        for messages, when in lost:
            with pytest.raises(MessageLockLostError, match="Nothing was settled"):
                settle_messages(store, messages, Settlement(Disposition.COMPLETE), when,
                                what="settle")
        with pytest.raises(GuardTripped) as stale:  # a plan read at another revision
            apply_rows(store, [{"pid": 0, "k": msg_key(locked[10].sequence_number),
                                "_op": "delete", "_rev": 7}], [0], now)
        assert stale.value.code == "STALE"
        # Who committed: every settlement, and each dead-letter move's removal, commits once.
        history = deltalake.DeltaTable(local_path(store.messages_path)).history()
        by_delta_rs = ["delta-rs" in h.get("clientVersion", "") for h in history
                       if h["version"] > before]
        assert len(by_delta_rs) >= len(settlements), history
        assert set(by_delta_rs) == {engine == "delta-rs"}, history
    assert_df_equality(_frozen(spark, stores["delta-rs"].messages_path),
                       _frozen(spark, stores["spark"].messages_path), ignore_row_order=True)
    dead = _frozen(spark, stores["delta-rs"].dead_letter_store().messages_path)
    assert_df_equality(dead, _frozen(spark, stores["spark"].dead_letter_store().messages_path),
                       ignore_row_order=True)
    assert sorted(r.seq for r in dead.collect()) == [
        locked[i].sequence_number for i in (2, 4, 8, 9)]
    left = _frozen(spark, stores["delta-rs"].messages_path).where("kind = 'MSG'")
    assert {r.seq: (r.state, r.lock_token is not None) for r in left.collect()} == {
        **{locked[i].sequence_number: ("ACTIVE", False) for i in (1, 6, 7)},
        locked[3].sequence_number: ("DEFERRED", False),
        **{locked[i].sequence_number: ("ACTIVE", True) for i in (5, 10, 11)}}


def test_recv_1_2_4_5_send_6_ttl_4_6_receives_hand_out_and_write_the_same_through_delta_rs_and_spark(
        spark, tmp_path, clock, monkeypatch):
    """A receive's plan is one SQL text (``_store/receive_plan.py``): Spark runs it over the
    messages table and the change feed, delta-rs's DataFusion over the same table and the
    inbox rows it read, and the MERGE commits it. The same receives on two copies of one
    namespace, with the same clock, lock grants and partition rotation, must hand out the same
    messages with the same locks and delivery counts and leave the same tables: new rows
    registered in part (the frontier stops at the last one taken) and whole, duplicates
    dropped (SEND-6), a cancelled scheduled message never delivered, a scheduled one
    registered for later, a message expired on arrival and one expired while registered
    dead-lettered (TTL-4/6), one at the delivery limit dead-lettered (RECV-5), lock expiry
    making messages claimable again (RECV-4), ReceiveAndDelete removing them (RECV-1). After
    each receive a peek of every partition holding messages reads the same rows through both
    engines (Spark reads them all in one query), and the counts (PART-6: registered rows plus
    the inbox past the frontiers) are the same. Under the engine ``delta-rs`` no Spark plan
    runs and delta-rs makes every commit."""
    from sbdelta._store import receive

    ns = tmp_path / "ns"
    lock, ttl, window = timedelta(minutes=1), timedelta(hours=2), timedelta(minutes=10)
    ServiceBusAdministrationClient(str(ns), spark=spark, clock=clock, engine="spark").create_queue(
        "q", enable_partitioning=True, lock_duration=lock, max_delivery_count=2,
        default_message_time_to_live=ttl, dead_lettering_on_message_expiration=True,
        requires_duplicate_detection=True, duplicate_detection_history_time_window=window)
    with ServiceBusClient(str(ns), spark=spark, clock=clock, engine="spark") as client:
        sender = client.get_queue_sender("q")
        for batch in range(3):
            sender.send_messages([ServiceBusMessage(f"b{batch}m{i}",  # the id is the key
                                                    message_id=f"id{(batch * 5 + i) % 9}",
                                                    application_properties={"i": i},
                                                    subject=f"s{batch}")
                                  for i in range(5)])
        sender.send_messages([ServiceBusMessage("short", partition_key="k0", message_id="s",
                                                time_to_live=timedelta(minutes=3))])
        sender.schedule_messages(ServiceBusMessage("later", partition_key="k1"),
                                 START + timedelta(minutes=30))
        cancelled = sender.schedule_messages(ServiceBusMessage("never", partition_key="k0"),
                                             START + timedelta(minutes=30))
        sender.cancel_scheduled_messages(cancelled)
        folder = client._entities.queue("q").store.folder
        partitions = client._entities.queue("q").store.partitions
    # The partitions the messages above hash to (by message id, or partition key): the peeks
    # below read each of them (an empty partition's peek is the same empty list either way).
    held = sorted({key_partition(key, partitions)
                   for key in [f"id{i}" for i in range(9)] + ["k0", "k1"]})
    relative = Path(local_path(folder)).relative_to(ns)
    copies = {engine: tmp_path / engine for engine in ("delta-rs", "spark")}
    for copy in copies.values():
        shutil.copytree(ns, copy)
    policy = Policy(lock, 2, ttl, True, window)
    steps = [  # (minutes after START, how many, ReceiveAndDelete?, abandon what it got?)
        (0, 3, False, True), (0, 4, False, False), (2, 6, False, True), (2, 1, True, False),
        (4, 20, False, True), (6, 20, False, False), (40, 20, True, False),
        (200, 20, False, False)]
    results, stores = {}, {}
    for engine, copy in copies.items():
        store = stores[engine] = MessageStore(spark, str(copy / relative), partitions,
                                              engine=resolve_engine(engine))
        grants = iter(f"{i:016x}" for i in range(1, 100))
        with monkeypatch.context() as patch:
            patch.setattr(receive, "lock_token_prefix", lambda: next(grants))
            patch.setattr(receive.random, "randrange", lambda n: 0)
            if engine == "delta-rs":
                patch.setattr(receive, "_commit_with_spark", None)  # would fail if called
            before = deltalake.DeltaTable(local_path(store.messages_path)).version()
            # Counts (PART-6) read the same tables: registered rows and the inbox past the
            # frontiers, less tombstones; first with everything still in the inbox.
            handed = [vars(store.counts(START))]
            for minutes, n, delete, abandon in steps:
                now = START + timedelta(minutes=minutes)
                got, _ = store.acquire(n, policy=policy, now=now, delete=delete, as_rows=True)
                if not abandon:
                    handed.append(vars(store.counts(now)))
                handed.append([(r.seq, r.lock_token, r.delivery_count, r.message_id,
                                bytes(r.body), r.application_properties, r.subject)
                                for r in got])
                # Peek reads the same tables the same way (registered rows and the inbox
                # past the frontier, tombstones hiding cancelled messages): Spark every held
                # partition at once, delta-rs one after the other.
                peeked = store.peek_partitions(50, {p: p << PID_SHIFT for p in held}, now)
                handed.append([(r.seq, r.message_id, bytes(r.body), r.application_properties,
                                r.asDict().get("state"))
                               for p in held for r in peeked[p]])
                if abandon and got:
                    settle_messages(store, [Locked(r.seq, r.lock_token) for r in got],
                                    Settlement(Disposition.ABANDON, max_delivery_count=2),
                                    now, what="abandon")
            results[engine] = handed
            history = deltalake.DeltaTable(local_path(store.messages_path)).history()
            writers = {"delta-rs" in h.get("clientVersion", "") for h in history
                       if h["version"] > before}
            assert writers == {engine == "delta-rs"}, history
    assert results["delta-rs"] == results["spark"]
    # What the steps covered: duplicates dropped, the cancelled one never handed out, the
    # abandoned ones redelivered, and every kind of step handed out something.
    counted = [step for step in results["spark"] if isinstance(step, dict)]
    assert counted[0] == {"active": 16, "scheduled": 1, "deferred": 0, "locked": 0,
                          "size_in_bytes": counted[0]["size_in_bytes"],
                          "oldest": START}, counted  # sent at START: the oldest active
    assert any(c["locked"] for c in counted) and counted[0]["size_in_bytes"] > 0, counted
    steps_seen = [step for step in results["spark"] if not isinstance(step, dict)]
    received = steps_seen[0::2]
    assert all(received[i] for i in (0, 1, 2, 3, 4)), received
    assert all(steps_seen[1::2][:3]), results["spark"]  # peeks saw messages
    flat = [m for step in received for m in step]
    assert not any(m[4] in (b"never", b"short") for m in flat)
    bodies = {}
    for _, _, _, message_id, body, _, _ in flat:
        bodies.setdefault(message_id, set()).add(body)
    assert set(bodies) == {f"id{i}" for i in range(9)} | {None}, bodies  # None: "later"
    assert all(len(b) == 1 for i, b in bodies.items() if i is not None), bodies  # SEND-6
    assert max(m[2] or 0 for m in flat) == 2
    for table in ("messages", "dead"):
        paths = {e: (s.messages_path if table == "messages"
                     else s.dead_letter_store().messages_path) for e, s in stores.items()}
        assert_df_equality(_frozen(spark, paths["delta-rs"]), _frozen(spark, paths["spark"]),
                           ignore_row_order=True)
    dead = _frozen(spark, stores["spark"].dead_letter_store().messages_path)
    assert {r.dead_letter_reason for r in dead.collect()} == {
        "TTLExpiredException", "MaxDeliveryCountExceeded"}


#: A client in a process of its own: every call the SDK's single-message programs make, then
#: whether this process started a JVM.
_WITHOUT_SPARK = """
import json, sys
from datetime import timedelta
from pyspark import SparkContext
from sbdelta import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode
with ServiceBusClient(sys.argv[1], engine="delta-rs") as client:
    client.get_queue_sender("q").send_messages([ServiceBusMessage(f"m{i}") for i in range(6)])
    receiver = client.get_queue_receiver("q", max_wait_time=0)
    got = receiver.receive_messages(4)
    receiver.complete_message(got[0])
    receiver.abandon_message(got[1])
    receiver.defer_message(got[2])
    receiver.renew_message_lock(got[3])
    receiver.dead_letter_message(got[3], reason="checked")
    deferred = receiver.receive_deferred_messages([got[2].sequence_number])
    receiver.complete_message(deferred[0])
    more = receiver.receive_messages(2)  # m4 and m5, given back by a list of lock tokens
    receiver.abandon_messages([m.lock_token for m in more] + [more[0].lock_token])
    taker = client.get_queue_receiver("q", receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE,
                                      max_wait_time=0)
    peeked = [str(m) for m in receiver.peek_messages(10)]
    taken = taker.receive_messages(10)
print(json.dumps({"bodies": sorted(str(m) for m in got + taken), "peeked": peeked,
                  "jvm": SparkContext._gateway is not None}))
"""


def test_recv_1_settle_1_4_a_delta_rs_client_sends_receives_and_settles_without_a_jvm(
        spark, tmp_path):
    """Issue 16: under the engine ``delta-rs`` a client on a local namespace that never asks
    for a DataFrame starts no JVM: sends, PeekLock and ReceiveAndDelete receives, complete,
    abandon (of a message, and of a list of lock tokens), defer and receive by sequence
    number, renew, dead-letter and peek all run through delta-rs (Spark starts on first use only, :class:`sbdelta._spark.LazySpark`)."""
    import json

    from ..conftest import run_python

    ns = str(tmp_path / "ns")
    ServiceBusAdministrationClient(ns, spark=spark).create_queue("q")
    proc = run_python("-c", _WITHOUT_SPARK, ns)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    report = json.loads(out.strip().splitlines()[-1])
    assert report["jvm"] is False
    # m1 was abandoned and came back to the ReceiveAndDelete receive with m4 and m5.
    assert report["bodies"] == ["m0", "m1", "m1", "m2", "m3", "m4", "m5"]
    assert report["peeked"] == ["m1", "m4", "m5"]
    with ServiceBusClient(ns, spark=spark) as client:
        assert client.get_queue_receiver("q").peek_messages(10) == []
        dead = client.get_queue_receiver("q", sub_queue=ServiceBusSubQueue.DEAD_LETTER,
                                         max_wait_time=0)
        assert [(str(m), m.dead_letter_reason) for m in dead.peek_messages(10)] == [
            ("m3", "checked")]


@pytest.mark.parametrize("engine", ["delta-rs", "spark"])
def test_sess_2_3_5_6_session_receivers_do_the_same_through_delta_rs_without_a_jvm_and_spark(
        spark, tmp_path, engine):
    """Issue 16: session receivers on a local namespace run through delta-rs as queue
    receivers do (``tests/workers/session_scenario.py``): next available (SESS-3, the session
    of the oldest message first), a named session, messages in order under the session lock
    (SESS-2), state (SESS-5), renewal, settlement and the session listing (SESS-6), in a
    process where no JVM starts; the same scenario through Spark (the cloud path) ends the
    same."""
    import json

    from ..conftest import run_python
    from ..workers import session_scenario

    ns = str(tmp_path / "ns")
    session_scenario.prepare(ServiceBusAdministrationClient(ns, spark=spark))
    if engine == "delta-rs":
        proc = run_python("-m", "tests.workers.session_scenario", ns)
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        report = json.loads(out.strip().splitlines()[-1])
        assert report.pop("jvm") is False
    else:
        report = session_scenario.run(ns, "spark", spark)
    assert report == session_scenario.EXPECTED
    with ServiceBusClient(ns, spark=spark, engine="spark") as client:  # one view of both
        assert client.get_queue_receiver("s", session_id="b",
                                         max_wait_time=0).session.get_state() == b"seen"
        assert client.get_queue_receiver("s", session_id="a",
                                         max_wait_time=0).peek_messages(10) == []


def test_topic_1_4_5_sess_1_subscription_receivers_do_the_same_through_delta_rs_without_a_jvm(
        spark, tmp_path):
    """Issue 16: subscription receivers on a local namespace run through delta-rs, their rules
    evaluated in Python over the inbox rows delta-rs reads (``tests/workers/
    subscription_scenario.py``): counts and peeks before any receive, receives in batches,
    copies per rule action (TOPIC-5), filter and action failures and session-less messages of
    a session subscription (SESS-1) dead-lettered, next-available session receivers; in a
    process where no JVM starts. The same scenario through Spark (Column expressions over
    the change feed) on a second namespace ends the same. A subscription that forwards moves
    what the send brought it on through delta-rs too (FWD-2, PART-8)."""
    import json

    from ..conftest import run_python
    from ..workers import subscription_scenario

    reports = {}
    for engine in ("delta-rs", "spark"):
        ns = str(tmp_path / engine)
        subscription_scenario.prepare(ServiceBusAdministrationClient(ns, spark=spark))
        if engine == "delta-rs":
            proc = run_python("-m", "tests.workers.subscription_scenario", ns)
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err[-3000:]
            reports[engine] = json.loads(out.strip().splitlines()[-1])
            assert reports[engine].pop("jvm") is False
        else:
            reports[engine] = subscription_scenario.run(ns, "spark", spark)
    assert reports["delta-rs"] == reports["spark"]
    assert reports["spark"] == subscription_scenario.EXPECTED


@pytest.mark.parametrize("engine, sends, settles", [
    ("spark", "Spark", "Spark"), ("auto", "delta-rs", "delta-rs"),
    ("delta-rs", "delta-rs", "delta-rs")])
def test_the_engine_option_decides_who_commits_sends_receives_and_settlements(
        spark, tmp_path, clock, monkeypatch, engine, sends, settles):
    """``ServiceBusClient(engine=...)`` (issue 16): the option wins over ``$SBDELTA_ENGINE``;
    ``auto`` and ``delta-rs`` append sends, commit the receive's MERGE and settle through
    delta-rs on a local namespace, ``spark`` does none of it. Read from who wrote each commit of the tables."""
    monkeypatch.setenv("SBDELTA_ENGINE", "spark" if engine != "spark" else "delta-rs")
    ns = str(tmp_path / "ns")
    ServiceBusAdministrationClient(ns, spark=spark, clock=clock, engine=engine).create_queue("q")
    with ServiceBusClient(ns, spark=spark, clock=clock, engine=engine) as client:
        store = client._entities.queue("q").store
        inbox, messages = (deltalake.DeltaTable(local_path(p))
                           for p in (store.inbox_path, store.messages_path))
        since = inbox.version(), messages.version()
        client.get_queue_sender("q").send_messages(ServiceBusMessage("one"))
        receiver = client.get_queue_receiver("q", max_wait_time=0)
        got = receive_all(receiver, 1)
        receiver.complete_message(got[0])
        assert receiver.peek_messages(5) == []

    def writers(table, after):
        table.update_incremental()
        return {"delta-rs" if "delta-rs" in h.get("clientVersion", "") else "Spark"
                for h in table.history() if h["version"] > after}

    assert writers(inbox, since[0]) == {sends}
    assert writers(messages, since[1]) == {settles}  # the receive's MERGE and the completion


@pytest.mark.parametrize("where", ["option", "environment"])
def test_an_unknown_engine_is_refused_before_anything_is_read_or_written(
        spark, tmp_path, monkeypatch, where):
    ns = tmp_path / "ns"
    if where == "option":
        make = lambda: ServiceBusClient(str(ns), spark=spark, engine="rust")  # noqa: E731
        said = "engine='rust'"
    else:
        monkeypatch.setenv("SBDELTA_ENGINE", "delta_rs")
        make = lambda: ServiceBusAdministrationClient(str(ns), spark=spark)  # noqa: E731
        said = "SBDELTA_ENGINE='delta_rs'"
    with pytest.raises(ConfigurationError) as refused:
        make()
    assert said in str(refused.value)
    assert "'auto', 'spark', 'delta-rs'" in str(refused.value)
    assert not ns.exists()


def test_delta_rs_is_refused_on_a_namespace_it_cannot_serve_and_auto_hands_that_to_spark(
        spark, clock):
    """``engine="delta-rs"`` on a remote namespace is refused when the client is made, before
    anything is read or written; ``auto`` accepts it (Spark will serve it) and ``spark`` too."""
    remote = "abfss://queues@account.dfs.core.windows.net/ns"
    with pytest.raises(ConfigurationError) as refused:
        ServiceBusClient(remote, spark=spark, clock=clock, engine="delta-rs")
    assert "engine='delta-rs' cannot serve namespace abfss://" in str(refused.value)
    assert "only on local namespaces" in str(refused.value)
    assert "engine='auto'" in str(refused.value)
    for engine in ("auto", "spark"):
        assert Namespace(remote, spark=spark, clock=clock, engine=engine).engine.name == engine


def _frozen(spark, path):
    df = spark.read.format("delta").load(path)
    return spark.createDataFrame(df.collect(), df.schema)


def test_registry_changes_and_their_guards_are_the_same_through_delta_rs_and_spark(
        spark, tmp_path, clock):
    """The registry's MERGEs (create with its EXISTS and NO_PARENT guards, property updates
    with NOT_FOUND, rule replacement and retirement, TOPIC-2, with STALE) and its DELETE of an
    entity with everything below it, written once as MergeSpecs: under the engine
    ``delta-rs`` delta-rs commits them, under ``spark`` Spark does, and the two registries
    come out the same, with the same errors on the same calls."""
    from pyspark.sql import functions as F

    from sbdelta import MessagingEntityAlreadyExistsError, MessagingEntityNotFoundError
    from sbdelta.management import SqlRuleFilter

    registries, errors = {}, {}
    for engine in ("delta-rs", "spark"):
        ns = str(tmp_path / engine)
        admin = ServiceBusAdministrationClient(ns, spark=spark, clock=clock, engine=engine)
        admin.create_queue("gone")  # the registry table exists before the counted commits
        path = Namespace(ns, spark=spark).registry.path
        before = deltalake.DeltaTable(local_path(path)).version()
        admin.create_queue("q", max_delivery_count=4)
        admin.update_queue(admin.get_queue("q"), max_delivery_count=7)
        admin.create_topic("t")
        admin.create_subscription("t", "s")
        admin.create_rule("t", "s", "r", filter=SqlRuleFilter("a = 1"))
        admin.update_rule("t", "s", admin.get_rule("t", "s", "r"), filter=SqlRuleFilter("a = 2"))
        admin.create_subscription("t", "s2")
        admin.delete_rule("t", "s2", "$Default")
        admin.delete_queue("gone")
        admin.create_topic("t2")
        admin.create_subscription("t2", "x")
        admin.delete_topic("t2")  # the topic, its subscription and its rule in one DELETE
        seen = []
        for call in (lambda: admin.create_queue("q"),
                     lambda: admin.create_subscription("no-such-topic", "s"),
                     lambda: admin.update_queue({"name": "nope", "max_delivery_count": 3}),
                     lambda: admin.delete_rule("t", "s", "no-such-rule")):
            with pytest.raises((MessagingEntityAlreadyExistsError,
                                MessagingEntityNotFoundError)) as raised:
                call()
            seen.append(type(raised.value).__name__)
        errors[engine] = seen
        table = deltalake.DeltaTable(local_path(path))
        writers = {"delta-rs" in h.get("clientVersion", "") for h in table.history()
                   if h["version"] > before}
        assert writers == {engine == "delta-rs"}, table.history()
        registry = spark.read.format("delta").load(path).drop("location")
        registries[engine] = registry.withColumn(  # a retired version's key ends in a random id
            "key", F.when(F.col("kind") == "rule_history",
                          F.regexp_replace("key", ":[0-9a-f]{12}$", ":<id>")).otherwise(F.col("key")))
    assert errors["delta-rs"] == errors["spark"] == [
        "MessagingEntityAlreadyExistsError", "MessagingEntityNotFoundError",
        "MessagingEntityNotFoundError", "MessagingEntityNotFoundError"]
    assert_df_equality(registries["delta-rs"], registries["spark"], ignore_row_order=True)
    keys = sorted(r.key for r in registries["spark"].collect())
    assert not any(k.startswith("t2") for k in keys) and "gone" not in keys


def test_the_spark_registry_read_runs_no_job_at_a_version_it_read_and_sees_every_change(
        spark, tmp_path, clock):
    """Every entity open, count and topic send reads the registry; under the engine ``spark``
    a read at the version last read costs a listing of the log and no Spark job, and a read
    after a change (in this process or another: the log decides), or of a registry made anew
    at the same path and version, reads the table again."""
    sc = spark.sparkContext

    def listed(ns):
        group = f"registry-{tmp_path.name}-{listed.calls}"
        listed.calls += 1
        sc.setJobGroup(group, group)
        try:
            names = [q.name for q in ServiceBusAdministrationClient(
                ns, spark=spark, clock=clock, engine="spark").list_queues()]
        finally:
            sc.setJobGroup(None, None)
        return names, len(sc.statusTracker().getJobIdsForGroup(group))
    listed.calls = 0

    ns = str(tmp_path / "ns")
    other = ServiceBusAdministrationClient(ns, clock=clock, engine="delta-rs")  # no Spark
    other.create_queue("a")
    names, jobs = listed(ns)
    assert names == ["a"] and jobs > 0
    assert listed(ns) == (["a"], 0)  # the same version: no job
    other.create_queue("b")
    names, jobs = listed(ns)
    assert names == ["a", "b"] and jobs > 0
    assert listed(ns) == (["a", "b"], 0)
    shutil.rmtree(ns)  # made anew: the same path and version, another table
    again = ServiceBusAdministrationClient(ns, clock=clock, engine="delta-rs")
    again.create_queue("c")
    again.create_queue("d")
    assert listed(ns)[0] == ["c", "d"]
