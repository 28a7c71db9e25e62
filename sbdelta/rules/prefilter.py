"""A cheap test, on the JSON text alone, that no rule of a subscription can take a message.

A subscription's receive on Spark reads every topic message past its frontier and evaluates
its rules on each (:class:`sbdelta._subscription.Admission`): the property bag is parsed
into typed values first (:func:`.values.properties_bag`), which is most of the cost when a
filter keeps few messages. :func:`cannot_match` is a Column, built from the filters alone,
that is true only on rows where every filter is certainly not true and certainly raises no
evaluation error; those rows are dropped before the bag is built. Anything it cannot decide
for sure it leaves to the rules, so what a subscription admits, copies and dead-letters is
the same with it and without it.

It decides filters whose condition is a comparison of an application property with a number,
or an AND of such comparisons (``g = 3``, ``tenant = 7 AND priority >= 2``), and only rows
where each compared property holds a plain JSON integer of up to 15 digits under its exact
name (so the comparison is exact in a double, as Service Bus's C# comparison of a long with
a long or a double is) in a text whose keys are unique (a text with repeated keys is an
evaluation error, TOPIC-5). Such a comparison never fails; one that is false makes the AND
false. Every other filter (OR, NOT, LIKE, IN, strings, system properties, correlation and
true filters) makes :func:`cannot_match` None: no row is dropped.
"""

from __future__ import annotations

import math
from functools import reduce
from typing import List, Optional, Sequence, Tuple

from .._properties import CorrelationRuleFilter, FalseRuleFilter, SqlRuleFilter, TrueRuleFilter
from .nodes import DOUBLE, LONG, And, Compare, Const, UserProp
from .parse import parse_filter

__all__ = ["cannot_match"]

#: Numbers a double holds exactly (an integer property of up to 15 digits is below it).
_EXACT = 2 ** 53
#: ``a op b`` is ``b flipped-op a``.
_FLIPPED = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _comparisons(condition) -> Optional[List[Tuple[str, str, float]]]:
    """(property name, op, number) of each comparison of an AND tree of comparisons between
    an application property and a number; None for any other condition."""
    if isinstance(condition, And):
        left, right = _comparisons(condition.left), _comparisons(condition.right)
        return None if left is None or right is None else left + right
    if not isinstance(condition, Compare) or condition.op not in _FLIPPED:
        return None
    prop, const, op = condition.left, condition.right, condition.op
    if isinstance(prop, Const):
        prop, const, op = const, prop, _FLIPPED[op]
    if not (isinstance(prop, UserProp) and isinstance(const, Const)
            and const.kind in (LONG, DOUBLE) and isinstance(const.value, (int, float))
            and not isinstance(const.value, bool)):
        return None
    value = float(const.value)
    name = prop.name
    if (math.isnan(value) or abs(value) >= _EXACT or not name or name.startswith("$")
            or any(ch in name for ch in '"\\') or any(ord(ch) < 32 for ch in name)):
        return None
    return [(name, op, value)]


def _integer_of(text, name: str):
    """The JSON integer the top-level key ``name`` (exactly so spelled, unescaped) holds in
    ``text``, as a string of up to 15 digits; '' when it holds anything else or is absent.
    (A valid JSON text has no unescaped quote inside a string, so ``"name":`` only occurs as a
    key; nested objects are the tagged values, whose keys start with ``$``.)"""
    from pyspark.sql import functions as F

    pattern = r'"\Q' + name + r'\E"\s*:\s*(-?[0-9]{1,15})\s*[,}]'
    return F.regexp_extract(text, pattern, 1)


def _certainly_false(comparisons: Sequence[Tuple[str, str, float]], text, unique):
    from pyspark.sql import functions as F

    found = [(_integer_of(text, name), op, value) for name, op, value in comparisons]
    every_integer = reduce(lambda a, b: a & b, [digits != "" for digits, _, _ in found])
    false_ones = [~_compare(digits.cast("double"), op, F.lit(value)) for digits, op, value
                  in found]
    return unique & every_integer & reduce(lambda a, b: a | b, false_ones)


def _compare(left, op: str, right):
    return {"=": left == right, "<>": left != right, "<": left < right, "<=": left <= right,
            ">": left > right, ">=": left >= right}[op]


def cannot_match(filters: Sequence[object], column: str = "application_properties"):
    """A boolean Column over message rows, never NULL: true where none of ``filters``
    (rule filters: SQL, correlation, true, false) can be true or fail to evaluate, judged on
    the properties' JSON text ``column``; None when some filter is of a shape this does not
    decide (then no row may be dropped)."""
    from pyspark.sql import functions as F

    if not filters:
        return None
    parsed = []
    for rule_filter in filters:
        if isinstance(rule_filter, FalseRuleFilter):
            continue  # never true, never an error
        if isinstance(rule_filter, (TrueRuleFilter, CorrelationRuleFilter)) or not isinstance(
                rule_filter, SqlRuleFilter):
            return None
        found = _comparisons(parse_filter(rule_filter.sql_expression,
                                          rule_filter.parameters).condition)
        if found is None:
            return None
        parsed.append(found)
    text = F.col(column)
    keys = F.json_object_keys(text)
    unique = keys.isNotNull() & (F.size(F.array_distinct(keys)) == F.size(keys))
    if not parsed:
        return F.lit(True)
    tests = [_certainly_false(found, text, unique) for found in parsed]
    return F.coalesce(reduce(lambda a, b: a & b, tests), F.lit(False))
