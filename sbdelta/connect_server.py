"""A local Spark Connect server with sbdelta's Delta set-up.

Databricks serverless compute and shared clusters give a notebook a Spark Connect session
(``SparkSession.builder.remote(...)``): the Python process has no JVM, and the server runs
every query. sbdelta works on such a session (docs/engines.md, "Spark Connect"); this module
starts the same kind of server on this machine, so that a program, a test or a notebook can
use sbdelta over Spark Connect without a cluster::

    sbdelta connect-server --port 15002            # in one terminal
    spark = SparkSession.builder.remote("sc://localhost:15002").getOrCreate()

The server is Spark's own (``org.apache.spark.sql.connect.service.SparkConnectServer``, what
``start-connect-server.sh`` of a Spark distribution starts; pip's pyspark does not ship that
script), run by the installed pyspark's ``spark-submit`` with the session settings of
:func:`sbdelta.get_spark` (Delta's extensions and jars, the multi-process-safe log store) and
the ``spark-connect`` artifact built for the installed pyspark, fetched once from Maven
Central (Spark 4 ships it). The client needs pyspark's ``connect`` requirements (``pip
install 'sbdelta[connect]'``).
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from pathlib import Path
from typing import IO, List, Mapping, Optional

from . import _spark
from .exceptions import SparkSetupError

__all__ = ["DEFAULT_PORT", "SERVER_CLASS", "connect_coordinate", "server_command",
           "ConnectServer"]

#: Spark Connect's own default port.
DEFAULT_PORT = 15002
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def connect_coordinate() -> str:
    """The Maven coordinate of the Spark Connect server built for the installed pyspark."""
    import pyspark

    version = re.match(r"\d+\.\d+\.\d+", pyspark.__version__).group(0)
    return f"org.apache.spark:spark-connect_{_spark.scala_binary_version()}:{version}"


def server_command(port: int = DEFAULT_PORT, *, profile: str = "local",
                   conf: Optional[Mapping[str, str]] = None) -> List[str]:
    """The ``spark-submit`` command line of a Spark Connect server on ``port`` with the
    settings of ``conf/spark-<profile>.conf`` and sbdelta's Delta set-up (``conf`` wins).

    Raises:
        SparkSetupError: Java is missing, or the Delta or Spark Connect jars cannot be fetched.
    """
    import pyspark

    settings = _spark.local_spark_conf(conf, profile=profile)
    jars = [j for j in settings.get("spark.jars", "").split(",") if j]
    settings["spark.jars"] = ",".join(jars + _spark.ensure_artifact(connect_coordinate()))
    # The JVM class archive was recorded for the client's class path, not the server's.
    options = settings.pop("spark.driver.extraJavaOptions", "")
    options = " ".join(o for o in options.split() if not o.startswith("-XX:SharedArchiveFile"))
    if options:
        settings["spark.driver.extraJavaOptions"] = options
    settings["spark.connect.grpc.binding.port"] = str(port)
    command = [str(Path(pyspark.__file__).parent / "bin" / "spark-submit"),
               "--class", SERVER_CLASS]
    for key, value in settings.items():
        if key == "spark.master":
            command += ["--master", value]
        else:
            command += ["--conf", f"{key}={value}"]
    return command + ["spark-internal"]


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


class ConnectServer:
    """A Spark Connect server process on this machine (a context manager: stopped on exit).

    ``url`` is what ``SparkSession.builder.remote`` takes. :meth:`start` returns once the
    server accepts connections.
    """

    def __init__(self, port: int = DEFAULT_PORT, *, profile: str = "local",
                 conf: Optional[Mapping[str, str]] = None, log: Optional[IO] = None) -> None:
        self.port = port
        self.url = f"sc://localhost:{port}"
        self._command = server_command(port, profile=profile, conf=conf)
        self._log = log
        self._process: Optional[subprocess.Popen] = None

    def start(self, timeout: float = 180.0) -> "ConnectServer":
        """Start the server and wait until it listens.

        Raises:
            SparkSetupError: the port is taken, or the server stopped or did not listen
                within ``timeout`` seconds (its output says why).
        """
        if _listening(self.port):
            raise SparkSetupError(f"port {self.port} is taken: stop what listens there or "
                                  "choose another port")
        env = dict(os.environ, JAVA_HOME=_spark.java_home())
        env.pop("SPARK_REMOTE", None)
        self._process = subprocess.Popen(self._command, stdout=self._log or subprocess.DEVNULL,
                                         stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + timeout
        while not _listening(self.port):
            if self._process.poll() is not None:
                raise SparkSetupError(f"the Spark Connect server stopped at start (exit code "
                                      f"{self._process.returncode}); see its output")
            if time.monotonic() > deadline:
                self.stop()
                raise SparkSetupError(f"the Spark Connect server did not listen on port "
                                      f"{self.port} within {timeout:.0f} s; see its output")
            time.sleep(0.5)
        return self

    def stop(self) -> None:
        """Stop the server (and wait for it)."""
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None

    def __enter__(self) -> "ConnectServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
