"""A cheap, conservative test that rules out messages no filter can match or fail on.

Evaluating a rule reads the message's typed property bag (:mod:`.values`), which Spark builds
with higher-order functions it does not compile to code: over a backlog where a filter such as
``g = 0`` matches one message in ten, most of a subscription's admission time went to messages
it then dropped. :func:`prefilter_column` gives a Column made only of functions Spark compiles
(``rlike``, ``regexp_extract``, casts) that is false only where every filter is certainly
neither true nor an evaluation error, so ``rows.where(prefilter)`` before the rules changes
which rows the rules see, never what they decide (TOPIC-4, TOPIC-5: no copy and no
dead-letter is lost). Over 100,000 rows and ``g = 0`` it cut the admission from 1.2-1.4 s to
0.45-0.53 s (docs/benchmarks.md).

How it stays conservative
    A condition node gets three Columns: *may be true*, *may be false*, *may fail*. Leaves it
    understands are comparisons of an application property (a plain name) with a number, a
    string or a boolean constant; any other node may be anything. ``AND``, ``OR`` and ``NOT``
    combine them by their truth tables (ignoring short-circuits, which only remove failures).
    A property is read from the JSON text only where that text is *plain* (:data:`_FLAT`): a
    JSON object of scalars and tagged values, ASCII, no backslash, so that every ``"name":``
    in it is one of its own keys and no escaped key or value hides from a regular
    expression; and no two keys spelled alike in any letter case (:data:`_TWICE`), so the
    one key a case-insensitive expression finds is the one the rules read. Any other text
    (not JSON, nested, escaped, duplicate keys: texts on which rules fail) is kept. In a
    plain text the property's value as written decides:

    * absent or ``null``: unknown, so the comparison is neither true, false nor failing;
    * of the constant's kind (a JSON number for a number, a string for a string, ``true`` or
      ``false`` for a boolean): it may be true where the values may be equal (``=``) or
      ordered so (``<`` etc.). Numbers are compared as doubles, where rounding keeps order
      (``x < c`` implies ``double(x) <= double(c)``), so strict comparisons are tested
      loosely; ``<>`` and string order are always "may be true";
    * of another kind (a tagged value, a string against a number...): the comparison fails.

Certain matches
    :func:`certain_match_column` is the other side: a Column true only where the filter is
    certainly TRUE (neither false, unknown nor failing), so that admission can take such a
    message without building its property bag at all (most of what a filtered receive keeps
    is such messages: ``g = 0`` over ``{"g": 0}``). A node gets two Columns, *certainly true*
    and *certainly false*; a leaf decides only where a plain text's value compares exactly as
    the rules compare it: an integer of at most 18 digits (a long, :mod:`.values`) with an
    integer constant, a string with a string constant under ``=`` or ``<>`` (a plain text's
    string holds no escape, so its JSON text is its value), ``true``/``false`` with a boolean
    under ``=`` or ``<>``. ``AND`` and ``OR`` go left to right as the rules do
    (:func:`.compile.condition`): a left side that decides the result (FALSE for AND, TRUE
    for OR) decides it whatever the right side is, since its errors are skipped; else a
    decided left side leaves the result to a decided right side. ``NOT`` swaps.
    A correlation filter (which never fails) certainly matches where each system part equals
    its column and each property's plain value decides ``=`` as above.
"""

from __future__ import annotations

import operator
import re
from typing import Iterable, NamedTuple, Optional

from .._properties import (CorrelationRuleFilter, FalseRuleFilter, SqlRuleFilter,
                           TrueRuleFilter)
from .correlation import CORRELATION_COLUMNS, correlation_kind
from .nodes import (BOOL, DOUBLE, LONG, STRING, And, Compare, Const, FilterExpr, Not, Or, Pos,
                    UserProp)
from .parse import COMPARISONS, parse_filter

__all__ = ["prefilter_column", "certain_match_column"]

# Property names a regular expression takes as they are (no quoting needed).
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FLIPPED = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_TEXT = "application_properties"


def _f():
    from pyspark.sql import functions as F

    return F


class _May(NamedTuple):
    """Three boolean Columns (never NULL), or Python booleans for what is known up front."""

    true: object
    false: object
    fail: object


_ANYTHING = _May(True, True, True)


def _join(a, b, absorbing: bool, join):
    """``join(a, b)`` of two conditions, either a Column or a known Python boolean:
    ``absorbing`` decides alone (True for OR, False for AND); the other boolean drops out."""
    if a is absorbing or b is absorbing:
        return absorbing
    if a is (not absorbing):
        return b
    if b is (not absorbing):
        return a
    return join(a, b)


def _or(a, b):
    return _join(a, b, True, operator.or_)


def _and(a, b):
    return _join(a, b, False, operator.and_)


def _when(condition, then, otherwise):
    """``then`` where ``condition`` (a non-NULL Column) holds, else ``otherwise``."""
    if then is otherwise:
        return then
    F = _f()
    lit = lambda v: F.lit(v) if isinstance(v, bool) else v  # noqa: E731
    return F.when(condition, lit(then)).otherwise(lit(otherwise))


def _property_comparison(node):
    """``(name, op, constant)`` of a comparison of an application property with a constant
    (either way round, the operator flipped to put the property first), else None."""
    if isinstance(node, Compare):
        if isinstance(node.left, UserProp) and isinstance(node.right, Const):
            return node.left.name, node.op, node.right
        if isinstance(node.left, Const) and isinstance(node.right, UserProp):
            return node.right.name, _FLIPPED[node.op], node.left
    return None


def _condition(node) -> _May:
    if isinstance(node, And):
        a, b = _condition(node.left), _condition(node.right)
        return _May(_and(a.true, b.true), _or(a.false, b.false), _or(a.fail, b.fail))
    if isinstance(node, Or):
        a, b = _condition(node.left), _condition(node.right)
        return _May(_or(a.true, b.true), _and(a.false, b.false), _or(a.fail, b.fail))
    if isinstance(node, Not):
        a = _condition(node.operand)
        return _May(a.false, a.true, a.fail)
    leaf = _property_comparison(node)
    return _ANYTHING if leaf is None else _comparison(*leaf)


# Regular expressions over a *plain* text (Java syntax; rlike finds a match anywhere).
_WS = "[ \\t\\n\\r]*"
_KEY = '"[ !#-\\[\\]-~]*"'  # printable ASCII but a quote or a backslash
_NUMBER = "-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
_VALUE = (f"(?:{_KEY}|{_NUMBER}|true|false|null"
          f'|\\{{{_WS}"\\$[a-z]"{_WS}:{_WS}{_KEY}{_WS}\\}})')
_MEMBER = f"{_KEY}{_WS}:{_WS}{_VALUE}{_WS}"
#: A JSON object of scalars and tagged values, ASCII, no escape: every ``"name":`` in it
#: is one of its own keys.
_FLAT = f"^\\{{{_WS}(?:{_MEMBER}(?:,{_WS}{_MEMBER})*)?\\}}{_WS}\\z"
#: Two keys spelled alike in any letter case (a backreference: Java matches it ignoring case).
_TWICE = f'(?is)(?:^\\{{|,){_WS}("[^"]*"){_WS}:.*,{_WS}\\1{_WS}:'


def _value(name: str):
    """The property's JSON value as written in a plain text ("..." for a string), "" where
    it is absent."""
    F = _f()
    return F.coalesce(F.regexp_extract(F.col(_TEXT), f'(?i)(?:^\\{{|,){_WS}"{name}"{_WS}:'
                                       f'{_WS}("[^"]*"|[^,}}\\s]+)', 1), F.lit(""))


def _comparison(name: str, op: str, const: Const) -> _May:
    """``property op constant`` in a plain text (see the module doc)."""
    if not _PLAIN_NAME.fullmatch(name) or const.kind not in (LONG, DOUBLE, STRING, BOOL):
        return _ANYTHING
    if const.kind == BOOL and op not in ("=", "<>"):
        return _ANYTHING  # booleans have no order: the comparison fails
    F = _f()
    value = _value(name)
    if const.kind == STRING:
        fits = value.startswith('"')
        true = (value == F.lit(f'"{const.value}"')) if op == "=" else True
    elif const.kind == BOOL:
        fits = value.isin("true", "false")
        true = (value == F.lit("true" if const.value else "false")) if op == "=" else True
    else:
        number = value.cast("double")
        fits = value.rlike(f"^{_NUMBER}$")
        true = _loosely(op, number, float(const.value))
    # Absent or null: unknown (neither true, false nor failing). Of the constant's kind: only
    # whether it is true is in doubt. Of another kind: the comparison fails.
    unknown = (value == "") | (value == "null")
    return _May(_when(unknown, False, _when(fits, true, False)),
                _when(unknown, False, True),
                _when(unknown, False, ~fits))


class _Known(NamedTuple):
    """Where a condition is certainly TRUE, and certainly FALSE (boolean Columns, never NULL,
    or Python booleans)."""

    true: object
    false: object


_UNDECIDED = _Known(False, False)
#: An integer the rules read as a long (:mod:`.values`: up to 18 digits always fit).
_LONG_TEXT = "^-?(?:0|[1-9][0-9]{0,17})$"


def _decided(node) -> _Known:
    if isinstance(node, (And, Or)):
        a, b = _decided(node.left), _decided(node.right)
        a_known = _or(a.true, a.false)
        # Left to right, as the rules evaluate: a left side that decides skips the right
        # side (its errors too); a decided left that does not decide leaves it to the right.
        if isinstance(node, And):
            return _Known(_and(a.true, b.true), _or(a.false, _and(a_known, b.false)))
        return _Known(_or(a.true, _and(a_known, b.true)), _and(a.false, b.false))
    if isinstance(node, Not):
        a = _decided(node.operand)
        return _Known(a.false, a.true)
    leaf = _property_comparison(node)
    return _UNDECIDED if leaf is None else _exact(*leaf)


def _exact(name: str, op: str, const: Const) -> _Known:
    """``property op constant`` where a plain text decides it exactly (see the module doc)."""
    if not _PLAIN_NAME.fullmatch(name):
        return _UNDECIDED
    F = _f()
    value = _value(name)
    if const.kind == LONG and -2 ** 63 <= const.value < 2 ** 63:
        fits = value.rlike(_LONG_TEXT)
        holds = COMPARISONS[op](value.cast("bigint"), F.lit(const.value).cast("bigint"))
    elif const.kind in (STRING, BOOL) and op in ("=", "<>"):
        text = (f'"{const.value}"' if const.kind == STRING
                else "true" if const.value else "false")
        fits = value.startswith('"') if const.kind == STRING else value.isin("true", "false")
        holds = (value == F.lit(text)) if op == "=" else (value != F.lit(text))
    else:
        return _UNDECIDED
    return _Known(fits & holds, fits & ~holds)


def _loosely(op: str, number, constant: float):
    F = _f()
    c = F.lit(constant)
    if op == "=":
        return (number <= c) & (number >= c)
    if op in ("<", "<="):
        return number <= c
    if op in (">", ">="):
        return number >= c
    return True


def _plain():
    """Where the text is read the way the module doc says (a NULL text: no properties)."""
    text = _f().col(_TEXT)
    return text.isNull() | (text.rlike(_FLAT) & ~text.rlike(_TWICE))


def _correlation_parts(rule_filter, prop):
    """The AND of a correlation filter's parts: each system part equal to its column, and
    ``prop(name, constant)`` for each property (constant None: a value of no kind a plain
    text decides, :func:`.correlation.correlation_kind`)."""
    F = _f()
    true = True
    for field, column in CORRELATION_COLUMNS:
        wanted = getattr(rule_filter, field)
        if wanted is not None:
            true = _and(true, F.coalesce(F.col(column) == F.lit(wanted), F.lit(False)))
    for name, wanted in (rule_filter.properties or {}).items():
        kind = correlation_kind(wanted)
        true = _and(true, prop(name, None if kind is None else Const(Pos(1, 1), wanted, kind)))
    return true


def _correlation(rule_filter) -> _May:
    """A correlation filter never fails (:mod:`.correlation`): it may be true where each system
    part equals its column and each property may equal its value."""
    true = _correlation_parts(rule_filter, lambda name, const: (
        True if const is None else _comparison(name, "=", const).true))
    return _May(true, True, False)


def _filter(rule_filter) -> _May:
    if isinstance(rule_filter, TrueRuleFilter):
        return _May(True, False, False)
    if isinstance(rule_filter, FalseRuleFilter):
        return _May(False, True, False)
    if isinstance(rule_filter, CorrelationRuleFilter):
        return _correlation(rule_filter)
    if isinstance(rule_filter, SqlRuleFilter):
        rule_filter = parse_filter(rule_filter.sql_expression, rule_filter.parameters)
    if isinstance(rule_filter, FilterExpr):
        return _condition(rule_filter.condition)
    raise TypeError(f"prefilter_column takes rule filters, got {type(rule_filter).__name__}")


def prefilter_column(filters: Iterable) -> Optional[object]:
    """A Column false only where none of ``filters`` can match or fail on the message (see
    the module doc), or None where it would be true for every message.

    Args:
        filters: Rule filters (TrueRuleFilter, FalseRuleFilter, SqlRuleFilter,
            CorrelationRuleFilter, or a parsed :class:`FilterExpr`).

    Raises:
        RuleSyntaxError: A SqlRuleFilter's text is not valid.
        TypeError: An item of ``filters`` is none of those.
    """
    F = _f()
    keep = False
    for rule_filter in filters:
        may = _filter(rule_filter)
        keep = _or(keep, _or(may.true, may.fail))
    if keep is True:
        return None
    if keep is False:  # false filters only: nothing is read, nothing can match
        return F.lit(False)
    return ~_plain() | keep


def certain_match_column(rule_filter) -> Optional[object]:
    """A Column true only where ``rule_filter`` certainly matches the message (TRUE: not
    false, unknown or failing; see the module doc), or None where no message is known to.

    Args:
        rule_filter: A rule filter (TrueRuleFilter, FalseRuleFilter, SqlRuleFilter,
            CorrelationRuleFilter, or a parsed :class:`FilterExpr`).

    Raises:
        RuleSyntaxError: A SqlRuleFilter's text is not valid.
        TypeError: ``rule_filter`` is none of those.
    """
    F = _f()
    if isinstance(rule_filter, TrueRuleFilter):
        return F.lit(True)
    if isinstance(rule_filter, SqlRuleFilter):
        rule_filter = parse_filter(rule_filter.sql_expression, rule_filter.parameters)
    if isinstance(rule_filter, CorrelationRuleFilter):
        # A correlation filter compares a property as SQL's = does, and never fails.
        certain = _correlation_parts(rule_filter, lambda name, const: (
            False if const is None else _exact(name, "=", const).true))
        reads_text = bool(rule_filter.properties)
    elif isinstance(rule_filter, FilterExpr):
        certain = _decided(rule_filter.condition).true
        reads_text = True
    elif isinstance(rule_filter, FalseRuleFilter):
        return None
    else:
        raise TypeError(f"certain_match_column takes a rule filter, got "
                        f"{type(rule_filter).__name__}")
    if certain is False:
        return None
    if not reads_text:
        return F.lit(True) if certain is True else certain
    return _plain() if certain is True else _plain() & certain
