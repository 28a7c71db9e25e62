"""Publish the same Delta log versions as other processes at the same instant.

Usage: python -m tests.workers.logstore_race LOG_DIR WORKER CLASS ROUNDS READY_DIR
Each round v, every worker waits for the shared start time + v * 30 ms (plus up to 4 ms of jitter), then writes version v
through the given LogStore class. Prints {"worker": w, "won": [versions it was told it won]}.
"""

import json
import os
import random
import sys
import time

from pyspark import SparkConf
from pyspark.java_gateway import launch_gateway

from sbdelta._spark import ensure_jars


def main() -> None:
    log_dir, worker, cls, rounds, ready_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3], \
        int(sys.argv[4]), sys.argv[5]
    gateway = launch_gateway(SparkConf().set("spark.jars", ",".join(ensure_jars())))
    jvm = gateway.jvm
    conf = jvm.org.apache.hadoop.conf.Configuration()
    store = getattr(jvm, cls)(conf)
    open(os.path.join(ready_dir, f"ready-{worker}"), "w").close()
    go = os.path.join(ready_dir, "go")
    while not os.path.exists(go):
        time.sleep(0.01)
    start = float(open(go).read())
    won = []
    for v in range(rounds):
        target = start + v * 0.03 + random.uniform(0, 0.004)  # jitter: no fixed phase
        time.sleep(max(0.0, target - time.time() - 0.003))
        while time.time() < target:  # spin only the last few ms: 3 spinners share 2 cores
            pass
        path = jvm.org.apache.hadoop.fs.Path(f"file:{log_dir}/{v:020d}.json")
        lines = jvm.java.util.ArrayList()
        lines.add(json.dumps({"worker": worker, "version": v}))
        try:
            store.write(path, lines.iterator(), False, conf)
            won.append(v)
        except Exception as exc:  # noqa: BLE001
            if "FileAlreadyExistsException" not in str(exc):
                raise
    print(json.dumps({"worker": worker, "won": won}), flush=True)
    gateway.shutdown()


if __name__ == "__main__":
    main()
