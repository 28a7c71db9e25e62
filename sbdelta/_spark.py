"""One Spark session bootstrap for every sbdelta entry point.

``get_spark()`` returns, in this order:

1. the session the caller passed in;
2. the active session of this process, if it has Delta (Databricks, a notebook, spark-submit with
   ``--packages``): it is used as it is and nothing is added;
3. a new local session with Delta and sbdelta's multi-process-safe log store for ``file:`` paths.

For (3) the Delta jars built for the installed pyspark (Scala 2.12 for Spark 3.5, 2.13 for
Spark 4) are resolved with their dependencies from Maven Central once (Spark's Ivy, as
``configure_spark_with_delta_pip`` has Spark do, or ``mvn`` when Ivy cannot) into a cache
folder, and the log store (``_java/LinkLocalLogStore.java``) is compiled once with ``javac``;
later sessions start from the cache without the network. Every failure on
that path raises :class:`~sbdelta.exceptions.SparkSetupError` saying what is missing and how to fix
it, instead of a Py4J stack trace.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
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

__all__ = ["get_spark", "LazySpark", "remote_mode", "local_spark_conf", "spark_submit_args",
           "ensure_jars", "ensure_artifact", "ensure_class_archive", "java_home",
           "LOGSTORE_CLASS", "scala_binary_version", "delta_coordinate"]

LOGSTORE_CLASS = "io.sbdelta.storage.LinkLocalLogStore"
LOGSTORE_CONF = "spark.delta.logStore.file.impl"
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
    "spark.driver.defaultJavaOptions": "-XX:+UseParallelGC",
}
_DELTA_SESSION_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # Delta 4.2+ refuses to read versions older than delta.deletedFileRetentionDuration (7 days).
    # A lagging partition's receive reads the inbox's change feed from its frontier, which
    # compaction never vacuums away (sbdelta.maintenance): a partition days behind must still
    # receive. Older Delta releases do not know the setting and ignore it.
    "spark.databricks.delta.vacuum.enforceTimeTravelWithinDeletedFileRetentionDuration": "false",
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
            "Java was not found: Spark 3.5 needs a Java 8, 11 or 17 runtime, Spark 4 Java 17 "
            "or 21. Install one "
            "(Debian/Ubuntu: apt-get install openjdk-17-jdk-headless) or set JAVA_HOME.")
    return str(Path(os.path.realpath(java)).parents[1])


def java_home() -> str:
    """The Java installation Spark runs on (``$JAVA_HOME``, else the ``java`` on the PATH).

    Raises:
        SparkSetupError: there is no Java.
    """
    return _java_home()


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


def _pyspark_jars_dir() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def _pyspark_version() -> str:
    try:
        return metadata.version("pyspark")
    except metadata.PackageNotFoundError:  # pragma: no cover - a source build of Spark
        import pyspark

        return pyspark.__version__


def scala_binary_version() -> str:
    """The Scala binary version of the installed Spark: that of the ``scala-library`` jar pyspark
    ships (``2.12`` for Spark 3.5, ``2.13`` for Spark 4), else guessed from pyspark's version."""
    for jar in sorted(_pyspark_jars_dir().glob("scala-library-*.jar")):
        match = re.match(r"scala-library-(\d+\.\d+)\.", jar.name)
        if match:
            return match.group(1)
    return "2.13" if int(_pyspark_version().split(".")[0]) >= 4 else "2.12"


def delta_coordinate(delta_version: str, spark_version: str, scala: str) -> str:
    """The Maven coordinate of Delta's Spark jar, named as ``delta.pip_utils.
    configure_spark_with_delta_pip`` names it: ``io.delta:delta-spark_<scala>:<version>`` up
    to delta-spark 4.0, ``io.delta:delta-spark_<spark major.minor>_<scala>:<version>`` from 4.1
    (one build per Spark minor release)."""
    numbers = [int(n) for n in re.findall(r"\d+", delta_version)[:2]] + [0, 0]
    if tuple(numbers[:2]) >= (4, 1):
        spark_minor = ".".join(spark_version.split(".")[:2])
        return f"io.delta:delta-spark_{spark_minor}_{scala}:{delta_version}"
    return f"io.delta:delta-spark_{scala}:{delta_version}"


_JAR_VERSION = re.compile(r"^(?P<artifact>.+?)-(?P<version>\d[^-]*(?:-[^-]+)*)\.jar$")


def _artifact_of(jar_name: str) -> str:
    """``antlr4-runtime`` for ``antlr4-runtime-4.13.1.jar`` (or Ivy's
    ``org.antlr_antlr4-runtime-4.13.1.jar``)."""
    match = _JAR_VERSION.match(jar_name)
    artifact = match.group("artifact") if match else jar_name[:-4]
    return artifact.split("_", 1)[1] if "_" in artifact and "." in artifact.split("_", 1)[0] \
        else artifact


def _beyond_spark(jars: List[Path]) -> List[Path]:
    """The resolved jars Spark does not ship itself (another version of a jar Spark has on its
    class path would only conflict with it: Spark's own wins)."""
    shipped = {_artifact_of(j.name) for j in _pyspark_jars_dir().glob("*.jar")}
    return [j for j in jars if j.name.endswith(".jar") and _artifact_of(j.name) not in shipped]


def _resolve_with_ivy(coord: str, ivy_dir: Path) -> List[Path]:
    """Resolve ``coord`` and its dependencies with the Ivy that spark-submit uses (as
    ``configure_spark_with_delta_pip``'s ``spark.jars.packages`` does), in a short-lived child
    process; return the jars it retrieved."""
    retrieved = ivy_dir / "jars"
    shutil.rmtree(retrieved, ignore_errors=True)  # only this resolution's jars are left in it
    code = (
        "import sys\n"
        "from pyspark import SparkConf\n"
        "from pyspark.java_gateway import launch_gateway\n"
        "conf = SparkConf().set('spark.jars.packages', sys.argv[1])"
        ".set('spark.jars.ivy', sys.argv[2])\n"
        "launch_gateway(conf).shutdown()\n"
    )
    env = dict(os.environ, JAVA_HOME=_java_home())
    proc = subprocess.run([sys.executable, "-c", code, coord, str(ivy_dir)],
                          capture_output=True, text=True, timeout=600, env=env)
    if proc.returncode != 0:
        raise RuntimeError((proc.stdout + proc.stderr)[-3000:])
    return sorted(retrieved.glob("*.jar"))


_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>io.sbdelta</groupId><artifactId>delta-jars</artifactId><version>0</version>
  <dependencies><dependency>
    <groupId>{group}</groupId><artifactId>{artifact}</artifactId><version>{version}</version>
  </dependency></dependencies>
</project>
"""


def _resolve_with_maven(coord: str, dest: Path) -> List[Path]:
    """The same resolution with ``mvn`` (its settings: proxies, mirrors), runtime scope."""
    mvn = shutil.which("mvn")
    if not mvn:
        raise RuntimeError("mvn is not installed")
    group, artifact, version = coord.split(":")
    with tempfile.TemporaryDirectory() as tmp:
        pom = Path(tmp, "pom.xml")
        pom.write_text(_POM.format(group=group, artifact=artifact, version=version))
        out = Path(tmp, "jars")
        proc = subprocess.run([mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
                               "-DincludeScope=runtime", f"-DoutputDirectory={out}"],
                              capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError((proc.stdout + proc.stderr)[-3000:])
        copied = []
        for jar in sorted(out.glob("*.jar")):
            shutil.copy2(jar, dest / jar.name)
            copied.append(dest / jar.name)
        return copied


_NETWORK_SIGNS = ("UnknownHostException", "ConnectException", "Connection refused",
                  "Network is unreachable", "timed out", "SocketTimeoutException",
                  "No route to host", "Could not transfer", "SSLHandshakeException")
_MANIFEST = "jars.txt"


def _failure_reason(errors: List[str], coord: str, pyspark_version: str, scala: str) -> str:
    text = "\n".join(errors)
    if any(sign in text for sign in _NETWORK_SIGNS):
        return ("Maven Central could not be reached: connect once to the network (the jars are "
                "cached for later sessions)")
    missing = "not found" in text or "UNRESOLVED" in text or "Could not find artifact" in text
    if missing and not coord.startswith("io.delta:"):
        return f"Maven Central has no {coord} (it is built for that pyspark release only)"
    if missing:
        return (f"Maven Central has no {coord}: is this delta-spark release built for pyspark "
                f"{pyspark_version} (Scala {scala})? Install the delta-spark that pairs with it "
                "(pip install 'delta-spark' lets pip choose)")
    return "the resolution failed (see the resolvers' output below)"


def ensure_jars() -> List[str]:
    """Return local paths of the Delta jars and the compiled log store, fetching them once.

    The jars are what resolving Delta's Spark artifact for the installed pyspark (Scala
    version and, from delta-spark 4.1, Spark release in its name: :func:`delta_coordinate`)
    with its runtime dependencies gives, less the jars Spark ships: delta-spark and
    delta-storage, and for newer Delta its kernel and whatever those need. They are resolved
    once into ``<cache>/jars/<artifact>-<version>/`` (its ``jars.txt`` lists them); later
    sessions start from there without the network. The compiled log store is last.

    Raises:
        SparkSetupError: Java or javac is missing, or the jars cannot be resolved.
    """
    _java_home()
    version = _delta_version()
    pyspark_version = _pyspark_version()
    scala = scala_binary_version()
    coord = delta_coordinate(version, pyspark_version, scala)
    with _cache_lock():
        jars = _cached_artifact(coord, pyspark_version, scala, expect="delta-spark")
        storage = [j for j in jars if _artifact_of(Path(j).name) == "delta-storage"]
        if not storage:
            raise SparkSetupError(f"resolving {coord} gave no delta-storage jar ("
                                  f"{', '.join(jars)}); remove their folder and run again")
        jars.append(str(_ensure_logstore_jar(storage[0], version)))
    return jars


def ensure_artifact(coord: str) -> List[str]:
    """Local paths of the jars of the Maven artifact ``coord`` (``group:artifact:version``)
    and its runtime dependencies that Spark does not ship, fetched once into the cache as
    :func:`ensure_jars` fetches Delta's (none when Spark ships the artifact itself).

    Raises:
        SparkSetupError: Java is missing, or the artifact cannot be resolved.
    """
    _java_home()
    with _cache_lock():
        return _cached_artifact(coord, _pyspark_version(), scala_binary_version())


def _cached_artifact(coord: str, pyspark_version: str, scala: str,
                     expect: Optional[str] = None) -> List[str]:
    """:func:`ensure_artifact` under the cache lock; ``expect``: an artifact that must be
    among the jars resolved."""
    jar_dir = cache_dir() / "jars" / "-".join(coord.split(":")[1:])
    manifest = jar_dir / _MANIFEST
    names = manifest.read_text().split() if manifest.is_file() else None
    if names is None or not all((jar_dir / n).is_file() for n in names):
        names = _resolve(coord, jar_dir, pyspark_version, scala, expect)
        partial = manifest.with_suffix(".partial")
        partial.write_text("".join(f"{n}\n" for n in names))
        os.replace(partial, manifest)
    return [str(jar_dir / n) for n in names]


def _resolve(coord: str, jar_dir: Path, pyspark_version: str, scala: str,
             expect: Optional[str] = None) -> List[str]:
    """Resolve ``coord`` into ``jar_dir`` (Spark's Ivy, else mvn); the names of its jars."""
    jar_dir.mkdir(parents=True, exist_ok=True)
    errors: List[str] = []
    resolved: List[Path] = []
    try:
        for jar in _beyond_spark(_resolve_with_ivy(coord, cache_dir() / "ivy")):
            shutil.copy2(jar, jar_dir / jar.name)
            resolved.append(jar_dir / jar.name)
    except Exception as exc:  # noqa: BLE001 - any failure falls through to maven
        errors.append(f"Ivy: {str(exc).strip()[-800:]}")
        try:
            with tempfile.TemporaryDirectory(dir=jar_dir) as tmp:
                for jar in _beyond_spark(_resolve_with_maven(coord, Path(tmp))):
                    shutil.copy2(jar, jar_dir / jar.name)
                    resolved.append(jar_dir / jar.name)
        except Exception as mvn_exc:  # noqa: BLE001
            errors.append(f"Maven: {str(mvn_exc).strip()[-800:]}")
            raise SparkSetupError(
                f"cannot fetch {'the Delta jars' if expect == 'delta-spark' else 'the jars'} "
                f"{coord} (for pyspark {pyspark_version}, Scala {scala}) and their "
                "dependencies with "
                f"Spark's Ivy or mvn: {_failure_reason(errors, coord, pyspark_version, scala)}. "
                f"Or copy the jars into {jar_dir} by hand and list them in "
                f"{jar_dir / _MANIFEST}. " + " | ".join(errors)) from None
    if expect and not any(_artifact_of(j.name).startswith(expect) for j in resolved):
        raise SparkSetupError(f"resolving {coord} gave no {expect} jar: "
                              f"{', '.join(j.name for j in resolved) or 'nothing'}")
    return [j.name for j in resolved]


def _class_file_release(jar: str) -> int:
    """The Java release the classes of ``jar`` were compiled for (8 for class version 52)."""
    with zipfile.ZipFile(jar) as archive:
        for name in archive.namelist():
            if name.endswith(".class") and not name.startswith("META-INF/"):
                header = archive.read(name)[:8]
                return max(8, int.from_bytes(header[6:8], "big") - 44)
    return 8


def _ensure_logstore_jar(storage_jar: str, version: str) -> Path:
    source = _JAVA_SOURCE.read_bytes()
    # Compiled for the release delta-storage itself targets (Java 8 for Delta 3, 17 for Delta 4),
    # so that it loads in every JVM that can load Delta.
    release = _class_file_release(storage_jar)
    digest = hashlib.sha256(source + f"{version}/{release}/{Path(storage_jar).name}".encode()) \
        .hexdigest()[:16]
    target = cache_dir() / "logstore" / f"sbdelta-logstore-{digest}.jar"
    if target.is_file():
        return target
    javac = shutil.which("javac", path=str(Path(_java_home(), "bin"))) or shutil.which("javac")
    if not javac:
        raise SparkSetupError(
            "javac was not found: sbdelta compiles its multi-process-safe Delta log store for "
            "local namespaces once. Install a JDK (not only a JRE), e.g. apt-get install "
            "openjdk-17-jdk-headless, or set JAVA_HOME to one.")
    hadoop_api = sorted(_pyspark_jars_dir().glob("hadoop-client-api-*.jar"))
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        classpath = os.pathsep.join([storage_jar, *map(str, hadoop_api)])
        proc = subprocess.run([javac, "--release", str(release), "-nowarn", "-d", tmp, "-cp",
                               classpath, str(_JAVA_SOURCE)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise SparkSetupError(f"compiling the sbdelta log store (javac --release {release}, "
                                  f"against {Path(storage_jar).name}) failed: "
                                  f"{proc.stderr[-1500:]}")
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
        jars = jars[:-1]  # the log store is last
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


def remote_mode() -> bool:
    """Whether pyspark makes Spark Connect sessions in this process (a remote session was
    made, or ``$SPARK_REMOTE`` asks for one, as on Databricks serverless)."""
    return "SPARK_CONNECT_MODE_ENABLED" in os.environ or "SPARK_REMOTE" in os.environ


def _has_delta(spark) -> bool:
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        return True  # the server's settings: Delta is its business (Databricks has it)
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
    if remote_mode():  # Spark Connect: the server has its own settings (and Delta)
        return SparkSession.builder.getOrCreate()
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

    def known(self):
        """The session given or started so far (None when neither: nothing is started)."""
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
    for logger in ("org.apache.spark.executor.Executor",
                   "org.apache.spark.scheduler.TaskSetManager"):
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(logger, level)
