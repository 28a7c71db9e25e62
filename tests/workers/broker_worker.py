"""A separate process that sends or receives on a queue, logging what it did as JSON lines.

Used by the multi-process stress and crash tests. Every log line is flushed (and fsynced) as
soon as it is written, so a kill -9 loses at most the line being written.

    python -m tests.workers.broker_worker send <namespace> <queue> <log> <count> <batch>
    python -m tests.workers.broker_worker receive <namespace> <queue> <log> <stop_after> <batch>
    python -m tests.workers.broker_worker chaos <namespace> <queue> <log> <batch>
    python -m tests.workers.broker_worker maintain <namespace> <queue> <log>
        (runs the expiry sweep and compaction in turn until <log>.stop exists)
"""

import json
import os
import sys
import time


def _log(handle, **record):
    handle.write(json.dumps(record) + "\n")
    handle.flush()
    os.fsync(handle.fileno())


def main(argv):
    mode, namespace, queue, log_path = argv[:4]
    from sbdelta import ServiceBusClient, ServiceBusMessage
    from sbdelta.exceptions import MessageLockLostError

    client = ServiceBusClient(namespace)
    clock = client._ns.clock
    with open(log_path, "a") as log:
        _log(log, event="ready", pid=os.getpid())
        if mode == "send":
            count, batch = int(argv[4]), int(argv[5])
            sender = client.get_queue_sender(queue)
            for start in range(0, count, batch):
                ids = [f"m{i}" for i in range(start, min(count, start + batch))]
                sender.send_messages([ServiceBusMessage(i, message_id=i) for i in ids])
                _log(log, event="sent", ids=ids)
            return
        if mode == "maintain":
            from sbdelta.maintenance import compact, expire_messages

            rounds = 0
            while not os.path.exists(log_path + ".stop"):
                expired = expire_messages(namespace, entities=[queue])
                compacted = compact(namespace, entities=[queue])
                rounds += 1
                _log(log, event="maintained", round=rounds, expired=expired.totals(),
                     compacted=compacted.totals())
            return
        receiver = client.get_queue_receiver(queue)
        lock = client._entities.queue(queue).properties.lock_duration.total_seconds()
        if mode == "receive":
            stop_after, batch = float(argv[4]), int(argv[5])
            deadline = time.monotonic() + stop_after
            while time.monotonic() < deadline:
                got = receiver.receive_messages(batch)
                for m in got:
                    until = m.locked_until_utc.timestamp()
                    _log(log, event="locked", seq=m.sequence_number, id=m.message_id,
                         token=m.lock_token, start=until - lock, until=until)
                if not got:
                    if os.path.exists(log_path + ".stop"):
                        return
                    time.sleep(0.2)
                    continue
                try:
                    receiver.complete_messages(got)
                    done = clock.now().timestamp()
                    for m in got:
                        _log(log, event="completed", seq=m.sequence_number, token=m.lock_token,
                             at=done)
                except MessageLockLostError as exc:
                    _log(log, event="lock_lost", error=str(exc))
            return
        if mode == "chaos":
            batch = int(argv[4])
            while True:
                got = receiver.receive_messages(batch)
                if not got:
                    time.sleep(0.2)
                    continue
                third = max(1, len(got) // 3)
                complete, dead, abandon = got[:third], got[third:2 * third], got[2 * third:]
                _log(log, event="completing", seqs=[m.sequence_number for m in complete])
                receiver.complete_messages(complete)
                _log(log, event="completed", seqs=[m.sequence_number for m in complete])
                _log(log, event="dead_lettering", seqs=[m.sequence_number for m in dead])
                receiver.dead_letter_messages(dead, reason="chaos")
                _log(log, event="dead_lettered", seqs=[m.sequence_number for m in dead])
                if abandon:
                    receiver.abandon_messages(abandon)


if __name__ == "__main__":
    main(sys.argv[1:])
