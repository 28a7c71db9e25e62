"""The checks of a message's fields, as azure-servicebus applies them when a field is set.

Pure Python. Each check returns the value as sbdelta stores it (plain types, aware UTC
datetimes) or raises the sbdelta error that says what is wrong and what is allowed.
"""

from __future__ import annotations

import math
import uuid
from datetime import datetime, timedelta
from typing import Any, Dict, Mapping, Optional

from sbdelta._clock import as_utc
from sbdelta._durations import UNLIMITED_FROM, parse_duration
from sbdelta.amqp import DataBody
from sbdelta.exceptions import (InvalidMessageError, InvalidPropertyError, MessageTypeError,
                                ServiceBusInvalidOperationError)

#: The longest message_id, session_id and partition_key Service Bus accepts, in characters.
MAX_ID_LENGTH = 128

#: The system properties that are strings; each counts towards ``size_in_bytes`` when set.
SYSTEM_STRING_FIELDS = ("message_id", "session_id", "partition_key", "content_type",
                        "correlation_id", "subject", "to", "reply_to", "reply_to_session_id")

_ID_FIELDS = frozenset({"message_id", "session_id", "partition_key"})

_INT64_MIN = -(2 ** 63)
_INT64_MAX = 2 ** 63 - 1

PROPERTY_TYPES = ("str, int (64-bit), float, bool, bytes, datetime.datetime, uuid.UUID or None")

_BODY_TYPES = "str (stored as UTF-8), bytes, bytearray, memoryview or None (empty body)"

_TTL_ACCEPTED = (
    "accepted: a datetime.timedelta, an ISO-8601 duration string such as 'PT30S' or 'P1D', or "
    "a number of seconds (int or float), longer than zero; None uses the entity's "
    "default_message_time_to_live"
)



def type_name(value: object) -> str:
    return type(value).__name__


def valid_text(field: str, text: str) -> str:
    """``text`` if it encodes as UTF-8 (how every string is stored), else InvalidMessageError
    naming the lone surrogate and where it is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidMessageError(
            f"{field} holds a lone surrogate {text[exc.start]!r} at position {exc.start}, "
            "which is not valid Unicode; allowed: text that encodes as UTF-8") from None
    return text


def check_body(body: object) -> DataBody:
    """The body as sbdelta stores it: bytes (iterating as the SDK's DATA body does)."""
    if body is None:
        return DataBody(b"")
    if isinstance(body, str):
        return DataBody(valid_text("body", body).encode("utf-8"))
    if isinstance(body, (bytes, bytearray, memoryview)):
        return DataBody(body)
    raise MessageTypeError(f"body has type {type_name(body)}; allowed: {_BODY_TYPES}")


def check_property_value(key: str, value: object) -> object:
    """``value`` normalised (plain types, aware UTC datetimes), or an error naming ``key``."""
    if value is None:
        return None
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise InvalidMessageError(
                f"application_properties[{key!r}]={value} is outside the 64-bit integer range "
                f"[-2**63, 2**63 - 1]")
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return valid_text(f"application_properties[{key!r}]", str.__str__(value))
    if isinstance(value, bytes):
        return bytes(value)
    if isinstance(value, datetime):
        return as_utc(value)
    if isinstance(value, uuid.UUID):
        return value
    raise MessageTypeError(
        f"application_properties[{key!r}] has type {type_name(value)}; allowed: "
        f"{PROPERTY_TYPES}")


def check_properties(props: object) -> Optional[Dict[str, Any]]:
    if props is None:
        return None
    if not isinstance(props, Mapping):
        raise MessageTypeError(
            f"application_properties has type {type_name(props)}; allowed: a dict with str keys "
            f"and values of type {PROPERTY_TYPES}, or None")
    out: Dict[str, Any] = {}
    for key, value in props.items():
        if not isinstance(key, str):
            raise MessageTypeError(
                f"application_properties key {key!r} has type {type_name(key)}; keys must be str")
        key = valid_text("an application_properties key", str.__str__(key))
        out[key] = check_property_value(key, value)
    return out


def check_string(field: str, value: object) -> Optional[str]:
    if value is None:
        return None
    if not isinstance(value, str):
        limit = f" of 1 to {MAX_ID_LENGTH} characters" if field in _ID_FIELDS else ""
        raise MessageTypeError(
            f"{field} has type {type_name(value)}; allowed: a str{limit} or None")
    value = valid_text(field, str.__str__(value))
    if field in _ID_FIELDS:
        if not value:
            raise InvalidMessageError(
                f"{field} is empty; allowed: a str of 1 to {MAX_ID_LENGTH} characters, or None")
        if len(value) > MAX_ID_LENGTH:
            raise InvalidMessageError(
                f"{field} is {len(value)} characters long; at most {MAX_ID_LENGTH} are allowed")
    return value


def check_part_2(session_id: Optional[str], partition_key: Optional[str]) -> None:
    if session_id is not None and partition_key is not None and session_id != partition_key:
        raise ServiceBusInvalidOperationError(
            f"partition_key={partition_key!r} differs from session_id={session_id!r}: when both "
            f"are set they must be equal (PART-2); set partition_key=None, or to the session_id")


def check_ttl(value: object) -> Optional[timedelta]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (timedelta, str, int, float)):
        raise MessageTypeError(f"time_to_live has type {type_name(value)}; {_TTL_ACCEPTED}")
    if isinstance(value, str):
        try:
            return parse_duration(value, field="time_to_live")
        except InvalidPropertyError as exc:
            raise InvalidMessageError(
                f"time_to_live must be positive and well-formed: {exc.message}; a number of "
                f"seconds (int or float) is accepted too") from None
    if isinstance(value, timedelta):
        td = value
    else:
        if math.isnan(value) or value <= 0:
            raise InvalidMessageError(f"time_to_live must be positive, got {value!r}; "
                                      f"{_TTL_ACCEPTED}")
        if value >= UNLIMITED_FROM.total_seconds():
            return None
        td = timedelta(seconds=value)
    if td <= timedelta(0):
        raise InvalidMessageError(f"time_to_live must be positive, got {value!r}; {_TTL_ACCEPTED}")
    return parse_duration(td, field="time_to_live")  # TimeSpan.MaxValue or longer -> None


def check_moment(field: str, value: object) -> Optional[datetime]:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise MessageTypeError(
            f"{field} has type {type_name(value)}; allowed: a datetime.datetime (naive values "
            f"are taken as UTC) or None")
    return as_utc(value)
