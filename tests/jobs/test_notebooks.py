"""Each notebook in notebooks/ runs locally, top to bottom, from another working directory, on
a namespace of its own (``$SBDELTA_NAMESPACE``), on the test run's Spark session: what it
shows is checked from the names it leaves behind (issue 17)."""

import runpy
from pathlib import Path


from sbdelta.management import ServiceBusAdministrationClient

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def _run(name, tmp_path, monkeypatch):
    monkeypatch.setenv("SBDELTA_NAMESPACE", str(tmp_path / "ns"))
    monkeypatch.setenv("MPLBACKEND", "Agg")  # plots drawn, not shown
    monkeypatch.chdir(tmp_path)  # any working directory
    return runpy.run_path(str(NOTEBOOKS / name), run_name="__main__")


def test_every_notebook_is_tested():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.py")) == [
        "01_manage_namespace.py", "02_topics.py", "03_send_receive.py", "04_dead_letters.py"]


def test_manage_namespace(spark, tmp_path, monkeypatch):
    out = _run("01_manage_namespace.py", tmp_path, monkeypatch)
    admin = out["admin"]
    assert sorted(q.name for q in admin.list_queues()) == ["orders", "telemetry"]
    assert [s.name for s in admin.list_subscriptions("events")] == ["all"]
    again = admin.apply_config(out["CONFIG"])  # the notebook's config is applied: no change
    assert "0 created, 0 updated" in str(again)


def test_topics(spark, tmp_path, monkeypatch):
    out = _run("02_topics.py", tmp_path, monkeypatch)
    admin = out["admin"]
    # region eu, forwarded; the topic is partitioned and the messages have no partition key,
    # so each lands in a partition round robin: no order between partitions (PART-2, PART-4)
    assert sorted(str(m) for m in out["forwarded"]) == ["o-1", "r-1"]
    assert admin.get_subscription_runtime_properties("orders", "audit").active_message_count == 0


def test_send_receive(spark, tmp_path, monkeypatch):
    out = _run("03_send_receive.py", tmp_path, monkeypatch)
    rp = ServiceBusAdministrationClient(str(tmp_path / "ns"), spark=spark) \
        .get_queue_runtime_properties("work")
    assert rp.active_message_count == 0 and rp.dead_letter_message_count == 0
    assert out["locked"].count() >= 1000  # the DataFrame sent, plus what was abandoned


def test_dead_letters_dashboard_and_resubmission(spark, tmp_path, monkeypatch):
    out = _run("04_dead_letters.py", tmp_path, monkeypatch)
    assert dict(out["by_reason"]) == {"card declined": 4, "bad amount": 2}
    assert out["moved"] == 4
    rp = ServiceBusAdministrationClient(str(tmp_path / "ns"), spark=spark) \
        .get_queue_runtime_properties("payments")
    assert (rp.active_message_count, rp.dead_letter_message_count) == (10, 2)
    assert rp.oldest_message_enqueued_time_utc is not None
    assert [name for name, _ in out["entities"]] == ["payments"]
