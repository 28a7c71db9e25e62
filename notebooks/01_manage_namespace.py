# Databricks notebook source
# MAGIC %md
# MAGIC # Manage an sbdelta namespace
# MAGIC Creates entities from a config (the emulator's `Config.json` format, here inline, so the
# MAGIC notebook runs from any folder; a path to a file works too) and lists them. On Databricks
# MAGIC the active session is used as it is; locally `get_spark()` builds one with Delta.

# COMMAND ----------
# MAGIC %pip install /Workspace/Shared/sbdelta-0.1.0-py3-none-any.whl
# MAGIC # ^ on Databricks: where you put sbdelta's wheel (`python -m pip wheel --no-deps -w dist .`,
# MAGIC # or the one the bundle deploys: docs/databricks.md); locally sbdelta is installed already

# COMMAND ----------
import os

from sbdelta.management import ServiceBusAdministrationClient

# on Databricks: "dbfs:/...", "abfss://..." or "/Volumes/..."
NAMESPACE = os.environ.get("SBDELTA_NAMESPACE", "/tmp/sbdelta-notebook")
CONFIG = {"UserConfig": {"Namespaces": [{"Name": "notebook", "Queues": [
    {"Name": "orders", "Properties": {"LockDuration": "PT1M", "MaxDeliveryCount": 5,
                                      "DeadLetteringOnMessageExpiration": True}},
    {"Name": "telemetry", "Properties": {"EnablePartitioning": True}}],
    "Topics": [{"Name": "events", "Subscriptions": [{"Name": "all"}]}]}]}}
admin = ServiceBusAdministrationClient(NAMESPACE)
print(admin.apply_config(CONFIG))

# COMMAND ----------
for queue in admin.list_queues():
    print(queue.name, queue.lock_duration, queue.max_delivery_count, queue.enable_partitioning)
for topic in admin.list_topics():
    print(topic.name, [s.name for s in admin.list_subscriptions(topic.name)])
