"""The bootstrap reports missing Java, javac and jars as sbdelta errors, not Py4J traces."""

import pytest

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
    with pytest.raises(SparkSetupError, match="cannot fetch the Delta jars io.delta:delta-spark"):
        _spark.ensure_jars()


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
