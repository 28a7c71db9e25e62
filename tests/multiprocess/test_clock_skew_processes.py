"""RECV-3 across processes whose clocks differ (issue 18; docs/ARCHITECTURE.md "Whose clock
decides").

Two worker processes (tests/workers/clock_worker.py, delta-rs, no JVM) receive from one queue
in PeekLock and settle nothing, so every lock runs out and is taken again. One host's clock
runs 25 s behind true time, the other's 25 s ahead (50 s apart); time is a file the test moves
in 5 s steps, each worker receiving once per step. Each grant is logged with its true time and
the true time its holder stops believing in it. With a 30 s ``skew_tolerance`` (a grace of
60 s) no grant of a message comes before its previous holder's lock has ended; with none, the
host ahead takes locks 50 s before their holder lets go (the failure the tolerance prevents).
"""

import json
import os
from datetime import datetime, timedelta

import pytest

from sbdelta import ManualClock, ServiceBusClient, ServiceBusMessage
from sbdelta.management import ServiceBusAdministrationClient

from ..conftest import START, output_tail, run_logged

STEPS = 60  # 300 s of true time: every lock (60 s) runs out and is retaken


def _set_time(folder, moment):
    tmp = os.path.join(folder, "time.tmp")
    with open(tmp, "w") as handle:
        handle.write(moment.isoformat())
    os.replace(tmp, os.path.join(folder, "time"))


def _wait(procs, paths, seconds=120):
    import time

    deadline = time.monotonic() + seconds
    while not all(os.path.exists(p) for p in paths):
        for proc in procs:
            assert proc.poll() is None, output_tail(proc)
        assert time.monotonic() < deadline, f"workers did not acknowledge {paths}"
        time.sleep(0.01)


@pytest.mark.parametrize("tolerance, overlaps", [(30, False), (0, True)],
                         ids=["tolerance-30s", "no-tolerance"])
def test_recv_3_processes_25_s_behind_and_ahead_never_both_hold_one_lock(
        spark, tmp_path, tolerance, overlaps):
    ns, folder = str(tmp_path / "ns"), str(tmp_path / "control")
    os.makedirs(folder)
    ServiceBusAdministrationClient(ns, spark=spark, clock=ManualClock(START)).create_queue(
        "q", lock_duration=timedelta(seconds=60))
    with ServiceBusClient(ns, spark=spark, clock=ManualClock(START)) as client:
        client.get_queue_sender("q").send_messages(
            [ServiceBusMessage(f"m{i}") for i in range(4)])
    _set_time(folder, START)
    names = {"behind": -25, "ahead": 25}
    procs = [run_logged(os.path.join(folder, f"{name}.out"), "-m", "tests.workers.clock_worker",
                        ns, "q", str(offset), str(tolerance), folder, name)
             for name, offset in names.items()]
    try:
        for step in range(STEPS):
            _set_time(folder, START + timedelta(seconds=5 * step))
            with open(os.path.join(folder, f"step-{step}"), "w") as handle:
                # The host behind takes every message first; from then on both receive.
                handle.write("behind" if step == 0 else ",".join(names))
            _wait(procs, [os.path.join(folder, f"ack-{n}-{step}") for n in names])
        with open(os.path.join(folder, f"step-{STEPS}"), "w") as handle:
            handle.write("stop")
        for proc in procs:
            assert proc.wait(timeout=60) == 0, output_tail(proc)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    grants = {}
    for name in names:
        with open(os.path.join(folder, f"{name}.log")) as handle:
            for line in handle:
                record = json.loads(line)
                grants.setdefault(record["seq"], []).append(record)
    assert len(grants) == 4
    early = []  # grants made while the previous holder still believed it held the lock
    for seq, held in grants.items():
        held.sort(key=lambda r: r["granted"])
        for before, after in zip(held, held[1:]):
            if datetime.fromisoformat(after["granted"]) < datetime.fromisoformat(before["ends"]):
                early.append((seq, before, after))
    crossed = [(a["holder"], b["holder"]) for held in grants.values()
               for a, b in zip(held, held[1:]) if a["holder"] != b["holder"]]
    assert len(crossed) >= 4, grants  # every lock ran out and changed hosts at least once
    if overlaps:
        assert early, "the control should show a lock taken while still held"
    else:
        assert early == [], early
