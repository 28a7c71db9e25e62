"""sbdelta's SQL text, as delta-rs's DataFusion reads it.

sbdelta writes its conditions and assignments once, in the SQL Spark reads
(:func:`~sbdelta._store.delta.sql_literal` makes the literals). DataFusion reads the same
expressions with two differences that matter here, both in literals:

* strings: Spark escapes a quote as ``\\'`` and a backslash as ``\\\\``; DataFusion doubles
  the quote and takes backslashes as they are;
* timestamps: ``TIMESTAMP '... +00:00'`` is a nanosecond timestamp without a zone in
  DataFusion, which it will not compare with (or assign to) a Delta ``TIMESTAMP`` column
  (microseconds, UTC); :func:`translate` writes it as an ``arrow_cast`` to that type.

Nothing else is rewritten: the expressions sbdelta hands to delta-rs use the functions both
engines share (``coalesce``, ``concat``, ``CASE``, comparisons, ``CAST``).
"""

from __future__ import annotations

import re

# A Spark string literal (backslash escapes), optionally typed as TIMESTAMP.
_LITERAL = re.compile(r"(?P<ts>\bTIMESTAMP\s+)?'(?P<body>(?:[^'\\]|\\.)*)'", re.IGNORECASE)
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_UTC = 'Timestamp(Microsecond, Some("UTC"))'


def _unescape(body: str) -> str:
    return _ESCAPE.sub(lambda m: m.group(1), body)


def string(value: str) -> str:
    """A DataFusion string literal."""
    return "'" + value.replace("'", "''") + "'"


def _literal(match: "re.Match[str]") -> str:
    value = _unescape(match.group("body"))
    if not match.group("ts"):
        return string(value)
    text = value.strip()
    if text.endswith("+00:00"):
        text = text[:-len("+00:00")]
    return f"arrow_cast({string(text.replace(' ', 'T', 1) + 'Z')}, '{_UTC}')"


def translate(sql: str) -> str:
    """``sql`` (an expression in the Spark SQL sbdelta writes) in DataFusion's dialect."""
    return _LITERAL.sub(_literal, sql)
