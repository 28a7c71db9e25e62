"""Correlation filters as Spark Columns: every given part must equal the message's (TOPIC-4).

System parts compare with the message column as strings (case-sensitive). Application
properties compare as SQL ``=`` does (an integer equals the same float), except that a property
of another kind, or a missing one, simply does not match: a correlation filter never raises an
evaluation error (a number 2 does not match the string "2", as in Service Bus).
"""

from __future__ import annotations

from typing import Optional

from .compile import Context, compare
from .nodes import ANY, BOOL, DOUBLE, LONG, STRING
from .scope import let
from .values import const_val, lookup, typed_val

#: CorrelationRuleFilter field -> message column.
CORRELATION_COLUMNS = (
    ("correlation_id", "correlation_id"),
    ("message_id", "message_id"),
    ("to", "to_address"),
    ("reply_to", "reply_to"),
    ("label", "subject"),
    ("session_id", "session_id"),
    ("reply_to_session_id", "reply_to_session_id"),
    ("content_type", "content_type"),
)


def correlation_kind(value: object) -> Optional[str]:
    """The kind a correlation filter's property value compares as: a boolean, an integer, a
    float or a string; None for any other value (compared as its text)."""
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int):
        return LONG
    if isinstance(value, float):
        return DOUBLE
    return STRING if isinstance(value, str) else None


def compile_correlation(rule_filter, ctx: Context):
    """The Column ``struct<matched, error>`` of a CorrelationRuleFilter; matched is never NULL,
    error always is. Each property is looked up once per row (one ``let``)."""
    from pyspark.sql import functions as F

    tests = []
    for field, column in CORRELATION_COLUMNS:
        wanted = getattr(rule_filter, field)
        if wanted is not None:
            tests.append(F.coalesce(F.col(column) == F.lit(wanted), F.lit(False)))
    wanted = dict(rule_filter.properties or {})
    lookups = {f"p{i}": lookup(ctx.bag, F.lit(name))[0] for i, name in enumerate(wanted)}

    def match(row):
        matched = F.lit(True)
        for test in tests:
            matched = matched & test
        for i, expected in enumerate(wanted.values()):
            kind = correlation_kind(expected) or STRING
            test = compare("=", typed_val(row[f"p{i}"], ANY), const_val(expected, kind))
            fits = test.value if test.error is None else test.value & test.error.isNull()
            matched = matched & F.coalesce(fits, F.lit(False))
        return F.struct(matched.alias("matched"), F.lit(None).cast("string").alias("error"))

    return let(lookups, match)
