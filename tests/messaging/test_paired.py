"""Paired namespaces on real Spark and Delta (issue 15, first part): the backlog queues a pairing
creates (PAIR-1), a paired sender that keeps sending while its primary entity refuses sends
(PAIR-2..4), pings that bring it back (PAIR-5, PAIR-6) and are never delivered (RECV-7). The
primary's fault is real: its queue is set to SendDisabled. Time is a ManualClock."""

from datetime import timedelta

import pytest

from sbdelta import ServiceBusClient, ServiceBusMessage
from sbdelta._namespace import normalize_root
from sbdelta.exceptions import ConfigurationError, MessagingEntityDisabledError
from sbdelta.management import EntityStatus, ServiceBusAdministrationClient
from sbdelta.paired import PairedNamespaceOptions, backlog_queue_name, primary_identity

MINUTE = timedelta(minutes=1)


@pytest.fixture(scope="module")
def roots(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("paired")
    return str(base / "primary"), str(base / "secondary")


def test_pair_1_pairing_creates_the_missing_backlog_queues_and_uses_existing_ones(
        spark, roots, clock):
    primary, secondary = roots
    backlog = [backlog_queue_name(primary_identity(normalize_root(primary)), i)
               for i in range(6)]
    admin = ServiceBusAdministrationClient(secondary, spark=spark, clock=clock)
    admin.create_queue(backlog[1], lock_duration=timedelta(seconds=30))  # used as it is
    admin.create_queue(backlog[5])  # an extra one: left alone
    options = PairedNamespaceOptions(secondary, backlog_queue_count=2)
    with ServiceBusClient(primary, spark=spark, clock=clock, paired_namespace=options):
        assert sorted(q.name for q in admin.list_queues()) == sorted(
            [backlog[0], backlog[1], backlog[5]])
    made = admin.get_queue(backlog[0])
    assert (made.max_size_in_megabytes, made.max_delivery_count, made.lock_duration,
            made.default_message_time_to_live, made.auto_delete_on_idle,
            made.dead_lettering_on_message_expiration, made.enable_batched_operations) == \
        (5120, 2 ** 31 - 1, MINUTE, None, None, True, True)
    assert admin.get_queue(backlog[1]).lock_duration == timedelta(seconds=30)
    with pytest.raises(ConfigurationError, match="is the primary itself"):
        ServiceBusClient(primary, spark=spark, clock=clock,
                         paired_namespace=PairedNamespaceOptions(primary))


def test_pair_3_to_6_a_paired_sender_fails_over_to_the_backlog_and_pings_its_way_back(
        spark, roots, clock):
    primary, secondary = roots
    admin = ServiceBusAdministrationClient(primary, spark=spark, clock=clock)
    admin.create_queue("orders")
    options = PairedNamespaceOptions(secondary, backlog_queue_count=2,
                                     failover_interval=MINUTE,
                                     ping_primary_interval=timedelta(seconds=30))
    with ServiceBusClient(primary, spark=spark, clock=clock, paired_namespace=options) as client:
        sender = client.get_queue_sender("orders")
        sender.send_messages(ServiceBusMessage("a"))  # PAIR-2: healthy, to the primary
        admin.update_queue(admin.get_queue("orders"), status=EntityStatus.SEND_DISABLED)
        with pytest.raises(MessagingEntityDisabledError):
            sender.send_messages(ServiceBusMessage("b"))  # the timer starts; the caller knows
        clock.advance(MINUTE)
        sender.send_messages(ServiceBusMessage(  # a minute of faults: to a backlog queue
            "c", message_id="c", time_to_live=timedelta(minutes=10),
            application_properties={"k": 1}))
        other = client.get_queue_sender("orders")  # every sender of the client knows
        assert sender.failed_over and other.failed_over
        other.send_messages(ServiceBusMessage("d", message_id="d"))
        parked = []
        with ServiceBusClient(secondary, spark=spark, clock=clock) as backlog:
            for name in (backlog_queue_name(primary_identity(normalize_root(primary)), i)
                         for i in range(2)):
                parked += backlog.get_queue_receiver(name).peek_messages(10)
        assert sorted((str(m), m.application_properties.get("x-ms-path"),
                       m.application_properties.get("x-ms-timetolive"), m.time_to_live)
                      for m in parked) == [("c", "orders", 600_000, None),
                                           ("d", "orders", None, None)]
        admin.update_queue(admin.get_queue("orders"), status=EntityStatus.ACTIVE)
        clock.advance(timedelta(seconds=30))  # PAIR-5: a ping is due, lands: back home
        sender.send_messages(ServiceBusMessage("e"))
        assert not sender.failed_over and not other.failed_over
        receiver = client.get_queue_receiver("orders", max_wait_time=0)
        got = receiver.receive_messages(10)
        assert [str(m) for m in got] == ["a", "e"]  # RECV-7: the ping is never delivered
        receiver.complete_messages(got)
        assert receiver.peek_messages(10, sequence_number=0) == []
        counts = admin.get_queue_runtime_properties("orders")
        assert (counts.active_message_count, counts.total_message_count) == (0, 0)
