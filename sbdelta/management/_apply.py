"""Apply a namespace config: create what is missing, update what changed, report the rest."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

from ..exceptions import MessagingEntityNotFoundError
from .._properties import check_update

__all__ = ["ApplyReport", "apply_config"]

_VOLATILE = ("created_at_utc", "updated_at_utc", "accessed_at_utc")


@dataclass
class ApplyReport:
    """What :func:`apply_config` did: one ``(kind, name, action)`` per entity.

    ``action`` is ``created``, ``updated``, ``unchanged``, ``deleted`` (a ``$Default`` rule the
    config replaced with its own rules) or ``not in config`` (left alone).
    """

    namespace: str
    entries: List[Tuple[str, str, str]] = field(default_factory=list)

    def add(self, kind: str, name: str, action: str) -> None:
        """Record that entity ``name`` of ``kind`` was ``action`` (created, updated, ...)."""
        self.entries.append((kind, name, action))

    def count(self, action: str) -> int:
        """How many entities the apply ``action``-ed (``"created"``, ``"updated"``, ...)."""
        return sum(1 for _, _, a in self.entries if a == action)

    @property
    def changed(self) -> bool:
        """Whether the apply created, updated or deleted anything."""
        return any(a in ("created", "updated", "deleted") for _, _, a in self.entries)

    def __str__(self) -> str:
        width = max([len(n) for _, n, _ in self.entries] + [4])
        lines = [f"namespace {self.namespace}"]
        lines += [f"  {kind:<12} {name:<{width}}  {action}" for kind, name, action in self.entries]
        lines.append("  " + ", ".join(f"{self.count(a)} {a}" for a in
                                      ("created", "updated", "unchanged", "deleted",
                                       "not in config")))
        return "\n".join(lines)


def _same(a, b) -> bool:
    strip = lambda p: {k: v for k, v in p.to_dict().items() if k not in _VOLATILE}  # noqa: E731
    return strip(a) == strip(b)


def _plan(getter, desired) -> Tuple[str, Optional[object]]:
    """('create', None) | ('update', current) | ('unchanged', current), checking immutables."""
    try:
        current = getter()
    except MessagingEntityNotFoundError:
        return "create", None
    check_update(current, desired)
    return ("unchanged" if _same(current, desired) else "update"), current


_FORWARD = ("forward_to", "forward_dead_lettered_messages_to")


def _check_forward_targets(admin, config) -> None:
    """Every forwarding target is a queue or topic of the config or of the namespace
    (FWD-1), checked before the first write."""
    from .._names import entity_key
    from ..exceptions import MessagingEntityNotFoundError

    sources = [(f"queue '{q.name}'", q) for q in config.queues] + [
        (f"subscription '{t.properties.name}/{s.properties.name}'", s.properties)
        for t in config.topics for s in t.subscriptions]
    if not any(_forwards(props) for _, props in sources):
        return
    known = {entity_key(q.name) for q in config.queues} | {
        entity_key(t.properties.name) for t in config.topics}
    known |= {entity_key(q.name) for q in admin.list_queues()}
    known |= {entity_key(t.name) for t in admin.list_topics()}
    for label, props in sources:
        for key in _FORWARD:
            target = getattr(props, key, None)
            if target and entity_key(target) not in known:
                raise MessagingEntityNotFoundError(
                    f"{key} of {label}: no queue or topic named {target!r} is in the config "
                    f"or in namespace {admin.namespace} (FWD-1); nothing was written")


def _forwards(props) -> bool:
    return any(getattr(props, key, None) for key in _FORWARD)


def _kwargs(props, *identity: str) -> dict:
    data = {f.name: getattr(props, f.name) for f in dataclasses.fields(props)}
    for key in (*identity, *_VOLATILE):
        data.pop(key, None)
    return data


def apply_config(admin, config, *, namespace_name: Optional[str] = None) -> ApplyReport:
    """Make ``admin``'s namespace match ``config`` (path, dict or NamespaceConfig).

    Every entity is validated and every immutable-property change detected before the first
    write, so a bad config writes nothing.
    """
    from ..config import NamespaceConfig, load_config

    if not isinstance(config, NamespaceConfig):
        config = load_config(config, namespace=namespace_name)

    _check_forward_targets(admin, config)
    steps = []  # (kind, name, action, callable)
    # Forwarding targets must exist when set (FWD-1): queues and subscriptions are created
    # without them, and get them once every entity of the config exists.
    forwarding = []
    for q in config.queues:
        action, _ = _plan(lambda q=q: admin.get_queue(q.name), q)
        if action == "create" and _forwards(q):
            forwarding.append(lambda q=q: admin.update_queue(q))
        steps.append(("queue", q.name, action, {
            "create": lambda q=q: admin.create_queue(q.name, **_kwargs(q, "name", *_FORWARD)),
            "update": lambda q=q: forwarding.append(lambda: admin.update_queue(q))
            if _forwards(q) else admin.update_queue(q)}.get(action)))
    for t in config.topics:
        tp = t.properties
        t_action, _ = _plan(lambda tp=tp: admin.get_topic(tp.name), tp)
        steps.append(("topic", tp.name, t_action, {
            "create": lambda tp=tp: admin.create_topic(tp.name, **_kwargs(tp, "name")),
            "update": lambda tp=tp: admin.update_topic(tp)}.get(t_action)))
        for s in t.subscriptions:
            sp = s.properties
            label = f"{tp.name}/{sp.name}"
            s_action = "create" if t_action == "create" else _plan(
                lambda sp=sp: admin.get_subscription(tp.name, sp.name), sp)[0]
            # A new subscription is created with its first declared rule in the same commit
            # (TOPIC-2: no moment in which the implicit $Default admits everything).
            first = s.rules[0] if s.rules and s_action == "create" else None
            if s_action == "create" and _forwards(sp):
                forwarding.append(lambda tp=tp, sp=sp: admin.update_subscription(tp.name, sp))
            steps.append(("subscription", label, s_action, {
                "create": lambda tp=tp, sp=sp, first=first: admin.create_subscription(
                    tp.name, sp.name, default_rule=first,
                    **_kwargs(sp, "name", "topic_name", *_FORWARD)),
                "update": lambda tp=tp, sp=sp: forwarding.append(
                    lambda: admin.update_subscription(tp.name, sp))
                if _forwards(sp) else admin.update_subscription(tp.name, sp)
            }.get(s_action)))
            steps += _rule_steps(admin, tp.name, sp.name, s.rules, new=s_action == "create")
    for kind, name, action, run in steps:
        if run is not None:
            run()
    for run in forwarding:
        run()
    report = ApplyReport(admin.namespace)
    for kind, name, action, _ in steps:
        report.add(kind, name, {"create": "created", "update": "updated"}.get(action, action))
    _report_extras(admin, config, report)
    return report


def _rule_steps(admin, topic: str, sub: str, rules, *, new: bool) -> list:
    from .._names import entity_key

    steps = []
    declared = {entity_key(r.name) for r in rules}
    for i, r in enumerate(rules):
        action = "create" if new else _plan(lambda r=r: admin.get_rule(topic, sub, r.name), r)[0]
        if new and i == 0:  # created with the subscription (its default_rule)
            steps.append(("rule", f"{topic}/{sub}/{r.name}", action, None))
            continue
        steps.append(("rule", f"{topic}/{sub}/{r.name}", action, {
            "create": lambda r=r: admin.create_rule(topic, sub, r.name, filter=r.filter,
                                                    action=r.action),
            "update": lambda r=r: admin.update_rule(topic, sub, r)}.get(action)))
    # Declared rules replace the implicit $Default (true filter), as in Service Bus; a new
    # subscription never had it.
    if rules and "$default" not in declared and not new:
        if any(entity_key(r.name) == "$default" for r in admin.list_rules(topic, sub)):
            steps.append(("rule", f"{topic}/{sub}/$Default", "deleted",
                          lambda: admin.delete_rule(topic, sub, "$Default")))
    return steps


def _report_extras(admin, config, report: ApplyReport) -> None:
    from .._names import entity_key

    known = {(k, entity_key(n)) for k, n, _ in report.entries}
    for q in admin.list_queues():
        if ("queue", entity_key(q.name)) not in known:
            report.add("queue", q.name, "not in config")
    for t in admin.list_topics():
        if ("topic", entity_key(t.name)) not in known:
            report.add("topic", t.name, "not in config")
