"""FWD-1 and FWD-3 checks, made when a queue or subscription gets a forwarding target.

FWD-1: ``forward_to`` and ``forward_dead_lettered_messages_to`` name a queue or topic of the
same namespace that exists when the property is set, and not the entity itself. FWD-3: a
``forward_to`` chain that would lead back to the entity it starts from is refused where it can
be seen: following ``forward_to`` from the target (through a topic, every one of its
subscriptions that forwards) reaches the source again.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

from .._names import EntityRef, entity_key
from .._store.registry import RegistryRow
from ..exceptions import InvalidPropertyError, MessagingEntityNotFoundError

__all__ = ["check_forwarding", "FORWARD_PROPERTIES"]

FORWARD_PROPERTIES = ("forward_to", "forward_dead_lettered_messages_to")


def check_forwarding(rows: Sequence[RegistryRow], source: EntityRef, props,
                     namespace: str) -> None:
    """Raise before anything is written when ``props`` (of the queue or subscription
    ``source``) forward where FWD-1 or FWD-3 forbid.

    Raises:
        MessagingEntityNotFoundError: A target is no queue or topic of the namespace.
        InvalidPropertyError: A target is the source itself, or ``forward_to`` closes a cycle.
    """
    by_key: Dict[str, RegistryRow] = {row.key: row for row in rows}
    for prop in FORWARD_PROPERTIES:
        target = getattr(props, prop, None)
        if not target:
            continue
        row = by_key.get(entity_key(target))
        if row is None or row.kind not in ("queue", "topic"):
            raise MessagingEntityNotFoundError(
                f"{prop} of {source.label}: no queue or topic named {target!r} exists in "
                f"namespace {namespace}; create it first (FWD-1)")
        if row.key == source.key:
            raise InvalidPropertyError(
                f"{prop} of {source.label} names the {row.kind} itself; a {source.kind} "
                "forwards to another queue or topic (FWD-1)")
    target = getattr(props, "forward_to", None)
    if target:
        path = _path_back(by_key, rows, entity_key(target), source)
        if path is not None:
            names = " -> ".join([source.path] + [
                source.path if k == source.key else by_key[k].name
                if by_key[k].kind != "subscription" else _subscription_path(by_key, k)
                for k in path])
            raise InvalidPropertyError(
                f"forward_to of {source.label} would close a forwarding cycle: {names} "
                "(FWD-3); forward to an entity whose messages do not come back")


def _subscription_path(by_key: Dict[str, RegistryRow], key: str) -> str:
    row = by_key[key]
    topic = by_key.get(row.parent)
    return f"{topic.name if topic else row.parent}/Subscriptions/{row.name}"


def _next(by_key: Dict[str, RegistryRow], children: Dict[str, List[str]], key: str,
          source: str) -> List[str]:
    """Where messages arriving at ``key`` go next by ``forward_to``."""
    row = by_key.get(key)
    if row is None:
        return []
    if row.kind == "topic":
        return children.get(key, [])
    if key == source:
        return []  # its new target is being checked; the old one does not count
    target = (row.properties or {}).get("forward_to")
    return [entity_key(target)] if target else []


def _path_back(by_key: Dict[str, RegistryRow], rows: Sequence[RegistryRow], start: str,
               source_ref: EntityRef) -> Optional[List[str]]:
    """The keys from ``start`` back to the source along forwarding, or None."""
    source = source_ref.key
    children: Dict[str, List[str]] = {}
    for row in rows:
        if row.kind == "subscription" and row.parent:
            children.setdefault(row.parent, []).append(row.key)
    if source_ref.kind == "subscription" and source not in children.get(source_ref.parent, []):
        children.setdefault(source_ref.parent, []).append(source)  # being created
    stack, seen = [(start, [start])], set()
    while stack:
        key, path = stack.pop()
        if key == source:
            return path
        if key in seen:
            continue
        seen.add(key)
        for nxt in _next(by_key, children, key, source):
            stack.append((nxt, path + [nxt]))
    return None
