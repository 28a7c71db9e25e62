"""Rule parsing (TOPIC-4 filters, TOPIC-5 actions): pure Python, no Spark. A rule is parsed
when it is created; every refusal names its line and column."""

import pytest

from sbdelta.exceptions import InvalidPropertyError, RuleSyntaxError
from sbdelta.management import RuleProperties, SqlRuleAction, SqlRuleFilter
from sbdelta.rules import MAX_SQL_LENGTH, parse_action, parse_filter, validate_rule


@pytest.mark.parametrize("sql", [
    "a = 1",
    "sys.Label = 'x' AND NOT (b <> 2.5)",
    "sys.messageid = 'k'",  # system property names are case-insensitive
    "user.color IN ('red', 'blue')",
    "a NOT IN (1, 2)",
    "name LIKE 'a!%%' ESCAPE '!'",
    "a NOT LIKE 'x%'",
    "x IS NOT NULL OR y IS NULL",
    "EXISTS(z)",
    "n + 2 * 3 > @p",
    "-a < 0 AND a % 2 = 0",
    "(a = 1) OR (b = 'x')",
    "a = 'x'') OR 1=1 --'",  # one string literal: x') OR 1=1 --
])
def test_topic_4_valid_filters_parse(sql):
    expr = parse_filter(sql, {"@p": 4})
    assert expr.sql == sql


def _refused(sql, parameters=None):
    with pytest.raises(RuleSyntaxError) as info:
        parse_filter(sql, parameters)
    return info.value


@pytest.mark.parametrize("sql, column, says", [
    ("colour = 'red", 10, "not closed"),
    ("nosuch(a) = 1", 1, "unknown function 'nosuch'"),
    ("sys.Nope = 1", 5, "no system property sys.Nope"),
    ("a = @missing", 5, "@missing is not supplied"),
    ("", 1, "empty"),
    ("a = 1; DROP TABLE x", 6, "unexpected character ';'"),
    ("a >", 4, "ends too early"),
    ("'x' + 1 = 2", 5, "cannot combine string with integer"),
])
def test_topic_4_invalid_filter_is_refused_with_its_position(sql, column, says):
    error = _refused(sql)
    assert error.line == 1 and error.column == column
    assert says in str(error)
    assert f"line 1, column {column}" in str(error)
    assert isinstance(error, InvalidPropertyError)  # a ValueError, raised before any write


def test_topic_4_position_counts_lines():
    error = _refused("a = 1\nAND b = 'x")
    assert (error.line, error.column) == (2, 9)


def test_topic_4_text_longer_than_the_limit_is_refused():
    assert "at most 1024" in str(_refused("x" * (MAX_SQL_LENGTH + 1)))


@pytest.mark.parametrize("sql", ["SET a = 1", "SET a = b + 1; REMOVE c", "REMOVE user.x",
                                 "SET total = price * @n", "SET a = 'x'; SET b = a + 'y'"])
def test_topic_5_valid_actions_parse(sql):
    assert parse_action(sql, {"@n": 2}).sql == sql


@pytest.mark.parametrize("sql, says", [
    ("SET a = ", "ends too early"),
    ("DELETE a", "unexpected 'DELETE'"),
    ("REMOVE sys.Label", "application properties only"),
])
def test_topic_5_invalid_action_is_refused(sql, says):
    with pytest.raises(RuleSyntaxError, match=says):
        parse_action(sql)


def test_topic_4_topic_5_validate_rule_checks_filter_and_action():
    validate_rule(RuleProperties("t", "s", "r", filter=SqlRuleFilter("a = 1"),
                                 action=SqlRuleAction("SET b = 2")))
    with pytest.raises(RuleSyntaxError, match="SQL filter"):
        validate_rule(RuleProperties("t", "s", "r", filter=SqlRuleFilter("a = ")))
    with pytest.raises(RuleSyntaxError, match="SQL action"):
        validate_rule(RuleProperties("t", "s", "r", action=SqlRuleAction("SET = 1")))
