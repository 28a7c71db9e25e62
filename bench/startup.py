"""JVM start-up of a local sbdelta session: session, first job, first Delta write (seconds).

    .venv/bin/python -m bench.startup                           # with the class-data archive
    SBDELTA_CLASS_ARCHIVE=0 .venv/bin/python -m bench.startup   # without it

Run each a few times on a quiet machine; docs/ARCHITECTURE.md (Spark bootstrap) has figures.
"""

import tempfile
import time


def main() -> None:
    started = time.monotonic()
    from sbdelta._spark import get_spark

    spark = get_spark()
    session = time.monotonic()
    spark.range(1).collect()
    job = time.monotonic()
    with tempfile.TemporaryDirectory() as folder:
        spark.range(3).write.format("delta").save(folder + "/t")
    write = time.monotonic()
    print(f"session {session - started:.1f} s, first job {job - session:.1f} s, first Delta "
          f"write {write - job:.1f} s, total {write - started:.1f} s")


if __name__ == "__main__":
    main()
