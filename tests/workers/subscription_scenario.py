"""One topic scenario (TOPIC-1/4/5, SESS-1, FWD-2, PART-8) run by either engine (issue 16).

``python -m tests.workers.subscription_scenario NS`` runs it under ``engine="delta-rs"`` in a
process that must start no JVM and prints one JSON line; :func:`run` runs it in the test
process under any engine (the Spark path, as on a cloud namespace). :func:`prepare` makes the
topic and its subscriptions.
"""

import json
import os
import sys
import zlib
from datetime import timedelta

from sbdelta import (NEXT_AVAILABLE_SESSION, ServiceBusClient, ServiceBusMessage,
                     ServiceBusSubQueue)
from sbdelta._store import PID_SHIFT
from sbdelta.exceptions import OperationTimeoutError
from sbdelta.management import (CorrelationRuleFilter, RuleProperties,
                                ServiceBusAdministrationClient, SqlRuleAction, SqlRuleFilter)

SUBSCRIPTIONS = ("copies", "dead", "sess")


_ONE, _FIVE, _TEXT = ({"n": 1}, {"n": 5, "colour": "red"}, {"n": "abc"})
_COPIES = sorted([
    ["m1", _ONE, "a"], ["m1", {**_ONE, "tag": "x", "RuleName": "tag"}, "a"],
    ["m2", _FIVE, "b"], ["m2", {**_FIVE, "tag": "x", "RuleName": "tag"}, "b"],
    ["m2", {"n": 10, "RuleName": "double"}, "b"],
    ["m3", _TEXT, None], ["m3", {**_TEXT, "tag": "x", "RuleName": "tag"}, None]], key=repr)
#: What :func:`run` reports, whichever engine runs it.
EXPECTED = {
    "copies": {"before": 7, "peeked": _COPIES, "got": _COPIES, "copies": 7,
               "dead": [["m3", "RuleActionException"]], "after": [0, 0]},
    "dead": {"before": 1, "peeked": [["m2", _FIVE, "b"]], "got": [["m2", _FIVE, "b"]],
             "copies": 1, "dead": [["m3", "FilterException"]], "after": [0, 0]},
    "sess": {"before": 2, "peeked": None, "got": [["m1", _ONE, "a"], ["m2", _FIVE, "b"]],
             "copies": 2, "dead": [["m3", "Session id is null."]], "after": [0, 0]},
    # Forwarded by the send (FWD-2); the session id chooses the partition (PART-8).
    "onward": {"got": [["m2", _FIVE, "b"]], "partitions": [zlib.crc32(b"b") % 16],
               "dead": [["m3", "FilterException"]]}}


def prepare(admin: ServiceBusAdministrationClient) -> None:
    """Topic ``t``: ``copies`` has a rule without an action that takes everything and two
    with actions (one copy each, TOPIC-5); ``dead`` has a filter that fails on a text
    property (dead-lettered, TOPIC-5); ``sess`` requires sessions (SESS-1). Locks of
    five minutes: a Spark receive of a subscription takes seconds, and the scenario settles
    a message after several receives on the real clock."""
    admin.create_topic("t")
    lock = {"lock_duration": timedelta(minutes=5)}
    admin.create_subscription("t", "copies", **lock, default_rule=RuleProperties(
        "t", "copies", "all", filter=SqlRuleFilter("1 = 1")))
    admin.create_rule("t", "copies", "tag", filter=SqlRuleFilter("EXISTS(n)"),
                      action=SqlRuleAction("SET tag = 'x'"))
    admin.create_rule("t", "copies", "double", filter=CorrelationRuleFilter(label="double"),
                      action=SqlRuleAction("SET n = n * 2; REMOVE colour"))
    admin.create_subscription("t", "dead", **lock, default_rule=RuleProperties(
        "t", "dead", "r", filter=SqlRuleFilter("n + 1 > 2")))
    admin.create_subscription("t", "sess", requires_session=True, **lock)
    # ``onward`` forwards what its filter admits to a partitioned queue, dead-letters what
    # the filter fails on (FWD-2: moved by the send itself).
    admin.create_queue("out", enable_partitioning=True, **lock)
    admin.create_subscription("t", "onward", forward_to="out", **lock,
                              default_rule=RuleProperties("t", "onward", "r",
                                                          filter=SqlRuleFilter("n + 1 > 2")))


def _seen(messages):
    return sorted(([str(m), {str(k): v for k, v in m.application_properties.items()},
                    m.session_id] for m in messages), key=repr)


def _drain(receiver, first: int = 1):
    """Receive ``first`` message(s), then up to ten more in one call; complete them all in one
    commit. (The counts after show that nothing was left.)"""
    got = receiver.receive_messages(first)
    got += receiver.receive_messages(10)
    receiver.complete_messages(got)
    return got


def run(ns: str, engine: str, spark=None) -> dict:
    """Sends three messages to ``t`` (n = 1 in session a, n = 5 labelled ``double`` in session
    b, n = 'abc' labelled ``double`` without a session); per subscription: counts and a peek
    before any receive, what receives hand out (sessions through next-available receivers),
    the dead-letter queue, and the counts after; what ``onward`` forwarded (with the
    destination partitions, PART-8) and dead-lettered."""
    admin = ServiceBusAdministrationClient(ns, engine=engine, spark=spark)
    report = {}
    with ServiceBusClient(ns, engine=engine, spark=spark) as client:
        client.get_topic_sender("t").send_messages([
            ServiceBusMessage("m1", application_properties={"n": 1}, session_id="a"),
            ServiceBusMessage("m2", application_properties={"n": 5, "colour": "red"},
                              subject="double", session_id="b"),
            ServiceBusMessage("m3", application_properties={"n": "abc"}, subject="double")])
        for sub in SUBSCRIPTIONS:
            before = admin.get_subscription_runtime_properties("t", sub).active_message_count
            if sub == "sess":
                got = []
                for _ in range(3):  # a, b, then none is left
                    try:
                        with client.get_subscription_receiver(
                                "t", sub, session_id=NEXT_AVAILABLE_SESSION,
                                max_wait_time=0) as receiver:
                            taken = receiver.receive_messages(10)
                            receiver.complete_messages(taken)
                            got += taken
                    except OperationTimeoutError:
                        break
                peeked = None
            else:
                receiver = client.get_subscription_receiver("t", sub, max_wait_time=0)
                peeked = _seen(receiver.peek_messages(10))
                got = _drain(receiver)
            dlq = client.get_subscription_receiver("t", sub, max_wait_time=0,
                                                   sub_queue=ServiceBusSubQueue.DEAD_LETTER)
            dead = dlq.receive_messages(10)
            dlq.complete_messages(dead)
            after = admin.get_subscription_runtime_properties("t", sub)
            report[sub] = {
                "before": before, "peeked": peeked, "got": _seen(got),
                "copies": len({m.sequence_number for m in got}),
                "dead": sorted([str(m), m.dead_letter_reason] for m in dead),
                "after": [after.active_message_count, after.dead_letter_message_count]}
        out = client.get_queue_receiver("out", max_wait_time=0)
        got = _drain(out)
        dlq = client.get_subscription_receiver("t", "onward", max_wait_time=0,
                                               sub_queue=ServiceBusSubQueue.DEAD_LETTER)
        dead = dlq.receive_messages(10)
        dlq.complete_messages(dead)
        report["onward"] = {
            "got": _seen(got), "partitions": sorted(m.sequence_number >> PID_SHIFT for m in got),
            "dead": sorted([str(m), m.dead_letter_reason] for m in dead)}
    return report


if __name__ == "__main__":
    from pyspark import SparkContext

    result = run(sys.argv[1], "delta-rs")
    print(json.dumps({**result, "jvm": SparkContext._gateway is not None}), flush=True)
    # delta-rs's runtime threads can abort interpreter finalization (docs/engines.md)
    os._exit(0)
