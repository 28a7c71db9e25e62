"""Several processes create the same queue at the same instant: exactly one wins."""

from sbdelta import ServiceBusClient, ServiceBusMessage
from sbdelta.management import ServiceBusAdministrationClient

from ..conftest import run_python


def test_three_processes_create_one_queue_exactly_one_wins(spark, namespace, tmp_path):
    ServiceBusAdministrationClient(namespace, spark=spark).create_queue("other")  # the registry
    barrier = tmp_path / "barrier"  # every worker creates the queue once all three are ready
    barrier.mkdir()
    procs = [run_python("-m", "tests.workers.create_worker", namespace, "Shared-Queue",
                        str(barrier), "3") for _ in range(3)]
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        outputs.append(out.strip().splitlines()[-1])
    assert sorted(outputs) == ["CREATED", "EXISTS", "EXISTS"]
    admin = ServiceBusAdministrationClient(namespace, spark=spark)
    assert [q.name for q in admin.list_queues()] == ["other", "Shared-Queue"]
    with ServiceBusClient(namespace, spark=spark) as client:  # and its tables work
        client.get_queue_sender("shared-queue").send_messages(ServiceBusMessage("hello"))
        receiver = client.get_queue_receiver("SHARED-QUEUE", max_wait_time=0)
        (m,) = receiver.receive_messages()
        receiver.complete_message(m)
