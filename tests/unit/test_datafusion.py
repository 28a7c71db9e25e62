"""sbdelta's Spark SQL literals, as delta-rs's DataFusion reads them (issue 16): the settlement
conditions and assignments are written once, in Spark SQL, and translated for delta-rs."""

from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pytest
from deltalake import QueryBuilder

from sbdelta._store.datafusion import translate
from sbdelta._store.literals import sql_literal


@pytest.mark.parametrize("text", ["plain", "it's", "back\\slash", "\\'", "''", "a\nb", ""])
def test_a_string_literal_means_the_same_string_to_datafusion(text):
    assert _select(translate(sql_literal(text))) == text


def test_a_timestamp_literal_is_the_same_utc_instant_in_microseconds():
    instant = datetime(2030, 1, 1, 12, 30, 5, 123456, tzinfo=timezone(timedelta(hours=2)))
    assert _select(translate(sql_literal(instant))) == instant


def test_only_literals_are_rewritten():
    sql = ("state = 'A' AND locked_until > TIMESTAMP '2030-01-01 00:00:00.000000+00:00' "
           "AND body = X'00ff' AND reason = 'x\\'y'")
    assert translate(sql) == (
        "state = 'A' AND locked_until > arrow_cast('2030-01-01T00:00:00.000000Z', "
        "'Timestamp(Microsecond, Some(\"UTC\"))') AND body = X'00ff' AND reason = 'x''y'")


def test_the_names_datafusion_spells_differently_are_rewritten_outside_literals_only():
    """A receive's plan (``_store/receive_plan.py``) is one SQL text for both engines: Spark's
    ``hex`` is DataFusion's ``to_hex``, ``BINARY`` is ``BYTEA``, and a typed NULL timestamp
    must be the Delta column's type; the same words inside a string literal stay."""
    sql = ("lpad(hex(seq), 16, '0') = 'hex(' AND CAST(NULL AS BINARY) IS NULL "
           "AND CAST(NULL AS TIMESTAMP) IS NULL AND to_hex(1) = 'AS BINARY'")
    assert translate(sql) == (
        "lpad(to_hex(seq), 16, '0') = 'hex(' AND CAST(NULL AS BYTEA) IS NULL "
        "AND arrow_cast(NULL, 'Timestamp(Microsecond, Some(\"UTC\"))') IS NULL "
        "AND to_hex(1) = 'AS BINARY'")
    assert _select(translate("lower(lpad(hex(CAST(255 AS BIGINT)), 4, '0'))")) == "00ff"
    assert _select(translate("CAST(NULL AS BINARY)")) is None


def _select(expression):
    """The value of ``expression`` as DataFusion (delta-rs's query engine) computes it."""
    result = pa.table(QueryBuilder().execute(f"SELECT {expression} AS v").read_all())
    return result.column("v")[0].as_py()
