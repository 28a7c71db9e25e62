# Databricks notebook source
# MAGIC %md
# MAGIC # Queue depth and dead letters
# MAGIC A dashboard of every queue and subscription (active, scheduled, deferred, dead-lettered,
# MAGIC the age of the oldest active message), the dead-letter queue of one entity grouped by
# MAGIC reason, and the resubmission of the ones whose cause is fixed.

# COMMAND ----------
# MAGIC %pip install /Workspace/Shared/sbdelta-0.1.0-py3-none-any.whl
# MAGIC # ^ on Databricks: where you put sbdelta's wheel (`python -m pip wheel --no-deps -w dist .`,
# MAGIC # or the one the bundle deploys: docs/databricks.md); locally sbdelta is installed already

# COMMAND ----------
import os
from collections import Counter
from datetime import datetime, timezone

import matplotlib.pyplot as plt

from sbdelta import ServiceBusClient, ServiceBusMessage, ServiceBusSubQueue, resubmit_dead_letters
from sbdelta.management import ServiceBusAdministrationClient

NAMESPACE = os.environ.get("SBDELTA_NAMESPACE", "/tmp/sbdelta-dead-letters-notebook")
admin = ServiceBusAdministrationClient(NAMESPACE)
client = ServiceBusClient(NAMESPACE)
if "payments" not in [q.name for q in admin.list_queues()]:  # something to look at
    admin.create_queue("payments", max_delivery_count=2)
    client.get_queue_sender("payments").send_messages(
        [ServiceBusMessage(f"payment {i}", application_properties={"amount": i * 10})
         for i in range(12)])
    with client.get_queue_receiver("payments", max_wait_time=0) as receiver:
        got = receiver.receive_messages(12)
        receiver.dead_letter_messages(got[:4], reason="card declined")
        receiver.dead_letter_messages(got[4:6], reason="bad amount")
        receiver.abandon_messages(got[6:])

# COMMAND ----------
now = datetime.now(timezone.utc)
entities = [(q.name, admin.get_queue_runtime_properties(q.name)) for q in admin.list_queues()]
entities += [(f"{t.name}/{s.name}", admin.get_subscription_runtime_properties(t.name, s.name))
             for t in admin.list_topics() for s in admin.list_subscriptions(t.name)]
for name, rp in entities:
    oldest = rp.oldest_message_enqueued_time_utc
    age = "" if oldest is None else f", oldest {(now - oldest).total_seconds():.0f} s"
    print(f"{name}: {rp.active_message_count} active, {rp.scheduled_message_count} scheduled, "
          f"{rp.deferred_message_count} deferred, {rp.dead_letter_message_count} dead-lettered"
          f"{age}")

names = [name for name, _ in entities]
fig, ax = plt.subplots(figsize=(8, 3))
ax.bar(names, [rp.active_message_count for _, rp in entities], label="active")
ax.bar(names, [rp.dead_letter_message_count for _, rp in entities],
       bottom=[rp.active_message_count for _, rp in entities], label="dead-lettered")
ax.set_ylabel("messages")
ax.legend()
plt.show()

# COMMAND ----------
# MAGIC %md The dead-letter queue of `payments`, by reason (peek: nothing is locked or changed).

# COMMAND ----------
dlq = client.get_queue_receiver("payments", sub_queue=ServiceBusSubQueue.DEAD_LETTER,
                                max_wait_time=0)
letters = []
while True:
    page = dlq.peek_messages(100)
    if not page:
        break
    letters += page
by_reason = Counter(m.dead_letter_reason for m in letters)
print(dict(by_reason))
for m in letters[:5]:
    print(m.sequence_number, str(m), m.dead_letter_reason, m.dead_letter_error_description)

# COMMAND ----------
# MAGIC %md The card processor is back: send the "card declined" ones again (one send and one
# MAGIC completion commit per batch; the others stay in the dead-letter queue).

# COMMAND ----------
moved = resubmit_dead_letters(client, "payments", reason="card declined")
print("resubmitted", moved)
print(admin.get_queue_runtime_properties("payments"))
