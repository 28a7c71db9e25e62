"""Maintenance jobs on real Delta tables: compaction, pings, auto-delete on idle.

Each test names the rule of ../shared/SEMANTICS.md it proves. Time is a ManualClock; nothing
sleeps through a TTL or an idle period.
"""

import itertools
import os
import time
from datetime import timedelta
from pathlib import Path

import pytest

from sbdelta import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from sbdelta._entity import EntityResolver
from sbdelta._namespace import Namespace
from sbdelta._store.delta import TIME_TRAVEL_CHECK, latest_version, session_settings
from sbdelta._store import PING_CONTENT_TYPE, messages as messages_module
from sbdelta.exceptions import MessagingEntityNotFoundError, ServiceBusInvalidOperationError
from sbdelta.maintenance import MIN_RETAIN_HOURS, compact, delete_idle_entities
from sbdelta.management import ServiceBusAdministrationClient, SqlRuleFilter

from sbdelta._names import EntityRef

from ..conftest import START, receive_all, spark_submit
_names = itertools.count()


@pytest.fixture(scope="module")
def ns(spark, tmp_path_factory):
    return str(tmp_path_factory.mktemp("maintenance") / "ns")


def _store(spark, ns, name):
    return EntityResolver(Namespace(ns, spark=spark)).queue(name).store


def _rows(spark, path, where="TRUE"):
    return spark.read.format("delta").load(path).where(where).count()


def _local(uri):
    return Path(uri[len("file:"):] if uri.startswith("file:") else uri)


def _data_files(uri):
    return sorted(p for p in _local(uri).rglob("*.parquet") if "_delta_log" not in p.parts)


def _age(uri, seconds):
    """Move the modification time of every file under ``uri`` back by ``seconds``: what Delta
    (log cleanup, VACUUM, time travel) sees as time passing; the broker clock is separate."""
    for path in _local(uri).rglob("*"):
        if path.is_file():
            st = path.stat()
            os.utime(path, (st.st_atime - seconds, st.st_mtime - seconds))


@pytest.mark.parametrize("purge", ["literal", "checkpointed"])
def test_compact_removes_settled_rows_and_keeps_every_live_message(spark, ns, admin, client,
                                                                   clock, monkeypatch, purge):
    """``purge``: the rows to purge go to the MERGE as literal rows (up to LITERAL_ROWS of
    them, what most runs find), or, more than that, as a checkpointed plan (forced here).
    The literal run compacts on the default engine, which reads the dead-letter table's
    tombstones through DataFusion (the messages table's duplicate-detection history needs
    Spark's join with the unregistered inbox rows); the checkpointed one under the engine
    ``spark``, which reads both through Spark."""
    if purge == "checkpointed":
        monkeypatch.setattr(messages_module, "LITERAL_ROWS", 1)
        monkeypatch.setenv("SBDELTA_ENGINE", "spark")  # the compaction's (the clients exist)
    name = f"c{next(_names)}"
    admin.create_queue(name, requires_duplicate_detection=True, lock_duration=timedelta(minutes=5),
                       duplicate_detection_history_time_window=timedelta(minutes=1))
    sender, receiver = client.get_queue_sender(name), client.get_queue_receiver(name,
                                                                                max_wait_time=0)
    # Sent two hours ago, so that their duplicate-detection history is past its window and the
    # operation bound (1 h) when the compaction runs, while the locks taken below still hold.
    clock.set(START - timedelta(hours=2))
    for round_ in range(3):
        sender.send_messages([ServiceBusMessage(f"r{round_}-{i}", message_id=f"r{round_}-{i}")
                              for i in range(4)])
    clock.set(START)
    got = receiver.receive_messages(12)
    assert len(got) == 12
    receiver.complete_messages(got[:6])
    receiver.dead_letter_messages(got[6:8], reason="bad")
    kept = got[8:]  # still locked
    dlq = client.get_queue_receiver(name, sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=0)
    dead = dlq.receive_messages(2)
    dlq.complete_messages(dead)  # leaves two COMPLETED tombstones in the dead-letter table
    sender.send_messages(ServiceBusMessage("late", message_id="late"))  # not registered yet
    clock.advance(timedelta(minutes=2))
    store = _store(spark, ns, name)
    dlq_path = store.dead_letter_store().messages_path
    assert _rows(spark, store.inbox_path) == 13
    # A file no commit references, left two hours ago by a writer that crashed: VACUUM's job.
    orphan = _local(store.messages_path) / "pid=0" / "part-00000-orphan.c000.snappy.parquet"
    orphan.write_bytes(b"not committed")
    os.utime(orphan, (time.time() - 7200, time.time() - 7200))
    inbox_files = _data_files(store.inbox_path)

    preview = compact(ns, entities=[name], clock=clock, dry_run=True, spark=spark)
    t = preview.totals()
    assert (t["inbox_rows_purged"], t["tombstones_purged"],
            t["dead_letter_tombstones_purged"]) == (12, 12, 2)
    assert _rows(spark, store.inbox_path) == 13  # a dry run changes nothing

    report = compact(ns, entities=[name], clock=clock, retain_hours=MIN_RETAIN_HOURS,
                     spark=spark)
    t = report.totals()
    assert (t["inbox_rows_purged"], t["tombstones_purged"],
            t["dead_letter_tombstones_purged"]) == (12, 12, 2)
    # VACUUM deleted the orphan; the inbox files it just removed stay on disk for the
    # operation bound: a receive that planned before the purge may still read them.
    assert t["files_vacuumed"] == 1 and not orphan.exists()
    assert _data_files(store.inbox_path) == inbox_files
    # Every table ends checkpointed at its latest version: the next reader replays no JSON.
    tables = {"inbox": store.inbox_path, "messages": store.messages_path, "deadletter": dlq_path}
    assert report.entities[0].checkpoint_versions == {
        table: latest_version(spark, path) for table, path in tables.items()}
    assert t["checkpoints_written"] == 3
    assert "inbox rows purged 12" in str(report)
    # Physically gone: only the unregistered message is left in the inbox, no tombstones.
    assert _rows(spark, store.inbox_path) == 1
    assert _rows(spark, store.messages_path, "state = 'CANCELLED' OR kind = 'DEDUP'") == 0
    assert _rows(spark, dlq_path) == 0

    # Nothing live was touched: the locked ones settle, then come back after abandon, the new
    # one is delivered, sequence numbers keep increasing after the purge.
    receiver.abandon_message(kept[0])
    again = receiver.receive_messages(10)
    assert sorted(str(m) for m in again) == sorted([str(kept[0]), "late"])
    receiver.complete_messages(again + kept[1:])
    sender.send_messages(ServiceBusMessage("after"))
    (after,) = receiver.receive_messages(1)
    assert after.sequence_number > max(m.sequence_number for m in got + again)
    receiver.complete_message(after)

    # The next run takes what the last receives registered: "late" and "after" from the
    # inbox, and the history row of "late" (sent at START: its 1-minute window and the 1-hour
    # operation bound are over).
    clock.advance(timedelta(hours=1))
    second = compact(ns, entities=[name], clock=clock, retain_hours=MIN_RETAIN_HOURS,
                     spark=spark).totals()
    assert (second["inbox_rows_purged"], second["tombstones_purged"],
            second["dead_letter_tombstones_purged"]) == (2, 1, 0)
    # Idempotent: with nothing new, there is nothing left to remove.
    third = compact(ns, entities=[name], clock=clock, dry_run=True, spark=spark).totals()
    assert third == dict.fromkeys(third, 0)


def test_compaction_runs_in_a_thread_of_its_own(spark, ns, admin, client, clock):
    """A maintenance loop in a Python thread (the stress test's, a notebook's worker thread):
    that thread's JVM thread has no active Spark session, which Delta's snapshot reads need
    when a prefetch of theirs failed (a concurrent log trim); a 2,000-message stress run died
    of DELTA_SPARK_SESSION_NOT_SET in the inbox purge. Every Delta log the store opens sets
    the caller's session as its thread's active one first."""
    import threading

    name = f"c{next(_names)}"
    admin.create_queue(name)
    client.get_queue_sender(name).send_messages([ServiceBusMessage(f"m{i}") for i in range(3)])
    receiver = client.get_queue_receiver(name, max_wait_time=0)
    receiver.complete_messages(receiver.receive_messages(3))
    active = spark.sparkContext._jvm.org.apache.spark.sql.SparkSession.getActiveSession
    seen = {}

    def maintain():
        try:
            seen["before"] = active().isDefined()
            seen["report"] = compact(ns, entities=[name], clock=clock, spark=spark)
            seen["after"] = active().isDefined()
        except Exception as exc:  # noqa: BLE001 - reported below
            seen["error"] = exc

    thread = threading.Thread(target=maintain)
    thread.start()
    thread.join(timeout=300)
    assert "error" not in seen, seen.get("error")
    assert (seen["before"], seen["after"]) == (False, True)  # set by the store, not inherited
    assert seen["report"].totals()["inbox_rows_purged"] == 3  # through the purge's Delta log


def test_recv_7_pair_6_pings_are_never_delivered_peeked_or_counted(spark, ns, admin, client,
                                                                   clock):
    name = f"p{next(_names)}"
    admin.create_queue(name)
    sender = client.get_queue_sender(name)
    ping = ServiceBusMessage(b"", content_type=PING_CONTENT_TYPE,
                             time_to_live=timedelta(seconds=1))
    sender.send_messages([ping, ServiceBusMessage("real")])
    sender.send_messages(ping)
    receiver = client.get_queue_receiver(name, max_wait_time=0)
    assert [str(m) for m in receiver.peek_messages(10)] == ["real"]
    assert admin.get_queue_runtime_properties(name).active_message_count == 1
    got = receiver.receive_messages(10)
    assert [str(m) for m in got] == ["real"]
    receiver.complete_messages(got)
    assert receiver.receive_messages(10) == []
    # PAIR-6: past their TTL, pings are removed from storage by the maintenance job.
    clock.advance(timedelta(seconds=2))
    store = _store(spark, ns, name)
    assert _rows(spark, store.inbox_path, f"content_type = '{PING_CONTENT_TYPE}'") == 2
    compact(ns, entities=[name], clock=clock, spark=spark)
    assert _rows(spark, store.inbox_path) == 0


def test_idle_1_idle_2_idle_3_auto_delete_on_idle(spark, tmp_path, clock):
    ns = str(tmp_path / "ns")
    admin = ServiceBusAdministrationClient(ns, spark=spark, clock=clock)
    five = timedelta(minutes=5)
    admin.create_queue("sent-to", auto_delete_on_idle=five)
    admin.create_queue("peeked", auto_delete_on_idle=five)
    admin.create_queue("untouched", auto_delete_on_idle=five)
    admin.create_queue("forever")  # no auto_delete_on_idle: never deleted (IDLE-1 default)
    admin.create_queue("forwarder", auto_delete_on_idle=five, forward_to="forever")
    admin.create_topic("events", auto_delete_on_idle=five)
    admin.create_subscription("events", "audit", auto_delete_on_idle=timedelta(minutes=30))
    admin.create_topic("quiet", auto_delete_on_idle=five)
    admin.create_subscription("quiet", "idle", auto_delete_on_idle=five)

    clock.advance(timedelta(minutes=4))
    with ServiceBusClient(ns, spark=spark, clock=clock) as client:
        client.get_queue_sender("sent-to").send_messages(ServiceBusMessage("x"))
        client.get_queue_receiver("peeked").peek_messages(1)
    # A new rule on a subscription is activity of the subscription and of its topic.
    admin.create_rule("events", "audit", "errors", filter=SqlRuleFilter("severity = 'error'"))

    folder = _store(spark, ns, "untouched").folder
    clock.advance(timedelta(minutes=2))  # 6 min after creation, 2 min after the activity
    preview = delete_idle_entities(ns, clock=clock, spark=spark, dry_run=True)
    assert sorted(preview.deleted) == ["quiet", "untouched"]
    report = delete_idle_entities(ns, clock=clock, spark=spark)
    assert sorted(report.deleted) == ["quiet", "untouched"]
    kept = {e.entity: e.kept_because for e in report.entities if not e.deleted}
    assert "IDLE-3" in kept["forwarder"]
    assert "not set" in kept["forever"]
    assert "quiet/Subscriptions/idle" not in kept  # went with its topic
    with pytest.raises(MessagingEntityNotFoundError):
        admin.get_queue("untouched")
    with pytest.raises(MessagingEntityNotFoundError):
        admin.get_topic("quiet")
    assert not Namespace(ns, spark=spark).exists(folder)  # its tables went with it

    clock.advance(timedelta(minutes=4))  # now 6 min after the send, the peek and the rule
    report = delete_idle_entities(ns, clock=clock, spark=spark)
    assert sorted(report.deleted) == ["events", "peeked", "sent-to"]
    assert [q.name for q in admin.list_queues()] == ["forever", "forwarder"]
    again = delete_idle_entities(ns, clock=clock, spark=spark)
    assert again.deleted == []  # idempotent
    with pytest.raises(MessagingEntityNotFoundError, match="events/Subscriptions/nope"):
        delete_idle_entities(ns, entities=["forever", "events/Subscriptions/nope"], clock=clock,
                             spark=spark)
    assert [q.name for q in admin.list_queues()] == ["forever", "forwarder"]
    with pytest.raises(ServiceBusInvalidOperationError, match="retain_hours"):
        compact(ns, retain_hours=-1, spark=spark)


def test_compact_and_idle_jobs_run_via_spark_submit(spark, tmp_path):
    ns = str(tmp_path / "ns")
    admin = ServiceBusAdministrationClient(ns, spark=spark)
    admin.create_queue("kept")
    with ServiceBusClient(ns, spark=spark) as client:
        client.get_queue_sender("kept").send_messages(ServiceBusMessage("x"))
        receiver = client.get_queue_receiver("kept", max_wait_time=0)
        receiver.complete_messages(receiver.receive_messages(1))
    conf = tmp_path / "maintenance.json"
    conf.write_text('// settings\n{"namespace": "%s", "compact": {"retain_hours": 1}}' % ns)
    done = spark_submit("compact", "--conf", str(conf))  # namespace and retention from conf
    assert done.returncode == 0, done.stderr[-3000:]
    assert "vacuum retaining 1 h): 1 entities visited" in done.stdout
    assert "inbox rows purged 1," in done.stdout
    idle = spark_submit("delete_idle_entities", "--namespace", ns, "--dry-run")
    assert idle.returncode == 0, idle.stderr[-3000:]
    assert "1 entities visited" in idle.stdout and "0 would delete" in idle.stdout
    bad = spark_submit("compact", "--namespace", ns, "--retain-hours", "0.5")
    assert bad.returncode == 1
    assert "retain_hours must be a number of hours >= 1, the safe floor" in bad.stdout + bad.stderr


def _two_keys_in_different_partitions(partitions=16):
    import zlib

    keys = {}
    for i in itertools.count():
        keys.setdefault(zlib.crc32(f"k{i}".encode()) % partitions, f"k{i}")
        if len(keys) == 2:
            return list(keys.values())


def test_issue12_item5_part_4_a_partition_days_behind_still_receives_after_compact(
        spark, ns, admin, client, clock):
    name = f"lag{next(_names)}"
    admin.create_queue(name, enable_partitioning=True)
    sender, receiver = client.get_queue_sender(name), client.get_queue_receiver(name,
                                                                                max_wait_time=0)
    keys = _two_keys_in_different_partitions()
    for i in range(4):  # four send commits, each with one message in each of two partitions
        sender.send_messages([ServiceBusMessage(f"{key}-{i}", partition_key=key) for key in keys])
    got = receiver.receive_messages(4)
    # One receive drains one partition (PART-4 takes whatever is available); the other lags.
    (received,) = {m.sequence_number >> 48 for m in got}
    receiver.complete_messages(got)
    lagging_key = [k for k in keys if k != str(got[0]).split("-")[0]][0]
    store = _store(spark, ns, name)
    log_dir = _local(store.inbox_path) / "_delta_log"
    commits = sorted(p.name for p in log_dir.glob("*.json"))

    # Forty days pass, for the broker and for Delta (its log cleanup removes commits older than
    # 30 days by default), then the most thorough compaction allowed.
    clock.advance(timedelta(days=40))
    _age(store.folder, 40 * 86400)
    report = compact(ns, entities=[name], clock=clock, retain_hours=MIN_RETAIN_HOURS,
                     spark=spark)
    t = report.totals()
    assert (t["inbox_rows_purged"], t["log_files_trimmed"]) == (4, 0)
    # The lagging partition's commits are all still in the log, so its change feed reads.
    assert set(commits) <= {p.name for p in log_dir.glob("*.json")}
    late = receiver.receive_messages(10)
    assert [str(m) for m in late] == [f"{lagging_key}-{i}" for i in range(4)]
    assert {m.sequence_number >> 48 for m in late} != {received}
    receiver.complete_messages(late)
    assert receiver.receive_messages(10) == []  # moves the idle partitions' frontiers too

    # Once every frontier has passed them, and for longer than the retention, the commits go:
    # the log keeps a checkpoint and what follows it; sends and receives go on.
    _age(store.folder, 2 * 3600)
    report = compact(ns, entities=[name], clock=clock, retain_hours=MIN_RETAIN_HOURS,
                     spark=spark)
    assert report.totals()["inbox_rows_purged"] == 4
    assert report.totals()["log_files_trimmed"] > 0
    assert commits[0] not in {p.name for p in log_dir.glob("*.json")}
    sender.send_messages(ServiceBusMessage("after", partition_key=lagging_key))
    after = receiver.receive_messages(10)
    assert [str(m) for m in after] == ["after"]
    receiver.complete_messages(after)


def test_compaction_trims_the_messages_and_dead_letter_logs_behind_the_retention(
        spark, ns, admin, client, clock):
    """Every single receive and settlement is a commit on the messages table, and Delta keeps
    30 days of them: a busy queue's log folder, which each commit and each delta-rs read lists,
    would grow with its history. Compaction checkpoints every table; the next run after the
    retention trims the log to that checkpoint (a dry run only counts). The queue, its
    dead-letter queue and the inbox's trim (which reads the frontiers of the retention ago
    from this log) work on after it."""
    name = f"mlog{next(_names)}"
    admin.create_queue(name)
    sender = client.get_queue_sender(name)
    receiver = client.get_queue_receiver(name, max_wait_time=0)

    def traffic(n):
        for i in range(n):
            sender.send_messages(ServiceBusMessage(f"m{i}"))
            (got,) = receiver.receive_messages(1)
            if i % 4:
                receiver.complete_message(got)
            else:
                receiver.dead_letter_message(got, reason="r")

    store = _store(spark, ns, name)
    logs = [_local(path) / "_delta_log"
            for path in (store.messages_path, store.dead_letter_store().messages_path)]

    def commits():
        return [sorted(int(p.name[:20]) for p in log.glob("*.json")) for log in logs]

    traffic(6)
    first = compact(ns, entities=[name], clock=clock, retain_hours=MIN_RETAIN_HOURS,
                    spark=spark)  # checkpoints every table; none is older than the retention
    assert first.totals()["messages_log_files_trimmed"] == 0
    checkpointed = [max(int(p.name[:20]) for p in log.glob("*.checkpoint.parquet"))
                    for log in logs]
    _age(store.folder, 2 * 3600)
    traffic(4)  # commits after the checkpoint, within the retention
    before = commits()
    assert [c[0] for c in before] == [0, 0] and all(c > 0 for c in checkpointed)

    dry = compact(ns, entities=[name], clock=clock, retain_hours=MIN_RETAIN_HOURS,
                  spark=spark, dry_run=True)
    assert dry.totals()["messages_log_files_trimmed"] > 0
    assert commits() == before
    report = compact(ns, entities=[name], clock=clock, retain_hours=MIN_RETAIN_HOURS,
                     spark=spark)
    assert report.totals()["messages_log_files_trimmed"] == dry.totals()[
        "messages_log_files_trimmed"]
    # Each log kept from the checkpoint older than the retention, every commit after it.
    for kept, old, at in zip(commits(), before, checkpointed):
        assert kept[0] == at and kept == list(range(at, kept[-1] + 1))
        assert kept[-1] >= old[-1]

    sender.send_messages(ServiceBusMessage("after"))
    assert [str(m) for m in receive_all(receiver, 1)] == ["after"]
    dlq = client.get_queue_receiver(name, sub_queue=ServiceBusSubQueue.DEAD_LETTER,
                                    max_wait_time=0)
    assert sorted(str(m) for m in receive_all(dlq, 3)) == ["m0", "m0", "m4"]
    _age(store.folder, 2 * 3600)
    again = compact(ns, entities=[name], clock=clock, retain_hours=MIN_RETAIN_HOURS,
                    spark=spark)  # the inbox's trim reads the frontiers from the trimmed log
    assert again.totals()["log_files_trimmed"] > 0


@pytest.mark.parametrize("engine", ["auto", "spark"])
def test_topic_6_a_topics_counts_read_after_compaction_trimmed_its_inbox_log(
        spark, ns, admin, clock, engine):
    """Compaction purges a topic's inbox rows behind every subscription's frontier and trims
    the commits behind them from the log; the topic's runtime properties (scheduled count,
    size) then read the change feed from the first commit left (they failed on a missing
    version 1 before), through delta-rs and through Spark alike."""
    name = f"trim{next(_names)}"
    admin.create_topic(name)
    admin.create_subscription(name, "s")
    with ServiceBusClient(ns, spark=spark, clock=clock) as client:
        sender = client.get_topic_sender(name)
        for i in range(4):
            sender.send_messages(ServiceBusMessage(f"m{i}"))
        receiver = client.get_subscription_receiver(name, "s", max_wait_time=0)
        receiver.complete_messages(receive_all(receiver, 4))
        folder = EntityResolver(Namespace(ns, spark=spark)).resolve(
            EntityRef.topic_of(name)).store.folder
        clock.advance(timedelta(days=40))
        _age(folder, 40 * 86400)
        compact(ns, entities=[name], clock=clock, retain_hours=MIN_RETAIN_HOURS, spark=spark)
        _age(folder, 2 * 3600)
        report = compact(ns, entities=[name], clock=clock, retain_hours=MIN_RETAIN_HOURS,
                         spark=spark)
        assert report.totals()["log_files_trimmed"] > 0
        later = ServiceBusMessage("later")
        sender.schedule_messages(later, clock.now() + timedelta(hours=1))
    reader = ServiceBusAdministrationClient(ns, spark=spark, clock=clock, engine=engine)
    counts = reader.get_topic_runtime_properties(name)
    assert (counts.scheduled_message_count, counts.size_in_bytes) == (1, later.size_in_bytes)


def test_issue17_a_spark_receive_reads_a_partition_lagging_past_the_retention_on_a_users_session(
        spark, ns, admin, clock):
    """Delta 4.2+ (and Databricks Runtime 18) refuses to read a table version older than the
    table's ``delta.deletedFileRetentionDuration`` (7 days) unless the session turns the check
    off; sbdelta's own sessions do, a user's may not. A partition lagging 8 days must still
    read the inbox's change feed from its frontier: the Spark receive reads it with the check
    off for that read only, and the session keeps its setting. (Delta 3.x and 4.0 have no such
    check; the proof is the Delta 4.4 run of docs/testing.md.)"""
    name = f"old{next(_names)}"
    admin.create_queue(name)
    with ServiceBusClient(ns, spark=spark, clock=clock, engine="spark") as client:
        client.get_queue_sender(name).send_messages([ServiceBusMessage(f"m{i}") for i in range(3)])
        clock.advance(timedelta(days=8))
        _age(_store(spark, ns, name).folder, 8 * 86400)
        with session_settings(spark, {TIME_TRAVEL_CHECK: "true"}):  # as a user's session
            got = client.get_queue_receiver(name, max_wait_time=0).receive_messages(10)
            assert spark.conf.get(TIME_TRAVEL_CHECK) == "true"
    assert [str(m) for m in got] == ["m0", "m1", "m2"]


def test_issue12_item5_retention_below_the_floor_is_refused_before_anything_runs(
        spark, ns, admin, client, clock):
    name = f"floor{next(_names)}"
    admin.create_queue(name)
    client.get_queue_sender(name).send_messages(ServiceBusMessage("x"))
    store = _store(spark, ns, name)
    before = latest_version(spark, store.inbox_path)
    for hours in (0, MIN_RETAIN_HOURS / 2):
        with pytest.raises(ServiceBusInvalidOperationError,
                           match=f"retain_hours must be a number of hours >= {MIN_RETAIN_HOURS:g}"
                                 ", the safe floor") as raised:
            compact(ns, entities=[name], clock=clock, retain_hours=hours, spark=spark)
        assert isinstance(raised.value, ValueError)
    assert latest_version(spark, store.inbox_path) == before


def test_issue12_item6_duplicate_in_window_is_dropped_with_compaction_between(
        spark, ns, admin, client, clock):
    name = f"dup{next(_names)}"
    window = timedelta(minutes=10)
    admin.create_queue(name, requires_duplicate_detection=True,
                       duplicate_detection_history_time_window=window)
    sender, receiver = client.get_queue_sender(name), client.get_queue_receiver(name,
                                                                                max_wait_time=0)
    sender.send_messages([ServiceBusMessage("first", message_id="X"),
                          ServiceBusMessage("other", message_id="Y")])
    got = receiver.receive_messages(2)
    assert sorted(str(m) for m in got) == ["first", "other"]
    receiver.complete_messages(got)
    clock.advance(window / 2)
    sender.send_messages(ServiceBusMessage("again", message_id="X"))  # inside X's window
    # Both histories are past their window and the operation bound; the duplicate of X still
    # waits in the inbox, checked only when a receive registers it.
    clock.advance(window + timedelta(hours=1, minutes=1))
    report = compact(ns, entities=[name], clock=clock, retain_hours=MIN_RETAIN_HOURS,
                     spark=spark)
    assert report.totals()["tombstones_purged"] == 1  # Y's history only
    assert receiver.receive_messages(10) == []  # the duplicate is not delivered
    # Registered (and dropped), the duplicate no longer needs X's history.
    again = compact(ns, entities=[name], clock=clock, retain_hours=MIN_RETAIN_HOURS,
                    spark=spark)
    assert again.totals()["tombstones_purged"] == 1
    sender.send_messages(ServiceBusMessage("new", message_id="X"))  # window over: delivered
    (new,) = receiver.receive_messages(10)
    assert str(new) == "new"
    receiver.complete_message(new)


def test_topic_1_compaction_purges_a_topic_inbox_only_behind_every_subscription(
        spark, ns, admin, client, clock):
    """One stored copy per message (TOPIC-1) is removed only when every subscription has
    registered it; each subscription's own tables are compacted like a queue's, and the
    expiry job sweeps subscriptions (TTL-4/6 to the subscription's dead-letter queue)."""
    from sbdelta.maintenance import expire_messages

    topic = f"ct{next(_names)}"
    admin.create_topic(topic, enable_partitioning=True)
    admin.create_subscription(topic, "fast")
    admin.create_subscription(topic, "slow", dead_lettering_on_message_expiration=True,
                              default_message_time_to_live=timedelta(minutes=10))
    sender = client.get_topic_sender(topic)
    fast = client.get_subscription_receiver(topic, "fast", max_wait_time=0)
    slow = client.get_subscription_receiver(topic, "slow", max_wait_time=0)
    for round_ in range(3):
        sender.send_messages([ServiceBusMessage(f"r{round_}-{i}", partition_key="k")
                              for i in range(4)])
        if round_ == 0:
            slow.complete_messages(slow.receive_messages(4))  # the first send commit only
    fast.complete_messages(receive_all(fast, 12, batch=20))
    resolver = EntityResolver(Namespace(ns, spark=spark))
    inbox = resolver.resolve(EntityRef.topic_of(topic)).store.inbox_path
    assert _rows(spark, inbox) == 12

    report = compact(ns, entities=[topic], clock=clock, retain_hours=MIN_RETAIN_HOURS,
                     spark=spark)
    by_entity = {e.entity: e for e in report.entities}
    assert set(by_entity) == {topic, f"{topic}/Subscriptions/fast",
                              f"{topic}/Subscriptions/slow"}
    assert by_entity[topic].inbox_rows_purged == 4  # behind "slow", the lowest frontier
    assert _rows(spark, inbox) == 8
    # The slow subscription still gets every message it has not taken; the expiry job then
    # dead-letters what outlived the subscription's 10-minute default.
    (rest,) = [slow.receive_messages(4)]
    assert len(rest) == 4
    slow.complete_messages(rest)
    clock.advance(timedelta(minutes=11))
    swept = expire_messages(ns, entities=[f"{topic}/Subscriptions/slow"], clock=clock,
                            spark=spark).totals()
    assert swept["expired_dead_lettered"] == 4
    dlq = client.get_subscription_receiver(topic, "slow", sub_queue=ServiceBusSubQueue.DEAD_LETTER,
                                           max_wait_time=0)
    assert sorted(str(m) for m in receive_all(dlq, 4)) == [f"r2-{i}" for i in range(4)]
    # The sweep tombstoned those rows; the next receive consumes the tombstones and moves the
    # frontier past them, and then nothing of the topic's inbox is needed any more.
    assert slow.receive_messages(5) == []
    again = compact(ns, entities=[topic], clock=clock, retain_hours=MIN_RETAIN_HOURS,
                    spark=spark)
    assert {e.entity: e.inbox_rows_purged for e in again.entities}[topic] == 8
    assert _rows(spark, inbox) == 0
