"""What sbdelta does differently on a Spark Connect session (``SparkSession.builder.remote``:
Databricks serverless compute and shared access mode clusters): the process has no JVM, so
the Delta log is read through SQL (:mod:`sbdelta._store.history`) and files through Spark;
docs/engines.md, "Spark Connect"."""

from __future__ import annotations

from ._spark import LazySpark, remote_mode, session_of

__all__ = ["is_connect", "prepare_connect", "CONNECT_ANALYZER_ITERATIONS"]


def is_connect(spark) -> bool:
    """Whether ``spark`` is a Spark Connect session (``SparkSession.builder.remote``): no JVM
    in this process, so sbdelta reads Delta logs through SQL or delta-rs. A
    :class:`~sbdelta._spark.LazySpark` not started yet is when pyspark is in remote mode (the
    session it will take is a Spark Connect one); nothing is started to answer."""
    if isinstance(spark, LazySpark):
        spark = spark.known()
        if spark is None:  # the session it will use: a Spark Connect one in remote mode
            return remote_mode()
    return spark is not None and type(spark).__module__.startswith("pyspark.sql.connect")


#: Spark Connect resolves a whole plan at once (a classic session resolves each step as it is
#: added): a subscription's rule Columns, nested lambdas, need more rounds than Spark's 100.
CONNECT_ANALYZER_ITERATIONS = 1000
_ANALYZER_ITERATIONS = "spark.sql.analyzer.maxIterations"


def prepare_connect(spark) -> None:
    """Give a Spark Connect session the analyzer rounds sbdelta's plans need (at least
    :data:`CONNECT_ANALYZER_ITERATIONS`; a larger setting is kept). Nothing for a classic
    session."""
    if not is_connect(spark):
        return
    session = session_of(spark)
    current = session.conf.get(_ANALYZER_ITERATIONS, None)
    if current is None or int(current) < CONNECT_ANALYZER_ITERATIONS:
        session.conf.set(_ANALYZER_ITERATIONS, str(CONNECT_ANALYZER_ITERATIONS))
