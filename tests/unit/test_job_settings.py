"""The maintenance jobs' shared settings (jobs/common.py): where the engine comes from, and a
bad one refused before the job does anything. No Spark: the job's action only records what it
was given."""

import json

import pytest

from sbdelta.jobs import common


def _run(argv, monkeypatch, env=None):
    monkeypatch.delenv("SBDELTA_ENGINE", raising=False)
    for name, value in (env or {}).items():
        monkeypatch.setenv(name, value)
    seen = {}

    def action(args, settings):
        import os

        seen["engine"] = os.environ.get("SBDELTA_ENGINE")
        seen["namespace"] = args.namespace
        return "ok"

    code = common.run("expire_messages", "Expire.", action, argv=argv)
    return code, seen


def test_engine_flag_wins_over_the_conf_file_which_wins_over_the_environment(
        monkeypatch, tmp_path):
    conf = tmp_path / "m.json"
    conf.write_text(json.dumps({"namespace": str(tmp_path / "ns"), "engine": "spark"}))
    assert _run(["--conf", str(conf), "--engine", "delta-rs"], monkeypatch,
                {"SBDELTA_ENGINE": "auto"}) == (0, {"engine": "delta-rs",
                                                      "namespace": str(tmp_path / "ns")})
    assert _run(["--conf", str(conf)], monkeypatch, {"SBDELTA_ENGINE": "auto"})[1][
        "engine"] == "spark"
    conf.write_text(json.dumps({"namespace": str(tmp_path / "ns")}))
    assert _run(["--conf", str(conf)], monkeypatch, {"SBDELTA_ENGINE": "spark"})[1][
        "engine"] == "spark"
    assert _run(["--conf", str(conf)], monkeypatch)[1]["engine"] is None  # sbdelta: auto


def test_an_unknown_engine_is_refused_before_the_job_runs(monkeypatch, tmp_path, capsys):
    conf = tmp_path / "m.json"
    conf.write_text(json.dumps({"engine": "rust"}))
    with pytest.raises(SystemExit) as refused:
        _run(["--conf", str(conf)], monkeypatch)
    assert "engine 'rust'" in str(refused.value) and "auto, spark, delta-rs" in str(refused.value)
    with pytest.raises(SystemExit):
        _run(["--engine", "rust"], monkeypatch)
    assert "invalid choice: 'rust'" in capsys.readouterr().err
