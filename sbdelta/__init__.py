"""sbdelta: Azure Service Bus semantics on Delta tables, for Spark.

The whole public API is re-exported here; everything else is private.
"""

from ._clock import Clock, ManualClock, SystemClock
from ._spark import get_spark
from .exceptions import (CommitConflictError, ConfigurationError, ImmutablePropertyError,
                         InvalidEntityNameError, InvalidPropertyError, MessageAlreadySettled,
                         MessageLockLostError, MessageNotFoundError, MessageSizeExceededError,
                         MessagingEntityAlreadyExistsError, MessagingEntityDisabledError,
                         MessagingEntityNotFoundError, OperationTimeoutError,
                         ServiceBusConnectionError, ServiceBusError,
                         ServiceBusInvalidOperationError, ServiceBusQuotaExceededError,
                         SparkSetupError)
from .management import (EntityStatus, QueueProperties, RuleProperties,
                         ServiceBusAdministrationClient, SubscriptionProperties, TopicProperties)

__version__ = "0.1.0"

__all__ = [
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
    "OperationTimeoutError",
    "CommitConflictError",
    "MessageLockLostError",
    "MessageAlreadySettled",
    "MessageSizeExceededError",
    "MessageNotFoundError",
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
]
