"""A separate process that commits many times to one Delta table (appends and MERGEs).

Usage: python -m tests.workers.commit_worker TABLE WORKER_ID COMMITS SAFE(0|1)
Prints one JSON line: {"worker": id, "appends": n, "merges": n, "conflicts": n}.
"""

import json
import sys

from sbdelta._spark import get_spark
from sbdelta._store.delta import RetryPolicy, is_conflict, retry, retry_policy


def main() -> None:
    table, worker, commits, safe = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
    spark = get_spark(conf={"spark.app.name": f"commit-worker-{worker}"},
                      multi_process_safe=safe)
    counts = {"worker": worker, "appends": 0, "merges": 0, "conflicts": 0}
    for i in range(commits):
        row = spark.createDataFrame([(worker, i, "append" if i % 3 else "merge")],
                                    "worker INT, i INT, kind STRING")
        if i % 3:
            row.write.format("delta").mode("append").save(table)
            counts["appends"] += 1
        else:
            row.createOrReplaceTempView(f"src_{worker}")

            def merge():
                try:
                    return spark.sql(
                        f"MERGE INTO delta.`{table}` t USING src_{worker} s "
                        "ON t.worker = s.worker AND t.i = s.i WHEN NOT MATCHED THEN INSERT *"
                    ).collect()
                except Exception as exc:
                    if is_conflict(exc):
                        counts["conflicts"] += 1
                    raise

            with retry_policy(RetryPolicy(attempts=200, max_seconds=600)):
                retry(merge, what="test merge")
            counts["merges"] += 1
    print(json.dumps(counts), flush=True)


if __name__ == "__main__":
    main()
