"""sbdelta: Azure Service Bus semantics on Delta tables, for Spark.

The whole public API is re-exported here; everything else is private.
"""

from ._autolock import AutoLockRenewer
from ._clock import Clock, ManualClock, SystemClock
from ._batch import ServiceBusMessageBatch
from ._message import (NEXT_AVAILABLE_SESSION, ServiceBusMessage,
                       ServiceBusMessageState, ServiceBusReceivedMessage, ServiceBusReceiveMode,
                       ServiceBusSessionFilter, ServiceBusSubQueue)
from ._client import ServiceBusClient
from ._options import ServiceBusConnectionStringProperties, TransportType, parse_connection_string
from ._receiver import ServiceBusReceiver
from ._session import ServiceBusSession, ServiceBusSessionGroup
from ._sender import ServiceBusSender
from ._spark import get_spark
from .dead_letters import resubmit_dead_letters
from .exceptions import (AutoLockRenewFailed, AutoLockRenewTimeout, CommitConflictError,
                         ConfigurationError, ImmutablePropertyError, InvalidMessageError,
                         MessageTypeError, InvalidEntityNameError, InvalidPropertyError, MessageAlreadySettled,
                         MessageLockLostError, MessageNotFoundError, MessageSizeExceededError,
                         MessagingEntityAlreadyExistsError, MessagingEntityDisabledError,
                         MessagingEntityNotFoundError, OperationTimeoutError,
                         ServiceBusAuthenticationError, ServiceBusAuthorizationError,
                         ServiceBusCommunicationError, ServiceBusConnectionError, ServiceBusError,
                         ServiceBusServerBusyError,
                         ServiceBusInvalidOperationError, ServiceBusQuotaExceededError,
                         SessionCannotBeLockedError, SessionLockLostError, SparkSetupError,
                         StorageLayoutError)
from .paired import PairedNamespaceOptions
from .management import (EntityStatus, QueueProperties, RuleProperties,
                         ServiceBusAdministrationClient, SubscriptionProperties, TopicProperties)

__version__ = "0.1.0"

__all__ = [
    # messaging
    "ServiceBusClient",
    "ServiceBusSender",
    "ServiceBusReceiver",
    "ServiceBusSession",
    "ServiceBusSessionGroup",
    "ServiceBusMessage",
    "ServiceBusReceivedMessage",
    "ServiceBusMessageBatch",
    "ServiceBusReceiveMode",
    "ServiceBusSubQueue",
    "ServiceBusSessionFilter",
    "NEXT_AVAILABLE_SESSION",
    "ServiceBusMessageState",
    "AutoLockRenewer",
    "PairedNamespaceOptions",
    "resubmit_dead_letters",
    "TransportType",
    "parse_connection_string",
    "ServiceBusConnectionStringProperties",
    # management
    "ServiceBusAdministrationClient",
    "QueueProperties",
    "TopicProperties",
    "SubscriptionProperties",
    "RuleProperties",
    "EntityStatus",
    # time and Spark
    "Clock",
    "SystemClock",
    "ManualClock",
    "get_spark",
    # errors
    "ServiceBusError",
    "ServiceBusConnectionError",
    "ServiceBusCommunicationError",
    "ServiceBusAuthenticationError",
    "ServiceBusAuthorizationError",
    "ServiceBusServerBusyError",
    "OperationTimeoutError",
    "CommitConflictError",
    "MessageLockLostError",
    "SessionLockLostError",
    "SessionCannotBeLockedError",
    "AutoLockRenewFailed",
    "AutoLockRenewTimeout",
    "MessageAlreadySettled",
    "MessageSizeExceededError",
    "MessageNotFoundError",
    "MessageTypeError",
    "InvalidMessageError",
    "MessagingEntityNotFoundError",
    "MessagingEntityAlreadyExistsError",
    "MessagingEntityDisabledError",
    "ServiceBusQuotaExceededError",
    "ServiceBusInvalidOperationError",
    "InvalidEntityNameError",
    "InvalidPropertyError",
    "ImmutablePropertyError",
    "ConfigurationError",
    "SparkSetupError",
    "StorageLayoutError",
]
