"""sbdelta over Spark Connect (issue 16): a real local Spark Connect server with the Delta jars
(:class:`sbdelta.connect_server.ConnectServer`: Spark's own SparkConnectServer started by the
installed pyspark's spark-submit, the ``spark-connect`` artifact from Maven), and a client
process that reaches it through ``SparkSession.builder.remote`` and never starts a JVM.

The namespace is a ``viewfs://`` URI mounted by the server on a local folder: storage that
is not local to sbdelta, so every read and write goes through Spark (as on Databricks
serverless, whose storage the client cannot reach either), and the Delta log is read through
SQL (``DESCRIBE HISTORY``), never through the JVM's DeltaLog.
"""

import glob
import json
import os
import socket
from datetime import datetime, timezone

import pytest

from sbdelta._activity import last_activity
from sbdelta._namespace import Namespace
from sbdelta.connect_server import ConnectServer

from ..conftest import START, run_python
from ..workers import session_scenario, subscription_scenario

MOUNT = "sbdelta-test"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("connect")
    storage = folder / "storage"
    storage.mkdir()
    with open(folder / "server.log", "w") as log:
        connect = ConnectServer(_free_port(), log=log, conf={
            f"spark.hadoop.fs.viewfs.mounttable.{MOUNT}.link./ns": f"file://{storage}"})
        with connect:
            yield connect, storage


#: The scenarios of ``tests/workers/connect_scenario.py`` the test runs: the queue's in the
#: suite (90 s); ``SBDELTA_TEST_CONNECT_SCENARIOS=all`` adds sessions, topics, forwarding,
#: the syphon and the jobs (about 5 minutes more; docs/testing.md).
SCENARIOS = os.environ.get("SBDELTA_TEST_CONNECT_SCENARIOS", "queue")

#: What each scenario reports when it works as on a classic session.
EXPECTED = {
    "queue": {
        "sequence_numbers": 5,          # SEND-3: five distinct numbers
        "completed": 2,                 # m0 and m1, their tokens given twice each
        "rest": ["d2", "d3"],           # the other five are locked (RECV-2) or completed
        "deferred": ["d3"],             # SETTLE-4: by sequence number only
        "peek": ["d0", "d1", "d3", "m2"],  # locked and deferred messages are peeked too
        "counts": [3, 0, 0],            # active (d3 is deferred), dead-lettered, scheduled
        "drained": ["d0", "d1", "m2"],  # RECV-1, once their locks ran out
        "left": 0,
        "skew_below_5s": True,
        "queues": [],
    },
    "session": session_scenario.EXPECTED,
    "topic": subscription_scenario.EXPECTED,
    "topic_counts": [0, True],  # nothing scheduled; the three messages' bytes
    "forward": {"job": [3, 0], "got": ["new", "old0", "old1", "old2"]},
    "syphon": {"moved": [{"orders": 3, "refunds": 1}, {}],
               "dead": {"MessagingEntityNotFound": 1}, "got": ["o0", "o1", "o2", "r0"]},
    "jobs": {"expired": 3, "connect": True, "compacted": 1, "idle": ["q"]},
}


# The full form's client has 1800 s (below); the test's own limit (pytest-timeout, 600 s by
# default) must leave it that, or the long run fails at 600 s whatever its scenarios do.
@pytest.mark.timeout(600 if SCENARIOS == "queue" else 2400)
def test_issue16_the_messaging_core_runs_over_spark_connect_without_a_jvm_in_the_client(
        spark, server):
    """Issue 16, Spark Connect: a queue's whole life through ``SparkSession.builder.remote``
    (``tests/workers/connect_scenario.py``, DataFrame results checked there with chispa):
    SEND-1/3 (a list, a DataFrame, a scheduled message cancelled), RECV-2 (receive_dataframe
    under PeekLock), SETTLE-1 (complete a DataFrame of lock tokens), SETTLE-2/3/4/5 (abandon,
    dead-letter with reason, defer and receive by sequence number, renew), the dead-letter
    queue as a DataFrame, peek, the runtime properties, RECV-1 (ReceiveAndDelete), the clock
    check against the server's clock, delete_queue; in a client process where no JVM starts,
    its admin client taking the active Spark Connect session. The activity it recorded
    (IDLE-2) is read by a classic session too. With ``SBDELTA_TEST_CONNECT_SCENARIOS=all``:
    SESS-2/3/5/6, TOPIC-1/4/5 with FWD-2 and PART-8, FWD-1 (the job), PAIR-7 (the syphon),
    TTL-6 (the sweep), compaction and IDLE-1 end as on a classic session."""
    connect, storage = server
    ns = f"viewfs://{MOUNT}/ns/run"
    proc = run_python("-m", "tests.workers.connect_scenario", connect.url, ns, SCENARIOS)
    out, err = proc.communicate(timeout=540 if SCENARIOS == "queue" else 1800)
    assert proc.returncode == 0, err[-4000:]
    report = json.loads(out.strip().splitlines()[-1])
    assert report.pop("jvm") is False
    print("seconds per scenario:", report.pop("seconds"))
    assert report == {name: EXPECTED[name] for name in report}
    assert "queue" in report
    # The deleted queue's folder stays: no Spark Connect call deletes files (docs/engines.md).
    (folder,) = glob.glob(str(storage / "run" / "queue" / "queues" / "q" / "*"))
    assert sorted(os.listdir(os.path.join(folder, "_activity")))  # one folder per slot used

    # A classic session reads the activity folders a Spark Connect client wrote (IDLE-2).
    spark.sparkContext._jsc.hadoopConfiguration().set(
        f"fs.viewfs.mounttable.{MOUNT}.link./ns", f"file://{storage}")
    location = f"{ns}/queue/{os.path.relpath(folder, storage / 'run' / 'queue')}"
    seen = last_activity(Namespace(f"{ns}/queue", spark=spark), [location])
    assert START <= seen < datetime(2030, 1, 2, tzinfo=timezone.utc)
