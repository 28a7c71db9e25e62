"""A session consumer process (SESS-2/3 across processes): takes the next available session,
completes at most two batches of it in order, gives it up, and again, until no session comes
for three rounds.

Usage: python -m tests.workers.session_worker NS QUEUE LOG GO_FILE
Prints ``ready`` once its client has read the queue (its engine warm: ``$SBDELTA_ENGINE``),
waits for GO_FILE, prints ``holding <session>`` as it takes a session, and writes one JSON
line per session hold to LOG: the session, when this
process began and stopped acting as its holder (wall clock), and the (sequence number,
message id) pairs it completed, in order.
"""

import json
import os
import sys
import time

from sbdelta import NEXT_AVAILABLE_SESSION, ServiceBusClient
from sbdelta.exceptions import OperationTimeoutError
from sbdelta.management import ServiceBusAdministrationClient

BATCH = 5
BATCHES_PER_HOLD = 2  # then the session goes back: holders change within a session


def main() -> None:
    ns, queue, log, go = sys.argv[1:5]
    client = ServiceBusClient(ns)
    ServiceBusAdministrationClient(ns).get_queue_runtime_properties(queue)  # warm: a count
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.02)
    idle = 0
    with open(log, "a") as out:
        while idle < 3:
            receiver = client.get_queue_receiver(queue, session_id=NEXT_AVAILABLE_SESSION,
                                                 max_wait_time=1)
            try:  # the first receive takes the next available session
                got = receiver.receive_messages(BATCH)
            except OperationTimeoutError:
                idle += 1
                receiver.close()
                continue
            idle = 0
            start = time.time()  # from here this process acts as the session's holder
            session, done = receiver.session.session_id, []
            print(f"holding {session}", flush=True)
            for batch in range(BATCHES_PER_HOLD):
                if batch:
                    got = receiver.receive_messages(BATCH, max_wait_time=0)
                if not got:
                    break
                receiver.complete_messages(got)
                done += [(m.sequence_number, m.message_id) for m in got]
            end = time.time()  # ... to here: then it gives the session up
            receiver.close()
            out.write(json.dumps({"session": session, "start": start, "end": end,
                                  "messages": done}) + "\n")
            out.flush()
    client.close()


if __name__ == "__main__":
    main()
