"""SEND-5, the one size rule, for every send form.

The size of a message is the sum of

- the body's bytes;
- the UTF-8 bytes of its application properties as they are stored: the JSON text that
  :func:`sbdelta._app_properties.encode_properties` writes (or, for ``send_dataframe``, the JSON
  text of the ``application_properties`` column, a map or struct being written with
  ``to_json``); 0 without properties;
- the UTF-8 bytes of every system string property that is set: message_id, session_id,
  partition_key, content_type, correlation_id, subject, to, reply_to, reply_to_session_id;
- :data:`HEADER_ALLOWANCE`, 72 bytes for the fixed-size header fields every stored message
  carries, set or not (:data:`HEADER_FIELDS`).

A message is stored when its size is at most ``max_message_size_in_kilobytes * 1024``, so a
body alone may be at most the limit minus 72 bytes. :func:`message_size` writes the rule once,
over a "byte length" function: Python evaluates it per message with :func:`byte_length`
(``ServiceBusMessage.size_in_bytes``, batches, ``send_messages``), Spark as a Column inside
``send_dataframe``'s write (:func:`sbdelta._store.codec.size_column`).
"""

from __future__ import annotations

from typing import Callable, Dict, Iterable

#: The fixed-size header fields of a stored message and the bytes each is counted as.
HEADER_FIELDS: Dict[str, int] = {
    "sequence_number": 8, "enqueued_time_utc": 8, "scheduled_enqueue_time_utc": 8,
    "time_to_live": 8, "expires_at_utc": 8, "locked_until_utc": 8, "lock_token": 16,
    "delivery_count": 4, "state": 4,
}
HEADER_ALLOWANCE = sum(HEADER_FIELDS.values())

SIZE_RULE = (f"the size is body + application properties (their stored JSON text) + system "
             f"string properties + {HEADER_ALLOWANCE} bytes of fixed header (SEND-5)")


def message_size(length: Callable, body, properties, strings: Iterable):
    """SEND-5, the one definition: ``length`` gives the bytes of one value (0 for none).

    ``properties`` is the stored JSON text of the application properties; ``strings`` are the
    system string properties. Called with Python values it returns an int, with Spark Columns
    a Column.
    """
    return HEADER_ALLOWANCE + length(body) + length(properties) + sum(length(s) for s in strings)


def byte_length(value) -> int:
    """The bytes of one Python value: UTF-8 for text, 0 for None."""
    if value is None:
        return 0
    return len(value.encode("utf-8")) if isinstance(value, str) else len(value)
