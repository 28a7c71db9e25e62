"""Auto-forwarding along ``forward_to`` (FWD-2, FWD-3, PART-8): what moves, and when.

A send to a queue that forwards writes its messages straight into the end of the queue's
``forward_to`` chain (:func:`route`: one commit, as any send). A send to a topic whose
subscriptions forward moves their share on before it returns: per subscription, one append to
the destination and one commit on the subscription (:mod:`sbdelta._store.forward`). Either way
a message sent to a forwarding source can be received from the destination without anyone
running anything. What a send could not move (it crashed
between its commits, or the destination was missing for a moment) and what a source held
before it forwarded is moved by :func:`forward_everything`, which the maintenance job
``jobs/forward_messages.py`` runs; it also moves dead letters to
``forward_dead_lettered_messages_to``.

A message crosses at most ``MAX_HOPS`` (4) forwarding hops; where it would cross a fifth it is
dead-lettered with ``MaxTransferHopCountExceeded`` (FWD-3).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Dict, List, Optional

from ._entity import Entity, EntityResolver
from ._store import DLQ_POLICY, MAX_HOPS, Destination
from .exceptions import ServiceBusError

__all__ = ["forward_after_send", "forward_everything", "Moved", "Route", "route", "continues",
           "destination", "forwards"]

log = logging.getLogger("sbdelta.forwarding")


def forwards(entity: Entity) -> bool:
    """The queue or subscription forwards what arrives (FWD-2: it cannot be received from)."""
    return bool(getattr(entity.properties, "forward_to", None))


def destination(resolver: EntityResolver, path: str) -> Entity:
    return resolver.queue_or_topic(path)


@dataclass(frozen=True)
class Route:
    """Where a send to a queue that forwards writes: the end of its ``forward_to`` chain.

    A message sent to a queue that forwards is written straight into the entity its chain of
    queues ends at (a queue or topic that does not forward, or the queue at the hop limit), in
    the send's one commit: nothing is stored in the queues it passes, so nothing is left to
    move. It keeps what each entity on the way would have done to it: the smallest TTL cap
    (TTL-3) and size limit on the way apply.
    """

    target: Entity
    hops: int
    ttl_cap: Optional[timedelta]
    max_message_size: int

    @property
    def store(self):
        return self.target.store

    @property
    def label(self) -> str:
        return self.target.label

    @property
    def requires_duplicate_detection(self) -> bool:
        return self.target.requires_duplicate_detection

    @property
    def requires_session(self) -> bool:
        return self.target.requires_session


def route(resolver: EntityResolver, entity: Entity) -> Route:
    """The :class:`Route` of a send to ``entity`` (itself, when it does not forward). A
    destination that is missing or refuses sends ends the chain before it: the messages wait
    in the last queue that can take them, for ``jobs/forward_messages.py``."""
    here, hops = entity, 0
    caps = [entity.ttl_cap]
    size = entity.max_message_size
    while here.kind == "queue" and forwards(here) and hops < MAX_HOPS:
        try:
            there = destination(resolver, here.properties.forward_to)
            there.check_send()
        except ServiceBusError as exc:
            log.warning("%s forwards to %s, which cannot take messages now (%s); they wait in "
                        "%s", here.label, here.properties.forward_to, exc, here.label)
            break
        here, hops = there, hops + 1
        caps.append(here.ttl_cap)
        size = min(size, here.max_message_size)
    known = [c for c in caps if c is not None]
    return Route(here, hops, min(known) if known else None, size)


def continues(resolver: EntityResolver, entity: Entity) -> bool:
    """Whether messages arriving in ``entity`` move on (a queue at the hop limit that forwards,
    a topic with subscriptions that forward)."""
    if entity.kind == "topic":
        return any(forwards(sub) for sub in resolver.subscriptions(entity.ref))
    return forwards(entity)


def _as_destination(entity: Entity) -> Destination:
    return Destination(entity.store, entity.ttl_cap, entity.requires_duplicate_detection)


def _sources(resolver: EntityResolver, entity: Entity) -> List[Entity]:
    """Where a message arriving at ``entity`` is forwarded from next."""
    if entity.kind == "topic":
        return [sub for sub in resolver.subscriptions(entity.ref) if forwards(sub)]
    return [entity] if forwards(entity) else []


def forward_after_send(resolver: EntityResolver, entity: Entity, now: datetime) -> int:
    """Move what a send to ``entity`` made forwardable along its chain; returns the messages
    moved. The send has committed already: a failure here is logged, never raised (the
    messages wait in the source for the next send or the maintenance job)."""
    try:
        return _along(resolver, [entity], now)
    except Exception as exc:  # noqa: BLE001 - the send stands; the job moves the rest
        log.warning("forwarding after a send to %s stopped: %s; the messages wait in the "
                    "source for the next send or jobs/forward_messages.py", entity.label, exc)
        return 0


def _along(resolver: EntityResolver, arrivals: List[Entity], now: datetime) -> int:
    total = 0
    # Hop MAX_HOPS + 1 is where messages at the limit are dead-lettered (in _store.forward).
    for _ in range(MAX_HOPS + 1):
        reached: Dict[str, Entity] = {}
        for arrival in arrivals:
            for source in _sources(resolver, arrival):
                target = destination(resolver, source.properties.forward_to)
                moved = source.store.forward_new(_as_destination(target), source.policy,
                                                 now)
                total += moved
                if moved:
                    reached[target.store.folder] = target
        arrivals = list(reached.values())
        if not arrivals:
            break
    return total


@dataclass
class Moved:
    """What :func:`forward_everything` moved from one source."""

    entity: str
    forward_to: Optional[str] = None
    forwarded: int = 0
    dead_letters_to: Optional[str] = None
    dead_letters_forwarded: int = 0


def forward_everything(resolver: EntityResolver, sources: List[Entity],
                       now: datetime) -> List[Moved]:
    """Move everything ``sources`` hold along their forwarding: new messages, registered
    ones, dead letters (``forward_dead_lettered_messages_to``), then onward from the
    destinations that forward in turn."""
    report: Dict[str, Moved] = {}
    for source in sources:
        moved = report.setdefault(source.label, Moved(source.name))
        if forwards(source):
            target = destination(resolver, source.properties.forward_to)
            moved.forward_to = target.name
            dest = _as_destination(target)
            count = source.store.forward_new(dest, source.policy, now)
            count += source.store.forward_registered(dest, source.policy, now)
            moved.forwarded += count
            if count:
                moved.forwarded += _along(resolver, [target], now)
        dlq_target = getattr(source.properties, "forward_dead_lettered_messages_to", None)
        if dlq_target:
            target = destination(resolver, dlq_target)
            moved.dead_letters_to = target.name
            count = source.store.dead_letter_store().forward_registered(
                _as_destination(target), DLQ_POLICY, now)
            moved.dead_letters_forwarded += count
            if count:
                moved.dead_letters_forwarded += _along(resolver, [target], now)
    return list(report.values())
