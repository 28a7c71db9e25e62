"""sbdelta's SQL text, as delta-rs's DataFusion reads it.

sbdelta writes its conditions and assignments once, in the SQL Spark reads
(:func:`~sbdelta._store.literals.sql_literal` makes the literals). DataFusion reads the same
expressions with two differences that matter here, both in literals:

* strings: Spark escapes a quote as ``\\'`` and a backslash as ``\\\\``; DataFusion doubles
  the quote and takes backslashes as they are;
* timestamps: ``TIMESTAMP '... +00:00'`` is a nanosecond timestamp without a zone in
  DataFusion, which it will not compare with (or assign to) a Delta ``TIMESTAMP`` column
  (microseconds, UTC); :func:`translate` writes it as an ``arrow_cast`` to that type.

Outside literals three names differ: Spark's ``hex`` is DataFusion's ``to_hex``, its
``BINARY`` type DataFusion's ``BYTEA``, and a typed NULL timestamp must be the Delta column's
Arrow type (as above). Nothing else is rewritten: the expressions sbdelta hands to delta-rs
use the functions both engines share (``coalesce``, ``concat``, ``lpad``, ``CASE``, window
functions, comparisons, ``CAST``).
"""

from __future__ import annotations

import re

# A Spark string literal (backslash escapes), optionally typed as TIMESTAMP; or, outside
# literals, one of the names DataFusion spells differently.
_LITERAL = re.compile(r"(?P<ts>\bTIMESTAMP\s+)?'(?P<body>(?:[^'\\]|\\.)*)'"
                      r"|(?P<hex>\bhex\()|(?P<binary>\bAS\s+BINARY\b)"
                      r"|(?P<null_ts>\bCAST\(NULL\s+AS\s+TIMESTAMP\))", re.IGNORECASE)
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
_UTC = 'Timestamp(Microsecond, Some("UTC"))'


def _unescape(body: str) -> str:
    return _ESCAPE.sub(lambda m: m.group(1), body)


def string(value: str) -> str:
    """A DataFusion string literal."""
    return "'" + value.replace("'", "''") + "'"


def _literal(match: "re.Match[str]") -> str:
    if match.group("hex"):
        return "to_hex("
    if match.group("binary"):
        return "AS BYTEA"
    if match.group("null_ts"):
        return f"arrow_cast(NULL, '{_UTC}')"
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
