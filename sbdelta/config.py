"""Namespace configuration files, in the format of the Azure Service Bus emulator's Config.json.

A file declares queues, topics, subscriptions and rules under
``UserConfig.Namespaces[i]``; property names are the emulator's PascalCase ones (``LockDuration``,
``MaxDeliveryCount``...), extended with the Service Bus properties the emulator lacks
(``AutoDeleteOnIdle``, ``EnablePartitioning``, ``MaxSizeInMegabytes``,
``MaxMessageSizeInKilobytes``, ``EnableBatchedOperations``, ``Status``, ``UserMetadata``,
``DeadLetteringOnFilterEvaluationExceptions``) and with the rule filter types ``True`` and
``False``. ``//`` and ``/* */`` comments are allowed (the file is read as JSON5).

Every error names its place in the document, for example
``UserConfig.Namespaces[0].Queues[1].Properties.LockDuration: ...``.
"""

from __future__ import annotations

import difflib
import os
import re
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import json5

from sbdelta._names import entity_key, validate_entity_name
from sbdelta.exceptions import (
    ConfigurationError,
    InvalidEntityNameError,
    InvalidPropertyError,
    ServiceBusError,
)
from sbdelta._properties import (
    CorrelationRuleFilter,
    FalseRuleFilter,
    QueueProperties,
    RuleProperties,
    SqlRuleAction,
    SqlRuleFilter,
    SubscriptionProperties,
    TopicProperties,
    TrueRuleFilter,
)

__all__ = ["NamespaceConfig", "TopicConfig", "SubscriptionConfig", "load_config", "loads_config",
           "dump_config"]

ConfigSource = Union[str, "os.PathLike[str]", Mapping[str, Any]]


@dataclass(frozen=True)
class SubscriptionConfig:
    """A subscription and the rules declared for it.

    Attributes:
        properties: The subscription's settings.
        rules: Its rules; empty when the file declares none (the admin client then adds
            ``$Default``).
    """

    properties: SubscriptionProperties
    rules: Tuple[RuleProperties, ...] = ()


@dataclass(frozen=True)
class TopicConfig:
    """A topic and its subscriptions.

    Attributes:
        properties: The topic's settings.
        subscriptions: Its subscriptions, in file order.
    """

    properties: TopicProperties
    subscriptions: Tuple[SubscriptionConfig, ...] = ()


@dataclass(frozen=True)
class NamespaceConfig:
    """Everything one namespace of a configuration file declares.

    Attributes:
        name: The namespace name.
        queues: The queues, in file order.
        topics: The topics with their subscriptions and rules, in file order.
    """

    name: str
    queues: Tuple[QueueProperties, ...] = ()
    topics: Tuple[TopicConfig, ...] = ()


# --- PascalCase property names, derived from the dataclass fields --------------------------------

_NOT_CONFIGURABLE = {"name", "topic_name", "subscription_name", "created_at_utc",
                     "updated_at_utc", "accessed_at_utc",
                     "authorization_rules", "size_in_bytes"}  # the SDK's, not kept


def _pascal(snake: str) -> str:
    return "".join(word.capitalize() for word in snake.split("_"))


def _property_names(cls: type) -> Dict[str, str]:
    """Map each configurable field's PascalCase name to the field name."""
    return {_pascal(f.name): f.name for f in fields(cls) if f.name not in _NOT_CONFIGURABLE}


_PROPERTY_NAMES = {cls: _property_names(cls)
                   for cls in (QueueProperties, TopicProperties, SubscriptionProperties)}
_CORRELATION_KEYS = {"ContentType": "content_type", "CorrelationId": "correlation_id",
                     "Label": "label", "MessageId": "message_id", "ReplyTo": "reply_to",
                     "ReplyToSessionId": "reply_to_session_id", "SessionId": "session_id",
                     "To": "to", "Properties": "properties"}
_SQL_KEYS = {"SqlExpression": "sql_expression", "Parameters": "parameters"}
_FILTER_TYPES = {"correlation": "Correlation", "sql": "Sql", "true": "True", "false": "False"}


# --- structural checks ---------------------------------------------------------------------------

def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return {str: "a string", list: "an array", dict: "an object"}.get(type(value), type(value)
                                                                       .__name__)


def _object(value: Any, loc: str, allowed: Sequence[str],
            required: Sequence[str] = ()) -> Dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigurationError(f"{loc}: expected an object, got {_json_type(value)}")
    for key in value:
        if key not in allowed:
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigurationError(f"{loc}: unknown key {key!r}{hint}; allowed keys: "
                                     f"{', '.join(allowed)}")
    for key in required:
        if key not in value:
            raise ConfigurationError(f"{loc}: missing required key {key!r}")
    return value


def _array(value: Any, loc: str) -> List[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigurationError(f"{loc}: expected an array, got {_json_type(value)}")
    return value


@contextmanager
def _at(loc: str) -> Iterator[None]:
    """Prefix property and name errors raised inside the block with the JSON location."""
    try:
        yield
    except (InvalidPropertyError, InvalidEntityNameError) as exc:
        raise type(exc)(f"{loc}: {exc.message}") from exc


class _Names:
    """Detects case-insensitive duplicates among sibling entities."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.seen: Dict[str, str] = {}

    def add(self, name: str, loc: str) -> None:
        """Record ``name`` declared at ``loc``; raise ConfigurationError if already seen."""
        first = self.seen.setdefault(entity_key(name), loc)
        if first != loc:
            raise ConfigurationError(f"{loc}: duplicate {self.what} name {name!r} (names are "
                                     f"case-insensitive); already declared at {first}")


# --- parsing -------------------------------------------------------------------------------------

def _entity(cls: type, raw: Any, loc: str, parents: Dict[str, str], extra: Sequence[str] = ()
            ) -> Tuple[Any, Dict[str, Any]]:
    """Parse ``{"Name": ..., "Properties": {...}, *extra}`` into ``cls``."""
    item = _object(raw, loc, ["Name", "Properties", *extra], required=["Name"])
    with _at(f"{loc}.Name"):
        name = cls.validate_field("name", item["Name"])
    names = _PROPERTY_NAMES[cls]
    props_loc = f"{loc}.Properties"
    raw_props = item.get("Properties")
    props = _object({} if raw_props is None else raw_props, props_loc, sorted(names))
    kwargs = {}
    for key, value in props.items():
        with _at(f"{props_loc}.{key}"):
            kwargs[names[key]] = cls.validate_field(names[key], value)
    with _at(props_loc):
        return cls(**parents, name=name, **kwargs), item


def _sql(raw: Any, loc: str, cls: type) -> Any:
    body = _object(raw, loc, list(_SQL_KEYS), required=["SqlExpression"])
    with _at(loc):
        return cls(**{_SQL_KEYS[k]: v for k, v in body.items()})


def _rule(raw: Any, loc: str, topic: str, subscription: str) -> RuleProperties:
    item = _object(raw, loc, ["Name", "Properties"], required=["Name", "Properties"])
    with _at(f"{loc}.Name"):
        name = validate_entity_name(item["Name"], kind="rule")
    ploc = f"{loc}.Properties"
    props = _object(item["Properties"], ploc, ["FilterType", "CorrelationFilter", "SqlFilter",
                                               "Action"], required=["FilterType"])
    kind = props["FilterType"]
    kind = _FILTER_TYPES.get(kind.lower()) if isinstance(kind, str) else None
    if kind is None:
        raise ConfigurationError(f"{ploc}.FilterType: {props['FilterType']!r} is not a filter "
                                 f"type; allowed: {', '.join(_FILTER_TYPES.values())}")
    wanted = {"Correlation": "CorrelationFilter", "Sql": "SqlFilter"}.get(kind)
    for key in ("CorrelationFilter", "SqlFilter"):
        if key != wanted and key in props:
            raise ConfigurationError(f"{ploc}.{key}: not allowed with FilterType {kind!r}")
    if wanted and wanted not in props:
        raise ConfigurationError(f"{ploc}: FilterType {kind!r} needs a {wanted!r} object")
    rule_filter: Any
    if kind == "Correlation":
        floc = f"{ploc}.CorrelationFilter"
        body = _object(props["CorrelationFilter"], floc, list(_CORRELATION_KEYS))
        with _at(floc):
            rule_filter = CorrelationRuleFilter(**{_CORRELATION_KEYS[k]: v
                                                   for k, v in body.items()})
    elif kind == "Sql":
        rule_filter = _sql(props["SqlFilter"], f"{ploc}.SqlFilter", SqlRuleFilter)
    else:
        rule_filter = TrueRuleFilter() if kind == "True" else FalseRuleFilter()
    action = _sql(props["Action"], f"{ploc}.Action", SqlRuleAction) if "Action" in props else None
    with _at(loc):
        return RuleProperties(topic, subscription, name, filter=rule_filter, action=action)


def _namespace(raw: Any, loc: str) -> NamespaceConfig:
    item = _object(raw, loc, ["Name", "Queues", "Topics"], required=["Name"])
    with _at(f"{loc}.Name"):
        name = validate_entity_name(item["Name"], kind="namespace")
    entities = _Names("entity")  # queues and topics share one namespace
    queues = []
    for i, raw_queue in enumerate(_array(item.get("Queues"), f"{loc}.Queues")):
        qloc = f"{loc}.Queues[{i}]"
        queue, _ = _entity(QueueProperties, raw_queue, qloc, {})
        entities.add(queue.name, qloc)
        queues.append(queue)
    topics = []
    for i, raw_topic in enumerate(_array(item.get("Topics"), f"{loc}.Topics")):
        tloc = f"{loc}.Topics[{i}]"
        topic, titem = _entity(TopicProperties, raw_topic, tloc, {}, ["Subscriptions"])
        entities.add(topic.name, tloc)
        subs, sub_names = [], _Names("subscription")
        for j, raw_sub in enumerate(_array(titem.get("Subscriptions"), f"{tloc}.Subscriptions")):
            sloc = f"{tloc}.Subscriptions[{j}]"
            sub, sitem = _entity(SubscriptionProperties, raw_sub, sloc,
                                 {"topic_name": topic.name}, ["Rules"])
            sub_names.add(sub.name, sloc)
            rules, rule_names = [], _Names("rule")
            for k, raw_rule in enumerate(_array(sitem.get("Rules"), f"{sloc}.Rules")):
                rloc = f"{sloc}.Rules[{k}]"
                rule = _rule(raw_rule, rloc, topic.name, sub.name)
                rule_names.add(rule.name, rloc)
                rules.append(rule)
            subs.append(SubscriptionConfig(sub, tuple(rules)))
        topics.append(TopicConfig(topic, tuple(subs)))
    return NamespaceConfig(name, tuple(queues), tuple(topics))


def _document(doc: Any, namespace: Optional[str]) -> NamespaceConfig:
    root = _object(doc, "(root)", ["$schema", "UserConfig"], required=["UserConfig"])
    user = _object(root["UserConfig"], "UserConfig", ["Namespaces", "Logging"],
                   required=["Namespaces"])
    if "Logging" in user:
        logging = _object(user["Logging"], "UserConfig.Logging", ["Type"])
        if not isinstance(logging.get("Type", ""), str):
            raise ConfigurationError("UserConfig.Logging.Type: expected a string")
    found = [_namespace(raw, f"UserConfig.Namespaces[{i}]")
             for i, raw in enumerate(_array(user["Namespaces"], "UserConfig.Namespaces"))]
    if not found:
        raise ConfigurationError("UserConfig.Namespaces: no namespace is declared")
    ns_names = _Names("namespace")
    for i, ns in enumerate(found):
        ns_names.add(ns.name, f"UserConfig.Namespaces[{i}]")
    declared = ", ".join(repr(ns.name) for ns in found)
    if namespace is None:
        if len(found) > 1:
            raise ConfigurationError(f"UserConfig.Namespaces: several namespaces ({declared}); "
                                     "say which one to load")
        return found[0]
    for ns in found:
        if entity_key(ns.name) == entity_key(namespace):
            return ns
    raise ConfigurationError(f"UserConfig.Namespaces: no namespace {namespace!r}; declared: "
                             f"{declared}")


def _parse_json(text: str) -> Any:
    try:
        return json5.loads(text, allow_duplicate_keys=False)
    except ValueError as exc:
        message = str(exc)
        where = re.match(r"<string>:(\d+) (.*) at column (\d+)$", message)
        if where:
            line, what, column = where.groups()
            raise ConfigurationError(f"malformed JSON at line {line}, column {column}: "
                                     f"{what}") from None
        raise ConfigurationError(f"malformed JSON: {message}") from None
    except RecursionError:
        raise ConfigurationError("malformed JSON: nested too deeply") from None


def loads_config(text: str, namespace: Optional[str] = None) -> NamespaceConfig:
    """Parse a configuration document given as text.

    Args:
        text: The JSON (or JSON5, with comments) document.
        namespace: Which namespace to return (case-insensitive); may be omitted when the
            document declares only one.

    Returns:
        The namespace's queues, topics, subscriptions and rules.

    Raises:
        ConfigurationError: Malformed JSON (with line and column), unknown or missing keys, wrong
            types, duplicate names, an unknown or ambiguous namespace.
        InvalidPropertyError: A property value out of range; the message starts with its
            location, for example ``UserConfig.Namespaces[0].Queues[1].Properties.LockDuration``.
        InvalidEntityNameError: An invalid entity name, with its location.
    """
    if not isinstance(text, str):
        raise ConfigurationError(f"expected the configuration as a str, got "
                                 f"{type(text).__name__}")
    return _document(_parse_json(text), namespace)


def load_config(source: ConfigSource, namespace: Optional[str] = None) -> NamespaceConfig:
    """Load a namespace configuration from a file or from an already parsed document.

    Args:
        source: A path to a JSON/JSON5 file (str or PathLike) or a dict holding the document.
        namespace: Which namespace to return (case-insensitive); may be omitted when the
            document declares only one.

    Returns:
        The namespace's queues, topics, subscriptions and rules.

    Raises:
        ConfigurationError: As :func:`loads_config`, plus a missing or unreadable file. Errors
            from a file start with its path.
        InvalidPropertyError: As :func:`loads_config`.
        InvalidEntityNameError: As :func:`loads_config`.
    """
    if isinstance(source, Mapping):
        return _document(dict(source), namespace)
    if not isinstance(source, (str, os.PathLike)):
        raise ConfigurationError(f"expected a file path or a dict, got {type(source).__name__}")
    path = os.fspath(source)
    try:
        with open(path, encoding="utf-8-sig") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise ConfigurationError(f"{path}: configuration file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"{path}: cannot read the configuration file: {exc}") from None
    try:
        return loads_config(text, namespace)
    except ServiceBusError as exc:
        raise type(exc)(f"{path}: {exc.message}") from exc


# --- dumping -------------------------------------------------------------------------------------

def _dump_entity(props: Any, **extra: Any) -> Dict[str, Any]:
    data = props.to_dict()
    body = {pascal: data[name] for pascal, name in _PROPERTY_NAMES[type(props)].items()
            if data[name] is not None}
    return {"Name": props.name, "Properties": body, **extra}


def _dump_sql(expr: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {"SqlExpression": expr.sql_expression}
    if expr.parameters is not None:
        out["Parameters"] = dict(expr.parameters)
    return out


def _dump_rule(rule: RuleProperties) -> Dict[str, Any]:
    flt = rule.filter
    props: Dict[str, Any]
    if isinstance(flt, CorrelationRuleFilter):
        body = {key: getattr(flt, name) for key, name in _CORRELATION_KEYS.items()
                if getattr(flt, name) is not None}
        props = {"FilterType": "Correlation", "CorrelationFilter": body}
    elif type(flt) in (TrueRuleFilter, FalseRuleFilter):
        props = {"FilterType": "True" if isinstance(flt, TrueRuleFilter) else "False"}
    else:
        props = {"FilterType": "Sql", "SqlFilter": _dump_sql(flt)}
    if rule.action is not None:
        props["Action"] = _dump_sql(rule.action)
    return {"Name": rule.name, "Properties": props}


def dump_config(config: NamespaceConfig) -> Dict[str, Any]:
    """Write a namespace configuration as a document that :func:`load_config` reads back.

    Properties that are ``None`` (unlimited durations, no forwarding, no metadata) are left out;
    timestamps are not part of the format.

    Args:
        config: The namespace to write.

    Returns:
        A JSON-safe dict in the emulator's Config.json format.
    """
    namespace = {
        "Name": config.name,
        "Queues": [_dump_entity(queue) for queue in config.queues],
        "Topics": [_dump_entity(topic.properties, Subscriptions=[
            _dump_entity(sub.properties, Rules=[_dump_rule(rule) for rule in sub.rules])
            for sub in topic.subscriptions]) for topic in config.topics],
    }
    return {"UserConfig": {"Namespaces": [namespace], "Logging": {"Type": "File"}}}
