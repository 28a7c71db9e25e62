"""Subscription rules: SQL filters, correlation filters and SQL actions (TOPIC-4, TOPIC-5).

Parsing is pure Python and happens when a rule is created; every error names its line and
column (:class:`~sbdelta.exceptions.RuleSyntaxError`). Compiling gives Spark Columns over a
DataFrame of message rows (the columns of ``MESSAGE_FIELDS``, plus ``seq`` for
``sys.SequenceNumber``); see :mod:`.system` for which ``sys.`` property reads which column,
:mod:`.compile` for the evaluation semantics and :mod:`.values` for how application properties
keep their JSON types inside Spark.

Example::

    result = filter_column(SqlRuleFilter("color = 'red' AND quantity > 5"))
    routed = df.withColumn("matched", result.matched).withColumn("error", result.error)
    # deliver where matched; dead-letter (reason FILTER_EXCEPTION_REASON) where error is set

    change = action_columns(SqlRuleAction("SET quantity = quantity * 2; REMOVE color"))
    copies = df.withColumn("application_properties", change.application_properties)
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Union

from .._properties import (CorrelationRuleFilter, FalseRuleFilter, RuleProperties,
                           SqlRuleAction, SqlRuleFilter, TrueRuleFilter)
from ..exceptions import RuleSyntaxError
from .nodes import ActionExpr, FilterExpr
from .parse import MAX_SQL_LENGTH, parse_action, parse_filter
from .prefilter import certain_match_column, prefilter_column
from .scope import let
from .system import SYSTEM_PROPERTIES

__all__ = [
    # parse (pure Python, at rule creation)
    "parse_filter",
    "parse_action",
    "validate_rule",
    "FilterExpr",
    "ActionExpr",
    "RuleSyntaxError",
    "MAX_SQL_LENGTH",
    "SYSTEM_PROPERTIES",
    # evaluate (Spark Columns)
    "filter_column",
    "prefilter_column",
    "certain_match_column",
    "action_columns",
    "action_naming_rule",
    "with_properties",
    "let",
    "Rules",
    "FilterResult",
    "ActionResult",
    "FILTER_EXCEPTION_REASON",
    "ACTION_EXCEPTION_REASON",
]

#: DeadLetterReason of a copy whose filter failed to evaluate (TOPIC-5). Service Bus puts the
#: exception's type name there; its filter exception type is FilterException.
FILTER_EXCEPTION_REASON = "FilterException"
#: DeadLetterReason of a copy whose rule action failed to evaluate (TOPIC-5).
ACTION_EXCEPTION_REASON = "RuleActionException"


class FilterResult(NamedTuple):
    """A filter over message rows.

    Attributes:
        matched: Three-valued boolean Column: true where the filter matches; false or NULL
            (unknown) where it does not; NULL where ``error`` is set.
        error: String Column: NULL, or why evaluating the filter failed for that message (the
            DeadLetterErrorDescription of the copy TOPIC-5 dead-letters).
    """

    matched: object
    error: object


class ActionResult(NamedTuple):
    """An action over message rows.

    Attributes:
        application_properties: The new JSON text of the properties (the original text where
            ``error`` is set).
        error: String Column: NULL, or why the action failed for that message.
    """

    application_properties: object
    error: object


def validate_rule(rule: RuleProperties) -> None:
    """Parse a rule's SQL filter and action, so that a bad rule is refused at creation.

    Raises:
        RuleSyntaxError: The filter or the action is not valid; the error has the position.
    """
    if isinstance(rule.filter, SqlRuleFilter) and not isinstance(
            rule.filter, (TrueRuleFilter, FalseRuleFilter)):
        parse_filter(rule.filter.sql_expression, rule.filter.parameters)
    if rule.action is not None:
        parse_action(rule.action.sql_expression, rule.action.parameters)


class Rules:
    """Rules evaluated over one message row, its property bag bound once (see
    :func:`with_properties`)."""

    def __init__(self, ctx) -> None:
        self._ctx = ctx

    def filter(self, rule_filter: Union[SqlRuleFilter, CorrelationRuleFilter, FilterExpr]
               ) -> FilterResult:
        """The filter as Columns: see :func:`filter_column`. Both read one struct
        (:meth:`filter_struct`); to read them several times, bind that struct (:func:`let`)."""
        result = self.filter_struct(rule_filter)
        return FilterResult(result["matched"], result["error"])

    def filter_struct(self, rule_filter: Union[SqlRuleFilter, CorrelationRuleFilter, FilterExpr]):
        """The filter as one Column ``struct<matched: boolean, error: string>``."""
        from pyspark.sql import functions as F

        from .compile import compile_filter
        from .correlation import compile_correlation

        if isinstance(rule_filter, (TrueRuleFilter, FalseRuleFilter)):
            matched = F.lit(isinstance(rule_filter, TrueRuleFilter))
            return F.struct(matched.alias("matched"),
                            F.lit(None).cast("string").alias("error"))
        if isinstance(rule_filter, CorrelationRuleFilter):
            return compile_correlation(rule_filter, self._ctx)
        if isinstance(rule_filter, SqlRuleFilter):
            rule_filter = parse_filter(rule_filter.sql_expression, rule_filter.parameters)
        if not isinstance(rule_filter, FilterExpr):
            raise TypeError(f"filter_column takes a rule filter, got {type(rule_filter).__name__}")
        return compile_filter(rule_filter, self._ctx)

    def action(self, action: Union[SqlRuleAction, ActionExpr]) -> ActionResult:
        """The action as Columns: see :func:`action_columns`."""
        result = self.action_struct(action)
        return ActionResult(result["application_properties"], result["error"])

    def action_struct(self, action: Union[SqlRuleAction, ActionExpr]):
        """The action as one Column ``struct<application_properties: string, error: string>``."""
        from .compile import compile_action

        if isinstance(action, SqlRuleAction):
            action = parse_action(action.sql_expression, action.parameters)
        if not isinstance(action, ActionExpr):
            raise TypeError(f"action_columns takes a SqlRuleAction, got {type(action).__name__}")
        return compile_action(action, self._ctx)


class _Reading:
    """The context of a rule built inside the bag's lambda: notes whether the rule reads the
    property bag at all."""

    def __init__(self, row) -> None:
        self._row = row
        self.used = False

    @property
    def bag(self):
        self.used = True
        return self._row["bag"]

    @property
    def bag_error(self):
        self.used = True
        return self._row["error"]


def with_properties(build: Callable[[Rules], object]):
    """One Column from ``build(rules)``, with the message's application properties parsed ONCE
    per row for every rule ``build`` evaluates.

    Parsing the JSON text into the typed bag is the costly part of a rule; written out at each
    property a rule reads, it made plans of megabytes that took seconds to compile. Here the bag
    is computed once and bound to a lambda variable (``transform`` over a one-element array),
    and each rule reads that variable. A ``build`` that reads no property is built again
    without the bag (its rows need no JSON parsing): building a rule's Columns costs hundreds
    of py4j calls, so the usual rule, which reads properties, is built once.
    """
    from pyspark.sql import functions as F

    from .compile import Context, message_bag

    bag, error = message_bag()
    bound = F.array(F.struct(bag.alias("bag"), error.alias("error")))
    readings = []

    def body(row):
        readings.append(_Reading(row))
        return build(Rules(readings[-1]))

    column = F.transform(bound, body)[0]
    if any(reading.used for reading in readings):
        return column
    return build(Rules(Context(None, None)))


def action_naming_rule(rule: RuleProperties) -> ActionExpr:
    """The rule's parsed action followed by ``SET RuleName = '<rule name>'``: TOPIC-5, a copy
    made by a rule with an action carries the name of that rule."""
    from .nodes import STRING, Const, Pos, SetStmt

    parsed = parse_action(rule.action.sql_expression, rule.action.parameters)
    at = Pos(1, 1)
    return ActionExpr(parsed.sql, parsed.statements + (
        SetStmt(at, "RuleName", Const(at, rule.name, STRING)),))


def filter_column(rule_filter: Union[SqlRuleFilter, CorrelationRuleFilter, FilterExpr]
                  ) -> FilterResult:
    """The filter as Columns over a DataFrame of message rows.

    Args:
        rule_filter: A TrueRuleFilter, FalseRuleFilter, SqlRuleFilter, CorrelationRuleFilter, or
            an already parsed :class:`FilterExpr`.

    Raises:
        RuleSyntaxError: A SqlRuleFilter's text is not valid.
        TypeError: ``rule_filter`` is none of those.
    """
    result = with_properties(lambda rules: rules.filter_struct(rule_filter))
    return FilterResult(result["matched"], result["error"])


def action_columns(action: Union[SqlRuleAction, ActionExpr]) -> ActionResult:
    """The action as Columns over a DataFrame of message rows.

    Args:
        action: A SqlRuleAction, or an already parsed :class:`ActionExpr`.

    Raises:
        RuleSyntaxError: The action's text is not valid.
        TypeError: ``action`` is neither.
    """
    result = with_properties(lambda rules: rules.action_struct(action))
    return ActionResult(result["application_properties"], result["error"])
