# Databricks notebook source
# MAGIC %md
# MAGIC # Send and receive
# MAGIC One message at a time (the azure-servicebus API), and in bulk (a DataFrame of locked
# MAGIC messages, settled in one commit). Locks are exclusive across processes and clusters:
# MAGIC run this notebook twice at once and no message is handed to both.

# COMMAND ----------
# MAGIC %pip install /Workspace/Shared/sbdelta-0.1.0-py3-none-any.whl
# MAGIC # ^ on Databricks: where you put sbdelta's wheel (`python -m pip wheel --no-deps -w dist .`,
# MAGIC # or the one the bundle deploys: docs/databricks.md); locally sbdelta is installed already

# COMMAND ----------
import os

from pyspark.sql import functions as F

from sbdelta import ServiceBusClient, ServiceBusMessage, get_spark
from sbdelta.management import ServiceBusAdministrationClient

NAMESPACE = os.environ.get("SBDELTA_NAMESPACE", "/tmp/sbdelta-send-receive-notebook")
admin = ServiceBusAdministrationClient(NAMESPACE)
if "work" not in [q.name for q in admin.list_queues()]:
    admin.create_queue("work", enable_partitioning=True, max_delivery_count=3)
client = ServiceBusClient(NAMESPACE)

# COMMAND ----------
# MAGIC %md One by one, as an azure-servicebus program does it.

# COMMAND ----------
with client.get_queue_sender("work") as sender:
    sender.send_messages([ServiceBusMessage(f"job {i}", application_properties={"n": i})
                          for i in range(5)])
with client.get_queue_receiver("work", max_wait_time=0) as receiver:
    for message in receiver.receive_messages(max_message_count=5):
        print(message.sequence_number, str(message), message.application_properties)
        if message.application_properties["n"] % 2:
            receiver.complete_message(message)
        else:
            receiver.abandon_message(message)  # back to the queue, delivery count + 1

# COMMAND ----------
# MAGIC %md In bulk: a DataFrame in, a DataFrame of locked messages out, one commit each way.

# COMMAND ----------
spark = get_spark()
rows = spark.range(1000).select(F.concat(F.lit("row "), F.col("id").cast("string")).alias("body"),
                                F.col("id").cast("string").alias("message_id"))
client.get_queue_sender("work").send_dataframe(rows)
bulk = client.get_queue_receiver("work", max_wait_time=0)
locked = bulk.receive_dataframe(2000)
show = globals().get("display")  # Databricks' display, else a plain show
show(locked.groupBy("delivery_count").count()) if show else \
    locked.groupBy("delivery_count").count().show()
print("completed", bulk.complete_messages(locked))
print(admin.get_queue_runtime_properties("work"))
