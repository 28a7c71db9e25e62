"""AMQP VALUE and SEQUENCE bodies, and the bytes they are stored as (issue 17). Pure Python.

A message body has one of three AMQP forms (``sbdelta.amqp.AmqpMessageBodyType``). DATA, the
form of every ``ServiceBusMessage(str | bytes)``, is stored as the body's bytes. A VALUE body
(one AMQP value) or a SEQUENCE body (a list of sequence sections, each a list of values) comes
from an ``AmqpAnnotatedMessage`` and is stored as type-preserving JSON in UTF-8 in the same
``body`` column, with the form in the ``body_type`` column (NULL for DATA, so rows written
before the column existed read as DATA).

The JSON keeps each value's type as :mod:`sbdelta._app_properties` does for properties: None,
bool, str, finite float and 64-bit int as they are; bytes, datetimes, UUIDs and non-finite
floats as one-key tagged objects (``{"$b": ...}``...); lists (and tuples) as arrays; a dict
whose keys are all str not starting with ``$`` as an object, any other dict as
``{"$m": [[key, value], ...]}`` (tuple keys come back as tuples). The size rule (SEND-5)
counts the stored bytes.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any, Optional, Tuple

from sbdelta._app_properties import tagged, untagged
from sbdelta._clock import utc
from sbdelta.amqp import AmqpMessageBodyType
from sbdelta.exceptions import InvalidMessageError, MessageTypeError

#: The body forms stored as JSON, by the value the ``body_type`` column holds.
STORED_FORMS = {form.value: form for form in (AmqpMessageBodyType.VALUE,
                                              AmqpMessageBodyType.SEQUENCE)}
_INT64 = (-2 ** 63, 2 ** 63 - 1)
_MAP = "$m"
_ALLOWED = ("None, bool, str, int (64-bit), float, bytes, datetime, uuid.UUID, and lists, "
            "tuples and dicts of them")


def _json(value: Any, where: str, depth: int = 0) -> Any:
    if depth > 64:
        raise InvalidMessageError(f"{where} nests deeper than 64 levels")
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise InvalidMessageError(f"{where} is the integer {value}, beyond 64 bits; "
                                      f"allowed: {_INT64[0]} to {_INT64[1]}")
        return value
    if isinstance(value, float):
        return tagged(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return tagged(bytes(value))
    if isinstance(value, datetime):
        return tagged(utc(value))
    if isinstance(value, uuid.UUID):
        return tagged(value)
    if isinstance(value, (list, tuple)):
        return [_json(item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value)]
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in value):
            return {k: _json(v, f"{where}[{k!r}]", depth + 1) for k, v in value.items()}
        return {_MAP: [[_json(k, f"a key of {where}", depth + 1),
                        _json(v, f"{where}[{k!r}]", depth + 1)] for k, v in value.items()]}
    raise MessageTypeError(f"{where} holds a value of type {type(value).__name__}; an AMQP "
                           f"body value may be {_ALLOWED}")


def _key(value: Any) -> Any:
    return tuple(_key(v) for v in value) if isinstance(value, list) else value


def _value(data: Any, what: str) -> Any:
    if isinstance(data, list):
        return [_value(item, what) for item in data]
    if not isinstance(data, dict):
        return data
    if len(data) == 1:
        ((key, inner),) = data.items()
        if key == _MAP:
            return {_key(_value(k, what)): _value(v, what) for k, v in inner}
        if key.startswith("$"):
            return untagged(what, data)
    return {k: _value(v, what) for k, v in data.items()}


def encode_body(form: AmqpMessageBodyType, body: Any) -> bytes:
    """The stored bytes of a VALUE body (``body``: the value) or a SEQUENCE body (``body``:
    its sections). Raises MessageTypeError or InvalidMessageError for what cannot be stored."""
    where = "value_body" if form is AmqpMessageBodyType.VALUE else "sequence_body"
    return json.dumps(_json(body, where), separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def decode_body(stored_form: Optional[str], data: bytes) -> Tuple[AmqpMessageBodyType, Any]:
    """The body form and body of a stored row: ``(DATA, data)`` when ``stored_form`` is NULL,
    else the value (VALUE) or the list of sections (SEQUENCE) the JSON holds."""
    if stored_form is None or stored_form == AmqpMessageBodyType.DATA.value:
        return AmqpMessageBodyType.DATA, data
    form = STORED_FORMS.get(stored_form)
    if form is None:
        raise InvalidMessageError(f"a stored message has the body type {stored_form!r}; known: "
                                  "data, value, sequence")
    what = f"a stored {form.value} body"
    try:
        parsed = json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidMessageError(f"{what} is not JSON: {exc}") from None
    return form, _value(parsed, what)


def body_of(message: Any) -> Tuple[AmqpMessageBodyType, Any]:
    """A message's body form and body (a SEQUENCE body as the list of its sections), from its
    public ``body_type`` and ``body``: what a copy of it is sent with."""
    form = message.body_type
    if form is AmqpMessageBodyType.SEQUENCE:
        return form, list(message.body)
    return form, message.body


def stored_body(message: Any) -> bytes:
    """The bytes a message's body is stored as: a DATA body's bytes, or the JSON of a VALUE or
    SEQUENCE body (:func:`encode_body`)."""
    form, body = body_of(message)
    if form is AmqpMessageBodyType.DATA:
        return bytes(body)
    return encode_body(form, body)


def stored_form(message: Any) -> Optional[str]:
    """What the ``body_type`` column holds for a message: NULL for DATA, else its form."""
    form = message.body_type
    return None if form is AmqpMessageBodyType.DATA else form.value
