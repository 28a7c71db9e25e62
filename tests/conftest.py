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
    return subprocess.Popen([sys.executable, *args], cwd=ROOT, env=full_env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)
