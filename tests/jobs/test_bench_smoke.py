"""The benchmark harness (bench/, issue 5) still runs: tiny mode, on the test session.

Timings are never asserted: only that every workload produced numeric figures, that each one
with a baseline has a numeric ratio (a RabbitMQ baseline may instead say "not available"), that
the contention run saw no message held by two valid locks, and that the JSON and PNG exist.
"""

import json
import math


def _number(value):
    return isinstance(value, (int, float)) and math.isfinite(value)


def test_bench_tiny_mode_writes_every_workload_figure_ratio_and_plot(spark, tmp_path):
    from bench.harness import WORKLOADS, run

    out = tmp_path / "results"
    doc = run("tiny", out_dir=out, spark=spark, work_dir=tmp_path / "work", echo=print)

    saved = json.loads((out / "latest-tiny.json").read_text())
    assert saved["mode"] == "tiny" and saved["workloads"].keys() == doc["workloads"].keys()
    assert set(saved["workloads"]) == set(WORKLOADS)
    for key in ("cpu_count", "ram_gb", "os", "python", "spark", "delta_spark"):
        assert saved["machine"][key], key
    assert saved["parameters"]["reps"] >= 1
    for name, workload in saved["workloads"].items():
        rows = workload["rows"]
        assert rows, name
        for row in rows:
            assert _number(row["sbdelta"]), (name, row["case"])
            if row["baseline"] is not None:
                assert _number(row["baseline"]) and _number(row["ratio"]), (name, row["case"])
            elif row["workload"] != "contention":  # conflicts and the lock proof have none
                assert "RabbitMQ" in row["baseline_name"], row
                assert row["baseline_note"].startswith("not available"), row
        if name not in ("contention",):
            assert any(_number(r["ratio"]) for r in rows), name
    proof = [r for r in saved["workloads"]["contention"]["rows"]
             if r["case"] == "messages held by two valid locks"][0]
    assert proof["sbdelta"] == 0 and proof["params"]["completed_twice"] == 0
    assert proof["params"]["locks_checked"] > 0
    assert (out / "latest-tiny.png").stat().st_size > 10_000
    assert len(list(out.glob("tiny-*.json"))) == 1
    assert "send_dataframe" in saved["table"]
