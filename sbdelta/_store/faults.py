"""What a storage failure means to a user: the one table from the errors a file system or
object store raises (through Spark's Java, delta-rs's Rust or Python) to sbdelta's public
errors (issue 18, "Storage faults"). :func:`storage_fault` is applied at the public API
(:func:`.delta.storage_errors`) and inside the store (:func:`.delta.retry`).
"""

from __future__ import annotations

import re
from typing import Optional

from ..exceptions import (MessagingEntityNotFoundError, OperationTimeoutError,
                          ServiceBusAuthorizationError, ServiceBusCommunicationError,
                          ServiceBusError, ServiceBusQuotaExceededError,
                          ServiceBusServerBusyError)


# How file systems say "you may not": Hadoop's local and HDFS clients, S3A, ABFS, GCS, and
# Databricks' Unity Catalog. Matched in the (Java) error text.
_REFUSALS = re.compile(
    r"AccessControlException|AccessDeniedException|Permission denied|PERMISSION_DENIED"
    r"|AuthorizationPermissionMismatch|AuthorizationFailure|\b403 Forbidden\b"
    r"|(?:Status ?[Cc]ode|StatusCode|status)[:= ]+403\b|INSUFFICIENT_PERMISSIONS")


def storage_refusal(exc: BaseException) -> Optional[str]:
    """The line of ``exc`` saying the storage refused access, or None if it says nothing so."""
    for line in str(exc).splitlines():
        if _REFUSALS.search(line):
            return line.strip()[:300]
    return None


def refused(what: str, reason: str) -> ServiceBusAuthorizationError:
    return ServiceBusAuthorizationError(
        f"{what}: the storage refused access ({reason}). Access control is the storage's: "
        "grant this process's user (or cloud identity, or Unity Catalog principal) read and "
        "write access to the namespace folder")


# How file systems say the storage failed (issue 18, "Storage faults"), matched in the error
# text of any engine: Java's exceptions as Py4J quotes them, delta-rs's (Rust's "os error N"),
# Python's OSError ("[Errno N]"). Checked in this order, whole text first: Java reports a
# read-only or full file system as a FileNotFoundException "(Read-only file system)".
_READ_ONLY = re.compile(r"Read-only file system|\bos error 30\b|\[Errno 30\]")
_NOT_PERMITTED = re.compile(r"Operation not permitted|\bos error 1\)|\[Errno 1\]")
_FULL = re.compile(r"No space left on device|\bos error 28\b|\[Errno 28\]"
                   r"|Disk quota exceeded|\bos error 122\b|\[Errno 122\]")
_NO_TABLE = re.compile(r"TableNotFoundError|DELTA_TABLE_NOT_FOUND|DELTA_MISSING_DELTA_TABLE"
                       r"|is not a Delta table|\[PATH_NOT_FOUND\]"
                       r"|does not exist or you don't have access")
_LOG_GAP = re.compile(r"Expected contiguous commit files|DELTA_VERSIONS_NOT_CONTIGUOUS"
                      r"|Versions \(.*\) are not contiguous")
_NO_FILE = re.compile(r"FileNotFoundException|FILE_NOT_FOUND|No such file or directory"
                      r"|\bos error 2\b|\[Errno 2\]|Object at location .* not found")


def _line(exc: BaseException, pattern: "re.Pattern[str]") -> Optional[str]:
    """The part of the first line of ``exc`` that ``pattern`` matches in, around the match
    (a Java line is long: the file's path and the reason are kept)."""
    text = f"{type(exc).__name__}: {exc}"
    for line in text.splitlines():
        match = pattern.search(line)
        if match:
            return line[max(0, match.start() - 160):match.end() + 200].strip()
    return None


# How storages say a request may work if made again (issue 17, "retries of transient storage
# errors"): throttled (ADLS/Blob "ServerBusy" and "over the account limit", S3 "SlowDown" and
# 503, GCS 429 "rateLimitExceeded", EAGAIN), timed out, or cut off (a dropped connection, a
# gateway's 502/504, a store's 500). :func:`.delta.retry` retries them as it retries conflicts;
# what is still failing after its attempts is raised as the error the SDK raises for it.
_HTTP = r"(?:[Ss]tatus ?[Cc]ode|StatusCode|status|HTTP/\d(?:\.\d)?)[:= ]+"
_BUSY = re.compile(r"ServerBusy|Server Busy|SlowDown|Slow Down|TooManyRequests|Too Many Requests"
                   rf"|{_HTTP}(?:429|503)\b|Service Unavailable|[Tt]hrottl|rateLimitExceeded"
                   r"|over the account limit|RequestLimitExceeded|Resource temporarily "
                   r"unavailable|\bos error 11\b|\[Errno 11\]")
_TIMED_OUT = re.compile(r"SocketTimeoutException|[Tt]imed out|OperationTimedOut"
                        rf"|{_HTTP}504\b|Gateway Time-?out|\bos error 110\b|\[Errno 110\]")
_CUT_OFF = re.compile(r"Connection reset|Broken pipe|Connection refused|Connection closed"
                      rf"|UnknownHostException|Bad Gateway|{_HTTP}50[02]\b|InternalServerError"
                      r"|Internal Server Error|\bos error 10[34]\b|\[Errno 10[34]\]")
#: This process's own JVM gone (Py4J cannot reach it): no retry mends that.
_NO_JVM = re.compile(r"Py4JNetworkError|Java server|Answer from Java side is empty")


def transient_fault(exc: BaseException) -> Optional[str]:
    """``"busy"``, ``"timed out"`` or ``"cut off"`` when ``exc`` says the storage failed in a
    way a later attempt may not (see above), else None. A failure that is also a lasting one
    (refused, read-only, full, a table or file gone) is not transient."""
    if isinstance(exc, ServiceBusError) or _lasting_fault(exc, "") is not None \
            or _line(exc, _NO_JVM) is not None:
        return None
    for kind, pattern in (("busy", _BUSY), ("timed out", _TIMED_OUT), ("cut off", _CUT_OFF)):
        if _line(exc, pattern) is not None:
            return kind
    return None


def transient_error(exc: BaseException, what: str, tries: int = 1) -> ServiceBusError:
    """The SDK's error for a transient failure (:func:`transient_fault`) still there after
    ``tries`` attempts: ServiceBusServerBusyError (throttled), OperationTimeoutError (timed
    out), ServiceBusCommunicationError (cut off). The storage's own line is quoted."""
    kind = transient_fault(exc) or "cut off"
    pattern = {"busy": _BUSY, "timed out": _TIMED_OUT}.get(kind, _CUT_OFF)
    line = _line(exc, pattern) or str(exc).strip()[:300]
    after = f" after {tries} attempts" if tries > 1 else ""
    if kind == "busy":
        return ServiceBusServerBusyError(
            f"{what}: the storage is throttling requests{after} ({line}). Wait a little and "
            "retry, or spread the load (more partitions, fewer concurrent clients)")
    if kind == "timed out":
        return OperationTimeoutError(
            f"{what}: the storage did not answer in time{after} ({line}). Retry: a Delta "
            "commit is all or nothing, and a repeated receive or settlement finds what the "
            "first one did")
    return ServiceBusCommunicationError(
        f"{what}: the connection to the storage failed{after} ({line}). Retry once it is "
        "reachable again")


def storage_fault(exc: BaseException, what: str) -> Optional[ServiceBusError]:
    """The sbdelta error for ``exc`` when it says the storage itself failed, else None (the
    one table from storage failures to public errors; :func:`storage_errors` applies it at
    the public API, :func:`retry` inside the store): a lasting failure (below), else a
    transient one that was not retried (:func:`transient_error`)."""
    if isinstance(exc, ServiceBusError):
        return None
    lasting = _lasting_fault(exc, what)
    if lasting is not None:
        return lasting
    return transient_error(exc, what) if transient_fault(exc) is not None else None


def _lasting_fault(exc: BaseException, what: str) -> Optional[ServiceBusError]:
    """The sbdelta error for a storage failure that a retry does not mend, else None:

    - access refused (permissions, IAM, grants, an immutable file): ServiceBusAuthorizationError;
    - a read-only file system: ServiceBusAuthorizationError (the storage refuses writes);
    - a full file system or quota: ServiceBusQuotaExceededError;
    - a table gone (its folder or log removed outside sbdelta): MessagingEntityNotFoundError;
    - a commit file of the table's log gone (a gap in its versions): ServiceBusCommunicationError;
    - a file the table's log names gone: ServiceBusCommunicationError (the storage lost it).

    ``what`` names the operation; the message quotes the storage's own line.
    """
    reason = storage_refusal(exc) or _line(exc, _NOT_PERMITTED)
    if reason is not None:
        return refused(what, reason)
    line = _line(exc, _READ_ONLY)
    if line is not None:
        return ServiceBusAuthorizationError(
            f"{what}: the storage refused to write: the namespace's file system is read-only "
            f"({line}). Make it writable again and retry")
    line = _line(exc, _FULL)
    if line is not None:
        return ServiceBusQuotaExceededError(
            f"{what}: the namespace's storage is full ({line}). A Delta commit is all or "
            "nothing: free space on the storage (or raise its quota) and retry")
    line = _line(exc, _NO_TABLE)
    if line is not None:
        return MessagingEntityNotFoundError(
            f"{what}: a table of the entity is missing from the storage ({line}): it was "
            "removed outside sbdelta. Restore its folder from a backup, or delete and "
            "recreate the entity")
    line = _line(exc, _LOG_GAP)
    if line is not None:
        return ServiceBusCommunicationError(
            f"{what}: a commit file of the table's Delta log is missing from the storage, "
            f"leaving a gap in its versions ({line}): the storage lost it. Restore the file "
            "(from a backup or snapshot of the storage), or delete and recreate the entity")
    line = _line(exc, _NO_FILE)
    if line is not None:
        return ServiceBusCommunicationError(
            f"{what}: a file that the table's Delta log names is missing from the storage "
            f"({line}): the storage lost it. Restore the file (from a backup or snapshot of "
            "the storage), or delete and recreate the entity")
    return None
