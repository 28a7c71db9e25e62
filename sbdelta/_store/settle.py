"""One settle path: complete, abandon, defer, dead-letter and renew, for one message, a list of
messages or lock tokens, or a DataFrame of lock tokens, each in ONE commit, all or nothing.

A settlement needs a valid lock held by the caller (SETTLE-5): the lock check is part of the
commit's condition (:func:`~sbdelta._store.locks.lock_held_sql`), never a read before it. When
one lock is not held nothing is written and :class:`~sbdelta.exceptions.MessageLockLostError`
is raised. Abandon at the delivery limit dead-letters (RECV-5); dead-lettered messages are then
moved to the dead-letter table (:mod:`.deadletter`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Dict, Optional, Sequence

from .apply import (apply_df, apply_rows, delete_or_update, max_delivery_description,
                    to_source)
from .delta import guard_error, retry
from .guards import GuardTripped
from .literals import sql_literal
from .layout import (ACTIVE, COMPLETED, DEADLETTERING, DEFERRED, MAX_DELIVERY_REASON, MSG,
                     PID_MASK, PID_SHIFT, SESSION, key_sql, msg_key, partition_of)
from .locks import lock_held_sql, seq_of_token_sql


class Disposition(enum.Enum):
    COMPLETE = "complete"
    ABANDON = "abandon"
    DEFER = "defer"
    DEAD_LETTER = "dead_letter"
    RENEW = "renew"


@dataclass(frozen=True)
class Settlement:
    """What to do to each locked message: the disposition and its arguments."""

    disposition: Disposition
    max_delivery_count: int = 0          # abandon: the entity's limit (0: no limit, e.g. a DLQ)
    locked_until: Optional[datetime] = None  # renew: the new expiry
    reason: Optional[str] = None         # dead-letter
    description: Optional[str] = None    # dead-letter

    def columns(self) -> dict:
        """The settle source columns every row of this settlement shares."""
        d = self.disposition
        if d is Disposition.COMPLETE:
            return {"_op": "settle_delete"}
        row = {"_op": "settle_update"}
        if d is Disposition.ABANDON and self.max_delivery_count:
            row.update(_abandon=True, _max_dc=self.max_delivery_count)
        elif d is Disposition.DEFER:
            row["state"] = DEFERRED
        elif d is Disposition.DEAD_LETTER:
            row.update(state=DEADLETTERING, dead_letter_reason=self.reason,
                       dead_letter_error_description=self.description)
        elif d is Disposition.RENEW:
            row.update(_keep_lock=True, locked_until=self.locked_until)
        return row

    @property
    def may_dead_letter(self) -> bool:
        return self.disposition is Disposition.DEAD_LETTER or (
            self.disposition is Disposition.ABANDON and bool(self.max_delivery_count))


@dataclass(frozen=True)
class Locked:
    """One message as its lock holder knows it."""

    sequence_number: int
    lock_token: str
    application_properties: Optional[str] = None  # abandon: the modified properties (JSON)


def _pid(store, seq: int) -> int:
    return partition_of(seq) if store.partitions > 1 else 0


def _lock_lost(what: str, detail: str) -> Exception:
    return guard_error(GuardTripped("LOCK_LOST"), f"{what}: {detail}")


def settle_messages(store, messages: Sequence[Locked], settlement: Settlement, now: datetime, *,
                    what: str) -> None:
    """Settle ``messages`` in ONE commit. Raises MessageLockLostError, writing nothing, when
    any lock is not held (expired, released, settled already, or unknown)."""
    if not messages:
        return
    shared = settlement.columns()
    rows = [dict(shared, pid=_pid(store, m.sequence_number), k=msg_key(m.sequence_number),
                 _token=m.lock_token, _guard="LOCK_LOST",
                 application_properties=m.application_properties) for m in messages]
    pids = {r["pid"] for r in rows}
    try:
        if len(rows) == 1:  # one DELETE/UPDATE: cheaper than the general MERGE
            if not retry(lambda: _settle_one(store, rows[0], now), what=what):
                raise GuardTripped("LOCK_LOST")
        else:
            retry(lambda: apply_rows(store, rows, pids, now), what=what)
    except GuardTripped as tripped:
        if tripped.code != "LOCK_LOST":
            raise
        which = ", ".join(str(m.sequence_number) for m in messages[:10])
        if len(messages) > 10:
            which += f" ... ({len(messages)} in all)"
        whose = (f"message {which}" if len(messages) == 1
                 else f"at least one of the messages {which}")
        raise _lock_lost(what, f"the lock on {whose} is lost: it expired, was released, or "
                               "the message was settled already. Nothing was settled; "
                               "receive again") from None
    if settlement.may_dead_letter:
        store.move_dead_letters(pids, now)


def settle_frame(store, tokens, settlement: Settlement, now: datetime, *, what: str) -> int:
    """Settle every lock token of ``tokens`` (a DataFrame with one ``_token`` column) in ONE
    commit; returns how many. Nulls and tokens that are not sbdelta lock tokens are not held:
    they fail the whole settlement like any lock that is lost.

    A token given twice counts once. The tokens are taken as they come first (a receive's
    DataFrame holds each once), and only when Delta's MERGE finds two source rows for one
    message (before it writes anything) are they made unique, by a shuffle the common case
    does not pay for."""
    try:
        return _settle_frame(store, tokens, settlement, now, what=what)
    except Exception as exc:  # noqa: BLE001 - re-raised unless the tokens repeat
        if not repeated_source_rows(exc):
            raise
    return _settle_frame(store, tokens.dropDuplicates(["_token"]), settlement, now, what=what)


def repeated_source_rows(exc: BaseException) -> bool:
    """Whether ``exc`` is Delta refusing a MERGE whose source has two rows for one target
    row (raised while it finds the rows to change: nothing was written)."""
    return "DELTA_MULTIPLE_SOURCE_ROW_MATCHING_TARGET_ROW_IN_MERGE" in str(exc)


def _settle_frame(store, tokens, settlement: Settlement, now: datetime, *, what: str) -> int:
    from pyspark.sql import functions as F

    seq = F.expr(seq_of_token_sql("_token"))
    src = (tokens.withColumn("seq", seq)
           .withColumn("pid", F.expr(f"CAST(shiftright(seq, {PID_SHIFT}) & {PID_MASK} AS INT)")
                       if store.partitions > 1 else F.lit(0))
           .withColumn("k", F.expr(key_sql("seq")))
           .withColumn("_guard", F.lit("LOCK_LOST")))
    for name, value in settlement.columns().items():
        src = src.withColumn(name, F.lit(value))
    src = to_source(src).drop("_out")
    # The partitions touched, as literals for the MERGE (Delta narrows conflicts by them; one
    # partition: no job to find them). A source that is not deterministic is materialized by
    # Delta's MERGE itself.
    pids = ([0] if store.partitions == 1 else
            sorted(r.pid for r in src.select("pid").distinct().collect() if r.pid is not None))
    try:
        metrics = retry(lambda: apply_df(store, src, pids or [0], now,
                                         [settlement.columns()["_op"]]), what=what)
    except GuardTripped as tripped:
        if tripped.code != "LOCK_LOST":
            raise
        raise _lock_lost(what, "at least one of the lock tokens is not held (expired, "
                               "released, settled or unknown). Nothing was settled") from None
    settled = int(metrics["num_affected_rows"]) if metrics is not None else 0
    if settled and settlement.may_dead_letter:
        store.move_dead_letters(pids, now)
    return settled


def _settle_one(store, row: dict, now: datetime) -> bool:
    """One message's settlement as ONE DELETE or UPDATE (cheaper than the apply MERGE): through
    delta-rs on a local table (milliseconds, no Spark job), else Spark SQL. The condition and
    the assignments are written once, here, for both.

    Returns False, having written nothing, when the lock is not held (wrong token, expired,
    or the message is gone).
    """
    lit = sql_literal
    where = (f"pid = {int(row['pid'])} AND k = {lit(row['k'])} AND "
             + lock_held_sql(now, token=lit(row["_token"]), target=""))
    sets = _settle_sets(row, dead_letter=store.dead_letter)
    return delete_or_update(store, where, sets) == 1


def _settle_sets(row: dict, *, dead_letter: bool) -> Optional[Dict[str, str]]:
    """The assignments of one settlement's UPDATE, or None when it is a DELETE (a completion
    outside a dead-letter table, which keeps a COMPLETED tombstone instead)."""
    lit = sql_literal
    if row["_op"] == "settle_delete":
        if not dead_letter:
            return None
        return {"state": f"'{COMPLETED}'", "lock_token": "NULL",
                "locked_until": "NULL", "body": "NULL",
                "rev": "rev + 1"}
    limit = int(row.get("_max_dc") or 0)
    over = f"({lit(bool(row.get('_abandon')))} AND delivery_count >= {limit})"
    keep = bool(row.get("_keep_lock"))

    def text(name):
        return f"CAST({lit(row.get(name))} AS STRING)"

    return {
        "state": (f"CASE WHEN {over} THEN '{DEADLETTERING}' "
                  f"ELSE coalesce({text('state')}, state) END"),
        "dead_letter_reason": (f"CASE WHEN {over} THEN '{MAX_DELIVERY_REASON}' ELSE "
                               f"coalesce({text('dead_letter_reason')}, dead_letter_reason) END"),
        "dead_letter_error_description": (
            f"CASE WHEN {over} THEN {max_delivery_description('delivery_count')} "
            f"ELSE coalesce({text('dead_letter_error_description')}, "
            "dead_letter_error_description) END"),
        "lock_token": "lock_token" if keep else "NULL",
        "locked_until": lit(row.get("locked_until")) if keep else "NULL",
        "application_properties": (f"coalesce({text('application_properties')}, "
                                   "application_properties)"),
        "rev": "rev + 1",
    }


def void_locks(store, now: datetime) -> int:
    """End every message lock and session lock of ``store`` held at ``now``, in ONE UPDATE
    (SETTLE-7: a lock is lost when the entity's properties change while the message is
    locked). A lock ends at ``now``, as if it had expired then: every later settlement or
    renewal of it, through a message, a lock token or a DataFrame of tokens, raises
    MessageLockLostError (SessionLockLostError for a session receiver, whose message locks
    are its session lock), and the message, or the session with its messages, may be
    received again. Session states are kept. A forwarding mover's mark (a ``FORWARDING``
    row's lock token, held for the operation bound while its append may be landing) is no
    receiver's lock and is kept: ending it early could hand the batch back to the source
    while its append lands. Returns how many locks ended."""
    when = sql_literal(now)
    return retry(lambda: delete_or_update(
        store, f"((kind = '{MSG}' AND state IN ('{ACTIVE}', '{DEFERRED}')) OR kind = '{SESSION}')"
               f" AND lock_token IS NOT NULL AND locked_until > {when}",
        {"locked_until": when, "rev": "rev + 1"}), what=f"lock release in {store.messages_path}")
