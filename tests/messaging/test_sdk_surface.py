"""An azure-servicebus 7.x program runs after changing its imports and its connection string
(issue 17): clients from connection strings (EntityPath honoured), the SDK's keyword options on
clients, senders and receivers and on ``create_queue``, ``auto_lock_renewer`` on receivers (messages, and a session
receiver's session). Time is a ManualClock."""

import time
from datetime import timedelta

import pytest

from sbdelta import (AutoLockRenewer, ServiceBusClient, ServiceBusMessage,
                     ServiceBusReceiveMode, ServiceBusSubQueue)
from sbdelta.exceptions import AutoLockRenewTimeout, ServiceBusInvalidOperationError
from sbdelta.management import (AccessRights, AuthorizationRule, EntityAvailabilityStatus,
                                ServiceBusAdministrationClient)

LOCK = timedelta(seconds=30)


@pytest.fixture(scope="module")
def ns(spark, tmp_path_factory):
    return str(tmp_path_factory.mktemp("sdk") / "ns")


def wait_for(renewer, renewals):
    deadline = time.monotonic() + 60
    while renewer.renewals < renewals and time.monotonic() < deadline:
        time.sleep(0.05)  # waits for the renewer thread, not for a lock duration


def test_an_sdk_program_runs_on_a_connection_string_with_its_keyword_options(spark, ns, clock):
    sas = "SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=c2VjcmV0"
    admin = ServiceBusAdministrationClient.from_connection_string(
        f"Endpoint={ns};{sas}", spark=spark, clock=clock, api_version="2021-05",
        logging_enable=True)
    admin.create_queue("orders", lock_duration=LOCK, enable_express=True,
                       authorization_rules=[AuthorizationRule(
                           key_name="app", primary_key="c2VjcmV0",
                           rights=[AccessRights.SEND, AccessRights.LISTEN])])
    made = admin.get_queue("orders")  # enable_express kept, no shared-access key written
    assert made.enable_express and made.authorization_rules is None
    assert made.availability_status is EntityAvailabilityStatus.AVAILABLE
    admin.create_queue("other")
    with ServiceBusClient.from_connection_string(
            f"Endpoint={ns};{sas};EntityPath=orders", spark=spark, clock=clock,
            logging_enable=True, transport_type="AmqpOverWebsocket",
            http_proxy={"proxy_hostname": "proxy"}, user_agent="app/1.0", retry_total=5,
            retry_backoff_factor=0.01, retry_mode="fixed") as client:
        with client.get_queue_sender("Orders", client_identifier="producer-1",
                                     socket_timeout=5) as sender:
            assert sender.client_identifier == "producer-1"
            sender.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
        with pytest.raises(ServiceBusInvalidOperationError, match="EntityPath \\('orders'\\)"):
            client.get_queue_sender("other")
        renewer = AutoLockRenewer(max_lock_renewal_duration=300, poll_interval=0.05)
        with pytest.raises(ServiceBusInvalidOperationError, match="not supported in RECEIVE_AND"):
            client.get_queue_receiver(
                "orders", auto_lock_renewer=renewer,
                receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE, max_wait_time=0)
        with client.get_queue_receiver("orders", auto_lock_renewer=renewer,
                                       max_wait_time=0) as receiver:
            assert receiver.client_identifier.startswith("SBReceiver-")
            got = receiver.receive_messages(10)  # registered with the renewer on receipt
            assert sorted(b"".join(m.body) for m in got) == [b"a", b"b"]  # as SDK code reads
            clock.advance(timedelta(seconds=20))  # under half the lock left: due
            wait_for(renewer, 2)
            assert [m.locked_until_utc for m in got] == [clock.now() + LOCK] * 2
            clock.advance(timedelta(seconds=12))  # past the first locks: renewed, still held
            receiver.complete_messages(got)
            assert [m.auto_renew_error for m in got] == [None, None]
        renewer.close()
        # The renewal period over: the lock is left to run out, and the message says why.
        client.get_queue_sender("orders").send_messages(ServiceBusMessage("c"))
        short = AutoLockRenewer(max_lock_renewal_duration=10, poll_interval=0.05)
        receiver = client.get_queue_receiver("orders", auto_lock_renewer=short, max_wait_time=0)
        [c] = receiver.receive_messages(10)
        clock.advance(timedelta(seconds=20))
        deadline = time.monotonic() + 60
        while c.auto_renew_error is None and time.monotonic() < deadline:
            time.sleep(0.05)
        short.close(wait=False)  # the SDK's keyword: do not wait for the renewing thread
        assert isinstance(c.auto_renew_error, AutoLockRenewTimeout)
        assert "(10 seconds) elapsed" in str(c.auto_renew_error)
        assert c.locked_until_utc == clock.now() + LOCK - timedelta(seconds=20)  # not renewed
        receiver.complete_message(c)
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        ServiceBusClient(ns, spark=spark, clock=clock, retry_totl=3)


def test_an_auto_lock_renewer_on_a_session_receiver_keeps_the_session(client, queue, clock):
    name = queue(requires_session=True, lock_duration=LOCK)
    client.get_queue_sender(name).send_messages(ServiceBusMessage("m", session_id="s"))
    renewer = AutoLockRenewer(max_lock_renewal_duration=300, poll_interval=0.05)
    with client.get_queue_receiver(name, session_id="s", auto_lock_renewer=renewer,
                                   max_wait_time=0) as receiver:
        [message] = receiver.receive_messages(10)
        clock.advance(timedelta(seconds=20))
        wait_for(renewer, 1)  # the session (and with it its message), not the message alone
        assert receiver.session.locked_until_utc == clock.now() + LOCK
        clock.advance(timedelta(seconds=12))
        receiver.complete_message(message)
    renewer.close()
    assert renewer.renewals == 1


def test_an_amqp_annotated_message_is_sent_received_and_viewed_as_the_sdk_does(
        client, queue, clock):
    """``AmqpAnnotatedMessage`` with a DATA body goes through send, schedule and batches
    as the message its sections map to; a received message's ``raw_amqp_message`` shows its
    sections and the annotations Service Bus sets; a value that cannot be stored is refused
    before anything is written (VALUE and SEQUENCE bodies travel in the next test)."""
    from sbdelta.amqp import AmqpAnnotatedMessage, AmqpMessageBodyType
    from sbdelta.exceptions import MessageTypeError

    name = queue(lock_duration=LOCK)
    sender = client.get_queue_sender(name)
    amqp = AmqpAnnotatedMessage(
        data_body=[b"part 1, ", "part 2"], header={"time_to_live": 600_000},
        properties={"message_id": "m-1", "subject": "greeting", "content_type": "text/plain"},
        application_properties={"n": 1}, annotations={b"x-opt-partition-key": "k"})
    sender.send_messages(amqp)
    batch = sender.create_message_batch()
    batch.add_message(AmqpAnnotatedMessage(data_body=b"in a batch"))
    sender.send_messages(batch)
    [scheduled] = sender.schedule_messages(AmqpAnnotatedMessage(data_body=b"later"),
                                           clock.now() + timedelta(minutes=5))
    with pytest.raises(MessageTypeError, match="value_body holds a value of type object"):
        sender.send_messages([ServiceBusMessage("not sent either"),
                              AmqpAnnotatedMessage(value_body=object())])
    receiver = client.get_queue_receiver(name, max_wait_time=0)
    first, second = receiver.receive_messages(10)  # not the scheduled one, not the refused
    assert (str(first), first.message_id, first.subject, first.content_type,
            first.partition_key, first.application_properties, first.time_to_live) == (
        "part 1, part 2", "m-1", "greeting", "text/plain", "k", {"n": 1},
        timedelta(minutes=10))
    raw = first.raw_amqp_message
    assert raw.body_type is AmqpMessageBodyType.DATA
    assert b"".join(raw.body) == b"part 1, part 2"
    assert (raw.properties.message_id, raw.header.time_to_live, raw.header.delivery_count) == (
        "m-1", 600_000, 1)
    assert raw.annotations[b"x-opt-sequence-number"] == first.sequence_number
    assert raw.annotations[b"x-opt-enqueued-time"] == int(
        first.enqueued_time_utc.timestamp() * 1000)
    assert raw.annotations[b"x-opt-locked-until"] == int(
        (clock.now() + LOCK).timestamp() * 1000)
    assert str(second) == "in a batch"
    receiver.complete_messages([first, second])
    [later] = receiver.peek_messages(5)
    assert (later.sequence_number, str(later)) == (scheduled, "later")


def test_amqp_value_and_sequence_bodies_keep_their_form_and_types_through_a_queue(
        spark, client, queue, clock):
    """Issue 17: an ``AmqpAnnotatedMessage`` with a VALUE or SEQUENCE body is sent (a list, a
    batch, a schedule), received, peeked, dead-lettered, read from the dead-letter queue,
    resubmitted and sent on, and each time it comes back with its body form and its values'
    types, as the SDK returns them; ``receive_dataframe`` names the form of each row."""
    from chispa import assert_df_equality

    from sbdelta.amqp import AmqpAnnotatedMessage, AmqpMessageBodyType
    from sbdelta.dead_letters import resubmit_dead_letters

    value = {"order": 7, "price": 9.5, "lines": [b"\x00\x01", None, True],
             "due": clock.now().replace(microsecond=0), 3: "an int key"}
    name = queue(lock_duration=LOCK)
    sender = client.get_queue_sender(name)
    sender.send_messages([AmqpAnnotatedMessage(value_body=value,
                                               properties={"message_id": "v"}),
                          AmqpAnnotatedMessage(sequence_body=[[1, "a"], [2.5]],
                                               properties={"message_id": "s"}),
                          ServiceBusMessage("plain", message_id="d")])
    batch = sender.create_message_batch()
    batch.add_message(AmqpAnnotatedMessage(value_body="in a batch"))
    sender.send_messages(batch)
    sender.schedule_messages(AmqpAnnotatedMessage(value_body=[1, 2]),
                             clock.now() + timedelta(minutes=5))
    receiver = client.get_queue_receiver(name, max_wait_time=0)
    got = {m.message_id or str(m.body): m for m in receiver.receive_messages(10)}
    assert set(got) == {"v", "s", "d", "in a batch"}
    v, s = got["v"], got["s"]
    assert (v.body_type, v.body) == (AmqpMessageBodyType.VALUE, value)
    assert type(v.body["order"]) is int and type(v.body["lines"][0]) is bytes
    assert (v.raw_amqp_message.body_type, v.raw_amqp_message.body) == (
        AmqpMessageBodyType.VALUE, value)
    assert s.body_type is AmqpMessageBodyType.SEQUENCE and list(s.body) == [[1, "a"], [2.5]]
    assert (got["d"].body_type, bytes(got["d"].body)) == (AmqpMessageBodyType.DATA, b"plain")
    assert got["in a batch"].body == "in a batch"
    [scheduled] = [m for m in receiver.peek_messages(10) if m.sequence_number not in
                   {m.sequence_number for m in got.values()}]
    assert (scheduled.body_type, scheduled.body) == (AmqpMessageBodyType.VALUE, [1, 2])

    receiver.dead_letter_message(v, reason="audit")
    receiver.complete_messages([got["d"], got["in a batch"]])
    sender.send_messages(s)  # a received message sent on keeps its body
    receiver.complete_message(s)
    dlq = client.get_queue_receiver(name, max_wait_time=0,
                                    sub_queue=ServiceBusSubQueue.DEAD_LETTER)
    [dead] = dlq.peek_messages(5)
    assert (dead.body_type, dead.body, dead.dead_letter_reason) == (
        AmqpMessageBodyType.VALUE, value, "audit")
    assert resubmit_dead_letters(client, name) == 1

    rows = receiver.receive_dataframe(10)  # Spark: the resubmitted value, the sequence
    assert_df_equality(
        rows.selectExpr("message_id", "body_type", "CASE WHEN body_type = 'sequence' THEN "
                        "CAST(body AS STRING) END AS json"),
        spark.createDataFrame([("s", "sequence", '[[1,"a"],[2.5]]'), ("v", "value", None)],
                              "message_id STRING, body_type STRING, json STRING"),
        ignore_row_order=True, ignore_nullable=True)
    assert receiver.complete_messages(rows) == 2


def test_the_deprecated_message_property_is_a_uamqp_shaped_view_whose_outcomes_settle(tmp_path):
    """The SDK's deprecated ``message.message`` (issue 17): it warns with the SDK's words and
    gives uamqp's shape (sections as attributes, ``get_data()``, ``state``, ``settled``); its
    AMQP outcomes settle through the receiver as the SDK maps them: accept completes, reject
    dead-letters (condition as reason, description as error description), release abandons,
    an undeliverable modify defers. A message to send, or a peeked one, has nothing to settle.
    Through delta-rs: no JVM."""
    from sbdelta import ManualClock, ServiceBusSubQueue
    from sbdelta._legacy_message import MessageState

    from ..conftest import START

    ns, clock = str(tmp_path / "ns"), ManualClock(START)
    ServiceBusAdministrationClient(ns, clock=clock, engine="delta-rs").create_queue(
        "legacy", lock_duration=LOCK)
    outgoing = ServiceBusMessage("hello", application_properties={"k": 1}, subject="s")
    with pytest.warns(DeprecationWarning, match="^The `message` property is deprecated and "
                                                "will be removed in future versions.$"):
        view = outgoing.message
    assert (list(view.get_data()), view.application_properties, view.properties.subject,
            str(view), view.state, view.settled) == (
        [b"hello"], {"k": 1}, "s", "hello", MessageState.SendComplete, True)
    assert view.gather() == [view]
    with pytest.raises(TypeError, match="Only received messages can be settled"):
        view.accept()
    with ServiceBusClient(ns, clock=clock, engine="delta-rs") as client:
        client.get_queue_sender("legacy").send_messages(
            [ServiceBusMessage(f"m{i}") for i in range(5)])
        receiver = client.get_queue_receiver("legacy", max_wait_time=0)
        got = receiver.receive_messages(4)
        with pytest.warns(DeprecationWarning):
            views = [m.message for m in got]
        assert [v.state for v in views] == [MessageState.ReceivedUnsettled] * 4
        assert views[0].accept() is True and views[0].settled
        assert views[0].accept() is False  # settled already: the SDK's answer
        assert views[1].reject(b"bad", "why it failed") is True
        assert views[2].release() is True
        with pytest.raises(ServiceBusInvalidOperationError, match="cannot change its properties"):
            views[3].modify(False, True, {"k": 2})
        assert views[3].modify(False, True) is True
        assert all(v.settled for v in views)
        with pytest.warns(DeprecationWarning):
            peeked = receiver.peek_messages(1, sequence_number=0)[0].message
        assert (peeked.state, peeked.accept()) == (MessageState.ReceivedSettled, False)
        dead = client.get_queue_receiver("legacy", sub_queue=ServiceBusSubQueue.DEAD_LETTER,
                                         max_wait_time=0).receive_messages(5)
        assert [(str(m), m.dead_letter_reason, m.dead_letter_error_description)
                for m in dead] == [("m1", "bad", "why it failed")]
        (deferred,) = receiver.receive_deferred_messages([got[3].sequence_number])
        again = receiver.receive_messages(5)
        assert str(deferred) == "m3"
        assert [(str(m), m.delivery_count) for m in again] == [("m2", 2), ("m4", 1)]
