"""The load run of issue 18: a documented command, not part of the suite.

    .venv/bin/python -m tests.multiprocess.load --messages 100000 [--parked 10000] [--dir DIR]

On a partitioned queue, at once and each in its own process: one sender (100 messages per
send), two receivers (PeekLock, up to 100 per receive, each batch completed in one call), a
maintenance process looping the expiry sweep, the forwarding job and compaction, and the syphon
(``jobs/syphon.py --follow``) moving ``--parked`` messages from a backlog queue in a secondary
namespace to the queue. Senders and receivers run on the default engine (delta-rs on a local
namespace), the maintenance jobs and the syphon on Spark. Then the checks: every message sent
or parked completed exactly once, no sequence number shared, no message held by two valid
locks at once, nothing left in the queue or the backlog queue. Prints the figures (JSON):
messages, seconds, messages per second, commit conflicts per receive, maintenance rounds.
Exit status 0 when every check held.
"""

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from datetime import timedelta

from .checks import check_every_message_once, read_log

QUEUE = "load"


def _park(primary, secondary, count):
    from sbdelta import ServiceBusClient, ServiceBusMessage
    from sbdelta._namespace import normalize_root
    from sbdelta.management import ServiceBusAdministrationClient
    from sbdelta.paired import (BACKLOG_QUEUE_PROPERTIES, backlog_queue_name, primary_identity,
                                to_backlog)

    backlog = backlog_queue_name(primary_identity(normalize_root(primary)), 0)
    ServiceBusAdministrationClient(secondary).create_queue(backlog, **BACKLOG_QUEUE_PROPERTIES)
    ids = [f"parked-{i}" for i in range(count)]
    with ServiceBusClient(secondary) as away:
        sender = away.get_queue_sender(backlog)
        for start in range(0, count, 500):
            sender.send_messages([to_backlog(ServiceBusMessage(i, message_id=i), QUEUE)
                                  for i in ids[start:start + 500]])
    return backlog, ids


def run(messages: int, parked: int, directory: str) -> dict:
    from sbdelta import ServiceBusClient
    from sbdelta.management import ServiceBusAdministrationClient

    from ..conftest import output_tail, run_logged

    primary, secondary = os.path.join(directory, "ns"), os.path.join(directory, "secondary")
    ServiceBusAdministrationClient(primary).create_queue(
        QUEUE, enable_partitioning=True, lock_duration=timedelta(minutes=5))
    backlog, parked_ids = _park(primary, secondary, parked)
    logs = {name: os.path.join(directory, f"{name}.log")
            for name in ("sender", "r1", "r2", "maintain")}
    quiet = {"SBDELTA_TEST_NO_FSYNC": "1"}
    started = time.monotonic()
    procs = {"sender": run_logged(logs["sender"] + ".out", "-m", "tests.workers.broker_worker",
                                  "send", primary, QUEUE, logs["sender"], str(messages), "100",
                                  env=quiet)}
    for name in ("r1", "r2"):
        procs[name] = run_logged(logs[name] + ".out", "-m", "tests.workers.broker_worker",
                                 "receive", primary, QUEUE, logs[name], "86400", "100", env=quiet)
    procs["maintain"] = run_logged(logs["maintain"] + ".out", "-m",
                                   "tests.workers.broker_worker", "maintain", primary, QUEUE,
                                   logs["maintain"])
    procs["syphon"] = run_logged(os.path.join(directory, "syphon.out"), "-m", "jobs.syphon",
                                 "--namespace", primary, "--secondary", secondary, "--follow",
                                 "--poll-seconds", "2")
    total = messages + parked
    try:
        while True:
            done = sum(1 for name in ("r1", "r2") for r in read_log(logs[name])
                       if r["event"] == "completed")
            dead = [n for n, p in procs.items() if p.poll() is not None and n != "sender"]
            assert not dead, f"{dead[0]} stopped:\n{output_tail(procs[dead[0]])}"
            if done >= total:
                break
            time.sleep(5)
        elapsed = time.monotonic() - started
        for name in ("r1", "r2", "maintain"):
            open(logs[name] + ".stop", "w").close()
        procs["syphon"].send_signal(signal.SIGTERM)
        for proc in procs.values():
            proc.wait(timeout=600)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
    for name, proc in procs.items():
        assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{output_tail(proc)}"

    records = read_log(logs["r1"]) + read_log(logs["r2"])
    assert not [r for r in records if r["event"] == "lock_lost"], "a receiver lost a lock"
    sent = [i for r in read_log(logs["sender"]) if r["event"] == "sent" for i in r["ids"]]
    assert len(sent) == messages, f"{len(sent)} of {messages} sends acknowledged"
    check_every_message_once(records, QUEUE, sent + parked_ids)
    with ServiceBusClient(primary) as client:
        assert client.get_queue_receiver(QUEUE).peek_messages(10) == [], "left in the queue"
    with ServiceBusClient(secondary) as away:
        assert away.get_queue_receiver(backlog).peek_messages(10) == [], "left in the backlog"
    receives = [r for r in records if r["event"] == "received"]
    rounds = [r for r in read_log(logs["maintain"]) if r["event"] == "maintained"]
    return {"messages": total, "sent": messages, "parked": parked,
            "seconds": round(elapsed, 1), "messages_per_second": round(total / elapsed, 1),
            "receives": len(receives),
            "conflicts": sum(r["conflicts"] for r in receives),
            "conflicts_per_receive": round(sum(r["conflicts"] for r in receives)
                                           / max(1, len(receives)), 4),
            "stale_plans": sum(r["stale"] for r in receives),
            "maintenance_rounds": len(rounds),
            "inbox_rows_purged": sum(r["compacted"]["inbox_rows_purged"] for r in rounds),
            "lost": 0, "completed_twice": 0, "double_valid_locks": 0, "repeated_seq": 0}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100000)
    parser.add_argument("--parked", type=int, default=10000)
    parser.add_argument("--dir", help="working folder (default: a new temporary one, removed "
                                      "after a run that held)")
    args = parser.parse_args(argv)
    directory = args.dir or tempfile.mkdtemp(prefix="sbdelta-load-")
    figures = run(args.messages, args.parked, directory)
    print(json.dumps(figures, indent=1))
    if not args.dir:
        shutil.rmtree(directory, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
