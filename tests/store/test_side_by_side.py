"""run_side_by_side: Spark operations from several threads carry the caller's job group (so a
syphon thread's stop cancels its appends, PAIR-8), all run, and the first error is raised."""

import threading

import pytest

from sbdelta._threads import run_side_by_side


def test_pair_8_tasks_carry_the_callers_job_group_and_all_run(spark):
    sc = spark.sparkContext
    sc.setJobGroup("sbdelta-test-group", "side by side", interruptOnCancel=True)
    try:
        seen, threads = [], set()

        def task(i):
            def run():
                threads.add(threading.get_ident())
                seen.append(sc.getLocalProperty("spark.jobGroup.id"))
                return spark.range(i).count()
            return run

        assert run_side_by_side(spark, [task(i) for i in range(4)], workers=2) == [0, 1, 2, 3]
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
        sc.setLocalProperty("spark.job.description", None)
        sc.setLocalProperty("spark.job.interruptOnCancel", None)
    assert seen == ["sbdelta-test-group"] * 4
    assert threading.get_ident() not in threads  # they ran in other threads


def test_every_task_runs_and_the_first_error_is_raised(spark):
    ran = []

    def ok(i):
        return lambda: ran.append(i)

    def fail(message):
        def run():
            ran.append(message)
            raise ValueError(message)
        return run

    with pytest.raises(ValueError, match="first"):
        run_side_by_side(spark, [fail("first"), ok(1), fail("second"), ok(2)], workers=2)
    assert sorted(map(str, ran)) == ["1", "2", "first", "second"]


def test_one_task_runs_in_the_callers_thread(spark):
    me = threading.get_ident()
    assert run_side_by_side(spark, [threading.get_ident]) == [me]
    assert run_side_by_side(spark, [threading.get_ident, threading.get_ident],
                            workers=1) == [me, me]
