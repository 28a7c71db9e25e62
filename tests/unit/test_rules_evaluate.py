"""The Python evaluator of filters (sbdelta.rules.evaluate, TOPIC-4) without Spark: the
expectations the Spark Columns are held to (tests/store/test_rules_spark.py), message by
message. ``test_topic_4_the_python_evaluator_gives_what_spark_gives`` there compares the two
evaluators' values and error texts on one corpus."""

import pytest

from sbdelta._app_properties import encode_properties
from sbdelta.management import SqlRuleAction, SqlRuleFilter
from sbdelta.rules.evaluate import Message, evaluate_filter

from ..store.test_rules_spark import EXPECTED, FILTERS, ROWS


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_topic_4_filters_three_valued_typed_and_errors_as_values(name):
    for row_id, props, subject, message_id in ROWS:
        message = Message({"application_properties": encode_properties(props),
                           "subject": subject, "message_id": message_id})
        matched, error = evaluate_filter(FILTERS[name], message)
        want = EXPECTED[name][row_id]
        assert (matched, error is not None) == ((None, True) if want == "error"
                                                else (want, False)), (name, row_id, error)


def test_topic_4_operator_chains_and_guards():
    props = {f"p{i}": i for i in range(1, 13)}

    def run(text, values):
        return evaluate_filter(SqlRuleFilter(text), Message(
            {"application_properties": encode_properties(values)}))

    assert run("p1 + p2 + p3 + p4 = 10", props) == (True, None)
    assert run(" AND ".join(f"p{i} = {i}" for i in range(1, 13)), props) == (True, None)
    matched, error = run("p1 + p2 + p3 + p4 = 10", {**props, "p3": "three"})
    assert matched is None and error == "'+' cannot combine integer with string"
    # The left side decides: the right side's error never counts.
    assert run("p1 = 2 AND p3 + 1 = 4", {**props, "p3": "three"}) == (False, None)
    assert run("p1 = 1 OR p3 + 1 = 4", {**props, "p3": "three"}) == (True, None)
    assert run("p1 = 1 AND p3 + 1 = 4", {**props, "p3": "three"})[1] is not None


def test_java_double_text():
    """Doubles as Java's Double.toString (Spark's cast to string) writes them."""
    from sbdelta.rules.evaluate import java_double

    cases = {1e10: "1.0E10", 1e-5: "1.0E-5", 100.0: "100.0", 0.001: "0.001", 1e7: "1.0E7",
             1234567.0: "1234567.0", -2.5: "-2.5", -0.0: "-0.0", 1.5e-7: "1.5E-7",
             float("nan"): "NaN", float("-inf"): "-Infinity"}
    assert {v: java_double(v) for v in cases} == cases


def test_topic_5_actions_set_remove_and_compute():
    """The expectations of tests/store/test_rules_spark.py's action tests, in Python."""
    from sbdelta.rules.evaluate import evaluate_action

    def run(action, props):
        return evaluate_action(SqlRuleAction(action), Message(
            {"application_properties": encode_properties(props)}))

    assert run("SET n = n * 2; SET tag = 'seen'; REMOVE colour",
               {"x": 1, "n": 5, "f": 2.5, "colour": "red"}) == (
        encode_properties({"x": 1, "n": 10, "f": 2.5, "tag": "seen"}), None)
    assert run("SET n = n * 2; SET tag = 'seen'; REMOVE colour", None) == (
        encode_properties({"n": None, "tag": "seen"}), None)
    text, error = run("SET n = n + 1", {"x": "1", "n": "abc", "colour": "blue"})
    assert text == encode_properties({"x": "1", "n": "abc", "colour": "blue"})
    assert "cannot combine" in error
    assert run("SET a = a + 1; SET b = b + a; SET c = a * b; REMOVE a; SET d = c + c + c; "
               "SET e = a", {"a": 1, "b": 2}) == (
        encode_properties({"b": 4, "c": 8, "d": 24, "e": None}), None)
