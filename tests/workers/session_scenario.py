"""One session scenario (SESS-2/3/5/6) run by either engine (issue 16).

``python -m tests.workers.session_scenario NS`` runs it under ``engine="delta-rs"`` in a
process that must start no JVM and prints one JSON line; :func:`run` runs it in the test
process under any engine (the Spark path, as on a cloud namespace).
"""

import json
import sys
from datetime import timedelta

from sbdelta import NEXT_AVAILABLE_SESSION, ServiceBusClient, ServiceBusMessage
from sbdelta.management import ServiceBusAdministrationClient


#: What :func:`run` reports, whichever engine runs it: b keeps its state; a has nothing left.
EXPECTED = {"oldest": "b", "got": ["b0", "b1", "b2"], "state": "seen", "back": [["b2", 2]],
            "other": "a", "rest": ["a0", "a1"], "listed": ["b"]}


def prepare(admin: ServiceBusAdministrationClient) -> None:
    """Queue ``s``, requiring sessions, with locks of five minutes: the scenario sets the
    state and settles after a receive on the real clock, and a first Spark receive in a
    fresh process (over Spark Connect on a slow day: more than 30 s) must not outlast the
    session lock (with the default 30 s it did, and ``set_state`` raised SessionLockLostError)."""
    admin.create_queue("s", requires_session=True, lock_duration=timedelta(minutes=5))


def run(ns: str, engine: str, spark=None) -> dict:
    """Two sessions on queue ``s``: b's messages first, then a's. Next available takes b (the
    oldest message), sets its state, completes two, abandons one; b taken by name gets it back
    (delivery 2); next available then takes a; the listing shows b (state kept)."""
    with ServiceBusClient(ns, engine=engine, spark=spark) as client:
        sender = client.get_queue_sender("s")
        sender.send_messages([ServiceBusMessage(f"b{i}", session_id="b") for i in range(3)])
        sender.send_messages([ServiceBusMessage(f"a{i}", session_id="a") for i in range(2)])
        with client.get_queue_receiver("s", session_id=NEXT_AVAILABLE_SESSION,
                                       max_wait_time=0) as first:
            oldest = first.session.session_id
            got = first.receive_messages(10)
            first.session.set_state(b"seen")
            first.session.renew_lock()
            first.complete_messages(got[:2])
            first.abandon_message(got[2])
        with client.get_queue_receiver("s", session_id="b", max_wait_time=0) as again:
            state = again.session.get_state()
            back = again.receive_messages(10)
            again.complete_message(back[0])
        with client.get_queue_receiver("s", session_id=NEXT_AVAILABLE_SESSION,
                                       max_wait_time=0) as second:
            other = second.session.session_id
            rest = second.receive_messages(10)
            second.complete_messages(rest)
        listed = ServiceBusAdministrationClient(ns, engine=engine,
                                                spark=spark).list_sessions("s")
    return {"oldest": oldest, "got": [str(m) for m in got], "state": state.decode(),
            "back": [[str(m), m.delivery_count] for m in back], "other": other,
            "rest": [str(m) for m in rest], "listed": listed}


if __name__ == "__main__":
    from pyspark import SparkContext

    report = run(sys.argv[1], "delta-rs")
    print(json.dumps({**report, "jvm": SparkContext._gateway is not None}))
