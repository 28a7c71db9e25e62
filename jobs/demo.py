"""The main job: set up a local namespace from conf/namespace.json, then move messages on it.

It applies the config, lists the entities, then on the queue ``orders`` sends five messages,
receives them in PeekLock and completes, abandons and dead-letters some, reads the dead-letter
queue, and prints the runtime counts; then it publishes three messages to the topic ``events``
and shows what each subscription received through its rules.

    python -m jobs.demo [--namespace DIR] [--config FILE]
    spark-submit $(sbdelta spark-submit-args) jobs/demo.py --namespace DIR

Runs on the embedded default (local Spark, a local Delta namespace). Applying the config is
idempotent: a second run reports every entity as unchanged.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # spark-submit runs this file without the repo on sys.path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namespace", default=str(ROOT / "namespace"),
                        help="namespace root (default: ./namespace)")
    parser.add_argument("--config", default=str(ROOT / "conf" / "namespace.json"),
                        help="emulator-format config to apply (default: conf/namespace.json)")
    args = parser.parse_args(argv)

    from sbdelta import ServiceBusError
    from sbdelta.management import ServiceBusAdministrationClient

    started = time.monotonic()
    try:
        admin = ServiceBusAdministrationClient(args.namespace)
        print(f"== applying {args.config}")
        print(admin.apply_config(args.config))
        print("== entities")
        for q in admin.list_queues():
            print(f"queue        {q.name:<28} lock={q.lock_duration} "
                  f"max_delivery={q.max_delivery_count} partitioned={q.enable_partitioning}")
        for t in admin.list_topics():
            print(f"topic        {t.name}")
            for s in admin.list_subscriptions(t.name):
                rules = ", ".join(f"{r.name}={type(r.filter).__name__}"
                                  for r in admin.list_rules(t.name, s.name))
                print(f"subscription {t.name}/{s.name:<21} rules: {rules}")
        _messaging_tour(args.namespace, admin)
    except ServiceBusError as exc:
        print(f"demo failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(f"== done in {time.monotonic() - started:.1f}s")
    return 0


def _counts(admin, queue: str) -> str:
    c = admin.get_queue_runtime_properties(queue)
    return (f"active={c.active_message_count} dead_letter={c.dead_letter_message_count} "
            f"scheduled={c.scheduled_message_count} total={c.total_message_count}")


def _messaging_tour(namespace: str, admin) -> None:
    from sbdelta import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue

    queue = "orders"
    with ServiceBusClient(namespace) as client:
        receiver = client.get_queue_receiver(queue, max_wait_time=0)
        for stale in receiver:  # leftovers of an earlier run
            receiver.complete_message(stale)
        print(f"== messaging on queue '{queue}'")
        sender = client.get_queue_sender(queue)
        sender.send_messages([ServiceBusMessage(f"order {i}", message_id=f"order-{i}",
                                                application_properties={"n": i})
                              for i in range(5)])
        print(f"sent 5                {_counts(admin, queue)}")
        got = receiver.receive_messages(max_message_count=5)
        print("received              " + ", ".join(f"#{m.sequence_number}:{m}" for m in got))
        done, retry, poison = got[:3], got[3:4], got[4:]
        receiver.complete_messages(done)
        print(f"completed {len(done)} (one commit)")
        for m in retry:
            receiver.abandon_message(m)
            print(f"abandoned {m.message_id}")
        for m in poison:
            receiver.dead_letter_message(m, reason="demo", error_description="shown by the demo")
            print(f"dead-lettered {m.message_id}")
        again = receiver.receive_messages(5)
        print("received again        " + ", ".join(
            f"{m.message_id} (delivery {m.delivery_count})" for m in again))
        receiver.complete_messages(again)
        dlq = client.get_queue_receiver(queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER,
                                        max_wait_time=0)
        for m in dlq.receive_messages(5):
            print(f"dead-letter queue     {m.message_id} reason={m.dead_letter_reason}")
            dlq.complete_message(m)
        print(f"counts                {_counts(admin, queue)}")
        _topic_tour(client, admin)


def _topic_tour(client, admin, topic: str = "events") -> None:
    """Publish three messages to the topic; each subscription takes what its rules match."""
    from sbdelta import ServiceBusMessage

    subscriptions = [s.name for s in admin.list_subscriptions(topic)]
    for name in subscriptions:  # leftovers of an earlier run
        receiver = client.get_subscription_receiver(topic, name, max_wait_time=0)
        receiver.complete_messages(receiver.receive_messages(100))
    print(f"== publishing on topic '{topic}'")
    client.get_topic_sender(topic).send_messages([
        ServiceBusMessage("disk full", message_id="e-1",
                          application_properties={"severity": "error"}),
        ServiceBusMessage("all good", message_id="e-2",
                          application_properties={"severity": "info"}),
        ServiceBusMessage("invoice 17", message_id="e-3", subject="invoice")])
    for name in subscriptions:
        receiver = client.get_subscription_receiver(topic, name, max_wait_time=0)
        got = receiver.receive_messages(max_message_count=10)
        receiver.complete_messages(got)
        print(f"subscription {topic}/{name:<10} got " + ", ".join(
            sorted(m.message_id for m in got)))


if __name__ == "__main__":
    from sbdelta.jobs.common import exit_with

    exit_with(main())
