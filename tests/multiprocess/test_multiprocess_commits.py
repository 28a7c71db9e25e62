"""Commits from several processes to one local table are never lost or overwritten.

Delta's default LocalLogStore can let two processes both write version N (one commit silently
vanishes); sbdelta's link(2) log store makes put-if-absent atomic across processes. Two
writers commit through Spark with it, the third through delta-rs (whose local commits are an
atomic create-if-absent too, issue 16): the race is Spark against Spark and Spark against
delta-rs. Run with SBDELTA_TEST_UNSAFE_LOGSTORE=1 to see this test fail with the default log
store.
"""

import json
import os
import re
from pathlib import Path

import pytest

from tests.conftest import run_python

WORKERS = 3
ENGINES = ["spark", "spark", "delta-rs"]  # worker -> how it commits
COMMITS = int(os.environ.get("SBDELTA_TEST_COMMITS", "15"))  # every 3rd is a MERGE


@pytest.mark.multiprocess
def test_concurrent_processes_lose_no_commit(spark, tmp_path):
    table = str(tmp_path / "shared_table")
    spark.sql(f"CREATE TABLE delta.`{table}` (worker INT, i INT, kind STRING) USING delta")
    safe = "0" if os.environ.get("SBDELTA_TEST_UNSAFE_LOGSTORE") == "1" else "1"
    procs = [run_python("-m", "tests.workers.commit_worker", table, str(w), str(COMMITS), safe,
                        ENGINES[w]) for w in range(WORKERS)]
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, err[-3000:]
        reports.append(json.loads(out.strip().splitlines()[-1]))

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
