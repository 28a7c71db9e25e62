"""A subscription's admission of topic rows (TOPIC-2 windows, TOPIC-4 filters, TOPIC-5 copies,
TTL-3, SESS-1): the Python form (``Admission.admit_rows``, for receives without Spark, issue
16) admits the same rows and copies with the same properties, sizes, dead-letter reasons and
TTL cut as the Spark form, compared as DataFrames."""

from datetime import datetime, timedelta, timezone

import pytest
from chispa import assert_df_equality

from sbdelta._app_properties import encode_properties
from sbdelta._clock import as_utc
from sbdelta._properties import RuleProperties
from sbdelta._store import COPY_SHIFT
from sbdelta._subscription import Admission, RuleWindow
from sbdelta.management import (CorrelationRuleFilter, SqlRuleAction, SqlRuleFilter,
                                TrueRuleFilter)

T0 = datetime(2030, 1, 1, tzinfo=timezone.utc)
SCHEMA = ("seq bigint, pos bigint, message_id string, subject string, session_id string, "
          "application_properties string, enqueued_time timestamp, "
          "scheduled_enqueue_time timestamp, time_to_live_ms bigint, expires_at timestamp, "
          "size int")
HOUR = 3600 * 1000


def _row(seq, minutes, props, *, subject=None, session=None, ttl=None, scheduled=None):
    enqueued = T0 + timedelta(minutes=minutes)
    start = scheduled or enqueued
    text = encode_properties(props)
    return (seq, seq, f"m{seq}", subject, session, text, enqueued, scheduled, ttl,
            None if ttl is None else start + timedelta(milliseconds=ttl),
            100 + len(text or ""))


ROWS = [
    _row(1, 1, {"n": 10}),                        # window 1 of rule "big" matches
    _row(2, 20, {"n": 10}),                       # its later version (n > 50) does not
    _row(3, 1, {"n": "text"}),                    # a filter error
    _row(4, 2, None, subject="x"),                # the correlation rule
    _row(5, -5, {"n": 99}),                       # before every window
    _row(6, 3, {"n": 7}, ttl=2 * HOUR),           # TTL cut to the subscription's hour
    _row(7, 4, {"n": 70}, ttl=2 * HOUR, scheduled=T0 + timedelta(minutes=30), session="s"),
    _row(8, 25, {"n": 60}, session="s"),          # the later version matches
]


def _rule(name, rule_filter, action=None):
    return RuleProperties("t", "sub", name, filter=rule_filter, action=action)


WINDOWS = [
    RuleWindow(_rule("big", SqlRuleFilter("n > 5")), T0, T0 + timedelta(minutes=10)),
    RuleWindow(_rule("big", SqlRuleFilter("n > 50")), T0 + timedelta(minutes=10)),
    RuleWindow(_rule("label", CorrelationRuleFilter(label="x")), T0),
]
CASES = {
    "dead_letter_errors": dict(windows=WINDOWS, ttl_cap=timedelta(hours=1),
                               dead_letter_errors=True),
    "drop_errors": dict(windows=WINDOWS, ttl_cap=None, dead_letter_errors=False),
    "sessions": dict(windows=[RuleWindow(_rule("$Default", TrueRuleFilter()), T0)],
                     ttl_cap=None, dead_letter_errors=True, requires_session=True),
    "sessions_and_errors": dict(windows=WINDOWS, ttl_cap=timedelta(hours=1),
                                dead_letter_errors=True, requires_session=True),
    "no_rules": dict(windows=[], ttl_cap=None, dead_letter_errors=True),
    # TOPIC-5: copies from rules with actions, one failing for text n.
    "actions": dict(windows=WINDOWS + [
        RuleWindow(_rule("bump", SqlRuleFilter("EXISTS(n)"), SqlRuleAction("SET n = n + 1")),
                   T0),
        RuleWindow(_rule("tag", TrueRuleFilter(), SqlRuleAction("SET seen = TRUE")),
                   T0 + timedelta(minutes=2))], ttl_cap=timedelta(hours=1),
        dead_letter_errors=True, requires_session=False),
    "actions_dropping_errors": dict(windows=WINDOWS + [
        RuleWindow(_rule("bump", SqlRuleFilter("EXISTS(n)"), SqlRuleAction("SET n = n + 1")),
                   T0)], ttl_cap=None, dead_letter_errors=False),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_topic_2_4_ttl_3_sess_1_python_admission_admits_what_spark_admits(spark, case):
    admission = Admission(**CASES[case])
    frame = spark.createDataFrame(ROWS, SCHEMA)
    names = frame.columns
    # delta-rs hands timestamps back naive, in UTC.
    as_read = [{n: (v.astimezone(timezone.utc).replace(tzinfo=None)
                    if isinstance(v, datetime) else v) for n, v in zip(names, row)}
               for row in ROWS]
    admitted = admission(frame)
    python = admission.admit_rows(as_read)
    columns = [c for c in admitted.columns if c in names or c.startswith("dead_letter")]
    assert all(set(columns) == set(r) for r in python), (columns, python)
    expected_schema = SCHEMA + "".join(f", {c} string" for c in columns if c not in names)
    want = spark.createDataFrame(
        [tuple(as_utc(r[c]) if isinstance(r[c], datetime) else r[c] for c in columns)
         for r in python],
        ", ".join(part for part in expected_schema.split(", ")
                  if part.split(" ")[0] in columns))
    assert_df_equality(admitted.select(*columns), want.select(*columns), ignore_nullable=True,
                       ignore_row_order=True)
    by_seq = {r["seq"]: r for r in python}
    if case == "dead_letter_errors":  # what the cases are about, in so many words
        assert sorted(by_seq) == [1, 3, 4, 6, 7, 8]
        assert by_seq[3]["dead_letter_reason"] == "FilterException"
        assert by_seq[6]["time_to_live_ms"] == HOUR
    if case == "actions":  # copy 1 "bump", copy 2 "tag" (names in order), copy 0 the rest
        bump, tag = 1 << COPY_SHIFT, 2 << COPY_SHIFT
        assert by_seq[1 | bump]["application_properties"] == encode_properties(
            {"n": 11, "RuleName": "bump"})
        assert by_seq[3 | bump]["dead_letter_reason"] == "RuleActionException"
        assert 6 | tag in by_seq and 1 | tag not in by_seq  # "tag" applies from minute 2


def test_topic_4_5_admissions_of_the_same_rules_share_their_built_columns(spark, monkeypatch):
    """Each client, and each registry version of a subscription, makes an Admission of its
    own; the rules' Columns (hundreds of py4j calls each) are built once for all Admissions
    of the same rules and dead-letter flag, and never shared with other rules: a parameter
    of 1.0 where another has 1, another rule time, or another flag builds its own, and
    each admits by its own rules."""
    import sbdelta.rules

    built = []
    real = sbdelta.rules.with_properties
    monkeypatch.setattr(sbdelta.rules, "with_properties",
                        lambda body: built.append(1) or real(body))

    def windows(value, start=T0):
        return [RuleWindow(_rule("r", SqlRuleFilter("n = @v", parameters={"v": value}),
                                 SqlRuleAction("SET hit = TRUE")), start)]

    frame = spark.createDataFrame([_row(1, 1, {"n": 1}), _row(2, 1, {"n": 1.5}),
                                   _row(3, 1, {"n": "x"})], SCHEMA)

    def admitted(admission):
        return sorted((r.seq & ((1 << COPY_SHIFT) - 1), r.asDict().get("dead_letter_reason"))
                      for r in admission(frame).collect())

    one = dict(ttl_cap=None, dead_letter_errors=True)
    first = admitted(Admission(windows(1), **one))
    assert len(built) == 1
    assert admitted(Admission(windows(1), **one)) == first == [
        (1, None), (3, "FilterException")]
    assert len(built) == 1  # an equal Admission: nothing built
    assert admitted(Admission(windows(1.5), **one)) == [(2, None), (3, "FilterException")]
    assert admitted(Admission(windows(1.0), **one)) == first
    assert admitted(Admission(windows(1, T0 + timedelta(minutes=5)), **one)) == []
    assert admitted(Admission(windows(1), ttl_cap=None, dead_letter_errors=False)) == [
        (1, None)]
    assert len(built) == 5
