# Databricks notebook source
# MAGIC %md
# MAGIC # Publish and subscribe on sbdelta
# MAGIC A topic stores each message once; each subscription receives what its rules match, as
# MAGIC the rules stood when the message was sent, and settles on its own. On Databricks the
# MAGIC active session is used as it is; locally `get_spark()` builds one with Delta.

# COMMAND ----------
# MAGIC %pip install /Workspace/Shared/sbdelta-0.1.0-py3-none-any.whl
# MAGIC # ^ on Databricks: where you put sbdelta's wheel (`python -m pip wheel --no-deps -w dist .`,
# MAGIC # or the one the bundle deploys: docs/databricks.md); locally sbdelta is installed already

# COMMAND ----------
import os

from sbdelta import ServiceBusClient, ServiceBusMessage
from sbdelta.management import (CorrelationRuleFilter, RuleProperties,
                                ServiceBusAdministrationClient, SqlRuleAction, SqlRuleFilter)

# on Databricks: "dbfs:/...", "abfss://..." or "/Volumes/..."
NAMESPACE = os.environ.get("SBDELTA_NAMESPACE", "/tmp/sbdelta-topics-notebook")
admin = ServiceBusAdministrationClient(NAMESPACE)
if "orders" not in [t.name for t in admin.list_topics()]:
    admin.create_topic("orders", enable_partitioning=True)
    admin.create_subscription("orders", "audit")  # $Default: every message
    admin.create_subscription("orders", "big-eu", default_rule=RuleProperties(
        "orders", "big-eu", "big", filter=SqlRuleFilter("region = 'eu' AND amount > @min",
                                                        {"@min": 100})))
    admin.create_subscription("orders", "refunds", default_rule=RuleProperties(
        "orders", "refunds", "refunds", filter=CorrelationRuleFilter(label="refund")))
    # A rule with an action: matching messages arrive changed (and carry RuleName); each
    # matching rule with an action gives its own copy, next to the one of $Default.
    admin.create_subscription("orders", "tiers")
    admin.create_rule("orders", "tiers", "gold", filter=SqlRuleFilter("amount > 500"),
                      action=SqlRuleAction("SET tier = 'gold'; REMOVE region"))
    # Auto-forwarding: EU orders go on to a queue (the subscription itself cannot be received
    # from; the send moves them before it returns).
    admin.create_queue("eu-orders")
    admin.create_subscription("orders", "eu", forward_to="eu-orders",
                              default_rule=RuleProperties("orders", "eu", "eu",
                                                          filter=SqlRuleFilter("region = 'eu'")))

# COMMAND ----------
client = ServiceBusClient(NAMESPACE)
sender = client.get_topic_sender("orders")
sender.send_messages([
    ServiceBusMessage("o-1", application_properties={"region": "eu", "amount": 250}),
    ServiceBusMessage("o-2", application_properties={"region": "us", "amount": 900}),
    ServiceBusMessage("r-1", subject="refund", application_properties={"region": "eu"}),
])

# COMMAND ----------
# MAGIC %md
# MAGIC The bulk form: a DataFrame of locked messages, settled in one commit.

# COMMAND ----------
receiver = client.get_subscription_receiver("orders", "audit", max_wait_time=0)
df = receiver.receive_dataframe(1000)
show = globals().get("display")  # Databricks' display, else a plain show
show(df) if show else df.show(truncate=False)
print("completed", receiver.complete_messages(df))

# COMMAND ----------
for sub in ("big-eu", "refunds", "tiers"):
    r = client.get_subscription_receiver("orders", sub, max_wait_time=0)
    got = r.receive_messages(max_message_count=100)
    print(sub, [(str(m), dict(m.application_properties or {})) for m in got])
    r.complete_messages(got)
eu = client.get_queue_receiver("eu-orders", max_wait_time=0)
forwarded = eu.receive_messages(max_message_count=100)
print("eu-orders (forwarded)", [str(m) for m in forwarded])
eu.complete_messages(forwarded)
print(admin.get_subscription_runtime_properties("orders", "audit"))
