"""The namespace's own properties (as ``azure.servicebus.management``'s ``NamespaceProperties``,
``MessagingSku``, ``NamespaceType`` and ``ApiVersion``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Optional

from .._properties import CaseInsensitiveEnum

__all__ = ["ApiVersion", "MessagingSku", "NamespaceType", "NamespaceProperties",
           "namespace_name"]


class ApiVersion(CaseInsensitiveEnum):
    """The SDK's management API versions. sbdelta has one behaviour: ``api_version`` is
    accepted by both clients and changes nothing."""

    V2017_04 = "2017-04"
    V2021_05 = "2021-05"


class MessagingSku(CaseInsensitiveEnum):
    BASIC = "Basic"
    STANDARD = "Standard"
    PREMIUM = "Premium"


class NamespaceType(CaseInsensitiveEnum):
    MESSAGING = "Messaging"
    NOTIFICATION_HUB = "NotificationHub"
    MIXED = "Mixed"
    EVENT_HUB = "EventHub"
    RELAY = "Relay"


@dataclass(frozen=True)
class NamespaceProperties:
    """What ``get_namespace_properties`` says about a namespace.

    ``name`` is the last segment of the namespace's location; ``created_at_utc`` is when its
    first entity was created and ``modified_at_utc`` when an entity last changed (both None
    while it has none); ``messaging_sku`` is ``Premium``, the tier whose features sbdelta has
    (messages up to 100 MB, partitioning, sessions, topics); ``messaging_units`` is None
    (capacity is the Spark cluster's) and ``alias`` None (no geo-recovery alias: pairing is
    the client's, :mod:`sbdelta.paired`).
    """

    name: str
    alias: Optional[str]
    created_at_utc: Optional[datetime]
    modified_at_utc: Optional[datetime]
    messaging_sku: MessagingSku
    messaging_units: Optional[int]
    namespace_type: NamespaceType


def namespace_name(root: str) -> str:
    """The last path segment of a namespace root URI (``file:/data/ns`` -> ``ns``)."""
    return root.rstrip("/").rsplit("/", 1)[-1] or root
