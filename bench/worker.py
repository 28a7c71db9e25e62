"""One contention process (workload 7): a sender or a PeekLock receiver, for a fixed time.

    python -m bench.worker send|receive <namespace> <queue> <log> <go file> <seconds> <batch> \
        <warm-up queue> [<prefetch_count>]

Each process has its own Spark driver (the default local session). It warms up (one batch of
the same operations on the warm-up queue, the measured queue itself in the harness, so JIT,
tables and caches are hot before the clock starts; warm-up operations are not logged), logs
``ready``, waits for the go file (which holds the start time, epoch seconds), works until start +
seconds, and logs JSON lines: what it locked (token, lock interval), completed (and when), and
the Delta commit conflicts and stale plans that sbdelta's retry loop met during each receive.
"""

import json
import os
import sys
import time


def _log(handle, **record):
    handle.write(json.dumps(record) + "\n")
    handle.flush()


def main(argv):
    role, namespace, queue, log_path, go_file = argv[:5]
    seconds, batch, warm = float(argv[5]), int(argv[6]), argv[7]
    prefetch = int(argv[8]) if len(argv) > 8 else 0
    from sbdelta import ServiceBusClient, ServiceBusMessage
    from sbdelta._store.delta import retry_counts
    from sbdelta.exceptions import MessageLockLostError

    from .measure import KB, body_bytes

    client = ServiceBusClient(namespace)
    with open(log_path, "a") as log:
        if role == "send":
            bodies = [body_bytes(i, KB) for i in range(batch)]
            client.get_queue_sender(warm).send_messages([ServiceBusMessage(b) for b in bodies])
            sender = client.get_queue_sender(queue)
        else:
            warm_receiver = client.get_queue_receiver(warm, max_wait_time=0)
            warm_got = warm_receiver.receive_messages(batch)
            try:
                warm_receiver.complete_messages(warm_got)
            except MessageLockLostError as exc:
                # Seen once, in tiny mode on a machine also running the test suite (a receive
                # and its completion starved for minutes): the messages come back when their
                # lock ends, like any lost lock. Not a measured operation: log it and go on.
                _log(log, event="warm_up_lock_lost", error=str(exc),
                     locked_until=[m.locked_until_utc.timestamp() for m in warm_got],
                     at=time.time())
            receiver = client.get_queue_receiver(queue, max_wait_time=0,
                                                 prefetch_count=prefetch)
            lock = client._entities.queue(queue).properties.lock_duration.total_seconds()
        _log(log, event="ready", pid=os.getpid())
        while not os.path.exists(go_file):
            time.sleep(0.05)
        time.sleep(0.05)
        with open(go_file) as handle:
            start = float(handle.read())
        while time.time() < start:
            time.sleep(0.01)
        deadline = start + seconds
        sent = 0
        while time.time() < deadline:
            if role == "send":
                sender.send_messages([ServiceBusMessage(b) for b in bodies])
                sent += batch
                _log(log, event="sent", count=batch, at=time.time())
                continue
            before = dict(retry_counts)
            got = receiver.receive_messages(batch)
            _log(log, event="receive", got=len(got),
                 conflicts=retry_counts["conflict"] - before["conflict"],
                 stale=retry_counts["stale"] - before["stale"], at=time.time())
            for m in got:
                until = m.locked_until_utc.timestamp()
                _log(log, event="locked", seq=m.sequence_number, token=m.lock_token,
                     start=until - lock, until=until)
            if not got:
                time.sleep(0.2)
                continue
            before = dict(retry_counts)
            try:
                receiver.complete_messages(got)
            except MessageLockLostError as exc:
                _log(log, event="lock_lost", error=str(exc))
                continue
            done = time.time()
            _log(log, event="completed", seqs=[m.sequence_number for m in got],
                 conflicts=retry_counts["conflict"] - before["conflict"],
                 stale=retry_counts["stale"] - before["stale"], at=done)
        _log(log, event="done", sent=sent, totals=dict(retry_counts))


if __name__ == "__main__":
    main(sys.argv[1:])
