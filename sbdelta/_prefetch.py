"""A PeekLock receiver's prefetch buffer (``prefetch_count``, as in azure-servicebus).

A receive that finds the buffer empty locks up to ``prefetch_count`` messages in its one
commit (at least the count asked for), hands out what was asked and keeps the rest, locked,
for the receives after it: a loop of ``receive_messages(1)`` then costs one lock commit per
``prefetch_count`` messages instead of one per message. As in Service Bus, a prefetched
message's lock runs from the receive that locked it, not from the call that hands it out;
one whose lock ran out in the buffer is dropped, never handed out (the broker hands it out
again, to this receiver or another). Closing the receiver abandons what it still holds, so
other receivers get those messages at once instead of after their locks run out.

ReceiveAndDelete receivers do not prefetch: a buffered message is deleted from the queue
already, and would be lost with the process.
"""

from __future__ import annotations

import logging
from collections import deque
from datetime import datetime
from typing import Deque, List

from .exceptions import ServiceBusError

__all__ = ["PrefetchBuffer", "abandon_held"]

log = logging.getLogger(__name__)


class PrefetchBuffer:
    """Locked messages a receiver holds for its next receives, in the order received."""

    def __init__(self, count: int) -> None:
        self.count = count
        self._held: Deque = deque()

    def to_lock(self, n: int) -> int:
        """How many messages a receive asked for ``n`` locks in its commit."""
        return max(n, self.count)

    def take(self, n: int, now: datetime) -> List:
        """Up to ``n`` held messages whose locks are still held at ``now``; those whose locks
        ran out are dropped."""
        out = []
        while self._held and len(out) < n:
            message = self._held.popleft()
            until = message.locked_until_utc
            if until is not None and until > now:
                out.append(message)
        return out

    def keep(self, messages: List) -> None:
        """Hold ``messages`` (locked by a receive, not handed out) for the next receives."""
        self._held.extend(messages)

    def release(self, now: datetime) -> List:
        """Every held message whose lock is still held at ``now``, the buffer emptied (a
        receiver closing)."""
        held = self.take(len(self._held), now)
        self._held.clear()
        return held


def abandon_held(receiver, held: List) -> None:
    """Abandon ``held`` (a closing receiver's prefetched messages, locks held) in one commit;
    a failure is logged, not raised (their locks run out instead, and the broker hands them
    out again then)."""
    if not held:
        return
    try:
        receiver.abandon_messages(held)
    except ServiceBusError as exc:
        log.warning("%d prefetched message(s) of %s not abandoned at close (%s): they are "
                    "received again when their locks run out", len(held),
                    receiver.entity_path, exc)
