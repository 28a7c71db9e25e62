"""The syphon of paired namespaces on real Spark and Delta (issue 15): backlog messages moved to
their primary entities with their properties restored (PAIR-7), what cannot be delivered
dead-lettered in the backlog queue with a reason, storage faults in the middle of a move
finished by the next run without a duplicate, receivers kept off backlog queues, a paired
client's own syphon stopped by close (PAIR-8), and jobs/syphon.py. Faults are real: a
destination's folder moved away and back, an entity disabled or deleted. Time is a ManualClock.
"""

import os
import threading
import time
from datetime import timedelta

import pytest

from sbdelta import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from sbdelta._batch import to_message_list
from sbdelta._namespace import normalize_root
from sbdelta.amqp import AmqpAnnotatedMessage
from sbdelta.exceptions import ServiceBusCommunicationError, ServiceBusInvalidOperationError
from sbdelta.management import EntityStatus, ServiceBusAdministrationClient
from sbdelta.paired import (BACKLOG_QUEUE_PROPERTIES, PairedNamespaceOptions, backlog_queue_name,
                            primary_identity, to_backlog)
from sbdelta.paired.syphon import Syphon

MINUTE = timedelta(minutes=1)
#: A message with an AMQP VALUE body (issue 17).
VALUE_MESSAGE = to_message_list(AmqpAnnotatedMessage(value_body={"n": [1, b"x"]},
                                                     properties={"message_id": "v"}))[0]
#: A property value that looks like a reserved key inside (the restore cuts only real keys).
TRICKY = 'say ,"x-ms-path":"elsewhere", {"$t": 1}'


@pytest.fixture
def paired(spark, tmp_path, clock):
    """(primary root, secondary root, primary admin, backlog queue 0's name)."""
    primary, secondary = str(tmp_path / "primary"), str(tmp_path / "secondary")
    backlog = backlog_queue_name(primary_identity(normalize_root(primary)), 0)
    ServiceBusAdministrationClient(secondary, spark=spark, clock=clock).create_queue(
        backlog, **BACKLOG_QUEUE_PROPERTIES)
    return primary, secondary, ServiceBusAdministrationClient(primary, spark=spark, clock=clock), \
        backlog


def park(spark, clock, secondary, backlog, messages):
    """Send (message, destination) pairs to the backlog queue in their backlog form (PAIR-4),
    in one commit, as a failed-over paired sender does."""
    with ServiceBusClient(secondary, spark=spark, clock=clock) as away:
        away.get_queue_sender(backlog).send_messages(
            [m if d is None else to_backlog(m, d) for m, d in messages])


def dead_letters(spark, clock, secondary, backlog):
    with ServiceBusClient(secondary, spark=spark, clock=clock) as away:
        receiver = away.get_queue_receiver(backlog, sub_queue=ServiceBusSubQueue.DEAD_LETTER,
                                           max_wait_time=0)
        got = receiver.receive_messages(50)
        receiver.complete_messages(got)
    return sorted((str(m), m.dead_letter_reason, m.application_properties.get("x-ms-path"))
                  for m in got)


def test_pair_7_the_syphon_moves_backlog_messages_home_with_their_properties_restored(
        spark, paired, clock):
    primary, secondary, admin, backlog = paired
    admin.create_queue("orders")
    admin.create_queue("sessions", requires_session=True)
    admin.create_queue("expiring", dead_lettering_on_message_expiration=True)
    admin.create_queue("closed")
    admin.update_queue(admin.get_queue("closed"), status=EntityStatus.SEND_DISABLED)
    admin.create_topic("events")
    admin.create_subscription("events", "all")
    sent_at, later = clock.now(), clock.now() + timedelta(hours=1)
    park(spark, clock, secondary, backlog, [
        (ServiceBusMessage("a", message_id="a", time_to_live=timedelta(minutes=10),
                           content_type="text/plain", correlation_id="c1", subject="s",
                           application_properties={"k": 1, "when": sent_at, "z": TRICKY}),
         "orders"),
        (ServiceBusMessage("b", session_id="s1"), "sessions"),
        (ServiceBusMessage("c"), "sessions"),  # a session queue's message without session id
        (ServiceBusMessage("d", scheduled_enqueue_time_utc=later,  # x-ms-path is its first key
                           application_properties={"zz": "tail"}), "orders"),
        (ServiceBusMessage("e", time_to_live=MINUTE), "expiring"),
        (ServiceBusMessage("f"), "missing"),
        (ServiceBusMessage("g", subject="evt"), "events"),
        (ServiceBusMessage("stray", application_properties={"k": 2}), None),  # no x-ms-path
        (VALUE_MESSAGE, "orders"),  # an AMQP value body keeps its form (issue 17)
        (ServiceBusMessage("bad-ttl", application_properties={  # not from a paired sender
            "x-ms-path": "orders", "x-ms-timetolive": "1h"}), None),
    ])
    # A disabled destination is an outage: its message waits, and "i" behind it too.
    park(spark, clock, secondary, backlog, [(ServiceBusMessage("h"), "closed"),
                                            (ServiceBusMessage("i"), "orders")])
    clock.advance(2 * MINUTE)  # e's minute ran out while it waited in the backlog

    syphon = Syphon(primary, secondary, spark=spark, clock=clock)
    assert syphon.backlog_queues() == [backlog]
    report = syphon.drain()
    assert report.moved == {"orders": 3, "sessions": 1, "expiring": 1, "events": 1}
    assert report.dead_lettered == {"Session ID is null": 1, "MessagingEntityNotFound": 1,
                                    "InvalidBacklogMessage": 2}
    assert list(report.waiting) == ["closed"] and "SendDisabled" in report.waiting["closed"]
    assert syphon.drain().waiting.keys() == {"closed"}  # still waiting, nothing moved twice
    admin.update_queue(admin.get_queue("closed"), status=EntityStatus.ACTIVE)
    report = syphon.drain()
    assert (report.moved, report.dead_lettered, report.waiting) == (
        {"closed": 1, "orders": 1}, {}, {})

    with ServiceBusClient(primary, spark=spark, clock=clock) as home:
        orders = home.get_queue_receiver("orders", max_wait_time=0)
        a, v, i = orders.receive_messages(10)
        assert str(i) == "i"
        assert (v.body_type.value, v.body, v.message_id) == ("value", {"n": [1, b"x"]}, "v")
        orders.complete_messages([i, v])
        assert (str(a), a.message_id, a.application_properties, a.time_to_live, a.content_type,
                a.correlation_id, a.subject, a.session_id, a.expires_at_utc) == \
            ("a", "a", {"k": 1, "when": sent_at, "z": TRICKY}, timedelta(minutes=10),
             "text/plain", "c1", "s", None, sent_at + timedelta(minutes=10))
        orders.complete_messages([a])
        clock.advance(timedelta(hours=1))  # d keeps its schedule
        (d,) = orders.receive_messages(10)
        assert (str(d), d.scheduled_enqueue_time_utc, d.application_properties) == \
            ("d", later, {"zz": "tail"})
        orders.complete_messages([d])
        with home.get_queue_receiver("sessions", session_id="s1", max_wait_time=0) as session:
            (b,) = session.receive_messages(10)
            assert (str(b), b.session_id) == ("b", "s1")
            session.complete_messages([b])
        # e's time to live counts from its first send: it expired (TTL-5, dead-lettering on)
        assert home.get_queue_receiver("expiring", max_wait_time=0).receive_messages(10) == []
        (e,) = home.get_queue_receiver(
            "expiring", sub_queue=ServiceBusSubQueue.DEAD_LETTER,
            max_wait_time=0).receive_messages(10)
        assert (str(e), e.dead_letter_reason) == ("e", "TTLExpiredException")
        (g,) = home.get_subscription_receiver("events", "all", max_wait_time=0).receive_messages(10)
        assert (str(g), g.subject) == ("g", "evt")
        closed = home.get_queue_receiver("closed", max_wait_time=0)
        assert [str(m) for m in closed.receive_messages(10)] == ["h"]

    # Dead letters keep the backlog form: x-ms-path says where they were going.
    assert dead_letters(spark, clock, secondary, backlog) == [
        ("bad-ttl", "InvalidBacklogMessage", "orders"),
        ("c", "Session ID is null", "sessions"), ("f", "MessagingEntityNotFound", "missing"),
        ("stray", "InvalidBacklogMessage", None)]
    again = syphon.drain()
    assert (again.moved, again.dead_lettered) == ({}, {})
    with ServiceBusClient(secondary, spark=spark, clock=clock) as away:
        receiver = away.get_queue_receiver(backlog, max_wait_time=0)
        assert receiver.peek_messages(10, sequence_number=0) == []
        with pytest.raises(ServiceBusInvalidOperationError, match="backlog queue"):
            receiver.receive_messages(1)


def _move_away(root, queue):
    folder = os.path.join(root, "queues", queue)
    os.rename(folder, folder + ".away")
    return lambda: os.rename(folder + ".away", folder)


def test_pair_7_a_syphon_claims_its_ranges_through_delta_rs_on_a_local_namespace(
        spark, paired, clock):
    """The commits on the backlog queue's messages table that claim a range (frontiers moved
    and marked) are delta-rs writes on a local namespace, no Spark MERGE, when they register
    no dead letters; the messages still arrive once."""
    import glob

    from deltalake import DeltaTable

    primary, secondary, admin, backlog = paired
    admin.create_queue("q1")
    park(spark, clock, secondary, backlog, [(ServiceBusMessage(f"m{i}"), "q1") for i in range(3)])
    (folder,) = glob.glob(os.path.join(secondary, "queues", "*", "*", "messages"))
    before = DeltaTable(folder).version()
    syphon = Syphon(primary, secondary, spark=spark, clock=clock, engine="auto")
    assert syphon.drain().moved == {"q1": 3}
    commits = [c for c in DeltaTable(folder).history() if c["version"] > before]
    assert commits, "the drain claimed nothing on the backlog queue"
    assert {c.get("engineInfo", "").split(":")[0] for c in commits} == {"delta-rs"}
    with ServiceBusClient(primary, spark=spark, clock=clock) as home:
        got = home.get_queue_receiver("q1", max_wait_time=0).receive_messages(10)
    assert sorted(str(m) for m in got) == ["m0", "m1", "m2"]


@pytest.mark.parametrize("engine", ["auto", "spark"])
def test_pair_7_a_move_stopped_by_a_storage_fault_is_finished_by_the_next_run_exactly_once(
        spark, paired, clock, engine):
    """Both delivery forms: staged files committed by delta-rs (``auto`` on a local
    namespace) and Spark appends (``spark``, as on cloud storage)."""
    primary, secondary, admin, backlog = paired
    queues = ("q1", "q2", "q3")
    for name in queues:
        admin.create_queue(name)
    syphon = Syphon(primary, secondary, spark=spark, clock=clock, engine=engine)
    # A first move opens the destinations' tables (a client creates missing tables when it
    # first opens an entity; the fault below strikes tables it holds open).
    park(spark, clock, secondary, backlog, [(ServiceBusMessage(f"{q}-w"), q) for q in queues])
    assert syphon.drain().moved == {q: 1 for q in queues}
    park(spark, clock, secondary, backlog,
         [(ServiceBusMessage(f"{q}-{i}", message_id=f"{q}-{i}"), q)
          for i in range(3) for q in queues])
    back = _move_away(primary, "q2")  # q2's storage is gone: the move stops after q1
    with pytest.raises(ServiceBusCommunicationError, match="Nothing is lost"):
        syphon.drain()
    with ServiceBusClient(primary, spark=spark, clock=clock) as home:  # q1 had its share
        assert len(home.get_queue_receiver("q1").peek_messages(10, sequence_number=0)) == 4
    back()
    admin.delete_queue("q3")  # deleted before its messages arrived: they are dead-lettered
    report = syphon.drain()  # q1 has the range: only q2 gets it now; q3's are dead letters
    assert report.moved == {"q2": 3}
    assert report.dead_lettered == {"MessagingEntityNotFound": 3}
    with ServiceBusClient(primary, spark=spark, clock=clock) as home:
        for q in ("q1", "q2"):
            got = home.get_queue_receiver(q, max_wait_time=0).receive_messages(10)
            assert sorted(str(m) for m in got) == [f"{q}-{i}" for i in range(3)] + [f"{q}-w"]
    assert dead_letters(spark, clock, secondary, backlog) == [
        (f"q3-{i}", "MessagingEntityNotFound", "q3") for i in range(3)]


def test_pair_7_a_syphon_naming_the_secondary_by_another_uri_finishes_a_move_once(
        spark, paired, clock, tmp_path):
    """A move stopped after its first destination's append is finished by a syphon that
    reaches the secondary another way (a symbolic link here; a mount beside an abfss:// URI
    on Databricks): the backlog queue's syphon id names it by its folder below the
    secondary's root, so the second syphon finds what the first appended and appends only
    the rest (the forwarding side: test_forwarding's test of the same name)."""
    primary, secondary, admin, backlog = paired
    for name in ("q1", "q2"):
        admin.create_queue(name)
    syphon = Syphon(primary, secondary, spark=spark, clock=clock)
    park(spark, clock, secondary, backlog, [(ServiceBusMessage(f"{q}-w"), q) for q in ("q1", "q2")])
    assert syphon.drain().moved == {"q1": 1, "q2": 1}  # the destinations' tables open
    park(spark, clock, secondary, backlog,
         [(ServiceBusMessage(f"{q}-{i}", message_id=f"{q}-{i}"), q)
          for i in range(3) for q in ("q1", "q2")])
    back = _move_away(primary, "q2")  # the move stops after q1's append
    with pytest.raises(ServiceBusCommunicationError, match="Nothing is lost"):
        syphon.drain()
    back()
    alias = tmp_path / "secondary-alias"
    alias.symlink_to(secondary, target_is_directory=True)
    assert Syphon(primary, str(alias), spark=spark, clock=clock).drain().moved == {"q2": 3}
    with ServiceBusClient(primary, spark=spark, clock=clock) as home:
        for q in ("q1", "q2"):
            got = home.get_queue_receiver(q, max_wait_time=0).receive_messages(10)
            assert sorted(str(m) for m in got) == [f"{q}-{i}" for i in range(3)] + [f"{q}-w"]


def test_pair_8_a_paired_clients_own_syphon_moves_messages_and_stops_when_it_closes(
        spark, paired, clock):
    primary, secondary, admin, backlog = paired
    admin.create_queue("orders")
    options = PairedNamespaceOptions(secondary, backlog_queue_count=1, enable_syphon=True)
    with ServiceBusClient(primary, spark=spark, clock=clock, paired_namespace=options) as client:
        assert any(t.name.startswith("sbdelta-syphon-") for t in threading.enumerate())
        park(spark, clock, secondary, backlog, [(ServiceBusMessage("x"), "orders")])
        receiver = client.get_queue_receiver("orders", max_wait_time=0)
        got, deadline = [], time.monotonic() + 300
        while not got and time.monotonic() < deadline:
            got = receiver.peek_messages(1, sequence_number=0)
        assert [str(m) for m in got] == ["x"]
        started = time.monotonic()
    assert time.monotonic() - started < 10  # close returned (the join is bounded by 5 s)
    assert not any(t.name.startswith("sbdelta-syphon-") and t.is_alive()
                   for t in threading.enumerate())


def test_pair_8_a_paired_client_s_own_syphon_told_to_dead_letters_a_disabled_destination_s(
        spark, paired, clock):
    """``PairedNamespaceOptions(syphon_disabled="dead_letter")`` reaches the client's own
    syphon: the message for a disabled queue is dead-lettered and the one behind it arrives
    (the default would hold both, the first test)."""
    primary, secondary, admin, backlog = paired
    admin.create_queue("closed")
    admin.create_queue("orders")
    admin.update_queue(admin.get_queue("closed"), status=EntityStatus.SEND_DISABLED)
    park(spark, clock, secondary, backlog, [(ServiceBusMessage("h"), "closed"),
                                            (ServiceBusMessage("i"), "orders")])
    options = PairedNamespaceOptions(secondary, backlog_queue_count=1, enable_syphon=True,
                                     syphon_disabled="dead_letter")
    with ServiceBusClient(primary, spark=spark, clock=clock, paired_namespace=options) as client:
        receiver = client.get_queue_receiver("orders", max_wait_time=0)
        got, deadline = [], time.monotonic() + 300
        while not got and time.monotonic() < deadline:
            got = receiver.peek_messages(1, sequence_number=0)
        assert [str(m) for m in got] == ["i"]
    assert dead_letters(spark, clock, secondary, backlog) == [
        ("h", "MessagingEntityDisabled", "closed")]


def test_jobs_syphon_drains_lists_and_names_what_is_missing(spark, paired, clock, capsys):
    from click.testing import CliRunner

    from jobs import syphon as job
    from sbdelta.cli import main as cli

    primary, secondary, admin, backlog = paired
    admin.create_queue("orders")
    park(spark, clock, secondary, backlog, [(ServiceBusMessage("x"), "orders")])
    assert job.main(["--namespace", primary, "--secondary", secondary, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "(dry run): 1 backlog queue(s), 0 message(s) moved" in out and backlog in out
    assert job.main(["--namespace", primary]) == 1
    assert "--secondary" in capsys.readouterr().err
    assert job.main(["--namespace", primary, "--secondary", secondary, "--follow",
                     "--poll-seconds", "0"]) == 1
    assert "poll_seconds must be a number > 0, got 0.0" in capsys.readouterr().err
    assert job.main(["--namespace", primary, "--secondary", secondary,
                     "--entity", "nope/x-servicebus-transfer/7"]) == 1
    assert "not backlog queues" in capsys.readouterr().err
    listed = CliRunner().invoke(cli, ["syphon", "-n", primary, "-s", secondary, "--dry-run"])
    assert listed.exit_code == 0 and backlog in listed.output, listed.output
    assert job.main(["--namespace", primary, "--secondary", secondary]) == 0
    assert "1 message(s) moved" in capsys.readouterr().out
    with ServiceBusClient(primary, spark=spark, clock=clock) as home:
        orders = home.get_queue_receiver("orders", max_wait_time=0)
        assert [str(m) for m in orders.receive_messages(5)] == ["x"]


def test_a_syphon_refuses_its_primary_as_secondary_and_queue_lists_that_hold_no_names(
        spark, paired, clock):
    """Bad input is refused before anything is read or moved (issue 18's catalogue)."""
    from sbdelta.exceptions import ConfigurationError, InvalidEntityNameError

    primary, secondary, admin, backlog = paired
    with pytest.raises(ConfigurationError, match="is the primary itself"):
        Syphon(primary, primary + "/", spark=spark, clock=clock)
    syphon = Syphon(primary, secondary, spark=spark, clock=clock)
    with pytest.raises(InvalidEntityNameError, match="queues must be a name .*7 \\(int\\)"):
        syphon.drain(queues=[backlog, 7])
    assert syphon.drain(queues=backlog).backlog_queues == [backlog]  # one name as a str


def test_pair_7_restored_session_ids_and_paths_keep_escapes_and_any_script(spark):
    """The restore reads a reserved string property without Spark's JSON parser when it holds
    no escape; one with escapes (a quote, a backslash, a control character) goes through it.
    Both give the string the sender set; a number where a string belongs is refused."""
    from chispa import assert_df_equality
    from pyspark.sql import functions as F

    from sbdelta._app_properties import encode_properties
    from sbdelta._store.layout import INBOX_COLUMNS
    from sbdelta.paired.backlog import PATH, SESSION_ID, restored_rows

    cases = [("orders", 's"1\\x'), ("orders", "é-ß ✓"), ("a/b", "plain"), ("orders", "tab\there"),
             ("orders", 5), ("", "s")]
    data = [(encode_properties({PATH: path, SESSION_ID: session, "k": 'v"\\'}),)
            for path, session in cases]
    rows = spark.createDataFrame(data, "application_properties STRING").select(*[
        F.col(name) if name == "application_properties"
        else F.current_timestamp().alias(name) if name == "enqueued_time"
        else F.lit(None).cast(kind).alias(name) for name, kind in INBOX_COLUMNS])
    got = restored_rows(rows).select("_path", "session_id", "_invalid", "application_properties")
    invalid_session, invalid_path = "x-ms-sessionid is not a string", "x-ms-path is not an entity path"
    want = spark.createDataFrame([
        ("orders", 's"1\\x', None), ("orders", "é-ß ✓", None), ("a/b", "plain", None),
        ("orders", "tab\there", None), ("orders", None, invalid_session),
        ("", "s", invalid_path)], "_path STRING, session_id STRING, _invalid STRING").withColumn(
        "application_properties", F.lit(encode_properties({"k": 'v"\\'})))
    assert_df_equality(got, want, ignore_nullable=True, ignore_row_order=True)


def test_pair_7_the_usual_backlog_form_and_every_other_restore_alike(spark):
    """The usual backlog form (``x-ms-path`` the one reserved key, once, at the top level, a
    string without escapes) is restored by plain string functions, every other form by
    regular expressions: both give what the sender set, the entry cut out with its comma, in
    any script; text that is not such a form is refused as it always was."""
    from chispa import assert_df_equality
    from pyspark.sql import functions as F

    from sbdelta._store.layout import INBOX_COLUMNS
    from sbdelta.paired.backlog import restored_rows

    no_path = "the message has no x-ms-path property naming its destination (a paired sender sets it)"
    not_path = "x-ms-path is not an entity path"
    cases = [  # (stored properties, path, properties left, why invalid)
        ('{"x-ms-path":"q"}', "q", None, None),
        ('{"x-ms-path":"q","k":1}', "q", '{"k":1}', None),
        ('{"k":1,"x-ms-path":"q"}', "q", '{"k":1}', None),
        ('{"k":1,"x-ms-path":"q/r","z":"t"}', "q/r", '{"k":1,"z":"t"}', None),
        ('{"k":"a\\"b","x-ms-path":"q"}', "q", '{"k":"a\\"b"}', None),  # an escape before it
        ('{"é":"ü✓","x-ms-path":"ö/ß","z":1}', "ö/ß", '{"é":"ü✓","z":1}', None),
        ('{"x-ms-path":"a\\"b","k":1}', 'a"b', '{"k":1}', None),  # escaped: the general way
        ('{"x-ms-path":"q","x-ms-timetolive":5}', "q", None, None),  # another reserved key
        ('{"x-ms-path":"q","x-ms-path":"r"}', "q", None, None),  # twice: the first, both cut
        ('{"x-ms-path":""}', "", None, not_path),
        ('{"x-ms-path":7}', None, None, not_path),
        ('X"x-ms-path":"q"}', None, 'X"x-ms-path":"q"}', no_path),  # not at the top level
        ('{"x-ms-path":"q', None, '{"x-ms-path":"q', no_path),  # the value never ends
    ]
    rows = spark.createDataFrame([(c[0],) for c in cases], "application_properties STRING").select(*[
        F.col(name) if name == "application_properties"
        else F.current_timestamp().alias(name) if name == "enqueued_time"
        else F.lit(None).cast(kind).alias(name) for name, kind in INBOX_COLUMNS])
    got = restored_rows(rows).select("_path", "application_properties", "_invalid")
    want = spark.createDataFrame([c[1:] for c in cases],
                                 "_path STRING, application_properties STRING, _invalid STRING")
    assert_df_equality(got, want, ignore_nullable=True, ignore_row_order=True)


def test_pair_7_part_2_ttl_3_both_delivery_forms_give_each_destination_its_partitions_and_caps(
        spark, tmp_path, clock):
    """One range for three destinations that place and cap messages differently (a
    partitioned queue that detects duplicates, a queue whose default time to live caps a
    message's own, a plain queue) delivered by the staged form (``auto``: one pass over every
    destination's rows) and by Spark appends (``spark``): each message ends in the partition
    its key chooses (PART-2) with the same sequence-number layout, and is capped the same
    way (TTL-3)."""
    from sbdelta._store.layout import partition_of

    got = {}
    for engine in ("auto", "spark"):
        primary, secondary = str(tmp_path / engine / "p"), str(tmp_path / engine / "s")
        backlog = backlog_queue_name(primary_identity(normalize_root(primary)), 0)
        ServiceBusAdministrationClient(secondary, spark=spark, clock=clock).create_queue(
            backlog, **BACKLOG_QUEUE_PROPERTIES)
        admin = ServiceBusAdministrationClient(primary, spark=spark, clock=clock)
        admin.create_queue("parts", enable_partitioning=True,
                           requires_duplicate_detection=True)
        admin.create_queue("capped", default_message_time_to_live=timedelta(minutes=5))
        admin.create_queue("plain")
        park(spark, clock, secondary, backlog, [
            (ServiceBusMessage(f"{q}{i}", message_id=f"id{i}",
                               partition_key=None if i % 3 else f"k{i % 2}",
                               time_to_live=timedelta(minutes=10) if i % 2 else None), q)
            for i in range(12) for q in ("parts", "capped", "plain")])
        report = Syphon(primary, secondary, spark=spark, clock=clock, engine=engine).drain()
        assert report.moved == {"parts": 12, "capped": 12, "plain": 12}
        seen = []
        with ServiceBusClient(primary, spark=spark, clock=clock) as home:
            for q in ("parts", "capped", "plain"):
                for m in home.get_queue_receiver(q, max_wait_time=0).receive_messages(50):
                    seen.append((q, str(m), partition_of(m.sequence_number) if q == "parts"
                                 else 0, m.time_to_live, m.expires_at_utc))
        got[engine] = sorted(seen)
    assert got["auto"] == got["spark"]
    ttls = {q: {ttl for r, _, _, ttl, _ in got["auto"] if r == q} for q in ("capped", "plain")}
    # ten minutes cut to the cap (TTL-3), none given: the default (TTL-7); the plain queue's
    # default is far longer
    assert ttls["capped"] == {timedelta(minutes=5)}
    assert timedelta(minutes=10) in ttls["plain"]
    assert len({p for q, _, p, _, _ in got["auto"] if q == "parts"}) > 1


def test_pair_7_a_syphon_told_to_dead_letters_messages_for_a_disabled_destination(
        spark, paired, clock, tmp_path, capsys):
    """``Syphon(disabled="dead_letter")`` (the job's ``--dead-letter-disabled``): a disabled
    destination's messages go to the backlog queue's dead-letter queue (reason
    ``MessagingEntityDisabled``) and what is behind them moves on, where the default waits
    (the first test); a value it does not know is refused before anything is read."""
    from jobs import syphon as job
    from sbdelta.exceptions import ConfigurationError

    primary, secondary, admin, backlog = paired
    with pytest.raises(ConfigurationError, match=r"\['wait', 'dead_letter'\]"):
        Syphon(primary, secondary, spark=spark, clock=clock, disabled="drop")
    conf = tmp_path / "maintenance.json"
    conf.write_text('{"syphon": {"disabled": "drop"}}')
    assert job.main(["--conf", str(conf), "--namespace", primary, "--secondary",
                     secondary]) == 1
    assert "disabled='drop'" in capsys.readouterr().err
    admin.create_queue("closed")
    admin.create_queue("orders")
    admin.update_queue(admin.get_queue("closed"), status=EntityStatus.SEND_DISABLED)
    park(spark, clock, secondary, backlog, [(ServiceBusMessage("h"), "closed"),
                                            (ServiceBusMessage("i"), "orders")])
    assert job.main(["--namespace", primary, "--secondary", secondary,
                     "--dead-letter-disabled"]) == 0
    out = capsys.readouterr().out
    assert "1 dead-lettered: MessagingEntityDisabled" in out and "waiting" not in out, out
    assert dead_letters(spark, clock, secondary, backlog) == [
        ("h", "MessagingEntityDisabled", "closed")]
    with ServiceBusClient(primary, spark=spark, clock=clock) as home:
        got = home.get_queue_receiver("orders", max_wait_time=0).receive_messages(10)
    assert [str(m) for m in got] == ["i"]


def test_pair_7_send_5_a_destination_s_size_limit_applies_to_the_message_as_restored(
        spark, paired, clock):
    """SEND-5 at the destination, on the message as restored (PAIR-7: the reserved
    properties cut out): one byte over the limit goes to the backlog queue's dead-letter queue
    (``MessageSizeExceeded``) while the rest of the range moves, and one that fits exactly
    moves although its backlog form is larger. (The syphon counts a range by the sizes of the
    backlog forms, which are never smaller; a range with a larger one is counted by the
    restored sizes: this test takes that way.)"""
    primary, secondary, admin, backlog = paired
    admin.create_queue("small", max_message_size_in_kilobytes=1)
    admin.create_queue("orders")

    def sized(message_id: str, size: int) -> ServiceBusMessage:
        base = ServiceBusMessage("x", message_id=message_id).size_in_bytes - 1
        message = ServiceBusMessage("x" * (size - base), message_id=message_id)
        assert message.size_in_bytes == size
        return message

    fits, over = sized("fits", 1024), sized("over", 1025)
    assert to_backlog(fits, "small").size_in_bytes > 1024
    large = sized("large", 4096)
    park(spark, clock, secondary, backlog, [(fits, "small"), (over, "small"), (large, "orders")])
    report = Syphon(primary, secondary, spark=spark, clock=clock).drain()
    assert (report.moved, report.dead_lettered) == ({"small": 1, "orders": 1},
                                                    {"MessageSizeExceeded": 1})
    with ServiceBusClient(secondary, spark=spark, clock=clock) as away:
        (dead,) = away.get_queue_receiver(backlog, sub_queue=ServiceBusSubQueue.DEAD_LETTER,
                                          max_wait_time=0).receive_messages(10)
    assert (dead.message_id, dead.dead_letter_reason,
            dead.application_properties["x-ms-path"]) == ("over", "MessageSizeExceeded", "small")
    assert "1024 bytes" in dead.dead_letter_error_description
    with ServiceBusClient(primary, spark=spark, clock=clock) as home:
        for queue, message_id in (("small", "fits"), ("orders", "large")):
            got = home.get_queue_receiver(queue, max_wait_time=0).receive_messages(10)
            assert [(m.message_id, len(str(m))) for m in got] == [
                (message_id, len(str(fits if queue == "small" else large)))]
