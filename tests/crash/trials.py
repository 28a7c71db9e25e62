"""Crash trials: kill -9 a process at a random point of one operation, then check the tables.

A trial (issue 18) sets up a fresh namespace for one operation (:data:`SETUPS`), starts
tests/workers/crash_worker.py repeating that operation, kills it with SIGKILL a random time after
it is ready, and hands the namespace and the worker's journal to the invariant checker
(tests/crash/invariants.py). The trial records where the kill landed: inside a call (its
``begin`` journaled, its ``done`` not) or between two.
"""

import json
import os
import random
import signal
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Dict, List, Optional

from sbdelta import ServiceBusClient, ServiceBusMessage
from sbdelta.management import ServiceBusAdministrationClient

from ..conftest import output_tail, run_logged
from ..workers.crash_worker import (BACKLOG_QUEUES, DESTINATION, QUEUE, SPARK_OPERATIONS,
                                    SUBSCRIPTION, TOPIC)

#: Messages a trial's queue holds before the worker starts.
BACKLOG = 300
#: Seconds after "ready" within which the kill falls (uniformly): the length of the first call
#: in a fresh process (the Spark ones measured on the 2-core machine, docs/reliability.md), so
#: kill points spread over the whole of it; the delta-rs calls take 20-200 ms, so their window
#: holds tens of calls.
WINDOWS = {"subscription_complete": 12.0, "session_complete": 5.0, "send_dataframe": 10.0, "receive_dataframe": 18.0, "expire": 25.0, "compact": 20.0,
           "delete_idle": 0.4, "forward": 18.0, "syphon": 30.0, "failover_send": 5.0}
DEFAULT_WINDOW = 3.0
#: Operations whose first call is a long Spark plan in a fresh process: their window starts
#: when that call (a receive that handed out messages; a send) is done, so the kills fall in
#: the calls after it as well: (the call, seconds: a settlement and the next receive; a few
#: sends).
AFTER_FIRST_CALL = {"receive_dataframe": ("receive", 8.0),
                    "subscription_complete": ("receive", 6.0),
                    "send_forwarding": ("send", 8.0)}
#: The window of a delta-rs operation whose worker runs on the ``spark`` engine (the paired
#: sender's: its failed sends, 20 to the backlog and the way home, each a Spark job or two).
SPARK_ENGINE_WINDOW = 10.0
SPARK_ENGINE_WINDOWS = {"failover_send": 25.0}
#: How far ahead of true time the worker's clock runs (seconds), per operation.
LATER = {"expire": 3600, "delete_idle": 2 * 86400, "receive_scheduled": 3600}


def messages(prefix, count, **kwargs):
    return [ServiceBusMessage(f"{prefix}{i}", message_id=f"{prefix}{i}", **kwargs)
            for i in range(count)]


@dataclass
class Setup:
    """What a trial's namespace held before the worker started."""
    namespace: str
    ids: List[str]
    secondary: Optional[str] = None
    #: Ids the operation may move to the dead-letter queue without a journaled call (expiry).
    expiring: List[str] = field(default_factory=list)
    backlog_queue: Optional[str] = None
    #: The entity the trial is about: the queue ``q``, or (topic, subscription).
    subscription: Optional[tuple] = None
    #: The session ids of a session-queue trial.
    sessions: tuple = ()


def _queue(ns, **properties):
    ServiceBusAdministrationClient(ns).create_queue(
        QUEUE, lock_duration=timedelta(minutes=1), max_delivery_count=100, **properties)


def _send(ns, batch):
    with ServiceBusClient(ns) as client:
        client.get_queue_sender(QUEUE).send_messages(batch)
    return [m.message_id for m in batch]


def setup_plain(ns, count=BACKLOG):
    _queue(ns)
    return Setup(ns, _send(ns, messages("old", count)))


def setup_partitioned(ns):
    _queue(ns, enable_partitioning=True)
    return Setup(ns, _send(ns, [ServiceBusMessage(f"old{i}", message_id=f"old{i}",
                                                  partition_key=f"k{i % 7}")
                                for i in range(BACKLOG)]))


def setup_deferred(ns):
    setup = setup_plain(ns, 100)
    with ServiceBusClient(ns) as client:
        receiver = client.get_queue_receiver(QUEUE, max_wait_time=0)
        for _ in range(20):
            got = receiver.receive_messages(50)
            if not got:
                break
            receiver.defer_messages(got)
    return setup


def setup_scheduled(ns):
    """100 messages scheduled a minute ahead (SCHED-1; the worker's clock is an hour on, so its
    receives release them) and 50 ordinary ones."""
    _queue(ns)
    scheduled = messages("sched", 100)
    with ServiceBusClient(ns) as client:
        client.get_queue_sender(QUEUE).schedule_messages(scheduled, now_plus(60))
    return Setup(ns, [m.message_id for m in scheduled] + _send(ns, messages("old", 50)))


def setup_expiring(ns):
    _queue(ns, dead_lettering_on_message_expiration=True)
    expiring = _send(ns, messages("exp", 100, time_to_live=timedelta(minutes=1)))
    return Setup(ns, expiring + _send(ns, messages("keep", 50)), expiring=expiring)


def setup_compaction(ns):
    setup = setup_plain(ns)
    with ServiceBusClient(ns) as client:
        receiver = client.get_queue_receiver(QUEUE, max_wait_time=0)
        done = []
        while len(done) < 200:
            got = receiver.receive_messages(50)
            receiver.complete_messages(got)
            done += [m.message_id for m in got]
    setup.ids = [i for i in setup.ids if i not in set(done)]
    return setup


def setup_idle(ns):
    _queue(ns, auto_delete_on_idle=timedelta(hours=1))
    return Setup(ns, _send(ns, messages("old", 50)))


def setup_forward(ns):
    admin = ServiceBusAdministrationClient(ns)
    admin.create_queue(DESTINATION)
    setup = setup_plain(ns, 200)
    admin.update_queue(admin.get_queue(QUEUE), forward_to=DESTINATION)
    return setup


def setup_syphon(ns):
    from sbdelta._namespace import normalize_root
    from sbdelta.paired import (BACKLOG_QUEUE_PROPERTIES, backlog_queue_name, primary_identity,
                                to_backlog)

    secondary = ns + "-secondary"
    _queue(ns)
    backlog = backlog_queue_name(primary_identity(normalize_root(ns)), 0)
    ServiceBusAdministrationClient(secondary).create_queue(backlog, **BACKLOG_QUEUE_PROPERTIES)
    parked = messages("old", 200)
    with ServiceBusClient(secondary) as away:
        away.get_queue_sender(backlog).send_messages([to_backlog(m, QUEUE) for m in parked])
    return Setup(ns, [m.message_id for m in parked], secondary=secondary, backlog_queue=backlog)


def setup_send_forwarding(ns):
    """A topic whose subscription forwards everything to the queue DESTINATION (FWD-2)."""
    admin = ServiceBusAdministrationClient(ns)
    admin.create_queue(DESTINATION, lock_duration=timedelta(minutes=1), max_delivery_count=100)
    admin.create_topic(TOPIC)
    admin.create_subscription(TOPIC, SUBSCRIPTION, forward_to=DESTINATION)
    with ServiceBusClient(ns) as client:
        client.get_topic_sender(TOPIC).send_messages(messages("old", 20))
    return Setup(ns, [f"old{i}" for i in range(20)])


def backlog_queues(ns):
    """The backlog queue names of a ``failover_send`` trial's pairing (PAIR-1)."""
    from sbdelta._namespace import normalize_root
    from sbdelta.paired import backlog_queue_name, primary_identity

    return [backlog_queue_name(primary_identity(normalize_root(ns)), i)
            for i in range(BACKLOG_QUEUES)]


def setup_failover(ns):
    """A primary queue with 20 messages, set to SendDisabled (a real fault: PAIR-3), and a
    secondary namespace whose backlog queues the pairing made (PAIR-1)."""
    from sbdelta.management import EntityStatus
    from sbdelta.paired import PairedNamespaceOptions

    secondary = ns + "-secondary"
    setup = setup_plain(ns, 20)
    options = PairedNamespaceOptions(secondary, backlog_queue_count=BACKLOG_QUEUES)
    ServiceBusClient(ns, paired_namespace=options).close()
    admin = ServiceBusAdministrationClient(ns)
    admin.update_queue(admin.get_queue(QUEUE), status=EntityStatus.SEND_DISABLED)
    setup.secondary = secondary
    return setup


def setup_subscription(ns):
    """A topic whose subscription admits the even numbers (TOPIC-2); 60 messages, as its
    receives plan in Spark (a drain of 300 would take a minute)."""
    from sbdelta.management import RuleProperties, SqlRuleFilter

    admin = ServiceBusAdministrationClient(ns)
    admin.create_topic(TOPIC)
    admin.create_subscription(TOPIC, SUBSCRIPTION, lock_duration=timedelta(minutes=1),
                              max_delivery_count=100, default_rule=RuleProperties(
                                  TOPIC, SUBSCRIPTION, "even",
                                  filter=SqlRuleFilter("n % 2 = 0")))
    with ServiceBusClient(ns) as client:
        client.get_topic_sender(TOPIC).send_messages(
            [ServiceBusMessage(f"old{i}", message_id=f"old{i}", application_properties={"n": i})
             for i in range(60)])
    return Setup(ns, [f"old{i}" for i in range(0, 60, 2)], subscription=(TOPIC, SUBSCRIPTION))


def setup_sessions(ns):
    """A session queue with three sessions of 20 messages (SESS-2; on a local namespace its
    session locks, receives and settlements run through delta-rs, as a queue's do)."""
    _queue(ns, requires_session=True)
    ids = _send(ns, [ServiceBusMessage(f"old{i}", message_id=f"old{i}", session_id=f"s{i % 3}")
                     for i in range(60)])
    return Setup(ns, ids, sessions=tuple(f"s{i}" for i in range(3)))


def setup_senders(ns):
    return setup_plain(ns, 20)


SETUPS = {
    "send": setup_senders, "send_batch": setup_senders, "schedule": setup_senders,
    "send_dataframe": setup_senders, "send_forwarding": setup_send_forwarding,
    "failover_send": setup_failover,
    "peek_lock": setup_plain, "complete": setup_partitioned, "complete_one": setup_plain,
    "abandon": setup_plain, "defer": setup_plain, "dead_letter": setup_partitioned,
    "renew": setup_plain, "receive_and_delete": setup_plain,
    "receive_deferred": setup_deferred, "receive_dataframe": setup_partitioned,
    "receive_scheduled": setup_scheduled,
    "expire": setup_expiring, "compact": setup_compaction, "delete_idle": setup_idle,
    "forward": setup_forward, "syphon": setup_syphon,
    "subscription_complete": setup_subscription, "session_complete": setup_sessions,
}


@dataclass
class Trial:
    op: str
    setup: Setup
    journal: List[dict]
    engine: str
    #: Where the kill landed: "inside <op>" or "between calls".
    landed: str
    #: Seconds from "ready" to the kill.
    kill_after: float


def read_journal(path) -> List[dict]:
    if not os.path.exists(path):
        return []
    with open(path) as handle:
        return [json.loads(line) for line in handle if line.endswith("\n")]


def run_trial(op: str, directory: str, rng: random.Random, engine: str = "auto",
              max_window: Optional[float] = None) -> Trial:
    """Set up ``op``'s namespace in ``directory``, run the worker and kill it at random
    (within ``max_window`` seconds of its start, if given: the quick form's shorter trials)."""
    os.makedirs(directory, exist_ok=True)
    setup = SETUPS[op](os.path.join(directory, "ns"))
    journal_path = os.path.join(directory, "journal.jsonl")
    env = {"SBDELTA_ENGINE": engine}
    if op in LATER:
        env["SBDELTA_TEST_LATER"] = str(LATER[op])
    args = [op, setup.namespace, journal_path] + ([setup.secondary] if setup.secondary else [])
    proc = run_logged(os.path.join(directory, "worker.out"), "-m", "tests.workers.crash_worker",
                      *args, env=env)
    try:
        deadline = time.monotonic() + 300
        while not any(r["ev"] == "ready" for r in read_journal(journal_path)):
            assert proc.poll() is None, f"{op} worker died before it was ready:\n" \
                                        f"{output_tail(proc)}"
            assert time.monotonic() < deadline, f"{op} worker not ready in 300 s"
            time.sleep(0.05)
        first, after_first = AFTER_FIRST_CALL.get(op, (None, None))
        if first:
            while not any(r["ev"] == "done" and r["op"] == first and r["ids"]
                          for r in read_journal(journal_path)):
                assert proc.poll() is None, f"{op} worker died:\n{output_tail(proc)}"
                assert time.monotonic() < deadline, f"{op}: no {first} done in 300 s"
                time.sleep(0.05)
        ready = time.monotonic()
        if after_first:
            window = after_first
        elif engine == "spark":
            window = SPARK_ENGINE_WINDOWS.get(op, WINDOWS.get(op, SPARK_ENGINE_WINDOW))
        else:
            window = WINDOWS.get(op, DEFAULT_WINDOW)
        window = min(window, max_window or window)
        time.sleep(rng.uniform(0, window))
        assert proc.poll() is None, f"{op} worker stopped by itself:\n{output_tail(proc)}"
        os.kill(proc.pid, signal.SIGKILL)
        kill_after = time.monotonic() - ready
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    journal = read_journal(journal_path)
    calls = [r for r in journal if r["ev"] in ("begin", "done", "failed")]
    landed = (f"inside {calls[-1]['op']}" if calls and calls[-1]["ev"] == "begin"
              else "between calls")
    return Trial(op, setup, journal, engine, landed, kill_after)


def now_plus(seconds: float) -> datetime:
    return datetime.now(timezone.utc) + timedelta(seconds=seconds)


def summary(trials: List[Trial]) -> Dict[str, object]:
    """Per operation: trials, kills inside a call, kills between calls, engines."""
    out: Dict[str, dict] = {}
    for t in trials:
        row = out.setdefault(t.op, {"trials": 0, "inside": 0, "between": 0, "engines": []})
        row["trials"] += 1
        row["inside" if t.landed.startswith("inside") else "between"] += 1
        if t.engine not in row["engines"]:
            row["engines"].append(t.engine)
    return out


__all__ = ["SETUPS", "SPARK_OPERATIONS", "Trial", "run_trial", "summary", "now_plus", "QUEUE",
           "DESTINATION", "BACKLOG"]
