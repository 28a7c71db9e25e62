"""Storage faults (issue 18, "Storage faults"): real faults, not mocks, on real Delta tables in
local namespaces, through the public API.

- the namespace folder made read-only mid-run (a read-only bind mount): writes raise
  ServiceBusAuthorizationError saying the file system is read-only; reads go on;
- a disk that fills (a small tmpfs): ServiceBusQuotaExceededError; every acknowledged send is
  counted, no failed one is;
- a table file removed: a data file the log names (ServiceBusCommunicationError naming it;
  restored), a commit file in the middle of a table's log (ServiceBusCommunicationError: a gap
  in its versions; restored) and a whole table (MessagingEntityNotFoundError, also for a client opening the
  entity afresh: the table is not recreated empty; the queue is deleted and created again);
- a commit that hangs past its timeout: a receiver process whose settlement commit is held in
  the very system call that publishes it (strace holds the hard link of
  ``_delta_log/<v>.json#1``) past its lock's end (RECV-3: the lock is the timeout); another
  receiver takes and completes the message meanwhile, and when the hang ends the stale commit
  is refused (MessageLockLostError, SETTLE-1/RECV-4) instead of completing it twice.

Each fault gives a specific sbdelta error whose message says what happened, leaves nothing
half-written (runtime counts equal the messages then received; ``*.json#1`` commit staging
files and activity scratch files are gone), and the next send, receive and complete after the
repair work. Single-message calls run on delta-rs (engine "auto"); ``send_dataframe``, a Spark
client and the expiry sweep (``sbdelta.maintenance.expire_messages``) are the Spark paths.
Mounts need root (CAP_SYS_ADMIN) and strace needs ptrace: without them a test is skipped
with the reason. Time is a ManualClock (a file-backed clock across processes).
"""

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone

import pytest

from sbdelta import ManualClock, ServiceBusClient, ServiceBusMessage
from sbdelta.exceptions import (MessageLockLostError, MessagingEntityNotFoundError,
                                ServiceBusAuthorizationError, ServiceBusCommunicationError,
                                ServiceBusQuotaExceededError)
from sbdelta.maintenance import expire_messages
from sbdelta.management import ServiceBusAdministrationClient

from ..conftest import ROOT
from ..workers.clock_worker import FileClock

START = datetime(2030, 1, 1, tzinfo=timezone.utc)
LOCK = timedelta(seconds=30)


# -- real mechanisms ----------------------------------------------------------------------------
def _run(*argv):
    return subprocess.run(list(argv), capture_output=True, text=True)


def _unmount(path):
    if _run("umount", path).returncode != 0:
        _run("umount", "-l", path)  # something still holds a file open: detach it anyway


@contextmanager
def read_only(path):
    """``path`` read-only for everyone (root included) while the block runs: a read-only bind
    mount of the folder on itself."""
    done = _run("mount", "--bind", path, path)
    if done.returncode != 0:
        pytest.skip(f"no bind mount here ({done.stderr.strip()}): needs root with CAP_SYS_ADMIN")
    try:
        done = _run("mount", "-o", "remount,ro,bind", path)
        if done.returncode != 0:
            pytest.skip(f"cannot remount read-only ({done.stderr.strip()})")
        yield
    finally:
        _unmount(path)


@contextmanager
def small_disk(path, megabytes):
    """A tmpfs of ``megabytes`` mounted at ``path`` (created) while the block runs."""
    os.makedirs(path)
    done = _run("mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", path)
    if done.returncode != 0:
        pytest.skip(f"no tmpfs mount here ({done.stderr.strip()}): needs root with CAP_SYS_ADMIN")
    try:
        yield
    finally:
        _unmount(path)


def _fill(path):
    """Write a filler file in ``path`` until its file system has no byte left; return it (None
    when not even an empty file fits any more)."""
    filler = os.path.join(path, "filler")
    try:
        out = open(filler, "wb", buffering=0)
    except OSError as exc:
        assert exc.errno == 28  # ENOSPC: full already
        return None
    with out:
        try:
            while True:
                out.write(b"\0" * (1 << 16))
        except OSError as exc:
            assert exc.errno == 28  # ENOSPC
        try:
            while True:  # the last few bytes the 64 KiB writes could not take
                out.write(b"\0")
        except OSError:
            pass
    return filler


def _leftovers(root):
    """Files a failed operation would leave half-written: Delta commit staging files
    (``<v>.json#1``, published by a hard link) and activity scratch files."""
    found = []
    for folder, _, files in os.walk(root):
        found += [os.path.join(folder, f) for f in files if "#" in f or f.endswith(".tmp")]
    return found


def _counts(admin, queue):
    props = admin.get_queue_runtime_properties(queue)
    return props.active_message_count, props.dead_letter_message_count, props.total_message_count


def _clients(ns, spark, clock):
    """(admin, client on engine auto: delta-rs for single messages, client on Spark)."""
    return (ServiceBusAdministrationClient(ns, spark=spark, clock=clock),
            ServiceBusClient(ns, spark=spark, clock=clock),
            ServiceBusClient(ns, spark=spark, clock=clock, engine="spark"))


def _check_repaired(ns, admin, sender, receiver, held, others):
    """After a repair: nothing half-written, the counts are the held and ``others`` messages,
    the held locks complete, a new send goes through and each message is received once."""
    assert _leftovers(ns) == []
    total = len(held) + len(others)
    assert _counts(admin, "q") == (total, 0, total)
    for message in held:
        receiver.complete_message(message)
    sender.send_messages(ServiceBusMessage("after"))
    assert _drain(receiver, len(others) + 1) == sorted(others + ["after"])


def _drain(receiver, expected):
    """Receive and complete until ``expected`` messages came; their bodies, sorted."""
    got = []
    for _ in range(10):
        batch = receiver.receive_messages(50)
        for m in batch:
            receiver.complete_message(m)
        got += [str(m) for m in batch]
        if len(got) >= expected or not batch:
            break
    return sorted(got)


# -- 1. a read-only namespace mid-run ----------------------------------------------------------
def test_issue18_a_namespace_made_read_only_mid_run_refuses_writes_then_works_when_writable(
        spark, tmp_path):
    """Issue 18, storage faults 1 (SEND-1, SETTLE-1, TTL-6): the namespace folder becomes
    read-only between calls. Sends (delta-rs and Spark), a PeekLock receive, a complete and the
    expiry sweep raise ServiceBusAuthorizationError saying the file system is read-only;
    runtime counts and peeks still read. Nothing was half-written: the counts are those of
    before. Writable again, the held lock completes, sends and the sweep work, and every
    acknowledged message is received exactly once."""
    ns, clock = str(tmp_path / "ns"), ManualClock(START)
    admin, client, _ = _clients(ns, spark, clock)
    admin.create_queue("q", lock_duration=LOCK)
    sender, receiver = client.get_queue_sender("q"), client.get_queue_receiver("q", max_wait_time=0)
    sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(4)]
                         + [ServiceBusMessage("short", time_to_live=timedelta(seconds=10))])
    held = receiver.receive_messages(2)
    assert [str(m) for m in held] == ["m0", "m1"]
    frame = spark.createDataFrame([("df",)], "body string")
    before = _counts(admin, "q")
    assert before == (5, 0, 5)

    with read_only(ns):
        with pytest.raises(OSError):  # the fault is real: root cannot write either
            open(os.path.join(ns, "probe"), "w").close()
        says = "read-only"
        with pytest.raises(ServiceBusAuthorizationError, match=says):
            sender.send_messages(ServiceBusMessage("lost-1"))
        with pytest.raises(ServiceBusAuthorizationError, match=says):
            receiver.receive_messages(1)
        with pytest.raises(ServiceBusAuthorizationError, match=says) as completing:
            receiver.complete_message(held[0])
        assert "Read-only file system" in str(completing.value)  # the storage's own words
        with pytest.raises(ServiceBusAuthorizationError, match=says):
            sender.send_dataframe(frame)
        clock.advance(timedelta(seconds=11))  # "short" expires: the sweep has work to write
        with pytest.raises(ServiceBusAuthorizationError, match=says):
            expire_messages(ns, clock=clock, spark=spark)
        assert _counts(admin, "q") == before  # reads go on
        assert len(receiver.peek_messages(10, sequence_number=0)) == 5

    assert _counts(admin, "q") == before  # nothing half-written
    assert _leftovers(ns) == []
    receiver.complete_message(held[0])  # the lock outlived the fault (11 s of 30)
    sender.send_messages(ServiceBusMessage("after"))
    assert expire_messages(ns, clock=clock, spark=spark).totals()["expired_dropped"] == 1
    receiver.complete_message(held[1])
    assert _counts(admin, "q") == (3, 0, 3)
    assert _drain(receiver, 3) == ["after", "m2", "m3"]
    assert _counts(admin, "q") == (0, 0, 0)


# -- 2. a disk that fills -----------------------------------------------------------------------
def test_issue18_a_disk_that_fills_refuses_with_quota_exceeded_and_loses_no_acknowledged_send(
        spark, tmp_path):
    """Issue 18, storage faults 2 (SEND-1/2, SETTLE-1): the namespace lives on an 8 MiB tmpfs.
    Sends of 48 KiB messages fill it until one raises ServiceBusQuotaExceededError saying the
    storage is full; every send acknowledged before is counted and none after. With the disk
    quite full, a receive, a complete, send_dataframe (Spark) and the expiry sweep raise it
    too, and nothing is half-written. Space freed (the tmpfs grown), the held lock completes
    and every acknowledged message is received exactly once."""
    ns, clock = str(tmp_path / "ns"), ManualClock(START)
    with small_disk(ns, 8):
        admin, client, _ = _clients(ns, spark, clock)
        admin.create_queue("q", lock_duration=LOCK)
        sender, receiver = client.get_queue_sender("q"), client.get_queue_receiver("q",
                                                                                   max_wait_time=0)
        sender.send_messages([ServiceBusMessage("first"),
                              ServiceBusMessage("short", time_to_live=timedelta(seconds=10))])
        held = receiver.receive_messages(1)
        assert [str(m) for m in held] == ["first"]

        acknowledged = []
        with pytest.raises(ServiceBusQuotaExceededError, match="storage is full") as full:
            for i in range(400):  # 400 x 48 KiB is more than the disk holds
                sender.send_messages(ServiceBusMessage(os.urandom(48 << 10), message_id=f"b{i}"))
                acknowledged.append(f"b{i}")
        assert "No space left on device" in str(full.value)
        assert len(acknowledged) > 10
        assert _counts(admin, "q") == (len(acknowledged) + 2, 0, len(acknowledged) + 2)

        filler = _fill(ns)  # what the failed send left free goes too
        frame = spark.createDataFrame([("df",)], "body string")
        with pytest.raises(ServiceBusQuotaExceededError, match="storage is full"):
            sender.send_messages(ServiceBusMessage("tiny"))
        with pytest.raises(ServiceBusQuotaExceededError, match="storage is full"):
            receiver.receive_messages(1)
        with pytest.raises(ServiceBusQuotaExceededError, match="storage is full"):
            receiver.complete_message(held[0])
        with pytest.raises(ServiceBusQuotaExceededError, match="storage is full"):
            sender.send_dataframe(frame)
        clock.advance(timedelta(seconds=11))  # "short" expires: the sweep has work to write
        with pytest.raises(ServiceBusQuotaExceededError, match="storage is full"):
            expire_messages(ns, clock=clock, spark=spark)
        expected = len(acknowledged) + 2
        assert _counts(admin, "q") == (expected, 0, expected)

        if filler is not None:
            os.remove(filler)  # the repair: space freed, and the disk grown
        assert _run("mount", "-o", "remount,size=64m", ns).returncode == 0
        assert _leftovers(ns) == []
        assert _counts(admin, "q") == (expected, 0, expected)  # nothing half-written
        receiver.complete_message(held[0])
        sender.send_messages(ServiceBusMessage("after", message_id="after"))
        assert expire_messages(ns, clock=clock, spark=spark).totals()["expired_dropped"] == 1
        rest = len(acknowledged) + 1
        assert _counts(admin, "q") == (rest, 0, rest)
        got = []
        for _ in range(20):
            batch = receiver.receive_messages(100)
            receiver.complete_messages(batch)
            got += [m.message_id for m in batch]
            if not batch:
                break
        assert sorted(got) == sorted(acknowledged + ["after"])  # each exactly once
        assert _counts(admin, "q") == (0, 0, 0)


# -- 3. a table file removed --------------------------------------------------------------------
def test_issue18_a_lost_data_file_is_named_and_restoring_it_repairs_the_queue(spark, tmp_path):
    """Issue 18, storage faults 3a: a data file that the messages table's Delta log names is
    removed (the storage lost it). Receives (delta-rs and Spark), a complete, peeks, runtime
    counts and the expiry sweep raise ServiceBusCommunicationError naming the file; sends,
    which do not read that table, still work and are kept. The file restored, the held lock
    completes and every acknowledged message is received exactly once."""
    ns, clock = str(tmp_path / "ns"), ManualClock(START)
    admin, client, on_spark = _clients(ns, spark, clock)
    admin.create_queue("q", lock_duration=LOCK)
    sender, receiver = client.get_queue_sender("q"), client.get_queue_receiver("q", max_wait_time=0)
    sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(4)])
    held = receiver.receive_messages(2)
    (lost,) = glob.glob(os.path.join(ns, "queues", "q", "*", "messages", "pid=0", "*.parquet"))
    shutil.move(lost, str(tmp_path / "lost.parquet"))
    name = os.path.basename(lost)

    for call in (lambda: receiver.receive_messages(1),
                 lambda: receiver.complete_message(held[0]),
                 lambda: receiver.peek_messages(10, sequence_number=0),
                 lambda: admin.get_queue_runtime_properties("q"),
                 lambda: on_spark.get_queue_receiver("q", max_wait_time=0).receive_messages(1),
                 lambda: expire_messages(ns, clock=clock, spark=spark)):
        with pytest.raises(ServiceBusCommunicationError, match="is missing from the storage") \
                as missing:
            call()
        assert name in str(missing.value)
    sender.send_messages(ServiceBusMessage("during"))  # the inbox is whole: acknowledged
    assert sender.send_dataframe(spark.createDataFrame([("df",)], "body string")) == 1

    shutil.move(str(tmp_path / "lost.parquet"), lost)  # the repair: the file restored
    _check_repaired(ns, admin, sender, receiver, held, ["df", "during", "m2", "m3"])
    assert _counts(admin, "q") == (0, 0, 0)


def test_issue18_a_lost_log_commit_file_is_named_and_restoring_it_repairs_the_queue(
        spark, tmp_path):
    """Issue 18, storage faults 3c: a commit file in the middle of the inbox table's Delta log
    (``_delta_log/<v>.json``, no checkpoint past it) is removed: the log has a gap. Sends and
    receives (delta-rs and Spark), peeks, runtime counts and the expiry sweep raise
    ServiceBusCommunicationError saying a commit file is missing, instead of Delta's raw error;
    nothing is written meanwhile. The file restored, the held lock completes and every
    acknowledged message is received exactly once."""
    ns, clock = str(tmp_path / "ns"), ManualClock(START)
    admin, client, on_spark = _clients(ns, spark, clock)
    admin.create_queue("q", lock_duration=LOCK)
    sender, receiver = client.get_queue_sender("q"), client.get_queue_receiver("q", max_wait_time=0)
    for i in range(4):
        sender.send_messages(ServiceBusMessage(f"m{i}"))  # inbox versions 1..4
    held = receiver.receive_messages(2)
    (log,) = glob.glob(os.path.join(ns, "queues", "q", "*", "inbox", "_delta_log"))
    assert not glob.glob(os.path.join(log, "*.checkpoint.parquet"))
    lost = os.path.join(log, f"{2:020d}.json")
    shutil.move(lost, str(tmp_path / "lost.json"))

    says = "a commit file of the table's Delta log is missing"
    for call in (lambda: sender.send_messages(ServiceBusMessage("refused")),
                 lambda: on_spark.get_queue_sender("q").send_dataframe(
                     spark.createDataFrame([("refused",)], "body string")),
                 lambda: receiver.receive_messages(1),
                 lambda: on_spark.get_queue_receiver("q", max_wait_time=0).receive_messages(1),
                 lambda: receiver.peek_messages(10, sequence_number=0),
                 lambda: admin.get_queue_runtime_properties("q"),
                 lambda: expire_messages(ns, clock=clock, spark=spark)):
        with pytest.raises(ServiceBusCommunicationError, match=says):
            call()
    assert sorted(f for f in os.listdir(log) if f.endswith(".json")) == \
        [f"{v:020d}.json" for v in (0, 1, 3, 4)]  # nothing committed meanwhile

    shutil.move(str(tmp_path / "lost.json"), lost)  # the repair: the file restored
    _check_repaired(ns, admin, sender, receiver, held, ["m2", "m3"])
    assert _counts(admin, "q") == (0, 0, 0)


def test_issue18_a_removed_table_is_entity_not_found_not_recreated_empty(spark, tmp_path):
    """Issue 18, storage faults 3b: a queue's inbox table is removed. Sends (delta-rs and
    Spark) and receives raise MessagingEntityNotFoundError saying the table was removed, and so
    does a client opening the queue afresh (on Spark, and the expiry sweep): the table is not
    made again empty, which would lose its messages without a word and number new ones behind
    the receivers' frontiers. The queue deleted and created again, sends, receives and
    completes work and the counts are those of the new queue."""
    ns, clock = str(tmp_path / "ns"), ManualClock(START)
    admin, client, _ = _clients(ns, spark, clock)
    admin.create_queue("q", lock_duration=LOCK)
    sender, receiver = client.get_queue_sender("q"), client.get_queue_receiver("q", max_wait_time=0)
    sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(4)])
    held = receiver.receive_messages(2)
    (inbox,) = glob.glob(os.path.join(ns, "queues", "q", "*", "inbox"))
    shutil.rmtree(inbox)

    says = "removed outside sbdelta"
    with pytest.raises(MessagingEntityNotFoundError, match=says):
        sender.send_messages(ServiceBusMessage("lost"))
    with pytest.raises(MessagingEntityNotFoundError, match=says):
        sender.send_dataframe(spark.createDataFrame([("df",)], "body string"))
    # The receive above registered m2 and m3 ahead (free, in the whole messages table): a
    # receive asking for more than they are reads the inbox, and raises, locking nothing.
    with pytest.raises(MessagingEntityNotFoundError, match=says):
        receiver.receive_messages(3)
    assert [str(m) for m in receiver.receive_messages(2)] == ["m2", "m3"]  # none was locked
    fresh = ServiceBusClient(ns, spark=spark, clock=clock, engine="spark")
    with pytest.raises(MessagingEntityNotFoundError, match="not made again empty"):
        fresh.get_queue_receiver("q", max_wait_time=0).receive_messages(1)
    with pytest.raises(MessagingEntityNotFoundError, match="not made again empty"):
        expire_messages(ns, clock=clock, spark=spark)
    assert not os.path.exists(inbox)  # nobody made an empty one
    receiver.complete_message(held[0])  # the messages table is whole: the held lock completes

    admin.delete_queue("q")  # the repair: the queue made again
    admin.create_queue("q", lock_duration=LOCK)
    assert _counts(admin, "q") == (0, 0, 0)
    with pytest.raises(MessageLockLostError):  # the old queue's lock went with it
        receiver.complete_message(held[1])
    sender.send_messages([ServiceBusMessage("a"), ServiceBusMessage("b")])
    assert fresh.get_queue_sender("q").send_dataframe(
        spark.createDataFrame([("c",)], "body string")) == 1
    assert _counts(admin, "q") == (3, 0, 3)
    assert _drain(receiver, 3) == ["a", "b", "c"]
    assert _counts(admin, "q") == (0, 0, 0)
    assert _leftovers(ns) == []


def test_issue18_a_table_removed_from_a_queue_never_used_is_not_made_again_empty_either(
        spark, tmp_path):
    """Issue 18, storage faults 3b: a queue created and never used (no commit after its
    creation, no client activity) loses its messages table. Opening it (delta-rs and Spark)
    raises MessagingEntityNotFoundError: the folder's mark says its tables were all made
    once, so the table was removed, not left unmade. A queue whose creator stopped half way
    (no mark; a table missing) has the table made when a client opens it, and works."""
    ns, clock = str(tmp_path / "ns"), ManualClock(START)
    admin, _, _ = _clients(ns, spark, clock)
    admin.create_queue("q", lock_duration=LOCK)
    admin.create_queue("half", lock_duration=LOCK)
    (folder,) = glob.glob(os.path.join(ns, "queues", "q", "*"))
    assert not os.path.exists(os.path.join(folder, "_activity"))  # the mark alone decides
    shutil.rmtree(os.path.join(folder, "messages"))
    (half,) = glob.glob(os.path.join(ns, "queues", "half", "*"))
    os.remove(os.path.join(half, "_tables_made"))
    shutil.rmtree(os.path.join(half, "messages"))

    for engine in ("auto", "spark"):
        fresh = ServiceBusClient(ns, spark=spark, clock=clock, engine=engine)
        with pytest.raises(MessagingEntityNotFoundError, match="not made again empty"):
            fresh.get_queue_receiver("q", max_wait_time=0).receive_messages(1)
    assert not os.path.exists(os.path.join(folder, "messages"))

    client = ServiceBusClient(ns, spark=spark, clock=clock)
    client.get_queue_sender("half").send_messages(ServiceBusMessage("a"))
    assert _drain(client.get_queue_receiver("half", max_wait_time=0), 1) == ["a"]
    assert os.path.exists(os.path.join(half, "_tables_made"))
    assert _counts(admin, "half") == (0, 0, 0)


# -- 4. a commit that hangs past its timeout ----------------------------------------------------
def _set_time(folder, moment):
    with open(os.path.join(folder, "time.tmp"), "w") as handle:
        handle.write(moment.isoformat())
    os.replace(os.path.join(folder, "time.tmp"), os.path.join(folder, "time"))


def _wait(check, what, seconds=60):
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_issue18_a_settlement_commit_hung_past_its_lock_is_refused_when_it_resumes(
        spark, tmp_path):
    """Issue 18, storage faults 4 (RECV-3, RECV-4, SETTLE-1): a receiver process completes its
    message and the storage hangs the commit in the system call that publishes it (strace
    delays the hard link of ``_delta_log/<v>.json#1`` to ``<v>.json``; the commit is written,
    not yet visible). sbdelta has no commit timeout: the lock duration is the timeout that
    matters. It passes; another receiver is not blocked (Delta takes no storage lock): it
    receives the message (delivery count 2) and completes it. When the hang ends, the stale
    commit finds its version taken, re-plans, and raises MessageLockLostError: the message is
    not completed twice, no staging file is left, and the hung process's next send works."""
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed: it holds the commit's system call")
    ns, folder = str(tmp_path / "ns"), str(tmp_path / "worker")
    os.makedirs(folder)
    _set_time(folder, START)
    clock = FileClock(os.path.join(folder, "time"), timedelta(0), timedelta(seconds=1))
    admin, client, _ = _clients(ns, spark, clock)
    admin.create_queue("q", lock_duration=LOCK)
    client.get_queue_sender("q").send_messages(ServiceBusMessage("job"))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    worker = subprocess.Popen([sys.executable, "-m", "tests.workers.hang_worker", ns, "q",
                               folder], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    tracer = None
    try:
        _wait(lambda: os.path.exists(os.path.join(folder, "got")), "the worker's receive")
        with open(os.path.join(folder, "got")) as handle:
            got = json.load(handle)
        assert got["body"] == ["job"] and got["delivery_count"] == [1]
        tracer = subprocess.Popen(
            ["strace", "-f", "-p", str(worker.pid), "-o", os.path.join(folder, "strace.log"),
             "-e", "trace=linkat", "-e", "inject=linkat:delay_enter=600s"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        _wait(lambda: _attached(tracer, worker.pid), "strace to attach", 30)
        open(os.path.join(folder, "go"), "w").close()
        log_dir = glob.glob(os.path.join(ns, "queues", "q", "*", "messages", "_delta_log"))[0]
        _wait(lambda: glob.glob(os.path.join(log_dir, "*.json#1")), "the hung commit")
        (staged,) = glob.glob(os.path.join(log_dir, "*.json#1"))
        assert not os.path.exists(staged[:-2])  # written, not published: the commit hangs

        _set_time(folder, START + 2 * LOCK)  # past the hung holder's lock
        receiver = client.get_queue_receiver("q", max_wait_time=0)
        again = receiver.receive_messages(1)  # not blocked by the hung commit
        assert [(str(m), m.delivery_count) for m in again] == [("job", 2)]
        receiver.complete_message(again[0])
        assert os.path.exists(staged[:-2])  # that version is someone else's now
        assert not os.path.exists(os.path.join(folder, "result"))  # still hung
        assert _counts(admin, "q") == (0, 0, 0)

        tracer.send_signal(signal.SIGINT)  # the hang ends: strace lets the call go on
        tracer.wait(timeout=30)
        _wait(lambda: os.path.exists(os.path.join(folder, "result")), "the hung complete")
        with open(os.path.join(folder, "result")) as handle:
            result = json.load(handle)
        assert result["outcome"] == "MessageLockLostError", result
        assert "the lock on message" in result["message"] and "is lost" in result["message"]
        assert _counts(admin, "q") == (0, 0, 0)  # completed once, not twice
        with open(os.path.join(folder, "after"), "w") as handle:
            handle.write("after")
        _wait(lambda: os.path.exists(os.path.join(folder, "done")), "the worker's next send")
        assert worker.wait(timeout=30) == 0, worker.stderr.read()[-2000:]
        assert _counts(admin, "q") == (1, 0, 1)
        assert _drain(receiver, 1) == ["after"]
        assert _leftovers(ns) == []
    finally:
        for proc in (tracer, worker):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=30)


def _attached(tracer, pid):
    """Whether strace traces every thread of ``pid`` (its TracerPid is set on each); skips the
    test when strace gave up (ptrace refused)."""
    if tracer.poll() is not None:
        pytest.skip(f"strace cannot trace the worker: {tracer.stderr.read().strip()[-300:]}")
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
        for task in tasks:
            with open(f"/proc/{pid}/task/{task}/status") as handle:
                tracer = [line for line in handle if line.startswith("TracerPid:")]
            if not tracer or tracer[0].split()[1] == "0":
                return False
        return True
    except OSError:
        return False
