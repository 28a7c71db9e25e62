"""Namespace configuration files (the Azure Service Bus emulator's Config.json format)."""

import copy
import json
from datetime import timedelta
from pathlib import Path

import pytest

from sbdelta.config import (
    NamespaceConfig,
    SubscriptionConfig,
    TopicConfig,
    dump_config,
    load_config,
    loads_config,
)
from sbdelta.exceptions import ConfigurationError, InvalidEntityNameError, InvalidPropertyError
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
)

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "conf" / "namespace.json"
BAD = ROOT / "tests" / "data" / "config"

# The sample shipped with the official emulator (Config.json), verbatim apart from layout.
EMULATOR_SAMPLE = """{"UserConfig": {"Namespaces": [{"Name": "sbemulatorns",
  "Queues": [{"Name": "queue.1", "Properties": {"DeadLetteringOnMessageExpiration": false,
    "DefaultMessageTimeToLive": "PT1H", "DuplicateDetectionHistoryTimeWindow": "PT20S",
    "ForwardDeadLetteredMessagesTo": "", "ForwardTo": "", "LockDuration": "PT1M",
    "MaxDeliveryCount": 3, "RequiresDuplicateDetection": false, "RequiresSession": false}}],
  "Topics": [{"Name": "topic.1", "Properties": {"DefaultMessageTimeToLive": "PT1H",
      "DuplicateDetectionHistoryTimeWindow": "PT20S", "RequiresDuplicateDetection": false},
    "Subscriptions": [
      {"Name": "subscription.1", "Properties": {"DeadLetteringOnMessageExpiration": false,
        "DefaultMessageTimeToLive": "PT1H", "LockDuration": "PT1M", "MaxDeliveryCount": 3,
        "ForwardDeadLetteredMessagesTo": "", "ForwardTo": "", "RequiresSession": false},
       "Rules": [{"Name": "app-prop-filter-1", "Properties": {"FilterType": "Correlation",
         "CorrelationFilter": {"ContentType": "application/text", "CorrelationId": "id1",
           "Label": "subject1", "MessageId": "msgid1", "ReplyTo": "someQueue",
           "ReplyToSessionId": "sessionId", "SessionId": "session1", "To": "xyz"}}}]},
      {"Name": "subscription.2", "Rules": [{"Name": "user-prop-filter-1", "Properties": {
         "FilterType": "Correlation", "CorrelationFilter": {"Properties": {"prop3": "value3"}}}}]},
      {"Name": "subscription.3"}]}]}],
  "Logging": {"Type": "File"}}}"""


def doc(queues=(), topics=(), name="ns"):
    """A minimal document with one namespace."""
    return {"UserConfig": {"Namespaces": [{"Name": name, "Queues": list(queues),
                                           "Topics": list(topics)}]}}


def test_sample_config_loads():
    cfg = load_config(SAMPLE)
    assert isinstance(cfg, NamespaceConfig) and cfg.name == "sbdelta-local"
    orders, telemetry, queue1 = cfg.queues
    assert orders == QueueProperties("orders", lock_duration=timedelta(minutes=1),
                                     max_delivery_count=5,
                                     dead_lettering_on_message_expiration=True,
                                     default_message_time_to_live=timedelta(hours=1))
    assert telemetry == QueueProperties("telemetry", enable_partitioning=True,
                                        requires_duplicate_detection=True,
                                        duplicate_detection_history_time_window="PT10M")
    assert queue1 == QueueProperties("queue.1")
    (events,) = cfg.topics
    assert isinstance(events, TopicConfig) and events.properties == TopicProperties("events")
    subs = {s.properties.name: s for s in events.subscriptions}
    assert list(subs) == ["all", "errors", "billing"]
    assert all(isinstance(s, SubscriptionConfig) for s in subs.values())
    assert subs["all"].rules == ()
    assert subs["all"].properties == SubscriptionProperties("events", "all")
    (errors_rule,) = subs["errors"].rules
    assert errors_rule.filter == SqlRuleFilter("severity = 'error'")
    assert (errors_rule.topic_name, errors_rule.subscription_name) == ("events", "errors")
    (billing_rule,) = subs["billing"].rules
    assert billing_rule.filter == CorrelationRuleFilter(label="invoice")


def test_sample_config_round_trips():
    cfg = load_config(SAMPLE)
    dumped = dump_config(cfg)
    assert load_config(dumped) == cfg
    assert loads_config(json.dumps(dumped)) == cfg
    assert load_config(str(SAMPLE), namespace="SBDELTA-LOCAL") == cfg


def test_emulator_sample_loads():
    cfg = loads_config(EMULATOR_SAMPLE)
    assert cfg.name == "sbemulatorns"
    (queue,) = cfg.queues
    assert queue.forward_to is None and queue.max_delivery_count == 3
    assert queue.duplicate_detection_history_time_window == timedelta(seconds=20)
    sub1, sub2, sub3 = cfg.topics[0].subscriptions
    assert sub1.rules[0].filter.reply_to_session_id == "sessionId"
    assert sub1.rules[0].filter.subject == "subject1"
    assert sub2.rules[0].filter.properties == {"prop3": "value3"}
    assert sub3.rules == ()
    assert loads_config(json.dumps(dump_config(cfg))) == cfg


def test_full_round_trip_with_every_property():
    queue = QueueProperties("q/1", lock_duration="PT45S", max_delivery_count=7,
                            default_message_time_to_live="P14D", auto_delete_on_idle="PT1H",
                            dead_lettering_on_message_expiration=True,
                            requires_duplicate_detection=True,
                            duplicate_detection_history_time_window="PT1M30.5S",
                            requires_session=True, enable_partitioning=True,
                            max_size_in_megabytes=5120, max_message_size_in_kilobytes=1024,
                            forward_to="q2", forward_dead_lettered_messages_to="dlq",
                            enable_batched_operations=False, status="SendDisabled",
                            user_metadata="owner: team-a")
    topic = TopicProperties("t", default_message_time_to_live="PT2H", auto_delete_on_idle="P1D",
                            requires_duplicate_detection=True, enable_partitioning=True,
                            max_size_in_megabytes=2048, max_message_size_in_kilobytes=512,
                            enable_batched_operations=False, status="Disabled",
                            user_metadata="m")
    sub = SubscriptionProperties("t", "s", lock_duration="PT5M", max_delivery_count=1,
                                 dead_lettering_on_filter_evaluation_exceptions=False,
                                 requires_session=True, forward_to="q2",
                                 status=EntityStatus.RECEIVE_DISABLED)
    rules = (
        RuleProperties("t", "s", "$Default"),
        RuleProperties("t", "s", "never", filter=FalseRuleFilter()),
        RuleProperties("t", "s", "sql", filter=SqlRuleFilter("a > @n", {"@n": 3}),
                       action=SqlRuleAction("SET b = @v", {"@v": "x"})),
        RuleProperties("t", "s", "corr", filter=CorrelationRuleFilter(
            correlation_id="c", message_id="m", to="t", reply_to="r", label="l",
            session_id="s", reply_to_session_id="rs", content_type="ct",
            properties={"k": 1, "b": True}), action=SqlRuleAction("SET x = 1")),
    )
    cfg = NamespaceConfig("ns1", (queue, QueueProperties("q2"), QueueProperties("dlq")),
                          (TopicConfig(topic, (SubscriptionConfig(sub, rules),)),))
    dumped = dump_config(cfg)
    props = dumped["UserConfig"]["Namespaces"][0]["Queues"][0]["Properties"]
    assert props["LockDuration"] == "PT45S" and props["Status"] == "SendDisabled"
    assert props["DuplicateDetectionHistoryTimeWindow"] == "PT1M30.5S"
    assert "UserMetadata" in props and "EnablePartitioning" in props
    assert "ForwardTo" not in dumped["UserConfig"]["Namespaces"][0]["Queues"][1]["Properties"]
    assert loads_config(json.dumps(dumped)) == cfg


def test_comments_and_json5():
    text = """// leading comment
    { /* block */ "UserConfig": { "Namespaces": [ { "Name": "ns", "Queues": [
        { "Name": "q", "Properties": { "LockDuration": "PT10S", }, }, // trailing commas
    ] } ] } }"""
    assert loads_config(text).queues[0].lock_duration == timedelta(seconds=10)


def test_subscription_without_rules_and_entities_without_properties():
    cfg = load_config(doc(queues=[{"Name": "q", "Properties": None}],
                          topics=[{"Name": "t", "Subscriptions": [{"Name": "s"}]}]))
    assert cfg.queues == (QueueProperties("q"),)
    assert cfg.topics[0].subscriptions[0].rules == ()
    assert load_config(doc(topics=[{"Name": "t"}])).topics[0].subscriptions == ()


@pytest.mark.parametrize("filename, error, pattern", [
    ("malformed.json", ConfigurationError, r"malformed\.json: malformed JSON at line 9, column 1"),
    ("unknown_property.json", ConfigurationError,
     r"Queues\[1\]\.Properties: unknown key 'LockDurration' \(did you mean 'LockDuration'\?\); "
     r"allowed keys: AutoDeleteOnIdle, .*LockDuration"),
    ("bad_duration.json", InvalidPropertyError,
     r"Namespaces\[0\]\.Queues\[1\]\.Properties\.LockDuration: lock_duration='30 seconds'"),
    ("bad_name.json", InvalidEntityNameError,
     r"Topics\[0\]\.Subscriptions\[0\]\.Name: Invalid subscription name 'all/of-them'"),
    ("duplicate_queue.json", ConfigurationError,
     r"Queues\[1\]: duplicate entity name 'Orders'.*Queues\[0\]"),
])
def test_invalid_files(filename, error, pattern):
    with pytest.raises(error, match=pattern) as info:
        load_config(BAD / filename)
    assert str(BAD / filename) in str(info.value)


def test_missing_file_and_bad_source():
    with pytest.raises(ConfigurationError, match="not found"):
        load_config(BAD / "nope.json")
    with pytest.raises(ConfigurationError, match="cannot read"):
        load_config(BAD)  # a directory
    with pytest.raises(ConfigurationError, match="path or a dict"):
        load_config(42)
    with pytest.raises(ConfigurationError, match="as a str"):
        loads_config(b"{}")
    with pytest.raises(ConfigurationError, match=r"\(root\): expected an object, got an array"):
        loads_config("[]")


@pytest.mark.parametrize("text, pattern", [
    ("", "malformed JSON"),
    ('{"UserConfig": {"Namespaces": []}, "UserConfig": {}}', "malformed JSON: Duplicate key"),
    ("{\n\n  'a': ,\n}", "line 3, column 8"),
    ("[1, 2", "malformed JSON at line 1"),
])
def test_malformed_json(text, pattern):
    with pytest.raises(ConfigurationError, match=pattern):
        loads_config(text)


def q(props=None, **extra):
    return {"Name": "q", **({"Properties": props} if props is not None else {}), **extra}


def rule(props, name="r"):
    return doc(topics=[{"Name": "t", "Subscriptions": [{"Name": "s", "Rules": [
        {"Name": name, "Properties": props}]}]}])


@pytest.mark.parametrize("document, error, pattern", [
    ({}, ConfigurationError, r"\(root\): missing required key 'UserConfig'"),
    ({"UserConfig": {}, "Extra": 1}, ConfigurationError, "unknown key 'Extra'.*UserConfig"),
    ({"UserConfig": {"Namespaces": [], "Loging": {}}}, ConfigurationError,
     r"UserConfig: unknown key 'Loging' \(did you mean 'Logging'\?\)"),
    ({"UserConfig": {"Namespaces": []}}, ConfigurationError, "no namespace is declared"),
    ({"UserConfig": {"Namespaces": {}}}, ConfigurationError,
     "UserConfig.Namespaces: expected an array, got an object"),
    ({"UserConfig": {"Namespaces": [{"Name": "n"}], "Logging": {"Type": 1}}},
     ConfigurationError, "Logging.Type"),
    ({"UserConfig": {"Namespaces": [{"Name": "n", "Queue": []}]}}, ConfigurationError,
     r"Namespaces\[0\]: unknown key 'Queue' \(did you mean 'Queues'\?\)"),
    ({"UserConfig": {"Namespaces": [{"Queues": []}]}}, ConfigurationError,
     r"Namespaces\[0\]: missing required key 'Name'"),
    ({"UserConfig": {"Namespaces": [{"Name": "bad name"}]}}, InvalidEntityNameError,
     r"Namespaces\[0\]\.Name: Invalid namespace name"),
    ({"UserConfig": {"Namespaces": [{"Name": "n", "Queues": {"Name": "q"}}]}},
     ConfigurationError, r"Namespaces\[0\]\.Queues: expected an array, got an object"),
    (doc(queues=["q"]), ConfigurationError, r"Queues\[0\]: expected an object, got a string"),
    (doc(queues=[q(Subscriptions=[])]), ConfigurationError,
     r"Queues\[0\]: unknown key 'Subscriptions'"),
    (doc(queues=[q([])]), ConfigurationError, r"Queues\[0\]\.Properties: expected an object"),
    (doc(queues=[q({"MaxDeliveryCount": "5"})]), InvalidPropertyError,
     r"Properties\.MaxDeliveryCount: max_delivery_count='5'"),
    (doc(queues=[q({"MaxDeliveryCount": 0})]), InvalidPropertyError,
     r"MaxDeliveryCount: .*from 1 to"),
    (doc(queues=[q({"RequiresSession": "false"})]), InvalidPropertyError,
     r"Properties\.RequiresSession: requires_session='false'.*bool"),
    (doc(queues=[q({"LockDuration": None})]), InvalidPropertyError,
     r"LockDuration: .*cannot be unlimited"),
    (doc(queues=[q({"ForwardTo": "q"})]), InvalidPropertyError,
     r"Queues\[0\]\.Properties: forward_to='q'"),
    (doc(queues=[q({"ForwardTo": "a//b"})]), InvalidPropertyError, r"Properties\.ForwardTo: "),
    (doc(queues=[q({"Status": "Paused"})]), InvalidPropertyError, r"Properties\.Status: "),
    (doc(queues=[q({"DeadLetteringOnFilterEvaluationExceptions": True})]), ConfigurationError,
     "unknown key 'DeadLetteringOnFilterEvaluationExceptions'"),
    (doc(topics=[{"Name": "t", "Properties": {"LockDuration": "PT1M"}}]), ConfigurationError,
     r"Topics\[0\]\.Properties: unknown key 'LockDuration'"),
    (doc(topics=[{"Name": "t", "Properties": {"AutoDeleteOnIdle": "PT1M"}}]),
     InvalidPropertyError, r"Topics\[0\]\.Properties\.AutoDeleteOnIdle: .*at least PT5M"),
    (doc(queues=[{"Name": "a//b"}]), InvalidEntityNameError, r"Queues\[0\]\.Name: "),
    (doc(queues=[{"Name": 5}]), InvalidEntityNameError, r"Queues\[0\]\.Name: .*expected a str"),
    (doc(queues=[{"Name": "x"}], topics=[{"Name": "X"}]), ConfigurationError,
     r"Topics\[0\]: duplicate entity name 'X'.*Queues\[0\]"),
    (doc(topics=[{"Name": "t", "Subscriptions": [{"Name": "s"}, {"Name": "S"}]}]),
     ConfigurationError, r"Subscriptions\[1\]: duplicate subscription name 'S'"),
    (doc(topics=[{"Name": "t", "Subscriptions": [{"Name": "s", "Properties": {
        "LockDuration": "PT6M"}}]}]), InvalidPropertyError,
     r"Subscriptions\[0\]\.Properties\.LockDuration: "),
    (rule({"FilterType": "Sql", "SqlFilter": {"SqlExpression": "a = 1"}}, name="$bad"),
     InvalidEntityNameError, r"Rules\[0\]\.Name: "),
    (rule({"SqlFilter": {"SqlExpression": "a = 1"}}), ConfigurationError,
     r"Rules\[0\]\.Properties: missing required key 'FilterType'"),
    (rule({"FilterType": "Regex"}), ConfigurationError,
     r"Properties\.FilterType: 'Regex' is not a filter type; allowed: Correlation, Sql"),
    (rule({"FilterType": "Sql"}), ConfigurationError, "FilterType 'Sql' needs a 'SqlFilter'"),
    (rule({"FilterType": "Sql", "SqlFilter": {"SqlExpression": "a = 1"},
           "CorrelationFilter": {"Label": "x"}}), ConfigurationError,
     r"Properties\.CorrelationFilter: not allowed with FilterType 'Sql'"),
    (rule({"FilterType": "Sql", "SqlFilter": {"Sql": "a = 1"}}), ConfigurationError,
     r"SqlFilter: unknown key 'Sql'"),
    (rule({"FilterType": "Sql", "SqlFilter": {"SqlExpression": ""}}), InvalidPropertyError,
     r"Properties\.SqlFilter: sql_expression=''"),
    (rule({"FilterType": "Correlation", "CorrelationFilter": {}}), InvalidPropertyError,
     r"CorrelationFilter: CorrelationRuleFilter needs at least one condition"),
    (rule({"FilterType": "Correlation", "CorrelationFilter": {"Subject": "x"}}),
     ConfigurationError, r"CorrelationFilter: unknown key 'Subject'.*Label"),
    (rule({"FilterType": "Correlation", "CorrelationFilter": {"Label": 5}}),
     InvalidPropertyError, r"CorrelationFilter: label=5"),
    (rule({"FilterType": "True", "Action": {"SqlExpression": 1}}), InvalidPropertyError,
     r"Properties\.Action: sql_expression=1"),
    (rule({"FilterType": "True", "Priority": 1}), ConfigurationError,
     r"Properties: unknown key 'Priority'"),
])
def test_invalid_documents(document, error, pattern):
    with pytest.raises(error, match=pattern):
        load_config(document)


def test_duplicate_rules():
    document = rule({"FilterType": "True"})
    rules = document["UserConfig"]["Namespaces"][0]["Topics"][0]["Subscriptions"][0]["Rules"]
    rules.append(copy.deepcopy(rules[0]))
    rules[1]["Name"] = "R"
    with pytest.raises(ConfigurationError, match=r"Rules\[1\]: duplicate rule name 'R'"):
        load_config(document)


def test_filter_types_are_case_insensitive():
    cfg = load_config(rule({"FilterType": "false"}))
    assert cfg.topics[0].subscriptions[0].rules[0].filter == FalseRuleFilter()
    cfg = load_config(rule({"FilterType": "TRUE"}))
    assert cfg.topics[0].subscriptions[0].rules[0].filter == TrueRuleFilter()


def test_several_namespaces():
    document = {"UserConfig": {"Namespaces": [
        {"Name": "one", "Queues": [{"Name": "a"}]}, {"Name": "two", "Queues": [{"Name": "a"}]}]}}
    with pytest.raises(ConfigurationError, match="several namespaces.*'one', 'two'"):
        load_config(document)
    assert load_config(document, namespace="TWO").name == "two"
    with pytest.raises(ConfigurationError, match="no namespace 'three'; declared: 'one', 'two'"):
        load_config(document, namespace="three")
    document["UserConfig"]["Namespaces"][1]["Name"] = "ONE"
    with pytest.raises(ConfigurationError, match="duplicate namespace name 'ONE'"):
        load_config(document, namespace="one")


def test_loads_config_errors_have_no_path_prefix():
    with pytest.raises(InvalidPropertyError) as info:
        loads_config(json.dumps(doc(queues=[q({"LockDuration": "PT6M"})])))
    assert str(info.value).startswith(
        "UserConfig.Namespaces[0].Queues[0].Properties.LockDuration: ")


def test_dump_format():
    dumped = dump_config(load_config(SAMPLE))
    user = dumped["UserConfig"]
    assert user["Logging"] == {"Type": "File"}
    ns = user["Namespaces"][0]
    assert ns["Queues"][0]["Properties"]["LockDuration"] == "PT1M"
    assert "DefaultMessageTimeToLive" not in ns["Queues"][1]["Properties"]  # unlimited
    subs = ns["Topics"][0]["Subscriptions"]
    assert subs[0]["Rules"] == []
    assert subs[1]["Rules"][0]["Properties"] == {
        "FilterType": "Sql", "SqlFilter": {"SqlExpression": "severity = 'error'"}}
    assert subs[2]["Rules"][0]["Properties"] == {
        "FilterType": "Correlation", "CorrelationFilter": {"Label": "invoice"}}
    json.dumps(dumped)
