"""The Databricks bundle (databricks.yml, issue 17) runs what the wheel installs: every job is a
Python wheel task whose entry point is one of sbdelta's console scripts, resolving to the job's
function; the wheel is built by the bundle; every batch job is scheduled; clusters run in an
access mode that lets sbdelta call the JVM and keep as much compiled query code as sbdelta's
own sessions; every variable has a default, and each cloud target
its node type. (``databricks bundle validate`` needs a workspace; this checks what it cannot.)"""

import importlib
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
JOBS = ("expire_messages", "compact", "delete_idle_entities", "forward_messages", "syphon")


def _bundle():
    return yaml.safe_load((ROOT / "databricks.yml").read_text())


def _local_conf():
    """conf/spark-local.conf (sbdelta's own local sessions), as sbdelta reads it."""
    from sbdelta._spark import local_spark_conf

    return local_spark_conf()


def _scripts():
    """The console scripts of the installed sbdelta distribution (what its wheel declares)."""
    from importlib.metadata import distribution

    return {ep.name: ep.value for ep in distribution("sbdelta").entry_points
            if ep.group == "console_scripts"}


def test_every_batch_job_is_a_scheduled_wheel_task_of_a_console_script():
    bundle, scripts = _bundle(), _scripts()
    entry_points = set()
    for name, job in bundle["resources"]["jobs"].items():
        assert job["schedule"]["quartz_cron_expression"].startswith("${var."), name
        assert job["max_concurrent_runs"] == 1
        (task,) = job["tasks"]
        wheel = task["python_wheel_task"]
        assert wheel["package_name"] == "sbdelta"
        target = scripts[wheel["entry_point"]]  # a console script of the wheel
        module, func = target.split(":")
        assert callable(getattr(importlib.import_module(module), func)), target
        assert wheel["parameters"][:2] == ["--namespace", "${var.namespace}"]
        assert task["libraries"] == [{"whl": "./dist/*.whl"}]
        cluster = task["new_cluster"]
        assert cluster["data_security_mode"] == "SINGLE_USER"
        assert cluster["spark_version"] == "${var.spark_version}"
        assert cluster["node_type_id"] == "${var.node_type_id}"
        # The compiled-code cache of sbdelta's own sessions (conf/spark-*.conf), a static
        # setting a job's session cannot change once the cluster runs.
        assert cluster["spark_conf"]["spark.sql.codegen.cache.maxEntries"] == \
            _local_conf()["spark.sql.codegen.cache.maxEntries"]
        entry_points.add(wheel["entry_point"])
    assert entry_points == {f"sbdelta-{j.replace('_', '-')}" for j in JOBS}
    assert all(f"sbdelta.jobs.{j}:entry" in scripts.values() for j in JOBS)


def test_the_bundle_builds_the_wheel_and_every_variable_has_a_default():
    bundle = _bundle()
    artifact = bundle["artifacts"]["sbdelta"]
    assert artifact["type"] == "whl" and "--wheel-dir dist" in artifact["build"]
    variables = bundle["variables"]
    assert all("default" in v for v in variables.values()), variables
    used = set(re.findall(r"\$\{var\.(\w+)\}", (ROOT / "databricks.yml").read_text()))
    assert used <= set(variables), used - set(variables)
    nodes = {name: t["variables"]["node_type_id"] for name, t in bundle["targets"].items()}
    assert set(nodes) == {"azure", "aws", "gcp"} and len(set(nodes.values())) == 3
    assert [n for n, t in bundle["targets"].items() if t.get("default")] == ["azure"]
    assert bundle["resources"]["jobs"]["sbdelta_syphon"]["schedule"]["pause_status"] == "PAUSED"


def test_the_console_scripts_run_the_jobs():
    """The installed scripts (what a wheel task runs) parse the jobs' flags (no Spark: --help)."""
    bin_dir = Path(sys.executable).parent
    for job in JOBS:
        script = bin_dir / f"sbdelta-{job.replace('_', '-')}"
        done = subprocess.run([str(script), "--help"], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "--namespace" in done.stdout and "--engine" in done.stdout
