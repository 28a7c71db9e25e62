"""The README's main job (jobs/demo.py) runs end to end and is idempotent."""

from jobs import demo


def test_demo_job_applies_sample_config_then_changes_nothing(spark, namespace, capsys):
    assert demo.main(["--namespace", namespace]) == 0
    first = capsys.readouterr().out
    assert "9 created" in first and "queue        orders" in first
    assert "completed 3 (one commit)" in first and "dead-lettered order-4" in first
    assert "order-3 (delivery 2)" in first
    assert "dead-letter queue     order-4 reason=demo" in first
    assert "counts                active=0 dead_letter=0 scheduled=0 total=0" in first
    # TOPIC-1/TOPIC-4: each subscription gets what its rules match, from one send.
    assert "subscription events/all        got e-1, e-2, e-3" in first
    assert "subscription events/errors     got e-1" in first
    assert "subscription events/billing    got e-3" in first
    assert demo.main(["--namespace", namespace]) == 0
    assert "0 created, 0 updated, 9 unchanged" in capsys.readouterr().out


def test_demo_job_reports_a_bad_config_and_exits_1(spark, namespace, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{ not json")
    assert demo.main(["--namespace", namespace, "--config", str(bad)]) == 1
    assert "demo failed: ConfigurationError" in capsys.readouterr().err
