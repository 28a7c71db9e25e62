"""The send codec: a message and its inbox row, and the rules a row meets before it is stored.

One size rule (SEND-5) for every send form
    :mod:`sbdelta._size` defines it once; Python applies it per message (``inbox_rows``,
    ``ServiceBusMessage.size_in_bytes``), Spark as a Column inside ``send_dataframe``'s write
    (:func:`size_column`).

Application properties given as JSON text (``send_dataframe``)
    Receivers decode the stored text with :func:`sbdelta._app_properties.decode_properties`; a row it
    cannot decode would fail every receive that meets it, after the receive's lock committed.
    So a JSON text column must match :data:`PROPERTIES_JSON`: a JSON object whose values are
    strings, numbers (integers within 64 bits, as ``ServiceBusMessage`` allows), true, false,
    null, or a tagged value exactly as ``encode_properties`` writes it (``{"$b": base64}``,
    ``{"$t": "YYYY-MM-DDTHH:MM:SS[.ffffff]+00:00"}``, ``{"$u": UUID}``,
    ``{"$f": "nan" | "inf" | "-inf"}``), so ``receive_dataframe`` output can be sent on. The
    pattern is a regular language with possessive quantifiers only, so Java's regex engine
    checks a 256 KB text without backtracking or deep recursion.

Checks inside the write
    ``send_dataframe`` runs no job of its own to validate rows: each checked column of its
    projection is wrapped by :func:`checked`, which evaluates ``raise_error`` with a
    ``SBDELTA_GUARD:<code>`` marker (:mod:`._delta`) on a bad row. The write job then fails and
    nothing commits; :func:`send_error` turns the code into the sbdelta error for the caller.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Type

from .._clock import utc
from .._durations import expiry
from .._amqp_body import stored_body, stored_form
from .._app_properties import encode_properties
from .._message import ServiceBusMessage
from .._message_fields import MAX_ID_LENGTH, SYSTEM_STRING_FIELDS
from .._size import SIZE_RULE, byte_length, message_size
from ..exceptions import (MessageSizeExceededError, ServiceBusError,
                          ServiceBusInvalidOperationError)
from .guards import guard
from .layout import MAX_ROWS_PER_PARTITION_PER_COMMIT, MSG, PING, PING_CONTENT_TYPE

# -- SEND-5: the size rule (sbdelta._size) as a Column ------------------------------------

def _column_byte_length(column):
    from pyspark.sql import functions as F

    return F.coalesce(F.octet_length(column), F.lit(0))


def _system_strings(message: ServiceBusMessage) -> List[Optional[str]]:
    return [getattr(message, field) for field in SYSTEM_STRING_FIELDS]


def size_column(body, properties, strings: Sequence):
    """The same rule as a Spark Column over a row's columns (binary body, JSON text)."""
    return message_size(_column_byte_length, body, properties, strings)


def too_large(what: str, size: Optional[int], limit: int, entity: str) -> MessageSizeExceededError:
    """The SEND-5 error, for both send forms."""
    found = f"is {size} bytes" if size is not None else "is larger than that"
    return MessageSizeExceededError(
        f"{what} {found}; {entity} accepts at most {limit} bytes "
        f"(max_message_size_in_kilobytes={limit // 1024}), and {SIZE_RULE}. Nothing was sent")


# -- message -> inbox row (send_messages, schedule_messages) -----------------------------------

def inbox_rows(messages: Sequence[ServiceBusMessage], *, now: datetime,
               schedule: Optional[datetime], ttl_cap: Optional[timedelta], limit: int,
               entity: str, partition: Callable[[ServiceBusMessage], int],
               hops: Optional[int] = None) -> List[Tuple]:
    """The inbox rows (``INBOX_COLUMNS`` order) of one send, all checked before any is built.

    ``partition`` chooses each message's partition (PART-2, the sender's policy); ``ttl_cap``
    is the entity's TTL-3 cap; ``schedule`` overrides the messages' own scheduled times;
    ``hops`` the forwarding hops crossed on the way (FWD-3, a send to a queue that forwards).

    Raises:
        MessageSizeExceededError: a message is larger than ``limit`` (SEND-5); nothing is built.
        ServiceBusInvalidOperationError: more messages fall into one partition than one commit
            can number.
    """
    counters: Dict[int, int] = {}
    rows = []
    for position, message in enumerate(messages):
        properties = encode_properties(message.application_properties)
        strings = _system_strings(message)
        body = stored_body(message)
        size = message_size(byte_length, body, properties, strings)
        if size > limit:
            raise too_large(f"message {position}", size, limit, entity)
        scheduled = schedule or message.scheduled_enqueue_time_utc
        scheduled = utc(scheduled) if scheduled is not None else None
        if scheduled is not None and scheduled <= now:
            scheduled = None  # due already: enqueued now, like any message
        enqueued = scheduled or now
        ttl = message.time_to_live
        if ttl is not None and ttl_cap is not None:
            ttl = min(ttl, ttl_cap)  # TTL-3
        expires = expiry(enqueued, ttl)  # TTL-1/2/7
        pid = partition(message)
        idx = counters.get(pid, 0)
        if idx >= MAX_ROWS_PER_PARTITION_PER_COMMIT:
            raise ServiceBusInvalidOperationError(
                f"at most {MAX_ROWS_PER_PARTITION_PER_COMMIT} messages per partition fit in "
                "one send; split the batch")
        counters[pid] = idx + 1
        kind = PING if message.content_type == PING_CONTENT_TYPE else MSG
        message_id, *other_strings = strings
        rows.append((pid, idx, kind, message_id, bytearray(body), properties,
                     *other_strings,
                     None if ttl is None else int(ttl / timedelta(milliseconds=1)),
                     enqueued, scheduled, expires, size, hops, stored_form(message)))
    return rows


# -- DataFrame rows: checks evaluated inside the write -----------------------------------------

def checked(column, bad, code: str):
    """``column``, or (where ``bad`` holds) a failure of the whole write with ``code``."""
    from pyspark.sql import functions as F

    return F.when(bad, F.expr(guard(code))).otherwise(column)


def bad_id(column):
    """An id that ServiceBusMessage would refuse: empty or longer than MAX_ID_LENGTH."""
    from pyspark.sql import functions as F

    length = F.char_length(column)
    return (length == 0) | (length > MAX_ID_LENGTH)


_WS = r"[ \t\n\r]*+"
_STRING = r'"[^"\\\x00-\x1f]*+(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*+)*+"'
_DIGITS = r"-?+(?:0|[1-9][0-9]*+)"
_FLOAT = _DIGITS + r"(?:\.[0-9]++(?:[eE][+-]?+[0-9]++)?+|[eE][+-]?+[0-9]++)"


def _at_most(limit: str) -> str:
    """Decimal numbers of ``len(limit)`` digits, no leading zero, that are <= ``limit``."""
    lower = [limit[:i] + f"[{1 if i == 0 else 0}-{int(d) - 1}][0-9]{{{len(limit) - i - 1}}}"
             for i, d in enumerate(limit) if int(d) > (1 if i == 0 else 0)]
    return "(?:" + "|".join(lower + [limit]) + ")"


# Longest alternative first, everywhere: a possessive group keeps the first way its content
# matches, so "9223372036854775807" must not be taken as 18 digits plus a stray "7".
_INT64 = ("(?:" + str(-2 ** 63) + "|-?+(?:" + _at_most(str(2 ** 63 - 1))
          + "|[1-9][0-9]{0,17}+|0))")
_LEAP_YEAR = r"(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)"
_DATE = (r"(?!0000)(?:[0-9]{4}-(?:(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])"
         r"|(?:0[13-9]|1[0-2])-(?:29|30)|(?:0[13578]|1[02])-31)|" + _LEAP_YEAR + "-02-29)")
_UTC_TIME = r"(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{6})?+\+00:00"
_TAGS = {
    "b": r"(?:[A-Za-z0-9+/]{4})*+(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?+",
    "t": _DATE + "T" + _UTC_TIME,
    "u": r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
    "f": r"(?:nan|inf|-inf)",
}
_TAGGED = (r"\{" + _WS + "(?:" + "|".join(f'"\\${tag}"{_WS}:{_WS}"{text}"'
                                            for tag, text in _TAGS.items()) + ")" + _WS + r"\}")
_VALUE = "(?:" + "|".join([_STRING, _FLOAT, _INT64, "true", "false", "null", _TAGGED]) + ")"
_MEMBER = _STRING + _WS + ":" + _WS + _VALUE + _WS

#: A JSON object of scalars that decode_properties reads (match the whole text).
PROPERTIES_JSON = (_WS + r"\{" + _WS + "(?:" + _MEMBER + "(?:," + _WS + _MEMBER + ")*+)?+"
                   + r"\}" + _WS)


def checked_properties(column):
    """A JSON text column of application properties, failing the write on a row that is not
    :data:`PROPERTIES_JSON`, with a code that says which part of the rule it breaks."""
    from pyspark.sql import functions as F

    # Java regex: \A and \z anchor the whole text (rlike finds a match anywhere).
    good = column.isNull() | column.rlike(r"\A(?:" + PROPERTIES_JSON + r")\z")
    why = (F.when(~F.ltrim(column).startswith("{"), F.expr(guard("SEND_PROPERTIES_NOT_OBJECT")))
           .when(F.json_object_keys(column).isNull(),
                 F.expr(guard("SEND_PROPERTIES_NOT_JSON")))
           .otherwise(F.expr(guard("SEND_PROPERTIES_NOT_SCALAR"))))
    return F.when(good, column).otherwise(why)


_ROW_RULES: Dict[str, Tuple[Type[ServiceBusError], str]] = {
    "SEND_PROPERTIES_NOT_OBJECT": (
        ServiceBusInvalidOperationError,
        'a row\'s application_properties is not a JSON object ({"key": value, ...}): it is a '
        "bare scalar, an array, or text that is not JSON"),
    "SEND_PROPERTIES_NOT_JSON": (
        ServiceBusInvalidOperationError,
        "a row's application_properties is not valid JSON (keys must be double-quoted strings; "
        "NaN and Infinity are not JSON)"),
    "SEND_PROPERTIES_NOT_SCALAR": (
        ServiceBusInvalidOperationError,
        "a row's application_properties holds a value that is not a scalar: values must be "
        "strings, numbers (integers within 64 bits), true, false, null, or a tagged value as "
        'receive_dataframe returns them ({"$b": base64}, {"$t": "...+00:00"}, {"$u": UUID}, '
        '{"$f": "nan"|"inf"|"-inf"}); nested objects and arrays are not allowed'),
    "SEND_KEYS_DIFFER": (
        ServiceBusInvalidOperationError,
        "a row has session_id and partition_key set to different values; they must be equal "
        "(PART-2)"),
    "SEND_NO_SESSION": (
        ServiceBusInvalidOperationError,
        "a row has no session_id, and the entity requires sessions (requires_session=True): "
        "every row needs a session_id of 1 to 128 characters (SESS-1)"),
    "SEND_TTL": (
        ServiceBusInvalidOperationError,
        "a row has a time_to_live that is not a positive number of seconds (<= 0, under a "
        "millisecond, or NaN); it must be one, or null for the queue's default"),
    "SEND_PARTITION_FULL": (
        ServiceBusInvalidOperationError,
        f"more than {MAX_ROWS_PER_PARTITION_PER_COMMIT} rows fall into one partition; split the "
        "DataFrame into several sends"),
    **{f"SEND_{field.upper()}": (
        ServiceBusInvalidOperationError,
        f"a row's {field} is empty or longer than {MAX_ID_LENGTH} characters; allowed: 1 to "
        f"{MAX_ID_LENGTH} characters, or null") for field in ("message_id", "session_id",
                                                               "partition_key")},
}


def send_error(code: str, *, limit: int, entity: str) -> ServiceBusError:
    """The sbdelta error for a row check that failed a send's write with ``code``."""
    if code == "SEND_TOO_LARGE":
        return too_large("a row of the DataFrame", None, limit, entity)
    cls, text = _ROW_RULES.get(code, (ServiceBusError, f"the send was refused ({code})"))
    return cls(f"send_dataframe: {text}. Nothing was sent")
