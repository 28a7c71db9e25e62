"""One Spark session for the whole test run; a fresh namespace folder per test."""

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def spark():
    from sbdelta._spark import get_spark

    session = get_spark(conf={"spark.app.name": "sbdelta-tests"})
    yield session
    session.stop()


@pytest.fixture
def namespace(tmp_path):
    """A local namespace root (a folder that does not exist yet)."""
    return str(tmp_path / "ns")


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


def output_tail(proc, chars=3000):
    """The end of a :func:`run_logged` worker's output, for assertion messages."""
    with open(proc.output_path) as handle:
        return handle.read()[-chars:]
