"""Commits from several processes to one local table are never lost or overwritten.

Delta's default LocalLogStore can let two processes both write version N (one commit silently
vanishes); sbdelta's link(2) log store makes put-if-absent atomic across processes. Three processes
race: the test's own (a thread committing on its Spark session), a worker committing through
Spark with its own JVM, and a worker committing through delta-rs (whose local commits are an
atomic create-if-absent too, issue 16): Spark against Spark and Spark against delta-rs. The
test's process writes in a thread so that the 2-core machine starts one JVM, not two.
SBDELTA_TEST_UNSAFE_LOGSTORE=1 makes both Spark writers worker processes on Delta's default log
store: a commit is lost only when two processes meet in the short window between its check for
the version file and its rename, so at the default 15 commits the run mostly passes (it did on
2026-11-29); raise SBDELTA_TEST_COMMITS to make the loss likely.
tests/multiprocess/test_logstore_race.py races the log stores themselves.
"""

import json
import os
import re
import threading
from pathlib import Path

import pytest

from tests.conftest import run_python
from tests.workers.commit_worker import commit_many

WORKERS = 3
ENGINES = ["spark", "spark", "delta-rs"]  # writer -> how it commits (writer 0: this process)
COMMITS = int(os.environ.get("SBDELTA_TEST_COMMITS", "15"))  # every 3rd is a MERGE


@pytest.mark.multiprocess
def test_concurrent_processes_lose_no_commit(spark, tmp_path):
    table = str(tmp_path / "shared_table")
    spark.sql(f"CREATE TABLE delta.`{table}` (worker INT, i INT, kind STRING) USING delta")
    unsafe = os.environ.get("SBDELTA_TEST_UNSAFE_LOGSTORE") == "1"
    # Unsafe: both Spark writers are workers with Delta's default log store (this process's
    # session has sbdelta's).
    procs = [run_python("-m", "tests.workers.commit_worker", table, str(w), str(COMMITS),
                        "0" if unsafe else "1", ENGINES[w])
             for w in range(0 if unsafe else 1, WORKERS)]
    here = {}

    def write_here():
        try:
            here["counts"] = commit_many(table, 0, COMMITS, engine=ENGINES[0], spark=spark)
        except BaseException as exc:  # noqa: BLE001 - reported below
            here["error"] = exc

    thread = threading.Thread(target=write_here, daemon=True)
    if not unsafe:
        thread.start()
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, err[-3000:]
        reports.append(json.loads(out.strip().splitlines()[-1]))
    if not unsafe:
        thread.join(900)
        assert not thread.is_alive(), "the test process's writer did not finish in 900 s"
        if "error" in here:
            raise AssertionError("the test process's writer failed") from here["error"]
        reports.append(here["counts"])

    # Every appended and merged row is present, exactly once.
    rows = sorted(tuple(r) for r in spark.read.format("delta").load(table).collect())
    expected = sorted((w, i, "append" if i % 3 else "merge")
                      for w in range(WORKERS) for i in range(COMMITS))
    assert rows == expected

    # The log's versions are contiguous and there is exactly one per commit (plus CREATE).
    log = Path(table, "_delta_log")
    versions = sorted(int(m.group(1)) for f in log.iterdir()
                      if (m := re.fullmatch(r"(\d{20})\.json", f.name)))
    assert versions == list(range(len(versions)))
    assert len(versions) == 1 + WORKERS * COMMITS
    history = spark.sql(f"DESCRIBE HISTORY delta.`{table}`").collect()
    assert sorted(h.version for h in history) == versions
    assert sum(r["appends"] + r["merges"] for r in reports) == WORKERS * COMMITS
