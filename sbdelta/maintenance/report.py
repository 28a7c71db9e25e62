"""What every maintenance report shares, and how the jobs pick their entities."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

from .._names import EntityRef, entity_name_list


@dataclass
class Visits:
    """What every report shares: dry run or not, the entities visited (one record each), the
    sums of their counters and the run's duration."""

    dry_run: bool
    entities: list = field(default_factory=list)
    seconds: float = 0.0

    def header(self, title: str, detail: str = "") -> str:
        """The first line of the printed report."""
        mode = "dry run" if self.dry_run else "applied"
        return (f"{title} ({mode}{detail}): {self.entities_visited} entities visited in "
                f"{self.seconds:.1f}s")

    @property
    def entities_visited(self) -> int:
        return len(self.entities)

    def totals(self) -> Dict[str, int]:
        """Each counter of the per-entity records (its int fields), summed over entities."""
        kind = self._entity_type  # type: ignore[attr-defined]
        keys = [f.name for f in dataclasses.fields(kind) if f.type in (int, "int")]
        return {k: sum(getattr(e, k) for e in self.entities) for k in keys}


def message_entities(ns, resolver, names: Optional[Sequence[str]], *,
                     topics: bool = False) -> List:
    """The entities a job visits: ``names`` (queues, topics, and subscriptions named
    ``topic/Subscriptions/name``), or every one of the namespace. Queues and subscriptions hold
    messages; a topic named in ``names`` stands for its subscriptions, and is visited itself
    only when ``topics`` (its inbox is compacted on its own). Every name is resolved first, so
    an unknown one fails the job before anything changes."""
    names = entity_name_list(names, what="entities")
    rows = ns.registry.all()
    topic_names = {r.key: r.name for r in rows if r.kind == "topic"}

    def subscriptions_of(topic_key: str) -> List[EntityRef]:
        return [EntityRef.subscription(topic_names[topic_key], r.name) for r in rows
                if r.kind == "subscription" and r.parent == topic_key]

    refs: List[EntityRef] = []
    if not names:
        refs += [EntityRef.queue(r.name) for r in rows if r.kind == "queue"]
        for key in topic_names:
            refs += subscriptions_of(key) + ([EntityRef.topic_of(topic_names[key])]
                                             if topics else [])
    for name in names or ():
        sub = EntityRef.subscription_path(name)
        if sub is not None:
            refs.append(sub)
            continue
        row = next((r for r in rows if r.key == name.lower()), None)
        if row is not None and row.kind == "topic":
            refs += subscriptions_of(row.key) + ([EntityRef.topic_of(row.name)] if topics else [])
        else:
            refs.append(EntityRef.queue(name))  # resolving says what is missing
    return [resolver.resolve(ref) for ref in dict.fromkeys(refs)]
