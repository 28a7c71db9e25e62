"""azure-servicebus client options: connection strings, retry_* options (which govern sbdelta's
commit retries) and transport options (accepted, no effect). No Spark needed."""

import pytest

from sbdelta._handler import under_retry_policy
from sbdelta._options import NO_EFFECT, parse_connection_string, retry_policy_from
from sbdelta._store import DEFAULT_RETRY, RetryPolicy, retry
from sbdelta.exceptions import CommitConflictError, ConfigurationError


@pytest.mark.parametrize("text, namespace, entity", [
    ("Endpoint=file:///data/ns", "file:///data/ns", None),
    ("endpoint=/data/ns;EntityPath=orders", "/data/ns", "orders"),
    ("Endpoint=abfss://c@acct.dfs.core.windows.net/sb/;SharedAccessKeyName=RootManageShared"
     "AccessKey;SharedAccessKey=abc=;", "abfss://c@acct.dfs.core.windows.net/sb/", None),
    ("  ENDPOINT = s3a://bucket/ns ; entitypath = t/x ;", "s3a://bucket/ns", "t/x"),
    ("Endpoint=dbfs:/sb;SharedAccessSignature=sr=x&sig=y;UseDevelopmentEmulator=true",
     "dbfs:/sb", None),
])
def test_connection_strings_name_a_namespace_location(text, namespace, entity):
    parsed = parse_connection_string(text)
    assert (parsed.namespace, parsed.entity_path) == (namespace, entity)


@pytest.mark.parametrize("text, error", [
    ("", "blank"),
    (None, "blank"),
    ("SharedAccessKeyName=k;SharedAccessKey=v", "no Endpoint"),
    ("Endpoint=sb://contoso.servicebus.windows.net/;SharedAccessKeyName=k;SharedAccessKey=v",
     "addresses an Azure Service Bus namespace"),
    ("Endpoint=/ns;Bogus=1", r"unknown connection string part\(s\) \['bogus'\]"),
    ("Endpoint=/ns;EntityPath", "malformed connection string part 'EntityPath'"),
    ("Endpoint=/a;endpoint=/b", "gives 'endpoint' twice"),
])
def test_bad_connection_strings_say_what_is_wrong(text, error):
    with pytest.raises(ConfigurationError, match=error):
        parse_connection_string(text)


def test_retry_options_replace_only_the_defaults_given():
    assert retry_policy_from({}, "c") == DEFAULT_RETRY
    assert retry_policy_from({name: "x" for name in NO_EFFECT}, "c") == DEFAULT_RETRY
    policy = retry_policy_from({"retry_total": 2, "retry_backoff_factor": 0.5,
                                "retry_backoff_max": 300, "retry_mode": "Fixed"}, "c")
    assert policy == RetryPolicy(attempts=3, max_seconds=300.0, backoff=0.5, backoff_max=300.0,
                                 fixed=True, min_attempts=5)

    class RetryMode:  # azure.servicebus.RetryMode is an enum with string values
        value = "exponential"

    assert not retry_policy_from({"retry_mode": RetryMode()}, "c").fixed


@pytest.mark.parametrize("options, error", [
    ({"retry_total": -1}, "retry_total must be an integer >= 0"),
    ({"retry_total": 1.5}, "retry_total must be an integer"),
    ({"retry_backoff_factor": "1"}, "retry_backoff_factor must be a number"),
    ({"retry_backoff_max": 0}, "retry_backoff_max must be a number > 0"),
    ({"retry_mode": "linear"}, "retry_mode must be 'exponential' or 'fixed'"),
])
def test_bad_retry_options_are_refused(options, error):
    with pytest.raises(ConfigurationError, match=error):
        retry_policy_from(options, "c")


def test_unknown_keywords_are_type_errors_naming_what_is_accepted():
    with pytest.raises(TypeError, match=r"ServiceBusClient got unexpected keyword argument\(s\) "
                                        r"\['retry_totl'\].*retry_total"):
        retry_policy_from({"retry_totl": 3}, "ServiceBusClient")


def test_a_clients_retry_policy_governs_the_commit_retries_of_its_operations():
    tries = []

    def conflicting():
        tries.append(1)
        raise RuntimeError("io.delta.exceptions.ConcurrentAppendException: files were added")

    @under_retry_policy
    class Handler:
        def __init__(self, policy):
            self.policy = policy

        def _retry_policy(self):
            return self.policy

        def operation(self):
            return retry(conflicting, what="an operation")

    with pytest.raises(CommitConflictError, match="after 3 attempts"):
        Handler(retry_policy_from({"retry_total": 2, "retry_backoff_factor": 0,
                                   "retry_mode": "fixed"}, "c")).operation()
    assert len(tries) == 3
    tries.clear()
    with pytest.raises(CommitConflictError, match="after 1 attempt; try again"):
        Handler(RetryPolicy(attempts=1)).operation()
    assert len(tries) == 1


def test_one_slow_try_does_not_use_up_the_retry_budget():
    """A try that outlasts max_seconds (a loaded machine) is followed by more, up to
    min_attempts, before the time bound ends the retries."""
    import time

    tries = []

    def slow_conflict():
        tries.append(1)
        time.sleep(0.02)
        raise RuntimeError("io.delta.exceptions.ConcurrentAppendException: files were added")

    from sbdelta._store import retry_policy

    with retry_policy(RetryPolicy(attempts=40, max_seconds=0.01, min_attempts=3,
                                  backoff=0, fixed=True)):
        with pytest.raises(CommitConflictError, match="after 3 attempts"):
            retry(slow_conflict, what="an operation")
    assert len(tries) == 3


def test_management_enums_match_the_sdks_values_in_any_letter_case():
    from sbdelta.management import ApiVersion, MessagingSku, NamespaceType
    from sbdelta.management._namespace_properties import namespace_name

    assert [v.value for v in ApiVersion] == ["2017-04", "2021-05"]
    assert ApiVersion("V2021_05") is ApiVersion.V2021_05 is ApiVersion("2021-05")
    assert MessagingSku("premium") is MessagingSku.PREMIUM
    assert NamespaceType("notificationhub") is NamespaceType.NOTIFICATION_HUB
    assert [namespace_name(r) for r in ("file:/data/ns", "abfss://c@a.dfs.core.windows.net/x/",
                                        "s3://bucket")] == ["ns", "x", "bucket"]


def test_the_sdks_connection_string_names_are_exported_as_the_sdk_has_them():
    """``from azure.servicebus import parse_connection_string, TransportType,
    ServiceBusConnectionStringProperties`` becomes ``from sbdelta import ...``: the parts as
    given (shared-access parts have no effect), the namespace location as both
    ``fully_qualified_namespace`` and ``endpoint``."""
    import sbdelta

    props = sbdelta.parse_connection_string(
        "Endpoint=/data/ns;SharedAccessKeyName=root;SharedAccessKey=k=;EntityPath=orders")
    assert isinstance(props, sbdelta.ServiceBusConnectionStringProperties)
    assert (props.fully_qualified_namespace, props.endpoint, props.entity_path,
            props.shared_access_key_name, props.shared_access_key,
            props.shared_access_signature) == ("/data/ns", "/data/ns", "orders", "root", "k=",
                                               None)
    assert sbdelta.TransportType.AmqpOverWebsocket.value == 2
    assert "transport_type" in NO_EFFECT
