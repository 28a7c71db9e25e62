"""Typed values as Spark Columns: application properties read from their JSON text with their
types, SQL values made of one column per kind, and the JSON text written back after an action.

The property bag
    A message's ``application_properties`` is JSON text (:func:`sbdelta._message.
    encode_properties`). Spark's ``from_json`` into ``map<string,string>`` would lose the
    difference between ``5`` and ``"5"`` (both become the text ``5``), so first every JSON string
    token gets an ``s`` put after its opening quote (one ``regexp_replace``: a token is ``"`` up
    to the next unescaped ``"``; as keys are strings too, matching never starts inside one).
    After ``from_json``, a value that was a JSON string reads ``s...``, while numbers, ``true``,
    ``false`` and tagged objects (``{"s$t":"s..."}``) come back as their JSON text, which no
    string can be mistaken for any more. Each value is then rewritten as *typed text*: one kind
    letter (:mod:`.nodes`) and the payload:

    ==========  =====================================  =====================================
    letter      JSON                                   payload
    ==========  =====================================  =====================================
    ``s``       ``"text"``                             the text
    ``l``       an integer within 64 bits              its digits
    ``d``       any other number, ``{"$f": ...}``      Spark's double text (NaN, Infinity)
    ``b``       ``true`` / ``false``                   ``true`` / ``false``
    ``t``       ``{"$t": "...+00:00"}``                the ISO text
    ``u``       ``{"$u": "..."}``                      the UUID, lower case
    ``y``       ``{"$b": "..."}``                      the base64 text
    (NULL)      ``null``                               (the key exists, its value is null)
    ==========  =====================================  =====================================

    The bag is ``map<string,string>`` from property name to typed text. A text that is not a
    JSON object, or names a key twice, gives no bag and an evaluation error instead.

Values
    A :class:`Val` is the Columns of one SQL value: ``kind`` (the letter, NULL when the value is
    unknown) and one column per kind it may have (``slots``), plus an error column (NULL when
    evaluation went well). Nothing here is a UDF, and no text of a rule or a message ever
    becomes Spark SQL text: names and constants enter only through ``F.lit``.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from datetime import datetime
from typing import Dict, FrozenSet, Optional, Tuple

from .nodes import BOOL, BYTES, DOUBLE, LONG, STRING, TIMESPAN, TIMESTAMP, UUID

# A JSON string token: the unrolled loop of possessive quantifiers (no backtracking, no deep
# recursion in Java's regex engine, even on a 256 KB text).
_STRING_TOKEN = r'(?s)"([^"\\]*+(?:\\.[^"\\]*+)*+)"'
_INTEGER = r"^-?[0-9]+$"
_NUMBER = r"^-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?$"
_TAGGED = r'^\{"s\$([tubf])":"s([^"\\]*)"\}$'
_LONG_MAX = "9223372036854775807"

#: The Spark type of each kind's slot.
SLOT_TYPES = {LONG: "bigint", DOUBLE: "double", STRING: "string", BOOL: "boolean",
              TIMESTAMP: "timestamp", UUID: "string", BYTES: "string", TIMESPAN: "bigint"}


def _f():
    from pyspark.sql import functions as F

    return F


def _string_map_type():
    from pyspark.sql.types import MapType, StringType

    return MapType(StringType(), StringType())


def first_error(*errors):
    """The first non-NULL error column of ``errors`` (None entries mean "never an error")."""
    F = _f()
    present = [e for e in errors if e is not None]
    if not present:
        return None
    return present[0] if len(present) == 1 else F.coalesce(*present)


# -- the bag -------------------------------------------------------------------------------------

def properties_bag(text) -> Tuple[object, object]:
    """``(bag, error)`` for a column of application-properties JSON text (see module doc)."""
    F = _f()
    keys = F.json_object_keys(text)
    broken = text.isNotNull() & (keys.isNull() | (F.size(F.array_distinct(keys)) != F.size(keys)))
    marked = F.regexp_replace(F.when(~broken, text), _STRING_TOKEN, '"s$1"')
    raw = F.from_json(marked, _string_map_type())
    bag = F.transform_values(F.transform_keys(raw, lambda k, v: k.substr(F.lit(2), F.length(k))),
                             lambda k, v: _typed_from_json(v))
    error = F.when(broken, F.lit("application_properties is not a JSON object with unique keys"))
    return bag, error


def _typed_from_json(v):
    F = _f()
    digits = F.regexp_replace(v, "^-", "")
    fits = ((F.length(digits) < 19) | ((F.length(digits) == 19) & (digits <= F.lit(_LONG_MAX)))
            | (v == F.lit("-9223372036854775808")))
    tag = F.regexp_extract(v, _TAGGED, 1)
    content = F.regexp_extract(v, _TAGGED, 2)
    special = (F.when(content == "nan", "NaN").when(content == "inf", "Infinity")
               .when(content == "-inf", "-Infinity"))
    tagged = (F.when(tag == "t", F.concat(F.lit(TIMESTAMP), content))
              .when(tag == "u", F.concat(F.lit(UUID), F.lower(content)))
              .when(tag == "b", F.concat(F.lit(BYTES), content))
              .when(tag == "f", F.concat(F.lit(DOUBLE), special)))
    return (F.when(v.startswith("s"), v)  # a JSON string: "s" is already its kind letter
            .when(v.isin("true", "false"), F.concat(F.lit(BOOL), v))
            .when(v.startswith("{"), tagged)
            .when(v.rlike(_INTEGER) & fits, F.concat(F.lit(LONG), v))
            .when(v.rlike(_NUMBER), F.concat(F.lit(DOUBLE), v)))


def lookup(bag, key) -> Tuple[object, object]:
    """``(typed text, present)`` of the property ``key`` (a Column) in ``bag``.

    Names match case-insensitively, as Service Bus property names do; a key spelled exactly
    like ``key`` wins over other spellings. ``present`` is true when the key exists, even with
    a null value (``EXISTS``).
    """
    F = _f()
    folded = F.lower(key)
    exact = F.coalesce(F.array_contains(F.map_keys(bag), key), F.lit(False))
    others = F.map_filter(bag, lambda k, v: F.lower(k) == folded)
    typed = F.when(exact, F.try_element_at(bag, key)).otherwise(F.get(F.map_values(others), F.lit(0)))
    present = exact | F.coalesce(F.size(others) > 0, F.lit(False))
    return typed, present


def set_property(bag, name: str, typed):
    """``bag`` with property ``name`` set to ``typed`` text; an existing key of another letter
    case keeps its spelling."""
    F = _f()
    key, folded = F.lit(name), F.lit(name.lower())
    same = F.map_filter(bag, lambda k, v: F.lower(k) == folded)
    target = F.coalesce(F.when(F.array_contains(F.map_keys(bag), key), key),
                        F.get(F.map_keys(same), F.lit(0)), key)
    rest = F.coalesce(remove_property(bag, name), F.create_map().cast(_string_map_type()))
    return F.map_concat(rest, F.create_map(target, typed))


def remove_property(bag, name: str):
    """``bag`` without property ``name`` (in any letter case)."""
    F = _f()
    folded = F.lit(name.lower())
    return F.map_filter(bag, lambda k, v: F.lower(k) != folded)


def render_bag(bag):
    """The JSON text of ``bag``, keys sorted, as :func:`encode_properties` writes it."""
    F = _f()
    entries = F.array_sort(F.map_entries(bag))
    members = F.transform(entries, lambda e: F.concat(_json_string(e["key"]), F.lit(":"),
                                                       _json_value(e["value"])))
    return F.concat(F.lit("{"), F.array_join(members, ","), F.lit("}"))


def _json_string(text):
    F = _f()
    quoted = F.to_json(F.array(text))  # ["..."]: Spark's JSON escaping
    return quoted.substr(F.lit(2), F.length(quoted) - 2)


def _json_value(typed):
    F = _f()
    kind, payload = kind_of(typed), payload_of(typed)

    def tagged(tag: str):
        return F.concat(F.lit('{"' + tag + '":"'), payload, F.lit('"}'))

    double = (F.when(payload == "NaN", F.lit('{"$f":"nan"}'))
              .when(payload == "Infinity", F.lit('{"$f":"inf"}'))
              .when(payload == "-Infinity", F.lit('{"$f":"-inf"}')).otherwise(payload))
    return (F.when(typed.isNull(), F.lit("null"))
            .when(kind == STRING, _json_string(payload))
            .when(kind.isin(LONG, BOOL), payload)
            .when(kind == DOUBLE, double)
            .when(kind == TIMESTAMP, tagged("$t"))
            .when(kind == UUID, tagged("$u"))
            .when(kind == BYTES, tagged("$b"))
            .otherwise(F.lit("null")))


def kind_of(typed):
    return typed.substr(1, 1)


def payload_of(typed):
    F = _f()
    return typed.substr(F.lit(2), F.length(typed))


# -- values ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Val:
    """The Columns of one SQL value (see the module doc)."""

    kinds: FrozenSet[str]
    kind: object
    slots: Dict[str, object] = field(default_factory=dict)
    error: Optional[object] = None
    known: Optional[str] = None  # a constant's kind, known when the rule is compiled

    def is_kind(self, kind: str):
        """Column: the value has ``kind``. Decided here for a constant (Spark would otherwise
        compare two equal literals, and log a warning for each such comparison)."""
        if self.known is not None:
            return _f().lit(self.known == kind)
        return self.kind == kind

    def slot(self, kind: str):
        return self.slots[kind]

    def double(self, kind: str):
        """The value as a double, given that it has ``kind`` (integer or float)."""
        return self.slots[LONG].cast("double") if kind == LONG else self.slots[DOUBLE]

    def with_error(self, error) -> "Val":
        return Val(self.kinds, self.kind, self.slots, first_error(self.error, error), self.known)


def null_val() -> Val:
    F = _f()
    return Val(frozenset(), F.lit(None).cast("string"))


def const_val(value: object, kind: Optional[str]) -> Val:
    """A constant (a literal or a parameter) of ``kind`` (None: NULL)."""
    F = _f()
    if kind is None or value is None:
        return null_val()
    if kind == UUID:
        value = str(value).lower()
    elif kind == BYTES:
        value = base64.b64encode(value).decode("ascii")
    column = F.lit(value)
    if kind != TIMESTAMP or not isinstance(value, datetime):
        column = column.cast(SLOT_TYPES[kind])
    return Val(frozenset(kind), F.lit(kind), {kind: column}, known=kind)


def column_val(column, kind: str) -> Val:
    """A value read from a message column (NULL stays unknown)."""
    F = _f()
    return Val(frozenset(kind), F.when(column.isNotNull(), F.lit(kind)),
               {kind: column.cast(SLOT_TYPES[kind])})


def typed_val(typed, kinds: FrozenSet[str], error=None) -> Val:
    """A value held as typed text (a property from the bag)."""
    F = _f()
    kind, payload = kind_of(typed), payload_of(typed)
    slots = {}
    for k in kinds:
        text = payload if k != BOOL else payload == "true"
        slots[k] = F.when(kind == k, text.cast(SLOT_TYPES[k]) if k != BOOL else text)
    return Val(kinds, F.when(kind.isin(*sorted(kinds)), kind), slots, error)


def to_typed(val: Val):
    """The typed text of ``val`` (NULL for unknown), to store with ``SET``.

    A timespan (``sys.TimeToLive``) is stored as an integer number of milliseconds: the
    property codec has no duration type.
    """
    F = _f()
    result = None
    for k in sorted(val.kinds):
        slot = val.slots[k]
        if k == BOOL:
            text = F.concat(F.lit(BOOL), F.when(slot, "true").otherwise("false"))
        elif k == TIMESTAMP:
            text = F.concat(F.lit(TIMESTAMP), iso_utc(slot))
        elif k == TIMESPAN:
            text = F.concat(F.lit(LONG), slot.cast("string"))
        else:
            text = F.concat(F.lit(k), slot.cast("string"))
        result = F.when(val.is_kind(k), text) if result is None else result.when(val.is_kind(k),
                                                                                text)
    return result if result is not None else F.lit(None).cast("string")


def iso_utc(ts):
    """``YYYY-MM-DDTHH:MM:SS[.ffffff]+00:00`` for a timestamp column, as Python's isoformat."""
    F = _f()
    utc = F.to_utc_timestamp(ts, F.expr("current_timezone()"))  # fixed text: no data in it
    micros = F.pmod(F.unix_micros(ts), F.lit(1000000))
    fraction = F.when(micros != 0, F.concat(F.lit("."), F.lpad(micros.cast("string"), 6, "0")))
    return F.concat(F.date_format(utc, "yyyy-MM-dd'T'HH:mm:ss"),
                    F.coalesce(fraction, F.lit("")), F.lit("+00:00"))
