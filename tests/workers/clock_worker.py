"""A host with its own clock, in a process of its own: the multi-process clock-skew test.

    python -m tests.workers.clock_worker <namespace> <queue> <offset s> <tolerance s> <dir> <name>

Its clock reads the test's true time from ``<dir>/time`` (an ISO timestamp the test moves)
and adds ``<offset s>``; its ``skew_tolerance`` is ``<tolerance s>``. For each step the test
opens (``<dir>/step-<n>``, holding the names of the workers that act in it, or "stop") it
receives up to 5 messages in PeekLock
and settles none, logs each one it got (sequence number, and the true times of the grant and
of the lock's end as its holder sees it) to ``<dir>/<name>.log``, then writes
``<dir>/ack-<name>-<n>``. Runs on delta-rs (no JVM).
"""

import json
import os
import sys
import time
from datetime import datetime, timedelta


class FileClock:
    """The test's true time plus this host's offset (a simulated clock: never compared with
    the storage's)."""

    def __init__(self, path: str, offset: timedelta, tolerance: timedelta):
        self.path, self.offset, self.skew_tolerance = path, offset, tolerance

    def true_now(self) -> datetime:
        with open(self.path) as handle:
            return datetime.fromisoformat(handle.read().strip())

    def now(self) -> datetime:
        return self.true_now() + self.offset


def main(argv):
    namespace, queue, offset, tolerance, folder, name = argv
    from sbdelta import ServiceBusClient

    clock = FileClock(os.path.join(folder, "time"), timedelta(seconds=float(offset)),
                      timedelta(seconds=float(tolerance)))
    step = 0
    with ServiceBusClient(namespace, clock=clock, engine="delta-rs") as client, \
            open(os.path.join(folder, f"{name}.log"), "a") as log:
        receiver = client.get_queue_receiver(queue, max_wait_time=0)
        while True:
            path = os.path.join(folder, f"step-{step}")
            while not os.path.exists(path):
                time.sleep(0.01)
            with open(path) as handle:
                who = handle.read().strip()
            if who == "stop":
                return 0
            at = clock.true_now()
            for m in (receiver.receive_messages(5) if name in who.split(",") else []):
                log.write(json.dumps({
                    "step": step, "seq": m.sequence_number, "holder": name,
                    "granted": at.isoformat(),
                    "ends": (m.locked_until_utc - clock.offset).isoformat()}) + "\n")
            log.flush()
            open(os.path.join(folder, f"ack-{name}-{step}"), "w").close()
            step += 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
