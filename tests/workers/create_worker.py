"""Create one queue when every peer is ready; print CREATED or EXISTS (multi-process create test).

    python -m tests.workers.create_worker <namespace> <queue> <barrier_dir> <peers>

Each worker warms up its Spark session, marks itself ready in <barrier_dir>, and waits until
<peers> workers are ready, so that all of them create the queue at the same instant.
"""

import os
import sys
import time
from pathlib import Path


def main(namespace, queue, barrier, peers):
    from sbdelta.exceptions import MessagingEntityAlreadyExistsError
    from sbdelta.management import ServiceBusAdministrationClient

    admin = ServiceBusAdministrationClient(namespace)
    admin.list_queues()  # warm up the session before the common start
    Path(barrier, f"ready-{os.getpid()}").touch()
    deadline = time.monotonic() + 600
    while len(list(Path(barrier).glob("ready-*"))) < int(peers):
        if time.monotonic() > deadline:
            sys.exit("the other workers never became ready")
        time.sleep(0.01)
    try:
        admin.create_queue(queue, enable_partitioning=True)
        print("CREATED", flush=True)
    except MessagingEntityAlreadyExistsError:
        print("EXISTS", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
