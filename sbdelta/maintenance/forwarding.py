"""Forwarding catch-up (FWD-2): messages a send could not move on, messages a queue or
subscription held before it forwarded, and dead letters to ``forward_dead_lettered_messages_to``
(``jobs/forward_messages.py``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import List, Optional, Sequence

from .._clock import Clock
from .._entity import EntityResolver
from .._forwarding import Moved, forward_everything
from .._namespace import Namespace
from .._store import storage_errors
from .report import Visits, message_entities

__all__ = ["ForwardReport", "Moved", "forward_messages"]


@dataclass
class ForwardReport(Visits):
    """The result of :func:`forward_messages`: one :class:`Moved` per forwarding entity."""

    _entity_type = Moved
    entities: List[Moved] = field(default_factory=list)

    def __str__(self) -> str:
        verb = "would forward" if self.dry_run else "forwarded"
        lines = [self.header("forwarding")]
        for e in self.entities:
            parts = []
            if e.forward_to:
                parts.append(f"{e.forwarded} -> {e.forward_to}")
            if e.dead_letters_to:
                parts.append(f"dead letters {e.dead_letters_forwarded} -> {e.dead_letters_to}")
            lines.append(f"  {e.entity:<30} {verb}: {', '.join(parts)}")
        t = self.totals()
        lines.append(f"  {'total':<30} {t['forwarded']} messages, "
                     f"{t['dead_letters_forwarded']} dead letters")
        return "\n".join(lines)


@storage_errors("the forwarding job")  # issue 18: a storage failure as its sbdelta error
def forward_messages(namespace: str, *, entities: Optional[Sequence[str]] = None,
                     clock: Optional[Clock] = None, dry_run: bool = False,
                     spark=None) -> ForwardReport:
    """Move every message waiting in a forwarding queue or subscription (or only in
    ``entities``) to its ``forward_to`` destination, and every dead letter of an entity with
    ``forward_dead_lettered_messages_to`` to that one; onward along chains (at most 4 hops,
    FWD-3). Safe to run while senders and other copies of the job run: each message arrives
    once. Messages locked by a receiver (taken before forwarding was switched on) wait for
    their lock to end. A dry run lists the forwarding entities and moves nothing.
    """
    started = time.monotonic()
    ns = Namespace(namespace, spark=spark, clock=clock)
    resolver = EntityResolver(ns)
    report = ForwardReport(dry_run=dry_run)
    sources = [e for e in message_entities(ns, resolver, entities)
               if getattr(e.properties, "forward_to", None)
               or getattr(e.properties, "forward_dead_lettered_messages_to", None)]
    if dry_run:
        report.entities = [Moved(e.name, getattr(e.properties, "forward_to", None), 0,
                                 getattr(e.properties, "forward_dead_lettered_messages_to",
                                         None)) for e in sources]
    else:
        report.entities = forward_everything(resolver, sources, ns.clock.now())
    report.seconds = time.monotonic() - started
    return report
