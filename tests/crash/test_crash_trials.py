"""Crash trials (issue 18): kill -9 at random points of every operation, then the invariants.

Each operation of tests/workers/crash_worker.py runs in a process killed with SIGKILL a random
time after it is ready (tests/crash/trials.py); tests/crash/invariants.py then checks that
nothing was lost, nothing is present twice, acknowledged calls took effect, the counts match the
contents and the entity still works. Rules RECV-3/RECV-4 (a lock lost with its holder frees the
message, its delivery counted), SETTLE-1..4, SEND-3, DLQ-1, SCHED-3, TTL-5, IDLE-1, FWD-1,
SCHED-1 (scheduled messages released by a receive), FWD-2 (a send to a topic whose subscription forwards), PAIR-3..7 and RECV-7 (a paired sender
failing over and pinging its way home; the syphon).

The suite runs the quick form, ``SBDELTA_CRASH_TRIALS`` (default 1) trial per operation, the
batch jobs killed within their first 8 seconds, the subscription and session receives left to
the full form (:data:`FULL_FORM_ONLY`); the full form is one command (docs/reliability.md)::

    SBDELTA_CRASH_TRIALS=20 SBDELTA_CRASH_REPORT=/tmp/crash.json \\
        .venv/bin/python -m pytest -q tests/crash

In the full form every fourth trial of an operation that the engine setting changes runs its
worker on the ``spark`` engine (the others on ``auto``: delta-rs on a local namespace).
"""

import json
import os
import random

import pytest

from .invariants import check
from .trials import SETUPS, SPARK_OPERATIONS, run_trial, summary

TRIALS = int(os.environ.get("SBDELTA_CRASH_TRIALS", "1"))
REPORT = os.environ.get("SBDELTA_CRASH_REPORT")
_done = []


#: The quick form kills the batch jobs within their first 8 seconds (the full form: anywhere in
#: their first call, up to 30 s).
QUICK_WINDOW = 8.0 if TRIALS < 4 else None


def _engine(op, trial):
    if op in SPARK_OPERATIONS or TRIALS < 4:
        return "auto"
    return "spark" if trial % 4 == 3 else "auto"


#: Operations only the full form tries: their receives plan in Spark, so each trial's checks
#: (through the subscription's rules) take a minute on the 2-core machine.
FULL_FORM_ONLY = {"subscription_complete"}
OPERATIONS = sorted(op for op in SETUPS if TRIALS >= 4 or op not in FULL_FORM_ONLY)


@pytest.mark.parametrize("op", OPERATIONS)
def test_kill_9_at_random_points_loses_nothing(op, tmp_path):
    rng = random.Random(f"{op}-{TRIALS}")
    for i in range(TRIALS):
        trial = run_trial(op, str(tmp_path / f"trial{i}"), rng, _engine(op, i), QUICK_WINDOW)
        figures = check(trial)
        _done.append(trial)
        print(f"{op} trial {i} ({trial.engine}): killed {trial.kill_after:.2f} s after ready, "
              f"{trial.landed}; drain {figures}")
    if REPORT:
        os.makedirs(os.path.dirname(os.path.abspath(REPORT)), exist_ok=True)
        with open(REPORT, "w") as handle:
            json.dump(summary(_done), handle, indent=1, sort_keys=True)


def test_the_checker_fails_on_a_lost_message_and_on_an_acknowledged_call_not_applied(tmp_path):
    """The invariants catch what they are for: a message removed without a journaled call is
    reported lost, a completion journaled as done whose message is still there is reported."""
    from sbdelta import ServiceBusClient

    from ..workers.crash_worker import QUEUE
    from .trials import Setup, Trial, setup_plain

    setup = setup_plain(str(tmp_path / "ns"), 10)
    with ServiceBusClient(setup.namespace) as client:
        receiver = client.get_queue_receiver(QUEUE, max_wait_time=0)
        gone = receiver.receive_messages(1)
        receiver.complete_messages(gone)
    with pytest.raises(AssertionError, match="lost messages"):
        check(Trial("complete", setup, [], "auto", "between calls", 0.0))

    left = Setup(setup.namespace, [i for i in setup.ids if i != gone[0].message_id])
    kept = left.ids[0]
    journal = [{"ev": "begin", "op": "complete", "ids": [kept]},
               {"ev": "done", "op": "complete", "ids": [kept]}]
    with pytest.raises(AssertionError, match="acknowledged but still present"):
        check(Trial("complete", left, journal, "auto", "between calls", 0.0))
