"""``receiver.session``: the session a session receiver holds (SESS-2..5), as
azure-servicebus's ``ServiceBusSession``, and what the receiver and AutoLockRenewer ask of it.

The session reaches its receiver only through :class:`SessionHost` (the receiver's side,
:mod:`sbdelta._receiver`), so neither module reaches into the other's private names.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any, List, Optional, Union

from ._entity import Entity
from ._handler import under_retry_policy
from ._message_fields import check_body
from ._store import MessageStore, SessionHold
from .exceptions import (MessageSizeExceededError, OperationTimeoutError,
                         ServiceBusInvalidOperationError, SessionLockLostError)

__all__ = ["ServiceBusSession", "ServiceBusSessionGroup", "SessionHost", "hold_session", "check_session",
           "release_session", "session_released"]


class SessionHost:
    """What a session needs of the receiver that holds it (the receiver's side implements it,
    :mod:`sbdelta._receiver`)."""

    entity_path: str
    max_wait_time: Optional[float]

    def entity(self) -> Entity:
        """The receiver's entity as it is now."""
        raise NotImplementedError

    def store(self, entity: Entity) -> MessageStore:
        """The store the receiver reads ``entity`` from."""
        raise NotImplementedError

    def now(self) -> datetime:
        """Broker time (the client's clock)."""
        raise NotImplementedError

    def retry_policy(self) -> Any:
        """How commits that lost to concurrent writers are retried."""
        raise NotImplementedError

    def check_sessions(self, entity: Entity, what: str) -> None:
        """SESS-1: raise when ``entity`` cannot be read through a session receiver."""
        raise NotImplementedError

    def kept(self, session: "ServiceBusSession") -> None:
        """The session was just locked: the receiver's AutoLockRenewer keeps it from now."""
        raise NotImplementedError

    def check_clock(self) -> None:
        """Raise ClockSkewError when this host's clock is too far from the storage's."""
        raise NotImplementedError


@under_retry_policy
class ServiceBusSession:
    """The session a session receiver holds (SESS-2..5), as azure-servicebus's
    ``receiver.session``: its id, lock and state.

    The session is locked by the receiver's first operation (a receive, or a call here) and
    released by ``receiver.close()``. Once the lock is lost (it ran out, unrenewed) every
    operation of the receiver raises SessionLockLostError.
    """

    def __init__(self, host: "SessionHost", session_id: Optional[str]) -> None:
        self._host = host
        self._session_id = session_id  # None: NEXT_AVAILABLE_SESSION, until locked
        self._hold: Optional[SessionHold] = None
        self._lost = False
        self._closed = False  # released by receiver.close()
        # Why an AutoLockRenewer stopped renewing this session (as azure-servicebus's).
        self.auto_renew_error: Optional[Exception] = None

    @property
    def session_id(self) -> Optional[str]:
        """The session's id; for a NEXT_AVAILABLE_SESSION receiver, None until it has locked
        a session (entering ``with``, or its first operation)."""
        return self._session_id

    @property
    def locked_until_utc(self) -> Optional[datetime]:
        """When the session lock ends (None before the receiver has locked the session)."""
        return None if self._hold is None else self._hold.locked_until

    def _what(self, action: str) -> str:
        session = ("the next available session" if self._session_id is None
                   else f"session {self._session_id!r}")
        return f"{action} on {session} of {self._host.entity_path}"

    def _check_held(self, action: str) -> SessionHold:
        """The hold, when the lock is still ours (by this client's clock)."""
        host = self._host
        if self._hold is None and not self._lost:
            return self._hold_for(host.entity())
        if self._lost or self._hold.locked_until <= host.now():
            self._lost = True
            raise SessionLockLostError(
                f"{self._what(action)}: the session lock is lost (it ended unrenewed at "
                f"{self._hold.locked_until.isoformat()}, or the receiver was closed); the "
                "session and its messages are free for the next session receiver. Open a new one")
        return self._hold

    def _hold_for(self, entity: Entity) -> SessionHold:
        """Lock the session on first use (SESS-2, SESS-3); afterwards, check the lock is still
        held."""
        if self._hold is not None or self._lost:
            return self._check_held("receive")
        host = self._host
        host.check_sessions(entity, "lock the session")
        host.check_clock()
        store = host.store(entity)
        wait = 0.0 if self._named() else (host.max_wait_time or 0.0)
        deadline = time.monotonic() + wait
        while True:
            hold = self._take(store, entity)  # raises when a named session is held
            if hold is not None:
                self._took(hold)
                self._kept()
                return hold
            if time.monotonic() >= deadline:
                raise OperationTimeoutError(
                    f"no session of {host.entity_path} had a message to deliver and no "
                    f"other receiver holding it (waited {wait:g} s, the receiver's "
                    "max_wait_time): nothing to do for a NEXT_AVAILABLE_SESSION receiver now. "
                    "Try again later, or give get_..._receiver a longer max_wait_time")
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))

    def _named(self) -> bool:
        """Whether the session to lock is named (else: the next available)."""
        return self._session_id is not None

    def _take(self, store: MessageStore, entity: Entity) -> Optional[SessionHold]:
        """Lock the named session (SessionCannotBeLockedError when it is held), or the next
        available one (None when none is free)."""
        now, duration = self._host.now(), entity.policy.lock_duration
        if self._session_id is not None:
            return store.lock_session(self._session_id, now, duration, entity.lock_grace)
        return store.lock_next_session(entity.policy, now, duration)

    def _took(self, hold: SessionHold) -> None:
        self._hold, self._session_id = hold, hold.session_id

    def _kept(self) -> None:
        """Just locked: the receiver's ``auto_lock_renewer`` keeps the session from now."""
        self._host.kept(self)

    def _store(self):
        entity = self._host.entity()
        return self._host.store(entity), entity

    def _retry_policy(self):
        return self._host.retry_policy()

    def renew_lock(self, *, timeout: Optional[float] = None) -> datetime:
        """Extend the session lock, and the locks of the session's messages this receiver
        holds, by the entity's lock duration from now (SESS-4); returns the new end."""
        store, entity = self._store()
        hold = self._check_held("renew the session lock")
        now = self._host.now()
        try:
            store.move_session_lock(hold, now + entity.policy.lock_duration, now,
                                    what=self._what("renew the session lock"))
        except SessionLockLostError:
            self._lost = True
            raise
        return hold.locked_until

    def get_state(self, *, timeout: Optional[float] = None) -> Optional[bytes]:
        """The session state (SESS-5), or None when none was set."""
        store, _ = self._store()
        hold = self._check_held("get the session state")
        return store.session_state(hold, self._host.now(),
                                   what=self._what("get the session state"))

    def set_state(self, state: Union[str, bytes, bytearray, memoryview, None], *,
                  timeout: Optional[float] = None) -> None:
        """Replace the session state (SESS-5): bytes, or a str stored as UTF-8; None clears it.
        It is kept whether or not the session has messages, up to the entity's message size
        limit."""
        store, entity = self._store()
        state = _checked_state(state, entity)
        hold = self._check_held("set the session state")
        store.set_session_state(hold, state, self._host.now(),
                                what=self._what("set the session state"))

    def _release(self) -> None:
        """End the lock now (receiver.close()); a lock already lost needs no release."""
        self._closed = True
        if self._hold is None or self._lost:
            return
        now = self._host.now()
        if self._hold.locked_until > now:
            store, entity = self._store()
            # Ended a grace ago: the next receiver need not wait out the grace that protects
            # a lock which merely ran out (Policy.lock_grace); this one was given up.
            try:
                store.move_session_lock(self._hold, now - entity.lock_grace, now,
                                        what=self._what("release the session"))
            except SessionLockLostError:
                pass
        self._lost = True

    def __repr__(self) -> str:
        return (f"ServiceBusSession(session_id={self._session_id!r}, "
                f"locked_until_utc={self.locked_until_utc})")


class ServiceBusSessionGroup(ServiceBusSession):
    """The sessions a sessions receiver holds (``get_queue_sessions_receiver``, the bulk form
    for jobs): several sessions locked in one commit under one lock, renewed and released
    together. Not in azure-servicebus, which has one session per receiver.

    The receiver locks them when entered (``with``) or on its first operation: the named
    ``session_ids`` (all or none: SessionCannotBeLockedError), or up to
    ``max_session_count`` free sessions with deliverable messages, the oldest first (SESS-3;
    OperationTimeoutError when none is free within the receiver's ``max_wait_time``).
    """

    def __init__(self, host: "SessionHost", session_ids: Optional[List[str]],
                 max_session_count: int) -> None:
        super().__init__(host, None)
        self._wanted = session_ids
        self._count = max_session_count
        self._ids: List[str] = []

    @property
    def session_id(self) -> Optional[str]:
        """None: a group has several sessions (see :attr:`session_ids`)."""
        return None

    @property
    def session_ids(self) -> List[str]:
        """The ids of the sessions held, sorted (empty before they are locked)."""
        return list(self._ids)

    def _what(self, action: str) -> str:
        sessions = (f"sessions {', '.join(map(repr, self._ids))}" if self._ids
                    else "the next available sessions")
        return f"{action} on {sessions} of {self._host.entity_path}"

    def _named(self) -> bool:
        return self._wanted is not None

    def _take(self, store: MessageStore, entity: Entity) -> Optional[SessionHold]:
        now, duration = self._host.now(), entity.policy.lock_duration
        if self._wanted is not None:
            return store.lock_sessions(self._wanted, now, duration, entity.lock_grace)
        return store.lock_next_sessions(self._count, entity.policy, now, duration)

    def _took(self, hold: SessionHold) -> None:
        self._hold, self._ids = hold, hold.session_ids

    def _member(self, session_id: Any) -> str:
        if not isinstance(session_id, str) or session_id not in self._ids:
            raise ServiceBusInvalidOperationError(
                f"session_id must be one of the sessions this receiver holds "
                f"({', '.join(map(repr, self._ids)) or 'none yet'}), got {session_id!r}")
        return session_id

    def get_state(self, session_id: str, *,  # type: ignore[override]
                  timeout: Optional[float] = None) -> Optional[bytes]:
        """The state of one of the held sessions (SESS-5), or None when none was set."""
        store, _ = self._store()
        hold = self._check_held("get the session state")
        return store.session_state(hold, self._host.now(), what=self._what(
            "get the session state"), session_id=self._member(session_id))

    def set_state(self, session_id: str,  # type: ignore[override]
                  state: Union[str, bytes, bytearray, memoryview, None], *,
                  timeout: Optional[float] = None) -> None:
        """Replace the state of one of the held sessions (SESS-5); as
        :meth:`ServiceBusSession.set_state`."""
        store, entity = self._store()
        hold = self._check_held("set the session state")
        state = _checked_state(state, entity)
        store.set_session_state(hold, state, self._host.now(),
                                what=self._what("set the session state"),
                                session_id=self._member(session_id))

    def __repr__(self) -> str:
        return (f"ServiceBusSessionGroup(session_ids={self._ids!r}, "
                f"locked_until_utc={self.locked_until_utc})")


def _checked_state(state: Any, entity: Entity) -> Optional[bytes]:
    """A session state as stored: bytes (a str as UTF-8) within the message size limit, or
    None; ServiceBusInvalidOperationError / MessageSizeExceededError otherwise."""
    if state is None:
        return None
    if not isinstance(state, (str, bytes, bytearray, memoryview)):
        raise ServiceBusInvalidOperationError(
            f"a session state is bytes or str (stored as UTF-8), or None to clear it; "
            f"got {type(state).__name__}")
    state = check_body(state)
    if len(state) > entity.max_message_size:
        raise MessageSizeExceededError(
            f"a session state of {len(state)} bytes is larger than {entity.label} allows "
            f"({entity.max_message_size} bytes, its max_message_size_in_kilobytes); "
            "nothing was written")
    return state


def hold_session(session: ServiceBusSession, entity: Entity) -> SessionHold:
    """Lock the session on first use (SESS-2, SESS-3); afterwards, check it is still held."""
    return session._hold_for(entity)


def check_session(session: ServiceBusSession, action: str) -> SessionHold:
    """The session's hold, when its lock is still the receiver's (SessionLockLostError
    otherwise)."""
    return session._check_held(action)


def session_lock_lost(session: ServiceBusSession, action: str) -> SessionLockLostError:
    """The error of a settlement whose message locks were gone at its commit although the
    session lock looked held (it ran out meanwhile and the next holder took the session):
    the session lock is lost, as azure-servicebus says on a session receiver."""
    session._lost = True
    return SessionLockLostError(
        f"{session._what(action)}: the session lock is lost (it ran out before the commit "
        "and the session has another holder now); nothing was changed. The session and its "
        "unsettled messages go to the next session receiver. Open a new one")


def release_session(session: ServiceBusSession) -> None:
    """End the session lock now (``receiver.close()``)."""
    session._release()


def session_released(session: ServiceBusSession) -> bool:
    """The session's receiver was closed: the session was let go, nothing to renew."""
    return session._closed
