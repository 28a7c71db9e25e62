"""The syphon (PAIR-7, PAIR-8): backlog messages moved home to the primary namespace.

:class:`Syphon` finds the backlog queues of one primary in a secondary namespace
(``<primary identity>/x-servicebus-transfer/<i>``) and moves every message in them to the entity
its ``x-ms-path`` names, with the session id, time to live and scheduled time restored
(:func:`.backlog.restored_rows`). Per backlog queue and range: one read, one commit per
destination, one settle commit; killed anywhere and run again, it loses nothing and delivers
nothing twice (:mod:`sbdelta._store.syphon`).

A message whose destination is missing, or would refuse it (a session entity's message without
a session id, too large) goes to the backlog queue's dead-letter queue with the reason; one
that is not a backlog message at all (no ``x-ms-path``) too. A destination disabled for
sending is an outage (PAIR-3 counts it as a fault): its messages wait, and so does everything
behind the first of them in its backlog queue, until it takes messages again. A destination
that is a queue forwarding elsewhere gets its messages where a send would put them (the end of
its ``forward_to`` chain); a topic's forwarding subscriptions move their share on at once.

Run it as ``jobs/syphon.py`` (a drain, or ``--follow``), or let a paired client run one
(``PairedNamespaceOptions(enable_syphon=True)``): :class:`SyphonThread`, stopped within 5
seconds when the client closes (PAIR-8).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .._entity import EntityResolver
from .._forwarding import continues, forward_after_send, route
from .._names import entity_name_list
from .._namespace import Namespace
from .._connect import is_connect
from .._store import (SyphonHold, SyphonMoved, SyphonProgress, SyphonRefusal, SyphonTarget,
                      move_backlog)
from ..exceptions import (ConfigurationError, InvalidEntityNameError, MessagingEntityDisabledError,
                          MessagingEntityNotFoundError, ServiceBusCommunicationError,
                          ServiceBusError)
from .backlog import restored_rows
from .options import DISABLED_CHOICES, backlog_queues_of, primary_identity

__all__ = ["Syphon", "SyphonReport", "SyphonThread", "ENTITY_NOT_FOUND_REASON",
           "ENTITY_DISABLED_REASON", "DISABLED_CHOICES"]

log = logging.getLogger("sbdelta.syphon")

ENTITY_NOT_FOUND_REASON = "MessagingEntityNotFound"
ENTITY_DISABLED_REASON = "MessagingEntityDisabled"


@dataclass
class SyphonReport:
    """What a syphon run moved: messages per destination, dead letters per reason."""

    backlog_queues: List[str] = field(default_factory=list)
    moved: Dict[str, int] = field(default_factory=dict)
    dead_lettered: Dict[str, int] = field(default_factory=dict)
    #: Destinations that do not take messages now (disabled): their messages, and those
    #: behind them in their backlog queue, wait for the next run.
    waiting: Dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    dry_run: bool = False

    @property
    def total_moved(self) -> int:
        return sum(self.moved.values())

    def add(self, moved) -> None:
        """Count in what a backlog queue's move (a SyphonMoved) or another run (a
        SyphonReport) moved, dead-lettered and waits for."""
        for mine, theirs in ((self.moved, moved.moved),
                             (self.dead_lettered, moved.dead_lettered)):
            for key, n in theirs.items():
                mine[key] = mine.get(key, 0) + n
        self.waiting.update(moved.waiting)

    def __str__(self) -> str:
        head = (f"syphon{' (dry run)' if self.dry_run else ''}: "
                f"{len(self.backlog_queues)} backlog queue(s), {self.total_moved} message(s) "
                f"moved, {sum(self.dead_lettered.values())} dead-lettered in "
                f"{self.seconds:.1f} s")
        lines = [head]
        lines += [f"  {n:>9} -> {path}" for path, n in sorted(self.moved.items())]
        lines += [f"  {n:>9} dead-lettered: {reason}"
                  for reason, n in sorted(self.dead_lettered.items())]
        lines += [f"  waiting for {path}: {why}" for path, why in sorted(self.waiting.items())]
        if self.dry_run:
            lines += [f"  backlog queue {name}" for name in self.backlog_queues]
        return "\n".join(lines)


class Syphon:
    """Moves the backlog queues of ``primary`` (kept in ``secondary``) to ``primary``.

    Args:
        primary: The primary namespace (folder path or URI) the messages belong to.
        secondary: The secondary namespace holding the backlog queues.
        spark: The Spark session (default: the active one, or a local one).
        clock: The broker clock (tests inject one).
        engine: As the clients' ``engine`` (default ``$SBDELTA_ENGINE``, else ``"auto"``).
        disabled: What becomes of messages for a destination that is Disabled or
            SendDisabled: ``"wait"`` (the default: PAIR-3 counts it as an outage, so its
            messages, and everything behind them in the backlog queue, wait until it takes
            messages again) or ``"dead_letter"`` (they go to the backlog queue's dead-letter
            queue with reason ``MessagingEntityDisabled``, and the rest moves on).

    Raises:
        ConfigurationError: ``disabled`` is not one of :data:`DISABLED_CHOICES`, or the
            secondary is the primary.
    """

    def __init__(self, primary: str, secondary: str, *, spark=None, clock=None,
                 engine: Optional[str] = None, disabled: str = "wait") -> None:
        if disabled not in DISABLED_CHOICES:
            raise ConfigurationError(
                f"disabled={disabled!r}: say what the syphon does with messages for a "
                f"disabled destination, one of {list(DISABLED_CHOICES)}")
        self.disabled = disabled
        self.primary = Namespace(primary, spark=spark, clock=clock, engine=engine)
        self.secondary = Namespace(secondary, spark=self.primary.spark, clock=clock,
                                   engine=self.primary.engine.name)
        if self.primary.root == self.secondary.root:
            raise ConfigurationError(
                f"the secondary namespace {secondary!r} is the primary itself: the backlog "
                "queues live in another storage location")
        self.identity = primary_identity(self.primary.root)
        self._home = EntityResolver(self.primary)
        self._away = EntityResolver(self.secondary)
        self._progress: Dict[str, SyphonProgress] = {}  # per backlog queue folder

    def backlog_queues(self) -> List[str]:
        """The primary's backlog queues in the secondary, by index (one registry read)."""
        if not self.secondary.registry.exists():
            return []
        names = [r.name for r in self.secondary.registry.all() if r.kind == "queue"]
        return backlog_queues_of(self.identity, names)

    def drain(self, *, queues: Optional[Sequence[str]] = None, dry_run: bool = False,
              stop: Callable[[], bool] = lambda: False) -> SyphonReport:
        """Move everything the backlog queues hold now (``queues``: only these); a dry run
        lists the backlog queues and moves nothing. ``stop`` is asked between ranges."""
        started = time.monotonic()
        queues = entity_name_list(queues, what="queues")
        found = self.backlog_queues()
        if queues:
            wanted = {q.casefold() for q in queues}
            unknown = sorted(wanted - {q.casefold() for q in found})
            if unknown:
                raise MessagingEntityNotFoundError(
                    f"{unknown} are not backlog queues of primary {self.primary.root} in "
                    f"{self.secondary.root} (found: {found or 'none'})")
            found = [q for q in found if q.casefold() in wanted]
        report = SyphonReport(backlog_queues=found, dry_run=dry_run)
        for name in found:
            if dry_run or stop():
                continue
            report.add(self.drain_queue(name, stop=stop))
        report.seconds = time.monotonic() - started
        return report

    def drain_queue(self, name: str, *, stop: Callable[[], bool] = lambda: False
                    ) -> SyphonMoved:
        """Move one backlog queue's messages (and finish what a stopped syphon left)."""
        source = self._away.queue(name).store
        now = self.primary.clock.now()
        try:
            moved = move_backlog(source, restored_rows, self._decide, self._reopen, now,
                                 stop=stop, progress=self._progress.setdefault(
                                     source.folder, SyphonProgress()),
                                 staging=self.primary.path("_sbdelta", "staging"))
        except (MessagingEntityNotFoundError, ServiceBusCommunicationError) as exc:
            # a table or file of a destination gone (sbdelta._store.storage_fault), or the
            # destination deleted while the range moved: the next run finishes it
            raise ServiceBusCommunicationError(
                f"the syphon of backlog queue '{name}' stopped: {str(exc).strip()[:500]}. "
                "Nothing is lost: the next run finishes the range it was moving") from exc
        except ServiceBusError:
            raise
        except Exception as exc:  # noqa: BLE001 - a storage fault: said so, with what follows
            raise ServiceBusCommunicationError(
                f"the syphon of backlog queue '{name}' stopped: {str(exc).strip()[:500]}. "
                "Nothing is lost: the next run finishes the range it was moving") from exc
        for path in moved.moved:  # a topic's forwarding subscriptions move their share on
            target = self._target(path)
            if target is not None and continues(self._home, target):
                forward_after_send(self._home, target, now)
        return moved

    # -- destinations --------------------------------------------------------------------------
    def _target(self, path: str):
        try:
            return route(self._home, self._home.queue_or_topic(path)).target
        except (MessagingEntityNotFoundError, InvalidEntityNameError):
            return None

    def _decide(self, paths: List[str]) -> Dict[str, object]:
        """Each destination path as a send to it would go now (FWD-2: the end of a queue's
        forwarding chain), or why it cannot take messages."""
        decisions: Dict[str, object] = {}
        for path in paths:
            try:
                entity = self._home.queue_or_topic(path)
                entity.check_send()
            except (MessagingEntityNotFoundError, InvalidEntityNameError) as exc:
                decisions[path] = SyphonRefusal(ENTITY_NOT_FOUND_REASON, str(exc))
                continue
            except MessagingEntityDisabledError as exc:  # an outage, or paused: wait
                decisions[path] = self._disabled(str(exc))
                continue
            way = route(self._home, entity)
            cap = way.ttl_cap
            decisions[path] = SyphonTarget(
                folder=way.target.store.folder, partitions=way.target.store.partitions,
                max_size=way.max_message_size, requires_session=way.requires_session,
                key_by_message_id=way.requires_duplicate_detection,
                ttl_cap_ms=None if cap is None else int(cap / timedelta(milliseconds=1)),
                hops=way.hops)
        return decisions

    def _reopen(self, path: str, target: SyphonTarget) -> Tuple[Optional[object], object]:
        """The decided target again: its store, and why it refuses messages now (if it does:
        a Refusal when it is gone, a Hold while it is disabled)."""
        gone = SyphonRefusal(ENTITY_NOT_FOUND_REASON,
                             f"the destination '{path}' was deleted before the syphon could "
                             "move the message")
        entity = self._target(path)
        if entity is None or entity.store.folder != target.folder:
            return None, gone
        try:
            self._home.queue_or_topic(path).check_send()
            entity.check_send()
        except MessagingEntityDisabledError as exc:
            why = self._disabled(str(exc))
            return (entity.store if isinstance(why, SyphonHold) else None), why
        return entity.store, None

    def _disabled(self, description: str):
        """A disabled destination's decision: wait for it, or dead-letter its messages."""
        if self.disabled == "dead_letter":
            return SyphonRefusal(ENTITY_DISABLED_REASON, description)
        return SyphonHold(ENTITY_DISABLED_REASON, description)


class SyphonThread:
    """A paired client's own syphon (``enable_syphon=True``): drains the backlog queues every
    ``poll_seconds`` in a daemon thread until :meth:`stop`, which returns within 5 seconds
    (PAIR-8): a Spark job in flight is cancelled (its commit either landed or did not; the
    next syphon finishes what it marked)."""

    STOP_WITHIN = 5.0

    def __init__(self, syphon: Syphon, *, poll_seconds: float = 5.0) -> None:
        self.syphon = syphon
        self.poll_seconds = poll_seconds
        self.report = SyphonReport()
        self.last_error: Optional[BaseException] = None
        self._stop = threading.Event()
        self._group = f"sbdelta-syphon-{uuid.uuid4().hex[:12]}"
        self._thread = threading.Thread(target=self._run, name=self._group, daemon=True)
        self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        spark = self.syphon.primary.spark
        if is_connect(spark):  # this thread's operations carry the tag (stop interrupts it)
            spark.addTag(self._group)
        else:
            spark.sparkContext.setJobGroup(self._group, "sbdelta syphon",
                                           interruptOnCancel=True)
        while not self._stop.is_set():
            try:
                self.report.add(self.syphon.drain(stop=self._stop.is_set))
                self.last_error = None
            except Exception as exc:  # noqa: BLE001 - logged; the next poll tries again
                if self._stop.is_set():
                    break
                self.last_error = exc
                log.warning("syphon pass failed (tried again in %.0f s): %s",
                            self.poll_seconds, exc)
            self._stop.wait(self.poll_seconds)

    def stop(self) -> None:
        """Stop the syphon; returns within :attr:`STOP_WITHIN` seconds (PAIR-8)."""
        self._stop.set()
        self._thread.join(timeout=1.0)
        if self._thread.is_alive():
            spark = self.syphon.primary.spark
            if is_connect(spark):
                spark.interruptTag(self._group)
            else:
                spark.sparkContext.cancelJobGroup(self._group)
            self._thread.join(timeout=self.STOP_WITHIN - 1.0)
