"""The contention workload's raw delta-rs shapes (bench/raw_contention.py, issue 16): each runs
its processes on a plain table and counts what they committed. Timings are never asserted: only
that the counts are the table's own (every row counted as completed is gone from it, every
append is in it) and that the figures are numbers."""

import math
import types

import pytest


@pytest.mark.parametrize("shape, prefetch", [("ceiling", 1), ("workload", 1), ("workload", 5)])
def test_raw_contention_shapes_count_the_commits_they_make(tmp_path, shape, prefetch):
    from deltalake import DeltaTable

    from bench import raw_contention

    work = tmp_path / "work"
    work.mkdir()
    bench = types.SimpleNamespace(work=work, raw_path=lambda name: work / name)
    rows = 2 * raw_contention.BLOCK
    got = raw_contention.run(bench, shape, 1.0, prefetch, rows)

    assert got["shape"] == shape and got["prefill"] == rows
    assert math.isfinite(got["completed_per_second"]) and got["completed_per_second"] > 0
    assert 0 < got["completed"] <= rows and got["conflicts"] >= 0
    left = DeltaTable(str(work / f"raw-contention-{shape}")).to_pyarrow_table(columns=["id"])
    ids = set(left.column("id").to_pylist())
    assert len(ids) == left.num_rows == rows - got["completed"] + got["appended"]
    assert len([i for i in ids if i >= raw_contention.APPENDED_FROM]) == got["appended"]
    if shape == "ceiling":
        assert got["appended"] == 0
