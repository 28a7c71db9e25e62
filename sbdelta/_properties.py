"""Entity descriptions, named as in ``azure.servicebus.management``.

Each class checks and normalises its fields when built and again on every later assignment, so an
instance always holds valid values: durations as ``timedelta`` (``None`` means unlimited),
statuses as :class:`EntityStatus`, timestamps as aware UTC datetimes.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, fields
from datetime import datetime, timedelta, timezone
from enum import Enum
from typing import Any, Callable, ClassVar, Dict, FrozenSet, Mapping, Optional, Tuple, Union

from sbdelta._durations import format_duration, parse_duration
from sbdelta._names import entity_key, validate_entity_name, validate_entity_path
from sbdelta._sdk_models import CaseInsensitiveEnum, EntityAvailabilityStatus
from sbdelta.exceptions import ImmutablePropertyError, InvalidEntityNameError, InvalidPropertyError

_KW = sys.version_info >= (3, 10)
if _KW:
    from dataclasses import KW_ONLY

__all__ = ["CaseInsensitiveEnum", "EntityStatus", "TrueRuleFilter", "FalseRuleFilter",
           "SqlRuleFilter", "CorrelationRuleFilter", "SqlRuleAction", "QueueProperties",
           "TopicProperties", "SubscriptionProperties", "RuleProperties", "check_update"]

Scalar = Union[str, int, float, bool]
Validator = Callable[[str, Any], Any]
MAX_SQL_LENGTH = 1024
MAX_USER_METADATA = 1024
INT32_MAX = 2**31 - 1


class EntityStatus(CaseInsensitiveEnum):
    """Whether an entity accepts sends and receives; strings match case-insensitively."""

    ACTIVE = "Active"
    DISABLED = "Disabled"
    SEND_DISABLED = "SendDisabled"
    RECEIVE_DISABLED = "ReceiveDisabled"


# Field validators: one per kind of field, shared by all classes. Each returns the normal form.

def _fail(name: str, value: object, expected: str) -> InvalidPropertyError:
    return InvalidPropertyError(f"{name}={value!r} is invalid: expected {expected}")


def _bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _fail(name, value, f"a bool (True or False), got {type(value).__name__}")
    return value


def _int(low: int, high: Optional[int] = None) -> Validator:
    allowed = f"an int >= {low}" if high is None else f"an int from {low} to {high}"

    def check(name: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _fail(name, value, f"{allowed}, got {type(value).__name__}")
        if value < low or (high is not None and value > high):
            raise _fail(name, value, allowed)
        return value
    return check


def _duration(allowed: str, *, low: Optional[timedelta] = None,
              high: Optional[timedelta] = None, unlimited: bool) -> Validator:
    def check(name: str, value: Any) -> Optional[timedelta]:
        try:
            td = parse_duration(value, field=name)
        except InvalidPropertyError as exc:
            raise InvalidPropertyError(f"{exc.message}; allowed: {allowed}") from None
        if td is None and not unlimited:
            raise _fail(name, value, f"{allowed} (it cannot be unlimited)")
        if td is not None and ((low is not None and td < low) or (high is not None and td > high)):
            raise _fail(name, value, f"{allowed}, got {format_duration(td)}")
        return td
    return check


def _status(name: str, value: Any) -> EntityStatus:
    try:
        return EntityStatus(value)
    except ValueError:
        allowed = ", ".join(repr(s.value) for s in EntityStatus)
        raise _fail(name, value, f"an EntityStatus or one of {allowed}") from None


def _entity_ref(name: str, value: Any) -> Optional[str]:
    if value is None or value == "":
        return None
    try:
        return validate_entity_path(value, kind=name)
    except InvalidEntityNameError as exc:
        raise InvalidPropertyError(f"{name}={value!r} is invalid: {exc.message}") from None


def _text(max_len: Optional[int] = None) -> Validator:
    allowed = "None or a str" + (f" of at most {max_len} characters" if max_len else "")

    def check(name: str, value: Any) -> Optional[str]:
        if value is not None and (not isinstance(value, str) or len(value) > (max_len or 1e99)):
            raise _fail(name, value, allowed)
        return value
    return check


def _not_kept(name: str, value: Any) -> None:
    """``authorization_rules`` (a list of AuthorizationRule) and a topic's ``size_in_bytes``
    (a count): accepted as the SDK takes them, not kept (access control is the storage's;
    sizes are runtime properties)."""
    if name == "authorization_rules":
        if value is not None and not isinstance(value, (list, tuple)):
            raise _fail(name, value, "a list of AuthorizationRule, or None (accepted, not kept: "
                        "access control is the storage's)")
    elif value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                or value < 0):
        raise _fail(name, value, "a number of bytes >= 0, or None (accepted, not kept)")
    return None


def _timestamp(name: str, value: Any) -> Optional[datetime]:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value[:-1] + "+00:00" if value[-1:] in "Zz" else value)
        except ValueError:
            raise _fail(name, value, "an ISO-8601 date-time string") from None
    if value is not None and (not isinstance(value, datetime) or value.utcoffset() is None):
        raise _fail(name, value, "None or a timezone-aware (UTC) datetime")
    return None if value is None else value.astimezone(timezone.utc)


def _sql(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_SQL_LENGTH:
        raise _fail(name, value, f"a non-blank str of at most {MAX_SQL_LENGTH} characters")
    return value


def _scalars(name: str, value: Any) -> Optional[Dict[str, Scalar]]:
    if value is not None and not isinstance(value, Mapping):
        raise _fail(name, value, "None or a dict of str keys to str/int/float/bool values")
    for key, item in (value or {}).items():
        if not isinstance(key, str) or not key or not isinstance(item, (str, int, float, bool)):
            raise _fail(f"{name}[{key!r}]", item, "a str key and a str/int/float/bool value")
    return dict(value) if value else None


def _path(kind: str) -> Validator:
    return lambda name, value: validate_entity_path(value, kind=kind)


def _name(kind: str) -> Validator:
    return lambda name, value: validate_entity_name(value, kind=kind)


# Rule filters and actions (immutable).

@dataclass(frozen=True)
class _SqlExpression:
    sql_expression: str
    parameters: Optional[Dict[str, Scalar]] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "sql_expression", _sql("sql_expression", self.sql_expression))
        object.__setattr__(self, "parameters", _scalars("parameters", self.parameters))

    def to_dict(self) -> Dict[str, Any]:
        """Return a JSON-safe dict that :meth:`RuleProperties.from_dict` reads back."""
        return {"sql_expression": self.sql_expression,
                "parameters": None if self.parameters is None else dict(self.parameters)}


class SqlRuleFilter(_SqlExpression):
    """Matches messages for which a SQL-like condition holds.

    Args:
        sql_expression: The condition, for example ``"severity = 'error'"`` (1..1024 chars).
        parameters: Values for ``@name`` placeholders in the expression.
    """

    def to_dict(self) -> Dict[str, Any]:
        """Return a JSON-safe dict that :meth:`RuleProperties.from_dict` reads back."""
        return {"type": "Sql", **super().to_dict()}


class TrueRuleFilter(SqlRuleFilter):
    """Matches every message (``1=1``); the filter of the ``$Default`` rule."""

    def __init__(self) -> None:
        super().__init__("1=1")

    def to_dict(self) -> Dict[str, Any]:
        """Return ``{"type": "True"}``."""
        return {"type": "True"}


class FalseRuleFilter(SqlRuleFilter):
    """Matches no message (``1=0``)."""

    def __init__(self) -> None:
        super().__init__("1=0")

    def to_dict(self) -> Dict[str, Any]:
        """Return ``{"type": "False"}``."""
        return {"type": "False"}


class SqlRuleAction(_SqlExpression):
    """Changes matching messages' properties, for example ``SET priority = 'high'``.

    Args:
        sql_expression: The action (1..1024 chars).
        parameters: Values for ``@name`` placeholders in the expression.
    """


_CORRELATION_FIELDS = ("correlation_id", "message_id", "to", "reply_to", "label", "session_id",
                       "reply_to_session_id", "content_type")


@dataclass(frozen=True, init=False)
class CorrelationRuleFilter:
    """Matches messages whose system and application properties equal the given values.

    Arguments are keyword-only and at least one must be set; ``subject`` is an alias of
    ``label``; ``properties`` maps application property names to the values to match.
    """

    correlation_id: Optional[str] = None
    message_id: Optional[str] = None
    to: Optional[str] = None
    reply_to: Optional[str] = None
    label: Optional[str] = None
    session_id: Optional[str] = None
    reply_to_session_id: Optional[str] = None
    content_type: Optional[str] = None
    properties: Optional[Dict[str, Scalar]] = None

    def __init__(self, *, properties: Optional[Mapping[str, Scalar]] = None,
                 subject: Optional[str] = None, **values: Optional[str]) -> None:
        unknown = sorted(set(values) - set(_CORRELATION_FIELDS))
        if unknown:
            raise TypeError(f"CorrelationRuleFilter got unexpected arguments {unknown}")
        if subject is not None:
            if values.get("label") not in (None, subject):
                raise InvalidPropertyError(f"label={values['label']!r} and subject={subject!r} "
                                           "differ; subject is an alias of label, give one")
            values["label"] = subject
        for key in _CORRELATION_FIELDS:
            object.__setattr__(self, key, _text()(key, values.get(key)))
        object.__setattr__(self, "properties", _scalars("properties", properties))
        if self.properties is None and all(values.get(k) is None for k in _CORRELATION_FIELDS):
            raise InvalidPropertyError("CorrelationRuleFilter needs at least one condition: one "
                                       f"of {', '.join(_CORRELATION_FIELDS)} or properties")

    @property
    def subject(self) -> Optional[str]:
        """The subject to match (the same as ``label``)."""
        return self.label

    def to_dict(self) -> Dict[str, Any]:
        """Return a JSON-safe dict that :meth:`RuleProperties.from_dict` reads back."""
        out: Dict[str, Any] = {"type": "Correlation"}
        out.update({key: getattr(self, key) for key in _CORRELATION_FIELDS})
        out["properties"] = None if self.properties is None else dict(self.properties)
        return out


RuleFilter = Union[SqlRuleFilter, CorrelationRuleFilter]
_FILTER_TYPES = {"true": TrueRuleFilter, "false": FalseRuleFilter, "sql": SqlRuleFilter,
                 "correlation": CorrelationRuleFilter}


def _filter_or_action(name: str, value: Any) -> Any:
    """Validate ``filter`` (None means TrueRuleFilter) or ``action``; decode to_dict output."""
    if name == "filter":
        kinds: Tuple[type, ...] = (SqlRuleFilter, CorrelationRuleFilter)
        if value is None:
            return TrueRuleFilter()
    else:
        kinds = (SqlRuleAction,)
        if value is None:
            return None
    if isinstance(value, Mapping):
        data = dict(value)
        kind = _FILTER_TYPES.get(str(data.pop("type", "")).lower()) if name == "filter" else \
            SqlRuleAction
        try:
            return kind(**data)  # type: ignore[misc, operator]
        except TypeError as exc:
            raise _fail(name, value, f"the output of to_dict() ({exc})") from None
    if not isinstance(value, kinds):
        raise _fail(name, value, " or ".join(k.__name__ for k in kinds))
    return value


# Entity descriptions (mutable; every assignment is checked).

_COMMON: Dict[str, Validator] = {
    "default_message_time_to_live": _duration(
        "a duration longer than 0, or None for unlimited", unlimited=True),
    "auto_delete_on_idle": _duration(
        "a duration of at least PT5M (5 minutes), or None for unlimited",
        low=timedelta(minutes=5), unlimited=True),
    "enable_batched_operations": _bool, "status": _status, "user_metadata": _text(1024),
    "created_at_utc": _timestamp, "updated_at_utc": _timestamp, "accessed_at_utc": _timestamp,
}
# The SDK's options of queues and topics that have no effect in sbdelta (kept or not, above).
_NO_EFFECT: Dict[str, Validator] = {"enable_express": _bool, "authorization_rules": _not_kept}
_RECEIVING: Dict[str, Validator] = {
    "lock_duration": _duration("a duration longer than 0 and at most PT5M (5 minutes)",
                               high=timedelta(minutes=5), unlimited=False),
    "max_delivery_count": _int(1, INT32_MAX),
    "dead_lettering_on_message_expiration": _bool, "requires_session": _bool,
    "forward_to": _entity_ref, "forward_dead_lettered_messages_to": _entity_ref,
}
_SENDING: Dict[str, Validator] = {
    "requires_duplicate_detection": _bool,
    "duplicate_detection_history_time_window": _duration(
        "a duration from PT20S (20 seconds) to P7D (7 days)",
        low=timedelta(seconds=20), high=timedelta(days=7), unlimited=False),
    "enable_partitioning": _bool, "max_size_in_megabytes": _int(1),
    "max_message_size_in_kilobytes": _int(1, 102400),
}


class _Properties:
    """Shared behaviour: validation on build and on assignment, dict conversion."""

    _VALIDATORS: ClassVar[Dict[str, Validator]] = {}
    _IDENTITY: ClassVar[Tuple[str, ...]] = ("name",)
    _KIND: ClassVar[str] = "entity"
    FIXED_AT_CREATION: ClassVar[FrozenSet[str]] = frozenset()

    def __post_init__(self) -> None:
        for f in fields(self):  # type: ignore[arg-type]
            object.__setattr__(self, f.name, self.validate_field(f.name, getattr(self, f.name)))
        self._check_consistency()
        object.__setattr__(self, "_ready", True)

    def __setattr__(self, name: str, value: Any) -> None:
        if not name.startswith("_") and name not in self._VALIDATORS:
            raise AttributeError(f"{type(self).__name__} has no property {name!r}")
        if not self.__dict__.get("_ready"):  # still inside __init__; __post_init__ checks
            return object.__setattr__(self, name, value)
        old = getattr(self, name)
        object.__setattr__(self, name, self.validate_field(name, value))
        try:
            self._check_consistency()
        except InvalidPropertyError:
            object.__setattr__(self, name, old)
            raise

    def _check_consistency(self) -> None:
        """Cross-field checks; subclasses override."""

    @property
    def availability_status(self) -> EntityAvailabilityStatus:
        """As the SDK's: an entity whose tables exist is always available."""
        return EntityAvailabilityStatus.AVAILABLE

    def describe(self) -> str:
        """Return the entity kind and path, for example ``"queue 'orders'"``."""
        return f"{self._KIND} {'/'.join(getattr(self, f) for f in self._IDENTITY)!r}"

    @classmethod
    def validate_field(cls, name: str, value: Any) -> Any:
        """Check one field's value and return its normal form (timedelta, EntityStatus...).

        Raises:
            InvalidPropertyError: For an unknown field or a bad value.
            InvalidEntityNameError: For a bad name field.
        """
        if name not in cls._VALIDATORS:
            raise InvalidPropertyError(f"{cls.__name__} has no property {name!r}; known: "
                                       f"{', '.join(sorted(cls._VALIDATORS))}")
        return cls._VALIDATORS[name](name, value)

    def to_dict(self) -> Dict[str, Any]:
        """Return a JSON-safe dict: durations as ISO-8601 strings, times as ISO-8601 UTC."""
        return {f.name: _encode(getattr(self, f.name)) for f in fields(self)}  # type: ignore

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Any:
        """Build an instance from the output of :meth:`to_dict`.

        Raises:
            InvalidPropertyError: For unknown or missing keys and bad values.
        """
        if not isinstance(data, Mapping):
            raise InvalidPropertyError(f"{cls.__name__}.from_dict expects a dict, got "
                                       f"{type(data).__name__}")
        unknown = sorted(set(data) - set(cls._VALIDATORS))
        missing = [k for k in cls._IDENTITY if k not in data]
        if unknown or missing:
            raise InvalidPropertyError(f"{cls.__name__}.from_dict: unknown keys {unknown}, "
                                       f"missing keys {missing}; known: "
                                       f"{', '.join(sorted(cls._VALIDATORS))}")
        return cls(**data)


def _encode(value: Any) -> Any:
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    return value.to_dict() if hasattr(value, "to_dict") else value


@dataclass
class QueueProperties(_Properties):
    """A queue's settings (as ``azure.servicebus.management.QueueProperties``).

    Durations take a timedelta or an ISO-8601 string (``None``: unlimited). Bounds:
    lock_duration (0, 5 min]; max_delivery_count >= 1; default_message_time_to_live > 0;
    auto_delete_on_idle >= 5 min; duplicate_detection_history_time_window 20 s..7 days;
    max_size_in_megabytes >= 1; max_message_size_in_kilobytes 1..102400; user_metadata <= 1024
    characters; forward targets are entity paths ("" means None) other than the queue itself.
    ``enable_express`` is kept and has no effect (every message is in Delta before its send
    returns); ``authorization_rules`` are accepted and not kept (access control is the
    storage's).
    """

    name: str
    if _KW:
        _: KW_ONLY
    lock_duration: timedelta = timedelta(seconds=30)
    max_delivery_count: int = 10
    default_message_time_to_live: Optional[timedelta] = None
    auto_delete_on_idle: Optional[timedelta] = None
    dead_lettering_on_message_expiration: bool = False
    requires_duplicate_detection: bool = False
    duplicate_detection_history_time_window: timedelta = timedelta(minutes=10)
    requires_session: bool = False
    enable_partitioning: bool = False
    max_size_in_megabytes: int = 1024
    max_message_size_in_kilobytes: int = 256
    forward_to: Optional[str] = None
    forward_dead_lettered_messages_to: Optional[str] = None
    enable_batched_operations: bool = True
    status: EntityStatus = EntityStatus.ACTIVE
    user_metadata: Optional[str] = None
    enable_express: bool = False
    authorization_rules: Optional[list] = None
    created_at_utc: Optional[datetime] = None
    updated_at_utc: Optional[datetime] = None
    accessed_at_utc: Optional[datetime] = None

    _VALIDATORS: ClassVar = {"name": _path("queue"), **_COMMON, **_RECEIVING, **_SENDING,
                             **_NO_EFFECT}
    _KIND: ClassVar[str] = "queue"
    FIXED_AT_CREATION: ClassVar = frozenset({"enable_partitioning", "requires_session"})

    def _check_consistency(self) -> None:
        for key in ("forward_to", "forward_dead_lettered_messages_to"):
            target = getattr(self, key)
            if target is not None and entity_key(target) == entity_key(self.name):
                raise _fail(key, target, f"another entity than queue {self.name!r} itself")


@dataclass
class TopicProperties(_Properties):
    """A topic's settings (as ``azure.servicebus.management.TopicProperties``).

    Bounds as in :class:`QueueProperties` for the fields they share. ``support_ordering``
    and ``filtering_messages_before_publishing`` are kept and have no effect (messages are
    always delivered in sequence order per partition; rules run at receive); ``size_in_bytes``
    is accepted and not kept (a runtime property: ``get_topic_runtime_properties``).
    """

    name: str
    if _KW:
        _: KW_ONLY
    default_message_time_to_live: Optional[timedelta] = None
    auto_delete_on_idle: Optional[timedelta] = None
    requires_duplicate_detection: bool = False
    duplicate_detection_history_time_window: timedelta = timedelta(minutes=10)
    enable_partitioning: bool = False
    max_size_in_megabytes: int = 1024
    max_message_size_in_kilobytes: int = 256
    enable_batched_operations: bool = True
    status: EntityStatus = EntityStatus.ACTIVE
    user_metadata: Optional[str] = None
    enable_express: bool = False
    authorization_rules: Optional[list] = None
    support_ordering: bool = True
    filtering_messages_before_publishing: bool = False
    size_in_bytes: Optional[int] = None
    created_at_utc: Optional[datetime] = None
    updated_at_utc: Optional[datetime] = None
    accessed_at_utc: Optional[datetime] = None

    _VALIDATORS: ClassVar = {"name": _path("topic"), **_COMMON, **_SENDING, **_NO_EFFECT,
                             "support_ordering": _bool,
                             "filtering_messages_before_publishing": _bool,
                             "size_in_bytes": _not_kept}
    _KIND: ClassVar[str] = "topic"
    FIXED_AT_CREATION: ClassVar = frozenset({"enable_partitioning"})


@dataclass
class SubscriptionProperties(_Properties):
    """A subscription's settings (as ``azure.servicebus.management.SubscriptionProperties``).

    Bounds as in :class:`QueueProperties` for the fields they share.
    """

    topic_name: str
    name: str
    if _KW:
        _: KW_ONLY
    lock_duration: timedelta = timedelta(seconds=30)
    max_delivery_count: int = 10
    default_message_time_to_live: Optional[timedelta] = None
    auto_delete_on_idle: Optional[timedelta] = None
    dead_lettering_on_message_expiration: bool = False
    dead_lettering_on_filter_evaluation_exceptions: bool = True
    requires_session: bool = False
    forward_to: Optional[str] = None
    forward_dead_lettered_messages_to: Optional[str] = None
    enable_batched_operations: bool = True
    status: EntityStatus = EntityStatus.ACTIVE
    user_metadata: Optional[str] = None
    created_at_utc: Optional[datetime] = None
    updated_at_utc: Optional[datetime] = None
    accessed_at_utc: Optional[datetime] = None

    _VALIDATORS: ClassVar = {"topic_name": _path("topic"), "name": _name("subscription"),
                             **_COMMON, **_RECEIVING,
                             "dead_lettering_on_filter_evaluation_exceptions": _bool}
    _IDENTITY: ClassVar = ("topic_name", "name")
    _KIND: ClassVar[str] = "subscription"
    FIXED_AT_CREATION: ClassVar = frozenset({"requires_session"})


@dataclass
class RuleProperties(_Properties):
    """A subscription rule: a filter choosing messages and an optional action changing them.

    ``filter=None`` means :class:`TrueRuleFilter`. The rule name ``$Default`` is allowed.
    """

    topic_name: str
    subscription_name: str
    name: str
    if _KW:
        _: KW_ONLY
    filter: RuleFilter = field(default_factory=TrueRuleFilter)
    action: Optional[SqlRuleAction] = None
    created_at_utc: Optional[datetime] = None

    _VALIDATORS: ClassVar = {"topic_name": _path("topic"),
                             "subscription_name": _name("subscription"), "name": _name("rule"),
                             "filter": _filter_or_action, "action": _filter_or_action,
                             "created_at_utc": _timestamp}
    _IDENTITY: ClassVar = ("topic_name", "subscription_name", "name")
    _KIND: ClassVar[str] = "rule"


AnyProperties = Union[QueueProperties, TopicProperties, SubscriptionProperties, RuleProperties]


def check_update(old: AnyProperties, new: AnyProperties) -> None:
    """Refuse an update that changes what cannot change after creation.

    Args:
        old: The entity as stored.
        new: The requested description.

    Raises:
        InvalidPropertyError: If ``old`` and ``new`` describe different kinds of entity.
        ImmutablePropertyError: If the names differ (other than in letter case) or a field in
            ``FIXED_AT_CREATION`` differs; the message names the field.
    """
    if type(old) is not type(new):
        raise InvalidPropertyError(f"cannot update a {type(old).__name__} with a "
                                   f"{type(new).__name__}")
    for key in old._IDENTITY:
        if entity_key(getattr(old, key)) != entity_key(getattr(new, key)):
            raise ImmutablePropertyError(f"{key} cannot change on update ({old.describe()} -> "
                                         f"{getattr(new, key)!r}); create a new entity instead")
    for key in sorted(type(old).FIXED_AT_CREATION):
        if getattr(old, key) != getattr(new, key):
            raise ImmutablePropertyError(
                f"{key} is fixed when {old.describe()} is created: it cannot change from "
                f"{getattr(old, key)!r} to {getattr(new, key)!r}; delete and recreate the entity")
