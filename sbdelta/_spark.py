"""One Spark session bootstrap for every sbdelta entry point.

``get_spark()`` returns, in this order:

1. the session the caller passed in;
2. the active session of this process, if it has Delta (Databricks, a notebook, spark-submit with
   ``--packages``): it is used as it is and nothing is added;
3. a new local session with Delta and sbdelta's multi-process-safe log store for ``file:`` paths.

For (3) the Delta jars are resolved from Maven Central once (Spark's Ivy, or ``mvn`` when Ivy cannot
reach it) into a cache folder, and the log store (``_java/LinkLocalLogStore.java``) is compiled
once with ``javac``; later sessions start from the cache without the network. Every failure on
that path raises :class:`~sbdelta.exceptions.SparkSetupError` saying what is missing and how to fix
it, instead of a Py4J stack trace.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path
from typing import Dict, Iterator, List, Mapping, Optional

from . import _jvm_archive as jvm_archive
from .exceptions import SparkSetupError

__all__ = ["get_spark", "LazySpark", "local_spark_conf", "spark_submit_args", "ensure_jars",
           "ensure_class_archive", "LOGSTORE_CLASS"]

LOGSTORE_CLASS = "io.sbdelta.storage.LinkLocalLogStore"
LOGSTORE_CONF = "spark.delta.logStore.file.impl"
SCALA_BINARY = "2.12"  # Spark 3.5 wheels are built for Scala 2.12
_JAVA_SOURCE = Path(__file__).with_name("_java") / "LinkLocalLogStore.java"

# Used when no conf/ folder is found (an installed package run outside the repository).
_BUILTIN_LOCAL_CONF = {
    "spark.master": "local[2]",
    "spark.app.name": "sbdelta",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.databricks.delta.snapshotPartitions": "2",
    # VACUUM lists a table's folders with this many tasks (Spark's default is 10000).
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "4",
    "spark.sql.session.timeZone": "UTC",
    "spark.log.level": "WARN",
    "spark.ui.showConsoleProgress": "false",
}
_DELTA_SESSION_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


def cache_dir() -> Path:
    """Where resolved jars and the compiled log store live (``$SBDELTA_CACHE_DIR``)."""
    root = os.environ.get("SBDELTA_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sbdelta")
    return Path(root)


def conf_dir() -> Optional[Path]:
    """The conf/ folder: ``$SBDELTA_CONF_DIR``, else the repository's ``conf/`` if present."""
    env = os.environ.get("SBDELTA_CONF_DIR")
    if env:
        return Path(env)
    repo_conf = Path(__file__).resolve().parents[1] / "conf"
    return repo_conf if repo_conf.is_dir() else None


def read_spark_conf_file(path: Path) -> Dict[str, str]:
    """Parse a spark-defaults style file: ``key value`` per line, ``#`` comments."""
    conf: Dict[str, str] = {}
    for lineno, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 1)
        if len(parts) != 2:
            raise SparkSetupError(f"{path}:{lineno}: expected 'key value', got {raw!r}")
        conf[parts[0]] = parts[1].strip()
    return conf


def _profile_conf(profile: str) -> Dict[str, str]:
    folder = conf_dir()
    if folder is not None:
        path = folder / f"spark-{profile}.conf"
        if path.is_file():
            return read_spark_conf_file(path)
        if profile != "local":
            raise SparkSetupError(f"no Spark profile {profile!r}: {path} does not exist")
    if profile != "local":
        raise SparkSetupError(f"no Spark profile {profile!r}: no conf/ folder found "
                              "(set SBDELTA_CONF_DIR)")
    return dict(_BUILTIN_LOCAL_CONF)


def _java_home() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and Path(java_home, "bin", "java").exists():
        return java_home
    java = shutil.which("java")
    if not java:
        raise SparkSetupError(
            "Java was not found: Spark needs a Java 8, 11 or 17 runtime. Install one "
            "(Debian/Ubuntu: apt-get install openjdk-17-jdk-headless) or set JAVA_HOME.")
    return str(Path(os.path.realpath(java)).parents[1])


def _delta_version() -> str:
    try:
        return metadata.version("delta-spark")
    except metadata.PackageNotFoundError as exc:  # pragma: no cover - install is broken
        raise SparkSetupError("the delta-spark package is not installed: pip install delta-spark") \
            from exc


@contextlib.contextmanager
def _cache_lock() -> Iterator[None]:
    """Serialise cache set-up between processes that start at the same moment."""
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _delta_artifacts(version: str) -> Dict[str, str]:
    """Maven coordinates of the jars Delta needs beyond Spark's own (antlr4 ships with Spark)."""
    return {
        f"delta-spark_{SCALA_BINARY}-{version}.jar": f"io.delta:delta-spark_{SCALA_BINARY}:{version}",
        f"delta-storage-{version}.jar": f"io.delta:delta-storage:{version}",
    }


def _resolve_with_ivy(coords: List[str], ivy_dir: Path) -> None:
    """Resolve jars with the Ivy that spark-submit uses, in a short-lived child process."""
    code = (
        "import sys\n"
        "from pyspark import SparkConf\n"
        "from pyspark.java_gateway import launch_gateway\n"
        "conf = SparkConf().set('spark.jars.packages', sys.argv[1])"
        ".set('spark.jars.ivy', sys.argv[2])\n"
        "launch_gateway(conf).shutdown()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, ",".join(coords), str(ivy_dir)],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])


def _resolve_with_maven(coord: str, dest: Path) -> None:
    mvn = shutil.which("mvn")
    if not mvn:
        raise RuntimeError("mvn is not installed")
    proc = subprocess.run([mvn, "-q", "-B", "dependency:copy", f"-Dartifact={coord}:jar",
                           f"-DoutputDirectory={dest}"], capture_output=True, text=True,
                          timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(proc.stdout[-2000:] + proc.stderr[-2000:])


def ensure_jars() -> List[str]:
    """Return local paths of the Delta jars and the compiled log store, fetching them once.

    Raises:
        SparkSetupError: Java or javac is missing, or the jars cannot be resolved.
    """
    _java_home()
    version = _delta_version()
    jar_dir = cache_dir() / "jars" / f"delta-{version}"
    wanted = _delta_artifacts(version)
    with _cache_lock():
        missing = [name for name in wanted if not (jar_dir / name).is_file()]
        if missing:
            jar_dir.mkdir(parents=True, exist_ok=True)
            ivy_dir = cache_dir() / "ivy"
            errors = []
            try:
                _resolve_with_ivy([wanted[n] for n in missing], ivy_dir)
                for name in missing:
                    group, artifact, ver = wanted[name].split(":")
                    shutil.copy2(ivy_dir / "jars" / f"{group}_{artifact}-{ver}.jar", jar_dir / name)
            except Exception as exc:  # noqa: BLE001 - any failure falls through to maven
                errors.append(f"Ivy: {str(exc).strip()[-600:]}")
                try:
                    for name in missing:
                        _resolve_with_maven(wanted[name], jar_dir)
                except Exception as mvn_exc:  # noqa: BLE001
                    errors.append(f"Maven: {str(mvn_exc).strip()[-600:]}")
                    raise SparkSetupError(
                        "cannot fetch the Delta jars " + ", ".join(wanted[n] for n in missing)
                        + " from Maven Central. Connect once to the network (they are cached in "
                        f"{jar_dir}), or copy the jars there by hand. " + " | ".join(errors)
                    ) from None
        jars = [str(jar_dir / name) for name in wanted]
        jars.append(str(_ensure_logstore_jar(jars[1], version)))
    return jars


def _ensure_logstore_jar(storage_jar: str, version: str) -> Path:
    source = _JAVA_SOURCE.read_bytes()
    digest = hashlib.sha256(source + version.encode()).hexdigest()[:16]
    target = cache_dir() / "logstore" / f"sbdelta-logstore-{digest}.jar"
    if target.is_file():
        return target
    javac = shutil.which("javac", path=str(Path(_java_home(), "bin"))) or shutil.which("javac")
    if not javac:
        raise SparkSetupError(
            "javac was not found: sbdelta compiles its multi-process-safe Delta log store for "
            "local namespaces once. Install a JDK (not only a JRE), e.g. apt-get install "
            "openjdk-17-jdk-headless, or set JAVA_HOME to one.")
    import pyspark

    hadoop_api = sorted(Path(pyspark.__file__).parent.joinpath("jars").glob("hadoop-client-api-*.jar"))
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        classpath = os.pathsep.join([storage_jar, *map(str, hadoop_api)])
        proc = subprocess.run([javac, "--release", "8", "-nowarn", "-d", tmp, "-cp", classpath,
                               str(_JAVA_SOURCE)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise SparkSetupError(f"compiling the sbdelta log store failed: {proc.stderr[-1500:]}")
        partial = target.with_suffix(".partial")
        with zipfile.ZipFile(partial, "w") as jar:
            for cls in Path(tmp).rglob("*.class"):
                jar.write(cls, cls.relative_to(tmp).as_posix())
        os.replace(partial, target)
    return target


def ensure_class_archive() -> Optional[Path]:
    """Record the JVM class-data sharing archive local sessions start from (once; see
    :mod:`sbdelta._jvm_archive`). None where the JDK cannot use one (before JDK 13) or
    ``SBDELTA_CLASS_ARCHIVE=0``.

    Raises:
        SparkSetupError: the recording run failed.
    """
    jars = local_spark_conf()["spark.jars"].split(",")
    try:
        # No cache lock: the recording child takes it (ensure_jars). Two set-ups at once both
        # record, and the last rename wins; either archive is whole.
        return jvm_archive.build(cache_dir(), _java_home(), jars)
    except RuntimeError as exc:
        raise SparkSetupError(str(exc)) from None


def local_spark_conf(overrides: Optional[Mapping[str, str]] = None, *,
                     profile: str = "local", multi_process_safe: bool = True) -> Dict[str, str]:
    """The full Spark configuration of a local sbdelta session.

    Args:
        overrides: Caller's settings; they win over conf/ and the defaults.
        profile: Which ``conf/spark-<profile>.conf`` to start from.
        multi_process_safe: Install the link(2) log store for ``file:`` tables. Switching it off
            restores Delta's LocalLogStore, which can lose commits when processes race; it exists
            only to demonstrate that.
    """
    conf = _profile_conf(profile)
    conf.update(_DELTA_SESSION_CONF)
    jars = ensure_jars()
    if not multi_process_safe:
        jars = jars[:2]
    existing = [j for j in conf.get("spark.jars", "").split(",") if j]
    conf["spark.jars"] = ",".join(existing + jars)
    if multi_process_safe:
        conf[LOGSTORE_CONF] = LOGSTORE_CLASS
    options = jvm_archive.with_java_option(
        conf.get(jvm_archive.JAVA_OPTIONS_CONF),
        jvm_archive.java_option(cache_dir(), _java_home(), conf["spark.jars"].split(",")))
    if options:
        conf[jvm_archive.JAVA_OPTIONS_CONF] = options
    conf.update(overrides or {})
    return conf


def spark_submit_args(profile: str = "local") -> List[str]:
    """``spark-submit`` flags that give a job the same Delta set-up as ``get_spark()``."""
    args: List[str] = []
    for key, value in local_spark_conf(profile=profile).items():
        if key == "spark.jars":
            args += ["--jars", value]
        elif key == "spark.master":
            args += ["--master", value]
        else:
            args += ["--conf", f"{key}={value}"]
    return args


def _has_delta(spark) -> bool:
    conf = spark.sparkContext.getConf()
    return ("DeltaSparkSessionExtension" in (conf.get("spark.sql.extensions") or "")
            or "DeltaCatalog" in (conf.get("spark.sql.catalog.spark_catalog") or "")
            or "DATABRICKS_RUNTIME_VERSION" in os.environ)


def get_spark(spark=None, *, conf: Optional[Mapping[str, str]] = None, profile: str = "local",
              multi_process_safe: bool = True):
    """Return the Spark session sbdelta should use (see the module docstring).

    Args:
        spark: A session to use as it is.
        conf: Settings for a new local session, overriding conf/ and the defaults.
        profile: The ``conf/spark-<profile>.conf`` to build a new session from.
        multi_process_safe: See :func:`local_spark_conf`.

    Raises:
        SparkSetupError: Java, javac or the Delta jars are missing, or Spark fails to start.
    """
    from pyspark.sql import SparkSession

    if spark is not None:
        return spark
    active = SparkSession.getActiveSession()
    if active is not None and _has_delta(active):
        return active
    settings = local_spark_conf(conf, profile=profile, multi_process_safe=multi_process_safe)
    os.environ.setdefault("JAVA_HOME", _java_home())
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    try:
        session = builder.getOrCreate()
    except Exception as exc:  # Py4J/launcher errors carry no actionable message
        raise SparkSetupError(f"Spark failed to start with sbdelta's local configuration: "
                              f"{str(exc).strip()[-1000:]}") from exc
    _quiet_guard_failures(session)
    return session


class LazySpark:
    """The session :func:`get_spark` would return, started the first time something uses it.

    A client whose engine does everything it is asked with delta-rs (``engine="delta-rs"`` on a
    local namespace: send, receive, settle, peek a queue) never starts a JVM; the first
    DataFrame form, job or remote table starts Spark as :func:`get_spark` does. Attribute
    access is forwarded to the session, so code written for a ``SparkSession`` takes this.
    """

    def __init__(self, spark=None) -> None:
        self._given = spark
        self._session = spark

    def session(self):
        """The session itself, started now if it was not."""
        if self._session is None:
            self._session = get_spark(self._given)
        return self._session

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.session(), name)


def session_of(spark):
    """The SparkSession behind ``spark`` (a :class:`LazySpark` is started)."""
    return spark.session() if isinstance(spark, LazySpark) else spark


def _quiet_guard_failures(session) -> None:
    """A tripped precondition guard fails a task on purpose; do not log it as an ERROR."""
    jvm = session.sparkContext._jvm
    level = jvm.org.apache.logging.log4j.Level.OFF
    for logger in ("org.apache.spark.executor.Executor", "org.apache.spark.scheduler.TaskSetManager"):
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(logger, level)
