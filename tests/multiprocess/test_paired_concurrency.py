"""Paired namespaces across processes (issue 15's "done means"): a paired sender keeps sending
while its primary queue fails and recovers, two syphons move the backlog home at once (one of
them killed with SIGKILL in the middle), and a receiver takes every message from the primary:
each exactly once, with its properties restored, and no ping ever (PAIR-2..8, RECV-7).

Every process has its own Spark driver and real time; the fault is real (the queue set to
SendDisabled, then Active again).
"""

import json
import os
import random
import signal
import time
from datetime import timedelta

from sbdelta import ServiceBusClient, ServiceBusSubQueue
from sbdelta._namespace import normalize_root
from sbdelta.management import EntityStatus, ServiceBusAdministrationClient
from sbdelta.paired import (BACKLOG_QUEUE_PROPERTIES, backlog_queue_name, primary_identity)

from ..conftest import output_tail, run_logged

MESSAGES = 30
PING = "application/vnd.ms-servicebus-ping"


def _read(path):
    if not os.path.exists(path):
        return []
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.endswith("\n")]


def _wait_for(predicate, timeout, procs, what):
    deadline = time.monotonic() + timeout
    while not predicate():
        # A worker that failed; the sender may finish its sends first (exit 0) and is fine.
        dead = [p for p in procs if p.poll() is not None and p.returncode != 0]
        assert not dead, f"a worker failed while waiting for {what}: {output_tail(dead[0])}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(1)


def test_pair_7_a_sender_failing_over_two_syphons_one_killed_and_a_receiver_every_message_once(
        spark, tmp_path):
    primary, secondary = str(tmp_path / "primary"), str(tmp_path / "secondary")
    admin = ServiceBusAdministrationClient(primary, spark=spark)
    admin.create_queue("orders", lock_duration=timedelta(minutes=5))
    away = ServiceBusAdministrationClient(secondary, spark=spark)
    identity = primary_identity(normalize_root(primary))
    backlog = [backlog_queue_name(identity, i) for i in range(2)]
    for name in backlog:
        away.create_queue(name, **BACKLOG_QUEUE_PROPERTIES)
    admin.update_queue(admin.get_queue("orders"), status=EntityStatus.SEND_DISABLED)  # down

    sent_log, received_log = str(tmp_path / "sender.log"), str(tmp_path / "receiver.log")
    syphon = ["-m", "jobs.syphon", "--namespace", primary, "--secondary", secondary,
              "--follow", "--poll-seconds", "1"]
    sender = run_logged(sent_log + ".out", "-m", "tests.workers.paired_worker", primary,
                        secondary, "orders", sent_log, str(MESSAGES))
    receiver = run_logged(received_log + ".out", "-m", "tests.workers.broker_worker", "receive",
                          primary, "orders", received_log, "1500", "20")
    syphons = [run_logged(str(tmp_path / f"syphon{i}.out"), *syphon) for i in range(2)]
    procs = [sender, receiver, *syphons]
    try:
        # The primary recovers once a third of the messages went to the backlog.
        _wait_for(lambda: sum(r["event"] == "sent" for r in _read(sent_log)) >= MESSAGES // 3,
                  900, procs, "sends during the outage")
        admin.update_queue(admin.get_queue("orders"), status=EntityStatus.ACTIVE)
        open(sent_log + ".resume", "w").close()  # the sender goes on (paired_worker)
        # Kill one syphon at a random moment once messages are arriving.
        _wait_for(lambda: any(r["event"] == "completed" for r in _read(received_log)),
                  900, procs, "the first delivery")
        time.sleep(random.uniform(0, 8))
        os.kill(syphons[0].pid, signal.SIGKILL)
        syphons[0].wait(timeout=60)
        procs.remove(syphons[0])
        sender.wait(timeout=900)
        assert sender.returncode == 0, output_tail(sender)
        procs.remove(sender)
        _wait_for(lambda: len({r["id"] for r in _read(received_log)
                               if r["event"] == "locked"}) >= MESSAGES, 900, procs,
                  "every message at the receiver")
        time.sleep(5)  # a message delivered twice would show up now
        open(received_log + ".stop", "w").close()
        syphons[1].send_signal(signal.SIGTERM)
        syphons[1].wait(timeout=120)
        assert syphons[1].returncode == 0, output_tail(syphons[1])
        receiver.wait(timeout=300)
    finally:
        for proc in (sender, receiver, *syphons):
            if proc.poll() is None:
                proc.kill()

    sent = [r for r in _read(sent_log) if r["event"] == "sent"]
    assert sorted(r["n"] for r in sent) == list(range(MESSAGES))
    vias = {r["via"] for r in sent}
    assert vias == {"backlog", "primary"}, vias  # the sender failed over and came back
    locked = [r for r in _read(received_log) if r["event"] == "locked"]
    completed = [r for r in _read(received_log) if r["event"] == "completed"]
    assert not [r for r in locked if r["ctype"] == PING]  # RECV-7: no ping is ever received
    assert sorted(r["id"] for r in locked) == sorted(f"m{n}" for n in range(MESSAGES))  # once
    assert len(completed) == MESSAGES
    assert {(r["n"], r["ttl"]) for r in locked} == {(n, 86400.0) for n in range(MESSAGES)}
    with ServiceBusClient(secondary, spark=spark) as client:  # nothing left, nothing dead
        for name in backlog:
            assert client.get_queue_receiver(name).peek_messages(5, sequence_number=0) == []
            assert client.get_queue_receiver(
                name, sub_queue=ServiceBusSubQueue.DEAD_LETTER).peek_messages(
                5, sequence_number=0) == []
