"""Application properties as one STRING column: type-preserving JSON.

:func:`encode_properties` keeps every value's type (``True`` stays a bool, ``1`` an int, ``1.0`` a
float). Plain JSON scalars are written as they are, so SQL filters can read them with
``get_json_object``; bytes, datetimes, UUIDs and non-finite floats are written as one-key objects
(``{"$b": ...}``, ``{"$t": ...}``, ``{"$u": ...}``, ``{"$f": ...}``). Pure Python.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import uuid
from datetime import datetime
from typing import Any, Dict, Mapping, Optional

from sbdelta._clock import utc
from sbdelta._message_fields import check_properties, check_property_value, type_name
from sbdelta.exceptions import InvalidMessageError, MessageTypeError


def tagged(value: object) -> object:
    """The JSON form of a scalar: itself, or a one-key tagged object for bytes, datetimes,
    UUIDs and non-finite floats (the value is not checked: see :func:`encode_properties`)."""
    if isinstance(value, float) and not math.isfinite(value):
        return {"$f": repr(value)}  # 'nan', 'inf', '-inf': strict JSON has no such numbers
    if isinstance(value, bytes):
        return {"$b": base64.b64encode(value).decode("ascii")}
    if isinstance(value, datetime):
        return {"$t": value.isoformat()}
    if isinstance(value, uuid.UUID):
        return {"$u": str(value)}
    return value


def _encode_value(key: str, value: object) -> object:
    return tagged(check_property_value(key, value))


def encode_properties(props: Optional[Mapping[str, Any]]) -> Optional[str]:
    """Application properties as type-preserving JSON with sorted keys, for a STRING column.

    str, int, finite float, bool and None are plain JSON values; bytes are ``{"$b": base64}``,
    datetimes ``{"$t": ISO-8601 in UTC}`` (naive taken as UTC), UUIDs ``{"$u": text}``, and
    NaN and infinities ``{"$f": "nan" | "inf" | "-inf"}``. ``None`` and an empty dict give
    ``None``: no properties are stored as none, so a message counts the same size (SEND-5)
    sent with ``{}``, without properties, or received (whose properties are then ``{}``).

    Raises:
        MessageTypeError, InvalidMessageError: As for ``ServiceBusMessage.application_properties``.
    """
    checked = check_properties(props)
    if not checked:
        return None
    encoded = {key: _encode_value(key, value) for key, value in checked.items()}
    return json.dumps(encoded, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def _decode_value(key: str, value: object) -> object:
    if not isinstance(value, dict):
        if isinstance(value, list):
            raise InvalidMessageError(f"stored application property {key!r} is a JSON array")
        return value
    return untagged(f"stored application property {key!r}", value)


def untagged(what: str, value: dict) -> object:
    """The scalar a one-key object of :func:`tagged` stands for; ``what`` names it in the
    InvalidMessageError raised for anything else."""
    if len(value) != 1:
        raise InvalidMessageError(f"{what} is not a tagged value: {value!r}")
    ((tag, text),) = value.items()
    try:
        if tag == "$b":
            return base64.b64decode(text, validate=True)
        if tag == "$t":
            return utc(datetime.fromisoformat(text))
        if tag == "$u":
            return uuid.UUID(text)
        if tag == "$f":
            return float(text)
    except (TypeError, ValueError, AttributeError, binascii.Error) as exc:
        raise InvalidMessageError(f"{what} has a bad {tag} value {text!r}: {exc}") from None
    raise InvalidMessageError(f"{what} has an unknown tag {tag!r}; known: $b, $t, $u, $f")


def decode_properties(text: Optional[str]) -> Dict[str, Any]:
    """Application properties from :func:`encode_properties` text; ``None`` gives ``{}``.

    Raises:
        MessageTypeError: ``text`` is not a str or None.
        InvalidMessageError: ``text`` is not JSON written by :func:`encode_properties`.
    """
    if text is None:
        return {}
    if not isinstance(text, str):
        raise MessageTypeError(f"stored application properties have type {type_name(text)}; "
                               f"expected JSON text or None")
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise InvalidMessageError(f"stored application properties are not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise InvalidMessageError(
            f"stored application properties are a JSON {type_name(raw)}, not an object")
    return {key: _decode_value(key, value) for key, value in raw.items()}
