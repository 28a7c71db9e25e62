"""Entity management, named as in ``azure.servicebus.management``."""

from ._apply import ApplyReport
from ._client import (QueueRuntimeProperties, ServiceBusAdministrationClient,
                      SubscriptionRuntimeProperties, TopicRuntimeProperties)
from ._namespace_properties import ApiVersion, MessagingSku, NamespaceProperties, NamespaceType
from .._sdk_models import (AccessRights, AuthorizationRule, EntityAvailabilityStatus,
                           MessageCountDetails)
from .._properties import (CorrelationRuleFilter, EntityStatus, FalseRuleFilter, QueueProperties,
                          RuleProperties, SqlRuleAction, SqlRuleFilter, SubscriptionProperties,
                          TopicProperties, TrueRuleFilter)

__all__ = [
    # client
    "ServiceBusAdministrationClient",
    "ApplyReport",
    "QueueRuntimeProperties",
    "TopicRuntimeProperties",
    "SubscriptionRuntimeProperties",
    # the namespace
    "NamespaceProperties",
    "MessagingSku",
    "NamespaceType",
    "ApiVersion",
    # entity properties
    "QueueProperties",
    "TopicProperties",
    "SubscriptionProperties",
    "RuleProperties",
    "EntityStatus",
    "EntityAvailabilityStatus",
    "AuthorizationRule",
    "AccessRights",
    "MessageCountDetails",
    # rule filters and actions
    "TrueRuleFilter",
    "FalseRuleFilter",
    "SqlRuleFilter",
    "CorrelationRuleFilter",
    "SqlRuleAction",
]
