"""``receiver.session``: the session a session receiver holds (SESS-2..5), as
azure-servicebus's ``ServiceBusSession``, and what the receiver and AutoLockRenewer ask of it.

The session reaches its receiver only through :class:`SessionHost` (the receiver's side,
:mod:`sbdelta._receiver`), so neither module reaches into the other's private names.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any, Optional, Union

from ._entity import Entity
from ._handler import under_retry_policy
from ._message_fields import check_body
from ._store import MessageStore, SessionHold
from .exceptions import (MessageSizeExceededError, OperationTimeoutError,
                         ServiceBusInvalidOperationError, SessionLockLostError)

__all__ = ["ServiceBusSession", "SessionHost", "hold_session", "check_session",
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
        if self._session_id is not None:
            self._hold = store.lock_session(self._session_id, host.now(),
                                            entity.policy.lock_duration, entity.lock_grace)
            self._kept()
            return self._hold
        wait = host.max_wait_time or 0.0
        deadline = time.monotonic() + wait
        while True:
            hold = store.lock_next_session(entity.policy, host.now(),
                                           entity.policy.lock_duration)
            if hold is not None:
                self._hold, self._session_id = hold, hold.session_id
                self._kept()
                return hold
            if time.monotonic() >= deadline:
                raise OperationTimeoutError(
                    f"no session of {host.entity_path} had a message to deliver and no "
                    f"other receiver holding it (waited {wait:g} s, the receiver's "
                    "max_wait_time): nothing to do for a NEXT_AVAILABLE_SESSION receiver now. "
                    "Try again later, or give get_..._receiver a longer max_wait_time")
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))

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
        if state is not None:
            if not isinstance(state, (str, bytes, bytearray, memoryview)):
                raise ServiceBusInvalidOperationError(
                    f"a session state is bytes or str (stored as UTF-8), or None to clear it; "
                    f"got {type(state).__name__}")
            state = check_body(state)
        store, entity = self._store()
        if state is not None and len(state) > entity.max_message_size:
            raise MessageSizeExceededError(
                f"a session state of {len(state)} bytes is larger than {entity.label} allows "
                f"({entity.max_message_size} bytes, its max_message_size_in_kilobytes); "
                "nothing was written")
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


def hold_session(session: ServiceBusSession, entity: Entity) -> SessionHold:
    """Lock the session on first use (SESS-2, SESS-3); afterwards, check it is still held."""
    return session._hold_for(entity)


def check_session(session: ServiceBusSession, action: str) -> SessionHold:
    """The session's hold, when its lock is still the receiver's (SessionLockLostError
    otherwise)."""
    return session._check_held(action)


def release_session(session: ServiceBusSession) -> None:
    """End the session lock now (``receiver.close()``)."""
    session._release()


def session_released(session: ServiceBusSession) -> bool:
    """The session's receiver was closed: the session was let go, nothing to renew."""
    return session._closed
