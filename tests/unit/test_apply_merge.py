"""The apply MERGE is written once and narrowed to the operations its source rows carry: a
narrowed MERGE keeps every clause of those operations and both guards, in the same order, so
a row of any other operation still trips a guard (it never slips through unchanged)."""

from datetime import datetime, timezone

import pytest

from sbdelta._store.apply import OPS, apply_merge

NOW = datetime(2030, 1, 1, tzinfo=timezone.utc)


def _ops_of(spec):
    """Per clause: matched or not, its action, and the operations its condition names."""
    out = []
    for c in spec.clauses:
        named = tuple(op for op in OPS if f"'{op}'" in (c.condition or ""))
        out.append((c.matched, c.action, named))
    return out


def test_the_whole_merge_has_every_operation_and_both_guards():
    clauses = _ops_of(apply_merge([0], NOW))
    assert len(clauses) == 10
    assert {op for _, _, named in clauses for op in named} == set(OPS)
    assert (True, "guard", ()) in clauses and clauses[-1] == (False, "guard", ())


@pytest.mark.parametrize("ops", [("settle_delete",), ("settle_update",),
                                 ("update", "insert", "delete"), ("cancel",), ("insert",)])
def test_a_narrowed_merge_keeps_the_clauses_of_its_operations_in_order(ops):
    whole = apply_merge([0, 1], NOW)
    narrow = apply_merge([0, 1], NOW, ops=ops)
    assert narrow.on == whole.on
    kept = [c for c in whole.clauses
            if c.action == "guard" or any(f"'{op}'" in (c.condition or "") for op in ops)]
    # The same clauses, in the same order; a shared clause names only the operations kept.
    assert [(c.matched, c.action) for c in narrow.clauses] == [
        (c.matched, c.action) for c in kept]
    for clause in narrow.clauses:
        named = {op for op in OPS if f"'{op}'" in (clause.condition or "")}
        assert clause.action == "guard" or (named and named <= set(ops)), clause
    assert [c.action for c in narrow.clauses].count("guard") == 2


def test_an_unknown_operation_is_refused():
    with pytest.raises(ValueError, match=r"unknown apply operation\(s\) \['upsert'\]"):
        apply_merge([0], NOW, ops=["upsert"])
