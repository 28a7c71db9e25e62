"""A session consumer process (SESS-2/3 across processes): takes the next available session,
completes at most two batches of it in order, gives it up, and again, until no session comes
for three rounds.

Usage: python -m tests.workers.session_worker NS QUEUE LOG GO_FILE
(or :func:`main` in a thread of a process with a Spark session).
Prints ``ready`` once its client has read the queue (its engine warm: ``$SBDELTA_ENGINE``),
waits for GO_FILE, prints ``holding <session>`` as it takes a session, and writes one JSON
line per session hold to LOG: the session, when this
process began and stopped acting as its holder (wall clock; a hold whose lock ran out under a
slow call ends when the lock ended), the (sequence number, message id) pairs it completed, in
order, and whether it lost the lock.
"""

import json
import os
import sys
import time

from sbdelta import NEXT_AVAILABLE_SESSION, ServiceBusClient
from sbdelta.exceptions import OperationTimeoutError, SessionLockLostError
from sbdelta.management import ServiceBusAdministrationClient

BATCH = 5
BATCHES_PER_HOLD = 2  # then the session goes back: holders change within a session


def main(argv=None, *, spark=None, engine=None, say=None) -> None:
    """The worker; ``spark`` and ``engine``: the client's (default: its own session, and
    ``$SBDELTA_ENGINE``); ``say``: where ``ready`` and ``holding`` go (default: stdout)."""
    ns, queue, log, go = (argv or sys.argv[1:])[:4]
    say = say or (lambda text: print(text, flush=True))
    options = {"spark": spark} if engine is None else {"spark": spark, "engine": engine}
    client = ServiceBusClient(ns, **options)
    admin = ServiceBusAdministrationClient(ns, **options)
    admin.get_queue_runtime_properties(queue)  # warm: a count, and the session queries
    admin.list_sessions(queue)
    say("ready")
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
            except SessionLockLostError:
                receiver.close()  # its lock ran out before the receive committed: held nothing
                continue
            idle = 0
            start = time.time()  # from here this process acts as the session's holder
            session, done, lost = receiver.session.session_id, [], False
            say(f"holding {session}")
            try:
                for batch in range(BATCHES_PER_HOLD):
                    if batch:
                        got = receiver.receive_messages(BATCH, max_wait_time=0)
                    if not got:
                        break
                    receiver.complete_messages(got)
                    done += [(m.sequence_number, m.message_id) for m in got]
                end = time.time()  # ... to here: then it gives the session up
            except SessionLockLostError:
                # A slow call outlived the session lock (SESS-4): this process stopped being
                # the holder when the lock ended; what it did not complete goes to the next.
                end, lost = min(time.time(),
                                receiver.session.locked_until_utc.timestamp()), True
            receiver.close()
            out.write(json.dumps({"session": session, "start": start, "end": end,
                                  "messages": done, "lost": lost}) + "\n")
            out.flush()
    client.close()


if __name__ == "__main__":
    main()
