"""Rule evaluation on Spark (TOPIC-4 filters, TOPIC-5 actions): compiled Columns over message
rows, results compared as DataFrames. Rows carry application properties as the sender writes
them (``encode_properties``)."""

from datetime import datetime, timezone

import pytest
from chispa import assert_df_equality

from sbdelta._message import encode_properties
from sbdelta.management import (CorrelationRuleFilter, FalseRuleFilter, SqlRuleAction,
                                SqlRuleFilter, TrueRuleFilter)
from sbdelta.rules import action_columns, filter_column

ROWS = [
    # id, application properties, subject, message id
    ("num", {"x": 1, "n": 5, "f": 2.5, "colour": "red"}, "order", "k_1"),
    ("text", {"x": "1", "n": "abc", "colour": "blue"}, "order", "kx1"),
    ("none", None, None, None),
    ("null", {"x": None, "colour": "RED"}, "refund", "k_2"),
    ("inject", {"a": "x' OR '1'='1", "when": datetime(2030, 1, 1, tzinfo=timezone.utc)},
     "order", "m"),
]


@pytest.fixture(scope="module")
def messages(spark):
    return spark.createDataFrame(
        [(i, encode_properties(p), s, m) for i, p, s, m in ROWS],
        "id string, application_properties string, subject string, message_id string")


FILTERS = {
    "eq_int": SqlRuleFilter("x = 1"),
    "not_eq": SqlRuleFilter("NOT (x = 1)"),            # unknown stays unknown under NOT
    "int_vs_float": SqlRuleFilter("f > 2 AND n = 5.0"),
    "like_escape": SqlRuleFilter("sys.MessageId LIKE 'k!_%' ESCAPE '!'"),
    "in_list": SqlRuleFilter("colour IN ('red', 'green')"),
    "exists": SqlRuleFilter("EXISTS(x)"),
    "is_null": SqlRuleFilter("x IS NULL"),
    "param": SqlRuleFilter("sys.Label = @l", {"@l": "refund"}),
    "guarded": SqlRuleFilter("EXISTS(n) AND n + 1 > 2"),   # a string n fails: an error
    "inject": SqlRuleFilter("a = 'x'' OR ''1''=''1'"),
    "correlation": CorrelationRuleFilter(label="order", properties={"colour": "red"}),
    "true": TrueRuleFilter(),
    "false": FalseRuleFilter(),
}

# Expected (matched, has error) per row id, per filter; None: unknown (not matched).
EXPECTED = {
    # A string property compared with a number: an evaluation error for that message.
    "eq_int":       {"num": True, "text": "error", "none": None, "null": None, "inject": None},
    "not_eq":       {"num": False, "text": "error", "none": None, "null": None, "inject": None},
    "int_vs_float": {"num": True, "text": "error", "none": None, "null": None, "inject": None},
    "like_escape":  {"num": True, "text": False, "none": None, "null": True, "inject": False},
    "in_list":      {"num": True, "text": False, "none": None, "null": False, "inject": None},
    "exists":       {"num": True, "text": True, "none": False, "null": True, "inject": False},
    "is_null":      {"num": False, "text": False, "none": True, "null": True, "inject": True},
    "param":        {"num": False, "text": False, "none": None, "null": True, "inject": False},
    "guarded":      {"num": True, "text": "error", "none": False, "null": False,
                     "inject": False},
    "inject":       {"num": None, "text": None, "none": None, "null": None, "inject": True},
    "correlation":  {"num": True, "text": False, "none": False, "null": False, "inject": False},
    "true":         dict.fromkeys(["num", "text", "none", "null", "inject"], True),
    "false":        dict.fromkeys(["num", "text", "none", "null", "inject"], False),
}


def test_topic_4_filters_three_valued_typed_and_errors_as_values(spark, messages):
    """Every filter over every row in one DataFrame: matched is true, false or NULL (unknown:
    a missing property, SQL's three-valued logic); a type error the parser could not see is
    an error value for that row (matched NULL), never a failed job."""
    from pyspark.sql import functions as F

    columns = [F.col("id")]
    for name, rule_filter in FILTERS.items():
        result = filter_column(rule_filter)
        columns += [result.matched.alias(f"{name}_matched"),
                    result.error.isNotNull().alias(f"{name}_error")]
    actual = messages.select(*columns)
    rows = []
    for row_id, *_ in ROWS:
        values = [row_id]
        for name in FILTERS:
            want = EXPECTED[name][row_id]
            values += [None, True] if want == "error" else [want, False]
        rows.append(tuple(values))
    schema = "id string, " + ", ".join(f"{n}_matched boolean, {n}_error boolean"
                                       for n in FILTERS)
    assert_df_equality(actual, spark.createDataFrame(rows, schema), ignore_nullable=True,
                       ignore_row_order=True)


def test_topic_5_actions_set_remove_and_compute(spark, messages):
    action = action_columns(SqlRuleAction("SET n = n * 2; SET tag = 'seen'; REMOVE colour"))
    actual = messages.where("id IN ('num', 'none')").select(
        "id", action.application_properties.alias("props"),
        action.error.isNotNull().alias("failed"))
    expected = spark.createDataFrame([
        ("num", encode_properties({"x": 1, "n": 10, "f": 2.5, "tag": "seen"}), False),
        ("none", encode_properties({"n": None, "tag": "seen"}), False),  # unknown * 2: null
    ], "id string, props string, failed boolean")
    assert_df_equality(actual, expected, ignore_nullable=True, ignore_row_order=True)
    # A failing action keeps the original text and says why.
    failing = action_columns(SqlRuleAction("SET n = n + 1"))
    (text,) = messages.where("id = 'text'").select(
        failing.application_properties.alias("p"), failing.error.alias("e")).collect()
    assert text.p == encode_properties(dict(ROWS[1][1])) and "cannot combine" in text.e
