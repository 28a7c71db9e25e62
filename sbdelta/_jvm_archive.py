"""A class-data sharing (CDS) archive of the classes a local sbdelta session loads.

Every local session, spark-submit job and worker process starts a JVM that loads and verifies
some 15,000 Spark and Delta classes before it does anything. ``sbdelta setup`` records them once
in a dynamic CDS archive (JDK 13+, ``-XX:ArchiveClassesAtExit``) by running a short queue round
trip; later JVMs map the archive instead (``-XX:SharedArchiveFile``). Measured on the 2-core CI
machine (JDK 17, ``python -m bench.startup``): session start, first job and first Delta write
8.7 s without the archive, 5.7-6.0 s with it.

The archive is keyed by the Java runtime, the pyspark and delta-spark versions, pyspark's jars
folder and the jars added to it, so a change of any of them makes a new one. A JVM that finds
the archive unusable (another JDK build, a different class path) starts without it
(``-Xshare:auto``, the default). ``SBDELTA_CLASS_ARCHIVE=0`` switches it off.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Optional, Sequence

ENV_SWITCH = "SBDELTA_CLASS_ARCHIVE"
JAVA_OPTIONS_CONF = "spark.driver.extraJavaOptions"
#: Dynamic archives (-XX:ArchiveClassesAtExit) exist from JDK 13.
MIN_JAVA = 13

# The round trip recorded into the archive: the classes of a queue's send, receive, settle and
# counts (Delta's MERGE, UPDATE, DELETE, change feed and log replay among them).
_WARM_UP = """
import sys, tempfile
from sbdelta import ServiceBusClient, ServiceBusMessage
from sbdelta._spark import get_spark
from sbdelta.management import ServiceBusAdministrationClient
spark = get_spark(conf={"spark.driver.extraJavaOptions": "-XX:ArchiveClassesAtExit=" + sys.argv[1]})
ns = tempfile.mkdtemp() + "/ns"
admin = ServiceBusAdministrationClient(ns, spark=spark)
admin.create_queue("warm", enable_partitioning=True)
with ServiceBusClient(ns, spark=spark) as client:
    client.get_queue_sender("warm").send_messages([ServiceBusMessage(str(i)) for i in range(4)])
    receiver = client.get_queue_receiver("warm")
    got = receiver.receive_messages(4, max_wait_time=5)
    receiver.abandon_message(got[0])
    receiver.complete_messages(got[1:])
    receiver.peek_messages(5)
admin.get_queue_runtime_properties("warm")
spark.stop()
"""


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1") != "0"


@lru_cache(maxsize=None)
def _java_version(java: str) -> str:
    proc = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    return (proc.stderr or proc.stdout).strip()


def java_feature(version_text: str) -> int:
    """The feature release of ``java -version`` output: 8 for "1.8.0_392", 17 for "17.0.9"."""
    match = re.search(r'version "(\d+)(?:\.(\d+))?', version_text)
    if not match:
        return 0
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def archive_path(cache: Path, java_home: str, jars: Sequence[str]) -> Path:
    """Where the archive for this JDK, pyspark and these jars lives under the ``cache`` folder
    (it may not exist yet)."""
    from importlib import metadata

    java = str(Path(java_home, "bin", "java"))
    # The JVM checks the class path an archive was recorded with: two virtual environments
    # (their own pyspark/jars) sharing one cache need an archive each.
    spark_jars = str(Path(importlib.util.find_spec("pyspark").origin).parent / "jars")
    # The Spark and Delta versions are in the key themselves, not only through the jar paths.
    key = "\n".join([java, _java_version(java), "pyspark " + metadata.version("pyspark"),
                     "delta-spark " + _version_of("delta-spark"), spark_jars, *jars])
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return cache / "cds" / f"spark-{digest}.jsa"


def _version_of(package: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "none"


def usable(java_home: str) -> bool:
    return enabled() and java_feature(_java_version(str(Path(java_home, "bin", "java")))) >= MIN_JAVA


def java_option(cache: Path, java_home: str, jars: Sequence[str]) -> Optional[str]:
    """``-XX:SharedArchiveFile=...`` when an archive for this set-up exists, else None.

    None too when the path holds whitespace: spark-submit flags are passed unquoted
    (``spark-submit $(sbdelta spark-submit-args)``).
    """
    if not usable(java_home):
        return None
    path = archive_path(cache, java_home, jars)
    if not path.is_file() or re.search(r"\s", str(path)):
        return None
    return f"-XX:SharedArchiveFile={path}"


def build(cache: Path, java_home: str, jars: Sequence[str]) -> Optional[Path]:
    """Record the archive once (about 20 s); return its path, or None where CDS is not usable.

    Raises:
        RuntimeError: the recording run failed (its output tail is in the message).
    """
    if not usable(java_home):
        return None
    path = archive_path(cache, java_home, jars)
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as tmp:
        partial = Path(tmp, path.name)
        env = dict(os.environ, **{ENV_SWITCH: "0"})  # record without mapping an older archive
        proc = subprocess.run([sys.executable, "-c", _WARM_UP, str(partial)], env=env,
                              capture_output=True, text=True, timeout=900)
        if proc.returncode != 0 or not partial.is_file():
            raise RuntimeError("recording the class-data sharing archive failed: "
                               + (proc.stderr or proc.stdout)[-1500:])
        os.replace(partial, path)
    return path


def with_java_option(conf_value: Optional[str], option: Optional[str]) -> Optional[str]:
    """``spark.driver.extraJavaOptions`` with ``option`` added (unless it sets an archive)."""
    if not option:
        return conf_value
    if conf_value and ("SharedArchiveFile" in conf_value or "ArchiveClassesAtExit" in conf_value
                       or "Xshare" in conf_value):
        return conf_value  # the caller chose its own class-data sharing
    return f"{conf_value} {option}" if conf_value else option

