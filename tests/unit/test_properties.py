"""Entity descriptions: defaults, bounds, types, normalisation, dict round trip, check_update."""

import dataclasses
import json
from datetime import datetime, timedelta, timezone

import pytest

from sbdelta.exceptions import ImmutablePropertyError, InvalidEntityNameError, InvalidPropertyError
from sbdelta._properties import (
    CorrelationRuleFilter,
    EntityStatus,
    FalseRuleFilter,
    QueueProperties,
    RuleProperties,
    SqlRuleAction,
    SqlRuleFilter,
    SubscriptionProperties,
    TopicProperties,
    TrueRuleFilter,
    check_update,
)

S = timedelta(seconds=1)
MIN = timedelta(minutes=1)


def make(cls, **kwargs):
    """Build ``cls`` with valid identity arguments."""
    if cls is QueueProperties:
        return QueueProperties("orders", **kwargs)
    if cls is TopicProperties:
        return TopicProperties("events", **kwargs)
    if cls is SubscriptionProperties:
        return SubscriptionProperties("events", "all", **kwargs)
    return RuleProperties("events", "all", "r1", **kwargs)


ENTITY_CLASSES = [QueueProperties, TopicProperties, SubscriptionProperties]
ALL_CLASSES = ENTITY_CLASSES + [RuleProperties]

COMMON_DEFAULTS = {
    "default_message_time_to_live": None, "auto_delete_on_idle": None,
    "enable_batched_operations": True, "status": EntityStatus.ACTIVE, "user_metadata": None,
    "created_at_utc": None, "updated_at_utc": None, "accessed_at_utc": None,
}
RECEIVING_DEFAULTS = {
    "lock_duration": 30 * S, "max_delivery_count": 10,
    "dead_lettering_on_message_expiration": False, "requires_session": False,
    "forward_to": None, "forward_dead_lettered_messages_to": None,
}
SENDING_DEFAULTS = {
    "requires_duplicate_detection": False, "duplicate_detection_history_time_window": 10 * MIN,
    "enable_partitioning": False, "max_size_in_megabytes": 1024,
    "max_message_size_in_kilobytes": 256,
}
NO_EFFECT_DEFAULTS = {"enable_express": False, "authorization_rules": None}
DEFAULTS = {
    QueueProperties: {"name": "orders", **COMMON_DEFAULTS, **RECEIVING_DEFAULTS,
                      **SENDING_DEFAULTS, **NO_EFFECT_DEFAULTS},
    TopicProperties: {"name": "events", **COMMON_DEFAULTS, **SENDING_DEFAULTS,
                      **NO_EFFECT_DEFAULTS, "support_ordering": True,
                      "filtering_messages_before_publishing": False, "size_in_bytes": None},
    SubscriptionProperties: {"topic_name": "events", "name": "all", **COMMON_DEFAULTS,
                             **RECEIVING_DEFAULTS,
                             "dead_lettering_on_filter_evaluation_exceptions": True},
    RuleProperties: {"topic_name": "events", "subscription_name": "all", "name": "r1",
                     "filter": TrueRuleFilter(), "action": None, "created_at_utc": None},
}


@pytest.mark.parametrize("cls", ALL_CLASSES)
def test_defaults(cls):
    obj = make(cls)
    values = {f.name: getattr(obj, f.name) for f in dataclasses.fields(cls)}
    assert values == DEFAULTS[cls]


@pytest.mark.parametrize("cls", ALL_CLASSES)
def test_every_field_has_a_validator(cls):
    assert set(cls._VALIDATORS) == {f.name for f in dataclasses.fields(cls)}


@pytest.mark.parametrize("cls", ALL_CLASSES)
def test_options_are_keyword_only(cls):
    with pytest.raises(TypeError):
        cls(*["a", "b", "c", "d"][:len(cls._IDENTITY) + 1])


# field -> (accepted values, rejected values); each bound is tried on both sides.
BOUNDS = {
    "lock_duration": ([S, 5 * MIN, "PT5M", "PT0.001S", timedelta(microseconds=1)],
                      [5 * MIN + timedelta(microseconds=1), "PT5M1S", "PT0S", None, "P1D", 30]),
    "max_delivery_count": ([1, 10, 2**31 - 1], [0, -1, 2**31, 1.0, "5", True, None]),
    "default_message_time_to_live": ([S, "P1000D", None, "P10675199DT2H48M5.4775807S"],
                                     ["PT0S", -S, timedelta(0), 60, "1h"]),
    "auto_delete_on_idle": ([5 * MIN, "PT5M", "P365D", None],
                            [5 * MIN - timedelta(microseconds=1), "PT4M59S", S, "PT0S", 300]),
    "duplicate_detection_history_time_window": (
        [20 * S, "PT20S", timedelta(days=7), "P7D"],
        [20 * S - timedelta(microseconds=1), "PT19S", timedelta(days=7, microseconds=1), "P8D",
         None, 600]),
    "max_size_in_megabytes": ([1, 1024, 81920, 10**6], [0, -5, 1024.0, "1024", False]),
    "max_message_size_in_kilobytes": ([1, 256, 102400], [0, 102401, 256.0, True, None]),
    "user_metadata": ([None, "", "x" * 1024], ["x" * 1025, 5, b"bytes"]),
    "forward_to": ([None, "other", "a/b/c", "x" * 260], ["a//b", "/a", "x" * 261, 5, "a b"]),
    "forward_dead_lettered_messages_to": ([None, "dlq-target"], ["bad$", "..", 1]),
    "status": ([EntityStatus.DISABLED, "SendDisabled", "receivedisabled", "ACTIVE"],
               ["Creating", "Deleting", "", None, 1]),
}
BOOL_FIELDS = ["dead_lettering_on_message_expiration", "requires_duplicate_detection",
               "requires_session", "enable_partitioning", "enable_batched_operations",
               "dead_lettering_on_filter_evaluation_exceptions"]
for _name in BOOL_FIELDS:
    BOUNDS[_name] = ([True, False], [1, 0, "true", "False", None])

CASES = [(cls, fname, ok, bad) for cls in ENTITY_CLASSES for fname, (ok, bad) in BOUNDS.items()
         if fname in cls._VALIDATORS]


@pytest.mark.parametrize("cls, fname, ok, bad", CASES,
                         ids=[f"{c.__name__}.{f}" for c, f, _, _ in CASES])
def test_bounds_and_types(cls, fname, ok, bad):
    for value in ok:
        make(cls, **{fname: value})
    for value in bad:
        with pytest.raises(InvalidPropertyError, match=fname) as info:
            make(cls, **{fname: value})
        assert repr(value)[:40] in str(info.value)


@pytest.mark.parametrize("fname, value, allowed", [
    ("lock_duration", "PT6M", "longer than 0 and at most PT5M"),
    ("auto_delete_on_idle", "PT1M", "at least PT5M"),
    ("default_message_time_to_live", "PT0S", "longer than 0"),
    ("duplicate_detection_history_time_window", "PT1S", r"from PT20S \(20 seconds\) to P7D"),
    ("max_delivery_count", 0, "from 1 to 2147483647"),
    ("max_size_in_megabytes", 0, ">= 1"),
    ("max_message_size_in_kilobytes", 0, "from 1 to 102400"),
    ("user_metadata", "x" * 1025, "at most 1024 characters"),
    ("status", "Nope", "'Active', 'Disabled', 'SendDisabled', 'ReceiveDisabled'"),
    ("enable_partitioning", "yes", "a bool"),
])
def test_messages_state_the_allowed_range(fname, value, allowed):
    with pytest.raises(InvalidPropertyError, match=allowed):
        make(QueueProperties, **{fname: value})


def test_strings_are_normalised():
    q = make(QueueProperties, lock_duration="PT1M", default_message_time_to_live="P1D",
             status="senddisabled", forward_to="", forward_dead_lettered_messages_to="")
    assert q.lock_duration == MIN and q.default_message_time_to_live == timedelta(days=1)
    assert q.status is EntityStatus.SEND_DISABLED and q.status == "SendDisabled"
    assert q.forward_to is None and q.forward_dead_lettered_messages_to is None


def test_entity_status_values():
    assert [s.value for s in EntityStatus] == ["Active", "Disabled", "SendDisabled",
                                               "ReceiveDisabled"]
    assert EntityStatus("disabled") is EntityStatus.DISABLED


def test_queue_cannot_forward_to_itself():
    with pytest.raises(InvalidPropertyError, match="forward_to"):
        QueueProperties("Orders", forward_to="orders")
    with pytest.raises(InvalidPropertyError, match="forward_dead_lettered_messages_to"):
        QueueProperties("orders", forward_dead_lettered_messages_to="ORDERS")


@pytest.mark.parametrize("cls, args, kind", [
    (QueueProperties, ("a//b",), "queue"),
    (QueueProperties, ("x" * 261,), "queue"),
    (TopicProperties, ("events.",), "topic"),
    (SubscriptionProperties, ("events", "a/b"), "subscription"),
    (SubscriptionProperties, ("/events", "all"), "topic"),
    (RuleProperties, ("events", "all", "r..1"), "rule"),
    (RuleProperties, ("events", "all/x", "r1"), "subscription"),
    (QueueProperties, (5,), "queue"),
])
def test_names_are_validated(cls, args, kind):
    with pytest.raises(InvalidEntityNameError, match=kind):
        cls(*args)


def test_rule_default_name():
    assert RuleProperties("t", "s", "$default").name == "$Default"


def test_timestamps():
    cet = timezone(timedelta(hours=1))
    q = make(QueueProperties, created_at_utc=datetime(2024, 1, 1, 13, tzinfo=cet),
             updated_at_utc="2024-01-01T12:00:00Z", accessed_at_utc=None)
    assert q.created_at_utc == datetime(2024, 1, 1, 12, tzinfo=timezone.utc)
    assert q.created_at_utc.tzinfo is timezone.utc
    assert q.updated_at_utc == q.created_at_utc
    for bad in (datetime(2024, 1, 1), 1700000000, "yesterday"):
        with pytest.raises(InvalidPropertyError, match="created_at_utc"):
            make(QueueProperties, created_at_utc=bad)


def test_assignment_is_validated():
    q = make(QueueProperties)
    q.lock_duration = "PT2M"
    assert q.lock_duration == 2 * MIN
    with pytest.raises(InvalidPropertyError, match="lock_duration"):
        q.lock_duration = "PT6M"
    assert q.lock_duration == 2 * MIN
    with pytest.raises(InvalidPropertyError, match="forward_to"):
        q.forward_to = "Orders"
    assert q.forward_to is None  # the failed assignment left the old value
    with pytest.raises(AttributeError, match="lock_durration"):
        q.lock_durration = "PT1M"
    with pytest.raises(InvalidEntityNameError):
        q.name = "a//b"


def test_replace_and_validate_field():
    q = dataclasses.replace(make(QueueProperties), max_delivery_count=3)
    assert q.max_delivery_count == 3
    with pytest.raises(InvalidPropertyError):
        dataclasses.replace(q, max_delivery_count=0)
    assert QueueProperties.validate_field("lock_duration", "PT10S") == 10 * S
    with pytest.raises(InvalidPropertyError, match="no property 'nope'"):
        QueueProperties.validate_field("nope", 1)
    with pytest.raises(InvalidPropertyError, match="no property 'lock_duration'"):
        TopicProperties.validate_field("lock_duration", "PT10S")


# --- rule filters and actions ---

def test_true_false_filters():
    assert TrueRuleFilter().sql_expression == "1=1" and FalseRuleFilter().sql_expression == "1=0"
    assert isinstance(TrueRuleFilter(), SqlRuleFilter)
    assert TrueRuleFilter() == TrueRuleFilter() and TrueRuleFilter() != SqlRuleFilter("1=1")
    assert make(RuleProperties, filter=None).filter == TrueRuleFilter()


def test_sql_filter_and_action_validation():
    assert SqlRuleFilter("a = @p", {"@p": 1}).parameters == {"@p": 1}
    assert SqlRuleFilter("a = 1", {}).parameters is None
    for bad in ("", "   ", "x" * 1025, 5, None):
        with pytest.raises(InvalidPropertyError, match="sql_expression"):
            SqlRuleFilter(bad)
        with pytest.raises(InvalidPropertyError, match="sql_expression"):
            SqlRuleAction(bad)
    SqlRuleFilter("x" * 1024)
    for bad in ([1], {"": 1}, {1: "a"}, {"p": None}, {"p": [1]}):
        with pytest.raises(InvalidPropertyError, match="parameters"):
            SqlRuleFilter("a = 1", bad)


def test_correlation_filter():
    f = CorrelationRuleFilter(subject="invoice", properties={"region": "eu", "n": 1})
    assert f.label == "invoice" and f.subject == "invoice"
    assert CorrelationRuleFilter(label="x", subject="x").label == "x"
    with pytest.raises(InvalidPropertyError, match="subject"):
        CorrelationRuleFilter(label="x", subject="y")
    with pytest.raises(InvalidPropertyError, match="at least one condition"):
        CorrelationRuleFilter()
    with pytest.raises(InvalidPropertyError, match="at least one condition"):
        CorrelationRuleFilter(properties={})
    with pytest.raises(InvalidPropertyError, match="correlation_id"):
        CorrelationRuleFilter(correlation_id=5)
    with pytest.raises(InvalidPropertyError, match="properties"):
        CorrelationRuleFilter(properties={"a": {"nested": 1}})
    with pytest.raises(TypeError):
        CorrelationRuleFilter(labl="x")
    with pytest.raises(TypeError):
        CorrelationRuleFilter("x")  # keyword-only


def test_rule_filter_and_action_types():
    with pytest.raises(InvalidPropertyError, match="filter"):
        make(RuleProperties, filter="1=1")
    with pytest.raises(InvalidPropertyError, match="filter"):
        make(RuleProperties, filter={"type": "Nope"})
    with pytest.raises(InvalidPropertyError, match="action"):
        make(RuleProperties, action=SqlRuleFilter("a = 1"))
    with pytest.raises(InvalidPropertyError, match="action"):
        make(RuleProperties, action="SET a = 1")


# --- to_dict / from_dict ---

NOW = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=timezone.utc)
ROUND_TRIP = [
    make(QueueProperties),
    QueueProperties("contoso/x-servicebus-transfer/0", lock_duration=MIN,
                    max_delivery_count=2**31 - 1, default_message_time_to_live="PT1M30.5S",
                    auto_delete_on_idle="P2D", dead_lettering_on_message_expiration=True,
                    requires_duplicate_detection=True,
                    duplicate_detection_history_time_window="PT20S", requires_session=True,
                    enable_partitioning=True, max_size_in_megabytes=5120,
                    max_message_size_in_kilobytes=1024, forward_to="other",
                    forward_dead_lettered_messages_to="dlq", enable_batched_operations=False,
                    status="Disabled", user_metadata="meta", created_at_utc=NOW,
                    updated_at_utc=NOW, accessed_at_utc=NOW),
    make(TopicProperties),
    TopicProperties("events", default_message_time_to_live="PT1H", auto_delete_on_idle="PT5M",
                    requires_duplicate_detection=True,
                    duplicate_detection_history_time_window="P7D", enable_partitioning=True,
                    max_size_in_megabytes=2048, max_message_size_in_kilobytes=102400,
                    enable_batched_operations=False, status="SendDisabled", user_metadata="",
                    created_at_utc=NOW),
    make(SubscriptionProperties),
    SubscriptionProperties("events", "all", lock_duration="PT5M", max_delivery_count=1,
                           default_message_time_to_live="PT10S", auto_delete_on_idle="PT1H",
                           dead_lettering_on_message_expiration=True,
                           dead_lettering_on_filter_evaluation_exceptions=False,
                           requires_session=True, forward_to="orders",
                           forward_dead_lettered_messages_to="orders", status="ReceiveDisabled",
                           user_metadata="x", accessed_at_utc=NOW),
    make(RuleProperties),
    make(RuleProperties, filter=FalseRuleFilter()),
    make(RuleProperties, filter=SqlRuleFilter("a = @p", {"@p": 1.5, "@q": True}),
         action=SqlRuleAction("SET b = @v", {"@v": "x"}), created_at_utc=NOW),
    RuleProperties("events", "all", "$Default",
                   filter=CorrelationRuleFilter(correlation_id="c", message_id="m", to="t",
                                                reply_to="r", label="l", session_id="s",
                                                reply_to_session_id="rs", content_type="ct",
                                                properties={"k": 1})),
]


@pytest.mark.parametrize("obj", ROUND_TRIP, ids=lambda o: type(o).__name__)
def test_dict_round_trip(obj):
    data = obj.to_dict()
    assert json.loads(json.dumps(data)) == data  # JSON-safe
    back = type(obj).from_dict(json.loads(json.dumps(data)))
    assert back == obj
    assert back.to_dict() == data


def test_to_dict_formats():
    data = ROUND_TRIP[1].to_dict()
    assert data["lock_duration"] == "PT1M" and data["default_message_time_to_live"] == "PT1M30.5S"
    assert data["status"] == "Disabled"
    assert data["created_at_utc"] == "2024-05-06T07:08:09.123456+00:00"
    assert make(QueueProperties).to_dict()["auto_delete_on_idle"] is None


@pytest.mark.parametrize("cls", ALL_CLASSES)
def test_from_dict_rejects_unknown_and_missing_keys(cls):
    data = make(cls).to_dict()
    with pytest.raises(InvalidPropertyError, match="unknown keys.*'bogus'"):
        cls.from_dict({**data, "bogus": 1})
    del data["name"]
    with pytest.raises(InvalidPropertyError, match="missing keys.*'name'"):
        cls.from_dict(data)
    with pytest.raises(InvalidPropertyError, match="expects a dict"):
        cls.from_dict([1])


# --- check_update ---

def test_fixed_at_creation():
    assert QueueProperties.FIXED_AT_CREATION == {"enable_partitioning", "requires_session"}
    assert TopicProperties.FIXED_AT_CREATION == {"enable_partitioning"}
    assert SubscriptionProperties.FIXED_AT_CREATION == {"requires_session"}


@pytest.mark.parametrize("cls, fname", [
    (QueueProperties, "enable_partitioning"), (QueueProperties, "requires_session"),
    (TopicProperties, "enable_partitioning"), (SubscriptionProperties, "requires_session"),
])
def test_check_update_refuses_fixed_fields(cls, fname):
    old = make(cls)
    with pytest.raises(ImmutablePropertyError, match=fname):
        check_update(old, make(cls, **{fname: True}))
    assert issubclass(ImmutablePropertyError, InvalidPropertyError)


@pytest.mark.parametrize("cls", ENTITY_CLASSES)
def test_check_update_allows_other_changes(cls):
    old = make(cls)
    changes = {"default_message_time_to_live": "PT1H", "status": "Disabled",
               "user_metadata": "new", "max_size_in_megabytes": 2048, "lock_duration": "PT1M",
               "requires_duplicate_detection": True, "created_at_utc": NOW}
    new = make(cls, **{k: v for k, v in changes.items() if k in cls._VALIDATORS})
    check_update(old, new)
    renamed = dataclasses.replace(new, name=new.name.upper())
    check_update(old, renamed)  # names are case-insensitive


def test_check_update_refuses_identity_and_kind_changes():
    with pytest.raises(ImmutablePropertyError, match="name"):
        check_update(make(QueueProperties), QueueProperties("other"))
    with pytest.raises(ImmutablePropertyError, match="topic_name"):
        check_update(make(SubscriptionProperties), SubscriptionProperties("other", "all"))
    with pytest.raises(InvalidPropertyError, match="QueueProperties.*TopicProperties"):
        check_update(make(QueueProperties), make(TopicProperties))
    check_update(make(RuleProperties), make(RuleProperties, filter=FalseRuleFilter()))


def test_the_sdks_options_without_an_effect_are_taken_kept_or_dropped_as_documented():
    """azure-servicebus's create_queue/create_topic options that mean nothing on Delta tables:
    ``enable_express``, ``support_ordering`` and ``filtering_messages_before_publishing`` are
    kept (they round-trip through the registry's dict), ``authorization_rules`` (SAS keys) and
    a topic's ``size_in_bytes`` are accepted and not kept; a wrong type still fails."""
    from sbdelta.management import (AccessRights, AuthorizationRule, EntityAvailabilityStatus,
                                    MessageCountDetails)

    rule = AuthorizationRule(type="SharedAccessAuthorizationRule", key_name="k",
                             primary_key="secret", rights=[AccessRights.SEND, "listen"])
    queue = QueueProperties("orders", enable_express=True, authorization_rules=[rule])
    assert queue.enable_express is True and queue.authorization_rules is None
    assert "secret" not in json.dumps(queue.to_dict())
    assert QueueProperties.from_dict(queue.to_dict()) == queue
    topic = TopicProperties("events", support_ordering=False, size_in_bytes=123,
                            filtering_messages_before_publishing=True, authorization_rules=[])
    assert (topic.support_ordering, topic.filtering_messages_before_publishing,
            topic.size_in_bytes) == (False, True, None)
    assert TopicProperties.from_dict(topic.to_dict()) == topic
    old = {k: v for k, v in QueueProperties("orders").to_dict().items()
           if k not in ("enable_express", "authorization_rules")}  # a registry row from before
    assert QueueProperties.from_dict(old) == QueueProperties("orders")
    for entity in (queue, topic, make(SubscriptionProperties)):
        assert entity.availability_status is EntityAvailabilityStatus.AVAILABLE
    assert EntityAvailabilityStatus("available") is EntityAvailabilityStatus.AVAILABLE
    assert AccessRights("MANAGE") is AccessRights.MANAGE
    assert MessageCountDetails(active_message_count=2).active_message_count == 2
    with pytest.raises(InvalidPropertyError, match="authorization_rules=.*a list of "
                                                   "AuthorizationRule"):
        QueueProperties("orders", authorization_rules="all")
    with pytest.raises(InvalidPropertyError, match="size_in_bytes=-1 is invalid"):
        TopicProperties("events", size_in_bytes=-1)
    with pytest.raises(InvalidPropertyError, match="enable_express"):
        QueueProperties("orders", enable_express="yes")
