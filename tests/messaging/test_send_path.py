"""The send path on real Spark and Delta: one size rule for both send forms (SEND-5), rows checked
inside the write, a send racing the deletion of its queue (SEND-1), send_dataframe's Spark jobs.
"""

import json
import os
from datetime import timedelta

import pytest

from sbdelta import ServiceBusClient, ServiceBusMessage, ServiceBusReceiveMode
from sbdelta.exceptions import (MessageSizeExceededError, MessagingEntityNotFoundError,
                                ServiceBusInvalidOperationError)
from sbdelta.management import ServiceBusAdministrationClient

from ..conftest import receive_all, spark_jobs


@pytest.fixture(scope="module")
def ns(spark, tmp_path_factory):
    return str(tmp_path_factory.mktemp("send") / "ns")


def assert_nothing_stored(client, admin, name):
    assert admin.get_queue_runtime_properties(name).total_message_count == 0
    assert client.get_queue_receiver(name,
                                     max_wait_time=0).peek_messages(5, sequence_number=0) == []
    receiver = client.get_queue_receiver(
        name, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE, max_wait_time=0)
    assert receiver.receive_messages(5) == []


def body_frame(spark, body: bytes, properties=None):
    return spark.createDataFrame([(bytearray(body), properties)],
                                 "body BINARY, application_properties STRING")


# -- SEND-5 -----------------------------------------------------------------------------------
def test_send_5_a_body_of_the_limit_plus_a_property_is_refused_by_both_send_forms(
        spark, client, queue, admin):
    name = queue()  # max_message_size_in_kilobytes=256
    limit = 256 * 1024
    sender = client.get_queue_sender(name)
    with pytest.raises(MessageSizeExceededError, match=f"at most {limit} bytes"):
        sender.send_messages(ServiceBusMessage(b"x" * limit, application_properties={"k": "v"}))
    with pytest.raises(MessageSizeExceededError, match=f"at most {limit} bytes"):
        sender.send_dataframe(body_frame(spark, b"x" * limit, '{"k":"v"}'))
    assert_nothing_stored(client, admin, name)


def test_send_5_no_properties_and_empty_properties_count_alike_sent_stored_and_received(
        client, queue, admin):
    from sbdelta._size import HEADER_ALLOWANCE

    name = queue()
    sent = [ServiceBusMessage(b"abc"), ServiceBusMessage(b"abc", application_properties={})]
    client.get_queue_sender(name).send_messages(sent)
    one = HEADER_ALLOWANCE + 3
    assert [m.size_in_bytes for m in sent] == [one, one]
    # The entity's size counts what was stored: no properties text for either.
    assert admin.get_queue_runtime_properties(name).size_in_bytes == 2 * one
    got = receive_all(client.get_queue_receiver(name, max_wait_time=0), 2)
    assert [m.application_properties for m in got] == [{}, {}]
    assert [m.size_in_bytes for m in got] == [one, one]


def test_send_5_header_bytes_count_and_both_send_forms_share_one_boundary(
        spark, client, queue, admin):
    name = queue(max_message_size_in_kilobytes=1)
    limit = 1024
    sender = client.get_queue_sender(name)
    # The header counts: a body of exactly the limit is too large on its own.
    with pytest.raises(MessageSizeExceededError):
        sender.send_messages(ServiceBusMessage(b"x" * limit))
    with pytest.raises(MessageSizeExceededError):
        sender.send_dataframe(body_frame(spark, b"x" * limit))
    # The largest body that fits beside one property fits in both forms; one byte more does not.
    room = limit - ServiceBusMessage(b"", application_properties={"k": "v"}).size_in_bytes
    for extra in (1, 0):
        body = b"y" * (room + extra)
        if extra:
            with pytest.raises(MessageSizeExceededError):
                sender.send_messages(ServiceBusMessage(body, application_properties={"k": "v"}))
            with pytest.raises(MessageSizeExceededError):
                sender.send_dataframe(body_frame(spark, body, '{"k":"v"}'))
            assert_nothing_stored(client, admin, name)
        else:
            sender.send_messages(ServiceBusMessage(body, application_properties={"k": "v"}))
            assert sender.send_dataframe(body_frame(spark, body, '{"k":"v"}')) == 1
    counts = admin.get_queue_runtime_properties(name)
    # Python and Spark computed the same size, the limit exactly, for the same message.
    assert counts.active_message_count == 2 and counts.size_in_bytes == 2 * limit


# -- application properties are checked before anything commits -----------------------------
BAD_JSON = [  # (a row's application_properties, what the error says)
    ('{"a": {"b": 1}}', "not a scalar"),
    ('{"a": [1, 2]}', "not a scalar"),
    ('{"a": {"$b": "not base64!"}}', "not a scalar"),
    ('{"a": 1', "not valid JSON"),
    ('{1: "a"}', "not valid JSON"),
    ('42', "not a JSON object"),
    ('[{"a": 1}]', "not a JSON object"),
]
BAD_COLUMNS = [  # (SQL of an application_properties column, what the error says)
    ("map('a', map('x', 1))", "nested maps, structs and arrays are not allowed"),
    ("named_struct('a', array(1))", "nested maps, structs and arrays are not allowed"),
    ("map(1, 'x')", "map keys must be strings"),
]


def test_send_dataframe_refuses_properties_that_are_not_a_json_object_of_scalars(
        spark, client, queue, admin):
    name = queue()
    sender = client.get_queue_sender(name)
    for text, says in BAD_JSON:
        rows = spark.createDataFrame([("good", '{"n": 1}'), ("bad", text)],
                                     "body STRING, application_properties STRING")
        with pytest.raises(ServiceBusInvalidOperationError, match=says):
            sender.send_dataframe(rows)
    for sql, says in BAD_COLUMNS:
        with pytest.raises(ServiceBusInvalidOperationError, match=says):
            sender.send_dataframe(spark.sql(f"SELECT 'bad' AS body, {sql} AS application_properties"))
    assert_nothing_stored(client, admin, name)
    # A good send after the refused ones is received whole, even in ReceiveAndDelete mode.
    good = spark.createDataFrame(
        [("fine", '{"n": 1, "b": {"$b": "AAE="}, "none": null}')],
        "body STRING, application_properties STRING")
    assert sender.send_dataframe(good) == 1
    receiver = client.get_queue_receiver(
        name, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE, max_wait_time=0)
    (message,) = receiver.receive_messages(5)
    assert str(message) == "fine"
    assert message.application_properties == {"n": 1, "b": b"\x00\x01", "none": None}


# -- SEND-1: a send racing the deletion of its queue -----------------------------------------
def test_send_1_a_send_racing_its_queue_deletion_raises_not_found_and_recreates_nothing(
        spark, client, queue, ns, clock, monkeypatch):
    other_admin = ServiceBusAdministrationClient(ns, spark=spark, clock=clock)

    def folder_of(name):
        return client._entities.queue(name).store.folder[len("file:"):]

    # Deleted after the sender was made: its next lookup finds the queue gone.
    name = queue()
    sender, folder = client.get_queue_sender(name), folder_of(name)
    other_admin.delete_queue(name)
    with pytest.raises(MessagingEntityNotFoundError):
        sender.send_messages(ServiceBusMessage("lost?"))
    assert not os.path.exists(folder)
    # Deleted between the sender's lookup and its append: the entity it holds is stale.
    for send in (lambda s: s.send_messages(ServiceBusMessage("lost?")),
                 lambda s: s.send_dataframe(spark.createDataFrame([("lost?",)], "body STRING"))):
        name = queue()
        sender, folder = client.get_queue_sender(name), folder_of(name)
        lookup = sender._entity

        def lookup_then_deleted(name=name, lookup=lookup):
            entity = lookup()
            other_admin.delete_queue(name)
            return entity

        monkeypatch.setattr(sender, "_entity", lookup_then_deleted)
        with pytest.raises(MessagingEntityNotFoundError, match="deleted while the send"):
            send(sender)
        assert not os.path.exists(folder)  # no table, no folder came back


# -- Spark jobs -------------------------------------------------------------------------------
def delta_commit_work(call_site: str) -> bool:
    """Jobs Delta runs inside a commit (snapshot state for row tracking), for any writer."""
    return "recordDeltaOperation" in call_site


def test_send_dataframe_runs_no_job_beside_the_write_and_counts_from_the_log(
        spark, client, queue, tmp_path):
    name = queue(enable_partitioning=True)
    sender = client.get_queue_sender(name)
    rows = spark.range(1000).selectExpr("concat('m', id) AS message_id",
                                        "repeat('x', 100) AS body")
    sent, jobs = spark_jobs(spark, lambda: sender.send_dataframe(rows))
    raw = str(tmp_path / "raw")
    rows.limit(1).write.format("delta").save(raw)
    _, raw_jobs = spark_jobs(spark, lambda: rows.write.format("delta").mode("append").save(raw))
    own = [site for site in jobs if not delta_commit_work(site)]
    # The plain append's one job, plus the shuffle that numbers rows per partition: no
    # checkpoint, no validation or count job.
    assert sent == 1000 and len(own) <= len(raw_jobs) + 1, (jobs, raw_jobs)
    inbox = client._entities.queue(name).store
    version = inbox.latest_version(inbox.inbox_path)
    assert sender.send_dataframe(rows.limit(0)) == 0
    assert inbox.latest_version(inbox.inbox_path) == version  # an empty send commits nothing


def commit_info(store, version):
    path = store.inbox_path[len("file:"):] if store.inbox_path.startswith("file:") \
        else store.inbox_path
    with open(os.path.join(path, "_delta_log", f"{version:020d}.json")) as handle:
        return next(json.loads(line)["commitInfo"] for line in handle if '"commitInfo"' in line)


def test_send_3_send_messages_commits_through_delta_rs_with_no_spark_job_or_through_spark(
        spark, ns, client, queue, clock):
    """On a local namespace a list send is one delta-rs commit (issue 16's first piece): no
    Spark job, its sequence numbers from that commit's version (SEND-3) as Spark readers
    number them; a client with engine="spark" sends through Spark, and both kinds of commit
    are read alike. A delta-rs commit lost to a concurrent one is retried as a conflict."""
    from deltalake.exceptions import CommitFailedError

    from sbdelta._store.delta import is_conflict

    name = queue(enable_partitioning=True)
    sender, receiver = client.get_queue_sender(name), client.get_queue_receiver(name,
                                                                                max_wait_time=0)
    store = client._entities.queue(name).store
    later = clock.now() + timedelta(hours=1)
    seqs, jobs = spark_jobs(spark, lambda: sender.schedule_messages(
        [ServiceBusMessage(f"rs{i}", partition_key=f"k{i}") for i in range(3)], later))
    assert jobs == []
    rs_version = store.latest_version(store.inbox_path)
    assert commit_info(store, rs_version)["engineInfo"].startswith("delta-rs")
    with ServiceBusClient(ns, spark=spark, clock=clock, engine="spark") as by_spark:
        by_spark.get_queue_sender(name).send_messages(ServiceBusMessage("spark"))
    assert commit_info(store, rs_version + 1)["engineInfo"].startswith("Apache-Spark")
    clock.advance(timedelta(hours=2))
    got = receive_all(receiver, 4)
    assert sorted(str(m) for m in got) == ["rs0", "rs1", "rs2", "spark"]
    assert sorted((m.sequence_number, str(m)) for m in got if str(m) != "spark") == sorted(
        zip(seqs, ("rs0", "rs1", "rs2")))
    receiver.complete_messages(got)
    assert is_conflict(CommitFailedError("Transaction failed: a concurrent transaction added "
                                         "new data"))


# -- the literal source of a list receive -------------------------------------------------------
def test_any_text_and_body_bytes_survive_a_list_receive_and_its_literal_merge_source(
        client, queue):
    """A list receive collects its plan once and hands it to the MERGE as a literal VALUES
    relation: every field a send accepted comes back as sent (quotes, backslashes, escapes,
    NUL, newlines, emoji; every byte of the body), and the row it locked settles."""
    name = queue()
    text = "q'uote \\back \\u0041 \\' nul\x00 nl\nx tab\t emoji \U0001F600 ü"
    body = bytes(range(256)) * 4
    client.get_queue_sender(name).send_messages(ServiceBusMessage(
        body, message_id=text, subject=text, correlation_id=text, content_type=text,
        application_properties={text: text, "n": -7, "f": 1.5, "b": True}))
    receiver = client.get_queue_receiver(name, max_wait_time=0)
    [got] = receiver.receive_messages(1)
    assert got.body == body
    assert (got.message_id, got.subject, got.correlation_id, got.content_type) == (text,) * 4
    assert got.application_properties == {text: text, "n": -7, "f": 1.5, "b": True}
    assert got.delivery_count == 1
    receiver.complete_message(got)
    assert receiver.peek_messages(5, sequence_number=0) == []
