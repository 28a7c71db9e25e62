"""Batch maintenance over a namespace: the expiry sweep (more jobs follow in issue 4).

Each function takes the namespace plus keyword options, including ``clock=`` like the clients,
and returns a report object that prints as a short table. They are safe to run while senders,
receivers and other copies of the same job are active: every change is the same guarded MERGE
the receivers use, so a concurrent change makes the sweep redo its plan, never double-apply it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

from ._clock import Clock
from ._entity import EntityResolver
from ._namespace import Namespace
from ._store.messages import DEADLETTERING, MSG

__all__ = ["ExpiryReport", "EntityExpiry", "expire_messages"]


@dataclass
class EntityExpiry:
    """What the sweep found (and, unless a dry run, handled) on one entity."""

    entity: str
    expired_dead_lettered: int = 0
    expired_dropped: int = 0
    max_delivery_dead_lettered: int = 0
    unfinished_moves: int = 0

    @property
    def total(self) -> int:
        return (self.expired_dead_lettered + self.expired_dropped
                + self.max_delivery_dead_lettered + self.unfinished_moves)


@dataclass
class ExpiryReport:
    """The result of :func:`expire_messages`."""

    dry_run: bool
    entities: List[EntityExpiry] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def entities_visited(self) -> int:
        return len(self.entities)

    def totals(self) -> Dict[str, int]:
        keys = ("expired_dead_lettered", "expired_dropped", "max_delivery_dead_lettered",
                "unfinished_moves")
        return {k: sum(getattr(e, k) for e in self.entities) for k in keys}

    def __str__(self) -> str:
        verb = "would handle" if self.dry_run else "handled"
        lines = [f"expiry sweep ({'dry run' if self.dry_run else 'applied'}): "
                 f"{self.entities_visited} entities visited in {self.seconds:.1f}s"]
        for e in self.entities:
            lines.append(
                f"  {e.entity:<30} {verb}: expired->DLQ {e.expired_dead_lettered}, "
                f"expired dropped {e.expired_dropped}, max-delivery->DLQ "
                f"{e.max_delivery_dead_lettered}, unfinished DLQ moves {e.unfinished_moves}")
        t = self.totals()
        lines.append(f"  {'total':<30} expired->DLQ {t['expired_dead_lettered']}, expired "
                     f"dropped {t['expired_dropped']}, max-delivery->DLQ "
                     f"{t['max_delivery_dead_lettered']}, unfinished DLQ moves "
                     f"{t['unfinished_moves']}")
        return "\n".join(lines)


def expire_messages(namespace: str, *, entities: Optional[Sequence[str]] = None,
                    clock: Optional[Clock] = None, dry_run: bool = False,
                    spark=None) -> ExpiryReport:
    """Dead-letter or drop expired messages and messages past their delivery limit.

    Visits every queue (or only ``entities``). Handles messages the broker has taken over from
    the inbox whose lock is free or expired: expired ones move to the dead-letter queue with
    ``TTLExpiredException`` when the queue dead-letters on expiration, else they are dropped
    (TTL-6); ones at ``max_delivery_count`` move with ``MaxDeliveryCountExceeded`` (RECV-5);
    dead-letter moves a crash left half done are finished. Messages still locked are left alone
    (TTL-5). Messages never received yet stay in the inbox until a receive reaches them, which
    drops or dead-letters them then (TTL-4 lets them linger).
    """
    started = time.monotonic()
    ns = Namespace(namespace, spark=spark, clock=clock)
    resolver = EntityResolver(ns)
    names = list(entities) if entities else [r.name for r in ns.registry.list("queue")]
    report = ExpiryReport(dry_run=dry_run)
    # Resolve every name first: an unknown one fails the job before anything is changed.
    for entity in [resolver.queue(name) for name in names]:
        store, policy = entity.store, entity.policy
        now = ns.clock.now()
        _, action, expired = store._conditions(policy, now)
        over = f"delivery_count >= {policy.max_delivery_count}"
        from pyspark.sql import functions as F

        found = store.messages().where(action).agg(
            F.sum(F.expr(f"CASE WHEN state = '{DEADLETTERING}' THEN 1 ELSE 0 END")).alias("m"),
            F.sum(F.expr(f"CASE WHEN state <> '{DEADLETTERING}' AND {over} THEN 1 ELSE 0 END"))
            .alias("o"),
            F.sum(F.expr(f"CASE WHEN state <> '{DEADLETTERING}' AND NOT ({over}) "
                         f"AND {expired} THEN 1 ELSE 0 END")).alias("e")).collect()[0]
        result = EntityExpiry(entity.name, unfinished_moves=found.m or 0,
                              max_delivery_dead_lettered=found.o or 0)
        if policy.dead_letter_on_expiration:
            result.expired_dead_lettered = found.e or 0
        else:
            result.expired_dropped = found.e or 0
        if result.total and not dry_run:
            # A zero-message acquire visits exactly the partitions that need action.
            store.acquire(0, policy=policy, now=now, delete=False)
        report.entities.append(result)
    report.seconds = time.monotonic() - started
    return report
