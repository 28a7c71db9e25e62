"""Hosts whose clocks differ (issue 18, RECV-3 across hosts; docs/ARCHITECTURE.md "Whose clock
decides").

A lock ends at the time its holder's clock gave it; another receiver takes the message only
``2 * skew_tolerance`` after that end, by its own clock, so two hosts whose clocks are each
within the tolerance of the storage's never both believe they hold one message. A wall clock
further off than its tolerance is refused before any lock is granted (ClockSkewError).

The clients here share one process, each with its own clock (a shared ManualClock plus an
offset, so no test sleeps through a lock): every decision is the commit condition the
storage evaluates, exactly as between processes.
"""

from datetime import datetime, timedelta, timezone

import pytest

from sbdelta import ManualClock, ServiceBusClient, ServiceBusMessage, SystemClock
from sbdelta._clock import lock_grace
from sbdelta.exceptions import (ClockSkewError, MessageLockLostError,
                                ServiceBusInvalidOperationError, SessionCannotBeLockedError)
from sbdelta.management import ServiceBusAdministrationClient

from ..conftest import START

LOCK = timedelta(seconds=60)
TOLERANCE = timedelta(seconds=30)


class OffsetClock:
    """A host's clock: the shared simulated time plus this host's offset."""

    def __init__(self, base: ManualClock, offset: timedelta, skew_tolerance: timedelta):
        self.base, self.offset, self.skew_tolerance = base, offset, skew_tolerance

    def now(self) -> datetime:
        return self.base.now() + self.offset


class WallClockOff(SystemClock):
    """This host's wall clock, ``offset`` away from true time."""

    def __init__(self, offset: timedelta, **kwargs):
        super().__init__(**kwargs)
        self.offset = offset

    def now(self) -> datetime:
        return super().now() + self.offset


@pytest.fixture
def hosts(spark, tmp_path):
    """(true time, make(offset, tolerance) -> client) on one namespace with a queue "q" and a
    session queue "s", both locking for LOCK."""
    base = ManualClock(START)
    ns = str(tmp_path / "ns")
    admin = ServiceBusAdministrationClient(ns, spark=spark, clock=base)
    admin.create_queue("q", lock_duration=LOCK)
    admin.create_queue("s", lock_duration=LOCK, requires_session=True)
    made = []

    def make(offset, tolerance=TOLERANCE):
        made.append(ServiceBusClient(ns, spark=spark,
                                     clock=OffsetClock(base, offset, tolerance)))
        return made[-1]

    make.ns = ns
    yield base, make
    for client in made:
        client.close()


def test_recv_3_a_host_ahead_does_not_take_a_lock_its_holder_still_believes_it_holds(hosts):
    base, make = hosts
    holder, ahead = make(timedelta(0)), make(timedelta(seconds=25))
    holder.get_queue_sender("q").send_messages([ServiceBusMessage("m1"), ServiceBusMessage("m2")])
    held = holder.get_queue_receiver("q", max_wait_time=0)
    mine = held.receive_messages(2)
    assert sorted(map(str, mine)) == ["m1", "m2"]
    assert {m.locked_until_utc for m in mine} == {START + LOCK}  # by the holder's clock
    theirs = ahead.get_queue_receiver("q", max_wait_time=0)

    base.advance(timedelta(seconds=40))  # the host ahead reads START+65: past the lock's end
    assert theirs.receive_messages(2) == []
    m1, m2 = sorted(mine, key=str)
    held.complete_message(m1)  # still the holder's, and it knows it

    base.advance(timedelta(seconds=20))  # the holder's lock ended by its own clock
    assert theirs.receive_messages(2) == []  # START+85 < START+60 + 2 * tolerance
    base.advance(timedelta(seconds=35))  # the host ahead reads START+120
    (again,) = theirs.receive_messages(2)
    assert str(again) == "m2" and again.delivery_count == 2
    with pytest.raises(MessageLockLostError):
        held.complete_message(m2)
    theirs.complete_message(again)


def test_recv_3_without_a_tolerance_the_host_ahead_takes_a_lock_that_is_still_held(hosts):
    """The failure the tolerance prevents (the control of the test above): clocks 25 s apart
    and told to trust each other exactly."""
    base, make = hosts
    holder = make(timedelta(0), timedelta(0))
    ahead = make(timedelta(seconds=25), timedelta(0))
    holder.get_queue_sender("q").send_messages(ServiceBusMessage("m"))
    (mine,) = holder.get_queue_receiver("q", max_wait_time=0).receive_messages(1)
    base.advance(timedelta(seconds=40))
    (theirs,) = ahead.get_queue_receiver("q", max_wait_time=0).receive_messages(1)
    assert mine.locked_until_utc > base.now()  # the holder's clock: believed held
    assert theirs.sequence_number == mine.sequence_number  # and handed out again


def test_send_4_a_message_from_a_sender_ahead_is_received_at_once_by_a_host_behind(
        hosts, spark):
    """The enqueued time is the sender's clock (SEND-4); only a schedule hides a message, so a
    sender 25 s ahead does not make its messages invisible for 25 s to hosts behind it, in the
    inbox (counted active) or registered (received). A scheduled one waits for its time by the
    receiver's clock (TTL-2)."""
    base, make = hosts
    sender, behind = make(timedelta(seconds=25)), make(timedelta(0))
    ns = make.ns
    sender.get_queue_sender("q").send_messages(ServiceBusMessage("now", partition_key="k"))
    sender.get_queue_sender("q").schedule_messages(
        ServiceBusMessage("later", partition_key="k"), START + timedelta(seconds=50))
    admin = ServiceBusAdministrationClient(ns, spark=spark, clock=base)
    counts = admin.get_queue_runtime_properties("q")
    assert (counts.active_message_count, counts.scheduled_message_count) == (1, 1)
    receiver = behind.get_queue_receiver("q", max_wait_time=0)
    (got,) = receiver.receive_messages(5)
    assert str(got) == "now" and got.enqueued_time_utc == START + timedelta(seconds=25)
    receiver.complete_message(got)
    base.advance(timedelta(seconds=49))
    assert receiver.receive_messages(5) == []  # START+49 by the receiver's clock
    base.advance(timedelta(seconds=1))
    assert [str(m) for m in receiver.receive_messages(5)] == ["later"]


def test_sess_2_a_host_ahead_does_not_take_a_session_its_holder_still_holds(hosts):
    base, make = hosts
    holder, ahead = make(timedelta(0)), make(timedelta(seconds=25))
    holder.get_queue_sender("s").send_messages(
        [ServiceBusMessage(f"m{i}", session_id="x") for i in range(2)])
    mine = holder.get_queue_receiver("s", session_id="x", max_wait_time=0)
    assert [str(m) for m in mine.receive_messages(1)] == ["m0"]
    base.advance(timedelta(seconds=40))  # START+65 for the host ahead
    with pytest.raises(SessionCannotBeLockedError):
        ahead.get_queue_receiver("s", session_id="x", max_wait_time=0).receive_messages(1)
    base.advance(timedelta(seconds=55))  # START+120 for the host ahead: the grace is over
    theirs = ahead.get_queue_receiver("s", session_id="x", max_wait_time=0)
    assert [str(m) for m in theirs.receive_messages(2)] == ["m0", "m1"]


def test_sess_2_a_session_given_up_is_taken_at_once_without_the_grace(hosts):
    """Closing a session receiver releases its lock: nobody can still believe they hold it,
    so the next receiver (here on the host ahead) takes it without waiting the grace."""
    base, make = hosts
    holder, ahead = make(timedelta(0)), make(timedelta(seconds=25))
    holder.get_queue_sender("s").send_messages(ServiceBusMessage("m", session_id="y"))
    with holder.get_queue_receiver("s", session_id="y", max_wait_time=0) as mine:
        (m,) = mine.receive_messages(1)
    base.advance(timedelta(seconds=1))
    (again,) = ahead.get_queue_receiver("s", session_id="y", max_wait_time=0).receive_messages(1)
    assert again.sequence_number == m.sequence_number


def test_recv_3_a_wall_clock_off_by_more_than_its_tolerance_is_refused_before_locking(
        spark, tmp_path):
    ns = str(tmp_path / "ns")
    ServiceBusAdministrationClient(ns, spark=spark).create_queue("q")
    with ServiceBusClient(ns, spark=spark) as fine:  # SystemClock, 1 s tolerance
        fine.get_queue_sender("q").send_messages(ServiceBusMessage("m"))
    for offset, side in ((timedelta(seconds=60), "ahead of"), (-timedelta(seconds=60), "behind")):
        with ServiceBusClient(ns, spark=spark, clock=WallClockOff(offset)) as off:
            with pytest.raises(ClockSkewError) as refused:
                off.get_queue_receiver("q", max_wait_time=0).receive_messages(1)
        text = str(refused.value)
        assert "clock is 60." in text and side in text and "skew_tolerance of 1 s" in text
        assert "NTP" in text
    with ServiceBusClient(ns, spark=spark) as fine:  # nothing was locked by the refused ones
        receiver = fine.get_queue_receiver("q", max_wait_time=0)
        (m,) = receiver.receive_messages(1)
        assert m.delivery_count == 1
        receiver.complete_message(m)
    tolerant = WallClockOff(timedelta(seconds=60), skew_tolerance=timedelta(seconds=90))
    with ServiceBusClient(ns, spark=spark, clock=tolerant) as off:
        off.get_queue_sender("q").send_messages(ServiceBusMessage("n"))
        (n,) = off.get_queue_receiver("q", max_wait_time=0).receive_messages(1)
        assert str(n) == "n"


@pytest.mark.parametrize("bad", [timedelta(minutes=6), timedelta(seconds=-1), "1s", 1])
def test_a_skew_tolerance_out_of_range_is_refused_when_the_clock_is_made(bad):
    with pytest.raises(ServiceBusInvalidOperationError, match="skew_tolerance=.*from 0 to 5 min"):
        SystemClock(skew_tolerance=bad)
    with pytest.raises(ServiceBusInvalidOperationError, match="skew_tolerance"):
        ManualClock(START, skew_tolerance=bad)


def test_a_custom_clock_with_a_bad_tolerance_is_refused_when_the_client_is_made(spark, tmp_path):
    clock = OffsetClock(ManualClock(START), timedelta(0), timedelta(hours=1))
    with pytest.raises(ServiceBusInvalidOperationError, match="skew_tolerance"):
        ServiceBusClient(str(tmp_path / "ns"), spark=spark, clock=clock)
    assert not (tmp_path / "ns").exists()


def test_the_grace_is_twice_the_tolerance_and_nothing_for_a_simulated_clock():
    assert lock_grace(SystemClock()) == timedelta(seconds=2)
    assert lock_grace(ManualClock(START)) == timedelta(0)
    assert lock_grace(object()) == timedelta(0)
    assert lock_grace(SystemClock(skew_tolerance=timedelta(seconds=5))) == timedelta(seconds=10)
    assert datetime.now(timezone.utc) - SystemClock().now() < timedelta(seconds=5)


@pytest.mark.parametrize("through", ["local files", "hadoop file system"])
def test_recv_3_the_clock_check_measures_the_storage_clock_and_leaves_no_probe(
        spark, tmp_path, monkeypatch, through):
    """The skew is this host's clock minus the storage's time of a probe write, through the
    local file API or (as on a cloud namespace, abfss://, s3a://, gs://) Hadoop's file system
    of the namespace; the probe is removed either way."""
    from sbdelta._namespace import Namespace

    if through == "hadoop file system":  # the branch a non-local namespace takes
        monkeypatch.setattr(Namespace, "is_local", property(lambda self: False))
    for offset in (timedelta(0), timedelta(seconds=60), -timedelta(seconds=60)):
        ns = Namespace(str(tmp_path / "ns"), spark=spark, clock=WallClockOff(offset))
        skew = ns.clock_skew()
        # The storage stamps whole seconds on some file systems: within 2 s of the offset.
        assert abs((skew - offset).total_seconds()) < 2, (offset, skew)
    probes = tmp_path / "ns" / "_sbdelta" / "clock"
    assert not probes.exists() or not [p for p in probes.iterdir()
                                        if not p.name.startswith(".")], list(probes.iterdir())
