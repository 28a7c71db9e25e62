"""One Spark session for the whole test run; a fresh namespace folder per test."""

import itertools
import os
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def spark():
    from sbdelta._spark import get_spark

    conf = {"spark.app.name": "sbdelta-tests"}
    # e.g. SBDELTA_TEST_SPARK_CONF="spark.sql.ansi.enabled=true" runs the suite on Spark 3.5
    # under ANSI SQL, Spark 4's default (settings separated by ';').
    for item in filter(None, os.environ.get("SBDELTA_TEST_SPARK_CONF", "").split(";")):
        key, _, value = item.partition("=")
        conf[key.strip()] = value.strip()
    session = get_spark(conf=conf)
    yield session
    session.stop()


#: The ManualClock start of the messaging tests (a date no real clock is near).
START = datetime(2030, 1, 1, tzinfo=timezone.utc)


@pytest.fixture
def clock():
    from sbdelta import ManualClock

    return ManualClock(START)


@pytest.fixture
def admin(spark, ns, clock):
    """An admin client on the test module's ``ns`` fixture (each module defines its own)."""
    from sbdelta.management import ServiceBusAdministrationClient

    return ServiceBusAdministrationClient(ns, spark=spark, clock=clock)


_queue_names = itertools.count()


@pytest.fixture
def queue(admin):
    """A fresh queue factory on the module's namespace: queue(**properties) -> name."""
    def make(**props):
        name = f"q{next(_queue_names)}"
        admin.create_queue(name, **props)
        return name
    return make


@pytest.fixture
def client(spark, ns, clock):
    from sbdelta import ServiceBusClient

    with ServiceBusClient(ns, spark=spark, clock=clock) as c:
        yield c


@pytest.fixture
def namespace(tmp_path):
    """A local namespace root (a folder that does not exist yet)."""
    return str(tmp_path / "ns")


def receive_all(receiver, expected, *, batch=10, tries=40):
    """Receive until `expected` messages arrived (partitioned entities answer one partition per call)."""
    got = []
    for _ in range(tries):
        got += receiver.receive_messages(batch)
        if len(got) >= expected:
            break
    return got


def spark_jobs(spark, action):
    """``action()`` and the call site of each Spark job it ran (nothing else runs meanwhile)."""
    tracker = spark.sparkContext.statusTracker()
    bus = spark.sparkContext._jsc.sc().listenerBus()
    spark.sparkContext.setJobGroup("sbdelta-count", "count jobs")
    try:
        before = set(tracker.getJobIdsForGroup("sbdelta-count"))
        result = action()
        # The status tracker is fed by the listener bus, which runs behind the scheduler: a
        # job's start and its stages may not be recorded yet. Drain it first.
        bus.waitUntilEmpty(60_000)
        jobs = sorted(set(tracker.getJobIdsForGroup("sbdelta-count")) - before)
    finally:
        spark.sparkContext.setJobGroup(None, None)
    return result, [call_site(tracker, job) for job in jobs]


def call_site(tracker, job: int) -> str:
    """The name of a job's first stage still recorded. A stage the job skipped (a shuffle an
    earlier job computed) is recorded without an end, and once a long run has recorded
    Spark's 1,000 stages it is the first one dropped; the job's last stage always ran. A
    job over no partitions (an empty table's scan) has no stage: ``""``."""
    stages = sorted(tracker.getJobInfo(job).stageIds)
    if not stages:
        return ""
    for stage in stages:
        info = tracker.getStageInfo(stage)
        if info is not None:
            return info.name
    raise AssertionError(f"no stage of Spark job {job} is recorded")


def run_python(*args, env=None, **kwargs):
    """Start ``python -m ...`` from the repository root (used by multi-process tests)."""
    import subprocess

    full_env = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    kwargs.setdefault("stdout", subprocess.PIPE)
    kwargs.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen([sys.executable, *args], cwd=ROOT, env=full_env, text=True,
                            **kwargs)


def run_logged(log_path, *args, env=None):
    """Like :func:`run_python`, with stdout and stderr going to ``log_path``.

    For long-running workers: a pipe nobody reads fills up and blocks the worker's logging.
    """
    handle = open(log_path, "w")
    import subprocess

    proc = run_python(*args, env=env, stdout=handle, stderr=subprocess.STDOUT)
    proc.output_path = log_path
    handle.close()
    return proc


class ThreadWorker(threading.Thread):
    """A worker run in a thread of the test's process (on its Spark session: one JVM fewer to
    start on a 2-core machine), with the face of a :func:`run_logged` process: ``output_path``
    (what it says goes there), ``poll()``, ``wait(timeout)``, ``returncode``, ``kill()`` (a
    no-op: it ends when its work does). ``target(say)`` runs it; ``say(text)`` writes a line."""

    def __init__(self, output_path, target):
        super().__init__(daemon=True, name=f"worker-{Path(output_path).name}")
        self.output_path, self.target, self.returncode = output_path, target, None
        open(output_path, "w").close()

    def say(self, text):
        with open(self.output_path, "a") as handle:
            handle.write(f"{text}\n")

    def run(self):
        try:
            self.target(self.say)
            self.returncode = 0
        except BaseException:  # noqa: BLE001 - reported through its output, as a process's
            import traceback

            self.say(traceback.format_exc())
            self.returncode = 1

    def poll(self):
        return None if self.is_alive() else self.returncode

    def wait(self, timeout=None):
        self.join(timeout)
        if self.is_alive():
            raise TimeoutError(f"{self.name} still running after {timeout} s")
        return self.returncode

    def kill(self):
        pass


def output_tail(proc, chars=3000):
    """The end of a :func:`run_logged` worker's output, for assertion messages."""
    with open(proc.output_path) as handle:
        return handle.read()[-chars:]


def spark_submit(job, *args, timeout=600):
    """Run ``jobs/<job>.py`` through spark-submit as a scheduler would, with the arguments
    ``$(sbdelta spark-submit-args)`` expands to; returns the CompletedProcess."""
    import subprocess

    submit_args = subprocess.run([sys.executable, "-m", "sbdelta.cli", "spark-submit-args"],
                                 capture_output=True, text=True, check=True,
                                 cwd=ROOT).stdout.split()
    submit = str(Path(sys.executable).parent / "spark-submit")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    return subprocess.run([submit, *submit_args, str(ROOT / "jobs" / f"{job}.py"), *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=timeout, env=env)
