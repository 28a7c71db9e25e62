"""What a delta-rs receive passes its plan as the literal relation ``{N}``
(``sbdelta/_store/receive_plan.py``): the new rows the plan can take, and the columns that
decide. Pure Python: the plan itself runs in both engines in tests/store/test_engines.py."""

from datetime import datetime, timezone

from sbdelta._store.inbox import cut_positions
from sbdelta._store.layout import COPY_SHIFT, sequence_number
from sbdelta._store.receive_plan import Choice, taken_rows, values_cte


def _row(pid, version, idx, copy=0, **extra):
    pos = sequence_number(pid, version, idx)
    return {"pid": pid, "kind": "m", "seq": pos | (copy << COPY_SHIFT), "pos": pos,
            "message_id": None, "session_id": None,
            "enqueued_time": datetime(2030, 1, 1, tzinfo=timezone.utc),
            "scheduled_enqueue_time": None, "expires_at": None, **extra}


def _choice(chosen, take_new):
    return Choice(chosen, {p: 0 for p in chosen}, take_new, {}, 9, {}, False, set())


def test_recv_1_a_queue_receive_takes_the_first_rows_of_each_chosen_partition():
    rows = [_row(0, 2, 0), _row(0, 1, 1), _row(0, 1, 0), _row(1, 1, 0), _row(2, 1, 0)]
    taken = taken_rows(rows, _choice([0, 1], {0: 2, 1: 0}))
    assert [r["seq"] for r in taken] == [sequence_number(0, 1, 0), sequence_number(0, 1, 1)]


def test_topic_5_a_position_is_taken_with_all_its_copies():
    """A subscription's copies of one message share its position; their sequence numbers sort
    after every position (copy bits above), yet the plan takes by position, then copy, and
    registers the last position taken whole."""
    first, second = _row(0, 1, 0), _row(0, 1, 1)
    copies = [_row(0, 1, 0, copy=2), _row(0, 1, 1, copy=1), _row(0, 1, 0, copy=1)]
    taken = taken_rows([second] + copies + [first], _choice([0], {0: 1}))
    assert [(r["pos"], r["seq"] >> COPY_SHIFT) for r in taken] == [
        (first["pos"], 0), (first["pos"], 1), (first["pos"], 2)]
    both = taken_rows([second] + copies + [first], _choice([0], {0: 4}))
    assert [(r["pos"], r["seq"] >> COPY_SHIFT) for r in both] == [
        (first["pos"], 0), (first["pos"], 1), (first["pos"], 2),
        (second["pos"], 0), (second["pos"], 1)]


def test_topic_5_reject_columns_travel_as_literals_only_when_the_rows_carry_them():
    """Rows a subscription's rules bound for the dead-letter queue carry their reason into
    the plan (it registers them for the dead-letter queue); a queue's rows have no such
    columns, and the relation has none."""
    plain = values_cte([_row(0, 1, 0)])
    assert "dead_letter_reason" not in plain
    assert f"CAST({sequence_number(0, 1, 0)} AS BIGINT)" in plain
    refused = values_cte([_row(0, 1, 0, dead_letter_reason="Session id is null.",
                               dead_letter_error_description="no session"),
                          _row(0, 1, 1, dead_letter_reason=None,
                               dead_letter_error_description=None)])
    assert "dead_letter_reason, dead_letter_error_description))" in refused
    assert "'Session id is null.'" in refused and "'no session'" in refused
    # the columns that only pass through stay NULL (filled in by sequence number after)
    assert "'m'" in refused and "body" in refused and "CAST(NULL AS BINARY)" in refused


def test_recv_2_a_partial_take_is_cut_at_the_position_the_counts_per_commit_give():
    """A Spark receive taking part of the new rows counted per (partition, version) cuts at
    the last position it takes (rows are numbered 0, 1, ... per partition and commit; a
    version the frontier cuts goes on after the frontier's row); a partition taking all it
    counted, or nothing, has no cut."""
    frontier = sequence_number(0, 3, 4)  # rows 5..9 of version 3 are past it
    by_version = {(0, 3): 5, (0, 4): 10, (1, 4): 2}
    counts = {0: 15, 1: 2}
    cut = cut_positions(by_version, {0: frontier, 1: -1}, {0: 3, 1: 2}, counts)
    assert cut == {0: sequence_number(0, 3, 7)}
    assert cut_positions(by_version, {0: frontier}, {0: 7}, counts) == {
        0: sequence_number(0, 4, 1)}
    assert cut_positions(by_version, {0: frontier}, {0: 15}, counts) == {}
    assert cut_positions(by_version, {0: -1, 1: -1}, {0: 0, 1: 1}, counts) == {
        1: sequence_number(1, 4, 0)}
