# Databricks notebook source
# MAGIC %md
# MAGIC # Manage an sbdelta namespace
# MAGIC Creates entities from a config file and lists them. On Databricks the active session is used
# MAGIC as it is; locally `get_spark()` builds one with Delta.

# COMMAND ----------
from sbdelta.management import ServiceBusAdministrationClient

NAMESPACE = "/tmp/sbdelta-notebook"  # on Databricks: "dbfs:/..." or "abfss://..."
admin = ServiceBusAdministrationClient(NAMESPACE)
print(admin.apply_config("conf/namespace.json"))

# COMMAND ----------
for queue in admin.list_queues():
    print(queue.name, queue.lock_duration, queue.max_delivery_count)
