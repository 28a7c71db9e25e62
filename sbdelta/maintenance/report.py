"""What every maintenance report shares, and how the jobs pick their queues."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence


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


def queues(ns, resolver, names: Optional[Sequence[str]]) -> List:
    """The queues a job visits: ``names``, or every queue of the namespace. Every name is
    resolved first, so an unknown one fails the job before anything changes."""
    names = list(names) if names else [r.name for r in ns.registry.list("queue")]
    return [resolver.queue(name) for name in names]
