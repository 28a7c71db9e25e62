"""``sbdelta.amqp`` (issue 17): AmqpAnnotatedMessage as the SDK builds it, what it sends as
(the mapping of its sections onto a message's fields), and ``raw_amqp_message``. Pure Python;
the round trip through a queue is in tests/messaging/test_sdk_surface.py."""

import uuid
from datetime import datetime, timedelta, timezone

import pytest

from sbdelta._batch import ServiceBusMessageBatch, to_message_list
from sbdelta._message import ServiceBusMessage, ServiceBusReceivedMessage
from sbdelta.amqp import (AmqpAnnotatedMessage, AmqpMessageBodyType, AmqpMessageHeader,
                          AmqpMessageProperties)
from sbdelta.exceptions import InvalidMessageError, MessageSizeExceededError, MessageTypeError

T0 = datetime(2030, 1, 1, tzinfo=timezone.utc)
MS = int(T0.timestamp() * 1000)


def test_a_message_has_exactly_one_body_of_the_three_forms():
    data = AmqpAnnotatedMessage(data_body=["ab", b"c"])
    assert data.body_type is AmqpMessageBodyType.DATA and list(data.body) == [b"ab", b"c"]
    assert str(data) == "abc"
    sequence = AmqpAnnotatedMessage(sequence_body=[1, "x"])  # one section, as the SDK has it
    assert sequence.body_type is AmqpMessageBodyType.SEQUENCE
    assert list(sequence.body) == [[1, "x"]]
    assert list(AmqpAnnotatedMessage(sequence_body=[[1], ("x", 2)]).body) == [[1], ["x", 2]]
    with pytest.raises(MessageTypeError, match="sequence_body has type int; allowed: a list"):
        AmqpAnnotatedMessage(sequence_body=5)
    value = AmqpAnnotatedMessage(value_body={"k": 1})
    assert (value.body_type, value.body, str(value)) == (
        AmqpMessageBodyType.VALUE, {"k": 1}, "{'k': 1}")
    for kwargs in ({}, {"data_body": b"a", "value_body": 1}):
        with pytest.raises(InvalidMessageError, match="one and only one of either data_body"):
            AmqpAnnotatedMessage(**kwargs)
    with pytest.raises(MessageTypeError, match="unexpected keyword argument.*bdoy"):
        AmqpAnnotatedMessage(bdoy=b"a")


def test_header_and_properties_are_dict_like_sections():
    m = AmqpAnnotatedMessage(data_body=b"x", header={"time_to_live": 5000},
                             properties=AmqpMessageProperties(message_id="m1", group_id="s"))
    assert isinstance(m.header, AmqpMessageHeader)
    assert (m.header.time_to_live, m.header["time_to_live"], m.header.get("priority")) == (
        5000, 5000, None)
    assert m.properties["message_id"] == "m1" and "group_id" in m.properties
    assert m.properties == AmqpMessageProperties(message_id="m1", group_id="s")
    assert dict(m.properties.items())["group_id"] == "s"
    m.header["priority"] = 4
    assert m.header.priority == 4
    with pytest.raises(MessageTypeError, match="no field.*ttl.*its fields: delivery_count"):
        AmqpMessageHeader(ttl=1)
    with pytest.raises(KeyError):
        m.properties["label"]
    with pytest.raises(MessageTypeError, match="header must be a mapping or AmqpMessageHeader"):
        AmqpAnnotatedMessage(data_body=b"x", header=5)


def test_a_data_message_sends_as_the_service_bus_message_its_sections_map_to():
    m = AmqpAnnotatedMessage(
        data_body=["hello ", b"world"],
        header={"time_to_live": 90_000, "priority": 3, "durable": True},
        properties={"message_id": uuid.UUID(int=7), "to": b"dest", "subject": "s",
                    "reply_to": "r", "correlation_id": 42, "content_type": "text/plain",
                    "group_id": "sess", "reply_to_group_id": "rs", "user_id": b"u",
                    "creation_time": MS},
        application_properties={b"k": 1, "t": T0},
        annotations={b"x-opt-partition-key": "sess",
                     b"x-opt-scheduled-enqueue-time": MS + 60_000, b"x-other": 1},
        delivery_annotations={"d": 1}, footer={"f": 1})
    [sent] = to_message_list(m)
    assert isinstance(sent, ServiceBusMessage)
    assert (bytes(sent.body), sent.message_id, sent.to, sent.subject, sent.reply_to,
            sent.correlation_id, sent.content_type, sent.session_id,
            sent.reply_to_session_id, sent.partition_key) == (
        b"hello world", str(uuid.UUID(int=7)), "dest", "s", "r", "42", "text/plain", "sess",
        "rs", "sess")
    assert sent.time_to_live == timedelta(seconds=90)
    assert sent.scheduled_enqueue_time_utc == T0 + timedelta(minutes=1)
    assert sent.application_properties == {"k": 1, "t": T0}
    # String keys for annotations are read too; a list mixes both kinds of message.
    both = to_message_list([ServiceBusMessage("plain"), AmqpAnnotatedMessage(
        data_body=b"a", annotations={"x-opt-scheduled-enqueue-time": T0})])
    assert [bytes(x.body) for x in both] == [b"plain", b"a"]
    assert both[1].scheduled_enqueue_time_utc == T0
    batch = ServiceBusMessageBatch(1024)
    batch.add_message(m)
    assert len(batch) == 1 and batch.messages[0].session_id == "sess"


def test_what_cannot_be_stored_is_refused_before_sending_with_what_is_allowed():
    class Opaque:
        pass

    for body, error, words in (
            ({"value_body": Opaque()}, MessageTypeError,
             "value_body holds a value of type Opaque; an AMQP body value may be None, bool"),
            ({"value_body": {"k": [1, 2 ** 64]}}, InvalidMessageError,
             r"value_body\['k'\]\[1\] is the integer 18446744073709551616, beyond 64 bits"),
            ({"sequence_body": [[1], [{1, 2}]]}, MessageTypeError,
             r"sequence_body\[1\]\[0\] holds a value of type set")):
        with pytest.raises(error, match=words):
            to_message_list([ServiceBusMessage("ok"), AmqpAnnotatedMessage(**body)])
        batch = ServiceBusMessageBatch(1024)
        with pytest.raises(error, match=words):
            batch.add_message(AmqpAnnotatedMessage(**body))
        assert len(batch) == 0
    with pytest.raises(MessageTypeError, match="data_body section 1 has type int"):
        to_message_list(AmqpAnnotatedMessage(data_body=[b"a", 1]))
    with pytest.raises(MessageTypeError, match="properties.subject has type float"):
        to_message_list(AmqpAnnotatedMessage(data_body=b"a", properties={"subject": 1.5}))
    with pytest.raises(MessageTypeError, match="properties.to is bytes that are not UTF-8"):
        to_message_list(AmqpAnnotatedMessage(data_body=b"a", properties={"to": b"\xff"}))
    with pytest.raises(MessageTypeError, match="header.time_to_live has type str"):
        to_message_list(AmqpAnnotatedMessage(data_body=b"a", header={"time_to_live": "1"}))
    with pytest.raises(InvalidMessageError, match="time_to_live"):  # the message's own check
        to_message_list(AmqpAnnotatedMessage(data_body=b"a", header={"time_to_live": 0}))
    with pytest.raises(InvalidMessageError, match="message_id"):
        to_message_list(AmqpAnnotatedMessage(data_body=b"a", properties={"message_id": ""}))


def test_raw_amqp_message_of_a_sent_and_a_received_message():
    sent = ServiceBusMessage(b"body", message_id="m", session_id="s", partition_key="s",
                             subject="x",
                             time_to_live=timedelta(seconds=2),
                             application_properties={"a": 1})
    raw = sent.raw_amqp_message
    assert isinstance(raw, AmqpAnnotatedMessage) and raw.body_type is AmqpMessageBodyType.DATA
    assert list(raw.body) == [b"body"]
    assert (raw.properties.message_id, raw.properties.group_id, raw.properties.subject) == (
        "m", "s", "x")
    assert raw.header.time_to_live == 2000 and raw.header.delivery_count is None
    assert raw.application_properties == {"a": 1}
    assert raw.annotations == {b"x-opt-partition-key": "s"}
    raw.properties.subject = "changed"  # a copy
    assert sent.subject == "x"
    received = ServiceBusReceivedMessage._from_fields(
        sequence_number=12, body=b"r", partition_key="p", enqueued_time_utc=T0,
        time_to_live=timedelta(minutes=1), locked_until_utc=T0 + timedelta(seconds=30),
        lock_token=str(uuid.UUID(int=1)), delivery_count=2, dead_letter_source="q")
    raw = received.raw_amqp_message
    assert raw.header.delivery_count == 2 and raw.header.time_to_live == 60_000
    assert raw.annotations == {b"x-opt-partition-key": "p", b"x-opt-sequence-number": 12,
                               b"x-opt-enqueued-time": MS,
                               b"x-opt-locked-until": MS + 30_000,
                               b"x-opt-deadletter-source": "q"}
    assert (raw.properties.creation_time, raw.properties.absolute_expiry_time) == (
        MS, MS + 60_000)
    # What it shows sends back as the same message fields.
    [again] = to_message_list(AmqpAnnotatedMessage(
        data_body=list(raw.body), header={"time_to_live": raw.header.time_to_live},
        properties=dict(raw.properties.items()),
        annotations={b"x-opt-partition-key": "p"}))
    assert (bytes(again.body), again.partition_key, again.time_to_live) == (
        b"r", "p", timedelta(minutes=1))


def test_value_and_sequence_bodies_are_stored_as_typed_json_and_read_back_with_their_types():
    """A VALUE or SEQUENCE body is stored as the ``body`` bytes plus its form in ``body_type``
    (issue 17) and comes back with the same types, the SDK's shapes and the sizes of what
    is stored."""
    from sbdelta._amqp_body import decode_body, stored_body, stored_form
    from sbdelta._message import from_amqp

    value = {"s": "text", "i": -2 ** 63, "f": 1.5, "nan": float("inf"), "b": b"\x00\xff",
             "t": T0, "u": uuid.UUID(int=5), "none": None, "yes": True,
             "list": [1, [2, "three"]], "tuple": (4, 5), "$dollar": 1,
             7: "int key", ("a", 1): "tuple key"}
    sent = from_amqp(AmqpAnnotatedMessage(value_body=value, properties={"message_id": "v"}))
    assert (sent.body_type, sent.body, sent.message_id) == (
        AmqpMessageBodyType.VALUE, value, "v")
    data = stored_body(sent)
    assert stored_form(sent) == "value" and str(sent) == str(value)
    form, back = decode_body("value", data)
    expected = dict(value, tuple=[4, 5])  # tuples in a value come back as lists (AMQP lists)
    assert (form, back) == (AmqpMessageBodyType.VALUE, expected)
    assert isinstance(back["i"], int) and isinstance(back["f"], float) and back["yes"] is True
    assert sent.size_in_bytes == ServiceBusMessage(data, message_id="v").size_in_bytes

    received = ServiceBusReceivedMessage._from_fields(
        sequence_number=3, body=data, body_type="value", enqueued_time_utc=T0)
    assert (received.body_type, received.body) == (AmqpMessageBodyType.VALUE, expected)
    raw = received.raw_amqp_message
    assert (raw.body_type, raw.body) == (AmqpMessageBodyType.VALUE, expected)
    for scalar in (None, 0, "x", [], {}):
        again = from_amqp(AmqpAnnotatedMessage(value_body=scalar))
        assert decode_body("value", stored_body(again)) == (AmqpMessageBodyType.VALUE, scalar)

    sequence = from_amqp(AmqpAnnotatedMessage(sequence_body=[[1, b"b"], ["c"]]))
    assert sequence.body_type is AmqpMessageBodyType.SEQUENCE
    assert list(sequence.body) == [[1, b"b"], ["c"]] and list(sequence.body) == [[1, b"b"], ["c"]]
    received = ServiceBusReceivedMessage._from_fields(
        sequence_number=4, body=stored_body(sequence), body_type="sequence")
    assert list(received.body) == [[1, b"b"], ["c"]]
    assert list(received.raw_amqp_message.body) == [[1, b"b"], ["c"]]

    data_message = ServiceBusReceivedMessage._from_fields(sequence_number=5, body=b"d")
    assert (data_message.body_type, bytes(data_message.body)) == (AmqpMessageBodyType.DATA, b"d")
    assert stored_form(data_message) is None
    with pytest.raises(InvalidMessageError, match="body type 'xml'; known: data, value, sequence"):
        decode_body("xml", b"{}")
    with pytest.raises(InvalidMessageError, match="a stored value body is not JSON"):
        decode_body("value", b"\xff")


def test_a_value_body_counts_toward_the_batch_and_the_size_limit_as_stored():
    """SEND-5 for AMQP bodies: the stored JSON is the body's size, in a batch too."""
    big = AmqpAnnotatedMessage(value_body="x" * 2000)
    batch = ServiceBusMessageBatch(2000)
    with pytest.raises(MessageSizeExceededError, match="does not fit in the batch"):
        batch.add_message(big)
    batch.add_message(AmqpAnnotatedMessage(value_body=[1, 2, 3]))
    assert batch.size_in_bytes == to_message_list(
        AmqpAnnotatedMessage(value_body=[1, 2, 3]))[0].size_in_bytes
