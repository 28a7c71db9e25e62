"""The Spark form of send: a whole DataFrame in one commit."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Dict, List, Optional

from ._durations import UNLIMITED_FROM, expiry_sql
from ._message_fields import SYSTEM_STRING_FIELDS
from ._store import (INBOX_COLUMNS, MAX_ROWS_PER_PARTITION_PER_COMMIT, MSG, PING,
                     PING_CONTENT_TYPE, codec)
from ._store import sql_literal
from .exceptions import ServiceBusInvalidOperationError

ALLOWED_COLUMNS = ("body",) + SYSTEM_STRING_FIELDS + (
    "application_properties", "time_to_live", "scheduled_enqueue_time_utc")


def is_dataframe(value) -> bool:
    """A pyspark DataFrame, classic or Spark Connect's."""
    try:
        from pyspark.sql import DataFrame
    except ImportError:  # pragma: no cover
        return False
    if isinstance(value, DataFrame):
        return True
    connect = type(value).__module__ == "pyspark.sql.connect.dataframe"
    return connect and type(value).__name__ == "DataFrame"


def _property_type_problem(data_type) -> Optional[str]:
    """Why a map value or struct field of this type cannot be an application property
    (None when it can): to_json must give a JSON scalar that decodes to an allowed value."""
    from pyspark.sql import types as T

    if isinstance(data_type, (T.ArrayType, T.MapType, T.StructType)):
        return "nested maps, structs and arrays are not allowed"
    if isinstance(data_type, T.DecimalType) and data_type.scale == 0 \
            and data_type.precision > 18:
        return "integers must fit in 64 bits: cast it to bigint or double"
    if not isinstance(data_type, (T.StringType, T.BooleanType, T.NumericType, T.BinaryType,
                                  T.TimestampType, T.TimestampNTZType, T.DateType, T.NullType)):
        return "allowed: string, boolean, numbers, binary, date, timestamp"
    return None


def _properties_problems(data_type) -> List[str]:
    from pyspark.sql import types as T

    if isinstance(data_type, T.StringType):
        return []  # JSON text: checked row by row inside the write (codec.checked_properties)
    if isinstance(data_type, T.MapType):
        problems = []
        if not isinstance(data_type.keyType, T.StringType):
            problems.append(f"application_properties map keys must be strings, are "
                            f"{data_type.keyType.simpleString()}")
        why = _property_type_problem(data_type.valueType)
        if why:
            problems.append(f"application_properties map values of type "
                            f"{data_type.valueType.simpleString()} are not scalars: {why}")
        return problems
    if isinstance(data_type, T.StructType):
        return [f"application_properties field {field.name!r} of type "
                f"{field.dataType.simpleString()} is not a scalar: {why}"
                for field in data_type.fields
                for why in [_property_type_problem(field.dataType)] if why]
    return ["application_properties must be a map, a struct or a JSON string"]


def _check_schema(df) -> Dict[str, object]:
    """The DataFrame's column types, once every column is one send_dataframe accepts."""
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
    for name in SYSTEM_STRING_FIELDS:
        if name in fields and not isinstance(fields[name], T.StringType):
            wrong.append(f"{name} must be string, is {fields[name].simpleString()}")
    if "application_properties" in fields:
        wrong += _properties_problems(fields["application_properties"])
    if "time_to_live" in fields and not isinstance(fields["time_to_live"], T.NumericType):
        wrong.append("time_to_live must be a number of seconds")
    if "scheduled_enqueue_time_utc" in fields and not isinstance(
            fields["scheduled_enqueue_time_utc"], (T.TimestampType, T.TimestampNTZType)):
        wrong.append("scheduled_enqueue_time_utc must be a timestamp")
    if wrong:
        raise ServiceBusInvalidOperationError(
            "send_dataframe: " + "; ".join(wrong) + ". Nothing was sent")
    return fields


def inbox_frame(entity, df, now: datetime, hops: Optional[int] = None):
    """``df`` as inbox rows of ``entity`` (:meth:`sbdelta.ServiceBusSender.send_dataframe`).

    No Spark job of its own: the rows are numbered per partition, and every row check
    (:mod:`sbdelta._store.codec`) is a column that fails the write that evaluates it, before
    anything commits. The sender appends them in one commit and counts them from its
    ``numOutputRows`` in the Delta log.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    fields = _check_schema(df)
    partitions = entity.store.partitions

    def col(name, kind="string"):
        return F.col(name) if name in fields else F.lit(None).cast(kind)

    now_sql = F.expr(sql_literal(now))
    body = F.coalesce(F.col("body").cast("binary"), F.lit(b"").cast("binary"))
    app = col("application_properties")
    if isinstance(fields.get("application_properties"), T.StringType):
        app = codec.checked_properties(app)
    elif "application_properties" in fields:
        app = F.to_json(app)
    # TimeSpan.MaxValue or longer is no TTL (as for ServiceBusMessage.time_to_live); the test
    # comes before the cast, so a huge number neither wraps nor fails an ANSI cast.
    ttl_s = col("time_to_live", "double")
    ttl_s = codec.checked(ttl_s, F.isnan(ttl_s), "SEND_TTL")
    # Below zero it is clamped to -1 s first: a huge negative number would overflow the cast
    # (an ANSI error, Spark 4's default) instead of failing SEND_TTL.
    ttl_ms = F.when(ttl_s < UNLIMITED_FROM.total_seconds(),
                    (F.greatest(ttl_s, F.lit(-1.0)) * 1000).cast("bigint"))
    ttl_ms = codec.checked(ttl_ms, ttl_ms <= 0, "SEND_TTL")
    if entity.ttl_cap is not None:  # TTL-3
        ttl_ms = F.least(ttl_ms, F.lit(int(entity.ttl_cap / timedelta(milliseconds=1))))
    scheduled = col("scheduled_enqueue_time_utc", "timestamp").cast("timestamp")
    scheduled = F.when(scheduled > now_sql, scheduled)
    enqueued = F.coalesce(scheduled, now_sql)
    strings = {name: col(name) for name in SYSTEM_STRING_FIELDS}
    for name in ("message_id", "session_id", "partition_key"):
        strings[name] = codec.checked(strings[name], codec.bad_id(strings[name]),
                                      f"SEND_{name.upper()}")
    if entity.requires_session:  # SESS-1
        strings["session_id"] = codec.checked(strings["session_id"],
                                              strings["session_id"].isNull(), "SEND_NO_SESSION")
    strings["partition_key"] = codec.checked(  # PART-2
        strings["partition_key"], strings["partition_key"] != strings["session_id"],
        "SEND_KEYS_DIFFER")
    if partitions == 1:
        pid = F.lit(0)
    else:
        key = F.coalesce(col("session_id"), col("partition_key"))
        if entity.requires_duplicate_detection:
            key = F.coalesce(key, col("message_id"))
        spread = F.pmod(F.monotonically_increasing_id() + F.lit(hash(now) & 0xFFFF), partitions)
        pid = F.when(key.isNull(), spread).otherwise(
            F.pmod(F.crc32(key.cast("binary")), F.lit(partitions)))
    size = codec.size_column(body, app, list(strings.values()))
    size = codec.checked(size, size > entity.max_message_size, "SEND_TOO_LARGE")

    rows = df.select(
        pid.cast("int").alias("pid"),
        F.when(col("content_type") == PING_CONTENT_TYPE, F.lit(PING))
        .otherwise(F.lit(MSG)).alias("kind"),
        body.alias("body"), app.alias("application_properties"),
        *[column.alias("to_address" if name == "to" else name)
          for name, column in strings.items()],
        ttl_ms.alias("time_to_live_ms"), enqueued.alias("enqueued_time"),
        scheduled.alias("scheduled_enqueue_time"),
        size.cast("int").alias("size"), F.lit(hops).cast("int").alias("hops"),
        F.lit(None).cast("string").alias("body_type"),  # DATA: the body column's bytes
        F.monotonically_increasing_id().alias("_order"))
    rows = rows.withColumn("expires_at", F.expr(
        expiry_sql("enqueued_time", "time_to_live_ms * 1000")))
    idx = F.row_number().over(Window.partitionBy("pid").orderBy("_order")) - 1
    rows = rows.withColumn("idx", codec.checked(
        idx, idx >= MAX_ROWS_PER_PARTITION_PER_COMMIT, "SEND_PARTITION_FULL"))
    return rows.select(*[name for name, _ in INBOX_COLUMNS])

