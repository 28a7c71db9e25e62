"""The SDK's management models that carry no behaviour in sbdelta, so that programs written for
``azure.servicebus.management`` import and build them unchanged.

Access control is the storage's (file permissions, cloud IAM, Unity Catalog grants), so an
entity's ``authorization_rules`` are accepted and not kept (their keys are never written to
the registry); every entity is always available; :class:`MessageCountDetails` is the SDK's
plain record of message counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import List, Optional

__all__ = ["AccessRights", "AuthorizationRule", "CaseInsensitiveEnum",
           "EntityAvailabilityStatus", "MessageCountDetails"]


class CaseInsensitiveEnum(str, Enum):
    """A str enum whose members are also found by value or name in any letter case (as the
    SDK's ``CaseInsensitiveEnumMeta`` enums)."""

    @classmethod
    def _missing_(cls, value: object):
        wanted = value.strip().lower() if isinstance(value, str) else None
        return next((m for m in cls if wanted in (m.value.lower(), m.name.lower())), None)


class AccessRights(CaseInsensitiveEnum):
    """Rights of a shared-access authorization rule (no effect in sbdelta)."""

    MANAGE = "Manage"
    SEND = "Send"
    LISTEN = "Listen"


class EntityAvailabilityStatus(CaseInsensitiveEnum):
    """An entity's availability; an sbdelta entity whose tables exist is always AVAILABLE."""

    AVAILABLE = "Available"
    LIMITED = "Limited"
    RENAMING = "Renaming"
    RESTORING = "Restoring"
    UNKNOWN = "Unknown"


@dataclass
class AuthorizationRule:
    """A shared-access authorization rule, as the SDK's (keyword arguments only). Accepted by
    ``create_queue``/``create_topic`` and not kept: access control is the storage's."""

    type: Optional[str] = None
    claim_type: Optional[str] = None
    claim_value: Optional[str] = None
    rights: List[AccessRights] = field(default_factory=list)
    created_at_utc: Optional[datetime] = None
    modified_at_utc: Optional[datetime] = None
    key_name: Optional[str] = None
    primary_key: Optional[str] = None
    secondary_key: Optional[str] = None


@dataclass
class MessageCountDetails:
    """Message counts of a queue, topic or subscription, as the SDK's record."""

    active_message_count: Optional[int] = None
    dead_letter_message_count: Optional[int] = None
    scheduled_message_count: Optional[int] = None
    transfer_dead_letter_message_count: Optional[int] = None
    transfer_message_count: Optional[int] = None
