"""Both engines on the same tables (issue 16): what delta-rs reads for the broker is what Spark
reads. A receive plans from per-partition statistics of the messages table and from counts of
the inbox rows past each frontier; on a local namespace delta-rs computes both, the statistics
with the same SQL conditions (:mod:`sbdelta._store.locks`, written once for both engines), and
they must equal Spark's: the counts for any frontier (SEND-3 numbering), the statistics at
every moment a lock, a time to live, a delivery limit or a schedule changes what is claimable
(RECV-2/4/5, TTL-4/7).
"""

from datetime import timedelta

import pytest

from sbdelta import ServiceBusClient, ServiceBusMessage
from sbdelta._store import rs
from sbdelta._store.inbox import inbox_range
from sbdelta._store.layout import frontier_at, sequence_number
from sbdelta._store.locks import Policy
from sbdelta._store.receive import partition_stats
from sbdelta.management import ServiceBusAdministrationClient

from ..conftest import START


@pytest.mark.parametrize("partitioned", [False, True], ids=["queue", "partitioned"])
def test_recv_4_ttl_7_delta_rs_and_spark_count_the_same_claimable_and_due_messages(
        spark, tmp_path, clock, monkeypatch, partitioned):
    ns = str(tmp_path / "ns")
    lock, ttl = timedelta(minutes=1), timedelta(hours=1)
    ServiceBusAdministrationClient(ns, spark=spark, clock=clock).create_queue(
        "q", enable_partitioning=partitioned, lock_duration=lock, max_delivery_count=2,
        default_message_time_to_live=ttl)
    policy = Policy(lock, 2, ttl, True, None)
    with ServiceBusClient(ns, spark=spark, clock=clock) as client:
        sender, receiver = client.get_queue_sender("q"), client.get_queue_receiver("q")
        sender.send_messages([ServiceBusMessage(f"m{i}", partition_key=f"k{i % 3}")
                              for i in range(8)]
                             + [ServiceBusMessage("short", partition_key="k0",
                                                  time_to_live=timedelta(minutes=5))])
        sender.schedule_messages(ServiceBusMessage("later", partition_key="k1"),
                                 START + timedelta(minutes=30))
        store = client._entities.queue("q").store
        # The rows a receive would register, counted per partition from the change feed.
        latest = store.latest_version(store.inbox_path)
        for frontiers in ({p: -1 for p in range(store.partitions)},
                          {p: frontier_at(p, latest - 1) for p in range(store.partitions)}):
            spark_counts = {r.pid: r["count"] for r in inbox_range(
                store, list(frontiers), frontiers, 0, latest).groupBy("pid").count().collect()}
            assert rs.inbox_counts(store.inbox_path, frontiers, 0, latest,
                                   sequence_number) == spark_counts
            assert sum(spark_counts.values()) == (10 if -1 in frontiers.values() else 1)
        got = []
        for _ in range(20):  # registers every row, locks the visible messages
            got += receiver.receive_messages(20)
            if len(got) >= 9:
                break
        assert len(got) == 9
        receiver.complete_message(got[0])
        receiver.defer_message(got[1])
        receiver.abandon_message(got[2])  # delivery 1 of 2
        # Cancelled before any receive registered it: a tombstone waits for its inbox row.
        cancelled = sender.schedule_messages(ServiceBusMessage("never", partition_key="k2"),
                                             START + timedelta(minutes=30))
        sender.cancel_scheduled_messages(cancelled)

        seen = set()
        for minutes in (0, 2, 10, 40, 120):
            now = START + timedelta(minutes=minutes)
            fast = partition_stats(store, policy, now)
            with monkeypatch.context() as patch:
                patch.setattr(rs, "partition_stats", lambda *args: None)  # Spark answers
                slow = partition_stats(store, policy, now)
            assert all(isinstance(row, rs.PartitionStats) for row in fast.values())
            assert {p: tuple(r)[1:] for p, r in fast.items()} == {
                p: (r.frontier, r.frontier_rev, r.claimable, r.actions, r.tombstones)
                for p, r in slow.items()}, minutes
            seen |= {(minutes, kind) for kind, n in (
                ("claimable", sum(r.claimable for r in fast.values())),
                ("actions", sum(r.actions for r in fast.values())),
                ("tombstones", sum(r.tombstones for r in fast.values()))) if n}
        # The moments compared cover every kind of count (not all zero).
        assert {(2, "claimable"), (10, "actions"), (120, "actions"),
                (0, "tombstones")} <= seen, seen
