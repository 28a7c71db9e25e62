"""The README's Python examples run as written (issue 17): in order, in one fresh folder, as a
reader pasting them into a notebook or a script would, on the test run's Spark session; then
again, as a reader running them a second time (the first three are idempotent, the fourth
creates what exists and says so)."""

import re
from pathlib import Path

import pytest

from sbdelta import MessagingEntityAlreadyExistsError, ServiceBusClient
from sbdelta.management import ServiceBusAdministrationClient

README = Path(__file__).resolve().parents[2] / "README.md"


def _examples():
    return re.findall(r"^```python\n(.*?)^```", README.read_text(), re.S | re.M)


def test_the_readme_examples_run_as_written(spark, tmp_path, monkeypatch):
    examples = _examples()
    assert len(examples) == 4
    monkeypatch.chdir(tmp_path)
    for number, code in enumerate(examples, 1):
        exec(compile(code, f"README.md example {number}", "exec"), {"__name__": "__main__"})
    admin = ServiceBusAdministrationClient("./namespace", spark=spark)
    assert admin.get_queue_runtime_properties("orders").active_message_count == 0  # completed
    assert admin.get_subscription_runtime_properties("sales", "big-eu").active_message_count == 0
    with ServiceBusClient("./namespace", spark=spark) as client:  # audit got it too, untouched
        assert [str(m) for m in client.get_subscription_receiver("sales", "audit")
                .peek_messages(10)] == ["o-1"]
    assert admin.get_queue_runtime_properties("carts").active_message_count == 0
    with ServiceBusClient("./namespace", spark=spark) as client:
        with client.get_queue_receiver("carts", session_id="c-1") as carts:
            assert carts.session.get_state() == b"paid"  # the oldest session went first
    other = ServiceBusAdministrationClient("./admin-example", spark=spark)
    assert other.get_queue("invoices").max_delivery_count == 7
    assert [r.name for r in other.list_rules("events", "errors")] == ["$Default", "severity"]
    for number, code in enumerate(examples[:3], 1):  # again: nothing to create
        exec(compile(code, f"README.md example {number}", "exec"), {"__name__": "__main__"})
    with pytest.raises(MessagingEntityAlreadyExistsError):
        exec(compile(examples[3], "README.md example 4", "exec"), {"__name__": "__main__"})
