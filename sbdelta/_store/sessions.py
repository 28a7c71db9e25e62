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
from typing import List, Optional

from .._clock import from_spark
from ..exceptions import SessionCannotBeLockedError, SessionLockLostError
from .apply import apply_rows
from .delta import retry, sql_literal
from .layout import CONTROL_COLUMNS, MSG, SESSION, session_key
from .locks import lock_token, lock_token_prefix


@dataclass
class SessionHold:
    """A session lock this process holds: what a session receiver keeps between calls."""

    session_id: str
    pid: int
    token: str
    locked_until: datetime
    rev: int  # the session row's revision as this holder last wrote it

    @property
    def grant_prefix(self) -> str:
        """The 16 hex digits that start the lock token of every message locked under this
        session (see :func:`.locks.lock_token`)."""
        return self.token[:8] + self.token[9:13] + self.token[14:18]

    @property
    def token_start(self) -> str:
        """How those tokens start as text: ``xxxxxxxx-xxxx-xxxx-``."""
        return self.token[:19]


def _read(store, pid: int, session_id: str):
    rows = (store.messages().where(f"pid = {int(pid)} AND k = "
                                   f"{sql_literal(session_key(session_id))}").collect())
    return rows[0] if rows else None


def _held(row, hold: SessionHold, now: datetime) -> bool:
    return (row is not None and row.lock_token == hold.token
            and row.locked_until is not None and from_spark(row.locked_until) > now)


def _lost(hold: SessionHold, what: str) -> SessionLockLostError:
    return SessionLockLostError(
        f"{what}: the lock on session {hold.session_id!r} was lost (it expired, or another "
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
                 duration: timedelta) -> SessionHold:
    """Take the session's lock (SESS-2) in one commit; SessionCannotBeLockedError when another
    receiver holds it."""
    def step():
        row = _read(store, pid, session_id)
        if row is not None and row.locked_until is not None \
                and from_spark(row.locked_until) > now:
            raise SessionCannotBeLockedError(
                f"session {session_id!r} is locked by another receiver until "
                f"{from_spark(row.locked_until).isoformat()}; try again after that, or take "
                "another session")
        token = lock_token(lock_token_prefix(), 0)
        until = now + duration
        if row is None:
            source = {"pid": pid, "k": session_key(session_id), "kind": SESSION, "rev": 0,
                      "session_id": session_id, "lock_token": token, "locked_until": until,
                      "enqueued_time": now, "_op": "insert"}
            rev = 0
        else:
            source = _row_update(row, lock_token=token, locked_until=until)
            rev = row.rev + 1
        apply_rows(store, [source], [pid], now)
        return SessionHold(session_id, pid, token, until, rev)

    return retry(step, what=f"lock session {session_id!r} of {store.messages_path}")


def check_held(store, hold: SessionHold, now: datetime, what: str):
    """The session row, when ``hold`` still holds the session; else SessionLockLostError."""
    row = _read(store, hold.pid, hold.session_id)
    if not _held(row, hold, now):
        raise _lost(hold, what)
    hold.rev = row.rev
    return row


def guard_row(row) -> dict:
    """The apply-source row that keeps the session row as it is, at its revision: a receive
    under the session carries it, so it commits only while the session row is unchanged."""
    return _row_update(row)


def _locked_messages(store, hold: SessionHold, now: datetime) -> List:
    prefix = sql_literal(hold.token_start + "%")
    return (store.messages().where(
        f"pid = {int(hold.pid)} AND kind = '{MSG}' AND lock_token LIKE {prefix} "
        f"AND locked_until > {sql_literal(now)}").collect())


def move_lock(store, hold: SessionHold, until: datetime, now: datetime, what: str) -> None:
    """Set the session's lock, and the locks of the messages held under it, to end at ``until``
    (renew: later; release: now), in one commit."""
    def step():
        row = check_held(store, hold, now, what)
        rows = [_row_update(row, locked_until=until)]
        for m in _locked_messages(store, hold, now):
            update = {name: getattr(m, name) for name, _ in CONTROL_COLUMNS}
            update.update(pid=m.pid, k=m.k, application_properties=m.application_properties,
                          locked_until=until, _op="update", _rev=m.rev)
            rows.append(update)
        apply_rows(store, rows, [hold.pid], now)
        hold.rev = row.rev + 1
        hold.locked_until = until

    retry(step, what=what)


def get_state(store, hold: SessionHold, now: datetime, what: str) -> Optional[bytes]:
    row = check_held(store, hold, now, what)
    text = row.application_properties
    return None if text is None else base64.b64decode(text)


def set_state(store, hold: SessionHold, state: Optional[bytes], now: datetime,
              what: str) -> None:
    """Replace the session state (SESS-5) in one commit, while the session is held."""
    text = None if state is None else base64.b64encode(state).decode("ascii")

    def step():
        row = check_held(store, hold, now, what)
        apply_rows(store, [_row_update(row, application_properties=text)], [hold.pid], now)
        hold.rev = row.rev + 1

    retry(step, what=what)
