"""Auto-forwarding (FWD-2, FWD-3, PART-8, IDLE-3's forwarding part is in test_maintenance): a
message sent to a forwarding source arrives in the destination, once, with its body, id,
properties and partition key, under a new sequence number; a fifth hop is dead-lettered;
messages already in a source and dead letters are moved by the maintenance job; a crash
between the mover's commits repeats and loses nothing. Each test names the rule it proves.
"""

import itertools
import zlib
from datetime import timedelta

import pytest

from sbdelta import ServiceBusMessage, ServiceBusSubQueue
from sbdelta._entity import EntityResolver
from sbdelta._names import EntityRef
from sbdelta._namespace import Namespace
from sbdelta._store import PID_SHIFT, forward as forward_module, rs
from sbdelta.exceptions import ServiceBusInvalidOperationError
from sbdelta.maintenance import forward_messages

from jobs.forward_messages import main as forward_job

from ..conftest import START, receive_all

_names = itertools.count()


@pytest.fixture(scope="module")
def ns(spark, tmp_path_factory):
    return str(tmp_path_factory.mktemp("forwarding") / "ns")


def name(prefix):
    return f"{prefix}{next(_names)}"


def received(client, queue_name, expected):
    receiver = client.get_queue_receiver(queue_name, max_wait_time=0)
    got = receive_all(receiver, expected, batch=20, tries=10) if expected else []
    receiver.complete_messages(got)  # one commit
    assert receiver.receive_messages(20) == []
    return got


def test_fwd_2_part_8_a_forwarded_message_keeps_its_fields_and_gets_a_new_number(
        client, admin, clock):
    dest, src = name("dest"), name("src")
    admin.create_queue(dest, enable_partitioning=True)
    admin.create_queue(src, forward_to=dest)
    sender = client.get_queue_sender(src)
    sender.send_messages([
        ServiceBusMessage("keyed", message_id="m-1", partition_key="orders-7", subject="s",
                          application_properties={"n": 1, "tag": "x"}, correlation_id="c"),
        ServiceBusMessage("plain", message_id="m-2")])
    [later] = sender.schedule_messages(ServiceBusMessage("later", message_id="m-3"),
                                       START + timedelta(hours=1))
    # Nothing stays in the source, and the source cannot be received from (FWD-2).
    assert client.get_queue_receiver(src).peek_messages(10) == []
    with pytest.raises(ServiceBusInvalidOperationError, match="FWD-2"):
        client.get_queue_receiver(src, max_wait_time=0).receive_messages(1)
    got = {m.message_id: m for m in received(client, dest, 2)}
    keyed = got["m-1"]
    assert (str(keyed), keyed.subject, keyed.correlation_id, keyed.partition_key) == \
        ("keyed", "s", "c", "orders-7")
    assert keyed.application_properties == {"n": 1, "tag": "x"}
    # PART-8: the partition key decides the destination's partition.
    assert keyed.sequence_number >> PID_SHIFT == zlib.crc32(b"orders-7") % 16
    assert str(got["m-2"]) == "plain"
    # The scheduled message waits for its time in the destination, under the number the
    # source's sender returned (the destination's); that sender cancels it there.
    [dropped] = sender.schedule_messages(ServiceBusMessage("dropped"), START + timedelta(hours=1))
    sender.cancel_scheduled_messages(dropped)
    [peeked] = client.get_queue_receiver(dest).peek_messages(5)
    assert (peeked.message_id, peeked.sequence_number) == ("m-3", later)
    assert peeked.scheduled_enqueue_time_utc == START + timedelta(hours=1)
    clock.advance(timedelta(hours=1, seconds=1))
    assert [m.message_id for m in received(client, dest, 1)] == ["m-3"]


def test_fwd_2_subscriptions_forward_to_queues_and_topics(client, admin):
    hub, edge, inbox = name("hub"), name("edge"), name("inbox")
    admin.create_queue(inbox)
    admin.create_topic(edge)
    admin.create_subscription(edge, "all")
    admin.create_topic(hub)
    admin.create_subscription(hub, "to-queue", forward_to=inbox)
    admin.create_subscription(hub, "to-topic", forward_to=edge)
    admin.create_subscription(hub, "kept")
    client.get_topic_sender(hub).send_messages(
        [ServiceBusMessage(f"m{i}", message_id=f"id{i}") for i in range(3)])
    assert sorted(m.message_id for m in received(client, inbox, 3)) == ["id0", "id1", "id2"]
    edge_receiver = client.get_subscription_receiver(edge, "all", max_wait_time=0)
    got = receive_all(edge_receiver, 3)
    assert sorted(str(m) for m in got) == ["m0", "m1", "m2"]
    kept = client.get_subscription_receiver(hub, "kept", max_wait_time=0)
    assert len(receive_all(kept, 3)) == 3
    with pytest.raises(ServiceBusInvalidOperationError, match="FWD-2"):
        client.get_subscription_receiver(hub, "to-queue", max_wait_time=0).receive_messages(1)
    counts = admin.get_subscription_runtime_properties(hub, "to-queue")
    assert counts.active_message_count == 0


def test_fwd_3_a_fifth_hop_is_dead_lettered(client, admin):
    chain = [name("hop") for _ in range(6)]
    admin.create_queue(chain[-1])
    for here, there in zip(reversed(chain[:-1]), reversed(chain[1:])):
        admin.create_queue(here, forward_to=there)
    client.get_queue_sender(chain[0]).send_messages(ServiceBusMessage("far", message_id="f"))
    # Four hops bring it to chain[4]; its fifth hop, to chain[5], is refused there.
    assert received(client, chain[5], 0) == []
    dlq = client.get_queue_receiver(chain[4], sub_queue=ServiceBusSubQueue.DEAD_LETTER,
                                    max_wait_time=0)
    [dead] = receive_all(dlq, 1)
    assert (dead.message_id, dead.dead_letter_reason) == ("f", "MaxTransferHopCountExceeded")
    dlq.complete_message(dead)
    for queue in chain[:5]:
        assert client.get_queue_receiver(queue).peek_messages(5) == []


def test_fwd_2_maintenance_moves_what_a_source_held_before_it_forwarded(
        client, admin, clock, ns, spark, capsys):
    src, dest, dead_dest = name("src"), name("dest"), name("dlqdest")
    admin.create_queue(dest)
    admin.create_queue(dead_dest)
    admin.create_queue(src, lock_duration=timedelta(seconds=30),
                       dead_lettering_on_message_expiration=True)
    client.get_queue_sender(src).send_messages(
        [ServiceBusMessage(f"m{i}", message_id=f"id{i}") for i in range(6)])
    receiver = client.get_queue_receiver(src, max_wait_time=0)
    taken = receive_all(receiver, 4, batch=4)[:4]
    # One more, never received, that expires before forwarding starts: the forwarder
    # dead-letters it as a receive or the sweep would (TTL-6), it is not forwarded.
    client.get_queue_sender(src).send_messages(
        ServiceBusMessage("short", message_id="short", time_to_live=timedelta(seconds=10)))
    clock.advance(timedelta(seconds=11))
    receiver.abandon_message(taken[3])              # registered, free again
    receiver.defer_message(taken[1])                # deferred
    receiver.dead_letter_message(taken[2], reason="bad")  # a dead letter
    # Two never received (unregistered inbox rows).
    admin.update_queue(admin.get_queue(src), forward_to=dest,
                       forward_dead_lettered_messages_to=dead_dest)
    # The update ended taken[0]'s lock (SETTLE-7), and the queue now refuses receivers
    # (FWD-2). A receive that resolved the queue before the update and committed its lock
    # after it takes taken[0] again (the lowest sequence number of the free ones: its lock
    # did end) and holds it while the job runs: the store's lock grant, as that receive
    # makes it.
    source = _resolver(ns, spark, clock, None).queue(src)
    (held,), _ = source.store.acquire(1, policy=source.policy, now=clock.now(), delete=False,
                                      as_rows=True)
    assert (held.message_id, held.delivery_count) == (taken[0].message_id, 2)
    report = forward_messages(ns, spark=spark, clock=clock, entities=[src])
    [moved] = report.entities
    assert (moved.forwarded, moved.dead_letters_forwarded) == (4, 2)
    assert "dead letters 2" in str(report)
    # The locked message waits for its lock (30 s from the second receive) to end, then
    # moves too.
    clock.advance(timedelta(seconds=31))
    report = forward_messages(ns, spark=spark, clock=clock, entities=[src])
    assert [(e.forwarded, e.dead_letters_forwarded) for e in report.entities] == [(1, 0)]
    assert forward_messages(ns, spark=spark, clock=clock, entities=[src]).totals() == \
        {"forwarded": 0, "dead_letters_forwarded": 0}
    # The job's entry point, as a dry run: it names the source and its destination.
    assert forward_job(["--namespace", ns, "--entity", src, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"{src}" in out and f"0 -> {dest}" in out and "(dry run)" in out
    got = sorted(m.message_id for m in received(client, dest, 5))
    assert got == sorted({"id0", "id1", "id2", "id3", "id4", "id5"} - {taken[2].message_id})
    assert held.message_id in got
    dead = {m.message_id: m for m in received(client, dead_dest, 2)}
    assert sorted(dead) == sorted([taken[2].message_id, "short"])
    assert client.get_queue_receiver(src).peek_messages(10) == []
    dlq = client.get_queue_receiver(src, sub_queue=ServiceBusSubQueue.DEAD_LETTER, max_wait_time=0)
    assert dlq.peek_messages(10) == []


class Crash(Exception):
    pass


def _lose_appends(monkeypatch, after: bool = False):
    """Make every forwarding append (Spark's and delta-rs's) crash before it lands, or after
    (``after``), until ``monkeypatch.undo``; returns the engines whose appends crashed."""
    crashed = []
    for engine, module in (("spark", forward_module), ("delta-rs", rs)):
        def lose(*args, _real=module.append_once, _engine=engine):
            crashed.append(_engine)
            if after:
                _real(*args)
            raise Crash(f"killed {'after' if after else 'before'} the append")
        monkeypatch.setattr(module, "append_once", lose)
    return crashed


def _resolver(ns, spark, clock, engine):
    return EntityResolver(Namespace(ns, spark=spark, clock=clock, engine=engine))


def test_fwd_2_a_crash_between_the_movers_commits_repeats_and_loses_nothing(
        client, admin, clock, monkeypatch, ns, spark):
    """Crash points: new rows after the source's commit and before the destination's append;
    registered rows after the mark (append lost) and after the append (delete lost)."""
    src, dest = name("src"), name("dest")
    admin.create_queue(dest, enable_partitioning=True)
    admin.create_queue(src, enable_partitioning=True)
    client.get_queue_sender(src).send_messages(
        [ServiceBusMessage(f"old{i}", message_id=f"old{i}") for i in range(3)])
    receiver = client.get_queue_receiver(src, max_wait_time=0)
    old = receive_all(receiver, 3)
    for m in old:
        receiver.abandon_message(m)  # registered rows
    client.get_queue_sender(src).send_messages(
        [ServiceBusMessage(f"new{i}", message_id=f"new{i}", partition_key=f"k{i}")
         for i in range(5)])
    admin.update_queue(admin.get_queue(src), forward_to=dest)
    resolver = EntityResolver(Namespace(ns, spark=spark, clock=clock))
    source = resolver.queue(src)
    target = forward_module.Destination(resolver.queue(dest).store, None, False)
    policy = source.policy
    _lose_appends(monkeypatch)
    with pytest.raises(Crash):
        source.store.forward_new(target, policy, clock.now())
    with pytest.raises(Crash):
        source.store.forward_registered(target, policy, clock.now())
    monkeypatch.undo()
    assert source.store.forward_new(target, policy, clock.now()) == 5  # the marked range, once
    assert source.store.forward_new(target, policy, clock.now()) == 0
    # The marked batch's append never landed: it waits for its mark to run out...
    assert source.store.forward_registered(target, policy, clock.now()) == 0

    def marks():
        return sorted(r.locked_until for r in source.store.messages()
                      .where("state = 'FORWARDING'").select("locked_until").collect())

    held = marks()
    assert len(held) == 3
    # ...which an update of the source does not end: it ends receivers' locks (SETTLE-7),
    # and a mover's mark is none (ended, the batch could go back while its append lands).
    admin.update_queue(admin.get_queue(src), max_delivery_count=9)
    assert marks() == held
    clock.advance(timedelta(hours=1, seconds=1))
    _lose_appends(monkeypatch, after=True)
    with pytest.raises(Crash):  # ...then comes back and moves; this time the delete is lost
        source.store.forward_registered(target, policy, clock.now())
    monkeypatch.undo()
    # Finished (the batch deleted), not repeated.
    assert source.store.forward_registered(target, policy, clock.now()) == 0
    got = sorted(m.message_id for m in received(client, dest, 8))
    assert got == sorted([f"old{i}" for i in range(3)] + [f"new{i}" for i in range(5)])
    assert client.get_queue_receiver(src).peek_messages(10) == []


@pytest.mark.parametrize("crashed, recovers", [("delta-rs", "spark"), ("spark", "delta-rs")])
def test_fwd_2_a_range_one_engine_marked_is_appended_once_by_the_other(
        admin, client, clock, monkeypatch, ns, spark, crashed, recovers):
    """A mover that marked a range of new rows and died before its append (``crashed``
    engine) leaves it to the next mover (``recovers``), which appends it once: Spark's
    ``txnAppId``/``txnVersion`` and delta-rs's app transactions record the same versions
    (issue 16)."""
    src, dest = name("src"), name("dest")
    admin.create_queue(dest, enable_partitioning=True)
    admin.create_queue(src)
    client.get_queue_sender(src).send_messages(
        [ServiceBusMessage(f"m{i}", message_id=f"m{i}") for i in range(4)])
    admin.update_queue(admin.get_queue(src), forward_to=dest)
    movers = {}
    for engine in (crashed, recovers):
        resolver = _resolver(ns, spark, clock, engine)
        source = resolver.queue(src)
        movers[engine] = (source.store, source.policy, forward_module.Destination(
            resolver.queue(dest).store, None, False))
    lost = _lose_appends(monkeypatch)
    store, policy, target = movers[crashed]
    with pytest.raises(Crash):
        store.forward_new(target, policy, clock.now())
    assert lost == [crashed]
    monkeypatch.undo()
    store, policy, target = movers[recovers]
    assert store.forward_new(target, policy, clock.now()) == 4
    assert movers[crashed][0].forward_new(movers[crashed][2], policy, clock.now()) == 0
    assert sorted(m.message_id for m in received(client, dest, 4)) == [f"m{i}" for i in range(4)]


@pytest.mark.parametrize("engine", ["delta-rs", "spark"])
def test_fwd_2_a_mover_naming_the_namespace_by_another_uri_does_not_forward_a_range_again(
        admin, client, clock, ns, spark, tmp_path, engine):
    """A mover's idempotent-write id names the source by its place in the namespace, not by
    the URI a process gave the namespace: a mover reaching the same folder another way (here a
    symbolic link; on Databricks a mount beside its abfss:// URI, or a copied namespace) finds
    the range the sender forwarded, still marked, recorded, and appends nothing. Found when a
    forwarding job on a copy of the stress test's namespace forwarded 50 messages again."""
    hub, dest = name("hub"), name("dest")
    admin.create_queue(dest, enable_partitioning=True)
    admin.create_topic(hub, enable_partitioning=True)
    admin.create_subscription(hub, "relay", forward_to=dest)
    client.get_topic_sender(hub).send_messages(
        [ServiceBusMessage(f"m{i}", message_id=f"m{i}") for i in range(3)])  # forwarded
    alias = tmp_path / "alias"
    alias.symlink_to(ns, target_is_directory=True)
    resolver = _resolver(str(alias), spark, clock, engine)
    source = resolver.resolve(EntityRef.subscription(hub, "relay"))
    target = forward_module.Destination(resolver.queue(dest).store, None, False)
    assert source.store.folder.startswith(f"file:{alias}/")  # another URI, the same tables
    assert source.store.forward_new(target, source.policy, clock.now()) == 0
    job = forward_messages(str(alias), entities=[hub], clock=clock, spark=spark)
    assert job.totals()["forwarded"] == 0
    assert sorted(m.message_id for m in received(client, dest, 3)) == ["m0", "m1", "m2"]
