"""Rule evaluation on Spark (TOPIC-4 filters, TOPIC-5 actions): compiled Columns over message
rows, results compared as DataFrames. Rows carry application properties as the sender writes
them (``encode_properties``)."""

import uuid
from datetime import datetime, timezone

import pytest
from chispa import assert_df_equality

from sbdelta._app_properties import encode_properties
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


def _tree_size(column) -> int:
    import py4j.protocol

    try:
        return len(column._jc.expr().toString())  # Spark 3.5: the Catalyst expression
    except py4j.protocol.Py4JError:
        return len(column._jc.node().toString())  # Spark 4: a Column is a ColumnNode tree


def test_topic_4_operator_chains_compile_to_trees_linear_in_the_rule(spark):
    """An operand read several times by the node above it is bound once per row
    (sbdelta.rules.scope): chains of arithmetic, AND and OR evaluate right, and the Column tree
    grows with the rule's length, not exponentially (``a + b + c + d = 10`` used to build a
    plan the executor ran out of heap deserialising)."""
    props = {f"p{i}": i for i in range(1, 13)}
    rows = spark.createDataFrame([("all", encode_properties(props)),
                                  ("p3_text", encode_properties({**props, "p3": "three"})),
                                  ("none", None)],
                                 "id string, application_properties string")

    def chain(n: int, op: str) -> str:
        return f" {op} ".join(f"p{i}" for i in range(1, n + 1))

    filters = {
        "sum4": SqlRuleFilter(f"{chain(4, '+')} = 10"),
        "and12": SqlRuleFilter(" AND ".join(f"p{i} = {i}" for i in range(1, 13))),
        "or30": SqlRuleFilter(" OR ".join(f"p1 = {i + 100}" for i in range(29)) + " OR p2 = 2"),
        "mixed": SqlRuleFilter("(p1 * 2 + p2 > 3 OR p3 - p4 = 0) AND NOT (p5 IN (1, 2) OR "
                               "p6 + p7 * p8 < 0)"),
    }
    from pyspark.sql import functions as F

    columns = [F.col("id")]
    for name, rule_filter in filters.items():
        result = filter_column(rule_filter)
        columns += [result.matched.alias(name), result.error.isNotNull().alias(f"{name}_e")]
    expected = spark.createDataFrame([
        ("all", True, False, True, False, True, False, True, False),
        # p3 is a string: the sums fail for that message; AND/OR chains compare it with an
        # integer (an error) unless an earlier operand already decided the result.
        ("p3_text", None, True, None, True, True, False, True, False),
        ("none", None, False, None, False, None, False, None, False),
    ], "id string, " + ", ".join(f"{n} boolean, {n}_e boolean" for n in filters))
    assert_df_equality(rows.select(*columns), expected, ignore_nullable=True,
                       ignore_row_order=True)
    # Linear growth: twice the operands, about twice the tree (exponential: ~16 times).
    def text(n: int, op: str) -> str:
        if op == "+":
            return f"{chain(n, op)} = 1"
        return f" {op} ".join(f"p{i} = {i}" for i in range(1, n + 1))

    for op in ("+", "OR"):
        small, large = (filter_column(SqlRuleFilter(text(n, op))) for n in (3, 6))
        assert _tree_size(large.matched) < 3 * _tree_size(small.matched), op


def test_topic_5_action_chains_apply_in_order(spark):
    """Each statement sees what the previous ones left; a chain of SETs stays a linear tree."""
    rows = spark.createDataFrame([("m", encode_properties({"a": 1, "b": 2}))],
                                 "id string, application_properties string")
    action = action_columns(SqlRuleAction(
        "SET a = a + 1; SET b = b + a; SET c = a * b; REMOVE a; SET d = c + c + c; "
        "SET e = a"))
    actual = rows.select("id", action.application_properties.alias("props"),
                         action.error.alias("error"))
    expected = spark.createDataFrame(
        [("m", encode_properties({"b": 4, "c": 8, "d": 24, "e": None}), None)],
        "id string, props string, error string")
    assert_df_equality(actual, expected, ignore_nullable=True)


# -- the Python evaluator (sbdelta.rules.evaluate) gives what Spark gives ------------------------

_T0 = datetime(2030, 1, 1, tzinfo=timezone.utc)
_U0 = uuid.UUID("12345678-1234-5678-1234-567812345678")
#: id -> application properties text (raw text where the codec would refuse it), subject,
#: message id.
EQUIVALENCE_ROWS = [(i, encode_properties(p), s, m) for i, p, s, m in ROWS] + [
    ("edges", encode_properties({
        "big": 9223372036854775807, "min": -9223372036854775808, "z": 0, "f": 2.5,
        "nan": float("nan"), "inf": float("inf"), "s": "abc", "S2": "x", "b": True,
        "t": _T0, "u": _U0, "y": b"\x00\x01", "n": None, "seven": 7, "neg": -7,
        "huge": 1e308}), "edge", "e_1"),
    ("not_json", "not json", "order", "k_3"),
    ("array", "[1, 2]", None, None),
    ("twice", '{"a":1,"a":2}', None, None),
    ("nested", '{"o":{"a":1},"l":[1],"x":3,"X":4}', None, None),
    ("wide", '{"w":123456789012345678901234,"e":1e2,"m":-0,"ts":{"$t":"nope"}}', None, None),
]
EQUIVALENCE_FILTERS = [
    "big + 1 > 0", "-min > 0", "min / -1 = 1", "z / z = 1", "seven % -3 = 1", "neg % 3 = -1",
    "neg / 2 = -3", "seven / z = 1", "neg % z = 1", "f / 0 > 1", "-f / 0 < 0", "f % 0 = 1",
    "z / 0.0 = 1", "nan = nan", "nan <> nan", "nan < 1", "inf > huge * 10", "huge * 10 = inf",
    "f % 1 = 0.5", "inf % 2 = 1", "2 % inf = 2", "s + 'x' = 'abcx'", "s < 'b'", "s > 1",
    "s + 1 = 1", "b = TRUE", "b < b", "b <> FALSE", "t > t", "t = t", "u = u",
    "u < u", "y = y", "t = u", "s LIKE 'a%'", "s LIKE 'a_c'", "s NOT LIKE '%z%'", "seven LIKE 'a'",
    "s LIKE seven", "s LIKE 'a!%' ESCAPE '!'", "s LIKE 'ab!'  ESCAPE '!'",
    "colour LIKE '%e%'", "property('s') = 'abc'", "p('S') = 'abc'", "property(seven) = 1",
    "property(s2) IS NULL", "s IN ('abc', 1)", "missing IN (1, 2)", "seven IN (1, 7.0)",
    "seven NOT IN (1, 2)", "x = 1 OR s = 1", "s = 1 OR x = 1", "x = 2 AND s = 1",
    "EXISTS(x) OR x + 's' = 'a'", "NOT EXISTS(x)", "EXISTS(n) AND n IS NULL",
    "sys.MessageId = 'k_1'", "sys.Label IS NULL", "sys.DeliveryCount = 0",
    "sys.LockToken IS NULL", "EXISTS(sys.Label)", "z = 0.0", "f = 2.5", "-s = 1",
    "-seven = -7", "w > 1e20", "e = 100", "m = 0", "ts IS NULL", "ts = ts", "o IS NULL",
    "l IS NULL", "x = 3", "X = 4", "S2 = 'x' AND s2 = 'x'", "1 / z = 1", "NOT (a = 1)",
    "(a = 1 OR a = 2) AND NOT (b IN (TRUE))", "sys.Label = @l AND seven = @n",
]
_PARAMETERS = {"@l": "order", "@n": 7}


def _equivalence_filters():
    filters = {f"f{i}": SqlRuleFilter(text, {k: v for k, v in _PARAMETERS.items()
                                             if k in text})
               for i, text in enumerate(EQUIVALENCE_FILTERS)}
    filters.update({f"named_{name}": rule_filter for name, rule_filter in FILTERS.items()})
    filters.update({
        "corr_int": CorrelationRuleFilter(properties={"x": 1}),
        "corr_float": CorrelationRuleFilter(properties={"x": 1.0}),
        "corr_bool": CorrelationRuleFilter(properties={"b": True}),
        "corr_both": CorrelationRuleFilter(label="order", message_id="k_1",
                                           properties={"colour": "red", "n": 5}),
        "corr_none": CorrelationRuleFilter(message_id="nobody"),
    })
    return filters


def test_topic_4_the_python_evaluator_gives_what_spark_gives(spark):
    """``sbdelta.rules.evaluate`` (filters over one message, for the engine without Spark)
    against the Spark Columns over the same messages: the same matched value and the same
    error text for every filter and message, edge cases of every kind included (64-bit
    overflow, division by zero, NaN and infinities, LIKE escapes, case-insensitive names,
    texts that are no JSON object, nested values, AND/OR skipping their right side)."""
    from sbdelta.rules.evaluate import evaluate_filter

    _assert_both_evaluators_agree(spark, _equivalence_filters(), "filter_struct",
                                  evaluate_filter, "matched: boolean")


EQUIVALENCE_ACTIONS = [
    "SET n = n * 2; SET tag = 'seen'; REMOVE colour", "SET f = 3", "SET z = 1.5e10",
    "SET q = 0.0001", "SET q = -f", "SET big = big + 1", "SET s2 = 'y'", "REMOVE S",
    "SET t2 = t", "SET u2 = u; SET y2 = y; SET b2 = b", "SET m = sys.MessageId",
    "SET l = sys.Label", "SET nested2 = o", "SET w2 = w", "SET e2 = e", "SET x = NULL",
    "SET s3 = s + '\"q'", "SET h = huge * 10; SET k = nan", "SET d = seven / 2.0",
    "SET x = x + 1", "REMOVE a; SET a = 1",
]


def test_topic_5_the_python_actions_write_what_spark_writes(spark):
    """``sbdelta.rules.evaluate.evaluate_action`` against ``action_columns`` over the same
    messages: the same properties text byte for byte (keys sorted, escapes, doubles as Java
    writes them, untouched values as Spark re-renders them) and the same error."""
    from sbdelta.rules.evaluate import evaluate_action

    actions = {f"a{i}": SqlRuleAction(text) for i, text in enumerate(EQUIVALENCE_ACTIONS)}
    _assert_both_evaluators_agree(spark, actions, "action_struct", evaluate_action,
                                  "application_properties: string")


def _assert_both_evaluators_agree(spark, rules, spark_side, python_side, value_field):
    """Each rule of ``rules`` (name -> filter or action) over :data:`EQUIVALENCE_ROWS`: the
    struct Column ``Rules.<spark_side>(rule)`` of each rule, all of them in ONE Column over
    one property bag (:func:`sbdelta.rules.with_properties`, as a subscription's admission
    builds its rules), and ``python_side(rule, message)`` per message are the same
    ``(value, error)`` pairs, compared as one DataFrame."""
    from pyspark.sql import functions as F

    from sbdelta.rules import with_properties
    from sbdelta.rules.evaluate import Message

    rows = spark.createDataFrame(
        EQUIVALENCE_ROWS,
        "id string, application_properties string, subject string, message_id string")
    every = with_properties(lambda bound: F.struct(*[
        getattr(bound, spark_side)(rule).alias(name) for name, rule in rules.items()]))
    expected = []
    for row_id, text, subject, message_id in EQUIVALENCE_ROWS:
        message = Message({"application_properties": text, "subject": subject,
                           "message_id": message_id})
        expected.append((row_id, tuple(tuple(python_side(rule, message))
                                       for rule in rules.values())))
    schema = "id string, every struct<" + ", ".join(
        f"{n}: struct<{value_field}, error: string>" for n in rules) + ">"
    assert_df_equality(rows.select("id", every.alias("every")),
                       spark.createDataFrame(expected, schema),
                       ignore_nullable=True, ignore_row_order=True)
