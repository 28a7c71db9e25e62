"""The lock room: what a lock token is, when a lock is valid, how a lock is granted.

Every form of receive (a batch, a DataFrame, deferred messages by sequence number) grants locks
with :func:`grant`; every settlement and renewal checks a lock with :func:`lock_held_sql`;
every planner decides what may be handed out with :func:`conditions`. A session lock
(:mod:`.sessions`) is a token of the same shape; the messages a session receiver holds carry
its grant prefix and its end time, so they are checked here like any other lock.

Lock tokens are UUID-shaped: 64 random bits of the grant, then the message's 64-bit sequence
number, so a DataFrame of tokens can be settled without a lookup, with literal ``pid``
predicates (the partition id sits in the top bits of the sequence number).
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Dict, Optional, Tuple

from .literals import sql_literal
from .layout import ACTIVE, DEADLETTERING, DEFERRED, MSG, SCHEDULED, SEQ_MASK


@dataclass(frozen=True)
class Policy:
    """What the entity's properties say about delivery, read when an operation starts."""

    lock_duration: timedelta
    max_delivery_count: int
    default_ttl: Optional[timedelta]
    dead_letter_on_expiration: bool
    duplicate_detection: Optional[timedelta]  # the window, None when off
    #: How long after a lock's end another receiver may take the message: twice the clock's
    #: skew tolerance (RECV-3 across hosts whose clocks differ; ``_clock.lock_grace``).
    lock_grace: timedelta = timedelta(0)


#: A dead-letter queue: no expiry (TTL-8), no delivery limit, the default lock duration.
DLQ_POLICY = Policy(timedelta(seconds=30), 2 ** 31 - 1, None, False, None)


def lock_token_prefix() -> str:
    """Random first half of the lock tokens handed out by one lock grant."""
    return f"{random.getrandbits(64):016x}"


def lock_token_sql(prefix: str, seq_col: str = "seq") -> str:
    """SQL for the lock token of ``seq_col`` under the grant ``prefix``."""
    h = f"lpad(hex({seq_col}), 16, '0')"
    return (f"lower(concat('{prefix[:8]}-{prefix[8:12]}-{prefix[12:16]}-', substr({h}, 1, 4), "
            f"'-', substr({h}, 5, 12)))")


def lock_token(prefix: str, seq: int) -> str:
    h = f"{seq:016x}"
    return f"{prefix[:8]}-{prefix[8:12]}-{prefix[12:16]}-{h[:4]}-{h[4:]}"


def seq_of_token(token: str) -> Optional[int]:
    """The sequence number inside a lock token, or None when it is not one of ours."""
    try:
        value = uuid.UUID(str(token))
    except (ValueError, TypeError, AttributeError):
        return None
    if str(value) != str(token).lower():
        return None
    return value.int & SEQ_MASK


def seq_of_token_sql(col: str) -> str:
    """The sequence number inside the lock token ``col``; NULL for any text that is not one
    (TRY_CAST: under ANSI SQL, Spark 4's default, a CAST of a second half of 2^63 or more,
    which a random UUID has every other time, would fail the query instead)."""
    return f"TRY_CAST(conv(substr(replace({col}, '-', ''), 17, 16), 16, 10) AS BIGINT)"


def lock_held_sql(now: datetime, token: str = "s._token", target: str = "t.") -> str:
    """The caller holds the lock: its token is the row's and the lock has not expired."""
    return f"{target}lock_token = {token} AND {target}locked_until > {sql_literal(now)}"


#: Before any broker time (messages are enqueued at real or test-clock times after it).
_NO_MESSAGE_BEFORE = datetime(1900, 1, 1, tzinfo=timezone.utc)


def expired_sql(policy: Policy, now: datetime, *, dead_letter: bool, prefix: str = "") -> str:
    """TTL-4/7: the row's message has expired (the entity default applies when it has none).

    Written in the SQL both engines read (Spark and delta-rs's DataFusion: comparisons with
    timestamp literals only): ``enqueued_time + default <= now`` is asked as
    ``enqueued_time <= now - default``, computed here, so no interval arithmetic (which
    overflows in DataFusion for TTLs near TimeSpan.MaxValue) is needed."""
    if dead_letter:
        return "FALSE"  # TTL-8
    stored = f"{prefix}expires_at"
    if policy.default_ttl is None:
        return f"coalesce({stored} <= {sql_literal(now)}, FALSE)"
    if now - _NO_MESSAGE_BEFORE > policy.default_ttl:
        born_before = f"{prefix}enqueued_time <= {sql_literal(now - policy.default_ttl)}"
    else:  # no message is older than the default (TimeSpan.MaxValue, say): none expired by it
        born_before = "FALSE"
    return (f"coalesce(CASE WHEN {stored} IS NULL THEN {born_before} "
            f"ELSE {stored} <= {sql_literal(now)} END, FALSE)")


def expired(policy: Policy, now: datetime, row: dict) -> bool:
    """:func:`expired_sql` of a row read into Python (a message row, not a dead letter's)."""
    stored = row.get("expires_at")
    if stored is not None:
        return stored <= now
    if policy.default_ttl is None or now - _NO_MESSAGE_BEFORE <= policy.default_ttl:
        return False
    enqueued = row.get("enqueued_time")
    return enqueued is not None and enqueued <= now - policy.default_ttl


def over_limit_sql(policy: Policy, *, dead_letter: bool = False) -> str:
    """RECV-5: the row's message reached the delivery limit. A deferred message never does:
    it is delivered only when asked for by number (SETTLE-4), and expiry is what ends it."""
    if dead_letter:
        return "FALSE"
    return f"(state <> '{DEFERRED}' AND delivery_count >= {policy.max_delivery_count})"


def free_sql(now: datetime) -> str:
    """Nobody holds the row's lock: never locked, or the lock ended (RECV-4, TTL-5). Callers
    pass their time less the policy's ``lock_grace`` (a holder whose clock runs behind may
    still believe it holds a lock that ended by this host's clock)."""
    return f"(locked_until IS NULL OR locked_until <= {sql_literal(now)})"


def conditions(policy: Policy, now: datetime, *, dead_letter: bool) -> Tuple[str, str, str]:
    """SQL over ``messages`` rows: (claimable, needs-action, expired).

    Claimable: visible, unlocked (or its lock expired: RECV-4), not expired, under the delivery
    limit. Needs action: free but expired (TTL-5/6) or at the delivery limit (RECV-5), a free
    deferred message that expired (SETTLE-4 with TTL-4/6), or a row left half-way through a
    dead-letter move.
    """
    free = free_sql(now - policy.lock_grace)
    # An active message is visible whatever its enqueued time (its sender's clock may run
    # ahead of this host's); a scheduled one from its time on.
    live = (f"kind = '{MSG}' AND (state = '{ACTIVE}' OR (state = '{SCHEDULED}' "
            f"AND visible_at <= {sql_literal(now)})) AND {free}")
    deferred = f"kind = '{MSG}' AND state = '{DEFERRED}' AND {free}"
    expired = expired_sql(policy, now, dead_letter=dead_letter)
    over = over_limit_sql(policy, dead_letter=dead_letter)
    claimable = f"({live} AND NOT ({expired}) AND NOT ({over}))"
    action = (f"(({live} AND (({expired}) OR ({over}))) OR ({deferred} AND ({expired})) "
              f"OR (kind = '{MSG}' AND state = '{DEADLETTERING}'))")
    return claimable, action, expired


def grant(prefix: str, until: datetime, *, first: bool = False,
          state: Optional[str] = ACTIVE) -> Dict[str, str]:
    """The columns a lock grant sets on a messages row, as SQL over the row (RECV-2/5): the
    lock token of the grant ``prefix``, the lock's end ``until`` and one more delivery.

    ``first`` marks rows delivered for the first time (registered from the inbox now);
    ``state=None`` keeps the rows' state (a deferred message stays deferred while locked).
    """
    changes = {} if state is None else {"state": f"'{state}'"}
    return {**changes, "lock_token": lock_token_sql(prefix), "locked_until": sql_literal(until),
            "delivery_count": "1" if first else "delivery_count + 1"}
