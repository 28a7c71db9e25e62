"""Entity management, named as in ``azure.servicebus.management``."""

from ._apply import ApplyReport
from ._client import (QueueRuntimeProperties, ServiceBusAdministrationClient,
                      SubscriptionRuntimeProperties, TopicRuntimeProperties)
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
    # entity properties
    "QueueProperties",
    "TopicProperties",
    "SubscriptionProperties",
    "RuleProperties",
    "EntityStatus",
    # rule filters and actions
    "TrueRuleFilter",
    "FalseRuleFilter",
    "SqlRuleFilter",
    "CorrelationRuleFilter",
    "SqlRuleAction",
]
