"""Messages: field checks, PART-2, SEND-5 sizes, the property codec, received messages, batches."""

import json
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from sbdelta._app_properties import decode_properties, encode_properties
from sbdelta.amqp import AmqpMessageBodyType
from sbdelta._durations import TIMESPAN_MAX
from sbdelta._message_fields import MAX_ID_LENGTH, SYSTEM_STRING_FIELDS
from sbdelta._size import HEADER_ALLOWANCE
from sbdelta._message import (
    InvalidMessageError,
    MessageTypeError,
    ServiceBusMessage,
    ServiceBusMessageState,
    ServiceBusReceivedMessage,
    ServiceBusReceiveMode,
    ServiceBusSubQueue,
)
from sbdelta._batch import ServiceBusMessageBatch, to_message_list
from sbdelta.exceptions import (MessageSizeExceededError, ServiceBusError,
                                ServiceBusInvalidOperationError)

T0 = datetime(2030, 1, 1, tzinfo=timezone.utc)
U = uuid.UUID("12345678-1234-5678-1234-567812345678")
PLUS_2 = timezone(timedelta(hours=2))


# --- enums and errors -------------------------------------------------------------------------


def test_enum_values_mirror_azure_servicebus():
    assert ServiceBusReceiveMode.PEEK_LOCK == "peeklock"
    assert ServiceBusReceiveMode.RECEIVE_AND_DELETE == "receiveanddelete"
    assert ServiceBusSubQueue.DEAD_LETTER == "deadletter"
    assert ServiceBusSubQueue.TRANSFER_DEAD_LETTER == "transferdeadletter"
    assert [s.value for s in ServiceBusMessageState] == [0, 1, 2]
    assert ServiceBusMessageState.SCHEDULED == 2


def test_error_classes():
    assert issubclass(MessageTypeError, ServiceBusError) and issubclass(MessageTypeError, TypeError)
    assert issubclass(InvalidMessageError, ServiceBusError)
    assert issubclass(InvalidMessageError, ValueError)
    assert MessageTypeError("x").retryable is False
    assert InvalidMessageError("x").retryable is False


def test_constants():
    assert MAX_ID_LENGTH == 128
    assert SYSTEM_STRING_FIELDS == ("message_id", "session_id", "partition_key", "content_type",
                                    "correlation_id", "subject", "to", "reply_to",
                                    "reply_to_session_id")


# --- body --------------------------------------------------------------------------------------


@pytest.mark.parametrize("body, expected", [
    ("héllo", "héllo".encode("utf-8")),
    (b"\x00\xff", b"\x00\xff"),
    (bytearray(b"ab"), b"ab"),
    (memoryview(b"abc"), b"abc"),
    (None, b""),
    ("", b""),
])
def test_body_types(body, expected):
    msg = ServiceBusMessage(body)
    assert msg.body == expected and isinstance(msg.body, bytes)
    assert msg.body.decode("utf-8", "replace") == expected.decode("utf-8", "replace")
    # As in the SDK, a DATA body iterates by section (one here): SDK code joins them.
    assert msg.body_type is AmqpMessageBodyType.DATA
    assert list(msg.body) == [expected] and b"".join(msg.body) == expected
    assert type(next(iter(msg.body))) is bytes
    # next(message.body), the SDK's idiom for the first section of its generator body
    assert next(msg.body) == expected and type(next(msg.body)) is bytes


def test_body_is_copied_from_mutable_buffers():
    buf = bytearray(b"ab")
    msg = ServiceBusMessage(buf)
    buf[0] = ord("z")
    assert msg.body == b"ab"


@pytest.mark.parametrize("body", [1, 1.5, ["a"], {"a": 1}, object()])
def test_body_wrong_type(body):
    with pytest.raises(MessageTypeError, match="body has type .*allowed: str"):
        ServiceBusMessage(body)


def test_body_is_read_only():
    msg = ServiceBusMessage("a")
    with pytest.raises(AttributeError):
        msg.body = b"b"


def test_str_gives_body_text():
    assert str(ServiceBusMessage("héllo")) == "héllo"
    assert str(ServiceBusMessage(None)) == ""
    assert str(ServiceBusMessage(b"\xff\xfe")) == "b'\\xff\\xfe'"


def test_repr_like_the_sdk():
    msg = ServiceBusMessage("hi", message_id="m1", application_properties={"a": 1})
    text = repr(msg)
    assert text.startswith("ServiceBusMessage(body=hi, application_properties={'a': 1}")
    assert "message_id=m1" in text and "scheduled_enqueue_time_utc=None" in text
    assert len(repr(ServiceBusMessage("x" * 5000))) == 1024


# --- application properties ------------------------------------------------------------------


def test_application_properties_all_allowed_types():
    props = {"s": "x", "i": 2 ** 63 - 1, "neg": -(2 ** 63), "f": 1.5, "b": True, "y": b"\x01",
             "t": T0, "u": U, "n": None}
    msg = ServiceBusMessage("", application_properties=props)
    assert msg.application_properties == props
    assert msg.application_properties is not props  # a checked copy


def test_application_properties_none_and_empty():
    assert ServiceBusMessage("").application_properties is None
    assert ServiceBusMessage("", application_properties={}).application_properties == {}


def test_application_properties_naive_datetime_is_utc():
    msg = ServiceBusMessage("", application_properties={"t": datetime(2030, 1, 1)})
    assert msg.application_properties["t"] == T0
    assert msg.application_properties["t"].tzinfo == timezone.utc


def test_application_properties_aware_datetime_converted_to_utc():
    moment = datetime(2030, 1, 1, 2, tzinfo=PLUS_2)
    value = ServiceBusMessage("", application_properties={"t": moment}).application_properties["t"]
    assert value == T0 and value.utcoffset() == timedelta(0)


@pytest.mark.parametrize("props", [[("a", 1)], "a=1", 5])
def test_application_properties_not_a_dict(props):
    with pytest.raises(MessageTypeError, match="application_properties has type .*dict"):
        ServiceBusMessage("", application_properties=props)


@pytest.mark.parametrize("key", [1, b"k", None, ("a",)])
def test_application_properties_key_must_be_str(key):
    with pytest.raises(MessageTypeError, match="keys must be str"):
        ServiceBusMessage("", application_properties={key: 1})


@pytest.mark.parametrize("value", [[1], {"a": 1}, bytearray(b"x"), object(), timedelta(1),
                                   datetime(2030, 1, 1).date(), 1j])
def test_application_properties_value_type(value):
    with pytest.raises(MessageTypeError, match=r"application_properties\['k'\] has type .*allowed"):
        ServiceBusMessage("", application_properties={"k": value})


@pytest.mark.parametrize("value", [2 ** 63, -(2 ** 63) - 1])
def test_application_properties_int_beyond_64_bits(value):
    with pytest.raises(InvalidMessageError, match="64-bit"):
        ServiceBusMessage("", application_properties={"k": value})


def test_application_properties_setter_checks():
    msg = ServiceBusMessage("")
    msg.application_properties = {"a": "b"}
    assert msg.application_properties == {"a": "b"}
    with pytest.raises(MessageTypeError):
        msg.application_properties = {"a": [1]}
    assert msg.application_properties == {"a": "b"}  # unchanged after a failed set
    msg.application_properties = None
    assert msg.application_properties is None


def test_application_properties_subclasses_become_plain_types():
    class MyStr(str):
        pass

    class MyInt(int):
        pass

    props = ServiceBusMessage("", application_properties={
        MyStr("k"): MyStr("v"), "i": MyInt(3)}).application_properties
    assert [type(k) for k in props] == [str, str]
    assert type(props["k"]) is str and type(props["i"]) is int


# --- system string fields -----------------------------------------------------------------------


@pytest.mark.parametrize("field", SYSTEM_STRING_FIELDS)
def test_system_string_fields_accept_str_and_none(field):
    msg = ServiceBusMessage("", **{field: "abc"})
    assert getattr(msg, field) == "abc"
    setattr(msg, field, None)
    assert getattr(msg, field) is None
    setattr(msg, field, "xyz")
    assert getattr(msg, field) == "xyz"


@pytest.mark.parametrize("field", SYSTEM_STRING_FIELDS)
@pytest.mark.parametrize("value", [1, b"abc", ["a"]])
def test_system_string_fields_wrong_type(field, value):
    with pytest.raises(MessageTypeError, match=f"{field} has type"):
        ServiceBusMessage("", **{field: value})
    msg = ServiceBusMessage("")
    with pytest.raises(MessageTypeError, match=f"{field} has type"):
        setattr(msg, field, value)


@pytest.mark.parametrize("field", ["message_id", "session_id", "partition_key"])
def test_ids_at_most_128_characters(field):
    assert getattr(ServiceBusMessage("", **{field: "x" * 128}), field) == "x" * 128
    with pytest.raises(InvalidMessageError, match="129 characters long; at most 128"):
        ServiceBusMessage("", **{field: "x" * 129})
    msg = ServiceBusMessage("")
    with pytest.raises(InvalidMessageError, match="at most 128"):
        setattr(msg, field, "é" * 129)
    assert getattr(msg, field) is None


@pytest.mark.parametrize("field", ["message_id", "session_id", "partition_key"])
def test_ids_must_not_be_empty(field):
    with pytest.raises(InvalidMessageError, match=f"{field} is empty; allowed: a str of 1 to 128"):
        ServiceBusMessage("", **{field: ""})


@pytest.mark.parametrize("field", ["content_type", "correlation_id", "subject", "to", "reply_to",
                                   "reply_to_session_id"])
def test_other_string_fields_have_no_length_limit(field):
    assert getattr(ServiceBusMessage("", **{field: "x" * 500}), field) == "x" * 500
    assert getattr(ServiceBusMessage("", **{field: ""}), field) == ""


# --- PART-2 ------------------------------------------------------------------------------------


def test_part_2_session_and_partition_key_must_match():
    msg = ServiceBusMessage("", session_id="s1", partition_key="s1")
    assert msg.session_id == msg.partition_key == "s1"
    with pytest.raises(ServiceBusInvalidOperationError, match="PART-2"):
        ServiceBusMessage("", session_id="s1", partition_key="p1")


def test_part_2_checked_when_either_is_set():
    msg = ServiceBusMessage("", session_id="s1")
    with pytest.raises(ServiceBusInvalidOperationError, match="PART-2"):
        msg.partition_key = "p1"
    assert msg.partition_key is None
    msg.partition_key = "s1"
    with pytest.raises(ServiceBusInvalidOperationError, match="PART-2"):
        msg.session_id = "s2"
    assert msg.session_id == "s1"
    msg.partition_key = None
    msg.session_id = "s2"  # allowed once the partition key is cleared
    assert msg.session_id == "s2"


def test_part_2_error_is_a_value_error():
    with pytest.raises(ValueError):
        ServiceBusMessage("", partition_key="p", session_id="s")


def test_part_2_only_one_set_is_fine():
    assert ServiceBusMessage("", partition_key="p").partition_key == "p"
    assert ServiceBusMessage("", session_id="s").session_id == "s"


# --- time_to_live ------------------------------------------------------------------------------


@pytest.mark.parametrize("value, expected", [
    (None, None),
    (timedelta(seconds=30), timedelta(seconds=30)),
    ("PT30S", timedelta(seconds=30)),
    ("P1DT2H", timedelta(days=1, hours=2)),
    (30, timedelta(seconds=30)),
    (0.5, timedelta(milliseconds=500)),
    (TIMESPAN_MAX, None),  # "unlimited": the entity's default applies, which is never longer
    (float("inf"), None),
    (timedelta(days=10675199, hours=3), None),
])
def test_time_to_live_forms(value, expected):
    msg = ServiceBusMessage("", time_to_live=value)
    assert msg.time_to_live == expected
    assert msg.time_to_live is None or type(msg.time_to_live) is timedelta


@pytest.mark.parametrize("value", [0, -1, 0.0, -0.5, float("nan"), timedelta(0),
                                   timedelta(seconds=-1), 1e-9])
def test_time_to_live_must_be_positive(value):
    with pytest.raises(InvalidMessageError, match="time_to_live must be positive"):
        ServiceBusMessage("", time_to_live=value)


@pytest.mark.parametrize("value", ["PT0S", "30s", "P1M", "garbage", "-PT5S"])
def test_time_to_live_bad_strings(value):
    with pytest.raises(InvalidMessageError, match="time_to_live must be positive and well-formed"):
        ServiceBusMessage("", time_to_live=value)


@pytest.mark.parametrize("value", [True, [1], b"PT1S", datetime(2030, 1, 1)])
def test_time_to_live_wrong_type(value):
    with pytest.raises(MessageTypeError, match="time_to_live has type .*accepted"):
        ServiceBusMessage("", time_to_live=value)


def test_time_to_live_setter_checks():
    msg = ServiceBusMessage("")
    msg.time_to_live = "PT1M"
    assert msg.time_to_live == timedelta(minutes=1)
    with pytest.raises(InvalidMessageError):
        msg.time_to_live = -5
    assert msg.time_to_live == timedelta(minutes=1)


# --- scheduled_enqueue_time_utc -----------------------------------------------------------------


def test_scheduled_enqueue_time_forms():
    assert ServiceBusMessage("").scheduled_enqueue_time_utc is None
    naive = ServiceBusMessage("", scheduled_enqueue_time_utc=datetime(2030, 1, 1))
    assert naive.scheduled_enqueue_time_utc == T0
    assert naive.scheduled_enqueue_time_utc.tzinfo == timezone.utc
    aware = ServiceBusMessage("", scheduled_enqueue_time_utc=datetime(2030, 1, 1, 2,
                                                                      tzinfo=PLUS_2))
    assert aware.scheduled_enqueue_time_utc == T0
    assert aware.scheduled_enqueue_time_utc.utcoffset() == timedelta(0)


@pytest.mark.parametrize("value", ["2030-01-01T00:00:00Z", 1893456000, T0.date()])
def test_scheduled_enqueue_time_wrong_type(value):
    with pytest.raises(MessageTypeError, match="scheduled_enqueue_time_utc has type"):
        ServiceBusMessage("", scheduled_enqueue_time_utc=value)
    msg = ServiceBusMessage("")
    with pytest.raises(MessageTypeError):
        msg.scheduled_enqueue_time_utc = value


# --- SEND-5: size_in_bytes ----------------------------------------------------------------------


def test_send_5_size_of_body_only_plus_the_fixed_header():
    assert HEADER_ALLOWANCE == 72
    assert ServiceBusMessage(None).size_in_bytes == HEADER_ALLOWANCE
    assert ServiceBusMessage(b"abc").size_in_bytes == HEADER_ALLOWANCE + 3
    assert ServiceBusMessage("é").size_in_bytes == HEADER_ALLOWANCE + 2  # UTF-8 bytes


@pytest.mark.parametrize("value, stored", [
    ("héllo", '"héllo"'), (b"\x00" * 10, '{"$b":"AAAAAAAAAAAAAA=="}'), (7, "7"), (-1.5, "-1.5"),
    (T0, '{"$t":"2030-01-01T00:00:00+00:00"}'), (True, "true"), (False, "false"),
    (U, f'{{"$u":"{U}"}}'), (None, "null"),
])
def test_send_5_application_properties_count_as_their_stored_json(value, stored):
    msg = ServiceBusMessage("", application_properties={"ké": value})
    text = '{"ké":' + stored + "}"
    assert encode_properties(msg.application_properties) == text
    assert msg.size_in_bytes == HEADER_ALLOWANCE + len(text.encode("utf-8"))


def test_send_5_size_counts_every_set_system_string_field():
    fields = {field: "é" + field for field in SYSTEM_STRING_FIELDS}
    fields["partition_key"] = fields["session_id"]
    msg = ServiceBusMessage("ab", **fields)
    expected = HEADER_ALLOWANCE + 2 + sum(len(v.encode("utf-8")) for v in fields.values())
    assert msg.size_in_bytes == expected


def test_send_5_ttl_and_schedule_are_inside_the_fixed_header():
    base = ServiceBusMessage("abc").size_in_bytes
    timed = ServiceBusMessage("abc", time_to_live=30, scheduled_enqueue_time_utc=T0)
    assert timed.size_in_bytes == base


def test_send_5_size_follows_setters():
    msg = ServiceBusMessage("abc", application_properties={"k": "v"}, subject="s")
    assert msg.size_in_bytes == HEADER_ALLOWANCE + 3 + len('{"k":"v"}') + 1
    msg.subject = None
    msg.message_id = "1234"
    msg.application_properties["k2"] = 5  # the dict may be changed in place, as in the SDK
    assert msg.size_in_bytes == HEADER_ALLOWANCE + 3 + len('{"k":"v","k2":5}') + 4


def test_send_5_size_in_bytes_of_a_large_message():
    msg = ServiceBusMessage(b"x" * (256 * 1024), message_id="m")
    assert msg.size_in_bytes == 256 * 1024 + 1 + HEADER_ALLOWANCE


# --- application property codec -------------------------------------------------------------


@pytest.mark.parametrize("value", [
    "text", "", "ünï", 0, 1, -1, 2 ** 63 - 1, -(2 ** 63), 0.0, -0.0, 1.0, 1.5, 1e300, True,
    False, None, b"", b"\x00\xff", T0,
    datetime(2030, 6, 1, 12, 30, 15, 123456, tzinfo=timezone.utc), U, float("inf"), float("-inf"),
])
def test_codec_round_trip_preserves_type(value):
    decoded = decode_properties(encode_properties({"k": value}))
    assert list(decoded) == ["k"]
    assert type(decoded["k"]) is type(value)
    assert decoded["k"] == value
    if isinstance(value, float):
        assert str(decoded["k"]) == str(value)  # -0.0 stays -0.0


def test_codec_nan_round_trip():
    decoded = decode_properties(encode_properties({"k": float("nan")}))["k"]
    assert type(decoded) is float and decoded != decoded


@pytest.mark.parametrize("value, expected_type", [(True, bool), (1, int), (1.0, float),
                                                  (False, bool), (0, int)])
def test_codec_bool_is_not_int(value, expected_type):
    decoded = decode_properties(encode_properties({"b": value}))["b"]
    assert type(decoded) is expected_type


def test_codec_datetimes_become_aware_utc():
    naive = decode_properties(encode_properties({"t": datetime(2030, 1, 1)}))["t"]
    assert naive == T0 and naive.tzinfo is not None and naive.utcoffset() == timedelta(0)
    shifted = decode_properties(encode_properties(
        {"t": datetime(2030, 1, 1, 2, tzinfo=PLUS_2)}))["t"]
    assert shifted == T0 and shifted.utcoffset() == timedelta(0)


def test_codec_many_properties_sorted_and_strict_json():
    props = {"z": 1, "a": "x", "m": b"b", "n": None, "t": T0, "u": U, "f": float("nan")}
    text = encode_properties(props)
    assert list(json.loads(text)) == sorted(props)
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON {c}"))
    assert encode_properties(dict(reversed(list(props.items())))) == text
    decoded = decode_properties(text)
    assert sorted(decoded) == sorted(props)


def test_codec_plain_values_are_plain_json():
    text = encode_properties({"s": "v", "i": 1, "f": 2.5, "b": True, "n": None})
    assert json.loads(text) == {"s": "v", "i": 1, "f": 2.5, "b": True, "n": None}
    assert json.loads(encode_properties({"y": b"ab"})) == {"y": {"$b": "YWI="}}
    assert json.loads(encode_properties({"u": U})) == {"u": {"$u": str(U)}}
    assert json.loads(encode_properties({"t": T0})) == {"t": {"$t": "2030-01-01T00:00:00+00:00"}}


def test_codec_none_and_empty():
    assert encode_properties(None) is None
    assert decode_properties(None) == {}
    assert encode_properties({}) is None  # stored as none: the same size (SEND-5)
    assert decode_properties("{}") == {}


def test_codec_string_values_that_look_like_tags_stay_strings():
    props = {"k": '{"$b": "YWI="}', "$b": "x"}
    assert decode_properties(encode_properties(props)) == props


def test_codec_encode_rejects_bad_values():
    with pytest.raises(MessageTypeError):
        encode_properties({"k": [1]})
    with pytest.raises(MessageTypeError):
        encode_properties({1: "v"})
    with pytest.raises(MessageTypeError):
        encode_properties("k=v")
    with pytest.raises(InvalidMessageError):
        encode_properties({"k": 2 ** 64})


@pytest.mark.parametrize("text", [
    "not json", "[1]", '"s"', '{"k": [1]}', '{"k": {"$x": "1"}}', '{"k": {"$b": "!!"}}',
    '{"k": {"$t": "yesterday"}}', '{"k": {"$t": "2030-01-01T00:00:00"}}', '{"k": {"$u": "u"}}',
    '{"k": {"$u": 5}}', '{"k": {"$b": "x", "$t": "y"}}',
])
def test_codec_decode_rejects_foreign_text(text):
    with pytest.raises(InvalidMessageError):
        decode_properties(text)


def test_codec_decode_rejects_non_text():
    with pytest.raises(MessageTypeError):
        decode_properties(b"{}")


# --- received messages -------------------------------------------------------------------------


def received(**fields):
    base = {"sequence_number": 42, "body": b"hello", "enqueued_time_utc": T0}
    base.update(fields)
    return ServiceBusReceivedMessage._from_fields(**base)


def test_received_defaults():
    msg = received()
    assert isinstance(msg, ServiceBusMessage)
    assert msg.body == b"hello" and str(msg) == "hello"
    assert b"".join(msg.body) == b"hello" and msg.body_type is AmqpMessageBodyType.DATA
    assert msg.sequence_number == msg.enqueued_sequence_number == 42
    assert msg.enqueued_time_utc == T0
    assert msg.expires_at_utc is None
    assert msg.lock_token is None and msg.locked_until_utc is None
    assert msg.delivery_count == 0
    assert msg.state is ServiceBusMessageState.ACTIVE
    assert msg.dead_letter_reason is None
    assert msg.dead_letter_error_description is None
    assert msg.dead_letter_source is None
    assert msg.application_properties is None
    assert msg.time_to_live is None
    assert msg._receiver is None and msg._settled is False and msg._peeked is False
    assert msg._receive_mode is ServiceBusReceiveMode.PEEK_LOCK


def test_received_all_fields():
    token = uuid.uuid4()
    receiver = object()
    msg = received(
        application_properties=encode_properties({"b": True, "t": T0}),
        session_id="s", partition_key="s", message_id="m", content_type="ct",
        correlation_id="c", subject="sub", to="to", reply_to="rt", reply_to_session_id="rts",
        time_to_live=timedelta(hours=1), scheduled_enqueue_time_utc=T0,
        lock_token=token, locked_until_utc=T0 + timedelta(seconds=30), delivery_count=3,
        dead_letter_reason="r", dead_letter_error_description="d", dead_letter_source="q",
        state=1, receive_mode="receiveanddelete", receiver=receiver, peeked=True)
    assert msg.application_properties == {"b": True, "t": T0}
    assert (msg.session_id, msg.partition_key, msg.message_id) == ("s", "s", "m")
    assert (msg.content_type, msg.correlation_id, msg.subject, msg.to, msg.reply_to,
            msg.reply_to_session_id) == ("ct", "c", "sub", "to", "rt", "rts")
    assert msg.time_to_live == timedelta(hours=1)
    assert msg.expires_at_utc == T0 + timedelta(hours=1)
    assert msg.scheduled_enqueue_time_utc == T0
    assert msg.lock_token == str(token)
    assert msg.locked_until_utc == T0 + timedelta(seconds=30)
    assert msg.delivery_count == 3
    assert (msg.dead_letter_reason, msg.dead_letter_error_description,
            msg.dead_letter_source) == ("r", "d", "q")
    assert msg.state is ServiceBusMessageState.DEFERRED
    assert msg._receive_mode is ServiceBusReceiveMode.RECEIVE_AND_DELETE
    assert msg._receiver is receiver and msg._peeked is True and msg._settled is False


def test_received_skips_send_side_checks():
    big = received(body=b"x" * 10_000_000, message_id="m" * 300)
    assert big.size_in_bytes == 10_000_300 + HEADER_ALLOWANCE


def test_received_explicit_expiry_wins():
    msg = received(time_to_live=timedelta(hours=1), expires_at_utc=T0 + timedelta(minutes=5))
    assert msg.expires_at_utc == T0 + timedelta(minutes=5)


def test_received_datetimes_normalised_to_utc():
    msg = received(enqueued_time_utc=datetime(2030, 1, 1, 2, tzinfo=PLUS_2))
    assert msg.enqueued_time_utc == T0 and msg.enqueued_time_utc.utcoffset() == timedelta(0)


def test_received_properties_read_only():
    msg = received()
    for name in ["sequence_number", "enqueued_sequence_number", "enqueued_time_utc",
                 "expires_at_utc", "locked_until_utc", "lock_token", "delivery_count",
                 "dead_letter_reason", "dead_letter_error_description", "dead_letter_source",
                 "state"]:
        with pytest.raises(AttributeError):
            setattr(msg, name, None)


def test_received_message_fields_still_settable_and_checked():
    msg = received()
    msg.application_properties = {"k": 1}
    msg.subject = "again"
    assert msg.application_properties == {"k": 1} and msg.subject == "again"
    with pytest.raises(MessageTypeError):
        msg.application_properties = {"k": object()}


def test_received_set_lock():
    msg = received()
    token = uuid.uuid4()
    msg._set_lock(token, T0 + timedelta(minutes=1))
    assert msg.lock_token == str(token)
    assert msg.locked_until_utc == T0 + timedelta(minutes=1)
    msg._set_lock("abc", None)
    assert msg.lock_token == "abc" and msg.locked_until_utc is None
    msg._set_lock(None, None)
    assert msg.lock_token is None


def test_received_cannot_be_built_directly():
    with pytest.raises(TypeError, match="_from_fields"):
        ServiceBusReceivedMessage(b"x")


def test_received_repr():
    text = repr(received(lock_token="tok", delivery_count=2))
    assert text.startswith("ServiceBusReceivedMessage(body=hello")
    assert "sequence_number=42" in text and "delivery_count=2" in text
    assert "lock_token=tok" in text and "state=ACTIVE" in text


# --- batches -----------------------------------------------------------------------------------


def test_batch_adds_until_full():
    first, second = ServiceBusMessage(b"12345"), ServiceBusMessage(b"12345")
    limit = first.size_in_bytes * 2
    batch = ServiceBusMessageBatch(limit)
    assert batch.max_size_in_bytes == limit and batch.size_in_bytes == 0 and len(batch) == 0
    batch.add_message(first)
    batch.add_message(second)  # exactly full is allowed
    assert len(batch) == 2 and batch.size_in_bytes == limit
    assert batch.messages == [first, second]


def test_batch_overflow_raises_and_leaves_batch_unchanged():
    six, five = HEADER_ALLOWANCE + 6, HEADER_ALLOWANCE + 5
    batch = ServiceBusMessageBatch(six + five - 1)
    batch.add_message(ServiceBusMessage(b"123456"))
    with pytest.raises(MessageSizeExceededError,
                       match=rf"{five} bytes .*{six} \+ {five} > {six + five - 1}") as info:
        batch.add_message(ServiceBusMessage(b"12345"))
    assert isinstance(info.value, ValueError)
    assert len(batch) == 1 and batch.size_in_bytes == six


def test_batch_single_message_too_large():
    with pytest.raises(MessageSizeExceededError, match="max_size_in_bytes is 3"):
        ServiceBusMessageBatch(3).add_message(ServiceBusMessage(b"1234"))


def test_batch_counts_properties_and_fields():
    batch = ServiceBusMessageBatch(200)
    batch.add_message(ServiceBusMessage(b"ab", message_id="xyz", application_properties={"k": 1}))
    assert batch.size_in_bytes == HEADER_ALLOWANCE + 2 + 3 + len('{"k":1}')


def test_batch_messages_is_a_copy():
    batch = ServiceBusMessageBatch(100)
    batch.add_message(ServiceBusMessage("a"))
    batch.messages.append(ServiceBusMessage("b"))
    assert len(batch) == 1


def test_batch_accepts_received_messages():
    batch = ServiceBusMessageBatch(100)
    batch.add_message(received())
    assert len(batch) == 1


@pytest.mark.parametrize("item", ["text", b"bytes", None, ServiceBusMessageBatch(5)])
def test_batch_rejects_non_messages(item):
    with pytest.raises(MessageTypeError, match="ServiceBusMessage"):
        ServiceBusMessageBatch(100).add_message(item)


@pytest.mark.parametrize("size, error", [(0, InvalidMessageError), (-1, InvalidMessageError),
                                         (1.5, MessageTypeError), ("10", MessageTypeError),
                                         (True, MessageTypeError)])
def test_batch_max_size_checked(size, error):
    with pytest.raises(error, match="max_size_in_bytes"):
        ServiceBusMessageBatch(size)


def test_batch_repr():
    assert repr(ServiceBusMessageBatch(5)) == (
        "ServiceBusMessageBatch(max_size_in_bytes=5, message_count=0, size_in_bytes=0)")


# --- to_message_list -----------------------------------------------------------------------------


def test_to_message_list_forms():
    a, b = ServiceBusMessage("a"), ServiceBusMessage("b")
    assert to_message_list(a) == [a]
    assert to_message_list([a, b]) == [a, b]
    assert to_message_list((a, b)) == [a, b]
    assert to_message_list([]) == []
    assert to_message_list(()) == []
    batch = ServiceBusMessageBatch(100)
    batch.add_message(a)
    assert to_message_list(batch) == [a]
    assert to_message_list([received()])[0].sequence_number == 42


def test_to_message_list_returns_a_new_list():
    items = [ServiceBusMessage("a")]
    out = to_message_list(items)
    out.append(ServiceBusMessage("b"))
    assert len(items) == 1


@pytest.mark.parametrize("value", ["text", b"bytes", None, 5, {"a": 1},
                                   iter([ServiceBusMessage("a")])])
def test_to_message_list_rejects_other_types(value):
    with pytest.raises(MessageTypeError, match="messages has type"):
        to_message_list(value)


def test_to_message_list_names_the_bad_index():
    with pytest.raises(MessageTypeError, match=r"messages\[1\] has type str"):
        to_message_list([ServiceBusMessage("a"), "b"])
    with pytest.raises(MessageTypeError, match=r"messages\[0\] has type ServiceBusMessageBatch"):
        to_message_list((ServiceBusMessageBatch(10),))


# -- text that cannot be stored (issue 18: lone surrogates) --------------------------------------
@pytest.mark.parametrize("kwargs, field", [
    ({"body": "a\ud800b"}, "body"),
    ({"body": "x", "message_id": "id\udc00"}, "message_id"),
    ({"body": "x", "subject": "s\ud800"}, "subject"),
    ({"body": "x", "application_properties": {"k\ud800": 1}}, "an application_properties key"),
    ({"body": "x", "application_properties": {"k": "v\udfff"}}, "application_properties['k']"),
])
def test_lone_surrogates_are_refused_naming_field_and_position(kwargs, field):
    with pytest.raises(InvalidMessageError, match="lone surrogate") as raised:
        ServiceBusMessage(**kwargs)
    assert raised.value.message.startswith(field)
    assert "encodes as UTF-8" in raised.value.message


def test_a_field_set_later_is_checked_for_lone_surrogates_too():
    message = ServiceBusMessage("x")
    with pytest.raises(InvalidMessageError, match=r"correlation_id holds .* at position 3"):
        message.correlation_id = "abc\ud834"
    assert message.correlation_id is None
