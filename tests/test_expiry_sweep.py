"""The expiry sweep (sbdelta.maintenance.expire_messages and jobs/expire_messages.py)."""

from datetime import datetime, timedelta, timezone

import pytest

from sbdelta import ManualClock, ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue
from sbdelta.exceptions import MessagingEntityNotFoundError
from sbdelta.maintenance import expire_messages
from sbdelta.management import ServiceBusAdministrationClient

from .conftest import spark_submit

START = datetime(2030, 1, 1, tzinfo=timezone.utc)


def _dlq(client, name):
    return client.get_queue_receiver(name, sub_queue=ServiceBusSubQueue.DEAD_LETTER)


def test_ttl_6_recv_5_sweep_dead_letters_expired_and_exhausted_messages(spark, namespace):
    clock = ManualClock(START)
    admin = ServiceBusAdministrationClient(namespace, spark=spark, clock=clock)
    admin.create_queue("expiring", dead_lettering_on_message_expiration=True,
                       lock_duration=timedelta(seconds=30), max_delivery_count=2)
    admin.create_queue("dropping", lock_duration=timedelta(seconds=30))
    with ServiceBusClient(namespace, spark=spark, clock=clock) as client:
        client.get_queue_sender("expiring").send_messages(
            [ServiceBusMessage("tired"),
             ServiceBusMessage("ttl", time_to_live=timedelta(seconds=10))])
        client.get_queue_sender("dropping").send_messages(
            [ServiceBusMessage("ttl", time_to_live=timedelta(seconds=10)),
             ServiceBusMessage("never-received", time_to_live=timedelta(seconds=10))])
        expiring = client.get_queue_receiver("expiring")
        tired, _ = expiring.receive_messages(5)
        expiring.abandon_message(tired)
        assert [m.delivery_count for m in expiring.receive_messages(5)] == [2]
        first = client.get_queue_receiver("dropping").receive_messages(1)
        clock.advance(timedelta(seconds=31))  # locks over, TTLs over
        with pytest.raises(MessagingEntityNotFoundError):  # checked before any change
            expire_messages(namespace, entities=["expiring", "missing"], clock=clock,
                            spark=spark)
        dry = expire_messages(namespace, clock=clock, dry_run=True, spark=spark)
        assert dry.totals() == {"expired_dead_lettered": 1, "expired_dropped": 1,
                                "max_delivery_dead_lettered": 1, "unfinished_moves": 0}
        assert "dry run" in str(dry)
        report = expire_messages(namespace, clock=clock, spark=spark)
        assert report.totals() == dry.totals() and report.entities_visited == 2
        assert expire_messages(namespace, clock=clock, spark=spark).totals() == {
            "expired_dead_lettered": 0, "expired_dropped": 0, "max_delivery_dead_lettered": 0,
            "unfinished_moves": 0}  # idempotent
        dead = {str(m): m.dead_letter_reason for m in _dlq(client, "expiring").peek_messages(
            5, sequence_number=0)}
        assert dead == {"ttl": "TTLExpiredException", "tired": "MaxDeliveryCountExceeded"}
        assert _dlq(client, "dropping").peek_messages(5, sequence_number=0) == []
        assert len(first) == 1
        # Never received: it stayed in the inbox; the first receive that reaches it drops it.
        assert client.get_queue_receiver("dropping").receive_messages(5) == []


def test_expire_messages_job_runs_via_spark_submit(spark, namespace):
    ServiceBusAdministrationClient(namespace, spark=spark).create_queue("q")
    done = spark_submit("expire_messages", "--namespace", namespace, "--dry-run")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "expiry sweep (dry run): 1 entities visited" in done.stdout
    bad = spark_submit("expire_messages", "--namespace", namespace, "--entity", "missing")
    assert bad.returncode == 1
    assert "MessagingEntityNotFoundError" in bad.stdout + bad.stderr
