"""A process that repeats one broker operation until it is killed, journaling each call.

Used by the crash trials (tests/crash/). Before each call it journals ``begin`` with the message
ids the call is about, after it ``done`` (both flushed and fsynced), so after a SIGKILL the
journal says which calls were acknowledged and which one, at most, was in flight.

    python -m tests.workers.crash_worker <operation> <namespace> <journal> [<secondary>]

The entity is the queue ``q`` (see tests/crash/trials.py, which sets the namespace up). The
operations are the keys of :data:`OPERATIONS`. ``$SBDELTA_ENGINE`` chooses the engine;
``$SBDELTA_TEST_LATER`` (seconds) runs the worker's broker clock that far ahead of true time,
for the expiry sweep and idle deletion.
"""

import itertools
import json
import os
import sys
import time
from datetime import datetime, timedelta, timezone

QUEUE = "q"
#: The topic and the subscription of the ``subscription_complete`` trials.
TOPIC, SUBSCRIPTION = "t", "s"
#: The queue that ``forward`` trials forward ``q`` to.
DESTINATION = "dest"
#: Messages per call of the list forms.
BATCH = 5
#: Backlog queues of the ``failover_send`` trials' pairing, and after how many sends to them
#: the worker enables its primary queue again (the pings then bring the sender home: PAIR-5).
BACKLOG_QUEUES, ENABLE_AFTER = 2, 20


class Journal:
    def __init__(self, path):
        self._handle = open(path, "a")

    def write(self, event, **record):
        self._handle.write(json.dumps(dict(record, ev=event, t=time.time())) + "\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def call(self, op, ids, fn, raises=()):
        """Journal ``begin``, run ``fn``, journal ``done``; returns what ``fn`` returned. An
        exception of ``raises`` is journaled as ``failed`` (the call must have written nothing)
        and returned."""
        self.write("begin", op=op, ids=list(ids))
        try:
            out = fn()
        except raises as exc:
            self.write("failed", op=op, ids=list(ids), error=type(exc).__name__)
            return exc
        self.write("done", op=op, ids=list(ids))
        return out


def peek_all(receiver):
    """Every message a peek shows (each call goes on after the last one peeked)."""
    out = []
    while True:
        page = receiver.peek_messages(100)
        if not page:
            return out
        out += page


def _ids(messages):
    return [m.message_id for m in messages]


def _messages(prefix, count):
    from sbdelta import ServiceBusMessage

    return [ServiceBusMessage(f"{prefix}{i}", message_id=f"{prefix}{i}") for i in range(count)]


def _send(ctx, journal, batch):
    sender = ctx.client.get_queue_sender(QUEUE)
    for k in itertools.count():
        batch_messages = _messages(f"new{k}-", batch)
        journal.call("send", _ids(batch_messages),
                     lambda: sender.send_messages(batch_messages if batch > 1
                                                  else batch_messages[0]))


def _send_forwarding(ctx, journal):
    """Sends to the topic whose subscription forwards to DESTINATION: each send moves the
    subscription's share on before it returns (FWD-2; two commits after the send's own)."""
    sender = ctx.client.get_topic_sender(TOPIC)
    for k in itertools.count():
        batch_messages = _messages(f"new{k}-", BATCH)
        journal.call("send", _ids(batch_messages), lambda: sender.send_messages(batch_messages))


def _failover_send(ctx, journal):
    """A paired sender (PAIR-3..6) whose primary queue refuses sends (SendDisabled, set by the
    trial): its sends fail until half a second of faults has passed, then go to the backlog
    queues; after ENABLE_AFTER sends there the worker enables the queue, and a ping (every
    half second) brings the sender home."""
    from sbdelta import ServiceBusClient
    from sbdelta.exceptions import ServiceBusError
    from sbdelta.management import EntityStatus, ServiceBusAdministrationClient
    from sbdelta.paired import PairedNamespaceOptions

    options = PairedNamespaceOptions(ctx.secondary, backlog_queue_count=BACKLOG_QUEUES,
                                     failover_interval=timedelta(seconds=0.5),
                                     ping_primary_interval=timedelta(seconds=0.5))
    client = ServiceBusClient(ctx.namespace, paired_namespace=options, clock=ctx.clock)
    sender = client.get_queue_sender(QUEUE)
    admin = ServiceBusAdministrationClient(ctx.namespace, clock=ctx.clock)
    parked = 0
    for k in itertools.count():
        batch_messages = _messages(f"new{k}-", BATCH)
        failed_over = sender.failed_over
        out = journal.call("send", _ids(batch_messages),
                           lambda: sender.send_messages(batch_messages), raises=ServiceBusError)
        if isinstance(out, ServiceBusError):
            time.sleep(0.05)  # the caller's retry pause, until failover engages
            continue
        parked += failed_over
        if parked == ENABLE_AFTER:
            journal.call("enable", [], lambda: admin.update_queue(admin.get_queue(QUEUE),
                                                                  status=EntityStatus.ACTIVE))


def _schedule(ctx, journal):
    """Schedules messages an hour ahead; every other one is cancelled again."""
    sender = ctx.client.get_queue_sender(QUEUE)
    at = datetime.now(timezone.utc) + timedelta(hours=1)
    for k in itertools.count():
        message = _messages(f"new{k}-", 1)
        seqs = journal.call("schedule", _ids(message),
                            lambda: sender.schedule_messages(message, at))
        if k % 2:
            journal.call("cancel", _ids(message), lambda: sender.cancel_scheduled_messages(seqs))


def _received(ctx, journal, settle, receiver=None):
    """Receives BATCH messages at a time (PeekLock) and settles them with ``settle``."""
    receiver = receiver or ctx.client.get_queue_receiver(QUEUE, max_wait_time=0)
    while True:
        journal.write("begin", op="receive", ids=[])
        got = receiver.receive_messages(BATCH, max_wait_time=1)
        journal.write("done", op="receive", ids=_ids(got))
        if got:
            settle(receiver, got)


def _settle_all(action, **kwargs):
    def settle(journal, receiver, got):
        journal.call(action, _ids(got), lambda: getattr(receiver, f"{action}_messages")(got,
                                                                                       **kwargs))
    return settle


def _complete_one_by_one(journal, receiver, got):
    for message in got:
        journal.call("complete", [message.message_id],
                     lambda: receiver.complete_message(message))


def _renew_then_complete(journal, receiver, got):
    for message in got:
        journal.call("renew", [message.message_id], lambda: receiver.renew_message_lock(message))
    journal.call("complete", _ids(got), lambda: receiver.complete_messages(got))


def _sessions(ctx, journal):
    """Next-available session receivers (SESS-2): each session's messages completed in
    batches, the receiver closed (its session released) when the session is empty."""
    from sbdelta import NEXT_AVAILABLE_SESSION
    from sbdelta.exceptions import OperationTimeoutError

    while True:
        try:
            receiver = journal.call("lock_session", [], lambda: ctx.client.get_queue_receiver(
                QUEUE, session_id=NEXT_AVAILABLE_SESSION, max_wait_time=1))
        except OperationTimeoutError:
            continue
        while True:
            journal.write("begin", op="receive", ids=[])
            got = receiver.receive_messages(BATCH, max_wait_time=1)
            journal.write("done", op="receive", ids=_ids(got))
            if not got:
                break
            journal.call("complete", _ids(got), lambda: receiver.complete_messages(got))
        journal.call("close_session", [], receiver.close)


def _receive_and_delete(ctx, journal):
    from sbdelta import ServiceBusReceiveMode

    receiver = ctx.client.get_queue_receiver(
        QUEUE, receive_mode=ServiceBusReceiveMode.RECEIVE_AND_DELETE, max_wait_time=0)
    while True:
        journal.write("begin", op="receive_and_delete", ids=[], count=BATCH)
        got = receiver.receive_messages(BATCH, max_wait_time=1)
        journal.write("done", op="receive_and_delete", ids=_ids(got))


def _receive_deferred(ctx, journal):
    """Receives the deferred messages (the trial defers them all first) and completes them."""
    receiver = ctx.client.get_queue_receiver(QUEUE, max_wait_time=0)
    seqs = [m.sequence_number for m in peek_all(receiver)]
    for start in range(0, len(seqs), BATCH):
        got = journal.call("receive", [], lambda: receiver.receive_deferred_messages(
            seqs[start:start + BATCH]))
        journal.call("complete", _ids(got), lambda: receiver.complete_messages(got))
    while True:
        time.sleep(1)


def _send_dataframe(ctx, journal):
    sender = ctx.client.get_queue_sender(QUEUE)
    spark = ctx.client.spark
    for k in itertools.count():
        ids = [f"new{k}-{i}" for i in range(200)]
        df = spark.createDataFrame([(i, i) for i in ids], "body string, message_id string")
        journal.call("send", ids, lambda: sender.send_dataframe(df))


def _receive_dataframe(ctx, journal):
    """PeekLock receives as a DataFrame, completed by that DataFrame (settle by DataFrame)."""
    receiver = ctx.client.get_queue_receiver(QUEUE, max_wait_time=0)
    while True:
        journal.write("begin", op="receive", ids=[])
        df = receiver.receive_dataframe(40)
        ids = [r.message_id for r in df.select("message_id").collect()]
        journal.write("done", op="receive", ids=ids)
        if ids:
            journal.call("complete", ids, lambda: receiver.complete_messages(df))


def _job(ctx, journal, op, run):
    for _ in itertools.count():
        journal.call(op, [], run)


def _expire(ctx, journal):
    from sbdelta.maintenance import expire_messages

    _job(ctx, journal, "expire", lambda: expire_messages(
        ctx.namespace, entities=[QUEUE], clock=ctx.clock, batch_size=25))


def _compact(ctx, journal):
    from sbdelta.maintenance import compact

    _job(ctx, journal, "compact", lambda: compact(ctx.namespace, entities=[QUEUE],
                                                  clock=ctx.clock))


def _delete_idle(ctx, journal):
    from sbdelta.maintenance import delete_idle_entities

    _job(ctx, journal, "delete_idle", lambda: delete_idle_entities(ctx.namespace,
                                                                   clock=ctx.clock))


def _forward(ctx, journal):
    from sbdelta.maintenance import forward_messages

    _job(ctx, journal, "forward", lambda: forward_messages(ctx.namespace, clock=ctx.clock))


def _syphon(ctx, journal):
    from sbdelta.paired.syphon import Syphon

    syphon = Syphon(ctx.namespace, ctx.secondary, clock=ctx.clock)
    _job(ctx, journal, "syphon", syphon.drain)


OPERATIONS = {
    "send": lambda ctx, j: _send(ctx, j, 1),
    "send_batch": lambda ctx, j: _send(ctx, j, BATCH),
    "send_forwarding": _send_forwarding,
    "failover_send": _failover_send,
    "schedule": _schedule,
    "peek_lock": lambda ctx, j: _received(ctx, j, lambda receiver, got: None),
    "complete": lambda ctx, j: _received(ctx, j, lambda r, g: _settle_all("complete")(j, r, g)),
    "complete_one": lambda ctx, j: _received(ctx, j, lambda r, g: _complete_one_by_one(j, r, g)),
    "abandon": lambda ctx, j: _received(ctx, j, lambda r, g: _settle_all("abandon")(j, r, g)),
    "defer": lambda ctx, j: _received(ctx, j, lambda r, g: _settle_all("defer")(j, r, g)),
    "dead_letter": lambda ctx, j: _received(
        ctx, j, lambda r, g: _settle_all("dead_letter", reason="crash trial")(j, r, g)),
    "renew": lambda ctx, j: _received(ctx, j, lambda r, g: _renew_then_complete(j, r, g)),
    "receive_and_delete": _receive_and_delete,
    "receive_scheduled": lambda ctx, j: _received(  # scheduled messages released (SCHED-1)
        ctx, j, lambda r, g: _settle_all("complete")(j, r, g)),
    "subscription_complete": lambda ctx, j: _received(
        ctx, j, lambda r, g: _settle_all("complete")(j, r, g),
        ctx.client.get_subscription_receiver(TOPIC, SUBSCRIPTION, max_wait_time=0)),
    "session_complete": _sessions,
    "receive_deferred": _receive_deferred,
    "send_dataframe": _send_dataframe,
    "receive_dataframe": _receive_dataframe,
    "expire": _expire,
    "compact": _compact,
    "delete_idle": _delete_idle,
    "forward": _forward,
    "syphon": _syphon,
}

#: Operations that run Spark whatever the engine (subscription receive plans, DataFrame forms
#: and batch jobs).
SPARK_OPERATIONS = {"subscription_complete", "send_dataframe",
                    "receive_dataframe", "expire", "compact", "delete_idle", "forward", "syphon",
                    "send_forwarding"}


class Context:
    def __init__(self, op, namespace, secondary):
        from sbdelta import ManualClock, ServiceBusClient, SystemClock

        later = float(os.environ.get("SBDELTA_TEST_LATER", "0"))
        self.clock = (ManualClock(datetime.now(timezone.utc) + timedelta(seconds=later))
                      if later else SystemClock())
        self.namespace, self.secondary = namespace, secondary
        self.client = ServiceBusClient(namespace, clock=self.clock)
        if op in SPARK_OPERATIONS or os.environ.get("SBDELTA_ENGINE") == "spark":
            self.client.spark  # noqa: B018 - start the JVM before "ready"


def main(argv):
    op, namespace, journal_path = argv[:3]
    secondary = argv[3] if len(argv) > 3 else None
    ctx = Context(op, namespace, secondary)
    journal = Journal(journal_path)
    journal.write("ready", pid=os.getpid())
    OPERATIONS[op](ctx, journal)


if __name__ == "__main__":
    main(sys.argv[1:])
