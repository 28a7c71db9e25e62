"""``sbdelta stats | peek | send | receive | purge | dlq resubmit | sweep | compact`` (issue 17):
a namespace's messages from a terminal, in-process on the test run's Spark session, and a read
command in a process where Java cannot start (so it must start no JVM)."""

import json
import os
from datetime import datetime, timedelta, timezone

from click.testing import CliRunner

from sbdelta import ServiceBusClient, ServiceBusMessage
from sbdelta.cli import main
from sbdelta.management import ServiceBusAdministrationClient

from ..conftest import run_python


def _run(*args, input=None, code=0):
    result = CliRunner().invoke(main, [str(a) for a in args], input=input)
    assert result.exit_code == code, result.output
    return result.output


def _json(*args, **kwargs):
    return json.loads(_run(*args, "--json", **kwargs))


def _stats(ns):
    return {e["name"]: e for e in _json("stats", "-n", ns)}


def test_send_peek_receive_dead_letter_resubmit_and_purge_a_queue(spark, namespace):
    admin = ServiceBusAdministrationClient(namespace, spark=spark)
    admin.create_queue("q", enable_partitioning=True, lock_duration=timedelta(minutes=5))
    admin.create_topic("t")
    admin.create_subscription("t", "all")
    assert _json("send", "q", "a", "b", "c", "-p", "n=5", "-p", "tag=x", "--subject", "s",
                 "-n", namespace) == {"entity": "queue q", "sent": 3}
    assert "sent 2 message(s) to queue q" in _run("send", "q", "-n", namespace, input="d\ne\n")
    assert _json("send", "t", "to-topic", "-n", namespace)["sent"] == 1
    stats = _stats(namespace)
    assert (stats["q"]["active"], stats["q"]["dead_letter"]) == (5, 0)
    assert stats["q"]["oldest_age_seconds"] >= 0 and stats["q"]["oldest_enqueued_time_utc"]
    assert stats["t/all"]["active"] == 1 and stats["t"]["kind"] == "topic"
    table = _run("stats", "-n", namespace)  # the rich table
    assert "t/all" in table and "oldest active" in table

    peeked = _json("peek", "q", "-c", "10", "-n", namespace)  # every partition, nothing taken
    assert sorted(m["body"] for m in peeked) == ["a", "b", "c", "d", "e"]
    first = next(m for m in peeked if m["body"] == "a")
    assert first["application_properties"] == {"n": 5, "tag": "x"} and first["subject"] == "s"
    assert _stats(namespace)["q"]["active"] == 5

    got = _json("receive", "q", "-c", "2", "-n", namespace)  # completed
    assert len(got) == 2 and all(m["delivery_count"] == 1 for m in got)
    dead = _json("receive", "q", "--settle", "dead-letter", "--reason", "bad", "-n", namespace)
    assert len(dead) == 1
    stats = _stats(namespace)["q"]
    assert (stats["active"], stats["dead_letter"]) == (2, 1)
    (letter,) = _json("peek", "q", "-d", "-n", namespace)
    assert letter["dead_letter_reason"] == "bad" and letter["body"] == dead[0]["body"]

    assert _json("dlq", "resubmit", "q", "--reason", "other", "-n", namespace)[
        "resubmitted"] == 0  # the one dead letter has another reason: left where it is
    assert _stats(namespace)["q"]["dead_letter"] == 1
    assert "resubmitted 1 message(s) from the dead-letter queue of queue q to queue q" in _run(
        "dlq", "resubmit", "q", "--reason", "bad", "-n", namespace)
    stats = _stats(namespace)["q"]
    assert (stats["active"], stats["dead_letter"]) == (3, 0)
    back = [m for m in _json("peek", "q", "-c", "10", "-n", namespace)
            if m["body"] == dead[0]["body"]]
    assert len(back) == 1 and back[0]["message_id"] == dead[0]["message_id"]

    _run("purge", "q", "-n", namespace, input="n\n", code=1)  # not confirmed: Aborted
    assert _stats(namespace)["q"]["active"] == 3
    assert "removed 3 message(s) from queue q" in _run("purge", "q", "-n", namespace,
                                                       input="y\n")
    assert _stats(namespace)["q"]["active"] == 0
    assert _json("purge", "t", "-s", "all", "--yes", "-n", namespace)["removed"] == 1


def test_session_queues_are_read_session_by_session(spark, namespace):
    ServiceBusAdministrationClient(namespace, spark=spark).create_queue(
        "s", requires_session=True)
    _run("send", "s", "a1", "a2", "--session-id", "a", "-n", namespace)
    _run("send", "s", "b1", "--session-id", "b", "-n", namespace)
    assert sorted(m["body"] for m in _json("peek", "s", "-n", namespace)) == ["a1", "a2", "b1"]
    got = _json("receive", "s", "-c", "5", "-n", namespace)
    assert sorted((m["session_id"], m["body"]) for m in got) == [
        ("a", "a1"), ("a", "a2"), ("b", "b1")]
    assert _stats(namespace)["s"]["active"] == 0


def test_bad_input_is_refused_before_anything_is_sent(spark, namespace):
    admin = ServiceBusAdministrationClient(namespace, spark=spark)
    admin.create_queue("q")
    admin.create_topic("t")
    admin.create_subscription("t", "all")
    out = _run("peek", "t", "-n", namespace, code=2)  # a topic: name a subscription
    assert "is a topic" in out and "--subscription" in out
    assert "--to-topic" in _run("dlq", "resubmit", "t", "-s", "all", "-n", namespace, code=2)
    assert "names one message; 2 given" in _run("send", "q", "x", "y", "--message-id", "m",
                                                "-n", namespace, code=2)
    assert "is not KEY=VALUE" in _run("send", "q", "x", "-p", "novalue", "-n", namespace,
                                      code=2)
    assert "--reason goes with --settle dead-letter" in _run(
        "receive", "q", "--reason", "r", "-n", namespace, code=2)
    out = _run("send", "nope", "x", "-n", namespace, code=1)
    assert "MessagingEntityNotFoundError: no queue or topic named 'nope'" in out
    out = _run("send", "q", "x" * (300 * 1024), "-n", namespace, code=1)  # SEND-5
    assert "MessageSizeExceededError" in out
    assert _stats(namespace)["q"]["active"] == 0


def test_sweep_and_compact_run_as_the_jobs_do(spark, namespace):
    ServiceBusAdministrationClient(namespace, spark=spark).create_queue("q")
    _run("send", "q", "a", "-n", namespace)
    swept = _json("sweep", "-n", namespace)
    assert [e["entity"] for e in swept["entities"]] == ["q"]
    compacted = _json("compact", "-e", "q", "--retain-hours", "168", "--dry-run",
                      "-n", namespace)
    assert compacted["dry_run"] is True
    assert "q" in _run("sweep", "--dry-run", "-n", namespace)


def test_read_commands_start_no_jvm(spark, namespace):
    """``sbdelta stats`` and ``peek`` of a queue on a local namespace run through delta-rs: in a
    process where Java cannot start (JAVA_HOME points nowhere, no java on PATH) they answer;
    ``stats`` of a topic too (its scheduled messages, and the size of those not cancelled),
    and of its subscription."""
    admin = ServiceBusAdministrationClient(namespace, spark=spark)
    admin.create_queue("q")
    admin.create_topic("t")
    admin.create_subscription("t", "s")
    _run("send", "q", "a", "b", "-n", namespace)
    kept = [ServiceBusMessage("now"), ServiceBusMessage("soon"), ServiceBusMessage("later")]
    with ServiceBusClient(namespace) as client:
        sender = client.get_topic_sender("t")
        sender.send_messages(kept[:2])
        later = datetime.now(timezone.utc) + timedelta(hours=1)  # the CLI's clock is real
        [cancelled] = sender.schedule_messages(ServiceBusMessage("never"), later)
        sender.schedule_messages(kept[2], later)
        sender.cancel_scheduled_messages(cancelled)
    size = sum(m.size_in_bytes for m in kept)
    expected = {"q": (2, 0, None), "t": (None, 1, size), "t/s": (2, 1, None)}
    env = {"JAVA_HOME": "/nonexistent", "PATH": os.path.dirname(os.sys.executable)}
    for args, check in ((["stats", "-n", namespace, "--json"],
                         lambda out: {e["name"]: (e["active"], e["scheduled"],
                                                  e["size_in_bytes"] if e["kind"] == "topic"
                                                  else None) for e in out} == expected),
                        (["peek", "q", "-n", namespace, "--json"],
                         lambda out: [m["body"] for m in out] == ["a", "b"])):
        proc = run_python("-m", "sbdelta.cli", *args, env=env)
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
        assert check(json.loads(out)), out
    # The control: a command that needs Spark (the sweep) cannot run in that process.
    proc = run_python("-m", "sbdelta.cli", "sweep", "-n", namespace, env=env)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1 and "Java" in out + err, (out, err[-2000:])
