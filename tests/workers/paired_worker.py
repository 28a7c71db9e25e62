"""A paired sender in a process of its own, for the paired-namespace multi-process test.

    python -m tests.workers.paired_worker <primary> <secondary> <queue> <log> <count>

Sends messages ``m0``..``m<count-1>`` one per send through a client paired with
``<secondary>`` (failover after 2 s of faults, pings every 2 s), each with the application
property ``n`` and a time to live of one day. A send that raises (before failover engages) is
tried again. Logs JSON lines: ``sent`` (with ``via``: where the client sends now) and
``send_failed``, flushed and fsynced as written.
"""

import json
import os
import sys
import time
from datetime import timedelta


def _log(handle, **record):
    handle.write(json.dumps(record) + "\n")
    handle.flush()
    os.fsync(handle.fileno())


def main(argv):
    primary, secondary, queue, log_path, count = argv[0], argv[1], argv[2], argv[3], int(argv[4])
    from sbdelta import ServiceBusClient, ServiceBusMessage
    from sbdelta.paired import PairedNamespaceOptions

    options = PairedNamespaceOptions(secondary, backlog_queue_count=2,
                                     failover_interval=timedelta(seconds=2),
                                     ping_primary_interval=timedelta(seconds=2))
    with ServiceBusClient(primary, paired_namespace=options) as client, \
            open(log_path, "a") as log:
        _log(log, event="ready", pid=os.getpid())
        sender = client.get_queue_sender(queue)
        for n in range(count):
            message = ServiceBusMessage(f"m{n}", message_id=f"m{n}",
                                        application_properties={"n": n},
                                        time_to_live=timedelta(days=1))
            while True:
                try:
                    sender.send_messages(message)
                    break
                except Exception as exc:  # noqa: BLE001 - logged; tried again
                    _log(log, event="send_failed", n=n, error=type(exc).__name__)
                    time.sleep(0.2)
            _log(log, event="sent", n=n, via="backlog" if sender.failed_over else "primary")
            if n + 1 == count // 3:
                # A third went out during the outage: wait for the test to end it, then send
                # the rest slowly enough for the pings to find the primary back (a sender
                # without a JVM would otherwise be done before the recovery lands).
                while not os.path.exists(log_path + ".resume"):
                    time.sleep(0.1)
            time.sleep(0.5 if n + 1 >= count // 3 else 0.1)


if __name__ == "__main__":
    main(sys.argv[1:])
