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


# Issue 17, retries of transient storage errors: how storages word "try again", and the SDK's
# error each becomes when retries run out (sbdelta._store.faults.transient_error). The texts
# are the clients' own (ABFS, S3A, GCS connector, delta-rs's object_store, Python, Java).
@pytest.mark.parametrize("text, kind, error", [
    ('Operation failed: "The server is busy.", 503, PUT, https://a.dfs.core.windows.net/c/ns/'
     "_delta_log/00000000000000000007.json, ServerBusy", "busy", "ServiceBusServerBusyError"),
    ("Operation failed: \"Ingress is over the account limit.\", 503, PUT", "busy",
     "ServiceBusServerBusyError"),
    ("com.amazonaws.services.s3.model.AmazonS3Exception: Please reduce your request rate. "
     "(Service: Amazon S3; Status Code: 503; Error Code: SlowDown)", "busy",
     "ServiceBusServerBusyError"),
    ("Generic S3 error: Error after 10 retries in 2.1s, max_retries:10, "
     "retry_timeout:180s, source:HTTP status server error (503 Service Unavailable)", "busy",
     "ServiceBusServerBusyError"),
    ("com.google.cloud.hadoop.gcsio: 429 Too Many Requests rateLimitExceeded", "busy",
     "ServiceBusServerBusyError"),
    ("[Errno 11] Resource temporarily unavailable: '/ns/_sbdelta/registry'", "busy",
     "ServiceBusServerBusyError"),
    ("java.net.SocketTimeoutException: Read timed out", "timed out", "OperationTimeoutError"),
    ("Generic MicrosoftAzure error: error sending request: operation timed out", "timed out",
     "OperationTimeoutError"),
    ("HTTP status server error (504 Gateway Timeout) for url (https://b.s3.amazonaws.com/x)",
     "timed out", "OperationTimeoutError"),
    ("java.net.SocketException: Connection reset", "cut off", "ServiceBusCommunicationError"),
    ("Generic S3 error: error sending request: Connection reset by peer (os error 104)",
     "cut off", "ServiceBusCommunicationError"),
    ("HTTP status server error (500 Internal Server Error) for url (https://x)", "cut off",
     "ServiceBusCommunicationError"),
])
def test_transient_storage_faults_are_told_apart_and_become_the_sdks_errors(text, kind, error):
    from sbdelta._store.faults import transient_error, transient_fault

    assert transient_fault(RuntimeError(text)) == kind
    mapped = transient_error(RuntimeError(text), "receive from queue 'q'", tries=40)
    assert type(mapped).__name__ == error
    assert str(mapped).startswith("receive from queue 'q': ") and "after 40 attempts" in str(mapped)


@pytest.mark.parametrize("text", [
    # lasting failures, whatever else the text says
    "Operation failed: \"This request is not authorized\", 403, AuthorizationPermissionMismatch",
    "Generic LocalFileSystem error: No space left on device (os error 28), timed out",
    # not the storage: a conflict, a guard, this process's JVM gone, numbers that are not HTTP
    "[DELTA_CONCURRENT_APPEND] ConcurrentAppendException: Files were added to partition",
    "SBDELTA_GUARD:STALE",
    "py4j.protocol.Py4JNetworkError: An error occurred while trying to connect to the Java "
    "server (127.0.0.1:41503): Connection refused",
    "Cannot time travel Delta table to version 503. Available versions: [0, 429]",
    "file part-00503-a.snappy.parquet",
])
def test_lasting_faults_and_other_failures_are_not_transient(text):
    from sbdelta._store.faults import transient_fault

    assert transient_fault(RuntimeError(text)) is None


def test_retry_repeats_a_step_the_storage_failed_transiently_then_raises_the_sdks_error():
    """The retry loop on real failures of a step (OSErrors as Python's file functions raise
    them): two throttled attempts, then the step's answer; a step timing out every time ends,
    after the policy's attempts, in OperationTimeoutError; a lasting failure is not repeated."""
    import errno

    from sbdelta._store.delta import RetryPolicy, retry, retry_counts, retry_policy
    from sbdelta.exceptions import OperationTimeoutError, ServiceBusQuotaExceededError

    calls = []

    def throttled_twice():
        calls.append(1)
        if len(calls) <= 2:
            raise OSError(errno.EAGAIN, "Resource temporarily unavailable", "/ns/x")
        return "done"

    def always(code, text):
        def step():
            calls.append(1)
            raise OSError(code, text, "/ns/x")
        return step

    before = retry_counts["transient"]
    with retry_policy(RetryPolicy(attempts=4, backoff=0.001, fixed=True)):
        assert retry(throttled_twice, what="send to queue 'q'") == "done"
        assert (len(calls), retry_counts["transient"] - before) == (3, 2)
        calls.clear()
        with pytest.raises(OperationTimeoutError, match="after 4 attempts"):
            retry(always(errno.ETIMEDOUT, "Connection timed out"), what="receive")
        assert len(calls) == 4
        calls.clear()
        with pytest.raises(ServiceBusQuotaExceededError):
            retry(always(errno.ENOSPC, "No space left on device"), what="send")
        assert len(calls) == 1
