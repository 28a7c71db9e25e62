"""ServiceBusAdministrationClient against a real Delta registry."""

from datetime import timedelta

import pytest

from sbdelta import ManualClock
from sbdelta.exceptions import (ImmutablePropertyError, InvalidEntityNameError,
                                InvalidPropertyError, MessagingEntityAlreadyExistsError,
                                MessagingEntityNotFoundError, ServiceBusConnectionError)
from sbdelta.management import (CorrelationRuleFilter, EntityStatus, QueueProperties,
                                ServiceBusAdministrationClient, SqlRuleAction, SqlRuleFilter,
                                SubscriptionProperties, TopicProperties, TrueRuleFilter)


@pytest.fixture
def admin(spark, namespace):
    return ServiceBusAdministrationClient(namespace, spark=spark, clock=ManualClock())


def _without_timestamps(props):
    return {k: v for k, v in props.to_dict().items() if not k.endswith("_at_utc")}


def test_queue_defaults_round_trip(admin):
    created = admin.create_queue("queue.1")
    fetched = admin.get_queue("queue.1")
    assert _without_timestamps(created) == _without_timestamps(fetched)
    assert fetched.lock_duration == timedelta(seconds=30)
    assert fetched.max_delivery_count == 10
    assert fetched.default_message_time_to_live is None
    assert fetched.auto_delete_on_idle is None
    assert fetched.duplicate_detection_history_time_window == timedelta(minutes=10)
    assert fetched.max_message_size_in_kilobytes == 256
    assert fetched.status is EntityStatus.ACTIVE
    assert fetched.created_at_utc == admin._ns.clock.now()


NON_DEFAULT_QUEUE = dict(
    lock_duration="PT5M", max_delivery_count=1, default_message_time_to_live="P1D",
    auto_delete_on_idle="PT5M", dead_lettering_on_message_expiration=True,
    requires_duplicate_detection=True, duplicate_detection_history_time_window="PT20S",
    requires_session=True, enable_partitioning=True, max_size_in_megabytes=5120,
    max_message_size_in_kilobytes=1024, forward_to="other", forward_dead_lettered_messages_to="dlq",
    enable_batched_operations=False, status="SendDisabled", user_metadata="owner=data-eng")


def test_every_queue_property_round_trips_through_the_registry(admin):
    for target in ("other", "dlq"):  # forwarding targets exist when set (FWD-1)
        admin.create_queue(target)
    created = admin.create_queue("contoso/x-servicebus-transfer/0", **NON_DEFAULT_QUEUE)
    fetched = admin.get_queue("contoso/x-servicebus-transfer/0")
    assert _without_timestamps(fetched) == _without_timestamps(created)
    expected = QueueProperties("contoso/x-servicebus-transfer/0", **NON_DEFAULT_QUEUE)
    assert _without_timestamps(fetched) == _without_timestamps(expected)


def test_names_are_case_insensitive_and_unique(admin):
    admin.create_queue("Orders")
    with pytest.raises(MessagingEntityAlreadyExistsError, match="already exists"):
        admin.create_queue("orders")
    assert admin.get_queue("ORDERS").name == "Orders"
    assert [q.name for q in admin.list_queues()] == ["Orders"]


def test_missing_entities_raise_not_found(admin):
    with pytest.raises(MessagingEntityNotFoundError, match="queue 'nope' does not exist"):
        admin.get_queue("nope")
    with pytest.raises(MessagingEntityNotFoundError):
        admin.delete_queue("nope")
    with pytest.raises(MessagingEntityNotFoundError, match="topic 'nope'"):
        admin.create_subscription("nope", "s")
    with pytest.raises(MessagingEntityNotFoundError):
        admin.update_queue(QueueProperties("nope"))


def test_bad_input_writes_nothing(admin, namespace):
    from pathlib import Path

    with pytest.raises(InvalidEntityNameError):
        admin.create_queue("../escape")
    with pytest.raises(InvalidEntityNameError):
        admin.create_queue("/absolute")
    with pytest.raises(InvalidPropertyError, match="lock_duration"):
        admin.create_queue("q", lock_duration="PT6M")
    with pytest.raises(InvalidPropertyError, match="unknown QueueProperties property colour"):
        admin.create_queue("q", colour="blue")
    assert not Path(namespace).exists()


def test_update_changes_properties_and_refuses_fixed_ones(admin):
    # rule PART-1: partitioning is chosen when the entity is created and never changes.
    queue = admin.create_queue("q", enable_partitioning=True)
    queue.max_delivery_count = 3
    admin._ns.clock.advance(timedelta(minutes=1))
    admin.update_queue(queue)
    fetched = admin.get_queue("q")
    assert fetched.max_delivery_count == 3
    assert fetched.updated_at_utc == fetched.created_at_utc + timedelta(minutes=1)
    with pytest.raises(ImmutablePropertyError, match="enable_partitioning"):
        admin.update_queue(fetched, enable_partitioning=False)
    with pytest.raises(ImmutablePropertyError, match="requires_session"):
        admin.update_queue(fetched, requires_session=True)
    assert admin.get_queue("q").enable_partitioning is True


def test_delete_then_recreate_starts_clean(admin):
    admin.create_queue("q", max_delivery_count=2)
    admin.delete_queue("q")
    assert admin.list_queues() == []
    assert admin.create_queue("q").max_delivery_count == 10


def test_topic_subscription_and_rules(admin):
    admin.create_topic("events", default_message_time_to_live="PT1H")
    sub = admin.create_subscription("events", "errors", max_delivery_count=3)
    assert isinstance(sub, SubscriptionProperties) and sub.topic_name == "events"
    rules = admin.list_rules("events", "errors")
    assert [r.name for r in rules] == ["$Default"]
    assert isinstance(rules[0].filter, TrueRuleFilter)

    admin.create_rule("events", "errors", "severity",
                      filter=SqlRuleFilter("severity = 'error'"),
                      action=SqlRuleAction("SET routed = true"))
    admin.create_rule("events", "errors", "invoices",
                      filter=CorrelationRuleFilter(label="invoice", properties={"region": "eu"}))
    rule = admin.get_rule("events", "errors", "severity")
    assert rule.filter.sql_expression == "severity = 'error'"
    assert rule.action.sql_expression == "SET routed = true"
    assert admin.get_rule("events", "errors", "invoices").filter.properties == {"region": "eu"}
    admin.delete_rule("events", "errors", "$Default")
    assert sorted(r.name for r in admin.list_rules("events", "errors")) == ["invoices", "severity"]

    with pytest.raises(MessagingEntityAlreadyExistsError):
        admin.create_subscription("events", "ERRORS")
    assert isinstance(admin.get_topic("events"), TopicProperties)
    assert [s.name for s in admin.list_subscriptions("events")] == ["errors"]

    admin.delete_topic("events")
    assert admin.list_topics() == []
    with pytest.raises(MessagingEntityNotFoundError):
        admin.get_subscription("events", "errors")
    with pytest.raises(MessagingEntityNotFoundError):
        admin.get_rule("events", "errors", "severity")


def test_topic_prefix_does_not_cascade_to_other_topics(admin):
    admin.create_topic("events")
    admin.create_topic("events/eu")
    admin.create_subscription("events/eu", "all")
    admin.delete_topic("events")
    assert [t.name for t in admin.list_topics()] == ["events/eu"]
    assert [s.name for s in admin.list_subscriptions("events/eu")] == ["all"]


def test_unreachable_namespace_is_a_connection_error(spark):
    with pytest.raises(ServiceBusConnectionError, match="cannot reach namespace"):
        ServiceBusAdministrationClient("nosuchfs://bucket/ns", spark=spark).create_queue("q")
    with pytest.raises(ServiceBusConnectionError):
        ServiceBusAdministrationClient("", spark=spark)


def test_every_topic_and_subscription_property_round_trips(admin):
    for target in ("archive", "dead"):  # forwarding targets exist when set (FWD-1)
        admin.create_queue(target)
    topic = admin.create_topic(
        "telemetry/eu", default_message_time_to_live="PT2H", auto_delete_on_idle="P1D",
        requires_duplicate_detection=True, duplicate_detection_history_time_window="P7D",
        enable_partitioning=True, max_size_in_megabytes=2048, max_message_size_in_kilobytes=512,
        enable_batched_operations=False, status="Disabled", user_metadata="t")
    assert _without_timestamps(admin.get_topic("telemetry/eu")) == _without_timestamps(topic)
    sub = admin.create_subscription(
        "telemetry/eu", "audit", lock_duration="PT10S", max_delivery_count=2,
        default_message_time_to_live="PT30M", auto_delete_on_idle="PT5M",
        dead_lettering_on_message_expiration=True,
        dead_lettering_on_filter_evaluation_exceptions=False, requires_session=True,
        forward_to="archive", forward_dead_lettered_messages_to="dead",
        enable_batched_operations=False, status="ReceiveDisabled", user_metadata="s")
    fetched = admin.get_subscription("telemetry/eu", "audit")
    assert _without_timestamps(fetched) == _without_timestamps(sub)
    assert fetched.lock_duration == timedelta(seconds=10)
    with pytest.raises(ImmutablePropertyError, match="requires_session"):
        admin.update_subscription("telemetry/eu", fetched, requires_session=False)
    with pytest.raises(ImmutablePropertyError, match="enable_partitioning"):
        admin.update_topic(admin.get_topic("telemetry/eu"), enable_partitioning=False)


def test_fwd_1_fwd_3_forwarding_targets_are_checked_when_set(admin):
    """FWD-1: a forwarding target is an existing queue or topic, not the entity itself;
    FWD-3: a forward_to that closes a visible cycle is refused. Nothing is written."""
    from sbdelta.config import NamespaceConfig, SubscriptionConfig, TopicConfig

    admin.create_queue("dest")
    admin.create_topic("fan")
    for bad in ({"forward_to": "nowhere"}, {"forward_dead_lettered_messages_to": "nowhere"},
                {"forward_to": "fan/Subscriptions/any"}):
        with pytest.raises(MessagingEntityNotFoundError, match="FWD-1"):
            admin.create_queue("src", **bad)
    assert sorted(q.name for q in admin.list_queues()) == ["dest"]
    admin.create_queue("src", forward_to="DEST", forward_dead_lettered_messages_to="fan")
    # dest -> src would close src -> dest -> src.
    with pytest.raises(InvalidPropertyError, match="cycle: dest -> src -> dest"):
        admin.update_queue(admin.get_queue("dest"), forward_to="src")
    assert admin.get_queue("dest").forward_to is None
    # Through a topic: a subscription forwarding to its own topic, or a queue that feeds a
    # topic one of whose subscriptions forwards back to it.
    with pytest.raises(InvalidPropertyError, match="FWD-3"):
        admin.create_subscription("fan", "loop", forward_to="fan")
    admin.create_subscription("fan", "out", forward_to="dest")
    with pytest.raises(InvalidPropertyError, match="cycle: dest -> fan -> fan/Subscriptions/out"):
        admin.update_queue(admin.get_queue("dest"), forward_to="fan")
    with pytest.raises(InvalidPropertyError, match="cycle: fan/Subscriptions/out -> fan -> "
                                                   "fan/Subscriptions/out"):
        admin.update_subscription("fan", admin.get_subscription("fan", "out"), forward_to="fan")
    assert admin.get_subscription("fan", "out").forward_to == "dest"
    assert [s.name for s in admin.list_subscriptions("fan")] == ["out"]
    # A config may name a target declared after the source (set once everything exists).
    admin.apply_config(NamespaceConfig(
        "ns", queues=(QueueProperties("first", forward_to="second"), QueueProperties("second")),
        topics=(TopicConfig(TopicProperties("t2"), (SubscriptionConfig(
            SubscriptionProperties("t2", "s", forward_to="second"), ()),)),)))
    assert admin.get_subscription("t2", "s").forward_to == "second"
    assert admin.get_queue("first").forward_to == "second"
    with pytest.raises(MessagingEntityNotFoundError, match="nothing was written"):
        admin.apply_config(NamespaceConfig("ns", queues=(
            QueueProperties("third", forward_to="missing"),), topics=()))
    assert "third" not in [q.name for q in admin.list_queues()]


def test_get_namespace_properties_says_its_name_when_entities_changed_and_its_tier(
        spark, tmp_path):
    """The SDK's NamespaceProperties: name from the location, created when the first entity
    was, modified when an entity last changed (storage times, not the broker clock), the
    Premium feature set; ``api_version`` (str or ApiVersion) is accepted and changes nothing."""
    from datetime import datetime, timezone

    from sbdelta.management import ApiVersion, MessagingSku, NamespaceType

    admin = ServiceBusAdministrationClient(str(tmp_path / "contoso"), spark=spark,
                                           api_version=ApiVersion.V2017_04)
    empty = admin.get_namespace_properties()
    assert (empty.name, empty.alias, empty.created_at_utc, empty.modified_at_utc) == (
        "contoso", None, None, None)
    started = datetime.now(timezone.utc).replace(microsecond=0)
    admin.create_queue("orders")
    first = admin.get_namespace_properties()
    admin.create_topic("events")
    second = ServiceBusAdministrationClient(
        str(tmp_path / "contoso"), spark=spark, api_version="2021-05").get_namespace_properties()
    assert started <= first.created_at_utc <= first.modified_at_utc < second.modified_at_utc
    assert second.created_at_utc == first.created_at_utc
    assert second.created_at_utc.tzinfo is not None
    assert (second.name, second.messaging_sku, second.namespace_type, second.messaging_units) \
        == ("contoso", MessagingSku.PREMIUM, NamespaceType.MESSAGING, None)
