"""The sbdelta command line (in-process, sharing the test run's Spark session)."""

import json
from pathlib import Path

from click.testing import CliRunner

from sbdelta.cli import main

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "conf" / "namespace.json")


def test_apply_list_show_round_trip(spark, namespace):
    runner = CliRunner()
    first = runner.invoke(main, ["apply", SAMPLE, "-n", namespace])
    assert first.exit_code == 0, first.output
    assert "created" in first.output and "0 updated" in first.output

    again = runner.invoke(main, ["apply", SAMPLE, "-n", namespace])
    assert again.exit_code == 0, again.output
    assert "0 created, 0 updated" in again.output  # idempotent

    listed = runner.invoke(main, ["list", "-n", namespace, "--json"])
    kinds = {(row["kind"], row["name"]) for row in json.loads(listed.output)}
    assert ("queue", "orders") in kinds and ("subscription", "events/errors") in kinds

    shown = runner.invoke(main, ["show", "queue", "orders", "-n", namespace])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["lock_duration"] == "PT1M"
    sub = runner.invoke(main, ["show", "subscription", "events/all", "-n", namespace])
    assert json.loads(sub.output)["topic_name"] == "events"


def test_errors_are_one_line_with_exit_status_1(spark, namespace, tmp_path):
    runner = CliRunner()
    missing = runner.invoke(main, ["show", "queue", "nope", "-n", namespace])
    assert missing.exit_code == 1
    assert "MessagingEntityNotFoundError: queue 'nope' does not exist" in missing.output
    bad = tmp_path / "bad.json"
    bad.write_text('{"UserConfig": {"Namespaces": [{"Name": "x", "Queues": [{"Name": "q", '
                   '"Properties": {"LockDuration": "PT9M"}}]}]}}')
    failed = runner.invoke(main, ["apply", str(bad), "-n", namespace])
    assert failed.exit_code == 1
    assert "LockDuration" in failed.output
    assert not Path(namespace, "_sbdelta").exists()  # nothing written
