"""The Spark form of send: a whole DataFrame in one commit."""

from __future__ import annotations

from datetime import datetime, timedelta

from ._store import (INBOX_COLUMNS, MAX_ROWS_PER_PARTITION_PER_COMMIT, MSG, PING,
                     PING_CONTENT_TYPE)
from ._store.delta import sql_literal
from .exceptions import MessageSizeExceededError, ServiceBusInvalidOperationError

STRING_COLUMNS = ("message_id", "session_id", "partition_key", "content_type", "correlation_id",
                  "subject", "to", "reply_to", "reply_to_session_id")
ALLOWED_COLUMNS = ("body",) + STRING_COLUMNS + (
    "application_properties", "time_to_live", "scheduled_enqueue_time_utc")
MAX_ID_LENGTH = 128


def is_dataframe(value) -> bool:
    try:
        from pyspark.sql import DataFrame
    except ImportError:  # pragma: no cover
        return False
    return isinstance(value, DataFrame)


def _check_schema(df) -> None:
    from pyspark.sql import types as T

    if not is_dataframe(df):
        raise ServiceBusInvalidOperationError(
            f"send_dataframe needs a pyspark DataFrame, got {type(df).__name__}")
    fields = {f.name: f.dataType for f in df.schema.fields}
    unknown = sorted(set(fields) - set(ALLOWED_COLUMNS))
    if unknown:
        raise ServiceBusInvalidOperationError(
            f"send_dataframe: unknown column(s) {unknown}; allowed: {', '.join(ALLOWED_COLUMNS)}")
    if "body" not in fields:
        raise ServiceBusInvalidOperationError(
            "send_dataframe: a 'body' column (string or binary) is required")
    wrong = []
    if not isinstance(fields["body"], (T.StringType, T.BinaryType)):
        wrong.append(f"body must be string or binary, is {fields['body'].simpleString()}")
    for name in STRING_COLUMNS:
        if name in fields and not isinstance(fields[name], T.StringType):
            wrong.append(f"{name} must be string, is {fields[name].simpleString()}")
    if "application_properties" in fields and not isinstance(
            fields["application_properties"], (T.MapType, T.StructType, T.StringType)):
        wrong.append("application_properties must be a map, a struct or a JSON string")
    if "time_to_live" in fields and not isinstance(fields["time_to_live"], T.NumericType):
        wrong.append("time_to_live must be a number of seconds")
    if "scheduled_enqueue_time_utc" in fields and not isinstance(
            fields["scheduled_enqueue_time_utc"], (T.TimestampType, T.TimestampNTZType)):
        wrong.append("scheduled_enqueue_time_utc must be a timestamp")
    if wrong:
        raise ServiceBusInvalidOperationError("send_dataframe: " + "; ".join(wrong))


def send_dataframe(sender, entity, df, now: datetime) -> int:
    """See :meth:`sbdelta.ServiceBusSender.send_dataframe`."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    _check_schema(df)
    fields = {f.name: f.dataType for f in df.schema.fields}
    props = entity.properties
    partitions = entity.store.partitions

    def col(name, kind="string"):
        return F.col(name) if name in fields else F.lit(None).cast(kind)

    now_sql = sql_literal(now)
    body = F.col("body").cast("binary") if isinstance(fields["body"], T.StringType) \
        else F.col("body")
    app = col("application_properties")
    if "application_properties" in fields and not isinstance(
            fields["application_properties"], T.StringType):
        app = F.to_json(F.col("application_properties"))
    ttl_ms = (col("time_to_live", "double") * 1000).cast("bigint")
    if entity.ttl_cap is not None:  # TTL-3
        ttl_ms = F.least(ttl_ms, F.lit(int(entity.ttl_cap / timedelta(milliseconds=1))))
    scheduled = col("scheduled_enqueue_time_utc", "timestamp").cast("timestamp")
    scheduled = F.when(scheduled > F.expr(now_sql), scheduled)
    enqueued = F.coalesce(scheduled, F.expr(now_sql))
    if partitions == 1:
        pid = F.lit(0)
    else:
        key = F.coalesce(col("session_id"), col("partition_key"))
        if props.requires_duplicate_detection:
            key = F.coalesce(key, col("message_id"))
        spread = F.pmod(F.monotonically_increasing_id() + F.lit(hash(now) & 0xFFFF), partitions)
        pid = F.when(key.isNull(), spread).otherwise(
            F.pmod(F.crc32(key.cast("binary")), F.lit(partitions)))
    size = F.length(F.coalesce(body, F.lit(b"").cast("binary")))
    for name in STRING_COLUMNS:
        size = size + F.coalesce(F.octet_length(col(name)), F.lit(0))
    size = size + F.coalesce(F.octet_length(app), F.lit(0))

    rows = df.select(
        pid.cast("int").alias("pid"),
        F.when(col("content_type") == PING_CONTENT_TYPE, F.lit(PING))
        .otherwise(F.lit(MSG)).alias("kind"),
        col("message_id").alias("message_id"),
        F.coalesce(body, F.lit(b"").cast("binary")).alias("body"),
        app.alias("application_properties"),
        *[col(n).alias("to_address" if n == "to" else n) for n in STRING_COLUMNS
          if n != "message_id"],
        ttl_ms.alias("time_to_live_ms"), enqueued.alias("enqueued_time"),
        scheduled.alias("scheduled_enqueue_time"),
        F.expr("CAST(NULL AS TIMESTAMP)").alias("expires_at"),
        size.cast("int").alias("size"),
        F.monotonically_increasing_id().alias("_order"))
    rows = rows.withColumn("expires_at", F.expr(
        "CASE WHEN time_to_live_ms IS NULL THEN NULL "
        "ELSE timestamp_micros(unix_micros(enqueued_time) + time_to_live_ms * 1000) END"))
    rows = rows.withColumn("idx", F.row_number().over(
        Window.partitionBy("pid").orderBy("_order")) - 1).drop("_order")
    rows = rows.localCheckpoint(eager=True)

    limit = entity.max_message_size
    too_long = " OR ".join(f"char_length({c}) > {MAX_ID_LENGTH} OR char_length({c}) = 0"
                           for c in ("message_id", "session_id", "partition_key"))
    check = rows.agg(
        F.count(F.lit(1)).alias("n"),
        F.sum(F.expr(f"CASE WHEN size > {limit} THEN 1 ELSE 0 END")).alias("big"),
        F.max("size").alias("max_size"),
        F.sum(F.expr(f"CASE WHEN {too_long} THEN 1 ELSE 0 END")).alias("ids"),
        F.sum(F.expr("CASE WHEN session_id IS NOT NULL AND partition_key IS NOT NULL "
                     "AND session_id <> partition_key THEN 1 ELSE 0 END")).alias("keys"),
        F.sum(F.expr("CASE WHEN time_to_live_ms IS NOT NULL AND time_to_live_ms <= 0 "
                     "THEN 1 ELSE 0 END")).alias("ttl"),
        F.max("idx").alias("max_idx")).collect()[0]
    if check.n == 0:
        return 0
    if check.big:
        raise MessageSizeExceededError(
            f"send_dataframe: {check.big} row(s) exceed the {limit}-byte message size limit of "
            f"queue '{entity.name}' (largest: {check.max_size} bytes). Nothing was sent")
    problems = []
    if check.ids:
        problems.append(f"{check.ids} row(s) have an empty message_id, session_id or "
                        f"partition_key, or one longer than {MAX_ID_LENGTH} characters")
    if check.keys:
        problems.append(f"{check.keys} row(s) have session_id and partition_key set to "
                        "different values; they must be equal (PART-2)")
    if check.ttl:
        problems.append(f"{check.ttl} row(s) have a time_to_live <= 0; it must be positive")
    if check.max_idx >= MAX_ROWS_PER_PARTITION_PER_COMMIT:
        problems.append(f"more than {MAX_ROWS_PER_PARTITION_PER_COMMIT} rows fall into one "
                        "partition; split the DataFrame into several sends")
    if problems:
        raise ServiceBusInvalidOperationError(
            "send_dataframe: " + "; ".join(problems) + ". Nothing was sent")
    entity.store.append(rows.select(*[name for name, _ in INBOX_COLUMNS]))
    return check.n

