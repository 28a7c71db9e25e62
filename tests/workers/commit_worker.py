"""A writer that commits many times to one Delta table (appends and MERGEs), through Spark
(sbdelta's log store, or Delta's default one) or through delta-rs (no JVM).

Usage: python -m tests.workers.commit_worker TABLE WORKER_ID COMMITS SAFE(0|1) [spark|delta-rs]
Prints one JSON line: {"worker": id, "appends": n, "merges": n, "conflicts": n}.
:func:`commit_many` runs the same loop in a thread of a process that has a Spark session
already (the test's own: one JVM fewer to start on a 2-core machine).
"""

import json
import sys

from sbdelta._store.delta import RetryPolicy, is_conflict, retry, retry_policy


def _spark_writer(table, worker, safe, spark=None):
    from sbdelta._spark import get_spark

    if spark is None:
        spark = get_spark(conf={"spark.app.name": f"commit-worker-{worker}"},
                          multi_process_safe=safe)

    def commit(i, kind):
        row = spark.createDataFrame([(worker, i, kind)], "worker INT, i INT, kind STRING")
        if kind == "append":
            row.write.format("delta").mode("append").save(table)
            return
        row.createOrReplaceTempView(f"src_{worker}")
        spark.sql(f"MERGE INTO delta.`{table}` t USING src_{worker} s "
                  "ON t.worker = s.worker AND t.i = s.i WHEN NOT MATCHED THEN INSERT *"
                  ).collect()

    return commit


def _delta_rs_writer(table, worker):
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    schema = pa.schema([("worker", pa.int32()), ("i", pa.int32()), ("kind", pa.string())])

    def commit(i, kind):
        row = pa.table({"worker": [worker], "i": [i], "kind": [kind]}, schema=schema)
        if kind == "append":
            write_deltalake(table, row, mode="append")
            return
        (DeltaTable(table).merge(row, "t.worker = s.worker AND t.i = s.i", source_alias="s",
                                 target_alias="t")
         .when_not_matched_insert_all().execute())

    return commit


def commit_many(table, worker, commits, *, engine="spark", safe=True, spark=None) -> dict:
    """``commits`` commits by writer ``worker`` (every third a MERGE, the others appends),
    each retried until it lands; returns the counts the worker prints. ``spark``: commit on
    this session instead of starting one."""
    commit = (_delta_rs_writer(table, worker) if engine == "delta-rs"
              else _spark_writer(table, worker, safe, spark))
    counts = {"worker": worker, "engine": engine, "appends": 0, "merges": 0, "conflicts": 0}
    for i in range(commits):
        kind = "append" if i % 3 else "merge"

        def attempt():
            try:
                return commit(i, kind)
            except Exception as exc:
                if is_conflict(exc):
                    counts["conflicts"] += 1
                raise

        with retry_policy(RetryPolicy(attempts=200, max_seconds=600)):
            retry(attempt, what=f"test {kind}")
        counts["appends" if kind == "append" else "merges"] += 1
    return counts


def main() -> None:
    table, worker, commits, safe = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
    engine = sys.argv[5] if len(sys.argv) > 5 else "spark"
    print(json.dumps(commit_many(table, worker, commits, engine=engine, safe=safe)), flush=True)


if __name__ == "__main__":
    main()
