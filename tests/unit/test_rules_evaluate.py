"""The Python evaluator of filters (sbdelta.rules.evaluate, TOPIC-4) without Spark: the
expectations the Spark Columns are held to (tests/store/test_rules_spark.py), message by
message. ``test_topic_4_the_python_evaluator_gives_what_spark_gives`` there compares the two
evaluators' values and error texts on one corpus."""

import pytest

from sbdelta._app_properties import encode_properties
from sbdelta.management import CorrelationRuleFilter, SqlRuleAction, SqlRuleFilter
from sbdelta.rules.evaluate import Message, evaluate_filter, supported

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


def test_unsupported_filters_are_named():
    assert supported(SqlRuleFilter("a = 1")) and supported(CorrelationRuleFilter(label="x"))
    assert not supported(SqlRuleAction("SET a = 1"))
