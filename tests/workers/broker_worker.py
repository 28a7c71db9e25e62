"""A separate process that sends or receives on queues, logging what it did as JSON lines.

Used by the multi-process stress and crash tests. Every log line is flushed (and fsynced) as
soon as it is written, so a kill -9 loses at most the line being written. ``<queues>`` is one
entity or several separated by commas: a queue name, ``topic:<name>`` (to send to a topic) or
``<topic>/Subscriptions/<name>`` (to receive from a subscription); every record names the
entity it is about (field ``queue``). Sent messages carry the application property ``n``, their
number.

    python -m tests.workers.broker_worker send <namespace> <queues> <log> <count> <batch>
        (sends <count> messages to each queue, <batch> per send, the queues in turn)
    python -m tests.workers.broker_worker receive <namespace> <queues> <log> <stop_after> <batch>
        [<max_idle_pause>]  (seconds an idle receiver waits at most; its pause doubles from
        0.2 s while it finds nothing; default 0.2) [<prefetch_count>]  (its receivers' prefetch:
        a receive may hand out messages an earlier one locked; default 0)
    python -m tests.workers.broker_worker chaos <namespace> <queues> <log> <batch>
    python -m tests.workers.broker_worker maintain <namespace> <queues> <log>
        (runs the expiry sweep, the forwarding job and compaction in turn until <log>.stop
        exists, logging each whole round; the stop file ends it between two steps)

With ``SBDELTA_TEST_GO=<path>`` the worker starts its Spark session (when its engine is
``spark``, ``SBDELTA_ENGINE``; on delta-rs it has none to start), logs ``ready`` and waits for that
file before doing anything else: a test can start its processes (and pay for their JVMs) ahead
of the moment it wants them to work.
"""

import json
import os
import sys
import time


#: A receiver that found nothing waits this long before it looks again (doubling, while it
#: finds nothing, up to its ``max_idle_pause`` argument: default no doubling).
IDLE_PAUSE = 0.2

#: The load run (tests/multiprocess/load.py) kills nobody and logs 200k lines: no fsync there.
FSYNC = not os.environ.get("SBDELTA_TEST_NO_FSYNC")


def _log(handle, **record):
    handle.write(json.dumps(record) + "\n")
    handle.flush()
    if FSYNC:
        os.fsync(handle.fileno())


def _wait_for_go():
    go = os.environ.get("SBDELTA_TEST_GO")
    while go and not os.path.exists(go):
        time.sleep(0.1)


def _sender(client, spec):
    if spec.startswith("topic:"):
        return client.get_topic_sender(spec[len("topic:"):])
    return client.get_queue_sender(spec)


def _receiver(client, admin, spec, prefetch=0):
    """(receiver, lock duration in seconds) of a queue or ``topic/Subscriptions/name``."""
    parts = spec.split("/Subscriptions/")
    if len(parts) == 2:
        lock = admin.get_subscription(*parts).lock_duration
        return (client.get_subscription_receiver(*parts, max_wait_time=0,
                                                 prefetch_count=prefetch), lock.total_seconds())
    return (client.get_queue_receiver(spec, max_wait_time=0, prefetch_count=prefetch),
            admin.get_queue(spec).lock_duration.total_seconds())


def _jvm_started() -> bool:
    """Whether this process started a JVM (a delta-rs receiver needs none)."""
    from pyspark import SparkContext

    return SparkContext._gateway is not None


def main(argv, spark=None):
    """Run one worker; ``spark``: the session to use (a test running a worker in a thread of
    its own process passes its session), else the worker's own."""
    mode, namespace, queues, log_path = argv[:4]
    queues = queues.split(",")
    from sbdelta import ServiceBusClient, ServiceBusMessage, SystemClock
    from sbdelta._store.delta import retry_counts
    from sbdelta.exceptions import MessageLockLostError
    from sbdelta.management import ServiceBusAdministrationClient

    clock = SystemClock()
    client = ServiceBusClient(namespace, clock=clock, spark=spark)
    if os.environ.get("SBDELTA_TEST_GO") and os.environ.get("SBDELTA_ENGINE") == "spark":
        client.spark  # noqa: B018 - start the JVM now, before the go file
    with open(log_path, "a") as log:
        _log(log, event="ready", pid=os.getpid())
        _wait_for_go()
        if mode == "send":
            count, batch = int(argv[4]), int(argv[5])
            senders = {q: _sender(client, q) for q in queues}
            for start in range(0, count, batch):
                for q, sender in senders.items():
                    numbers = range(start, min(count, start + batch))
                    ids = [f"{q}-m{i}" for i in numbers]
                    sender.send_messages([ServiceBusMessage(f"{q}-m{i}", message_id=f"{q}-m{i}",
                                                            application_properties={"n": i})
                                          for i in numbers])
                    _log(log, event="sent", queue=q, ids=ids)
            return
        if mode == "maintain":
            from sbdelta.maintenance import compact, expire_messages, forward_messages

            rounds = 0
            entities = [q[len("topic:"):] if q.startswith("topic:") else q for q in queues]
            def stopped():
                return os.path.exists(log_path + ".stop")

            # The stop file is looked at between the steps too: a round takes minutes on a
            # loaded machine, and the test need not wait for one it no longer looks at.
            while not stopped():
                seconds = {"start": time.monotonic()}
                expired = expire_messages(namespace, entities=entities, spark=spark)
                seconds["expire"] = time.monotonic()
                if stopped():
                    break
                forwarded = forward_messages(namespace, entities=entities, spark=spark)
                seconds["forward"] = time.monotonic()
                if stopped():
                    break
                compacted = compact(namespace, entities=entities, spark=spark)
                seconds["compact"] = time.monotonic()
                rounds += 1
                steps = list(seconds.items())  # how long each step of the round took
                _log(log, event="maintained", round=rounds, expired=expired.totals(),
                     forwarded=forwarded.totals(), compacted=compacted.totals(),
                     seconds={name: round(t - steps[i][1], 1)
                              for i, (name, t) in enumerate(steps[1:])})
            return
        admin = ServiceBusAdministrationClient(namespace, spark=spark)
        prefetch = int(argv[7]) if mode == "receive" and len(argv) > 7 else 0
        receivers = {q: _receiver(client, admin, q, prefetch) for q in queues}
        if mode == "receive":
            stop_after, batch = float(argv[4]), int(argv[5])
            max_pause = float(argv[6]) if len(argv) > 6 else IDLE_PAUSE
            deadline = time.monotonic() + stop_after
            pause = IDLE_PAUSE
            while time.monotonic() < deadline:
                idle = True
                for q, (receiver, lock) in receivers.items():
                    before = dict(retry_counts)
                    got = receiver.receive_messages(batch)
                    _log(log, event="received", queue=q, count=len(got),
                         conflicts=retry_counts["conflict"] - before["conflict"],
                         stale=retry_counts["stale"] - before["stale"])
                    if not got:
                        continue
                    idle = False
                    for m in got:
                        until = m.locked_until_utc.timestamp()
                        ttl = m.time_to_live.total_seconds() if m.time_to_live else None
                        _log(log, event="locked", queue=q, seq=m.sequence_number,
                             id=m.message_id, token=m.lock_token, start=until - lock, until=until,
                             ctype=m.content_type, ttl=ttl,
                             n=(m.application_properties or {}).get("n"))
                    try:
                        receiver.complete_messages(got)
                        done = clock.now().timestamp()
                        for m in got:
                            _log(log, event="completed", queue=q, seq=m.sequence_number,
                                 token=m.lock_token, at=done)
                    except MessageLockLostError as exc:
                        _log(log, event="lock_lost", queue=q, error=str(exc))
                if idle:
                    if os.path.exists(log_path + ".stop"):
                        break
                    # Idle: look again ever less often (up to max_pause), so that a drained
                    # receiver does not take the CPU the busy ones (and their JVMs) need.
                    time.sleep(pause)
                    pause = min(max_pause, pause * 2)
                else:
                    pause = IDLE_PAUSE
            _log(log, event="engine", jvm=_jvm_started())
            return
        if mode == "chaos":
            batch = int(argv[4])
            empty = False
            while True:
                for q, (receiver, _) in receivers.items():
                    got = receiver.receive_messages(batch)
                    if not got:
                        if not empty:  # nothing to receive (settled, or locked by the killed)
                            _log(log, event="empty", queue=q)
                            empty = True
                        time.sleep(0.2)
                        continue
                    third = max(1, len(got) // 3)
                    complete, dead, abandon = got[:third], got[third:2 * third], got[2 * third:]
                    _log(log, event="completing", queue=q,
                         seqs=[m.sequence_number for m in complete])
                    receiver.complete_messages(complete)
                    _log(log, event="completed", queue=q,
                         seqs=[m.sequence_number for m in complete])
                    _log(log, event="dead_lettering", queue=q,
                         seqs=[m.sequence_number for m in dead])
                    receiver.dead_letter_messages(dead, reason="chaos")
                    _log(log, event="dead_lettered", queue=q,
                         seqs=[m.sequence_number for m in dead])
                    if abandon:
                        receiver.abandon_messages(abandon)


if __name__ == "__main__":
    main(sys.argv[1:])
