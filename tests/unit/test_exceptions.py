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
