"""Maintenance jobs on real Delta tables: compaction, pings, auto-delete on idle.

Each test names the rule of ../shared/SEMANTICS.md it proves. Time is a ManualClock; nothing
sleeps through a TTL or an idle period.
"""

import itertools
from datetime import timedelta

import pytest

from sbdelta import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from sbdelta._entity import EntityResolver
from sbdelta._namespace import Namespace
from sbdelta._store.delta import latest_version
from sbdelta._store import PING_CONTENT_TYPE
from sbdelta.exceptions import MessagingEntityNotFoundError, ServiceBusInvalidOperationError
from sbdelta.maintenance import compact, delete_idle_entities
from sbdelta.management import ServiceBusAdministrationClient, SqlRuleFilter

from .conftest import spark_submit
_names = itertools.count()


@pytest.fixture(scope="module")
def ns(spark, tmp_path_factory):
    return str(tmp_path_factory.mktemp("maintenance") / "ns")


def _store(spark, ns, name):
    return EntityResolver(Namespace(ns, spark=spark)).queue(name).store


def _rows(spark, path, where="TRUE"):
    return spark.read.format("delta").load(path).where(where).count()


def test_compact_removes_settled_rows_and_keeps_every_live_message(spark, ns, admin, client,
                                                                   clock):
    name = f"c{next(_names)}"
    admin.create_queue(name, requires_duplicate_detection=True, lock_duration=timedelta(minutes=5),
                       duplicate_detection_history_time_window=timedelta(minutes=1))
    sender, receiver = client.get_queue_sender(name), client.get_queue_receiver(name)
    for round_ in range(3):
        sender.send_messages([ServiceBusMessage(f"r{round_}-{i}", message_id=f"r{round_}-{i}")
                              for i in range(4)])
    got = receiver.receive_messages(12)
    assert len(got) == 12
    receiver.complete_messages(got[:6])
    receiver.dead_letter_messages(got[6:8], reason="bad")
    kept = got[8:]  # still locked
    # A cancellation of a message already completed leaves a tombstone behind the frontier.
    sender.cancel_scheduled_messages(got[0].sequence_number)
    dlq = client.get_queue_receiver(name, sub_queue=ServiceBusSubQueue.DEAD_LETTER)
    dead = dlq.receive_messages(2)
    dlq.complete_messages(dead)  # leaves two COMPLETED tombstones in the dead-letter table
    sender.send_messages(ServiceBusMessage("late", message_id="late"))  # not registered yet
    clock.advance(timedelta(minutes=2))  # the duplicate-detection history is past its window
    store = _store(spark, ns, name)
    dlq_path = store.dead_letter_store().messages_path
    assert _rows(spark, store.inbox_path) == 13

    preview = compact(ns, entities=[name], clock=clock, dry_run=True, spark=spark)
    t = preview.totals()
    assert (t["inbox_rows_purged"], t["tombstones_purged"],
            t["dead_letter_tombstones_purged"]) == (12, 1 + 12, 2)
    assert _rows(spark, store.inbox_path) == 13  # a dry run changes nothing

    report = compact(ns, entities=[name], clock=clock, retain_hours=0, spark=spark)
    t = report.totals()
    assert (t["inbox_rows_purged"], t["tombstones_purged"],
            t["dead_letter_tombstones_purged"]) == (12, 13, 2)
    assert t["files_vacuumed"] > 0
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
    # inbox, and the history row of "late" (sent at START, its 1-minute window is over).
    second = compact(ns, entities=[name], clock=clock, retain_hours=0, spark=spark).totals()
    assert (second["inbox_rows_purged"], second["tombstones_purged"],
            second["dead_letter_tombstones_purged"]) == (2, 1, 0)
    # Idempotent: with nothing new, there is nothing left to remove.
    third = compact(ns, entities=[name], clock=clock, dry_run=True, spark=spark).totals()
    assert third == dict.fromkeys(third, 0)


def test_recv_7_pair_6_pings_are_never_delivered_peeked_or_counted(spark, ns, admin, client,
                                                                   clock):
    name = f"p{next(_names)}"
    admin.create_queue(name)
    sender = client.get_queue_sender(name)
    ping = ServiceBusMessage(b"", content_type=PING_CONTENT_TYPE,
                             time_to_live=timedelta(seconds=1))
    sender.send_messages([ping, ServiceBusMessage("real")])
    sender.send_messages(ping)
    receiver = client.get_queue_receiver(name)
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
        receiver = client.get_queue_receiver("kept")
        receiver.complete_messages(receiver.receive_messages(1))
    conf = tmp_path / "maintenance.json"
    conf.write_text('// settings\n{"namespace": "%s", "compact": {"retain_hours": 0}}' % ns)
    done = spark_submit("compact", "--conf", str(conf))  # namespace and retention from conf
    assert done.returncode == 0, done.stderr[-3000:]
    assert "vacuum retaining 0 h): 1 entities visited" in done.stdout
    assert "inbox rows purged 1," in done.stdout
    idle = spark_submit("delete_idle_entities", "--namespace", ns, "--dry-run")
    assert idle.returncode == 0, idle.stderr[-3000:]
    assert "1 entities visited" in idle.stdout and "0 would delete" in idle.stdout
    bad = spark_submit("compact", "--namespace", ns, "--retain-hours", "-1")
    assert bad.returncode == 1
    assert "retain_hours must be a number of hours >= 0" in bad.stdout + bad.stderr
