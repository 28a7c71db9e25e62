"""Guard codes are read from a failed job's error, never from plan or SQL text quoting them."""

import pytest

from sbdelta._store.guards import guard, guard_code


@pytest.mark.parametrize("text, code", [
    ("java.lang.RuntimeException: SBDELTA_GUARD:LOCK_LOST\n\tat ...", "LOCK_LOST"),
    ("[USER_RAISED_EXCEPTION] SBDELTA_GUARD:SEND_TTL SQLSTATE: P0001", "SEND_TTL"),
    # An analysis error prints the plan; the guards in it never ran.
    ("[PATH_NOT_FOUND] Path does not exist ... CASE WHEN (idx#1 >= 1048576) THEN "
     "raise_error(SBDELTA_GUARD:SEND_PARTITION_FULL, NullType) ELSE idx#1 END", None),
    (f"[PARSE_SYNTAX_ERROR] ... WHEN MATCHED THEN UPDATE SET t.key = {guard('EXISTS')}", None),
    ("... concat(SBDELTA_GUARD:, _guard#12) ...", None),
])
def test_guard_code_only_from_a_raised_guard(text, code):
    assert guard_code(Exception(text)) == code
