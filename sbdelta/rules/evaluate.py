"""Filters evaluated in Python over one message's values: what :mod:`.compile` and
:mod:`.correlation` build as Spark Columns, for the engine that has no Spark (the delta-rs
path of subscription receives and topic forwarding, issue 16, works on a handful of rows).

The semantics are :mod:`.compile`'s, value for value and error text for error text
(``tests/store/test_rules_spark.py`` runs both over the same messages and requires the same
``(matched, error)``): unknown values and three-valued logic, C#'s numeric promotion, 64-bit
integer arithmetic with its errors, IEEE floats, LIKE with an escape character, AND and OR
skipping their right side once the left side decides, properties read from the JSON text with
their types (:mod:`.values`: a nested object or array is unknown, a text that is not a JSON
object with unique keys is an evaluation error of every property read).

A value is ``(kind, payload)``: ``kind`` is one letter of :mod:`.nodes` or None (unknown), and
the payload the Python value (int, float, str, bool, an aware datetime, a UUID or base64 text,
a timespan's milliseconds). A kind with a None payload is a value Spark would hold as a typed
NULL (an overflowed integer, an unreadable timestamp): it is not unknown to ``IS NULL``, and
compares as unknown.

:func:`evaluate_action` runs a SQL action's statements over the properties and renders them
as :func:`.values.render_bag` does (keys sorted, Jackson's string escapes, doubles as Java's
``Double.toString`` writes them, ``1.0E10``), so that a copy made here is byte for byte the one
Spark makes.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Dict, Mapping, Optional, Tuple

from .._properties import CorrelationRuleFilter, FalseRuleFilter, TrueRuleFilter
from .correlation import CORRELATION_COLUMNS
from .nodes import (BOOL, BYTES, DOUBLE, KIND_NAMES, LONG, STRING, TIMESPAN, TIMESTAMP, UUID,
                    ActionExpr, And, Arith, Compare, Const, Exists, FilterExpr, In, IsNull, Like,
                    Negate, NewId, Not, Or, PropertyCall, RemoveStmt, SysProp, UserProp)
from .parse import COMPARISONS, FLOAT_ARITH, arith_kind, comparable, parse_action, parse_filter

__all__ = ["evaluate_filter", "evaluate_action", "Message", "java_double"]

_LONG_MIN, _LONG_MAX = -(2 ** 63), 2 ** 63 - 1
_BROKEN = "application_properties is not a JSON object with unique keys"
_TAGS = {"$t": TIMESTAMP, "$u": UUID, "$b": BYTES, "$f": DOUBLE}
_SPECIAL = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


@dataclass(frozen=True)
class _Val:
    kind: Optional[str]
    payload: Any = None
    error: Optional[str] = None
    #: A property's payload as Spark's typed text holds it, where it differs from what
    #: rendering the payload gives (an integer beyond 64 bits, a timestamp's own text).
    text: Optional[str] = None


@dataclass(frozen=True)
class _Cond:
    value: Optional[bool]
    error: Optional[str] = None


_UNKNOWN = _Val(None)


class Message:
    """One message as a filter reads it: its columns (``message_id``, ``subject``, ...,
    ``seq`` when a rule reads the sequence number) and its application properties, parsed
    once from their JSON text."""

    def __init__(self, columns: Mapping[str, Any]) -> None:
        self.columns = columns
        self.bag, self.bag_error = _bag(columns.get("application_properties"))

    def lookup(self, name: Optional[str]) -> Tuple[_Val, bool]:
        """(value, present) of property ``name``: an exact spelling first, else the first key
        of another letter case (names are case-insensitive)."""
        if self.bag is None or name is None:
            return _UNKNOWN, False
        if name in self.bag:
            return self.bag[name], True
        folded = name.lower()
        for key, val in self.bag.items():
            if key.lower() == folded:
                return val, True
        return _UNKNOWN, False


def _bag(text: Optional[str]) -> Tuple[Optional[Dict[str, _Val]], Optional[str]]:
    if text is None:
        return None, None
    pairs = []
    try:
        parsed = json.loads(text, object_pairs_hook=lambda items: pairs.append(items) or
                            dict(items))
    except ValueError:
        return None, _BROKEN
    if not isinstance(parsed, dict):
        return None, _BROKEN
    top = pairs[-1]  # the outermost object is finished last
    if len({k for k, _ in top}) != len(top):
        return None, _BROKEN
    return {key: _typed(value) for key, value in top}, None


def _typed(value: Any) -> _Val:
    """A JSON value as :mod:`.values` types it."""
    if value is None:
        return _UNKNOWN
    if isinstance(value, bool):
        return _Val(BOOL, value)
    if isinstance(value, str):
        return _Val(STRING, value)
    if isinstance(value, int):
        if _LONG_MIN <= value <= _LONG_MAX:
            return _Val(LONG, value)
        return _Val(DOUBLE, float(value), text=str(value))
    if isinstance(value, float):
        return _Val(DOUBLE, value)
    if isinstance(value, dict) and len(value) == 1:
        (tag, content), = value.items()
        kind = _TAGS.get(tag)
        if kind is None or not isinstance(content, str) or '"' in content or "\\" in content:
            return _UNKNOWN
        if kind == DOUBLE:
            return _Val(DOUBLE, _SPECIAL[content]) if content in _SPECIAL else _UNKNOWN
        if kind == TIMESTAMP:
            return _Val(TIMESTAMP, _timestamp(content), text=content)
        if kind == UUID:
            return _Val(UUID, content.lower())
        return _Val(BYTES, content)
    return _UNKNOWN


def _timestamp(text: str) -> Optional[datetime]:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


# -- filters ------------------------------------------------------------------------------------

def evaluate_filter(rule_filter, message: Message) -> Tuple[Optional[bool], Optional[str]]:
    """``(matched, error)`` of a filter on one message, as :func:`sbdelta.rules.filter_column`
    gives them: matched is True, False or None (unknown, or an evaluation error)."""
    if isinstance(rule_filter, TrueRuleFilter):
        return True, None
    if isinstance(rule_filter, FalseRuleFilter):
        return False, None
    if isinstance(rule_filter, CorrelationRuleFilter):
        return _correlation(rule_filter, message), None
    expr = rule_filter if isinstance(rule_filter, FilterExpr) else parse_filter(
        rule_filter.sql_expression, rule_filter.parameters)
    cond = _condition(expr.condition, message)
    return (cond.value if cond.error is None else None), cond.error


def _correlation(rule_filter: CorrelationRuleFilter, message: Message) -> bool:
    for field, column in CORRELATION_COLUMNS:
        wanted = getattr(rule_filter, field)
        if wanted is not None and message.columns.get(column) != wanted:
            return False
    for name, expected in (rule_filter.properties or {}).items():
        found, _ = message.lookup(name)
        test = _compare("=", _Val(found.kind, found.payload), _const(expected))
        if not (test.error is None and test.value):
            return False
    return True


def _const(value: Any) -> _Val:
    if isinstance(value, bool):
        return _Val(BOOL, value)
    if isinstance(value, int):
        return _Val(LONG, value)
    if isinstance(value, float):
        return _Val(DOUBLE, value)
    return _Val(STRING, value)


def _first(*errors: Optional[str]) -> Optional[str]:
    return next((e for e in errors if e is not None), None)


def _not(value: Optional[bool]) -> Optional[bool]:
    return None if value is None else not value


def _chain(node, kind) -> list:
    if isinstance(node, kind):
        return _chain(node.left, kind) + _chain(node.right, kind)
    return [node]


def _condition(node, m: Message) -> _Cond:
    if isinstance(node, Compare):
        return _compare(node.op, _value(node.left, m), _value(node.right, m))
    if isinstance(node, (And, Or)):
        is_and = isinstance(node, And)
        result, error, undecided = None, None, True
        first = True
        for operand in _chain(node, type(node)):
            cond = _condition(operand, m)
            if first:
                result, first = cond.value, False
            elif is_and:
                result = (False if result is False or cond.value is False
                          else None if result is None or cond.value is None else True)
            else:
                result = (True if result is True or cond.value is True
                          else None if result is None or cond.value is None else False)
            if cond.error is not None and undecided and error is None:
                error = cond.error
            still = cond.value is None or (cond.value if is_and else not cond.value)
            undecided = undecided and still
        return _Cond(result, error)
    if isinstance(node, Not):
        cond = _condition(node.operand, m)
        return _Cond(_not(cond.value), cond.error)
    if isinstance(node, IsNull):
        val = _value(node.operand, m)
        missing = val.kind is None
        return _Cond(not missing if node.negated else missing, val.error)
    if isinstance(node, Exists):
        if isinstance(node.prop, SysProp):
            return _Cond(True)
        _, present = m.lookup(node.prop.name)
        return _Cond(present, m.bag_error)
    if isinstance(node, In):
        operand = _value(node.operand, m)
        tests = [_compare("=", operand, _value(item, m)) for item in node.items]
        values = [t.value for t in tests]
        result = True if True in values else None if None in values else False
        error = _first(*(t.error for t in tests))
        return _Cond(_not(result) if node.negated else result, error)
    if isinstance(node, Like):
        return _like(node, _value(node.operand, m), _value(node.pattern, m))
    raise TypeError(f"not a condition: {node!r}")


def _compare(op: str, a: _Val, b: _Val) -> _Cond:
    error = None
    result = None
    if a.kind is not None and b.kind is not None:
        if comparable(a.kind, b.kind, op):
            result = _compare_pair(op, a, b)
        else:
            error = (f"cannot compare {KIND_NAMES[a.kind]} with {KIND_NAMES[b.kind]} "
                     f"using '{op}'")
    return _Cond(result, _first(a.error, b.error, error))


def _compare_pair(op: str, a: _Val, b: _Val) -> Optional[bool]:
    if a.payload is None or b.payload is None:
        return None
    if a.kind in (LONG, DOUBLE) and b.kind in (LONG, DOUBLE) and not a.kind == b.kind == LONG:
        x, y = float(a.payload), float(b.payload)
        if math.isnan(x) or math.isnan(y):
            return op == "<>"
        return COMPARISONS[op](x, y)
    return COMPARISONS[op](a.payload, b.payload)


def _like(node: Like, a: _Val, p: _Val) -> _Cond:
    result = None
    if a.kind == STRING and p.kind == STRING and a.payload is not None \
            and p.payload is not None:
        result = re.fullmatch(_like_regex(p.payload, node.escape), a.payload,
                              re.DOTALL) is not None
    errors = []
    for val, what in ((a, "LIKE"), (p, "a LIKE pattern")):
        if val.kind is not None and val.kind != STRING:
            errors.append(f"{what} needs a string, not {KIND_NAMES[val.kind]}")
    error = _first(a.error, p.error, *errors)
    return _Cond(_not(result) if node.negated else result, error)


def _like_regex(pattern: str, escape: Optional[str]) -> str:
    """``%`` any run, ``_`` one character; after the escape character (when there is one) any
    character stands for itself, and an escape character at the very end for itself."""
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if escape is not None and ch == escape:
            if i + 1 < len(pattern):
                out.append(re.escape(pattern[i + 1]))
                i += 2
                continue
            out.append(re.escape(ch))
        elif ch == "%":
            out.append(".*")
        elif ch == "_":
            out.append(".")
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


# -- values -------------------------------------------------------------------------------------

def _value(node, m: Message) -> _Val:
    if isinstance(node, Const):
        if node.kind is None or node.value is None:
            return _UNKNOWN
        if node.kind == UUID:
            return _Val(UUID, str(node.value).lower())
        if node.kind == BYTES:
            import base64

            return _Val(BYTES, base64.b64encode(node.value).decode("ascii"))
        if node.kind == TIMESTAMP and isinstance(node.value, datetime):
            return _Val(TIMESTAMP, node.value.astimezone(timezone.utc))
        return _Val(node.kind, node.value)
    if isinstance(node, UserProp):
        found, _ = m.lookup(node.name)
        kind = found.kind if found.kind in node.kinds else None
        return _Val(kind, found.payload if kind else None, m.bag_error)
    if isinstance(node, SysProp):
        prop = node.prop
        if prop.column is None:
            return _UNKNOWN if prop.constant is None else _Val(prop.kind, prop.constant)
        raw = m.columns.get(prop.column)
        if raw is None:
            return _UNKNOWN
        if prop.kind == TIMESTAMP and isinstance(raw, datetime) and raw.tzinfo is None:
            raw = raw.replace(tzinfo=timezone.utc)
        return _Val(prop.kind, raw)
    if isinstance(node, PropertyCall):
        name = _value(node.name, m)
        if STRING not in node.name.kinds:  # decided by the text, as compile does
            return _Val(None, None, name.error)
        if name.kind is not None and name.kind != STRING:
            wrong = f"property(name) needs a string, not {KIND_NAMES[name.kind]}"
            return _Val(None, None, _first(name.error, wrong, m.bag_error))
        found, _ = m.lookup(name.payload if name.kind == STRING else None)
        kind = found.kind if found.kind in node.kinds else None
        return _Val(kind, found.payload if kind else None, _first(name.error, m.bag_error))
    if isinstance(node, NewId):
        return _Val(UUID, str(uuid.uuid4()))
    if isinstance(node, Negate):
        return _negate(_value(node.operand, m))
    if isinstance(node, Arith):
        return _arith(node.op, _value(node.left, m), _value(node.right, m))
    raise TypeError(f"not a value: {node!r}")


def _negate(a: _Val) -> _Val:
    if a.kind == LONG:
        if a.payload is None or a.payload == _LONG_MIN:
            return _Val(LONG, None, _first(a.error, "integer overflow"))
        return _Val(LONG, -a.payload, a.error)
    if a.kind == DOUBLE:
        return _Val(DOUBLE, None if a.payload is None else -a.payload, a.error)
    if a.kind is None:
        return _Val(None, None, a.error)
    return _Val(None, None, _first(a.error, f"unary '-' needs a number, not "
                                            f"{KIND_NAMES[a.kind]}"))


def _arith(op: str, a: _Val, b: _Val) -> _Val:
    if a.kind is None or b.kind is None:
        return _Val(None, None, _first(a.error, b.error))
    kind = arith_kind(op, a.kind, b.kind)
    if kind is None:
        return _Val(None, None, _first(a.error, b.error, f"'{op}' cannot combine "
                                       f"{KIND_NAMES[a.kind]} with {KIND_NAMES[b.kind]}"))
    if a.payload is None or b.payload is None:
        return _Val(kind, None, _first(a.error, b.error))
    payload, error = _arith_pair(op, a, b, kind)
    return _Val(kind, payload, _first(a.error, b.error, error))


def _arith_pair(op: str, a: _Val, b: _Val, kind: str):
    if kind == STRING:
        return a.payload + b.payload, None
    if kind == LONG:
        p, q = a.payload, b.payload
        if op in "+-*":
            result = p + q if op == "+" else p - q if op == "-" else p * q
            if not _LONG_MIN <= result <= _LONG_MAX:
                return None, "integer overflow"
            return result, None
        if q == 0:
            return None, "integer division by zero"
        if op == "%":
            return p - q * _trunc_div(p, q), None  # the dividend's sign (C#, Java)
        if p == _LONG_MIN and q == -1:
            return None, "integer overflow"
        return _trunc_div(p, q), None
    p, q = float(a.payload), float(b.payload)
    if op in FLOAT_ARITH:
        return FLOAT_ARITH[op](p, q), None
    if op == "%":
        if q == 0 or math.isnan(p) or math.isnan(q) or math.isinf(p):
            return math.nan, None
        return (p if math.isinf(q) else math.fmod(p, q)), None
    if q == 0:
        if math.isnan(p) or p == 0:
            return math.nan, None
        return (math.inf if p > 0 else -math.inf), None
    return p / q, None


def _trunc_div(p: int, q: int) -> int:
    """Integer division truncating toward zero (C#), exact for 64-bit operands."""
    quotient = abs(p) // abs(q)
    return quotient if (p < 0) == (q < 0) else -quotient


# -- actions ------------------------------------------------------------------------------------

def evaluate_action(action, message: Message) -> Tuple[Optional[str], Optional[str]]:
    """``(application_properties, error)`` after a SQL action (a SqlRuleAction or a parsed
    :class:`ActionExpr`), as :func:`sbdelta.rules.action_columns` gives them: statements in
    order, each reading what the previous ones left; where the action fails, the original
    text and the first error."""
    from .._properties import SqlRuleAction

    if isinstance(action, SqlRuleAction):
        action = parse_action(action.sql_expression, action.parameters)
    if not isinstance(action, ActionExpr):
        raise TypeError(f"expected a SqlRuleAction or ActionExpr, got {type(action).__name__}")
    original = message.columns.get("application_properties")
    bag = dict(message.bag) if message.bag is not None else None
    error = message.bag_error
    for statement in action.statements:
        if isinstance(statement, RemoveStmt):
            bag = _removed(bag, statement.name)
            continue
        current = _Reading(message, bag)
        val = _value(statement.value, current)
        typed = _stored(val)
        existing, _ = current.lookup(statement.name)
        if existing.kind == DOUBLE and typed.kind == LONG and typed.payload is not None:
            typed = _Val(DOUBLE, float(typed.payload))  # C#: stays a float
        bag = _set(bag, statement.name, typed)
        error = _first(error, val.error)
    if error is not None:
        return original, error
    # No properties at all, and no SET: still none (Spark's map stays NULL).
    return (None if bag is None else _render(bag)), None


class _Reading(Message):
    """The message as a later statement of an action reads it: the properties as the earlier
    statements left them (the original text's error stays)."""

    def __init__(self, message: Message, bag: Optional[Dict[str, _Val]]) -> None:
        self.columns = message.columns
        self.bag, self.bag_error = bag, message.bag_error


def _stored(val: _Val) -> _Val:
    """What ``SET`` stores: the value, a timespan as its milliseconds, unknown as null."""
    if val.kind is None or val.payload is None:
        return _UNKNOWN
    if val.kind == TIMESPAN:
        return _Val(LONG, val.payload)
    return _Val(val.kind, val.payload)


def _removed(bag: Optional[Dict[str, _Val]], name: str) -> Optional[Dict[str, _Val]]:
    if bag is None:
        return None
    folded = name.lower()
    return {k: v for k, v in bag.items() if k.lower() != folded}


def _set(bag: Optional[Dict[str, _Val]], name: str, val: _Val) -> Dict[str, _Val]:
    """``bag`` with ``name`` set; an existing key of another letter case keeps its spelling."""
    target = name
    if bag is not None and name not in bag:
        target = next((k for k in bag if k.lower() == name.lower()), name)
    rest = _removed(bag, name) or {}
    rest[target] = val
    return rest


def _render(bag: Dict[str, _Val]) -> str:
    """The JSON text of ``bag`` as :func:`.values.render_bag` writes it."""
    return "{" + ",".join(f"{_json_string(k)}:{_json_value(bag[k])}"
                          for k in sorted(bag)) + "}"


_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n",
                  "\f": "\\f", "\r": "\\r"}


def _json_string(text: str) -> str:
    """A JSON string as Jackson (Spark's ``to_json``) escapes it: the short escapes, other
    control characters as ``\\u00XX`` (upper-case hex), nothing else."""
    out = []
    for ch in text:
        if ch in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[ch])
        elif ord(ch) < 0x20:
            out.append("\\u%04X" % ord(ch))
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _json_value(val: _Val) -> str:
    if val.kind is None or (val.payload is None and val.text is None):
        return "null"
    if val.kind == STRING:
        return _json_string(val.payload)
    if val.kind == LONG:
        return str(val.payload)
    if val.kind == BOOL:
        return "true" if val.payload else "false"
    if val.kind == DOUBLE:
        if val.text is not None:
            return val.text
        if math.isnan(val.payload):
            return '{"$f":"nan"}'
        if math.isinf(val.payload):
            return '{"$f":"inf"}' if val.payload > 0 else '{"$f":"-inf"}'
        return java_double(val.payload)
    if val.kind == TIMESTAMP:
        text = val.text if val.text is not None else _iso_utc(val.payload)
        return '{"$t":"' + text + '"}'
    if val.kind == UUID:
        return '{"$u":"' + val.payload + '"}'
    if val.kind == BYTES:
        return '{"$b":"' + val.payload + '"}'
    return "null"


def _iso_utc(moment: datetime) -> str:
    """:func:`.values.iso_utc`: ``YYYY-MM-DDTHH:MM:SS[.ffffff]+00:00``."""
    moment = moment.astimezone(timezone.utc)
    fraction = f".{moment.microsecond:06d}" if moment.microsecond else ""
    return f"{moment:%Y-%m-%dT%H:%M:%S}{fraction}+00:00"


def java_double(value: float) -> str:
    """``value`` as Java's ``Double.toString`` (and Spark's cast to string) writes it: the
    shortest digits that read back as ``value``; plain with at least one decimal between
    10^-3 and 10^7, else ``d.dddE[-]n``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if 1e-3 <= magnitude < 1e7:
        text = repr(magnitude)
        return sign + (text if "." in text else text + ".0")
    from decimal import Decimal

    digits_tuple = Decimal(repr(magnitude)).normalize().as_tuple()
    digits = "".join(map(str, digits_tuple.digits))
    exponent = len(digits) - 1 + digits_tuple.exponent
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"
