"""One process of the sessions benchmark's loop (bench/sessions.py): takes next-available
sessions (or, for the baseline, batches of a queue) until none is left.

    python -m bench.session_worker sessions|queue <namespace> <entity> <log> <go file> <batch>

It uses the default engine (delta-rs on a local namespace: no JVM), warms up, touches
``<log>.ready``, waits for the go file, and writes one JSON line per hold (a session's, or a
queue batch's): ``session``, ``start`` and ``end`` (wall clock, while it held the session)
and the ids of the messages it completed.
"""

import json
import os
import sys
import time


def main(argv):
    kind, namespace, entity, log_path, go, batch = argv[:5] + [int(argv[5])]
    from sbdelta import NEXT_AVAILABLE_SESSION, ServiceBusClient
    from sbdelta.exceptions import OperationTimeoutError
    from sbdelta.management import ServiceBusAdministrationClient

    client = ServiceBusClient(namespace)
    admin = ServiceBusAdministrationClient(namespace)
    admin.get_queue_runtime_properties(entity)  # warm: the tables are open, the engine loaded
    if kind == "sessions":
        admin.list_sessions(entity)
    open(log_path + ".ready", "w").close()
    while not os.path.exists(go):
        time.sleep(0.01)
    queue_receiver = client.get_queue_receiver(entity, max_wait_time=0) if kind == "queue" else None
    with open(log_path, "a") as log:
        while True:
            if queue_receiver is not None:
                start = time.time()
                got = queue_receiver.receive_messages(batch)
                if not got:
                    break
                queue_receiver.complete_messages(got)
                done, session = [m.message_id for m in got], None
            else:
                receiver = client.get_queue_receiver(entity, session_id=NEXT_AVAILABLE_SESSION,
                                                     max_wait_time=0)
                try:
                    got = receiver.receive_messages(batch)
                except OperationTimeoutError:
                    break  # no free session has messages left
                start, done, session = time.time(), [], receiver.session.session_id
                while got:
                    receiver.complete_messages(got)
                    done += [m.message_id for m in got]
                    got = receiver.receive_messages(batch)
                receiver.close()
            log.write(json.dumps({"session": session, "start": start, "end": time.time(),
                                  "messages": done}) + "\n")
    client.close()


if __name__ == "__main__":
    main(sys.argv[1:])
