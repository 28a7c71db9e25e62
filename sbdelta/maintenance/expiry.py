"""The expiry sweep: expired messages and messages at their delivery limit, dead-lettered or
dropped, on every partition of every queue (``jobs/expire_messages.py``)."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import List, Optional, Sequence

from .._clock import Clock
from .._entity import EntityResolver
from .._namespace import Namespace
from .._store import DEFAULT_SWEEP_BATCH, storage_errors
from ..exceptions import ServiceBusInvalidOperationError
from .report import Visits, message_entities

__all__ = ["ExpiryReport", "EntityExpiry", "expire_messages", "DEFAULT_SWEEP_BATCH"]


@dataclass
class EntityExpiry:
    """What the sweep found (and, unless a dry run, handled) on one entity."""

    entity: str
    expired_dead_lettered: int = 0
    expired_dropped: int = 0
    max_delivery_dead_lettered: int = 0
    unfinished_moves: int = 0
    #: Never-received messages a subscription refuses (a topic message without a session id
    #: on a session subscription, a filter that failed to evaluate), dead-lettered.
    refused_dead_lettered: int = 0

    @property
    def total(self) -> int:
        """Every message the sweep handled on this entity."""
        return (self.expired_dead_lettered + self.expired_dropped
                + self.max_delivery_dead_lettered + self.unfinished_moves
                + self.refused_dead_lettered)


@dataclass
class ExpiryReport(Visits):
    """The result of :func:`expire_messages`."""

    _entity_type = EntityExpiry
    entities: List[EntityExpiry] = field(default_factory=list)

    def __str__(self) -> str:
        verb = "would handle" if self.dry_run else "handled"
        lines = [self.header("expiry sweep")]
        for e in self.entities:
            lines.append(
                f"  {e.entity:<30} {verb}: expired->DLQ {e.expired_dead_lettered}, "
                f"expired dropped {e.expired_dropped}, max-delivery->DLQ "
                f"{e.max_delivery_dead_lettered}, unfinished DLQ moves {e.unfinished_moves}, "
                f"refused->DLQ {e.refused_dead_lettered}")
        t = self.totals()
        lines.append(f"  {'total':<30} expired->DLQ {t['expired_dead_lettered']}, expired "
                     f"dropped {t['expired_dropped']}, max-delivery->DLQ "
                     f"{t['max_delivery_dead_lettered']}, unfinished DLQ moves "
                     f"{t['unfinished_moves']}, refused->DLQ {t['refused_dead_lettered']}")
        return "\n".join(lines)


@storage_errors("the expiry sweep")  # issue 18: a storage failure as its sbdelta error
def expire_messages(namespace: str, *, entities: Optional[Sequence[str]] = None,
                    clock: Optional[Clock] = None, dry_run: bool = False,
                    batch_size: int = DEFAULT_SWEEP_BATCH, spark=None) -> ExpiryReport:
    """Dead-letter or drop expired messages and messages past their delivery limit.

    Visits every queue and subscription (or only ``entities``), every partition, in batches of at most
    ``batch_size`` messages until nothing is left. Expired messages move to the dead-letter
    queue with ``TTLExpiredException`` when the queue dead-letters on expiration, else they are
    dropped (TTL-6), whether or not they were ever received; ones at ``max_delivery_count``
    move with ``MaxDeliveryCountExceeded`` (RECV-5); dead-letter moves a crash left half done
    are finished. Topic messages a subscription refuses and nobody received yet (without a
    session id on a session subscription, SESS-1; a filter that failed to evaluate where the
    subscription dead-letters on it) move to its dead-letter queue with their reason. Messages still locked are left alone (TTL-5). The report counts what was
    committed (a dry run: what was found).
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ServiceBusInvalidOperationError(
            f"batch_size must be an integer >= 1, got {batch_size!r}")
    started = time.monotonic()
    ns = Namespace(namespace, spark=spark, clock=clock)
    resolver = EntityResolver(ns)
    report = ExpiryReport(dry_run=dry_run)
    for entity in message_entities(ns, resolver, entities):
        counts = entity.store.sweep(entity.policy, ns.clock.now(), batch=batch_size,
                                    dry_run=dry_run)
        report.entities.append(EntityExpiry(entity.name, **dataclasses.asdict(counts)))
    report.seconds = time.monotonic() - started
    return report
