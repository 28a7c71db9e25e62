"""Create one queue at a given instant; print CREATED or EXISTS (multi-process create test).

    python -m tests.workers.create_worker <namespace> <queue> <start_at_epoch_seconds>
"""

import sys
import time


def main(namespace, queue, start_at):
    from sbdelta.exceptions import MessagingEntityAlreadyExistsError
    from sbdelta.management import ServiceBusAdministrationClient

    admin = ServiceBusAdministrationClient(namespace)
    admin.list_queues()  # warm up the session before the common start
    time.sleep(max(0.0, float(start_at) - time.time()))
    try:
        admin.create_queue(queue, enable_partitioning=True)
        print("CREATED", flush=True)
    except MessagingEntityAlreadyExistsError:
        print("EXISTS", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
