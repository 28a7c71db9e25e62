"""The invariant checker of the crash trials: what the tables must hold after a kill -9.

Checked through what a user sees (peeks of the queue and its dead-letter queue, the runtime
counts, receives), after each trial:

1. nothing present twice: no message id twice in the queue, its dead-letter queue or both
   (and, where the operation moves messages between entities, across them); no sequence number
   twice;
2. nothing lost: every message the setup put in and every acknowledged send or schedule is
   present, unless a call that removes it (complete, cancel, a ReceiveAndDelete receive) was
   begun; a ReceiveAndDelete receive in flight may take at most its batch unjournaled;
3. acknowledged calls took effect: completed, cancelled and received-and-deleted messages are
   gone, dead-lettered ones are in the dead-letter queue, deferred ones are deferred; nothing
   is dead-lettered that no call (or expiry) asked for;
4. counts consistent with contents: the runtime properties equal what the peeks show;
5. the entity still usable: an hour later (every lock of the killed process expired) a receiver
   drains it, no message twice, then a new message goes through send, receive and complete, and
   every count is 0. Messages delivered again after the lost lock are counted (``redelivered``).
"""

from collections import Counter
from typing import Dict, List, Set, Tuple

from sbdelta import ManualClock, ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from sbdelta._message import ServiceBusMessageState
from sbdelta.exceptions import MessagingEntityNotFoundError
from sbdelta.management import ServiceBusAdministrationClient

from ..workers.crash_worker import BATCH, DESTINATION, QUEUE, SUBSCRIPTION, TOPIC, peek_all
from .trials import LATER, Trial, backlog_queues, now_plus

#: Operations whose removed messages are gone for good (SETTLE-1, RECV-2, SCHED-3).
REMOVING = {"complete", "cancel", "receive_and_delete"}


def receiver_of(client, setup, queue: str = QUEUE, **kwargs):
    """A receiver of the trial's entity: the queue, or the subscription of a topic trial
    (looking once per receive unless ``max_wait_time`` is given)."""
    kwargs.setdefault("max_wait_time", 0)
    if setup is not None and setup.subscription:
        return client.get_subscription_receiver(*setup.subscription, **kwargs)
    return client.get_queue_receiver(queue, **kwargs)


def peek_entity(client, setup, queue: str = QUEUE) -> List:
    """Every message of the trial's entity a peek shows (a session queue session by session:
    SESS-1; each session receiver locks its session, so the client's clock must be past the
    killed worker's session lock)."""
    if setup is None or not setup.sessions:
        return peek_all(receiver_of(client, setup, queue))
    found = []
    for session in setup.sessions:
        with client.get_queue_receiver(queue, session_id=session, max_wait_time=0) as receiver:
            found += peek_all(receiver)
    return found


def runtime_properties(namespace: str, setup, queue: str = QUEUE, clock=None):
    admin = ServiceBusAdministrationClient(namespace, clock=clock)
    if setup is not None and setup.subscription:
        return admin.get_subscription_runtime_properties(*setup.subscription)
    return admin.get_queue_runtime_properties(queue)


class Journal:
    """The worker's calls: acknowledged (``done``), begun (``begin``, done or not) and failed
    (the call raised: it must have written nothing)."""

    def __init__(self, records: List[dict]):
        self.done: Dict[str, Set[str]] = {}
        self.begun: Dict[str, Set[str]] = {}
        self.failed: Dict[str, Set[str]] = {}
        self.in_flight = None
        for r in records:
            if r["ev"] == "begin":
                self.begun.setdefault(r["op"], set()).update(r["ids"])
                self.in_flight = r
            elif r["ev"] in ("done", "failed"):
                getattr(self, r["ev"]).setdefault(r["op"], set()).update(r["ids"])
                self.in_flight = None

    def acked(self, op) -> Set[str]:
        return self.done.get(op, set())

    def started(self, op) -> Set[str]:
        return self.begun.get(op, set())


def view(namespace: str, queue: str, clock=None, setup=None
         ) -> Tuple[Dict[str, object], Dict[str, object]]:
    """(messages by id in ``queue`` (or the trial's subscription), messages by id in its
    dead-letter queue), asserting that no id and no sequence number shows twice."""
    if setup is not None and setup.sessions:
        # A session queue is peeked session by session (SESS-1), each session receiver
        # locking its session: an hour on, when the killed worker's session lock ran out.
        clock = ManualClock(now_plus(3600))
    with ServiceBusClient(namespace, clock=clock) as client:
        main = peek_entity(client, setup, queue)
        dead = peek_all(receiver_of(client, setup, queue,
                                    sub_queue=ServiceBusSubQueue.DEAD_LETTER))
    for where, found in (("queue", main), ("dead-letter queue", dead)):
        twice = [i for i, n in Counter(m.message_id for m in found).items() if n > 1]
        assert not twice, f"present twice in the {where}: {twice[:10]}"
        seqs = [s for s, n in Counter(m.sequence_number for m in found).items() if n > 1]
        assert not seqs, f"sequence numbers twice in the {where}: {seqs[:10]}"
    main_ids, dead_ids = {m.message_id: m for m in main}, {m.message_id: m for m in dead}
    both = set(main_ids) & set(dead_ids)
    assert not both, f"in the queue and in its dead-letter queue: {sorted(both)[:10]}"
    return main_ids, dead_ids


def check_counts(namespace: str, queue: str, main: Dict[str, object], dead: Dict[str, object],
                 setup=None, clock=None):
    props = runtime_properties(namespace, setup, queue, clock)
    states = Counter(m.state for m in main.values())
    seen = {"active": states[ServiceBusMessageState.ACTIVE],
            "scheduled": states[ServiceBusMessageState.SCHEDULED],
            "deferred": states[ServiceBusMessageState.DEFERRED], "dead-lettered": len(dead)}
    counted = {"active": props.active_message_count,
               "scheduled": props.scheduled_message_count,
               "deferred": props.deferred_message_count,
               "dead-lettered": props.dead_letter_message_count}
    assert counted == seen, f"counts {counted} but the peeks show {seen}"
    assert props.total_message_count == len(main) + len(dead)


def check_messages(trial: Trial, main: Dict[str, object], dead: Dict[str, object]) -> Set[str]:
    """Rules 1-3 of the module docstring for a trial on the queue ``q``; returns the ids on
    their way to the dead-letter queue (the drain must find them there)."""
    journal = Journal(trial.journal)
    present = set(main) | set(dead)
    expected = (set(trial.setup.ids) | journal.acked("send") | journal.acked("schedule"))
    may_be_gone = set().union(*(journal.started(op) | journal.acked(op) for op in REMOVING))
    # A dead-letter call killed after its settlement committed and before the move: the
    # message is in neither view until a dead-letter receive (or the sweep) moves it; the
    # drain checks that it arrives.
    in_transit = (expected & journal.started("dead_letter")) - present
    missing = expected - present - may_be_gone - in_transit
    in_flight = journal.in_flight
    if in_flight and in_flight["op"] == "receive_and_delete":
        # Received and deleted by the call in flight, not journaled before the kill: at most
        # the call's batch (RECV-2: ReceiveAndDelete is at-most-once by design).
        assert len(missing) <= BATCH, f"lost messages: {sorted(missing)[:10]}"
    else:
        assert not missing, f"lost messages: {sorted(missing)[:10]}"
    unknown = present - expected - journal.started("send") - journal.started("schedule")
    assert not unknown, f"messages nobody sent: {sorted(unknown)[:10]}"
    wrote = set().union(*journal.failed.values()) & present
    assert not wrote, f"a call that raised left its messages: {sorted(wrote)[:10]}"
    for op in REMOVING:
        back = journal.acked(op) & present
        assert not back, f"{op} acknowledged but still present: {sorted(back)[:10]}"
    not_dead = journal.acked("dead_letter") - set(dead)
    assert not not_dead, f"dead-lettered but not in the dead-letter queue: {sorted(not_dead)[:10]}"
    unasked = set(dead) - journal.started("dead_letter") - set(trial.setup.expiring)
    assert not unasked, f"dead-lettered without a call: {sorted(unasked)[:10]}"
    not_deferred = {i for i in journal.acked("defer")
                    if i not in main or main[i].state != ServiceBusMessageState.DEFERRED}
    assert not not_deferred, f"deferred but not deferred: {sorted(not_deferred)[:10]}"
    for i in journal.acked("schedule") - journal.started("cancel"):
        assert main[i].state == ServiceBusMessageState.SCHEDULED, f"{i} is not scheduled"
    return in_transit


def _receive_everything(client, setup, queue: str) -> List:
    """Receive and complete until nothing comes (for session entities: every session)."""
    from sbdelta import NEXT_AVAILABLE_SESSION
    from sbdelta.exceptions import OperationTimeoutError

    got_all: List = []
    if setup is None or not setup.sessions:
        receiver = receiver_of(client, setup, queue)
        for _ in range(500):
            got = receiver.receive_messages(100)
            if not got:
                break
            got_all += got
            receiver.complete_messages(got)
        return got_all
    for _ in range(100):
        try:
            receiver = client.get_queue_receiver(queue, session_id=NEXT_AVAILABLE_SESSION,
                                                 max_wait_time=1)
            got = receiver.receive_messages(100)
        except OperationTimeoutError:
            return got_all
        while got:
            got_all += got
            receiver.complete_messages(got)
            got = receiver.receive_messages(100)
        receiver.close()
    raise AssertionError("more than 100 sessions to drain")


def drain(namespace: str, queue: str, later: float = 3600 + 7200,
          dead_letters: Set[str] = frozenset(), setup=None) -> Dict[str, int]:
    """Rule 5: receive and complete everything (an hour after the locks), then use the queue.

    Returns what the drain saw: messages received, of them delivered again (delivery count
    above 1: their lock was lost with the killed process), deferred and dead letters."""
    clock = ManualClock(now_plus(later))
    seen = {"received": 0, "redelivered": 0, "deferred": 0, "dead_letters": 0}
    dead_ids: Set[str] = set()
    with ServiceBusClient(namespace, clock=clock) as client:
        drained = _receive_everything(client, setup, queue)
        got_ids = [m.message_id for m in drained]
        seen["redelivered"] = sum(1 for m in drained if m.delivery_count > 1)
        twice = [i for i, n in Counter(got_ids).items() if n > 1]
        assert not twice, f"drained twice: {twice[:10]}"
        seen["received"] = len(got_ids)
        deferred = [m.sequence_number for m in peek_entity(client, setup, queue)
                    if m.state == ServiceBusMessageState.DEFERRED]
        receiver = receiver_of(client, setup, queue)
        for start in range(0, len(deferred), 100):
            got = receiver.receive_deferred_messages(deferred[start:start + 100])
            assert len(got) == len(deferred[start:start + 100]), "a deferred message is stuck"
            receiver.complete_messages(got)
        seen["deferred"] = len(deferred)
        dlq = receiver_of(client, setup, queue, sub_queue=ServiceBusSubQueue.DEAD_LETTER)
        for _ in range(500):
            got = dlq.receive_messages(100)
            if not got:
                break
            seen["dead_letters"] += len(got)
            dead_ids.update(m.message_id for m in got)
            dlq.complete_messages(got)
        late = set(dead_letters) - dead_ids
        assert not late, f"never reached the dead-letter queue: {sorted(late)[:10]}"
        left = peek_entity(client, setup, queue)
        assert not left, f"left after the drain: {[(m.message_id, m.state.name) for m in left][:10]}"
        after = ServiceBusMessage("after", message_id="after", application_properties={"n": 0},
                                  session_id="after" if setup and setup.sessions else None)
        if setup is not None and setup.subscription:
            client.get_topic_sender(setup.subscription[0]).send_messages(after)
        else:
            client.get_queue_sender(queue).send_messages(after)
        got = [m.message_id for m in _receive_everything(client, setup, queue)]
        assert got == ["after"], "the entity no longer delivers"
    props = runtime_properties(namespace, setup, queue, clock)
    assert props.total_message_count == 0, f"counts after the drain: {props}"
    return seen


def check_queue_trial(trial: Trial) -> Dict[str, int]:
    """Rules 1-5 for a trial on the queue (or the subscription, or the session queue), seen at
    the worker's time: a worker whose clock runs ahead (``LATER``) released scheduled messages
    that true time still shows scheduled."""
    ns, setup = trial.setup.namespace, trial.setup
    clock = ManualClock(now_plus(LATER[trial.op])) if trial.op in LATER else None
    main, dead = view(ns, QUEUE, clock=clock, setup=setup)
    check_counts(ns, QUEUE, main, dead, setup, clock)
    in_transit = check_messages(trial, main, dead)
    return dict(drain(ns, QUEUE, dead_letters=in_transit, setup=setup),
                in_transit=len(in_transit))


def check_expire(trial: Trial) -> Dict[str, int]:
    """The sweep at the worker's clock (an hour on): an expired message is in the queue or in
    the dead-letter queue, once (TTL-5); a sweep run after the kill finishes the job."""
    from sbdelta.maintenance import expire_messages

    ns, expiring = trial.setup.namespace, set(trial.setup.expiring)
    main, dead = view(ns, QUEUE)
    check_messages(trial, main, dead)
    later = ManualClock(now_plus(3600))
    expire_messages(ns, entities=[QUEUE], clock=later)
    main, dead = view(ns, QUEUE, clock=later)
    assert set(dead) == expiring, "the sweep after the kill did not dead-letter every expired one"
    assert set(main) == set(trial.setup.ids) - expiring
    check_counts(ns, QUEUE, main, dead)
    return drain(ns, QUEUE)


def check_idle(trial: Trial) -> Dict[str, int]:
    """Idle deletion killed: the queue is either gone (and made again, empty) or whole."""
    ns = trial.setup.namespace
    admin = ServiceBusAdministrationClient(ns)
    try:
        admin.get_queue(QUEUE)
    except MessagingEntityNotFoundError:
        admin.create_queue(QUEUE)
        main, dead = view(ns, QUEUE)
        assert not main and not dead, "a queue made again shows its predecessor's messages"
        return dict(drain(ns, QUEUE), deleted=1)
    main, dead = view(ns, QUEUE)
    assert set(main) == set(trial.setup.ids) and not dead, "a half-deleted queue"
    check_counts(ns, QUEUE, main, dead)
    return drain(ns, QUEUE)


def check_forward(trial: Trial) -> Dict[str, int]:
    """Forwarding killed: each message in the source or the destination, once (FWD-1); the
    next forwarding run moves the rest."""
    from sbdelta.maintenance import forward_messages

    ns = trial.setup.namespace
    source, _ = view(ns, QUEUE)
    dest, _ = view(ns, DESTINATION)
    both = set(source) & set(dest)
    assert not both, f"in the source and the destination: {sorted(both)[:10]}"
    # A mover killed between marking a range (the source's frontiers moved past it) and its
    # append leaves that range in neither until the next run appends it.
    flying = marked_range(queue_messages(ns, QUEUE))
    seen = set(source) | set(dest)
    assert seen <= set(trial.setup.ids), "invented in forwarding"
    assert seen | flying >= set(trial.setup.ids), "lost in forwarding"
    forward_messages(ns)
    source, _ = view(ns, QUEUE)
    dest, dead = view(ns, DESTINATION)
    assert not source and set(dest) == set(trial.setup.ids)
    check_counts(ns, DESTINATION, dest, dead)
    return drain(ns, DESTINATION)


def queue_messages(namespace: str, queue: str = "*") -> str:
    """The messages table's folder of the local namespace's queue ``queue`` (of its only
    queue by default)."""
    import glob
    import os

    (folder,) = glob.glob(os.path.join(namespace, "queues", queue, "*", "messages"))
    return folder


def marked_range(folder: str) -> Set[str]:
    """The message ids of the ranges a mover marked on the source whose messages table is
    ``folder`` (a backlog queue the syphon drains, a queue the forwarding job moves on): the
    frontiers moved past it, the old ones kept in the mark, while the range is on its way
    (sbdelta._store.syphon, sbdelta._store.forward). A mover killed between the mark's commit
    and its last append leaves such a range neither in a peek of the source nor (all of it)
    in the destination; the next run appends it where it is missing."""
    import os

    import pyarrow as pa
    from deltalake import DeltaTable

    from sbdelta._store.layout import FRONTIER, marked_from, sequence_number, start_version, version_of

    rows = DeltaTable(folder).to_pyarrow_table(columns=["pid", "kind", "seq", "lock_token"])
    inbox = DeltaTable(os.path.join(os.path.dirname(folder), "inbox"))
    found = set()
    for r in rows.to_pylist():
        old = marked_from(r["lock_token"]) if r["kind"] == FRONTIER else None
        if old is None:
            continue
        feed = pa.table(inbox.load_cdf(
            starting_version=start_version(old), ending_version=version_of(r["seq"]),
            columns=["pid", "idx", "message_id", "_change_type", "_commit_version"]
        ).read_all()).to_pylist()
        found |= {c["message_id"] for c in feed if c["_change_type"] == "insert"
                  and c["pid"] == r["pid"]
                  and old < sequence_number(c["pid"], c["_commit_version"], c["idx"]) <= r["seq"]}
    return found


def check_syphon(trial: Trial) -> Dict[str, int]:
    """The syphon killed: in the primary each message at most once, none lost (still in the
    backlog queue, home, or in the range the killed syphon marked: :func:`marked_range`); the
    next run brings the rest home, once (PAIR-7)."""
    from sbdelta.paired.syphon import Syphon

    ns, backlog = trial.setup.namespace, trial.setup.backlog_queue
    home, _ = view(ns, QUEUE)
    with ServiceBusClient(trial.setup.secondary) as away:
        parked = {m.message_id for m in peek_all(away.get_queue_receiver(backlog, max_wait_time=0))}
    flying = marked_range(queue_messages(trial.setup.secondary))
    assert set(home) | parked | flying >= set(trial.setup.ids), "lost between the backlog and home"
    Syphon(ns, trial.setup.secondary).drain()
    home, dead = view(ns, QUEUE)
    assert set(home) == set(trial.setup.ids) and not dead
    with ServiceBusClient(trial.setup.secondary) as away:
        assert not peek_all(away.get_queue_receiver(backlog,
                                                    max_wait_time=0)), "left in the backlog queue"
    check_counts(ns, QUEUE, home, dead)
    return drain(ns, QUEUE)


def check_sent(trial: Trial, present: Set[str], where: str) -> None:
    """For the send trials whose messages land in another entity: every set-up message and
    acknowledged send is ``present``, nothing nobody sent is, nothing of a send that raised."""
    journal = Journal(trial.journal)
    expected = set(trial.setup.ids) | journal.acked("send")
    missing = expected - present
    assert not missing, f"lost messages ({where}): {sorted(missing)[:10]}"
    unknown = present - expected - journal.started("send")
    assert not unknown, f"messages nobody sent ({where}): {sorted(unknown)[:10]}"
    wrote = journal.failed.get("send", set()) & present
    assert not wrote, f"a send that raised left its messages ({where}): {sorted(wrote)[:10]}"


def check_send_forwarding(trial: Trial) -> Dict[str, int]:
    """A send to a topic whose subscription forwards, killed (FWD-2): every acknowledged send
    is in the destination already (the send moved it before returning), once; what the killed
    send left in the subscription the forwarding job moves, once; the subscription is empty."""
    from sbdelta.maintenance import forward_messages

    ns = trial.setup.namespace
    dest, dead = view(ns, DESTINATION)
    journal = Journal(trial.journal)
    late = (set(trial.setup.ids) | journal.acked("send")) - set(dest)
    assert not late, f"acknowledged but not forwarded by the send: {sorted(late)[:10]}"
    forward_messages(ns)
    dest, dead = view(ns, DESTINATION)
    assert not dead, f"dead-lettered in the destination: {sorted(dead)[:10]}"
    check_sent(trial, set(dest), "the destination")
    props = ServiceBusAdministrationClient(ns).get_subscription_runtime_properties(
        TOPIC, SUBSCRIPTION)
    assert props.total_message_count == 0, f"left in the forwarding subscription: {props}"
    check_counts(ns, DESTINATION, dest, dead)
    return drain(ns, DESTINATION)


def check_failover(trial: Trial) -> Dict[str, int]:
    """A paired sender killed (PAIR-3..7, RECV-7): each acknowledged send in the primary queue
    or in a backlog queue, once across both; a send that raised wrote nothing; no ping shows
    or counts. With the queue enabled, the syphon brings the backlog home, each message once."""
    from sbdelta.management import EntityStatus
    from sbdelta.paired.syphon import Syphon

    ns, secondary = trial.setup.namespace, trial.setup.secondary
    home, dead = view(ns, QUEUE)
    check_counts(ns, QUEUE, home, dead)
    parked: List = []
    with ServiceBusClient(secondary) as away:
        for name in backlog_queues(ns):
            parked += peek_all(away.get_queue_receiver(name, max_wait_time=0))
    parked_ids = Counter(m.message_id for m in parked)
    twice = [i for i, n in parked_ids.items() if n > 1]
    assert not twice, f"twice in the backlog queues: {twice[:10]}"
    both = set(home) & set(parked_ids)
    assert not both, f"in the primary and in a backlog queue: {sorted(both)[:10]}"
    present = set(home) | set(parked_ids)
    check_sent(trial, present, "primary and backlog")
    admin = ServiceBusAdministrationClient(ns)
    admin.update_queue(admin.get_queue(QUEUE), status=EntityStatus.ACTIVE)
    Syphon(ns, secondary).drain()
    home, dead = view(ns, QUEUE)
    assert set(home) == present and not dead, "the syphon lost, invented or dead-lettered"
    with ServiceBusClient(secondary) as away:
        for name in backlog_queues(ns):
            assert not peek_all(away.get_queue_receiver(name, max_wait_time=0)), f"left in {name}"
    check_counts(ns, QUEUE, home, dead)
    return dict(drain(ns, QUEUE), parked=len(parked_ids))


CHECKS = {"expire": check_expire, "delete_idle": check_idle, "forward": check_forward,
          "syphon": check_syphon, "send_forwarding": check_send_forwarding,
          "failover_send": check_failover}


def check(trial: Trial) -> Dict[str, int]:
    """Every invariant for ``trial``; returns the drain's figures."""
    return CHECKS.get(trial.op, check_queue_trial)(trial)


__all__ = ["check", "view", "drain"]
