"""Values as the text of the SQL sbdelta writes (Spark SQL; :mod:`.datafusion` translates it
for DataFusion), and the local path of a table's URI."""

from __future__ import annotations

from typing import Optional

__all__ = ["local_path", "sql_literal"]


def local_path(uri: str) -> Optional[str]:
    """The local file system path of a ``file:`` URI (or a bare absolute path), else None."""
    import re

    if uri.startswith("file:"):
        return re.sub(r"^file:(//)?", "", uri)
    return uri if uri.startswith("/") else None


def sql_literal(value) -> str:
    """A SQL literal for a str, int, bool, bytes, None or datetime (aware, or naive local time
    as PySpark returns timestamps)."""
    from datetime import datetime, timezone

    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, datetime):
        # The offset makes the instant independent of spark.sql.session.timeZone, which is
        # how Spark would read a bare 'yyyy-mm-dd hh:mm:ss' (broker times are UTC instants).
        text = value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
        return f"TIMESTAMP '{text}+00:00'"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, (bytes, bytearray)):
        return f"X'{bytes(value).hex()}'"
    raise TypeError(f"no SQL literal for {type(value).__name__}")
