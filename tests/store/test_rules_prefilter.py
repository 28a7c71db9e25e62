"""The admission pre-filter (TOPIC-4, TOPIC-5): compiled Spark code that drops, before the
rules run, messages no filter can match or fail on. It must never drop a message a filter
matches or fails on (that would lose a copy or a dead-letter), over JSON texts built to fool
it; and it must drop the plain non-matching messages, or it buys nothing. Its other side,
the certain match, takes a message without the rules only where a filter certainly matches
it (never where the rules would not match, or fail)."""

import pytest
from chispa import assert_df_equality

from sbdelta.management import (CorrelationRuleFilter, FalseRuleFilter, SqlRuleFilter,
                                TrueRuleFilter)
from sbdelta.rules import certain_match_column, filter_column, prefilter_column

TEXTS = {
    # id: application_properties JSON text, written by hand (not only as the sender writes it)
    "zero": '{"g":0}',
    "three": '{"g":3}',
    "spaced": '{ "g" : 3 , "s" : "blue" }',
    "float_zero": '{"g":0.0}',
    "minus_zero": '{"g":-0.0}',
    "int_minus_zero": '{"g":-0}',           # a long 0, as "0" is
    "exp_zero": '{"g":0e5}',
    "underflow": '{"g":1e-400}',            # a double 0.0: matches g = 0
    "string_zero": '{"g":"0"}',             # a string compared with a number: an error
    "string_three": '{"g":"3"}',
    "other_case": '{"G":0}',                # names match in any letter case
    "other_case_3": '{"G":3}',
    "exact_string": '{"G":3,"g":"x"}',      # the exact spelling wins: a string, an error
    "exact_wins": '{"g":3,"G":0}',
    "nested_string": '{"a":{"g":"x"},"g":3}',
    "bool": '{"g":true}',
    "null": '{"g":null}',
    "timestamp": '{"g":{"$t":"2030-01-01T00:00:00+00:00"}}',
    "array": '{"g":[0]}',
    "duplicate": '{"g":3,"g":0}',           # not an object with unique keys: an error
    "escaped_key": '{"\\u0067":"x"}',       # the key is g, hidden from a regular expression
    "non_ascii": '{"g":0,"n":"\u00e9"}',
    "not_json": 'not json',
    "json_array": '[1,2]',
    "no_text": None,
    "empty": '{}',
    "other_key": '{"h":0}',
    "big": '{"g":9223372036854775807}',
    "red": '{"g":1,"s":"red","flag":true}',
    "blue": '{"g":1,"s":"blue","flag":false}',
    "string_flag": '{"flag":"true","s":5}',
    "escaped_value": '{"s":"re\\"d"}',
    "newline_duplicate": '{"g":3,\n"h":1,"g":0}',
    "trailing_newline": '{"g":3}\n',
    "line_separator": '{"g":3}\u2028',    # not JSON whitespace
}

FILTERS = {
    "g = 0": SqlRuleFilter("g = 0"),
    "0 = g": SqlRuleFilter("0 = g"),
    "g > 2": SqlRuleFilter("g > 2"),
    "g < 0.5": SqlRuleFilter("g < 0.5"),
    "g <> 0": SqlRuleFilter("g <> 0"),
    "big": SqlRuleFilter("g = 9223372036854775806"),
    "big >": SqlRuleFilter("g > 9223372036854775806"),
    "s = red": SqlRuleFilter("s = 'red'"),
    "red = s": SqlRuleFilter("'red' = s"),
    "s > a": SqlRuleFilter("s > 'a'"),
    "g = y": SqlRuleFilter("g = 'y'"),     # nested_string: a nested g is no top-level g
    "flag": SqlRuleFilter("flag = true"),
    "flag <> false": SqlRuleFilter("flag <> false"),
    "and": SqlRuleFilter("s = 'red' AND g = 1"),
    "or": SqlRuleFilter("g = 0 OR s = 'blue'"),
    "not": SqlRuleFilter("NOT (g = 3)"),
    "not not": SqlRuleFilter("NOT (NOT (g = 3))"),
    "guarded": SqlRuleFilter("EXISTS(g) AND g = 3"),
    # A left side that decides skips the right side's errors (g = 'x' fails on a number).
    "or skips": SqlRuleFilter("s = 'blue' OR g = 'x'"),
    "or fails first": SqlRuleFilter("g = 'x' OR s = 'blue'"),
    "not and skips": SqlRuleFilter("NOT (g = 5 AND g = 'x')"),
    "param": SqlRuleFilter("g = @v", {"@v": 3}),
    "exists": SqlRuleFilter("EXISTS(g)"),
    "in": SqlRuleFilter("g IN (0, 3)"),
    "correlation": CorrelationRuleFilter(properties={"g": 0}),
    "correlation label": CorrelationRuleFilter(label="order", properties={"s": "red"}),
    "correlation float": CorrelationRuleFilter(properties={"g": 3.0}),
    "correlation spaced name": CorrelationRuleFilter(properties={"my key": 1}),
    "true": TrueRuleFilter(),
    "false": FalseRuleFilter(),
}

# (text, filter) pairs the pre-filter drops: plain texts where the property is absent or
# holds a value of the constant's kind that certainly does not match.
_NO_G = ["no_text", "empty", "other_key", "string_flag", "null"]
_ZERO = ["zero", "float_zero", "minus_zero", "int_minus_zero", "exp_zero", "underflow",
         "other_case"]
_NO_S_NOR_FLAG = _ZERO + [
    "three", "string_zero", "string_three", "other_case_3", "bool", "null", "timestamp",
    "no_text", "empty", "other_key", "big", "trailing_newline"]
DROPPED = {
    "g = 0": _NO_G + ["three", "spaced", "big", "red", "blue", "other_case_3",
                      "trailing_newline"],
    "param": _NO_G + _ZERO + ["big", "red", "blue"],
    "g > 2": _NO_G + _ZERO + ["red", "blue"],
    "s = red": _NO_S_NOR_FLAG + ["spaced", "blue"],
    "flag": _NO_S_NOR_FLAG + ["spaced", "blue"],
    # s = 'red' AND g = 1: a g that may fail keeps the message, whatever s holds
    "and": _ZERO + ["three", "spaced", "other_case_3", "null", "no_text", "empty", "other_key",
                    "big", "blue", "trailing_newline"],
}
DROPPED["0 = g"] = DROPPED["g = 0"]
# Texts the pre-filter reads: every other one (not JSON, nested, escaped, non-ASCII, a key
# twice in any letter case) is kept, whatever the filter.
_PLAIN = _ZERO + [
    "three", "spaced", "string_zero", "string_three", "other_case_3", "bool", "null",
    "timestamp", "no_text", "empty", "other_key", "big", "red", "blue", "string_flag",
    "trailing_newline"]
# A correlation filter never fails: a value of another kind simply does not match.
DROPPED["correlation"] = [t for t in _PLAIN if t not in _ZERO]
DROPPED["correlation label"] = [t for t in _PLAIN if t != "red"]  # subject "order" and s red
DROPPED["false"] = list(TEXTS)
DROPPED["correlation float"] = [t for t in _PLAIN if t not in ("three", "spaced", "other_case_3",
                                                              "trailing_newline")]


@pytest.fixture(scope="module")
def verdicts(spark):
    """One row per (text, filter): what the rules decide and whether the pre-filter keeps it."""
    from pyspark.sql import functions as F

    rows = spark.createDataFrame(
        [(i, text, "order" if i in ("zero", "red", "blue", "duplicate") else None)
         for i, text in TEXTS.items()],
        "id string, application_properties string, subject string")
    cells = []
    for name, rule_filter in FILTERS.items():
        result = filter_column(rule_filter)
        keep = prefilter_column([rule_filter])
        certain = certain_match_column(rule_filter)
        cells.append(F.struct(F.lit(name).alias("filter"),
                              F.coalesce(result.matched, F.lit(False)).alias("matched"),
                              result.error.isNotNull().alias("failed"),
                              (F.lit(True) if keep is None else keep).alias("kept"),
                              (F.lit(False) if certain is None else certain).alias("certain")))
    return (rows.select("id", F.explode(F.array(*cells)).alias("v"))
            .select("id", "v.*").cache())


def test_topic_4_the_prefilter_never_drops_a_message_a_filter_matches_or_fails_on(spark,
                                                                                   verdicts):
    from pyspark.sql import functions as F

    lost = verdicts.where(~F.col("kept") & (F.col("matched") | F.col("failed")))
    assert_df_equality(lost.select("id", "filter"),
                       spark.createDataFrame([], "id string, filter string"),
                       ignore_nullable=True)


def test_topic_4_the_prefilter_drops_plain_messages_that_cannot_match(spark, verdicts):
    from pyspark.sql import functions as F

    dropped = verdicts.where(~F.col("kept") & F.col("filter").isin(*DROPPED))
    expected = spark.createDataFrame(
        [(text, name) for name, texts in DROPPED.items() for text in texts],
        "id string, filter string")
    assert_df_equality(dropped.select("id", "filter"), expected, ignore_row_order=True,
                       ignore_nullable=True)


# (text, filter) pairs taken as certain matches: plain texts whose values decide the filter
# exactly (an integer with an integer, a string or a boolean under = or <>), AND and OR
# decided left to right; a correlation filter where every part is (system parts equal).
_G3 = ["three", "spaced", "other_case_3", "trailing_newline"]
CERTAIN = {
    "g = 0": ["zero", "int_minus_zero", "other_case"],
    "g > 2": _G3,
    "g <> 0": _G3 + ["red", "blue"],
    "s = red": ["red"],
    "flag": ["red"],
    "flag <> false": ["red"],
    "and": ["red"],
    # g = 0 decides whatever s is
    "or": ["zero", "int_minus_zero", "other_case", "spaced", "blue"],
    "not": ["zero", "int_minus_zero", "other_case", "red", "blue"],
    "not not": _G3,
    "or skips": ["spaced", "blue"],
    "or fails first": [],  # g = 'x' fails on every number here: the right side never decides
    "not and skips": _G3 + ["zero", "int_minus_zero", "other_case", "red", "blue"],
    "param": _G3,
    "correlation": ["zero", "int_minus_zero", "other_case"],
    "correlation label": ["red"],  # subject "order" and s "red"
    "true": list(TEXTS),
}
CERTAIN["0 = g"] = CERTAIN["g = 0"]
CERTAIN["red = s"] = CERTAIN["s = red"]


def test_topic_4_a_certain_match_is_one_the_rules_make_without_failing(spark, verdicts):
    from pyspark.sql import functions as F

    wrong = verdicts.where(F.col("certain") & (~F.col("matched") | F.col("failed")))
    assert_df_equality(wrong.select("id", "filter"),
                       spark.createDataFrame([], "id string, filter string"),
                       ignore_nullable=True)


def test_topic_4_plain_texts_that_decide_a_filter_are_certain_matches(spark, verdicts):
    from pyspark.sql import functions as F

    expected = spark.createDataFrame(
        [(text, name) for name, texts in CERTAIN.items() for text in texts],
        "id string, filter string")
    assert_df_equality(verdicts.where(F.col("certain")).select("id", "filter"), expected,
                       ignore_row_order=True, ignore_nullable=True)


def test_topic_4_filters_it_cannot_read_keep_every_message():
    """A filter the pre-filter does not understand (or one that is always true) makes it
    keep everything: None, so admission adds no condition at all."""
    assert prefilter_column([FILTERS["exists"]]) is None
    assert prefilter_column([FILTERS["g = 0"], FILTERS["in"]]) is None
    assert prefilter_column([FILTERS["correlation spaced name"]]) is None
    assert prefilter_column([FILTERS["true"]]) is None
    assert prefilter_column([FILTERS["g = 0"], FILTERS["s = red"]]) is not None
    with pytest.raises(TypeError, match="prefilter_column takes rule filters, got str"):
        prefilter_column(["g = 0"])
    for name in ("exists", "in", "g < 0.5", "s > a", "correlation float",
                 "correlation spaced name", "false"):
        assert certain_match_column(FILTERS[name]) is None, name
    with pytest.raises(TypeError, match="certain_match_column takes a rule filter, got str"):
        certain_match_column("g = 0")
