"""The sbdelta error tree: every class of ``azure.servicebus.exceptions`` (7.x), same names,
and at least the same bases, plus sbdelta's own below :class:`ServiceBusError`.

Every broker-side failure is a :class:`ServiceBusError`; its ``retryable`` flag says whether the
same call can succeed if repeated. Client-side misuse (invalid arguments, settling a peeked
message, a wrong receive mode) raises :class:`ValueError` subclasses, as the Azure SDK does, so
``except ValueError`` keeps working for callers who validate input themselves. One difference:
the SDK's ``MessageAlreadySettled`` is a ``ValueError`` only; here it is also a
``ServiceBusError``, so both ``except`` clauses an SDK program may use catch it.

Where the SDK raises its classes, sbdelta raises them for the storage's equivalent:
``ServiceBusAuthorizationError`` when the storage refuses access (permissions, IAM, grants),
``ServiceBusCommunicationError`` when it cannot be reached, ``ServiceBusServerBusyError``
(``CommitConflictError``) when commits kept losing to concurrent writers.
``ServiceBusAuthenticationError`` exists for ``except`` clauses; sbdelta authenticates nothing
itself (the storage's credentials do).
"""

from __future__ import annotations

import uuid
from typing import Optional

__all__ = [
    "ServiceBusError",
    "ServiceBusConnectionError",
    "ServiceBusCommunicationError",
    "ServiceBusAuthenticationError",
    "ServiceBusAuthorizationError",
    "ServiceBusServerBusyError",
    "OperationTimeoutError",
    "MessageLockLostError",
    "SessionLockLostError",
    "SessionCannotBeLockedError",
    "MessageTypeError",
    "InvalidMessageError",
    "MessageAlreadySettled",
    "MessageSizeExceededError",
    "MessageNotFoundError",
    "MessagingEntityNotFoundError",
    "MessagingEntityAlreadyExistsError",
    "MessagingEntityDisabledError",
    "ServiceBusQuotaExceededError",
    "CommitConflictError",
    "ServiceBusInvalidOperationError",
    "InvalidEntityNameError",
    "InvalidPropertyError",
    "ImmutablePropertyError",
    "RuleSyntaxError",
    "ConfigurationError",
    "SparkSetupError",
    "StorageLayoutError",
    "ClockSkewError",
    "AutoLockRenewFailed",
    "AutoLockRenewTimeout",
]


class ServiceBusError(Exception):
    """Base of every sbdelta error raised by the broker.

    Attributes:
        message: What went wrong and, where it helps, what is allowed.
        retryable: True when repeating the same call may succeed (a conflict, a timeout).
        tracking_id: A unique id for this failure, to quote in logs and reports (SEND-1).
    """

    retryable = False

    def __init__(self, message: Optional[str] = None, *, retryable: Optional[bool] = None,
                 error: Optional[BaseException] = None, condition: Optional[str] = None,
                 status_code: Optional[int] = None) -> None:
        # ``message`` may be given by keyword, and ``error``, ``condition`` and ``status_code``
        # are taken, as azure-servicebus's constructors take them.
        message = message or (type(self).__doc__ or "").strip().splitlines()[0] \
            or "Service Bus has encountered an error."
        super().__init__(message)
        self.message = message
        if retryable is not None:
            self.retryable = retryable
        self.error = error
        self.condition = condition
        self.status_code = status_code
        self.tracking_id = uuid.uuid4().hex

    def __str__(self) -> str:
        return self.message


class ServiceBusConnectionError(ServiceBusError):
    """The namespace's storage cannot be reached (bad URI, missing credentials, I/O failure)."""

    retryable = True


class ServiceBusCommunicationError(ServiceBusError):
    """The namespace's storage could not be reached (network, DNS, the file system's client)."""

    retryable = True


class ServiceBusAuthenticationError(ServiceBusError):
    """Authentication failed. sbdelta authenticates nothing itself: the storage's credentials
    do; kept for ``except`` clauses of azure-servicebus programs."""

    retryable = True


class ServiceBusAuthorizationError(ServiceBusError):
    """The storage refused access to the namespace (file permissions, cloud IAM, Unity
    Catalog grants): access control is the storage's."""

    retryable = True


class ServiceBusServerBusyError(ServiceBusError):
    """The broker is too busy to do this now: wait a little and try again."""

    retryable = True


class OperationTimeoutError(ServiceBusError):
    """An operation did not finish in time (for example, lock acquisition kept conflicting)."""

    retryable = True


class CommitConflictError(ServiceBusServerBusyError):
    """A Delta commit kept losing to concurrent writers after every retry."""

    retryable = True


class MessageLockLostError(ServiceBusError):
    """The lock on a message expired, was never held by this receiver, or was taken over."""


class SessionLockLostError(ServiceBusError):
    """The receiver's session lock expired or was taken over (SESS-4): every later operation of
    that receiver fails; the session's messages go to the next session receiver."""


class SessionCannotBeLockedError(ServiceBusError):
    """Another receiver holds the named session (SESS-2); try again when its lock ends."""


class AutoLockRenewFailed(ServiceBusError):
    """An AutoLockRenewer could not keep a lock: it was lost or had ended (as azure-servicebus)."""


class AutoLockRenewTimeout(ServiceBusError):
    """The renewer's total renewal time for a lock is over (as azure-servicebus)."""


class MessageAlreadySettled(ServiceBusError, ValueError):
    """The message was already completed, abandoned, dead-lettered or deferred by this client."""


class MessageSizeExceededError(ServiceBusError, ValueError):
    """A message (body plus properties) is larger than the entity allows; nothing was sent."""


class MessageTypeError(ServiceBusError, TypeError):
    """A message field, application property or message list has a type that is not allowed."""


class InvalidMessageError(ServiceBusError, ValueError):
    """A message field has the right type but a value outside the allowed range."""


class MessageNotFoundError(ServiceBusError):
    """No message with the given sequence number (deferred or scheduled) exists."""


class MessagingEntityNotFoundError(ServiceBusError):
    """The queue, topic, subscription or rule does not exist in the namespace."""


class MessagingEntityAlreadyExistsError(ServiceBusError):
    """An entity of that name already exists in the namespace."""


class MessagingEntityDisabledError(ServiceBusError):
    """The entity's status forbids the operation (Disabled, SendDisabled, ReceiveDisabled)."""


class ServiceBusQuotaExceededError(ServiceBusError):
    """The entity is full (max_size_in_megabytes) or another quota was reached."""


class ServiceBusInvalidOperationError(ServiceBusError, ValueError):
    """The operation is not allowed in this state or with these arguments."""


class InvalidEntityNameError(ServiceBusError, ValueError):
    """An entity name breaks the Service Bus naming rules or would escape the namespace."""


class InvalidPropertyError(ServiceBusError, ValueError):
    """An entity property has a wrong type or a value outside the allowed range."""


class ImmutablePropertyError(InvalidPropertyError):
    """A property fixed at creation (partitioning, sessions) cannot be changed."""


class RuleSyntaxError(InvalidPropertyError):
    """A rule's SQL filter or action is not valid (TOPIC-4): bad syntax, an unknown function or
    system property, a parameter not supplied, a type error visible in the text, or too long.

    Raised when the rule is built or created, never while messages are routed. The message says
    what is wrong and where, and shows the line with a caret under the error.

    Attributes:
        sql: The expression as given.
        line: 1-based line of the error.
        column: 1-based column of the error.
        reason: What is wrong, without the position and excerpt.
    """

    def __init__(self, reason: str, *, sql: str, line: int, column: int, kind: str = "filter"
                 ) -> None:
        lines = sql.splitlines() or [""]
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        pad = "".join("\t" if ch == "\t" else " " for ch in text[:max(column - 1, 0)])
        super().__init__(f"invalid SQL {kind} at line {line}, column {column}: {reason}\n"
                         f"  {text}\n  {pad}^")
        self.sql = sql
        self.line = line
        self.column = column
        self.reason = reason


class ConfigurationError(ServiceBusError, ValueError):
    """A namespace configuration file is malformed or names unknown properties."""


class SparkSetupError(ServiceBusError):
    """Spark or Delta cannot be started (no Java, Delta jars unresolvable, no javac)."""


class StorageLayoutError(ServiceBusError):
    """An entity's tables were made by an older sbdelta storage layout that this version does
    not open; the message names the table, what is wrong with it and how to migrate."""


class ClockSkewError(ServiceBusError):
    """This host's clock differs from the storage's by more than the clock's
    ``skew_tolerance``: granting a lock could let two hosts both believe they hold it (RECV-3),
    so lock-granting calls are refused until the clock is synchronised (NTP) or the tolerance
    is raised on every host sharing the namespace (docs/ARCHITECTURE.md, "Whose clock")."""
