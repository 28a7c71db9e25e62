"""A receiver in a process of its own whose settlement commit the storage-fault test hangs.

    python -m tests.workers.hang_worker <namespace> <queue> <dir>

Its clock reads the test's time from ``<dir>/time`` (a simulated clock, as in
:mod:`tests.workers.clock_worker`). It receives one message in PeekLock and writes
``<dir>/got`` (JSON: sequence number, body, delivery count, lock end), waits for
``<dir>/go``, then completes the message and writes ``<dir>/result`` (JSON: ``completed``, or
the error's class and message), then sends ``<dir>/after``'s text as a message to show that
it works again, and writes ``<dir>/done``. Runs on delta-rs (no JVM): its commits are hard
links of ``_delta_log/<version>.json#1`` to ``<version>.json``, the system call the test holds.
"""

import json
import os
import sys
import time
from datetime import timedelta

from tests.workers.clock_worker import FileClock


def _wait_for(path: str) -> str:
    while not os.path.exists(path):
        time.sleep(0.01)
    with open(path) as handle:
        return handle.read().strip()


def _write(path: str, record: dict) -> None:
    with open(path + ".tmp", "w") as handle:
        json.dump(record, handle)
    os.replace(path + ".tmp", path)


def main(argv):
    namespace, queue, folder = argv
    from sbdelta import ServiceBusClient, ServiceBusMessage

    clock = FileClock(os.path.join(folder, "time"), timedelta(0), timedelta(seconds=1))
    with ServiceBusClient(namespace, clock=clock, engine="delta-rs") as client:
        receiver = client.get_queue_receiver(queue, max_wait_time=0)
        got = receiver.receive_messages(1)
        _write(os.path.join(folder, "got"), {
            "seq": [m.sequence_number for m in got], "body": [str(m) for m in got],
            "delivery_count": [m.delivery_count for m in got],
            "locked_until": [m.locked_until_utc.isoformat() for m in got],
            "pid": os.getpid()})
        _wait_for(os.path.join(folder, "go"))
        try:
            receiver.complete_message(got[0])
            result = {"outcome": "completed"}
        except Exception as exc:  # noqa: BLE001 - reported to the test
            result = {"outcome": type(exc).__name__, "message": str(exc)}
        _write(os.path.join(folder, "result"), result)
        client.get_queue_sender(queue).send_messages(
            ServiceBusMessage(_wait_for(os.path.join(folder, "after"))))
        _write(os.path.join(folder, "done"), {})
    return 0


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main(sys.argv[1:]))  # delta-rs's runtime threads and interpreter finalization
