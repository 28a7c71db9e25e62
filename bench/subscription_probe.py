"""A probe (issue 16): one filtered subscription's ``receive_messages(10)`` + ``complete_messages``
through delta-rs (engine ``auto`` on a local namespace, the rules in Python) and through Spark
(engine ``spark``), on two copies of the same topic, against a queue's receive through each;
and a ``send_messages`` of 10 to a topic whose subscription forwards to a queue (the send
moves the subscription's share, FWD-2) against the same send to a topic whose subscription
does not.

``python -m bench.subscription_probe [ROUNDS]`` prints seconds per round (median) per case.
"""

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from sbdelta import ServiceBusClient, ServiceBusMessage
from sbdelta._spark import get_spark
from sbdelta.management import RuleProperties, ServiceBusAdministrationClient, SqlRuleFilter

BACKLOG = 400


def _prepare(ns: str, spark) -> None:
    admin = ServiceBusAdministrationClient(ns, spark=spark)
    admin.create_queue("q")
    admin.create_topic("t")
    admin.create_subscription("t", "tenth", default_rule=RuleProperties(
        "t", "tenth", "r", filter=SqlRuleFilter("g = 0")))
    with ServiceBusClient(ns, spark=spark) as client:
        client.get_queue_sender("q").send_messages(
            [ServiceBusMessage(f"m{i}") for i in range(BACKLOG // 10)])
        client.get_topic_sender("t").send_messages(
            [ServiceBusMessage(f"m{i}", application_properties={"g": i % 10})
             for i in range(BACKLOG)])
    admin.create_topic("plain")
    admin.create_subscription("plain", "kept")
    admin.create_queue("relayed")
    admin.create_topic("relay")
    admin.create_subscription("relay", "onward", forward_to="relayed")


def _sends(sender, rounds: int):
    times = []
    for n in range(rounds):
        started = time.perf_counter()
        sender.send_messages([ServiceBusMessage(f"s{n}-{i}") for i in range(10)])
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _rounds(receiver, rounds: int):
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        got = receiver.receive_messages(10)
        receiver.complete_messages(got)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(rounds: int) -> None:
    spark = get_spark(conf={"spark.app.name": "sbdelta-subscription-probe"})
    root = Path(tempfile.mkdtemp(prefix="sbdelta-probe-"))
    try:
        for engine in ("auto", "spark"):
            ns = str(root / engine)
            _prepare(ns, spark)
            with ServiceBusClient(ns, spark=spark, engine=engine) as client:
                queue = _rounds(client.get_queue_receiver("q", max_wait_time=0), rounds)
                sub = _rounds(client.get_subscription_receiver("t", "tenth", max_wait_time=0),
                              rounds)
                plain = _sends(client.get_topic_sender("plain"), rounds)
                relay = _sends(client.get_topic_sender("relay"), rounds)
            print(f"engine {engine}: queue receive(10)+complete {queue:.3f} s, 10% filtered "
                  f"subscription {sub:.3f} s ({sub / queue:.2f}x the queue); topic send(10) "
                  f"{plain:.3f} s, with a forwarding subscription {relay:.3f} s "
                  f"({relay / plain:.2f}x)", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4)
