"""How a job's process ends (sbdelta/jobs/common.py ``exit_with``): with the job's exit status and its
report flushed, whether or not delta-rs left its Tokio worker threads running, without the
interpreter's finalization (which could abort the process with SIGABRT, status 134, after the
report: delta-io/delta-rs#2184); on Databricks through ``sys.exit``, where a job's namespace is
cloud storage, which delta-rs does not open (the finalization abort is real: the Databricks
path run with delta-rs's threads started died of SIGABRT in 6 of 75 runs here, the local path
in none of 30). Run in real processes."""

import os
import subprocess
import sys

import pytest

from ..conftest import ROOT

#: A job's end: a local delta-rs table written and read (its runtime's threads started; not on
#: Databricks), a report printed without a newline at the end (still buffered), then
#: ``exit_with``.
JOB = """
import os, sys
from sbdelta.jobs.common import exit_with
rows = 2
if not os.environ.get("DATABRICKS_RUNTIME_VERSION"):
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake
    write_deltalake(sys.argv[1], pa.table({"a": [1, 2]}), mode="append")
    rows = DeltaTable(sys.argv[1]).to_pyarrow_table().num_rows
print("report:", rows, end="")
sys.stderr.write("logged")
exit_with(int(sys.argv[2]))
print("never printed")
"""


@pytest.mark.parametrize("databricks", [False, True], ids=["local", "databricks"])
@pytest.mark.parametrize("code", [0, 1, 3])
def test_a_job_ends_with_its_status_and_its_report_flushed(tmp_path, code, databricks):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("DATABRICKS_RUNTIME_VERSION", None)
    if databricks:
        env["DATABRICKS_RUNTIME_VERSION"] = "15.4"
    done = subprocess.run([sys.executable, "-c", JOB, str(tmp_path / "t"), str(code)],
                          capture_output=True, text=True, env=env, cwd=str(ROOT), timeout=120)
    assert (done.returncode, done.stdout, done.stderr[-6:]) == (code, "report: 2", "logged")
