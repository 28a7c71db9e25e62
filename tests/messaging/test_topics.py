"""Topics and subscriptions: one stored copy per message, rules as they stood at enqueue,
filters, counts, scheduled messages and bad input. Each test names the rule of
../shared/SEMANTICS.md it proves. The behaviour every queue has (locks, settlement, TTL,
dead-lettering, deferral, duplicates) runs on subscriptions too, in test_behaviour.py.
"""

import glob
import itertools
from datetime import timedelta

import pytest
from chispa import assert_df_equality

from sbdelta import ServiceBusMessage, ServiceBusSubQueue
from sbdelta.exceptions import (InvalidPropertyError, MessageNotFoundError,
                                MessagingEntityAlreadyExistsError,
                                MessagingEntityNotFoundError, RuleSyntaxError)
from sbdelta.management import (CorrelationRuleFilter, FalseRuleFilter, RuleProperties,
                                SqlRuleAction, SqlRuleFilter)

from ..conftest import START, receive_all

_topics = itertools.count()


@pytest.fixture(scope="module")
def ns(spark, tmp_path_factory):
    return str(tmp_path_factory.mktemp("topics") / "ns")


@pytest.fixture
def topic(admin):
    """A fresh topic factory: topic(**properties) -> name."""
    def make(**props):
        name = f"t{next(_topics)}"
        admin.create_topic(name, **props)
        return name
    return make


def bodies(messages):
    return sorted(str(m) for m in messages)


def drain(client, topic, sub, expected, **kwargs):
    """Receive and complete until ``expected`` messages came (then one more look)."""
    kwargs.setdefault("max_wait_time", 0)
    receiver = client.get_subscription_receiver(topic, sub, **kwargs)
    got = receive_all(receiver, expected, batch=20, tries=10) if expected else []
    receiver.complete_messages(got)  # one commit
    assert receiver.receive_messages(20) == []
    return bodies(got)


def colour(body, colour_name, **props):
    return ServiceBusMessage(body, application_properties={"colour": colour_name, **props})


# -- TOPIC-1: one stored copy, independent subscriptions ----------------------------------------
def test_topic_1_each_subscription_gets_its_own_copy_and_settles_alone(client, admin, topic):
    t = topic()
    admin.create_subscription(t, "a")
    admin.create_subscription(t, "b")
    client.get_topic_sender(t).send_messages([ServiceBusMessage("m1"), ServiceBusMessage("m2")])
    a = client.get_subscription_receiver(t, "a", max_wait_time=0)
    got_a = receive_all(a, 2)
    a.complete_messages(got_a)
    # Completing in "a" leaves "b" untouched; "b" keeps its own locks and delivery counts.
    b = client.get_subscription_receiver(t, "b", max_wait_time=0)
    got_b = receive_all(b, 2)
    assert bodies(got_a) == bodies(got_b) == ["m1", "m2"]
    assert [m.delivery_count for m in got_b] == [1, 1]
    b.abandon_message(got_b[0])
    assert admin.get_subscription_runtime_properties(t, "a").active_message_count == 0
    assert admin.get_subscription_runtime_properties(t, "b").active_message_count == 2
    topic_counts = admin.get_topic_runtime_properties(t)
    assert topic_counts.subscription_count == 2 and topic_counts.scheduled_message_count == 0


def test_topic_1_inbox_holds_one_row_per_message_whatever_the_subscriptions(client, admin,
                                                                           topic, ns, spark):
    t = topic()
    for s in ("a", "b", "c"):
        admin.create_subscription(t, s)
    client.get_topic_sender(t).send_messages([ServiceBusMessage(f"m{i}") for i in range(3)])
    (inbox,) = glob.glob(f"{ns}/topics/{t}/*/inbox")
    assert spark.read.format("delta").load(inbox).count() == 3
    for s in ("a", "b", "c"):
        (messages,) = glob.glob(f"{ns}/topics/{t}/*/subscriptions/{s}/*/messages")
        # Nothing registered before a receive: only the frontier rows, no message copies.
        assert spark.read.format("delta").load(messages).where("kind = 'MSG'").count() == 0
    assert drain(client, t, "c", 3) == ["m0", "m1", "m2"]


def test_topic_1_subscription_receives_only_what_was_sent_after_it_was_created(client, admin,
                                                                              topic):
    t = topic()
    admin.create_subscription(t, "early")
    sender = client.get_topic_sender(t)
    sender.send_messages(ServiceBusMessage("before"))
    admin.create_subscription(t, "late")
    sender.send_messages(ServiceBusMessage("after"))
    assert drain(client, t, "early", 2) == ["after", "before"]
    assert drain(client, t, "late", 1) == ["after"]


def test_topic_1_receive_dataframe_and_batch_complete_on_a_subscription(client, admin, topic,
                                                                       spark):
    t = topic(enable_partitioning=True)
    admin.create_subscription(t, "s")
    client.get_topic_sender(t).send_messages(
        [ServiceBusMessage(f"m{i}", message_id=f"id-{i}") for i in range(4)])
    receiver = client.get_subscription_receiver(t, "s", max_wait_time=0)
    df = receiver.receive_dataframe(10)
    expected = spark.createDataFrame([(f"id-{i}", f"m{i}".encode(), 1) for i in range(4)],
                                     "message_id string, body binary, delivery_count int")
    assert_df_equality(df.select("message_id", "body", "delivery_count"), expected,
                       ignore_row_order=True, ignore_nullable=True)
    assert receiver.complete_messages(df) == 4
    assert receiver.receive_messages(10) == []
    assert admin.get_subscription_runtime_properties(t, "s").total_message_count == 0


# -- TOPIC-2 / TOPIC-3: rules as they stood at enqueue ----------------------------------------
def test_topic_3_default_rule_and_unique_rule_names(admin, topic):
    t = topic()
    admin.create_subscription(t, "s")
    (rule,) = admin.list_rules(t, "s")
    assert rule.name == "$Default" and rule.filter.to_dict() == {"type": "True"}
    admin.create_rule(t, "s", "red", filter=SqlRuleFilter("colour = 'red'"))
    with pytest.raises(MessagingEntityAlreadyExistsError):
        admin.create_rule(t, "s", "RED", filter=SqlRuleFilter("colour = 'blue'"))
    admin.create_subscription(t, "custom", default_rule=RuleProperties(
        t, "custom", "only-red", filter=SqlRuleFilter("colour = 'red'")))
    assert [r.name for r in admin.list_rules(t, "custom")] == ["only-red"]


def test_topic_2_rule_changes_affect_only_later_messages(client, admin, topic, clock):
    t = topic()
    admin.create_subscription(t, "s", default_rule=RuleProperties(
        t, "s", "pick", filter=SqlRuleFilter("colour = 'red'")))
    sender = client.get_topic_sender(t)
    sender.send_messages([colour("red-1", "red"), colour("blue-1", "blue")])
    clock.advance(timedelta(seconds=1))
    admin.update_rule(t, "s", RuleProperties(t, "s", "pick",
                                             filter=SqlRuleFilter("colour = 'blue'")))
    clock.advance(timedelta(seconds=1))
    sender.send_messages([colour("red-2", "red"), colour("blue-2", "blue")])
    clock.advance(timedelta(seconds=1))
    admin.delete_rule(t, "s", "pick")
    clock.advance(timedelta(seconds=1))
    sender.send_messages([colour("red-3", "red"), colour("blue-3", "blue")])
    # Nothing was received before the changes: every message is judged by its own time's rule.
    assert drain(client, t, "s", 2) == ["blue-2", "red-1"]
    assert [r.name for r in admin.list_rules(t, "s")] == []


def test_topic_2_an_update_rule_that_changes_nothing_writes_nothing(spark, admin, topic, ns):
    """``update_rule`` with the filter and action the rule has already makes no new version
    (no commit on the registry); one that changes the action does."""
    from delta.tables import DeltaTable

    t = topic()
    admin.create_subscription(t, "s", default_rule=RuleProperties(
        t, "s", "pick", filter=SqlRuleFilter("colour = 'red'")))
    registry = DeltaTable.forPath(spark, f"{ns}/_sbdelta/registry")

    def version():
        return registry.history(1).collect()[0]["version"]

    before = version()
    admin.update_rule(t, "s", admin.get_rule(t, "s", "pick"))
    admin.update_rule(t, "s", RuleProperties(t, "s", "pick",
                                             filter=SqlRuleFilter("colour = 'red'")))
    assert version() == before
    admin.update_rule(t, "s", admin.get_rule(t, "s", "pick"),
                      action=SqlRuleAction("SET colour = 'blue'"))
    assert version() == before + 1
    assert admin.get_rule(t, "s", "pick").action.sql_expression == "SET colour = 'blue'"


def test_topic_2_subscription_without_rules_receives_nothing(client, admin, topic, clock):
    t = topic()
    admin.create_subscription(t, "s")
    admin.delete_rule(t, "s", "$Default")
    clock.advance(timedelta(seconds=1))
    client.get_topic_sender(t).send_messages(ServiceBusMessage("m"))
    assert drain(client, t, "s", 0) == []
    assert admin.get_subscription_runtime_properties(t, "s").active_message_count == 0


# -- TOPIC-4: filters --------------------------------------------------------------------------
def test_topic_4_sql_correlation_and_false_filters_route_messages(client, admin, topic, clock):
    t = topic(enable_partitioning=True)
    admin.create_subscription(t, "big-red", default_rule=RuleProperties(
        t, "big-red", "r", filter=SqlRuleFilter("colour = @c AND size > 10", {"@c": "red"})))
    admin.create_subscription(t, "orders", default_rule=RuleProperties(
        t, "orders", "r", filter=CorrelationRuleFilter(label="order",
                                                       properties={"colour": "blue"})))
    admin.create_subscription(t, "none", default_rule=RuleProperties(
        t, "none", "r", filter=FalseRuleFilter()))
    admin.create_subscription(t, "sys", default_rule=RuleProperties(
        t, "sys", "r", filter=SqlRuleFilter("sys.MessageId LIKE 'k!_%' ESCAPE '!'")))
    clock.advance(timedelta(seconds=1))
    client.get_topic_sender(t).send_messages([
        colour("small-red", "red", size=5),
        colour("big-red", "red", size=50, extra="x"),
        ServiceBusMessage("blue-order", subject="order", application_properties={"colour": "blue"}),
        ServiceBusMessage("red-order", subject="order", application_properties={"colour": "red"}),
        ServiceBusMessage("no-props", message_id="k_1"),
        ServiceBusMessage("k-no-underscore", message_id="kx1"),
    ])
    assert drain(client, t, "big-red", 1) == ["big-red"]
    assert drain(client, t, "orders", 1) == ["blue-order"]
    assert drain(client, t, "none", 0) == []
    assert drain(client, t, "sys", 1) == ["no-props"]


def test_topic_2_one_receive_call_finds_the_match_behind_rows_the_rules_refuse(
        client, admin, topic, clock):
    """TOPIC-2 (a subscription gets what its rules admit) with RECV-2: three messages the
    subscription's filter refuses, then one it admits; one ``receive_messages(1)`` returns
    that one instead of "nothing" because the rows it read first were refused."""
    t = topic()
    admin.create_subscription(t, "red", default_rule=RuleProperties(
        t, "red", "r", filter=SqlRuleFilter("colour = 'red'")))
    clock.advance(timedelta(seconds=1))
    sender = client.get_topic_sender(t)
    for i in range(3):  # three commits
        sender.send_messages(colour(f"blue{i}", "blue"))
    sender.send_messages(colour("red", "red"))
    receiver = client.get_subscription_receiver(t, "red", max_wait_time=0)
    assert bodies(receiver.receive_messages(1)) == ["red"]


@pytest.mark.parametrize("form", ["dataframe", "spark list"])
def test_topic_2_recv_2_spark_receives_of_one_partition_take_what_the_rules_admit_in_order(
        client, admin, topic, clock, spark, ns, form):
    """TOPIC-2 with RECV-2 on Spark (a DataFrame receive; a list receive of a client on the
    Spark engine), from an unpartitioned topic whose whole new log one receive reads: its
    rows are not counted first, the plan takes what the batch can hold. A batch smaller
    than what the rules admit takes the first in order and leaves the rest; a larger one
    takes all of them and passes the rows the rules refuse, so later messages come next and
    nothing refused comes back; a receive that finds nothing admitted hands out nothing and
    the next message still arrives; copies of one message (a rule with an action) are
    handed out once each, the last position's copies registered whole. (The list form, whose
    plan also registers rows ahead of the batch, runs the first part.)"""
    from sbdelta import ServiceBusClient

    t = topic()
    admin.create_subscription(t, "even", default_rule=RuleProperties(
        t, "even", "even", filter=SqlRuleFilter("n % 2 = 0")))
    admin.create_subscription(t, "big", default_rule=RuleProperties(
        t, "big", "big", filter=SqlRuleFilter("n > 100")))
    admin.create_subscription(t, "twice", default_rule=RuleProperties(
        t, "twice", "all", filter=SqlRuleFilter("n < 2")))
    admin.create_rule(t, "twice", "tag", filter=SqlRuleFilter("n < 2"),
                      action=SqlRuleAction("SET tag = 'x'"))
    clock.advance(timedelta(seconds=1))
    sender = client.get_topic_sender(t)

    def send(*numbers):
        sender.send_messages([ServiceBusMessage(f"n{n}", message_id=f"n{n}",
                                                application_properties={"n": n})
                              for n in numbers])

    send(0, 1, 2, 3)
    send(4, 5, 6, 7, 8, 9)
    with ServiceBusClient(ns, spark=spark, clock=clock, engine="spark") as on_spark:
        receivers = {name: (client if form == "dataframe" else on_spark)
                     .get_subscription_receiver(t, name, max_wait_time=0)
                     for name in ("even", "big", "twice")}

        def take(name, n):
            """Bodies received (and completed) by one receive of at most n."""
            receiver = receivers[name]
            if form == "dataframe":
                df = receiver.receive_dataframe(n)
                got = sorted(r.body.decode() for r in df.select("body").collect())
                assert receiver.complete_messages(df) == len(got)
                return got
            got = receiver.receive_messages(n)
            receiver.complete_messages(got)
            return bodies(got)

        assert take("even", 3) == ["n0", "n2", "n4"]
        assert take("even", 10) == ["n6", "n8"]
        if form == "dataframe":
            assert take("big", 5) == []
        send(10, 11, 201)
        assert take("even", 10) == ["n10"]
        if form == "spark list":  # a list receive registering ahead: proven on the way
            return
        assert take("big", 5) == ["n201"]
        first = take("twice", 1)  # n0's first copy; its other copy registered with it
        assert sorted(first + take("twice", 10)) == ["n0", "n0", "n1", "n1"]
    for name in ("even", "big", "twice"):
        assert admin.get_subscription_runtime_properties(t, name).total_message_count == 0


def test_topic_4_missing_property_is_unknown_not_false(client, admin, topic, clock):
    """SQL three-valued logic: NOT (x = 1) does not match a message without x."""
    t = topic()
    admin.create_subscription(t, "s", default_rule=RuleProperties(
        t, "s", "r", filter=SqlRuleFilter("NOT (x = 1)")))
    clock.advance(timedelta(seconds=1))
    client.get_topic_sender(t).send_messages([
        ServiceBusMessage("x1", application_properties={"x": 1}),
        ServiceBusMessage("x2", application_properties={"x": 2}),
        ServiceBusMessage("none")])
    assert drain(client, t, "s", 1) == ["x2"]


def test_topic_4_filter_text_built_to_inject_spark_sql_stays_a_literal(client, admin, topic,
                                                                      clock):
    t = topic()
    admin.create_subscription(t, "s", default_rule=RuleProperties(
        t, "s", "r", filter=SqlRuleFilter("a = 'x'' OR ''1''=''1'")))
    clock.advance(timedelta(seconds=1))
    client.get_topic_sender(t).send_messages([
        ServiceBusMessage("exact", application_properties={"a": "x' OR '1'='1"}),
        ServiceBusMessage("other", application_properties={"a": "y"})])
    assert drain(client, t, "s", 1) == ["exact"]


def test_topic_5_filter_evaluation_error_dead_letters_or_drops(client, admin, topic, clock):
    t = topic()
    admin.create_subscription(t, "dead", default_rule=RuleProperties(
        t, "dead", "r", filter=SqlRuleFilter("n + 1 > 2")))
    admin.create_subscription(t, "drop", dead_lettering_on_filter_evaluation_exceptions=False,
                              default_rule=RuleProperties(
                                  t, "drop", "r", filter=SqlRuleFilter("n + 1 > 2")))
    clock.advance(timedelta(seconds=1))
    client.get_topic_sender(t).send_messages([
        ServiceBusMessage("text", application_properties={"n": "abc"}),
        ServiceBusMessage("five", application_properties={"n": 5})])
    assert drain(client, t, "dead", 1) == ["five"]
    assert drain(client, t, "drop", 1) == ["five"]
    dlq = client.get_subscription_receiver(t, "dead", sub_queue=ServiceBusSubQueue.DEAD_LETTER,
                                           max_wait_time=0)
    (dead,) = receive_all(dlq, 1)
    assert str(dead) == "text" and dead.dead_letter_reason == "FilterException"
    assert dead.dead_letter_error_description
    drop_dlq = client.get_subscription_receiver(t, "drop",
                                                sub_queue=ServiceBusSubQueue.DEAD_LETTER,
                                                max_wait_time=0)
    assert drop_dlq.receive_messages(5) == []


def test_topic_5_each_rule_with_an_action_gives_its_own_copy(client, admin, topic, clock):
    """Rules without actions give one copy together; each matching rule with an action gives
    its own copy, changed by the action and carrying RuleName; a failing action dead-letters
    its copy. Copies share the topic message's position (low 52 bits of the sequence number)
    and are registered whole even when a receive takes only part of them."""
    t = topic()
    admin.create_subscription(t, "s", default_rule=RuleProperties(
        t, "s", "all", filter=SqlRuleFilter("1 = 1")))
    admin.create_rule(t, "s", "everything", filter=SqlRuleFilter("EXISTS(n)"))  # no action
    admin.create_rule(t, "s", "tag", filter=SqlRuleFilter("EXISTS(n)"),
                      action=SqlRuleAction("SET tag = 'x'"))
    admin.create_rule(t, "s", "double", filter=CorrelationRuleFilter(label="double"),
                      action=SqlRuleAction("SET n = n * 2; REMOVE colour"))
    clock.advance(timedelta(seconds=1))
    client.get_topic_sender(t).send_messages([
        ServiceBusMessage("m1", application_properties={"n": 1}),
        ServiceBusMessage("m2", application_properties={"n": 5, "colour": "red"},
                          subject="double"),
        ServiceBusMessage("m3", application_properties={"n": "abc"}, subject="double")])
    expected = sorted([
        ("m1", {"n": 1}), ("m1", {"n": 1, "tag": "x", "RuleName": "tag"}),
        ("m2", {"n": 5, "colour": "red"}),
        ("m2", {"n": 5, "colour": "red", "tag": "x", "RuleName": "tag"}),
        ("m2", {"n": 10, "RuleName": "double"}),
        ("m3", {"n": "abc"}), ("m3", {"n": "abc", "tag": "x", "RuleName": "tag"})], key=repr)

    def seen(messages):
        return sorted(((str(m), dict(m.application_properties)) for m in messages), key=repr)

    receiver = client.get_subscription_receiver(t, "s", max_wait_time=0)
    peeked = []
    for _ in range(6):
        peeked += receiver.peek_messages(10)
    assert seen(peeked) == expected
    assert admin.get_subscription_runtime_properties(t, "s").active_message_count == 7
    first = receiver.receive_messages(1)  # the other copies of its message register too
    got = first + receive_all(receiver, 6, batch=3)
    assert seen(got) == expected
    seqs = [m.sequence_number for m in got]
    assert len(set(seqs)) == 7
    positions = {}
    for m in got:
        positions.setdefault(str(m), set()).add(m.sequence_number & ((1 << 52) - 1))
    assert all(len(p) == 1 for p in positions.values()) and len(
        set.union(*positions.values())) == 3
    receiver.complete_messages(got)
    assert receiver.receive_messages(10) == []
    dlq = client.get_subscription_receiver(t, "s", sub_queue=ServiceBusSubQueue.DEAD_LETTER,
                                           max_wait_time=0)
    (dead,) = receive_all(dlq, 1)
    assert str(dead) == "m3" and dead.dead_letter_reason == "RuleActionException"
    assert dead.application_properties["n"] == "abc" and "RuleName" not in \
        dead.application_properties  # the original properties, and why it failed
    assert "cannot combine" in dead.dead_letter_error_description


# -- duplicate detection on a topic: the topic takes a message once (TOPIC-1), so once for all --
@pytest.mark.parametrize("engine", ["auto", "spark"])
def test_topic_1_dedup_a_duplicate_is_dropped_by_every_subscription_whatever_its_rules(
        engine, tmp_path, request):
    """A topic with duplicate detection drops a message whose id it took inside the window,
    for every subscription alike, whatever each subscription's rules took of the first one:
    a subscription whose filter refused the first copy does not get the second (sent apart or
    in one batch, its rules matching it this time), nor does one with an action rule (its
    copies); after the window the id is taken again. Through delta-rs (``auto``); through
    Spark the first part (a DataFrame and a list receive)."""
    from sbdelta import ManualClock, ServiceBusClient
    from sbdelta.management import ServiceBusAdministrationClient

    spark = request.getfixturevalue("spark") if engine == "spark" else None
    ns, clock = str(tmp_path / "ns"), ManualClock(START)
    admin = ServiceBusAdministrationClient(ns, clock=clock)  # made by delta-rs either way
    admin.create_topic("t", enable_partitioning=True, requires_duplicate_detection=True,
                       duplicate_detection_history_time_window=timedelta(minutes=1))
    admin.create_subscription("t", "all")
    admin.create_subscription("t", "red", default_rule=RuleProperties(
        "t", "red", "red", filter=SqlRuleFilter("colour = 'red'")))
    admin.create_subscription("t", "tagged", default_rule=RuleProperties(
        "t", "tagged", "tag", filter=SqlRuleFilter("colour = 'red'"),
        action=SqlRuleAction("SET tag = 'x'")))
    clock.advance(timedelta(seconds=1))

    def message(body, colour_name):
        return ServiceBusMessage(body, message_id=body[0],
                                 application_properties={"colour": colour_name})

    with ServiceBusClient(ns, spark=spark, clock=clock, engine=engine) as client, \
            ServiceBusClient(ns, clock=clock) as sending:  # sends: delta-rs either way
        sender = sending.get_topic_sender("t")
        receivers = {name: client.get_subscription_receiver("t", name, max_wait_time=0)
                     for name in ("all", "red", "tagged")}

        def take(name, expected):
            receiver = receivers[name]
            if engine == "spark" and name == "all":
                got = receiver.receive_dataframe(20)
                found = sorted(r.body.decode() for r in got.select("body").collect())
                receiver.complete_messages(got)
                return found
            got = receive_all(receiver, expected, batch=20)
            receiver.complete_messages(got)
            return bodies(got)

        sender.send_messages(message("x1 blue", "blue"))
        sender.send_messages([message("y1 blue", "blue"), message("y2 red", "red")])
        clock.advance(timedelta(seconds=30))
        sender.send_messages(message("x2 red", "red"))  # inside x1's window
        assert take("all", 2) == ["x1 blue", "y1 blue"]
        assert take("red", 0) == []
        if engine == "spark":
            return  # the plan is one SQL text for both engines: its Spark reads are proven
        assert take("tagged", 0) == []
        clock.advance(timedelta(seconds=31))  # x1's window is over; x2's was never opened
        sender.send_messages([message("x3 red", "red"), message("y3 red", "red")])
        assert take("red", 2) == ["x3 red", "y3 red"]
        assert take("tagged", 2) == ["x3 red", "y3 red"]
        assert take("all", 2) == ["x3 red", "y3 red"]


# -- TOPIC-6 and TTL-3 -------------------------------------------------------------------------
def test_topic_6_scheduled_messages_reach_subscriptions_at_their_time_and_cancel_everywhere(
        client, admin, topic, clock):
    t = topic(enable_partitioning=True)
    admin.create_subscription(t, "a")
    admin.create_subscription(t, "b")
    sender = client.get_topic_sender(t)
    due = START + timedelta(minutes=5)
    keep, drop = sender.schedule_messages([ServiceBusMessage("keep"),
                                           ServiceBusMessage("drop")], due)
    # "a" registers both before the cancel; "b" sees them only afterwards.
    assert client.get_subscription_receiver(t, "a", max_wait_time=0).receive_messages(5) == []
    assert admin.get_topic_runtime_properties(t).scheduled_message_count == 2
    sender.cancel_scheduled_messages(drop)
    assert admin.get_topic_runtime_properties(t).scheduled_message_count == 1
    with pytest.raises(MessageNotFoundError):
        sender.cancel_scheduled_messages(drop)
    for s in ("a", "b"):
        assert admin.get_subscription_runtime_properties(t, s).scheduled_message_count == 1
    clock.advance(timedelta(minutes=5))
    assert drain(client, t, "a", 1) == ["keep"]
    assert drain(client, t, "b", 1) == ["keep"]
    with pytest.raises(MessageNotFoundError):
        sender.cancel_scheduled_messages(keep)  # its time has come


def test_ttl_3_smaller_of_topic_and_subscription_default_wins(client, admin, topic, clock):
    t = topic(default_message_time_to_live=timedelta(minutes=10))
    admin.create_subscription(t, "short", default_message_time_to_live=timedelta(minutes=1))
    admin.create_subscription(t, "long", default_message_time_to_live=timedelta(hours=1))
    client.get_topic_sender(t).send_messages([
        ServiceBusMessage("own-5-min", time_to_live=timedelta(minutes=5)),
        ServiceBusMessage("no-ttl")])
    short = client.get_subscription_receiver(t, "short", max_wait_time=0)
    long = client.get_subscription_receiver(t, "long", max_wait_time=0)
    got_short = receive_all(short, 2)
    got_long = receive_all(long, 2)
    assert {str(m): m.expires_at_utc - START for m in got_short} == {
        "own-5-min": timedelta(minutes=1), "no-ttl": timedelta(minutes=1)}
    assert {str(m): m.expires_at_utc - START for m in got_long} == {
        "own-5-min": timedelta(minutes=5), "no-ttl": timedelta(minutes=10)}
    for m in got_short:
        short.abandon_message(m)
    for m in got_long:
        long.abandon_message(m)
    clock.advance(timedelta(minutes=2))
    assert short.receive_messages(5) == []  # expired here (TTL-4) ...
    assert bodies(receive_all(long, 2)) == ["no-ttl", "own-5-min"]  # ... not there


# -- bad input ---------------------------------------------------------------------------------
def test_bad_input_is_refused_before_anything_is_written(client, admin, topic):
    t = topic()
    with pytest.raises(MessagingEntityNotFoundError, match="topic 'nope'"):
        admin.create_subscription("nope", "s")
    with pytest.raises(MessagingEntityNotFoundError):
        admin.create_rule(t, "missing", "r", filter=SqlRuleFilter("a = 1"))
    admin.create_subscription(t, "s")
    with pytest.raises(RuleSyntaxError, match="line 1, column"):
        admin.create_rule(t, "s", "r", filter=SqlRuleFilter("colour = 'red"))
    with pytest.raises(RuleSyntaxError, match="sys"):
        admin.create_rule(t, "s", "r", filter=SqlRuleFilter("sys.NoSuchProperty = 1"))
    with pytest.raises(RuleSyntaxError):
        admin.update_rule(t, "s", RuleProperties(t, "s", "$Default",
                                                 filter=SqlRuleFilter("nosuchfn(a) = 1")))
    with pytest.raises(InvalidPropertyError, match="default_rule"):
        admin.create_subscription(t, "s2", default_rule="a = 1")
    assert [r.name for r in admin.list_rules(t, "s")] == ["$Default"]
    assert [s.name for s in admin.list_subscriptions(t)] == ["s"]
    with pytest.raises(MessagingEntityNotFoundError, match="subscription 't.*/nope'"):
        client.get_subscription_receiver(t, "nope", max_wait_time=0)
    with pytest.raises(MessagingEntityNotFoundError):
        client.get_topic_sender("no-such-topic")
    with pytest.raises(MessagingEntityNotFoundError):
        admin.delete_rule(t, "s", "no-such-rule")


@pytest.mark.parametrize("engine", ["auto", "spark"])
def test_topic_5_part_5_a_peek_past_empty_partitions_gives_a_partitions_copies_before_the_next(
        engine, tmp_path, request):
    """A peek that passes empty partitions (read at once through Spark, one by one through
    delta-rs) gives a partition's action copies (TOPIC-5) before the next partition (PART-5):
    a partition holding only a copy (its message matched only the rule with an action) shows
    it first, then the next partition's original with its copy, then nothing."""
    from sbdelta import ManualClock, ServiceBusClient
    from sbdelta._store.layout import key_partition
    from sbdelta.management import ServiceBusAdministrationClient

    spark = request.getfixturevalue("spark") if engine == "spark" else None
    ns, clock = str(tmp_path / "ns"), ManualClock(START)
    admin = ServiceBusAdministrationClient(ns, spark=spark, clock=clock, engine=engine)
    admin.create_topic("t", enable_partitioning=True)
    admin.create_subscription("t", "s", default_rule=RuleProperties(
        "t", "s", "one", filter=SqlRuleFilter("n = 1")))
    admin.create_rule("t", "s", "tag", filter=SqlRuleFilter("1 = 1"),
                      action=SqlRuleAction("SET tag = 'x'"))
    keys = {}
    for i in range(300):  # a key of a late partition and one of a later one
        keys.setdefault(key_partition(f"k{i}", 16), f"k{i}")
    low, high = sorted(p for p in keys if p >= 9)[:2]
    with ServiceBusClient(ns, spark=spark, clock=clock, engine=engine) as client:
        client.get_topic_sender("t").send_messages(
            [ServiceBusMessage(str(p), partition_key=keys[p],
                               application_properties={"n": 2 if p == low else 1})
             for p in (low, high)])
        receiver = client.get_subscription_receiver("t", "s", max_wait_time=0)
        pages = [[(str(m), m.application_properties.get("tag")) for m in
                  receiver.peek_messages(10, sequence_number=0 if i == 0 else None)]
                 for i in range(4)]
    assert pages == [[(str(low), "x")], [(str(high), None), (str(high), "x")], [], []]
