"""What a message looks like in a backlog queue (PAIR-4), and how the syphon restores it (PAIR-7).

Messages for many entities share one backlog queue, so the destination travels in the message:
the entity path as application property ``x-ms-path``; the session id, time to live and
scheduled enqueue time are cleared (a backlog queue has no sessions, keeps messages without
limit and delivers them at once) and carried as ``x-ms-sessionid``, ``x-ms-timetolive``
(milliseconds) and ``x-ms-scheduledenqueuetimeutc``. The source documents' table gives
``x-ms-path`` for the scheduled time too, which would overwrite the destination; sbdelta uses
its own alias for it, and says so in docs/paired.md.

Restoring (:func:`restored_rows`, Spark Columns over a range of backlog rows) counts the time
to live from the original enqueue (the backlog message's enqueue time), or from the scheduled
time when there was one, so a message expires when it would have expired had it been sent to
the primary directly.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any, Dict

from .._amqp_body import body_of
from .._message import ServiceBusMessage, with_body
from ..exceptions import InvalidMessageError

__all__ = ["PATH", "SESSION_ID", "TIME_TO_LIVE", "SCHEDULED", "RESERVED", "to_backlog",
           "restored_rows"]

PATH = "x-ms-path"
SESSION_ID = "x-ms-sessionid"
TIME_TO_LIVE = "x-ms-timetolive"
SCHEDULED = "x-ms-scheduledenqueuetimeutc"
RESERVED = (PATH, SESSION_ID, TIME_TO_LIVE, SCHEDULED)

#: Fields copied as they are between a message and its backlog form.
_KEPT = ("message_id", "partition_key", "content_type", "correlation_id", "subject", "to",
         "reply_to", "reply_to_session_id")


def to_backlog(message: ServiceBusMessage, destination: str) -> ServiceBusMessage:
    """The backlog form of ``message`` bound for entity path ``destination`` (PAIR-4).

    Raises:
        InvalidMessageError: The message already has one of the reserved application
            properties (:data:`RESERVED`): they would be lost or misread on the way back.
    """
    props: Dict[str, Any] = dict(message.application_properties or {})
    taken = sorted(key for key in props if key in RESERVED)
    if taken:
        raise InvalidMessageError(
            f"application propert{'y' if len(taken) == 1 else 'ies'} {taken} "
            f"{'is' if len(taken) == 1 else 'are'} reserved for paired namespaces (they carry "
            "a message through a backlog queue): rename them")
    props[PATH] = destination
    if message.session_id is not None:
        props[SESSION_ID] = message.session_id
    if message.time_to_live is not None:
        props[TIME_TO_LIVE] = int(message.time_to_live / timedelta(milliseconds=1))
    if message.scheduled_enqueue_time_utc is not None:
        props[SCHEDULED] = message.scheduled_enqueue_time_utc
    partition_key = message.partition_key
    fields = {name: getattr(message, name) for name in _KEPT}
    if partition_key is None and message.session_id is not None:
        fields["partition_key"] = message.session_id  # keeps one session in one partition
    return with_body(ServiceBusMessage(None, application_properties=props, **fields),
                     *body_of(message))


# -- restoring backlog rows, as Spark Columns (the syphon) --------------------------------------

#: One JSON value as :func:`sbdelta._app_properties.encode_properties` writes it at the top level
#: of application properties: a string, a one-key object (``{"$t": ...}``...), or a scalar.
_VALUE = r'("(?:[^"\\]|\\.)*"|\{[^{}]*\}|[^,{}"]+)'
#: A reserved key at the top level: after ``{`` or ``,`` (a quote inside a string value is
#: escaped, so ``,"x-ms-path":`` can only be a key).
_RESERVED_KEYS = "|".join(re.escape(key) for key in RESERVED)
_STRIP = r'(?:(?<=\{)|,)"(?:' + _RESERVED_KEYS + r')":' + _VALUE


#: The reserved keys' raw values, as the restore names them while it works.
_RAWS = ((PATH, "_raw_path"), (SESSION_ID, "_raw_session"), (TIME_TO_LIVE, "_raw_ttl"),
         (SCHEDULED, "_raw_scheduled"))


def _raw(column, key: str):
    """The raw JSON text of top-level property ``key`` in the stored JSON (NULL: absent). The
    regular expression runs only where the key's text occurs at all (a substring search)."""
    from pyspark.sql import functions as F

    raw = F.regexp_extract(column, r'(?:^\{|,)"' + re.escape(key) + '":' + _VALUE, 1)
    return F.when(column.contains(f'"{key}":'), F.when(raw != "", raw))


def _json_string(raw):
    """A raw JSON string value unescaped (NULL when ``raw`` is not a JSON string). ``raw`` is
    a whole JSON string (:data:`_VALUE`), so one without a backslash is its text in quotes;
    only one with escapes goes through Spark's JSON parser."""
    from pyspark.sql import functions as F

    return (F.when(~raw.startswith('"'), F.lit(None).cast("string"))
            .when(~raw.contains("\\"), raw.substr(F.lit(2), F.length(raw) - 2))
            .otherwise(F.get_json_object(F.concat(F.lit('{"v":'), raw, F.lit("}")), "$.v")))


#: The usual backlog form: ``x-ms-path`` the one reserved key, once, at the top level (after
#: ``{`` or ``,``), its value a string without escapes. Such a row is restored by plain string
#: functions (where the key is, where its value ends) rather than regular expressions; any
#: other row goes the general way. ``_at``: where the key starts (1-based, 0: absent).
_PATH_KEY = f'"{PATH}":"'
_SIMPLE = {
    "_at": f"instr(application_properties, '{_PATH_KEY}')",
    "_plain": (f"substring_index(substr(application_properties, _at + {len(_PATH_KEY)}), "
               "'\"', 1)"),
}
_SIMPLE_WHEN = (
    f"_at > 0 AND locate('\"{PATH}\":', application_properties, _at + 1) = 0"
    " AND (substr(application_properties, _at - 1, 1) = ','"
    " OR (_at = 2 AND substr(application_properties, 1, 1) = '{'))"
    f" AND length(application_properties) > _at + {len(_PATH_KEY) - 1} + length(_plain)"
    " AND NOT contains(_plain, '\\\\')"
    + "".join(f" AND NOT contains(application_properties, '\"{key}\":')"
              for key in RESERVED if key != PATH))
#: A simple row's properties without its ``x-ms-path`` entry: the comma before it goes with
#: it, or the one after it when it is the first key (as :data:`_STRIP` and the cleanup do).
_AFTER = f"_at + {len(_PATH_KEY)} + length(_plain) + 1"  # the first character after the value
_SIMPLE_CUT = (
    "CASE WHEN substr(application_properties, _at - 1, 1) = '{' THEN concat('{', "
    f"substr(application_properties, {_AFTER} + CASE WHEN "
    f"substr(application_properties, {_AFTER}, 1) = ',' THEN 1 ELSE 0 END)) "
    f"ELSE concat(substr(application_properties, 1, _at - 2), "
    f"substr(application_properties, {_AFTER})) END")


def restored_rows(rows):
    """Backlog inbox rows as the messages they stand for (PAIR-7), as Columns (no Python per
    row).

    Adds ``_path`` (the destination, ``x-ms-path``) and ``_invalid`` (why the row cannot be
    restored, NULL when it can: the syphon dead-letters it as ``InvalidBacklogMessage``), and sets ``session_id``, ``time_to_live_ms``,
    ``scheduled_enqueue_time`` and ``expires_at`` (the time to live counted from the scheduled
    time, else from the backlog enqueue) from the reserved properties, which are cut out of
    ``application_properties``; ``size`` is counted again without them (SEND-5). Whether a
    scheduled time is still ahead and whether the message has expired are the destination's
    to judge when the row arrives there, as for any send.
    """
    from pyspark.sql import functions as F

    from .._size import message_size
    from .._message_fields import SYSTEM_STRING_FIELDS

    app = F.col("application_properties")
    rows = rows.select("*", F.expr(_SIMPLE["_at"]).alias("_at"))
    rows = rows.select("*", F.expr(_SIMPLE["_plain"]).alias("_plain"))
    rows = rows.select("*", F.expr(_SIMPLE_WHEN).alias("_simple"))
    simple = F.col("_simple")
    # Each raw value extracted once, then read by name: Spark keeps a projection apart
    # (rather than inline a costly expression) where the next one reads its column twice.
    rows = rows.select("*", *[
        (F.when(simple, F.concat(F.lit('"'), F.col("_plain"), F.lit('"')))
         .otherwise(_raw(app, key)) if key == PATH else _raw(app, key)).alias(name)
        for key, name in _RAWS])
    path_raw, session_raw = F.col("_raw_path"), F.col("_raw_session")
    ttl_raw, scheduled_raw = F.col("_raw_ttl"), F.col("_raw_scheduled")
    rows = rows.select("*", F.when(simple, F.col("_plain")).otherwise(
                           _json_string(path_raw)).alias("_path"),
                       _json_string(session_raw).alias("_session"))
    path, session = F.col("_path"), F.col("_session")
    ttl = F.when(ttl_raw.rlike("^[0-9]+$"), ttl_raw.cast("bigint"))
    scheduled = F.when(scheduled_raw.rlike(r'^\{"\$t":"[^"]*"\}$'),
                       F.regexp_extract(scheduled_raw, r'"\$t":"([^"]*)"', 1).cast("timestamp"))
    invalid = (
        F.when(path_raw.isNull(), F.lit(f"the message has no {PATH} property naming its "
                                        "destination (a paired sender sets it)"))
        .when(path.isNull() | (path == ""), F.lit(f"{PATH} is not an entity path"))
        .when(session_raw.isNotNull() & session.isNull(), F.lit(f"{SESSION_ID} is not a string"))
        .when(ttl_raw.isNotNull() & ttl.isNull(),
              F.lit(f"{TIME_TO_LIVE} is not a number of milliseconds"))
        .when(scheduled_raw.isNotNull() & scheduled.isNull(),
              F.lit(f"{SCHEDULED} is not a date and time")))
    stripped = F.when(simple, F.expr(_SIMPLE_CUT)).otherwise(
        F.regexp_replace(F.regexp_replace(app, _STRIP, ""), r"^\{,", "{"))
    stripped = F.when(stripped != "{}", stripped)
    out = (rows
           .withColumn("_invalid", invalid)
           .withColumn("_base", F.coalesce(scheduled, F.col("enqueued_time")))
           .withColumn("partition_key", F.when(
               session.isNull() | ~F.col("partition_key").eqNullSafe(session),
               F.col("partition_key")))
           .withColumn("session_id", session)
           .withColumn("time_to_live_ms", ttl)
           .withColumn("scheduled_enqueue_time", scheduled)
           .withColumn("application_properties", stripped)
           .drop("_session", "_at", "_plain", "_simple", *[name for _, name in _RAWS]))
    from .._durations import expiry_sql

    strings = [F.col("to_address" if name == "to" else name) for name in SYSTEM_STRING_FIELDS]
    return (out.withColumn("expires_at", F.expr(expiry_sql("_base", "time_to_live_ms * 1000")))
            .withColumn("size", message_size(
                lambda c: F.coalesce(F.octet_length(c), F.lit(0)), F.col("body"),
                F.col("application_properties"), strings).cast("int"))
            .drop("_base"))
