"""Session receivers in several processes at once, on two engines (SESS-2/3, RECV-3, issue 16):
no two processes act as the holder of one session at the same time, each session's messages are
completed in sequence order across its holders, and every message is completed exactly once.

One worker plans and commits through Spark (engine ``spark``), in a thread of the test's process
on its session (one JVM fewer to start on a 2-core machine), two are processes committing
through delta-rs (no JVM): the session locks are exclusive across processes and engines. Each
worker gives a session up after at most two batches, so sessions change hands many times."""

import json
import time
from collections import defaultdict
from datetime import timedelta

import pytest

from sbdelta import ServiceBusClient, ServiceBusMessage
from sbdelta.management import ServiceBusAdministrationClient

from ..conftest import ThreadWorker, output_tail, run_logged
from ..workers import session_worker

SESSIONS, PER_SESSION = 8, 25
WORKERS = {"w0": "spark", "w1": "auto", "w2": "auto"}


def _wait_for(word, procs, timeout=300):
    deadline = time.monotonic() + timeout
    for proc in procs:
        while word not in open(proc.output_path).read():
            assert proc.poll() is None, output_tail(proc)
            assert time.monotonic() < deadline, output_tail(proc)
            time.sleep(0.2)


@pytest.mark.multiprocess
def test_sess_2_3_recv_3_session_holders_in_three_processes_on_two_engines(spark, tmp_path):
    ns = str(tmp_path / "ns")
    ServiceBusAdministrationClient(ns, spark=spark).create_queue(
        "s", requires_session=True, enable_partitioning=True, lock_duration=timedelta(minutes=1))
    sent = {}
    with ServiceBusClient(ns, spark=spark) as client:
        sender = client.get_queue_sender("s")
        for i in range(PER_SESSION):  # interleaved, as sessions' messages usually arrive
            batch = [ServiceBusMessage(f"{s}-{i}", session_id=f"s{s}", message_id=f"s{s}-{i}")
                     for s in range(SESSIONS)]
            sender.send_messages(batch)
            for m in batch:
                sent[m.message_id] = m.session_id
    logs = {w: str(tmp_path / f"{w}.log") for w in WORKERS}
    go = {w: str(tmp_path / f"{w}.go") for w in WORKERS}
    procs = {w: run_logged(logs[w] + ".out", "-m", "tests.workers.session_worker", ns, "s",
                           logs[w], go[w], env={"SBDELTA_ENGINE": engine})
             for w, engine in WORKERS.items() if engine != "spark"}
    for w in (w for w, engine in WORKERS.items() if engine == "spark"):
        procs[w] = ThreadWorker(logs[w] + ".out", lambda say, w=w: session_worker.main(
            [ns, "s", logs[w], go[w]], spark=spark, engine="spark", say=say))
        procs[w].start()
    try:
        _wait_for("ready", procs.values())
        # The Spark worker first, until it holds a session (its calls are the slow ones), then
        # the delta-rs workers, which take the other sessions and the ones it gives up.
        open(go["w0"], "w").close()
        _wait_for("holding", [procs["w0"]], timeout=120)
        for w in ("w1", "w2"):
            open(go[w], "w").close()
        for w, proc in procs.items():
            proc.wait(timeout=600)
            assert proc.returncode == 0, output_tail(proc)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
    holds = []
    for w, log in logs.items():
        with open(log) as handle:
            holds += [dict(json.loads(line), worker=w) for line in handle]
    by_worker = defaultdict(int)
    for h in holds:
        by_worker[h["worker"]] += 1
    assert set(by_worker) == set(WORKERS), by_worker  # every worker held sessions, both engines
    completed = [mid for h in holds for _, mid in h["messages"]]
    assert sorted(completed) == sorted(sent)  # each message exactly once
    by_session = defaultdict(list)
    for h in holds:
        by_session[h["session"]].append(h)
    assert set(by_session) == set(sent.values())
    for session, hs in by_session.items():
        # A hold whose lock ended before its first receive returned never acted (end < start).
        hs = sorted((h for h in hs if h["end"] >= h["start"]), key=lambda h: h["start"])
        for a, b in zip(hs, hs[1:]):  # SESS-2: one holder at a time, across processes
            assert b["start"] >= a["end"], f"{session} held twice at once: {a} / {b}"
        seqs = [seq for h in hs for seq, _ in h["messages"]]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), session  # in order
        assert [mid for h in hs for _, mid in h["messages"]] == [
            f"{session}-{i}" for i in range(PER_SESSION)]
    assert len(holds) >= SESSIONS * PER_SESSION // 10  # sessions changed hands
    rp = ServiceBusAdministrationClient(ns, spark=spark).get_queue_runtime_properties("s")
    assert (rp.active_message_count, rp.dead_letter_message_count) == (0, 0)
    # For the note: how the holds spread over the workers.
    print({w: by_worker[w] for w in WORKERS}, len(holds), "holds,",
          sum(h["lost"] for h in holds), "ended by a lost lock", flush=True)
