"""The exception tree of azure-servicebus 7.x (``azure.servicebus.exceptions``) is sbdelta's: every
class by the same name, importable from ``sbdelta`` and ``sbdelta.exceptions``, with (at least) the
SDK's bases, constructed the way the SDK constructs them; and storage refusals are recognised."""

import pytest

import sbdelta
from sbdelta import exceptions
from sbdelta._store import storage_refusal

# azure-servicebus 7.x: class -> its bases there (ServiceBusError's base is azure-core's
# AzureError, an Exception).
SDK_TREE = {
    "ServiceBusError": ("Exception",),
    "ServiceBusConnectionError": ("ServiceBusError",),
    "ServiceBusAuthenticationError": ("ServiceBusError",),
    "ServiceBusAuthorizationError": ("ServiceBusError",),
    "OperationTimeoutError": ("ServiceBusError",),
    "MessageSizeExceededError": ("ServiceBusError", "ValueError"),
    "MessageAlreadySettled": ("ValueError",),
    "MessageLockLostError": ("ServiceBusError",),
    "SessionLockLostError": ("ServiceBusError",),
    "MessageNotFoundError": ("ServiceBusError",),
    "MessagingEntityNotFoundError": ("ServiceBusError",),
    "MessagingEntityDisabledError": ("ServiceBusError",),
    "MessagingEntityAlreadyExistsError": ("ServiceBusError",),
    "ServiceBusQuotaExceededError": ("ServiceBusError",),
    "ServiceBusServerBusyError": ("ServiceBusError",),
    "ServiceBusCommunicationError": ("ServiceBusError",),
    "SessionCannotBeLockedError": ("ServiceBusError",),
    "AutoLockRenewFailed": ("ServiceBusError",),
    "AutoLockRenewTimeout": ("ServiceBusError",),
}


def _class(name):
    return Exception if name == "Exception" else ValueError if name == "ValueError" \
        else getattr(exceptions, name)


@pytest.mark.parametrize("name", sorted(SDK_TREE))
def test_every_sdk_exception_exists_with_the_sdk_bases(name):
    cls = getattr(exceptions, name)
    assert getattr(sbdelta, name) is cls and name in exceptions.__all__
    for base in SDK_TREE[name]:
        assert issubclass(cls, _class(base)), f"{name} is not a {base}"


@pytest.mark.parametrize("name", sorted(n for n in SDK_TREE if n != "ServiceBusError"))
def test_sdk_exceptions_construct_as_the_sdk_constructs_them(name):
    cls = getattr(exceptions, name)
    assert str(cls(message="what happened")) == "what happened"
    plain = cls()  # the SDK's subclasses all have a default message
    assert str(plain) and plain.message == str(plain)
    cause = OSError("disk")
    assert cls(message="m", error=cause).error is cause


def test_commit_conflicts_are_the_sdks_server_busy_and_retryable():
    assert issubclass(exceptions.CommitConflictError, exceptions.ServiceBusServerBusyError)
    assert exceptions.CommitConflictError("lost").retryable


@pytest.mark.parametrize("text", [
    # Hadoop's local file system, as a Py4J error quotes it
    "An error occurred while calling o123.save.\n: java.io.FileNotFoundException: "
    "/data/ns/queues/q/inbox/_delta_log/00000000000000000001.json (Permission denied)",
    "org.apache.hadoop.security.AccessControlException: Permission denied: user=etl, "
    "access=WRITE, inode=\"/ns\":hdfs:supergroup:drwxr-xr-x",
    "java.nio.file.AccessDeniedException: s3a://bucket/ns/_sbdelta/registry: getFileStatus "
    "on s3a://bucket/ns/_sbdelta/registry: com.amazonaws.services.s3.model.AmazonS3Exception: "
    "Forbidden (Service: Amazon S3; Status Code: 403; Error Code: 403 Forbidden)",
    "Operation failed: \"This request is not authorized to perform this operation using this "
    "permission.\", 403, HEAD, AuthorizationPermissionMismatch",
    "[INSUFFICIENT_PERMISSIONS] Insufficient privileges: User does not have MODIFY on Table",
])
def test_storage_refusals_are_recognised(text):
    reason = storage_refusal(RuntimeError(text))
    # The storage's own line saying so, as the error message will quote it.
    refusing = [line.strip() for line in text.splitlines()
                if any(word in line for word in ("Permission denied", "AccessDenied",
                                                 "AuthorizationPermissionMismatch",
                                                 "INSUFFICIENT_PERMISSIONS"))]
    assert reason == refusing[0][:300]


@pytest.mark.parametrize("text", [
    "[DELTA_CONCURRENT_APPEND] ConcurrentAppendException: Files were added to partition",
    "java.io.FileNotFoundException: File file:/ns/queues/q/inbox does not exist",
    "SBDELTA_GUARD:LOCK_LOST",
    "status 4031 ok",
])
def test_other_failures_are_not_refusals(text):
    assert storage_refusal(RuntimeError(text)) is None


# Issue 18, storage faults: how each engine words a failure of the storage, and the one error
# each maps to (sbdelta._store.storage_fault; the real faults: tests/store/test_storage_faults.py).
@pytest.mark.parametrize("text, error, says", [
    # delta-rs on a read-only bind mount
    ("Failed to parse parquet: External: Generic LocalFileSystem error: Unable to open file "
     "/ns/queues/q/1/inbox/pid=0/part-0.parquet#1: Read-only file system (os error 30)",
     "ServiceBusAuthorizationError", "read-only"),
    # Spark (Hadoop's local file system) on the same mount
    ("An error occurred while calling o221.append.\n: org.apache.spark.SparkException: Job "
     "aborted\nCaused by: java.io.FileNotFoundException: /ns/queues/q/1/inbox/pid=0/p.parquet "
     "(Read-only file system)", "ServiceBusAuthorizationError", "read-only"),
    ("[Errno 1] Operation not permitted: '/ns/_sbdelta/registry/x'",  # chattr +i
     "ServiceBusAuthorizationError", "refused access"),
    ("Generic LocalFileSystem error: Unable to copy data to file: No space left on device "
     "(os error 28)", "ServiceBusQuotaExceededError", "storage is full"),
    ("Caused by: org.apache.hadoop.fs.FSError: java.io.IOException: No space left on device",
     "ServiceBusQuotaExceededError", "storage is full"),
    ("[Errno 122] Disk quota exceeded: '/ns/queues/q/1/_activity/a.tmp'",
     "ServiceBusQuotaExceededError", "storage is full"),
    ('Local path "/ns/queues/q/1/inbox" does not exist or you don\'t have access!',
     "MessagingEntityNotFoundError", "removed outside sbdelta"),
    ("[PATH_NOT_FOUND] Path does not exist: file:/ns/queues/q/1/inbox.",
     "MessagingEntityNotFoundError", "removed outside sbdelta"),
    ("org.apache.spark.SparkFileNotFoundException: File file:/ns/queues/q/1/messages/pid=0/"
     "p.parquet does not exist", "ServiceBusCommunicationError", "p.parquet"),
    ("Object Store error: Object at location /ns/queues/q/1/messages/pid=0/p.parquet not "
     "found: No such file or directory (os error 2)", "ServiceBusCommunicationError",
     "p.parquet"),
])
def test_storage_faults_map_to_one_error_each(text, error, says):
    from sbdelta._store import storage_fault

    mapped = storage_fault(RuntimeError(text), "send_messages on queue 'q'")
    assert type(mapped).__name__ == error
    assert str(mapped).startswith("send_messages on queue 'q': ") and says in str(mapped)


@pytest.mark.parametrize("text", [
    "[DELTA_CONCURRENT_APPEND] ConcurrentAppendException: Files were added to partition",
    "SBDELTA_GUARD:LOCK_LOST",
    "division by zero",
])
def test_other_failures_are_not_storage_faults(text):
    from sbdelta._store import storage_fault

    assert storage_fault(RuntimeError(text), "x") is None
