"""Session locks and session state (SESS-2, SESS-4, SESS-5).

Each session of a session entity has one ``SESSION`` row in the entity's ``messages`` table,
key ``s:<session id>``, in the partition its session id hashes to (PART-2: the partition of all
its messages). The row holds the session lock (``lock_token``, ``locked_until``) and the session
state (``application_properties``: the state's bytes in base64; NULL when there is none).

A session lock token has the shape of a message lock token with sequence number 0; its first
half (the *grant prefix*) is the first half of the token of every message the session receiver
holds: a session receive locks messages with the session's prefix and locked-until time, so
settling a session message is the ordinary settlement (token and time checked in one commit),
and renewing or releasing the session changes the session row and its messages in one commit.

Every change is one apply MERGE (:mod:`.apply`) at the revision read, so two receivers cannot
both take a session: the loser's MERGE trips the ``STALE`` guard, its retry reads the winner's
lock and raises :class:`SessionCannotBeLockedError`.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Dict, List, Optional, Tuple

from .._clock import from_spark
from ..exceptions import SessionCannotBeLockedError, SessionLockLostError
from .apply import apply_rows
from .delta import retry
from .literals import sql_literal
from . import rs
from .inbox import inbox_range, inbox_rows, scan_inbox
from .layout import (ACTIVE, CONTROL_COLUMNS, DEFERRED, FRONTIER, MSG, PID_SHIFT, SCHEDULED,
                     SESSION, frontier_at, session_key, sessions_sql,
                     start_version)
from .locks import Policy, conditions, lock_token, lock_token_prefix
from .reads import query


@dataclass
class SessionHold:
    """Session locks this process holds, taken in one commit under one lock token and one
    end: one session (a session receiver) or several (a sessions receiver, the bulk form).
    ``members`` maps each session id to its partition."""

    members: Dict[str, int]
    token: str
    locked_until: datetime

    @property
    def session_id(self) -> str:
        """The session's id, for a hold of one session."""
        (session_id,) = self.members
        return session_id

    @property
    def pid(self) -> int:
        """The session's partition, for a hold of one session."""
        return self.members[self.session_id]

    @property
    def session_ids(self) -> List[str]:
        return sorted(self.members)

    @property
    def pids(self) -> List[int]:
        return sorted(set(self.members.values()))

    def only_sql(self) -> str:
        """SQL that holds for the messages of the held sessions."""
        return sessions_sql(self.members)

    def label(self) -> str:
        if len(self.members) == 1:
            return f"session {self.session_id!r}"
        return f"sessions {', '.join(repr(s) for s in self.session_ids)}"

    @property
    def grant_prefix(self) -> str:
        """The 16 hex digits that start the lock token of every message locked under this
        hold (see :func:`.locks.lock_token`)."""
        return self.token[:8] + self.token[9:13] + self.token[14:18]

    @property
    def token_start(self) -> str:
        """How those tokens start as text: ``xxxxxxxx-xxxx-xxxx-``."""
        return self.token[:19]


def _read_all(store, members: Dict[str, int]) -> Dict[str, object]:
    """The rows of the sessions ``members`` (id -> partition) that exist, by session id: one
    read, by delta-rs where it settles the entity's tables (no Spark job), else by Spark
    (:func:`.reads.query`)."""
    pids = ", ".join(str(int(p)) for p in sorted(set(members.values())))
    keys = ", ".join(sql_literal(session_key(s)) for s in sorted(members))
    rows = query(store, f"SELECT * FROM {{M}} WHERE pid IN ({pids}) AND k IN ({keys}) "
                        f"AND kind = '{SESSION}'")
    return {r.session_id: r for r in rows if members.get(r.session_id) == r.pid}


def _held(row, hold: SessionHold, now: datetime) -> bool:
    """The row is held by ``hold`` (its token, its lock not ended)."""
    return (row is not None and row.lock_token == hold.token
            and row.locked_until is not None and from_spark(row.locked_until) > now)


def _lost(hold: SessionHold, what: str) -> SessionLockLostError:
    return SessionLockLostError(
        f"{what}: the lock on {hold.label()} was lost (it expired, or another "
        "receiver took the session after it expired); open a new session receiver")


def _row_update(row, **changes) -> dict:
    """The apply-source row that rewrites ``row`` (a SESSION row) at its revision."""
    out = {name: getattr(row, name) for name, _ in CONTROL_COLUMNS}
    out.update(pid=row.pid, k=row.k, kind=SESSION, session_id=row.session_id,
               application_properties=row.application_properties,
               enqueued_time=row.enqueued_time, _op="update", _rev=row.rev)
    out.update(changes)
    return out


def lock_session(store, session_id: str, pid: int, now: datetime,
                 duration: timedelta, grace: timedelta = timedelta(0)) -> SessionHold:
    """Take the session's lock (SESS-2) in one commit; SessionCannotBeLockedError when another
    receiver holds it (or held it until less than ``grace`` ago: see Policy.lock_grace)."""
    return lock_sessions(store, {session_id: pid}, now, duration, grace)


def lock_sessions(store, members: Dict[str, int], now: datetime, duration: timedelta,
                  grace: timedelta = timedelta(0), *,
                  skip_held: bool = False) -> Optional[SessionHold]:
    """Take the locks of the sessions ``members`` (id -> partition) in ONE commit, under one
    token and one end (SESS-2). A session another receiver holds (or held until less than
    ``grace`` ago) raises SessionCannotBeLockedError, or with ``skip_held`` is left out (None
    when every one is held). The commit carries each session row at the revision read (or
    inserts it), so two receivers never both take a session: the loser retries from a fresh
    read and finds it held."""
    def step():
        rows = _read_all(store, members)
        held = sorted(s for s, row in rows.items() if row.locked_until is not None
                      and from_spark(row.locked_until) > now - grace)
        if held and not skip_held:
            until = max(from_spark(rows[s].locked_until) for s in held)
            what = (f"session {held[0]!r} is" if len(held) == 1
                    else f"sessions {', '.join(map(repr, held))} are")
            raise SessionCannotBeLockedError(
                f"{what} locked by another receiver until {until.isoformat()}; try again "
                "after that, or take another session")
        wanted = {s: p for s, p in members.items() if s not in held}
        if not wanted:
            return None
        token = lock_token(lock_token_prefix(), 0)
        until = now + duration
        sources = []
        for session_id, pid in sorted(wanted.items()):
            row = rows.get(session_id)
            if row is None:
                sources.append({"pid": pid, "k": session_key(session_id), "kind": SESSION,
                                "rev": 0, "session_id": session_id, "lock_token": token,
                                "locked_until": until, "enqueued_time": now, "_op": "insert"})
            else:
                sources.append(_row_update(row, lock_token=token, locked_until=until))
        apply_rows(store, sources, sorted(set(wanted.values())), now)
        return SessionHold(wanted, token, until)

    label = (f"session {next(iter(members))!r}" if len(members) == 1
             else f"{len(members)} sessions")
    return retry(step, what=f"lock {label} of {store.messages_path}")


#: A message's place in commit order: its sequence number without the partition bits, so
#: that partitions interleave.
_ORDER_MASK = (1 << PID_SHIFT) - 1


def _firsts_sql(relation: str, where: str) -> str:
    """Per (partition, session) of the rows of ``relation`` matching ``where``: the oldest
    one's enqueued time (``first_time``) and, among the rows of that time, the lowest place in
    commit order (``first_ord``). One SQL text that Spark and DataFusion both run."""
    return (f"c AS (SELECT pid, session_id, enqueued_time, seq & {_ORDER_MASK} AS ord "
            f"FROM {relation} WHERE {where}), "
            "t AS (SELECT pid, session_id, min(enqueued_time) AS first_time FROM c "
            "GROUP BY pid, session_id), "
            "f AS (SELECT c.pid, c.session_id, t.first_time, min(c.ord) AS first_ord FROM c "
            "JOIN t ON c.pid = t.pid AND c.session_id = t.session_id "
            "AND c.enqueued_time = t.first_time GROUP BY c.pid, c.session_id, t.first_time)")


def _oldest_first(rows, taken) -> List[Tuple[str, int]]:
    found = sorted(((r.first_time, r.first_ord), r.session_id, r.pid) for r in rows
                   if r.session_id not in taken)
    return [(session_id, pid) for _, session_id, pid in found]


def _fast(store) -> bool:
    """Whether delta-rs reads this entity's tables for the session queries (local tables; a
    subscription's inbox rows go through its rules in Python, :func:`.inbox.inbox_rows`)."""
    return (store.engine.settles(store.messages_path)
            and (not store.inbox_path or store.engine.reads(store.inbox_path)))


def _inbox_rows(store, frontiers, lo: int, hi: int, fast: bool):
    """The inbox rows of versions lo..hi past the frontiers: dicts read by delta-rs (``fast``)
    or a Spark DataFrame, the relation ``{N}`` of :func:`.reads.query` either way."""
    if fast:
        return inbox_rows(store, frontiers, lo, hi)
    return inbox_range(store, list(frontiers), frontiers, lo, hi)


def available(store, policy: Policy, now: datetime) -> List[Tuple[str, int]]:
    """SESS-3: (session id, partition) of the sessions with a deliverable message that nobody
    holds, the session of the oldest such message first.

    One read of ``messages`` finds the registered messages free to lock, the held sessions and
    the partitions' frontiers. When no free session has a registered message, the inbox past
    the frontiers is read (as a receive reads it: the fewest commits that show a message of a
    free session), for messages neither scheduled for later nor expired. On a local queue
    delta-rs runs the queries (no Spark job), else Spark: the same SQL.
    """
    fast = _fast(store)
    claimable = conditions(policy, now, dead_letter=store.dead_letter)[0]
    held = f"kind = '{SESSION}' AND locked_until > {sql_literal(now - policy.lock_grace)}"
    rows = query(store, (
        f"WITH {_firsts_sql('{M}', f'({claimable}) AND session_id IS NOT NULL')} "
        "SELECT 'first' AS what, pid, session_id, first_time, first_ord, "
        "CAST(NULL AS BIGINT) AS frontier FROM f "
        "UNION ALL SELECT 'frontier' AS what, pid, CAST(NULL AS STRING) AS session_id, "
        "CAST(NULL AS TIMESTAMP) AS first_time, CAST(NULL AS BIGINT) AS first_ord, seq "
        f"AS frontier FROM {{M}} WHERE kind = '{FRONTIER}' "
        "UNION ALL SELECT 'held' AS what, pid, session_id, CAST(NULL AS TIMESTAMP) AS "
        "first_time, CAST(NULL AS BIGINT) AS first_ord, CAST(NULL AS BIGINT) AS frontier "
        f"FROM {{M}} WHERE {held}"), fast=fast)
    taken = {r.session_id for r in rows if r.what == "held"}
    found = _oldest_first([r for r in rows if r.what == "first"], taken)
    if found or not store.inbox_path:
        return found
    frontiers = {p: -1 for p in range(store.partitions)}
    frontiers.update({r.pid: r.frontier for r in rows if r.what == "frontier"})
    latest = rs.version(store.inbox_path) if fast else store.latest_version(store.inbox_path)
    now_sql = sql_literal(now)
    deliverable = (f"kind = '{MSG}' AND session_id IS NOT NULL "
                   f"AND (scheduled_enqueue_time IS NULL OR scheduled_enqueue_time <= {now_sql}) "
                   f"AND (expires_at IS NULL OR expires_at > {now_sql})")
    while True:
        new, hi, counts, _, _ = scan_inbox(store, frontiers, 1, latest, as_rows=fast)
        if new is None:
            return []
        if counts:
            firsts = query(store, f"WITH {_firsts_sql('{N}', deliverable)} "
                                  "SELECT pid, session_id, first_time, first_ord FROM f",
                           new, fast=fast)
            found = _oldest_first(firsts, taken)
            if found:
                return found
        if hi >= latest:
            return []
        frontiers = {p: max(f, frontier_at(p, hi)) for p, f in frontiers.items()}


def listing(store) -> List[str]:
    """SESS-6: the ids of the sessions with messages (active, deferred or scheduled; locked or
    not) or a state, sorted. One read of ``messages``; then the inbox past the frontiers (the
    messages no receive has registered yet), read once. Through delta-rs on a local queue."""
    fast = _fast(store)
    rows = query(store, (
        f"SELECT pid, session_id, max(CASE WHEN kind = '{FRONTIER}' THEN seq END) AS frontier "
        f"FROM {{M}} WHERE kind = '{FRONTIER}' OR (kind = '{SESSION}' "
        f"AND application_properties IS NOT NULL) OR (kind = '{MSG}' AND state IN "
        f"('{ACTIVE}', '{DEFERRED}', '{SCHEDULED}') AND session_id IS NOT NULL) "
        "GROUP BY pid, session_id"), fast=fast)
    found = {r.session_id for r in rows if r.session_id is not None}
    if store.inbox_path:
        frontiers = {p: -1 for p in range(store.partitions)}
        frontiers.update({r.pid: r.frontier for r in rows if r.frontier is not None})
        latest = (rs.version(store.inbox_path) if fast
                  else store.latest_version(store.inbox_path))
        lo = min(start_version(f) for f in frontiers.values())
        new = _inbox_rows(store, frontiers, lo, latest, fast) if lo <= latest else None
        if new is not None and not (fast and not new):  # (delta-rs read no rows: no query)
            found.update(r.session_id for r in query(
                store, f"SELECT DISTINCT session_id FROM {{N}} WHERE kind = '{MSG}' "
                       "AND session_id IS NOT NULL", new, fast=fast))
    return sorted(found)


def check_held(store, hold: SessionHold, now: datetime, what: str) -> List:
    """The rows of the held sessions, while ``hold`` still holds every one of them; else
    SessionLockLostError."""
    rows = _read_all(store, hold.members)
    if len(rows) != len(hold.members) or not all(_held(r, hold, now) for r in rows.values()):
        raise _lost(hold, what)
    return [rows[s] for s in hold.session_ids]


def guard_rows(rows) -> List[dict]:
    """The apply-source rows that keep the session rows as they are, at their revisions: a
    receive under the sessions carries them, so it commits only while they are unchanged."""
    return [_row_update(row) for row in rows]


def _locked_messages(store, hold: SessionHold, now: datetime) -> List:
    prefix = sql_literal(hold.token_start + "%")
    pids = ", ".join(str(p) for p in hold.pids)
    return query(store, f"SELECT * FROM {{M}} WHERE pid IN ({pids}) AND kind = '{MSG}' "
                        f"AND lock_token LIKE {prefix} AND locked_until > {sql_literal(now)}")


def move_lock(store, hold: SessionHold, until: datetime, now: datetime, what: str) -> None:
    """Set the locks of the held sessions, and of the messages held under them, to end at
    ``until`` (renew: later; release: now), in one commit."""
    def step():
        rows = [_row_update(row, locked_until=until)
                for row in check_held(store, hold, now, what)]
        for m in _locked_messages(store, hold, now):
            update = {name: getattr(m, name) for name, _ in CONTROL_COLUMNS}
            update.update(pid=m.pid, k=m.k, application_properties=m.application_properties,
                          locked_until=until, _op="update", _rev=m.rev)
            rows.append(update)
        apply_rows(store, rows, hold.pids, now)
        hold.locked_until = until

    retry(step, what=what)


def _member(hold: SessionHold, session_id: Optional[str]) -> str:
    if session_id is None:
        return hold.session_id
    if session_id not in hold.members:
        raise SessionLockLostError(
            f"session {session_id!r} is not one of the sessions this receiver holds "
            f"({', '.join(map(repr, hold.session_ids))})")
    return session_id


def get_state(store, hold: SessionHold, now: datetime, what: str,
              session_id: Optional[str] = None) -> Optional[bytes]:
    """The state of a held session (the only one, or ``session_id``), SESS-5."""
    session_id = _member(hold, session_id)
    row = {r.session_id: r for r in check_held(store, hold, now, what)}[session_id]
    text = row.application_properties
    return None if text is None else base64.b64decode(text)


def set_state(store, hold: SessionHold, state: Optional[bytes], now: datetime,
              what: str, session_id: Optional[str] = None) -> None:
    """Replace the state of a held session (SESS-5) in one commit, while it is held."""
    session_id = _member(hold, session_id)
    text = None if state is None else base64.b64encode(state).decode("ascii")

    def step():
        row = {r.session_id: r for r in check_held(store, hold, now, what)}[session_id]
        apply_rows(store, [_row_update(row, application_properties=text)], [row.pid], now)

    retry(step, what=what)
