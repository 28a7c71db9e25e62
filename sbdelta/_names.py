"""Service Bus entity naming rules, and the safe names sbdelta uses on storage.

Queue and topic names are paths (``contoso/x-servicebus-transfer/0``); subscription and rule
names are single segments. Names are case-insensitive: ``Orders`` and ``orders`` are the same
entity, so registries key on :func:`entity_key` and storage folders on :func:`storage_key`.
Only ASCII letters and digits count as letters and digits.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import List, Optional

from sbdelta.exceptions import InvalidEntityNameError

__all__ = [
    "MAX_PATH_LENGTH",
    "MAX_NAME_LENGTH",
    "DEFAULT_RULE_NAME",
    "validate_entity_path",
    "validate_entity_name",
    "entity_name_list",
    "storage_key",
    "entity_key",
    "EntityRef",
]

MAX_PATH_LENGTH = 260
MAX_NAME_LENGTH = 50
DEFAULT_RULE_NAME = "$Default"

_PATH_CHARS = re.compile(r"[A-Za-z0-9._\-/]*")
_NAME_CHARS = re.compile(r"[A-Za-z0-9._\-]*")
_ALNUM = re.compile(r"[A-Za-z0-9]")
# Storage keys longer than this get a hash suffix, to stay under file systems' 255-byte limit.
_MAX_KEY = 200
_HASH_MARK = "~~~"  # never produced by the plain mapping (no '//', no '$$'), so keys stay distinct


def _bad(kind: str, name: object, problem: str, allowed: str) -> InvalidEntityNameError:
    return InvalidEntityNameError(f"Invalid {kind} name {name!r}: {problem}. Allowed: {allowed}.")


def _check_common(name: object, kind: str, max_len: int, chars: re.Pattern, allowed: str) -> str:
    if not isinstance(name, str):
        raise _bad(kind, name, f"expected a str, got {type(name).__name__}", allowed)
    if not 1 <= len(name) <= max_len:
        raise _bad(kind, name, f"length {len(name)} is outside 1..{max_len}", allowed)
    if not chars.fullmatch(name):
        bad = sorted({c for c in name if not chars.fullmatch(c)})
        raise _bad(kind, name, f"contains forbidden characters {''.join(bad)!r}", allowed)
    if not (_ALNUM.fullmatch(name[0]) and _ALNUM.fullmatch(name[-1])):
        raise _bad(kind, name, "must start and end with a letter or digit", allowed)
    if ".." in name:
        raise _bad(kind, name, "must not contain '..'", allowed)
    return name


def validate_entity_path(name: object, *, kind: str) -> str:
    """Check a queue or topic name (a path that may contain ``/``).

    Args:
        name: The candidate name.
        kind: What is named (``"queue"``, ``"topic"``, ``"forward_to"``...), for the message.

    Returns:
        ``name`` unchanged.

    Raises:
        InvalidEntityNameError: If ``name`` is not a str of 1..260 ASCII letters, digits, ``.``,
            ``-``, ``_`` and ``/``, starting and ending with a letter or digit, without an empty
            segment (``//``), without ``..`` and without a ``.`` segment.
    """
    allowed = (f"1..{MAX_PATH_LENGTH} characters: letters, digits, '.', '-', '_' and '/', starting "
               "and ending with a letter or digit, no empty, '.' or '..' segment")
    _check_common(name, kind, MAX_PATH_LENGTH, _PATH_CHARS, allowed)
    if "//" in name:
        raise _bad(kind, name, "contains an empty segment ('//')", allowed)
    if "." in name.split("/"):
        raise _bad(kind, name, "contains a '.' segment", allowed)
    return name


def validate_entity_name(name: object, *, kind: str) -> str:
    """Check a subscription or rule name (a single segment, no ``/``).

    Args:
        name: The candidate name.
        kind: ``"subscription"``, ``"rule"`` or similar, for the message. For ``"rule"`` the
            reserved name ``$Default`` is also accepted, in any letter case.

    Returns:
        ``name`` unchanged, except that any spelling of ``$Default`` becomes ``"$Default"``.

    Raises:
        InvalidEntityNameError: If ``name`` is not a str of 1..50 ASCII letters, digits, ``.``,
            ``-`` and ``_``, starting and ending with a letter or digit, without ``..``.
    """
    if kind == "rule" and isinstance(name, str) and name.lower() == DEFAULT_RULE_NAME.lower():
        return DEFAULT_RULE_NAME
    allowed = (f"1..{MAX_NAME_LENGTH} characters: letters, digits, '.', '-' and '_', starting and "
               "ending with a letter or digit")
    if kind == "rule":
        allowed += ", or the reserved name '$Default'"
    return _check_common(name, kind, MAX_NAME_LENGTH, _NAME_CHARS, allowed)


def entity_name_list(names: object, *, what: str) -> List[str]:
    """A job's or a call's list of entity names: ``None`` or empty for "all", one name as a
    str, or a list/tuple/set of str. Only the types are checked here (resolving an unknown
    name says what is missing).

    Raises:
        InvalidEntityNameError: ``names`` is another type, or holds something not a str.
    """
    if names is None:
        return []
    if isinstance(names, str):
        return [names]
    allowed = "a name (str), or a list of names, e.g. ['orders', 'events/Subscriptions/audit']"
    if not isinstance(names, (list, tuple, set, frozenset)):
        raise InvalidEntityNameError(
            f"{what} must be {allowed}; got {type(names).__name__} {names!r}")
    odd = [n for n in names if not isinstance(n, str)]
    if odd:
        raise InvalidEntityNameError(
            f"{what} must be {allowed}; {odd[0]!r} ({type(odd[0]).__name__}) is not a name")
    return list(names)


def storage_key(path: str) -> str:
    """Map an entity path to the single directory name that stores it.

    The path is lowercased (names are case-insensitive), ``/`` becomes ``~`` and ``$`` becomes
    ``~24`` (``~`` is not allowed in names, so distinct paths give distinct keys). Keys longer
    than 200 characters are cut and end with ``~~~`` and a SHA-256 of the full key.

    Args:
        path: A valid entity path, optionally with ``$``-prefixed segments such as
            ``orders/$DeadLetterQueue`` or ``$Default``.

    Returns:
        A name without ``/`` or ``..`` that does not start with ``.`` or ``_``.

    Raises:
        InvalidEntityNameError: If ``path`` could not map safely and injectively (``$`` inside a
            segment, ``~``, ``//``, a leading ``/``, ``..``, other forbidden characters).
    """
    if not isinstance(path, str) or not path:
        raise InvalidEntityNameError(f"Cannot make a storage key from {path!r}: expected a "
                                     "non-empty str")
    for segment in path.split("/"):
        body = segment[1:] if segment.startswith("$") else segment
        if not body or not _NAME_CHARS.fullmatch(body) or body in (".", ".."):
            raise InvalidEntityNameError(
                f"Cannot make a storage key from {path!r}: segment {segment!r} is empty or has "
                "characters other than letters, digits, '.', '-', '_' (and a leading '$')")
    key = path.lower().replace("/", "~").replace("$", "~24")
    if len(key) > _MAX_KEY:
        digest = hashlib.sha256(key.encode("ascii")).hexdigest()[:40]
        key = key[: _MAX_KEY - len(_HASH_MARK) - 40] + _HASH_MARK + digest
    if "/" in key or ".." in key or key[0] in "._":
        raise InvalidEntityNameError(f"Cannot make a storage key from {path!r}: the key {key!r} "
                                     "would be unsafe (it must not contain '/' or '..' nor "
                                     "start with '.' or '_')")
    return key


def entity_key(path: str) -> str:
    """Return the case-folded key under which an entity is registered.

    Args:
        path: An entity path or name.

    Returns:
        ``path`` in lower case (Service Bus names are case-insensitive).
    """
    return path.lower()


@dataclass(frozen=True)
class EntityRef:
    """Where an entity lives in the registry, and how messages name it.

    ``key`` is the registry key: a queue or topic is its case-folded path, a subscription
    ``<topic key>:subscriptions:<name>``, a rule ``<subscription key>:rules:<name>`` (``:`` is
    not a name character, so an entity's children are exactly the keys ``<key>:...``).
    ``path`` is the Service Bus entity path (``events/Subscriptions/audit``), ``label`` the
    phrase errors use (``subscription 'events/audit'``).
    """

    kind: str
    key: str
    name: str
    path: str
    label: str
    parent: Optional[str] = None
    parent_kind: Optional[str] = None
    topic: Optional[str] = None  # a subscription's or rule's topic path

    @classmethod
    def queue(cls, name: object) -> "EntityRef":
        name = validate_entity_path(name, kind="queue")
        return cls("queue", entity_key(name), name, name, f"queue '{name}'")

    @classmethod
    def topic_of(cls, name: object) -> "EntityRef":
        name = validate_entity_path(name, kind="topic")
        return cls("topic", entity_key(name), name, name, f"topic '{name}'")

    @classmethod
    def subscription(cls, topic_name: object, subscription_name: object) -> "EntityRef":
        topic = cls.topic_of(topic_name)
        sub = validate_entity_name(subscription_name, kind="subscription")
        return cls("subscription", f"{topic.key}:subscriptions:{entity_key(sub)}", sub,
                   f"{topic.name}/Subscriptions/{sub}", f"subscription '{topic.name}/{sub}'",
                   topic.key, "topic", topic.name)

    @classmethod
    def rule(cls, topic_name: object, subscription_name: object,
             rule_name: object) -> "EntityRef":
        sub = cls.subscription(topic_name, subscription_name)
        rule = validate_entity_name(rule_name, kind="rule")
        return cls("rule", f"{sub.key}:rules:{entity_key(rule)}", rule,
                   f"{sub.path}/Rules/{rule}", f"rule '{rule}' of {sub.label}", sub.key,
                   "subscription", sub.topic)

    @classmethod
    def subscription_path(cls, path: str) -> Optional["EntityRef"]:
        """The subscription a path ``<topic>/Subscriptions/<name>`` names, else None."""
        parts = path.rsplit("/", 2)
        if len(parts) == 3 and parts[1].lower() == "subscriptions":
            return cls.subscription(parts[0], parts[2])
        return None

    def history_key(self, unique: str) -> str:
        """Registry key of a retired version of this rule (TOPIC-2 keeps them)."""
        parent = self.key.rsplit(":rules:", 1)[0]
        return f"{parent}:history:{self.key.rsplit(':', 1)[1]}:{unique}"
