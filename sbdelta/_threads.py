"""Spark operations run side by side from one driver: each thread carries the caller's job
group (a classic session) or tags (Spark Connect), so cancelling the caller's work cancels
theirs too (the syphon thread's stop, PAIR-8)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, List, Sequence, TypeVar

from ._connect import is_connect
from ._spark import session_of

__all__ = ["run_side_by_side"]

T = TypeVar("T")


def run_side_by_side(spark, tasks: Sequence[Callable[[], T]], *, workers: int = 4) -> List[T]:
    """Run ``tasks`` (Spark operations on different tables) at most ``workers`` at a time;
    their results in order. Every task runs to its end, whatever another raised; then the
    first error is raised. One task (or ``workers`` 1) runs in the caller's thread.

    A Spark job leaves the driver idle while its tasks run and the executors idle while the
    driver plans and commits the next: two appends side by side overlap one's planning and
    commit with the other's writing."""
    if len(tasks) <= 1 or workers <= 1:
        return [task() for task in tasks]
    carry = _carrier(spark)
    with ThreadPoolExecutor(max_workers=min(workers, len(tasks)),
                            thread_name_prefix="sbdelta-side") as pool:
        futures = [pool.submit(carry(task)) for task in tasks]
        errors = [f.exception() for f in futures]
    first = next((e for e in errors if e is not None), None)
    if first is not None:
        raise first
    return [f.result() for f in futures]


def _carrier(spark) -> Callable[[Callable[[], T]], Callable[[], T]]:
    """What makes a task run in another thread as if in this one: the session's tags (Spark
    Connect; a thread's own) or the JVM thread's local properties (job group, scheduler pool)."""
    if spark is None:
        return lambda task: task
    session = session_of(spark)
    if is_connect(session):
        tags = set(session.getTags())

        def tagged(task):
            def run():
                for tag in tags:
                    session.addTag(tag)
                try:
                    return task()
                finally:
                    for tag in tags:
                        session.removeTag(tag)
            return run
        return tagged
    from pyspark.util import inheritable_thread_target

    return inheritable_thread_target
