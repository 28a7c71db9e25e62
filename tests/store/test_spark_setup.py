"""The bootstrap reports missing Java, javac and jars as sbdelta errors, not Py4J traces."""

import pytest

from sbdelta import _jvm_archive as jvm_archive
from sbdelta import _spark
from sbdelta.exceptions import SparkSetupError


def test_missing_java_is_explained(monkeypatch, tmp_path):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SparkSetupError, match="Java was not found.*JAVA_HOME"):
        _spark.ensure_jars()


def test_unresolvable_jars_are_explained(monkeypatch, tmp_path):
    monkeypatch.setenv("SBDELTA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(_spark, "_delta_version", lambda: "0.0.0-does-not-exist")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no mvn fallback beyond what the box has
    with pytest.raises(SparkSetupError, match="cannot fetch the Delta jars io.delta:delta-spark") \
            as caught:
        _spark.ensure_jars()
    # It says what was tried (Scala version, coordinate) and why it failed, not "the network".
    text = str(caught.value)
    assert f"Scala {_spark.scala_binary_version()}" in text
    assert "Maven Central has no io.delta:delta-spark" in text


def test_delta_coordinate_is_the_one_configure_spark_with_delta_pip_names():
    """The jar resolved is the one delta-spark's own pip helper asks Spark for: Scala 2.12 for
    Spark 3.5, 2.13 for Spark 4, and from delta-spark 4.1 the Spark release in the name."""
    from importlib import metadata

    import pyspark
    from delta.pip_utils import configure_spark_with_delta_pip
    from pyspark.sql import SparkSession

    builder = configure_spark_with_delta_pip(SparkSession.Builder())  # a fresh builder
    scala = _spark.scala_binary_version()
    assert scala == ("2.12" if pyspark.__version__.startswith("3.") else "2.13")
    assert builder._options["spark.jars.packages"] == _spark.delta_coordinate(
        metadata.version("delta-spark"), pyspark.__version__, scala)
    assert _spark.delta_coordinate("3.3.2", "3.5.5", "2.12") == "io.delta:delta-spark_2.12:3.3.2"
    assert _spark.delta_coordinate("4.0.1", "4.0.1", "2.13") == "io.delta:delta-spark_2.13:4.0.1"
    assert (_spark.delta_coordinate("4.4.0", "4.1.1", "2.13")
            == "io.delta:delta-spark_4.1_2.13:4.4.0")


def test_resolved_jars_leave_out_what_spark_ships(monkeypatch, tmp_path):
    """Every jar the resolution produced is used except those Spark has on its class path
    already (Ivy names them org_artifact-version.jar, mvn artifact-version.jar)."""
    spark_jars = tmp_path / "spark"
    spark_jars.mkdir()
    for name in ("scala-library-2.13.16.jar", "antlr4-runtime-4.13.1.jar",
                 "spark-core_2.13-4.0.1.jar"):
        (spark_jars / name).write_bytes(b"")
    monkeypatch.setattr(_spark, "_pyspark_jars_dir", lambda: spark_jars)
    resolved = [tmp_path / n for n in (
        "io.delta_delta-spark_4.1_2.13-4.4.0.jar", "io.delta_delta-storage-4.4.0.jar",
        "io.delta_delta-kernel-api-4.4.0.jar", "org.scala-lang_scala-library-2.13.17.jar",
        "org.antlr_antlr4-runtime-4.13.1.jar", "delta-spark_2.13-4.0.1.jar",
        "zstd-jni-1.5.5-4.jar")]
    assert [j.name for j in _spark._beyond_spark(resolved)] == [
        "io.delta_delta-spark_4.1_2.13-4.4.0.jar", "io.delta_delta-storage-4.4.0.jar",
        "io.delta_delta-kernel-api-4.4.0.jar", "delta-spark_2.13-4.0.1.jar",
        "zstd-jni-1.5.5-4.jar"]


def test_jars_come_from_the_cache_without_resolving_again(monkeypatch):
    """A second call finds the jars through the cache's manifest and resolves nothing."""
    first = _spark.ensure_jars()

    def no_network(*args):
        raise AssertionError("resolved again")

    monkeypatch.setattr(_spark, "_resolve", no_network)
    assert _spark.ensure_jars() == first
    assert first[-1].endswith(".jar") and "logstore" in first[-1]
    assert any("delta-storage" in j for j in first) and any("delta-spark" in j for j in first)


def test_existing_session_is_used_as_is(spark):
    assert _spark.get_spark() is spark
    assert _spark.get_spark(spark) is spark


def test_local_conf_layers_defaults_conf_dir_and_overrides(monkeypatch, tmp_path):
    (tmp_path / "spark-local.conf").write_text("# comment\nspark.sql.shuffle.partitions 7\n")
    monkeypatch.setenv("SBDELTA_CONF_DIR", str(tmp_path))
    conf = _spark.local_spark_conf({"spark.app.name": "mine"})
    assert conf["spark.sql.shuffle.partitions"] == "7"
    assert conf["spark.app.name"] == "mine"
    assert conf[_spark.LOGSTORE_CONF] == _spark.LOGSTORE_CLASS
    assert "delta-spark" in conf["spark.jars"]
    with pytest.raises(SparkSetupError, match="no Spark profile 'cluster2'"):
        _spark.local_spark_conf(profile="cluster2")


def test_a_local_session_runs_the_throughput_collector_beside_the_class_archive(spark):
    """The local profile's JVM option (``spark.driver.defaultJavaOptions``) reaches the
    driver: the session's collectors are the parallel (throughput) ones, and the option
    leaves ``spark.driver.extraJavaOptions`` to the class archive and the caller."""
    import os

    conf = _spark.local_spark_conf()
    assert conf["spark.driver.defaultJavaOptions"] == "-XX:+UseParallelGC"
    assert "UseParallelGC" not in conf.get("spark.driver.extraJavaOptions", "")
    if "defaultJavaOptions" in os.environ.get("SBDELTA_TEST_SPARK_CONF", ""):
        return  # the run chose its own options
    beans = spark.sparkContext._jvm.java.lang.management.ManagementFactory \
        .getGarbageCollectorMXBeans()
    names = {beans.get(i).getName() for i in range(beans.size())}
    assert names == {"PS Scavenge", "PS MarkSweep"}, names


def test_java_feature_release_is_read_from_java_version_output():
    assert jvm_archive.java_feature('openjdk version "17.0.15" 2025-04-15') == 17
    assert jvm_archive.java_feature('java version "1.8.0_392"') == 8
    assert jvm_archive.java_feature('openjdk version "11.0.21" 2023-10-17') == 11
    assert jvm_archive.java_feature("no version here") == 0


def test_class_archive_option_joins_the_callers_java_options_unless_they_choose_their_own():
    option = "-XX:SharedArchiveFile=/c/spark.jsa"
    assert jvm_archive.with_java_option(None, option) == option
    assert jvm_archive.with_java_option("-Dx=1", option) == "-Dx=1 " + option
    assert jvm_archive.with_java_option("-Xshare:off", option) == "-Xshare:off"
    assert jvm_archive.with_java_option("-Dx=1", None) == "-Dx=1"


def test_local_conf_starts_from_the_class_archive_once_recorded(monkeypatch, tmp_path):
    """The conf names the archive only when one exists for this JDK and these jars, and
    SBDELTA_CLASS_ARCHIVE=0 leaves it out. (`sbdelta setup` records the real one, which the
    jobs and multi-process tests start every JVM from.)"""
    jars = _spark.ensure_jars()
    monkeypatch.setattr(_spark, "cache_dir", lambda: tmp_path)
    monkeypatch.setattr(_spark, "ensure_jars", lambda: list(jars))
    conf = _spark.local_spark_conf()
    assert jvm_archive.JAVA_OPTIONS_CONF not in conf
    path = jvm_archive.archive_path(tmp_path, _spark._java_home(), conf["spark.jars"].split(","))
    path.parent.mkdir(parents=True)
    path.write_bytes(b"")
    conf = _spark.local_spark_conf({"spark.app.name": "x"})
    if jvm_archive.usable(_spark._java_home()):  # JDK 13+
        assert conf[jvm_archive.JAVA_OPTIONS_CONF] == f"-XX:SharedArchiveFile={path}"
    else:
        assert jvm_archive.JAVA_OPTIONS_CONF not in conf
    monkeypatch.setenv("SBDELTA_CLASS_ARCHIVE", "0")
    assert jvm_archive.JAVA_OPTIONS_CONF not in _spark.local_spark_conf()


def test_the_class_archive_is_keyed_by_the_jdk_the_pyspark_install_and_the_jars(
        monkeypatch, tmp_path):
    """An archive records the class path it was made with: another jar list, another JDK or
    another virtual environment's pyspark (its own jars folder, same version) gets an archive
    of its own, and the same set-up finds the same one."""
    import importlib.util
    from types import SimpleNamespace

    java_home = _spark._java_home()
    jars = ["/opt/a/delta-spark.jar", "/opt/a/delta-storage.jar"]
    path = jvm_archive.archive_path(tmp_path, java_home, jars)
    assert path == jvm_archive.archive_path(tmp_path, java_home, list(jars))
    assert path.parent == tmp_path / "cds" and path.suffix == ".jsa"
    assert jvm_archive.archive_path(tmp_path, java_home, jars[:1]) != path
    assert jvm_archive.archive_path(tmp_path, java_home, [*jars, "/opt/a/x.jar"]) != path
    real_version = jvm_archive._version_of
    monkeypatch.setattr(jvm_archive, "_version_of", lambda name: "9.9.9")  # another Delta
    assert jvm_archive.archive_path(tmp_path, java_home, jars) != path
    monkeypatch.setattr(jvm_archive, "_version_of", real_version)
    other_java = tmp_path / "jdk"  # another JDK: its own java binary (same version text)
    (other_java / "bin").mkdir(parents=True)
    (other_java / "bin" / "java").symlink_to(f"{java_home}/bin/java")
    assert jvm_archive.archive_path(tmp_path, str(other_java), jars) != path
    real_find_spec = importlib.util.find_spec

    def other_venv(name, *args):
        if name == "pyspark":
            return SimpleNamespace(origin=str(tmp_path / "venv2" / "pyspark" / "__init__.py"))
        return real_find_spec(name, *args)

    monkeypatch.setattr(jvm_archive.importlib.util, "find_spec", other_venv)
    assert jvm_archive.archive_path(tmp_path, java_home, jars) != path


def test_checkpoints_are_written_aside_and_renamed_so_other_processes_never_read_half_of_one(
        spark, tmp_path):
    """Delta writes a checkpoint to a temporary file and renames it into place only when the log
    store answers isPartialWriteVisible = true; otherwise it writes the parquet in place and a
    reader in another process (a delta-rs client) can open it before its footer exists."""
    path = str(tmp_path / "t")
    spark.range(3).write.format("delta").option("delta.checkpointInterval", "2").save(path)
    for start in (3, 6):
        spark.range(start, start + 3).write.format("delta").mode("append").save(path)
    jvm = spark.sparkContext._jvm
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
    store = log.store()  # Delta's DelegatingLogStore, handing file: paths to LOGSTORE_CLASS
    assert store.isPartialWriteVisible(log.logPath(), log.newDeltaHadoopConf())
    checkpoint = tmp_path / "t" / "_delta_log" / f"{2:020d}.checkpoint.parquet"
    assert checkpoint.is_file()
    assert not [p.name for p in checkpoint.parent.iterdir() if p.name.endswith(".tmp")]
    from deltalake import DeltaTable
    assert sorted(DeltaTable(path).to_pyarrow_table().column("id").to_pylist()) == list(range(9))


def test_a_local_session_keeps_more_compiled_query_code_than_one_receive_runs(spark):
    """``spark.sql.codegen.cache.maxEntries`` (conf/spark-local.conf): a query's compiled code
    is still there after more than Spark's default 100 other classes were compiled (one
    receive runs 50-100), so running it again compiles nothing."""
    import os

    if "codegen.cache" in os.environ.get("SBDELTA_TEST_SPARK_CONF", ""):
        pytest.skip("the run chose its own codegen cache size")
    # Both profiles keep as many (a static setting: what the session starts with stays).
    for profile in ("local", "cluster"):
        conf = _spark.local_spark_conf(profile=profile)
        assert conf["spark.sql.codegen.cache.maxEntries"] == "1000", profile
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics
    compiled = metrics.METRIC_COMPILATION_TIME()

    def compile_plan(i):
        # A whole-stage class of its own per i (an integer literal is inlined), compiled on
        # the driver when the plan makes its RDD (no job runs).
        spark.range(3).selectExpr(f"id * {i} + 7 AS x")._jdf.queryExecution() \
            .executedPlan().execute()

    compile_plan(10_000)
    before = compiled.getCount()
    for i in range(120):
        compile_plan(i)
    assert compiled.getCount() >= before + 120  # each filler was compiled
    before = compiled.getCount()
    compile_plan(10_000)
    assert compiled.getCount() == before


def test_delta_checksums_are_written_through_the_filesystem_rename(spark, tmp_path):
    """conf/spark-local.conf has Delta write each commit's checksum file through the
    FileSystem-based checkpoint-file manager (a rename in the JVM, where the FileContext one
    ran a ``readlink`` subprocess per file): the checksum of every commit is still written."""
    import os

    if "checkpointFileManagerClass" in os.environ.get("SBDELTA_TEST_SPARK_CONF", ""):
        pytest.skip("the run chose its own checkpoint-file manager")
    assert spark.conf.get("spark.sql.streaming.checkpointFileManagerClass").endswith(
        "FileSystemBasedCheckpointFileManager")
    path = str(tmp_path / "t")
    spark.range(3).write.format("delta").save(path)
    spark.range(2).write.format("delta").mode("append").save(path)
    log = tmp_path / "t" / "_delta_log"
    assert {p.name for p in log.glob("0*.crc")} == {
        "00000000000000000000.crc", "00000000000000000001.crc"}
